//! Flash (SSD) model (reference/device-models.md, "Flash"): what a
//! scheduler study needs — parallel units, an internal queue, read/program
//! latency asymmetry — and no FTL.
//!
//! - The controller takes commands one after the other, `cmd_overhead`
//!   each (this bounds small random IOPS).
//! - A command touches the flash pages its sectors map to; page `lpn`
//!   lives on unit `lpn % (channels * dies)` (static striping). Each unit
//!   does one page operation at a time: `read_latency` or
//!   `program_latency`.
//! - Read data then crosses the host interface (`bus_rate`, shared), which
//!   bounds sequential throughput. Writes cross the interface first and
//!   complete when buffered; their programs still occupy the units.
//! - At most `queue_depth` commands are outstanding (the host queue); so
//!   throughput grows with outstanding requests until a resource saturates.
//!
//! Resources are reserved in command arrival order, so a command's
//! completion time is known when it arrives.

use super::{DevRequest, Device};
use bfq_core::{DeviceInfo, Op, ReqId, Time, SECTOR_BYTES};
use bfq_scenario::device::FlashParams;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A flash device (see the module documentation).
#[derive(Debug)]
pub struct Flash {
    p: FlashParams,
    capacity: u64,
    unit_free: Vec<Time>,
    ctrl_free: Time,
    bus_free: Time,
    done: BinaryHeap<Reverse<(Time, u64, ReqId)>>,
    seq: u64,
}

impl Flash {
    /// Builds the device.
    pub fn new(p: FlashParams) -> Flash {
        let units = (p.channels.max(1) * p.dies.max(1)) as usize;
        Flash {
            capacity: (p.capacity / SECTOR_BYTES).max(1),
            unit_free: vec![0; units],
            ctrl_free: 0,
            bus_free: 0,
            done: BinaryHeap::new(),
            seq: 0,
            p,
        }
    }

    /// The parameters.
    pub fn params(&self) -> &FlashParams {
        &self.p
    }

    fn bus_time(&self, bytes: u64) -> Time {
        (bytes as f64 / (self.p.bus_rate * 1e-3)).round() as Time
    }
}

impl Device for Flash {
    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            queue_depth: self.p.queue_depth.max(1),
            queues_internally: true,
            rotational: false,
        }
    }

    fn capacity_sectors(&self) -> u64 {
        self.capacity
    }

    fn submit(&mut self, now: Time, r: DevRequest) {
        let bytes = u64::from(r.sectors.max(1)) * SECTOR_BYTES;
        let start = now.max(self.ctrl_free) + self.p.cmd_overhead;
        self.ctrl_free = start;
        let page = self.p.page_size.max(SECTOR_BYTES);
        let first = r.sector * SECTOR_BYTES / page;
        let last = (r.sector * SECTOR_BYTES + bytes - 1) / page;
        let units = self.unit_free.len() as u64;
        let mut t_done = start;
        let fin = match r.op {
            Op::Read => {
                for lpn in first..=last {
                    let u = (lpn % units) as usize;
                    let s = start.max(self.unit_free[u]);
                    self.unit_free[u] = s + self.p.read_latency;
                    t_done = t_done.max(self.unit_free[u]);
                }
                self.bus_free = self.bus_free.max(t_done) + self.bus_time(bytes);
                self.bus_free
            }
            Op::Write => {
                self.bus_free = self.bus_free.max(start) + self.bus_time(bytes);
                let arrived = self.bus_free;
                for lpn in first..=last {
                    let u = (lpn % units) as usize;
                    let s = arrived.max(self.unit_free[u]);
                    self.unit_free[u] = s + self.p.program_latency;
                }
                arrived
            }
        };
        self.seq += 1;
        self.done.push(Reverse((fin, self.seq, r.id)));
    }

    fn next_event(&self) -> Option<Time> {
        self.done.peek().map(|r| r.0 .0)
    }

    fn advance(&mut self, now: Time, done: &mut Vec<(Time, ReqId)>) {
        while let Some(Reverse((t, _, id))) = self.done.peek().copied() {
            if t > now {
                break;
            }
            self.done.pop();
            done.push((t, id));
        }
    }

    fn in_flight(&self) -> usize {
        self.done.len()
    }
}
