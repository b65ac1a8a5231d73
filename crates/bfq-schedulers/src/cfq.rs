//! `cfq`: Completely Fair Queueing, as in Linux 2.6.2x-2.6.34
//! (`block/cfq-iosched.c`), the CFQ the 2010 and 2014 papers measured.
//!
//! - One sync queue per flow (process); async requests go to queues shared
//!   by all flows of the same class and level.
//! - Busy queues wait on one round-robin service tree per class (RT, BE,
//!   IDLE; strictly in that order). A queue is keyed by the time it joined
//!   plus an offset that lets higher priorities in earlier
//!   (`(busy - 1) * (slice(level 0) - slice(level))`).
//! - The queue in service owns the disk for a time slice,
//!   `slice + slice / 5 * (4 - level)` with `slice_sync` (100 ms) for sync
//!   queues and `slice_async` (40 ms) for async ones; the slice starts at
//!   the queue's first completion. An async queue also stops after
//!   `2 * (slice_async_rq + slice_async_rq * (7 - level))` requests.
//! - Within a queue: a sector-sorted list served by the elevator with
//!   penalised backward seeks (`back_seek_max`, `back_seek_penalty`), and a
//!   FIFO (`fifo_expire_sync` 125 ms, `fifo_expire_async` 250 ms) checked
//!   once per slice.
//! - When the sync queue in service runs empty, the disk idles up to
//!   `slice_idle` (8 ms; 2 ms for a seeky queue) for its next request, if
//!   the process's mean think time is below `slice_idle` and the rest of
//!   the slice covers it. No idling when the device queues internally
//!   (the 2014 report, Section 5).
//! - Preemption: an RT request preempts a BE/IDLE queue, a sync request an
//!   async queue, anything an IDLE queue.
//! - The IDLE class is served only after `idle_grace` (100 ms) without
//!   other completions.
//! - `low_latency` (2.6.32+, on by default): slices shrink so that the
//!   busy sync queues of a class fit in `target_latency` (300 ms), never
//!   below `2 * slice_idle` scaled by level; and async queues may keep only
//!   as many requests in flight as whole `slice_sync`s have passed since
//!   the last *delayed* sync completion, one that came at least
//!   `fifo_expire_sync` after its request was queued (at least one when
//!   none is in flight). That is 2.6.33's rule (`last_delayed_sync`, the
//!   kernel the 2014 report ran was 2.6.34); 2.6.32 counted from any sync
//!   completion, which keeps a stream of sync reads from ever letting more
//!   than one async request through.
//!
//! - Workload types (2.6.33+, `workloads`, on in `cfq`): see
//!   [`Workload`]. Within a class the busy queues wait on three service
//!   trees (ASYNC, SYNC_NOIDLE, SYNC) and one of them, the serving
//!   workload, is served for a workload slice before the next is chosen.
//!
//! Groups (the blkio controller of 2.6.33) are not modelled: all flows
//! share the root group.

use crate::util::{choose_req, topology_methods, IoStats, SortList};
use bfq_core::settings::MAX_DURATION;
use bfq_core::table::{check_time, dispatch_past_end, RequestTable, SlotIdx, Topology};
use bfq_core::{
    DeviceInfo, Dispatch, FlowId, FlowSpec, IoClass, Op, ReqId, Request, SchedError, Scheduler,
    Settings, Time, MS, SEC,
};
use std::collections::{BTreeSet, VecDeque};

/// CFQ's workload types (Linux 2.6.33+, `wl_type_t`; the 2014 report ran
/// 2.6.34). A queue's type is fixed when it joins a service tree: async
/// queues are ASYNC, sync queues with an idle window ([`Cfq`]'s
/// `idle_window`) SYNC, other sync queues SYNC_NOIDLE.
///
/// - Choice (`cfq_choose_wl`): when the serving workload's slice has
///   passed or its tree is empty, the tree whose first queue has the
///   lowest key is served next (ties: ASYNC, SYNC_NOIDLE, SYNC; none busy:
///   SYNC_NOIDLE).
/// - Slice (`choose_service_tree`): `target_latency * n / max(busy_avg,
///   busy)`, `n` the queues of that type, `busy` those of the class
///   (`busy_avg` the decayed mean that `low_latency` keeps). ASYNC: at
///   most `target_latency * async queues / all busy queues`, then scaled by
///   `slice_async / slice_sync`; sync types: at least `2 * slice_idle`;
///   every slice at least [`MIN_WORKLOAD_SLICE`].
/// - The workload outlives its queues' slices: a queue that expires or is
///   preempted (a sync request preempts an async queue as before) leaves
///   the workload in service, and the next queue comes from the same tree
///   while it has queues and the workload slice lasts (2.6.34 saves and
///   restores the remaining workload slice at every queue expiry).
/// - Idling: a sync queue without an idle window is still idled for when
///   it is the last queue of its tree (`cfq_should_idle`), and a request
///   of a SYNC_NOIDLE queue preempts the SYNC_NOIDLE queue idling at the
///   end of that tree when the two are its only queues.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// Async queues (writes through the page cache).
    Async = 0,
    /// Sync queues that are not idled for (seeky or thinking too long).
    SyncNoidle = 1,
    /// Sync queues with an idle window.
    Sync = 2,
}

impl Workload {
    const ALL: [Workload; 3] = [Workload::Async, Workload::SyncNoidle, Workload::Sync];
}

/// Shortest workload slice (`CFQ_MIN_TT`, 2 jiffies; 2 ms at HZ = 1000).
pub const MIN_WORKLOAD_SLICE: Time = 2 * MS;

/// Service trees: three (one per [`Workload`]) for RT and for BE, one
/// for IDLE.
const TREES: usize = 7;
/// The IDLE class's tree.
const IDLE_TREE: usize = 6;

/// The tree of `class` and workload `wl`; without workload types every
/// queue of a class waits on the class's first tree.
fn tree_index(class: IoClass, wl: Workload, workloads: bool) -> usize {
    match class {
        IoClass::Idle => IDLE_TREE,
        c if workloads => 3 * cls(c) + wl as usize,
        c => 3 * cls(c),
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Extra {
    seq: u64,
    expire: Time,
    qid: u32,
}

#[derive(Debug)]
struct Queue {
    class: IoClass,
    level: u8,
    sync: bool,
    sort: SortList<u64>,
    fifo: VecDeque<(SlotIdx, u32)>,
    queued: u32,
    dispatched: u32,
    /// Tree and key while waiting on a service tree.
    tree_key: Option<(usize, u64, u64)>,
    /// The tree it last joined (still its tree while active).
    home: usize,
    /// `None` until the slice starts (first completion).
    slice_end: Option<Time>,
    slice_dispatch: u32,
    fifo_checked: bool,
    stats: IoStats,
    last_end_request: Time,
    last_pos: u64,
    started: bool,
}

impl Queue {
    fn new(class: IoClass, level: u8, sync: bool) -> Self {
        Queue {
            class,
            level,
            sync,
            sort: SortList::default(),
            fifo: VecDeque::new(),
            queued: 0,
            dispatched: 0,
            tree_key: None,
            home: 0,
            slice_end: None,
            slice_dispatch: 0,
            fifo_checked: false,
            stats: IoStats::default(),
            last_end_request: 0,
            last_pos: 0,
            started: false,
        }
    }
}

/// Samples needed before the think time counts (`sample_valid`: > 80/256).
const SAMPLE_VALID: u64 = 80;
/// Mean seek distance above which a queue is seeky (`CIC_SEEKY`).
const SEEKY: u64 = 8 * 1024;

/// Completely Fair Queueing.
#[derive(Debug)]
pub struct Cfq {
    table: RequestTable<Extra>,
    topo: Topology<(), ()>,
    /// The shared queues (RT and BE by level, IDLE: [`SHARED_QUEUES`]),
    /// then each flow's sync queue, at [`SHARED_QUEUES`] + its index.
    queues: Vec<Queue>,
    trees: [BTreeSet<(u64, u64, u32)>; TREES],
    active: Option<u32>,
    idle_until: Option<Time>,
    busy: [u32; 3],
    busy_avg: [u32; 3],
    tree_seq: u64,
    seq: u64,
    last_pos: u64,
    sync_flight: u32,
    last_end_nonidle: Time,
    /// Last sync completion that came `fifo_expire_sync` or more after its
    /// request was queued (2.6.33 `last_delayed_sync`; none yet: the kernel
    /// starts it 1 s before the queue was set up).
    last_delayed_sync: Option<Time>,
    hw_tag: bool,
    // Tunables.
    quantum: u32,
    fifo_expire: [Time; 2],
    back_max: u64,
    back_penalty: u64,
    slice_sync: Time,
    slice_async: Time,
    slice_async_rq: u32,
    slice_idle: Time,
    idle_grace: Time,
    low_latency: bool,
    target_latency: Time,
    /// Workload types on ([`Workload`]).
    workloads: bool,
    /// Serving class (index of [`IoClass`]) and workload type.
    serving: (usize, Workload),
    /// When the serving workload's slice ends.
    workload_end: Time,
    /// Which listed scheduler this is (its name and defaults).
    profile: Profile,
}

/// The two listed CFQ schedulers. They differ only in the `low_latency`
/// and `workloads` defaults; every other setting and mechanism is the
/// same.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// `cfq`: Linux 2.6.34's defaults, `low_latency` and workload types
    /// on.
    Cfq,
    /// `cfq-2010`: `low_latency` and workload types off by default, as
    /// 2.6.21 (the 2010 paper's kernel, Sec. V) had neither. The other
    /// 2.6.21 differences are not modelled.
    Cfq2010,
}

/// Shared queues before the flows' sync queues: 8 RT and 8 BE levels,
/// one IDLE.
const SHARED_QUEUES: u32 = 17;

/// The sync queue of a flow.
fn sync_qid(flow: FlowId) -> u32 {
    SHARED_QUEUES + flow.index() as u32
}

fn cls(c: IoClass) -> usize {
    c as usize
}

impl Cfq {
    /// Settings (defaults of Linux 2.6.33): `quantum` (4),
    /// `fifo_expire_sync` (125 ms), `fifo_expire_async` (250 ms),
    /// `back_seek_max` (16384 KiB), `back_seek_penalty` (2), `slice_sync`
    /// (100 ms), `slice_async` (40 ms), `slice_async_rq` (2), `slice_idle`
    /// (8 ms), `idle_grace` (100 ms), `low_latency` (1), `target_latency`
    /// (300 ms), `workloads` (1: [`Workload`] types, 2.6.33+).
    pub fn new(s: &mut Settings) -> Result<Self, SchedError> {
        Cfq::with_profile(s, Profile::Cfq)
    }

    /// `cfq` or `cfq-2010` ([`Profile`]): `cfq-2010` only turns
    /// `low_latency` (2.6.32) and `workloads` (2.6.33) off by default
    /// (both arrived after the 2010 paper's 2.6.21); both can still be set.
    pub fn with_profile(s: &mut Settings, profile: Profile) -> Result<Self, SchedError> {
        let low_latency = profile == Profile::Cfq;
        let mut queues = Vec::new();
        for c in [IoClass::Rt, IoClass::Be] {
            for l in 0..8 {
                queues.push(Queue::new(c, l, false));
            }
        }
        queues.push(Queue::new(IoClass::Idle, 7, false));
        Ok(Cfq {
            table: RequestTable::new(),
            topo: Topology::new(()),
            queues,
            trees: Default::default(),
            active: None,
            idle_until: None,
            busy: [0; 3],
            busy_avg: [0; 3],
            tree_seq: 0,
            seq: 0,
            last_pos: 0,
            sync_flight: 0,
            last_end_nonidle: 0,
            last_delayed_sync: None,
            hw_tag: false,
            quantum: s.u64_in("quantum", 4, 1, 1 << 16)? as u32,
            fifo_expire: [
                s.duration("fifo_expire_sync", 125 * MS)?,
                s.duration("fifo_expire_async", 250 * MS)?,
            ],
            back_max: s.u64_in("back_seek_max", 16 * 1024, 0, 1 << 40)? * 2,
            back_penalty: s.u64_in("back_seek_penalty", 2, 1, 1 << 20)?,
            slice_sync: s.duration_in("slice_sync", 100 * MS, 1, MAX_DURATION)?,
            slice_async: s.duration_in("slice_async", 40 * MS, 1, MAX_DURATION)?,
            slice_async_rq: s.u64_in("slice_async_rq", 2, 1, 1 << 16)? as u32,
            slice_idle: s.duration("slice_idle", 8 * MS)?,
            idle_grace: s.duration("idle_grace", 100 * MS)?,
            low_latency: s.bool("low_latency", low_latency)?,
            target_latency: s.duration_in("target_latency", 300 * MS, 1, MAX_DURATION)?,
            workloads: s.bool("workloads", profile == Profile::Cfq)?,
            serving: (cls(IoClass::Be), Workload::SyncNoidle),
            workload_end: 0,
            profile,
        })
    }

    fn async_qid(spec: &FlowSpec) -> u32 {
        match spec.prio.class {
            IoClass::Rt => u32::from(spec.prio.level),
            IoClass::Be => 8 + u32::from(spec.prio.level),
            IoClass::Idle => 16,
        }
    }

    /// `cfq_prio_slice`.
    fn prio_slice(&self, sync: bool, level: u8) -> Time {
        let base = if sync {
            self.slice_sync
        } else {
            self.slice_async
        } as i64;
        (base + base / 5 * (4 - i64::from(level))).max(1) as Time
    }

    /// The slice of queue `q` starting now, with `low_latency` scaling.
    fn slice_for(&mut self, q: u32) -> Time {
        let (sync, level, class) = {
            let q = &self.queues[q as usize];
            (q.sync, q.level, cls(q.class))
        };
        let mut slice = self.prio_slice(sync, level);
        if self.low_latency {
            let busy = self.busy[class];
            let avg = self.busy_avg[class];
            let (lo, hi) = (avg.min(busy), avg.max(busy));
            self.busy_avg[class] = (3 * hi + lo + 2) / 4;
            let iq = Time::from(self.busy_avg[class].max(1));
            let expect = self.slice_sync.saturating_mul(iq);
            if expect > self.target_latency {
                // In u128: slices and latencies are up to an hour each.
                let scale = |x: Time, num: Time, den: Time| {
                    (u128::from(x) * u128::from(num) / u128::from(den.max(1))) as Time
                };
                let low = slice.min(scale(2 * self.slice_idle, slice, self.slice_sync));
                slice = scale(slice, self.target_latency, expect).max(low).max(1);
            }
        }
        slice
    }

    /// The workload type of queue `q` if it joined a tree now.
    fn workload_of(&self, q: u32) -> Workload {
        let qq = &self.queues[q as usize];
        if !qq.sync {
            Workload::Async
        } else if self.idle_window(q) {
            Workload::Sync
        } else {
            Workload::SyncNoidle
        }
    }

    /// The tree queue `q` joins now.
    fn tree_for(&self, q: u32) -> usize {
        let class = self.queues[q as usize].class;
        tree_index(class, self.workload_of(q), self.workloads)
    }

    /// Queues of tree `t`, the active one included (the kernel keeps the
    /// queue in service on its tree until it expires).
    fn tree_count(&self, t: usize) -> usize {
        let active = self
            .active
            .is_some_and(|a| self.queues[a as usize].home == t);
        self.trees[t].len() + usize::from(active)
    }

    fn add_to_tree(&mut self, q: u32, now: Time, front: bool) {
        let class = cls(self.queues[q as usize].class);
        let t = self.tree_for(q);
        let key = if front && self.workloads {
            // `cfq_service_tree_add(.., add_front)`: 1 s before the first.
            let first = self.trees[t].first().map_or(now, |f| f.0);
            first.saturating_sub(SEC)
        } else if front {
            0
        } else {
            let qq = &self.queues[q as usize];
            let off = Time::from(self.busy[class].saturating_sub(1)).saturating_mul(
                self.prio_slice(true, 0)
                    .saturating_sub(self.prio_slice(qq.sync, qq.level)),
            );
            now.saturating_add(off)
        };
        self.tree_seq += 1;
        self.trees[t].insert((key, self.tree_seq, q));
        let qq = &mut self.queues[q as usize];
        qq.tree_key = Some((t, key, self.tree_seq));
        qq.home = t;
    }

    fn remove_from_tree(&mut self, q: u32) {
        if let Some((t, k0, k1)) = self.queues[q as usize].tree_key.take() {
            self.trees[t].remove(&(k0, k1, q));
        }
    }

    /// `cfq_slice_expired`: the active queue gives up the disk.
    fn expire_active(&mut self, now: Time) {
        if let Some(q) = self.active.take() {
            self.idle_until = None;
            let qq = &mut self.queues[q as usize];
            qq.slice_end = None;
            if qq.queued > 0 {
                self.add_to_tree(q, now, false);
            }
        }
    }

    /// `cfq_should_preempt` (2.6.34): IDLE never preempts and is always
    /// preempted; a sync request preempts an async queue; with workload
    /// types a SYNC_NOIDLE queue preempts the SYNC_NOIDLE queue idling at
    /// the end of its tree; RT preempts BE.
    fn should_preempt(&self, new_q: u32, sync_req: bool) -> bool {
        let Some(a) = self.active else {
            return false;
        };
        if a == new_q {
            return false;
        }
        let (n, a) = (&self.queues[new_q as usize], &self.queues[a as usize]);
        if n.class == IoClass::Idle {
            return false;
        }
        if a.class == IoClass::Idle {
            return true;
        }
        if sync_req && !a.sync {
            return true;
        }
        if self.workloads && self.noidle_preempts(new_q) {
            return true;
        }
        n.class == IoClass::Rt && a.class != IoClass::Rt
    }

    /// The SYNC_NOIDLE tree is served, `new_q` is SYNC_NOIDLE, it and the
    /// active queue (which has nothing queued) are that tree's only
    /// queues.
    fn noidle_preempts(&self, new_q: u32) -> bool {
        let Some(a) = self.active else {
            return false;
        };
        let t = match self.queues[new_q as usize].tree_key {
            Some((t, _, _)) => t,
            None => self.tree_for(new_q),
        };
        let joining = usize::from(self.queues[new_q as usize].tree_key.is_none());
        self.serving.1 == Workload::SyncNoidle
            && t % 3 == Workload::SyncNoidle as usize
            && t != IDLE_TREE
            && self.tree_count(t) + joining == 2
            && self.queues[a as usize].queued == 0
    }

    /// `cfq_should_idle`: idle for the active queue `q` once it runs
    /// empty? With workload types also for a sync queue without an idle
    /// window that is the last queue of its tree (never for IDLE).
    fn should_idle(&self, q: u32) -> bool {
        let qq = &self.queues[q as usize];
        if !self.workloads {
            return self.idle_window(q);
        }
        qq.class != IoClass::Idle
            && self.slice_idle > 0
            && (self.idle_window(q) || (qq.sync && self.tree_count(qq.home) == 1))
    }

    /// `cfq_update_idle_window`: idle for this queue at all? On a device
    /// that queues internally (hw_tag) only seeky queues lose idling
    /// (2.6.3x: `cfqd->hw_tag && CIC_SEEKY(cic)`); sequential ones are
    /// still waited for.
    fn idle_window(&self, q: u32) -> bool {
        let st = &self.queues[q as usize].stats;
        let valid = st.ttime_samples > SAMPLE_VALID;
        let seeky = st.seek_samples > SAMPLE_VALID && st.seek_mean > SEEKY;
        self.slice_idle > 0
            && !(self.hw_tag && seeky)
            && (!valid || st.ttime_mean <= self.slice_idle)
    }

    fn fifo_head(&mut self, q: u32) -> Option<SlotIdx> {
        let qq = &mut self.queues[q as usize];
        while let Some(&(idx, gen)) = qq.fifo.front() {
            if self.table.is_queued(idx, gen) {
                return Some(idx);
            }
            qq.fifo.pop_front();
        }
        None
    }

    /// Busy queues of RT or BE class `c` (`cfq_group_busy_queues_wl`).
    fn class_busy(&self, c: usize) -> usize {
        (0..3).map(|w| self.tree_count(3 * c + w)).sum()
    }

    /// `choose_service_tree` (2.6.34): the serving class (RT, else BE,
    /// else IDLE) and, unless the serving workload's tree still has queues
    /// and its slice lasts, a new workload type and slice ([`Workload`]).
    fn choose_workload(&mut self, now: Time) {
        let class = if self.class_busy(cls(IoClass::Rt)) > 0 {
            cls(IoClass::Rt)
        } else if self.class_busy(cls(IoClass::Be)) > 0 {
            cls(IoClass::Be)
        } else {
            self.serving.0 = cls(IoClass::Idle);
            self.workload_end = now;
            return;
        };
        self.serving.0 = class;
        let t = 3 * class + self.serving.1 as usize;
        if self.tree_count(t) > 0 && now <= self.workload_end {
            return;
        }
        // `cfq_choose_wl`: the tree whose first queue has the lowest key.
        let mut best = (Workload::SyncNoidle, None);
        for wl in Workload::ALL {
            if let Some(&(k, _, _)) = self.trees[3 * class + wl as usize].first() {
                if best.1.is_none_or(|low| k < low) {
                    best = (wl, Some(k));
                }
            }
        }
        let wl = best.0;
        self.serving.1 = wl;
        let count = self.tree_count(3 * class + wl as usize) as u128;
        let in_class = self
            .class_busy(class)
            .max(self.busy_avg[class] as usize)
            .max(1) as u128;
        let target = u128::from(self.target_latency);
        let mut slice = target * count / in_class;
        if wl == Workload::Async {
            let asyncs = (0..2)
                .map(|c| self.tree_count(3 * c + Workload::Async as usize))
                .sum::<usize>() as u128;
            let all = (0..TREES).map(|t| self.tree_count(t)).sum::<usize>().max(1) as u128;
            slice = slice.min(target * asyncs / all);
            slice = slice * u128::from(self.slice_async) / u128::from(self.slice_sync);
        } else {
            slice = slice.max(2 * u128::from(self.slice_idle));
        }
        let slice = (slice.min(u128::from(MAX_DURATION)) as Time).max(MIN_WORKLOAD_SLICE);
        self.workload_end = now.saturating_add(slice);
    }

    /// Picks the next queue to serve (`cfq_get_next_queue`), or how long to
    /// wait before the IDLE class may go.
    fn next_queue(&mut self, now: Time) -> Result<Option<u32>, Time> {
        let (trees, n) = if self.workloads {
            self.choose_workload(now);
            let (class, wl) = self.serving;
            if class == cls(IoClass::Idle) {
                ([IDLE_TREE; 3], 1)
            } else {
                ([3 * class + wl as usize; 3], 1)
            }
        } else {
            ([0, 3, IDLE_TREE], 3)
        };
        for &c in &trees[..n] {
            if let Some(&(k0, k1, q)) = self.trees[c].iter().next() {
                if c == IDLE_TREE {
                    let ok_at = self.last_end_nonidle.saturating_add(self.idle_grace);
                    if now < ok_at && self.last_end_nonidle > 0 {
                        return Err(ok_at);
                    }
                }
                self.trees[c].remove(&(k0, k1, q));
                self.queues[q as usize].tree_key = None;
                return Ok(Some(q));
            }
        }
        Ok(None)
    }

    fn dispatch_from(&mut self, now: Time, q: u32) -> Option<Request> {
        // Dispatch limits.
        let (sync, dispatched) = {
            let qq = &self.queues[q as usize];
            (qq.sync, qq.dispatched)
        };
        let mut max = self.quantum;
        if !sync && self.sync_flight > 0 {
            return None;
        }
        if !sync && self.low_latency {
            let since = self
                .last_delayed_sync
                .map_or(now.saturating_add(SEC), |t| now.saturating_sub(t));
            let mut depth = (since / self.slice_sync).min(u64::from(u32::MAX)) as u32;
            if depth == 0 && dispatched == 0 {
                depth = 1;
            }
            max = max.min(depth);
        }
        if dispatched >= max {
            return None;
        }
        // FIFO first, once per slice.
        let mut pick = None;
        if !self.queues[q as usize].fifo_checked {
            self.queues[q as usize].fifo_checked = true;
            if let Some(h) = self.fifo_head(q) {
                if self.table.slot(h).extra.expire <= now {
                    pick = Some(h);
                }
            }
        }
        let idx = pick.or_else(|| {
            choose_req(
                &self.queues[q as usize].sort,
                self.last_pos,
                self.back_max,
                self.back_penalty,
            )
        })?;
        let seq = self.table.slot(idx).extra.seq;
        let r = self.table.slot(idx).req;
        let qq = &mut self.queues[q as usize];
        qq.sort.remove(r.sector, seq);
        qq.queued -= 1;
        qq.dispatched += 1;
        qq.slice_dispatch += 1;
        if qq.queued == 0 {
            let c = cls(qq.class);
            self.busy[c] -= 1;
        }
        if sync {
            self.sync_flight += 1;
        }
        self.last_pos = r.end();
        let r = self.table.dispatch(now, idx);
        // An async queue that used its share of requests, or an IDLE one,
        // gives way at once if others wait.
        let qq = &self.queues[q as usize];
        let others = self.trees.iter().any(|t| !t.is_empty());
        let maxrq = 2 * (self.slice_async_rq + self.slice_async_rq * (7 - u32::from(qq.level)));
        if others && ((!qq.sync && qq.slice_dispatch >= maxrq) || qq.class == IoClass::Idle) {
            self.expire_active(now);
        }
        Some(r)
    }
}

impl Scheduler for Cfq {
    fn name(&self) -> &str {
        match self.profile {
            Profile::Cfq => "cfq",
            Profile::Cfq2010 => "cfq-2010",
        }
    }
    fn set_device(&mut self, device: DeviceInfo) {
        self.hw_tag = device.queues_internally;
    }
    topology_methods!(remove_flow);
    fn add_flow(&mut self, now: Time, spec: FlowSpec) -> Result<FlowId, SchedError> {
        check_time(now)?;
        let id = self.topo.add_flow(spec, ())?;
        let q = sync_qid(id);
        let level = if spec.prio.class == IoClass::Idle {
            7
        } else {
            spec.prio.level
        };
        // A reused index: the queue of the flow freed before is empty, but
        // may still be the active one or keyed in a tree.
        if self.active == Some(q) {
            self.active = None;
            self.idle_until = None;
        }
        if self
            .queues
            .get(q as usize)
            .is_some_and(|x| x.tree_key.is_some())
        {
            self.remove_from_tree(q);
        }
        let fresh = Queue::new(spec.prio.class, level, true);
        match self.queues.get_mut(q as usize) {
            Some(x) => *x = fresh,
            // Indexes are handed out in order: a new one is the next queue.
            None => self.queues.push(fresh),
        }
        Ok(id)
    }
    fn add_request(&mut self, now: Time, req: Request) -> Result<(), SchedError> {
        check_time(now)?;
        self.topo.check_flow(req.flow)?;
        let sync = req.sync || req.op == Op::Read;
        let q = if sync {
            sync_qid(req.flow)
        } else {
            Self::async_qid(&self.topo.flow(req.flow)?.spec)
        };
        self.seq += 1;
        let idx = self.table.insert(
            now,
            req,
            Extra {
                seq: self.seq,
                expire: now.saturating_add(self.fifo_expire[usize::from(!sync)]),
                qid: q,
            },
        )?;
        self.topo.hold(req.flow)?;
        let gen = self.table.slot(idx).gen;
        let qq = &mut self.queues[q as usize];
        if sync {
            if qq.started {
                let think = if qq.dispatched == 0 && qq.queued == 0 {
                    now.saturating_sub(qq.last_end_request)
                        .min(2 * self.slice_idle)
                } else {
                    0
                };
                qq.stats.add_think(think);
                qq.stats.add_seek(req.sector.abs_diff(qq.last_pos));
            }
            qq.started = true;
            qq.last_pos = req.end();
        }
        qq.sort.insert(req.sector, self.seq, idx);
        qq.fifo.push_back((idx, gen));
        qq.queued += 1;
        if qq.queued == 1 {
            let c = cls(qq.class);
            self.busy[c] += 1;
        }
        if self.active == Some(q) {
            // The queue we idle for got its request.
            self.idle_until = None;
        } else if self.should_preempt(q, sync) {
            self.remove_from_tree(q);
            self.expire_active(now);
            self.add_to_tree(q, now, true);
        } else if self.queues[q as usize].tree_key.is_none() {
            self.add_to_tree(q, now, false);
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
        loop {
            if let Some(q) = self.active {
                let qq = &self.queues[q as usize];
                if qq.slice_end.is_some_and(|e| now >= e) {
                    self.expire_active(now);
                    continue;
                }
                if qq.queued > 0 {
                    if let Some(r) = self.dispatch_from(now, q) {
                        return Dispatch::Request(r);
                    }
                    return Dispatch::Wait;
                }
                if let Some(until) = self.idle_until {
                    if now < until {
                        return Dispatch::Idle { until };
                    }
                    self.expire_active(now);
                    continue;
                }
                if qq.dispatched > 0 && qq.sync && self.should_idle(q) {
                    // Wait for the completion, then decide whether to idle.
                    return Dispatch::Wait;
                }
                self.expire_active(now);
                continue;
            }
            match self.next_queue(now) {
                Ok(Some(q)) => {
                    self.active = Some(q);
                    self.idle_until = None;
                    let qq = &mut self.queues[q as usize];
                    qq.slice_end = None;
                    qq.slice_dispatch = 0;
                    qq.fifo_checked = false;
                }
                Ok(None) => return Dispatch::Wait,
                Err(until) => return Dispatch::Idle { until },
            }
        }
    }
    fn complete(&mut self, now: Time, id: ReqId) -> Result<(), SchedError> {
        check_time(now)?;
        let slot = self.table.complete(id)?;
        self.topo.release(slot.req.flow);
        let q = slot.extra.qid;
        let qq = &mut self.queues[q as usize];
        qq.dispatched -= 1;
        qq.last_end_request = now;
        if qq.sync {
            self.sync_flight -= 1;
            // `expire` is the request's arrival plus `fifo_expire_sync`.
            if slot.extra.expire <= now {
                self.last_delayed_sync = Some(now);
            }
        }
        if qq.class != IoClass::Idle {
            self.last_end_nonidle = now;
        }
        if self.active == Some(q) {
            if self.queues[q as usize].slice_end.is_none() {
                let s = self.slice_for(q);
                self.queues[q as usize].slice_end = Some(now + s);
            }
            let qq = &self.queues[q as usize];
            let end = qq.slice_end.unwrap_or(now);
            if now >= end {
                self.expire_active(now);
            } else if qq.sync && qq.queued == 0 && qq.dispatched == 0 {
                // cfq_arm_slice_timer.
                let st = qq.stats;
                let valid = st.ttime_samples > SAMPLE_VALID;
                let idle_window = self.should_idle(q);
                let seeky = st.seek_samples > SAMPLE_VALID && st.seek_mean > SEEKY;
                let mut sl = self.slice_idle;
                if seeky {
                    sl = sl.min(2 * MS);
                }
                let fits = !valid || end - now >= st.ttime_mean;
                if idle_window && fits {
                    self.idle_until = Some(now + sl);
                }
            }
        }
        Ok(())
    }
}
