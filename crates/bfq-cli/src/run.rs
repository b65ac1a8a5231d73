//! `bfq run SCENARIO.toml --target PATH`: a scenario's flows as real
//! threads against a file or block device, through the engine with any
//! scheduler of the project or with the kernel's (`kernel:NAME`).
//!
//! The scenario format belongs to bfq-sim (`bfq sim`); its flows are
//! converted to [`bfq_engine::workload::FlowDesc`] here. Until those types
//! are wired in, flows can be given with `--flow key=value,...`.

use bfq_core::settings::parse_duration;
use bfq_core::{IoClass, IoPrio};
use bfq_engine::workload::{self, Backend, Dir, FlowDesc, Pattern, RunConfig, RunReport};
use bfq_engine::Settings;
use clap::Args as ClapArgs;
use serde_json::json;
use std::path::PathBuf;
use std::time::Duration;

#[derive(ClapArgs)]
pub struct Args {
    /// Scenario file (the format of `bfq sim`).
    pub scenario: Option<PathBuf>,
    /// File or block device to run against.
    #[arg(long)]
    pub target: PathBuf,
    /// A scheduler of the project (`bfq schedulers`) or
    /// kernel:bfq|kernel:mq-deadline|kernel:kyber|kernel:none.
    #[arg(long, default_value = "fifo")]
    pub scheduler: String,
    /// Scheduler setting key=value (repeatable).
    #[arg(long = "set")]
    pub set: Vec<String>,
    /// A flow as key=value pairs separated by commas (repeatable), e.g.
    /// `name=a,op=read,pattern=seq,bs=64k,depth=1,weight=100,class=be,level=4,bytes=64M,think=1ms,on=100ms,off=50ms,period=10ms,repeat=1,start=0,offset=0,len=256M`.
    #[arg(long = "flow")]
    pub flows: Vec<String>,
    /// Run length in seconds (flows with a byte budget may end earlier).
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Engine device queue depth.
    #[arg(long, default_value_t = 32)]
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
    /// Write the results as JSON to this file (`-` = stdout).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Per-request trace (needs the simulator's trace format: not yet).
    #[arg(long)]
    pub trace: Option<PathBuf>,
}

fn bad(s: &str, why: &str) -> anyhow::Error {
    anyhow::anyhow!("--flow '{s}': {why}")
}

fn dur(s: &str, v: &str) -> anyhow::Result<Duration> {
    parse_duration(v)
        .map(Duration::from_nanos)
        .ok_or_else(|| bad(s, &format!("bad duration '{v}'")))
}

/// Parses one `--flow` description.
pub fn parse_flow(s: &str, index: usize) -> anyhow::Result<FlowDesc> {
    let mut f = FlowDesc::reader(&format!("flow{index}"), Pattern::Seq, 4096);
    let mut offset = None;
    let mut len = None;
    let mut on = None;
    let mut off = None;
    for kv in s.split(',').filter(|p| !p.trim().is_empty()) {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| bad(s, &format!("'{kv}' is not key=value")))?;
        let (k, v) = (k.trim(), v.trim());
        let size = || crate::loopdev::parse_size(v).map_err(|_| bad(s, &format!("bad size '{v}'")));
        match k {
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
            "bs" | "block" => f.block = size()? as u32,
            "depth" => f.depth = v.parse().map_err(|_| bad(s, "bad depth"))?,
            "weight" => f.weight = Some(v.parse().map_err(|_| bad(s, "bad weight"))?),
            "class" => {
                f.prio.class = IoClass::parse(v).ok_or_else(|| bad(s, "class is rt, be or idle"))?
            }
            "level" => f.prio.level = v.parse().map_err(|_| bad(s, "bad level"))?,
            "bytes" => f.bytes = Some(size()?),
            "think" => f.think = dur(s, v)?,
            "on" => on = Some(dur(s, v)?),
            "off" => off = Some(dur(s, v)?),
            "period" => f.period = Some(dur(s, v)?),
            "repeat" => f.repeat = v.parse().map_err(|_| bad(s, "bad repeat"))?,
            "start" => f.start = dur(s, v)?,
            "offset" => offset = Some(size()?),
            "len" => len = Some(size()?),
            "group" => f.group = Some(v.to_string()),
            _ => return Err(bad(s, &format!("unknown key '{k}'"))),
        }
    }
    if let (Some(on), Some(off)) = (on, off) {
        f.on_off = Some((on, off));
    }
    if offset.is_some() || len.is_some() {
        let o = offset.unwrap_or(0);
        let l = len.ok_or_else(|| bad(s, "offset needs len"))?;
        f.region = Some((o, l));
    }
    let _ = IoPrio::DEFAULT;
    Ok(f)
}

pub fn report_json(r: &RunReport) -> serde_json::Value {
    json!({
        "backend": r.backend,
        "target": r.target,
        "seconds": r.seconds,
        "iops": r.iops(),
        "bytes": r.total_bytes(),
        "flows": r.flows.iter().zip(r.shares()).map(|(f, (got, due))| json!({
            "name": f.name, "weight": f.weight, "ios": f.ios, "bytes": f.bytes,
            "errors": f.errors, "first_error": f.first_error,
            "share": got, "weight_share": due,
            "mib_s": f.bytes as f64 / r.seconds / 1048576.0,
            "lat_mean_us": f.lat_mean_us, "lat_p50_us": f.lat_p50_us,
            "lat_p99_us": f.lat_p99_us, "lat_max_us": f.lat_max_us,
        })).collect::<Vec<_>>(),
    })
}

pub fn run(a: Args) -> anyhow::Result<()> {
    if let Some(sc) = &a.scenario {
        anyhow::bail!(
            "{}: scenario files are read with bfq-sim's scenario types, which this build \
             does not have yet; give the flows with --flow key=value,... meanwhile",
            sc.display()
        );
    }
    if a.trace.is_some() {
        anyhow::bail!("--trace needs the simulator's trace format, not wired in yet");
    }
    if a.flows.is_empty() {
        anyhow::bail!("no flows: give a scenario or --flow");
    }
    let flows = a
        .flows
        .iter()
        .enumerate()
        .map(|(i, s)| parse_flow(s, i))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut settings = Settings::new();
    for kv in &a.set {
        let (k, v) = Settings::parse_pair(kv)?;
        settings.set(k, v);
    }
    let backend = Backend::parse(&a.scheduler, settings);
    if matches!(backend, Backend::Kernel { .. }) && !a.set.is_empty() {
        anyhow::bail!("--set applies to the project's schedulers, not kernel:*");
    }
    let mut cfg = RunConfig::new(&a.target, backend, Duration::from_secs_f64(a.seconds));
    cfg.queue_depth = a.depth;
    cfg.allow_writes = a.allow_writes;
    cfg.direct = !a.buffered;
    if let Some(c) = &a.create {
        cfg.create_size = Some(crate::loopdev::parse_size(c)?);
    }
    let r = workload::run(&cfg, &flows)?;
    match &a.json {
        Some(p) if p.as_os_str() == "-" => {
            println!("{}", serde_json::to_string_pretty(&report_json(&r))?)
        }
        Some(p) => std::fs::write(p, serde_json::to_string_pretty(&report_json(&r))?)?,
        None => {}
    }
    if a.json.as_ref().is_none_or(|p| p.as_os_str() != "-") {
        println!("{} on {} for {:.2} s", r.backend, r.target, r.seconds);
        for (f, (got, due)) in r.flows.iter().zip(r.shares()) {
            println!(
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
            );
        }
    }
    Ok(())
}
