//! Flash (SSD) model: what a
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
//!   complete when buffered in the device's `write_buffer`; their programs
//!   then occupy the units, back to back (`coalesce_writes`, the default:
//!   appended to open pages in arrival order, each full page programmed
//!   on the next unit in turn, as a page-mapping FTL does; otherwise each
//!   write programs the pages its addresses map to). With the buffer full, a write
//!   completes once enough of the buffer has been programmed, so sustained
//!   writes run at the units' program rate.
//! - Reads go before buffered programs (the controller schedules host reads
//!   first): a read waits for the program in progress on its unit, if any,
//!   and pushes the rest of the unit's program backlog back by its own
//!   time. (Without this, a read waited behind the whole backlog of
//!   buffered writes: seconds with an unbounded buffer.)
//! - At most `queue_depth` commands are outstanding (the host queue); so
//!   throughput grows with outstanding requests until a resource saturates.
//!
//! Resources are reserved in command arrival order, so a command's
//! completion time is known when it arrives. The program backlog a read
//! pushes back is not re-checked against the buffer: writes that arrived
//! before the read keep their completion times.

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
    units: Vec<Unit>,
    /// Pages of the write buffer per unit.
    buffer_pages: u64,
    ctrl_free: Time,
    bus_free: Time,
    done: BinaryHeap<Reverse<(Time, u64, ReqId)>>,
    seq: u64,
    /// Written bytes in the open page (`coalesce_writes`).
    open_bytes: u64,
    /// The unit the open page will be programmed on.
    next_unit: usize,
}

/// One flash unit (a die): its reads, then its programs.
#[derive(Clone, Copy, Debug, Default)]
struct Unit {
    /// When the reads queued on it are done.
    read_free: Time,
    /// When its backlog of programs is done.
    prog_end: Time,
    /// Its programs run back to back from here (a program boundary).
    prog_anchor: Time,
}

impl Unit {
    /// A page read arriving at `at`: it waits for earlier reads and for
    /// the program in progress, then pushes the program backlog back.
    /// Returns when the read is done.
    fn read(&mut self, at: Time, read: Time, program: Time) -> Time {
        let mut s = at.max(self.read_free);
        if self.prog_end > s && s > self.prog_anchor {
            // A program is in progress: it ends at the next boundary.
            let k = (s - self.prog_anchor).div_ceil(program.max(1));
            s = (self.prog_anchor + k * program).min(self.prog_end);
        }
        let end = s + read;
        self.read_free = end;
        if self.prog_end > s {
            let resume = end.max(self.prog_anchor);
            self.prog_end += resume - self.prog_anchor.max(s);
            self.prog_anchor = resume;
        }
        end
    }

    /// A page program whose data is buffered at `at`. Returns when it is
    /// done.
    fn program(&mut self, at: Time, program: Time) -> Time {
        if self.prog_end <= at {
            self.prog_anchor = at.max(self.read_free);
            self.prog_end = self.prog_anchor;
        }
        self.prog_end += program;
        self.prog_end
    }
}

impl Flash {
    /// Builds the device.
    pub fn new(p: FlashParams) -> Flash {
        let units = u64::from(p.channels.max(1)) * u64::from(p.dies.max(1));
        let page = p.page_size.max(SECTOR_BYTES);
        Flash {
            capacity: (p.capacity / SECTOR_BYTES).max(1),
            units: vec![Unit::default(); units as usize],
            buffer_pages: (p.write_buffer / page / units).max(1),
            ctrl_free: 0,
            bus_free: 0,
            done: BinaryHeap::new(),
            seq: 0,
            open_bytes: 0,
            next_unit: 0,
            p,
        }
    }

    /// The parameters.
    pub fn params(&self) -> &FlashParams {
        &self.p
    }

    /// A buffered write of `bytes` at `arrived`, appended to the open page
    /// (`coalesce_writes`): each page it fills is programmed on the next
    /// unit in turn. Returns when the write is buffered: at most
    /// `buffer_pages` programs, its own included, left on each unit it
    /// filled a page on, or on the unit of the page it is still in.
    fn write_coalesced(&mut self, arrived: Time, bytes: u64, ahead: Time) -> Time {
        let page = self.p.page_size.max(SECTOR_BYTES);
        let program = self.p.program_latency;
        let total = self.open_bytes + bytes;
        self.open_bytes = total % page;
        let mut buffered = arrived;
        for _ in 0..total / page {
            let done = self.units[self.next_unit].program(arrived, program);
            buffered = buffered.max(done.saturating_sub(ahead));
            self.next_unit = (self.next_unit + 1) % self.units.len();
        }
        let open = self.units[self.next_unit].prog_end;
        buffered.max(open.saturating_sub(ahead))
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
            rotational: self.p.reports_rotational,
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
        let units = self.units.len() as u64;
        let (read, program) = (self.p.read_latency, self.p.program_latency);
        let mut t_done = start;
        let fin = match r.op {
            Op::Read => {
                for lpn in first..=last {
                    let u = &mut self.units[(lpn % units) as usize];
                    t_done = t_done.max(u.read(start, read, program));
                }
                self.bus_free = self.bus_free.max(t_done) + self.bus_time(bytes);
                self.bus_free
            }
            Op::Write => {
                self.bus_free = self.bus_free.max(start) + self.bus_time(bytes);
                let arrived = self.bus_free;
                // Buffered once at most `buffer_pages` programs, its own
                // included, are left on each of its units.
                let ahead = self.buffer_pages * program;
                if self.p.coalesce_writes {
                    self.write_coalesced(arrived, bytes, ahead)
                } else {
                    let mut buffered = arrived;
                    for lpn in first..=last {
                        let u = &mut self.units[(lpn % units) as usize];
                        let done = u.program(arrived, program);
                        buffered = buffered.max(done.saturating_sub(ahead));
                    }
                    buffered
                }
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
