//! The one scheduler interface of the project.
//!
//! BFQ, every baseline and the plain FIFO implement [`Scheduler`]; the
//! simulator and the io_uring engine drive it the same way:
//!
//! 1. describe the device with [`Scheduler::set_device`];
//! 2. create groups and flows ([`Scheduler::add_group`], [`Scheduler::add_flow`]);
//! 3. hand over each request with [`Scheduler::add_request`];
//! 4. while the device has a free slot, call [`Scheduler::dispatch`] and
//!    act on the [`Dispatch`] (send the request; arm a timer for
//!    `Idle { until }`; wait for the next event on `Wait`/`Empty`);
//! 5. report each completion with [`Scheduler::complete`], then go to 4.
//!
//! The scheduler never reads a clock: every call that depends on time takes
//! `now` (nanoseconds, non-decreasing across calls, at most
//! [`crate::MAX_TIME`]). A call with a later `now` is refused and changes
//! nothing: the calls that return a `Result` give
//! [`SchedError::TimeOutOfRange`], `dispatch` answers [`Dispatch::Wait`]
//! (or [`Dispatch::Empty`] when nothing is queued)
//! ([`crate::table::check_time`]).

use crate::error::SchedError;
use crate::types::{DeviceInfo, Dispatch, FlowId, FlowSpec, GroupId, ReqId, Request, Time};

/// What a scheduler's own mechanisms did so far, for a driver that wants
/// to explain an outcome (the suite's causes): B_max, the peak-rate
/// estimate, injection, throttle-low's LOW/MAX state. Each field is
/// `None` for a policy without that mechanism. Reading it is O(1) and
/// allocates nothing; the counters behind it are plain additions on
/// paths that already run (a turn's start, an injection, a change of
/// state).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Internals {
    /// BFQ: B_max in force, sectors (tuned from the peak rate when
    /// automatic, BFQ+ report Sec. 4.3).
    pub max_budget: Option<u64>,
    /// BFQ: estimated peak rate, sectors per second (BFQ+ report Sec. 4.3).
    pub peak_rate: Option<u64>,
    /// BFQ: turns granted (a flow selected with a budget).
    pub turns: Option<u64>,
    /// BFQ: requests dispatched by injection into another flow's idling
    /// (today's kernel BFQ, bfq_choose_bfqq_for_injection).
    pub injected: Option<u64>,
    /// BFQ: whether its rules treat the device as rotational (what the
    /// device says, unless the medium probe overruled it).
    pub rotational: Option<bool>,
    /// throttle-low: nanoseconds spent in the LOW state up to `now`.
    pub low_state_ns: Option<u64>,
    /// throttle-low: changes between the LOW and MAX states.
    pub state_changes: Option<u64>,
}

/// What a scheduler's mechanisms did for one flow so far (see
/// [`Internals`]); `None` for a policy without the mechanism.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowInternals {
    /// BFQ: turns the flow was granted.
    pub turns: Option<u64>,
    /// BFQ: sum of the budgets (sectors) the flow was granted at the start
    /// of its turns; divided by `turns`, its mean budget.
    pub budget_sum: Option<u64>,
    /// BFQ: the flow's requests dispatched by injection.
    pub injected: Option<u64>,
    /// BFQ: the B-WF2Q+ service (sectors) the flow's turns were charged;
    /// above the sectors it was served where turns were charged their time.
    pub charged: Option<u64>,
    /// BFQ: the service (sectors) the flow forfeited when it (re)joined
    /// B-WF2Q+ with its S past its old F: timestamped from V (or the
    /// anchor, `lag_anchor`) after leaving for longer than
    /// `preempt_in_time`, or pushed up (`backshift_push_up`). A lag the
    /// fluid system still owed it and B-WF2Q+ never returns (2010 paper,
    /// Fig. 4 line 6: S = max(V, F)).
    pub forfeited: Option<u64>,
}

impl FlowInternals {
    /// Adds another period's counters (a flow removed and added again).
    pub fn plus(self, o: FlowInternals) -> FlowInternals {
        let s = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
        FlowInternals {
            turns: s(self.turns, o.turns),
            budget_sum: s(self.budget_sum, o.budget_sum),
            injected: s(self.injected, o.injected),
            charged: s(self.charged, o.charged),
            forfeited: s(self.forfeited, o.forfeited),
        }
    }
}

/// A disk scheduling policy as a pure state machine.
pub trait Scheduler: Send {
    /// The policy's name (e.g. `bfq`, `cfq`, `fifo`).
    fn name(&self) -> &str;

    /// Describes the device. May be called at any time; takes effect for
    /// the next decisions.
    fn set_device(&mut self, device: DeviceInfo);

    /// Creates a group under `parent` with weight 1..=1000.
    fn add_group(&mut self, parent: GroupId, weight: u32) -> Result<GroupId, SchedError>;

    /// Removes an empty group (no flows, no child groups).
    fn remove_group(&mut self, group: GroupId) -> Result<(), SchedError>;

    /// Creates a flow.
    fn add_flow(&mut self, now: Time, spec: FlowSpec) -> Result<FlowId, SchedError>;

    /// Removes a flow. Its requests already queued are still dispatched and
    /// must still be completed; new requests for it are refused.
    fn remove_flow(&mut self, now: Time, flow: FlowId) -> Result<(), SchedError>;

    /// Queues a request. Errors leave the scheduler unchanged.
    fn add_request(&mut self, now: Time, req: Request) -> Result<(), SchedError>;

    /// Decides what the device should do next.
    fn dispatch(&mut self, now: Time) -> Dispatch;

    /// Reports that a dispatched request completed.
    fn complete(&mut self, now: Time, id: ReqId) -> Result<(), SchedError>;

    /// Requests queued and not yet dispatched.
    fn queued(&self) -> usize;

    /// Requests dispatched and not yet completed.
    fn in_flight(&self) -> usize;

    /// The scheduler's mechanisms so far ([`Internals`]); by default none.
    fn internals(&self, now: Time) -> Internals {
        let _ = now;
        Internals::default()
    }

    /// What the mechanisms did for `flow` since it was added
    /// ([`FlowInternals`]); by default none. Read it before removing the
    /// flow.
    fn flow_internals(&self, flow: FlowId) -> FlowInternals {
        let _ = flow;
        FlowInternals::default()
    }
}

impl<S: Scheduler + ?Sized> Scheduler for Box<S> {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn set_device(&mut self, device: DeviceInfo) {
        (**self).set_device(device)
    }
    fn add_group(&mut self, parent: GroupId, weight: u32) -> Result<GroupId, SchedError> {
        (**self).add_group(parent, weight)
    }
    fn remove_group(&mut self, group: GroupId) -> Result<(), SchedError> {
        (**self).remove_group(group)
    }
    fn add_flow(&mut self, now: Time, spec: FlowSpec) -> Result<FlowId, SchedError> {
        (**self).add_flow(now, spec)
    }
    fn remove_flow(&mut self, now: Time, flow: FlowId) -> Result<(), SchedError> {
        (**self).remove_flow(now, flow)
    }
    fn add_request(&mut self, now: Time, req: Request) -> Result<(), SchedError> {
        (**self).add_request(now, req)
    }
    fn dispatch(&mut self, now: Time) -> Dispatch {
        (**self).dispatch(now)
    }
    fn complete(&mut self, now: Time, id: ReqId) -> Result<(), SchedError> {
        (**self).complete(now, id)
    }
    fn queued(&self) -> usize {
        (**self).queued()
    }
    fn in_flight(&self) -> usize {
        (**self).in_flight()
    }
    fn internals(&self, now: Time) -> Internals {
        (**self).internals(now)
    }
    fn flow_internals(&self, flow: FlowId) -> FlowInternals {
        (**self).flow_internals(flow)
    }
}
