//! `clook`: one global C-LOOK elevator (circular LOOK), no idling, no
//! merging. The head sweeps towards higher sectors serving the next request
//! at or after the end of the last dispatched one, and jumps back to the
//! lowest queued sector when nothing is ahead. Ties (same sector) go in
//! arrival order. As in the 2010 paper, Section V.

use crate::util::{clook_pick, topology_methods, SortList};
use bfq_core::table::{check_time, dispatch_past_end, RequestTable, Topology};
use bfq_core::{DeviceInfo, Dispatch, Request, SchedError, Scheduler, Settings, Time};

/// The C-LOOK elevator.
#[derive(Debug)]
pub struct Clook {
    table: RequestTable<()>,
    topo: Topology<(), ()>,
    sorted: SortList<u64>,
    head: u64,
    seq: u64,
}

impl Clook {
    /// No settings.
    pub fn new(_s: &mut Settings) -> Result<Self, SchedError> {
        Ok(Clook {
            table: RequestTable::new(),
            topo: Topology::new(()),
            sorted: SortList::default(),
            head: 0,
            seq: 0,
        })
    }
}

impl Scheduler for Clook {
    fn name(&self) -> &str {
        "clook"
    }
    fn set_device(&mut self, _device: DeviceInfo) {}
    topology_methods!(flows);
    fn add_request(&mut self, now: Time, req: Request) -> Result<(), SchedError> {
        check_time(now)?;
        let idx = self.table.admit(&mut self.topo, now, req, ())?;
        self.seq += 1;
        self.sorted.insert(req.sector, self.seq, idx);
        Ok(())
    }
    fn dispatch(&mut self, now: Time) -> Dispatch {
        if let Some(d) = dispatch_past_end(now, self.queued()) {
            return d;
        }
        match clook_pick(&self.sorted, self.head) {
            Some((sector, seq, idx)) => {
                self.sorted.remove(sector, seq);
                let r = self.table.dispatch(now, idx);
                self.head = r.end();
                Dispatch::Request(r)
            }
            None => Dispatch::Empty,
        }
    }
}
