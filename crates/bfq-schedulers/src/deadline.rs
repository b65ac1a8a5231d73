//! `deadline`: the Linux deadline elevator as of 2.6.21
//! (`block/deadline-iosched.c`), the one the 2010 paper's kernel shipped.
//!
//! Per direction (read, write) a sector-sorted list and a FIFO with expiry
//! times. Requests go in batches of up to `fifo_batch` in one direction,
//! following the sort list upwards (one-way: at the end of the list the
//! batch ends). A new batch prefers reads, but goes to writes when writes
//! have been passed over `writes_starved` times; it starts from the FIFO
//! head if that has expired (or the elevator has nothing ahead), else
//! continues the sweep. Back merges as in `util::Merger` (a merged
//! unit counts as one request of the batch).

use crate::util::{
    dispatch_pending, dispatch_unit, linked_by_field, merge_or_head, topology_methods, MergeLink,
    Merger, SortList,
};
use bfq_core::table::{check_time, dispatch_past_end, RequestTable, SlotIdx, Topology};
use bfq_core::{DeviceInfo, Dispatch, Op, Request, SchedError, Scheduler, Settings, Time, MS};
use std::collections::VecDeque;

#[derive(Clone, Copy, Debug, Default)]
struct Extra {
    link: MergeLink,
    seq: u64,
    expire: Time,
}

linked_by_field!(Extra);

const READ: usize = 0;
const WRITE: usize = 1;

fn dir(op: Op) -> usize {
    match op {
        Op::Read => READ,
        Op::Write => WRITE,
    }
}

/// The deadline elevator.
#[derive(Debug)]
pub struct Deadline {
    table: RequestTable<Extra>,
    topo: Topology<(), ()>,
    merger: Merger,
    sort: [SortList<u64>; 2],
    fifo: [VecDeque<(SlotIdx, u32)>; 2],
    next: [Option<(u64, u64, SlotIdx)>; 2],
    expire: [Time; 2],
    fifo_batch: u64,
    writes_starved: u64,
    batching: u64,
    starved: u64,
    seq: u64,
}

impl Deadline {
    /// Settings: `read_expire` (500 ms), `write_expire` (5 s), `fifo_batch`
    /// (16), `writes_starved` (2), `max_sectors` (1024; 0 = no merging).
    pub fn new(s: &mut Settings) -> Result<Self, SchedError> {
        Ok(Deadline {
            table: RequestTable::new(),
            topo: Topology::new(()),
            merger: Merger::new(s.u64_in(
                "max_sectors",
                crate::noop::DEFAULT_MAX_SECTORS,
                0,
                crate::noop::MAX_SECTORS_LIMIT,
            )?),
            sort: Default::default(),
            fifo: Default::default(),
            next: [None; 2],
            expire: [
                s.duration("read_expire", 500 * MS)?,
                s.duration("write_expire", 5000 * MS)?,
            ],
            fifo_batch: s.u64_in("fifo_batch", 16, 1, 1 << 20)?,
            writes_starved: s.u64_in("writes_starved", 2, 0, 1 << 16)?,
            batching: 0,
            starved: 0,
            seq: 0,
        })
    }

    fn fifo_head(&mut self, d: usize) -> Option<SlotIdx> {
        while let Some(&(idx, gen)) = self.fifo[d].front() {
            if self.table.is_queued(idx, gen) {
                return Some(idx);
            }
            self.fifo[d].pop_front();
        }
        None
    }

    fn valid_next(&self, d: usize) -> Option<SlotIdx> {
        let (k, q, idx) = self.next[d]?;
        self.sort[d].contains(k, q).then_some(idx)
    }

    fn move_request(&mut self, now: Time, idx: SlotIdx) -> Request {
        let r = self.table.slot(idx).req;
        let seq = self.table.slot(idx).extra.seq;
        let d = dir(r.op);
        self.sort[d].remove(r.sector, seq);
        self.next = [None; 2];
        self.next[d] = self.sort[d].after(r.sector, seq);
        dispatch_unit(&mut self.table, &mut self.merger, now, idx, 0)
    }
}

impl Scheduler for Deadline {
    fn name(&self) -> &str {
        "deadline"
    }
    fn set_device(&mut self, _device: DeviceInfo) {}
    topology_methods!(flows);
    fn add_request(&mut self, now: Time, req: Request) -> Result<(), SchedError> {
        check_time(now)?;
        let idx = self
            .table
            .admit(&mut self.topo, now, req, Extra::default())?;
        if !merge_or_head(&mut self.table, &mut self.merger, idx, 0) {
            self.seq += 1;
            let d = dir(req.op);
            let e = &mut self.table.slot_mut(idx).extra;
            e.seq = self.seq;
            e.expire = now.saturating_add(self.expire[d]);
            let gen = self.table.slot(idx).gen;
            self.sort[d].insert(req.sector, self.seq, idx);
            self.fifo[d].push_back((idx, gen));
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
        // Continue the current batch.
        let cont = self.valid_next(WRITE).or(self.valid_next(READ));
        if let Some(idx) = cont {
            if self.batching < self.fifo_batch {
                self.batching += 1;
                return Dispatch::Request(self.move_request(now, idx));
            }
        }
        let reads = self.fifo_head(READ).is_some();
        let writes = self.fifo_head(WRITE).is_some();
        let d = if reads {
            let starved_now = writes && {
                let s = self.starved;
                self.starved += 1;
                s >= self.writes_starved
            };
            if starved_now {
                self.starved = 0;
                WRITE
            } else {
                READ
            }
        } else if writes {
            self.starved = 0;
            WRITE
        } else {
            return Dispatch::Empty;
        };
        let head = self.fifo_head(d).expect("checked non-empty");
        let expired = self.table.slot(head).extra.expire <= now;
        let idx = match self.valid_next(d) {
            Some(n) if !expired => n,
            _ => head,
        };
        self.batching = 1;
        Dispatch::Request(self.move_request(now, idx))
    }
}
