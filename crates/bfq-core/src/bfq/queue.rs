//! The requests of one flow, and the order they leave in: C-LOOK (one-way
//! elevator, wrapping to the lowest sector) with bounded, penalised
//! backward seeks, and FIFO expiry. 2010 paper Sec. II-B ("if a + T_FIFO >
//! t holds for all queued requests, C-LOOK, otherwise the oldest"); kernel
//! defaults: fifo_expire_sync 125 ms, fifo_expire_async 250 ms,
//! back_seek_max 16 MiB (32768 sectors), back_seek_penalty 2.
//!
//! Sorted order is kept by `sorted::Sorted`: one sorted buffer while the
//! queue is shallow, sorted chunks of up to 128 keys beyond 1024 requests
//! (where the kernel keeps an rbtree). The FIFO is a `VecDeque` of (slot,
//! generation) with lazy deletion of entries already dispatched in sorted
//! order. A request that arrives in an empty queue is kept apart from
//! both until a second one arrives: it is the FIFO's head and C-LOOK's
//! choice at once, and a flow that waits for each of its requests (a
//! thread's blocking reads) never queues more than one.

use super::sorted::{Key, Sorted};
use crate::error::SchedError;
use crate::settings::Settings;
use crate::table::{RequestTable, SlotIdx};
use crate::types::Time;
use std::collections::VecDeque;

/// How the next request is chosen inside the active flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueConfig {
    /// A synchronous request waiting this long is served next, whatever its position (`fifo_expire_sync`, 0..=1h, default 125 ms).
    pub fifo_expire_sync: Time,
    /// The same for asynchronous requests (`fifo_expire_async`, 0..=1h, default 250 ms).
    pub fifo_expire_async: Time,
    /// Longest backward seek considered, in sectors.
    pub back_seek_max: u64,
    /// A backward seek of d sectors costs like a forward one of d x this.
    pub back_seek_penalty: u64,
}

/// One flow's queued requests.
#[derive(Clone, Debug, Default)]
pub struct FlowQueue {
    /// Requests queued.
    len: u32,
    /// The only request while the queue holds one that arrived in it
    /// empty (then `sorted` and `fifo` are empty); filed in both when a
    /// second arrives.
    lone: Option<SlotIdx>,
    sorted: Sorted,
    fifo: VecDeque<(SlotIdx, u32)>,
    /// Queued sync requests.
    pub sync_queued: u32,
}

impl FlowQueue {
    /// Number of queued requests.
    #[inline]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Debug builds: the count agrees with the requests filed and the lone
    /// one (which is there only while nothing is filed).
    #[inline]
    fn check_len(&self) {
        debug_assert_eq!(
            self.len as usize,
            self.sorted.len() + usize::from(self.lone.is_some())
        );
        debug_assert!(self.lone.is_none() || self.sorted.len() == 0);
    }

    /// Whether nothing is queued.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds a request (already stored in `table` at `slot`).
    pub fn push<X: Copy + Default>(&mut self, table: &RequestTable<X>, slot: SlotIdx) {
        if table.slot(slot).req.sync {
            self.sync_queued += 1;
        }
        if self.len == 0 {
            self.lone = Some(slot);
        } else {
            if let Some(lone) = self.lone.take() {
                self.file(table, lone);
            }
            self.file(table, slot);
        }
        self.len += 1;
        self.check_len();
    }

    /// Files a queued request in the sorted order and the FIFO.
    fn file<X: Copy + Default>(&mut self, table: &RequestTable<X>, slot: SlotIdx) {
        let s = table.slot(slot);
        self.sorted.insert((s.req.sector, slot));
        self.fifo.push_back((slot, s.gen));
    }

    /// The slot of the next request to serve, without removing it. `head`
    /// is the sector just past the flow's last dispatched request.
    pub fn peek<X: Copy + Default>(
        &mut self,
        table: &RequestTable<X>,
        head: u64,
        now: Time,
        cfg: &QueueConfig,
    ) -> Option<SlotIdx> {
        match self.len {
            0 => return None,
            // The only request is both the FIFO's head and C-LOOK's
            // choice.
            1 => return self.lone.or_else(|| self.sorted.first().map(|k| k.1)),
            _ => {}
        }
        // Drop FIFO entries already dispatched in sorted order.
        while let Some(&(slot, gen)) = self.fifo.front() {
            if table.is_queued(slot, gen) {
                break;
            }
            self.fifo.pop_front();
        }
        if let Some(&(slot, _)) = self.fifo.front() {
            let s = table.slot(slot);
            let expire = if s.req.sync {
                cfg.fifo_expire_sync
            } else {
                cfg.fifo_expire_async
            };
            if s.arrival + expire <= now {
                return Some(slot);
            }
        }
        self.clook_next(head, cfg).map(|k| k.1)
    }

    /// The C-LOOK choice from `head`: the nearest request ahead, unless a
    /// near one behind is cheaper after the backward-seek penalty; with
    /// nothing ahead or near behind, wrap to the lowest sector.
    fn clook_next(&mut self, head: u64, cfg: &QueueConfig) -> Option<Key> {
        let (ahead, behind) = self.sorted.around(head);
        let behind = behind.filter(|&(sec, _)| head - sec <= cfg.back_seek_max);
        match (ahead, behind) {
            (Some(f), Some(b))
                if (head - b.0).saturating_mul(cfg.back_seek_penalty) < f.0 - head =>
            {
                Some(b)
            }
            (Some(f), _) => Some(f),
            (None, Some(b)) => Some(b),
            (None, None) => self.sorted.first(),
        }
    }

    /// Removes the request at `slot` (returned by `peek`).
    pub fn remove<X: Copy + Default>(&mut self, table: &RequestTable<X>, slot: SlotIdx) {
        let s = table.slot(slot);
        if s.req.sync {
            self.sync_queued -= 1;
        }
        self.len -= 1;
        if self.lone == Some(slot) {
            self.lone = None;
            self.check_len();
            return;
        }
        self.sorted.remove((s.req.sector, slot));
        if self.fifo.front().is_some_and(|&(f, _)| f == slot) {
            self.fifo.pop_front();
        }
        if self.is_empty() {
            self.fifo.clear();
            if self.fifo.capacity() > FIFO_KEEP {
                self.fifo.shrink_to(FIFO_KEEP);
            }
        }
        self.check_len();
    }
}

/// Room a drained FIFO keeps (128 entries, 1 KiB); a larger one, left by
/// a deep queue, is given back when the queue drains, as the sorted
/// order's is.
const FIFO_KEEP: usize = 128;

impl QueueConfig {
    /// The in-queue ordering settings over profile `d`
    /// (docs/bfq-settings.md).
    pub(crate) fn with_settings(d: &QueueConfig, s: &mut Settings) -> Result<Self, SchedError> {
        Ok(QueueConfig {
            fifo_expire_sync: s.duration("fifo_expire_sync", d.fifo_expire_sync)?,
            fifo_expire_async: s.duration("fifo_expire_async", d.fifo_expire_async)?,
            // sysfs unit: KiB; kept in sectors.
            back_seek_max: s.u64_in("back_seek_max", d.back_seek_max / 2, 0, 1 << 40)? * 2,
            back_seek_penalty: s.u64_in("back_seek_penalty", d.back_seek_penalty, 1, 1000)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bfq::sorted::DEEP;
    use crate::types::{FlowId, Op, Request, MS};

    fn cfg() -> QueueConfig {
        QueueConfig {
            fifo_expire_sync: 125 * MS,
            fifo_expire_async: 250 * MS,
            back_seek_max: 32768,
            back_seek_penalty: 2,
        }
    }

    fn add(
        t: &mut RequestTable<()>,
        q: &mut FlowQueue,
        id: u64,
        sector: u64,
        now: Time,
    ) -> SlotIdx {
        let r = Request {
            id,
            flow: FlowId(0),
            sector,
            sectors: 8,
            op: Op::Read,
            sync: true,
        };
        let s = t.insert(now, r, ()).unwrap();
        q.push(t, s);
        s
    }

    fn drain(t: &mut RequestTable<()>, q: &mut FlowQueue, mut head: u64, now: Time) -> Vec<u64> {
        let mut out = vec![];
        while let Some(s) = q.peek(t, head, now, &cfg()) {
            q.remove(t, s);
            let r = t.dispatch(now, s);
            head = r.end();
            out.push(r.sector);
        }
        out
    }

    /// The queue as it was before a lone request was kept apart: every
    /// request filed in the sorted order and the FIFO (the reference the
    /// model test below compares with).
    #[derive(Default)]
    struct Filed {
        sorted: Sorted,
        fifo: VecDeque<(SlotIdx, u32)>,
        sync_queued: u32,
    }

    impl Filed {
        fn push(&mut self, t: &RequestTable<()>, slot: SlotIdx) {
            let s = t.slot(slot);
            self.sorted.insert((s.req.sector, slot));
            self.fifo.push_back((slot, s.gen));
            self.sync_queued += u32::from(s.req.sync);
        }

        fn peek(
            &mut self,
            t: &RequestTable<()>,
            head: u64,
            now: Time,
            c: &QueueConfig,
        ) -> Option<SlotIdx> {
            match self.sorted.len() {
                0 => return None,
                1 => return self.sorted.first().map(|k| k.1),
                _ => {}
            }
            while let Some(&(slot, gen)) = self.fifo.front() {
                if t.is_queued(slot, gen) {
                    break;
                }
                self.fifo.pop_front();
            }
            if let Some(&(slot, _)) = self.fifo.front() {
                let s = t.slot(slot);
                let e = if s.req.sync {
                    c.fifo_expire_sync
                } else {
                    c.fifo_expire_async
                };
                if s.arrival + e <= now {
                    return Some(slot);
                }
            }
            let (ahead, behind) = self.sorted.around(head);
            let behind = behind.filter(|&(sec, _)| head - sec <= c.back_seek_max);
            match (ahead, behind) {
                (Some(f), Some(b))
                    if (head - b.0).saturating_mul(c.back_seek_penalty) < f.0 - head =>
                {
                    Some(b)
                }
                (Some(f), _) => Some(f),
                (None, Some(b)) => Some(b),
                (None, None) => self.sorted.first(),
            }
            .map(|k| k.1)
        }

        fn remove(&mut self, t: &RequestTable<()>, slot: SlotIdx) {
            let s = t.slot(slot);
            self.sorted.remove((s.req.sector, slot));
            self.sync_queued -= u32::from(s.req.sync);
            if self.fifo.front().is_some_and(|&(f, _)| f == slot) {
                self.fifo.pop_front();
            }
            if self.sorted.len() == 0 {
                self.fifo.clear();
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
        /// In every order of arrivals, dispatches (the chosen request or
        /// any other), completions (slots reused) and peeks, the queue
        /// makes the same choices and counts as one that files every
        /// request.
        #[test]
        fn a_lone_request_changes_no_choice(
            ops in proptest::collection::vec((0u8..5, 0u64..64, proptest::prelude::any::<bool>(), 0u64..40), 1..120),
            expire in 0u64..3,
        ) {
            let c = QueueConfig {
                fifo_expire_sync: [0, 5 * MS, 125 * MS][expire as usize],
                fifo_expire_async: [MS, 10 * MS, 250 * MS][expire as usize],
                back_seek_max: 64,
                back_seek_penalty: 2,
            };
            let mut t = RequestTable::<()>::new();
            let (mut q, mut r) = (FlowQueue::default(), Filed::default());
            let (mut queued, mut done) = (Vec::new(), Vec::new());
            let (mut now, mut head, mut id) = (0, 0, 0);
            for (op, x, sync, dt) in ops {
                now += dt * MS / 4;
                match op {
                    // Arrival (sectors close together: ties, seeks back).
                    0 | 1 => {
                        let req = Request { id, flow: FlowId(0), sector: x * 16, sectors: 8, op: Op::Read, sync };
                        id += 1;
                        let s = t.insert(now, req, ()).unwrap();
                        q.push(&t, s);
                        r.push(&t, s);
                        queued.push(s);
                    }
                    // The chosen request is dispatched (or only peeked).
                    2 => {
                        let h = if sync { head } else { x * 16 };
                        let got = q.peek(&t, h, now, &c);
                        proptest::prop_assert_eq!(got, r.peek(&t, h, now, &c));
                        if let (Some(s), true) = (got, dt % 4 != 0) {
                            q.remove(&t, s);
                            r.remove(&t, s);
                            queued.retain(|&k| k != s);
                            let d = t.dispatch(now, s);
                            head = d.end();
                            done.push(d.id);
                        }
                    }
                    // Any queued request leaves (not the chosen one).
                    3 if !queued.is_empty() => {
                        let s = queued.remove(x as usize % queued.len());
                        q.remove(&t, s);
                        r.remove(&t, s);
                        done.push(t.dispatch(now, s).id);
                    }
                    // A completion frees its slot for reuse.
                    _ if !done.is_empty() => {
                        let rid = done.remove(x as usize % done.len());
                        t.complete(rid).unwrap();
                    }
                    _ => {}
                }
                proptest::prop_assert_eq!(q.len(), r.sorted.len());
                proptest::prop_assert_eq!(q.is_empty(), r.sorted.len() == 0);
                proptest::prop_assert_eq!(q.sync_queued, r.sync_queued);
                proptest::prop_assert_eq!(q.len(), queued.len());
            }
        }
    }

    /// A queue once thousands deep keeps little room once drained: the
    /// FIFO's down to [`FIFO_KEEP`] entries.
    #[test]
    fn a_drained_queue_gives_back_the_fifo_a_deep_one_grew() {
        let mut t = RequestTable::new();
        let mut q = FlowQueue::default();
        for i in 0..(4 * DEEP as u64) {
            add(&mut t, &mut q, i, (i * 7919) % 100_000 * 8, 0);
        }
        assert!(q.fifo.capacity() >= 4 * DEEP);
        assert_eq!(drain(&mut t, &mut q, 0, 0).len(), 4 * DEEP);
        assert!(q.fifo.capacity() <= FIFO_KEEP, "{}", q.fifo.capacity());
    }

    #[test]
    fn clook_goes_up_then_wraps() {
        let mut t = RequestTable::new();
        let mut q = FlowQueue::default();
        for (i, s) in [500_000u64, 100, 900_000, 300_000].into_iter().enumerate() {
            add(&mut t, &mut q, i as u64, s, 0);
        }
        assert_eq!(
            drain(&mut t, &mut q, 200_000, 0),
            vec![300_000, 500_000, 900_000, 100]
        );
    }

    #[test]
    fn short_backward_seek_wins_when_cheaper() {
        let mut t = RequestTable::new();
        let mut q = FlowQueue::default();
        add(&mut t, &mut q, 1, 9_990, 0); // 10 back
        add(&mut t, &mut q, 2, 10_100, 0); // 100 ahead
        assert_eq!(drain(&mut t, &mut q, 10_000, 0)[0], 9_990);
    }

    #[test]
    fn expired_request_goes_first() {
        let mut t = RequestTable::new();
        let mut q = FlowQueue::default();
        add(&mut t, &mut q, 1, 100, 0);
        add(&mut t, &mut q, 2, 1_000_000, 10 * MS);
        // Before expiry, C-LOOK from head 500_000 picks 1_000_000 ...
        assert_eq!(
            q.peek(&t, 500_000, 100 * MS, &cfg())
                .map(|s| t.slot(s).req.id),
            Some(2)
        );
        // ... after 125 ms the oldest goes first.
        assert_eq!(
            q.peek(&t, 500_000, 125 * MS, &cfg())
                .map(|s| t.slot(s).req.id),
            Some(1)
        );
    }

    /// Across the shallow/deep threshold, in both directions, the queue
    /// makes the same C-LOOK choices as a plain sorted-vector reference.
    #[test]
    fn deep_queues_choose_like_shallow_ones() {
        let mut t = RequestTable::new();
        let mut q = FlowQueue::default();
        let mut reference: Vec<(u64, SlotIdx)> = vec![];
        let mut rnd = crate::xorshift(12345u64);
        let mut head = 0u64;
        let mut id = 0u64;
        for round in 0..6 {
            // Grow well past DEEP, then drain to a few, twice over.
            let (adds, takes) = if round % 2 == 0 {
                (3 * DEEP, DEEP)
            } else {
                (10, 2 * DEEP + 5)
            };
            for _ in 0..adds {
                let sector = rnd() % 2_000_000;
                let slot = add(&mut t, &mut q, id, sector, 0);
                reference.push((sector, slot));
                id += 1;
            }
            reference.sort();
            for _ in 0..takes.min(reference.len()) {
                let got = q.peek(&t, head, 0, &cfg()).unwrap();
                // Reference C-LOOK on the sorted vector.
                let i = reference.partition_point(|&(sec, _)| sec < head);
                let behind = (i > 0)
                    .then(|| reference[i - 1])
                    .filter(|&(sec, _)| head - sec <= cfg().back_seek_max);
                let want = match (reference.get(i).copied(), behind) {
                    (Some(f), Some(b)) if (head - b.0) * 2 < f.0 - head => b,
                    (Some(f), _) => f,
                    (None, Some(b)) => b,
                    (None, None) => reference[0],
                };
                assert_eq!(got, want.1, "round {round}");
                reference.retain(|&k| k != want);
                q.remove(&t, got);
                head = t.dispatch(0, got).end();
            }
            assert_eq!(q.len(), reference.len());
        }
    }
}
