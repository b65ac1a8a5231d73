//! A run's scheduler timeline: what the engine's scheduler did for each
//! flow over the run, window by window.
//!
//! A thread beside the flows reads each flow's [`FlowInternals`] (turns
//! granted, the budgets of those turns, requests injected into other
//! flows' turns, service charged, service forfeited on rejoining
//! B-WF2Q+; BFQ's, `None` for a policy without
//! them) and the scheduler's B_max every `interval`, one lock of the core
//! per flow per read. Beside each flow's bytes per second
//! ([`crate::FlowReport::series_bytes`]) it shows when a share error
//! builds: in a few windows where a flow got no turns, or steadily.
//! Engine runs only (the kernel's schedulers expose nothing of this).

use bfq_engine::{Engine, Flow, FlowInternals};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::{Scope, ScopedJoinHandle};
use std::time::{Duration, Instant};

/// The shortest interval: a read takes the core's lock once per flow,
/// so ten reads a second per flow cost the run nothing it would show.
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);

/// The most points a run keeps (a week's run at one a second is 604800):
/// the timeline's memory is bounded whatever `--seconds` says.
pub const MAX_POINTS: u64 = 100_000;

/// Refuses an interval shorter than [`MIN_INTERVAL`], or one that gives
/// a run of `duration` more than [`MAX_POINTS`] points.
pub fn check_interval(interval: Duration, duration: Duration) -> Result<(), String> {
    if interval < MIN_INTERVAL {
        return Err(format!(
            "timeline interval {:?}: at least {:?}",
            interval, MIN_INTERVAL
        ));
    }
    let points = duration.as_nanos().div_ceil(interval.as_nanos());
    if points > u128::from(MAX_POINTS) {
        return Err(format!(
            "timeline interval {interval:?} over {duration:?}: {points} points, at most \
             {MAX_POINTS} (give a longer interval)"
        ));
    }
    Ok(())
}

/// One read of the scheduler: when, B_max, and each flow's counters so
/// far (cumulative, in the run's flow order).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TimelinePoint {
    /// Seconds since the sampler started (just before the flows' threads).
    pub t_s: f64,
    /// B_max in force, sectors (`None` for a policy without it).
    pub max_budget: Option<u64>,
    /// Each flow's counters since it was opened.
    pub flows: Vec<FlowInternals>,
}

/// What one counter of `FlowInternals` did in each window: `field` of
/// flow `i` at each point less at the point before (the first point less
/// nothing); `None` where the policy does not count it.
pub fn per_window(
    points: &[TimelinePoint],
    i: usize,
    field: fn(&FlowInternals) -> Option<u64>,
) -> Vec<Option<u64>> {
    let at = |p: &TimelinePoint| p.flows.get(i).and_then(field);
    let mut prev = Some(0);
    points
        .iter()
        .map(|p| {
            let now = at(p);
            let d = now.zip(prev).map(|(n, b)| n.saturating_sub(b));
            prev = now;
            d
        })
        .collect()
}

/// A sampler running beside a run's flows ([`start`]).
pub(crate) struct Sampler<'s> {
    stop: Sender<()>,
    thread: ScopedJoinHandle<'s, Vec<TimelinePoint>>,
}

/// Starts reading `engine`'s scheduler for `flows` every `interval`, on a
/// thread of scope `sc`, until [`Sampler::finish`].
pub(crate) fn start<'s>(
    sc: &'s Scope<'s, '_>,
    engine: &'s Engine,
    flows: &'s [Arc<Flow>],
    interval: Duration,
) -> Sampler<'s> {
    let (stop, rx) = mpsc::channel::<()>();
    let thread = sc.spawn(move || {
        let t0 = Instant::now();
        let read = || TimelinePoint {
            t_s: t0.elapsed().as_secs_f64(),
            max_budget: engine.scheduler_internals().ok().and_then(|i| i.max_budget),
            flows: flows
                .iter()
                .map(|f| f.internals().unwrap_or_default())
                .collect(),
        };
        let mut points = Vec::new();
        for k in 1..=MAX_POINTS as u32 {
            let due = t0 + interval * k;
            let wait = due.saturating_duration_since(Instant::now());
            match rx.recv_timeout(wait) {
                Err(RecvTimeoutError::Timeout) => points.push(read()),
                // Finished (or the run dropped its end): one last read,
                // a partial window.
                _ => {
                    points.push(read());
                    break;
                }
            }
        }
        points
    });
    Sampler { stop, thread }
}

impl Sampler<'_> {
    /// Stops the sampler and returns its points.
    pub(crate) fn finish(self) -> Vec<TimelinePoint> {
        let _ = self.stop.send(());
        self.thread.join().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fails if the lower bound goes (mutation: `interval < MIN_INTERVAL`
    /// -> `interval < Duration::ZERO`), or the bound on the points
    /// (mutation: `points > MAX_POINTS` -> `false`).
    #[test]
    fn intervals_are_bounded_below_and_by_the_points() {
        let min = Duration::from_secs(60);
        assert!(check_interval(Duration::from_millis(99), min).is_err());
        assert!(check_interval(Duration::ZERO, min).is_err());
        assert!(check_interval(MIN_INTERVAL, min).is_ok());
        assert!(check_interval(Duration::from_secs(1), min).is_ok());
        // 100000 points exactly, then one more.
        let max = Duration::from_secs(10_000);
        assert!(check_interval(MIN_INTERVAL, max).is_ok());
        let over = max + Duration::from_millis(1);
        assert!(check_interval(MIN_INTERVAL, over).is_err());
        let week = Duration::from_secs(604_800);
        assert!(check_interval(Duration::from_secs(1), week).is_err());
        assert!(check_interval(Duration::from_secs(7), week).is_ok());
    }

    fn point(turns: &[u64]) -> TimelinePoint {
        TimelinePoint {
            flows: turns
                .iter()
                .map(|&t| FlowInternals {
                    turns: Some(t),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    /// Fails if a window is not its point less the one before (mutation:
    /// `prev = now` removed, every window then counted from 0).
    #[test]
    fn windows_are_differences_of_the_cumulative_counts() {
        let pts = [point(&[3, 0]), point(&[5, 4]), point(&[9, 4])];
        assert_eq!(
            per_window(&pts, 0, |f| f.turns),
            [Some(3), Some(2), Some(4)]
        );
        assert_eq!(
            per_window(&pts, 1, |f| f.turns),
            [Some(0), Some(4), Some(0)]
        );
        // A counter the policy does not keep, and a flow not there.
        assert_eq!(per_window(&pts, 0, |f| f.injected), [None, None, None]);
        assert_eq!(per_window(&pts, 2, |f| f.turns), [None, None, None]);
    }
}
