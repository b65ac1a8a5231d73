//! Idling (T_wait): keeping the device idle after the active flow's queue
//! empties, so that a synchronous flow's next request — issued a moment
//! after the previous one completes — does not lose the flow its turn
//! (deceptive idleness). 2010 paper Sec. II-B; kernel `slice_idle`.
//!
//! - T_wait 8 ms (kernel slice_idle), cut to 2 ms for flows detected as
//!   seeky: waiting for a random flow buys no throughput (Sec. II-B).
//! - No idling for asynchronous flows, for the idle class, or for seeky
//!   flows on devices that queue internally (unless
//!   `idle_on_queueing_devices`; kernel 2.6.3x `hw_tag && BFQQ_SEEKY`).
//! - Seeky detection (kernel): a flow is seeky when more than 19 of its
//!   last 32 requests started farther than 800 sectors from the end of
//!   the previous one.
//!
//! ## Idling where guarantees need it (heuristic 6, `guarantee_idling`)
//! With the switch on (kernel behaviour, reference "Idling"), a sync flow
//! whose queue empties is waited for when idling *boosts throughput* —
//! rotational device without internal queueing, or a sequential, I/O-bound
//! flow with a short think time on a device that is not both
//! non-rotational and queueing — and no flow is weight-raised; or when
//! *service guarantees need it*: the flow is raised while other busy flows
//! are not, the scenario is asymmetric (busy flows with different weights,
//! more than one class busy, flows of more than one group busy), or it is
//! the only busy flow. Otherwise (symmetric scenario on a queueing device)
//! the device is not kept idle. Seeky flows in symmetric scenarios idle at
//! most `slice_idle_seeky` (2 ms), raised flows at least
//! `wr_min_idle_slice` (20 ms). `strict_guarantees`: always idle (at least
//! 8 ms) and dispatch only when nothing is in flight.
//!
//! The scenario comes from [`Census`], counters kept up to date as flows
//! become busy (a request queued or in flight) and idle: O(1) per event,
//! no scan over flows. A sync flow with a short think time whose last
//! request completes stays counted for `slice_idle` more ([`Lingering`]):
//! its next request is due a moment later, and dropping it in that gap
//! makes the others look symmetric. (Readers weighted 100:500:500 on a
//! queueing device each got a third: whenever a weight-500 reader's queue
//! emptied, the weight-100 reader was between a completion and its next
//! request, so only 500s were counted and the 500 was not idled for.)
//!
//! Think time (kernel): low-pass mean of the gap between a flow's last
//! completion and its next request, 7/8 weight, samples capped at
//! 2 x slice_idle; short when the mean is at most slice_idle/2. I/O-bound:
//! the flow ended its last turn with backlog (budget exhausted or timeout),
//! and is cleared when it went too idle having used under 20% of its
//! budget — the kernel's flag, standing for "empty less than 20% of the
//! time".

use crate::error::SchedError;
use crate::settings::Settings;
use crate::types::{DeviceInfo, FlowId, IoClass, Time, MAX_WEIGHT, MS};

/// Idling parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdleConfig {
    /// T_wait for non-seeky sync flows (0 disables idling).
    pub slice_idle: Time,
    /// T_wait for seeky flows.
    pub slice_idle_seeky: Time,
    /// Idle even when the device queues internally.
    pub idle_on_queueing_devices: bool,
    /// Distance (sectors) beyond which a request counts as a seek.
    pub seek_threshold: u64,
    /// Seeky detection of the 2014 report (`seeky_detection =
    /// bfq-plus-2014`): low-pass mean distance above
    /// `seeky_mean_threshold` (8192), instead of the kernel's 19-of-32 rule.
    pub seeky_report: bool,
    /// Mean seek distance, in sectors, above which a flow is seeky with `seeky_detection = bfq-plus-2014` (`seeky_mean_threshold`, 1..=2^40, default 8192).
    pub seeky_mean_threshold: u64,
    /// Report Sec. 4.4 item 3 (`seeky_grace`): a seeky flow gets the short
    /// T_wait only after consuming B_max/8 in its turn.
    pub seeky_grace: bool,
}

impl IdleConfig {
    /// T_wait 8 ms (2 ms for seeky flows), no idling for seeky flows on
    /// queueing devices, kernel seeky detection: the 2010 profile, on which
    /// the others build.
    pub fn paper_2010() -> Self {
        IdleConfig {
            slice_idle: 8 * MS,
            slice_idle_seeky: 2 * MS,
            idle_on_queueing_devices: false,
            seek_threshold: 800,
            seeky_report: false,
            seeky_mean_threshold: 8192,
            seeky_grace: false,
        }
    }
}

/// Kernel: on a non-rotational device a request of at least this many
/// sectors is not a seek, wherever it lands (`BFQQ_SECT_THR_NONROT`): the
/// device reads it at about its sequential rate. Used by seeky detection
/// and by the peak-rate estimator's sequential-sample count.
pub const NONROT_SEQ_SECTORS: u32 = 64;

/// Per-flow access-pattern history for seeky detection (kernel rule or
/// the report's mean distance).
#[derive(Clone, Copy, Debug, Default)]
pub struct SeekHistory {
    /// One bit per recent request: 1 = seek.
    bits: u32,
    /// End sector of the last request added.
    last_end: u64,
    /// Requests seen (saturating at 32).
    samples: u8,
    /// Low-pass mean distance (report's detection).
    mean: u64,
    /// Use the report's mean-distance rule with this threshold (0: kernel).
    mean_threshold: u64,
    /// [`SeekHistory::is_seeky`]'s answer, set by each
    /// [`SeekHistory::record`] (the history changes nowhere else): the
    /// rules ask it several times per request.
    seeky: bool,
}

impl SeekHistory {
    /// A history using the kernel rule, or the report's mean-distance rule
    /// when `mean_threshold > 0`.
    pub fn new(mean_threshold: u64) -> Self {
        SeekHistory {
            mean_threshold,
            ..SeekHistory::default()
        }
    }

    /// Records a request at `sector..end`. `large_nonrot`: the request is
    /// at least [`NONROT_SEQ_SECTORS`] long on a non-rotational device,
    /// which the kernel never counts as a seek however far it lands.
    #[inline]
    pub fn record(&mut self, sector: u64, end: u64, threshold: u64, large_nonrot: bool) {
        let dist = sector.abs_diff(self.last_end);
        if self.mean_threshold > 0 && self.samples > 0 {
            self.mean = if self.samples == 1 {
                dist
            } else {
                // In u128: distances reach the end of the sector space.
                ((7 * u128::from(self.mean) + u128::from(dist)) / 8) as u64
            };
        }
        let seek = self.samples > 0 && dist > threshold && !large_nonrot;
        self.bits = (self.bits << 1) | u32::from(seek);
        self.last_end = end;
        self.samples = self.samples.saturating_add(1).min(32);
        self.seeky = if self.mean_threshold > 0 {
            self.samples > 1 && self.mean > self.mean_threshold
        } else {
            self.bits.count_ones() > 19
        };
    }

    /// Every one of the last 32 requests was a seek.
    pub fn is_totally_seeky(&self) -> bool {
        self.samples >= 32 && self.bits == u32::MAX
    }

    /// Kernel: more than 19 of the last 32 requests were seeks. Report:
    /// the mean distance is above the threshold.
    #[inline]
    pub fn is_seeky(&self) -> bool {
        self.seeky
    }
}

/// Flows kept in the [`Census`] after their last completion, oldest
/// completion first, each with its completion time: a list linked through
/// one entry per flow index, so that a flow leaves it in O(1) when it gets
/// a request or is removed, and the list never holds more than the flows.
/// (Every completion of a sync flow with a short think time lingers: a
/// queue of completions, most of them made stale a moment later by the
/// flow's next request, held `slice_idle` of them.) No allocation once the
/// entries cover the flows' indexes ([`Lingering::reserve`] as flows are
/// created).
#[derive(Clone, Debug)]
pub struct Lingering {
    /// By flow index: where the flow stands in the list.
    links: Vec<Link>,
    /// Oldest and newest listed flow indexes ([`NIL`] when empty).
    head: u32,
    tail: u32,
}

/// No flow index (an end of the [`Lingering`] list).
const NIL: u32 = u32::MAX;

/// A flow's place in the [`Lingering`] list.
#[derive(Clone, Copy, Debug)]
struct Link {
    /// The flow's id while listed.
    flow: u32,
    /// Its last completion.
    at: Time,
    prev: u32,
    next: u32,
    listed: bool,
}

impl Default for Link {
    fn default() -> Self {
        Link {
            flow: 0,
            at: 0,
            prev: NIL,
            next: NIL,
            listed: false,
        }
    }
}

impl Default for Lingering {
    fn default() -> Self {
        Lingering::new()
    }
}

impl Lingering {
    /// An empty list.
    pub fn new() -> Self {
        Lingering {
            links: Vec::new(),
            head: NIL,
            tail: NIL,
        }
    }

    /// Makes room for flow index `index` (called when flows are created).
    pub fn reserve(&mut self, index: usize) {
        if self.links.len() <= index {
            self.links.resize(index + 1, Link::default());
        }
    }

    /// Flow `flow` completed its last request at `at` and lingers (from
    /// now on, if it already did). Times are non-decreasing, so the list
    /// stays in completion order.
    pub fn push(&mut self, flow: FlowId, at: Time) {
        self.remove(flow);
        let i = flow.index();
        self.reserve(i);
        self.links[i] = Link {
            flow: flow.0,
            at,
            prev: self.tail,
            next: NIL,
            listed: true,
        };
        match self.tail {
            NIL => self.head = i as u32,
            t => self.links[t as usize].next = i as u32,
        }
        self.tail = i as u32;
    }

    /// Takes `flow` off the list; the completion it lingered since, if it
    /// did.
    pub fn remove(&mut self, flow: FlowId) -> Option<Time> {
        let l = *self.links.get(flow.index())?;
        if !l.listed || l.flow != flow.0 {
            return None;
        }
        match l.prev {
            NIL => self.head = l.next,
            p => self.links[p as usize].next = l.next,
        }
        match l.next {
            NIL => self.tail = l.prev,
            n => self.links[n as usize].prev = l.prev,
        }
        self.links[flow.index()].listed = false;
        Some(l.at)
    }

    /// Whether some flow's lingering (`span` long) is over at `now`.
    #[inline]
    pub fn any_due(&self, now: Time, span: Time) -> bool {
        self.links
            .get(self.head as usize)
            .is_some_and(|l| l.at.saturating_add(span) <= now)
    }

    /// Takes off the list the oldest flow whose lingering (`span` long) is
    /// over at `now`: the flow and its completion time.
    pub fn pop_due(&mut self, now: Time, span: Time) -> Option<(FlowId, Time)> {
        let l = *self.links.get(self.head as usize)?;
        if l.at.saturating_add(span) > now {
            return None;
        }
        let flow = FlowId(l.flow);
        self.remove(flow);
        Some((flow, l.at))
    }
}

/// Incremental census of busy flows, for the asymmetric-scenario test.
#[derive(Clone, Debug)]
pub struct Census {
    weight_count: Vec<u32>,
    /// Distinct original weights among busy flows.
    pub distinct_weights: u32,
    class_count: [u32; IoClass::COUNT],
    /// Classes with busy flows.
    pub busy_classes: u32,
    group_count: Vec<u32>,
    /// Groups (root included) with busy flows as direct children.
    pub busy_groups: u32,
    /// Busy flows.
    pub busy_flows: u32,
    /// Busy weight-raised flows.
    pub raised_busy: u32,
    /// Busy flows that are not seeky (kept by the scheduler, which sees
    /// seekiness change).
    pub seq_busy: u32,
}

impl Default for Census {
    fn default() -> Self {
        Census {
            weight_count: vec![0; MAX_WEIGHT as usize + 1],
            distinct_weights: 0,
            class_count: [0; IoClass::COUNT],
            busy_classes: 0,
            group_count: vec![0; 1],
            busy_groups: 0,
            busy_flows: 0,
            raised_busy: 0,
            seq_busy: 0,
        }
    }
}

impl Census {
    /// Busy flows among group index `g`'s direct children.
    pub fn group_busy(&self, g: usize) -> u32 {
        self.group_count.get(g).copied().unwrap_or(0)
    }

    /// Makes room for group index `g` (called when groups are created).
    pub fn reserve_group(&mut self, g: usize) {
        if self.group_count.len() <= g {
            self.group_count.resize(g + 1, 0);
        }
    }

    /// A flow became busy (`add = true`) or idle.
    pub fn update(&mut self, add: bool, weight: u32, class: IoClass, group: usize, raised: bool) {
        fn step(c: &mut u32, total: &mut u32, add: bool) {
            if add {
                *c += 1;
                if *c == 1 {
                    *total += 1;
                }
            } else {
                *c -= 1;
                if *c == 0 {
                    *total -= 1;
                }
            }
        }
        let w = (weight as usize).min(MAX_WEIGHT as usize);
        step(&mut self.weight_count[w], &mut self.distinct_weights, add);
        step(
            &mut self.class_count[class as usize],
            &mut self.busy_classes,
            add,
        );
        // Groups are counted from their creation (`reserve_group`).
        step(&mut self.group_count[group], &mut self.busy_groups, add);
        if add {
            self.busy_flows += 1;
            self.raised_busy += u32::from(raised);
        } else {
            self.busy_flows -= 1;
            self.raised_busy -= u32::from(raised);
        }
    }

    /// Different weights, classes or groups among busy flows.
    #[inline]
    pub fn asymmetric(&self) -> bool {
        self.distinct_weights > 1 || self.busy_classes > 1 || self.busy_groups > 1
    }
}

/// Think-time tracking.
#[derive(Clone, Copy, Debug, Default)]
pub struct ThinkTime {
    /// Low-pass mean, ns.
    pub mean: Time,
    /// Think times sampled so far.
    pub samples: u32,
}

impl ThinkTime {
    /// Records the gap between the last completion and a new request.
    pub fn record(&mut self, gap: Time, slice_idle: Time) {
        let g = gap.min(2 * slice_idle.max(MS));
        self.mean = if self.samples == 0 {
            g
        } else {
            (7 * self.mean + g) / 8
        };
        self.samples = self.samples.saturating_add(1);
    }

    /// Short think time (always true before any sample).
    pub fn short(&self, slice_idle: Time) -> bool {
        self.samples == 0 || self.mean <= slice_idle / 2
    }
}

/// What the idling decision needs to know about the flow.
#[derive(Clone, Copy, Debug, Default)]
pub struct FlowIdle {
    /// The flow issues synchronous requests (only those are idled for).
    pub sync: bool,
    /// The flow's I/O priority class (None: best effort).
    pub class: Option<IoClass>,
    /// The flow is seeky (and not in its `seeky_grace`).
    pub seeky: bool,
    /// Raised (any kind).
    pub raised: bool,
    /// Raised as interactive (idles at least `wr_min_idle_slice`).
    pub interactive: bool,
    /// The flow used up its budgets in its last turns (kernel: I/O-bound).
    pub io_bound: bool,
    /// The flow's mean think time is at most half of `slice_idle`.
    pub short_think: bool,
}

/// Heuristic idling settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GuaranteeIdling {
    /// `guarantee_idling`: the kernel's decision instead of the 2010 one.
    pub enabled: bool,
    /// `strict_guarantees`.
    pub strict: bool,
    /// Raised flows idle at least this long (0: no floor).
    pub raised_min: Time,
    /// Raised flows idle even when seeky (report and kernel).
    pub raised_keep_idling: bool,
}

/// Idling for `f` boosts throughput, and no flow is raised (kernel
/// `idling_boosts_thr_without_issues`): the device is rotational without
/// internal queueing, or `f` is sequential, I/O-bound and of short think
/// time on a device that is not both non-rotational and queueing.
pub fn boosts_throughput(device: &DeviceInfo, f: &FlowIdle, census: &Census) -> bool {
    let rot_noq = device.rotational && !device.queues_internally;
    let seq_iob = !f.seeky && f.io_bound && f.short_think;
    let boosts = rot_noq || ((device.rotational || !device.queues_internally) && seq_iob);
    boosts && census.raised_busy == 0
}

impl IdleConfig {
    /// The idling decision with the heuristics (heuristic 5's "raised flows
    /// keep idling" and heuristic 6).
    pub fn wait_time_heur(
        &self,
        g: &GuaranteeIdling,
        device: &DeviceInfo,
        f: &FlowIdle,
        census: &Census,
    ) -> Option<Time> {
        let class = f.class.unwrap_or(IoClass::Be);
        if self.slice_idle == 0 || !f.sync || class == IoClass::Idle {
            return None;
        }
        if g.strict {
            return Some(self.slice_idle.max(8 * MS));
        }
        if !g.enabled {
            // 2010 decision, but raised flows idle even when seeky.
            let seeky = f.seeky && !(g.raised_keep_idling && f.raised);
            let w = self.wait_time(device, class, f.sync, seeky)?;
            return Some(if f.interactive {
                w.max(g.raised_min)
            } else {
                w
            });
        }
        let boosts_ok = boosts_throughput(device, f, census);
        let asym = census.asymmetric();
        let guar =
            (f.raised && census.raised_busy < census.busy_flows) || asym || census.busy_flows <= 1;
        if !(boosts_ok || guar) {
            return None;
        }
        let mut sl = self.slice_idle;
        if f.interactive {
            sl = sl.max(g.raised_min);
        } else if f.seeky && !asym && !f.raised {
            sl = sl.min(self.slice_idle_seeky);
        }
        // `slice_idle_seeky = 0`: seeky flows are not idled for.
        (sl > 0).then_some(sl)
    }

    /// How long to keep the device idle for a flow whose queue just emptied
    /// (None: do not idle; never `Some(0)`).
    pub fn wait_time(
        &self,
        device: &DeviceInfo,
        class: IoClass,
        sync: bool,
        seeky: bool,
    ) -> Option<Time> {
        if self.slice_idle == 0 || !sync || class == IoClass::Idle {
            return None;
        }
        // Kernel of the 2010 paper and the 2014 report (2.6.3x
        // `bfq_update_idle_window`, as CFQ's): on a device that queues
        // internally (hw_tag) only *seeky* flows lose idling; a sequential
        // flow is still waited for, so that the drive is not fed
        // interleaved requests of many streams.
        if device.queues_internally && !self.idle_on_queueing_devices && seeky {
            return None;
        }
        let wait = if seeky {
            self.slice_idle_seeky.min(self.slice_idle)
        } else {
            self.slice_idle
        };
        // A zero wait (`slice_idle_seeky = 0`) is no idling: never an idle
        // period that ends when it begins.
        (wait > 0).then_some(wait)
    }
}

impl IdleConfig {
    /// The idling and seek-detection settings over profile `d`
    /// (docs/bfq-settings.md).
    pub(crate) fn with_settings(d: &IdleConfig, s: &mut Settings) -> Result<Self, SchedError> {
        Ok(IdleConfig {
            slice_idle: s.duration("slice_idle", d.slice_idle)?,
            slice_idle_seeky: s.duration("slice_idle_seeky", d.slice_idle_seeky)?,
            idle_on_queueing_devices: s
                .bool("idle_on_queueing_devices", d.idle_on_queueing_devices)?,
            seek_threshold: s.u64_in("seek_threshold", d.seek_threshold, 0, 1 << 40)?,
            // `bfq-plus-2014` (true): the report's mean-distance rule.
            seeky_report: s.word(
                "seeky_detection",
                d.seeky_report,
                &[("kernel", false), ("bfq-plus-2014", true), ("report", true)],
            )?,
            seeky_mean_threshold: s.u64_in(
                "seeky_mean_threshold",
                d.seeky_mean_threshold,
                1,
                1 << 40,
            )?,
            seeky_grace: s.bool("seeky_grace", d.seeky_grace)?,
        })
    }
}

impl GuaranteeIdling {
    /// The guarantee-idling settings over profile `d`
    /// (docs/bfq-settings.md); `raised_min`: weight raising's
    /// `wr_min_idle_slice`.
    pub(crate) fn with_settings(
        d: &GuaranteeIdling,
        raised_min: Time,
        s: &mut Settings,
    ) -> Result<Self, SchedError> {
        Ok(GuaranteeIdling {
            enabled: s.bool("guarantee_idling", d.enabled)?,
            strict: s.bool("strict_guarantees", d.strict)?,
            raised_min,
            raised_keep_idling: s.bool("wr_keep_idling", d.raised_keep_idling)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::MS;

    #[test]
    fn seeky_after_twenty_far_requests() {
        let mut h = SeekHistory::default();
        for i in 0..32u64 {
            h.record(i * 8, i * 8 + 8, 800, false);
        }
        assert!(!h.is_seeky());
        for i in 1..=20u64 {
            h.record(i * 1_000_000, i * 1_000_000 + 8, 800, false);
        }
        assert!(h.is_seeky());
        // Kernel, non-rotational device: large requests are never seeks.
        let mut big = SeekHistory::default();
        for i in 1..=32u64 {
            big.record(i * 1_000_000, i * 1_000_000 + 256, 800, true);
        }
        assert!(!big.is_seeky());
        // Report rule: a few far requests keep the mean high for a while.
        let mut r = SeekHistory::new(8192);
        r.record(0, 8, 800, false);
        r.record(10_000_000, 10_000_008, 800, false);
        for i in 0..8u64 {
            r.record(10_000_008 + i * 8, 10_000_016 + i * 8, 800, false);
        }
        assert!(r.is_seeky());
        for i in 8..80u64 {
            r.record(10_000_008 + i * 8, 10_000_016 + i * 8, 800, false);
        }
        assert!(!r.is_seeky());
    }

    #[test]
    fn no_idling_where_it_cannot_help() {
        let c = IdleConfig::paper_2010();
        let disk = DeviceInfo::default();
        let ncq = DeviceInfo {
            queues_internally: true,
            queue_depth: 32,
            rotational: true,
        };
        assert_eq!(c.wait_time(&disk, IoClass::Be, true, false), Some(8 * MS));
        assert_eq!(c.wait_time(&disk, IoClass::Be, true, true), Some(2 * MS));
        assert_eq!(c.wait_time(&disk, IoClass::Be, false, false), None);
        assert_eq!(c.wait_time(&disk, IoClass::Idle, true, false), None);
        assert_eq!(c.wait_time(&ncq, IoClass::Be, true, false), Some(8 * MS));
        assert_eq!(c.wait_time(&ncq, IoClass::Be, true, true), None);
    }

    /// The list keeps the flows in completion order; a flow that gets a
    /// request leaves it wherever it stands, one that lingers again moves
    /// to the end, and a removed flow's reused index is not taken for it.
    #[test]
    fn lingering_flows_leave_in_completion_order() {
        let mut l = Lingering::new();
        let (a, b, c) = (FlowId(0), FlowId(1), FlowId(2));
        l.push(a, 10);
        l.push(b, 20);
        l.push(c, 30);
        assert_eq!(l.remove(b), Some(20));
        assert_eq!(l.remove(b), None);
        l.push(a, 40);
        // A new flow on c's index (another generation) is not c.
        assert_eq!(
            l.remove(FlowId(2 | (1 << crate::types::ID_INDEX_BITS))),
            None
        );
        assert_eq!(l.pop_due(39, 8), Some((c, 30)));
        assert_eq!(l.pop_due(47, 8), None);
        assert_eq!(l.pop_due(48, 8), Some((a, 40)));
        assert_eq!(l.pop_due(u64::MAX, 8), None);
        l.push(b, 50);
        assert_eq!(l.pop_due(58, 8), Some((b, 50)));
    }
}
