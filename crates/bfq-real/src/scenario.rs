//! A scenario (the format of `bfq sim`, docs/scenarios.md) as a real run:
//! a planned scenario's flows and groups as [`FlowDesc`]s and
//! [`GroupDesc`]s ([`from_plan`]), and a run's results in the simulator's
//! JSON format ([`to_sim_result`]), so that `bfq sim` and `bfq run` read
//! and write the same files.

use crate::desc::{Dir, FlowDesc, GroupDesc, OnOff, Pattern, Periodic};
use crate::report::RunReport;
use bfq_core::SECTOR_BYTES;
use bfq_scenario::scenario::FlowPlan;
use bfq_scenario::{FlowResult, Pattern as SimPattern, Plan, SimResult};
use std::io;
use std::time::Duration;

/// Converts a planned scenario's groups and flows.
pub fn from_plan(plan: &Plan) -> io::Result<(Vec<FlowDesc>, Vec<GroupDesc>)> {
    let groups = plan
        .groups
        .iter()
        .map(|g| GroupDesc {
            name: g.path.clone(),
            weight: g.weight,
            parent: g.parent.map(|p| plan.groups[p].path.clone()),
        })
        .collect();
    let mut flows = Vec::new();
    for f in &plan.flows {
        flows.push(flow_desc(plan, f)?);
    }
    Ok((flows, groups))
}

/// Converts one planned flow (sectors to bytes, nanoseconds to
/// durations, flow and group numbers to names), warning that
/// `buffered = true` is ignored.
fn flow_desc(plan: &Plan, f: &FlowPlan) -> io::Result<FlowDesc> {
    let pattern = flow_pattern(f)?;
    if f.buffered {
        eprintln!(
            "bfq: flow {}: buffered = true is ignored (the target is opened once, \
             O_DIRECT unless --buffered)",
            f.name
        );
    }
    let (runs, repeat) = match f.repeat {
        Some(gap) => (f.runs.unwrap_or(u32::MAX), Duration::from_nanos(gap)),
        None => (1, Duration::ZERO),
    };
    Ok(FlowDesc {
        name: f.name.clone(),
        dir: match f.op {
            bfq_core::Op::Read => Dir::Read,
            bfq_core::Op::Write => Dir::Write,
        },
        pattern,
        block: f.block * SECTOR_BYTES as u32,
        depth: f.depth.max(1),
        sync: f.sync,
        region: Some((f.region_start * SECTOR_BYTES, f.region_len * SECTOR_BYTES)),
        bytes: f.bytes,
        think: Duration::from_nanos(f.think),
        on_off: f.on_off.map(|o| OnOff {
            on_bytes: (o.on.lo.0, o.on.hi.0),
            off: (
                Duration::from_nanos(o.off.lo.0),
                Duration::from_nanos(o.off.hi.0),
            ),
        }),
        periodic: f.periodic.map(|p| Periodic {
            every: Duration::from_nanos(p.every.0),
            bytes: p.bytes.0,
        }),
        runs,
        repeat,
        start: Duration::from_nanos(f.start),
        stop: f.stop.map(Duration::from_nanos),
        duration: f.duration.map(Duration::from_nanos),
        after: f
            .after
            .iter()
            .map(|&k| plan.flows[k].name.clone())
            .collect(),
        weight: f.weight,
        prio: f.prio,
        group: f.group.map(|g| plan.groups[g].path.clone()),
    })
}

/// A planned flow's access pattern (a replay's rows in bytes); `web`
/// is refused.
fn flow_pattern(f: &FlowPlan) -> io::Result<Pattern> {
    Ok(match f.pattern {
        SimPattern::Seq => Pattern::Seq,
        SimPattern::Rand => Pattern::Rand,
        SimPattern::Replay => Pattern::Replay(
            f.replay
                .as_ref()
                .map(|rows| {
                    rows.iter()
                        .map(|r| (r.sector * SECTOR_BYTES, r.sectors * SECTOR_BYTES as u32))
                        .collect()
                })
                .unwrap_or_default(),
        ),
        SimPattern::Web => {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "flow {}: pattern = \"web\" is not supported by real runs yet",
                    f.name
                ),
            ))
        }
    })
}

/// The results in the simulator's JSON format (`bfq sim --json`).
pub fn to_sim_result(r: &RunReport, scenario: &str, seed: u64, interval: Duration) -> SimResult {
    let iv = interval.as_secs_f64();
    let flows = r
        .flows
        .iter()
        .map(|f| {
            let h = &f.lat;
            let span = f.active_seconds(r.seconds);
            // Each run's own time, from its first request to its end: the
            // start delay and the gaps between runs are not counted.
            let run_times: Vec<f64> = f
                .run_starts_s
                .iter()
                .zip(&f.run_ends_s)
                .map(|(s, e)| e - s)
                .collect();
            FlowResult {
                name: f.name.clone(),
                bytes: f.bytes,
                requests: f.ios,
                throughput_mib_s: f.bytes as f64 / span / 1048576.0,
                latency_ms: h.stats_ms(),
                completions_s: f.run_ends_s.clone(),
                deadline_misses: 0,
                run_times_s: run_times,
                batches: 0,
                batch_latency_ms: Default::default(),
                latency_cdf_ms: h.cdf_ms(),
                series_mib_s: f
                    .series_bytes
                    .iter()
                    .map(|&b| b as f64 / iv / 1048576.0)
                    .collect(),
                internals: Default::default(),
            }
        })
        .collect();
    SimResult {
        scenario: scenario.to_string(),
        scheduler: r.backend.clone(),
        seed,
        sim_time_s: r.seconds,
        aggregate_mib_s: r.total_bytes() as f64 / r.seconds.max(1e-9) / 1048576.0,
        flows,
        device: r.target.clone(),
        requests: r.total_ios(),
        series_interval_s: iv,
        internals: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_a_planned_scenario() {
        let text = r#"
name = "t"
duration = "2s"
[device]
capacity = "1G"
[[group]]
path = "/a/b"
weight = 300
[[flow]]
name = "r"
weight = 200
group = "/a/b"
region = { start = "50%", size = "100M" }
bytes = "10M"
repeat = "1s"
runs = 3
[[flow]]
name = "w"
op = "write"
pattern = "rand"
sync = false
depth = 8
count = 2
on_off = { on = "1M", off = "10ms" }
"#;
        let sc = bfq_scenario::Scenario::from_toml_str(text, "test").unwrap();
        let plan = sc.plan().unwrap();
        let (flows, groups) = from_plan(&plan).unwrap();
        assert_eq!(flows.len(), 3);
        let r = &flows[0];
        assert_eq!(r.region, Some((512 << 20, 100 << 20)));
        assert_eq!((r.runs, r.repeat), (3, Duration::from_secs(1)));
        assert_eq!(r.group.as_deref(), Some("/a/b"));
        assert_eq!((r.depth, r.sync), (1, true));
        let w = &flows[1];
        assert_eq!(
            (w.dir, w.depth, w.block, w.sync),
            (Dir::Write, 8, 4096, false)
        );
        assert!(w.on_off.is_some());
        let b = groups.iter().find(|g| g.name == "/a/b").unwrap();
        assert_eq!((b.weight, b.parent.as_deref()), (300, Some("/a")));
    }

    #[test]
    fn an_o_direct_io_uring_reader_is_sync_at_any_depth() {
        let d = bfq_scenario::Scenario::from_toml_str(
            "name = \"d\"\n[[flow]]\nname = \"r\"\npattern = \"rand\"\ndepth = 16\n",
            "d",
        )
        .unwrap();
        let (df, _) = from_plan(&d.plan().unwrap()).unwrap();
        assert_eq!((df[0].depth, df[0].sync), (16, true));
    }

    /// A 2-second fifo run of `flows`.
    fn fifo_report(flows: Vec<crate::report::FlowReport>) -> RunReport {
        RunReport {
            backend: "fifo".into(),
            target: "x".into(),
            seconds: 2.0,
            cpu_seconds: 0.0,
            scheduler: None,
            engine: None,
            flows,
            timeline: Vec::new(),
            trace_error: None,
            interrupted: None,
        }
    }

    #[test]
    fn results_count_each_run_its_own_time() {
        let report = fifo_report(vec![crate::report::FlowReport {
            name: "r".into(),
            weight: 200,
            ios: 2,
            bytes: 8192,
            lat: [1000, 2000].into_iter().collect(),
            series_bytes: vec![4096, 4096],
            run_starts_s: vec![0.25, 1.0],
            run_ends_s: vec![0.5, 1.5],
            ..Default::default()
        }]);
        let j = to_sim_result(&report, "t", 1, Duration::from_secs(1));
        // each run's own time: the start delay and the gap are not counted
        assert_eq!(j.flows[0].run_times_s, vec![0.25, 0.5]);
        assert_eq!(j.flows[0].completions_s, vec![0.5, 1.5]);
        assert_eq!(j.flows[0].requests, 2);
        assert!(j.to_json().contains("\"scenario\": \"t\""));
    }

    #[test]
    fn a_late_flow_is_counted_over_its_own_time() {
        // a flow that started late (a start delay, or after others) is
        // counted over its own time: 1 MiB from 1 s to 1.5 s is 2 MiB/s
        let late = crate::report::FlowReport {
            name: "late".into(),
            bytes: 1 << 20,
            start_s: Some(1.0),
            run_starts_s: vec![1.0],
            run_ends_s: vec![1.5],
            ..Default::default()
        };
        let report = RunReport {
            seconds: 3.0,
            ..fifo_report(vec![late])
        };
        let j = to_sim_result(&report, "t", 1, Duration::from_secs(1));
        assert!((j.flows[0].throughput_mib_s - 2.0).abs() < 1e-9);
    }
}
