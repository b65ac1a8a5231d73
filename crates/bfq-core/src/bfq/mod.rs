//! BFQ: Budget Fair Queueing, as in the 2010 paper (Sec. II, Fig. 3 and
//! Fig. 4), with the heuristics of BFQ+ (2014 report, Sec. 3.4-4.5) and of
//! today's kernel, each switchable.
//!
//! One flow at a time — the *active* flow — is served exclusively, in
//! C-LOOK order, until its budget is exhausted, its queue stays empty for
//! T_wait, or its turn lasts T_max. Then B-WF2Q+ picks the next flow, by
//! budgets and weights, so that each flow gets its weighted share of the
//! *service* (sectors), whatever the device's throughput.
//!
//! Where each mechanism lives:
//! - B-WF2Q+ timestamps, eligibility, V and back-shifting: [`wf2q`];
//! - budget assignment and feedback (heuristic 2): [`budget`];
//! - peak-rate estimation and auto B_max (heuristic 1): [`peak_rate`];
//! - time charging of slow flows (3), async/write over-charge and
//!   device-queue limits (4): [`charging`];
//! - weight raising and burst detection (5): [`weight_raising`];
//! - T_wait idling, seeky detection, think time, and idling where
//!   guarantees need it (6): [`idling`];
//! - injection while idling (7): [`injection`];
//! - early queue merging (8): [`queue_merge`];
//! - preemption and in-time wake-ups (9): [`preemption`];
//! - C-LOOK, FIFO expiry and backward seeks inside a flow: [`queue`];
//! - classes (RT > BE > IDLE, idle starvation timeout) and hierarchical
//!   groups: [`wf2q`] (one tree per class per group);
//! - the service loop (Fig. 3) and the profiles: this module.
//!
//! Profiles ([`BfqConfig::profile`]): `bfq` (every heuristic of today's
//! kernel plus this project's rules, docs/bfq-settings.md), `bfq-kernel`
//! (today's kernel exactly), `bfq-plus-2014` (the 2014 report's heuristics and
//! parameters), `bfq-2010` (no heuristics). Every setting overrides the
//! profile's value; docs/bfq-settings.md lists them.

pub mod budget;
pub mod charging;
pub mod idling;
pub mod injection;
pub mod medium;
pub mod peak_rate;
pub mod preemption;
pub mod queue;
pub mod queue_merge;
mod sorted;
pub mod weight_raising;
pub mod wf2q;

use crate::error::SchedError;
use crate::scheduler::{FlowInternals, Internals, Scheduler};
use crate::settings::Settings;
use crate::table::{check_time, dispatch_past_end, RequestTable, SlotIdx, Topology};
use crate::types::*;
use budget::{BudgetConfig, ExpireReason, Feedback, FeedbackCtx};
use charging::{ChargeConfig, ChargeRule, DeviceSlots, TurnInfo};
use idling::{Census, FlowIdle, GuaranteeIdling, IdleConfig, Lingering, SeekHistory, ThinkTime};
use injection::{InjectConfig, InjectState, KernelArrival, RecentActivations, RECENT_ACTIVATIONS};
use medium::MediumProbe;
use peak_rate::{Estimator, PeakRate, PeakRateConfig};
use preemption::{Preempt, PreemptConfig};
use queue::{FlowQueue, QueueConfig};
use queue_merge::{MergeConfig, MergeState};
use weight_raising::{Burst, BurstVerdict, Raise, RaiseKind, WrConfig};
use wf2q::{Anchor, EState, EntityId, Kind, PushUp, Wf2q};

/// Under `lag_anchor`, how far below V (in sectors at weight 1: 128 TiB,
/// 2^60 units of virtual time) a flow activated afresh may start, whatever
/// its weight: a guard that keeps every timestamp within reach of
/// B-WF2Q+'s rebase (2^62 of headroom), far beyond V's drift in a run
/// (11 300 sectors per unit of weight after 20 s in
/// `h3_injected_time_is_not_charged_to_the_idling_flow`; at that pace the
/// guard is reached after about 15 years).
pub const ANCHOR_SPAN: u64 = 1 << 38;

/// Default B_max before the peak rate is known, and of the 2010 profile.
pub const DEFAULT_MAX_BUDGET: u64 = 16384;

/// Every setting of the `bfq` scheduler.
///
/// Laid out in declaration order (`repr(C)`): first the settings a
/// request reads on its way through the scheduler, on as few cache lines
/// as they fill (the sub-configurations read whole or nearly so, then
/// the merge switch and weight raising, whose first fields are those an
/// arrival reads); last those a request does not read. Rust's own order
/// (by alignment) spread the one or two fields a request reads of each
/// over all 7 of the configuration's lines (docs/architecture.md, "Lines
/// a request writes, counted").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BfqConfig {
    /// How the next request is picked inside the active flow (C-LOOK order, FIFO expiry, back seeks).
    pub queue: QueueConfig,
    /// T_max: longest turn before the flow is expired and over-charged.
    pub timeout_sync: Time,
    /// A device that says it is rotational counts as non-rotational while
    /// its lone small seeky reads take under this on average, and little
    /// of their time is in reads over twice this
    /// ([`medium::MediumProbe`]; `rotational_probe`, 0..=10ms; 0: trust
    /// the device, the kernel; `bfq` 1ms).
    pub rotational_probe: Time,
    /// Heuristics 3 and 4.
    pub charge: ChargeConfig,
    /// Heuristic 6.
    pub guarantee: GuaranteeIdling,
    /// Heuristic 9.
    pub preempt: PreemptConfig,
    /// Device idling (T_wait) and seek detection (2010 Sec. II-B, BFQ+ report Sec. 4.4).
    pub idle: IdleConfig,
    /// Budgets and their feedback (B_max, B_min, initial budget; 2010 Sec. III-C, BFQ+ report Sec. 4.3).
    pub budget: BudgetConfig,
    /// Heuristic 7.
    pub inject: InjectConfig,
    /// Heuristic 1.
    pub peak_rate: PeakRateConfig,
    /// Heuristic 8.
    pub merge: MergeConfig,
    /// Heuristic 5.
    pub wr: WrConfig,
    /// An idle-class flow is served anyway after this long without service.
    pub idle_class_timeout: Time,
    /// Kernel: a flow idling with under 1/3 of its budget left is not
    /// expired for timeout (part of heuristic 3).
    pub timeout_grace: bool,
    /// Kernel: a flow past its budget timeout whose queue is empty and
    /// that is idled for is not expired until its next request arrives or
    /// the idling ends (`timeout_defers_to_idling`; docs/bfq-settings.md,
    /// "Where `bfq` departs from the kernel").
    pub timeout_defers_to_idling: bool,
}

impl Default for BfqConfig {
    /// The `bfq` profile.
    fn default() -> Self {
        BfqConfig::best()
    }
}

impl BfqConfig {
    /// The 2010 paper's BFQ: no heuristics (profile `bfq-2010`).
    pub fn paper_2010() -> Self {
        BfqConfig {
            budget: BudgetConfig::paper_2010(DEFAULT_MAX_BUDGET),
            idle: IdleConfig::paper_2010(),
            queue: QueueConfig {
                fifo_expire_sync: 125 * MS,
                fifo_expire_async: 250 * MS,
                back_seek_max: 32768,
                back_seek_penalty: 2,
            },
            timeout_sync: 125 * MS,
            idle_class_timeout: 200 * MS,
            peak_rate: PeakRateConfig {
                auto: false,
                ..PeakRateConfig::default()
            },
            charge: ChargeConfig::paper_2010(),
            wr: WrConfig {
                enabled: false,
                ..WrConfig::kernel()
            },
            guarantee: GuaranteeIdling {
                enabled: false,
                strict: false,
                raised_min: 0,
                raised_keep_idling: false,
            },
            inject: InjectConfig {
                enabled: false,
                ..InjectConfig::default()
            },
            merge: MergeConfig {
                enabled: false,
                distance: 8192,
                time_limit: queue_merge::MERGE_TIME_LIMIT,
            },
            preempt: PreemptConfig {
                enabled: false,
                in_time: 24 * MS,
                group_weight: false,
                after_timeout: false,
                timeout_keeps_place: false,
                push_up: false,
                lag_anchor: false,
                lag_bound: false,
                raised_lag_bound: false,
            },
            timeout_grace: false,
            timeout_defers_to_idling: false,
            rotational_probe: 0,
        }
    }

    /// The best BFQ we know (profile `bfq`): today's kernel plus the rules
    /// the papers' outcomes need that the kernel lacks, each switchable and
    /// listed with its motivation in docs/bfq-settings.md ("Where `bfq`
    /// departs from the kernel").
    pub fn best() -> Self {
        let k = BfqConfig::kernel();
        BfqConfig {
            inject: InjectConfig {
                charge_service: true,
                share_cap: true,
                ahead_bound: true,
                into_raised_b_max: true,
                return_lag_bound: true,
                read_floor: true,
                protect_seeky: true,
                protect_deep_seeky: true,
                waker_kernel_detection: false,
                waker_beyond_limit: false,
                limit_counts_all: false,
                recent_first: false,
                fair_candidates: true,
                when_idling_boosts: true,
                kernel_sampling: false,
                ..k.inject
            },
            peak_rate: PeakRateConfig {
                large_seq: false,
                turn_samples: true,
                lower_min_request: 128,
                ..k.peak_rate
            },
            budget: BudgetConfig {
                raised_feedback: true,
                raised_group_order: true,
                ..k.budget
            },
            charge: ChargeConfig {
                overcharge_asymmetric: true,
                new_flow_service: true,
                raised_group_time: true,
                async_charge_factor: 10,
                ..k.charge
            },
            // The kernel's push-up of back-shifted timestamps (to F = V)
            // cost these rules' fairness with injection: 3:1 readers got
            // 2.42:1 and 1:2:3 readers 0.92-1.09 of their shares
            // (`h7_injection_keeps_3_to_1_and_raises_throughput`,
            // `h3_injected_time_is_not_charged_to_the_idling_flow`): V runs
            // ahead of every flow alike, and only the flows that happen to
            // come back back-shifted were moved up. `backshift_lag_bound`
            // bounds the lag against the backlogged flows' least F instead,
            // and `lag_anchor` starts fresh activations there.
            preempt: PreemptConfig {
                after_timeout: true,
                timeout_keeps_place: true,
                push_up: false,
                lag_anchor: true,
                lag_bound: false,
                raised_lag_bound: true,
                ..k.preempt
            },
            timeout_defers_to_idling: false,
            rotational_probe: MS,
            ..k
        }
    }

    /// Today's kernel BFQ exactly as the reference describes it (profile
    /// `bfq-kernel`), for comparisons with the kernel's own bfq: every
    /// heuristic, kernel defaults, none of this project's rules.
    pub fn kernel() -> Self {
        let p = BfqConfig::paper_2010();
        BfqConfig {
            budget: BudgetConfig::with_rules(DEFAULT_MAX_BUDGET, Feedback::Kernel, 66),
            peak_rate: PeakRateConfig {
                // Used only by `peak_rate_turn_samples`.
                min_turn: 4 * MS,
                ..PeakRateConfig::default()
            },
            charge: ChargeConfig {
                rule: ChargeRule::Kernel,
                async_charge_factor: 3,
                write_charge_factor: 1,
                overcharge_asymmetric: false,
                async_depth_pct: 50,
                sync_write_depth_pct: 75,
                new_flow_service: false,
                raised_group_time: false,
            },
            wr: WrConfig::kernel(),
            guarantee: GuaranteeIdling {
                enabled: true,
                strict: false,
                raised_min: 20 * MS,
                raised_keep_idling: true,
            },
            inject: InjectConfig {
                charge_service: false,
                share_cap: false,
                ahead_bound: false,
                return_lag_bound: false,
                read_floor: false,
                protect_seeky: false,
                protect_deep_seeky: false,
                waker_kernel_detection: true,
                recent_first: true,
                when_idling_boosts: false,
                kernel_sampling: true,
                ..InjectConfig::default()
            },
            merge: MergeConfig {
                enabled: true,
                distance: 8192,
                time_limit: queue_merge::MERGE_TIME_LIMIT,
            },
            preempt: PreemptConfig {
                enabled: true,
                in_time: 3 * p.idle.slice_idle,
                group_weight: true,
                after_timeout: false,
                timeout_keeps_place: false,
                push_up: true,
                lag_anchor: false,
                lag_bound: false,
                raised_lag_bound: false,
            },
            timeout_grace: true,
            timeout_defers_to_idling: true,
            ..p
        }
    }

    /// Linux 4.18's BFQ, the one the 2018 article measured as prop-bfq
    /// (profile `bfq-2018`): today's kernel without injection (it came
    /// with Linux 5.2) and with 4.x's write over-charge: asynchronous
    /// sectors cost 10 (today 3) also in asymmetric scenarios (today
    /// exempt), which is how that bfq "privileges reads" over buffered
    /// writers in other groups (2018 article, Sec. 9).
    pub fn linux_4_18() -> Self {
        let k = BfqConfig::kernel();
        BfqConfig {
            charge: ChargeConfig {
                async_charge_factor: 10,
                overcharge_asymmetric: true,
                ..k.charge
            },
            inject: InjectConfig {
                enabled: false,
                ..k.inject
            },
            ..k
        }
    }

    /// BFQ+ as in the 2014 report (profile `bfq-plus-2014`): H-peak-rate,
    /// H-throughput, H-fairness, H-write-throt and H-low-latency with the
    /// report's parameters; no injection, queue merging, preemption or
    /// guarantee-driven idling (later kernel work).
    pub fn plus_2014() -> Self {
        let p = BfqConfig::paper_2010();
        BfqConfig {
            budget: BudgetConfig::with_rules(DEFAULT_MAX_BUDGET, Feedback::Plus2014, 50),
            peak_rate: PeakRateConfig {
                estimator: Estimator::Plus2014,
                ..PeakRateConfig::default()
            },
            charge: ChargeConfig {
                rule: ChargeRule::Plus2014,
                async_charge_factor: 1,
                write_charge_factor: 10,
                overcharge_asymmetric: false,
                async_depth_pct: 100,
                sync_write_depth_pct: 100,
                new_flow_service: false,
                raised_group_time: false,
            },
            wr: WrConfig::plus_2014(),
            idle: IdleConfig {
                seeky_report: true,
                seeky_grace: true,
                ..p.idle
            },
            guarantee: GuaranteeIdling {
                enabled: false,
                strict: false,
                raised_min: 0,
                raised_keep_idling: true,
            },
            ..p
        }
    }

    /// The configuration of a profile by scheduler name.
    pub fn profile(name: &str) -> Option<BfqConfig> {
        match name {
            "bfq" => Some(BfqConfig::best()),
            "bfq-kernel" => Some(BfqConfig::kernel()),
            "bfq-2018" => Some(BfqConfig::linux_4_18()),
            "bfq-plus-2014" => Some(BfqConfig::plus_2014()),
            "bfq-2010" => Some(BfqConfig::paper_2010()),
            _ => None,
        }
    }

    /// The `bfq` profile with `key=value` overrides.
    pub fn from_settings(s: &mut Settings) -> Result<Self, SchedError> {
        BfqConfig::from_settings_on(BfqConfig::best(), s)
    }

    /// `base` (a profile) with `key=value` overrides; every setting is
    /// listed in docs/bfq-settings.md.
    pub fn from_settings_on(base: BfqConfig, s: &mut Settings) -> Result<Self, SchedError> {
        let d = base;
        let (budget, auto) = BudgetConfig::with_settings(&d.budget, d.peak_rate.auto, s)?;
        let peak_rate = PeakRateConfig::with_settings(&d.peak_rate, auto, s)?;
        let idle = IdleConfig::with_settings(&d.idle, s)?;
        let queue = QueueConfig::with_settings(&d.queue, s)?;
        let timeout_sync = s.duration_in(
            "timeout_sync",
            d.timeout_sync,
            1,
            crate::settings::MAX_DURATION,
        )?;
        let charge = ChargeConfig::with_settings(&d.charge, s)?;
        let wr = WrConfig::with_settings(&d.wr, s)?;
        let guarantee = GuaranteeIdling::with_settings(&d.guarantee, wr.min_idle_slice, s)?;
        let inject = InjectConfig::with_settings(&d.inject, INJECT_CANDIDATES, s)?;
        let merge = MergeConfig::with_settings(&d.merge, s)?;
        let preempt = PreemptConfig::with_settings(&d.preempt, idle.slice_idle, s)?;
        Ok(BfqConfig {
            budget,
            idle,
            queue,
            timeout_sync,
            idle_class_timeout: s.duration("idle_class_timeout", d.idle_class_timeout)?,
            peak_rate,
            charge,
            wr,
            guarantee,
            inject,
            merge,
            preempt,
            timeout_grace: s.bool("timeout_grace", d.timeout_grace)?,
            timeout_defers_to_idling: s
                .bool("timeout_defers_to_idling", d.timeout_defers_to_idling)?,
            rotational_probe: s.duration_in(
                "rotational_probe",
                d.rotational_probe,
                0,
                medium::MAX_THRESHOLD,
            )?,
        })
    }
}

/// Per-flow state.
///
/// Laid out in declaration order (`repr(C)`): the fields a request
/// writes whenever its flow's turn starts and ends with it (a flow that
/// waits for each request) come last, after the queue and before the
/// injection state whose tail a request writes too, so that they share
/// a few cache lines, next to the topology's count of requests held
/// ([`FlowEntry`](crate::table::FlowEntry)): such a request writes 5
/// lines of the flow's entry instead of 8, lines the CPU that serves the
/// flow next reads (docs/architecture.md, "Lines a request writes,
/// counted").
#[derive(Clone, Debug)]
#[repr(C)]
pub struct FlowState {
    entity: EntityId,
    /// Original weight, class, group.
    weight: u32,
    group: GroupId,
    class: IoClass,
    default_weight: bool,
    in_large_burst: bool,
    io_bound: bool,
    /// `served_total` when the flow began doing I/O, or came back after
    /// idling longer than `wr_min_idle_time` (`new_flow_charge_service`).
    served_at_start: u64,
    /// Requests injected ([`Scheduler::flow_internals`]).
    injected: u64,
    /// B-WF2Q+ service forfeited at activations (sectors;
    /// [`Scheduler::flow_internals`]).
    forfeited: u64,
    soft_rt_next_start: Time,
    busy_since: Time,
    idle_since: Time,
    raise: Raise,
    merge: MergeState,
    queue: FlowQueue,
    // What each request's turn writes, from here to the end.
    /// Dispatched, not completed (requests held in this flow's queue).
    in_flight: u32,
    /// Whether the flow counts as synchronous (its latest request was, or
    /// it issued a sync request within 2 x slice_idle).
    sync: bool,
    /// Counted as busy in the census.
    busy: bool,
    /// Counted in the census's `seq_busy` (busy and not seeky).
    seq_counted: bool,
    /// Issued at least one request.
    started: bool,
    last_sync_at: Option<Time>,
    seek: SeekHistory,
    /// Budget for the flow's next turn.
    budget: u64,
    /// C-LOOK head: end of the last dispatched request.
    head: u64,
    /// Total sectors dispatched (for statistics and tests).
    served_total: u64,
    /// Turns granted and the sum of their budgets
    /// ([`Scheduler::flow_internals`]).
    turns: u64,
    budget_sum: u64,
    /// B-WF2Q+ service charged for its turns (sectors).
    charged: u64,
    last_completion: Time,
    service_since_busy: u64,
    /// When the flow was first served in its current busy period (valid
    /// while `service_since_busy > 0`; `merge_time_limit`).
    first_io: Time,
    /// Budget left when it last emptied (in-time wake-ups).
    budget_left: u64,
    think: ThinkTime,
    inj: InjectState,
}

impl FlowState {
    /// Keeps the census's count of busy non-seeky flows in step with this
    /// flow's busy state and seekiness (both change one request at a time,
    /// so this is O(1)).
    fn recount_seq(&mut self, census: &mut Census) {
        let seq = self.busy && !self.seek.is_seeky();
        if seq != self.seq_counted {
            self.seq_counted = seq;
            if seq {
                census.seq_busy += 1;
            } else {
                census.seq_busy -= 1;
            }
        }
    }

    /// Takes the request in `slot` out of the flow's queue and dispatches
    /// it, with the flow's service book-keeping.
    fn take(&mut self, table: &mut RequestTable<u32>, slot: SlotIdx, now: Time) -> Request {
        self.queue.remove(table, slot);
        let req = table.dispatch(now, slot);
        let sectors = u64::from(req.sectors);
        self.head = req.end();
        self.in_flight += 1;
        self.served_total += sectors;
        if self.service_since_busy == 0 {
            self.first_io = now;
        }
        self.service_since_busy += sectors;
        if self.raise.on() {
            self.raise.served += sectors;
        }
        req
    }
}

/// The active flow's turn.
#[derive(Clone, Copy, Debug)]
struct Turn {
    flow: FlowId,
    entity: EntityId,
    /// Budget of this turn.
    budget: u64,
    /// Service counted in this turn (with over-charges and injected debt).
    served: u64,
    /// Injected service counted at the start of the turn (part of
    /// `served`).
    debt: u64,
    /// Sectors actually dispatched in this turn.
    real: u64,
    /// Of those, written sectors.
    written: u64,
    /// When the turn began (budget timeout).
    started: Time,
    /// Budget timeout of this turn (T_max, longer for raised flows).
    timeout: Time,
    /// Idling: the turn ends at this time unless a request arrives.
    idle_until: Option<Time>,
    /// When the last idling began (the kernel's `last_idling_start`).
    idle_since: Time,
    /// Sectors injected from other flows during this turn.
    injected: u64,
    /// Of those, sectors of non-seeky flows.
    injected_seq: u64,
    /// Whether a flow that shares the device's time with the active flow
    /// as another group was injected ([`Bfq::shares_time_with`]).
    time_shared: bool,
    /// Whether the active flow has had two or more requests in flight in
    /// this turn (`inject_protect_deep_seeky`).
    deep: bool,
    /// Serial number of the turn (the per-flow injection counts name it).
    serial: u64,
}

/// Group-level data.
#[derive(Clone, Copy, Debug, Default)]
pub struct GroupState {
    entity: Option<EntityId>,
}

/// Counters for tests and reports, in declaration order (`repr(C)`): the
/// one each turn writes, `turns`, last (next to the fields after it in
/// [`Bfq`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct BfqStats {
    /// Requests dispatched by injection (heuristic 7).
    pub injected: u64,
    /// Early queue merges (heuristic 8).
    pub merges: u64,
    /// Splits of merged queues that turned seeky.
    pub splits: u64,
    /// Turns ended by preemption (heuristic 9).
    pub preemptions: u64,
    /// Flows weight-raised as interactive.
    pub raisings_interactive: u64,
    /// Flows weight-raised as soft real-time.
    pub raisings_soft_rt: u64,
    /// Turns started (flows selected by B-WF2Q+).
    pub turns: u64,
}

/// Which requests an injection may take from a candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Take {
    /// Any: the idling flow's waker, the flow it woke, B-WF2Q+'s next.
    Any,
    /// Reads only: the other candidates, and every candidate under
    /// `inject_read_floor` beyond the learned limit. Writes complete once
    /// buffered and their programs slow the idling flow's reads later,
    /// where the learned limit cannot see them.
    Reads,
}

/// Most flows B-WF2Q+ may offer for injection at one dispatch, besides
/// the idling flow's waker and woken flow: the upper end of
/// `inject_candidates` (the kernel tries every busy queue; a bound keeps
/// the dispatch O(1) in the number of flows).
pub const INJECT_CANDIDATES: usize = 8;

// `InjectConfig::candidates` is a u8: the bound must fit (checked at build).
const _: () = assert!(INJECT_CANDIDATES <= u8::MAX as usize);

/// Room for every injection candidate of one dispatch: the waker, the
/// woken flow, the remembered activations and B-WF2Q+'s candidates.
const INJECT_LIST: usize = 2 + RECENT_ACTIVATIONS + INJECT_CANDIDATES;

/// The BFQ scheduler.
///
/// Laid out in declaration order (`repr(C)`) from the start of a cache
/// line (`align(64)`): first what a request writes whenever its flow's
/// turn starts and ends with it (the turn count, the turn, the latest
/// completion, the peak-rate window, the lingering list, the recent
/// activations, the request table's counts), on as few cache lines as
/// they fill; then what a request only reads: the request table's
/// buffers, the device, the busy counts, B-WF2Q+'s and the topology's
/// buffers, and the configuration, whose settings a request reads come
/// first ([`BfqConfig`]); last what it does not touch (the medium probe,
/// the burst list). docs/architecture.md, "Lines a request writes,
/// counted", has the lines a request touches.
#[derive(Debug)]
#[repr(C, align(64))]
pub struct Bfq {
    /// Not read by a request: its 16 bytes put the turn count, the first
    /// field a request writes, at the start of the struct's second line.
    name: &'static str,
    /// Its last field, the turn count, written at each turn.
    stats: BfqStats,
    /// Most requests seen in flight (kernel `max_rq_in_driver`).
    max_in_flight: u32,
    /// Kernel `rqs_injected` (`inject_kernel_sampling`): a listed flow was
    /// injected since the sampled request's flow emptied.
    rqs_injected: bool,
    turn: Option<Turn>,
    last_completion: Option<(u32, Time)>,
    peak: PeakRate,
    lingering: Lingering,
    /// Latest entries into B-WF2Q+ (`inject_recent_first`).
    recent: RecentActivations,
    /// Per request: index of the flow whose queue holds it (differs from
    /// `req.flow` when merged). Its counts first.
    table: RequestTable<u32>,
    // What a request reads, or writes now and then, from here on.
    device: DeviceInfo,
    /// What the driver says of the device; `device.rotational` is what
    /// the rules use (the probe may overrule a rotational claim).
    reported_rotational: bool,
    census: Census,
    slots: DeviceSlots,
    wf2q: Wf2q,
    topo: Topology<FlowState, GroupState>,
    cfg: BfqConfig,
    // What a request does not touch.
    medium: MediumProbe,
    burst: Burst,
}

impl Bfq {
    /// BFQ with the given configuration.
    pub fn new(cfg: BfqConfig) -> Self {
        let mut b = Bfq {
            name: "bfq",
            cfg,
            device: DeviceInfo::default(),
            table: RequestTable::new(),
            topo: Topology::new(GroupState::default()),
            wf2q: Wf2q::new(cfg.idle_class_timeout),
            turn: None,
            census: Census::default(),
            lingering: Lingering::default(),
            peak: PeakRate::new(true, cfg.peak_rate.learned),
            reported_rotational: true,
            medium: MediumProbe::default(),
            burst: Burst::default(),
            last_completion: None,
            slots: DeviceSlots::default(),
            recent: RecentActivations::default(),
            rqs_injected: false,
            max_in_flight: 0,
            stats: BfqStats::default(),
        };
        b.retune_max_budget();
        b.set_anchor();
        b
    }

    /// BFQ (profile `bfq`) built from `key=value` settings; unknown keys
    /// are errors.
    pub fn from_settings(settings: &Settings) -> Result<Self, SchedError> {
        Bfq::from_profile("bfq", settings)
    }

    /// A profile (`bfq`, `bfq-plus-2014`, `bfq-2010`) with overrides.
    pub fn from_profile(profile: &str, settings: &Settings) -> Result<Self, SchedError> {
        let base = BfqConfig::profile(profile)
            .ok_or_else(|| SchedError::UnknownScheduler(profile.to_string()))?;
        let mut s = settings.clone();
        s.for_scheduler(profile);
        let cfg = BfqConfig::from_settings_on(base, &mut s)?;
        s.finish()?;
        Ok(Bfq::new(cfg))
    }

    /// Names this instance (profiles share the implementation).
    pub fn with_name(mut self, name: &'static str) -> Self {
        self.name = name;
        self
    }

    /// The configuration in force (B_max is the current, tuned value).
    pub fn config(&self) -> &BfqConfig {
        &self.cfg
    }

    /// The active flow, if any.
    pub fn active_flow(&self) -> Option<FlowId> {
        self.turn.map(|t| t.flow)
    }

    /// The budget a flow will get on its next turn.
    pub fn flow_budget(&self, flow: FlowId) -> Option<u64> {
        self.topo.flow(flow).ok().map(|f| f.data.budget)
    }

    /// Sectors dispatched from a flow's queue so far.
    pub fn flow_served(&self, flow: FlowId) -> Option<u64> {
        self.topo.flow(flow).ok().map(|f| f.data.served_total)
    }

    /// The flow's current weight (raised or original) and raising kind.
    pub fn flow_weight(&self, flow: FlowId) -> Option<(u32, RaiseKind)> {
        self.topo
            .flow(flow)
            .ok()
            .map(|f| (self.wf2q.entity(f.data.entity).weight, f.data.raise.kind))
    }

    /// Whether the flow's requests currently go to another flow's queue.
    pub fn flow_merged_into(&self, flow: FlowId) -> Option<FlowId> {
        self.topo
            .flow(flow)
            .ok()
            .and_then(|f| f.data.merge.into.map(|(y, _)| FlowId(y)))
    }

    /// Current B_max.
    pub fn max_budget(&self) -> u64 {
        self.cfg.budget.max_budget
    }

    /// Estimated peak rate, sectors per second.
    pub fn peak_rate(&self) -> u64 {
        self.peak.rate
    }

    /// Event counters.
    pub fn stats(&self) -> BfqStats {
        self.stats
    }

    /// Checks internal invariants (tests; debug builds call it often).
    pub fn check_invariants(&self) {
        self.wf2q.check_invariants();
    }

    fn flow_state(&self, f: FlowId) -> &FlowState {
        &self.topo.any_flow(f).data
    }

    fn flow_state_mut(&mut self, f: FlowId) -> &mut FlowState {
        &mut self.topo.any_flow_mut(f).data
    }

    /// Re-applies a flow's effective weight (raising) to its entity.
    fn apply_weight(&mut self, f: FlowId) {
        let wr = self.cfg.wr;
        let fs = &self.topo.any_flow(f).data;
        let w = fs.raise.weight(&wr, fs.weight);
        let e = fs.entity;
        self.wf2q.set_weight(e, w);
    }

    fn start_raise(&mut self, f: FlowId, kind: RaiseKind, now: Time) {
        let wr = self.cfg.wr;
        let (coeff, dur) = match kind {
            RaiseKind::SoftRt => {
                self.stats.raisings_soft_rt += 1;
                (wr.rt_coeff, wr.rt_max_time)
            }
            _ => {
                self.stats.raisings_interactive += 1;
                (
                    wr.coeff,
                    wr.interactive_time(self.peak.rate, self.device.rotational),
                )
            }
        };
        let raised_budget = 2 * self.cfg.budget.min_budget;
        let fs = &mut self.topo.any_flow_mut(f).data;
        let was = fs.raise.on();
        fs.raise.start(kind, coeff, now, dur);
        // Raised flows get small budgets (kernel: 2 x min budget) so that
        // they are served soon: a flow that starts raised is timestamped
        // with that budget, not with the large budget of a new flow.
        if !was && !self.cfg.budget.raised_feedback {
            fs.budget = fs.budget.min(raised_budget);
        }
        if fs.busy && !was {
            self.census.raised_busy += 1;
        }
        self.apply_weight(f);
    }

    fn end_raise(&mut self, f: FlowId) {
        let fs = &mut self.topo.any_flow_mut(f).data;
        if !fs.raise.on() {
            return;
        }
        fs.raise = Raise::default();
        if fs.busy {
            self.census.raised_busy -= 1;
        }
        self.apply_weight(f);
    }

    /// Marks a flow busy (request queued or in flight) or idle in the
    /// census; on becoming idle, computes its soft real-time next start.
    /// (Inline up to the check: a flow that lingered is still busy when
    /// its next request wakes it.)
    #[inline]
    fn set_busy(&mut self, f: FlowId, busy: bool, now: Time) {
        if self.flow_state(f).busy != busy {
            self.switch_busy(f, busy, now);
        }
    }

    /// [`Bfq::set_busy`] for a flow whose busy state differs from `busy`.
    fn switch_busy(&mut self, f: FlowId, busy: bool, now: Time) {
        let slice_idle = self.cfg.idle.slice_idle;
        let max_rt = self.cfg.wr.max_softrt_rate;
        let fs = &mut self.topo.any_flow_mut(f).data;
        fs.busy = busy;
        let (w, c, g, r) = (fs.weight, fs.class, fs.group.index(), fs.raise.on());
        if busy {
            fs.busy_since = now;
            fs.service_since_busy = 0;
        } else {
            fs.idle_since = now;
            // A flow busy for long may have been served more than
            // u64::MAX / SEC sectors (9 TB): `mul_div` does not overflow.
            if let Some(d) = charging::mul_div(fs.service_since_busy, SEC, max_rt) {
                let by_rate = fs.busy_since.saturating_add(d);
                fs.soft_rt_next_start = fs
                    .soft_rt_next_start
                    .max(by_rate)
                    .max(now + slice_idle + 4 * MS);
            }
        }
        self.census.update(busy, w, c, g, r);
        fs.recount_seq(&mut self.census);
    }

    /// Heuristic 7: whether a sync flow whose queue emptied while requests
    /// are in flight stays backlogged in B-WF2Q+ (it would be idled for:
    /// its next request is expected), rather than leaving the tree.
    fn stays_backlogged(&self, fs: &FlowState) -> bool {
        self.cfg.inject.enabled && fs.sync && self.wait_time(fs, u64::MAX).is_some()
    }

    /// A flow kept backlogged with an empty queue (see
    /// [`Bfq::stays_backlogged`]) leaves B-WF2Q+, charged for what it was
    /// injected, and keeps its place if it comes back in time.
    fn leave_tree(&mut self, f: FlowId) {
        if self.turn.is_some_and(|t| t.flow == f) {
            return;
        }
        let fs = &mut self.topo.any_flow_mut(f).data;
        if !fs.queue.is_empty() || self.wf2q.entity(fs.entity).state != EState::Queued {
            return;
        }
        let debt = std::mem::take(&mut fs.inj.debt);
        fs.inj.returning = true;
        fs.inj.left_between_turns = true;
        let entity = fs.entity;
        self.wf2q.charge_and_deactivate(entity, debt);
    }

    /// A removed flow's last hold is going: out of service, raising,
    /// the census (lingering included) and B-WF2Q+.
    fn retire(&mut self, now: Time, f: FlowId) {
        self.expire_if_active(now, f);
        self.end_raise(f);
        self.set_busy(f, false, now);
        self.lingering.remove(f);
        self.leave_tree(f);
    }

    /// Drops one hold on `f` (a request of it, or queued in it, completed),
    /// freeing a removed flow on its last.
    fn release(&mut self, now: Time, f: FlowId) {
        let e = self.topo.any_flow(f);
        let (entity, last) = (e.data.entity, e.retired && e.held == 1);
        if last {
            self.retire(now, f);
        }
        if self.topo.release(f) {
            self.wf2q.free_entity(entity);
        }
    }

    /// A sync flow with a short think time whose last request has
    /// completed stays counted in the census for `slice_idle` (its next
    /// request is due a moment later), so that the others do not look
    /// symmetric in the gap; returns whether `f` lingers.
    fn linger(&mut self, f: FlowId, now: Time) -> bool {
        let (slice_idle, guarantee) = (self.cfg.idle.slice_idle, self.cfg.guarantee.enabled);
        let fs = self.flow_state_mut(f);
        if !(guarantee && fs.sync && slice_idle > 0 && fs.think.short(slice_idle)) {
            return false;
        }
        self.lingering.push(f, now);
        true
    }

    /// Drops from the census (and B-WF2Q+) the flows whose lingering after
    /// their last completion is over at `now` without a new request.
    /// (Inline up to the check: most calls find none due.)
    #[inline]
    fn end_lingering(&mut self, now: Time) {
        if self.lingering.any_due(now, self.cfg.idle.slice_idle) {
            self.end_lingering_due(now);
        }
    }

    /// [`Bfq::end_lingering`] once some flow's lingering is over.
    fn end_lingering_due(&mut self, now: Time) {
        let span = self.cfg.idle.slice_idle;
        while let Some((flow, at)) = self.lingering.pop_due(now, span) {
            // (A flow leaves the list before it is freed: `retire`.)
            debug_assert!(self.topo.existing_flow_mut(flow).is_some());
            // The active flow stays busy until its turn ends.
            if self.turn.is_none_or(|t| t.flow != flow) {
                self.set_busy(flow, false, at);
                self.leave_tree(flow);
            }
        }
    }

    /// Sets B_max from the peak rate (auto mode).
    fn retune_max_budget(&mut self) {
        if !self.cfg.peak_rate.auto {
            return;
        }
        if let Some(m) = self.peak.max_budget(self.cfg.timeout_sync) {
            self.cfg.budget.rescale(m);
            self.set_anchor();
        }
    }

    /// `lag_anchor`: B-WF2Q+ timestamps activations from the backlogged
    /// flows' least F + B_max / w when V has run past it.
    fn set_anchor(&mut self) {
        let anchor = Anchor {
            slack: self.cfg.budget.max_budget,
            span: ANCHOR_SPAN,
        };
        self.wf2q
            .set_anchored(self.cfg.preempt.lag_anchor.then_some(anchor));
    }

    /// Whether a flow is idled for, and how long.
    fn wait_time(&self, fs: &FlowState, served_in_turn: u64) -> Option<Time> {
        let f = self.idle_view(fs, served_in_turn);
        self.cfg
            .idle
            .wait_time_heur(&self.cfg.guarantee, &self.device, &f, &self.census)
    }

    /// What the idling decision needs to know about `fs`, having served
    /// `served_in_turn` in its turn (the seeky grace counts it).
    fn idle_view(&self, fs: &FlowState, served_in_turn: u64) -> FlowIdle {
        let grace = self.cfg.idle.seeky_grace && served_in_turn < self.cfg.budget.max_budget / 8;
        FlowIdle {
            sync: fs.sync,
            class: Some(fs.class),
            seeky: fs.seek.is_seeky() && !grace,
            raised: fs.raise.on(),
            interactive: fs.raise.kind == RaiseKind::Interactive,
            io_bound: fs.io_bound,
            short_think: fs.think.short(self.cfg.idle.slice_idle),
        }
    }

    /// Ends the active flow's turn (Fig. 3 lines 24-38 and 59-66, with the
    /// heuristics' charging and feedback rules).
    fn expire(&mut self, now: Time, reason: ExpireReason) {
        let Some(turn) = self.turn.take() else { return };
        if self.cfg.inject.kernel_sampling {
            // Kernel `bfq_bfqq_expire`: no sample outlives the turn.
            self.rqs_injected = false;
            self.flow_state_mut(turn.flow).inj.sample = None;
        }
        // Kernel: a turn that ends because its flow stayed idle too long is
        // charged the time up to the start of that idling, not the idling
        // (`bfq_bfqq_is_slow` with `compensate`).
        let end = if reason == ExpireReason::TooIdle && self.cfg.charge.rule == ChargeRule::Kernel {
            turn.idle_since.min(now)
        } else {
            now
        };
        let elapsed = end.saturating_sub(turn.started);
        let fs = self.flow_state(turn.flow);
        let (seeky, raised, sync) = (fs.seek.is_seeky(), fs.raise.on(), fs.sync);
        let timed_out = self.groups_timed_out(reason, &turn, seeky);
        let own_charge = self.turn_charge(reason, &turn, elapsed, seeky, timed_out);
        // Charged its time (more than the sectors it was served), not its
        // service.
        let time_charged = own_charge > turn.served;
        let charge = own_charge + turn.debt;
        self.sample_turn_rate(reason, &turn, elapsed, (seeky, sync));
        let shift = preemption::may_back_shift(&self.cfg.preempt, reason, time_charged);
        let groups_timed_out = time_charged && timed_out;
        let (next, busy) = self.next_budget(reason, &turn, (raised, groups_timed_out), shift);
        if seeky {
            self.split_merged(turn.flow);
        }
        let fs = &mut self.topo.any_flow_mut(turn.flow).data;
        fs.budget = next;
        let raise_over = fs.raise.expired(&self.cfg.wr, now);
        let gone_idle = !busy && fs.in_flight == 0;
        // Heuristic 7: a sync flow with requests in flight that would be
        // idled for stays backlogged; one that leaves B-WF2Q+ with requests
        // in flight keeps its place if it comes back in time. A turn that
        // ended for want of requests ended because its flow is not idled
        // for (`dispatch_while_empty`), and nothing the decision reads has
        // changed since (the seeky grace, the one difference, only ever
        // lengthens the idling): that flow does not stay.
        let out = !busy && fs.in_flight > 0;
        let keep = out
            && reason != ExpireReason::NoMoreRequests
            && self.stays_backlogged(self.flow_state(turn.flow));
        let idled_for_past_timeout = reason == ExpireReason::Timeout
            && gone_idle
            && self.cfg.preempt.timeout_keeps_place
            && self.idled_for_while_empty(&turn);
        let fs = &mut self.topo.any_flow_mut(turn.flow).data;
        fs.inj.returning =
            (out && !keep && shift && fs.sync && self.cfg.inject.enabled) || idled_for_past_timeout;
        fs.charged += charge;
        let order = self.order_budget(turn.flow, next);
        self.wf2q.expire(turn.entity, charge, busy || keep, order);
        if busy || keep {
            self.recent.push(turn.flow.0);
        }
        // A flow that goes idle as its turn ends lingers as after any last
        // completion: without it, 100-weight random readers beside one of
        // 300 on flash were not idled for in the moment the heavier one,
        // just expired, had nothing in flight, and got one request per turn
        // (612:1 instead of 3:1 without the back-shift after a timeout).
        if gone_idle && !self.linger(turn.flow, now) {
            self.set_busy(turn.flow, false, now);
        }
        if raise_over {
            self.end_raise(turn.flow);
        } else if raised && self.cfg.wr.linear_decay {
            self.apply_weight(turn.flow);
        }
    }

    /// What the ending turn costs its flow beyond its debt: its service or
    /// its time, by the charging rule (heuristic 3) and the injection
    /// exceptions of `held_time` (`groups_timed_out`:
    /// [`Bfq::groups_timed_out`] for this turn).
    fn turn_charge(
        &self,
        reason: ExpireReason,
        turn: &Turn,
        elapsed: Time,
        seeky: bool,
        groups_timed_out: bool,
    ) -> u64 {
        let fs = self.flow_state(turn.flow);
        let starting = self.cfg.charge.new_flow_service
            && fs.served_total - fs.served_at_start <= self.cfg.budget.max_budget / 8;
        let held = self.held_time(turn, elapsed, seeky, groups_timed_out);
        // The debt is service received outside the turn: charged as it is,
        // never folded into a charge by time.
        let info = TurnInfo {
            reason,
            budget: turn.budget.saturating_sub(turn.debt),
            served: turn.served - turn.debt,
            elapsed: held,
            seeky,
            raised: fs.raise.on() && !self.raised_pays_time(reason, turn, seeky),
            starting,
            max_budget: self.cfg.budget.max_budget,
            timeout: self.cfg.timeout_sync,
            min_time: if held == 0 {
                0
            } else if self.device.rotational {
                self.cfg.idle.slice_idle
            } else {
                2 * MS
            },
        };
        charging::turn_charge(self.cfg.charge.rule, &info)
    }

    /// Whether `turn` of a raised flow, ending for `reason`, is charged its
    /// time as if the flow were not raised: the flow is seeky and alone
    /// (busy) in its group, the turn reached T_max, another group is busy,
    /// the device is not rotational, and the turn held the device mostly
    /// idle: less than B_max/8 of other flows' requests was injected into
    /// it (`raised_group_time_charge`).
    ///
    /// Weight raising multiplies a flow's weight within its group only
    /// (kernel: the group's weight is unchanged); the groups share the
    /// device by their own weights, and a seeky flow that holds the device
    /// for T_max shares it by time (2010 paper Sec. III-D; 2014 report
    /// Sec. 3.5), as [`Bfq::groups_timed_out`] charges an injected turn.
    /// The kernel's raised flow is never charged its time, but its budget
    /// is 2 x B_min; with `wr_budget_feedback` nothing bounds what its idled
    /// T_max turns cost it. A raised 10 ms thinker beside a raised
    /// sequential reader, each in a group of 100, on the simulated SSD was
    /// charged 104 sectors for each 132 ms turn against the reader's
    /// 41-43 k, won 27 turns back to back with the device ~97% idle until
    /// its raising ended, and the reader waited 3.5 s (the kernel: 1.3 s;
    /// with the rule 378 ms).
    ///
    /// Not for a flow sharing its group: within a group its raised weight
    /// is its share. The root group counts as a group: a raised flow alone
    /// among the root's flows pays too beside flows in groups, though its
    /// raised weight competes with theirs directly (a sequential reader in
    /// a group beside a raised 10 ms thinker in the root group waited 3.7 s
    /// without the rule, 1.5-1.6 s with it, 2.6 s under the kernel's); so
    /// does a flow alone beside busy child groups (only flows are counted).
    /// Not for a turn filled with injected requests: it did not hold the
    /// device idle, their flows pay for them ([`Bfq::held_time`]), and
    /// charged its time as well a raised 10 ms thinker beside 10 sequential
    /// readers, each in a group of 100, waited for a round of their turns
    /// (p99 0.58-1.07 s, 0.12 s without the rule), and so did bash's
    /// start-up injected into its turns.
    fn raised_pays_time(&self, reason: ExpireReason, turn: &Turn, seeky: bool) -> bool {
        let group = self.flow_state(turn.flow).group.index();
        self.cfg.charge.raised_group_time
            && reason == ExpireReason::Timeout
            && seeky
            && !self.device.rotational
            && self.census.group_busy(group) <= 1
            && self.census.busy_groups >= 2
            && 8 * turn.injected < self.cfg.budget.max_budget
    }

    /// The time a turn held the device for its flow: `elapsed`, or none
    /// for a turn into which other flows' requests were injected.
    ///
    /// Heuristics 3 and 7: such a turn did not hold the device idle for the
    /// flow (the injected requests ran alongside its own, and their flows
    /// pay for them): it is charged its service, not its time. Charging the
    /// light reader of 1:2:3:4:5 sequential readers the whole turn (mostly
    /// injected service) took 9% of its share; charging the turn's
    /// own-service fraction of its time instead gave a 3:1 pair of random
    /// readers on a parallel device 1.9:1.
    ///
    /// A seeky flow's turn is charged its time anyway where its seeks held
    /// the device against flows that are owed time:
    /// - on a disk: there its own seeks hold the head; charged its service,
    ///   a random reader weighted 1/3 took 80% of an NCQ disk's time;
    /// - filled mostly with non-seeky flows' requests: charged its service,
    ///   a random reader held an SSD in T_max turns at its own slow rate
    ///   while sequential readers waited (2018 article, static sequential:
    ///   19% of the attainable total);
    /// - while a non-seeky flow is busy: the turn kept the device from the
    ///   sequential flow, which must get its share of the time (2018
    ///   article, static random with a sequential target: charged its
    ///   service, a random reader's T_max turn cost it as much as 1/40 of
    ///   the target's turn, and the target got 13% of the time for a weight
    ///   of 3/7);
    /// - at T_max with requests injected into it of other groups it shares
    ///   the device's time with ([`Bfq::shares_time_with`]: alone in its
    ///   group, not on a disk): the 2010 paper (Sec. III-D) over-charges a
    ///   flow that does not use its budget within T_max, so that random
    ///   flows get time shares (2014 report Sec. 3.5, "falling back to time
    ///   fairness"), and those flows are not share-capped in its turn
    ///   ([`Bfq::injectable_share`]). Charged its service, a random reader
    ///   in a group of 300 beside four in groups of 100 held an SSD 98% of
    ///   the time in T_max turns of its own 5 300 sectors, the others served
    ///   only by injection capped at a third of that each (2018 article,
    ///   static random: 0.72x max-none's total); charged its time it holds
    ///   it 47% (3/7: 43%) and the total is 1.07x (1.28x with the budget
    ///   feedback of [`Bfq::next_budget`]). Within a group the cap stays
    ///   and so does the service charge: a 3:1 pair of random readers gave
    ///   1.1:1 with both lifted, 2.1:1 with the time charge alone; beside a
    ///   third reader in a group of its own, 1.77:1 when the pair's turns
    ///   were charged their time for the third reader's injections.
    ///
    /// `groups_timed_out`: [`Bfq::groups_timed_out`] for this turn. Rule
    /// switch `inject_charge_service` (off in `bfq-kernel`).
    fn held_time(&self, turn: &Turn, elapsed: Time, seeky: bool, groups_timed_out: bool) -> Time {
        let shared = self.cfg.inject.charge_service && turn.injected > 0;
        let time_anyway = self.seeky_held_anyway(turn, seeky) || groups_timed_out;
        if shared && !time_anyway {
            0
        } else {
            elapsed
        }
    }

    /// Whether a seeky flow's turn held the device for it whatever was
    /// injected into it ([`Bfq::held_time`]): on a disk, filled mostly with
    /// non-seeky flows' requests, or while a non-seeky flow is busy.
    fn seeky_held_anyway(&self, turn: &Turn, seeky: bool) -> bool {
        seeky
            && (self.device.rotational
                || 2 * turn.injected_seq > turn.injected
                || self.census.seq_busy > 0)
    }

    /// Whether a seeky flow's turn reached T_max with requests injected
    /// into it of other groups it shares the device's time with
    /// ([`Bfq::shares_time_with`]), and nothing else would charge it its
    /// time ([`Bfq::seeky_held_anyway`]): it is charged its time for those
    /// groups ([`Bfq::held_time`]) and gets a timeout's budget feedback
    /// ([`Bfq::next_budget`]).
    fn groups_timed_out(&self, reason: ExpireReason, turn: &Turn, seeky: bool) -> bool {
        seeky
            && reason == ExpireReason::Timeout
            && turn.time_shared
            && !self.seeky_held_anyway(turn, seeky)
    }

    /// Heuristic 1, report or original estimator (or turn samples on top
    /// of the kernel's windows): the ending turn is a peak-rate sample.
    /// The report's and the original estimators sample a sync flow's turns
    /// only (the original BFQ's and BFQ+'s `bfq_update_peak_rate` return
    /// at once for an async queue, so the flusher's turns, whose writes a
    /// drive acknowledges from its cache, never count). Turn
    /// samples come from turns of reads only: a write completes once the
    /// device has buffered it, so a writer's turn measures the buffer, not
    /// the media.
    fn sample_turn_rate(
        &mut self,
        reason: ExpireReason,
        turn: &Turn,
        elapsed: Time,
        (seeky, sync): (bool, bool),
    ) {
        let pr = &self.cfg.peak_rate;
        let sample_turn = match pr.estimator {
            Estimator::Plus2014 | Estimator::Original => sync,
            Estimator::Kernel => {
                pr.turn_samples
                    && !self.device.rotational
                    && !seeky
                    && turn.written == 0
                    && 8 * turn.injected <= turn.real
                    && matches!(
                        reason,
                        ExpireReason::BudgetExhausted | ExpireReason::Timeout
                    )
            }
        };
        if pr.auto
            && sample_turn
            && self.peak.on_turn_end(
                &self.cfg.peak_rate,
                elapsed,
                turn.real,
                // Turn samples only raise the estimate (a peak rate).
                reason == ExpireReason::Timeout && pr.estimator == Estimator::Plus2014,
                seeky,
            )
        {
            self.retune_max_budget();
        }
    }

    /// Budget feedback (heuristic 2) for the flow whose turn ends: its next
    /// budget (at least its next request), whether it is I/O-bound, the
    /// leftover budget an in-time return keeps. Returns the next budget and
    /// whether the flow still has requests queued.
    ///
    /// With `inject_charge_service`, a timeout with others' requests
    /// injected sets the budget to the service ([`super::budget`]), except
    /// for a turn charged its time for the groups it shared the device with
    /// (`groups_timed_out`, [`Bfq::groups_timed_out`]): it doubles, as the
    /// kernel doubles a timed-out flow's budget (`__bfq_bfqq_recalc_budget`).
    /// Its time charge moves its S B_max / w on; with a budget of its
    /// service (5 000-20 000 sectors against B_max's ~122 000),
    /// `inject_ahead_bound` (two budgets ahead of V) then kept the flow out
    /// of every other turn until V caught up: in the 2018 article's static
    /// random workload (Sec. 9, Fig. 3; simulator, seeds 1-3, 5-15 s) the
    /// worst wait of a reader in a group of 100 for a 4 KiB read was
    /// 0.53-0.63 s while the others were served, and the total 74.0-78.0
    /// MB/s; with the doubling, 1.8-2.4 ms and 89.9 MB/s, the target's
    /// turns still holding the device 46-48% of the time (3/7: 43%).
    fn next_budget(
        &mut self,
        reason: ExpireReason,
        turn: &Turn,
        (raised, groups_timed_out): (bool, bool),
        shift: bool,
    ) -> (u64, bool) {
        let bcfg = self.cfg.budget;
        let qcfg = self.cfg.queue;
        let injected = turn.injected > 0 && self.cfg.inject.charge_service && !groups_timed_out;
        let fs = &mut self.topo.any_flow_mut(turn.flow).data;
        let ctx = FeedbackCtx {
            in_flight: fs.in_flight > 0,
            raised,
            async_flow: !fs.sync,
            injected,
        };
        let mut next = bcfg.next_budget_with(reason, turn.budget, turn.served, ctx);
        match reason {
            ExpireReason::BudgetExhausted | ExpireReason::Timeout => fs.io_bound = true,
            ExpireReason::TooIdle if 10 * turn.served <= 2 * turn.budget => fs.io_bound = false,
            _ => {}
        }
        let busy = !fs.queue.is_empty();
        if busy {
            // The next request must fit in a budget.
            let head = fs.head;
            if let Some(slot) = fs.queue.peek(&self.table, head, 0, &qcfg) {
                next = next.max(u64::from(self.table.slot(slot).req.sectors));
            }
        } else {
            fs.budget_left = if shift {
                turn.budget.saturating_sub(turn.served)
            } else {
                0
            };
        }
        (next, busy)
    }

    /// Heuristic 8: a merged queue that turned seeky is split.
    fn split_merged(&mut self, flow: FlowId) {
        let fs = &mut self.topo.any_flow_mut(flow).data;
        if fs.merge.members > 0 {
            fs.merge.generation = fs.merge.generation.wrapping_add(1);
            fs.merge.members = 0;
            self.stats.splits += 1;
        }
    }

    /// Starts the turn of the next flow chosen by B-WF2Q+.
    fn start_turn(&mut self, now: Time) -> bool {
        let Some((f, entity)) = self.wf2q.select(now) else {
            return false;
        };
        let flow = FlowId(f);
        if self.flow_state(flow).raise.expired(&self.cfg.wr, now) {
            self.end_raise(flow);
        }
        let mut budget = self.wf2q.entity(entity).budget;
        // Timestamped with at most 2 x B_min (`raised_group_order`), the
        // turn keeps the flow's own budget, also in the first turn after
        // its raising ended (at this selection, or at its last expiry
        // after it was requeued with the small budget).
        let ordered_small = self.cfg.budget.raised_group_order && self.wf2q.in_group(entity);
        let fs = &mut self.topo.any_flow_mut(flow).data;
        if ordered_small {
            budget = budget.max(fs.budget);
        }
        fs.turns += 1;
        fs.budget_sum += budget;
        let debt = std::mem::take(&mut fs.inj.debt);
        // Kernel: the timeout of an interactive-raised flow scales with its
        // raising, as its budget is only 2 x B_min. With budget feedback
        // for raised flows (`wr_budget_feedback`) the budget already
        // covers its burst, and a scaled timeout let a raised random
        // reader hold an SSD for 1.2 s turns at its own 22 MB/s.
        let timeout = if fs.raise.kind == RaiseKind::Interactive && !self.cfg.budget.raised_feedback
        {
            self.cfg.timeout_sync * u64::from(fs.raise.coeff.max(1))
        } else {
            self.cfg.timeout_sync
        };
        if debt > 0 {
            self.wf2q.served(entity, debt);
        }
        self.stats.turns += 1;
        self.turn = Some(Turn {
            flow,
            entity,
            budget,
            served: debt,
            debt,
            real: 0,
            written: 0,
            started: now,
            timeout,
            idle_until: None,
            idle_since: now,
            injected: 0,
            injected_seq: 0,
            time_shared: false,
            deep: false,
            serial: self.stats.turns,
        });
        true
    }

    /// Ends the turn of a flow about to be freed.
    fn expire_if_active(&mut self, now: Time, flow: FlowId) {
        if self.turn.is_some_and(|t| t.flow == flow) {
            self.expire(now, ExpireReason::Removed);
        }
    }

    /// Where a new request of `flow` is queued (heuristic 8).
    fn merge_owner(&mut self, now: Time, flow: FlowId, req: &Request) -> FlowId {
        if !self.cfg.merge.enabled {
            return flow;
        }
        let fs = &self.topo.any_flow(flow).data;
        if let Some((y, gen)) = fs.merge.into {
            let ok = self
                .topo
                .flow(FlowId(y))
                .is_ok_and(|e| e.data.merge.generation == gen);
            if ok {
                return FlowId(y);
            }
            self.flow_state_mut(flow).merge.into = None;
            return flow;
        }
        if !req.sync || (self.device.queues_internally && !self.device.rotational) {
            return flow;
        }
        let Some(turn) = self.turn else { return flow };
        let y = turn.flow;
        let late = |f: &FlowState| {
            queue_merge::too_late(&self.cfg.merge, f.service_since_busy > 0, f.first_io, now)
        };
        if y == flow || !fs.queue.is_empty() || fs.in_flight > 0 || fs.seek.is_seeky() || late(fs) {
            return flow;
        }
        let Ok(ye) = self.topo.flow(y) else {
            return flow;
        };
        let ys = &ye.data;
        if ys.merge.into.is_some()
            || ys.group != fs.group
            || ys.class != fs.class
            || !ys.sync
            || ys.seek.is_seeky()
            || late(ys)
            || !queue_merge::close(req.sector, ys.head, self.cfg.merge.distance)
        {
            return flow;
        }
        let gen = ys.merge.generation;
        self.flow_state_mut(y).merge.members += 1;
        self.flow_state_mut(flow).merge.into = Some((y.0, gen));
        self.stats.merges += 1;
        y
    }

    /// Heuristic 7: a request of another flow while the active one idles.
    /// Candidates: the idling flow's waker, the flow it woke, then up to
    /// [`INJECT_CANDIDATES`] flows B-WF2Q+ would serve next (with
    /// `inject_recent_first`, the latest activated flows first).
    fn try_inject(&mut self, now: Time) -> Option<Request> {
        if !self.cfg.inject.enabled || !self.device.queues_internally || self.cfg.guarantee.strict {
            return None;
        }
        let turn = self.turn?;
        let a = self.flow_state(turn.flow);
        // Rule switch `inject_limit_counts_all`: the kernel's limit bounds
        // every request in flight; `bfq`'s only the other flows' (a
        // depth-1 sync flow whose next request arrives at the instant the
        // previous one completes would otherwise never have one injected
        // beside it, and its limit, grown only by injected samples, would
        // stay at 1).
        let limit = self.inject_limit(&turn, now) as usize;
        let others = self.table.in_flight().saturating_sub(a.in_flight as usize);
        let counted = if self.cfg.inject.limit_counts_all {
            self.table.in_flight()
        } else {
            others
        };
        // Rule switch `inject_read_floor`: one read may always be injected
        // into a seeky flow's idle time once its baseline is known (until
        // then nothing is, so that the baseline can be measured).
        let floor =
            usize::from(self.cfg.inject.read_floor && a.seek.is_seeky() && a.inj.baseline > 0);
        // Rule switch `inject_waker_beyond_limit`: past the limit only the
        // waker and the woken flow may still be injected.
        let over = counted >= limit.max(floor);
        if over && !self.cfg.inject.waker_beyond_limit {
            return None;
        }
        let floor_only = counted >= limit;
        // Rule switch `inject_when_idling_boosts`.
        let others_too = !over && self.injects_others(&turn);
        let mut cands = [(0u32, Take::Any, false); INJECT_LIST];
        let n = self.injection_candidates(&turn, now, others_too, &mut cands);
        if self.cfg.inject.fair_candidates {
            self.fair_candidates(&turn, &mut cands[..n]);
        }
        for &(c, take, listed) in &cands[..n] {
            let cf = FlowId(c);
            if cf == turn.flow {
                continue;
            }
            let take = if floor_only && !over {
                Take::Reads
            } else {
                take
            };
            if let Some(r) = self.dispatch_injected(cf, now, take, listed) {
                self.rqs_injected |= listed;
                self.stats.injected += 1;
                self.topo.any_flow_mut(cf).data.injected += 1;
                return Some(r);
            }
        }
        None
    }

    /// The idling flow's inject limit, at most the queue depth. Kernel
    /// (`inject_kernel_sampling`): a flow whose baseline is still unknown
    /// and whose limit is 0 gets 1 once it has been idled for `slice_idle`
    /// (`bfq_choose_bfqq_for_injection`: "drive speed is being wasted").
    fn inject_limit(&self, turn: &Turn, now: Time) -> u32 {
        let inj = &self.flow_state(turn.flow).inj;
        let wasted = self.cfg.inject.kernel_sampling
            && inj.limit == 0
            && inj.baseline == 0
            && turn.idle_until.is_some()
            && now >= turn.idle_since + self.cfg.idle.slice_idle;
        inj.limit
            .max(u32::from(wasted))
            .min(self.device.queue_depth)
    }

    /// Whether flows other than the idling flow's waker and woken flow may
    /// be injected into its idle time. With `inject_when_idling_boosts`
    /// off, as the kernel's `bfq_select_queue`: not where idling boosts
    /// throughput, nor into a raised flow of short think time while it is
    /// the only raised flow.
    fn injects_others(&self, turn: &Turn) -> bool {
        if self.cfg.inject.when_idling_boosts {
            return true;
        }
        let fs = self.flow_state(turn.flow);
        let short = fs.think.short(self.cfg.idle.slice_idle);
        let view = self.idle_view(fs, turn.served);
        let boosts = idling::boosts_throughput(&self.device, &view, &self.census);
        !boosts && (!fs.raise.on() || self.census.raised_busy > 1 || !short)
    }

    /// Fills `out` with the injection candidates in the order they are
    /// tried, each with the requests it may give and whether it is one of
    /// the listed (not the waker or the woken) flows; returns how many.
    /// `others`: more than the waker and the woken flow.
    fn injection_candidates(
        &self,
        turn: &Turn,
        now: Time,
        others: bool,
        out: &mut [(u32, Take, bool); INJECT_LIST],
    ) -> usize {
        let a = self.flow_state(turn.flow);
        let mut n = 0;
        for c in a.inj.waker.into_iter().chain(a.inj.woken) {
            out[n] = (c, Take::Any, false);
            n += 1;
        }
        if !others {
            return n;
        }
        let mut next = [0u32; INJECT_CANDIDATES];
        let m = self
            .wf2q
            .peek_flows(now, &mut next[..usize::from(self.cfg.inject.candidates)]);
        if self.cfg.inject.recent_first {
            // Kernel `active_list` order: the latest (re)activated first,
            // any request; the flows activated before those remembered
            // follow in B-WF2Q+'s order. A raised flow of short think time
            // takes only raised flows' requests (kernel
            // `in_serv_always_inject`).
            let mut recent = [0u32; RECENT_ACTIVATIONS];
            let r = self.recent.newest_first(&mut recent);
            let only_raised = a.raise.on() && a.think.short(self.cfg.idle.slice_idle);
            for &c in recent[..r].iter().chain(next[..m].iter()) {
                let fits =
                    !only_raised || self.topo.flow(FlowId(c)).is_ok_and(|e| e.data.raise.on());
                if fits && !out[..n].iter().any(|o| o.0 == c && o.2) {
                    out[n] = (c, Take::Any, true);
                    n += 1;
                }
            }
            return n;
        }
        let first = next[..m].first().copied();
        self.least_injected_first(turn, &mut next[..m]);
        // B-WF2Q+'s next flow, any request; then the others, reads only.
        if let Some(c) = first {
            out[n] = (c, Take::Any, true);
            n += 1;
        }
        for &c in next[..m].iter().filter(|&&c| Some(c) != first) {
            out[n] = (c, Take::Reads, true);
            n += 1;
        }
        n
    }

    /// Orders injection candidates by the service injected into this turn
    /// per unit of weight, least first (ties: B-WF2Q+'s order), so that
    /// the injection slots go to the flows by weight.
    fn least_injected_first(&self, turn: &Turn, flows: &mut [u32]) {
        self.sort_least_injected(turn, flows, |&c| c);
    }

    /// Sorts `items` (at most [`INJECT_LIST`]) by the service their flow
    /// (`flow`) had injected into this turn per unit of weight, least
    /// first, stable; each key computed once (a division and two weight
    /// lookups), no allocation.
    fn sort_least_injected<T>(&self, turn: &Turn, items: &mut [T], flow: impl Fn(&T) -> u32) {
        let mut keys = [0u64; INJECT_LIST];
        for (k, it) in keys.iter_mut().zip(items.iter()) {
            *k = self.injected_per_weight(turn, flow(it));
        }
        for i in 1..items.len() {
            let mut j = i;
            while j > 0 && keys[j - 1] > keys[j] {
                keys.swap(j - 1, j);
                items.swap(j - 1, j);
                j -= 1;
            }
        }
    }

    /// Rule switch `inject_fair_candidates`: the candidates that may give
    /// any request — the idling flow's waker, the flow it woke and
    /// B-WF2Q+'s next flow, at most three — are tried least injected into
    /// this turn per unit of weight first (stable: ties keep the kernel's
    /// order, waker first). The kernel tries the waker, then the woken
    /// queue, before any other (`bfq_select_queue`); a waker whose next
    /// request is always queued then takes every slot the limit leaves
    /// (one, `inject_read_floor`) until its budget is spent, and the woken
    /// or next flow waits the idling flow's whole turn. Ordering them by
    /// injected service per weight shares those slots as B-WF2Q+ shares
    /// the device (2010 paper Sec. II-D; 2018 article, injection).
    fn fair_candidates(&self, turn: &Turn, cands: &mut [(u32, Take, bool)]) {
        let linked = cands.iter().take_while(|c| !c.2).count();
        let k = (linked + 1).min(cands.len());
        self.sort_least_injected(turn, &mut cands[..k], |c| c.0);
    }

    /// Sectors of flow `c` injected into this turn per unit of its weight
    /// (as [`Self::inject_weights`] compares it with the active flow),
    /// scaled by 2^16; 0 for a flow removed since it was recorded.
    fn injected_per_weight(&self, turn: &Turn, c: u32) -> u64 {
        let Ok(e) = self.topo.flow(FlowId(c)) else {
            return 0;
        };
        let mine = e.data.inj.injected_in(turn.serial);
        let (_, wc) = self.inject_weights(turn.flow, FlowId(c));
        (mine << 16) / wc.max(1)
    }

    /// Weights that compare the active flow `a` with flow `c` for
    /// injection: their own within one group, else their groups' (the
    /// weights preemption compares across groups).
    fn inject_weights(&self, a: FlowId, c: FlowId) -> (u64, u64) {
        let (ra, rc) = (self.preempt_rank(a), self.preempt_rank(c));
        let (wa, wc) = if ra.entity.parent == rc.entity.parent {
            (ra.entity.weight, rc.entity.weight)
        } else {
            (ra.cross_group_weight(), rc.cross_group_weight())
        };
        (u64::from(wa), u64::from(wc))
    }

    /// Injects the head request of flow `f` into the active flow's turn
    /// (heuristic 7), if `f`'s share of the turn, the rules that protect a
    /// seeky active flow, `take`, its budget and the device's slots allow.
    /// `listed`: `f` is one of the listed candidates, not the active flow's
    /// waker or woken flow.
    fn dispatch_injected(
        &mut self,
        f: FlowId,
        now: Time,
        take: Take,
        listed: bool,
    ) -> Option<Request> {
        let turn = self.turn?;
        // The candidate (the idling flow's waker or woken flow) may have
        // been removed and freed since it was recorded.
        self.topo.existing_flow_mut(f)?;
        let share = self.injectable_share(f, &turn)?;
        let riding = self.rides_raised_turn(f, &turn);
        let qcfg = self.cfg.queue;
        let asym = self.census.asymmetric();
        let fs = &mut self.topo.any_flow_mut(f).data;
        let slot = fs.queue.peek(&self.table, fs.head, now, &qcfg)?;
        let r = self.table.slot(slot).req;
        let allowed = match take {
            Take::Any => true,
            Take::Reads => r.op == Op::Read,
        };
        if !allowed {
            return None;
        }
        // Rule switch `inject_large_once`.
        let large = r.sectors >= idling::NONROT_SEQ_SECTORS && !self.device.rotational;
        if listed && large && self.cfg.inject.large_once && self.table.in_flight() > 0 {
            return None;
        }
        let charge = charging::request_charge(
            &self.cfg.charge,
            u64::from(r.sectors),
            r.op,
            r.sync,
            fs.raise.on(),
            asym,
        );
        let raised_busy = self.census.raised_busy > 0;
        // Rule switch `inject_into_raised_b_max`: into a raised flow's
        // turn, B_max per turn (and of debt) instead of the lead on V.
        let b_max = self.cfg.budget.max_budget;
        let cap = fs.budget.max(if riding { b_max } else { 0 });
        let over = fs.inj.debt + charge > cap || (riding && share.0 + u64::from(r.sectors) > b_max);
        // Where the flow's next turn would start with this request
        // charged: S + (debt + charge) / w (2010 paper, Sec. II-D).
        let ahead = || {
            let budget = injection::AHEAD_BUDGETS * fs.budget;
            self.cfg.inject.ahead_bound
                && !riding
                && !(self.wf2q).within(
                    fs.entity,
                    fs.inj.debt + charge,
                    budget,
                    !self.cfg.inject.ahead_waiting_anchor,
                )
        };
        if over
            || ahead()
            || !self
                .slots
                .allows(&self.cfg.charge, self.device.queue_depth, &r, raised_busy)
        {
            return None;
        }
        let req = fs.take(&mut self.table, slot, now);
        self.book_injected(now, f, &req, charge, share);
        Some(req)
    }

    /// Whether flow `f`, not weight-raised, is injected into the turn of a
    /// raised seeky flow under `inject_into_raised_b_max`: held to B_max sectors
    /// injected into the turn (and a debt of at most B_max or its budget)
    /// instead of `inject_share_cap` and `inject_ahead_bound`. A raised
    /// flow's turn is charged its service (heuristic 3), which barely moves
    /// V while the flow thinks through T_max turns; the kernel injects
    /// others into it without a cap (2018 article, injection). A
    /// sequential raised flow's turns are its bursts, which requests
    /// injected up to B_max would delay (a 1 MiB player's worst batch
    /// 9.5 -> 50.2 ms beside a sequential reader).
    fn rides_raised_turn(&self, f: FlowId, turn: &Turn) -> bool {
        self.cfg.inject.into_raised_b_max
            && self.flow_state(turn.flow).raise.on()
            && self.flow_state(turn.flow).seek.is_seeky()
            && !self.flow_state(f).raise.on()
    }

    /// Whether flow `f`, injected into the turn of flow `active`, shares
    /// the device's time with it as another group: `active` is seeky and
    /// alone (busy) in its group, `f` of another group (each flow's own
    /// group; flows without one are of the root group), the device not
    /// rotational. `f` is then not share-capped in the turn
    /// ([`Bfq::injectable_share`]) and the turn, if it reaches T_max, is
    /// charged its time ([`Bfq::held_time`]): random groups share time by
    /// weight (2010 paper Sec. III-D, 2014 report Sec. 3.5). Once `active`
    /// has had two or more requests in flight in its turn, such flows of
    /// lighter groups are not injected at all (`inject_protect_deep_seeky`).
    fn shares_time_with(&self, f: FlowId, active: FlowId) -> bool {
        let a = self.flow_state(active);
        !self.device.rotational
            && a.seek.is_seeky()
            && self.flow_state(f).group != a.group
            && self.census.group_busy(a.group.index()) <= 1
    }

    /// What flow `f` was injected in this turn so far, if it may be
    /// injected more: it has a request queued and is in B-WF2Q+, stays
    /// within its share of what the active flow got in this turn (weights
    /// decide, not timing; `inject_share_cap`), and is not a lighter
    /// sequential flow kept out of a seeky flow's turn
    /// (`inject_protect_seeky`), nor a lighter group's flow kept out of the
    /// turn of a seeky flow that keeps several requests in flight
    /// (`inject_protect_deep_seeky`). No cap for a sequential flow injected into
    /// a seeky flow's turn, nor for a flow of another group injected into
    /// the turn of a seeky flow alone in its group: the turn is then
    /// charged its time ([`Bfq::held_time`]; for another group's flows,
    /// once it reaches T_max), and the groups share the device's time by
    /// weight. Beside busy flows of the active flow's own group, which stay
    /// capped, the other groups keep the cap too: uncapped, two random
    /// readers in a group of 100 were injected into the turns of two in a
    /// group of 1000 ahead of their capped siblings and got 1/3.6 of the
    /// heavy group's service instead of 1/9.8 (the 2018 article's SSD,
    /// 20 s; the heavy group held to one reader's rate, the total 0.68x).
    /// On a rotational device the cap stays: a seeky flow's turn there is
    /// charged its time anyway, and another group's reads injected into it
    /// take the head from its next read (a random reader in a group of
    /// 1000 beside one in a group of 100 on a disk queueing 4 requests:
    /// 0.870 of the sectors uncapped, 0.933 capped, for a weight's 0.909).
    /// No cap either for a flow that is not raised injected into a raised
    /// flow's turn under `inject_into_raised_b_max`
    /// ([`Bfq::rides_raised_turn`]: held to B_max per turn instead).
    /// With it, whether `f` shares the device's time with the active flow
    /// ([`Bfq::shares_time_with`]).
    fn injectable_share(&self, f: FlowId, turn: &Turn) -> Option<(u64, bool)> {
        let active_seeky = self.flow_state(turn.flow).seek.is_seeky();
        let (wa, wc) = self.inject_weights(turn.flow, f);
        let fs = self.flow_state(f);
        if fs.queue.is_empty() || self.wf2q.entity(fs.entity).state != EState::Queued {
            return None;
        }
        let seq_into_seeky = active_seeky && !fs.seek.is_seeky();
        let time_shared = self.shares_time_with(f, turn.flow);
        if self.cfg.inject.protect_deep_seeky && time_shared && turn.deep && wc < wa {
            return None;
        }
        let capped = self.cfg.inject.share_cap
            && !seq_into_seeky
            && !time_shared
            && !self.rides_raised_turn(f, turn);
        let mine = fs.inj.injected_in(turn.serial);
        if capped && mine * wa >= turn.real * wc {
            return None;
        }
        if self.cfg.inject.protect_seeky && seq_into_seeky && wc < wa {
            return None;
        }
        Some((mine, time_shared))
    }

    /// Books request `req` of flow `f` injected into the active flow's
    /// turn: `f`'s debt, the turn's injected service; a flow left empty
    /// leaves B-WF2Q+ unless it stays backlogged. `share`: what
    /// [`Bfq::injectable_share`] found.
    fn book_injected(
        &mut self,
        now: Time,
        f: FlowId,
        req: &Request,
        charge: u64,
        share: (u64, bool),
    ) {
        let (mine, time_shared) = share;
        let fs = &mut self.topo.any_flow_mut(f).data;
        fs.inj.debt += charge;
        fs.inj.turn_injected = mine + u64::from(req.sectors);
        let turn = self.turn.as_mut().expect("turn");
        fs.inj.turn_serial = turn.serial;
        turn.injected += u64::from(req.sectors);
        if !fs.seek.is_seeky() {
            turn.injected_seq += u64::from(req.sectors);
        }
        turn.time_shared |= time_shared;
        if fs.queue.is_empty() {
            fs.budget_left = 0;
            // A sync flow whose next request is expected stays backlogged
            // with its debt (charged when its turn starts); otherwise it
            // leaves B-WF2Q+ charged for the service it was injected
            // (F = S + debt / w, as Fig. 4 `update_vfintime` does for a
            // turn): dropping the debt would make injected service free.
            if !self.stays_backlogged(self.flow_state(f)) {
                self.leave_tree(f);
            }
        }
        self.note_dispatch(now, req, f);
    }

    /// Whether the medium probe runs: on, and the device says rotational.
    fn probes_medium(&self) -> bool {
        self.cfg.rotational_probe > 0 && self.reported_rotational
    }

    /// Sets the rotational flag the rules use: the device's claim, unless
    /// the medium probe found a claimed disk serving reads like flash.
    /// The peak-rate estimate restarts from the medium's reference rate
    /// while it has accepted no sample.
    fn apply_medium(&mut self) {
        let rotational =
            self.reported_rotational && !(self.probes_medium() && self.medium.flash_like());
        if rotational != self.device.rotational && self.peak.accepted == 0 {
            self.peak = PeakRate::new(rotational, self.cfg.peak_rate.learned);
        }
        self.device.rotational = rotational;
    }

    /// Book-keeping common to every dispatch; `owner` is the flow whose
    /// queue held the request (not `req.flow` once merged).
    fn note_dispatch(&mut self, now: Time, req: &Request, owner: FlowId) {
        self.slots.take(req);
        self.max_in_flight = self.max_in_flight.max(self.table.in_flight() as u32);
        if self.probes_medium() {
            let seeky = self.flow_state(owner).seek.is_seeky();
            self.medium
                .on_dispatch(now, req, seeky, self.table.in_flight());
        }
        if self.cfg.peak_rate.auto
            && self.cfg.peak_rate.estimator == Estimator::Kernel
            && self.peak.on_dispatch(
                &self.cfg.peak_rate,
                now,
                req,
                !self.device.rotational,
                self.table.in_flight() <= 1,
            )
        {
            self.retune_max_budget();
        }
    }
}

impl Scheduler for Bfq {
    fn name(&self) -> &str {
        self.name
    }

    fn set_device(&mut self, device: DeviceInfo) {
        self.medium.forget();
        self.reported_rotational = device.rotational;
        self.device.queue_depth = device.depth();
        self.device.queues_internally = device.queues_internally;
        self.apply_medium();
    }

    fn add_group(&mut self, parent: GroupId, weight: u32) -> Result<GroupId, SchedError> {
        let g = self.topo.add_group(parent, weight, GroupState::default())?;
        let e = self.wf2q.new_entity(
            Kind::Group(g),
            parent,
            IoClass::Be,
            weight,
            self.cfg.budget.initial_budget,
        );
        self.topo.group_mut(g)?.data.entity = Some(e);
        self.wf2q.add_group(g, e, 0);
        self.census.reserve_group(g.index());
        Ok(g)
    }

    fn remove_group(&mut self, group: GroupId) -> Result<(), SchedError> {
        let entry = self.topo.remove_group(group)?;
        self.wf2q.remove_group(group);
        if let Some(e) = entry.data.entity {
            self.wf2q.free_entity(e);
        }
        Ok(())
    }

    fn add_flow(&mut self, now: Time, spec: FlowSpec) -> Result<FlowId, SchedError> {
        check_time(now)?;
        let weight = self.topo.check_spec(&spec)?;
        let budget = self.cfg.budget.initial_budget;
        let next = self.topo.next_flow_id();
        let entity = self.wf2q.new_entity(
            Kind::Flow(next.0),
            spec.group,
            spec.prio.class,
            weight,
            budget,
        );
        let state = FlowState {
            entity,
            queue: FlowQueue::default(),
            budget,
            in_flight: 0,
            head: 0,
            seek: SeekHistory::new(if self.cfg.idle.seeky_report {
                self.cfg.idle.seeky_mean_threshold
            } else {
                0
            }),
            sync: true,
            last_sync_at: None,
            served_total: 0,
            served_at_start: 0,
            turns: 0,
            budget_sum: 0,
            charged: 0,
            forfeited: 0,
            injected: 0,
            weight,
            class: spec.prio.class,
            group: spec.group,
            default_weight: weight == spec.prio.default_weight(),
            busy: false,
            seq_counted: false,
            started: false,
            in_large_burst: false,
            raise: Raise::default(),
            last_completion: 0,
            idle_since: 0,
            think: ThinkTime::default(),
            io_bound: true,
            soft_rt_next_start: 0,
            busy_since: 0,
            service_since_busy: 0,
            first_io: 0,
            budget_left: 0,
            inj: InjectState::default(),
            merge: MergeState::default(),
        };
        let id = self.topo.add_flow(spec, state)?;
        debug_assert_eq!(id, next);
        self.lingering.reserve(id.index());
        Ok(id)
    }

    fn remove_flow(&mut self, now: Time, flow: FlowId) -> Result<(), SchedError> {
        check_time(now)?;
        let f = self.topo.flow(flow)?;
        let entity = f.data.entity;
        if f.held == 0 {
            self.retire(now, flow);
            // Queues merged into it go back to their own.
            let m = &mut self.flow_state_mut(flow).merge;
            m.generation = m.generation.wrapping_add(1);
        }
        if self.topo.retire_flow(flow)? {
            self.wf2q.free_entity(entity);
        }
        Ok(())
    }

    fn add_request(&mut self, now: Time, req: Request) -> Result<(), SchedError> {
        check_time(now)?;
        self.topo.check_flow(req.flow)?;
        // Validates (zero length, duplicate id) before anything changes.
        let slot = self.table.insert(now, req, req.flow.0)?;
        self.end_lingering(now);
        let owner = self.queue_owner(now, &req, slot);
        self.topo.hold(req.flow)?;
        let arrival = self.enqueue(now, owner, &req, slot);
        if arrival.first && self.cfg.wr.enabled {
            self.note_burst(now, owner);
        }
        let in_time = arrival.woke && self.wake_up(now, owner, &req, arrival);
        let fs = &mut self.topo.any_flow_mut(owner).data;
        fs.budget = fs.budget.max(u64::from(req.sectors));
        if arrival.was_empty {
            self.refill(now, owner, req.sectors, in_time);
        }
        Ok(())
    }

    fn dispatch(&mut self, now: Time) -> Dispatch {
        if let Some(d) = dispatch_past_end(now, self.queued()) {
            return d;
        }
        self.end_lingering(now);
        loop {
            let Some(turn) = self.turn else {
                if !self.start_turn(now) {
                    return if self.table.queued() == 0 {
                        Dispatch::Empty
                    } else {
                        Dispatch::Wait
                    };
                }
                continue;
            };
            // Each step either decides or ends the turn (then the next
            // flow's turn starts).
            let decided = if self.expires_for_timeout(now, &turn) {
                self.expire(now, ExpireReason::Timeout);
                None
            } else if self.flow_state(turn.flow).queue.is_empty() {
                self.dispatch_while_empty(now, &turn)
            } else {
                self.dispatch_head(now, &turn)
            };
            if let Some(d) = decided {
                return d;
            }
        }
    }

    fn complete(&mut self, now: Time, id: ReqId) -> Result<(), SchedError> {
        check_time(now)?;
        let slot = self.table.complete(id)?;
        let flow = slot.req.flow;
        let owner = FlowId(slot.extra);
        self.slots.give(&slot.req);
        if self.cfg.peak_rate.auto {
            self.peak.on_complete(now, u64::from(slot.req.sectors));
        }
        if self.probes_medium() && self.medium.on_complete(now, id, self.cfg.rotational_probe) {
            self.apply_medium();
        }
        let depth = self.device.queue_depth;
        let slice_idle = self.cfg.idle.slice_idle;
        let fs = &mut self.topo.any_flow_mut(owner).data;
        fs.in_flight -= 1;
        fs.last_completion = now;
        if fs.inj.sample.is_some_and(|s| s.0 == id) {
            let short = fs.think.short(slice_idle);
            if self.cfg.inject.kernel_sampling {
                let others = self.table.in_flight();
                let max = self.max_in_flight;
                fs.inj
                    .kernel_sample_done(now, others, &mut self.rqs_injected, max);
            } else {
                fs.inj.sample_done(&self.cfg.inject, now, depth, short);
            }
        }
        let idle_now = fs.in_flight == 0 && fs.queue.is_empty();
        self.last_completion = Some((owner.0, now));
        // The active flow stays busy until its turn ends (as the kernel's
        // in-service queue): the idling decision must see it.
        if idle_now && self.turn.is_none_or(|t| t.flow != owner) && !self.linger(owner, now) {
            self.set_busy(owner, false, now);
            self.leave_tree(owner);
        }
        if let Some(turn) = self.turn {
            if turn.flow == owner && idle_now {
                // The last request completed with nothing queued: start
                // waiting T_wait for the next one (kernel arms the idle
                // timer on completion, as think time runs from there).
                let wait = self.wait_time(self.flow_state(owner), turn.served);
                let t = self.turn.as_mut().expect("turn");
                (t.idle_until, t.idle_since) = (wait.map(|w| now + w), now);
            }
        }
        self.release(now, owner);
        if owner != flow {
            self.release(now, flow);
        }
        Ok(())
    }

    fn queued(&self) -> usize {
        self.table.queued()
    }

    fn in_flight(&self) -> usize {
        self.table.in_flight()
    }

    fn internals(&self, _now: Time) -> Internals {
        Internals {
            max_budget: Some(self.cfg.budget.max_budget),
            peak_rate: Some(self.peak.rate),
            turns: Some(self.stats.turns),
            injected: Some(self.stats.injected),
            rotational: Some(self.device.rotational),
            ..Internals::default()
        }
    }

    fn flow_internals(&self, flow: FlowId) -> FlowInternals {
        match self.topo.flow(flow) {
            Ok(f) => FlowInternals {
                turns: Some(f.data.turns),
                budget_sum: Some(f.data.budget_sum),
                charged: Some(f.data.charged),
                injected: Some(f.data.injected),
                forfeited: Some(f.data.forfeited),
            },
            Err(_) => FlowInternals::default(),
        }
    }
}

impl Bfq {
    /// Budget timeout: T_max elapsed in this turn. (Kernel: not while
    /// idling with under 1/3 of the budget left.)
    fn timed_out(&self, now: Time, turn: &Turn) -> bool {
        now.saturating_sub(turn.started) >= turn.timeout
            && turn.served > 0
            && !(self.cfg.timeout_grace
                && self.flow_state(turn.flow).queue.is_empty()
                && 3 * turn.budget.saturating_sub(turn.served) < turn.budget)
    }

    /// Whether the active flow's turn ends here for its budget timeout.
    /// Kernel (`timeout_defers_to_idling`, `bfq_select_queue`'s
    /// `!bfq_bfqq_must_idle`): not while its queue is empty and it is
    /// idled for; its next request ends the turn with that request queued,
    /// so it stays in B-WF2Q+ with S = its new F, and an idling that runs
    /// out ends it for the timeout. Expired in the gap between a
    /// completion and the next request, a greedy reader left B-WF2Q+ and
    /// came back microseconds later at S = max(V, F), forfeiting up to a
    /// budget of service (1:2:3:4:5 readers on a loop device: about once
    /// a minute, 0.8-1.9 B_max each).
    fn expires_for_timeout(&self, now: Time, turn: &Turn) -> bool {
        if !self.timed_out(now, turn) {
            return false;
        }
        !(self.cfg.timeout_defers_to_idling && self.idled_for_while_empty(turn))
    }

    /// Whether the active flow's queue is empty and it is idled for (the
    /// kernel's `bfq_bfqq_must_idle`): the two rules for a turn past T_max
    /// in that state (`timeout_defers_to_idling`, `timeout_keeps_place`).
    fn idled_for_while_empty(&self, turn: &Turn) -> bool {
        let fs = self.flow_state(turn.flow);
        fs.queue.is_empty() && self.wait_time(fs, turn.served).is_some()
    }

    /// The active flow's queue is empty (Fig. 3 lines 50-51 and 59-66):
    /// wait T_wait for the next request of a synchronous flow once its last
    /// request completed, injecting other flows' requests meanwhile;
    /// otherwise the turn ends (`None`: the caller goes on).
    fn dispatch_while_empty(&mut self, now: Time, turn: &Turn) -> Option<Dispatch> {
        let fs = self.flow_state(turn.flow);
        let Some(wait) = self.wait_time(fs, turn.served) else {
            self.expire(now, ExpireReason::NoMoreRequests);
            return None;
        };
        let in_flight = fs.in_flight;
        if in_flight == 0 && turn.idle_until.is_some_and(|u| now >= u) {
            self.expire(now, self.idle_end_reason(now, turn));
            return None;
        }
        if let Some(r) = self.try_inject(now) {
            return Some(Dispatch::Request(r));
        }
        if in_flight > 0 {
            return Some(Dispatch::Wait);
        }
        match turn.idle_until {
            Some(until) if now < until => Some(Dispatch::Idle { until }),
            Some(_) => {
                self.expire(now, self.idle_end_reason(now, turn));
                None
            }
            None => {
                // Idling not armed (e.g. the request completed before this
                // turn began): arm it now.
                let until = now + wait;
                let t = self.turn.as_mut().expect("turn");
                (t.idle_until, t.idle_since) = (Some(until), now);
                Some(Dispatch::Idle { until })
            }
        }
    }

    /// Why a turn whose idling ran out ends: its budget timeout if T_max
    /// has passed (kernel `bfq_idle_slice_timer_body`, which asks
    /// `bfq_bfqq_budget_timeout` alone), else too idle.
    fn idle_end_reason(&self, now: Time, turn: &Turn) -> ExpireReason {
        if self.cfg.timeout_defers_to_idling && now.saturating_sub(turn.started) >= turn.timeout {
            ExpireReason::Timeout
        } else {
            ExpireReason::TooIdle
        }
    }

    /// Dispatches the head of the active flow's queue if its budget, its
    /// class and the device's slots allow (Fig. 3 lines 17-38); `None`
    /// once the turn ended.
    fn dispatch_head(&mut self, now: Time, turn: &Turn) -> Option<Dispatch> {
        if self.cfg.guarantee.strict && self.table.in_flight() > 0 {
            return Some(Dispatch::Wait);
        }
        let fs = self.flow_state(turn.flow);
        let (head, raised) = (fs.head, fs.raise.on());
        let qcfg = self.cfg.queue;
        let asym = self.census.asymmetric();
        let fs = &mut self.topo.any_flow_mut(turn.flow).data;
        let slot = fs
            .queue
            .peek(&self.table, head, now, &qcfg)
            .expect("non-empty queue");
        let r = self.table.slot(slot).req;
        let sectors = u64::from(r.sectors);
        let charge =
            charging::request_charge(&self.cfg.charge, sectors, r.op, r.sync, raised, asym);
        if turn.served + charge > turn.budget.max(charge) && turn.served > 0 {
            // Fig. 3 lines 24-38: not enough budget left.
            self.expire(now, ExpireReason::BudgetExhausted);
            return None;
        }
        // Kernel: an idle-class flow gets one request per turn while other
        // flows have requests queued, so it only takes what no one else
        // wants.
        if turn.served > 0
            && self.wf2q.entity(turn.entity).class == IoClass::Idle
            && self.table.queued() > fs.queue.len()
        {
            self.expire(now, ExpireReason::BudgetExhausted);
            return None;
        }
        let raised_busy = self.census.raised_busy > 0;
        if !self
            .slots
            .allows(&self.cfg.charge, self.device.queue_depth, &r, raised_busy)
        {
            return Some(Dispatch::Wait);
        }
        let in_flight_before = self.table.in_flight() as u32;
        let req = fs.take(&mut self.table, slot, now);
        if std::mem::take(&mut fs.inj.refilled)
            && self.cfg.inject.enabled
            && !self.cfg.inject.kernel_sampling
            && self.device.queues_internally
        {
            let others = in_flight_before - (fs.in_flight - 1);
            fs.inj.sample = Some((req.id, now, others));
        }
        self.account_dispatch(now, &req, turn, charge);
        Some(Dispatch::Request(req))
    }

    /// Books a request dispatched in the active flow's turn: the turn's
    /// service and charge, B-WF2Q+'s service, the dispatch notes.
    fn account_dispatch(&mut self, now: Time, req: &Request, turn: &Turn, charge: u64) {
        let sectors = u64::from(req.sectors);
        let t = self.turn.as_mut().expect("turn");
        t.served += charge;
        t.real += sectors;
        if req.op == Op::Write {
            t.written += sectors;
        }
        t.idle_until = None;
        t.deep |= self.topo.any_flow(turn.flow).data.in_flight >= 2;
        self.wf2q.served(turn.entity, charge);
        self.note_dispatch(now, req, turn.flow);
        #[cfg(debug_assertions)]
        if self.table.queued().is_multiple_of(64) {
            self.wf2q.check_invariants();
        }
    }
}

/// What a request's arrival found in its queue (`Bfq::enqueue`).
#[derive(Clone, Copy)]
struct Arrival {
    /// The queue had no request.
    was_empty: bool,
    /// It woke up: it was not busy, or it lingered since its last
    /// completion.
    woke: bool,
    /// It lingered since its last completion (never idle for raising).
    lingered: bool,
    /// The flow's first request.
    first: bool,
}

impl Bfq {
    /// The queue a request joins: its flow's, or the queue its flow was
    /// merged into (heuristic 8) while that one can still be held.
    fn queue_owner(&mut self, now: Time, req: &Request, slot: SlotIdx) -> FlowId {
        let owner = self.merge_owner(now, req.flow, req);
        if owner == req.flow {
            return owner;
        }
        if self.topo.hold(owner).is_ok() {
            self.table.slot_mut(slot).extra = owner.0;
            // Its requests now queue in the owner's queue: it is not
            // waited for as a flow of its own.
            self.leave_tree(req.flow);
            owner
        } else {
            self.flow_state_mut(req.flow).merge.into = None;
            req.flow
        }
    }

    /// Queues the request in `owner`'s queue and updates what the queue
    /// learns from an arrival: seek history (and the census's count of
    /// non-seeky busy flows), sync state, think time, the
    /// start of its service count, the kernel's inject-limit sampling.
    fn enqueue(&mut self, now: Time, owner: FlowId, req: &Request, slot: SlotIdx) -> Arrival {
        let slice_idle = self.cfg.idle.slice_idle;
        let seek_threshold = self.cfg.idle.seek_threshold;
        let min_idle_time = self.cfg.wr.min_idle_time;
        let large_nonrot = !self.device.rotational && req.sectors >= idling::NONROT_SEQ_SECTORS;
        let inj = &self.cfg.inject;
        let kernel_sampling = inj.enabled && inj.kernel_sampling && self.device.queues_internally;
        let fs = &mut self.topo.any_flow_mut(owner).data;
        let was_empty = fs.queue.is_empty();
        let was_idle = was_empty && fs.in_flight == 0;
        // Idle-to-busy switch: not for the active flow idled for (it stays
        // busy until its turn ends).
        // A flow lingering in the census since its last completion wakes
        // up too (waker detection, in-time wake-ups, preemption), but was
        // never idle for weight raising.
        let lingered = self.lingering.remove(owner).is_some();
        let woke = !fs.busy || lingered;
        let first = !fs.started;
        fs.started = true;
        fs.queue.push(&self.table, slot);
        fs.seek
            .record(req.sector, req.end(), seek_threshold, large_nonrot);
        fs.recount_seq(&mut self.census);
        if req.sync {
            fs.last_sync_at = Some(now);
        }
        fs.sync = req.sync
            || fs
                .last_sync_at
                .is_some_and(|t| now.saturating_sub(t) <= 2 * slice_idle);
        if was_idle && !first {
            let was_short = fs.think.short(slice_idle);
            fs.think
                .record(now.saturating_sub(fs.last_completion), slice_idle);
            let short = fs.think.short(slice_idle);
            // Rule switch `inject_kernel_sampling`: the kernel resets an
            // unlearned limit when the think-time state changes.
            if kernel_sampling && req.sync && slice_idle > 0 && short != was_short {
                fs.inj.kernel_think_changed(now, short);
            }
        }
        if woke && !lingered && (first || now.saturating_sub(fs.idle_since) > min_idle_time) {
            fs.served_at_start = fs.served_total;
        }
        if was_idle && req.sync && kernel_sampling {
            self.sample_on_arrival(now, owner, req.id);
        }
        Arrival {
            was_empty,
            woke,
            lingered,
            first,
        }
    }

    /// Rule switch `inject_kernel_sampling` (the caller checks it is on):
    /// the kernel samples the inject limit on a sync request's arrival into
    /// an idle queue.
    fn sample_on_arrival(&mut self, now: Time, owner: FlowId, id: u64) {
        let inj = &self.cfg.inject;
        let slice_idle = self.cfg.idle.slice_idle;
        let fs = &mut self.topo.any_flow_mut(owner).data;
        let a = KernelArrival {
            id,
            now,
            in_service: self.turn.is_some_and(|t| t.flow == owner),
            in_flight: self.table.in_flight(),
            short_think: fs.think.short(slice_idle),
            relearn: inj.relearn,
        };
        fs.inj.kernel_arrival(a, &mut self.rqs_injected);
    }

    /// Heuristic 5: burst detection on a flow's first request; a burst that
    /// becomes large ends its members' raising.
    fn note_burst(&mut self, now: Time, owner: FlowId) {
        let group = self.flow_state(owner).group;
        match self.burst.flow_started(&self.cfg.wr, owner.0, group, now) {
            BurstVerdict::Normal => {}
            BurstVerdict::Large => self.flow_state_mut(owner).in_large_burst = true,
            BurstVerdict::BecameLarge => {
                self.flow_state_mut(owner).in_large_burst = true;
                let members = std::mem::take(&mut self.burst.members);
                for &m in &members {
                    let mf = FlowId(m);
                    if self.topo.flow(mf).is_ok() {
                        self.flow_state_mut(mf).in_large_burst = true;
                        self.end_raise(mf);
                    }
                }
                self.burst.members = members;
                self.burst.members.clear();
            }
        }
    }

    /// A flow wakes up: waker detection (heuristic 7), interactive or soft
    /// real-time raising (heuristic 5), busy again. Returns whether it woke
    /// in time to keep its leftover budget (heuristic 9).
    fn wake_up(&mut self, now: Time, owner: FlowId, req: &Request, a: Arrival) -> bool {
        if self.cfg.inject.enabled {
            self.detect_waker(now, owner);
        }
        let fs = self.flow_state(owner);
        let wr = &self.cfg.wr;
        if wr.enabled
            && !a.lingered
            && req.sync
            && !fs.in_large_burst
            && (!wr.default_weight_only || fs.default_weight)
        {
            let idle_long = a.first || now.saturating_sub(fs.idle_since) > wr.min_idle_time;
            let soft_rt = wr.max_softrt_rate > 0
                && !a.first
                && now >= fs.soft_rt_next_start
                && !fs.seek.is_totally_seeky();
            if idle_long {
                self.start_raise(owner, RaiseKind::Interactive, now);
            } else if soft_rt {
                self.start_raise(owner, RaiseKind::SoftRt, now);
            }
        }
        self.set_busy(owner, true, now);
        let preempt = &self.cfg.preempt;
        let fs = self.flow_state(owner);
        preempt.enabled
            && fs.budget_left > 0
            && now.saturating_sub(fs.last_completion) <= preempt.in_time
    }

    /// Heuristic 7: the flow that completed last is `owner`'s waker once
    /// `owner` keeps waking right after its completions.
    fn detect_waker(&mut self, now: Time, owner: FlowId) {
        let last = self.last_completion;
        let slice_idle = self.cfg.idle.slice_idle;
        let fs = &mut self.topo.any_flow_mut(owner).data;
        let short_think = fs.think.short(slice_idle);
        if let Some(w) = fs.inj.on_wake(
            &self.cfg.inject,
            owner.0,
            last,
            now,
            short_think,
            128 * slice_idle,
        ) {
            if self.topo.flow(FlowId(w)).is_ok() {
                self.flow_state_mut(FlowId(w)).inj.woken = Some(owner.0);
            }
        }
    }

    /// The budget flow `f` is timestamped with in B-WF2Q+: `budget`, or at
    /// most 2 x B_min for a raised flow below a group (`raised_group_order`).
    fn order_budget(&self, f: FlowId, budget: u64) -> u64 {
        let fs = self.flow_state(f);
        if self.cfg.budget.raised_group_order && fs.raise.on() && self.wf2q.in_group(fs.entity) {
            budget.min(2 * self.cfg.budget.min_budget)
        } else {
            budget
        }
    }

    /// `owner`'s queue got a request while empty: the active flow stops
    /// waiting (Fig. 3 lines 14-16); any other flow joins B-WF2Q+ (line
    /// 13), back in time if it woke in time (heuristic 9) or returns after
    /// leaving with requests in flight (heuristic 7), and may preempt.
    fn refill(&mut self, now: Time, owner: FlowId, sectors: u32, in_time: bool) {
        let preempt = self.cfg.preempt;
        let fs = &mut self.topo.any_flow_mut(owner).data;
        if let Some(ref mut t) = self.turn {
            if t.flow == owner {
                t.idle_until = None;
                fs.inj.refilled = true;
                return;
            }
        }
        // Kernel: a queue that gets a request while empty is (re)activated,
        // at the head of `active_list`.
        self.recent.push(owner.0);
        let entity = fs.entity;
        if self.wf2q.entity(entity).state != EState::Idle {
            return;
        }
        let returning = std::mem::take(&mut fs.inj.returning)
            && now.saturating_sub(fs.last_completion) <= preempt.in_time;
        let between = std::mem::take(&mut fs.inj.left_between_turns) && returning && !in_time;
        let (coeff, raised) = (fs.raise.coeff, fs.raise.on());
        let push_up = self.back_shift_push_up(coeff, between, raised);
        let cap = self.order_budget(owner, u64::MAX);
        let fs = &mut self.topo.any_flow_mut(owner).data;
        let forfeited = if in_time {
            // Keep the leftover budget and the old timestamps.
            let b = fs.budget_left.max(u64::from(sectors));
            fs.budget = b;
            fs.budget_left = 0;
            let start = self.wf2q.entity(entity).finish;
            let b = b.min(cap);
            self.wf2q.activate_back_shifted(entity, b, start, push_up)
        } else if returning {
            // S = its F, not max(V, F).
            let start = self.wf2q.entity(entity).finish;
            let b = fs.budget.min(cap);
            self.wf2q.activate_back_shifted(entity, b, start, push_up)
        } else {
            let b = fs.budget.min(cap);
            self.wf2q.activate(entity, b)
        };
        // A flow never served has no F to measure from.
        if fs.served_total > 0 {
            fs.forfeited += forfeited;
        }
        if preempt.enabled {
            self.maybe_preempt(now, owner, in_time);
        }
    }
}

impl Bfq {
    /// How a flow's back-shifted activation is pushed up
    /// ([`wf2q::PushUp`]): to F = V (`backshift_push_up`), else to within
    /// B_max / w of the backlogged flows' least F (`backshift_lag_bound`;
    /// for a return in time after leaving B-WF2Q+ between turns of its
    /// own, `between`, `inject_return_lag_bound`; for a weight-raised
    /// flow, `raised`, `raised_backshift_lag_bound`). `coeff`: its raising
    /// coefficient.
    fn back_shift_push_up(&self, coeff: u32, between: bool, raised: bool) -> Option<PushUp> {
        let preempt = &self.cfg.preempt;
        if preempt.push_up {
            return Some(PushUp {
                slack: 0,
                div: u64::from(coeff.max(1)),
                anchored: false,
            });
        }
        let inject = &self.cfg.inject;
        let bounded = preempt.lag_bound
            || (between && inject.return_lag_bound)
            || (raised && preempt.raised_lag_bound);
        bounded.then_some(PushUp {
            slack: self.cfg.budget.max_budget,
            div: 1,
            anchored: true,
        })
    }

    /// Heuristic 9: a waking flow preempts the in-service one.
    fn maybe_preempt(&mut self, now: Time, x: FlowId, in_time: bool) {
        let Some(turn) = self.turn else { return };
        if turn.flow == x {
            return;
        }
        let new = self.preempt_rank(x);
        let cur = self.preempt_rank(turn.flow);
        let go = match preemption::wants_to_preempt(
            &new,
            in_time,
            &cur,
            self.cfg.preempt.group_weight,
        ) {
            Preempt::No => false,
            Preempt::IfNext => self.wf2q.peek_next_flow(now) == Some(x.0),
            Preempt::Now => true,
        };
        if go {
            self.stats.preemptions += 1;
            self.expire(now, ExpireReason::Preempted);
        }
    }

    /// What preemption compares of flow `f`: its entity, its group's weight
    /// and its raising coefficient.
    fn preempt_rank(&self, f: FlowId) -> preemption::Rank {
        let fs = self.flow_state(f);
        let entity = *self.wf2q.entity(fs.entity);
        let group_weight = self
            .wf2q
            .group_entity(entity.parent)
            .map(|g| self.wf2q.entity(g).weight);
        preemption::Rank {
            entity,
            group_weight,
            coeff: if fs.raise.on() { fs.raise.coeff } else { 1 },
        }
    }
}

#[cfg(test)]
mod v_tally;

#[cfg(test)]
mod back_shift_lag {
    //! Two sync readers (weights 100 and 300, 64 KiB reads, one at a
    //! time) driven straight through BFQ with irregular times from a
    //! fixed-seed generator: 50-300 us per request, 10-110 us from a
    //! completion to the next read, one request in 2000 taking 5-30 ms
    //! more and one think time in 5000 1-21 ms more. Back-shifted at their
    //! in-time wake-ups, the readers' S fall ever further below V unless
    //! pushed up (`backshift_push_up`).
    use super::*;
    use std::collections::VecDeque;

    /// The simulated device and readers around the scheduler.
    struct Drive {
        rng: u64,
        /// Dispatched requests with their completion times, in order.
        dev: VecDeque<(Time, Request)>,
        /// Each reader's next read: when it is issued, which reader.
        arrivals: Vec<(Time, usize)>,
        /// Each reader's longest wait from a read's issue to its dispatch.
        wait: [Time; 2],
    }

    impl Drive {
        /// The next number of a xorshift generator.
        fn rnd(&mut self) -> u64 {
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 7;
            self.rng ^= self.rng << 17;
            self.rng
        }

        /// Dispatches until the scheduler sends nothing, queueing each
        /// request on the device; its idle deadline, if it idles.
        fn dispatch_all(
            &mut self,
            b: &mut Bfq,
            now: Time,
            flows: &[FlowId; 2],
            issued: &[Time; 2],
        ) -> Option<Time> {
            loop {
                match b.dispatch(now) {
                    Dispatch::Request(r) => {
                        let i = usize::from(r.flow == flows[1]);
                        self.wait[i] = self.wait[i].max(now - issued[i]);
                        let mut svc = 50 * US + self.rnd() % (250 * US);
                        if self.rnd().is_multiple_of(2000) {
                            svc += 5 * MS + self.rnd() % (25 * MS);
                        }
                        let start = self.dev.back().map_or(now, |d| d.0.max(now));
                        self.dev.push_back((start + svc, r));
                    }
                    Dispatch::Idle { until } => return Some(until),
                    _ => return None,
                }
            }
        }

        /// The reader's time from a completion to its next read.
        fn think(&mut self) -> Time {
            let mut think = 10 * US + self.rnd() % (100 * US);
            if self.rnd().is_multiple_of(5000) {
                think += MS + self.rnd() % (20 * MS);
            }
            think
        }
    }

    /// What a probe run gives: V - S of each reader (light, heavy) at its
    /// end, in sectors per unit of weight; the light reader's share of the
    /// sectors; each reader's longest wait from a read's issue to its
    /// dispatch.
    struct Outcome {
        lag: [i64; 2],
        /// B_max at the end (sectors).
        max_budget: u64,
        light: f64,
        wait: [Time; 2],
    }

    /// BFQ with `settings` on a flash device 32 deep, with the readers of
    /// weight 100 and 300.
    fn readers_100_300(settings: &[(&str, &str)]) -> (Bfq, [FlowId; 2]) {
        let mut b = Bfq::from_settings(&Settings::from_pairs(settings.iter().copied())).unwrap();
        b.set_device(DeviceInfo {
            queue_depth: 32,
            queues_internally: true,
            rotational: false,
        });
        let flows = [100, 300].map(|w| b.add_flow(0, FlowSpec::with_weight(w)).unwrap());
        (b, flows)
    }

    /// The probe's run: `secs` seconds from generator `seed`; with
    /// `pause`, the reader `pause.1` thinks `pause.2` before the read it
    /// issues after `pause.0` (it leaves B-WF2Q+ and comes back late).
    fn probe(
        settings: &[(&str, &str)],
        secs: u64,
        seed: u64,
        pause: Option<(Time, usize, Time)>,
    ) -> Outcome {
        let (mut b, flows) = readers_100_300(settings);
        let (mut now, mut id, mut next_sector) = (0, 0u64, [0u64, 1 << 30]);
        let mut issued = [0; 2];
        let mut read = |b: &mut Bfq, now: Time, i: usize| {
            let (sector, sectors) = (next_sector[i], 128);
            let req = Request {
                id,
                flow: flows[i],
                sector,
                sectors,
                op: Op::Read,
                sync: true,
            };
            b.add_request(now, req).unwrap();
            (id, next_sector[i]) = (id + 1, sector + u64::from(sectors));
        };
        read(&mut b, 0, 0);
        read(&mut b, 0, 1);
        let mut d = Drive {
            rng: seed,
            dev: VecDeque::new(),
            arrivals: Vec::new(),
            wait: [0; 2],
        };
        let mut pause = pause;
        let mut sectors = [0u64; 2];
        while now < secs * SEC {
            let idle_until = d.dispatch_all(&mut b, now, &flows, &issued);
            let done = d.dev.front().map_or(Time::MAX, |r| r.0);
            let arrival = d.arrivals.iter().map(|a| a.0).min().unwrap_or(Time::MAX);
            let next = done.min(arrival).min(idle_until.unwrap_or(Time::MAX));
            now = now.max(next);
            if next == done {
                let (_, r) = d.dev.pop_front().unwrap();
                b.complete(now, r.id).unwrap();
                let i = usize::from(r.flow == flows[1]);
                sectors[i] += u64::from(r.sectors);
                let mut think = d.think();
                if let Some((_, _, long)) = pause.filter(|p| now >= p.0 && i == p.1) {
                    (think, pause) = (long, None);
                }
                d.arrivals.push((now + think, i));
            } else if next == arrival {
                let k = d.arrivals.iter().position(|a| a.0 == arrival).unwrap();
                let (_, i) = d.arrivals.swap_remove(k);
                read(&mut b, now, i);
                issued[i] = now;
            }
        }
        let v = b.wf2q.vtime(GroupId::ROOT, IoClass::Be) as i64;
        let lag = |f: FlowId| {
            (v - b.wf2q.entity(b.flow_state(f).entity).start as i64) >> wf2q::SERVICE_SHIFT
        };
        Outcome {
            lag: [lag(flows[0]), lag(flows[1])],
            max_budget: b.max_budget(),
            light: sectors[0] as f64 / (sectors[0] + sectors[1]) as f64,
            wait: d.wait,
        }
    }

    /// Without the push-up (and without `lag_anchor`), with
    /// `timeout_keeps_place` (a reader timed out between two reads comes
    /// back at S = its F), both readers drift below V: 823 and 789
    /// sectors per unit of weight after 20 s, 1644 and 1355 after 60 s,
    /// 2378 and 2241 after 120 s, yet their split holds. With the
    /// kernel's rules (the push-up; a timeout deferred while the flow is
    /// idled for) the light reader stays within one budget of V, B_max /
    /// w (B_max about 67 000 sectors: 670), and the heavy one within two
    /// (447): at most 478 and 259 at 20, 60 and 120 s.
    #[test]
    fn the_push_up_keeps_back_shifted_readers_near_v() {
        let off = [
            ("backshift_push_up", "0"),
            ("lag_anchor", "0"),
            ("backshift_lag_bound", "0"),
            ("timeout_keeps_place", "1"),
        ];
        let kernel = [
            ("backshift_push_up", "1"),
            ("lag_anchor", "0"),
            ("timeout_keeps_place", "0"),
            ("timeout_defers_to_idling", "1"),
        ];
        let seed = 0x9E37_79B9_7F4A_7C15;
        let early = probe(&off, 20, seed, None);
        let late = probe(&off, 120, seed, None);
        let budgets = |o: &Outcome, n: u64, i: usize| (n * o.max_budget / [100, 300][i]) as i64;
        for i in 0..2 {
            assert!(
                late.lag[i] > early.lag[i] + 1000,
                "{i}: {:?} {:?}",
                early.lag,
                late.lag
            );
            assert!(late.lag[i] > budgets(&late, 2, i), "{i}: {:?}", late.lag);
        }
        assert!((late.light - 0.25).abs() < 0.01, "{}", late.light);
        for secs in [20, 60, 120] {
            let o = probe(&kernel, secs, seed, None);
            assert!(o.lag[0] < budgets(&o, 1, 0), "{secs} s: {:?}", o.lag);
            assert!(o.lag[1] < budgets(&o, 2, 1), "{secs} s: {:?}", o.lag);
        }
    }

    /// Neither reader waits long for a dispatch, with or without a late
    /// return (a 100 or 500 ms think time at 20 s: it leaves B-WF2Q+ and
    /// comes back at S = max(V, F)), over four seeds: at most 0.5-0.6 s,
    /// the light reader's wait through three of the heavy one's turns;
    /// the light reader's share within 2.5 points of 25%.
    #[test]
    fn late_returns_in_the_probe_wait_under_a_second() {
        for seed in 1..=4u64 {
            let rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            for (who, long) in [(0, 100), (1, 100), (0, 500), (1, 500)] {
                let o = probe(&[], 30, rng, Some((20 * SEC, who, long * MS)));
                assert!(o.wait.iter().all(|&w| w < SEC), "seed {seed}: {:?}", o.wait);
                assert!((o.light - 0.25).abs() < 0.025, "seed {seed}: {}", o.light);
            }
        }
    }
}

#[cfg(test)]
mod layout {
    //! What a request writes when every request is a turn of its own, and
    //! the settings it reads, stay on few cache lines (docs/architecture.md,
    //! "Lines a request writes, counted"): a field added inside one of
    //! these runs, or a run moved, fails here rather than silently costing
    //! lines.
    use super::*;
    use crate::table::FlowEntry;
    use std::mem::{align_of, offset_of, size_of_val};

    /// The 64-byte lines from byte `first` to byte `last` of a struct that
    /// starts a line.
    fn lines(first: usize, last: usize) -> usize {
        last / 64 - first / 64 + 1
    }

    /// Bytes from the flow's first per-request field to the topology's
    /// held count (260 now: 5 lines however it falls), and the scheduler's
    /// lines from the turn count to the end of the request table's counts
    /// (its first fields; 360 bytes on 6 lines, the scheduler starting a
    /// line).
    #[test]
    fn a_requests_writes_stay_on_few_lines() {
        let flow_run =
            offset_of!(FlowEntry<FlowState>, held) + 4 - offset_of!(FlowState, in_flight);
        assert!(flow_run <= 5 * 64, "flow run {flow_run} bytes");
        assert_eq!(align_of::<Bfq>(), 64);
        let turns = offset_of!(Bfq, stats) + offset_of!(BfqStats, turns);
        let bfq_run = lines(turns, offset_of!(Bfq, table) + 23);
        assert!(bfq_run <= 6, "bfq run on {bfq_run} lines");
    }

    /// The settings a request reads (every sub-configuration it reads a
    /// field of, whole, and the first four fields of weight raising) lie
    /// on 6 lines, of the 7 or 8 that the whole configuration spans: 344
    /// bytes from the first.
    #[test]
    fn the_settings_a_request_reads_stay_on_few_lines() {
        let c = BfqConfig::default();
        let at = |f: usize| offset_of!(Bfq, cfg) + f;
        let read = [
            (at(offset_of!(BfqConfig, queue)), size_of_val(&c.queue)),
            (at(offset_of!(BfqConfig, timeout_sync)), 8),
            (at(offset_of!(BfqConfig, rotational_probe)), 8),
            (at(offset_of!(BfqConfig, charge)), size_of_val(&c.charge)),
            (
                at(offset_of!(BfqConfig, guarantee)),
                size_of_val(&c.guarantee),
            ),
            (at(offset_of!(BfqConfig, preempt)), size_of_val(&c.preempt)),
            (at(offset_of!(BfqConfig, idle)), size_of_val(&c.idle)),
            (at(offset_of!(BfqConfig, budget)), size_of_val(&c.budget)),
            (at(offset_of!(BfqConfig, inject)), size_of_val(&c.inject)),
            (
                at(offset_of!(BfqConfig, peak_rate)),
                size_of_val(&c.peak_rate),
            ),
            (at(offset_of!(BfqConfig, merge.enabled)), 1),
            (at(offset_of!(BfqConfig, wr.enabled)), 1),
            (at(offset_of!(BfqConfig, wr.default_weight_only)), 1),
            (at(offset_of!(BfqConfig, wr.min_idle_time)), 8),
            (at(offset_of!(BfqConfig, wr.max_softrt_rate)), 8),
        ];
        let first = read.iter().map(|r| r.0).min().unwrap();
        let last = read.iter().map(|r| r.0 + r.1 - 1).max().unwrap();
        let n = lines(first, last);
        assert!(n <= 6, "settings read on {n} lines ({first}..={last})");
    }
}
