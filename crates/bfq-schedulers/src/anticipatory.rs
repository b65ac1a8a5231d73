//! `as` and `as-prio`: the anticipatory scheduler.
//!
//! `as` follows Linux 2.6.21 `block/as-iosched.c` (Iyer & Druschel's
//! anticipatory scheduling as Nick Piggin implemented it): per direction
//! (sync, async) a sector-sorted list and a FIFO with expiry; a one-way
//! elevator with limited, penalised backward seeks; batches of one
//! direction limited in time; the previous batch drains before the other
//! direction starts; and anticipation: after a sync request completes, the
//! disk is kept idle up to `antic_expire` for the same process's next
//! request unless the process's think time is too long, or a request close
//! to the head (or closer than the process usually seeks) is available.
//!
//! `as-prio` is the same core with I/O priorities, as in "Anticipatory
//! scheduler with I/O priorities" Section 3: sort and FIFO lists per
//! priority band (class x level), a batch serves one band in one direction
//! while the band has requests in that direction and tokens left, a lower
//! priority request waits while the scheduler anticipates a higher priority
//! one, a higher-priority arrival breaks the anticipation (and ends the
//! batch while its band has tokens left: a band out of tokens waits for
//! the lower bands' batches, so that they do not starve), FIFO expiry only interrupts batches of its own band, merges only
//! within a band.
//!
//! Choices where the sources are vague (see docs/schedulers.md):
//! - no adaptive write batch count (`write_batch_expire` in time only);
//! - a process without think-time samples is anticipated on (Linux uses the
//!   mean of new processes and exit statistics instead);
//! - as-prio bands are `class * 8 + level` (RT before BE before IDLE);
//!   tokens per band come from its level (`tokens_L`, default
//!   `4 * (8 - L)`: 32 for level 0 ... 4 for level 7) and are all refilled
//!   when no band with requests has tokens left.

use crate::util::{
    choose_req, dispatch_pending, dispatch_unit, ensure, linked_by_field, merge_or_head,
    topology_methods, MergeLink, Merger, SortList,
};
use bfq_core::table::{check_time, dispatch_past_end, RequestTable, SlotIdx, Topology};
use bfq_core::{
    DeviceInfo, Dispatch, FlowId, FlowSpec, Op, ReqId, Request, SchedError, Scheduler, Settings,
    Time, MS, SEC,
};
use std::collections::VecDeque;

const SYNC: usize = 0;
const ASYNC: usize = 1;

fn dir_of(r: &Request) -> usize {
    if r.sync || r.op == Op::Read {
        SYNC
    } else {
        ASYNC
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Extra {
    link: MergeLink,
    seq: u64,
    expire: Time,
    band: u8,
}

linked_by_field!(Extra);

/// Per-process history (the kernel's `as_io_context`).
#[derive(Clone, Debug, Default)]
struct AsFlow {
    band: u8,
    retired: bool,
    nr_queued: u32,
    nr_dispatched: u32,
    io_started: bool,
    completed_any: bool,
    last_end_request: Time,
    last_request_pos: u64,
    ttime_samples: u64,
    ttime_total: u64,
    ttime_mean: Time,
    seek_samples: u64,
    seek_total: u64,
    seek_mean: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Antic {
    Off,
    WaitReq,
    WaitNext,
    Finished,
}

#[derive(Debug, Default)]
struct Band {
    sort: [SortList<u64>; 2],
    fifo: [VecDeque<(SlotIdx, u32)>; 2],
}

/// The anticipatory scheduler, with or without priorities.
#[derive(Debug)]
pub struct Anticipatory {
    prio: bool,
    table: RequestTable<Extra>,
    topo: Topology<(), ()>,
    merger: Merger,
    flows: Vec<AsFlow>,
    bands: Vec<Band>,
    /// Queued units per band and direction.
    units: Vec<[u32; 2]>,
    units_dir: [u32; 2],
    tokens: Vec<u32>,
    tokens_full: [u32; 8],
    /// When each band's FIFO of each direction was last checked for an
    /// expired request (`last_check_fifo`).
    last_check_fifo: Vec<[Time; 2]>,
    // Tunables.
    fifo_expire: [Time; 2],
    batch_expire: [Time; 2],
    antic_expire: Time,
    back_max: u64,
    back_penalty: u64,
    // State.
    seq: u64,
    last_sector: [u64; 2],
    batch_dir: usize,
    batch_band: usize,
    changed_batch: bool,
    new_batch: bool,
    batch_expires: Time,
    nr_dispatched: u32,
    antic: Antic,
    antic_start: Time,
    antic_ctx: Option<FlowId>,
    ioc_finished: bool,
    new_seek_total: u64,
    new_seek_mean: u64,
}

const BANDS: usize = 24;

impl Anticipatory {
    /// Settings: `read_expire` (125 ms), `write_expire` (250 ms),
    /// `read_batch_expire` (500 ms), `write_batch_expire` (125 ms),
    /// `antic_expire` (6 ms; 0 disables anticipation), `back_seek_max`
    /// (1048576 sectors), `back_seek_penalty` (2), `max_sectors` (1024);
    /// with `prio`: `tokens_0` .. `tokens_7`.
    pub fn new(s: &mut Settings, prio: bool) -> Result<Self, SchedError> {
        let mut tokens_full = [0u32; 8];
        if prio {
            for (l, t) in tokens_full.iter_mut().enumerate() {
                *t = s.u64_in(&format!("tokens_{l}"), 4 * (8 - l as u64), 1, 1 << 20)? as u32;
            }
        }
        let nb = if prio { BANDS } else { 1 };
        Ok(Anticipatory {
            prio,
            table: RequestTable::new(),
            topo: Topology::new(()),
            merger: Merger::new(s.u64_in(
                "max_sectors",
                crate::noop::DEFAULT_MAX_SECTORS,
                0,
                crate::noop::MAX_SECTORS_LIMIT,
            )?),
            flows: Vec::new(),
            bands: (0..nb).map(|_| Band::default()).collect(),
            units: vec![[0; 2]; nb],
            units_dir: [0; 2],
            tokens: (0..nb).map(|b| tokens_full[b % 8]).collect(),
            tokens_full,
            last_check_fifo: vec![[0; 2]; nb],
            fifo_expire: [
                s.duration("read_expire", 125 * MS)?,
                s.duration("write_expire", 250 * MS)?,
            ],
            batch_expire: [
                s.duration("read_batch_expire", 500 * MS)?,
                s.duration("write_batch_expire", 125 * MS)?,
            ],
            antic_expire: s.duration("antic_expire", 6 * MS)?,
            back_max: s.u64_in("back_seek_max", 1 << 20, 0, 1 << 40)?,
            back_penalty: s.u64_in("back_seek_penalty", 2, 1, 1 << 20)?,
            seq: 0,
            last_sector: [0; 2],
            batch_dir: SYNC,
            batch_band: 0,
            changed_batch: false,
            new_batch: false,
            batch_expires: 0,
            nr_dispatched: 0,
            antic: Antic::Off,
            antic_start: 0,
            antic_ctx: None,
            ioc_finished: false,
            new_seek_total: 0,
            new_seek_mean: 0,
        })
    }

    fn band_of(&self, spec: &FlowSpec) -> u8 {
        if self.prio {
            spec.prio.class as u8 * 8 + spec.prio.level.min(7)
        } else {
            0
        }
    }

    fn fifo_head(&mut self, b: usize, d: usize) -> Option<SlotIdx> {
        while let Some(&(idx, gen)) = self.bands[b].fifo[d].front() {
            if self.table.is_queued(idx, gen) {
                return Some(idx);
            }
            self.bands[b].fifo[d].pop_front();
        }
        None
    }

    /// `as_fifo_expired`: the FIFO head of band `b`, direction `d`, when it
    /// has expired. Checked at most once per `fifo_expire` period (Linux
    /// 2.6.21: otherwise "a large number of expired requests would create
    /// a hopeless seekstorm"), so an expired request rescues its process
    /// and anticipation keeps that process going until the next check.
    /// With priorities each level's FIFOs keep their own period ("As
    /// before, the read and write FIFO expiration times are checked ...",
    /// Section 3).
    fn fifo_expired(&mut self, b: usize, d: usize, now: Time) -> Option<SlotIdx> {
        let last = &mut self.last_check_fifo[b][d];
        if now.abs_diff(*last) < self.fifo_expire[d] {
            return None;
        }
        *last = now;
        let h = self.fifo_head(b, d)?;
        (self.table.slot(h).extra.expire <= now).then_some(h)
    }

    /// `as_choose_req` between the request ahead of the head and the one
    /// behind it, in band `b`, direction `d`.
    fn next_rq(&self, b: usize, d: usize) -> Option<SlotIdx> {
        choose_req(
            &self.bands[b].sort[d],
            self.last_sector[d],
            self.back_max,
            self.back_penalty,
        )
    }

    fn antic_deadline(&self) -> Time {
        self.antic_start.saturating_add(self.antic_expire)
    }

    /// `as_close_req`.
    fn close_req(&self, f: &AsFlow, r: &Request, now: Time) -> bool {
        let delay_ms = if self.antic == Antic::Off || !self.ioc_finished {
            0
        } else {
            now.saturating_sub(self.antic_start) / MS
        };
        let delta: u64 = if delay_ms == 0 {
            8192
        } else if delay_ms <= 20 && delay_ms * MS <= self.antic_expire {
            8192 << delay_ms
        } else {
            return true;
        };
        let last = self.last_sector[self.batch_dir];
        let next = r.sector;
        // Saturating: requests may end at the last sector of u64.
        if last <= next.saturating_add(delta / 2) && next <= last.saturating_add(delta) {
            return true;
        }
        let s = last.abs_diff(next);
        if f.seek_samples == 0 {
            self.new_seek_mean > s
        } else {
            f.seek_mean > s
        }
    }

    /// `as_can_break_anticipation`, with the as-prio rules.
    fn can_break(&self, rq: Option<SlotIdx>, now: Time) -> bool {
        let Some(ctx) = self.antic_ctx else {
            return true;
        };
        let r = rq.map(|i| (self.table.slot(i).req, self.table.slot(i).extra.band));
        if let Some((r, _)) = r {
            if r.flow == ctx {
                return true;
            }
        }
        if self.ioc_finished && now >= self.antic_deadline() {
            return true;
        }
        let f = &self.flows[ctx.index()];
        if f.retired || f.nr_queued > 0 || f.nr_dispatched > 0 {
            return true;
        }
        if let Some((r, band)) = r {
            if self.prio && band < f.band {
                return true;
            }
            let same_level = !self.prio || band == f.band;
            if same_level && dir_of(&r) == SYNC && self.close_req(f, &r, now) {
                return true;
            }
        }
        f.ttime_samples > 0 && f.ttime_mean > self.antic_expire
    }

    fn on_dispatch(&mut self, r: &Request) {
        let f = &mut self.flows[r.flow.index()];
        f.nr_queued -= 1;
        f.nr_dispatched += 1;
        self.nr_dispatched += 1;
    }

    /// `as_move_to_dispatch`.
    fn move_to_dispatch(&mut self, now: Time, idx: SlotIdx) -> Request {
        let (r, e) = (self.table.slot(idx).req, self.table.slot(idx).extra);
        let d = dir_of(&r);
        let b = e.band as usize;
        self.antic = Antic::Off;
        self.antic_ctx = (d == SYNC).then_some(r.flow);
        self.ioc_finished = false;
        self.last_sector[d] = self.table.slot(e.link.tail).req.end();
        self.bands[b].sort[d].remove(r.sector, e.seq);
        self.units[b][d] -= 1;
        self.units_dir[d] -= 1;
        if self.prio {
            self.tokens[b] = self.tokens[b].saturating_sub(1);
        }
        let r = dispatch_unit(&mut self.table, &mut self.merger, now, idx, b as u32);
        self.on_dispatch(&r);
        r
    }

    fn band_has_work(&self, b: usize) -> bool {
        self.units[b][SYNC] + self.units[b][ASYNC] > 0
    }

    /// The best band with work and tokens (refilling when none has).
    fn pick_band(&mut self) -> Option<usize> {
        if !self.prio {
            return self.band_has_work(0).then_some(0);
        }
        let find = |s: &Self| (0..BANDS).find(|&b| s.band_has_work(b) && s.tokens[b] > 0);
        if let Some(b) = find(self) {
            return Some(b);
        }
        for b in 0..BANDS {
            self.tokens[b] = self.tokens_full[b % 8];
        }
        find(self)
    }

    fn batch_expired(&self, now: Time) -> bool {
        !self.changed_batch && !self.new_batch && now > self.batch_expires
    }

    /// `as_dispatch_request`: the current batch goes on until it ends and
    /// others wait, then a new batch starts.
    fn do_dispatch(&mut self, now: Time) -> Dispatch {
        if let Some(r) = self.before_batch(now) {
            return r;
        }
        let total = self.units_dir[SYNC] + self.units_dir[ASYNC];
        let (b, d) = (self.batch_band, self.batch_dir);
        let others = total > self.units[b][d];
        if !(others && self.batch_ends(now)) {
            if let Some(r) = self.dispatch_in_batch(now, others) {
                return r;
            }
        }
        self.start_new_batch(now, total)
    }

    /// What comes before the current batch: a pending merged request, an
    /// empty queue, an anticipation still running (`as_dispatch_request`'s
    /// antic states), or a direction change waiting for the requests
    /// in flight to drain. None: the batch may go on.
    fn before_batch(&mut self, now: Time) -> Option<Dispatch> {
        if let Some(r) = dispatch_pending(&mut self.table, &mut self.merger, now) {
            self.on_dispatch(&r);
            return Some(Dispatch::Request(r));
        }
        if self.table.queued() == 0 {
            return Some(Dispatch::Empty);
        }
        match self.antic {
            Antic::WaitNext if now >= self.antic_deadline() => self.antic = Antic::Finished,
            Antic::WaitNext => {
                return Some(Dispatch::Idle {
                    until: self.antic_deadline(),
                })
            }
            Antic::WaitReq => return Some(Dispatch::Wait),
            _ => {}
        }
        if self.changed_batch {
            if self.nr_dispatched > 0 {
                return Some(Dispatch::Wait);
            }
            self.changed_batch = false;
            self.start_batch_clock(now);
        }
        None
    }

    /// Whether the current batch ends (when other requests wait): its time
    /// is up, or, with priorities, its band is out of tokens or a higher
    /// band has work and tokens.
    fn batch_ends(&self, now: Time) -> bool {
        let b = self.batch_band;
        let mut end_batch = self.batch_expired(now);
        if self.prio {
            end_batch |=
                self.tokens[b] == 0 || (0..b).any(|h| self.band_has_work(h) && self.tokens[h] > 0);
        }
        end_batch
    }

    /// The next request of the current batch (a FIFO-expired one first),
    /// or anticipation of the last sync request's process when the next
    /// one is not worth breaking it for; None when the batch has no
    /// request left. `others`: requests wait outside the batch.
    fn dispatch_in_batch(&mut self, now: Time, others: bool) -> Option<Dispatch> {
        let (b, d) = (self.batch_band, self.batch_dir);
        let rq = self.next_rq(b, d);
        if d == SYNC && self.antic_expire > 0 {
            if let Some(h) = self.fifo_expired(b, d, now) {
                return Some(Dispatch::Request(self.move_to_dispatch(now, h)));
            }
            if self.antic_ctx.is_some() && self.antic != Antic::Finished {
                if !self.can_break(rq, now) {
                    return Some(self.antic_wait());
                }
                self.antic = Antic::Finished;
            }
        }
        let idx = rq?;
        if !others {
            self.batch_expires = now + self.batch_expire[d];
        }
        let idx = self.fifo_expired(b, d, now).unwrap_or(idx);
        Some(Dispatch::Request(self.move_to_dispatch(now, idx)))
    }

    /// Starts a new batch in the best band with work (and tokens): the
    /// other direction when both have requests, from the direction's
    /// FIFO head; a direction change first waits for the requests in
    /// flight to drain. `total`: requests queued.
    fn start_new_batch(&mut self, now: Time, total: u32) -> Dispatch {
        let Some(nb) = self.pick_band() else {
            return if total == 0 {
                Dispatch::Empty
            } else {
                Dispatch::Wait
            };
        };
        let has = self.units[nb];
        let nd = if has[SYNC] > 0 && has[ASYNC] > 0 {
            if self.batch_dir == SYNC {
                ASYNC
            } else {
                SYNC
            }
        } else if has[SYNC] > 0 {
            SYNC
        } else {
            ASYNC
        };
        if nd != self.batch_dir {
            self.changed_batch = true;
        }
        self.batch_dir = nd;
        self.batch_band = nb;
        let head = self
            .fifo_head(nb, nd)
            .expect("band has work in this direction");
        self.last_check_fifo[nb][nd] = now;
        if self.changed_batch {
            if self.nr_dispatched > 0 {
                return Dispatch::Wait;
            }
            self.changed_batch = false;
        }
        self.start_batch_clock(now);
        Dispatch::Request(self.move_to_dispatch(now, head))
    }

    fn start_batch_clock(&mut self, now: Time) {
        if self.batch_dir == ASYNC {
            self.batch_expires = now + self.batch_expire[ASYNC];
        } else {
            self.new_batch = true;
        }
    }

    /// `as_antic_waitreq`.
    fn antic_wait(&mut self) -> Dispatch {
        if self.antic == Antic::Off {
            if self.ioc_finished {
                self.antic = Antic::WaitNext;
            } else {
                self.antic = Antic::WaitReq;
                return Dispatch::Wait;
            }
        }
        Dispatch::Idle {
            until: self.antic_deadline(),
        }
    }

    /// `as_update_iohist` for a new request.
    fn update_history(&mut self, now: Time, r: &Request) {
        if dir_of(r) != SYNC {
            return;
        }
        let f = &mut self.flows[r.flow.index()];
        if f.io_started {
            let in_flight = f.nr_queued + f.nr_dispatched;
            let think = if f.completed_any && in_flight == 0 {
                now.saturating_sub(f.last_end_request).min(SEC)
            } else {
                0
            };
            f.ttime_samples = (7 * f.ttime_samples + 256) / 8;
            f.ttime_total = (7 * f.ttime_total + 256 * think) / 8;
            f.ttime_mean = (f.ttime_total + 128) / f.ttime_samples;
            // Capped at 2^40 sectors (512 TiB): every longer seek is far
            // alike, and the scaled sums below stay in u64.
            let mut sdist = r.sector.abs_diff(f.last_request_pos).min(1 << 40);
            if f.seek_samples == 0 {
                self.new_seek_total = (7 * self.new_seek_total + 256 * sdist) / 8;
                self.new_seek_mean = self.new_seek_total / 256;
            }
            let cap = if f.seek_samples <= 60 {
                f.seek_mean * 4 + 2 * 1024 * 1024
            } else {
                f.seek_mean * 4 + 2 * 1024 * 64
            };
            sdist = sdist.min(cap);
            f.seek_samples = (7 * f.seek_samples + 256) / 8;
            f.seek_total = (7 * f.seek_total + 256 * sdist) / 8;
            f.seek_mean = (f.seek_total + f.seek_samples / 2) / f.seek_samples;
        }
        f.last_request_pos = r.end();
        f.io_started = true;
    }
}

impl Scheduler for Anticipatory {
    fn name(&self) -> &str {
        if self.prio {
            "as-prio"
        } else {
            "as"
        }
    }
    fn set_device(&mut self, _device: DeviceInfo) {}
    topology_methods!();
    fn add_flow(&mut self, now: Time, spec: FlowSpec) -> Result<FlowId, SchedError> {
        check_time(now)?;
        let id = self.topo.add_flow(spec, ())?;
        ensure(&mut self.flows, id.index());
        self.flows[id.index()] = AsFlow {
            band: self.band_of(&spec),
            ..AsFlow::default()
        };
        Ok(id)
    }
    fn remove_flow(&mut self, now: Time, flow: FlowId) -> Result<(), SchedError> {
        check_time(now)?;
        self.topo.retire_flow(flow)?;
        self.flows[flow.index()].retired = true;
        Ok(())
    }
    fn add_request(&mut self, now: Time, req: Request) -> Result<(), SchedError> {
        check_time(now)?;
        self.topo.check_flow(req.flow)?;
        let band = self.flows[req.flow.index()].band;
        let idx = self.table.insert(
            now,
            req,
            Extra {
                band,
                ..Extra::default()
            },
        )?;
        self.topo.hold(req.flow)?;
        self.update_history(now, &req);
        self.flows[req.flow.index()].nr_queued += 1;
        if !merge_or_head(&mut self.table, &mut self.merger, idx, u32::from(band)) {
            self.seq += 1;
            let d = dir_of(&req);
            let b = band as usize;
            let gen = self.table.slot(idx).gen;
            let e = &mut self.table.slot_mut(idx).extra;
            e.seq = self.seq;
            e.expire = now.saturating_add(self.fifo_expire[d]);
            self.bands[b].sort[d].insert(req.sector, self.seq, idx);
            self.bands[b].fifo[d].push_back((idx, gen));
            self.units[b][d] += 1;
            self.units_dir[d] += 1;
        }
        if matches!(self.antic, Antic::WaitReq | Antic::WaitNext) && self.can_break(Some(idx), now)
        {
            self.antic = Antic::Finished;
        }
        Ok(())
    }
    fn dispatch(&mut self, now: Time) -> Dispatch {
        if let Some(d) = dispatch_past_end(now, self.queued()) {
            return d;
        }
        self.do_dispatch(now)
    }
    fn complete(&mut self, now: Time, id: ReqId) -> Result<(), SchedError> {
        check_time(now)?;
        let slot = self.table.complete(id)?;
        let r = slot.req;
        self.topo.release(r.flow);
        self.nr_dispatched -= 1;
        let f = &mut self.flows[r.flow.index()];
        f.nr_dispatched -= 1;
        f.last_end_request = now;
        f.completed_any = true;
        if self.changed_batch && self.nr_dispatched == 0 {
            self.changed_batch = false;
            self.start_batch_clock(now);
        }
        if self.new_batch && self.batch_dir == dir_of(&r) {
            self.batch_expires = now + self.batch_expire[self.batch_dir];
            self.new_batch = false;
        }
        if self.antic_ctx == Some(r.flow) {
            self.antic_start = now;
            self.ioc_finished = true;
            if self.antic == Antic::WaitReq {
                self.antic = Antic::WaitNext;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(id: u64, flow: FlowId, sector: u64) -> Request {
        Request {
            id,
            flow,
            sector,
            sectors: 8,
            op: Op::Read,
            sync: true,
        }
    }

    /// Three reads queued at 0, all expired by 200 ms: the first decision
    /// checks the FIFO and serves its head; the next ones, within the same
    /// `read_expire` period, follow the elevator (6000 before 9000) instead
    /// of the FIFO (9000 before 6000), as Linux's rate-limited check does;
    /// once the period has passed the FIFO is checked again.
    #[test]
    fn the_fifo_is_checked_once_per_expire_period() {
        for prio in [false, true] {
            let mut s = Settings::from_pairs([("antic_expire", "0")]);
            let mut a = Anticipatory::new(&mut s, prio).unwrap();
            let f = a.add_flow(0, FlowSpec::default()).unwrap();
            for (id, sector) in [(1, 5000), (2, 9000), (3, 6000)] {
                a.add_request(0, read(id, f, sector)).unwrap();
            }
            let now = 200 * MS;
            let mut order = vec![];
            while let Dispatch::Request(r) = a.dispatch(now) {
                order.push(r.id);
                a.complete(now, r.id).unwrap();
            }
            assert_eq!(order, vec![1, 3, 2], "prio {prio}");
            // A period later the FIFO is checked again: the expired 1000
            // goes before the elevator's next, 9500.
            for (id, sector) in [(4, 1000), (5, 9500)] {
                a.add_request(now, read(id, f, sector)).unwrap();
            }
            let later = now + 140 * MS;
            let mut order = vec![];
            while let Dispatch::Request(r) = a.dispatch(later) {
                order.push(r.id);
                a.complete(later, r.id).unwrap();
            }
            assert_eq!(order, vec![4, 5], "prio {prio}");
        }
    }
}
