//! Book-keeping every policy shares: the request table (id -> slot, with
//! the queued/dispatched state and all bad-input checks) and the flow/group
//! topology (weights, parents, retirement of removed flows).
//!
//! Both are allocation-free in steady state: slots and ids are recycled and
//! the id index keeps its capacity.

use crate::error::SchedError;
use crate::types::{
    Dispatch, FlowId, FlowSpec, GroupId, ReqId, Request, Time, ID_INDEX_BITS, MAX_LIVE_IDS,
    MAX_TIME, MAX_WEIGHT, MIN_WEIGHT,
};
use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

/// A small fast hasher for integer keys (Fibonacci multiply). Request ids
/// are caller-chosen integers; no iteration order is ever observed, so the
/// map cannot make the scheduler nondeterministic.
#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (n ^ (n >> 29)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n))
    }
}

/// A `HashMap` keyed by integers with [`IdHasher`].
pub type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// Request ids below this are found by direct indexing, without hashing:
/// callers that number requests by a slot of their own (the engine does)
/// never touch the hash map. At most 16 KiB per table.
const DIRECT_IDS: u64 = 1 << 12;

/// Marks an id of the direct range that is not held.
const NO_SLOT: SlotIdx = SlotIdx::MAX;

/// Request id -> slot: ids below [`DIRECT_IDS`] in a table indexed by the
/// id (grown to the largest such id seen, rounded up to a power of two),
/// the others in an [`IdMap`]. Both keep their capacity as ids come and
/// go.
#[derive(Clone, Debug, Default)]
struct IdIndex {
    direct: Vec<SlotIdx>,
    map: IdMap<ReqId, SlotIdx>,
}

impl IdIndex {
    /// The slot of `id`, if held.
    #[inline]
    fn get(&self, id: ReqId) -> Option<SlotIdx> {
        if id < DIRECT_IDS {
            self.direct
                .get(id as usize)
                .copied()
                .filter(|&s| s != NO_SLOT)
        } else {
            self.map.get(&id).copied()
        }
    }

    /// Stores `id -> slot`; `false` (and no change) when `id` is held.
    #[inline]
    fn insert(&mut self, id: ReqId, slot: SlotIdx) -> bool {
        if id >= DIRECT_IDS {
            let Entry::Vacant(e) = self.map.entry(id) else {
                return false;
            };
            e.insert(slot);
            return true;
        }
        let i = id as usize;
        if i >= self.direct.len() {
            self.direct
                .resize((i + 1).next_power_of_two().max(64), NO_SLOT);
        }
        if self.direct[i] != NO_SLOT {
            return false;
        }
        self.direct[i] = slot;
        true
    }

    /// Forgets `id`; its slot if it was held.
    #[inline]
    fn remove(&mut self, id: ReqId) -> Option<SlotIdx> {
        if id < DIRECT_IDS {
            let s = self.direct.get_mut(id as usize)?;
            Some(std::mem::replace(s, NO_SLOT)).filter(|&s| s != NO_SLOT)
        } else {
            self.map.remove(&id)
        }
    }
}

/// Where a request stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReqState {
    /// Unused slot.
    Free,
    /// Held by the scheduler, not yet dispatched.
    Queued,
    /// Dispatched, in flight on the device.
    Dispatched,
}

/// One slot of the request table.
#[derive(Clone, Copy, Debug)]
pub struct Slot<X> {
    /// The request as handed in.
    pub req: Request,
    /// Where it stands.
    pub state: ReqState,
    /// Time the request was added.
    pub arrival: Time,
    /// Time it was dispatched (valid when dispatched).
    pub dispatched_at: Time,
    /// Bumped each time the slot is freed: lets lazy-deletion structures
    /// recognise stale entries.
    pub gen: u32,
    /// While the slot is free: the slot freed before it ([`NO_SLOT`]: none).
    next_free: SlotIdx,
    /// Policy-specific data.
    pub extra: X,
}

/// Index of a slot in a [`RequestTable`].
pub type SlotIdx = u32;

/// Requests held by a scheduler, by id and by slot.
///
/// Free slots are reused last freed first, through a list kept in the
/// free slots themselves: a request's completion and the next insertion
/// write only the slot and the list's head, beside the counts (declaration
/// order, `repr(C)`: what each request writes first).
#[derive(Clone, Debug)]
#[repr(C)]
pub struct RequestTable<X> {
    queued: usize,
    in_flight: usize,
    /// The last slot freed ([`NO_SLOT`]: none).
    free: SlotIdx,
    slots: Vec<Slot<X>>,
    index: IdIndex,
}

impl<X: Copy + Default> Default for RequestTable<X> {
    fn default() -> Self {
        Self::new()
    }
}

impl<X: Copy + Default> RequestTable<X> {
    /// An empty table.
    pub fn new() -> Self {
        RequestTable {
            queued: 0,
            in_flight: 0,
            free: NO_SLOT,
            slots: Vec::new(),
            index: IdIndex::default(),
        }
    }

    /// Checks a request before anything else changes (zero length,
    /// duplicate id).
    pub fn check(&self, req: &Request) -> Result<(), SchedError> {
        check_request(req)?;
        if self.index.get(req.id).is_some() {
            return Err(SchedError::DuplicateRequest(req.id));
        }
        Ok(())
    }

    /// Stores a checked request as queued and returns its slot (one
    /// look-up of the id: the duplicate check and the insertion share it).
    pub fn insert(&mut self, now: Time, req: Request, extra: X) -> Result<SlotIdx, SchedError> {
        check_request(&req)?;
        // The slot it takes: the last freed, else a new one.
        let idx = if self.free == NO_SLOT {
            self.slots.len() as SlotIdx
        } else {
            self.free
        };
        if !self.index.insert(req.id, idx) {
            return Err(SchedError::DuplicateRequest(req.id));
        }
        debug_assert!(self.slots.len() < NO_SLOT as usize);
        if idx == self.free {
            let s = &mut self.slots[idx as usize];
            self.free = s.next_free;
            s.req = req;
            s.state = ReqState::Queued;
            s.arrival = now;
            s.extra = extra;
        } else {
            self.slots.push(Slot {
                req,
                state: ReqState::Queued,
                arrival: now,
                dispatched_at: 0,
                gen: 0,
                next_free: NO_SLOT,
                extra,
            });
        }
        self.queued += 1;
        Ok(idx)
    }

    /// Admits a request for a flow of `topo`: checks the flow accepts
    /// requests, stores the request (zero length and duplicate ids are
    /// refused) and counts it as held by its flow. Nothing changes on error.
    pub fn admit<F, G>(
        &mut self,
        topo: &mut Topology<F, G>,
        now: Time,
        req: Request,
        extra: X,
    ) -> Result<SlotIdx, SchedError> {
        topo.check_flow(req.flow)?;
        let idx = self.insert(now, req, extra)?;
        topo.hold(req.flow)?;
        Ok(idx)
    }

    /// The slot at `idx`.
    #[inline]
    pub fn slot(&self, idx: SlotIdx) -> &Slot<X> {
        &self.slots[idx as usize]
    }

    /// The slot at `idx`, mutably.
    #[inline]
    pub fn slot_mut(&mut self, idx: SlotIdx) -> &mut Slot<X> {
        &mut self.slots[idx as usize]
    }

    /// Whether `(idx, gen)` still names a queued request.
    #[inline]
    pub fn is_queued(&self, idx: SlotIdx, gen: u32) -> bool {
        let s = &self.slots[idx as usize];
        s.gen == gen && s.state == ReqState::Queued
    }

    /// Marks a queued request dispatched and returns it.
    pub fn dispatch(&mut self, now: Time, idx: SlotIdx) -> Request {
        let s = &mut self.slots[idx as usize];
        debug_assert_eq!(s.state, ReqState::Queued);
        s.state = ReqState::Dispatched;
        s.dispatched_at = now;
        self.queued -= 1;
        self.in_flight += 1;
        s.req
    }

    /// Looks up a request by id.
    pub fn find(&self, id: ReqId) -> Option<SlotIdx> {
        self.index.get(id)
    }

    /// Validates a completion and returns the slot, without freeing it.
    pub fn check_complete(&self, id: ReqId) -> Result<SlotIdx, SchedError> {
        completable(&self.slots, id, self.index.get(id))
    }

    /// Completes a dispatched request: frees its slot and returns a copy
    /// (one look-up of the id for the check and the removal; a refused
    /// completion puts the id back, into the room it left: no allocation).
    pub fn complete(&mut self, id: ReqId) -> Result<Slot<X>, SchedError> {
        let held = self.index.remove(id);
        let idx = match completable(&self.slots, id, held) {
            Ok(idx) => idx,
            Err(e) => {
                if let Some(idx) = held {
                    self.index.insert(id, idx);
                }
                return Err(e);
            }
        };
        self.in_flight -= 1;
        let s = &mut self.slots[idx as usize];
        let out = *s;
        s.state = ReqState::Free;
        s.gen = s.gen.wrapping_add(1);
        s.next_free = self.free;
        self.free = idx;
        Ok(out)
    }

    /// Requests queued, not dispatched.
    pub fn queued(&self) -> usize {
        self.queued
    }

    /// Requests dispatched, not completed.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }
}

/// The end of a scheduler's clock: every call that takes a `now` past
/// [`MAX_TIME`] is refused with [`SchedError::TimeOutOfRange`] before
/// anything changes, so no deadline a scheduler computes (`now` plus at
/// most a few [`crate::settings::MAX_DURATION`]s) can overflow. One compare
/// on the hot path.
#[inline]
pub fn check_time(now: Time) -> Result<(), SchedError> {
    if now > MAX_TIME {
        return Err(SchedError::TimeOutOfRange(now));
    }
    Ok(())
}

/// [`check_time`] for `dispatch`, which has no error to return: `None` for
/// a valid `now`; past [`MAX_TIME`] the scheduler changes nothing and
/// answers [`Dispatch::Wait`] while it holds queued requests,
/// [`Dispatch::Empty`] otherwise.
#[inline]
pub fn dispatch_past_end(now: Time, queued: usize) -> Option<Dispatch> {
    if now <= MAX_TIME {
        return None;
    }
    Some(if queued == 0 {
        Dispatch::Empty
    } else {
        Dispatch::Wait
    })
}

/// The completion rule: request `id`, held in slot `idx` (`None`: not
/// held), must be known and dispatched; its slot.
fn completable<X>(
    slots: &[Slot<X>],
    id: ReqId,
    idx: Option<SlotIdx>,
) -> Result<SlotIdx, SchedError> {
    match idx {
        None => Err(SchedError::UnknownRequest(id)),
        Some(i) if slots[i as usize].state != ReqState::Dispatched => {
            Err(SchedError::NotDispatched(id))
        }
        Some(i) => Ok(i),
    }
}

/// Checks a request's own fields: not empty, and its end
/// (`sector + sectors`) addressable.
pub fn check_request(req: &Request) -> Result<(), SchedError> {
    if req.sectors == 0 {
        return Err(SchedError::ZeroLength(req.id));
    }
    if req.sector.checked_add(u64::from(req.sectors)).is_none() {
        return Err(SchedError::SectorOverflow(req.id));
    }
    Ok(())
}

/// Free indexes a [`Slab`] keeps before it reuses one: a removed id is
/// refused for at least this many creations after it.
const REUSE_AFTER: usize = 256;

/// Generations an index goes through before its ids repeat.
const GENERATIONS: u32 = 1 << (32 - ID_INDEX_BITS);

/// Entries by id whose indexes are reused with a new generation once freed
/// (oldest freed first, and only while at least `REUSE_AFTER` are free),
/// so that its size follows the most entries held at once, not how many
/// were ever created. Ids are `generation << ID_INDEX_BITS | index`.
#[derive(Clone, Debug)]
pub struct Slab<T> {
    slots: Vec<(u32, Option<T>)>,
    free: VecDeque<u32>,
    live: usize,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab {
            slots: Vec::new(),
            free: VecDeque::new(),
            live: 0,
        }
    }
}

impl<T> Slab<T> {
    fn raw(index: u32, gen: u32) -> u32 {
        (gen << ID_INDEX_BITS) | index
    }

    fn split(id: u32) -> (usize, u32) {
        (
            (id & ((1 << ID_INDEX_BITS) - 1)) as usize,
            id >> ID_INDEX_BITS,
        )
    }

    /// The id the next [`Slab::insert`] returns.
    pub fn next_id(&self) -> u32 {
        match self.free.front() {
            Some(&i) if self.free.len() >= REUSE_AFTER => Self::raw(i, self.slots[i as usize].0),
            _ => self.slots.len() as u32,
        }
    }

    /// Stores `v`; `None` when [`MAX_LIVE_IDS`] entries are held.
    pub fn insert(&mut self, v: T) -> Option<u32> {
        if self.live >= MAX_LIVE_IDS {
            return None;
        }
        let id = self.next_id();
        let (i, _) = Self::split(id);
        if i == self.slots.len() {
            self.slots.push((0, Some(v)));
        } else {
            self.free.pop_front();
            self.slots[i].1 = Some(v);
        }
        self.live += 1;
        Some(id)
    }

    /// The entry of `id`, if it is held.
    #[inline]
    pub fn get(&self, id: u32) -> Option<&T> {
        let (i, gen) = Self::split(id);
        match self.slots.get(i) {
            Some((g, Some(v))) if *g == gen => Some(v),
            _ => None,
        }
    }

    /// The entry of `id`, mutably, if it is held.
    #[inline]
    pub fn get_mut(&mut self, id: u32) -> Option<&mut T> {
        let (i, gen) = Self::split(id);
        match self.slots.get_mut(i) {
            Some((g, Some(v))) if *g == gen => Some(v),
            _ => None,
        }
    }

    /// Frees `id` and returns its entry.
    pub fn remove(&mut self, id: u32) -> Option<T> {
        let (i, gen) = Self::split(id);
        let slot = self.slots.get_mut(i)?;
        if slot.0 != gen || slot.1.is_none() {
            return None;
        }
        slot.0 = (slot.0 + 1) % GENERATIONS;
        self.free.push_back(i as u32);
        self.live -= 1;
        slot.1.take()
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.live
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Indexes in use or free: the size of any table indexed by this
    /// slab's indexes (at most the most entries held at once plus
    /// `REUSE_AFTER`).
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }
}

/// A flow as the topology keeps it.
///
/// Laid out in declaration order (`repr(C)`): `held`, which every request
/// changes twice, right after the policy's data, whose last fields are
/// BFQ's per-request ones ([`FlowState`](crate::bfq::FlowState)).
#[derive(Clone, Debug)]
#[repr(C)]
pub struct FlowEntry<F> {
    /// Policy-specific data.
    pub data: F,
    /// Requests held (queued or in flight).
    pub held: u32,
    /// Effective weight (explicit or from the priority level).
    pub weight: u32,
    /// Removed by the caller; freed once it holds no request.
    pub retired: bool,
    /// What the flow was created with.
    pub spec: FlowSpec,
}

/// A group as the topology keeps it.
#[derive(Clone, Debug)]
pub struct GroupEntry<G> {
    /// Parent group (the root is its own parent).
    pub parent: GroupId,
    /// Weight in the parent's tree, 1..=1000.
    pub weight: u32,
    /// Depth: the root is 0.
    pub depth: u32,
    /// Flows and groups below it.
    pub children: u32,
    /// Policy-specific data.
    pub data: G,
}

/// Flows and groups, with the checks every policy needs.
#[derive(Clone, Debug)]
pub struct Topology<F, G> {
    flows: Slab<FlowEntry<F>>,
    groups: Slab<GroupEntry<G>>,
}

/// Checks a weight is in 1..=1000.
pub fn check_weight(w: u32) -> Result<u32, SchedError> {
    if (MIN_WEIGHT..=MAX_WEIGHT).contains(&w) {
        Ok(w)
    } else {
        Err(SchedError::InvalidWeight(w))
    }
}

impl<F, G> Topology<F, G> {
    /// A topology holding only the root group.
    pub fn new(root: G) -> Self {
        let mut groups = Slab::default();
        groups.insert(GroupEntry {
            parent: GroupId::ROOT,
            weight: crate::types::DEFAULT_GROUP_WEIGHT,
            depth: 0,
            children: 0,
            data: root,
        });
        Topology {
            flows: Slab::default(),
            groups,
        }
    }

    /// Checks a flow spec (weight, level, group).
    pub fn check_spec(&self, spec: &FlowSpec) -> Result<u32, SchedError> {
        if spec.prio.level > 7 {
            return Err(SchedError::InvalidLevel(spec.prio.level));
        }
        self.group(spec.group)?;
        check_weight(spec.effective_weight())
    }

    /// Adds a group under `parent`.
    pub fn add_group(
        &mut self,
        parent: GroupId,
        weight: u32,
        data: G,
    ) -> Result<GroupId, SchedError> {
        check_weight(weight)?;
        let depth = self.group(parent)?.depth + 1;
        let id = self
            .groups
            .insert(GroupEntry {
                parent,
                weight,
                depth,
                children: 0,
                data,
            })
            .ok_or(SchedError::TooManyIds("groups"))?;
        self.group_mut(parent)?.children += 1;
        Ok(GroupId(id))
    }

    /// The id the next successful [`Topology::add_group`] returns.
    pub fn next_group_id(&self) -> GroupId {
        GroupId(self.groups.next_id())
    }

    /// Removes an empty, non-root group and returns its entry.
    pub fn remove_group(&mut self, id: GroupId) -> Result<GroupEntry<G>, SchedError> {
        if id == GroupId::ROOT {
            return Err(SchedError::GroupNotEmpty(id));
        }
        let g = self.group(id)?;
        if g.children > 0 {
            return Err(SchedError::GroupNotEmpty(id));
        }
        let parent = g.parent;
        self.group_mut(parent)?.children -= 1;
        Ok(self.groups.remove(id.0).expect("checked"))
    }

    /// Adds a flow with a checked spec.
    pub fn add_flow(&mut self, spec: FlowSpec, data: F) -> Result<FlowId, SchedError> {
        let weight = self.check_spec(&spec)?;
        let id = self
            .flows
            .insert(FlowEntry {
                spec,
                weight,
                retired: false,
                held: 0,
                data,
            })
            .ok_or(SchedError::TooManyIds("flows"))?;
        self.group_mut(spec.group)?.children += 1;
        Ok(FlowId(id))
    }

    /// The id the next successful [`Topology::add_flow`] returns.
    pub fn next_flow_id(&self) -> FlowId {
        FlowId(self.flows.next_id())
    }

    /// Marks a flow removed. Returns `true` when it held nothing and was
    /// freed at once (the caller drops its own state for it then).
    pub fn retire_flow(&mut self, id: FlowId) -> Result<bool, SchedError> {
        let f = self.flow_mut(id)?;
        f.retired = true;
        if f.held == 0 {
            self.free_flow(id);
            Ok(true)
        } else {
            Ok(false)
        }
    }

    fn free_flow(&mut self, id: FlowId) {
        if let Some(f) = self.flows.remove(id.0) {
            if let Some(g) = self.groups.get_mut(f.spec.group.0) {
                g.children -= 1;
            }
        }
    }

    /// Checks the flow accepts a new request and counts it as held.
    pub fn hold(&mut self, id: FlowId) -> Result<&mut FlowEntry<F>, SchedError> {
        let f = self.flow_mut(id)?;
        f.held += 1;
        Ok(f)
    }

    /// Checks the flow accepts a new request (live, not retired).
    pub fn check_flow(&self, id: FlowId) -> Result<(), SchedError> {
        self.flow(id).map(|_| ())
    }

    /// Counts a completed request. Returns `true` when this freed a
    /// retired flow.
    pub fn release(&mut self, id: FlowId) -> bool {
        let Some(f) = self.flows.get_mut(id.0) else {
            return false;
        };
        f.held -= 1;
        if f.retired && f.held == 0 {
            self.free_flow(id);
            true
        } else {
            false
        }
    }

    /// A live (not retired) flow.
    pub fn flow(&self, id: FlowId) -> Result<&FlowEntry<F>, SchedError> {
        match self.flows.get(id.0) {
            Some(f) if !f.retired => Ok(f),
            _ => Err(SchedError::UnknownFlow(id)),
        }
    }

    /// A live (not retired) flow, mutably.
    pub fn flow_mut(&mut self, id: FlowId) -> Result<&mut FlowEntry<F>, SchedError> {
        match self.flows.get_mut(id.0) {
            Some(f) if !f.retired => Ok(f),
            _ => Err(SchedError::UnknownFlow(id)),
        }
    }

    /// Any flow still held (live or retired but draining). Panics on a
    /// freed id: only for ids of requests the scheduler holds.
    #[inline]
    pub fn any_flow(&self, id: FlowId) -> &FlowEntry<F> {
        self.flows.get(id.0).expect("flow with held requests")
    }

    /// A flow that still exists (live, or removed but still holding
    /// requests), if any: for references a policy keeps to other flows,
    /// which may have been freed since.
    #[inline]
    pub fn existing_flow_mut(&mut self, id: FlowId) -> Option<&mut FlowEntry<F>> {
        self.flows.get_mut(id.0)
    }

    /// Any flow still held, mutably.
    #[inline]
    pub fn any_flow_mut(&mut self, id: FlowId) -> &mut FlowEntry<F> {
        self.flows.get_mut(id.0).expect("flow with held requests")
    }

    /// A group.
    pub fn group(&self, id: GroupId) -> Result<&GroupEntry<G>, SchedError> {
        match self.groups.get(id.0) {
            Some(g) => Ok(g),
            _ => Err(SchedError::UnknownGroup(id)),
        }
    }

    /// A group, mutably.
    pub fn group_mut(&mut self, id: GroupId) -> Result<&mut GroupEntry<G>, SchedError> {
        match self.groups.get_mut(id.0) {
            Some(g) => Ok(g),
            _ => Err(SchedError::UnknownGroup(id)),
        }
    }

    /// Flows not yet freed (retired flows count until drained).
    pub fn live_flows(&self) -> usize {
        self.flows.len()
    }

    /// Size of any table indexed by [`FlowId::index`]: bounded by the most
    /// flows held at once (plus a reuse pool), not by how many were ever
    /// created.
    pub fn flow_capacity(&self) -> usize {
        self.flows.capacity()
    }

    /// Size of any table indexed by [`GroupId::index`].
    pub fn group_capacity(&self) -> usize {
        self.groups.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The root group is never removed, and says so; a group with a
    /// child says it still holds one.
    #[test]
    fn removing_the_root_or_a_busy_group_says_why() {
        let mut t: Topology<(), ()> = Topology::new(());
        let e = t.remove_group(GroupId::ROOT).unwrap_err();
        assert_eq!(e.to_string(), "the root group cannot be removed");
        let g = t.add_group(GroupId::ROOT, 100, ()).unwrap();
        t.add_group(g, 100, ()).unwrap();
        let e = t.remove_group(g).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("group {} still holds flows or groups", g.0)
        );
    }

    /// A 4 KiB sync read of flow 0 at sector 0.
    fn read(id: ReqId) -> Request {
        Request {
            id,
            flow: FlowId(0),
            sector: 0,
            sectors: 8,
            op: crate::types::Op::Read,
            sync: true,
        }
    }

    /// Inserts, look-ups and removals with ids on both sides of
    /// [`DIRECT_IDS`] agree with a plain `HashMap` at every step, duplicate
    /// and unknown ids included.
    #[test]
    fn id_index_agrees_with_a_hashmap() {
        let mut rnd = crate::xorshift(0x2545_F491_4F6C_DD1Du64);
        let mut idx = IdIndex::default();
        let mut reference: HashMap<ReqId, SlotIdx> = HashMap::new();
        for step in 0..100_000u32 {
            let id = match rnd() % 4 {
                0 => rnd() % 64,
                1 => DIRECT_IDS - 8 + rnd() % 16,
                2 => rnd() % (2 * DIRECT_IDS),
                _ => rnd(),
            };
            if rnd().is_multiple_of(2) {
                let inserted = idx.insert(id, step);
                assert_eq!(inserted, !reference.contains_key(&id));
                reference.entry(id).or_insert(step);
            } else {
                assert_eq!(idx.remove(id), reference.remove(&id));
            }
            assert_eq!(idx.get(id), reference.get(&id).copied());
        }
        for (&id, &slot) in &reference {
            assert_eq!(idx.get(id), Some(slot));
        }
    }

    /// A table refuses a duplicate and a premature completion alike for a
    /// directly indexed id and a hashed one, and changes nothing then.
    #[test]
    fn small_and_large_ids_are_checked_alike() {
        let mut t: RequestTable<()> = RequestTable::new();
        for id in [3, DIRECT_IDS + 3] {
            let r = read(id);
            let s = t.insert(0, r, ()).unwrap();
            assert_eq!(t.insert(0, r, ()), Err(SchedError::DuplicateRequest(id)));
            assert!(matches!(t.complete(id), Err(SchedError::NotDispatched(_))));
            assert_eq!(t.find(id), Some(s));
            t.dispatch(0, s);
            assert_eq!(t.complete(id).unwrap().req.id, id);
            assert!(matches!(t.complete(id), Err(SchedError::UnknownRequest(_))));
            assert_eq!(t.find(id), None);
        }
    }

    /// Random inserts (duplicate ids among them), dispatches and
    /// completions: every insertion takes the slot a stack of freed slots
    /// would give (last freed first, else a new one), the counts and
    /// look-ups agree with a model, and the free list holds exactly the
    /// free slots, each once.
    #[test]
    fn free_slots_are_reused_as_a_stack_would() {
        let mut rnd = crate::xorshift(0x9E37_79B9_7F4A_7C15u64);
        let mut t: RequestTable<()> = RequestTable::new();
        let mut freed: Vec<SlotIdx> = Vec::new();
        let mut live: HashMap<ReqId, (SlotIdx, bool)> = HashMap::new();
        for _ in 0..50_000u32 {
            let id = rnd() % 96;
            match (rnd() % 3, live.get(&id).copied()) {
                (_, None) => {
                    let want = freed.pop().unwrap_or(t.slots.len() as SlotIdx);
                    assert_eq!(t.insert(0, read(id), ()), Ok(want));
                    live.insert(id, (want, false));
                }
                (0, Some(_)) => {
                    let r = t.slot(live[&id].0).req;
                    assert_eq!(t.insert(0, r, ()), Err(SchedError::DuplicateRequest(id)));
                }
                (1, Some((slot, false))) => {
                    t.dispatch(0, slot);
                    live.insert(id, (slot, true));
                }
                (_, Some((slot, dispatched))) => {
                    assert_eq!(t.complete(id).is_ok(), dispatched);
                    if dispatched {
                        live.remove(&id);
                        freed.push(slot);
                    }
                }
            }
            assert_eq!(t.find(id), live.get(&id).map(|x| x.0));
            let in_flight = live.values().filter(|x| x.1).count();
            assert_eq!(
                (t.queued(), t.in_flight()),
                (live.len() - in_flight, in_flight)
            );
        }
        let mut listed = Vec::new();
        let mut at = t.free;
        while at != NO_SLOT {
            assert_eq!(t.slot(at).state, ReqState::Free);
            listed.push(at);
            at = t.slots[at as usize].next_free;
        }
        freed.reverse();
        assert_eq!(listed, freed);
    }
}
