//! The real-run driver: checks a run, lays the flows out on the target,
//! and runs them through the engine ([`run_engine`]: one thread per flow
//! submitting through [`bfq_engine::Flow`]) or, for `kernel:*` backends,
//! hands them to [`crate::kernel`].

use crate::desc::{parents_first, Backend, Dir, FlowDesc, RunConfig};
use crate::kernel::run_kernel;
use crate::pace::{cursor, gates, Acc, Pacer};
use crate::report::RunReport;
use crate::sys;
use crate::warmup;
use bfq_core::{GroupId, Settings};
use bfq_engine::{AlignedBuf, Engine, FlowOptions, Pending, ShutdownMode};
use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Lays out regions: explicit ones stay, the others share what is left
/// of the target (after the highest explicit region end) equally.
pub fn layout(flows: &[FlowDesc], target_len: u64, align: u64) -> Vec<(u64, u64)> {
    let explicit_end = flows
        .iter()
        .filter_map(|f| f.region.map(|(o, l)| o + l))
        .max()
        .unwrap_or(0);
    let n_auto = flows.iter().filter(|f| f.region.is_none()).count() as u64;
    let free = target_len.saturating_sub(explicit_end);
    let share = free.checked_div(n_auto).unwrap_or(0) / align * align;
    let mut k = 0;
    flows
        .iter()
        .map(|f| match f.region {
            Some(r) => r,
            None => {
                let r = (explicit_end.div_ceil(align) * align + k * share, share);
                k += 1;
                r
            }
        })
        .collect()
}

/// Creates a regular file of `size` bytes filled with non-zero data (so
/// reads touch real blocks, not holes).
pub fn create_filled(path: &Path, size: u64) -> io::Result<()> {
    let named =
        |e: io::Error| io::Error::new(e.kind(), format!("creating {}: {e}", path.display()));
    let f = OpenOptions::new()
        .create_new(true)
        .write(true)
        .open(path)
        .map_err(named)?;
    let fill = || -> io::Result<()> {
        let chunk: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8 | 1).collect();
        let mut off = 0;
        while off < size {
            let n = chunk.len().min((size - off) as usize);
            f.write_all_at(&chunk[..n], off)?;
            off += n as u64;
        }
        f.sync_all()
    };
    // A file that could not be filled (full filesystem) is not left behind.
    fill().map_err(|e| {
        let _ = std::fs::remove_file(path);
        named(e)
    })
}

/// Size in bytes of a regular file or block device.
pub fn target_len(path: &Path) -> io::Result<u64> {
    let f = OpenOptions::new().read(true).open(path)?;
    let m = f.metadata()?;
    if sys::is_block_device(path) {
        let mut size: u64 = 0;
        // SAFETY: BLKGETSIZE64 writes a u64.
        if unsafe { libc::ioctl(f.as_raw_fd(), 0x8008_1272, &mut size) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(size)
    } else {
        Ok(m.len())
    }
}

/// Runs `flows` against the target as `cfg` says.
pub fn run(cfg: &RunConfig, flows: &[FlowDesc]) -> io::Result<RunReport> {
    if flows.is_empty() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "no flows"));
    }
    let writes = flows.iter().any(|f| f.dir == Dir::Write);
    if writes && !cfg.allow_writes {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "the workload writes to {}: refusing without --allow-writes",
                cfg.target.display()
            ),
        ));
    }
    for f in flows {
        if f.block == 0 || f.depth == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("flow {}: block size and depth must be > 0", f.name),
            ));
        }
    }
    let is_dev = sys::is_block_device(&cfg.target);
    if is_dev {
        sys::check_not_mounted(&cfg.target)?;
    } else if !cfg.target.exists() {
        match cfg.create_size {
            Some(size) => create_filled(&cfg.target, size)?,
            None => {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!(
                        "{} does not exist (give a size to create it)",
                        cfg.target.display()
                    ),
                ))
            }
        }
    }
    let len = target_len(&cfg.target)?;
    let regions = layout(flows, len, 4096);
    for (f, r) in flows.iter().zip(&regions) {
        if r.1 < u64::from(f.block) || r.0 + r.1 > len {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "flow {}: region {}+{} does not fit the target ({len} bytes) or one block",
                    f.name, r.0, r.1
                ),
            ));
        }
    }
    if let Some(d) = cfg.warm_up {
        warmup::check(d)?;
    }
    let warm = cfg.warm_up.map(|d| (warmup::region(&regions, len), d));
    let cpu0 = process_cpu_seconds();
    let mut r = match &cfg.backend {
        Backend::Engine {
            scheduler,
            settings,
        } => run_engine(cfg, scheduler, settings, flows, &regions, warm),
        Backend::Kernel { scheduler } => {
            if cfg.trace.is_some() {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "a trace is only recorded through the engine, not with kernel:*",
                ));
            }
            sys::require_root("--scheduler kernel:*")?;
            if !is_dev {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "kernel:{scheduler} needs a block device, and {} is not one \
                         (make one with `bfq loop create FILE SIZE`)",
                        cfg.target.display()
                    ),
                ));
            }
            run_kernel(cfg, scheduler, flows, &regions, warm)
        }
    }?;
    r.cpu_seconds = process_cpu_seconds() - cpu0;
    Ok(r)
}

/// User + system CPU seconds of this process so far.
pub fn process_cpu_seconds() -> f64 {
    rusage_seconds(libc::RUSAGE_SELF)
}

/// User + system CPU seconds of this process's children that ended and
/// were waited for (e.g. a reference program such as fio).
pub fn children_cpu_seconds() -> f64 {
    rusage_seconds(libc::RUSAGE_CHILDREN)
}

fn rusage_seconds(who: libc::c_int) -> f64 {
    // SAFETY: getrusage writes into a zeroed rusage.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(who, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn run_engine(
    cfg: &RunConfig,
    scheduler: &str,
    settings: &Settings,
    flows: &[FlowDesc],
    regions: &[(u64, u64)],
    warm: Option<((u64, u64), Duration)>,
) -> io::Result<RunReport> {
    type Names = Arc<std::sync::Mutex<HashMap<u32, String>>>;
    let names: Names = Default::default();
    let trace_out = match &cfg.trace {
        Some(p) => {
            let out: Box<dyn Write + Send> = if p.as_os_str() == "-" {
                Box::new(io::stdout())
            } else {
                let f = std::fs::File::create(p)
                    .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", p.display())))?;
                Box::new(f)
            };
            let mut w = io::BufWriter::with_capacity(1 << 20, out);
            writeln!(w, "t_ns,event,flow,req,sector,sectors,op")?;
            Some(Arc::new(std::sync::Mutex::new(w)))
        }
        None => None,
    };
    let mut builder = Engine::builder(&cfg.target);
    if let Some(out) = &trace_out {
        let out = out.clone();
        let names = names.clone();
        builder = builder.trace(move |e| {
            let names = names.lock().unwrap_or_else(|p| p.into_inner());
            let name = names.get(&e.flow.0).map(String::as_str).unwrap_or("?");
            let mut w = out.lock().unwrap_or_else(|p| p.into_inner());
            let _ = writeln!(
                w,
                "{},{},{},{},{},{},{}",
                e.t,
                e.event,
                name,
                e.req,
                e.sector,
                e.sectors,
                if e.write { 'W' } else { 'R' }
            );
        });
    }
    let engine = builder
        .scheduler(scheduler)
        .settings(settings.clone())
        .queue_depth(cfg.queue_depth)
        .direct(cfg.direct)
        .writable(cfg.allow_writes)
        .service_nice(cfg.dispatcher_nice)
        .submit_mode(cfg.submit_mode)
        .private_rings(cfg.private_rings)
        .async_submit(cfg.async_submit)
        .sqpoll(cfg.sqpoll_idle_ms)
        .open()?;
    if let Some((region, d)) = warm {
        let flow = engine.flow(FlowOptions::default())?;
        names
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(flow.id().0, "warm-up".into());
        warmup::through_engine(&flow, region, d)?;
    }
    // Groups, parents first.
    let mut gids: HashMap<String, GroupId> = HashMap::new();
    for g in parents_first(&cfg.groups)? {
        let parent = match &g.parent {
            None => GroupId::ROOT,
            Some(p) => gids[p],
        };
        let id = engine.add_group(parent, g.weight)?;
        gids.insert(g.name.clone(), id);
    }
    let mut handles = Vec::new();
    for f in flows {
        let group = match &f.group {
            None => GroupId::ROOT,
            Some(g) => *gids.get(g).ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidInput, format!("unknown group {g}"))
            })?,
        };
        let mut o = FlowOptions::default()
            .prio(f.prio.class, f.prio.level)
            .group(group);
        o.spec.weight = f.weight;
        o.sync = f.sync;
        let flow = engine.flow(o)?;
        names
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(flow.id().0, f.name.clone());
        handles.push(Arc::new(flow));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let barrier = Arc::new(Barrier::new(flows.len() + 1));
    let mut threads = Vec::new();
    // The flows stay open until every thread is done (a run's flows end
    // together, as in the simulator).
    for (i, (((d, region), flow), gate)) in flows
        .iter()
        .zip(regions)
        .zip(handles.iter().cloned())
        .zip(gates(flows)?)
        .enumerate()
    {
        let d = d.clone();
        let region = *region;
        let stop = stop.clone();
        let barrier = barrier.clone();
        let duration = cfg.duration;
        let interval = cfg.series_interval;
        threads.push(std::thread::spawn(move || {
            let _ended = gate.ends.guard(i);
            let mut cur = cursor(&d, region, i as u64);
            let mut bufs: Vec<AlignedBuf> = (0..d.depth)
                .map(|_| {
                    let mut b = AlignedBuf::new(d.block as usize);
                    b.fill(i as u8 | 1);
                    b
                })
                .collect();
            barrier.wait();
            let start = gate.ends.run_start();
            let end = start + duration;
            let mut acc = Acc::new(interval);
            let mut pacer = Pacer::new(&d, start, i as u64, gate);
            // Requests in flight by slot, with their issue time and the
            // pass that issued them. The thread reaps every finished
            // request whenever it wakes, and sleeps on the oldest one only
            // when none has finished: BFQ dispatches a flow's queue in
            // sector order, so reaping only the oldest would leave
            // finished requests unreaped and the flow's depth unused,
            // while waking on every completion would cost the engine's
            // dispatcher a cross-thread wake-up each. Requests issued in
            // the same pass are not asked whether they are done (they are
            // still in the thread's plug: asking would submit them in a
            // system call of its own, where the wait that follows submits
            // and sleeps in one).
            let mut slots: Vec<Option<(Instant, Pending<AlignedBuf>, u64)>> =
                (0..d.depth).map(|_| None).collect();
            let mut pass = 0u64;
            let mut free: Vec<usize> = (0..d.depth as usize).rev().collect();
            // Takes a request's result (blocking if it is not in yet).
            let mut reap = |slot: &mut Option<(Instant, Pending<AlignedBuf>, u64)>,
                            bufs: &mut Vec<AlignedBuf>,
                            pacer: &mut Pacer| {
                let (t0, p, _) = slot.take().expect("in flight");
                let (res, b) = p.wait();
                let n = *res.as_ref().unwrap_or(&0) as u64;
                acc.record(res, t0.elapsed());
                bufs.push(b);
                pacer.after(n, &stop, end);
            };
            loop {
                pass += 1;
                while !free.is_empty() && pacer.before(&stop, end) {
                    let (off, len) = cur.next();
                    pacer.charge(len);
                    let mut b = bufs.pop().expect("a free buffer");
                    if b.len() != len as usize {
                        b = AlignedBuf::new(len as usize);
                    }
                    let p = match d.dir {
                        Dir::Read => flow.read_async(off, b),
                        Dir::Write => flow.write_async(off, b),
                    };
                    slots[free.pop().expect("a free slot")] = Some((Instant::now(), p, pass));
                }
                let mut reaped = false;
                let mut oldest: Option<(Instant, usize)> = None;
                for (k, slot) in slots.iter_mut().enumerate() {
                    let Some((t0, p, issued)) = slot else {
                        continue;
                    };
                    if *issued != pass && p.is_done() {
                        reap(slot, &mut bufs, &mut pacer);
                        free.push(k);
                        reaped = true;
                    } else if oldest.is_none_or(|(t, _)| *t0 < t) {
                        oldest = Some((*t0, k));
                    }
                }
                if reaped {
                    continue;
                }
                let Some((_, k)) = oldest else { break };
                reap(&mut slots[k], &mut bufs, &mut pacer);
                free.push(k);
            }
            (acc.report(&d, pacer.close()), start.elapsed())
        }));
    }
    barrier.wait();
    let t0 = Instant::now();
    let mut reports = Vec::new();
    for t in threads {
        let (r, _) = t
            .join()
            .map_err(|_| io::Error::other("a flow thread panicked"))?;
        reports.push(r);
    }
    let seconds = t0.elapsed().as_secs_f64();
    drop(handles);
    let internals = engine.scheduler_internals().ok();
    engine.shutdown(ShutdownMode::Cancel)?;
    if let Some(out) = trace_out {
        out.lock().unwrap_or_else(|p| p.into_inner()).flush()?;
    }
    let mut report = RunReport::of(cfg, seconds, reports);
    report.scheduler = internals;
    Ok(report)
}
