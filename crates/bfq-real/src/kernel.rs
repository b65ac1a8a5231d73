//! Real runs under the kernel's schedulers (`kernel:bfq`,
//! `kernel:mq-deadline`, `kernel:kyber`, `kernel:none`): the device's
//! scheduler is switched for the run, and each flow ([`KernelJob`])
//! submits directly to the block device (through its own io_uring ring,
//! or `pread`/`pwrite` at depth 1 with [`KernelClient::Pread`]), with its
//! I/O priority set and placed in a
//! cgroup carrying its weight: as a thread on cgroup v1 blkio, as a
//! process of its own on cgroup v2 ([`crate::flowproc`]). **This is where
//! a real run puts flows into cgroups** (`run_kernel`).

use crate::desc::{parents_first, Dir, FlowDesc, KernelClient, KernelGroups, RunConfig};
use crate::pace::{cursor, gates, room, Acc, Cursor, Gate, Pacer};
use crate::report::{FlowReport, RunReport};
use crate::sys;
use bfq_engine::AlignedBuf;
use io_uring::{opcode, types, IoUring};
use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Without a cgroup per flow (`--kernel-groups one`, or cgroup v2, which
/// puts processes, not threads, in a cgroup) the kernel's BFQ weighs each
/// flow thread by its I/O priority level, (8 - level) * 10: runs whose
/// weights are exactly that, or all equal with one priority, without
/// groups, are still faithful; others are refused.
fn levels_carry_weights(cfg: &RunConfig, flows: &[FlowDesc], why: &str) -> io::Result<()> {
    let levels = flows
        .iter()
        .all(|f| f.effective_weight() == f.prio.default_weight());
    let equal = flows
        .iter()
        .all(|f| f.effective_weight() == flows[0].effective_weight() && f.prio == flows[0].prio);
    let grouped = !cfg.groups.is_empty() || flows.iter().any(|f| f.group.is_some());
    if (levels || equal) && !grouped {
        return Ok(());
    }
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        format!(
            "{why}, so only weights that equal the I/O priority level's ((8 - level) * 10, \
             e.g. level=0 for 80), or equal weights at one priority, and no groups can be \
             given to kernel:* flows"
        ),
    ))
}

/// The cgroups of a `kernel:*` run: groups as nested cgroups carrying
/// their weights (parents first), each flow in its own cgroup inside its
/// group's (`None` for every flow with `--kernel-groups one`). Returns the
/// group cgroups (to be removed children first), each flow's cgroup, and
/// whether each flow runs as a process of its own (cgroup v2, whose io
/// controller takes processes, or `--kernel-groups per-process`) rather
/// than as a thread that joins its cgroup (cgroup v1 blkio).
type FlowCgroups = (Vec<sys::Cgroup>, Vec<Option<Arc<sys::Cgroup>>>, bool);

fn flow_cgroups(cfg: &RunConfig, scheduler: &str, flows: &[FlowDesc]) -> io::Result<FlowCgroups> {
    if cfg.kernel_groups == KernelGroups::One {
        levels_carry_weights(
            cfg,
            flows,
            "--kernel-groups one keeps every flow in one cgroup",
        )?;
        return Ok((Vec::new(), vec![None; flows.len()], false));
    }
    let layout = sys::CgroupLayout::detect();
    let Some(layout) = layout else {
        levels_carry_weights(
            cfg,
            flows,
            "no cgroup v1 blkio hierarchy and no cgroup v2 hierarchy with the io controller",
        )?;
        say_layout(None, scheduler);
        return Ok((Vec::new(), vec![None; flows.len()], false));
    };
    say_layout(Some(&layout), scheduler);
    flow_cgroups_in(
        cfg,
        &layout,
        &format!("bfq-rs-{}", std::process::id()),
        flows,
    )
}

/// Prints [`layout_line`] on stderr, once per scheduler and process (a
/// benchmark runs kernel:* many times).
fn say_layout(layout: Option<&sys::CgroupLayout>, scheduler: &str) {
    static SAID: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    if !said.iter().any(|s| s == scheduler) {
        said.push(scheduler.to_string());
        eprintln!("kernel:{scheduler}: {}", layout_line(layout, scheduler));
    }
}

/// What a `kernel:*` run says of where its flows are: the hierarchy
/// used ([`sys::CgroupLayout::describe`]), or, without one, that every
/// flow stays in the run's own cgroup (as `--kernel-groups one`: the
/// flows' weights must then be their I/O priorities').
fn layout_line(layout: Option<&sys::CgroupLayout>, scheduler: &str) -> String {
    match layout {
        Some(l) => l.describe(scheduler),
        None => "no cgroup v1 blkio hierarchy and no cgroup v2 hierarchy with the io \
                 controller: every flow stays in the run's own cgroup, as with \
                 --kernel-groups one"
            .to_string(),
    }
}

/// [`flow_cgroups`] in `layout`, the run's cgroups named from `prefix`
/// (`PREFIX-gK/.../fN` for groups and their flows, `PREFIX-N` for flows
/// of the root).
fn flow_cgroups_in(
    cfg: &RunConfig,
    layout: &sys::CgroupLayout,
    prefix: &str,
    flows: &[FlowDesc],
) -> io::Result<FlowCgroups> {
    let processes = cfg.kernel_groups == KernelGroups::PerProcess || !layout.per_thread();
    let mut group_dirs: HashMap<String, String> = HashMap::new();
    let mut group_cgs: Vec<sys::Cgroup> = Vec::new();
    for g in parents_first(&cfg.groups)? {
        let k = group_cgs.len();
        let dir = match &g.parent {
            None => format!("{prefix}-g{k}"),
            Some(p) => format!("{}/g{k}", group_dirs[p]),
        };
        group_cgs.push(sys::Cgroup::create_in(layout, &dir, g.weight)?);
        group_dirs.insert(g.name.clone(), dir);
    }
    let mut cgroups = Vec::new();
    for (i, f) in flows.iter().enumerate() {
        let dir = match &f.group {
            None => format!("{prefix}-{i}"),
            Some(g) => match group_dirs.get(g) {
                Some(d) => format!("{d}/f{i}"),
                None => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("unknown group {g}"),
                    ))
                }
            },
        };
        let cg = sys::Cgroup::create_in(layout, &dir, f.effective_weight())?;
        cgroups.push(Some(Arc::new(cg)));
    }
    Ok((group_cgs, cgroups, processes))
}

/// One flow of a `kernel:*` run as its thread, or its own process
/// ([`crate::flowproc`]), runs it.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct KernelJob {
    /// The flow.
    pub desc: FlowDesc,
    /// Its place in the run (seeds its offsets and pacing).
    pub index: usize,
    /// Its region `(offset, len)` in bytes.
    pub region: (u64, u64),
    /// The block device.
    pub target: PathBuf,
    /// `O_DIRECT`.
    pub direct: bool,
    /// Opened for writing.
    pub writable: bool,
    /// The run's length.
    pub duration: Duration,
    /// Interval of the throughput series.
    pub interval: Duration,
    /// How it issues requests at depth 1 ([`RunConfig::kernel_client`]).
    #[serde(with = "client_wire")]
    pub client: KernelClient,
}

/// A [`KernelClient`] on the pipe to a flow's process: its name.
mod client_wire {
    use crate::desc::KernelClient;
    use serde::{de, Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(c: &KernelClient, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(c.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<KernelClient, D::Error> {
        let name = String::deserialize(d)?;
        KernelClient::parse(&name)
            .ok_or_else(|| de::Error::custom(format!("client {name} is not uring or pread")))
    }
}

/// Opens the device for a kernel-side flow as the engine and fio open
/// theirs: with `O_NOATIME` where the caller may, so that reads do not
/// update the device node's access time (about 0.1 us of kernel time per
/// request), and without it where it is refused (`EPERM`).
fn open_device(
    target: &std::path::Path,
    writable: bool,
    direct: bool,
) -> io::Result<std::fs::File> {
    let mut o = OpenOptions::new();
    o.read(true).write(writable);
    let flags = if direct { libc::O_DIRECT } else { 0 };
    o.custom_flags(flags | libc::O_NOATIME)
        .open(target)
        .or_else(|e| match e.raw_os_error() {
            Some(libc::EPERM) => o.custom_flags(flags).open(target),
            _ => Err(e),
        })
}

impl KernelJob {
    /// Sets the calling thread's I/O priority and opens the device.
    pub(crate) fn open(&self) -> io::Result<std::fs::File> {
        let d = &self.desc;
        sys::ioprio_set_thread(d.prio.class, d.prio.level)?;
        open_device(&self.target, self.writable, self.direct)
    }

    /// Submits the flow's requests from the run's `start` until its end
    /// (or `stop`): through its own ring, or `pread`/`pwrite` at depth 1
    /// with [`KernelClient::Pread`].
    pub(crate) fn submit(
        &self,
        file: &std::fs::File,
        stop: &AtomicBool,
        start: Instant,
        gate: Gate,
    ) -> io::Result<FlowReport> {
        let (d, i) = (&self.desc, self.index);
        let end = start + self.duration;
        let mut pacer = Pacer::new(d, start, i as u64, gate);
        let mut cur = cursor(d, self.region, i as u64);
        let mut acc = Acc::new(self.interval);
        if d.depth <= 1 && self.client == KernelClient::Pread {
            let mut b = AlignedBuf::new(d.block as usize);
            b.fill(i as u8 | 1);
            while pacer.before(stop, end) {
                let (off, len) = cur.next();
                pacer.charge(len);
                room(&mut b, len, i as u8 | 1);
                let b = &mut b[..len as usize];
                let t0 = Instant::now();
                let res = match d.dir {
                    Dir::Read => file.read_at(b, off),
                    Dir::Write => file.write_at(b, off),
                };
                let n = *res.as_ref().unwrap_or(&0) as u64;
                acc.record(res, t0);
                pacer.after(n, stop, end);
            }
        } else {
            kernel_ring_loop(file, d, &mut cur, &mut pacer, &mut acc, stop, end)?;
        }
        Ok(acc.report(d, pacer.close()))
    }
}

/// The run's jobs, one per flow.
fn jobs(cfg: &RunConfig, flows: &[FlowDesc], regions: &[(u64, u64)]) -> Vec<KernelJob> {
    flows
        .iter()
        .zip(regions)
        .enumerate()
        .map(|(index, (d, region))| KernelJob {
            desc: d.clone(),
            index,
            region: *region,
            target: cfg.target.clone(),
            direct: cfg.direct,
            writable: cfg.allow_writes,
            duration: cfg.duration,
            interval: cfg.series_interval,
            client: cfg.kernel_client,
        })
        .collect()
}

/// Each flow as a thread in its cgroup (if any).
fn run_threads(
    jobs: Vec<KernelJob>,
    cgroups: &[Option<Arc<sys::Cgroup>>],
    gates: Vec<Gate>,
    stop: &Arc<AtomicBool>,
) -> Vec<std::thread::JoinHandle<io::Result<FlowReport>>> {
    let barrier = Arc::new(Barrier::new(jobs.len() + 1));
    let mut threads = Vec::new();
    for ((job, gate), cg) in jobs.into_iter().zip(gates).zip(cgroups.iter().cloned()) {
        let (stop, barrier) = (stop.clone(), barrier.clone());
        threads.push(std::thread::spawn(move || -> io::Result<FlowReport> {
            let _ended = gate.ends.guard(job.index);
            let setup = (|| -> io::Result<_> {
                if let Some(cg) = &cg {
                    cg.join()?;
                }
                job.open()
            })();
            barrier.wait();
            let file = setup?;
            let start = gate.ends.run_start();
            job.submit(&file, &stop, start, gate)
        }));
    }
    barrier.wait();
    threads
}

pub(crate) fn run_kernel(
    cfg: &RunConfig,
    scheduler: &str,
    flows: &[FlowDesc],
    regions: &[(u64, u64)],
    warm: Option<((u64, u64), Duration)>,
) -> io::Result<RunReport> {
    // SIGINT/SIGTERM stop the run; the guards below then put the device's
    // scheduler back and remove the cgroups before the process exits.
    let _signals = sys::catch_interrupts();
    let _sched = sys::SchedulerGuard::set(&cfg.target, scheduler)?;
    if let Some((region, d)) = warm {
        warm_up(cfg, region, d)?;
    }
    let (mut group_cgs, cgroups, processes) = flow_cgroups(cfg, scheduler, flows)?;
    let gates = gates(flows)?;
    let stop = Arc::new(AtomicBool::new(false));
    let jobs = jobs(cfg, flows, regions);
    let watch = sys::watch_interrupts(stop.clone());
    let (t0, results) = if processes {
        let deps = gates.into_iter().map(|g| g.deps).collect();
        crate::flowproc::run_processes(jobs, &cgroups, deps, &stop)?
    } else {
        let threads = run_threads(jobs, &cgroups, gates, &stop);
        let t0 = Instant::now();
        let joined = threads.into_iter().map(|t| {
            t.join()
                .unwrap_or_else(|_| Err(io::Error::other("a flow thread panicked")))
        });
        (t0, joined.collect::<Vec<_>>())
    };
    let mut reports = Vec::new();
    let mut err = None;
    for r in results {
        match r {
            Ok(r) => reports.push(r),
            Err(e) => err = Some(e),
        }
    }
    let seconds = t0.elapsed().as_secs_f64();
    drop(watch);
    drop(cgroups);
    while let Some(g) = group_cgs.pop() {
        drop(g);
    }
    if let Some(sig) = sys::interrupted().filter(|_| !cfg.keep_partial) {
        return Err(io::Error::new(
            io::ErrorKind::Interrupted,
            format!(
                "interrupted by signal {sig}: the run's cgroups were removed and {}'s \
                 scheduler put back",
                cfg.target.display()
            ),
        ));
    }
    if let Some(e) = err {
        return Err(e);
    }
    Ok(RunReport::of(cfg, seconds, reports))
}

/// The warm-up reader ([`crate::warmup`]) under the device's scheduler:
/// a sequential reader of the run's own thread, through its own ring.
fn warm_up(cfg: &RunConfig, region: (u64, u64), d: Duration) -> io::Result<()> {
    use crate::warmup::{WARM_UP_BLOCK, WARM_UP_DEPTH};
    let mut desc = FlowDesc::reader("warm-up", crate::desc::Pattern::Seq, WARM_UP_BLOCK as u32);
    desc.depth = WARM_UP_DEPTH;
    let gate = gates(std::slice::from_ref(&desc))?.remove(0);
    let file = open_device(&cfg.target, false, cfg.direct)?;
    let stop = Arc::new(AtomicBool::new(false));
    let _watch = sys::watch_interrupts(stop.clone());
    let start = Instant::now();
    let mut pacer = Pacer::new(&desc, start, 0, gate);
    let mut cur = cursor(&desc, region, 0);
    let mut acc = Acc::new(cfg.series_interval);
    kernel_ring_loop(
        &file,
        &desc,
        &mut cur,
        &mut pacer,
        &mut acc,
        &stop,
        start + d,
    )
}

/// A flow's own io_uring ring with `depth` requests outstanding.
fn kernel_ring_loop(
    file: &std::fs::File,
    d: &FlowDesc,
    cur: &mut Cursor,
    pacer: &mut Pacer,
    acc: &mut Acc,
    stop: &AtomicBool,
    end: Instant,
) -> io::Result<()> {
    let depth = d.depth as usize;
    let mut ring = IoUring::new((depth as u32).next_power_of_two())?;
    let mut bufs: Vec<AlignedBuf> = (0..depth)
        .map(|_| AlignedBuf::new(d.block as usize))
        .collect();
    let mut started: Vec<Option<Instant>> = vec![None; depth];
    let mut free: Vec<usize> = (0..depth).collect();
    let mut outstanding = 0;
    let fd = types::Fd(file.as_raw_fd());
    loop {
        while let Some(&slot) = free.last() {
            if !pacer.before(stop, end) {
                break;
            }
            free.pop();
            let (off, len) = cur.next();
            pacer.charge(len);
            room(&mut bufs[slot], len, 0);
            let b = &mut bufs[slot];
            let sqe = match d.dir {
                Dir::Read => opcode::Read::new(fd, b.as_mut_ptr(), len)
                    .offset(off)
                    .build(),
                Dir::Write => opcode::Write::new(fd, b.as_ptr(), len).offset(off).build(),
            }
            .user_data(slot as u64);
            // SAFETY: the buffer lives in `bufs` until its completion is reaped.
            unsafe { ring.submission().push(&sqe).expect("ring sized to depth") };
            started[slot] = Some(Instant::now());
            outstanding += 1;
        }
        if outstanding == 0 {
            return Ok(());
        }
        ring.submit_and_wait(1)?;
        // Reaped in place: nothing is allocated per wake-up.
        for c in ring.completion() {
            let (slot, res) = (c.user_data() as usize, c.result());
            outstanding -= 1;
            let t0 = started[slot].take().expect("started");
            let r = if res < 0 {
                Err(io::Error::from_raw_os_error(-res))
            } else {
                Ok(res as usize)
            };
            let n = *r.as_ref().unwrap_or(&0) as u64;
            acc.record(r, t0);
            pacer.after(n, stop, end);
            free.push(slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::desc::{Backend, GroupDesc, Pattern};

    /// Without a cgroup hierarchy a run says its flows stay in its own
    /// cgroup (it said nothing, so a `per-flow` run that was not looked
    /// the same as one that was). Fails with `layout_line` giving nothing
    /// for `None`.
    #[test]
    fn a_run_without_cgroups_says_so() {
        let l = layout_line(None, "bfq");
        assert!(
            l.contains("every flow stays in the run's own cgroup"),
            "{l}"
        );
    }
    use bfq_core::{IoClass, IoPrio};

    fn g(name: &str, parent: Option<&str>) -> GroupDesc {
        crate::desc::test_group(name, parent)
    }

    /// The heap allocations of a flow of `pattern` reading `bytes` of a
    /// 1 MiB file with `client` at `depth`, on the calling thread.
    fn allocs_of_a_flow(
        file: &std::fs::File,
        pattern: &Pattern,
        client: KernelClient,
        depth: u32,
        bytes: u64,
    ) -> u64 {
        let mut d = FlowDesc::reader("r", pattern.clone(), 4096);
        d.depth = depth;
        d.bytes = Some(bytes);
        let job = KernelJob {
            desc: d.clone(),
            index: 0,
            region: (0, 1 << 20),
            target: "unused".into(),
            direct: false,
            writable: false,
            duration: Duration::from_secs(3600),
            interval: Duration::from_secs(3600),
            client,
        };
        let gate = crate::pace::gates(std::slice::from_ref(&d))
            .unwrap()
            .remove(0);
        let stop = AtomicBool::new(false);
        let (r, allocs) =
            crate::alloc_count::during(|| job.submit(file, &stop, Instant::now(), gate).unwrap());
        assert_eq!((r.bytes, r.errors), (bytes, 0));
        allocs
    }

    #[test]
    fn a_kernel_flows_requests_allocate_nothing_each() {
        let (_dir, path, patterns) = crate::alloc_count::file_and_patterns();
        let file = std::fs::File::open(&path).unwrap();
        for pattern in &patterns {
            for (client, depth) in [
                (KernelClient::Pread, 1),
                (KernelClient::Uring, 1),
                (KernelClient::Uring, 4),
            ] {
                // 64 KiB, then 4 MiB: what the run's setup and
                // report take, and nothing more per request.
                let few = allocs_of_a_flow(&file, pattern, client, depth, 64 << 10);
                let many = allocs_of_a_flow(&file, pattern, client, depth, 4 << 20);
                assert!(
                    many <= few + 8,
                    "{pattern:?} {client:?} x{depth}: {few} allocations for 64 KiB, \
                     {many} for 4 MiB"
                );
            }
        }
    }

    #[test]
    fn without_per_flow_cgroups_only_level_or_equal_weights_are_accepted() {
        let backend = Backend::Kernel {
            scheduler: "bfq".into(),
        };
        let mut cfg = RunConfig::new("/dev/null", backend, Duration::from_secs(1));
        let ok = |cfg: &RunConfig, f: &[FlowDesc]| levels_carry_weights(cfg, f, "why").is_ok();
        let mut a = FlowDesc::reader("a", Pattern::Seq, 4096);
        let b = FlowDesc::reader("b", Pattern::Seq, 4096);
        a.prio = IoPrio {
            class: IoClass::Be,
            level: 0,
        };
        // weights 80 and 40: the levels' own
        assert!(ok(&cfg, &[a.clone(), b.clone()]));
        let mut c = b.clone();
        c.weight = Some(300);
        let e = levels_carry_weights(&cfg, &[a.clone(), c.clone()], "why").unwrap_err();
        assert!(e.to_string().starts_with("why"), "{e}");
        // equal weights at one priority: equal shares either way
        let mut d = c.clone();
        d.name = "d".into();
        assert!(ok(&cfg, &[c.clone(), d.clone()]));
        d.prio.level = 3;
        assert!(!ok(&cfg, &[c, d]));
        let mut grouped = b.clone();
        grouped.group = Some("x".into());
        assert!(!ok(&cfg, &[a.clone(), grouped]));
        cfg.groups.push(g("x", None));
        assert!(!ok(&cfg, &[a, b]));
    }

    #[test]
    fn kernel_flows_submit_through_io_uring_unless_pread_is_asked_for() {
        let backend = Backend::Kernel {
            scheduler: "bfq".into(),
        };
        let mut cfg = RunConfig::new("/dev/null", backend, Duration::from_secs(1));
        let f = [FlowDesc::reader("a", Pattern::Rand, 4096)];
        let client = |cfg: &RunConfig| jobs(cfg, &f, &[(0, 1 << 20)])[0].client;
        assert_eq!(client(&cfg), KernelClient::Uring, "the engine's flows' way");
        cfg.kernel_client = KernelClient::Pread;
        assert_eq!(client(&cfg), KernelClient::Pread);
        assert_eq!(KernelClient::parse("pread"), Some(KernelClient::Pread));
        assert_eq!(KernelClient::parse("uring"), Some(KernelClient::Uring));
        assert_eq!(KernelClient::parse("aio"), None);
    }

    #[test]
    fn one_cgroup_for_all_creates_none() {
        let backend = Backend::Kernel {
            scheduler: "bfq".into(),
        };
        let mut cfg = RunConfig::new("/dev/null", backend, Duration::from_secs(1));
        cfg.kernel_groups = KernelGroups::One;
        let f = FlowDesc::reader("a", Pattern::Rand, 4096);
        let (groups, flows, _) = flow_cgroups(&cfg, "bfq", &[f.clone(), f.clone()]).unwrap();
        assert!(groups.is_empty());
        assert!(flows.iter().all(Option::is_none));
        let mut heavy = f.clone();
        heavy.weight = Some(500);
        let e = flow_cgroups(&cfg, "bfq", &[f, heavy]).unwrap_err();
        assert!(e.to_string().contains("--kernel-groups one"), "{e}");
    }

    #[test]
    fn on_cgroup_v2_each_flow_is_a_process_in_its_own_cgroup() {
        // A fake unified hierarchy with the io controller.
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("cgroup.controllers"), "cpu io").unwrap();
        let layout = sys::CgroupLayout::detect_in(&d.path().join("none"), &[d.path()]).unwrap();
        let backend = Backend::Kernel {
            scheduler: "bfq".into(),
        };
        let mut cfg = RunConfig::new("/dev/null", backend, Duration::from_secs(1));
        cfg.groups = vec![g("a", None), g("a/b", Some("a"))];
        let mut f = FlowDesc::reader("x", Pattern::Seq, 4096);
        f.weight = Some(300);
        let mut grouped = f.clone();
        grouped.group = Some("a/b".into());
        let (groups, flows, processes) =
            flow_cgroups_in(&cfg, &layout, "bfq-rs-1", &[f, grouped]).unwrap();
        assert!(processes, "v2 takes processes, not threads");
        let rel = |p: &std::path::Path| p.strip_prefix(d.path()).unwrap().to_path_buf();
        let dirs: Vec<_> = groups.iter().map(|c| rel(c.dir())).collect();
        assert_eq!(
            dirs,
            ["bfq-rs-1-g0", "bfq-rs-1-g0/g1"].map(std::path::PathBuf::from)
        );
        let leaf = flows[1].as_ref().unwrap();
        assert_eq!(rel(leaf.dir()), std::path::Path::new("bfq-rs-1-g0/g1/f1"));
        assert_eq!(
            rel(flows[0].as_ref().unwrap().dir()),
            std::path::Path::new("bfq-rs-1-0")
        );
        // every parent lets its children use the io controller
        for p in ["", "bfq-rs-1-g0", "bfq-rs-1-g0/g1"] {
            let sc = d.path().join(p).join("cgroup.subtree_control");
            assert_eq!(std::fs::read_to_string(sc).unwrap(), "+io", "{p}");
        }
        // a flow's process goes in through cgroup.procs
        leaf.add_thread(4242).unwrap();
        assert_eq!(
            std::fs::read_to_string(leaf.dir().join("cgroup.procs")).unwrap(),
            "4242"
        );
        // on v1, per-process is asked for; per-flow stays threads
        let v1 = d.path().join("blkio");
        std::fs::create_dir(&v1).unwrap();
        std::fs::write(v1.join("tasks"), "").unwrap();
        let l1 = sys::CgroupLayout::detect_in(&v1, &[]).unwrap();
        let one = [FlowDesc::reader("y", Pattern::Seq, 4096)];
        cfg.groups.clear();
        assert!(!flow_cgroups_in(&cfg, &l1, "t1", &one).unwrap().2);
        cfg.kernel_groups = KernelGroups::PerProcess;
        assert!(flow_cgroups_in(&cfg, &l1, "t2", &one).unwrap().2);
        drop((groups, flows));
    }
}
