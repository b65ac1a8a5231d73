//! The real-run driver: checks a run, lays the flows out on the target,
//! and runs them through the engine ([`run_engine`]: one thread per flow
//! submitting through [`bfq_engine::Flow`], or one tokio runtime per CPU
//! with [`EngineClient::ThreadPerCore`], `crate::runtime_client`) or, for
//! `kernel:*` backends, hands them to [`crate::kernel`].

use crate::desc::{parents_first, Backend, Dir, EngineClient, FlowDesc, Pattern, RunConfig};
use crate::kernel::run_kernel;
use crate::pace::{cursor, gates, room, Acc, Cursor, Gate, Pacer};
use crate::report::{FlowReport, RunReport};
use crate::sys;
use crate::trace::{self, TraceOut};
use crate::warmup;
use bfq_core::{GroupId, Settings};
use bfq_engine::{
    wait_any, AlignedBuf, Engine, Flow, FlowOptions, IoBuf, IoBufMut, Pending, ShutdownMode,
    DEFAULT_MAX_REQUESTS,
};
use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

/// Lays out regions: explicit ones stay, the others share what is left
/// of the target (after the highest explicit region end) equally.
pub fn layout(flows: &[FlowDesc], target_len: u64, align: u64) -> Vec<(u64, u64)> {
    let explicit_end = flows
        .iter()
        .filter_map(|f| f.region.map(|(o, l)| o.saturating_add(l)))
        .max()
        .unwrap_or(0);
    let n_auto = flows.iter().filter(|f| f.region.is_none()).count() as u64;
    let free = target_len.saturating_sub(explicit_end);
    let share = free.checked_div(n_auto).unwrap_or(0) / align * align;
    let first = explicit_end.div_ceil(align).saturating_mul(align);
    let mut k = 0;
    flows
        .iter()
        .map(|f| match f.region {
            Some(r) => r,
            None => {
                let r = (first.saturating_add(k * share), share);
                k += 1;
                r
            }
        })
        .collect()
}

/// Fills files in pieces of this many bytes.
const FILL_CHUNK: usize = 1 << 20;

/// Fills of at least this many bytes say so and show their progress on
/// a terminal's stderr.
const FILL_NOTICE: u64 = 256 << 20;

/// Creates a regular file of `size` bytes filled with non-zero data (so
/// reads touch real blocks, not holes). Refuses a size its filesystem has
/// no room for; fills a temporary file beside `path` (`.NAME.part-PID`),
/// renamed to `path` only once complete and synced, so that a failed or
/// interrupted (SIGINT, SIGTERM) creation leaves nothing behind (killed,
/// the temporary file is `bfq cleanup`'s, [`crate::leftovers`]); shows its
/// progress on stderr when that is a terminal.
pub fn create_filled(path: &Path, size: u64) -> io::Result<()> {
    let named =
        |e: io::Error| io::Error::new(e.kind(), format!("creating {}: {e}", path.display()));
    if path.exists() {
        return Err(named(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "it exists",
        )));
    }
    check_room(path, size).map_err(named)?;
    let part = part_path(path).map_err(named)?;
    let f = OpenOptions::new()
        .create_new(true)
        .write(true)
        .open(&part)
        .map_err(named)?;
    // Removed by `bfq cleanup` if this process is killed while it fills.
    let _note = crate::leftovers::Note::file(&part);
    let done = fill(&f, size, path).and_then(|()| {
        drop(f);
        sys::rename_no_replace(&part, path).map_err(|e| match e.kind() {
            io::ErrorKind::AlreadyExists => io::Error::new(e.kind(), "it was created meanwhile"),
            _ => e,
        })
    });
    // A file that could not be filled (full filesystem, interrupted) is
    // not left behind.
    done.inspect_err(|_| {
        let _ = std::fs::remove_file(&part);
    })
    .map_err(named)
}

/// The temporary file beside `path` a file is written to before it is
/// renamed to `path` (`--create`'s target, made with `create_new`), so that
/// `path` appears, or replaces what was there, only complete:
/// `.NAME.part-PID`, hidden, and one per process.
fn part_path(path: &Path) -> io::Result<PathBuf> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file name"))?;
    let mut part_name = std::ffi::OsString::from(".");
    part_name.push(name);
    part_name.push(format!(".part-{}", std::process::id()));
    Ok(path.with_file_name(part_name))
}

/// Refuses to create `size` bytes at `path` when its filesystem has less
/// room than that for unprivileged users.
fn check_room(path: &Path, size: u64) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let free = sys::free_bytes(dir)?;
    if size > free {
        return Err(io::Error::new(
            io::ErrorKind::StorageFull,
            format!(
                "{} needed, but its filesystem has {} free",
                human_size(size),
                human_size(free)
            ),
        ));
    }
    Ok(())
}

/// `n` bytes, and in GiB or MiB when that is shorter to read.
fn human_size(n: u64) -> String {
    match n {
        n if n >= 1 << 30 => format!("{n} bytes ({:.1} GiB)", n as f64 / (1u64 << 30) as f64),
        n if n >= 1 << 20 => format!("{n} bytes ({:.1} MiB)", n as f64 / (1u64 << 20) as f64),
        n => format!("{n} bytes"),
    }
}

/// Writes `size` bytes of non-zero data into `f` (to become `target`) and
/// syncs it, stopping at SIGINT or SIGTERM.
fn fill(f: &std::fs::File, size: u64, target: &Path) -> io::Result<()> {
    let _signals = sys::catch_interrupts();
    let stopped = || {
        sys::interrupted().map_or(Ok(()), |sig| {
            Err(io::Error::new(
                io::ErrorKind::Interrupted,
                format!("interrupted by signal {sig}; nothing left behind"),
            ))
        })
    };
    let bar = fill_progress(size, target);
    let chunk: Vec<u8> = (0..FILL_CHUNK as u32)
        .map(|i| (i % 251) as u8 | 1)
        .collect();
    let mut off = 0;
    while off < size {
        stopped()?;
        let n = chunk.len().min((size - off) as usize);
        f.write_all_at(&chunk[..n], off)?;
        off += n as u64;
        bar.set_position(off);
    }
    bar.finish_and_clear();
    f.sync_all()?;
    stopped()
}

/// A progress bar on stderr for a fill of `size` bytes (hidden for small
/// fills, and where stderr is not a terminal).
fn fill_progress(size: u64, target: &Path) -> indicatif::ProgressBar {
    if size < FILL_NOTICE {
        return indicatif::ProgressBar::hidden();
    }
    eprintln!(
        "bfq: filling {} with {}",
        target.display(),
        human_size(size)
    );
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(size),
        indicatif::ProgressDrawTarget::stderr(),
    );
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar
}

/// Size in bytes of a regular file or block device (a directory is
/// refused).
pub fn target_len(path: &Path) -> io::Result<u64> {
    let f = OpenOptions::new().read(true).open(path)?;
    let m = f.metadata()?;
    if m.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::IsADirectory,
            format!(
                "{} is a directory (give a file or a block device)",
                path.display()
            ),
        ));
    }
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

/// The size the target of a run will have: an existing file's or block
/// device's (a regular file smaller than `create` is refused: a partial
/// file is not run on), else `create` (the size `create_filled` will give
/// it). Errors name the target.
pub fn target_size(path: &Path, create: Option<u64>) -> io::Result<u64> {
    if !path.exists() && under_dev(path) {
        // A mistyped device name: `--create` would make a regular file in
        // /dev (memory, and left behind) and measure that.
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "{}: no such device (`--create` makes regular files, not under /dev; \
                 `lsblk` lists the block devices, `bfq loop create FILE SIZE` makes one)",
                path.display()
            ),
        ));
    }
    if !path.exists() {
        return create.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "{} does not exist (give a size to create it, `--create SIZE`)",
                    path.display()
                ),
            )
        });
    }
    let len = target_len(path).map_err(|e| match e.kind() {
        io::ErrorKind::IsADirectory => e,
        io::ErrorKind::PermissionDenied if sys::is_block_device(path) => io::Error::new(
            e.kind(),
            format!(
                "{}: {e}: a block device is read and written by root or its owning group \
                 (`ls -l {0}`; run as root, e.g. with sudo)",
                path.display()
            ),
        ),
        k => io::Error::new(k, format!("{}: {e}", path.display())),
    })?;
    match create {
        Some(c) if len < c && !sys::is_block_device(path) => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} exists with {}, less than the {} to create (a partial file? \
                 remove it to create it anew)",
                path.display(),
                human_size(len),
                human_size(c)
            ),
        )),
        _ => Ok(len),
    }
}

/// Whether `path` names something in /dev (where a missing name is a
/// device that is not there, not a file to make).
fn under_dev(path: &Path) -> bool {
    std::path::absolute(path).is_ok_and(|p| p.starts_with("/dev"))
}

/// Runs `flows` against the target as `cfg` says. Everything is checked
/// before the target is created.
pub fn run(cfg: &RunConfig, flows: &[FlowDesc]) -> io::Result<RunReport> {
    check_flows(cfg, flows)?;
    if let Some(iv) = cfg.timeline {
        crate::timeline::check_interval(iv, cfg.duration)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    }
    if cfg.client == EngineClient::ThreadPerCore {
        crate::runtime_client::check(cfg, flows)?;
    }
    let is_dev = sys::is_block_device(&cfg.target);
    if let Backend::Kernel { scheduler } = &cfg.backend {
        check_kernel(cfg, scheduler, is_dev)?;
    }
    let len = target_size(&cfg.target, cfg.create_size)?;
    let existed = cfg.target.exists();
    let unit = if existed { direct_unit(cfg)? } else { None };
    let regions = layout(flows, len, unit.map_or(4096, |u| u64::from(u).max(4096)));
    check_regions(flows, &regions, len)?;
    check_alignment(cfg, flows, &regions, unit)?;
    if let Some(d) = cfg.warm_up {
        warmup::check(d)?;
    }
    prepare_target(cfg, is_dev)?;
    if !existed {
        check_alignment(cfg, flows, &regions, direct_unit(cfg)?)?;
    }
    let warm = cfg.warm_up.map(|d| (warmup::region(&regions, len), d));
    let cpu0 = process_cpu_seconds();
    let mut r = match &cfg.backend {
        Backend::Engine {
            scheduler,
            settings,
        } => run_engine(cfg, scheduler, settings, flows, &regions, warm),
        Backend::Kernel { scheduler } => run_kernel(cfg, scheduler, flows, &regions, warm),
    }?;
    r.cpu_seconds = process_cpu_seconds() - cpu0;
    Ok(r)
}

/// Refuses no flows, writes without `--allow-writes` (or over a
/// filesystem, partition table, swap area or encrypted volume without
/// `--force-overwrite`, [`crate::signature`]), a zero block size or
/// depth, and a group that is not among the run's.
fn check_flows(cfg: &RunConfig, flows: &[FlowDesc]) -> io::Result<()> {
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
    if writes && !cfg.force_overwrite && cfg.target.exists() {
        crate::signature::check_none(&cfg.target)?;
    }
    let invalid = |f: &FlowDesc, why: String| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("flow {}: {why}", f.name),
        )
    };
    for f in flows {
        if f.block == 0 || f.depth == 0 {
            return Err(invalid(f, "block size and depth must be > 0".into()));
        }
        if let Some(g) = &f.group {
            if !cfg.groups.iter().any(|x| &x.name == g) {
                return Err(invalid(f, format!("unknown group {g}")));
            }
        }
    }
    Ok(())
}

/// Refuses a mounted block device, and creates a missing regular file
/// when `cfg` gives a size ([`target_size`] refused it otherwise).
fn prepare_target(cfg: &RunConfig, is_dev: bool) -> io::Result<()> {
    if is_dev {
        sys::check_not_mounted(&cfg.target)?;
    } else if !cfg.target.exists() {
        if let Some(size) = cfg.create_size {
            create_filled(&cfg.target, size)?;
        }
    }
    Ok(())
}

/// Refuses a region that does not hold one block or ends past the
/// target's `len` bytes.
fn check_regions(flows: &[FlowDesc], regions: &[(u64, u64)], len: u64) -> io::Result<()> {
    for (f, r) in flows.iter().zip(regions) {
        if r.1 < u64::from(f.block) || r.0.checked_add(r.1).is_none_or(|end| end > len) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "flow {}: region {}+{} does not fit the target ({len} bytes) or one block",
                    f.name, r.0, r.1
                ),
            ));
        }
    }
    Ok(())
}

/// The unit of the run's direct-I/O offsets and lengths on its target
/// ([`bfq_engine::direct_io_block`]: the device's logical block size);
/// `None` for buffered runs, which may use any multiple of 512.
fn direct_unit(cfg: &RunConfig) -> io::Result<Option<u32>> {
    if !cfg.direct {
        return Ok(None);
    }
    let named = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", cfg.target.display()));
    let f = std::fs::File::open(&cfg.target).map_err(named)?;
    bfq_engine::direct_io_block(&f).map(Some).map_err(named)
}

/// Refuses a flow whose requests would not be in whole logical blocks
/// of the target (`unit` bytes, [`direct_unit`]): its block size, its
/// region's start, or a replayed request's offset or length. Through
/// `O_DIRECT` each of them would fail with `EINVAL`, so the run is
/// refused before it starts, naming the flow, the target and its block
/// size. Scenarios and `--flow` are checked against 512-byte sectors
/// when parsed; a 4096-byte device needs more.
fn check_alignment(
    cfg: &RunConfig,
    flows: &[FlowDesc],
    regions: &[(u64, u64)],
    unit: Option<u32>,
) -> io::Result<()> {
    let Some(u) = unit.map(u64::from) else {
        return Ok(());
    };
    let off = |x: u64| !x.is_multiple_of(u);
    for (f, r) in flows.iter().zip(regions) {
        let what = if off(f.block.into()) {
            format!("requests of {} bytes", f.block)
        } else if off(r.0) {
            format!("a region starting at byte {}", r.0)
        } else if let Pattern::Replay(rows) = &f.pattern {
            match rows.iter().position(|&(o, l)| off(o) || off(l.into())) {
                Some(i) => format!(
                    "replayed request {} ({} bytes at offset {})",
                    i + 1,
                    rows[i].1,
                    rows[i].0
                ),
                None => continue,
            }
        } else {
            continue;
        };
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "flow {}: {what} on {}, whose logical block size is {u} bytes: direct I/O \
                 needs offsets and lengths in whole blocks (use multiples of {u}, or \
                 buffered I/O)",
                f.name,
                cfg.target.display()
            ),
        ));
    }
    Ok(())
}

/// Refuses a kernel:* run of an unknown scheduler, with a trace, without
/// root, or on a target that is not a block device.
fn check_kernel(cfg: &RunConfig, scheduler: &str, is_dev: bool) -> io::Result<()> {
    crate::desc::check_kernel_scheduler(scheduler)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
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
    Ok(())
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

/// Flow names by engine flow id, for the trace.
type Names = Arc<Mutex<HashMap<u32, String>>>;

/// Runs the flows through the engine: one thread per flow (or the
/// runtimes of [`EngineClient::ThreadPerCore`]), started together, the
/// flows closed when every thread is done.
fn run_engine(
    cfg: &RunConfig,
    scheduler: &str,
    settings: &Settings,
    flows: &[FlowDesc],
    regions: &[(u64, u64)],
    warm: Option<((u64, u64), Duration)>,
) -> io::Result<RunReport> {
    let names: Names = Default::default();
    let (trace_out, trace_file) = trace::open(cfg)?.unzip();
    let held =
        flows.iter().map(|f| u64::from(f.depth)).sum::<u64>() + u64::from(warmup::WARM_UP_DEPTH);
    let out = (trace_out.as_ref(), &names);
    let engine = open_engine(cfg, scheduler, settings, out, held)?;
    if let Some((region, d)) = warm {
        let flow = engine.flow(FlowOptions::default())?;
        name_flow(&names, &flow, "warm-up");
        warmup::through_engine(&flow, region, d)?;
    }
    let handles = open_flows(cfg, &engine, flows, &names)?;
    let (run, timeline) = std::thread::scope(|sc| {
        let sampler = cfg
            .timeline
            .map(|iv| crate::timeline::start(sc, &engine, &handles, iv));
        let run = match cfg.client {
            EngineClient::Threads => run_threads(cfg, flows, regions, &handles),
            EngineClient::ThreadPerCore => {
                crate::runtime_client::run_runtimes(cfg, &engine, flows, regions, &handles)
            }
        };
        (run, sampler.map(|s| s.finish()).unwrap_or_default())
    });
    let (seconds, reports) = run?;
    drop(handles);
    let internals = engine.scheduler_internals().ok();
    let stats = engine.shutdown(ShutdownMode::Cancel)?;
    let mut report = RunReport::of(cfg, seconds, reports);
    // An interrupted run's trace is dropped: a file at its path keeps
    // its content.
    if let Some(out) = trace_out.filter(|_| report.interrupted.is_none()) {
        report.trace_error = trace::finish(cfg.trace.as_deref(), out, trace_file.flatten()).err();
    }
    report.scheduler = internals;
    report.engine = Some(stats);
    report.timeline = timeline;
    Ok(report)
}

/// Opens the engine on the target as `cfg` says, writing each traced
/// event to `trace_out` under its flow's name. `held`: the most
/// requests the run keeps outstanding (its flows' depths and the
/// warm-up's): the engine's bound is raised to it if the default is
/// lower, so that no request of the run is refused. An OS error names
/// the target.
fn open_engine(
    cfg: &RunConfig,
    scheduler: &str,
    settings: &Settings,
    (trace_out, names): (Option<&TraceOut>, &Names),
    held: u64,
) -> io::Result<Engine> {
    check_target_opens(cfg)?;
    let mut builder = Engine::builder(&cfg.target);
    if let Some(out) = trace_out {
        let out = out.clone();
        let names = names.clone();
        builder = builder.trace(move |e| {
            let names = names.lock().unwrap_or_else(|p| p.into_inner());
            let name = names.get(&e.flow.0).map(String::as_str).unwrap_or("?");
            let mut w = out.lock().unwrap_or_else(|p| p.into_inner());
            w.line(format_args!(
                "{},{},{},{},{},{},{}\n",
                e.t,
                e.event,
                name,
                e.req,
                e.sector,
                e.sectors,
                if e.write { 'W' } else { 'R' }
            ));
        });
    }
    builder
        .scheduler(scheduler)
        .settings(settings.clone())
        .queue_depth(cfg.queue_depth)
        .direct(cfg.direct)
        .writable(cfg.allow_writes)
        .service_nice(cfg.dispatcher_nice)
        .submit_mode(cfg.submit_mode)
        .private_rings(cfg.private_rings)
        .coop_taskrun(cfg.coop_taskrun)
        .async_submit(cfg.async_submit)
        .sqpoll(cfg.sqpoll_idle_ms)
        .max_requests(
            u32::try_from(held)
                .unwrap_or(u32::MAX)
                .max(DEFAULT_MAX_REQUESTS),
        )
        .open()
        .map_err(|e| match e.raw_os_error() {
            // The OS's error, from the engine's own set-up (rings, event
            // files, threads): the target opened above.
            Some(_) => io::Error::new(e.kind(), format!("setting up the engine: {e}")),
            None => e,
        })
}

/// Opens the target as the engine will (read, write with `allow_writes`,
/// `O_DIRECT` unless buffered), so that an error opening it names it and
/// one from the engine's own set-up is not blamed on it.
fn check_target_opens(cfg: &RunConfig) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut o = OpenOptions::new();
    o.read(true).write(cfg.allow_writes);
    if cfg.direct {
        o.custom_flags(libc::O_DIRECT);
    }
    o.open(&cfg.target)
        .map(drop)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", cfg.target.display())))
}

/// Records `flow`'s name for the trace.
fn name_flow(names: &Names, flow: &Flow, name: &str) {
    names
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(flow.id().0, name.into());
}

/// Adds the groups (parents first) and opens one engine flow per flow,
/// in its group with its class, level, weight and sync.
fn open_flows(
    cfg: &RunConfig,
    engine: &Engine,
    flows: &[FlowDesc],
    names: &Names,
) -> io::Result<Vec<Arc<Flow>>> {
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
        name_flow(names, &flow, &f.name);
        handles.push(Arc::new(flow));
    }
    Ok(handles)
}

/// Starts one thread per flow, lets them go together and waits for all
/// of them: the run's seconds and the flows' reports, in flow order.
fn run_threads(
    cfg: &RunConfig,
    flows: &[FlowDesc],
    regions: &[(u64, u64)],
    handles: &[Arc<Flow>],
) -> io::Result<(f64, Vec<FlowReport>)> {
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
        let t = FlowThread {
            i,
            d: d.clone(),
            region: *region,
            flow,
            gate,
            stop: stop.clone(),
            barrier: barrier.clone(),
            duration: cfg.duration,
            interval: cfg.series_interval,
        };
        threads.push(std::thread::spawn(move || t.run()));
    }
    // Where the caller catches SIGINT and SIGTERM (`sys::catch_interrupts`,
    // as `bench-engine fairness` does to remove its loop device), they
    // stop the flows as the run's end does, and the run fails.
    let watch = sys::watch_interrupts(stop.clone());
    barrier.wait();
    let t0 = Instant::now();
    let mut reports = Vec::new();
    for t in threads {
        let (r, _) = t
            .join()
            .map_err(|_| io::Error::other("a flow thread panicked"))?;
        reports.push(r);
    }
    drop(watch);
    interrupted_error(cfg)?;
    Ok((t0.elapsed().as_secs_f64(), reports))
}

/// A run's error once SIGINT or SIGTERM stopped its flows
/// ([`sys::watch_interrupts`]), unless `cfg` keeps what they did
/// ([`RunConfig::keep_partial`]).
pub(crate) fn interrupted_error(cfg: &RunConfig) -> io::Result<()> {
    match sys::interrupted() {
        Some(sig) if !cfg.keep_partial => Err(io::Error::new(
            io::ErrorKind::Interrupted,
            format!("interrupted by signal {sig}"),
        )),
        _ => Ok(()),
    }
}

/// What one flow's thread needs: the flow (number `i`), its region and
/// engine flow, its gate, the run's stop flag, start barrier, length
/// and series interval.
struct FlowThread {
    i: usize,
    d: FlowDesc,
    region: (u64, u64),
    flow: Arc<Flow>,
    gate: Gate,
    stop: Arc<AtomicBool>,
    barrier: Arc<Barrier>,
    duration: Duration,
    interval: Duration,
}

impl FlowThread {
    /// Fills the flow's buffers, waits at the barrier for the run to
    /// start, then drives the flow until its end: its report and how
    /// long it ran.
    fn run(self) -> (FlowReport, Duration) {
        let FlowThread {
            i,
            d,
            region,
            flow,
            gate,
            stop,
            barrier,
            duration,
            interval,
        } = self;
        let _ended = gate.ends.guard(i);
        let cur = cursor(&d, region, i as u64);
        let bufs: Vec<AlignedBuf> = (0..d.depth)
            .map(|_| {
                let mut b = AlignedBuf::new(d.block as usize);
                b.fill(i as u8 | 1);
                b
            })
            .collect();
        barrier.wait();
        let start = gate.ends.run_start();
        let mut driver = Driver {
            d: &d,
            flow: &flow,
            cur,
            acc: Acc::new(interval),
            pacer: Pacer::new(&d, start, i as u64, gate),
            stop: &stop,
            end: start + duration,
            slots: (0..d.depth).map(|_| None).collect(),
            free: (0..d.depth as usize).rev().collect(),
            bufs,
            fill: i as u8 | 1,
            pass: 0,
        };
        driver.drive();
        (driver.finish(), start.elapsed())
    }
}

/// A request's bytes: the first `len` of a flow's buffer (see
/// [`room`]), so that requests of mixed sizes reuse the flow's buffers.
pub(crate) struct ReqBuf {
    pub(crate) buf: AlignedBuf,
    pub(crate) len: usize,
}

// SAFETY: the first `len` bytes of an AlignedBuf (`len` <= its length),
// whose heap allocation does not move with the value.
unsafe impl IoBuf for ReqBuf {
    fn stable_ptr(&self) -> *const u8 {
        self.buf.stable_ptr()
    }
    fn bytes_len(&self) -> usize {
        self.len
    }
}

// SAFETY: as IoBuf; the buffer is owned exclusively.
unsafe impl IoBufMut for ReqBuf {
    fn stable_mut_ptr(&mut self) -> *mut u8 {
        self.buf.stable_mut_ptr()
    }
}

/// A request in flight: its issue time, its result to come and the pass
/// that issued it.
type InFlight = (Instant, Pending<ReqBuf>, u64);

/// A flow thread's requests in flight by slot. The thread reaps every
/// finished request whenever it wakes, and sleeps only when none has
/// finished, until any of them has ([`wait_any`]): BFQ dispatches a
/// flow's queue in sector order, not in the order it was issued, so
/// sleeping on the oldest would sleep past the others' completions and
/// leave their slots idle. Requests issued in the same pass are not asked
/// whether they are done (they are still in the thread's plug: asking
/// would submit them in a system call of its own, where the wait that
/// follows submits and sleeps in one).
struct Driver<'a> {
    d: &'a FlowDesc,
    flow: &'a Flow,
    cur: Cursor,
    acc: Acc,
    pacer: Pacer,
    stop: &'a AtomicBool,
    end: Instant,
    slots: Vec<Option<InFlight>>,
    free: Vec<usize>,
    bufs: Vec<AlignedBuf>,
    /// The byte the flow's buffers hold (what its writes write).
    fill: u8,
    pass: u64,
}

impl Driver<'_> {
    /// Issues and reaps in passes until the pacer stops issuing and
    /// nothing is in flight.
    fn drive(&mut self) {
        loop {
            self.pass += 1;
            self.issue();
            let (reaped, out) = self.reap_finished();
            if reaped {
                continue;
            }
            if !out {
                break;
            }
            wait_any(self.slots.iter().flatten().map(|(_, p, _)| p));
        }
    }

    /// Issues requests into the free slots while the pacer lets it.
    fn issue(&mut self) {
        while !self.free.is_empty() && self.pacer.before(self.stop, self.end) {
            let (off, len) = self.cur.next();
            self.pacer.charge(len);
            let mut buf = self.bufs.pop().expect("a free buffer");
            room(&mut buf, len, self.fill);
            let b = ReqBuf {
                buf,
                len: len as usize,
            };
            let p = match self.d.dir {
                Dir::Read => self.flow.read_async(off, b),
                Dir::Write => self.flow.write_async(off, b),
            };
            let k = self.free.pop().expect("a free slot");
            self.slots[k] = Some((Instant::now(), p, self.pass));
        }
    }

    /// Reaps the finished requests issued in earlier passes: whether it
    /// reaped any, and whether any is still in flight.
    fn reap_finished(&mut self) -> (bool, bool) {
        let (mut reaped, mut out) = (false, false);
        for k in 0..self.slots.len() {
            let Some((_, p, issued)) = &self.slots[k] else {
                continue;
            };
            if *issued != self.pass && p.is_done() {
                self.reap(k);
                reaped = true;
            } else {
                out = true;
            }
        }
        (reaped, out)
    }

    /// Takes slot `k`'s result (blocking if it is not in yet), records it
    /// and frees the slot.
    fn reap(&mut self, k: usize) {
        let (t0, p, _) = self.slots[k].take().expect("in flight");
        let (res, b) = p.wait();
        let n = *res.as_ref().unwrap_or(&0) as u64;
        self.acc.record(res, t0);
        self.bufs.push(b.buf);
        self.pacer.after(n, self.stop, self.end);
        self.free.push(k);
    }

    /// The flow's report.
    fn finish(self) -> FlowReport {
        let Driver {
            d, acc, mut pacer, ..
        } = self;
        acc.report(d, pacer.close())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A missing path in /dev is a device that is not there: refused,
    /// `--create` or not (it made a regular file in /dev and measured
    /// memory). Fails without the `under_dev` check in `target_size`.
    #[test]
    fn a_missing_device_is_not_created() {
        for create in [None, Some(8 << 20)] {
            let e = target_size(Path::new("/dev/bfq-rs-test-no-such-device"), create)
                .unwrap_err()
                .to_string();
            assert!(e.contains("no such device"), "{e}");
        }
        assert!(!Path::new("/dev/bfq-rs-test-no-such-device").exists());
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            target_size(&dir.path().join("new.img"), Some(8 << 20)).unwrap(),
            8 << 20
        );
    }
    use crate::desc::Pattern;
    use crate::outfile::tests::names;

    #[test]
    fn a_created_file_appears_whole_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.img");
        create_filled(&path, (1 << 20) + 512).unwrap();
        assert_eq!(names(dir.path()), ["t.img"]);
        let data = std::fs::read(&path).unwrap();
        assert_eq!(data.len(), (1 << 20) + 512);
        assert!(data.iter().all(|&b| b != 0));
        // An existing file is not overwritten.
        let e = create_filled(&path, 4096).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        // More than the filesystem holds is refused before writing.
        let huge = dir.path().join("huge.img");
        let e = create_filled(&huge, u64::MAX / 2).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::StorageFull, "{e}");
        assert!(e.to_string().contains("free"), "{e}");
        assert_eq!(names(dir.path()), ["t.img"]);
    }

    #[test]
    fn a_target_is_a_file_or_device_of_its_full_size() {
        let dir = tempfile::tempdir().unwrap();
        let e = target_size(dir.path(), None).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::IsADirectory);
        assert!(e.to_string().contains("is a directory"), "{e}");
        let missing = dir.path().join("m.img");
        assert_eq!(target_size(&missing, Some(8192)).unwrap(), 8192);
        let e = target_size(&missing, None).unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");
        // A file shorter than the size to create (an interrupted earlier
        // creation) is refused, a longer one used.
        let short = dir.path().join("s.img");
        std::fs::write(&short, [1u8; 4096]).unwrap();
        let e = target_size(&short, Some(8192)).unwrap_err();
        assert!(e.to_string().contains("less than"), "{e}");
        assert_eq!(target_size(&short, Some(1024)).unwrap(), 4096);
        assert_eq!(target_size(&short, None).unwrap(), 4096);
    }

    #[test]
    fn regions_past_the_end_do_not_wrap_round() {
        let mut f = FlowDesc::reader("a", Pattern::Seq, 4096);
        f.region = Some((u64::MAX - 511, 4096));
        let auto = FlowDesc::reader("b", Pattern::Seq, 4096);
        let flows = [f, auto];
        let regions = layout(&flows, 1 << 20, 4096);
        assert_eq!(regions[1].1, 0);
        let e = check_regions(&flows, &regions, 1 << 20).unwrap_err();
        assert!(e.to_string().starts_with("flow a: region"), "{e}");
    }

    #[test]
    fn a_flow_in_an_undeclared_group_is_refused_naming_it() {
        let mut f = FlowDesc::reader("a", Pattern::Seq, 4096);
        f.group = Some("g1".into());
        let cfg = RunConfig::new(
            "/nonexistent",
            Backend::parse("fifo", Settings::new()),
            Duration::ZERO,
        );
        let e = check_flows(&cfg, &[f]).unwrap_err();
        assert_eq!(e.to_string(), "flow a: unknown group g1");
    }

    /// The heap allocations of the calling thread driving a flow of
    /// `pattern` that reads `bytes` of `path` (1 MiB) through `engine`.
    fn allocs_of_a_flow(engine: &Engine, pattern: &Pattern, depth: u32, bytes: u64) -> u64 {
        let mut d = FlowDesc::reader("r", pattern.clone(), 4096);
        d.depth = depth;
        d.bytes = Some(bytes);
        let flow = engine.flow(FlowOptions::weight(100)).unwrap();
        let gate = gates(std::slice::from_ref(&d)).unwrap().remove(0);
        let stop = AtomicBool::new(false);
        let start = Instant::now();
        let mut driver = Driver {
            d: &d,
            flow: &flow,
            cur: cursor(&d, (0, 1 << 20), 0),
            acc: Acc::new(Duration::from_secs(3600)),
            pacer: Pacer::new(&d, start, 0, gate),
            stop: &stop,
            end: start + Duration::from_secs(3600),
            slots: (0..depth).map(|_| None).collect(),
            free: (0..depth as usize).rev().collect(),
            bufs: (0..depth).map(|_| AlignedBuf::new(4096)).collect(),
            fill: 1,
            pass: 0,
        };
        let ((), allocs) = crate::alloc_count::during(|| driver.drive());
        let r = driver.finish();
        assert_eq!((r.bytes, r.errors), (bytes, 0));
        allocs
    }

    #[test]
    fn an_engine_flows_requests_allocate_nothing_each() {
        let (_dir, path, patterns) = crate::alloc_count::file_and_patterns();
        let engine = Engine::builder(&path)
            .direct(false)
            .scheduler("fifo")
            .coop_taskrun(bfq_engine::CoopTaskrun::Off)
            .open()
            .unwrap();
        for pattern in patterns {
            for depth in [1, 4] {
                // The thread's ring and the flow's first requests take
                // what they take once; then 64 KiB, then 4 MiB.
                allocs_of_a_flow(&engine, &pattern, depth, 64 << 10);
                let few = allocs_of_a_flow(&engine, &pattern, depth, 64 << 10);
                let many = allocs_of_a_flow(&engine, &pattern, depth, 4 << 20);
                assert!(
                    many <= few + 8,
                    "{pattern:?} x{depth}: {few} allocations for 64 KiB, {many} for 4 MiB"
                );
            }
        }
        engine.shutdown(ShutdownMode::Drain).unwrap();
    }
}
