//! `scan-edf`: SCAN-EDF (Reddy & Wyllie, 1993) as the 2010 BFQ paper
//! implemented it (Sections IV-A and V-A): each flow has a relative
//! deadline; a request's absolute deadline is its arrival time plus its
//! flow's relative deadline, rounded up to a multiple of the granularity
//! `delta`; requests are served earliest deadline first, and requests with
//! the same (rounded) deadline in C-LOOK order from the head position.
//!
//! With `t_wait` > 0, after the last request of a flow completes (the flow
//! holds nothing more) the disk is kept idle until the flow issues a new
//! request or `t_wait` passes.
//!
//! Relative deadlines: `deadline.fN=40ms` for flow `N`, `deadline.gN=...`
//! for every flow in group `N` or below it (the nearest group wins), else
//! the default `deadline` (20 ms, the value of the paper's Table II runs).
//! Ids are the ones the scheduler hands out: flows 0, 1, 2... and groups
//! 1, 2, 3... in creation order.

use crate::util::{node_settings, parse_dur, topology_methods, Node, SortList};
use bfq_core::table::{check_time, dispatch_past_end, RequestTable, Topology};
use bfq_core::{
    DeviceInfo, Dispatch, FlowId, FlowSpec, GroupId, ReqId, Request, SchedError, Scheduler,
    Settings, Time, MS,
};
use std::collections::HashMap;

/// SCAN-EDF.
#[derive(Debug)]
pub struct ScanEdf {
    table: RequestTable<()>,
    topo: Topology<(), ()>,
    /// Relative deadline per flow id.
    rel: Vec<Time>,
    list: SortList<(u64, u64)>,
    head: u64,
    seq: u64,
    wait_for: Option<(FlowId, Time)>,
    default_deadline: Time,
    by_node: HashMap<Node, Time>,
    delta: Time,
    t_wait: Time,
}

impl ScanEdf {
    /// Settings: `deadline` (20 ms), `deadline.fN` / `deadline.gN`, `delta`
    /// (20 ms; the paper used 20-640 ms; 0 = no rounding), `t_wait` (0; the
    /// paper used 0 and 4 ms).
    pub fn new(s: &mut Settings) -> Result<Self, SchedError> {
        let mut by_node = HashMap::new();
        for (node, v) in node_settings(s, "deadline")? {
            by_node.insert(node, parse_dur("deadline", &v)?);
        }
        Ok(ScanEdf {
            table: RequestTable::new(),
            topo: Topology::new(()),
            rel: Vec::new(),
            list: SortList::default(),
            head: 0,
            seq: 0,
            wait_for: None,
            default_deadline: s.duration("deadline", 20 * MS)?,
            by_node,
            delta: s.duration("delta", 20 * MS)?,
            t_wait: s.duration("t_wait", 0)?,
        })
    }

    fn deadline_for(&self, id: FlowId, mut g: GroupId) -> Time {
        if let Some(&d) = self.by_node.get(&Node::Flow(id)) {
            return d;
        }
        loop {
            if let Some(&d) = self.by_node.get(&Node::Group(g)) {
                return d;
            }
            match self.topo.group(g) {
                Ok(e) if g != GroupId::ROOT => g = e.parent,
                _ => return self.default_deadline,
            }
        }
    }
}

impl Scheduler for ScanEdf {
    fn name(&self) -> &str {
        "scan-edf"
    }
    fn set_device(&mut self, _device: DeviceInfo) {}
    topology_methods!();
    fn add_flow(&mut self, now: Time, spec: FlowSpec) -> Result<FlowId, SchedError> {
        check_time(now)?;
        let id = self.topo.add_flow(spec, ())?;
        let d = self.deadline_for(id, spec.group);
        crate::util::ensure(&mut self.rel, id.index());
        self.rel[id.index()] = d;
        Ok(id)
    }
    fn remove_flow(&mut self, now: Time, flow: FlowId) -> Result<(), SchedError> {
        check_time(now)?;
        self.topo.retire_flow(flow)?;
        if self.wait_for.is_some_and(|(f, _)| f == flow) {
            self.wait_for = None;
        }
        Ok(())
    }
    fn add_request(&mut self, now: Time, req: Request) -> Result<(), SchedError> {
        check_time(now)?;
        self.topo.check_flow(req.flow)?;
        let abs = now.saturating_add(self.rel[req.flow.index()]);
        let dl = if self.delta > 0 {
            abs.div_ceil(self.delta).saturating_mul(self.delta)
        } else {
            abs
        };
        self.seq += 1;
        let key = (dl, req.sector);
        let idx = self.table.insert(now, req, ())?;
        self.topo.hold(req.flow)?;
        self.list.insert(key, self.seq, idx);
        if self.wait_for.is_some_and(|(f, _)| f == req.flow) {
            self.wait_for = None;
        }
        Ok(())
    }
    fn dispatch(&mut self, now: Time) -> Dispatch {
        if let Some(d) = dispatch_past_end(now, self.queued()) {
            return d;
        }
        let Some(((d0, _), _, _)) = self.list.first() else {
            return Dispatch::Empty;
        };
        if let Some((_, until)) = self.wait_for {
            if now < until {
                return Dispatch::Idle { until };
            }
            self.wait_for = None;
        }
        let pick = match self.list.ceil((d0, self.head)) {
            Some(e) if e.0 .0 == d0 => e,
            _ => self.list.first().expect("non-empty"),
        };
        self.list.remove(pick.0, pick.1);
        let r = self.table.dispatch(now, pick.2);
        self.head = r.end();
        Dispatch::Request(r)
    }
    fn complete(&mut self, now: Time, id: ReqId) -> Result<(), SchedError> {
        check_time(now)?;
        let slot = self.table.complete(id)?;
        let f = slot.req.flow;
        let freed = self.topo.release(f);
        if self.t_wait > 0 && !freed {
            if let Ok(fe) = self.topo.flow(f) {
                if fe.held == 0 {
                    self.wait_for = Some((f, now.saturating_add(self.t_wait)));
                }
            }
        }
        Ok(())
    }
}
