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
//! `now` (nanoseconds, non-decreasing across calls).

use crate::error::SchedError;
use crate::types::{DeviceInfo, Dispatch, FlowId, FlowSpec, GroupId, ReqId, Request, Time};

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
}
