//! Results of a simulation: the JSON (`scenario`, `scheduler`,
//! `seed`, `sim_time_s`, `aggregate_mib_s`, `flows[...]`) plus extras
//! (latency CDF, per-run times, throughput time series), and a compact
//! deterministic latency histogram.

use bfq_core::Time;
use serde::Serialize;

/// Log-linear histogram of nanosecond values: exact below 128 ns, then 64
/// sub-buckets per power of two (relative error < 1.6%). Mean and max are
/// exact. At most 3 776 buckets (30 KiB), however many values it records.
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct Hist {
    buckets: Vec<u64>,
    count: u64,
    sum: u128,
    max: u64,
}

const SUB: u32 = 6; // 64 sub-buckets

fn bucket_of(v: u64) -> usize {
    if v < 128 {
        return v as usize;
    }
    let e = 63 - v.leading_zeros(); // >= 7
    let m = (v >> (e - SUB)) & ((1 << SUB) - 1);
    128 + ((e - 7) as usize) * (1 << SUB) + m as usize
}

fn bucket_mid(b: usize) -> u64 {
    if b < 128 {
        return b as u64;
    }
    let k = b - 128;
    let e = (k >> SUB) as u32 + 7;
    let m = (k & ((1 << SUB) - 1)) as u64;
    let lo = (1u64 << e) + (m << (e - SUB));
    lo + (1u64 << (e - SUB)) / 2
}

impl Hist {
    /// Records one value.
    pub fn add(&mut self, v: u64) {
        let b = bucket_of(v);
        if b >= self.buckets.len() {
            self.buckets.resize(b + 1, 0);
        }
        self.buckets[b] += 1;
        self.count += 1;
        self.sum += u128::from(v);
        self.max = self.max.max(v);
    }
    /// Records every value of `other` (as if each had been added here).
    pub fn merge(&mut self, other: &Hist) {
        if self.buckets.len() < other.buckets.len() {
            self.buckets.resize(other.buckets.len(), 0);
        }
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            *a += b;
        }
        self.count += other.count;
        self.sum += other.sum;
        self.max = self.max.max(other.max);
    }
    /// Number of values.
    pub fn count(&self) -> u64 {
        self.count
    }
    /// Exact mean.
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }
    /// Exact maximum.
    pub fn max(&self) -> u64 {
        self.max
    }
    /// The value at quantile `q` in 0..=1 (bucket midpoint, capped by max).
    pub fn quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (b, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return bucket_mid(b).min(self.max);
            }
        }
        self.max
    }
    /// Summary in milliseconds.
    pub fn stats_ms(&self) -> LatencyStats {
        let ms = |v: f64| v / 1e6;
        LatencyStats {
            mean: ms(self.mean()),
            p50: ms(self.quantile(0.5) as f64),
            p99: ms(self.quantile(0.99) as f64),
            max: ms(self.max as f64),
        }
    }
    /// `[value_ms, fraction]` points of the CDF at fixed quantiles.
    pub fn cdf_ms(&self) -> Vec<[f64; 2]> {
        if self.count == 0 {
            return Vec::new();
        }
        CDF_POINTS
            .iter()
            .map(|&q| [self.quantile(q) as f64 / 1e6, q])
            .collect()
    }
}

impl FromIterator<u64> for Hist {
    fn from_iter<I: IntoIterator<Item = u64>>(values: I) -> Hist {
        let mut h = Hist::default();
        for v in values {
            h.add(v);
        }
        h
    }
}

/// Quantiles reported in `latency_cdf_ms`.
pub const CDF_POINTS: [f64; 14] = [
    0.0, 0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9999, 1.0,
];

/// Latency summary, milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct LatencyStats {
    /// Mean, ms.
    pub mean: f64,
    /// Median, ms.
    pub p50: f64,
    /// 99th percentile, ms.
    pub p99: f64,
    /// Largest, ms.
    pub max: f64,
}

/// One flow's results.
#[derive(Clone, Debug, Serialize)]
pub struct FlowResult {
    /// Flow name (copies of a `count` flow are `name.1`, `name.2`, ...).
    pub name: String,
    /// Bytes completed.
    pub bytes: u64,
    /// Requests completed.
    pub requests: u64,
    /// Bytes / (end - start) in MiB/s, where end is the flow's last run end
    /// if it finished, else the end of the simulation.
    pub throughput_mib_s: f64,
    /// Per-request latency, from reaching the scheduler to completion.
    pub latency_ms: LatencyStats,
    /// Finish time (s since start of simulation) of each run of a finite
    /// or repeating flow.
    pub completions_s: Vec<f64>,
    /// Periodic batches completed after their deadline, plus batches still
    /// unfinished past their deadline at the end.
    pub deadline_misses: u64,
    /// Duration of each run (s), same order as `completions_s`.
    pub run_times_s: Vec<f64>,
    /// Batches released (periodic flows) or small files read (web).
    pub batches: u64,
    /// Latency of batches (periodic: release to completion) or of small
    /// files (web: first request to last completion).
    pub batch_latency_ms: LatencyStats,
    /// `[latency_ms, fraction]` points of the per-request latency CDF.
    pub latency_cdf_ms: Vec<[f64; 2]>,
    /// Throughput per `output.series_interval`, MiB/s.
    pub series_mib_s: Vec<f64>,
    /// What the scheduler's mechanisms did for this flow (turns, budgets,
    /// injection), where the run can read them; not in the JSON.
    #[serde(skip)]
    pub internals: bfq_core::FlowInternals,
}

/// The result of one simulation run.
#[derive(Clone, Debug, Serialize)]
pub struct SimResult {
    /// Scenario name.
    pub scenario: String,
    /// Scheduler name.
    pub scheduler: String,
    /// Seed used.
    pub seed: u64,
    /// Simulated time: the duration, or when every flow finished.
    pub sim_time_s: f64,
    /// All flows' bytes / sim time, MiB/s.
    pub aggregate_mib_s: f64,
    /// Per flow, in scenario order.
    pub flows: Vec<FlowResult>,
    /// Device preset name.
    pub device: String,
    /// Requests completed (all flows).
    pub requests: u64,
    /// Seconds per point of `series_mib_s`.
    pub series_interval_s: f64,
    /// What the scheduler's mechanisms did (B_max, injection, throttle
    /// state) at the end, where the run can read them; not in the JSON.
    #[serde(skip)]
    pub internals: bfq_core::Internals,
}

impl SimResult {
    /// Pretty JSON (stable field order, deterministic numbers).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("serializable")
    }

    /// A human summary table.
    pub fn summary(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{} | scheduler {} | device {} | seed {} | {:.3} s simulated",
            self.scenario, self.scheduler, self.device, self.seed, self.sim_time_s
        );
        let _ = writeln!(
            s,
            "{:<16} {:>10} {:>9} {:>10} {:>9} {:>9} {:>9} {:>6} {:>8}",
            "flow", "MiB", "reqs", "MiB/s", "lat mean", "p99 ms", "max ms", "runs", "misses"
        );
        for f in &self.flows {
            let _ = writeln!(
                s,
                "{:<16} {:>10.1} {:>9} {:>10.2} {:>9.2} {:>9.2} {:>9.2} {:>6} {:>8}",
                f.name,
                f.bytes as f64 / 1048576.0,
                f.requests,
                f.throughput_mib_s,
                f.latency_ms.mean,
                f.latency_ms.p99,
                f.latency_ms.max,
                f.completions_s.len(),
                f.deadline_misses
            );
            if !f.run_times_s.is_empty() {
                let mean = f.run_times_s.iter().sum::<f64>() / f.run_times_s.len() as f64;
                let max = f.run_times_s.iter().cloned().fold(0.0, f64::max);
                let _ = writeln!(
                    s,
                    "{:<16} run time mean {:.3} s, max {:.3} s",
                    "", mean, max
                );
            }
        }
        let _ = writeln!(
            s,
            "aggregate {:.2} MiB/s, {} requests",
            self.aggregate_mib_s, self.requests
        );
        s
    }
}

/// Nanoseconds to seconds.
pub fn secs(t: Time) -> f64 {
    t as f64 / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_histograms_hold_both_sets_of_values() {
        let (a, b) = ([5u64, 300, 70_000], [1u64, 9_000_000]);
        let mut m: Hist = a.iter().copied().collect();
        m.merge(&b.iter().copied().collect());
        assert_eq!(m, a.iter().chain(&b).copied().collect::<Hist>());
    }

    #[test]
    fn quantiles() {
        let mut h = Hist::default();
        for v in 1..=1000u64 {
            h.add(v * 1000);
        }
        let p50 = h.quantile(0.5) as f64;
        assert!((p50 - 500_000.0).abs() / 500_000.0 < 0.02, "{p50}");
        assert_eq!(h.max(), 1_000_000);
        assert_eq!(h.quantile(1.0), 1_000_000);
        assert!((h.mean() - 500_500.0).abs() < 1e-6);
        for v in [0u64, 1, 127, 128, 129, 1 << 20, u64::MAX / 2] {
            let b = bucket_of(v);
            let m = bucket_mid(b);
            assert!(m.abs_diff(v) as f64 <= (v as f64) * 0.016 + 1.0, "{v} {m}");
        }
    }
}
