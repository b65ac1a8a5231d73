//! Preemption and in-time wake-ups (heuristic 9; switch `preemption`).
//! Reference "Preemption"; kernel behaviour re-derived.
//!
//! - **In-time wake-up**: a flow that emptied with budget left and gets a
//!   new request within `preempt_in_time` (3 x slice_idle) of its last
//!   completion keeps the remaining budget and its timestamps: it is put
//!   back with S = its old F (back-shifted, as if it had stayed backlogged)
//!   instead of S = max(V, F), so a flow whose think time is a bit longer
//!   than T_wait does not lose its place. The kernel does this only after
//!   a turn that ran out of requests (no idling, or idling that timed
//!   out): after a budget exhaustion or a T_max timeout the next turn
//!   starts afresh (`bfq_bfqq_expire` sets `non_blocking_wait_rq` for no
//!   other reason), as in `bfq-kernel`; the same rule holds for a flow
//!   that left with requests in flight and returns in time (heuristic 7).
//!   `bfq` keeps the back-shift after a timeout for a turn charged its
//!   service (`in_time_after_timeout`): its turns into which others'
//!   requests were injected end at T_max charged their service, and
//!   without the back-shift the flows lose their places (3:1 random
//!   readers with injection got 1.85:1). A turn charged its time (B_max
//!   for T_max) starts afresh as in the kernel: back-shifted with the
//!   unserved part of its budget, ten random readers kept F below a
//!   waking bash's and its start-up under 10r-rand took 0.67-1.0 s
//!   (low_latency off) instead of 0.29-0.36 s.
//! - **Push-up of back-shifted timestamps** (`backshift_push_up`): a
//!   back-shifted flow (in-time wake-up, or a return after leaving with
//!   requests in flight) whose new F = S + budget / w is still below V has
//!   S and F moved up together until F = V (the shift divided by its
//!   raising coefficient when raised), as the kernel's
//!   `bfq_update_fin_time_enqueue` does. Without it, flows that idle for
//!   short moments at irregular times keep timestamps ever further below V
//!   while V advances over the others' service (a simulated probe:
//!   `back_shift_lag`), and a flow that comes back late (S = max(V, F))
//!   forfeits that much service. On in `bfq-kernel`; off in `bfq`, whose
//!   injection rules lose fairness with it (docs/bfq-settings.md).
//! - **Anchored fresh starts** (`lag_anchor`, `bfq` only): that drift is
//!   common to all flows, so a flow activated afresh at S = max(V, F)
//!   starts ahead of every backlogged flow by it and waits for them to
//!   catch up (a reader joining drifted 1:2:3 readers: 0.07 of its share
//!   over 2 s). It starts from min(V, their least F + B_max / w) instead
//!   ([`super::wf2q::Anchor`]). `backshift_lag_bound` (off in both
//!   profiles) bounds a back-shifted flow's lag to B_max / w behind the
//!   same flows, keeping injection's fairness where the kernel's push-up
//!   to V did not.
//! - **Preemption**: a waking flow preempts the in-service one when
//!   B-WF2Q+ would pick it next — among the queued flows, and, in the same
//!   tree and class, before the in-service flow itself (a smaller F, the
//!   kernel's `next_in_service` rule) — and it is of a higher class, or of
//!   a higher weight in the same tree, or weight-raised and in time while
//!   the in-service flow is raised less. Without the F comparison a
//!   weight-100 reader among 1:2:3:4:5 readers on a loop device was
//!   preempted after every request and re-selected at once: 0.5% of the
//!   throughput instead of 6.7%. The preempted flow keeps its budget
//!   and is requeued with back-shifted timestamps (charged what it got).
//! - **Group weight** (`preempt_group_weight`, kernel
//!   `bfq_bfqq_higher_class_or_weight`): a waking flow whose *group* is
//!   heavier than the in-service flow's group (the weights of the two
//!   flows' parent groups; a flow of the root group counts with its own
//!   weight), in the same class, preempts it whatever their timestamps:
//!   the kernel's `next_queue_may_preempt` only asks that the root level's
//!   next entity differ from the in-service one, which always holds when
//!   the in-service group has no other busy child. With the 2018
//!   article's layout (a random reader in a group of weight 300,
//!   sequential readers in groups of 100) the reader cuts a sequential
//!   reader's turn every time it wakes outside its own turn.

use super::budget::ExpireReason;
use super::wf2q::Entity;
use crate::error::SchedError;
use crate::settings::Settings;
use crate::types::Time;

/// Preemption parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PreemptConfig {
    /// Preemption on (`preemption`; heuristic 9).
    pub enabled: bool,
    /// Wake-ups within this long of the last completion are in time.
    pub in_time: Time,
    /// A flow of a heavier group preempts a flow of another group
    /// (`preempt_group_weight`; kernel).
    pub group_weight: bool,
    /// A turn that ended at T_max charged its service keeps the rest of
    /// its budget for an in-time wake-up (`in_time_after_timeout`; `bfq`
    /// only).
    pub after_timeout: bool,
    /// A flow expired for its budget timeout with its queue empty and
    /// nothing in flight, while it would be idled for, keeps its place
    /// (S = its F) if its next request comes within `in_time` of its last
    /// completion, whether the turn was charged its service or its time
    /// (`timeout_keeps_place`; `bfq` only; the kernel profiles defer such
    /// an expiry to the next request instead, `timeout_defers_to_idling`,
    /// which gives the same S).
    pub timeout_keeps_place: bool,
    /// A back-shifted flow whose new F is still below V is pushed up to
    /// F = V (`backshift_push_up`; kernel `bfq_update_fin_time_enqueue`).
    pub push_up: bool,
    /// Activations timestamped from the backlogged flows when V has run
    /// past them all (`lag_anchor`; `bfq` only): a flow activated afresh
    /// starts at S = max(their least F + B_max / w, its F)
    /// ([`super::wf2q::Anchor`]).
    pub lag_anchor: bool,
    /// A back-shifted flow keeps at most B_max / w of lag behind the
    /// backlogged flows' least F (or V, if lower): beyond, it is pushed up
    /// (`backshift_lag_bound`; off in every profile;
    /// [`super::wf2q::PushUp`]). `push_up` takes precedence, and pushes
    /// up to F = V whatever `lag_anchor` says.
    pub lag_bound: bool,
    /// A weight-raised flow's every back-shift (a return in time with its
    /// leftover budget, or after its turn ended at T_max while it was
    /// idled for) is held to the bound of `inject_return_lag_bound`: S =
    /// its F only within B_max / w of the backlogged flows' least F (or V,
    /// if lower), pushed up beyond (`raised_backshift_lag_bound`; this
    /// project's rule, on in `bfq`, off in the other profiles). The
    /// back-shift claims the flow stayed backlogged, and a continuously
    /// backlogged flow lags by at most B_max + L_max (2010 paper,
    /// appendix, Lemma 2); a raised flow's turn is charged its service, not
    /// its time (heuristic 3), so a raised reader that thinks through its
    /// T_max turns and comes back back-shifted after each keeps, at every
    /// level, its place while the others are served. A random 4 KiB reader
    /// thinking 5 ms beside one at depth 4, each in a group of 100
    /// (simulated SSD, `low_latency` on), was served 200 sectors per
    /// 125 ms turn while its group fell 3.3 B_max behind V in 2.6 s; once
    /// its group's F pinned the anchor, `inject_ahead_bound` kept the deep
    /// reader out of four of its turns in a row: the deep reader waited
    /// 388-518 ms (seeds 1-3), 36-52 ms with the rule. Unraised flows keep
    /// their lag (their timed-out turns are charged their time): bounding
    /// every back-shift (`backshift_lag_bound`) costs weights.
    pub raised_lag_bound: bool,
}

/// The weight a flow is compared with when it wakes while a flow of
/// another group is in service: its parent group's weight, or its own in
/// the root group (kernel `bfq_bfqq_higher_class_or_weight`).
#[derive(Clone, Copy, Debug)]
pub struct Rank {
    /// The flow's entity.
    pub entity: Entity,
    /// Weight of the group holding it (None: the root group).
    pub group_weight: Option<u32>,
    /// Weight-raising coefficient (1 when not raised).
    pub coeff: u32,
}

impl Rank {
    /// The weight compared across groups: the parent group's, or the
    /// flow's own in the root group.
    pub fn cross_group_weight(&self) -> u32 {
        self.group_weight.unwrap_or(self.entity.weight)
    }
}

/// What a waking flow may do to the in-service one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preempt {
    /// Leave it in service.
    No,
    /// Preempt it if B-WF2Q+ would serve the waking flow next.
    IfNext,
    /// Preempt it (a heavier group; the kernel's root-level check always
    /// passes then).
    Now,
}

/// Whether a flow whose turn ended for `reason` may come back with its
/// old timestamps (in time, or returning with requests in flight): not
/// after a budget exhaustion, nor after a timeout (kernel: only a turn that
/// ran out of requests leaves the queue a non-blocking wait) unless
/// `after_timeout` and the turn was charged its service, not its time
/// (`time_charged`: its charge exceeded the sectors it was served).
pub fn may_back_shift(cfg: &PreemptConfig, reason: ExpireReason, time_charged: bool) -> bool {
    match reason {
        ExpireReason::BudgetExhausted => false,
        ExpireReason::Timeout => cfg.after_timeout && !time_charged,
        _ => true,
    }
}

/// Whether a waking flow `new` (in time or not) may preempt the
/// in-service `cur`; `group_weight` enables the kernel's comparison of
/// group weights across groups.
pub fn wants_to_preempt(new: &Rank, in_time: bool, cur: &Rank, group_weight: bool) -> Preempt {
    let (ne, ce) = (&new.entity, &cur.entity);
    if cur.coeff > new.coeff {
        return Preempt::No;
    }
    let same_tree = ne.parent == ce.parent;
    if !same_tree
        && ne.class == ce.class
        && group_weight
        && new.cross_group_weight() > cur.cross_group_weight()
    {
        return Preempt::Now;
    }
    // Kernel: the waking entity becomes the next to serve only if it would
    // finish before the in-service one (same tree and class): otherwise
    // B-WF2Q+ would give the in-service flow the device straight back, and
    // the preemption would only cut its turn short.
    let may = if ne.class == ce.class && same_tree && ne.finish >= ce.finish {
        false
    } else {
        ne.class < ce.class
            || (ne.class == ce.class && same_tree && ne.weight > ce.weight)
            || (in_time && new.coeff > 1 && new.coeff >= cur.coeff && ne.class == ce.class)
    };
    if may {
        Preempt::IfNext
    } else {
        Preempt::No
    }
}

impl PreemptConfig {
    /// The preemption settings over profile `d` (docs/bfq-settings.md);
    /// `preempt_in_time` defaults to 3 x `slice_idle`.
    pub(crate) fn with_settings(
        d: &PreemptConfig,
        slice_idle: Time,
        s: &mut Settings,
    ) -> Result<Self, SchedError> {
        Ok(PreemptConfig {
            enabled: s.bool("preemption", d.enabled)?,
            in_time: s.duration("preempt_in_time", 3 * slice_idle)?,
            group_weight: s.bool("preempt_group_weight", d.group_weight)?,
            after_timeout: s.bool("in_time_after_timeout", d.after_timeout)?,
            timeout_keeps_place: s.bool("timeout_keeps_place", d.timeout_keeps_place)?,
            push_up: s.bool("backshift_push_up", d.push_up)?,
            lag_anchor: s.bool("lag_anchor", d.lag_anchor)?,
            lag_bound: s.bool("backshift_lag_bound", d.lag_bound)?,
            raised_lag_bound: s.bool("raised_backshift_lag_bound", d.raised_lag_bound)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bfq::wf2q::{EState, Kind};
    use crate::types::{GroupId, IoClass};

    fn entity(weight: u32, class: IoClass, finish: u64) -> Entity {
        Entity {
            kind: Kind::Flow(0),
            weight,
            class,
            parent: GroupId::ROOT,
            start: 0,
            finish,
            budget: 0,
            service: 0,
            state: EState::Queued,
        }
    }

    fn rank(weight: u32, class: IoClass, finish: u64, coeff: u32) -> Rank {
        Rank {
            entity: Entity {
                weight: weight * coeff,
                ..entity(weight, class, finish)
            },
            group_weight: None,
            coeff,
        }
    }

    fn in_group(r: Rank, group: u32, weight: u32) -> Rank {
        Rank {
            entity: Entity {
                parent: GroupId(group),
                ..r.entity
            },
            group_weight: Some(weight),
            ..r
        }
    }

    #[test]
    fn a_heavier_flow_preempts_only_with_a_smaller_finish_time() {
        use Preempt::*;
        let be = IoClass::Be;
        let cur = rank(100, be, 1000, 1);
        let w = |new: &Rank, in_time| wants_to_preempt(new, in_time, &cur, true);
        // Kernel next_in_service rule: a higher weight is not enough, the
        // waking flow must also finish before the in-service one.
        assert_eq!(w(&rank(200, be, 999, 1), false), IfNext);
        assert_eq!(w(&rank(200, be, 1000, 1), false), No);
        assert_eq!(w(&rank(200, be, 5000, 1), false), No);
        // Being raised and waking in time is not enough either.
        assert_eq!(w(&rank(100, be, 999, 30), true), IfNext);
        assert_eq!(w(&rank(100, be, 5000, 30), true), No);
        // In another class F is not comparable: the class decides.
        assert_eq!(w(&rank(100, IoClass::Rt, 5000, 1), false), IfNext);
        // Nor in another group's tree: a raised flow waking in time still
        // preempts whatever its F.
        let other_tree = in_group(rank(100, be, 5000, 30), 1, 100);
        assert_eq!(w(&other_tree, true), IfNext);
    }

    #[test]
    fn a_flow_of_a_heavier_group_preempts_another_group_whatever_its_finish_time() {
        use Preempt::*;
        let be = IoClass::Be;
        // 2018 article layout: the target's group weighs 300, each
        // sequential reader's group 100 (flows of default weight).
        let cur = in_group(rank(100, be, 1000, 1), 2, 100);
        let target = in_group(rank(100, be, 50_000, 1), 1, 300);
        assert_eq!(wants_to_preempt(&target, false, &cur, true), Now);
        // Switched off, or a lighter or equal group: the old rule (no
        // weight comparison across trees; far behind in F, not in time).
        assert_eq!(wants_to_preempt(&target, false, &cur, false), No);
        let light = in_group(rank(100, be, 50_000, 1), 1, 100);
        assert_eq!(wants_to_preempt(&light, false, &cur, true), No);
        assert_eq!(wants_to_preempt(&cur, false, &target, true), No);
        // A flow of the root group counts with its own weight.
        let root_heavy = rank(400, be, 50_000, 1);
        assert_eq!(wants_to_preempt(&root_heavy, false, &cur, true), Now);
        // The classes must match (a lower class never preempts).
        let idle = in_group(rank(100, IoClass::Idle, 0, 1), 1, 300);
        assert_eq!(wants_to_preempt(&idle, false, &cur, true), No);
        // A raised in-service flow is not preempted by an unraised one.
        let raised = in_group(rank(100, be, 1000, 30), 2, 100);
        assert_eq!(wants_to_preempt(&target, false, &raised, true), No);
    }
}
