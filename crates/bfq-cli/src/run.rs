//! `bfq run SCENARIO.toml --target PATH`: a scenario's flows as real
//! threads against a file or block device, through the engine with any
//! scheduler of the project or with the kernel's (`kernel:NAME`).
//!
//! The scenario (the format of `bfq sim`, docs/scenarios.md) is planned
//! against the target's size (regions laid out on the target); bfq-real
//! turns it into flows, runs them and writes the results in the
//! simulator's JSON format. Flows can also be given on the command line
//! with `--flow key=value,...`.

use bfq_core::Settings;
use bfq_real::scenario::{from_plan, to_sim_result};
use bfq_real::{Backend, RunConfig, RunReport};
use clap::Args as ClapArgs;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

#[derive(ClapArgs)]
pub struct Args {
    /// Scenario file (the format of `bfq sim`) or fio job file (`.fio`).
    pub scenario: Option<PathBuf>,
    /// File or block device to run against.
    #[arg(long)]
    pub target: PathBuf,
    /// A scheduler of the project (`bfq schedulers`) or
    /// kernel:bfq|kernel:mq-deadline|kernel:kyber|kernel:none.
    /// Default: the scenario's, else fifo.
    #[arg(long)]
    pub scheduler: Option<String>,
    /// Scheduler setting key=value (repeatable).
    #[arg(long = "set")]
    pub set: Vec<String>,
    /// A flow as key=value pairs separated by commas (repeatable), e.g.
    /// `name=a,op=read,pattern=seq,bs=64k,depth=1,sync=true,weight=100,class=be,level=4,bytes=64M,think=1ms,on=1M,off=50ms,every=40ms,batch=256k,runs=2,repeat=1s,start=0,offset=0,len=256M`:
    /// the keys of a scenario's `[[flow]]` (`repeat` the pause after each
    /// run, with its unit; `runs` their number), docs/engine.md "--flow keys".
    #[arg(long = "flow")]
    pub flows: Vec<String>,
    /// A group for the `--flow`s' `group=` key, as a scenario's
    /// `[[group]]` (repeatable): `path=/a,weight=300` (weight 1..=1000,
    /// default 100; undeclared parents get 100), e.g. `--group path=/a
    /// --flow name=x,group=/a`.
    #[arg(long = "group")]
    pub groups: Vec<String>,
    /// Run length in seconds (default: the scenario's duration, or 10;
    /// above 0, at most 604800: a week).
    #[arg(long, value_parser = crate::args::seconds)]
    pub seconds: Option<f64>,
    /// Engine device queue depth (1..=4096).
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub depth: u32,
    /// Allow the workload to write to the target, overwriting its data
    /// in the flows' regions. A target whose start holds a filesystem,
    /// partition table, swap area or encrypted volume is refused unless
    /// `--force-overwrite` is given too; a mounted filesystem, active
    /// swap and a device another one is stacked on are refused in any
    /// case.
    #[arg(long)]
    pub allow_writes: bool,
    /// With `--allow-writes`: write even over a filesystem, partition
    /// table, swap area or encrypted volume found at the target's start
    /// (not mounted), destroying it.
    #[arg(long, requires = "allow_writes")]
    pub force_overwrite: bool,
    /// Buffered I/O instead of O_DIRECT.
    #[arg(long)]
    pub buffered: bool,
    /// Create a regular-file target of this size, filled with data, if
    /// missing (refused when its filesystem has less room; an existing
    /// file smaller than this is refused, not run on). The flows are
    /// checked first, and the file appears only once complete.
    #[arg(long)]
    pub create: Option<String>,
    /// Write the results as JSON to this file (`-` = stdout, which then
    /// carries only the JSON; the table goes to stderr). The file is
    /// replaced only once the results are written: a run that fails or is
    /// interrupted leaves an earlier one as it was.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// How kernel:* backends place flow threads in cgroups: `per-flow`
    /// (default: each flow in its own blkio cgroup carrying its weight,
    /// groups as nested cgroups; the only way the kernel honours a
    /// scenario's weights and groups) or `one` (every flow in the run's
    /// own cgroup, as a multi-threaded program or fio's jobs: the kernel
    /// then weighs flows by I/O priority alone, so only flows whose
    /// weights are their levels' or all equal, without groups, are
    /// accepted), or `per-process` (each flow a process of its own in its
    /// own cgroup: what `per-flow` does on cgroup v2, whose io controller
    /// takes processes, not threads). kernel:* only: given with one of the
    /// project's schedulers, which place no flow in a cgroup, it is
    /// refused, whatever its value.
    #[arg(long, value_parser = crate::args::kernel_groups)]
    pub kernel_groups: Option<bfq_real::KernelGroups>,
    /// Per-request trace CSV in the simulator's format
    /// (`t_ns,event,flow,req,sector,sectors,op`; engine schedulers only);
    /// `-` writes it to stdout (which then carries only the trace; the
    /// table goes to stderr).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Who submits the engine's requests and reaps their completions:
    /// `local` (default: each flow's thread on its own ring; the scheduler
    /// learns of a completion when that thread reaps it, just before it
    /// issues its next request) or `dispatcher` (one service thread
    /// submits and reaps everything: the scheduler learns of a
    /// completion before the flow's thread wakes, as the kernel's
    /// schedulers do). The project's schedulers only. docs/engine.md.
    #[arg(long, value_parser = crate::args::submit_mode)]
    pub submit: Option<bfq_engine::SubmitMode>,
    /// How kernel:* flows of depth 1 issue requests: `uring` (default:
    /// each flow thread through its own io_uring ring, waiting in
    /// `io_uring_enter`, as the engine's flows do) or `pread` (blocking
    /// `pread`/`pwrite` calls). Deeper flows always use a ring. kernel:*
    /// schedulers only.
    #[arg(long, value_parser = crate::args::kernel_client)]
    pub kernel_client: Option<bfq_real::KernelClient>,
    /// Whether each flow thread's ring takes completions without an
    /// interrupt (`IORING_SETUP_COOP_TASKRUN`; engine schedulers, local
    /// submission): `auto` (default: while the thread waits for a CPU),
    /// `on` or `off`. The project's schedulers only. docs/engine.md, "How a
    /// completion reaches its thread"
    #[arg(long, value_parser = crate::args::coop_taskrun)]
    pub coop_taskrun: Option<bfq_engine::CoopTaskrun>,
    /// Who issues the flows' requests through the engine: `threads`
    /// (default: one thread per flow keeping its depth out) or `tpc` (one
    /// current-thread tokio runtime per CPU the run may use, each pinned
    /// there with its ring bound to it, and each flow's requests tasks of
    /// one request each spread over the runtimes, as a thread-per-core
    /// server issues them; greedy flows only: no bytes, think, on/off,
    /// periodic, start, stop, duration or after). The project's
    /// schedulers only. docs/engine.md, "Thread-per-core servers".
    #[arg(long, value_parser = crate::args::engine_client)]
    pub client: Option<bfq_real::EngineClient>,
    /// Before the flows, one sequential 128 KiB reader reads alone for
    /// this many seconds (more than 0, at most 60) through the same
    /// scheduler, so that a bfq learning the device's peak rate (auto
    /// B_max), the engine's or the kernel's, starts the flows with it.
    /// Default: none (a cold start). docs/engine.md.
    #[arg(long)]
    pub warm_up: Option<f64>,
}

/// What to run: the flows and groups, from a scenario or `--flow`s.
struct Workload {
    flows: Vec<bfq_real::FlowDesc>,
    groups: Vec<bfq_real::GroupDesc>,
    /// The scenario's name in the results.
    scenario: String,
    seed: u64,
    duration: Duration,
    series_interval: Duration,
    /// The scenario's scheduler and settings, if it names one.
    sched: Option<(String, Settings)>,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let create = match &a.create {
        Some(c) => Some(crate::args::size(c).map_err(|e| anyhow::anyhow!("--create: {e}"))?),
        None => None,
    };
    // The flows are planned on the size the target has, or will have:
    // nothing is created before they are checked.
    let capacity = bfq_real::target_size(&a.target, create)?;
    let w = match &a.scenario {
        Some(path) => {
            if !a.flows.is_empty() || !a.groups.is_empty() {
                anyhow::bail!(
                    "give a scenario or --flow (and --group), not both: a scenario file \
                     declares its groups in [[group]]"
                );
            }
            scenario_workload(&a, path, capacity)?
        }
        None => flag_workload(&a, capacity)?,
    };
    let backend = backend(&a, w.sched)?;
    let duration = a.seconds.map(Duration::from_secs_f64).unwrap_or(w.duration);
    warn_late_starts(&w.flows, duration);
    let mut cfg = RunConfig::new(&a.target, backend, duration);
    cfg.queue_depth = a.depth;
    cfg.allow_writes = a.allow_writes;
    cfg.force_overwrite = a.force_overwrite;
    cfg.direct = !a.buffered;
    cfg.create_size = create;
    cfg.groups = w.groups;
    cfg.series_interval = w.series_interval;
    cfg.trace = a.trace.clone();
    cfg.kernel_groups = a.kernel_groups.unwrap_or(bfq_real::KernelGroups::PerFlow);
    cfg.submit_mode = a.submit.unwrap_or_default();
    cfg.kernel_client = a.kernel_client.unwrap_or_default();
    cfg.coop_taskrun = a.coop_taskrun.unwrap_or_default();
    cfg.client = a.client.unwrap_or_default();
    if let Some(w) = a.warm_up {
        if !(w.is_finite() && w > 0.0 && w <= 60.0) {
            anyhow::bail!("--warm-up {w}: must be more than 0 and at most 60 seconds");
        }
        cfg.warm_up = Some(Duration::from_secs_f64(w));
    }
    bfq_real::flowspec::check_names(&w.flows).map_err(|e| anyhow::anyhow!(e))?;
    let out = Outputs::open(&a)?;
    // SIGINT and SIGTERM end the flows early; the table then shows what
    // they did until then.
    cfg.keep_partial = true;
    let _signals = bfq_real::sys::catch_interrupts();
    let r = bfq_real::run(&cfg, &w.flows)?;
    if let Some(sig) = r.interrupted {
        out.write_table(&r)?;
        anyhow::bail!(
            "interrupted by signal {sig} after {:.2} s: the table covers the run until then; \
             no --json or --trace file was written (one there keeps its content)",
            r.seconds
        );
    }
    let sim = to_sim_result(&r, &w.scenario, w.seed, w.series_interval);
    out.write(&sim, &r)?;
    if let Some(w) = r.engine.as_ref().and_then(bfq_real::ring_setup_warning) {
        eprintln!("bfq: warning: {w}");
    }
    // The report is out: a trace that was not written whole fails the
    // command after it, as failed requests do.
    match (&r.trace_error, check_errors(&r)) {
        (Some(t), Err(e)) => anyhow::bail!("{e}; {t}"),
        (Some(t), Ok(())) => anyhow::bail!("{t}"),
        (None, done) => done,
    }
}

/// Warns of each flow that starts at or after the end of a run of
/// `duration`: it does no I/O. A scenario may hold such flows for longer
/// runs of it (as `bfq sim --duration` may cut them), so they are not
/// refused.
fn warn_late_starts(flows: &[bfq_real::FlowDesc], duration: Duration) {
    for f in flows.iter().filter(|f| f.start >= duration) {
        eprintln!(
            "bfq: warning: flow {} starts at {:?}, not before the run's end ({:?}): \
             it will do no I/O",
            f.name, f.start, duration
        );
    }
}

/// The workload of scenario (or fio job file) `path`, laid out on a
/// target of `capacity` bytes: its size replaces the simulated device's
/// capacity.
fn scenario_workload(a: &Args, path: &std::path::Path, capacity: u64) -> anyhow::Result<Workload> {
    let (sc, warnings) = bfq_scenario::fio::load(path)?;
    for w in warnings {
        eprintln!("bfq: warning: {}: {w}", path.display());
    }
    let plan = sc.plan_with_capacity(capacity)?;
    // A run of another length keeps the outputs as bounded as the
    // scenario's own (the series' points, the recorded runs).
    if let Some(s) = a.seconds {
        let ns = Duration::from_secs_f64(s)
            .as_nanos()
            .min(u128::from(u64::MAX)) as u64;
        sc.check_output_bounds(ns)
            .map_err(|e| anyhow::anyhow!("--seconds {s}: {e}"))?;
    }
    let (flows, groups) = from_plan(&plan)?;
    let sched = sc
        .scheduler
        .name
        .clone()
        .map(|n| (n, sc.scheduler.settings.clone()));
    Ok(Workload {
        flows,
        groups,
        scenario: sc.name.clone(),
        seed: sc.seed,
        duration: Duration::from_nanos(plan.duration),
        series_interval: Duration::from_nanos(plan.series_interval),
        sched,
    })
}

/// The workload of the `--flow` and `--group` options, planned as a
/// scenario of the run's length (`--seconds`, default 10) on a target of
/// `capacity` bytes: seed 0, a series point every second (fewer over
/// more than 100 000 s).
fn flag_workload(a: &Args, capacity: u64) -> anyhow::Result<Workload> {
    if a.flows.is_empty() {
        anyhow::bail!("no flows: give a scenario file or --flow");
    }
    let flows = a
        .flows
        .iter()
        .enumerate()
        .map(|(i, s)| bfq_real::flowspec::parse(s, i))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow::anyhow!(e))?;
    let groups = a
        .groups
        .iter()
        .enumerate()
        .map(|(i, s)| bfq_real::flowspec::parse_group(s, i))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow::anyhow!(e))?;
    let duration = a
        .seconds
        .map_or(Duration::from_secs(10), Duration::from_secs_f64);
    let p = bfq_real::flowspec::plan(&flows, &groups, duration, capacity)
        .map_err(|e| anyhow::anyhow!(e))?;
    Ok(Workload {
        flows: p.flows,
        groups: p.groups,
        scenario: "command line".to_string(),
        seed: 0,
        duration,
        series_interval: p.series_interval,
        sched: None,
    })
}

/// The backend: `--scheduler`, else the scenario's, else fifo; the
/// scenario's settings only for its own scheduler, then `--set` (refused
/// for kernel:*); `--kernel-groups` is refused for the project's
/// schedulers.
fn backend(a: &Args, sc_sched: Option<(String, Settings)>) -> anyhow::Result<Backend> {
    let (name, mut settings) = match (&a.scheduler, sc_sched) {
        (Some(n), Some((sn, st))) if *n == sn => (n.clone(), st),
        (Some(n), _) => (n.clone(), Settings::new()),
        (None, Some((sn, st))) => (sn, st),
        (None, None) => ("fifo".to_string(), Settings::new()),
    };
    crate::args::check_backend(&name, true)?;
    let from_file = settings.clone();
    let given = crate::args::overlay_sets(&mut settings, &a.set)?;
    let backend = Backend::parse(&name, settings);
    if matches!(backend, Backend::Kernel { .. }) && !a.set.is_empty() {
        anyhow::bail!("--set applies to the project's schedulers, not kernel:*");
    }
    match &backend {
        Backend::Engine {
            scheduler,
            settings,
        } => {
            if let Err(e) = bfq_schedulers::build(scheduler, settings) {
                return Err(match &a.scenario {
                    Some(file) => crate::args::scenario_sched_error(e, file, &from_file, &given),
                    None => crate::args::sched_error(e),
                });
            }
            if a.kernel_groups.is_some() {
                anyhow::bail!(
                    "--kernel-groups applies to kernel:* schedulers, not {scheduler} (its groups \
                     are --group's or a scenario's [[group]], without cgroups)"
                );
            }
            if a.kernel_client.is_some() {
                anyhow::bail!("--kernel-client applies to kernel:* schedulers, not {scheduler}");
            }
        }
        Backend::Kernel { .. } => {
            if a.submit.is_some() || a.coop_taskrun.is_some() || a.client.is_some() {
                anyhow::bail!(
                    "--submit, --coop-taskrun and --client apply to the project's schedulers, \
                     not {name}"
                );
            }
        }
    }
    Ok(backend)
}

/// Where the results go: `--json` (a file, or stdout) and the table
/// (stdout, or stderr when `--json -` or `--trace -` takes stdout).
struct Outputs {
    json_to_stdout: bool,
    trace_to_stdout: bool,
    json_file: Option<crate::args::JsonFile>,
}

impl Outputs {
    /// The destinations ([`crate::args::json_and_trace`]).
    fn open(a: &Args) -> anyhow::Result<Outputs> {
        let (json_to_stdout, trace_to_stdout, json_file) =
            crate::args::json_and_trace(&a.json, &a.trace)?;
        Ok(Outputs {
            json_to_stdout,
            trace_to_stdout,
            json_file,
        })
    }

    /// Writes the table: with `--json -` or `--trace -` stdout carries
    /// only the JSON or the trace, and the table goes to stderr.
    fn write_table(&self, r: &RunReport) -> std::io::Result<()> {
        let mut table: Box<dyn Write> = if self.json_to_stdout || self.trace_to_stdout {
            Box::new(std::io::stderr())
        } else {
            Box::new(std::io::stdout())
        };
        print_table(&mut table, r)
    }

    /// Writes the table, then the JSON results (so that a JSON file that
    /// cannot be written leaves the table printed).
    fn write(self, sim: &bfq_scenario::SimResult, r: &RunReport) -> anyhow::Result<()> {
        self.write_table(r)?;
        if self.json_to_stdout {
            println!("{}", sim.to_json());
        }
        if let Some(f) = self.json_file {
            f.write(&(sim.to_json() + "\n"))?;
        }
        Ok(())
    }
}

/// Fails the command when requests of the run failed, naming the first
/// error.
pub(crate) fn check_errors(r: &RunReport) -> anyhow::Result<()> {
    let failed: u64 = r.flows.iter().map(|f| f.errors).sum();
    if failed > 0 {
        let done: u64 = r.flows.iter().map(|f| f.ios).sum();
        let first = r.flows.iter().find_map(|f| {
            f.first_error
                .as_ref()
                .map(|e| format!("flow {}: {e}", f.name))
        });
        anyhow::bail!(
            "{failed} of {} requests failed (first: {})",
            failed + done,
            first.unwrap_or_default()
        );
    }
    Ok(())
}

fn print_table(out: &mut dyn Write, r: &RunReport) -> std::io::Result<()> {
    writeln!(out, "{} on {} for {:.2} s", r.backend, r.target, r.seconds)?;
    for (f, (got, due)) in r.flows.iter().zip(r.shares()) {
        let secs = f.active_seconds(r.seconds);
        writeln!(
                out,
                "  {:<12} w{:<4} {:>9.1} MiB/s {:>9.0} IOPS  share {:>5.1}% (weight {:>5.1}%)  lat mean {:>8.1} us p99 {:>8.1} us  errors {}",
                f.name,
                f.weight,
                f.bytes as f64 / secs / 1048576.0,
                f.ios as f64 / secs,
                got * 100.0,
                due * 100.0,
                f.lat_mean_us,
                f.lat_p99_us,
                f.errors
            )?;
        if let Some(e) = &f.first_error {
            writeln!(out, "               first error: {e}")?;
        }
    }
    if let Some(i) = &r.scheduler {
        print_internals(out, i)?;
    }
    Ok(())
}

/// The BFQ mechanisms' state at the end of an engine run (nothing for
/// schedulers without them).
fn print_internals(out: &mut dyn Write, i: &bfq_core::Internals) -> std::io::Result<()> {
    let (Some(b), Some(rate)) = (i.max_budget, i.peak_rate) else {
        return Ok(());
    };
    let medium = match i.rotational {
        Some(true) => ", device taken as rotational",
        Some(false) => ", device taken as non-rotational",
        None => "",
    };
    writeln!(
        out,
        "  scheduler: B_max {b} sectors, peak rate {:.1} MB/s, {} turns, {} injected{medium}",
        rate as f64 * 512.0 / 1e6,
        i.turns.unwrap_or(0),
        i.injected.unwrap_or(0),
    )
}
