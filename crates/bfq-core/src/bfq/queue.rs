//! The requests of one flow, and the order they leave in: C-LOOK (one-way
//! elevator, wrapping to the lowest sector) with bounded, penalised
//! backward seeks, and FIFO expiry. 2010 paper Sec. II-B ("if a + T_FIFO >
//! t holds for all queued requests, C-LOOK, otherwise the oldest"); kernel
//! defaults: fifo_expire_sync 125 ms, fifo_expire_async 250 ms,
//! back_seek_max 16 MiB (32768 sectors), back_seek_penalty 2.
//!
//! Sorted order is a `VecDeque` of (sector, slot) kept sorted: binary
//! search to insert and find the next request; sequential streams insert at
//! the back and leave from the front, so shifts are O(1) in the common case.
//! The FIFO is a `VecDeque` of (slot, generation) with lazy deletion of
//! entries already dispatched in sorted order. Both keep their capacity:
//! no allocation per request in steady state.

use crate::table::{RequestTable, SlotIdx};
use crate::types::Time;
use std::collections::VecDeque;

/// How the next request is chosen inside the active flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueConfig {
    pub fifo_expire_sync: Time,
    pub fifo_expire_async: Time,
    /// Longest backward seek considered, in sectors.
    pub back_seek_max: u64,
    /// A backward seek of d sectors costs like a forward one of d x this.
    pub back_seek_penalty: u64,
}

/// One flow's queued requests.
#[derive(Clone, Debug, Default)]
pub struct FlowQueue {
    sorted: VecDeque<(u64, SlotIdx)>,
    fifo: VecDeque<(SlotIdx, u32)>,
    /// Queued sync requests.
    pub sync_queued: u32,
}

impl FlowQueue {
    /// Number of queued requests.
    #[inline]
    pub fn len(&self) -> usize {
        self.sorted.len()
    }

    /// Whether nothing is queued.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.sorted.is_empty()
    }

    /// Adds a request (already stored in `table` at `slot`).
    pub fn push<X: Copy + Default>(&mut self, table: &RequestTable<X>, slot: SlotIdx) {
        let s = table.slot(slot);
        let key = (s.req.sector, slot);
        let i = match self.sorted.back() {
            Some(&last) if last < key => self.sorted.len(),
            None => 0,
            _ => self.sorted.partition_point(|&k| k < key),
        };
        self.sorted.insert(i, key);
        self.fifo.push_back((slot, s.gen));
        if s.req.sync {
            self.sync_queued += 1;
        }
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
        if self.sorted.is_empty() {
            return None;
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
        Some(self.sorted[self.clook_index(head, cfg)].1)
    }

    /// Index in `sorted` of the C-LOOK choice from `head`.
    fn clook_index(&self, head: u64, cfg: &QueueConfig) -> usize {
        let i = self.sorted.partition_point(|&(sec, _)| sec < head);
        let fwd = (i < self.sorted.len()).then(|| self.sorted[i].0 - head);
        let back = (i > 0)
            .then(|| head - self.sorted[i - 1].0)
            .filter(|&d| d <= cfg.back_seek_max)
            .map(|d| d.saturating_mul(cfg.back_seek_penalty));
        match (fwd, back) {
            (Some(f), Some(b)) if b < f => i - 1,
            (Some(_), _) => i,
            (None, Some(_)) => i - 1,
            // Nothing ahead or near behind: wrap to the lowest sector.
            (None, None) => 0,
        }
    }

    /// Removes the request at `slot` (returned by `peek`).
    pub fn remove<X: Copy + Default>(&mut self, table: &RequestTable<X>, slot: SlotIdx) {
        let s = table.slot(slot);
        let key = (s.req.sector, slot);
        let i = if self.sorted.front() == Some(&key) {
            0
        } else {
            self.sorted.partition_point(|&k| k < key)
        };
        debug_assert_eq!(self.sorted[i], key);
        self.sorted.remove(i);
        if s.req.sync {
            self.sync_queued -= 1;
        }
        if self.fifo.front().is_some_and(|&(f, _)| f == slot) {
            self.fifo.pop_front();
        }
        if self.sorted.is_empty() {
            self.fifo.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
}
