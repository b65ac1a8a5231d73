//! Real workloads: flows described in a small, scenario-independent form
//! ([`FlowDesc`]) run as real threads against a target, either through an
//! [`Engine`] with one of the project's schedulers or with each flow's
//! thread submitting directly to a block device under one of the kernel's
//! schedulers (`kernel:bfq`, `kernel:mq-deadline`, `kernel:kyber`,
//! `kernel:none`), each in its own blkio cgroup carrying its weight and
//! with its I/O priority set.
//!
//! `bfq run` converts the simulator's scenario flows to [`FlowDesc`]s; the
//! benchmarks build them directly.

use crate::buf::AlignedBuf;
use crate::completion::Pending;
use crate::engine::{Engine, FlowOptions, ShutdownMode};
use crate::sys;
use bfq_core::{GroupId, IoClass, IoPrio, Settings};
use io_uring::{opcode, types, IoUring};
use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Access pattern of a flow.
#[derive(Clone, Debug, PartialEq)]
pub enum Pattern {
    /// Sequential through the region, wrapping around.
    Seq,
    /// Uniformly random block-aligned offsets in the region.
    Rand,
    /// These (offset relative to the region, length) requests in order.
    Replay(Vec<(u64, u32)>),
}

/// Read or write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    Read,
    Write,
}

/// One flow of a workload.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowDesc {
    pub name: String,
    pub dir: Dir,
    pub pattern: Pattern,
    /// Request size in bytes.
    pub block: u32,
    /// Requests kept outstanding.
    pub depth: u32,
    /// Whether the scheduler sees the requests as synchronous. Linux flags
    /// every read, and every `O_DIRECT` write, synchronous whatever the
    /// depth; a scenario's `sync = false` flow (simulated asynchronous
    /// I/O, e.g. writeback) is not.
    pub sync: bool,
    /// Region `(offset, len)` in bytes; `None` = an equal share of the
    /// target laid out after the explicit regions.
    pub region: Option<(u64, u64)>,
    /// Stop after this many bytes (per repetition); `None` = until the run ends.
    pub bytes: Option<u64>,
    /// Pause between a completion and the next request.
    pub think: Duration,
    /// ON/OFF: move a number of bytes uniform in `on_bytes`, then stay
    /// silent for a time uniform in `off`, and again.
    pub on_off: Option<OnOff>,
    /// Periodic: every `every`, release a batch of `bytes`.
    pub periodic: Option<Periodic>,
    /// Runs of the `bytes` budget (default 1).
    pub repeat: u32,
    /// Pause between two runs.
    pub rerun_after: Duration,
    /// Start this long after the run starts.
    pub start: Duration,
    /// Explicit weight; `None` derives it from the level.
    pub weight: Option<u32>,
    pub prio: IoPrio,
    /// Group name (see [`GroupDesc`]); `None` = root.
    pub group: Option<String>,
}

impl FlowDesc {
    /// A greedy synchronous reader of `block`-byte requests.
    pub fn reader(name: &str, pattern: Pattern, block: u32) -> Self {
        FlowDesc {
            name: name.to_string(),
            dir: Dir::Read,
            pattern,
            block,
            depth: 1,
            sync: true,
            region: None,
            bytes: None,
            think: Duration::ZERO,
            on_off: None,
            periodic: None,
            repeat: 1,
            rerun_after: Duration::ZERO,
            start: Duration::ZERO,
            weight: None,
            prio: IoPrio::DEFAULT,
            group: None,
        }
    }

    /// The weight the flow gets.
    pub fn effective_weight(&self) -> u32 {
        self.weight.unwrap_or_else(|| self.prio.default_weight())
    }
}

/// ON/OFF behaviour (ranges are inclusive, sampled uniformly).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OnOff {
    pub on_bytes: (u64, u64),
    pub off: (Duration, Duration),
}

/// Periodic behaviour.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Periodic {
    pub every: Duration,
    pub bytes: u64,
}

/// A group of flows (engine groups; nested blkio cgroups on the kernel side).
#[derive(Clone, Debug, PartialEq)]
pub struct GroupDesc {
    pub name: String,
    pub weight: u32,
    pub parent: Option<String>,
}

/// Who schedules.
#[derive(Clone, Debug, PartialEq)]
pub enum Backend {
    /// The engine with a scheduler of the registry.
    Engine {
        scheduler: String,
        settings: Settings,
    },
    /// The kernel's scheduler of the block device (`bfq`, `mq-deadline`,
    /// `kyber`, `none`).
    Kernel { scheduler: String },
}

impl Backend {
    /// Parses `--scheduler`: `kernel:NAME` or a registry name.
    pub fn parse(s: &str, settings: Settings) -> Backend {
        match s.strip_prefix("kernel:") {
            Some(k) => Backend::Kernel {
                scheduler: k.to_string(),
            },
            None => Backend::Engine {
                scheduler: s.to_string(),
                settings,
            },
        }
    }

    /// `fifo`, `bfq`, `kernel:bfq`...
    pub fn label(&self) -> String {
        match self {
            Backend::Engine { scheduler, .. } => scheduler.clone(),
            Backend::Kernel { scheduler } => format!("kernel:{scheduler}"),
        }
    }
}

/// A run of a workload.
#[derive(Clone, Debug)]
pub struct RunConfig {
    pub target: PathBuf,
    pub backend: Backend,
    /// Stop after this long (flows with a byte budget may end earlier).
    pub duration: Duration,
    /// `O_DIRECT` (default true).
    pub direct: bool,
    /// Writes are refused unless this is set.
    pub allow_writes: bool,
    /// The engine's device queue depth.
    pub queue_depth: u32,
    /// Size of a regular-file target to create (filled with data) if it
    /// does not exist.
    pub create_size: Option<u64>,
    pub groups: Vec<GroupDesc>,
    /// Nice value of the engine's dispatcher thread.
    pub dispatcher_nice: i32,
    /// Engine reads and writes go through io_uring's workers (IOSQE_ASYNC).
    pub async_submit: bool,
    /// Engine submissions through an SQPOLL kernel thread (idle ms; 0 = off).
    pub sqpoll_idle_ms: u32,
    /// Interval of each flow's throughput series.
    pub series_interval: Duration,
    /// Write the simulator's trace CSV (`t_ns,event,flow,req,sector,
    /// sectors,op`; engine backends only).
    pub trace: Option<PathBuf>,
}

impl RunConfig {
    pub fn new(target: impl Into<PathBuf>, backend: Backend, duration: Duration) -> Self {
        RunConfig {
            target: target.into(),
            backend,
            duration,
            direct: true,
            allow_writes: false,
            queue_depth: 64,
            create_size: None,
            groups: Vec::new(),
            dispatcher_nice: 0,
            async_submit: false,
            sqpoll_idle_ms: 0,
            series_interval: Duration::from_secs(1),
            trace: None,
        }
    }
}

/// What one flow did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlowReport {
    pub name: String,
    pub weight: u32,
    pub ios: u64,
    pub bytes: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    /// Mean, median, 99th percentile and maximum latency in microseconds.
    pub lat_mean_us: f64,
    pub lat_p50_us: f64,
    pub lat_p99_us: f64,
    pub lat_max_us: f64,
    /// Every request's latency in nanoseconds, sorted.
    pub lat_ns: Vec<u64>,
    /// Bytes completed per `series_interval`.
    pub series_bytes: Vec<u64>,
    /// When each run of the byte budget ended (s since the start).
    pub run_ends_s: Vec<f64>,
}

/// What a run did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunReport {
    pub backend: String,
    pub target: String,
    pub seconds: f64,
    pub flows: Vec<FlowReport>,
    /// CPU seconds (user + system) this process spent during the run, all
    /// threads (the engine's dispatcher and io_uring workers included; the
    /// kernel's own worker threads, e.g. a loop device's, are not).
    pub cpu_seconds: f64,
}

impl RunReport {
    pub fn total_ios(&self) -> u64 {
        self.flows.iter().map(|f| f.ios).sum()
    }
    pub fn total_bytes(&self) -> u64 {
        self.flows.iter().map(|f| f.bytes).sum()
    }
    pub fn iops(&self) -> f64 {
        self.total_ios() as f64 / self.seconds.max(1e-9)
    }
    /// Process CPU microseconds per completed request.
    pub fn cpu_us_per_io(&self) -> f64 {
        self.cpu_seconds * 1e6 / self.total_ios().max(1) as f64
    }
    /// Each flow's share of the bytes and of the weights: `(got, due)`.
    pub fn shares(&self) -> Vec<(f64, f64)> {
        let tb = self.total_bytes().max(1) as f64;
        let tw: u32 = self.flows.iter().map(|f| f.weight).sum();
        self.flows
            .iter()
            .map(|f| {
                (
                    f.bytes as f64 / tb,
                    f64::from(f.weight) / f64::from(tw.max(1)),
                )
            })
            .collect()
    }
    /// Largest relative deviation of a flow's share from its weight's share.
    pub fn worst_share_error(&self) -> f64 {
        self.shares()
            .iter()
            .map(|(got, due)| ((got - due) / due).abs())
            .fold(0.0, f64::max)
    }
}

/// Small deterministic generator (xorshift64*).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// The offsets one flow visits.
struct Cursor {
    pattern: Pattern,
    base: u64,
    len: u64,
    block: u64,
    pos: u64,
    rng: Rng,
}

impl Cursor {
    fn next(&mut self) -> (u64, u32) {
        let blocks = (self.len / self.block).max(1);
        match &self.pattern {
            Pattern::Seq => {
                let off = self.base + (self.pos % blocks) * self.block;
                self.pos += 1;
                (off, self.block as u32)
            }
            Pattern::Rand => (
                self.base + (self.rng.next() % blocks) * self.block,
                self.block as u32,
            ),
            Pattern::Replay(v) => {
                if v.is_empty() {
                    return (self.base, self.block as u32);
                }
                let (o, l) = v[(self.pos as usize) % v.len()];
                self.pos += 1;
                (self.base + o, l)
            }
        }
    }
}

/// Per-flow pacing: start delay, byte budget and runs, think time,
/// on/off, periodic batches.
struct Pacer {
    start: Instant,
    desc_start: Duration,
    think: Duration,
    on_off: Option<OnOff>,
    on_left: u64,
    periodic: Option<Periodic>,
    batch_left: u64,
    next_period: Instant,
    budget: Option<u64>,
    left: u64,
    repeats_left: u32,
    rerun_after: Duration,
    run_ends: Vec<f64>,
    ended: bool,
    rng: Rng,
}

impl Pacer {
    fn new(d: &FlowDesc, start: Instant, seed: u64) -> Self {
        let mut p = Pacer {
            start,
            desc_start: d.start,
            think: d.think,
            on_off: d.on_off,
            on_left: u64::MAX,
            periodic: d.periodic,
            batch_left: d.periodic.map(|p| p.bytes).unwrap_or(u64::MAX),
            next_period: start + d.start,
            budget: d.bytes,
            left: d.bytes.unwrap_or(u64::MAX),
            repeats_left: d.repeat.max(1) - 1,
            rerun_after: d.rerun_after,
            run_ends: Vec::new(),
            ended: false,
            rng: Rng(0xD1B5_4A32_D192_ED03 ^ (seed + 7).wrapping_mul(0x9E37_79B9)),
        };
        if let Some(o) = p.on_off {
            p.on_left = p.uniform(o.on_bytes.0, o.on_bytes.1).max(1);
        }
        if let Some(per) = p.periodic {
            p.next_period = start + d.start + per.every;
        }
        p
    }

    fn uniform(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            lo
        } else {
            lo + self.rng.next() % (hi - lo + 1)
        }
    }

    fn sleep_until(t: Instant, stop: &AtomicBool, end: Instant) -> bool {
        let t = t.min(end);
        loop {
            if stop.load(Ordering::Relaxed) {
                return false;
            }
            let now = Instant::now();
            if now >= t {
                return now < end;
            }
            std::thread::sleep((t - now).min(Duration::from_millis(20)));
        }
    }

    /// Waits until the flow may issue its next request; false = done.
    fn before(&mut self, stop: &AtomicBool, end: Instant) -> bool {
        if self.ended {
            return false;
        }
        if self.left == 0 {
            self.run_ends.push(self.start.elapsed().as_secs_f64());
            if self.repeats_left == 0 {
                self.ended = true;
                return false;
            }
            self.repeats_left -= 1;
            self.left = self.budget.unwrap_or(u64::MAX);
            if !Self::sleep_until(Instant::now() + self.rerun_after, stop, end) {
                return false;
            }
        }
        if !Self::sleep_until(self.start + self.desc_start, stop, end) {
            return false;
        }
        if let Some(o) = self.on_off {
            if self.on_left == 0 {
                let off = self.uniform(o.off.0.as_nanos() as u64, o.off.1.as_nanos() as u64);
                if !Self::sleep_until(Instant::now() + Duration::from_nanos(off), stop, end) {
                    return false;
                }
                self.on_left = self.uniform(o.on_bytes.0, o.on_bytes.1).max(1);
            }
        }
        if let Some(p) = self.periodic {
            if self.batch_left == 0 {
                if !Self::sleep_until(self.next_period, stop, end) {
                    return false;
                }
                self.next_period += p.every;
                self.batch_left = p.bytes.max(1);
            }
        }
        !stop.load(Ordering::Relaxed) && Instant::now() < end
    }

    /// Counts a request against the budgets when it is issued.
    fn charge(&mut self, bytes: u32) {
        let b = u64::from(bytes.max(1));
        self.left = self.left.saturating_sub(b);
        self.on_left = self.on_left.saturating_sub(b);
        self.batch_left = self.batch_left.saturating_sub(b);
    }

    fn after(&mut self, _bytes: u64, stop: &AtomicBool, end: Instant) {
        if !self.think.is_zero() {
            Self::sleep_until(Instant::now() + self.think, stop, end);
        }
    }
}

struct Acc {
    ios: u64,
    bytes: u64,
    errors: u64,
    first_error: Option<String>,
    lat_ns: Vec<u64>,
    series: Vec<u64>,
    interval_ns: u64,
    start: Instant,
}

impl Acc {
    fn new(interval: Duration) -> Acc {
        Acc {
            ios: 0,
            bytes: 0,
            errors: 0,
            first_error: None,
            lat_ns: Vec::new(),
            series: Vec::new(),
            interval_ns: (interval.as_nanos() as u64).max(1),
            start: Instant::now(),
        }
    }

    fn record(&mut self, res: io::Result<usize>, lat: Duration) {
        match res {
            Ok(n) => {
                self.ios += 1;
                self.bytes += n as u64;
                self.lat_ns.push(lat.as_nanos() as u64);
                let k = (self.start.elapsed().as_nanos() as u64 / self.interval_ns) as usize;
                if k >= self.series.len() {
                    self.series.resize(k + 1, 0);
                }
                self.series[k] += n as u64;
            }
            Err(e) => {
                self.errors += 1;
                if self.first_error.is_none() {
                    self.first_error = Some(e.to_string());
                }
            }
        }
    }

    fn report(mut self, d: &FlowDesc, run_ends: Vec<f64>) -> FlowReport {
        self.lat_ns.sort_unstable();
        let n = self.lat_ns.len();
        let pct = |p: f64| -> f64 {
            if n == 0 {
                0.0
            } else {
                self.lat_ns[((n as f64 - 1.0) * p).round() as usize] as f64 / 1e3
            }
        };
        FlowReport {
            name: d.name.clone(),
            weight: d.effective_weight(),
            ios: self.ios,
            bytes: self.bytes,
            errors: self.errors,
            first_error: self.first_error.clone(),
            lat_mean_us: if n == 0 {
                0.0
            } else {
                self.lat_ns.iter().sum::<u64>() as f64 / n as f64 / 1e3
            },
            lat_p50_us: pct(0.5),
            lat_p99_us: pct(0.99),
            lat_max_us: pct(1.0),
            lat_ns: std::mem::take(&mut self.lat_ns),
            series_bytes: std::mem::take(&mut self.series),
            run_ends_s: run_ends,
        }
    }
}

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
/// The groups ordered so that every parent comes before its children;
/// an error names groups whose parent is unknown or part of a cycle.
fn parents_first(groups: &[GroupDesc]) -> io::Result<Vec<&GroupDesc>> {
    let mut done: std::collections::HashSet<&str> = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(groups.len());
    let mut todo: Vec<&GroupDesc> = groups.iter().collect();
    while !todo.is_empty() {
        let before = todo.len();
        let (ready, rest): (Vec<&GroupDesc>, Vec<&GroupDesc>) = todo
            .into_iter()
            .partition(|g| g.parent.as_deref().is_none_or(|p| done.contains(p)));
        for g in ready {
            done.insert(&g.name);
            out.push(g);
        }
        if rest.len() == before {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "groups with unknown or cyclic parents",
            ));
        }
        todo = rest;
    }
    Ok(out)
}

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
    let cpu0 = process_cpu_seconds();
    let mut r = match &cfg.backend {
        Backend::Engine {
            scheduler,
            settings,
        } => run_engine(cfg, scheduler, settings, flows, &regions),
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
            run_kernel(cfg, scheduler, flows, &regions)
        }
    }?;
    r.cpu_seconds = process_cpu_seconds() - cpu0;
    Ok(r)
}

/// User + system CPU seconds of this process so far.
pub fn process_cpu_seconds() -> f64 {
    // SAFETY: getrusage writes into a zeroed rusage.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn cursor(d: &FlowDesc, region: (u64, u64), seed: u64) -> Cursor {
    Cursor {
        pattern: d.pattern.clone(),
        base: region.0,
        len: region.1,
        block: u64::from(d.block),
        pos: 0,
        rng: Rng(0x9E37_79B9_7F4A_7C15 ^ (seed + 1).wrapping_mul(0x1234_5678_9ABC_DEF1)),
    }
}

fn run_engine(
    cfg: &RunConfig,
    scheduler: &str,
    settings: &Settings,
    flows: &[FlowDesc],
    regions: &[(u64, u64)],
) -> io::Result<RunReport> {
    type Names = Arc<std::sync::Mutex<HashMap<u32, String>>>;
    let names: Names = Default::default();
    let trace_out = match &cfg.trace {
        Some(p) => {
            let mut w = io::BufWriter::with_capacity(1 << 20, std::fs::File::create(p)?);
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
        .dispatcher_nice(cfg.dispatcher_nice)
        .async_submit(cfg.async_submit)
        .sqpoll(cfg.sqpoll_idle_ms)
        .open()?;
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
    for (i, ((d, region), flow)) in flows
        .iter()
        .zip(regions)
        .zip(handles.iter().cloned())
        .enumerate()
    {
        let d = d.clone();
        let region = *region;
        let stop = stop.clone();
        let barrier = barrier.clone();
        let duration = cfg.duration;
        let interval = cfg.series_interval;
        threads.push(std::thread::spawn(move || {
            let mut cur = cursor(&d, region, i as u64);
            let mut bufs: Vec<AlignedBuf> = (0..d.depth)
                .map(|_| {
                    let mut b = AlignedBuf::new(d.block as usize);
                    b.fill(i as u8 | 1);
                    b
                })
                .collect();
            barrier.wait();
            let start = Instant::now();
            let end = start + duration;
            let mut acc = Acc::new(interval);
            let mut pacer = Pacer::new(&d, start, i as u64);
            // Requests in flight by slot, with their issue time. The
            // thread reaps every finished request whenever it wakes, and
            // sleeps on the oldest one only when none has finished: BFQ
            // dispatches a flow's queue in sector order, so reaping only
            // the oldest would leave finished requests unreaped and the
            // flow's depth unused, while waking on every completion would
            // cost the engine's dispatcher a cross-thread wake-up each.
            let mut slots: Vec<Option<(Instant, Pending<AlignedBuf>)>> =
                (0..d.depth).map(|_| None).collect();
            let mut free: Vec<usize> = (0..d.depth as usize).rev().collect();
            // Takes a request's result (blocking if it is not in yet).
            let mut reap = |slot: &mut Option<(Instant, Pending<AlignedBuf>)>,
                            bufs: &mut Vec<AlignedBuf>,
                            pacer: &mut Pacer| {
                let (t0, p) = slot.take().expect("in flight");
                let (res, b) = p.wait();
                let n = *res.as_ref().unwrap_or(&0) as u64;
                acc.record(res, t0.elapsed());
                bufs.push(b);
                pacer.after(n, &stop, end);
            };
            loop {
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
                    slots[free.pop().expect("a free slot")] = Some((Instant::now(), p));
                }
                let mut reaped = false;
                let mut oldest: Option<(Instant, usize)> = None;
                for (k, slot) in slots.iter_mut().enumerate() {
                    let Some((t0, p)) = slot else { continue };
                    if p.is_done() {
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
            (acc.report(&d, pacer.run_ends), start.elapsed())
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
    engine.shutdown(ShutdownMode::Cancel)?;
    if let Some(out) = trace_out {
        out.lock().unwrap_or_else(|p| p.into_inner()).flush()?;
    }
    Ok(RunReport {
        backend: cfg.backend.label(),
        target: cfg.target.display().to_string(),
        seconds,
        flows: reports,
        cpu_seconds: 0.0,
    })
}

/// Without per-thread cgroups (cgroup v2 puts processes, not threads, in
/// a cgroup) the kernel's BFQ weighs each flow thread by its I/O priority
/// level, (8 - level) * 10: runs whose weights are exactly that, without
/// groups, are still faithful; others are refused.
fn levels_carry_weights(cfg: &RunConfig, flows: &[FlowDesc]) -> io::Result<()> {
    let bad = flows
        .iter()
        .find(|f| f.effective_weight() != f.prio.default_weight() || f.group.is_some());
    match (bad, cfg.groups.is_empty()) {
        (None, true) => Ok(()),
        _ => Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "no cgroup v1 blkio hierarchy: on cgroup v2 the io controller puts whole \
             processes, not threads, in a cgroup, so only weights that equal the I/O \
             priority level's ((8 - level) * 10, e.g. level=0 for 80) and no groups can \
             be given to kernel:* flows; mount cgroup v1 blkio at /sys/fs/cgroup/blkio \
             for others",
        )),
    }
}

fn run_kernel(
    cfg: &RunConfig,
    scheduler: &str,
    flows: &[FlowDesc],
    regions: &[(u64, u64)],
) -> io::Result<RunReport> {
    // SIGINT/SIGTERM stop the run; the guards below then put the device's
    // scheduler back and remove the cgroups before the process exits.
    let _signals = sys::catch_interrupts();
    let _sched = sys::SchedulerGuard::set(&cfg.target, scheduler)?;
    let pid = std::process::id();
    let layout = sys::CgroupLayout::detect();
    if let Some(l) = &layout {
        eprintln!("kernel:{scheduler}: {}", l.describe());
    }
    let per_thread = layout.as_ref().is_some_and(sys::CgroupLayout::per_thread);
    if !per_thread {
        levels_carry_weights(cfg, flows)?;
    }
    // Groups as nested blkio cgroups carrying their weights (parents
    // first); each flow in its own cgroup inside its group's.
    let mut group_dirs: HashMap<String, String> = HashMap::new();
    let mut group_cgs: Vec<sys::Cgroup> = Vec::new();
    for g in parents_first(&cfg.groups)?
        .into_iter()
        .filter(|_| per_thread)
    {
        let k = group_cgs.len();
        let dir = match &g.parent {
            None => format!("bfq-rs-{pid}-g{k}"),
            Some(p) => format!("{}/g{k}", group_dirs[p]),
        };
        group_cgs.push(sys::Cgroup::create(&dir, g.weight)?);
        group_dirs.insert(g.name.clone(), dir);
    }
    let mut cgroups = Vec::new();
    for (i, f) in flows.iter().enumerate() {
        if !per_thread {
            cgroups.push(None);
            continue;
        }
        let dir = match &f.group {
            None => format!("bfq-rs-{pid}-{i}"),
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
        cgroups.push(Some(Arc::new(sys::Cgroup::create(
            &dir,
            f.effective_weight(),
        )?)));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let barrier = Arc::new(Barrier::new(flows.len() + 1));
    let mut threads = Vec::new();
    for (i, (d, region)) in flows.iter().zip(regions).enumerate() {
        let d = d.clone();
        let region = *region;
        let stop = stop.clone();
        let barrier = barrier.clone();
        let cg = cgroups[i].clone();
        let duration = cfg.duration;
        let interval = cfg.series_interval;
        let target = cfg.target.clone();
        let direct = cfg.direct;
        let writable = cfg.allow_writes;
        threads.push(std::thread::spawn(move || -> io::Result<FlowReport> {
            let setup = (|| -> io::Result<_> {
                if let Some(cg) = &cg {
                    cg.join()?;
                }
                sys::ioprio_set_thread(d.prio.class, d.prio.level)?;
                let mut o = OpenOptions::new();
                o.read(true).write(writable);
                if direct {
                    o.custom_flags(libc::O_DIRECT);
                }
                o.open(&target)
            })();
            barrier.wait();
            let file = setup?;
            let start = Instant::now();
            let end = start + duration;
            let mut pacer = Pacer::new(&d, start, i as u64);
            let mut cur = cursor(&d, region, i as u64);
            let mut acc = Acc::new(interval);
            if d.depth <= 1 {
                let mut b = AlignedBuf::new(d.block as usize);
                b.fill(i as u8 | 1);
                while pacer.before(&stop, end) {
                    let (off, len) = cur.next();
                    pacer.charge(len);
                    if b.len() != len as usize {
                        b = AlignedBuf::new(len as usize);
                    }
                    let t0 = Instant::now();
                    let res = match d.dir {
                        Dir::Read => file.read_at(&mut b, off),
                        Dir::Write => file.write_at(&b, off),
                    };
                    let n = *res.as_ref().unwrap_or(&0) as u64;
                    acc.record(res, t0.elapsed());
                    pacer.after(n, &stop, end);
                }
            } else {
                kernel_ring_loop(&file, &d, &mut cur, &mut pacer, &mut acc, &stop, end)?;
            }
            Ok(acc.report(&d, pacer.run_ends))
        }));
    }
    barrier.wait();
    let t0 = Instant::now();
    let watch_done = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (stop, done) = (stop.clone(), watch_done.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::SeqCst) {
                if sys::interrupted().is_some() {
                    stop.store(true, Ordering::SeqCst);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let mut reports = Vec::new();
    let mut err = None;
    for t in threads {
        match t.join() {
            Ok(Ok(r)) => reports.push(r),
            Ok(Err(e)) => err = Some(e),
            Err(_) => err = Some(io::Error::other("a flow thread panicked")),
        }
    }
    let seconds = t0.elapsed().as_secs_f64();
    watch_done.store(true, Ordering::SeqCst);
    let _ = watcher.join();
    drop(cgroups);
    while let Some(g) = group_cgs.pop() {
        drop(g);
    }
    if let Some(sig) = sys::interrupted() {
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
    Ok(RunReport {
        backend: cfg.backend.label(),
        target: cfg.target.display().to_string(),
        seconds,
        flows: reports,
        cpu_seconds: 0.0,
    })
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
            if bufs[slot].len() != len as usize {
                bufs[slot] = AlignedBuf::new(len as usize);
            }
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
        let done: Vec<(usize, i32)> = ring
            .completion()
            .map(|c| (c.user_data() as usize, c.result()))
            .collect();
        for (slot, res) in done {
            outstanding -= 1;
            let t0 = started[slot].take().expect("started");
            let r = if res < 0 {
                Err(io::Error::from_raw_os_error(-res))
            } else {
                Ok(res as usize)
            };
            let n = *r.as_ref().unwrap_or(&0) as u64;
            acc.record(r, t0.elapsed());
            pacer.after(n, stop, end);
            free.push(slot);
        }
    }
}

/// Convenience: the priority of a flow from class and level.
pub fn prio(class: IoClass, level: u8) -> IoPrio {
    IoPrio { class, level }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(name: &str, parent: Option<&str>) -> GroupDesc {
        GroupDesc {
            name: name.into(),
            weight: 100,
            parent: parent.map(Into::into),
        }
    }

    #[test]
    fn without_per_thread_cgroups_only_level_weights_are_accepted() {
        let backend = Backend::Kernel {
            scheduler: "bfq".into(),
        };
        let mut cfg = RunConfig::new("/dev/null", backend, Duration::from_secs(1));
        let mut a = FlowDesc::reader("a", Pattern::Seq, 4096);
        let b = FlowDesc::reader("b", Pattern::Seq, 4096);
        a.prio = IoPrio {
            class: IoClass::Be,
            level: 0,
        };
        assert!(levels_carry_weights(&cfg, &[a.clone(), b.clone()]).is_ok());
        let mut c = b.clone();
        c.weight = Some(300);
        let e = levels_carry_weights(&cfg, &[a.clone(), c]).unwrap_err();
        assert!(e.to_string().contains("cgroup v2"), "{e}");
        cfg.groups.push(g("x", None));
        assert!(levels_carry_weights(&cfg, &[a, b]).is_err());
    }

    #[test]
    fn groups_come_parents_first_and_cycles_are_refused() {
        let groups = [
            g("a/b/c", Some("a/b")),
            g("a/b", Some("a")),
            g("a", None),
            g("d", None),
        ];
        let order: Vec<&str> = parents_first(&groups)
            .unwrap()
            .iter()
            .map(|g| g.name.as_str())
            .collect();
        let pos = |n: &str| order.iter().position(|x| *x == n).unwrap();
        assert_eq!(order.len(), 4);
        assert!(pos("a") < pos("a/b") && pos("a/b") < pos("a/b/c"));
        let cyclic = [g("x", Some("y")), g("y", Some("x"))];
        assert_eq!(
            parents_first(&cyclic).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        assert!(parents_first(&[g("x", Some("missing"))]).is_err());
    }
}
