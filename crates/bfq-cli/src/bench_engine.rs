//! `bfq bench-engine`: the engine's benchmarks, each measured side by side
//! with the kernel's schedulers in one run.
//!
//! - `randread`: 4 KiB random reads, 1..64 flows, loop device over a file
//!   in /dev/shm: engine schedulers vs kernel:bfq and kernel:none (flows in
//!   one cgroup or one cgroup each), and fio on `none` as a reference.
//! - `nop`: the engine's ceiling with io_uring NOP requests.
//! - `fairness`: 2 and 5 greedy sequential readers, weights 100:300 and
//!   1:2:3:4:5, on a loop device over a regular file: engine vs kernel:bfq.

use bfq_engine::{
    CoopTaskrun, Engine, EngineStats, Flow, FlowOptions, Settings, ShutdownMode, SubmitMode,
};
use bfq_real::cpu_busy::{self, BusySampler};
use bfq_real::cpu_probe::{cache_round_trip_ns, PROBE_TRIPS};
use bfq_real::sys::{self, LoopDevice};
use bfq_real::{Backend, EngineClient, FlowDesc, Pattern, RunConfig, RunReport};
use clap::{Args as ClapArgs, Subcommand};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(ClapArgs)]
pub struct Args {
    #[command(subcommand)]
    pub cmd: BenchCmd,
    /// Print JSON instead of a table.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Subcommand)]
pub enum BenchCmd {
    /// 4 KiB random reads on a loop device over /dev/shm.
    Randread {
        /// Flow counts (comma-separated), each 1..=4096.
        #[arg(long, value_delimiter = ',', default_value = "1,4,16,64", value_parser = clap::value_parser!(u32).range(1..=4096))]
        flows: Vec<u32>,
        /// Schedulers: registry names and kernel:NAME (comma-separated);
        /// default: fifo, bfq if registered, kernel:bfq, kernel:none. An
        /// engine scheduler with `@dispatcher` (e.g. `fifo@dispatcher`)
        /// submits through one dispatcher thread
        /// (`SubmitMode::Dispatcher`); without it, or with `@local`, from
        /// each flow's thread (`SubmitMode::Local`, the engine's default);
        /// with `@shared`, from each flow's thread without private rings
        /// (`EngineBuilder::private_rings(false)`); with `@coop`, from
        /// each flow's thread on rings set up with `COOP_TASKRUN`
        /// (`EngineBuilder::coop_taskrun(CoopTaskrun::On)`), with
        /// `@nocoop` without it (`CoopTaskrun::Off`); otherwise each
        /// thread's ring has it while the thread waits for a CPU
        /// (`CoopTaskrun::Auto`, the engine's default). With `@tpc` (e.g.
        /// `bfq@tpc`) the same flows are served as a thread-per-core
        /// server on an async runtime serves them: one current-thread
        /// tokio runtime per CPU (`--cpus`, else every CPU), pinned, its
        /// ring bound to it (`Engine::thread_ring`), each flow's requests
        /// tasks of one read each spread over the runtimes.
        #[arg(long, value_delimiter = ',')]
        schedulers: Vec<String>,
        /// Seconds per measurement (above 0, at most 604800: a week).
        #[arg(long, default_value_t = 3.0, value_parser = crate::args::seconds)]
        seconds: f64,
        /// Requests outstanding in total (split among the flows: depth /
        /// flows each, rounded down), and the engine's device queue depth
        /// (1..=4096, at least the largest of `--flows`).
        #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=4096))]
        depth: u32,
        /// Size of the backing file in /dev/shm (default 1G); with
        /// `--device`, how much of the device, from its start, every column
        /// reads (engine, kernel:* and fio alike; default: all of it).
        #[arg(long)]
        size: Option<String>,
        /// Use this block device instead of making a loop device. Every
        /// column reads the same region of it (see `--size`), and the
        /// engine's columns run with the device on the kernel's `none`.
        #[arg(long)]
        device: Option<PathBuf>,
        /// Nice value of the engine's service thread (-20..=19): in local
        /// mode (the default) it serves idle timers and the rings flow
        /// threads left; with `NAME@dispatcher` it submits and reaps
        /// every request.
        #[arg(long, default_value_t = 0, allow_hyphen_values = true, value_parser = clap::value_parser!(i32).range(-20..=19))]
        nice: i32,
        /// Engine reads go through io_uring's worker threads (IOSQE_ASYNC).
        #[arg(long)]
        async_submit: bool,
        /// Engine submissions through an SQPOLL kernel thread that spins
        /// this many ms when idle (0 = off; at most 60000).
        #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=60000))]
        sqpoll: u32,
        /// Measure each cell this many times, schedulers interleaved, and
        /// keep the run with the median IOPS (damps a busy machine's
        /// noise); every round is listed with the cache-line round trip
        /// between the first two CPUs, timed before it (a virtual
        /// machine's CPUs may sit close together or apart, and move),
        /// then each column's paired per-round ratios to the kernel and
        /// fio columns, to the engine's fifo on the same client and, for
        /// NAME@MODE, to the plain NAME (`paired_ratios` in --json).
        /// At least 1.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
        repeat: u32,
        /// Pin the benchmark's threads (the engine's flow threads and its
        /// service thread, which with `NAME@dispatcher` submits every
        /// request, or the kernel:* flow threads) to these CPUs
        /// (comma-separated); the device's own workers stay unpinned.
        /// Default: not pinned.
        #[arg(long, value_delimiter = ',')]
        cpus: Vec<usize>,
        /// How kernel:* flows are placed in cgroups: `one` (default: every
        /// flow thread in the benchmark's own cgroup, as the engine's
        /// flows, a multi-threaded server or fio's jobs are) or `per-flow`
        /// (each flow in its own blkio cgroup: kernel bfq then schedules
        /// and idles per group, and a loop device gets one worker per
        /// cgroup).
        #[arg(long, default_value = "one", value_parser = crate::args::kernel_groups)]
        kernel_groups: bfq_real::KernelGroups,
        /// How kernel:* flows of one request each issue it: `uring`
        /// (default, as the engine's flows) or `pread`.
        #[arg(long, default_value = "uring", value_parser = crate::args::kernel_client)]
        kernel_client: bfq_real::KernelClient,
        /// Do not run fio as a reference (by default it runs when installed:
        /// the same jobs x depth with io_uring, on the kernel's `none`,
        /// every job in the benchmark's own cgroup).
        #[arg(long)]
        no_fio: bool,
        /// The kernel schedulers fio runs on (comma-separated), e.g.
        /// `none,bfq`: one `fio:NAME` column each.
        #[arg(long, value_delimiter = ',', default_value = "none")]
        fio_on: Vec<String>,
    },
    /// Requests per second through the scheduler with io_uring NOPs.
    Nop {
        /// Schedulers (comma-separated); default fifo and bfq if
        /// registered. `NAME@dispatcher` submits through one dispatcher
        /// thread (`SubmitMode::Dispatcher`); `NAME` alone (or
        /// `NAME@local`) from each flow's thread, the default.
        #[arg(long, value_delimiter = ',')]
        schedulers: Vec<String>,
        /// Submitting threads (one flow each), 1..=4096.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4096))]
        flows: u32,
        /// Device queue depth of the engine (1..=4096).
        #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=4096))]
        depth: u32,
        /// Requests each flow keeps outstanding (1 to 65536; a flow waits
        /// for the oldest half, at least one, then refills: with 1 each
        /// request is waited for alone, on the thread's private ring).
        #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=65536))]
        window: u32,
        /// Seconds per scheduler (above 0, at most 604800: a week).
        #[arg(long, default_value_t = 2.0, value_parser = crate::args::seconds)]
        seconds: f64,
    },
    /// Greedy sequential readers with weights, engine vs kernel:bfq.
    Fairness {
        /// Engine scheduler(s) (default: bfq if registered, else fifo),
        /// each a column before kernel:bfq's (not to be given here);
        /// `NAME@dispatcher` submits through one dispatcher thread,
        /// `NAME@tpc` serves the readers from one tokio runtime per CPU.
        #[arg(long, value_delimiter = ',')]
        schedulers: Vec<String>,
        /// Seconds per run. BFQ serves a flow in turns of up to B_max
        /// sectors (auto-tuned from the peak rate: tens of MiB on a fast
        /// device), so the lightest of five readers gets a turn only a few
        /// times a second and one turn more or less is several percent of
        /// a short window: 20 s keeps that granularity near 3%. Above 0,
        /// at most 604800 (a week).
        #[arg(long, default_value_t = 20.0, value_parser = crate::args::seconds)]
        seconds: f64,
        /// Backing file (a regular file on a real filesystem, not tmpfs),
        /// created and filled if missing, removed afterwards if created.
        #[arg(long, default_value = "/var/tmp/bfq-fairness.img")]
        file: PathBuf,
        /// Size of the loop device the readers read (e.g. 1G, 512M): the
        /// size of the file created; an existing shorter file is
        /// extended (the extension is a hole), a longer one is not
        /// shrunk and the device covers its first SIZE bytes.
        #[arg(long, default_value = "1G")]
        size: String,
        /// Request size of the readers.
        #[arg(long, default_value = "64k")]
        block: String,
        /// Engine device queue depth.
        #[arg(long, default_value_t = 32)]
        depth: u32,
        /// Setting key=value for the engine schedulers other than fifo
        /// (repeatable), e.g. idle_on_queueing_devices=1.
        #[arg(long = "set")]
        set: Vec<String>,
        /// How the kernel:bfq readers issue requests: `uring` (default,
        /// as the engine's flows) or `pread`.
        #[arg(long, default_value = "uring", value_parser = crate::args::kernel_client)]
        kernel_client: bfq_real::KernelClient,
        /// The cases: each a reader's weight per reader, separated by `:`
        /// (2 to 64 readers, weights 1..=1000, the kernel's range), the
        /// cases by `,`.
        #[arg(long, default_value = "100:300,100:200:300:400:500", value_parser = weight_cases)]
        weights: WeightCases,
        /// Every this many seconds, read what the engine's scheduler did
        /// for each reader (turns granted, the budgets of those turns,
        /// requests injected into other readers' turns, service charged,
        /// service forfeited on rejoining B-WF2Q+) and B_max: the JSON's
        /// `timeline`, per window, beside each reader's
        /// `bytes_per_second` (engine columns only; the kernel
        /// exposes none of it). At least 0.1 s, at most 100000 windows
        /// over `--seconds`. Default: not read.
        #[arg(long, value_parser = crate::args::seconds)]
        timeline: Option<f64>,
        /// Where the engine columns' readers sit: `per-reader`, each alone
        /// in a group carrying its weight, the layout kernel:bfq's readers
        /// have (each in a blkio cgroup of its own, the only way to give
        /// the kernel arbitrary weights), so both schedule groups; `none`,
        /// every reader in the root group with its own weight.
        #[arg(long, value_enum, default_value_t = EngineGroups::PerReader)]
        engine_groups: EngineGroups,
    },
}

/// `fairness --engine-groups`: where the engine columns' readers sit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineGroups {
    /// Each reader alone in a group of its weight (kernel:bfq's layout).
    PerReader,
    /// Every reader in the root group with its weight.
    None,
}

/// `fairness --timeline`: how often the engine's scheduler is read.
type Timeline = Option<Duration>;

/// `fairness`'s cases: the readers' weights of each.
#[derive(Clone, Debug)]
pub struct WeightCases(Vec<Vec<u32>>);

/// `--weights`: cases separated by `,`, each 2 to 64 weights in
/// 1..=1000 separated by `:`.
fn weight_cases(s: &str) -> Result<WeightCases, String> {
    let case = |c: &str| -> Result<Vec<u32>, String> {
        let w = c
            .split(':')
            .map(|w| match w.trim().parse::<u32>() {
                Ok(n @ 1..=1000) => Ok(n),
                _ => Err(format!("'{w}' in '{c}' is not a weight in 1..=1000")),
            })
            .collect::<Result<Vec<u32>, String>>()?;
        match w.len() {
            2..=64 => Ok(w),
            1 => Err(format!(
                "'{c}': one reader gets all of the bandwidth whatever its weight; give 2 to 64"
            )),
            _ => Err(format!("'{c}': {} readers; give 2 to 64", w.len())),
        }
    };
    s.split(',')
        .map(case)
        .collect::<Result<_, _>>()
        .map(WeightCases)
}

/// An engine column (`NAME[@mode]`): its scheduler and how it runs.
struct Column<'a> {
    name: &'a str,
    submit: SubmitMode,
    /// Local mode: private rings for a thread's lone blocking wait.
    private_rings: bool,
    coop: CoopTaskrun,
    /// Who drives the flows (`bfq_real::run`'s columns only).
    client: EngineClient,
}

/// `NAME@dispatcher`: dispatcher mode; `NAME@shared`: local submission
/// without private rings; `NAME@coop` and `NAME@nocoop`: local
/// submission on rings with and without `COOP_TASKRUN`; `NAME@tpc`: the
/// flows served by one tokio runtime per CPU, each runtime's ring bound
/// to it (`EngineClient::ThreadPerCore`); `NAME@local` or `NAME`: local
/// submission with private rings, `COOP_TASKRUN` chosen per thread (the
/// engine's default), one thread per flow.
fn split_mode(s: &str) -> Column<'_> {
    let local = |name, private_rings, coop| Column {
        name,
        submit: SubmitMode::Local,
        private_rings,
        coop,
        client: EngineClient::Threads,
    };
    if let Some(name) = s.strip_suffix("@dispatcher") {
        return Column {
            submit: SubmitMode::Dispatcher,
            ..local(name, true, CoopTaskrun::Auto)
        };
    }
    if let Some(name) = s.strip_suffix("@tpc") {
        return Column {
            client: EngineClient::ThreadPerCore,
            ..local(name, true, CoopTaskrun::Auto)
        };
    }
    if let Some(name) = s.strip_suffix("@shared") {
        return local(name, false, CoopTaskrun::Auto);
    }
    if let Some(name) = s.strip_suffix("@coop") {
        return local(name, true, CoopTaskrun::On);
    }
    if let Some(name) = s.strip_suffix("@nocoop") {
        return local(name, true, CoopTaskrun::Off);
    }
    local(
        s.strip_suffix("@local").unwrap_or(s),
        true,
        CoopTaskrun::Auto,
    )
}

/// The run of column `s` (`NAME[@mode]`, [`split_mode`]) on `dev` for
/// `seconds`, its scheduler with `settings`.
fn column_config(dev: &std::path::Path, s: &str, settings: Settings, seconds: f64) -> RunConfig {
    let c = split_mode(s);
    let mut cfg = RunConfig::new(
        dev,
        Backend::parse(c.name, settings),
        Duration::from_secs_f64(seconds),
    );
    cfg.submit_mode = c.submit;
    cfg.private_rings = c.private_rings;
    cfg.coop_taskrun = c.coop;
    cfg.client = c.client;
    cfg
}

fn registered(name: &str) -> bool {
    bfq_schedulers::build(name, &Settings::new()).is_ok()
}

fn default_engine_scheds(with_fifo: bool) -> Vec<String> {
    let mut v = Vec::new();
    if with_fifo || !registered("bfq") {
        v.push("fifo".to_string());
    }
    if registered("bfq") {
        v.push("bfq".to_string());
    }
    v
}

fn report_json(r: &RunReport) -> Value {
    let mut v = report_fields(r);
    if let Some(e) = &r.engine {
        v["engine"] = engine_stats_json(e);
    }
    v
}

/// Warns, naming the column `label`, when the run's engine could not set
/// up some thread's ring: its figures then understate the engine.
fn warn_ring_setup(label: &str, e: Option<&EngineStats>) {
    if let Some(w) = e.and_then(bfq_real::ring_setup_warning) {
        eprintln!("bfq: warning: {label}: {w}");
    }
}

/// The engine's counters of a run (every field of `EngineStats`): where
/// requests completed and who woke their waiters (docs/engine.md, "Where
/// a result waits"), the idle timers the scheduler asked for.
fn engine_stats_json(e: &EngineStats) -> Value {
    json!({
        "completed": e.completed, "errors": e.errors, "cancelled": e.cancelled,
        "queued": e.queued, "in_flight": e.in_flight, "held": e.held,
        "refused_full": e.refused_full, "refused_invalid": e.refused_invalid,
        "broken": e.broken, "device_idles": e.device_idles,
        "private_waits": e.private_waits,
        "service_submits": e.service_submits, "parks": e.parks,
        "linger_wakes": e.linger_wakes,
        "timers_armed": e.timers_armed, "timers_fired": e.timers_fired,
        "foreign_completions": e.foreign_completions,
        "service_completions": e.service_completions, "cross_wakes": e.cross_wakes,
        "coop_switches": e.coop_switches,
        "ring_setup_failed": e.ring_setup_failed, "ring_setup_errno": e.ring_setup_errno,
        "bound_takeovers": e.bound_takeovers,
        "core_waits": e.core_waits, "core_wait_ns": e.core_wait_ns,
        "latency_bucket_us": "bucket 0 < 1 us, bucket i in [2^(i-1), 2^i) us (1024 ns units)",
        "own_latency": e.own_latency, "foreign_latency": e.foreign_latency,
        "wake_latency": e.wake_latency,
    })
}

/// A run's own figures as JSON.
fn report_fields(r: &RunReport) -> Value {
    json!({
        "backend": r.backend,
        "seconds": r.seconds,
        "iops": r.iops(),
        "cpu_us_per_io": r.cpu_us_per_io(),
        "mib_s": r.total_bytes() as f64 / r.seconds / 1048576.0,
        "flows": r.flows.iter().zip(r.shares()).map(|(f, (got, due))| json!({
            "name": f.name, "weight": f.weight, "ios": f.ios, "bytes": f.bytes,
            "errors": f.errors, "share": got, "weight_share": due,
            "lat_mean_us": f.lat_mean_us, "lat_p99_us": f.lat_p99_us,
        })).collect::<Vec<_>>(),
    })
}

/// The bytes every column of `randread` reads, from the start of a target
/// of `len` bytes: `requested` (all of the target if `None`), whole 4 KiB
/// blocks, at least one block and no more than the target.
fn read_region(len: u64, requested: Option<u64>) -> anyhow::Result<u64> {
    let want = requested.unwrap_or(len);
    if want > len {
        anyhow::bail!("--size {want} is larger than the device ({len} bytes)");
    }
    let region = want / 4096 * 4096;
    if region == 0 {
        anyhow::bail!("the region read ({want} bytes) holds no 4 KiB block");
    }
    Ok(region)
}

/// A loop device over a fresh file, removed (with the file) on drop;
/// both noted for `bfq cleanup` if the process is killed first.
struct TempLoop {
    dev: Option<LoopDevice>,
    file: PathBuf,
    created: Option<bfq_real::leftovers::Note>,
}

impl TempLoop {
    fn new(file: PathBuf, size: u64, direct: bool) -> anyhow::Result<TempLoop> {
        let created = !file.exists();
        if created {
            bfq_real::create_filled(&file, size)?;
        }
        let mut t = TempLoop {
            dev: None,
            created: created.then(|| bfq_real::leftovers::Note::file(&file)),
            file,
        };
        t.dev = Some(LoopDevice::create(&t.file, size, direct)?);
        Ok(t)
    }
    fn path(&self) -> PathBuf {
        self.dev.as_ref().expect("attached").path().to_path_buf()
    }
}

impl Drop for TempLoop {
    fn drop(&mut self) {
        drop(self.dev.take());
        if let Some(note) = self.created.take() {
            let _ = std::fs::remove_file(&self.file);
            drop(note);
        }
    }
}

/// Checks randread's columns (`--schedulers`, `--fio-on`) before anything
/// runs, and pins the benchmark to `--cpus`.
fn randread_prepare(
    (flows, depth): (&[u32], u32),
    schedulers: &[String],
    fio_on: &[String],
    cpus: &[usize],
) -> anyhow::Result<()> {
    check_depth_for_flows(flows, depth)?;
    check_columns(schedulers, true)?;
    for k in fio_on {
        bfq_real::desc::check_kernel_scheduler(k).map_err(|e| anyhow::anyhow!("--fio-on: {e}"))?;
    }
    if !cpus.is_empty() {
        sys::pin_current_thread(cpus)?;
    }
    Ok(())
}

/// Refuses a `--depth` below a `--flows` count: the flows share the
/// depth (depth / flows each, rounded down), and a flow keeps one request
/// out at least, so more than `depth` would be outstanding.
fn check_depth_for_flows(flows: &[u32], depth: u32) -> anyhow::Result<()> {
    match flows.iter().copied().max() {
        Some(n) if n > depth => anyhow::bail!(
            "--depth {depth} is below --flows {n}: the flows share --depth, each keeping one \
             request out at least; give --depth {n} or more (at most 4096), or fewer flows"
        ),
        _ => Ok(()),
    }
}

pub fn run(a: Args) -> anyhow::Result<()> {
    match a.cmd {
        BenchCmd::Randread {
            flows,
            schedulers,
            seconds,
            depth,
            size,
            device,
            nice,
            async_submit,
            repeat,
            sqpoll,
            cpus,
            kernel_groups,
            kernel_client,
            no_fio,
            fio_on,
        } => {
            randread_prepare((&flows, depth), &schedulers, &fio_on, &cpus)?;
            randread(
                flows,
                schedulers,
                seconds,
                depth,
                size.as_deref(),
                device,
                (nice, async_submit, repeat.max(1), sqpoll),
                (
                    (kernel_groups, kernel_client),
                    if no_fio { Vec::new() } else { fio_on },
                ),
                a.json,
            )
        }
        BenchCmd::Nop {
            schedulers,
            flows,
            depth,
            window,
            seconds,
        } => {
            check_columns(&schedulers, false)?;
            nop(schedulers, flows, depth, window, seconds, a.json)
        }
        BenchCmd::Fairness {
            schedulers,
            seconds,
            file,
            size,
            block,
            depth,
            set,
            kernel_client,
            weights,
            timeline,
            engine_groups,
        } => {
            check_columns(&schedulers, true)?;
            if schedulers.iter().any(|s| s == "kernel:bfq") {
                anyhow::bail!(
                    "--schedulers kernel:bfq: fairness runs kernel:bfq after the engine's \
                     columns anyway (it ran twice); --schedulers takes engine schedulers"
                );
            }
            let timeline = timeline.map(Duration::from_secs_f64);
            fairness(
                schedulers,
                seconds,
                file,
                (&size, &block, &weights.0),
                (depth, set, kernel_client, timeline, engine_groups),
                a.json,
            )
        }
    }
}

/// Refuses a column whose scheduler is unknown (`NAME[@mode]`, see
/// [`split_mode`]; `kernel:NAME` where `kernel`, for the benchmarks
/// whose columns are `bfq_real` runs), naming the known ones, and
/// `@tpc` but on a project's scheduler in such a benchmark, before
/// anything runs.
fn check_columns(scheds: &[String], kernel: bool) -> anyhow::Result<()> {
    for s in scheds {
        let c = split_mode(s);
        crate::args::check_backend(c.name, kernel)?;
        if c.client == EngineClient::ThreadPerCore && (!kernel || c.name.starts_with("kernel:")) {
            anyhow::bail!(
                "{s}: @tpc serves a run's flows from runtimes on the engine; \
                 not for nop's threads or kernel:*"
            );
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn randread(
    flows: Vec<u32>,
    schedulers: Vec<String>,
    seconds: f64,
    depth: u32,
    size: Option<&str>,
    device: Option<PathBuf>,
    (nice, async_submit, repeat, sqpoll): (i32, bool, u32, u32),
    ((kernel_groups, kernel_client), fio_on): (
        (bfq_real::KernelGroups, bfq_real::KernelClient),
        Vec<String>,
    ),
    json_out: bool,
) -> anyhow::Result<()> {
    sys::require_root("bench-engine randread (loop device, kernel schedulers)")?;
    let size = size.map(crate::loopdev::parse_size).transpose()?;
    let (scheds, fio) = randread_columns(schedulers, &fio_on);
    // Ctrl-C or SIGTERM stops the column under way (each run, and fio's,
    // looks for it); the loop device and its file in /dev/shm are then
    // removed.
    let _signals = sys::catch_interrupts();
    let (_tmp, dev, size) = randread_target(device, size)?;
    let b = Randread {
        dev,
        size,
        seconds,
        depth,
        scheds,
        fio,
        engine: (nice, async_submit, sqpoll),
        kernel: (kernel_groups, kernel_client),
    };
    let mut rows = Vec::new();
    let mut rounds: Vec<Rounds> = Vec::new();
    if let Some(&n) = flows.first() {
        b.warm_up(n)?;
    }
    for &n in &flows {
        let (row, r) = b.row(n, repeat)?;
        rows.push(row);
        rounds.push(r);
    }
    // Where the benchmark's threads may run (see --cpus).
    let cpus = sys::current_cpus()?;
    if json_out {
        return b.print_json(&rows, &rounds, &cpus);
    }
    b.print_table(&rows, &cpus);
    if repeat > 1 {
        print_rounds(&rows, &rounds);
        print!("{}", paired_table(&b.scheds, &rows, &rounds));
    }
    Ok(())
}

/// `randread`'s columns: the schedulers given (default: fifo, bfq if
/// registered, kernel:bfq, kernel:none), then one `fio:NAME` column per
/// `--fio-on` scheduler when fio runs; with fio's version (`None`, with
/// why on stderr, when it is missing).
fn randread_columns(schedulers: Vec<String>, fio_on: &[String]) -> (Vec<String>, Option<String>) {
    let mut scheds = schedulers;
    if scheds.is_empty() {
        scheds = default_engine_scheds(true);
        scheds.push("kernel:bfq".into());
        scheds.push("kernel:none".into());
    }
    let fio = match (!fio_on.is_empty(), crate::fio_ref::available()) {
        (false, _) => None,
        (true, Ok(version)) => Some(version),
        (true, Err(why)) => {
            eprintln!("bench-engine randread: no fio reference: {why}");
            None
        }
    };
    if fio.is_some() {
        scheds.extend(
            fio_on
                .iter()
                .map(|k| format!("{}{k}", crate::fio_ref::PREFIX)),
        );
    }
    (scheds, fio)
}

/// What `randread` reads and how much: `device` (its first `size` bytes,
/// all of it by default; see [`read_region`]), or else a loop device over
/// a fresh file of `size` (default 1 GiB) in /dev/shm, kept (and removed
/// on drop) in the first element.
fn randread_target(
    device: Option<PathBuf>,
    size: Option<u64>,
) -> anyhow::Result<(Option<TempLoop>, PathBuf, u64)> {
    Ok(match device {
        Some(d) => {
            let meta =
                std::fs::metadata(&d).map_err(|e| anyhow::anyhow!("{}: {e}", d.display()))?;
            if !std::os::unix::fs::FileTypeExt::is_block_device(&meta.file_type()) {
                anyhow::bail!(
                    "--device {}: not a block device (every column runs on it under a \
                     kernel scheduler it sets; without --device, a loop device over \
                     /dev/shm)",
                    d.display()
                );
            }
            let len =
                bfq_real::target_len(&d).map_err(|e| anyhow::anyhow!("{}: {e}", d.display()))?;
            let region =
                read_region(len, size).map_err(|e| anyhow::anyhow!("{}: {e}", d.display()))?;
            (None, d, region)
        }
        None => {
            let size = read_region(u64::MAX, Some(size.unwrap_or(1 << 30)))?;
            let file = PathBuf::from(format!("/dev/shm/bfq-randread-{}.img", std::process::id()));
            let tmp = TempLoop::new(file, size, true)?;
            let dev = tmp.path();
            (Some(tmp), dev, size)
        }
    })
}

/// One row of `randread`'s table: the flow count, each flow's depth and
/// each column's run with the median IOPS.
type RandreadRow = (u32, u32, Vec<(String, RunReport)>);

/// One `randread` benchmark: the region of a device every column reads
/// and what every run shares.
struct Randread {
    dev: PathBuf,
    /// Bytes read, from the device's start.
    size: u64,
    seconds: f64,
    /// Requests outstanding in total, split among the flows.
    depth: u32,
    /// The columns: engine schedulers (`NAME[@mode]`), kernel:* and fio:*.
    scheds: Vec<String>,
    /// fio's version, when it runs.
    fio: Option<String>,
    /// The engine's dispatcher nice value, IOSQE_ASYNC and SQPOLL idle ms.
    engine: (i32, bool, u32),
    /// How kernel:* flows are placed in cgroups and issue requests.
    kernel: (bfq_real::KernelGroups, bfq_real::KernelClient),
}

impl Randread {
    /// The row of `n` flows: every column measured `repeat` times,
    /// columns interleaved and their order rotated every round (the
    /// first run of a benchmark is slower: no column always takes it),
    /// keeping each column's median run; with each column's IOPS per
    /// round in run order.
    fn row(&self, n: u32, repeat: u32) -> anyhow::Result<(RandreadRow, Rounds)> {
        let (per, descs) = self.flows(n);
        let mut runs: Vec<Vec<RunReport>> = self.scheds.iter().map(|_| Vec::new()).collect();
        // Each column's rounds in run order: rounds of the columns run
        // side by side, so their ratios pair up.
        let mut rounds: Rounds = self.scheds.iter().map(|_| Vec::new()).collect();
        let m = self.scheds.len();
        for round in 0..repeat as usize {
            for j in 0..m {
                let k = (j + round) % m;
                let trip = self.probe();
                let sampler = BusySampler::start(&[], cpu_busy::SAMPLE_EVERY).ok();
                let r = self.measure(&self.scheds[k], (n, per), &descs)?;
                let busy = sampler.and_then(BusySampler::finish);
                rounds[k].push(Round {
                    iops: r.iops(),
                    trip,
                    busy,
                });
                runs[k].push(r);
            }
        }
        let mut row = Vec::new();
        for (s, mut v) in self.scheds.iter().zip(runs) {
            v.sort_by(|a, b| a.iops().total_cmp(&b.iops()));
            let median = v.swap_remove(v.len() / 2);
            row.push((s.clone(), median));
        }
        Ok(((n, per, row), rounds))
    }

    /// The cache-line round trip between the first two CPUs the
    /// benchmark may run on (`bfq_real::cpu_probe`), before a round;
    /// `None` with one CPU, or where a thread cannot be pinned (the
    /// figure only annotates the round).
    fn probe(&self) -> Option<f64> {
        match sys::current_cpus().ok()?[..] {
            [a, b, ..] => cache_round_trip_ns(a, b, PROBE_TRIPS).ok(),
            _ => None,
        }
    }

    /// `n` flows of random 4 KiB reads sharing the benchmark's depth
    /// (at least 1 each): the depth per flow and the flows.
    fn flows(&self, n: u32) -> (u32, Vec<FlowDesc>) {
        let per = (self.depth / n.max(1)).max(1);
        let descs = (0..n)
            .map(|i| {
                let mut f = FlowDesc::reader(&format!("r{i}"), Pattern::Rand, 4096);
                f.depth = per;
                // Every flow reads the same region (fio's jobs too).
                f.region = Some((0, self.size));
                f.weight = Some(100);
                f
            })
            .collect();
        (per, descs)
    }

    /// One run of the first column with `n` flows, its figures dropped:
    /// the first run of a benchmark process was 10-30% slower than the
    /// rounds after it (1 x 64 on /dev/shm: 263-314 K IOPS against
    /// 337-399 K, in five runs of five), which would bias whichever
    /// column took it.
    fn warm_up(&self, n: u32) -> anyhow::Result<()> {
        let (per, descs) = self.flows(n);
        self.measure(&self.scheds[0], (n, per), &descs).map(drop)
    }

    /// One run of column `s` with `n` flows of depth `per` each (`descs`):
    /// fio for `fio:NAME`, else the engine (with the device on the
    /// kernel's `none`) or the kernel's scheduler. Any failed request is
    /// an error.
    fn measure(
        &self,
        s: &str,
        (n, per): (u32, u32),
        descs: &[FlowDesc],
    ) -> anyhow::Result<RunReport> {
        let dev = &self.dev;
        if let Some(ks) = s.strip_prefix(crate::fio_ref::PREFIX) {
            let secs = Duration::from_secs_f64(self.seconds);
            return crate::fio_ref::randread(dev, ks, (n, per), self.size, secs);
        }
        let mut cfg = column_config(dev, s, Settings::new(), self.seconds);
        cfg.queue_depth = self.depth;
        (cfg.dispatcher_nice, cfg.async_submit, cfg.sqpoll_idle_ms) = self.engine;
        (cfg.kernel_groups, cfg.kernel_client) = self.kernel;
        // The engine submits to the device's own queue: run it on
        // `none`, as kernel:none and fio:none are (a device given
        // with --device may have another scheduler).
        let _none = match &cfg.backend {
            Backend::Engine { .. } => Some(sys::SchedulerGuard::set(dev, "none")?),
            Backend::Kernel { .. } => None,
        };
        let mut r = bfq_real::run(&cfg, descs).map_err(|e| anyhow::anyhow!("{s}: {e}"))?;
        warn_ring_setup(s, r.engine.as_ref());
        r.backend = s.to_string();
        let errs: u64 = r.flows.iter().map(|f| f.errors).sum();
        if errs > 0 {
            anyhow::bail!("{s}: {errs} errors: {:?}", r.flows[0].first_error);
        }
        Ok(r)
    }

    /// Prints the benchmark, its rows and each column's IOPS per round,
    /// with the CPUs' cache-line round trip before each, as JSON.
    fn print_json(
        &self,
        rows: &[RandreadRow],
        rounds: &[Rounds],
        cpus: &[usize],
    ) -> anyhow::Result<()> {
        let (dev, size, depth, seconds) = (&self.dev, self.size, self.depth, self.seconds);
        let (kernel_groups, kernel_client) = self.kernel;
        let mut v: Vec<Value> = rows
            .iter()
            .zip(rounds)
            .map(|((n, per, row), rounds)| {
                let results = row.iter().zip(rounds).map(|((_, r), col)| {
                    let mut v = report_json(r);
                    v["iops_rounds"] = json!(col.iter().map(|x| x.iops).collect::<Vec<_>>());
                    v["round_trip_ns_rounds"] =
                        json!(col.iter().map(|x| x.trip).collect::<Vec<_>>());
                    v["cpu_busy_rounds"] = json!(col.iter().map(|x| x.busy).collect::<Vec<_>>());
                    v
                });
                json!({"flows": n, "depth_per_flow": per, "results": results.collect::<Vec<_>>()})
            })
            .collect();
        for (row, col, reference, (m, lo, hi)) in paired_ratios(&self.scheds, rounds) {
            let p = json!({"column": col, "reference": reference, "median": m, "least": lo, "most": hi});
            match v[row]
                .get_mut("paired_ratios")
                .and_then(Value::as_array_mut)
            {
                Some(a) => a.push(p),
                None => v[row]["paired_ratios"] = json!([p]),
            }
        }
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
            "bench": "randread", "device": dev, "loop_direct_io": sys::loop_direct_io(dev),
            "region_bytes": size, "block": 4096, "total_depth": depth,
            "seconds": seconds, "cpus": cpus, "kernel_groups": kernel_groups.name(),
            "kernel_client": kernel_client.name(), "fio": self.fio, "rows": v}))?
        );
        Ok(())
    }

    /// Prints the benchmark's line and its table ([`randread_table`]).
    fn print_table(&self, rows: &[RandreadRow], cpus: &[usize]) {
        self.print_title(cpus);
        print!("{}", randread_table(&self.scheds, rows));
    }

    /// Prints the line saying what the table measured: the device (and
    /// whether a loop device reads with direct I/O), the region, the
    /// depth, the run length, the CPUs, how kernel:* flows run, and fio's
    /// jobs when it runs.
    fn print_title(&self, cpus: &[usize]) {
        let (dev, size, depth, seconds) = (&self.dev, self.size, self.depth, self.seconds);
        let (kernel_groups, kernel_client) = self.kernel;
        let dio = match sys::loop_direct_io(dev) {
            Some(true) => ", a loop device with direct I/O",
            Some(false) => ", a BUFFERED loop device (reads may come from the page cache)",
            None => "",
        };
        println!(
            "4 KiB random reads on {}{dio} (the first {} MiB), {} requests outstanding in total (qd/fl per flow), {seconds} s each, \
             threads on CPUs {cpus:?}; kernel:* flows {}, {} at depth 1{}",
            dev.display(),
            size >> 20,
            depth,
            match kernel_groups {
                bfq_real::KernelGroups::One => "in one cgroup",
                bfq_real::KernelGroups::PerFlow => "in a cgroup each",
                bfq_real::KernelGroups::PerProcess => "a process and a cgroup each",
            },
            kernel_client.name(),
            self.fio
                .as_ref()
                .map(|v| format!("; {v}: jobs x depth = flows x qd/fl, io_uring, one cgroup"))
                .unwrap_or_default()
        );
    }
}

/// `randread`'s table: the columns' header and a line per row, each
/// column's K IOPS and CPU per request, then each engine scheduler's IOPS
/// as a ratio to every kernel or fio column (the reference columns); with
/// no reference column or no engine column, no ratios.
fn randread_table(scheds: &[String], rows: &[RandreadRow]) -> String {
    use std::fmt::Write as _;
    let is_ref = |s: &str| s.starts_with("kernel:") || s.starts_with(crate::fio_ref::PREFIX);
    let refs: Vec<&str> = scheds
        .iter()
        .map(String::as_str)
        .filter(|s| is_ref(s))
        .collect();
    let ratios = !refs.is_empty() && refs.len() < scheds.len();
    let mut t = format!("{:>6} {:>6}", "flows", "qd/fl");
    for s in scheds {
        let _ = write!(t, " {s:>13}");
    }
    let _ = write!(t, "\n{:13}   (K IOPS [process CPU us per request]", "");
    if ratios {
        let _ = write!(t, "; ratios to {}", refs.join(" / "));
    }
    t += ")\n";
    for (n, per, row) in rows {
        let _ = write!(t, "{n:>6} {per:>6}");
        for (_, r) in row {
            let _ = write!(t, " {:>7.1} [{:>3.1}]", r.iops() / 1e3, r.cpu_us_per_io());
        }
        for (s, r) in row.iter().filter(|(s, _)| ratios && !is_ref(s)) {
            let _ = write!(t, "  {s}:");
            for (k, kr) in row.iter().filter(|(k, _)| is_ref(k)) {
                let _ = write!(t, " {:.2}x {k}", r.iops() / kr.iops().max(1e-9));
            }
        }
        t += "\n";
    }
    t
}

/// One round of a column: its IOPS, the CPUs' cache-line round trip in
/// ns before it (`None` with one CPU), and the share of time the
/// machine's CPUs were busy during it (`bfq_real::cpu_busy`; `None` where
/// it could not be read).
struct Round {
    iops: f64,
    trip: Option<f64>,
    busy: Option<f64>,
}

impl Round {
    /// The round in the rounds table: K IOPS, `@` the round trip in ns,
    /// `,` the CPUs' busy share in percent (each where known).
    fn cell(&self) -> String {
        let mut c = format!("{:.0}", self.iops / 1e3);
        if let Some(t) = self.trip {
            c += &format!("@{t:.0}");
        }
        if let Some(b) = self.busy {
            c += &format!(",{:.0}%", b * 100.0);
        }
        c
    }
}

/// A row's rounds: per column, in run order.
type Rounds = Vec<Vec<Round>>;

/// Prints each column's K IOPS of every round, in run order, per row
/// (`--repeat` above 1; the table shows the median).
fn print_rounds(rows: &[RandreadRow], rounds: &[Rounds]) {
    println!(
        "K IOPS of each round, in run order (the table shows the median), \
         @ the CPUs' cache-line round trip in ns before it, and how busy the \
         machine's CPUs were during it:"
    );
    for ((n, per, _), r) in rows.iter().zip(rounds) {
        print!("{n:>6} {per:>6}");
        for col in r {
            let v: Vec<String> = col.iter().map(Round::cell).collect();
            print!("  {}", v.join("/"));
        }
        println!();
    }
}

/// The columns a column is compared with round by round: every kernel
/// or fio column (the references); for an engine column `NAME[@MODE]`
/// other than fifo, the engine's `fifo[@MODE]` where it runs (so bfq's
/// cost over fifo's shows on the same client); and for `NAME@MODE`, the
/// plain `NAME` column where it runs (the mode against the default).
fn paired_refs<'a>(col: &str, scheds: &'a [String]) -> Vec<&'a str> {
    let is_ref = |s: &str| s.starts_with("kernel:") || s.starts_with(crate::fio_ref::PREFIX);
    if is_ref(col) {
        return Vec::new();
    }
    let (name, fifo) = match col.split_once('@') {
        Some((name, mode)) => (Some(name), format!("fifo@{mode}")),
        None => (None, "fifo".to_string()),
    };
    scheds
        .iter()
        .map(String::as_str)
        .filter(|&s| s != col && (is_ref(s) || s == fifo || Some(s) == name))
        .collect()
}

/// Each row's paired ratios ([`paired_ratio`]) of every column to the
/// columns it is compared with ([`paired_refs`]): (row index, column,
/// reference, (median, least, most)).
fn paired_ratios<'a>(
    scheds: &'a [String],
    rounds: &'a [Rounds],
) -> impl Iterator<Item = (usize, &'a str, &'a str, (f64, f64, f64))> + 'a {
    rounds.iter().enumerate().flat_map(move |(row, r)| {
        scheds.iter().enumerate().flat_map(move |(i, col)| {
            paired_refs(col, scheds)
                .into_iter()
                .filter_map(move |reference| {
                    let j = scheds.iter().position(|s| s == reference)?;
                    let m = paired_ratio(&r[i], &r[j])?;
                    Some((row, col.as_str(), reference, m))
                })
        })
    })
}

/// Paired per-round ratios of `a`'s IOPS to `b`'s: round `i` of each
/// column ran in the same rotation of the columns, so the machine's
/// state drifts less between the two than between medians taken over
/// the whole row. The median, the least and the most; `None` without
/// rounds.
fn paired_ratio(a: &[Round], b: &[Round]) -> Option<(f64, f64, f64)> {
    let mut r: Vec<f64> = a
        .iter()
        .zip(b)
        .map(|(x, y)| x.iops / y.iops.max(1e-9))
        .collect();
    r.sort_by(f64::total_cmp);
    let median = match r.len() {
        0 => return None,
        n if n % 2 == 1 => r[n / 2],
        n => (r[n / 2 - 1] + r[n / 2]) / 2.0,
    };
    Some((median, r[0], r[r.len() - 1]))
}

/// Each column's paired per-round ratios ([`paired_ratio`]) to the
/// columns it is compared with ([`paired_refs`]), a line per row; empty
/// where no column has one.
fn paired_table(scheds: &[String], rows: &[RandreadRow], rounds: &[Rounds]) -> String {
    use std::fmt::Write as _;
    let mut cells = vec![String::new(); rows.len()];
    for (row, col, reference, (m, lo, hi)) in paired_ratios(scheds, rounds) {
        let _ = write!(cells[row], "  {col}/{reference} {m:.2} [{lo:.2}-{hi:.2}]");
    }
    let mut lines = String::new();
    for ((n, per, _), line) in rows.iter().zip(&cells) {
        if !line.is_empty() {
            let _ = writeln!(lines, "{n:>6} {per:>6}{line}");
        }
    }
    if lines.is_empty() {
        return lines;
    }
    "Paired ratios (the median [least-most] over the rounds of each round's IOPS \
     over those of the column run beside it in the same rotation):\n"
        .to_string()
        + &lines
}

fn nop(
    schedulers: Vec<String>,
    flows: u32,
    depth: u32,
    window: u32,
    seconds: f64,
    json_out: bool,
) -> anyhow::Result<()> {
    let scheds = if schedulers.is_empty() {
        default_engine_scheds(true)
    } else {
        schedulers
    };
    let mut out = Vec::new();
    for s in &scheds {
        let (rate, cpu_ns, stats) = nop_measure(s, flows, depth, window, seconds)?;
        out.push((s.clone(), rate, cpu_ns, stats));
    }
    print_nop(&out, (flows, depth, window, seconds), json_out)
}

/// One `nop` column: `flows` threads keep `window` NOPs each outstanding
/// through an engine on scheduler `s` (`NAME[@mode]`, see [`split_mode`])
/// of device depth `depth` for `seconds`. Requests per second, process
/// CPU ns per request and the service thread's stats.
fn nop_measure(
    s: &str,
    flows: u32,
    depth: u32,
    window: u32,
    seconds: f64,
) -> anyhow::Result<(f64, f64, EngineStats)> {
    let c = split_mode(s);
    let engine = Engine::nop()
        .scheduler(c.name)
        .submit_mode(c.submit)
        .private_rings(c.private_rings)
        .coop_taskrun(c.coop)
        .queue_depth(depth)
        .max_requests(
            flows
                .saturating_mul(window)
                .max(bfq_engine::DEFAULT_MAX_REQUESTS),
        )
        .open()?;
    let stop = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..flows)
        .map(|i| {
            let flow = engine.flow(FlowOptions::weight(100).sync(false))?;
            let stop = stop.clone();
            Ok(std::thread::spawn(move || {
                nop_flow(&flow, i, window, &stop)
            }))
        })
        .collect::<anyhow::Result<_>>()?;
    let t0 = Instant::now();
    let cpu0 = bfq_real::process_cpu_seconds();
    std::thread::sleep(Duration::from_secs_f64(seconds));
    stop.store(true, Ordering::Relaxed);
    let total: u64 = handles.into_iter().map(|h| h.join().unwrap_or(0)).sum();
    let secs = t0.elapsed().as_secs_f64();
    let stats = engine.shutdown(ShutdownMode::Drain)?;
    warn_ring_setup(s, Some(&stats));
    // Process CPU per request (all threads, the service thread's too):
    // what a loaded machine changes least.
    let cpu_ns = (bfq_real::process_cpu_seconds() - cpu0) * 1e9 / total.max(1) as f64;
    Ok((total as f64 / secs, cpu_ns, stats))
}

/// One `nop` flow thread (the `i`th): keeps `window` NOPs outstanding
/// until `stop`, then waits for the rest. The requests it counted done.
fn nop_flow(flow: &Flow, i: u32, window: u32, stop: &AtomicBool) -> u64 {
    let mut q = std::collections::VecDeque::with_capacity(window as usize);
    let mut done = 0u64;
    let mut sector = u64::from(i) << 32;
    while !stop.load(Ordering::Relaxed) {
        while q.len() < window as usize {
            q.push_back(flow.nop_async(sector, 8));
            sector += 8;
        }
        // Wait for half the window (at least one request), then
        // refill.
        for _ in 0..window.div_ceil(2) {
            let p = q.pop_front().expect("window");
            if p.wait().0.is_ok() {
                done += 1;
            }
        }
    }
    for p in q {
        let _ = p.wait();
        done += 1;
    }
    done
}

/// Prints `nop`'s columns (scheduler, requests per second, CPU ns per
/// request, service stats) as JSON or as a table.
fn print_nop(
    out: &[(String, f64, f64, EngineStats)],
    (flows, depth, window, seconds): (u32, u32, u32, f64),
    json_out: bool,
) -> anyhow::Result<()> {
    if json_out {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "bench": "nop", "flows": flows, "depth": depth, "window": window, "seconds": seconds,
                "results": out.iter().map(|(s, r, cpu, st)| json!({"scheduler": s, "req_per_s": r, "cpu_ns_per_req": cpu, "service_parks": st.parks, "service_submits": st.service_submits})).collect::<Vec<_>>()
            }))?
        );
    } else {
        println!("io_uring NOP requests through the engine: {flows} flow(s), window {window}, device depth {depth}, {seconds} s");
        for (s, r, cpu, st) in out {
            println!(
                "{s:>16}: {:>8.0} K req/s  {cpu:>5.0} ns CPU/req  (service thread: parked {} times, submitted {})",
                r / 1e3,
                st.parks,
                st.service_submits
            );
        }
    }
    Ok(())
}

/// The worst share error `fairness` aims at (docs/engine.md, "Status"):
/// no reader's share of the bytes more than 5% away from its weight's
/// share, relative to it.
const FAIRNESS_TOLERANCE: f64 = 0.05;

/// Runs shorter than this (seconds) show BFQ's turns in the lightest
/// reader's share (the `--seconds` help): `fairness` says so.
const FAIRNESS_MIN_SECONDS: f64 = 20.0;

fn fairness(
    schedulers: Vec<String>,
    seconds: f64,
    file: PathBuf,
    (size, block, cases): (&str, &str, &[Vec<u32>]),
    (depth, set, kernel_client, timeline, groups): FairnessOpts,
    json_out: bool,
) -> anyhow::Result<()> {
    sys::require_root("bench-engine fairness (loop device, kernel:bfq)")?;
    if let Some(iv) = timeline {
        bfq_real::timeline::check_interval(iv, Duration::from_secs_f64(seconds))
            .map_err(|e| anyhow::anyhow!("--timeline: {e}"))?;
    }
    let readers = cases.iter().map(Vec::len).max().unwrap_or(1) as u64;
    let (size, block) = fairness_sizes(size, block, readers)?;
    let mut scheds = if schedulers.is_empty() {
        default_engine_scheds(false)
    } else {
        schedulers
    };
    scheds.push("kernel:bfq".into());
    let column = |s: &str, dev: &std::path::Path| {
        fairness_config(dev, s, seconds, (depth, &set, kernel_client, timeline))
    };
    fairness_check(&scheds, depth, |s| column(s, &file))?;
    // Ctrl-C or SIGTERM stops the run under way (each run watches for
    // it); the loop device and a file made here are then removed.
    let _signals = sys::catch_interrupts();
    let tmp = TempLoop::new(file, size, true)?;
    let dev = tmp.path();
    let mut results = Vec::new();
    for weights in cases {
        let flows = fairness_readers(weights, block);
        for s in &scheds {
            let mut cfg = column(s, &dev)?;
            let descs = place_readers(&mut cfg, &flows, s, groups);
            let load = load_average();
            let r = bfq_real::run(&cfg, &descs).map_err(|e| run_error(s, e))?;
            warn_ring_setup(s, r.engine.as_ref());
            crate::run::check_errors(&r).map_err(|e| anyhow::anyhow!("{s}: {e}"))?;
            results.push((weights.to_vec(), s.clone(), r, load));
        }
    }
    let direct = sys::loop_direct_io(&dev).unwrap_or(true);
    drop(tmp);
    print_fairness(
        &results,
        (block, seconds, depth, &set),
        (direct, groups, json_out),
    )
}

/// `fairness`'s options past the cases: the engine's depth, its
/// settings, how kernel:bfq's readers issue, `--timeline`, `--engine-groups`.
type FairnessOpts = (
    u32,
    Vec<String>,
    bfq_real::KernelClient,
    Timeline,
    EngineGroups,
);

/// The readers of column `s` as `--engine-groups` places them: for an
/// engine column with `per-reader`, each in a group of its own carrying
/// its weight (added to `cfg`); kernel:bfq's readers each get a blkio
/// cgroup of their own from the run itself.
fn place_readers(
    cfg: &mut RunConfig,
    readers: &[FlowDesc],
    s: &str,
    groups: EngineGroups,
) -> Vec<FlowDesc> {
    let mut descs = readers.to_vec();
    if groups == EngineGroups::None || s.starts_with("kernel:") {
        return descs;
    }
    for d in &mut descs {
        let name = format!("g-{}", d.name);
        cfg.groups.push(bfq_real::GroupDesc {
            name: name.clone(),
            weight: d.effective_weight(),
            parent: None,
        });
        d.group = Some(name);
    }
    descs
}

/// The 1-minute load average (`/proc/loadavg`), where readable: the
/// engine's scheduler runs in the readers' threads, so CPU time taken by
/// other programs delays its turns and charges (docs/engine-measurements.md,
/// "Fairness in local mode").
fn load_average() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/loadavg").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// The error of `fairness`'s column `s`; after Ctrl-C or SIGTERM, with
/// what the benchmark removes on its way out.
fn run_error(s: &str, e: std::io::Error) -> anyhow::Error {
    match sys::interrupted() {
        Some(_) => anyhow::anyhow!(
            "{s}: {e} (the benchmark's loop device is removed, and its file if made here)"
        ),
        None => anyhow::anyhow!("{s}: {e}"),
    }
}

/// Refuses, before the file is made and filled, a column whose settings
/// its scheduler refuses (`config` gives each column's run) and a depth
/// out of the engine's range.
fn fairness_check(
    scheds: &[String],
    depth: u32,
    config: impl Fn(&str) -> anyhow::Result<RunConfig>,
) -> anyhow::Result<()> {
    for s in scheds {
        if let Backend::Engine {
            scheduler,
            settings,
        } = &config(s)?.backend
        {
            bfq_schedulers::build(scheduler, settings)
                .map_err(|e| crate::args::sched_error(e).context(format!("--set for {s}")))?;
        }
    }
    if !(1..=bfq_engine::MAX_QUEUE_DEPTH).contains(&depth) {
        anyhow::bail!(
            "--depth {depth}: must be in 1..={}",
            bfq_engine::MAX_QUEUE_DEPTH
        );
    }
    Ok(())
}

/// One greedy sequential reader of `block`-byte requests per weight,
/// named `wWEIGHT` (`wWEIGHT-I`, I its position, where weights repeat).
fn fairness_readers(weights: &[u32], block: u32) -> Vec<FlowDesc> {
    let repeated = |w: u32| weights.iter().filter(|&&x| x == w).count() > 1;
    weights
        .iter()
        .enumerate()
        .map(|(i, &w)| {
            let name = match repeated(w) {
                true => format!("w{w}-{i}"),
                false => format!("w{w}"),
            };
            let mut f = FlowDesc::reader(&name, Pattern::Seq, block);
            f.weight = Some(w);
            f
        })
        .collect()
}

/// `fairness`'s `--size` and `--block`, checked: a block of whole
/// sectors up to 64 MiB, and a device on which each of the most
/// `readers` of a case has a region of at least one block (the readers
/// share the device in whole 4 KiB units).
fn fairness_sizes(size: &str, block: &str, readers: u64) -> anyhow::Result<(u64, u32)> {
    let size = crate::loopdev::parse_size(size)?;
    let b = crate::loopdev::parse_size(block)?;
    if !b.is_multiple_of(512) || b > 64 << 20 {
        anyhow::bail!("--block {block}: must be a multiple of 512 bytes, at most 64M");
    }
    let per_reader = size / readers / 4096 * 4096;
    if per_reader < b {
        anyhow::bail!(
            "--size {size}: too small for {readers} readers of {b}-byte requests \
             (each reads a region of its own, at least one request long: give at least {})",
            b.div_ceil(4096) * 4096 * readers
        );
    }
    Ok((size, b as u32))
}

/// The run of one `fairness` column on `dev`: scheduler `s`
/// (`NAME[@mode]`, see [`split_mode`]; the `--set` settings for engine
/// schedulers other than fifo), `seconds` long, engine depth `depth`,
/// kernel:bfq's readers issuing through `kernel_client`, the engine's
/// scheduler read every `timeline` ([`bfq_real::timeline`]).
fn fairness_config(
    dev: &std::path::Path,
    s: &str,
    seconds: f64,
    (depth, set, kernel_client, timeline): (u32, &[String], bfq_real::KernelClient, Timeline),
) -> anyhow::Result<RunConfig> {
    let name = split_mode(s).name;
    let mut settings = Settings::new();
    if name != "fifo" && !name.starts_with("kernel:") {
        crate::args::apply_sets(&mut settings, set)?;
    }
    let mut cfg = column_config(dev, s, settings, seconds);
    cfg.queue_depth = depth;
    cfg.kernel_client = kernel_client;
    cfg.timeline = timeline;
    Ok(cfg)
}

/// The lines above `fairness`'s table: the readers and the device, what
/// the worst error is and the tolerance, and what short runs show.
fn fairness_header(block: u32, seconds: f64, direct: bool, groups: EngineGroups) -> String {
    let size = match block % 1024 {
        0 => format!("{} KiB", block >> 10),
        _ => format!("{block} bytes"),
    };
    let io = match direct {
        true => "direct I/O",
        false => "buffered: the kernel refused direct I/O on its file, reads may come from the page cache",
    };
    let pct = FAIRNESS_TOLERANCE * 100.0;
    let mut h = format!(
        "Greedy sequential readers ({size}), loop device ({io}) over a regular file, {seconds} s each\n\
         worst error: the largest |got - due| / due of a reader; aimed at: at most {pct:.0}% \
         (\"within\"), and no more than kernel:bfq's\n{}\n",
        match groups {
            EngineGroups::PerReader => "each reader alone in a group of its weight, in the engine as under kernel:bfq (a blkio cgroup each)",
            EngineGroups::None => "the engine's readers in its root group; kernel:bfq's each in a blkio cgroup of its own",
        }
    );
    if seconds < FAIRNESS_MIN_SECONDS {
        h += &format!(
            "runs shorter than {FAIRNESS_MIN_SECONDS} s: a turn of BFQ more or less is several \
             percent of the lightest reader's share, so an error above {pct:.0}% here does not \
             by itself say the split is unfair\n"
        );
    }
    h
}

/// The least and the most worst share error of the bytes the readers
/// completed up to each whole second of the run's second half (their
/// per-second series; `None` for a run under 2 s). BFQ serves the
/// readers in turns of up to B_max sectors, so the split at one instant
/// depends on where the last turns fell: the range is how much of a
/// run's figure is where the run was cut, and the same for every column.
fn cut_error_range(r: &RunReport) -> Option<(f64, f64)> {
    let secs = r.flows.iter().map(|f| f.series_bytes.len()).max()?;
    let due: Vec<f64> = r.shares().iter().map(|&(_, due)| due).collect();
    let upto = |f: &bfq_real::FlowReport, k: usize| -> u64 { f.series_bytes.iter().take(k).sum() };
    // Whole seconds only: the last point of a series holds the requests
    // that completed after the run's end.
    let cuts = (secs.div_ceil(2)..secs).filter(|&k| k >= 1);
    let errs = cuts.filter_map(|k| {
        let got: Vec<u64> = r.flows.iter().map(|f| upto(f, k)).collect();
        let total = got.iter().sum::<u64>();
        (total > 0).then(|| {
            got.iter()
                .zip(&due)
                .map(|(&g, &d)| ((g as f64 / total as f64 - d) / d).abs())
                .fold(0.0, f64::max)
        })
    });
    errs.fold(None, |acc, e| match acc {
        None => Some((e, e)),
        Some((lo, hi)) => Some((f64::min(lo, e), f64::max(hi, e))),
    })
}

/// A run's `--timeline` as JSON (`None` without one): each read's time
/// and B_max, and per reader per window (the read less the one before)
/// its turns, the sectors of budget granted at their starts, its
/// requests injected, the sectors charged and forfeited.
fn timeline_json(r: &RunReport) -> Option<Value> {
    use bfq_real::timeline::per_window;
    let pts = &r.timeline;
    if pts.is_empty() {
        return None;
    }
    let field = |f: fn(&bfq_engine::FlowInternals) -> Option<u64>| {
        (0..r.flows.len())
            .map(|i| per_window(pts, i, f))
            .collect::<Vec<_>>()
    };
    Some(json!({
        "t_s": pts.iter().map(|p| p.t_s).collect::<Vec<_>>(),
        "max_budget": pts.iter().map(|p| p.max_budget).collect::<Vec<_>>(),
        "turns": field(|f| f.turns),
        "budget_sum": field(|f| f.budget_sum),
        "injected": field(|f| f.injected),
        "charged": field(|f| f.charged),
        "forfeited": field(|f| f.forfeited),
    }))
}

/// Prints `fairness`'s runs (weights, column, report) as JSON or as one
/// line each: throughput, each reader's share got and due, worst error.
fn print_fairness(
    results: &[(Vec<u32>, String, RunReport, Option<f64>)],
    (block, seconds, depth, set): (u32, f64, u32, &[String]),
    (direct, groups, json_out): (bool, EngineGroups, bool),
) -> anyhow::Result<()> {
    let within = |r: &RunReport| r.worst_share_error() <= FAIRNESS_TOLERANCE;
    if json_out {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "bench": "fairness", "block": block, "seconds": seconds, "engine_depth": depth, "engine_settings": set,
                "tolerance": FAIRNESS_TOLERANCE, "loop_direct_io": direct,
                "engine_groups": match groups { EngineGroups::PerReader => "per-reader", EngineGroups::None => "none" },
                "results": results.iter().map(|(w, _, r, load)| json!({
                    "weights": w, "load_average_before": load, "worst_share_error": r.worst_share_error(),
                    "worst_share_error_cut_range": cut_error_range(r).map(|(lo, hi)| [lo, hi]),
                    "bytes_per_second": r.flows.iter().map(|f| &f.series_bytes).collect::<Vec<_>>(),
                    "scheduler": r.scheduler.map(|i| json!({"max_budget": i.max_budget, "peak_rate": i.peak_rate, "turns": i.turns, "injected": i.injected})),
                    "timeline": timeline_json(r),
                    "within_tolerance": within(r), "run": report_json(r)
                })).collect::<Vec<_>>()
            }))?
        );
        return Ok(());
    }
    print!("{}", fairness_header(block, seconds, direct, groups));
    for (w, s, r, load) in results {
        let shares: Vec<String> = r
            .shares()
            .iter()
            .map(|(got, due)| format!("{:.1}%/{:.1}%", got * 100.0, due * 100.0))
            .collect();
        println!(
            "weights {:?} {:>12}: {:>7.1} MiB/s total; share got/due {}; worst error {:.1}% ({})",
            w,
            s,
            r.total_bytes() as f64 / r.seconds / 1048576.0,
            shares.join(" "),
            r.worst_share_error() * 100.0,
            if within(r) { "within" } else { "above" }
        );
        let cut = cut_error_range(r).map(|(lo, hi)| {
            format!(
                "; cut at each whole second of the second half: {:.1}%..{:.1}%",
                lo * 100.0,
                hi * 100.0
            )
        });
        let load = load.map(|l| format!("load average {l:.2} before"));
        println!(
            "{:>31}  {}{}",
            "",
            load.as_deref().unwrap_or("load average unknown"),
            cut.as_deref().unwrap_or("")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{
        check_columns, column_config, cut_error_range, fairness_readers, paired_ratio, paired_refs,
        paired_table, place_readers, randread_table, read_region, EngineGroups, Round, RunReport,
    };
    use bfq_real::EngineClient;

    /// `--engine-groups per-reader` puts each engine reader alone in a
    /// group of its weight, so that the due shares and the scheduling are
    /// those of kernel:bfq's cgroup per reader; kernel:bfq's readers and
    /// `none` are left as they are.
    #[test]
    fn per_reader_groups_give_each_engine_reader_a_group_of_its_weight() {
        let readers = fairness_readers(&[100, 300], 65536);
        let place = |s: &str, g| {
            let mut cfg = column_config("/dev/null".as_ref(), s, Default::default(), 1.0);
            let descs = place_readers(&mut cfg, &readers, s, g);
            (cfg.groups, descs)
        };
        let (groups, descs) = place("bfq", EngineGroups::PerReader);
        let weights: Vec<u32> = groups.iter().map(|g| g.weight).collect();
        assert_eq!(weights, [100, 300]);
        for (g, d) in groups.iter().zip(&descs) {
            assert_eq!(d.group.as_deref(), Some(g.name.as_str()));
            assert_eq!(g.parent, None);
        }
        for (s, g) in [
            ("kernel:bfq", EngineGroups::PerReader),
            ("bfq", EngineGroups::None),
        ] {
            let (groups, descs) = place(s, g);
            assert!(
                groups.is_empty() && descs.iter().all(|d| d.group.is_none()),
                "{s}"
            );
        }
    }

    #[test]
    fn a_tpc_column_runs_its_scheduler_from_runtimes_where_runs_take_it() {
        let cfg = column_config("/dev/null".as_ref(), "bfq@tpc", Default::default(), 1.0);
        assert_eq!(cfg.client, EngineClient::ThreadPerCore);
        assert!(
            matches!(&cfg.backend, bfq_real::Backend::Engine { scheduler, .. } if scheduler == "bfq")
        );
        let plain = column_config("/dev/null".as_ref(), "bfq@coop", Default::default(), 1.0);
        assert_eq!(plain.client, EngineClient::Threads);
        let cols = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(check_columns(&cols(&["fifo@tpc", "bfq"]), true).is_ok());
        for (c, kernel) in [("bfq@tpc", false), ("kernel:bfq@tpc", true)] {
            let e = check_columns(&cols(&[c]), kernel).unwrap_err();
            assert!(e.to_string().contains("@tpc serves"), "{e}");
        }
    }

    #[test]
    fn the_cut_range_spans_the_errors_at_the_second_halfs_whole_seconds() {
        // Weights 1:3; per second the light reader got 1 and 3 bytes, the
        // heavy one 3 and 5; the last point (after the run's end) is left
        // out. Cuts after seconds 2 and 3 of 4: 4/12 and 5/16 of 1/4.
        let flow = |due_share: f64, series_bytes: Vec<u64>| bfq_real::FlowReport {
            bytes: series_bytes.iter().sum(),
            due_share,
            series_bytes,
            ..Default::default()
        };
        let r = RunReport {
            seconds: 4.0,
            flows: vec![flow(0.25, vec![1, 3, 1, 9]), flow(0.75, vec![3, 5, 3, 0])],
            ..Default::default()
        };
        let (lo, hi) = cut_error_range(&r).unwrap();
        assert!((lo - 0.25).abs() < 1e-12, "{lo}");
        assert!((hi - 1.0 / 3.0).abs() < 1e-12, "{hi}");
        assert_eq!(cut_error_range(&report(1)), None);
    }

    /// A report of `ios` requests in one second.
    fn report(ios: u64) -> RunReport {
        RunReport {
            seconds: 1.0,
            flows: vec![bfq_real::FlowReport {
                ios,
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn the_table_has_ratios_only_with_columns_to_compare() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let row = |v: &[(&str, u64)]| {
            let cols = v.iter().map(|(s, n)| (s.to_string(), report(*n))).collect();
            vec![(1, 64, cols)]
        };
        let both = names(&["bfq", "kernel:none"]);
        let t = randread_table(&both, &row(&[("bfq", 2000), ("kernel:none", 1000)]));
        assert!(t.contains("; ratios to kernel:none)"), "{t}");
        assert!(t.contains("  bfq: 2.00x kernel:none"), "{t}");
        for cols in [&["fifo", "bfq"][..], &["kernel:bfq", "kernel:none"]] {
            let t = randread_table(&names(cols), &row(&[(cols[0], 1000), (cols[1], 1000)]));
            assert!(!t.contains("ratios"), "{t}");
            assert!(t.contains("per request])\n"), "{t}");
            assert!(!t.contains("x "), "{t}");
            assert!(!t.lines().any(|l| l.trim_end().ends_with(':')), "{t}");
        }
    }

    #[test]
    fn paired_ratios_compare_round_by_round_with_references_and_fifo() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let scheds = names(&[
            "fifo",
            "bfq",
            "bfq@tpc",
            "fifo@tpc",
            "bfq@dispatcher",
            "fio:none",
        ]);
        assert_eq!(paired_refs("bfq", &scheds), ["fifo", "fio:none"]);
        assert_eq!(
            paired_refs("bfq@tpc", &scheds),
            ["bfq", "fifo@tpc", "fio:none"]
        );
        assert_eq!(paired_refs("fifo@tpc", &scheds), ["fifo", "fio:none"]);
        assert_eq!(paired_refs("bfq@dispatcher", &scheds), ["bfq", "fio:none"]);
        assert_eq!(paired_refs("fifo", &scheds), ["fio:none"]);
        assert!(paired_refs("fio:none", &scheds).is_empty());
        let rounds = |v: &[f64]| {
            v.iter()
                .map(|&iops| Round {
                    iops,
                    trip: None,
                    busy: None,
                })
                .collect::<Vec<_>>()
        };
        // The rounds' medians give 300 / 250 = 1.2; the pairs' ratios are
        // 2, 0.5, 1.5 and 1, whose median is 1.25.
        let (a, b) = (
            rounds(&[200.0, 100.0, 450.0, 400.0]),
            rounds(&[100.0, 200.0, 300.0, 400.0]),
        );
        assert_eq!(paired_ratio(&a, &b), Some((1.25, 0.5, 2.0)));
        assert_eq!(paired_ratio(&a[..3], &b[..3]), Some((1.5, 0.5, 2.0)));
        assert_eq!(paired_ratio(&[], &[]), None);
        let row = (1, 64, Vec::new());
        let cols = names(&["fifo", "bfq"]);
        let t = paired_table(&cols, &[row], &[vec![b, a]]);
        assert!(
            t.ends_with("     1     64  bfq/fifo 1.25 [0.50-2.00]\n"),
            "{t}"
        );
        let alone = paired_table(
            &names(&["bfq"]),
            &[(1, 64, Vec::new())],
            &[vec![rounds(&[1.0])]],
        );
        assert!(alone.is_empty(), "{alone}");
    }

    #[test]
    fn every_column_reads_the_whole_device_unless_told() {
        // A given device is read whole by default (it used to be only its
        // first 1 GiB for the engine and kernel:* while fio read it all).
        assert_eq!(read_region(24 << 30, None).unwrap(), 24 << 30);
        assert_eq!(read_region(8 << 30, Some(1 << 30)).unwrap(), 1 << 30);
        assert_eq!(read_region((1 << 20) + 100, None).unwrap(), 1 << 20);
        assert!(read_region(1 << 30, Some(2 << 30)).is_err());
        assert!(read_region(4095, None).is_err());
    }
}
