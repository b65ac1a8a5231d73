//! A flow's queued requests in (first sector, slot) order: the order
//! C-LOOK walks (2010 paper Sec. II-B; the kernel keeps it in an rbtree).
//!
//! While the queue is shallow (at most [`DEEP`] requests) the keys sit in
//! one contiguous sorted buffer, `buf[start..]`, each packed in a `u128`
//! (sector in the high 64 bits, slot in the low 32) so that integer order
//! is (sector, slot) order and every comparison is one integer
//! compare. Searches are binary searches over that one slice; an insertion
//! or removal in the middle shifts the shorter side; sequential streams
//! append at the back and leave from the front (advancing `start`), so
//! they move nothing; the room left before `start` is reclaimed when the
//! buffer is full, which allocates nothing in steady state. The position
//! C-LOOK chose last is remembered, so the removal that follows it
//! usually needs no search. Beyond [`DEEP`] requests (a writeback flow
//! with thousands of random writes) shifting would cost O(queue length)
//! per request, so the keys move to a `BTreeSet`, and back to the buffer
//! once the queue drains.

use crate::table::SlotIdx;
use std::collections::BTreeSet;

/// Queue length beyond which the sorted order moves to a B-tree. Up to
/// here the buffer's shifts (of the shorter side, at most 8 KiB) cost
/// less than the B-tree's search and allocate nothing, where the B-tree
/// allocates as its nodes split (`bfq bench-core --flows 1 --queued N
/// --random --reuse-ids`: 183-240 ns per request and none allocated for N
/// of 256-1000 against 225-262 ns and 0.13 allocations with the B-tree
/// from 128; at 4000 the buffer took 490 ns against 255).
pub const DEEP: usize = 1024;

/// Room a drained buffer keeps (2 KiB of keys); a larger one, left by a
/// deep queue, is given back when the queue drains.
const KEEP: usize = 128;

/// A queued request's place in sorted order: (first sector, slot).
pub type Key = (u64, SlotIdx);

/// [`Key`] packed so that integer order is key order.
type Packed = u128;

#[inline]
fn pack((sector, slot): Key) -> Packed {
    (u128::from(sector) << 32) | u128::from(slot)
}

#[inline]
fn unpack(p: Packed) -> Key {
    ((p >> 32) as u64, p as u32)
}

/// Sorted keys in one buffer, see the module documentation.
#[derive(Clone, Debug, Default)]
pub struct Shallow {
    /// Ascending keys in `buf[start..]`; `buf[..start]` is room left by
    /// removals at the front.
    buf: Vec<Packed>,
    start: usize,
    /// Index (in `keys()`) of the key C-LOOK found last at or after the
    /// head: where the next removal most likely is.
    near: usize,
}

impl Shallow {
    #[inline]
    fn keys(&self) -> &[Packed] {
        &self.buf[self.start..]
    }

    #[inline]
    fn len(&self) -> usize {
        self.buf.len() - self.start
    }

    /// Index of the first key not below `p` (binary search).
    #[inline]
    fn lower_bound(&self, p: Packed) -> usize {
        self.keys().partition_point(|&k| k < p)
    }

    /// Before the buffer grows at the back: when full and at least half
    /// of it is room before `start`, moves the keys down to reclaim it
    /// (each move of n keys follows n removals: O(1) amortised).
    #[inline]
    fn reclaim_front(&mut self) {
        if self.buf.len() == self.buf.capacity() && self.start > 0 && 2 * self.start >= self.len() {
            self.buf.drain(..self.start);
            self.start = 0;
        }
    }

    fn insert(&mut self, p: Packed) {
        if self.keys().last().is_none_or(|&last| last < p) {
            // Sequential streams append: no search, no shift.
            self.reclaim_front();
            self.buf.push(p);
            return;
        }
        let i = self.lower_bound(p);
        if self.start > 0 && i < self.len() / 2 {
            // Shift the keys before it one place down, into the room.
            let s = self.start;
            self.buf.copy_within(s..s + i, s - 1);
            self.start = s - 1;
            self.buf[s - 1 + i] = p;
        } else {
            self.reclaim_front();
            self.buf.insert(self.start + i, p);
        }
    }

    fn remove(&mut self, p: Packed) {
        let keys = self.keys();
        let near = self.near;
        // The key C-LOOK chose (at `near`, or just behind it), the front
        // (sequential streams), else a search.
        let i = if keys.get(near) == Some(&p) {
            near
        } else if near > 0 && keys.get(near - 1) == Some(&p) {
            near - 1
        } else if keys.first() == Some(&p) {
            0
        } else {
            self.lower_bound(p)
        };
        debug_assert_eq!(self.keys().get(i), Some(&p), "removing a key not held");
        let s = self.start;
        if i == 0 {
            self.start = s + 1;
        } else if i < self.len() / 2 {
            // Shift the keys before it one place up.
            self.buf.copy_within(s..s + i, s + 1);
            self.start = s + 1;
        } else {
            self.buf.remove(s + i);
        }
        if self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
            if self.buf.capacity() > KEEP {
                self.buf.shrink_to(KEEP);
            }
        }
    }

    /// The nearest key at or after `head`'s sector and the nearest before
    /// it; remembers where they are for the removal that follows.
    #[inline]
    fn around(&mut self, head: u64) -> (Option<Key>, Option<Key>) {
        let i = self.lower_bound(pack((head, 0)));
        self.near = i;
        let keys = self.keys();
        (
            keys.get(i).copied().map(unpack),
            i.checked_sub(1).map(|j| unpack(keys[j])),
        )
    }
}

/// Requests of one flow in (sector, slot) order.
#[derive(Clone, Debug)]
pub enum Sorted {
    /// Up to [`DEEP`] keys in one buffer.
    Shallow(Shallow),
    /// More, in a B-tree.
    Deep(BTreeSet<Key>),
}

impl Default for Sorted {
    fn default() -> Self {
        Sorted::Shallow(Shallow::default())
    }
}

impl Sorted {
    /// Keys held.
    #[inline]
    pub fn len(&self) -> usize {
        match self {
            Sorted::Shallow(v) => v.len(),
            Sorted::Deep(b) => b.len(),
        }
    }

    /// Adds a key (not held yet).
    pub fn insert(&mut self, key: Key) {
        match self {
            Sorted::Shallow(v) if v.len() >= DEEP => {
                let mut b: BTreeSet<Key> = v.keys().iter().map(|&p| unpack(p)).collect();
                b.insert(key);
                *self = Sorted::Deep(b);
            }
            Sorted::Shallow(v) => v.insert(pack(key)),
            Sorted::Deep(b) => {
                b.insert(key);
            }
        }
    }

    /// Removes a held key.
    pub fn remove(&mut self, key: Key) {
        match self {
            Sorted::Shallow(v) => v.remove(pack(key)),
            Sorted::Deep(b) => {
                let removed = b.remove(&key);
                debug_assert!(removed, "removing a request that is not queued");
                if b.is_empty() {
                    *self = Sorted::default();
                }
            }
        }
    }

    /// The nearest key at or after sector `head` and the nearest before
    /// it.
    #[inline]
    pub fn around(&mut self, head: u64) -> (Option<Key>, Option<Key>) {
        match self {
            Sorted::Shallow(v) => v.around(head),
            Sorted::Deep(b) => (
                b.range((head, 0)..).next().copied(),
                b.range(..(head, 0)).next_back().copied(),
            ),
        }
    }

    /// The lowest key.
    #[inline]
    pub fn first(&self) -> Option<Key> {
        match self {
            Sorted::Shallow(v) => v.keys().first().map(|&p| unpack(p)),
            Sorted::Deep(b) => b.first().copied(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random insertions and removals (at the front, next to the last
    /// C-LOOK position, anywhere; appends and pops like sequential
    /// streams), across the shallow/deep threshold both ways, agree with a
    /// sorted `Vec` at every step.
    #[test]
    fn agrees_with_a_sorted_vec() {
        let mut rnd = crate::xorshift(0x9E37_79B9_7F4A_7C15u64);
        let mut s = Sorted::default();
        let mut reference: Vec<Key> = vec![];
        let mut next_slot: SlotIdx = 0;
        let mut tail = 1u64 << 40;
        for step in 0..200_000u32 {
            // Phases: grow past DEEP, shrink to empty, hover shallow.
            let target = match (step / 5_000) % 3 {
                0 => 3 * DEEP,
                1 => 0,
                _ => 40,
            };
            let add = reference.len() < target || (reference.is_empty() && target > 0);
            if add && !rnd().is_multiple_of(4) {
                let sector = match rnd() % 4 {
                    0 => {
                        tail += 8;
                        tail
                    }
                    1 => rnd() % 64, // ties on the sector
                    _ => rnd() % (1 << 41),
                };
                let key = (sector, next_slot);
                next_slot = next_slot.wrapping_add(1);
                s.insert(key);
                let i = reference.partition_point(|&k| k < key);
                reference.insert(i, key);
            } else if !reference.is_empty() {
                let head = rnd() % (1 << 41);
                let (ahead, behind) = s.around(head);
                let i = reference.partition_point(|&(sec, _)| sec < head);
                assert_eq!(ahead, reference.get(i).copied());
                assert_eq!(behind, i.checked_sub(1).map(|j| reference[j]));
                let j = match rnd() % 4 {
                    0 => 0,
                    1 if ahead.is_some() => i,
                    2 if behind.is_some() => i - 1,
                    _ => (rnd() % reference.len() as u64) as usize,
                };
                s.remove(reference.remove(j));
            }
            assert_eq!(s.len(), reference.len());
            assert_eq!(s.first(), reference.first().copied());
        }
    }

    /// A buffer a deep queue grew is given back, down to [`KEEP`] keys,
    /// when the queue drains.
    #[test]
    fn a_drained_buffer_gives_back_what_a_deep_queue_grew() {
        let mut s = Sorted::default();
        let keys: Vec<Key> = (0..1000u64)
            .map(|i| ((i * 7919) % 100_003 * 8, i as SlotIdx))
            .collect();
        for &k in &keys {
            s.insert(k);
        }
        for &k in &keys {
            s.remove(k);
        }
        let Sorted::Shallow(v) = &s else {
            panic!("shallow")
        };
        assert_eq!(v.len(), 0);
        assert!(v.buf.capacity() <= KEEP, "{}", v.buf.capacity());
    }

    /// A sequential stream (append at the back, leave from the front)
    /// keeps a bounded buffer: the room at the front is reclaimed.
    #[test]
    fn a_sequential_stream_keeps_a_bounded_buffer() {
        let mut s = Sorted::default();
        for i in 0..100_000u64 {
            s.insert((i * 8, i as SlotIdx));
            if i >= 32 {
                let j = i - 32;
                s.remove((j * 8, j as SlotIdx));
            }
        }
        let Sorted::Shallow(v) = &s else {
            panic!("shallow")
        };
        assert_eq!(v.len(), 32);
        assert!(v.buf.capacity() <= 4 * 32, "{}", v.buf.capacity());
    }
}
