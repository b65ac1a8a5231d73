//! What a real run did: per-flow counts, latencies, series and runs.

use bfq_scenario::result::Hist;

/// What one flow did.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FlowReport {
    /// Flow name.
    pub name: String,
    /// Weight it ran with.
    pub weight: u32,
    /// Group it ran in (`None`: the root).
    pub group: Option<String>,
    /// I/O class it ran in, as `bfq_core::IoClass as u8`: 0 real time,
    /// 1 best effort (the default), 2 idle.
    #[serde(default = "best_effort")]
    pub class: u8,
    /// Its share of the device by the weights: its weight among the flows
    /// of its group, times each enclosing group's weight among the groups
    /// and flows beside it that ran (`RunReport::of`); 0 where an entity
    /// of a higher class ran beside it (classes are served in order).
    pub due_share: f64,
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
    /// The requests' latencies in nanoseconds, in a log-linear histogram
    /// (quantiles within 1.6%, mean and maximum exact; its size is bounded
    /// however many requests a run makes).
    pub lat: Hist,
    /// Bytes completed per `series_interval`.
    pub series_bytes: Vec<u64>,
    /// When the flow issued its first request (s since the start; `None`:
    /// it never did).
    pub start_s: Option<f64>,
    /// When each run of the byte budget issued its first request (s since
    /// the start), same order as `run_ends_s`.
    pub run_starts_s: Vec<f64>,
    /// When each run of the byte budget ended (s since the start).
    pub run_ends_s: Vec<f64>,
}

impl FlowReport {
    /// Seconds the flow was in the run of `run_seconds`: from its first
    /// request to the end of its last run, or to the run's end if it was
    /// still running (its throughput is its bytes over this, as the
    /// simulator counts from a flow's start to its end).
    pub fn active_seconds(&self, run_seconds: f64) -> f64 {
        let end = self.run_ends_s.last().copied().unwrap_or(run_seconds);
        (end - self.start_s.unwrap_or(0.0)).max(1e-9)
    }
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
    /// What the engine's scheduler learned and did (B_max, peak rate,
    /// injection, the device's medium); `None` for the kernel's schedulers.
    pub scheduler: Option<bfq_core::Internals>,
    /// The engine's counters at the end of the run; `None` for the
    /// kernel's schedulers.
    pub engine: Option<bfq_engine::EngineStats>,
    /// The scheduler read for each flow every `RunConfig::timeline`
    /// ([`crate::timeline`]); empty without it, and for kernel:*.
    pub timeline: Vec<crate::timeline::TimelinePoint>,
    /// Why the run's trace (`RunConfig::trace`) was not written whole: a
    /// failed write or flush, or putting the file in place. The rest of
    /// the report is complete; `None` without a trace or when it was.
    pub trace_error: Option<String>,
    /// The signal (SIGINT, SIGTERM) that ended the run before its end,
    /// with `RunConfig::keep_partial`: the figures cover its `seconds`
    /// until then. `None` for a run that ran to its end.
    pub interrupted: Option<i32>,
}

impl RunReport {
    /// A run's report before the CPU time is filled in.
    pub(crate) fn of(
        cfg: &crate::desc::RunConfig,
        seconds: f64,
        mut flows: Vec<FlowReport>,
    ) -> Self {
        let due: Vec<f64> = (0..flows.len())
            .map(|i| due_share(&cfg.groups, &flows, i))
            .collect();
        for (f, d) in flows.iter_mut().zip(due) {
            f.due_share = d;
        }
        RunReport {
            backend: cfg.backend.label(),
            target: cfg.target.display().to_string(),
            seconds,
            flows,
            cpu_seconds: 0.0,
            scheduler: None,
            engine: None,
            timeline: Vec::new(),
            trace_error: None,
            interrupted: crate::sys::interrupted(),
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
        self.flows
            .iter()
            .map(|f| (f.bytes as f64 / tb, f.due_share))
            .collect()
    }
    /// Largest relative deviation of a flow's share from its weight's
    /// share, over the flows due a share (not those a higher class
    /// outranked).
    pub fn worst_share_error(&self) -> f64 {
        self.shares()
            .iter()
            .filter(|(_, due)| *due > 0.0)
            .map(|(got, due)| ((got - due) / due).abs())
            .fold(0.0, f64::max)
    }
}

/// The default class of a report that does not name one: best effort.
fn best_effort() -> u8 {
    bfq_core::IoClass::Be as u8
}

/// The share of flow `i` by the weights of the hierarchy: its weight among
/// the flows of its group, times, level by level up to the root, its
/// group's weight among the entities beside it (groups holding a flow of
/// the run, and flows) under the same parent. Without groups: its weight
/// over the sum of the weights. At each level only the entities of the
/// best class there count (groups are best effort): BFQ serves the classes
/// in strict priority, real time, best effort, idle (the kernel's
/// per-class service trees; an idle-class entity gets a little service
/// after 200 ms without any, not counted here), so an entity beside one of
/// a better class is due 0.
fn due_share(groups: &[crate::desc::GroupDesc], flows: &[FlowReport], i: usize) -> f64 {
    let parent_of = |g: &str| {
        groups
            .iter()
            .find(|d| d.name == g)
            .and_then(|d| d.parent.clone())
    };
    // Whether the group holds a flow of the run, directly or below.
    let holds = |g: &str| {
        flows.iter().any(|f| {
            let mut at = f.group.clone();
            for _ in 0..=groups.len() {
                match at {
                    Some(ref x) if x == g => return true,
                    Some(ref x) => at = parent_of(x),
                    None => return false,
                }
            }
            false
        })
    };
    let be = best_effort();
    // The best class under `parent`, and the weights of its entities there:
    // its flows and its groups that ran (groups are best effort).
    let level = |parent: Option<&str>| -> (u8, f64) {
        let here = || flows.iter().filter(|f| f.group.as_deref() == parent);
        let gw: u32 = groups
            .iter()
            .filter(|g| g.parent.as_deref() == parent && holds(&g.name))
            .map(|g| g.weight)
            .sum();
        let best = here()
            .map(|f| f.class)
            .chain((gw > 0).then_some(be))
            .min()
            .unwrap_or(be);
        let fw: u32 = here().filter(|f| f.class == best).map(|f| f.weight).sum();
        let gw = if best == be { gw } else { 0 };
        (best, f64::from(fw + gw).max(1.0))
    };
    // An entity's weight over its level's, 0 beside a better class.
    let part = |class: u8, weight: u32, parent: Option<&str>| {
        let (best, sum) = level(parent);
        if class == best {
            f64::from(weight) / sum
        } else {
            0.0
        }
    };
    let f = &flows[i];
    let mut share = part(f.class, f.weight, f.group.as_deref());
    let mut at = f.group.clone();
    for _ in 0..groups.len() {
        let Some(g) = at
            .as_deref()
            .and_then(|n| groups.iter().find(|d| d.name == n))
        else {
            break;
        };
        share *= part(be, g.weight, g.parent.as_deref());
        at = g.parent.clone();
    }
    share
}

/// The warning an engine's counters call for, if any: threads whose
/// io_uring ring could not be made (`EngineStats::ring_setup_failed`),
/// so that their requests went through the engine's service thread, many
/// times slower at high request rates, with the first OS error and the
/// likely cure. Without the warning such a run is slower for no visible
/// reason.
pub fn ring_setup_warning(s: &bfq_engine::EngineStats) -> Option<String> {
    if s.ring_setup_failed == 0 {
        return None;
    }
    let (err, cure) = match s.ring_setup_error() {
        Some(e) if e.raw_os_error() == Some(libc::ENOMEM) => (
            e.to_string(),
            "free memory, or before Linux 5.12 raise the limit of locked memory (`ulimit -l`)",
        ),
        Some(e) => (e.to_string(), "raise the limit of open files (`ulimit -n`)"),
        None => (
            "no OS error".to_string(),
            "raise the limit of open files (`ulimit -n`)",
        ),
    };
    Some(format!(
        "the engine could not set up a thread's io_uring ring {} time(s) (first error: {err}); \
         those threads' requests went through the engine's service thread, which is much \
         slower, so the figures understate the engine: {cure}",
        s.ring_setup_failed
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::desc::GroupDesc;

    fn flow(name: &str, weight: u32, group: Option<&str>) -> FlowReport {
        FlowReport {
            name: name.into(),
            weight,
            group: group.map(str::to_string),
            class: best_effort(),
            ..FlowReport::default()
        }
    }

    fn group(name: &str, weight: u32, parent: Option<&str>) -> GroupDesc {
        GroupDesc {
            name: name.into(),
            weight,
            parent: parent.map(str::to_string),
        }
    }

    #[test]
    fn due_shares_follow_the_group_weights() {
        // The 2018 article's layout: a target group of 300 and four of 100,
        // one flow each (weight 40 inside), plus a group that never runs.
        let mut groups = vec![group("t", 300, None), group("idle", 200, None)];
        let mut flows = vec![flow("target", 40, Some("t"))];
        for k in 1..=4 {
            groups.push(group(&format!("i{k}"), 100, None));
            flows.push(flow(&format!("i{k}"), 40, Some(&format!("i{k}"))));
        }
        let s: Vec<f64> = (0..flows.len())
            .map(|i| due_share(&groups, &flows, i))
            .collect();
        assert!((s[0] - 3.0 / 7.0).abs() < 1e-12, "{s:?}");
        assert!((s[1] - 1.0 / 7.0).abs() < 1e-12, "{s:?}");
        // Nested: two flows of 100 and 300 in a group of 100 beside a flow
        // of 100 at the root.
        let groups = vec![group("g", 100, None), group("h", 500, Some("g"))];
        let flows = vec![
            flow("a", 100, Some("h")),
            flow("b", 300, Some("h")),
            flow("c", 100, None),
        ];
        let s: Vec<f64> = (0..3).map(|i| due_share(&groups, &flows, i)).collect();
        assert!(
            (s[0] - 0.125).abs() < 1e-12 && (s[1] - 0.375).abs() < 1e-12,
            "{s:?}"
        );
        assert!((s[2] - 0.5).abs() < 1e-12, "{s:?}");
        // No groups: weight over the sum.
        let flows = vec![flow("a", 100, None), flow("b", 300, None)];
        assert!((due_share(&[], &flows, 1) - 0.75).abs() < 1e-12);
    }

    /// Classes are served in order: an idle-class flow beside a
    /// best-effort one is due nothing, a real-time flow beside a group
    /// everything at its level, and weights count within the best class
    /// (fails with the classes ignored: 0.5 for the idle flow).
    #[test]
    fn due_shares_follow_the_classes() {
        let with = |name, weight, class, g: Option<&str>| FlowReport {
            class,
            ..flow(name, weight, g)
        };
        let flows = vec![with("be", 40, 1, None), with("idle", 40, 2, None)];
        let s: Vec<f64> = (0..2).map(|i| due_share(&[], &flows, i)).collect();
        assert_eq!(s, [1.0, 0.0]);
        let flows = vec![
            with("rt1", 40, 0, None),
            with("rt3", 120, 0, None),
            with("be", 40, 1, Some("g")),
        ];
        let groups = vec![group("g", 100, None)];
        let s: Vec<f64> = (0..3).map(|i| due_share(&groups, &flows, i)).collect();
        assert_eq!(s, [0.25, 0.75, 0.0]);
        // Inside a group: the idle flow is outranked there only.
        let flows = vec![
            with("a", 40, 1, Some("g")),
            with("b", 40, 2, Some("g")),
            with("c", 100, 1, None),
        ];
        let s: Vec<f64> = (0..3).map(|i| due_share(&groups, &flows, i)).collect();
        assert_eq!(s, [0.5, 0.0, 0.5]);
    }

    #[test]
    fn ring_setup_warning_names_the_count_the_error_and_the_cure() {
        let mut s = bfq_engine::EngineStats::default();
        assert_eq!(ring_setup_warning(&s), None);
        s.ring_setup_failed = 3;
        s.ring_setup_errno = Some(libc::EMFILE);
        let w = ring_setup_warning(&s).unwrap();
        assert!(w.contains("3 time(s)"), "{w}");
        assert!(w.contains("Too many open files"), "{w}");
        assert!(w.contains("ulimit -n"), "{w}");
        s.ring_setup_errno = Some(libc::ENOMEM);
        let w = ring_setup_warning(&s).unwrap();
        assert!(w.contains("ulimit -l"), "{w}");
    }
}
