//! Pieces the baselines share: a sorted request list (the kernel's rb-tree
//! "sort_list"), back-merge chains, per-flow/per-group setting keys, and a
//! macro for the book-keeping half of [`bfq_core::Scheduler`].

use bfq_core::table::{IdMap, SlotIdx};
use bfq_core::{FlowId, GroupId, Op, SchedError, Settings};

/// A list of queued requests kept sorted by `(key, seq)`.
///
/// A sorted `Vec` rather than a tree: insertion and removal are a binary
/// search plus a `memmove`, which for the queue lengths a disk scheduler
/// holds (tens to a few thousand) is faster than a B-tree and, once the
/// vector has grown to the largest backlog seen, never allocates.
#[derive(Clone, Debug)]
pub struct SortList<K: Ord + Copy> {
    items: Vec<(K, u64, SlotIdx)>,
}

impl<K: Ord + Copy> Default for SortList<K> {
    fn default() -> Self {
        SortList { items: Vec::new() }
    }
}

impl<K: Ord + Copy> SortList<K> {
    pub fn insert(&mut self, key: K, seq: u64, idx: SlotIdx) {
        let pos = self.items.partition_point(|e| (e.0, e.1) < (key, seq));
        self.items.insert(pos, (key, seq, idx));
    }

    /// Removes the entry `(key, seq)`; returns whether it was there.
    pub fn remove(&mut self, key: K, seq: u64) -> bool {
        let pos = self.items.partition_point(|e| (e.0, e.1) < (key, seq));
        if pos < self.items.len() && self.items[pos].0 == key && self.items[pos].1 == seq {
            self.items.remove(pos);
            true
        } else {
            false
        }
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn first(&self) -> Option<(K, u64, SlotIdx)> {
        self.items.first().copied()
    }

    /// First entry with key `>= key`.
    pub fn ceil(&self, key: K) -> Option<(K, u64, SlotIdx)> {
        let pos = self.items.partition_point(|e| e.0 < key);
        self.items.get(pos).copied()
    }

    /// First entry after `(key, seq)` in list order.
    pub fn after(&self, key: K, seq: u64) -> Option<(K, u64, SlotIdx)> {
        let pos = self.items.partition_point(|e| (e.0, e.1) <= (key, seq));
        self.items.get(pos).copied()
    }

    /// Whether `(key, seq)` is in the list.
    pub fn contains(&self, key: K, seq: u64) -> bool {
        let pos = self.items.partition_point(|e| (e.0, e.1) < (key, seq));
        pos < self.items.len() && self.items[pos].0 == key && self.items[pos].1 == seq
    }

    /// Last entry with key `< key`.
    pub fn below(&self, key: K) -> Option<(K, u64, SlotIdx)> {
        let pos = self.items.partition_point(|e| e.0 < key);
        if pos == 0 {
            None
        } else {
            Some(self.items[pos - 1])
        }
    }
}

/// C-LOOK over a sector-sorted list: the first request at or after `head`,
/// else the lowest one (the sweep wraps around).
pub fn clook_pick(list: &SortList<u64>, head: u64) -> Option<(u64, u64, SlotIdx)> {
    list.ceil(head).or_else(|| list.first())
}

/// Back-merge bookkeeping shared by `noop`, `deadline`, `as` and
/// `as-prio`.
///
/// The interface hands the device one request at a time, so a merge cannot
/// make one bigger request. A request that starts exactly where a queued
/// *unit* (a request and the requests already merged behind it) ends, goes
/// the same direction and belongs to the same merge class (e.g. the same
/// as-prio level) is appended to that unit: it takes no place of its own in
/// the policy's sort and FIFO lists, and when the unit is chosen its
/// requests are dispatched back to back, in order, before any other
/// decision. That is what a merged request looks like to the disk: one
/// contiguous transfer. Units are capped at `max_sectors` (the kernel's
/// `max_sectors_kb`, 512 KiB by default). Front merges are not modelled.
#[derive(Clone, Debug, Default)]
pub struct Merger {
    /// (end sector, direction, class) -> unit head.
    tails: IdMap<(u64, bool, u32), SlotIdx>,
    pub max_sectors: u64,
    /// Requests of the unit being dispatched, still to go.
    pub pending: Option<SlotIdx>,
}

/// Per-request merge links; embed in the slot's extra data.
#[derive(Clone, Copy, Debug, Default)]
pub struct MergeLink {
    /// Next request of the unit (valid on every member).
    pub next: Option<SlotIdx>,
    /// Last request of the unit (valid on the head).
    pub tail: SlotIdx,
    /// Sectors of the whole unit (valid on the head).
    pub unit_sectors: u64,
    /// Whether this request is a unit head (has its own place in lists).
    pub head: bool,
}

impl Merger {
    pub fn new(max_sectors: u64) -> Self {
        Merger {
            tails: IdMap::default(),
            max_sectors,
            pending: None,
        }
    }

    /// The unit a request starting at `sector` could join.
    pub fn find(&self, sector: u64, op: Op, class: u32) -> Option<SlotIdx> {
        self.tails.get(&(sector, op == Op::Write, class)).copied()
    }

    /// Records `head` as a unit ending at `end`.
    pub fn set_tail(&mut self, end: u64, op: Op, class: u32, head: SlotIdx) {
        self.tails.insert((end, op == Op::Write, class), head);
    }

    /// Forgets the unit `head` ending at `end` (when it is dispatched or
    /// grows).
    pub fn clear_tail(&mut self, end: u64, op: Op, class: u32, head: SlotIdx) {
        let k = (end, op == Op::Write, class);
        if self.tails.get(&k) == Some(&head) {
            self.tails.remove(&k);
        }
    }
}

/// Where a per-node setting applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Node {
    /// A flow (`NAME.fN`).
    Flow(FlowId),
    /// A group (`NAME.gN`).
    Group(GroupId),
}

/// Reads every setting `PREFIX.fN` / `PREFIX.flowN` (flow `N`) and
/// `PREFIX.gN` / `PREFIX.groupN` (group `N`); `:` or `@` may replace the
/// dot. Returns `(node, raw value)` pairs in insertion order.
pub fn node_settings(s: &mut Settings, prefix: &str) -> Result<Vec<(Node, String)>, SchedError> {
    let keys: Vec<String> = s
        .pairs()
        .map(|(k, _)| k.to_string())
        .filter(|k| {
            k.len() > prefix.len()
                && k.starts_with(prefix)
                && matches!(k.as_bytes()[prefix.len()], b'.' | b':' | b'@')
        })
        .collect();
    let mut out = Vec::new();
    for key in keys {
        let value = s.string(&key, "");
        let who = &key[prefix.len() + 1..];
        let parsed = if let Some(n) = who.strip_prefix("flow").or_else(|| who.strip_prefix('f')) {
            n.parse::<u32>().ok().map(|n| Node::Flow(FlowId(n)))
        } else if let Some(n) = who.strip_prefix("group").or_else(|| who.strip_prefix('g')) {
            n.parse::<u32>().ok().map(|n| Node::Group(GroupId(n)))
        } else {
            None
        };
        match parsed {
            Some(node) => out.push((node, value)),
            None => {
                return Err(SchedError::InvalidSetting {
                    key,
                    value,
                    why: format!(
                        "expected {prefix}.fN (flow N) or {prefix}.gN (group N), N a number"
                    ),
                })
            }
        }
    }
    Ok(out)
}

/// Largest rate a rate setting takes: 2^50 bytes (1 PiB) or requests per
/// second.
pub const MAX_RATE: u64 = 1 << 50;

/// Parses a rate or count value (`10M`, `4096`, `0` = none) in
/// `0..=`[`MAX_RATE`].
pub fn parse_rate(key: &str, v: &str) -> Result<u64, SchedError> {
    match bfq_core::settings::parse_u64(v) {
        Some(x) if x <= MAX_RATE => Ok(x),
        _ => Err(SchedError::InvalidSetting {
            key: key.to_string(),
            value: v.to_string(),
            why: format!(
                "must be an integer in 0..={MAX_RATE} (k/M/G suffixes are powers of 1024)"
            ),
        }),
    }
}

/// Parses a duration value in `0..=`[`bfq_core::settings::MAX_DURATION`].
pub fn parse_dur(key: &str, v: &str) -> Result<u64, SchedError> {
    use bfq_core::settings::{format_duration, MAX_DURATION};
    match bfq_core::settings::parse_duration(v) {
        Some(x) if x <= MAX_DURATION => Ok(x),
        _ => Err(SchedError::InvalidSetting {
            key: key.to_string(),
            value: v.to_string(),
            why: format!(
                "must be a duration in 0..={} such as 20ms or 1s",
                format_duration(MAX_DURATION)
            ),
        }),
    }
}

/// Grows `v` so that index `i` exists.
pub fn ensure<T: Default>(v: &mut Vec<T>, i: usize) {
    if v.len() <= i {
        v.resize_with(i + 1, T::default);
    }
}

/// Implements the topology half of the trait (groups, `queued`,
/// `in_flight`) for a struct with fields `table` and `topo`.
macro_rules! topology_methods {
    // Also flows that carry no per-flow state of the scheduler's own: they
    // are added and removed in `topo` only, and a completion only releases
    // the request's hold on its flow.
    (flows) => {
        $crate::util::topology_methods!(remove_flow);
        fn add_flow(
            &mut self,
            now: bfq_core::Time,
            spec: bfq_core::FlowSpec,
        ) -> Result<bfq_core::FlowId, bfq_core::SchedError> {
            bfq_core::table::check_time(now)?;
            self.topo.add_flow(spec, ())
        }
        fn complete(
            &mut self,
            now: bfq_core::Time,
            id: bfq_core::ReqId,
        ) -> Result<(), bfq_core::SchedError> {
            bfq_core::table::check_time(now)?;
            let slot = self.table.complete(id)?;
            self.topo.release(slot.req.flow);
            Ok(())
        }
    };
    // Also `remove_flow` for a scheduler whose per-flow state outlives the
    // flow's removal (it is retired in `topo` and freed with its last
    // request).
    (remove_flow) => {
        $crate::util::topology_methods!();
        fn remove_flow(
            &mut self,
            now: bfq_core::Time,
            flow: bfq_core::FlowId,
        ) -> Result<(), bfq_core::SchedError> {
            bfq_core::table::check_time(now)?;
            self.topo.retire_flow(flow).map(|_| ())
        }
    };
    () => {
        fn add_group(
            &mut self,
            parent: bfq_core::GroupId,
            weight: u32,
        ) -> Result<bfq_core::GroupId, bfq_core::SchedError> {
            self.topo.add_group(parent, weight, ())
        }
        fn remove_group(&mut self, group: bfq_core::GroupId) -> Result<(), bfq_core::SchedError> {
            self.topo.remove_group(group).map(|_| ())
        }
        fn queued(&self) -> usize {
            self.table.queued()
        }
        fn in_flight(&self) -> usize {
            self.table.in_flight()
        }
    };
}
pub(crate) use topology_methods;

/// Slot data that carries a [`MergeLink`].
pub trait Linked: Copy + Default {
    fn link(&self) -> &MergeLink;
    fn link_mut(&mut self) -> &mut MergeLink;
}

/// Implements [`Linked`] for a slot-data struct with a field `link`.
macro_rules! linked_by_field {
    ($t:ty) => {
        impl $crate::util::Linked for $t {
            fn link(&self) -> &$crate::util::MergeLink {
                &self.link
            }
            fn link_mut(&mut self) -> &mut $crate::util::MergeLink {
                &mut self.link
            }
        }
    };
}
pub(crate) use linked_by_field;

impl Linked for MergeLink {
    fn link(&self) -> &MergeLink {
        self
    }
    fn link_mut(&mut self) -> &mut MergeLink {
        self
    }
}

use bfq_core::table::RequestTable;

/// Tries to append the request just stored at `idx` to a queued unit of
/// merge class `class`. Returns `true` when merged (the caller then does
/// not put it in its own lists); otherwise makes it the head of a new unit.
pub fn merge_or_head<X: Linked>(
    table: &mut RequestTable<X>,
    m: &mut Merger,
    idx: SlotIdx,
    class: u32,
) -> bool {
    let r = table.slot(idx).req;
    if m.max_sectors > 0 {
        if let Some(h) = m.find(r.sector, r.op, class) {
            let hl = *table.slot(h).extra.link();
            if hl.head && hl.unit_sectors + u64::from(r.sectors) <= m.max_sectors {
                table.slot_mut(hl.tail).extra.link_mut().next = Some(idx);
                {
                    let l = table.slot_mut(h).extra.link_mut();
                    l.tail = idx;
                    l.unit_sectors += u64::from(r.sectors);
                }
                *table.slot_mut(idx).extra.link_mut() = MergeLink {
                    next: None,
                    tail: idx,
                    unit_sectors: 0,
                    head: false,
                };
                m.clear_tail(r.sector, r.op, class, h);
                m.set_tail(r.end(), r.op, class, h);
                return true;
            }
        }
    }
    *table.slot_mut(idx).extra.link_mut() = MergeLink {
        next: None,
        tail: idx,
        unit_sectors: u64::from(r.sectors),
        head: true,
    };
    if m.max_sectors > 0 {
        m.set_tail(r.end(), r.op, class, idx);
    }
    false
}

/// Dispatches unit head `h`: forgets it as a merge target and queues the
/// rest of its unit to go next. Returns the head request.
pub fn dispatch_unit<X: Linked>(
    table: &mut RequestTable<X>,
    m: &mut Merger,
    now: bfq_core::Time,
    h: SlotIdx,
    class: u32,
) -> bfq_core::Request {
    let l = *table.slot(h).extra.link();
    let tail_end = table.slot(l.tail).req.end();
    let op = table.slot(h).req.op;
    m.clear_tail(tail_end, op, class, h);
    m.pending = l.next;
    table.dispatch(now, h)
}

/// Dispatches the next request of the unit being dispatched, if any.
pub fn dispatch_pending<X: Linked>(
    table: &mut RequestTable<X>,
    m: &mut Merger,
    now: bfq_core::Time,
) -> Option<bfq_core::Request> {
    let p = m.pending?;
    m.pending = table.slot(p).extra.link().next;
    Some(table.dispatch(now, p))
}

/// The kernel's `as_choose_req`/`cfq_choose_req` over a sector-sorted list:
/// between the first request at or after `last` (or, wrapping, the lowest)
/// and the last one before `last`, take the nearer, counting a backward
/// distance `penalty` times and not at all beyond `back_max` sectors.
pub fn choose_req(list: &SortList<u64>, last: u64, back_max: u64, penalty: u64) -> Option<SlotIdx> {
    let fwd = list.ceil(last).or_else(|| list.first());
    let back = list.below(last);
    let dist = |s: u64| -> Option<u64> {
        if s >= last {
            Some(s - last)
        } else if last - s <= back_max {
            Some((last - s).saturating_mul(penalty))
        } else {
            None
        }
    };
    match (fwd, back) {
        (None, None) => None,
        (Some(a), None) | (None, Some(a)) => Some(a.2),
        (Some(a), Some(c)) => Some(match (dist(a.0), dist(c.0)) {
            (Some(d1), Some(d2)) => {
                if d1 < d2 || (d1 == d2 && a.0 >= c.0) {
                    a.2
                } else {
                    c.2
                }
            }
            (Some(_), None) => a.2,
            (None, Some(_)) => c.2,
            (None, None) => {
                if a.0 <= c.0 {
                    a.2
                } else {
                    c.2
                }
            }
        }),
    }
}

/// Decaying think-time and seek statistics (the kernel's `ttime_*` and
/// `seek_*` fields of `as_io_context`/`cfq_io_context`, fixed point with
/// samples scaled by 256 and a 7/8 decay).
#[derive(Clone, Copy, Debug, Default)]
pub struct IoStats {
    pub ttime_samples: u64,
    pub ttime_total: u64,
    pub ttime_mean: u64,
    pub seek_samples: u64,
    pub seek_total: u64,
    pub seek_mean: u64,
}

impl IoStats {
    pub fn add_think(&mut self, t: u64) {
        self.ttime_samples = (7 * self.ttime_samples + 256) / 8;
        self.ttime_total = (7 * self.ttime_total + 256 * t) / 8;
        self.ttime_mean = (self.ttime_total + 128) / self.ttime_samples;
    }
    pub fn add_seek(&mut self, dist: u64) {
        let cap = if self.seek_samples <= 60 {
            self.seek_mean * 4 + 2 * 1024 * 1024
        } else {
            self.seek_mean * 4 + 2 * 1024 * 64
        };
        let d = dist.min(cap);
        self.seek_samples = (7 * self.seek_samples + 256) / 8;
        self.seek_total = (7 * self.seek_total + 256 * d) / 8;
        self.seek_mean = (self.seek_total + self.seek_samples / 2) / self.seek_samples;
    }
}
