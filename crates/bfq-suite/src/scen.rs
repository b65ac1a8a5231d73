//! Writing scenario TOML (the public format of docs/scenarios.md) and
//! running it in the simulator.

use crate::model::{Config, Ctx};
use crate::service::Service;
use anyhow::{anyhow, Context as _};
use bfq_sim::{FlowResult, Scenario, SimOptions, SimResult};
use std::fmt::Write as _;
use std::io::Write as _;

/// A TOML basic string.
pub fn q(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// Capacity in bytes of a device preset.
pub fn capacity(preset: &str) -> u64 {
    bfq_sim::device::preset(preset)
        .map(|p| p.capacity())
        .unwrap_or(0)
}

/// The scenario header: name, duration, seed, device (with extra
/// `key = value` lines), scheduler and its settings.
pub fn header(
    name: &str,
    duration_s: f64,
    ctx: &Ctx,
    preset: &str,
    device_extra: &str,
    c: &Config,
) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "name = {}", q(name));
    let _ = writeln!(
        s,
        "duration = \"{}ms\"",
        (duration_s * 1000.0).round() as u64
    );
    let _ = writeln!(s, "seed = {}", ctx.seed);
    let _ = writeln!(s, "\n[device]\npreset = {}", q(preset));
    s.push_str(device_extra);
    let _ = writeln!(s, "\n[scheduler]\nname = {}", q(&c.scheduler));
    for (k, v) in &c.settings {
        let _ = writeln!(s, "{} = {}", q(k), q(v));
    }
    s
}

/// Outer-edge sequential rate (MB/s) of a disk preset; None for flash
/// or an unknown preset.
pub fn disk_peak_mb_s(preset: &str) -> Option<f64> {
    match bfq_sim::device::preset(preset)? {
        bfq_sim::device::DeviceParams::Disk(d) => Some(d.rate_outer),
        _ => None,
    }
}

/// Region text `{ start = "..k", size = "..k" }` from byte offsets
/// (rounded down to 4 KiB).
pub fn region(start: u64, size: u64) -> String {
    format!(
        "{{ start = \"{}k\", size = \"{}k\" }}",
        (start >> 12) << 2,
        (size >> 12) << 2
    )
}

/// Parses and runs a scenario with the scheduler its `[scheduler]` names.
pub fn run(text: &str, origin: &str, ctx: &Ctx) -> anyhow::Result<SimResult> {
    run_with(text, origin, ctx, SimOptions::default())
}

/// [`run`], measuring how the scheduler served the flows from the trace.
pub fn run_traced(text: &str, origin: &str, ctx: &Ctx) -> anyhow::Result<(SimResult, Service)> {
    run_traced_from(text, origin, ctx, 0)
}

/// [`run_traced`], with the service pattern counted from `from_ns` on.
pub fn run_traced_from(
    text: &str,
    origin: &str,
    ctx: &Ctx,
    from_ns: u64,
) -> anyhow::Result<(SimResult, Service)> {
    let mut svc = Service::from(from_ns);
    let mut buf = std::io::BufWriter::with_capacity(1 << 16, &mut svc);
    let opts = SimOptions {
        trace: Some(&mut buf),
        ..SimOptions::default()
    };
    let r = run_with(text, origin, ctx, opts)?;
    buf.flush().context("trace")?;
    drop(buf);
    Ok((r, svc.finish()))
}

fn run_with(text: &str, origin: &str, ctx: &Ctx, opts: SimOptions) -> anyhow::Result<SimResult> {
    let sc = Scenario::from_toml_str_in(text, origin, &ctx.traces_dir)
        .map_err(|e| anyhow!("{e}"))
        .with_context(|| format!("generated scenario {origin}"))?;
    let sched = bfq_schedulers::build(sc.scheduler_name(), &sc.scheduler.settings)
        .map_err(|e| anyhow!("scheduler {}: {e}", sc.scheduler_name()))?;
    let r = bfq_sim::simulate(&sc, sched, sc.seed, opts).map_err(|e| anyhow!("{origin}: {e}"))?;
    Ok(r)
}

/// MiB (the simulator's unit).
pub const MIB: f64 = 1048576.0;

/// MB, the papers' unit (10^6 bytes); the suite reports MB/s.
pub const MB: f64 = 1e6;

/// MiB/s (as the simulator reports) to MB/s.
pub fn mb_s(mib_s: f64) -> f64 {
    mib_s * MIB / MB
}

/// Flows whose name is `prefix` or starts with `prefix.`.
pub fn flows<'a>(r: &'a SimResult, prefix: &'a str) -> impl Iterator<Item = &'a FlowResult> + 'a {
    r.flows.iter().filter(move |f| {
        f.name == prefix
            || (f.name.len() > prefix.len()
                && f.name.starts_with(prefix)
                && f.name.as_bytes()[prefix.len()] == b'.')
    })
}

/// Total bytes of the flows matching `pred`, per simulated second, MB/s.
pub fn rate_where(r: &SimResult, pred: impl Fn(&FlowResult) -> bool) -> f64 {
    let b: u64 = r.flows.iter().filter(|f| pred(f)).map(|f| f.bytes).sum();
    if r.sim_time_s > 0.0 {
        b as f64 / MB / r.sim_time_s
    } else {
        0.0
    }
}

/// Mean per-interval aggregate throughput of the flows matching `pred`
/// from `from_s` on (steady state), MB/s.
pub fn steady_rate(r: &SimResult, from_s: f64, pred: impl Fn(&FlowResult) -> bool) -> f64 {
    let skip = (from_s / r.series_interval_s).round() as usize;
    let n = r
        .flows
        .iter()
        .map(|f| f.series_mib_s.len())
        .max()
        .unwrap_or(0);
    if n <= skip {
        return rate_where(r, pred);
    }
    let mut sum = 0.0;
    for f in r.flows.iter().filter(|f| pred(f)) {
        sum += f.series_mib_s.iter().skip(skip).sum::<f64>();
    }
    mb_s(sum / (n - skip) as f64)
}

/// A named set of flows: its key and which flow names belong to it.
pub type FlowSet<'a> = (&'a str, fn(&str) -> bool);

/// The scheduler's own mechanisms measured in run `r` (what
/// [`bfq_core::Internals`] and [`bfq_core::FlowInternals`] report), as
/// metrics: `bmax` (B_max at the end, sectors), `peak_rate` (its
/// peak-rate estimate, MB/s), `inj_pct` (requests dispatched by
/// injection, % of the requests completed), `low_pct` (% of the run
/// throttle-low spent in its LOW state), `state_changes` (its LOW/MAX
/// changes); and for each `(key, flows)` of `sets`, `budget_<key>`: the
/// mean budget (sectors) BFQ granted those flows per turn. A mechanism
/// the scheduler does not have gives no metric.
pub fn mechanisms(
    r: &SimResult,
    sets: &[FlowSet],
    m: &mut std::collections::BTreeMap<String, f64>,
) {
    let i = r.internals;
    let mut put = |k: &str, x: Option<f64>| {
        if let Some(x) = x {
            m.insert(k.into(), x);
        }
    };
    put("bmax", i.max_budget.map(|b| b as f64));
    put("peak_rate", i.peak_rate.map(|p| p as f64 * 512.0 / MB));
    let reqs = r.requests.max(1) as f64;
    put("inj_pct", i.injected.map(|n| 100.0 * n as f64 / reqs));
    let span_ns = r.sim_time_s * 1e9;
    put(
        "low_pct",
        i.low_state_ns
            .filter(|_| span_ns > 0.0)
            .map(|ns| 100.0 * ns as f64 / span_ns),
    );
    put("state_changes", i.state_changes.map(|n| n as f64));
    for (key, pred) in sets {
        let (mut turns, mut sum) = (None::<u64>, 0u64);
        for f in r.flows.iter().filter(|f| pred(&f.name)) {
            if let (Some(t), Some(b)) = (f.internals.turns, f.internals.budget_sum) {
                *turns.get_or_insert(0) += t;
                sum += b;
            }
        }
        put(
            &format!("budget_{key}"),
            turns.filter(|&t| t > 0).map(|t| sum as f64 / t as f64),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> Ctx {
        Ctx {
            quick: true,
            seed: 1,
            traces_dir: std::env::temp_dir(),
            target: None,
        }
    }

    /// Two flows on a disk: `small` reads 1 MiB per run, 20 runs; `big`
    /// reads all the time; `sched` with `settings` (TOML lines).
    fn two_flows(sched: &str, settings: &str) -> String {
        format!(
            "name = \"t\"\nduration = \"2s\"\nseed = 1\n[device]\npreset = \"maxtor-6l080l0\"\n[scheduler]\nname = \"{sched}\"\n{settings}\n[[flow]]\nname = \"small\"\npattern = \"seq\"\nblock = \"64k\"\nbytes = \"1M\"\nrepeat = \"10ms\"\nruns = 20\n[[flow]]\nname = \"big\"\npattern = \"seq\"\nblock = \"128k\"\nregion = {}\n",
            region(1 << 34, 1 << 30)
        )
    }

    #[test]
    fn mechanisms_come_from_the_schedulers_counters_across_a_flows_runs() {
        let r = run(&two_flows("bfq", "max_budget = \"4096\""), "t", &ctx()).unwrap();
        let small = r.flows.iter().find(|f| f.name == "small").unwrap();
        assert!(small.completions_s.len() >= 2, "{small:?}");
        // each run is a new scheduler flow: its turns add up over the runs
        assert!(
            small.internals.turns.unwrap() >= small.completions_s.len() as u64,
            "{small:?}"
        );
        let mut m = std::collections::BTreeMap::new();
        let set: FlowSet = ("small", |f| f == "small");
        mechanisms(&r, &[set, ("big", |f| f == "big")], &mut m);
        assert_eq!(m.get("bmax"), Some(&4096.0));
        for k in ["peak_rate", "inj_pct", "budget_small", "budget_big"] {
            assert!(m.get(k).is_some_and(|x| x.is_finite()), "{k}: {m:?}");
        }
        assert!(m["budget_big"] <= 4096.0, "{m:?}");
        assert!(!m.contains_key("low_pct"));
        // throttle-low: its time in LOW, no BFQ counters
        let low = "\"low_bps.f0\" = \"1M\"";
        let r = run(&two_flows("throttle-low", low), "t", &ctx()).unwrap();
        let mut m = std::collections::BTreeMap::new();
        mechanisms(&r, &[set], &mut m);
        assert!(
            m.get("low_pct").is_some_and(|p| (0.0..=100.0).contains(p)),
            "{m:?}"
        );
        assert!(m.contains_key("state_changes"));
        assert!(
            !m.contains_key("bmax") && !m.contains_key("budget_small"),
            "{m:?}"
        );
    }
}
