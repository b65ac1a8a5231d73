//! The statistics view: each group's and flow's throughput, share of the
//! bytes and mean/maximum latency since the previous view.

use crate::flows::{FlowTable, FlowView};
use crate::procinfo::ProcKey;
use std::collections::{HashMap, HashSet};
use std::fmt::Write;
use std::time::Instant;

/// Bytes read, bytes written, requests, latency sum (ns) in an interval.
type Delta = (u64, u64, u64, u64);

/// Keeps the previous snapshot to turn counters into rates, by flow: a
/// flow is a process (its id and start time), so a pid that a new process
/// reuses between two views starts from zero, and the old process's last
/// interval counts as ended.
pub struct StatsView {
    last: HashMap<ProcKey, FlowView>,
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
        let rows: Vec<(&FlowView, Delta)> = views.iter().map(|v| (v, self.delta(v))).collect();
        let (flows, groups) = table.counts();
        let ended = table.ended();
        // Bytes of flows that ended during the interval count in the
        // aggregate: what they did since the last view.
        let ended_bytes = ended.read_bytes + ended.write_bytes;
        let ended_delta = self.ended_delta(&views, ended_bytes);
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
        self.last = views.into_iter().map(|v| (v.key, v)).collect();
        out
    }

    /// Flow `v`'s counters since the last view (all of them if it is new).
    fn delta(&self, v: &FlowView) -> Delta {
        let p = self.last.get(&v.key);
        let d = |now: u64, f: fn(&FlowView) -> u64| now - p.map_or(0, f).min(now);
        (
            d(v.read_bytes, |p| p.read_bytes),
            d(v.write_bytes, |p| p.write_bytes),
            d(v.requests, |p| p.requests),
            d(v.lat_sum_ns, |p| p.lat_sum_ns),
        )
    }

    /// Bytes of the flows that ended since the last view, done since it:
    /// the growth of the ended total less what they had at the last view.
    fn ended_delta(&self, views: &[FlowView], ended_bytes: u64) -> u64 {
        let live: HashSet<ProcKey> = views.iter().map(|v| v.key).collect();
        let grown = ended_bytes.saturating_sub(self.last_ended);
        let seen: u64 = self
            .last
            .values()
            .filter(|p| !live.contains(&p.key))
            .map(|p| p.read_bytes + p.write_bytes)
            .sum();
        grown - seen.min(grown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bfq_engine::IoClass;

    fn view(tgid: u32, start: u64, read_bytes: u64) -> FlowView {
        FlowView {
            key: ProcKey { tgid, start },
            tgid,
            exe: "x".into(),
            group: "/".into(),
            group_weight: 100,
            weight: 100,
            class: IoClass::Be,
            level: 4,
            read_bytes,
            write_bytes: 0,
            requests: read_bytes / 4096,
            lat_sum_ns: 0,
            lat_max_ns: 0,
        }
    }

    #[test]
    fn a_reused_pid_is_a_new_flow() {
        let mut s = StatsView::default();
        let old = view(42, 1000, 8 << 20);
        s.last = [(old.key, old)].into_iter().collect();
        // pid 42 exited after 10 MiB; a new process got pid 42 and read 1 MiB
        let new = view(42, 2000, 1 << 20);
        assert_eq!(
            s.delta(&new).0,
            1 << 20,
            "counted from zero, not from the old"
        );
        assert_eq!(s.ended_delta(&[new], 10 << 20), 2 << 20);
        // the same process: its growth since the last view
        assert_eq!(s.delta(&view(42, 1000, 9 << 20)).0, 1 << 20);
    }
}
