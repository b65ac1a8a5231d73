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
//! usually needs no search.
//!
//! Beyond [`DEEP`] requests (a writeback flow with thousands of random
//! writes) one buffer's shifts would cost O(queue length) per request, so
//! the keys move to chunks: sorted buffers of at most [`CHUNK`] keys, in
//! order, with an index of each chunk's first key. A key's chunk is a
//! binary search over the index, its place one over the chunk, and an
//! insertion or removal shifts at most one chunk (2 KiB): O(log n + CHUNK)
//! per request. A full chunk splits in halves; one below a quarter full
//! merges with its smaller neighbour when both fit in three quarters of
//! a chunk, so that chunks stay at least about a quarter full on average
//! and a split or merge is followed by a quarter chunk's requests before
//! the next. Emptied chunks are kept as spares for the next split, up to
//! [`SPARE`] or a quarter of the chunks in use, so a queue that stays
//! deep allocates nothing, and a shrinking one gives back the room it no
//! longer uses beyond those spares (up to 32 KiB, or a quarter of the
//! chunks in use); a drained queue goes back to the buffer. The C-LOOK
//! position is remembered here too.

use crate::table::SlotIdx;

/// Queue length beyond which the sorted order moves to chunks. Up to
/// here the one buffer's shifts (of the shorter side, at most 8 KiB) cost
/// little more than the chunks' for random requests, and sequential
/// streams move nothing, where with chunks each removal at a chunk's
/// front shifts the chunk (`bfq bench-core --flows 1 --queued N
/// --reuse-ids`, 4 alternated rounds, medians, ns per request, with the
/// buffer against chunks from 128 requests: 1000 sequential 117 against
/// 135; random, 300: 181 against 174, 512: 207 against 186, 1000: 241
/// against 196; at 4000 random one buffer took 490 ns, the chunks 209).
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

/// Keys a chunk of a deep queue holds at most (2 KiB).
const CHUNK: usize = 128;

/// Emptied chunks a deep queue keeps for reuse at least; it keeps up to
/// a quarter of the chunks in use when that is more.
const SPARE: usize = 16;

/// Sorted keys in chunks, see the module documentation.
#[derive(Clone, Debug, Default)]
pub struct Deep {
    /// Each chunk's first key: the index a key's chunk is found in.
    firsts: Vec<Packed>,
    /// Non-empty ascending chunks of at most [`CHUNK`] keys (allocated
    /// with room for that many), each chunk's keys below the next's.
    chunks: Vec<Vec<Packed>>,
    /// Emptied chunks, kept with their room for the next split.
    spare: Vec<Vec<Packed>>,
    len: usize,
    /// (chunk, index) of the key C-LOOK found last at or after the head.
    near: (usize, usize),
}

impl Deep {
    /// The keys of a full buffer, in half-full chunks.
    fn from_sorted(keys: &[Packed]) -> Self {
        let mut d = Deep::default();
        for part in keys.chunks(CHUNK / 2) {
            let mut chunk = Vec::with_capacity(CHUNK);
            chunk.extend_from_slice(part);
            d.firsts.push(part[0]);
            d.chunks.push(chunk);
        }
        d.len = keys.len();
        d
    }

    /// The chunk `p` belongs in: the last one whose first key is not
    /// above it (the first chunk for a key below all).
    #[inline]
    fn chunk_of(&self, p: Packed) -> usize {
        self.firsts.partition_point(|&f| f <= p).saturating_sub(1)
    }

    /// A chunk's room, from the spares if there is one.
    fn take_chunk(&mut self) -> Vec<Packed> {
        self.spare
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(CHUNK))
    }

    /// Removes chunk `c` (its keys moved or removed), keeping its room
    /// as a spare unless enough are kept.
    fn drop_chunk(&mut self, c: usize) {
        self.firsts.remove(c);
        let mut chunk = self.chunks.remove(c);
        let keep = SPARE.max(self.chunks.len() / 4);
        self.spare.truncate(keep);
        if self.spare.len() < keep {
            chunk.clear();
            self.spare.push(chunk);
        }
    }

    /// Adds `p` to its chunk, splitting the chunk first if full.
    fn insert(&mut self, p: Packed) {
        let mut c = self.chunk_of(p);
        if self.chunks[c].len() == CHUNK {
            // Split a full chunk in halves.
            let mut upper = self.take_chunk();
            upper.extend_from_slice(&self.chunks[c][CHUNK / 2..]);
            self.chunks[c].truncate(CHUNK / 2);
            self.firsts.insert(c + 1, upper[0]);
            self.chunks.insert(c + 1, upper);
            if p > self.firsts[c + 1] {
                c += 1;
            }
        }
        let chunk = &mut self.chunks[c];
        let i = chunk.partition_point(|&k| k < p);
        chunk.insert(i, p);
        if i == 0 {
            self.firsts[c] = p;
        }
        self.len += 1;
    }

    /// Removes `p` from its chunk; an emptied chunk becomes a spare, a
    /// sparse one may merge.
    fn remove(&mut self, p: Packed) {
        let (nc, ni) = self.near;
        let at = |c: usize, i: usize| self.chunks.get(c).and_then(|ch| ch.get(i)) == Some(&p);
        // The key C-LOOK chose (at `near`, or just behind it), else a
        // search.
        let (c, i) = if at(nc, ni) {
            (nc, ni)
        } else if ni > 0 && at(nc, ni - 1) {
            (nc, ni - 1)
        } else {
            let c = self.chunk_of(p);
            (c, self.chunks[c].partition_point(|&k| k < p))
        };
        debug_assert!(at(c, i), "removing a key not held");
        self.len -= 1;
        let chunk = &mut self.chunks[c];
        chunk.remove(i);
        if chunk.is_empty() {
            self.drop_chunk(c);
            return;
        }
        if i == 0 {
            self.firsts[c] = chunk[0];
        }
        if chunk.len() < CHUNK / 4 {
            self.merge(c);
        }
    }

    /// Merges chunk `c`, below a quarter full, with its smaller neighbour
    /// when both fit in three quarters of a chunk (so that a merged chunk
    /// takes a quarter chunk's insertions before it splits again, and a
    /// split one a quarter chunk's removals before it merges).
    fn merge(&mut self, c: usize) {
        let len = |c: usize| self.chunks.get(c).map_or(usize::MAX, Vec::len);
        let other = match c.checked_sub(1) {
            Some(b) if len(b) <= len(c + 1) => b,
            _ => c + 1,
        };
        if len(other).saturating_add(len(c)) > 3 * CHUNK / 4 {
            return;
        }
        let (left, right) = (c.min(other), c.max(other));
        let (lower, upper) = self.chunks.split_at_mut(right);
        lower[left].extend_from_slice(&upper[0]);
        self.drop_chunk(right);
    }

    /// The nearest key at or after `head`'s sector and the nearest before
    /// it; remembers where the first is for the removal that follows.
    #[inline]
    fn around(&mut self, head: u64) -> (Option<Key>, Option<Key>) {
        let h = pack((head, 0));
        // Chunks that start below the head: the last of them holds the
        // key before it, and the key after it unless it ends below.
        let k = self.firsts.partition_point(|&f| f < h);
        let Some(c) = k.checked_sub(1) else {
            self.near = (0, 0);
            return (self.firsts.first().copied().map(unpack), None);
        };
        let chunk = &self.chunks[c];
        let i = chunk.partition_point(|&x| x < h);
        let behind = Some(unpack(chunk[i - 1]));
        if i < chunk.len() {
            self.near = (c, i);
            (Some(unpack(chunk[i])), behind)
        } else {
            self.near = (k, 0);
            (self.firsts.get(k).copied().map(unpack), behind)
        }
    }
}

/// Requests of one flow in (sector, slot) order.
#[derive(Clone, Debug)]
pub enum Sorted {
    /// Up to [`DEEP`] keys in one buffer.
    Shallow(Shallow),
    /// More, in chunks (boxed: a flow's queue is rarely deep).
    Deep(Box<Deep>),
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
            Sorted::Deep(d) => d.len,
        }
    }

    /// Adds a key (not held yet).
    pub fn insert(&mut self, key: Key) {
        match self {
            Sorted::Shallow(v) if v.len() >= DEEP => {
                let mut d = Box::new(Deep::from_sorted(v.keys()));
                d.insert(pack(key));
                *self = Sorted::Deep(d);
            }
            Sorted::Shallow(v) => v.insert(pack(key)),
            Sorted::Deep(d) => d.insert(pack(key)),
        }
    }

    /// Removes a held key.
    pub fn remove(&mut self, key: Key) {
        match self {
            Sorted::Shallow(v) => v.remove(pack(key)),
            Sorted::Deep(d) => {
                d.remove(pack(key));
                if d.len == 0 {
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
            Sorted::Deep(d) => d.around(head),
        }
    }

    /// The lowest key.
    #[inline]
    pub fn first(&self) -> Option<Key> {
        match self {
            Sorted::Shallow(v) => v.keys().first().map(|&p| unpack(p)),
            Sorted::Deep(d) => d.firsts.first().map(|&p| unpack(p)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// Random keys and C-LOOK heads for the tests: a sequential stream's
    /// next sectors, ties and clusters below `cluster`, sectors anywhere;
    /// heads on queued sectors too (ties, a stream's next request), where
    /// "at or after the head" is decided.
    struct RandomKeys {
        tail: u64,
        next_slot: SlotIdx,
        cluster: u64,
    }

    impl RandomKeys {
        fn new(cluster: u64) -> Self {
            RandomKeys {
                tail: 1 << 40,
                next_slot: 0,
                cluster,
            }
        }

        fn key(&mut self, rnd: &mut impl FnMut() -> u64) -> Key {
            let sector = match rnd() % 4 {
                0 => {
                    self.tail += 8;
                    self.tail
                }
                1 => rnd() % self.cluster,
                _ => rnd() % (1 << 41),
            };
            let key = (sector, self.next_slot);
            self.next_slot = self.next_slot.wrapping_add(1);
            key
        }

        fn head(&self, rnd: &mut impl FnMut() -> u64) -> u64 {
            match rnd() % 3 {
                0 => rnd() % (self.cluster + 8),
                1 => self.tail.saturating_sub(8 * (rnd() % 64)),
                _ => rnd() % (1 << 41),
            }
        }
    }

    /// Random insertions and removals (at the front, next to the last
    /// C-LOOK position, anywhere; appends and pops like sequential
    /// streams), across the shallow/deep threshold both ways, agree with a
    /// sorted `Vec` at every step.
    #[test]
    fn agrees_with_a_sorted_vec() {
        let mut rnd = crate::xorshift(0x9E37_79B9_7F4A_7C15u64);
        let mut s = Sorted::default();
        let mut reference: Vec<Key> = vec![];
        let mut keys = RandomKeys::new(64); // ties on the sector
        for step in 0..200_000u32 {
            // Phases: grow past DEEP, shrink to empty, hover shallow.
            let target = match (step / 5_000) % 3 {
                0 => 3 * DEEP,
                1 => 0,
                _ => 40,
            };
            let add = reference.len() < target || (reference.is_empty() && target > 0);
            if add && !rnd().is_multiple_of(4) {
                let key = keys.key(&mut rnd);
                s.insert(key);
                let i = reference.partition_point(|&k| k < key);
                reference.insert(i, key);
            } else if !reference.is_empty() {
                let head = keys.head(&mut rnd);
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

    /// The chunks' invariants: non-empty, at most [`CHUNK`] keys each
    /// in room for [`CHUNK`], ascending across chunks, indexed by their
    /// first keys, counted in `len`; the spares empty.
    fn check_chunks(d: &Deep) {
        assert_eq!(d.firsts.len(), d.chunks.len());
        let mut last = None;
        for (f, chunk) in d.firsts.iter().zip(&d.chunks) {
            assert!(!chunk.is_empty() && chunk.len() <= CHUNK);
            assert_eq!(chunk.capacity(), CHUNK);
            assert_eq!(Some(f), chunk.first());
            assert!(chunk.windows(2).all(|w| w[0] < w[1]));
            assert!(last < Some(*f));
            last = chunk.last().copied();
        }
        assert_eq!(d.len, d.chunks.iter().map(Vec::len).sum::<usize>());
        assert!(d
            .spare
            .iter()
            .all(|c| c.is_empty() && c.capacity() == CHUNK));
    }

    /// Deep queues (to 8 x [`DEEP`]) grown, shrunk while staying deep,
    /// drained across the threshold and grown across it again, with
    /// random, clustered and sequential keys and removals at the C-LOOK
    /// position or anywhere, agree with a `BTreeSet` at every step.
    #[test]
    fn deep_chunks_agree_with_a_btreeset() {
        let mut rnd = crate::xorshift(0x2545_F491_4F6C_DD1Du64);
        let mut s = Sorted::default();
        let mut model: BTreeSet<Key> = BTreeSet::new();
        let mut keys = RandomKeys::new(512); // ties and clusters
        let targets = [
            8 * DEEP,
            2 * DEEP,
            5 * DEEP,
            0,
            40,
            DEEP + 60,
            DEEP - 60,
            3 * DEEP,
            0,
        ];
        for (phase, &target) in targets.iter().enumerate() {
            let shrink = model.len() > target;
            for step in 0..60_000u32 {
                if model.len() == target && step > 20_000 {
                    break;
                }
                // Mostly toward the target, a quarter of the time away.
                let add = (model.len() < target) != rnd().is_multiple_of(4) || model.is_empty();
                if add {
                    let key = keys.key(&mut rnd);
                    s.insert(key);
                    model.insert(key);
                } else {
                    let head = keys.head(&mut rnd);
                    let (ahead, behind) = s.around(head);
                    assert_eq!(ahead, model.range((head, 0)..).next().copied());
                    assert_eq!(behind, model.range(..(head, 0)).next_back().copied());
                    let key = match rnd() % 4 {
                        0 => model.first().copied(),
                        1 => ahead,
                        2 => behind,
                        _ => model.range((rnd() % (1 << 41), 0)..).next().copied(),
                    };
                    let key = key.or(model.first().copied()).unwrap();
                    s.remove(key);
                    model.remove(&key);
                }
                assert_eq!(s.len(), model.len());
                assert_eq!(s.first(), model.first().copied());
                match &s {
                    Sorted::Deep(d) if step % 64 == 0 => check_chunks(d),
                    _ => {}
                }
            }
            if let Sorted::Deep(d) = &s {
                check_chunks(d);
                let keys: Vec<Key> = d.chunks.iter().flatten().map(|&p| unpack(p)).collect();
                assert!(keys.iter().eq(model.iter()), "phase {phase}");
            }
            assert!(!shrink || model.len() <= target + 100, "phase {phase}");
        }
    }

    /// A deep queue that shrinks keeps room for little more than its keys
    /// (chunks merge, spares are bounded), and once drained is a buffer
    /// with room for [`KEEP`] keys again.
    #[test]
    fn a_shrinking_deep_queue_gives_back_its_chunks() {
        let mut rnd = crate::xorshift(0xD1B5_4A32_D192_ED03u64);
        let mut s = Sorted::default();
        let mut keys: Vec<Key> = (0..16 * DEEP as u32)
            .map(|i| (rnd() % (1 << 41), i))
            .collect();
        for &k in &keys {
            s.insert(k);
        }
        let room = |s: &Sorted| match s {
            Sorted::Deep(d) => (d.chunks.len() + d.spare.len()) * CHUNK,
            Sorted::Shallow(v) => v.buf.capacity(),
        };
        assert!(room(&s) <= 2 * 16 * DEEP + CHUNK, "{}", room(&s));
        // Random removals down to 1000 keys: chunks merge.
        while keys.len() > 1000 {
            let i = (rnd() % keys.len() as u64) as usize;
            s.remove(keys.swap_remove(i));
        }
        let Sorted::Deep(d) = &s else { panic!("deep") };
        check_chunks(d);
        assert!(d.spare.len() <= SPARE.max(d.chunks.len() / 4));
        assert!(room(&s) <= 8 * 1000 + (SPARE + 1) * CHUNK, "{}", room(&s));
        for k in keys.drain(..) {
            s.remove(k);
        }
        assert!(matches!(s, Sorted::Shallow(_)));
        assert!(room(&s) <= KEEP, "{}", room(&s));
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
