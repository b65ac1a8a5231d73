//! The statistics view: each group's and flow's throughput, share of the
//! bytes and mean/maximum latency since the previous view.

use crate::flows::{FlowTable, FlowView};
use std::collections::HashMap;
use std::fmt::Write;
use std::time::Instant;

/// Bytes read, bytes written, requests, latency sum (ns) in an interval.
type Delta = (u64, u64, u64, u64);

/// Keeps the previous snapshot to turn counters into rates.
pub struct StatsView {
    last: HashMap<u32, FlowView>,
    /// Bytes of the flows that had ended at the last view.
    last_ended: u64,
    at: Instant,
}

impl Default for StatsView {
    fn default() -> Self {
        StatsView {
            last: HashMap::new(),
            last_ended: 0,
            at: Instant::now(),
        }
    }
}

fn class_name(c: bfq_engine::IoClass) -> &'static str {
    match c {
        bfq_engine::IoClass::Rt => "rt",
        bfq_engine::IoClass::Be => "be",
        bfq_engine::IoClass::Idle => "idle",
    }
}

impl StatsView {
    /// Renders the table for the interval since the last call.
    pub fn render(&mut self, table: &FlowTable) -> String {
        let views = table.views();
        let secs = self.at.elapsed().as_secs_f64().max(1e-3);
        self.at = Instant::now();
        let delta = |v: &FlowView| -> Delta {
            let p = self.last.get(&v.tgid);
            let d = |now: u64, f: fn(&FlowView) -> u64| now - p.map_or(0, f).min(now);
            (
                d(v.read_bytes, |p| p.read_bytes),
                d(v.write_bytes, |p| p.write_bytes),
                d(v.requests, |p| p.requests),
                d(v.lat_sum_ns, |p| p.lat_sum_ns),
            )
        };
        let rows: Vec<(&FlowView, Delta)> = views.iter().map(|v| (v, delta(v))).collect();
        let (flows, groups) = table.counts();
        let ended = table.ended();
        // Bytes of flows that ended during the interval count in the
        // aggregate: what they did since the last view.
        let ended_bytes = ended.read_bytes + ended.write_bytes;
        let ended_delta: u64 = ended_bytes.saturating_sub(self.last_ended)
            - self
                .last
                .values()
                .filter(|p| !views.iter().any(|v| v.tgid == p.tgid))
                .map(|p| p.read_bytes + p.write_bytes)
                .sum::<u64>()
                .min(ended_bytes.saturating_sub(self.last_ended));
        self.last_ended = ended_bytes;
        let total: u64 = (rows.iter().map(|(_, d)| d.0 + d.1).sum::<u64>() + ended_delta).max(1);
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{flows} flows in {groups} groups ({} ended); {:.1} MiB/s over {secs:.1} s",
            ended.flows,
            total as f64 / secs / 1048576.0
        );
        let mut by_group: HashMap<&str, u64> = HashMap::new();
        for (v, d) in &rows {
            *by_group.entry(v.group.as_str()).or_default() += d.0 + d.1;
        }
        let mut gs: Vec<_> = by_group.into_iter().collect();
        gs.sort();
        for (g, b) in gs {
            let _ = writeln!(
                out,
                "group {g}: {:.1} MiB/s, share {:.1}%",
                b as f64 / secs / 1048576.0,
                100.0 * b as f64 / total as f64
            );
        }
        let _ = writeln!(
            out,
            "{:>8} {:<16} {:>6} {:>9} {:>9} {:>9} {:>6} {:>9} {:>9}",
            "pid", "exe", "weight", "class", "read/s", "write/s", "share", "lat avg", "lat max"
        );
        for (v, (r, w, n, lat)) in &rows {
            let _ = writeln!(
                out,
                "{:>8} {:<16} {:>6} {:>9} {:>7.1}Mi {:>7.1}Mi {:>5.1}% {:>7.2}ms {:>7.2}ms",
                v.tgid,
                v.exe.chars().take(16).collect::<String>(),
                v.weight,
                format!("{}/{}", class_name(v.class), v.level),
                *r as f64 / secs / 1048576.0,
                *w as f64 / secs / 1048576.0,
                100.0 * (r + w) as f64 / total as f64,
                if *n > 0 {
                    *lat as f64 / *n as f64 / 1e6
                } else {
                    0.0
                },
                v.lat_max_ns as f64 / 1e6,
            );
        }
        self.last = views.into_iter().map(|v| (v.tgid, v)).collect();
        out
    }
}
