//! `bfq run SCENARIO.toml --target PATH`: a scenario's flows as real
//! threads against a file or block device, through the engine with any
//! scheduler of the project or with the kernel's (`kernel:NAME`).
//!
//! The scenario (the format of `bfq sim`, docs/scenarios.md) is planned
//! against the target's size (regions laid out on the target); bfq-real
//! turns it into flows, runs them and writes the results in the
//! simulator's JSON format. Flows can also be given on the command line
//! with `--flow key=value,...`.

use anyhow::Context;
use bfq_core::Settings;
use bfq_core::{IoClass, SECTOR_BYTES};
use bfq_real::scenario::{from_plan, to_sim_result};
use bfq_real::{Backend, Dir, FlowDesc, OnOff, Pattern, Periodic, RunConfig, RunReport};
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
    /// `name=a,op=read,pattern=seq,bs=64k,depth=1,sync=true,weight=100,class=be,level=4,bytes=64M,think=1ms,on=1M,off=50ms,every=40ms,batch=256k,repeat=2,rerun=1s,start=0,offset=0,len=256M`.
    #[arg(long = "flow")]
    pub flows: Vec<String>,
    /// Run length in seconds (default: the scenario's duration, or 10).
    #[arg(long, value_parser = crate::args::seconds)]
    pub seconds: Option<f64>,
    /// Engine device queue depth (1..=65536).
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub depth: u32,
    /// Allow the workload to write to the target.
    #[arg(long)]
    pub allow_writes: bool,
    /// Buffered I/O instead of O_DIRECT.
    #[arg(long)]
    pub buffered: bool,
    /// Create a regular-file target of this size (filled) if missing.
    #[arg(long)]
    pub create: Option<String>,
    /// Write the results as JSON to this file (`-` = stdout, which then
    /// carries only the JSON; the table goes to stderr).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// How kernel:* backends place flow threads in cgroups: `per-flow`
    /// (default: each flow in its own blkio cgroup carrying its weight,
    /// groups as nested cgroups; the only way the kernel honours a
    /// scenario's weights and groups) or `one` (every flow in the run's
    /// own cgroup, as a multi-threaded program or fio's jobs: the kernel
    /// then weighs flows by I/O priority alone, so only flows whose
    /// weights are their levels' or all equal, without groups, are
    /// accepted).
    #[arg(long, default_value = "per-flow", value_parser = crate::args::kernel_groups)]
    pub kernel_groups: bfq_real::KernelGroups,
    /// Per-request trace CSV in the simulator's format
    /// (`t_ns,event,flow,req,sector,sectors,op`; engine schedulers only).
    #[arg(long)]
    pub trace: Option<PathBuf>,
}

fn bad(s: &str, why: &str) -> anyhow::Error {
    anyhow::anyhow!("--flow '{s}': {why}")
}

fn dur(s: &str, v: &str) -> anyhow::Result<Duration> {
    crate::args::duration(v).map_err(|e| bad(s, &e))
}

fn positive_dur(s: &str, key: &str, v: &str) -> anyhow::Result<Duration> {
    match dur(s, v)? {
        d if d.is_zero() => Err(bad(s, &format!("{key} must be above zero"))),
        d => Ok(d),
    }
}

/// Parses one `--flow` description.
pub fn parse_flow(s: &str, index: usize) -> anyhow::Result<FlowDesc> {
    let mut f = FlowDesc::reader(&format!("flow{index}"), Pattern::Seq, 4096);
    let mut offset = None;
    let mut len = None;
    let mut on = None;
    let mut off = None;
    let mut every = None;
    let mut batch = None;
    for kv in s.split(',').filter(|p| !p.trim().is_empty()) {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| bad(s, &format!("'{kv}' is not key=value")))?;
        let (k, v) = (k.trim(), v.trim());
        let size = || crate::args::size(v).map_err(|e| bad(s, &format!("{k}: {e}")));
        let offset_size =
            || bfq_core::settings::parse_size(v).map_err(|e| bad(s, &format!("{k}: {e}")));
        match k {
            "name" if v.is_empty() => return Err(bad(s, "name must not be empty")),
            "name" => f.name = v.to_string(),
            "op" | "rw" => {
                f.dir = match v {
                    "read" | "r" => Dir::Read,
                    "write" | "w" => Dir::Write,
                    _ => return Err(bad(s, "op is read or write")),
                }
            }
            "pattern" => {
                f.pattern = match v {
                    "seq" => Pattern::Seq,
                    "rand" => Pattern::Rand,
                    _ => return Err(bad(s, "pattern is seq or rand")),
                }
            }
            "bs" | "block" => {
                let b = size()?;
                if b % SECTOR_BYTES != 0 || b > 64 << 20 {
                    return Err(bad(s, "bs must be a multiple of 512 bytes, at most 64M"));
                }
                f.block = b as u32;
            }
            "depth" => match v.parse::<u32>() {
                Ok(d) if (1..=4096).contains(&d) => f.depth = d,
                _ => return Err(bad(s, "depth must be in 1..=4096")),
            },
            "sync" => {
                f.sync = match v {
                    "1" | "true" | "yes" => true,
                    "0" | "false" | "no" => false,
                    _ => return Err(bad(s, "sync is true or false")),
                }
            }
            "weight" => f.weight = Some(v.parse().map_err(|_| bad(s, "bad weight"))?),
            "class" => {
                f.prio.class = IoClass::parse(v).ok_or_else(|| bad(s, "class is rt, be or idle"))?
            }
            "level" => f.prio.level = v.parse().map_err(|_| bad(s, "bad level"))?,
            "bytes" => f.bytes = Some(size()?),
            "think" => f.think = dur(s, v)?,
            "on" => on = Some(size()?),
            "off" => off = Some(dur(s, v)?),
            "every" => every = Some(positive_dur(s, k, v)?),
            "batch" => batch = Some(size()?),
            "repeat" => f.repeat = v.parse().map_err(|_| bad(s, "bad repeat"))?,
            "rerun" => f.rerun_after = dur(s, v)?,
            "start" => f.start = dur(s, v)?,
            "offset" => offset = Some(offset_size()?),
            "len" => len = Some(size()?),
            "group" => f.group = Some(v.to_string()),
            _ => return Err(bad(s, &format!("unknown key '{k}'"))),
        }
    }
    match (on, off) {
        (Some(on), Some(off)) => {
            f.on_off = Some(OnOff {
                on_bytes: (on, on),
                off: (off, off),
            })
        }
        (None, None) => {}
        _ => return Err(bad(s, "on and off go together")),
    }
    match (every, batch) {
        (Some(every), Some(bytes)) => f.periodic = Some(Periodic { every, bytes }),
        (None, None) => {}
        _ => return Err(bad(s, "every and batch go together")),
    }
    if offset.is_some() || len.is_some() {
        let o = offset.unwrap_or(0);
        let l = len.ok_or_else(|| bad(s, "offset needs len"))?;
        f.region = Some((o, l));
    }
    Ok(f)
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let mut create = match &a.create {
        Some(c) => Some(crate::args::size(c).map_err(|e| anyhow::anyhow!("--create: {e}"))?),
        None => None,
    };
    let (flows, groups, scenario, seed, duration, interval, sc_sched) = match &a.scenario {
        Some(path) => {
            if !a.flows.is_empty() {
                anyhow::bail!("give a scenario or --flow, not both");
            }
            let (sc, warnings) = bfq_scenario::fio::load(path)?;
            for w in warnings {
                eprintln!("bfq: warning: {}: {w}", path.display());
            }
            // Lay the scenario out on the target: its size replaces the
            // simulated device's capacity.
            if !a.target.exists() {
                if let Some(size) = create.take() {
                    bfq_real::create_filled(&a.target, size)?;
                }
            }
            let size = bfq_real::target_len(&a.target).map_err(|e| {
                anyhow::anyhow!(
                    "{}: {e} (give --create SIZE to make it)",
                    a.target.display()
                )
            })?;
            let plan = sc.plan_with_capacity(size)?;
            let (flows, groups) = from_plan(&plan)?;
            let sched = sc
                .scheduler
                .name
                .clone()
                .map(|n| (n, sc.scheduler.settings.clone()));
            (
                flows,
                groups,
                sc.name.clone(),
                sc.seed,
                Duration::from_nanos(plan.duration),
                Duration::from_nanos(plan.series_interval),
                sched,
            )
        }
        None => {
            if a.flows.is_empty() {
                anyhow::bail!("no flows: give a scenario file or --flow");
            }
            let flows = a
                .flows
                .iter()
                .enumerate()
                .map(|(i, s)| parse_flow(s, i))
                .collect::<anyhow::Result<Vec<_>>>()?;
            (
                flows,
                Vec::new(),
                "command line".to_string(),
                0,
                Duration::from_secs(10),
                Duration::from_secs(1),
                None,
            )
        }
    };
    let (name, mut settings) = match (&a.scheduler, sc_sched) {
        (Some(n), Some((sn, st))) if *n == sn => (n.clone(), st),
        (Some(n), _) => (n.clone(), Settings::new()),
        (None, Some((sn, st))) => (sn, st),
        (None, None) => ("fifo".to_string(), Settings::new()),
    };
    for kv in &a.set {
        let (k, v) = Settings::parse_pair(kv)?;
        settings.set(k, v);
    }
    let backend = Backend::parse(&name, settings);
    if matches!(backend, Backend::Kernel { .. }) && !a.set.is_empty() {
        anyhow::bail!("--set applies to the project's schedulers, not kernel:*");
    }
    let duration = a.seconds.map(Duration::from_secs_f64).unwrap_or(duration);
    let mut cfg = RunConfig::new(&a.target, backend, duration);
    cfg.queue_depth = a.depth;
    cfg.allow_writes = a.allow_writes;
    cfg.direct = !a.buffered;
    cfg.create_size = create;
    cfg.groups = groups;
    cfg.series_interval = interval;
    cfg.trace = a.trace.clone();
    cfg.kernel_groups = a.kernel_groups;
    check_names(&flows)?;
    // The output file is opened before the run, so that a bad path fails
    // at once, not after it.
    let json_to_stdout = a.json.as_ref().is_some_and(|p| p.as_os_str() == "-");
    let json_file = match &a.json {
        Some(p) if !json_to_stdout => {
            Some(std::fs::File::create(p).with_context(|| format!("--json {}", p.display()))?)
        }
        _ => None,
    };
    let r = bfq_real::run(&cfg, &flows)?;
    let sim = to_sim_result(&r, &scenario, seed, interval);
    if json_to_stdout {
        println!("{}", sim.to_json());
    }
    if let Some(mut f) = json_file {
        writeln!(f, "{}", sim.to_json()).context("writing --json")?;
    }
    // With `--json -` stdout carries only the JSON: the table goes to stderr.
    let mut table: Box<dyn Write> = if json_to_stdout {
        Box::new(std::io::stderr())
    } else {
        Box::new(std::io::stdout())
    };
    print_table(&mut table, &r)?;
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

/// Refuses empty and repeated flow names (results are keyed by name).
fn check_names(flows: &[FlowDesc]) -> anyhow::Result<()> {
    for (i, f) in flows.iter().enumerate() {
        if f.name.trim().is_empty() {
            anyhow::bail!("flow {i}: the name must not be empty");
        }
        if flows[..i].iter().any(|o| o.name == f.name) {
            anyhow::bail!("flow name '{}' is given twice", f.name);
        }
    }
    Ok(())
}

fn print_table(out: &mut dyn Write, r: &RunReport) -> std::io::Result<()> {
    writeln!(out, "{} on {} for {:.2} s", r.backend, r.target, r.seconds)?;
    for (f, (got, due)) in r.flows.iter().zip(r.shares()) {
        writeln!(
                out,
                "  {:<12} w{:<4} {:>9.1} MiB/s {:>9.0} IOPS  share {:>5.1}% (weight {:>5.1}%)  lat mean {:>8.1} us p99 {:>8.1} us  errors {}",
                f.name,
                f.weight,
                f.bytes as f64 / r.seconds / 1048576.0,
                f.ios as f64 / r.seconds,
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
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_flow_specs() {
        let f = parse_flow(
            "name=a,op=write,pattern=rand,bs=64k,depth=4,weight=300,class=rt,level=2,bytes=1M,\
             think=1ms,on=1M,off=5ms,every=40ms,batch=256k,repeat=2,rerun=1s,offset=4k,len=1M",
            0,
        )
        .unwrap();
        assert_eq!(f.name, "a");
        assert_eq!(f.dir, Dir::Write);
        assert_eq!(f.pattern, Pattern::Rand);
        assert_eq!((f.block, f.depth, f.weight), (65536, 4, Some(300)));
        assert_eq!((f.prio.class, f.prio.level), (IoClass::Rt, 2));
        assert_eq!(f.region, Some((4096, 1 << 20)));
        assert_eq!(f.on_off.unwrap().on_bytes, (1 << 20, 1 << 20));
        assert_eq!(f.periodic.unwrap().every, Duration::from_millis(40));
        assert_eq!((f.repeat, f.rerun_after), (2, Duration::from_secs(1)));
        // Linux flags O_DIRECT requests synchronous whatever the depth.
        assert!(f.sync);
        assert!(!parse_flow("depth=4,sync=false", 0).unwrap().sync);
        assert!(parse_flow("sync=maybe", 0).is_err());
        assert!(parse_flow("bogus=1", 0).is_err());
        assert!(parse_flow("on=1M", 0).is_err());
        assert!(parse_flow("offset=4k", 0).is_err());
    }
}
