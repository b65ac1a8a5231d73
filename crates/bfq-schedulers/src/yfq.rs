//! `yfq`: Yet another Fair Queueing (Bruno et al., 1999), as the 2010 BFQ
//! paper implemented and measured it (Sections IV-B and V-A).
//!
//! Every request gets WFQ tags when it arrives: start
//! `S = max(V, F_prev)`, finish `F = S + sectors / weight` (weights from
//! the flow spec). Requests are dispatched in batches: when the current
//! batch has been dispatched, the next one is filled with the `bt_size`
//! requests of smallest finish tag (a flow may contribute several), and a
//! batch is dispatched in C-LOOK order from the head position. With
//! `batch_overlap` (the default, YFQ's throughput enhancement) the next
//! batch starts as soon as the previous one has been dispatched; without
//! it, only after all its requests completed.
//!
//! `t_wait` (0 = off; the paper used 0 and 4 ms): after the last queued
//! request of a flow completes, the disk is kept idle (nothing more of the
//! batch either) until that flow issues a new request or `t_wait` passes:
//! the 2010 paper's SCAN-EDF and YFQ alike "keep the disk idle until either
//! a new request of the just served application arrives, or a
//! configurable T_wait time interval elapses" (Sec. V-A).
//!
//! Choices: the virtual time `V` is the start tag of the last request put
//! in a batch (the request in service in the WFQ sense), never decreasing;
//! tags are in sectors scaled by 2^16 per unit of weight.

use crate::util::{clook_pick, ensure, topology_methods, SortList};
use bfq_core::table::{check_time, dispatch_past_end, RequestTable, SlotIdx, Topology};
use bfq_core::{
    DeviceInfo, Dispatch, FlowId, FlowSpec, ReqId, Request, SchedError, Scheduler, Settings, Time,
};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

const SCALE: u64 = 1 << 16;

#[derive(Clone, Copy, Debug, Default)]
struct Extra {
    start: u64,
    finish: u64,
    batch: u64,
}

#[derive(Debug, Default)]
struct YFlow {
    weight: u64,
    queue: VecDeque<SlotIdx>,
    last_finish: u64,
    in_heap: bool,
}

/// YFQ.
#[derive(Debug)]
pub struct Yfq {
    table: RequestTable<Extra>,
    topo: Topology<(), ()>,
    flows: Vec<YFlow>,
    heap: BinaryHeap<Reverse<(u64, u64, u32)>>,
    batch: SortList<u64>,
    batch_no: u64,
    /// Requests of the previous batches still on the device.
    prev_in_flight: u32,
    cur_in_flight: u32,
    vtime: u64,
    head: u64,
    seq: u64,
    wait_for: Option<(FlowId, Time)>,
    bt_size: usize,
    overlap: bool,
    t_wait: Time,
}

impl Yfq {
    /// Settings: `bt_size` (4; the paper used 4, 8, 16), `batch_overlap`
    /// (1), `t_wait` (0 ms).
    pub fn new(s: &mut Settings) -> Result<Self, SchedError> {
        Ok(Yfq {
            table: RequestTable::new(),
            topo: Topology::new(()),
            flows: Vec::new(),
            heap: BinaryHeap::new(),
            batch: SortList::default(),
            batch_no: 0,
            prev_in_flight: 0,
            cur_in_flight: 0,
            vtime: 0,
            head: 0,
            seq: 0,
            wait_for: None,
            bt_size: s.u64_in("bt_size", 4, 1, 1 << 16)? as usize,
            overlap: s.bool("batch_overlap", true)?,
            t_wait: s.duration("t_wait", 0)?,
        })
    }

    fn push_head(&mut self, f: u32) {
        let fl = &mut self.flows[f as usize];
        if let Some(&h) = fl.queue.front() {
            self.seq += 1;
            self.heap
                .push(Reverse((self.table.slot(h).extra.finish, self.seq, f)));
            fl.in_heap = true;
        } else {
            fl.in_heap = false;
        }
    }

    fn form_batch(&mut self) {
        self.batch_no += 1;
        self.prev_in_flight += self.cur_in_flight;
        self.cur_in_flight = 0;
        while self.batch.len() < self.bt_size {
            let Some(Reverse((_, _, f))) = self.heap.pop() else {
                break;
            };
            let idx = self.flows[f as usize]
                .queue
                .pop_front()
                .expect("flows in the heap have requests");
            let (r, e) = {
                let s = self.table.slot_mut(idx);
                s.extra.batch = self.batch_no;
                (s.req, s.extra)
            };
            self.vtime = self.vtime.max(e.start);
            self.seq += 1;
            self.batch.insert(r.sector, self.seq, idx);
            self.push_head(f);
        }
    }
}

impl Scheduler for Yfq {
    fn name(&self) -> &str {
        "yfq"
    }
    fn set_device(&mut self, _device: DeviceInfo) {}
    topology_methods!(remove_flow);
    fn add_flow(&mut self, now: Time, spec: FlowSpec) -> Result<FlowId, SchedError> {
        check_time(now)?;
        let id = self.topo.add_flow(spec, ())?;
        ensure(&mut self.flows, id.index());
        self.flows[id.index()] = YFlow {
            weight: u64::from(spec.effective_weight()),
            ..YFlow::default()
        };
        Ok(id)
    }
    fn add_request(&mut self, now: Time, req: Request) -> Result<(), SchedError> {
        check_time(now)?;
        self.topo.check_flow(req.flow)?;
        let f = &self.flows[req.flow.index()];
        let start = self.vtime.max(f.last_finish);
        let finish = start + u64::from(req.sectors) * SCALE / f.weight;
        let idx = self.table.insert(
            now,
            req,
            Extra {
                start,
                finish,
                batch: 0,
            },
        )?;
        self.topo.hold(req.flow)?;
        let f = &mut self.flows[req.flow.index()];
        f.last_finish = finish;
        f.queue.push_back(idx);
        if !f.in_heap {
            self.push_head(req.flow.index() as u32);
        }
        if self.wait_for.is_some_and(|(w, _)| w == req.flow) {
            self.wait_for = None;
        }
        Ok(())
    }
    fn dispatch(&mut self, now: Time) -> Dispatch {
        if let Some(d) = dispatch_past_end(now, self.queued()) {
            return d;
        }
        if self.table.queued() == 0 {
            return Dispatch::Empty;
        }
        if let Some((_, until)) = self.wait_for {
            if now < until {
                return Dispatch::Idle { until };
            }
            self.wait_for = None;
        }
        if self.batch.is_empty() {
            if !self.overlap && self.prev_in_flight + self.cur_in_flight > 0 {
                return Dispatch::Wait;
            }
            self.form_batch();
        }
        match clook_pick(&self.batch, self.head) {
            Some((sector, seq, idx)) => {
                self.batch.remove(sector, seq);
                let r = self.table.dispatch(now, idx);
                self.cur_in_flight += 1;
                self.head = r.end();
                Dispatch::Request(r)
            }
            None => Dispatch::Empty,
        }
    }
    fn complete(&mut self, now: Time, id: ReqId) -> Result<(), SchedError> {
        check_time(now)?;
        let slot = self.table.complete(id)?;
        let r = slot.req;
        if slot.extra.batch == self.batch_no {
            self.cur_in_flight -= 1;
        } else {
            self.prev_in_flight -= 1;
        }
        let freed = self.topo.release(r.flow);
        if self.t_wait > 0 && !freed && self.topo.flow(r.flow).is_ok() {
            let f = &self.flows[r.flow.index()];
            if f.queue.is_empty() {
                self.wait_for = Some((r.flow, now.saturating_add(self.t_wait)));
            }
        }
        Ok(())
    }
}
