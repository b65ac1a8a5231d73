//! What a real run did: per-flow counts, latencies, series and runs.

/// What one flow did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlowReport {
    /// Flow name.
    pub name: String,
    /// Weight it ran with.
    pub weight: u32,
    /// Requests completed.
    pub ios: u64,
    /// Bytes completed.
    pub bytes: u64,
    /// Requests that failed.
    pub errors: u64,
    /// The first failure's message.
    pub first_error: Option<String>,
    /// Mean, median, 99th percentile and maximum latency in microseconds.
    pub lat_mean_us: f64,
    /// Median latency, us.
    pub lat_p50_us: f64,
    /// 99th percentile latency, us.
    pub lat_p99_us: f64,
    /// Largest latency, us.
    pub lat_max_us: f64,
    /// Every request's latency in nanoseconds, sorted.
    pub lat_ns: Vec<u64>,
    /// Bytes completed per `series_interval`.
    pub series_bytes: Vec<u64>,
    /// When each run of the byte budget issued its first request (s since
    /// the start), same order as `run_ends_s`.
    pub run_starts_s: Vec<f64>,
    /// When each run of the byte budget ended (s since the start).
    pub run_ends_s: Vec<f64>,
}

/// What a run did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunReport {
    /// Who scheduled (`bfq`, `fifo`, ..., or `kernel:bfq`, `kernel:none`, ...).
    pub backend: String,
    /// The target's path.
    pub target: String,
    /// Wall-clock length of the run, s.
    pub seconds: f64,
    /// Each flow, in the workload's order.
    pub flows: Vec<FlowReport>,
    /// CPU seconds (user + system) this process spent during the run, all
    /// threads (the engine's dispatcher and io_uring workers included; the
    /// kernel's own worker threads, e.g. a loop device's, are not).
    pub cpu_seconds: f64,
}

impl RunReport {
    /// A run's report before the CPU time is filled in.
    pub(crate) fn of(cfg: &crate::desc::RunConfig, seconds: f64, flows: Vec<FlowReport>) -> Self {
        RunReport {
            backend: cfg.backend.label(),
            target: cfg.target.display().to_string(),
            seconds,
            flows,
            cpu_seconds: 0.0,
        }
    }

    /// Requests completed by every flow.
    pub fn total_ios(&self) -> u64 {
        self.flows.iter().map(|f| f.ios).sum()
    }
    /// Bytes completed by every flow.
    pub fn total_bytes(&self) -> u64 {
        self.flows.iter().map(|f| f.bytes).sum()
    }
    /// Requests completed per second of the run.
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
