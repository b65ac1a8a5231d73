//! Injection while idling (heuristic 7; switch `injection`). 2018 article
//! "I/O control may be slowing your storage down dramatically" (Sec. 9,
//! Figures 2-3: plugging dispatch for a sync flow empties the device's
//! internal queues and kills throughput with random I/O); reference
//! "Injection".
//!
//! While the in-service sync flow is empty and BFQ keeps the device for it
//! (idling, or waiting for its in-flight requests), requests of other flows
//! are dispatched as long as fewer than `inject_limit` requests are in
//! flight; with `inject_waker_beyond_limit` (kernel `bfq_select_queue`,
//! on in `bfq-kernel`) the waker and the woken flow (2 and 3 below) also
//! beyond the limit, within their budgets. Candidates, in order:
//! 1. the flow's own asynchronous requests: a flow here is one process and
//!    holds its sync and async requests in one queue, so they are simply
//!    served in its turn (the kernel's separate async queue comes first
//!    among injection candidates);
//! 2. its *waker* — a flow whose completions were followed, less than 4 ms
//!    later, by this flow becoming non-empty, three times in a row; with
//!    `waker_kernel_detection` (kernel `bfq_check_waker`, on in
//!    `bfq-kernel`) only while this flow's think time is not short, and
//!    within 128 x slice_idle of the first sighting: a flow that re-issues
//!    at once after its own completions is not waiting for another flow.
//!    `bfq` keeps detecting wakers among short-think flows: with the
//!    kernel's rule the weight-100 reader among greedy 1:2:3:4:5 readers
//!    on a device serving several requests at once got 0.937 of its share
//!    (`h7_returning_flow_keeps_its_place`, tolerance 5%);
//! 3. the flow it last woke;
//! 4. B-WF2Q+'s next flow (with `inject_fair_candidates`, on in `bfq`,
//!    2 to 4 are tried least injected into this turn per unit of weight
//!    first: a waker whose next request is always queued no longer takes
//!    every slot while the woken or next flow waits);
//! 5. up to `inject_candidates` flows (default 8): below the first
//!    entities of the root's service tree, the flow B-WF2Q+ would pick in
//!    each, the least injected into this turn per unit of weight first
//!    (O(candidates x depth), no scan of all flows; the kernel tries every
//!    busy queue). These, and any candidate once the learned limit is
//!    reached (`inject_read_floor`), give reads only: writes complete once
//!    buffered and their programs slow the idling flow's reads later,
//!    where the limit cannot see them. On a non-rotational device their
//!    large requests go in only with nothing else in flight
//!    (`inject_large_once`, kernel `bfq_choose_bfqq_for_injection`).
//!
//! Keeping the shares:
//! - an injected flow is charged the service (it starts its next turn with
//!   it counted against its budget, or, when injection empties its queue,
//!   leaves B-WF2Q+ with F = S + service / w), and may be injected only
//!   while that stays within its budget. A flow emptied by each injection
//!   and not idled for leaves B-WF2Q+ at each read and comes back without
//!   debt, which that budget does not bound: a reader of 2 MiB thinking
//!   30 ms between reads got 7.92 times the service of a greedy reader of
//!   its weight (10, beside one of 1000, on a simulated SSD), injected at
//!   every turn of the heavy reader. `inject_ahead_bound` (on in `bfq`)
//!   injects a flow only while its S, and that of each of its groups
//!   waiting in B-WF2Q+, is at most [`AHEAD_BUDGETS`] budgets ahead of V:
//!   0.70 of the greedy reader's service, in the root group or each
//!   reader in a group of its own. Injected service is charged to every
//!   level when the injected flow leaves B-WF2Q+ or its own turn starts
//!   (the kernel's `bfq_bfqq_served` charges every ancestor at each
//!   dispatch; a flow that stays backlogged here keeps its debt, at most
//!   its budget, at its own level until then): a group waiting in
//!   B-WF2Q+ has its S and F moved on by it at once, so that the rule and
//!   its eligibility (S <= V) both see it, and one that goes idle with the
//!   flow has its F set from it
//!   ([`super::wf2q::Wf2q::charge_and_deactivate`]), so several such
//!   readers in one group that stays busy are held too: two get 0.74 of
//!   the service of a greedy reader alone in a group of the same weight,
//!   three 0.78 (2.54 and 3.62 when the group was charged only on going
//!   idle); back 5 ms after each completion, 0.87 and 0.91 (1.71 and 1.33
//!   when the group kept the service beside its timestamps until its
//!   next turn, eligible on its old S);
//! - within one turn, each other flow is injected at most `w_c / w_a`
//!   times the active flow's own service, with the two flows' weights in
//!   one group and their groups' weights across groups (this project's
//!   rule, not the kernel's): with greedy sync readers of one request each
//!   on a device that serves them in parallel, unbounded injection would
//!   serve every reader at the same rate whatever its weight;
//! - a sequential flow lighter than an idling seeky flow is not injected
//!   into its idle time (`inject_protect_seeky`, this project's rule): its
//!   large requests slow each of the seeky flow's small ones, in a turn
//!   charged its time (2018 varying randomness, readers: the random
//!   target of weight 300 got 7.0 MB/s of its 10 without the rule, 11.6
//!   with it);
//! - a sync flow whose queue empties while its requests are in flight
//!   (injection took its one request, or its turn ended while it was out)
//!   and that would be idled for *stays backlogged* in B-WF2Q+: a sync
//!   reader waiting for its own request is not idle. It stays in the
//!   weight sum that drives V and can be picked for a turn (which waits
//!   for its request); the injected service is a debt charged when its
//!   turn starts, bounded by its budget. It leaves the tree, charged the
//!   debt, once its last request completed and it stopped lingering in the
//!   idling census ([`super::idling::Lingering`]). When readers left the
//!   tree at every injection, V ran ahead on a small weight sum and a flow
//!   emptied by each injection was never limited by its budget: five
//!   1:2:3:4:5 readers got 82%..108% of their shares on a serial SSD and
//!   up to 123% on a device serving 8 requests at once;
//! - a flow that does leave with requests in flight and whose next request
//!   arrives within `preempt_in_time` of its last completion re-enters
//!   with S = its old F instead of max(V, F) (it keeps its place; one
//!   that left between turns of its own, emptied by an injection or kept
//!   backlogged with an empty queue and then idle, only within B_max / w
//!   of the backlogged flows: `inject_return_lag_bound`);
//! - a turn into which others were injected is charged its service, not
//!   its time (heuristic 3, [`super::charging`]): the device was not held
//!   idle for it (except for a seeky flow on a disk, a seeky flow
//!   filled mostly with non-seeky flows' requests, which are injected
//!   into it without the share cap above, and a seeky flow while a
//!   non-seeky flow is busy: its turn kept the device from that flow).
//!
//! The four rules on charging, the share cap, the protection of seeky
//! flows and the read floor are this project's, not the kernel's:
//! `inject_charge_service`, `inject_share_cap`, `inject_protect_seeky` and
//! `inject_read_floor` (off in profile `bfq-kernel`); so are
//! `inject_ahead_bound`, `inject_return_lag_bound` and
//! `inject_protect_deep_seeky` (lighter groups
//! kept out of the turn of a seeky flow with several requests in flight,
//! which the kernel's inject limit does for every queue but the waker and
//! the same process's async one).
//!
//! `inject_limit` is learned per flow from the service time of the
//! idling flow's first request after it refills: with nothing else in
//! flight it sets the baseline; with injected requests in flight, a time
//! at least 1.5x the baseline lowers the limit (down to 0, no injection),
//! otherwise the limit grows (up to the device's queue depth) if it was
//! reached. The limit starts at 0: a new flow has nothing injected into
//! its idle time until its baseline is known, and the first baseline
//! starts injection at 1. The baseline is forgotten 1000 ms after the last
//! decrease (or re-learning), and a flow with a short think time then
//! goes back to no injection until its next baseline (kernel
//! `bfq_reset_inject_limit`: a queue's memory is zeroed at creation, and
//! the reset gives a short-think queue 0). With a limit that could
//! not go below 1, injected writes kept slowing a random reader's turns on
//! an SSD programming buffered writes: `bfq-kernel` gave it 8.1 MiB/s
//! instead of 11.0 (2018 article, static sequential with writers, where
//! bfq guarantees the target its 10 MB/s). With `inject_read_floor`, one
//! read may always be injected into a seeky flow's idle time whatever the
//! limit (the 2018 article's improved bfq injected into seeky queues
//! unconditionally), once the flow's baseline is known; writes stay under
//! the limit. Before its baseline, the floor injects nothing either: a read
//! always in flight beside the idling flow's own would keep the baseline
//! from ever being measured, and the limit at 0 (the 2018 static random
//! workload, four random readers against a random target of weight 300,
//! mean of four seeds: 58.5 MB/s in all, against 65.5 without the floor
//! and 65.8 with the floor waiting for the baseline).
//!
//! Injection only runs on devices that queue internally: on a one-request
//! device an injected request only makes the idling flow's next one wait
//! behind it (and seek).

use crate::error::SchedError;
use crate::settings::Settings;
use crate::types::{Time, MS};

/// Injection parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InjectConfig {
    /// Injection on (`injection`; 2018 article, kernel).
    pub enabled: bool,
    /// Re-learn period.
    pub relearn: Time,
    /// Waker detection: wake-up within this long after a completion ...
    pub waker_window: Time,
    /// ... this many times in a row.
    pub waker_hits: u8,
    /// Kernel waker detection: only for a flow whose think time is not
    /// short, the sightings within 128 x slice_idle
    /// (`waker_kernel_detection`; on in `bfq-kernel`).
    pub waker_kernel_detection: bool,
    /// The idling flow's waker, and the flow it woke, are injected
    /// whatever the learned limit, within their budgets
    /// (`inject_waker_beyond_limit`; on in `bfq-kernel`: kernel
    /// `bfq_select_queue` tries them before `bfq_choose_bfqq_for_injection`,
    /// the only place the limit is applied; off in `bfq`, see
    /// docs/bfq-settings.md).
    pub waker_beyond_limit: bool,
    /// The limit bounds every request in flight, the idling flow's own
    /// included (`inject_limit_counts_all`; on in `bfq-kernel`: kernel
    /// `bfq_choose_bfqq_for_injection` stops at `tot_rq_in_driver >=
    /// inject_limit`). Off in `bfq`: only other flows' requests count, so
    /// that a depth-1 flow whose next request follows its completion at
    /// once can have one injected beside it (see docs/bfq-settings.md).
    pub limit_counts_all: bool,
    /// On a non-rotational device a large request (at least
    /// [`super::idling::NONROT_SEQ_SECTORS`]) of B-WF2Q+'s candidates is
    /// injected only with nothing else in flight (`inject_large_once`, on
    /// in both profiles: kernel `bfq_choose_bfqq_for_injection`, "allow for
    /// only one large in-flight request": the drive prefers large
    /// requests, and the idling flow's next small one would wait behind
    /// them). The waker and the woken flow are not held to it.
    pub large_once: bool,
    /// A turn into which others were injected is charged its service, not
    /// its time (`inject_charge_service`; this project's rule, not the
    /// kernel's).
    pub charge_service: bool,
    /// Within one turn, others are injected at most `w_c / w_a` times the
    /// active flow's own service (`inject_share_cap`; this project's rule,
    /// not the kernel's).
    pub share_cap: bool,
    /// A flow is injected only while its virtual start time S, and that of
    /// each of its groups waiting in B-WF2Q+, is at most [`AHEAD_BUDGETS`]
    /// of its budgets (at that entity's weight) ahead of the V of its tree,
    /// the anchored V with `lag_anchor` ([`super::wf2q::Wf2q::within`])
    /// (`inject_ahead_bound`; this project's rule, not the kernel's; on in
    /// `bfq`, off in `bfq-kernel`): a flow that leaves B-WF2Q+ at each
    /// injection comes back without debt, so the budget that bounds the
    /// debt of a flow staying in B-WF2Q+ does not bound it, but its S (and
    /// its group's, charged the same service) is ahead of V by what it was
    /// charged (2010 paper, Sec. II-D: only flows with S <= V are served).
    /// A reader of 2 MiB thinking 30 ms, beside a greedy one of its weight
    /// 10 and one of 1000 on a simulated SSD: 7.92 times the greedy one's
    /// service without the rule, 0.70 with it, in the root group or each
    /// reader in a group of its own; several such readers in one group
    /// that stays busy, whose S moves on by the service injected below it:
    /// 0.74 for two, 0.78 for three (2.54 and 3.62 when the group was
    /// charged only on going idle).
    pub ahead_bound: bool,
    /// A flow that is not weight-raised, injected into a seeky raised
    /// flow's turn, is held to no share of that turn (`inject_share_cap`) and to
    /// no lead on V (`inject_ahead_bound`), but to B_max sectors injected
    /// into the turn (its debt, charged at its next turn or when it leaves
    /// B-WF2Q+, to at most B_max or its budget if larger)
    /// (`inject_into_raised_b_max`; this project's rule, on in `bfq`, off
    /// in `bfq-kernel`, which has neither limit there). A raised flow's
    /// turn is charged its service, not its time (heuristic 3), so a raised
    /// reader thinking through T_max turns barely moves V, and both limits,
    /// measured in service, kept a depth-4 random reader beside it out of
    /// all but one read per turn: worst wait 518 ms (simulated SSD, both
    /// readers in the root group); with the rule 6.1 ms. The kernel gives
    /// the idle time of a raised flow's turn to the others uncapped
    /// (2018 article, injection). Everything injected is still charged to
    /// the flow's timestamps, so per raised turn a flow gains at most B_max
    /// over a flow that cannot be injected, and flows injected together
    /// take turns least injected per weight first. Not into a sequential
    /// raised flow's turns (its bursts): a sequential reader injected
    /// there up to B_max per turn made a raised 1 MiB player's worst
    /// batch 50.2 ms instead of 9.5 (`bfq-kernel` 20.4).
    pub into_raised_b_max: bool,
    /// `inject_ahead_bound` measures from an anchor that leaves out the
    /// entity in service at each level: min(V, F + B_max / w of the
    /// eligible entity with the least F) ([`super::wf2q::Wf2q::within`];
    /// `inject_ahead_waiting_anchor`, on in every profile; it acts only
    /// with `inject_ahead_bound` and `lag_anchor`). The entity in service
    /// may itself lag V (a thinking reader back-shifted to its old F at
    /// each return, idled for in its turn), and counted it holds the anchor
    /// below V (counting it with its F moved on by its largest time charge,
    /// B_max / w, did not help: 119-161 ms below): a reader
    /// thinking 30 ms in a group of 100, beside one thinking 5 ms in a
    /// group of 300 and a sequential reader in a group of 100 (simulated
    /// SSD, `low_latency` off), its group behind V, was kept out of the
    /// 5 ms reader's idled T_max turns: 99th-percentile wait 128-174 ms
    /// after the first 5 s (seeds 1-3), 57-64 ms with the rule.
    pub ahead_waiting_anchor: bool,
    /// A flow that left B-WF2Q+ between turns of its own (emptied by an
    /// injection, or kept backlogged with an empty queue, after an
    /// injection or after its turn ended with requests in flight, then
    /// gone idle once its last request completed) and whose next request
    /// comes within
    /// `preempt_in_time` keeps its place, S = its F, only within B_max / w
    /// of the backlogged flows' least F (or V, if lower): beyond that it
    /// is pushed up, as `backshift_lag_bound` pushes every back-shifted
    /// flow (`inject_return_lag_bound`; this project's rule, on in `bfq`,
    /// off in the other profiles, where `bfq-kernel`'s `backshift_push_up`
    /// moves every back-shifted flow up to F = V). The back-shift claims
    /// the flow stayed backlogged, and a continuously backlogged flow lags
    /// by at most B_max + L_max (2010 paper, appendix, Lemma 2). A reader
    /// whose every read is injected has no turn that would spend the lag
    /// it keeps across its think times: a random 4 KiB reader thinking
    /// 5 ms beside one at depth 4, each in a group of 100 (simulated SSD,
    /// `low_latency` off), had its group twelve budgets behind V after
    /// 1.4 s, then held the device in T_max turns back to back, idle
    /// through its think times, while `inject_ahead_bound`, measured from
    /// its group's F, kept the deep reader out: the deep reader waited
    /// 2.1-3.6 s (seeds 1-3) and the total fell to 40-47 MB/s; with the
    /// rule 0.5-0.6 ms and 78.6-78.7 MB/s (those figures with
    /// `inject_ahead_waiting_anchor` off: with it on, the thinker's group
    /// in service no longer holds the anchor down, and the deep reader's
    /// worst wait is 0.5-0.6 ms without this rule too). A flow that
    /// leaves B-WF2Q+ as its own turn ends keeps its lag on its return
    /// (its turns spend it), unless it is weight-raised
    /// (`raised_backshift_lag_bound`).
    pub return_lag_bound: bool,
    /// One read may always be injected into a seeky flow's idle time,
    /// whatever the learned limit (`inject_read_floor`; the 2018 article's
    /// improved bfq injected into seeky queues unconditionally; this
    /// project keeps the learned limit for writes, whose programs slow the
    /// flash long after the write completed).
    pub read_floor: bool,
    /// A sequential flow whose weight is below an idling seeky flow's is
    /// not injected into its idle time (`inject_protect_seeky`; this
    /// project's rule): its large requests beside the seeky flow's small
    /// ones slow each of them, in a turn charged its time.
    pub protect_seeky: bool,
    /// Flows of lighter groups (by the weights injection compares across
    /// groups) are not injected into the turn of a seeky flow alone in its
    /// group that has had two or more requests in flight in that turn
    /// (`inject_protect_deep_seeky`; this project's rule, on in `bfq`).
    /// Such a flow uses the device's parallelism itself: its group's turn
    /// is its time share (2010 paper Sec. III-D, 2014 report Sec. 3.5),
    /// and a lighter group's requests beside its own took that time's
    /// throughput from it. Groups of equal or higher weight are still
    /// injected: each gets as much of the other's turns as it gives, and
    /// two random readers of equal weight at depth 4 keep 115 MB/s instead
    /// of the 78 of their own turns (the 2018 article's SSD, simulated). The kernel's inject limit keeps every
    /// queue but the waker and the same process's async queue out there:
    /// it takes a baseline only with the queue's one request alone in the
    /// drive (`bfq_update_inject_limit`, `tot_rq_in_driver == 1`) and
    /// injects only below that limit counting every request in the drive
    /// (`bfq_choose_bfqq_for_injection`). A sync reader of depth 1 keeps
    /// its uncapped injection ([`super::Bfq`]'s `shares_time_with`).
    pub protect_deep_seeky: bool,
    /// How many flows B-WF2Q+ offers for injection, besides the waker and
    /// the woken flow (`inject_candidates`, 1..=8, default 8): the first
    /// flows under the tops of the root's service tree, each within its
    /// own share ([`super::INJECT_CANDIDATES`]).
    pub candidates: u8,
    /// Candidates are tried most recently (re)activated first
    /// (`inject_recent_first`; on in `bfq-kernel`: kernel
    /// `bfq_choose_bfqq_for_injection` walks `active_list` from its head,
    /// where `bfq_active_insert` puts a queue each time it enters the
    /// service tree), any request of theirs, before B-WF2Q+'s. Off in
    /// `bfq`: B-WF2Q+'s next flow first, then the least injected per unit
    /// of weight, reads only ([`RecentActivations`]).
    pub recent_first: bool,
    /// The candidates that may give any request (the waker, the woken
    /// flow and the first other candidate, at most three) are tried least
    /// injected into the current turn per unit of weight first
    /// (`inject_fair_candidates`; on in `bfq`, off by default and in
    /// `bfq-kernel`, whose `bfq_select_queue` tries the waker, then the
    /// woken queue, before any other). See [`super::Bfq`]'s
    /// `fair_candidates`.
    pub fair_candidates: bool,
    /// Other flows are injected also where idling boosts throughput (a
    /// sequential, I/O-bound flow of short think time on a rotational or
    /// non-queueing device) and into a weight-raised flow of short think
    /// time while no other flow is raised (`inject_when_idling_boosts`; on
    /// in `bfq`). Off in `bfq-kernel` (kernel `bfq_select_queue`: there
    /// only the waker and the woken flow are injected, and a raised flow of
    /// short think time takes only raised flows' requests).
    pub when_idling_boosts: bool,
    /// The kernel's rules for learning the limit (`inject_kernel_sampling`;
    /// on in `bfq-kernel`, see [`InjectState::kernel_arrival`],
    /// [`InjectState::kernel_sample_done`] and
    /// [`InjectState::kernel_think_changed`]). Off in `bfq`: the service time
    /// of the idling flow's first request after it refills, from its
    /// dispatch, with other flows' requests in flight or not at dispatch
    /// ([`InjectState::sample_done`]).
    pub kernel_sampling: bool,
}

/// How many of its budgets a flow's S, with its debt and the request to
/// inject, may be ahead of V for the flow to be injected
/// (`inject_ahead_bound`). Two: a flow that stays in B-WF2Q+ starts its
/// next turn up to one budget ahead (S = F after its last turn) and may
/// be injected a debt of one more; a flow that leaves at each injection
/// is allowed the same lead, so it gains nothing over one that stays.
/// The 2010 paper's bound counts one (Theorem 1 and Lemma 3: X <= G +
/// 2 B_max + L_max), which one budget here would keep; it cost four
/// random 4 KiB readers (weight 100) beside a sequential reader (300) 9%
/// of the total on a simulated SSD (23% with the debt counted), two
/// budgets 2.6% (1%).
pub const AHEAD_BUDGETS: u64 = 2;

/// Kernel `bfq_add_request`: no new sample of the total service time
/// within 10 ms of the limit's last decrease (or reset).
pub const KERNEL_SAMPLE_GAP: Time = 10 * MS;

/// Kernel `bfq_update_has_short_ttime`: a change of a flow's think-time
/// state to short resets an unlearned limit only this long after the
/// limit's last decrease (or reset); a change to long resets it at once.
pub const KERNEL_THINK_RESET_GAP: Time = 100 * MS;

impl Default for InjectConfig {
    fn default() -> Self {
        InjectConfig {
            enabled: true,
            relearn: 1000 * MS,
            waker_window: 4 * MS,
            waker_hits: 3,
            waker_kernel_detection: false,
            waker_beyond_limit: true,
            limit_counts_all: true,
            large_once: true,
            charge_service: true,
            share_cap: true,
            ahead_bound: false,
            ahead_waiting_anchor: true,
            into_raised_b_max: false,
            return_lag_bound: false,
            read_floor: true,
            protect_seeky: true,
            protect_deep_seeky: true,
            candidates: super::INJECT_CANDIDATES as u8,
            recent_first: false,
            fair_candidates: false,
            when_idling_boosts: true,
            kernel_sampling: false,
        }
    }
}

/// How many of the latest (re)activations [`RecentActivations`] keeps.
pub const RECENT_ACTIVATIONS: usize = 16;

/// The flows that last entered B-WF2Q+ (a new request into an empty queue,
/// or a requeue at the end of a turn), newest first: the head of the
/// kernel's `active_list`, which `inject_recent_first` walks. A flow's place
/// is its latest entry, as `list_add` moves a queue to the head each time
/// it is inserted. O(1) per activation; the walk is bounded by
/// [`RECENT_ACTIVATIONS`] (flows activated earlier come after, in B-WF2Q+'s
/// order).
#[derive(Clone, Copy, Debug, Default)]
pub struct RecentActivations {
    ids: [u32; RECENT_ACTIVATIONS],
    len: usize,
    head: usize,
}

impl RecentActivations {
    /// `flow` (re)entered B-WF2Q+.
    pub fn push(&mut self, flow: u32) {
        self.head = (self.head + 1) % RECENT_ACTIVATIONS;
        self.ids[self.head] = flow;
        self.len = (self.len + 1).min(RECENT_ACTIVATIONS);
    }

    /// Fills `out` with the remembered flows, most recently activated
    /// first, each once; returns how many.
    pub fn newest_first(&self, out: &mut [u32; RECENT_ACTIVATIONS]) -> usize {
        let mut n = 0;
        for k in 0..self.len {
            let f = self.ids[(self.head + RECENT_ACTIVATIONS - k) % RECENT_ACTIVATIONS];
            if !out[..n].contains(&f) {
                out[n] = f;
                n += 1;
            }
        }
        n
    }
}

/// A request arrival as the kernel's limit sampling sees it
/// ([`InjectState::kernel_arrival`]).
#[derive(Clone, Copy, Debug)]
pub struct KernelArrival {
    /// The request.
    pub id: u64,
    /// When it arrived.
    pub now: Time,
    /// Its flow's turn is on.
    pub in_service: bool,
    /// Requests of any flow in flight.
    pub in_flight: usize,
    /// Its flow's think time is short.
    pub short_think: bool,
    /// `inject_relearn`.
    pub relearn: Time,
}

/// Per-flow injection state.
#[derive(Clone, Copy, Debug)]
pub struct InjectState {
    /// Most requests of other flows in flight while this flow's turn idles
    /// (adapted against `baseline`; 0: none injected until re-learned).
    pub limit: u32,
    /// Service time with nothing injected (0: unknown).
    pub baseline: Time,
    /// When the limit was last lowered or re-learned.
    pub decreased_at: Time,
    /// Sample in progress: (request id, dispatch time, others in flight).
    pub sample: Option<(u64, Time, u32)>,
    /// The flow got a request while empty: sample its next dispatch.
    pub refilled: bool,
    /// Service received by injection, counted at the start of its next turn.
    pub debt: u64,
    /// Flow (its `FlowId` value) detected as this flow's waker: injected first.
    pub waker: Option<u32>,
    /// Flow (its `FlowId` value) that woke this flow last, not yet confirmed as its waker.
    pub waker_candidate: Option<u32>,
    /// Consecutive wake-ups by `waker_candidate`.
    pub waker_hits: u8,
    /// When `waker_candidate` was first seen.
    pub waker_since: Time,
    /// Flow (its `FlowId` value) this flow wakes: injected while this flow idles.
    pub woken: Option<u32>,
    /// The flow left B-WF2Q+ with requests still in flight (emptied by
    /// injection, or its turn ended while they were out), or its turn
    /// ended at T_max between a completion and its next request while it
    /// was idled for (`timeout_keeps_place`): it keeps its place if its
    /// next request comes in time.
    pub returning: bool,
    /// The flow left B-WF2Q+ outside a turn of its own (emptied by an
    /// injection, or kept backlogged with an empty queue, then gone idle):
    /// its return in time is held to `inject_return_lag_bound`.
    pub left_between_turns: bool,
    /// Serial number of the turn `turn_injected` counts in.
    pub turn_serial: u64,
    /// Sectors of this flow injected into that turn (`inject_share_cap`).
    pub turn_injected: u64,
}

impl Default for InjectState {
    fn default() -> Self {
        InjectState {
            limit: 0,
            baseline: 0,
            decreased_at: 0,
            sample: None,
            refilled: false,
            debt: 0,
            waker: None,
            waker_candidate: None,
            waker_hits: 0,
            waker_since: 0,
            woken: None,
            returning: false,
            left_between_turns: false,
            turn_serial: u64::MAX,
            turn_injected: 0,
        }
    }
}

impl InjectState {
    /// Sectors of this flow injected into the turn numbered `serial`.
    pub fn injected_in(&self, serial: u64) -> u64 {
        if self.turn_serial == serial {
            self.turn_injected
        } else {
            0
        }
    }

    /// The sampled request completed at `now`: adapt the limit (kernel
    /// rules). With injected requests in flight beside it, a service time
    /// of at least 1.5x the baseline lowers the limit (down to 0: no
    /// injection), a shorter one raises it when it was reached. With
    /// nothing else in flight the time is the new baseline; the first
    /// baseline starts injection (limit at least 1). Every `relearn`
    /// since the last decrease (or re-learning) the baseline is forgotten,
    /// so a limit lowered to 0 is tried again at 1 once a new baseline is
    /// taken.
    pub fn sample_done(&mut self, cfg: &InjectConfig, now: Time, depth: u32, short_think: bool) {
        let Some((_, at, others)) = self.sample.take() else {
            return;
        };
        let st = now.saturating_sub(at);
        if others == 0 {
            if self.baseline == 0 {
                self.limit = self.limit.max(1);
            }
            self.baseline = st.max(1);
        } else if self.baseline > 0 && 2 * st >= 3 * self.baseline {
            if self.limit > 0 {
                self.limit -= 1;
                self.decreased_at = now;
            }
        } else if self.baseline > 0 && others + 1 >= self.limit {
            self.limit = (self.limit + 1).min(depth.max(1));
        }
        if now.saturating_sub(self.decreased_at) > cfg.relearn {
            self.baseline = 0;
            self.decreased_at = now;
            if short_think {
                self.limit = 0;
            }
        }
    }

    /// Kernel rules (`inject_kernel_sampling`): request `id` of this sync
    /// flow arrived at `now` with nothing else of the flow queued or in
    /// flight (kernel `bfq_add_request`), `in_flight` requests of any flow
    /// in the device; `in_service`: the flow's turn is on. Every `relearn`
    /// since the last decrease the limit is reset
    /// ([`InjectState::kernel_reset`]). The flow in service then samples
    /// the request's total service time (arrival to completion) if nothing
    /// is in flight (a baseline; `injected` is cleared: what was injected
    /// before cannot delay it), or if its baseline is known and requests
    /// were injected while it was empty (`injected`, kernel
    /// `rqs_injected`), at least [`KERNEL_SAMPLE_GAP`] after the last
    /// decrease.
    pub fn kernel_arrival(&mut self, a: KernelArrival, injected: &mut bool) {
        if a.now >= self.decreased_at.saturating_add(a.relearn) {
            self.kernel_reset(a.now, a.short_think);
        }
        let quiet = a.now >= self.decreased_at.saturating_add(KERNEL_SAMPLE_GAP);
        if a.in_service && quiet && (a.in_flight == 0 || (self.baseline > 0 && *injected)) {
            self.sample = Some((a.id, a.now, 0));
            if a.in_flight == 0 {
                *injected = false;
            }
        }
    }

    /// Kernel `bfq_reset_inject_limit`: the baseline is forgotten and the
    /// limit restarts at 0 for a flow with a short think time (an injected
    /// request may outlast its think time), at 1 otherwise.
    pub fn kernel_reset(&mut self, now: Time, short_think: bool) {
        self.baseline = 0;
        self.sample = None;
        self.limit = u32::from(!short_think);
        self.decreased_at = now;
    }

    /// Kernel `bfq_update_has_short_ttime` (`inject_kernel_sampling`): this
    /// sync flow's think time turned short (`short_think`) or long at
    /// `now`. Until its baseline is known the limit stands for that state
    /// (0 short, 1 long), so it is reset ([`InjectState::kernel_reset`])
    /// if the think time became long, or at least
    /// [`KERNEL_THINK_RESET_GAP`] after the last decrease (or reset).
    pub fn kernel_think_changed(&mut self, now: Time, short_think: bool) {
        let settled = now >= self.decreased_at.saturating_add(KERNEL_THINK_RESET_GAP);
        if self.baseline == 0 && (!short_think || settled) {
            self.kernel_reset(now, short_think);
        }
    }

    /// Kernel `bfq_update_inject_limit`: the sampled request completed at
    /// `now` with `others` requests still in flight. If requests were
    /// injected while it was waited for (`injected`) and the baseline is
    /// known, a total service time of at least 1.5x the baseline lowers the
    /// limit, a shorter one raises it while it is at most `max_in_flight`
    /// (the most requests seen in flight). A first time with nothing else
    /// in flight, or one below the baseline, becomes the baseline (the
    /// first one starts injection at 1), as does one with nothing
    /// injected and nothing else in flight. Clears `injected`.
    pub fn kernel_sample_done(
        &mut self,
        now: Time,
        others: usize,
        injected: &mut bool,
        max_in_flight: u32,
    ) {
        let Some((_, at, _)) = self.sample.take() else {
            return;
        };
        let t = now.saturating_sub(at).max(1);
        if self.baseline > 0 && *injected {
            let threshold = self.baseline * 3 / 2;
            if t >= threshold && self.limit > 0 {
                self.limit -= 1;
                self.decreased_at = now;
            } else if t < threshold && self.limit <= max_in_flight {
                self.limit += 1;
            }
        }
        if (self.baseline == 0 && others == 0) || t < self.baseline {
            if self.baseline == 0 {
                self.limit = self.limit.max(1);
            }
            self.baseline = t;
        } else if !*injected && others == 0 {
            self.baseline = t;
        }
        *injected = false;
    }

    /// Flow `me` became non-empty at `now`; `last` is the latest completion
    /// (flow, time); `short_think`: `me` has a short think time; `window`:
    /// 128 x slice_idle. Returns the waker when one is (re)confirmed.
    pub fn on_wake(
        &mut self,
        cfg: &InjectConfig,
        me: u32,
        last: Option<(u32, Time)>,
        now: Time,
        short_think: bool,
        window: Time,
    ) -> Option<u32> {
        let (f, t) = last?;
        let kernel = cfg.waker_kernel_detection;
        if (kernel && short_think) || f == me || now.saturating_sub(t) >= cfg.waker_window {
            return None;
        }
        let stale = kernel && now > self.waker_since.saturating_add(window);
        if self.waker_candidate == Some(f) && !stale {
            self.waker_hits = self.waker_hits.saturating_add(1);
        } else {
            self.waker_candidate = Some(f);
            self.waker_hits = 1;
            self.waker_since = now;
        }
        if self.waker_hits >= cfg.waker_hits {
            self.waker = Some(f);
            return Some(f);
        }
        None
    }
}

impl InjectConfig {
    /// The injection settings over profile `d` (docs/bfq-settings.md);
    /// at most `max_candidates` candidates.
    pub(crate) fn with_settings(
        d: &InjectConfig,
        max_candidates: usize,
        s: &mut Settings,
    ) -> Result<Self, SchedError> {
        Ok(InjectConfig {
            enabled: s.bool("injection", d.enabled)?,
            relearn: s.duration("inject_relearn", d.relearn)?,
            charge_service: s.bool("inject_charge_service", d.charge_service)?,
            share_cap: s.bool("inject_share_cap", d.share_cap)?,
            ahead_bound: s.bool("inject_ahead_bound", d.ahead_bound)?,
            ahead_waiting_anchor: s.bool("inject_ahead_waiting_anchor", d.ahead_waiting_anchor)?,
            into_raised_b_max: s.bool("inject_into_raised_b_max", d.into_raised_b_max)?,
            return_lag_bound: s.bool("inject_return_lag_bound", d.return_lag_bound)?,
            read_floor: s.bool("inject_read_floor", d.read_floor)?,
            protect_seeky: s.bool("inject_protect_seeky", d.protect_seeky)?,
            protect_deep_seeky: s.bool("inject_protect_deep_seeky", d.protect_deep_seeky)?,
            candidates: s.u64_in(
                "inject_candidates",
                d.candidates as u64,
                1,
                max_candidates as u64,
            )? as u8,
            waker_kernel_detection: s.bool("waker_kernel_detection", d.waker_kernel_detection)?,
            waker_beyond_limit: s.bool("inject_waker_beyond_limit", d.waker_beyond_limit)?,
            limit_counts_all: s.bool("inject_limit_counts_all", d.limit_counts_all)?,
            large_once: s.bool("inject_large_once", d.large_once)?,
            recent_first: s.bool("inject_recent_first", d.recent_first)?,
            fair_candidates: s.bool("inject_fair_candidates", d.fair_candidates)?,
            when_idling_boosts: s.bool("inject_when_idling_boosts", d.when_idling_boosts)?,
            kernel_sampling: s.bool("inject_kernel_sampling", d.kernel_sampling)?,
            ..*d
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sampled request, dispatched at `at` with `others` of other
    /// flows in flight, completes at `done`.
    fn sample(s: &mut InjectState, at: Time, others: u32, done: Time, short_think: bool) {
        s.sample = Some((1, at, others));
        s.sample_done(&InjectConfig::default(), done, 32, short_think);
    }

    #[test]
    fn recent_activations_newest_first_each_once() {
        let mut r = RecentActivations::default();
        for f in [1, 2, 3, 1] {
            r.push(f);
        }
        let mut out = [0u32; RECENT_ACTIVATIONS];
        let n = r.newest_first(&mut out);
        assert_eq!(&out[..n], &[1, 3, 2]);
        for f in 100..100 + RECENT_ACTIVATIONS as u32 + 3 {
            r.push(f);
        }
        let n = r.newest_first(&mut out);
        assert_eq!(n, RECENT_ACTIVATIONS);
        assert_eq!(out[0], 100 + RECENT_ACTIVATIONS as u32 + 2);
    }

    #[test]
    fn limit_grows_until_service_time_suffers() {
        let mut s = InjectState::default();
        sample(&mut s, 0, 0, 100_000, false);
        assert_eq!(s.baseline, 100_000);
        for k in 1..=4u32 {
            let limit = s.limit;
            sample(&mut s, 0, limit, 110_000 + u64::from(k), false);
        }
        assert_eq!(s.limit, 5);
        sample(&mut s, 0, 5, 200_000, false);
        assert_eq!(s.limit, 4);
    }

    #[test]
    fn a_limit_lowered_to_zero_waits_for_relearning() {
        let mut s = InjectState::default();
        sample(&mut s, 0, 0, 100_000, false);
        assert_eq!(s.limit, 1);
        // Injection doubles the service time: no more injection ...
        sample(&mut s, 1_000_000, 1, 1_200_000, false);
        assert_eq!(s.limit, 0);
        // ... and clean samples only update the baseline ...
        for k in 1..=5u64 {
            sample(&mut s, k * 100 * MS, 0, k * 100 * MS + 100_000, false);
            assert_eq!(s.limit, 0, "sample {k}");
        }
        // ... until the baseline is forgotten, 1 s after the decrease: the
        // next baseline tries injection again.
        sample(&mut s, 1100 * MS, 0, 1100 * MS + 100_000, false);
        assert_eq!((s.limit, s.baseline), (0, 0));
        sample(&mut s, 1200 * MS, 0, 1200 * MS + 100_000, false);
        assert_eq!((s.limit, s.baseline), (1, 100_000));
    }

    /// Kernel `bfq_reset_inject_limit`: a new flow has nothing injected
    /// until its baseline is known, and a flow with a short think time
    /// goes back to none when the baseline is forgotten.
    #[test]
    fn a_short_think_flow_injects_only_after_its_baseline() {
        let mut s = InjectState::default();
        assert_eq!(s.limit, 0);
        sample(&mut s, 0, 0, 100_000, true);
        assert_eq!((s.limit, s.baseline), (1, 100_000));
        // 1.1 s later the baseline is forgotten: back to no injection.
        sample(&mut s, 1100 * MS, 1, 1100 * MS + 100_000, true);
        assert_eq!((s.limit, s.baseline), (0, 0));
    }

    fn arrive(s: &mut InjectState, id: u64, now: Time, in_flight: usize, inj: &mut bool) {
        let a = KernelArrival {
            id,
            now,
            in_service: true,
            in_flight,
            short_think: true,
            relearn: 1000 * MS,
        };
        s.kernel_arrival(a, inj);
    }

    /// Kernel `bfq_add_request` / `bfq_update_inject_limit`: a baseline
    /// needs nothing in flight at arrival and at completion; a sample with
    /// requests in flight counts only if injection happened; a decrease
    /// holds sampling off for 10 ms; 1 s after it the limit is reset.
    #[test]
    fn kernel_sampling_rules() {
        let mut s = InjectState::default();
        let mut inj = false;
        // Requests in flight, nothing known: no sample.
        arrive(&mut s, 1, 20 * MS, 2, &mut inj);
        assert!(s.sample.is_none());
        // Nothing in flight: the baseline, limit 1.
        arrive(&mut s, 2, 21 * MS, 0, &mut inj);
        s.kernel_sample_done(21 * MS + 100_000, 0, &mut inj, 4);
        assert_eq!((s.baseline, s.limit), (100_000, 1));
        // In flight but nothing injected: no sample.
        arrive(&mut s, 3, 22 * MS, 1, &mut inj);
        assert!(s.sample.is_none());
        // Injected and fast: the limit grows.
        inj = true;
        arrive(&mut s, 4, 23 * MS, 1, &mut inj);
        s.kernel_sample_done(23 * MS + 120_000, 1, &mut inj, 4);
        assert_eq!(s.limit, 2);
        assert!(!inj);
        // Injected and slow: the limit falls, and sampling pauses 10 ms.
        inj = true;
        arrive(&mut s, 5, 24 * MS, 2, &mut inj);
        s.kernel_sample_done(24 * MS + 200_000, 1, &mut inj, 4);
        assert_eq!(s.limit, 1);
        inj = true;
        arrive(&mut s, 6, 30 * MS, 1, &mut inj);
        assert!(s.sample.is_none(), "within 10 ms of the decrease");
        arrive(&mut s, 7, 35 * MS, 1, &mut inj);
        assert!(s.sample.is_some());
        // 1 s after the decrease: reset, short think time: limit 0.
        arrive(&mut s, 8, 1025 * MS, 1, &mut inj);
        assert_eq!((s.baseline, s.limit), (0, 0));
    }

    /// Kernel `bfq_update_has_short_ttime`: while the baseline is unknown,
    /// a think time turning long resets the limit to 1 at once, one
    /// turning short resets it to 0 only 100 ms after the last decrease
    /// (or reset); a known baseline keeps the limit.
    #[test]
    fn kernel_think_time_change_resets_an_unlearned_limit() {
        let mut s = InjectState::default();
        s.kernel_think_changed(50 * MS, false);
        assert_eq!((s.limit, s.decreased_at), (1, 50 * MS));
        s.kernel_think_changed(120 * MS, true);
        assert_eq!(s.limit, 1, "70 ms after the reset");
        s.kernel_think_changed(140 * MS, false);
        assert_eq!((s.limit, s.decreased_at), (1, 140 * MS));
        s.kernel_think_changed(240 * MS, true);
        assert_eq!((s.limit, s.decreased_at), (0, 240 * MS));
        s.baseline = 100_000;
        s.limit = 3;
        s.kernel_think_changed(2000 * MS, false);
        s.kernel_think_changed(3000 * MS, true);
        assert_eq!((s.limit, s.baseline), (3, 100_000));
    }

    #[test]
    fn waker_after_three_quick_wakeups() {
        let c = InjectConfig::default();
        let mut s = InjectState::default();
        let w = 1024 * MS;
        assert_eq!(s.on_wake(&c, 1, Some((2, 0)), MS, true, w), None);
        assert_eq!(s.on_wake(&c, 1, Some((2, 10 * MS)), 11 * MS, true, w), None);
        assert_eq!(
            s.on_wake(&c, 1, Some((2, 20 * MS)), 21 * MS, true, w),
            Some(2)
        );
        assert_eq!(s.on_wake(&c, 1, Some((3, 20 * MS)), 30 * MS, true, w), None);
    }

    /// Kernel `bfq_check_waker` (`waker_kernel_detection`): a flow with a
    /// short think time gets no waker, and three sightings spread over
    /// more than 128 x slice_idle confirm none; without the switch both do.
    #[test]
    fn kernel_waker_detection_needs_a_long_think_time_and_close_sightings() {
        let w = 1024 * MS;
        let detect = |kernel: bool, short_think: bool, gap: Time| {
            let c = InjectConfig {
                waker_kernel_detection: kernel,
                ..InjectConfig::default()
            };
            let mut s = InjectState::default();
            for k in 0..3 {
                let t = k * gap;
                s.on_wake(&c, 1, Some((2, t)), t + MS, short_think, w);
            }
            s.waker
        };
        assert_eq!(detect(true, false, 10 * MS), Some(2));
        assert_eq!(detect(true, true, 10 * MS), None);
        assert_eq!(detect(true, false, 600 * MS), None);
        assert_eq!(detect(false, true, 10 * MS), Some(2));
        assert_eq!(detect(false, true, 600 * MS), Some(2));
    }
}
