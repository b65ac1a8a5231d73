//! A scheduler with hooks in front of some of its calls.
//!
//! A driver or a test that watches what a policy is told, or changes what
//! it answers, implements [`Hooks`] for only the calls it cares about and
//! wraps the policy in [`Hooked`]; every other call reaches the policy
//! unchanged.
//!
//! ```
//! use bfq_core::{Dispatch, Fifo, Hooked, Hooks, Scheduler, Time};
//!
//! /// Counts the dispatch calls.
//! struct Count(u32);
//!
//! impl Hooks<Fifo> for Count {
//!     fn dispatch(&mut self, inner: &mut Fifo, now: Time) -> Dispatch {
//!         self.0 += 1;
//!         inner.dispatch(now)
//!     }
//! }
//!
//! let mut s = Hooked::new(Fifo::new(), Count(0));
//! assert_eq!(s.dispatch(0), Dispatch::Empty);
//! assert_eq!((s.name(), s.hooks.0), ("fifo", 1));
//! ```

use crate::error::SchedError;
use crate::scheduler::{FlowInternals, Internals, Scheduler};
use crate::types::{DeviceInfo, Dispatch, FlowId, FlowSpec, GroupId, ReqId, Request, Time};

/// The calls of [`Scheduler`], each also given the wrapped scheduler
/// `inner`. Every default passes the call on to `inner` unchanged:
/// implement only the calls to watch or change.
pub trait Hooks<S: Scheduler>: Send {
    /// [`Scheduler::name`].
    fn name<'a>(&'a self, inner: &'a S) -> &'a str {
        inner.name()
    }
    /// [`Scheduler::set_device`].
    fn set_device(&mut self, inner: &mut S, device: DeviceInfo) {
        inner.set_device(device)
    }
    /// [`Scheduler::add_group`].
    fn add_group(
        &mut self,
        inner: &mut S,
        parent: GroupId,
        weight: u32,
    ) -> Result<GroupId, SchedError> {
        inner.add_group(parent, weight)
    }
    /// [`Scheduler::remove_group`].
    fn remove_group(&mut self, inner: &mut S, group: GroupId) -> Result<(), SchedError> {
        inner.remove_group(group)
    }
    /// [`Scheduler::add_flow`].
    fn add_flow(&mut self, inner: &mut S, now: Time, spec: FlowSpec) -> Result<FlowId, SchedError> {
        inner.add_flow(now, spec)
    }
    /// [`Scheduler::remove_flow`].
    fn remove_flow(&mut self, inner: &mut S, now: Time, flow: FlowId) -> Result<(), SchedError> {
        inner.remove_flow(now, flow)
    }
    /// [`Scheduler::add_request`].
    fn add_request(&mut self, inner: &mut S, now: Time, req: Request) -> Result<(), SchedError> {
        inner.add_request(now, req)
    }
    /// [`Scheduler::dispatch`].
    fn dispatch(&mut self, inner: &mut S, now: Time) -> Dispatch {
        inner.dispatch(now)
    }
    /// [`Scheduler::complete`].
    fn complete(&mut self, inner: &mut S, now: Time, id: ReqId) -> Result<(), SchedError> {
        inner.complete(now, id)
    }
    /// [`Scheduler::queued`].
    fn queued(&self, inner: &S) -> usize {
        inner.queued()
    }
    /// [`Scheduler::in_flight`].
    fn in_flight(&self, inner: &S) -> usize {
        inner.in_flight()
    }
    /// [`Scheduler::internals`].
    fn internals(&self, inner: &S, now: Time) -> Internals {
        inner.internals(now)
    }
    /// [`Scheduler::flow_internals`].
    fn flow_internals(&self, inner: &S, flow: FlowId) -> FlowInternals {
        inner.flow_internals(flow)
    }
}

/// Scheduler `inner` behind `hooks`: each call goes to the hook of its
/// name ([`Hooks`]), which by default passes it on to `inner`.
#[derive(Debug, Default)]
pub struct Hooked<S, H> {
    /// The wrapped scheduler.
    pub inner: S,
    /// The hooks in front of it.
    pub hooks: H,
}

impl<S, H> Hooked<S, H> {
    /// `inner` behind `hooks`.
    pub fn new(inner: S, hooks: H) -> Self {
        Hooked { inner, hooks }
    }
}

impl<S: Scheduler, H: Hooks<S>> Scheduler for Hooked<S, H> {
    fn name(&self) -> &str {
        self.hooks.name(&self.inner)
    }
    fn set_device(&mut self, device: DeviceInfo) {
        self.hooks.set_device(&mut self.inner, device)
    }
    fn add_group(&mut self, parent: GroupId, weight: u32) -> Result<GroupId, SchedError> {
        self.hooks.add_group(&mut self.inner, parent, weight)
    }
    fn remove_group(&mut self, group: GroupId) -> Result<(), SchedError> {
        self.hooks.remove_group(&mut self.inner, group)
    }
    fn add_flow(&mut self, now: Time, spec: FlowSpec) -> Result<FlowId, SchedError> {
        self.hooks.add_flow(&mut self.inner, now, spec)
    }
    fn remove_flow(&mut self, now: Time, flow: FlowId) -> Result<(), SchedError> {
        self.hooks.remove_flow(&mut self.inner, now, flow)
    }
    fn add_request(&mut self, now: Time, req: Request) -> Result<(), SchedError> {
        self.hooks.add_request(&mut self.inner, now, req)
    }
    fn dispatch(&mut self, now: Time) -> Dispatch {
        self.hooks.dispatch(&mut self.inner, now)
    }
    fn complete(&mut self, now: Time, id: ReqId) -> Result<(), SchedError> {
        self.hooks.complete(&mut self.inner, now, id)
    }
    fn queued(&self) -> usize {
        self.hooks.queued(&self.inner)
    }
    fn in_flight(&self) -> usize {
        self.hooks.in_flight(&self.inner)
    }
    fn internals(&self, now: Time) -> Internals {
        self.hooks.internals(&self.inner, now)
    }
    fn flow_internals(&self, flow: FlowId) -> FlowInternals {
        self.hooks.flow_internals(&self.inner, flow)
    }
}
