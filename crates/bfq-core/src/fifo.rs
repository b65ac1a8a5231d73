//! `fifo`: first come, first served, no idling. The reference policy for
//! overhead comparisons (`bfq bench-core`) and the dispatch order of the
//! kernel's `none`.

use crate::error::SchedError;
use crate::scheduler::Scheduler;
use crate::table::{check_time, dispatch_past_end, RequestTable, SlotIdx, Topology};
use crate::types::{DeviceInfo, Dispatch, FlowId, FlowSpec, GroupId, ReqId, Request, Time};
use std::collections::VecDeque;

/// First come, first served.
#[derive(Debug)]
pub struct Fifo {
    table: RequestTable<()>,
    topo: Topology<(), ()>,
    queue: VecDeque<SlotIdx>,
}

impl Default for Fifo {
    fn default() -> Self {
        Self::new()
    }
}

impl Fifo {
    /// A new, empty FIFO scheduler.
    pub fn new() -> Self {
        Fifo {
            table: RequestTable::new(),
            topo: Topology::new(()),
            queue: VecDeque::new(),
        }
    }
}

impl Scheduler for Fifo {
    fn name(&self) -> &str {
        "fifo"
    }
    fn set_device(&mut self, _device: DeviceInfo) {}
    fn add_group(&mut self, parent: GroupId, weight: u32) -> Result<GroupId, SchedError> {
        self.topo.add_group(parent, weight, ())
    }
    fn remove_group(&mut self, group: GroupId) -> Result<(), SchedError> {
        self.topo.remove_group(group).map(|_| ())
    }
    fn add_flow(&mut self, now: Time, spec: FlowSpec) -> Result<FlowId, SchedError> {
        check_time(now)?;
        self.topo.add_flow(spec, ())
    }
    fn remove_flow(&mut self, now: Time, flow: FlowId) -> Result<(), SchedError> {
        check_time(now)?;
        self.topo.retire_flow(flow).map(|_| ())
    }
    fn add_request(&mut self, now: Time, req: Request) -> Result<(), SchedError> {
        check_time(now)?;
        let idx = self.table.admit(&mut self.topo, now, req, ())?;
        self.queue.push_back(idx);
        Ok(())
    }
    fn dispatch(&mut self, now: Time) -> Dispatch {
        if let Some(d) = dispatch_past_end(now, self.queued()) {
            return d;
        }
        match self.queue.pop_front() {
            Some(idx) => Dispatch::Request(self.table.dispatch(now, idx)),
            None => Dispatch::Empty,
        }
    }
    fn complete(&mut self, now: Time, id: ReqId) -> Result<(), SchedError> {
        check_time(now)?;
        let slot = self.table.complete(id)?;
        self.topo.release(slot.req.flow);
        Ok(())
    }
    fn queued(&self) -> usize {
        self.table.queued()
    }
    fn in_flight(&self) -> usize {
        self.table.in_flight()
    }
}
