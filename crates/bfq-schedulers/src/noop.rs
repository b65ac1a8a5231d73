//! `noop`: first come, first served with back merging (Linux
//! `noop-iosched`, 2.6.x). No sorting, no idling.
//!
//! Merging follows `util::Merger`: a request starting where a
//! queued request (or merged unit) of the same direction ends joins it and
//! is dispatched right after it, whatever flow issued it; units are capped
//! at `max_sectors`.

use crate::util::{
    dispatch_pending, dispatch_unit, merge_or_head, topology_methods, MergeLink, Merger,
};
use bfq_core::table::{check_time, dispatch_past_end, RequestTable, SlotIdx, Topology};
use bfq_core::{DeviceInfo, Dispatch, Request, SchedError, Scheduler, Settings, Time};
use std::collections::VecDeque;

/// Default merge cap: 1024 sectors (the kernel's `max_sectors_kb` = 512).
pub const DEFAULT_MAX_SECTORS: u64 = 1024;

/// Largest merge cap `max_sectors` takes: 2^24 sectors (8 GiB).
pub const MAX_SECTORS_LIMIT: u64 = 1 << 24;

/// FIFO with back merging.
#[derive(Debug)]
pub struct Noop {
    table: RequestTable<MergeLink>,
    topo: Topology<(), ()>,
    queue: VecDeque<SlotIdx>,
    merger: Merger,
}

impl Noop {
    /// Settings: `max_sectors` (merge cap in sectors, 0 disables merging).
    pub fn new(s: &mut Settings) -> Result<Self, SchedError> {
        let max = s.u64_in("max_sectors", DEFAULT_MAX_SECTORS, 0, MAX_SECTORS_LIMIT)?;
        Ok(Noop {
            table: RequestTable::new(),
            topo: Topology::new(()),
            queue: VecDeque::new(),
            merger: Merger::new(max),
        })
    }
}

impl Scheduler for Noop {
    fn name(&self) -> &str {
        "noop"
    }
    fn set_device(&mut self, _device: DeviceInfo) {}
    topology_methods!(flows);
    fn add_request(&mut self, now: Time, req: Request) -> Result<(), SchedError> {
        check_time(now)?;
        let idx = self
            .table
            .admit(&mut self.topo, now, req, MergeLink::default())?;
        if !merge_or_head(&mut self.table, &mut self.merger, idx, 0) {
            self.queue.push_back(idx);
        }
        Ok(())
    }
    fn dispatch(&mut self, now: Time) -> Dispatch {
        if let Some(d) = dispatch_past_end(now, self.queued()) {
            return d;
        }
        if let Some(r) = dispatch_pending(&mut self.table, &mut self.merger, now) {
            return Dispatch::Request(r);
        }
        match self.queue.pop_front() {
            Some(h) => {
                Dispatch::Request(dispatch_unit(&mut self.table, &mut self.merger, now, h, 0))
            }
            None => Dispatch::Empty,
        }
    }
}
