//! B-WF2Q+: the budget-based WF2Q+ that picks which flow (or group) gets the
//! next budget. 2010 paper, Sec. II-D and II-E, Fig. 4; the semantics of
//! Linux's `bfq-wf2q.c`.
//!
//! Every entity (a flow, or a group as one entity among its siblings) has a
//! virtual start time S and finish time F = S + budget / weight. Each group
//! holds one *service tree* per class (RT, BE, IDLE) with its own system
//! virtual time V. An entity is *eligible* when S <= V; the next in service
//! is the eligible entity with least F. V grows by `served / sum of active
//! weights` on every dispatch (Fig. 4 lines 29-31) and is pushed up to the
//! least S when nothing is eligible (lines 19-22).
//!
//! Data structure: each tree keeps its eligible entities in a binary heap
//! ordered by F and its not-yet-eligible ones in a heap ordered by S. V
//! never decreases, so an entity moves from the second heap to the first at
//! most once per activation: selection, insertion and removal are
//! O(log N) amortized — the same bound as the kernel's F-ordered tree
//! augmented with the subtree minimum S, with simpler code.
//!
//! Virtual times are fixed point: one unit of service over a weight of one
//! is `1 << SERVICE_SHIFT`, as the kernel's `WFQ_SERVICE_SHIFT`.

use crate::types::{GroupId, IoClass, Time};

/// Fixed-point shift of virtual time (kernel: WFQ_SERVICE_SHIFT = 22).
pub const SERVICE_SHIFT: u32 = 22;

/// A tree's virtual time beyond which its timestamps are shifted down
/// ([`Wf2q::rebase`]), leaving 2^62 units of headroom.
const REBASE_AT: u64 = 1 << 62;

/// Virtual-time cost of `service` sectors for total weight `weight`.
#[inline]
pub fn vdelta(service: u64, weight: u64) -> u64 {
    debug_assert!(weight > 0);
    (service << SERVICE_SHIFT) / weight.max(1)
}

/// How far a back-shifted flow's timestamps may stay below V
/// ([`Wf2q::activate_back_shifted`]): a new F below V - `slack` / w moves
/// up with S by the distance divided by `div`.
///
/// The kernel (`bfq_update_fin_time_enqueue`, `backshift_push_up`) takes
/// `slack` 0, `div` the flow's raising coefficient and V itself
/// (`anchored` false): F = V, whatever `lag_anchor` says.
/// `backshift_lag_bound` takes `slack` B_max and `div` 1, against the
/// backlogged flows' least F where V has run past it ([`Anchor`],
/// `anchored` true; V itself without `lag_anchor`):
/// a flow keeps up to B_max of lag behind them, the bound B-WF2Q+
/// guarantees a continuously backlogged application (2010 paper,
/// appendix, Lemma 2: lag <= B_max + L_max), which back-shifting claims
/// it was; only the lag beyond it, which no backlogged flow could have
/// had, is dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PushUp {
    /// Service (sectors) the flow may stay behind V, at its weight.
    pub slack: u64,
    /// Divisor of the move (the raising coefficient, 1 when not raised).
    pub div: u64,
    /// Measured from the anchor's least F ([`Anchor`]), not from V.
    pub anchored: bool,
}

/// Where activations are timestamped from under `lag_anchor`
/// ([`Wf2q::set_anchored`]): a fresh activation from min(V, the least F +
/// `slack` / w of the in-service entity and of the eligible one with the
/// least F), an anchored push-up ([`PushUp`]) from min(V, their least F); neither more than `span`
/// sectors' worth at weight 1 below V. V runs past every backlogged flow when flows leave for a
/// moment and come back back-shifted; a fresh start at V would put the
/// flow ahead of all of them by that drift.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Anchor {
    /// The lag a backlogged flow may have: B_max.
    pub slack: u64,
    /// How far below V an activation may start at most (sectors at
    /// weight 1).
    pub span: u64,
}

/// Index of an entity in [`Wf2q`].
pub type EntityId = u32;

/// What an entity stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A flow, by its index.
    Flow(u32),
    /// A group, by its id.
    Group(GroupId),
}

/// Where an entity stands in the scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EState {
    /// Not backlogged; `finish` survives for `S = max(V, F)` on return.
    Idle,
    /// Backlogged, waiting in its tree.
    Queued,
    /// Selected: its budget is being served.
    InService,
    /// Freed slot.
    Dead,
}

/// A schedulable entity: a flow or a group.
#[derive(Clone, Copy, Debug)]
pub struct Entity {
    /// Flow or group.
    pub kind: Kind,
    /// Weight in the parent's tree (may be raised for flows).
    pub weight: u32,
    /// I/O priority class: the tree of its parent it is queued in.
    pub class: IoClass,
    /// Group whose trees hold this entity.
    pub parent: GroupId,
    /// Virtual start time.
    pub start: u64,
    /// Virtual finish time.
    pub finish: u64,
    /// Budget used for timestamping, in sectors.
    pub budget: u64,
    /// Service charged since it was selected, in sectors.
    pub service: u64,
    /// Where the entity stands in B-WF2Q+.
    pub state: EState,
}

/// One service tree: a class within a group.
#[derive(Clone, Debug, Default)]
struct Tree {
    /// System virtual time of this tree.
    v: u64,
    /// Sum of the weights of its active (queued or in-service) entities.
    wsum: u64,
    /// Eligible entities, min-heap on (F, id).
    elig: Vec<(u64, EntityId)>,
    /// Not yet eligible entities, min-heap on (S, id).
    inelig: Vec<(u64, EntityId)>,
    /// Sectors of service that advanced V here, and of them the charges
    /// beyond the service dispatched (`expire`'s over-charge); tests only.
    #[cfg(test)]
    tally: (u64, u64),
}

/// Per-group scheduling state.
#[derive(Clone, Debug)]
struct SchedData {
    /// The entity of this group in its parent's tree (None for the root).
    entity: Option<EntityId>,
    /// Child entity in service, if any.
    in_service: Option<EntityId>,
    /// Children that are queued or in service.
    busy: u32,
    /// Last time an idle-class child was selected.
    last_idle_service: Time,
    trees: [Tree; IoClass::COUNT],
}

impl SchedData {
    fn new(entity: Option<EntityId>, now: Time) -> Self {
        SchedData {
            entity,
            in_service: None,
            busy: 0,
            last_idle_service: now,
            trees: Default::default(),
        }
    }
}

/// Group `g`'s scheduling level in `groups` (a live group: one whose
/// level was removed is never looked up). A free function, so that a
/// caller can hold it beside `Wf2q`'s other fields (`pos`, `entities`).
#[inline]
fn live(groups: &mut [Option<SchedData>], g: GroupId) -> &mut SchedData {
    groups[g.index()].as_mut().expect("live group")
}

/// The hierarchical B-WF2Q+ scheduler.
#[derive(Clone, Debug)]
pub struct Wf2q {
    entities: Vec<Entity>,
    /// Heap position of each entity (valid while queued).
    pos: Vec<u32>,
    free: Vec<EntityId>,
    groups: Vec<Option<SchedData>>,
    /// Idle-class starvation timeout (kernel BFQ_CL_IDLE_TIMEOUT, 200 ms).
    idle_class_timeout: Time,
    /// Activations measure from the anchor ([`Wf2q::anchor`]), not V, at
    /// most this much service (sectors, at the entity's weight) below V.
    anchor: Option<Anchor>,
}

impl Wf2q {
    /// A scheduler holding the root group only.
    pub fn new(idle_class_timeout: Time) -> Self {
        Wf2q {
            entities: Vec::new(),
            pos: Vec::new(),
            free: Vec::new(),
            groups: vec![Some(SchedData::new(None, 0))],
            idle_class_timeout,
            anchor: None,
        }
    }

    /// Makes activations measure from the backlogged flows where V has run
    /// past them (`lag_anchor`; see [`Anchor`]).
    pub fn set_anchored(&mut self, anchor: Option<Anchor>) {
        self.anchor = anchor;
    }

    /// Where an entity entering tree `class` of `sd` is timestamped from:
    /// V for both, or (anchored) when V has run past the tree's active
    /// entities, for a fresh start the least F + `slack` / w of the
    /// in-service entity and of the eligible one with the least F, and for
    /// an anchored push-up their least F, neither more than `span`
    /// sectors' worth at weight 1 below V. In the fluid system every
    /// backlogged flow is being served, so none has its F below the system
    /// virtual time; served budget by budget, a continuously backlogged
    /// flow lags by at most B_max (2010 paper, appendix, Lemma 2), the
    /// `slack`. B-WF2Q+'s V runs past them all by far more when flows
    /// leave for a moment and come back back-shifted (V advanced meanwhile
    /// over the smaller weight sum), a drift that no flow's service ever
    /// makes up. The least F is taken as the eligible heap's top or the
    /// in-service entity's: an entity still in the ineligible heap with
    /// its S already passed by V (moved lazily) may have a smaller F,
    /// which only raises the anchor, never past V. The span keeps
    /// timestamps within reach of [`Wf2q::rebase`]. Without `serving` the
    /// in-service entity is left out ([`Wf2q::within`]).
    fn anchor(
        a: Option<Anchor>,
        sd: &SchedData,
        entities: &[Entity],
        class: IoClass,
        serving: bool,
    ) -> (u64, u64) {
        let t = &sd.trees[class as usize];
        let Some(a) = a else { return (t.v, t.v) };
        let serving = sd
            .in_service
            .filter(|_| serving)
            .map(|id| &entities[id as usize])
            .filter(|e| e.class == class);
        let first = t.elig.first().map(|x| &entities[x.1 as usize]);
        let (slack, mut fresh, mut least) = (a.slack, u64::MAX, u64::MAX);
        for e in [serving, first].into_iter().flatten() {
            fresh = fresh.min(e.finish + vdelta(slack, u64::from(e.weight)));
            least = least.min(e.finish);
        }
        let floor = t.v.saturating_sub(vdelta(a.span, 1));
        let within = |x: u64| x.min(t.v).max(floor);
        (within(fresh), within(least))
    }

    /// The entity `id`.
    #[inline]
    pub fn entity(&self, id: EntityId) -> &Entity {
        &self.entities[id as usize]
    }

    /// The entity `id`, mutably. Do not change `weight` of an active entity
    /// this way: use [`Wf2q::set_weight`].
    #[inline]
    pub fn entity_mut(&mut self, id: EntityId) -> &mut Entity {
        &mut self.entities[id as usize]
    }

    /// Creates an idle entity in group `parent`'s tree of `class`.
    pub fn new_entity(
        &mut self,
        kind: Kind,
        parent: GroupId,
        class: IoClass,
        weight: u32,
        budget: u64,
    ) -> EntityId {
        let e = Entity {
            kind,
            weight,
            class,
            parent,
            start: 0,
            finish: 0,
            budget,
            service: 0,
            state: EState::Idle,
        };
        match self.free.pop() {
            Some(id) => {
                self.entities[id as usize] = e;
                id
            }
            None => {
                self.entities.push(e);
                self.pos.push(u32::MAX);
                (self.entities.len() - 1) as EntityId
            }
        }
    }

    /// Frees an idle entity.
    pub fn free_entity(&mut self, id: EntityId) {
        debug_assert_eq!(self.entities[id as usize].state, EState::Idle);
        self.entities[id as usize].state = EState::Dead;
        self.free.push(id);
    }

    /// Adds the scheduling level of a new group, whose entity is `entity`.
    pub fn add_group(&mut self, group: GroupId, entity: EntityId, now: Time) {
        let i = group.index();
        if self.groups.len() <= i {
            self.groups.resize_with(i + 1, || None);
        }
        self.groups[i] = Some(SchedData::new(Some(entity), now));
    }

    /// Drops the scheduling level of an empty group; returns its entity.
    pub fn remove_group(&mut self, group: GroupId) -> Option<EntityId> {
        self.groups[group.index()].take().and_then(|sd| sd.entity)
    }

    /// Whether entity `id` is below a group other than the root.
    pub fn in_group(&self, id: EntityId) -> bool {
        self.sd(self.entities[id as usize].parent).entity.is_some()
    }

    #[inline]
    fn sd(&self, g: GroupId) -> &SchedData {
        self.groups[g.index()].as_ref().expect("live group")
    }

    #[inline]
    fn sd_mut(&mut self, g: GroupId) -> &mut SchedData {
        live(&mut self.groups, g)
    }

    #[inline]
    fn tree_mut(&mut self, g: GroupId, class: IoClass) -> &mut Tree {
        &mut self.sd_mut(g).trees[class as usize]
    }

    /// System virtual time of `group`'s tree for `class`.
    pub fn vtime(&self, group: GroupId, class: IoClass) -> u64 {
        self.sd(group).trees[class as usize].v
    }

    /// Sum of active weights in `group`'s tree for `class`.
    pub fn wsum(&self, group: GroupId, class: IoClass) -> u64 {
        self.sd(group).trees[class as usize].wsum
    }

    /// The group entity of `group` (None for the root).
    pub fn group_entity(&self, group: GroupId) -> Option<EntityId> {
        self.sd(group).entity
    }

    /// Children of `group` that are queued or in service.
    pub fn busy_children(&self, group: GroupId) -> u32 {
        self.sd(group).busy
    }

    /// Number of classes with active entities directly under the root, and
    /// whether more than one group below the root is active: inputs of the
    /// "asymmetric scenario" checks of the heuristics.
    pub fn root_active_classes(&self) -> usize {
        self.sd(GroupId::ROOT)
            .trees
            .iter()
            .filter(|t| t.wsum > 0)
            .count()
    }

    // ---- heap primitives (min-heaps on (key, id), positions in `pos`) ----

    #[inline]
    fn heap_push(heap: &mut Vec<(u64, EntityId)>, pos: &mut [u32], item: (u64, EntityId)) {
        heap.push(item);
        let i = heap.len() - 1;
        pos[item.1 as usize] = i as u32;
        Self::sift_up(heap, pos, i);
    }

    #[inline]
    fn sift_up(heap: &mut [(u64, EntityId)], pos: &mut [u32], mut i: usize) {
        while i > 0 {
            let p = (i - 1) / 2;
            if heap[i] < heap[p] {
                heap.swap(i, p);
                pos[heap[i].1 as usize] = i as u32;
                pos[heap[p].1 as usize] = p as u32;
                i = p;
            } else {
                break;
            }
        }
    }

    fn sift_down(heap: &mut [(u64, EntityId)], pos: &mut [u32], mut i: usize) {
        let n = heap.len();
        loop {
            let l = 2 * i + 1;
            if l >= n {
                break;
            }
            let r = l + 1;
            let c = if r < n && heap[r] < heap[l] { r } else { l };
            if heap[c] < heap[i] {
                heap.swap(i, c);
                pos[heap[i].1 as usize] = i as u32;
                pos[heap[c].1 as usize] = c as u32;
                i = c;
            } else {
                break;
            }
        }
    }

    #[inline]
    fn heap_remove_at(
        heap: &mut Vec<(u64, EntityId)>,
        pos: &mut [u32],
        i: usize,
    ) -> (u64, EntityId) {
        // (Not a swap with itself when `i` is the last: the element would
        // be stored and at once loaded back, a stall where the heap holds
        // one entity, as a tree does while its flows each wait for one
        // request.)
        let item = if i + 1 == heap.len() {
            heap.pop().expect("non-empty heap")
        } else {
            heap.swap_remove(i)
        };
        pos[item.1 as usize] = u32::MAX;
        if i < heap.len() {
            pos[heap[i].1 as usize] = i as u32;
            Self::sift_down(heap, pos, i);
            Self::sift_up(heap, pos, i);
        }
        item
    }

    // ---- tree operations ----

    /// Puts queued entity `id` (`e`) in its tree `t`'s eligible or
    /// ineligible heap.
    #[inline]
    fn enqueue(t: &mut Tree, pos: &mut [u32], id: EntityId, e: &Entity) {
        if e.start <= t.v {
            Self::heap_push(&mut t.elig, pos, (e.finish, id));
        } else {
            Self::heap_push(&mut t.inelig, pos, (e.start, id));
        }
    }

    /// Takes a queued entity out of its tree's heaps.
    fn dequeue(&mut self, id: EntityId) {
        let e = self.entities[id as usize];
        let i = self.pos[id as usize] as usize;
        let (groups, pos) = (&mut self.groups, &mut self.pos);
        let t = &mut live(groups, e.parent).trees[e.class as usize];
        // The entity is in the heap whose slot i holds it.
        if t.elig.get(i).is_some_and(|x| x.1 == id) {
            Self::heap_remove_at(&mut t.elig, pos, i);
        } else {
            debug_assert!(t.inelig.get(i).is_some_and(|x| x.1 == id));
            Self::heap_remove_at(&mut t.inelig, pos, i);
        }
    }

    /// Makes an idle entity backlogged (Fig. 4 line 6: S = max(V, F)),
    /// activating its ancestors as needed. `budget` is the budget to
    /// timestamp with. Returns the service (sectors at the entity's
    /// weight) it forfeited: how far its new S lies past its old F.
    pub fn activate(&mut self, id: EntityId, budget: u64) -> u64 {
        self.activate_at(id, budget, None, None)
    }

    /// As [`Wf2q::activate`], but back-shifted: S = `start` (the flow's
    /// old F) for the flow entity even if below V (an in-time wake-up).
    /// With `push_up`, a new F below V - `push_up.slack` / w moves up with
    /// S by the distance / `push_up.div`, so that flows which idle for
    /// short moments do not fall ever further behind V (see [`PushUp`]).
    pub fn activate_back_shifted(
        &mut self,
        id: EntityId,
        budget: u64,
        start: u64,
        push_up: Option<PushUp>,
    ) -> u64 {
        self.activate_at(id, budget, Some(start), push_up)
    }

    /// [`Wf2q::activate`] with the flow entity's S given (`start`) and
    /// pushed up (`push_up`) as [`Wf2q::activate_back_shifted`] says.
    /// Returns the service (sectors at the entity's weight) entity `id`
    /// forfeited: how far its new S lies past its old F, a lag the fluid
    /// system would still owe it and B-WF2Q+ never returns (S = max(V, F)
    /// from V, or the anchor, above F; or a push-up). 0 for a start at or
    /// before its F.
    ///
    /// A back-shifted activation back-shifts every ancestor it activates
    /// too: S = the group's own F, pushed up as the flow is but by the
    /// whole distance (a group has no raising coefficient). A group's
    /// timestamps follow the service of its children (2010 paper,
    /// Sec. II-D): a flow back-shifted as if it had stayed backlogged
    /// kept its groups backlogged too. The kernel's
    /// `bfq_activate_requeue_entity` passes the queue's
    /// `non_blocking_wait_rq` to every ancestor it activates, and
    /// `__bfq_activate_entity` / `bfq_update_fin_time_enqueue` apply the
    /// same S = F and push-up at each. With the flow alone back-shifted, a
    /// reader alone in a group of weight 1000, timed out between its reads,
    /// came back with its group at S = max(V, F), V having run on over a
    /// group of weight 100 served meanwhile, and lost the preemption its
    /// back-shift would have won: 4.96 times the other reader's service
    /// instead of 10 (9.81 with every group back-shifted, as for the same
    /// two readers in the root group; tests/heuristics.rs,
    /// `heavy_group_over_light`).
    fn activate_at(
        &mut self,
        id: EntityId,
        budget: u64,
        start: Option<u64>,
        push_up: Option<PushUp>,
    ) -> u64 {
        let old_f = self.entities[id as usize].finish;
        let forfeit = |e: &Entity| {
            let gap = u128::from(e.start.saturating_sub(old_f));
            ((gap * u128::from(e.weight)) >> SERVICE_SHIFT) as u64
        };
        let mut forfeited = None;
        let mut id = id;
        let mut budget = budget;
        let (shifted, group_push_up) = (start.is_some(), push_up.map(|p| PushUp { div: 1, ..p }));
        let (mut start, mut push_up) = (start, push_up);
        loop {
            let (groups, pos) = (&mut self.groups, &mut self.pos);
            let x = self.entities[id as usize];
            let sd = live(groups, x.parent);
            // A back-shifted start without an anchored push-up needs neither.
            let wanted = start.is_none() || push_up.is_some_and(|p| p.anchored);
            let anchor = self.anchor.filter(|_| wanted);
            let (from, least) = Self::anchor(anchor, sd, &self.entities, x.class, true);
            let e = &mut self.entities[id as usize];
            debug_assert_eq!(e.state, EState::Idle);
            let t = &mut sd.trees[e.class as usize];
            t.wsum += u64::from(e.weight);
            e.start = start.take().unwrap_or(from.max(e.finish));
            e.budget = budget;
            e.finish = e.start + vdelta(budget, u64::from(e.weight));
            if let Some(p) = push_up.take() {
                let base = if p.anchored { least } else { t.v };
                let floor = base.saturating_sub(vdelta(p.slack, u64::from(e.weight)));
                let delta = floor.saturating_sub(e.finish) / p.div.max(1);
                e.start += delta;
                e.finish += delta;
            }
            e.service = 0;
            e.state = EState::Queued;
            forfeited.get_or_insert_with(|| forfeit(e));
            Self::enqueue(t, pos, id, e);
            sd.busy += 1;
            match sd.entity {
                Some(pe) if self.entities[pe as usize].state == EState::Idle => {
                    // A group's budget is its next child's budget.
                    id = pe;
                    budget = budget.max(1);
                    if shifted {
                        start = Some(self.entities[pe as usize].finish);
                        push_up = group_push_up;
                    }
                }
                _ => break,
            }
        }
        forfeited.unwrap_or(0)
    }

    /// Changes an entity's weight (e.g. weight raising), keeping the
    /// tree's weight sum right. Takes effect at its next timestamping.
    pub fn set_weight(&mut self, id: EntityId, weight: u32) {
        let e = self.entities[id as usize];
        if e.weight == weight {
            return;
        }
        if matches!(e.state, EState::Queued | EState::InService) {
            let t = self.tree_mut(e.parent, e.class);
            t.wsum = t.wsum - u64::from(e.weight) + u64::from(weight);
        }
        self.entities[id as usize].weight = weight;
    }

    /// Whether the S of queued entity `id`, and that of each queued
    /// ancestor, is at most `budget` sectors (at that entity's weight)
    /// ahead of its tree's V (a queued group's S counts the service
    /// injected below it: [`Wf2q::charge_and_deactivate`]), S counted for
    /// `id`, a flow, with `debt` (S + debt / w: where its next turn starts;
    /// the debt it keeps outside B-WF2Q+ and the request about to be
    /// injected), or, anchored
    /// (`lag_anchor`, on in `bfq`; [`Wf2q::set_anchored`]), of what fresh
    /// activations are timestamped from: min(V, the least F + B_max / w of
    /// the in-service entity and of the eligible one with the least F)
    /// ([`Anchor`]), the in-service entity left out unless `serving`
    /// (`inject_ahead_waiting_anchor`, on by default). The check stops at the first ancestor in service: from
    /// there up the path is the one being served.
    ///
    /// 2010 paper, Sec. II-D (only flows with S <= V are served) and
    /// appendix, Lemma 2 (a backlogged flow lags V by at most B_max): the
    /// anchor stands for V where V ran past every backlogged flow. Against
    /// V itself the check let a reader emptied by each injected read run
    /// ahead of a greedy reader of its weight by that drift (V 1 600-2 400
    /// units of weight-1 service past the thinking reader's S, so the
    /// check never bit): it led by 96 120 sectors beyond the paper's
    /// 2 B_max + L_max (tests/gaming.rs,
    /// `a_reader_back_in_time_leads_a_greedy_one_by_at_most_the_bound`).
    /// Without the flow's own debt, a reader back at S = its F after each
    /// burst was injected a further burst beyond the bound (drawn case
    /// 1260: up to 2 budgets + 49 152 sectors ahead of V). The in-service
    /// entity may itself lag V (a thinking reader back-shifted to its old
    /// F, idled for in its turn): counted (`serving`), it held the anchor
    /// below V, and a waiting group behind V was kept out of the turn of a
    /// group that idled through its think times.
    pub fn within(&self, id: EntityId, debt: u64, budget: u64, serving: bool) -> bool {
        let (mut id, mut debt) = (id, debt);
        loop {
            let e = &self.entities[id as usize];
            if e.state != EState::Queued {
                return true;
            }
            let sd = self.sd(e.parent);
            let (v, _) = Self::anchor(self.anchor, sd, &self.entities, e.class, serving);
            let w = u64::from(e.weight);
            if e.start + vdelta(debt, w) > v + vdelta(budget, w) {
                return false;
            }
            debt = 0;
            match self.sd(e.parent).entity {
                Some(pe) => id = pe,
                None => return true,
            }
        }
    }

    /// Charges `service` sectors dispatched for the in-service entity `id`
    /// at every level up to the root (Fig. 4 `inc_tot_service`).
    #[inline]
    pub fn served(&mut self, id: EntityId, service: u64) {
        self.charge_path(id, service, true);
    }

    /// Advances V by `service` in the tree of `id` and of each ancestor;
    /// with `count`, also adds it to each entity's service of this turn.
    #[inline]
    fn charge_path(&mut self, id: EntityId, service: u64, count: bool) {
        let mut id = id;
        loop {
            let e = &mut self.entities[id as usize];
            if count {
                e.service += service;
            }
            let (parent, class) = (e.parent, e.class);
            let sd = live(&mut self.groups, parent);
            let t = &mut sd.trees[class as usize];
            t.v += vdelta(service, t.wsum.max(1));
            #[cfg(test)]
            {
                t.tally.0 += service;
            }
            let up = sd.entity;
            if t.v > REBASE_AT {
                self.rebase(parent, class);
            }
            match up {
                Some(pe) => id = pe,
                None => break,
            }
        }
    }

    /// Moves `extra` sectors just charged along `id`'s path from the tally
    /// of service to that of over-charges (tests only).
    #[cfg(test)]
    fn tally_extra(&mut self, id: EntityId, extra: u64) {
        let mut id = id;
        loop {
            let e = self.entities[id as usize];
            let sd = live(&mut self.groups, e.parent);
            let t = &mut sd.trees[e.class as usize];
            t.tally.0 -= extra;
            t.tally.1 += extra;
            match sd.entity {
                Some(pe) => id = pe,
                None => break,
            }
        }
    }

    /// Sectors of service and of over-charge that advanced V in `group`'s
    /// tree for `class` ([`Wf2q::charge_path`]); tests only.
    #[cfg(test)]
    pub fn tally(&self, group: GroupId, class: IoClass) -> (u64, u64) {
        self.sd(group).trees[class as usize].tally
    }

    /// Shifts every timestamp of one tree down by a common offset (the
    /// least of V and the active entities' S), keeping their order. Virtual
    /// time grows by `service << 22 / weight sum`: at a weight sum of 1 a
    /// u64 would overflow after 2^42 sectors (2 PiB), days of service on a
    /// fast device. This runs once per ~2^62 units: its O(entities) cost
    /// never shows on the hot path.
    #[cold]
    fn rebase(&mut self, g: GroupId, class: IoClass) {
        let sd = self.groups[g.index()].as_ref().expect("live group");
        let t = &sd.trees[class as usize];
        let in_service = sd
            .in_service
            .filter(|&id| self.entities[id as usize].class == class);
        let offset = t
            .elig
            .iter()
            .chain(t.inelig.iter())
            .map(|&(_, id)| id)
            .chain(in_service)
            .map(|id| self.entities[id as usize].start)
            .fold(t.v, u64::min);
        for e in self.entities.iter_mut() {
            if e.state != EState::Dead && e.parent == g && e.class == class {
                e.start = e.start.saturating_sub(offset);
                e.finish = e.finish.saturating_sub(offset);
            }
        }
        let t = &mut live(&mut self.groups, g).trees[class as usize];
        t.v -= offset;
        for item in t.elig.iter_mut().chain(t.inelig.iter_mut()) {
            item.0 -= offset;
        }
    }

    /// Whether an in-service entity still has backlog: a flow as reported
    /// by `flow_busy`, a group when a child is still active.
    fn still_busy(&self, id: EntityId, flow_busy: bool) -> bool {
        match self.entities[id as usize].kind {
            Kind::Flow(_) => flow_busy,
            Kind::Group(g) => self.sd(g).busy > 0,
        }
    }

    /// Ends the service slot of the in-service flow entity `id` and of its
    /// in-service ancestors. `charge` (>= service received) is what the
    /// slot costs the flow: F is corrected to S + charge / w (Fig. 4
    /// `update_vfintime`). An entity still backlogged is re-inserted with
    /// S = F (timestamp back-shifting, Fig. 4 line 11) and `next_budget`
    /// (for groups, their next child's budget); otherwise it goes idle,
    /// keeping F.
    pub fn expire(&mut self, id: EntityId, charge: u64, flow_busy: bool, next_budget: u64) {
        let extra = charge.saturating_sub(self.entities[id as usize].service);
        // The charge beyond the service dispatched advances V as service
        // does (every BFQ since the first release: `bfq_bfqq_served` from
        // `bfq_bfqq_charge_full_budget` / `bfq_bfqq_charge_time`): a flow
        // charged its time took the device for that long, and a flow that
        // was charged only its service must not find its next S ahead of a
        // V that the time-charged turns left behind (2014 start-up under
        // random readers: bash, back-shifted to S = F after a budget
        // exhaustion, waited six readers' T_max turns for V to reach it).
        if extra > 0 {
            self.charge_path(id, extra, false);
            #[cfg(test)]
            self.tally_extra(id, extra);
        }
        let mut id = id;
        let mut budget = next_budget;
        loop {
            let busy = self.still_busy(id, flow_busy);
            let (groups, pos) = (&mut self.groups, &mut self.pos);
            let e = &mut self.entities[id as usize];
            debug_assert_eq!(e.state, EState::InService);
            e.service += extra;
            e.finish = e.start + vdelta(e.service, u64::from(e.weight));
            let parent = e.parent;
            let sd = live(groups, parent);
            let t = &mut sd.trees[e.class as usize];
            if busy {
                e.start = e.finish;
                e.budget = budget;
                e.finish = e.start + vdelta(budget, u64::from(e.weight));
                e.service = 0;
                e.state = EState::Queued;
                Self::enqueue(t, pos, id, e);
            } else {
                e.state = EState::Idle;
                e.service = 0;
                t.wsum -= u64::from(e.weight);
                sd.busy -= 1;
            }
            sd.in_service = None;
            match sd.entity {
                Some(pe) => {
                    id = pe;
                    budget = self.next_budget_of(parent).unwrap_or(budget);
                }
                None => break,
            }
        }
    }

    /// Takes a queued flow entity out of the scheduler after it received
    /// `service` sectors outside a turn of its own (injection), charging
    /// that service at every level up to the root, as the kernel's
    /// `bfq_bfqq_served` charges every ancestor of a dispatched request's
    /// queue: V advances in each tree (`charge_path`); the F of the flow
    /// and of each ancestor that goes idle with it becomes S + `service` /
    /// w (at its own weight), as [`Wf2q::expire`] sets it at the end of a
    /// turn (the kernel's `__bfq_deactivate_entity` does so at each level
    /// it deactivates); the ancestors above are charged it as they stand
    /// (`charge_ancestors`). A group is served what its children
    /// are served (2010 paper, Sec. II-D): a group's F left at S + its
    /// child's budget / w charged it a full budget per injection, and a
    /// group that stayed busy, charged its children's injected service
    /// only when it went idle, held several readers emptied by each
    /// injection by nothing (two got 2.54 times a greedy reader of their
    /// group's weight, three 3.6). O(depth log N), no allocation once
    /// the heaps have grown.
    pub fn charge_and_deactivate(&mut self, id: EntityId, service: u64) {
        debug_assert_eq!(self.entities[id as usize].state, EState::Queued);
        self.charge_path(id, service, false);
        if let Some(up) = self.deactivate_charged(id, service) {
            self.charge_ancestors(up, service);
        }
    }

    /// Takes queued entity `id` out of the scheduler, and each ancestor
    /// that goes idle with it, each with F = S + `service` / w. Returns the
    /// first ancestor that stays active, if any.
    fn deactivate_charged(&mut self, id: EntityId, service: u64) -> Option<EntityId> {
        let mut id = id;
        loop {
            let e = self.entities[id as usize];
            debug_assert_eq!(e.state, EState::Queued);
            self.dequeue(id);
            let x = &mut self.entities[id as usize];
            x.state = EState::Idle;
            x.finish = e.start + vdelta(service, u64::from(e.weight));
            self.tree_mut(e.parent, e.class).wsum -= u64::from(e.weight);
            let sd = self.sd_mut(e.parent);
            sd.busy -= 1;
            let (pe, busy) = (sd.entity?, sd.busy);
            if busy > 0 || self.entities[pe as usize].state != EState::Queued {
                return Some(pe);
            }
            id = pe;
        }
    }

    /// Charges `service` sectors injected below active entity `id` to it
    /// and to each ancestor (V is advanced by the caller): an entity in
    /// service counts it in its service (its F at the end of its turn); a
    /// queued one has its S and F moved on by `service` / w at once, as if
    /// the service had been a turn of its own: B-WF2Q+ timestamps follow
    /// the service an entity receives, and only an entity with S <= V is
    /// served (2010 paper, Sec. II-D; Fig. 4 lines 11 and 19-22), so a
    /// group injected ahead of its share waits for V like one served
    /// ahead of it. (The kernel's `bfq_bfqq_served` adds it to the queued
    /// entity's `service` alone, which moves none of its timestamps while
    /// it waits.) Counted only when its next turn started, a
    /// group whose readers were injected up to two budgets ahead of V
    /// (`inject_ahead_bound`) was still eligible on its old S, got a turn
    /// on top and led V by up to 3 B_max: two readers back 5 ms after each
    /// 2 MiB read got 1.71 times a greedy reader of their group's weight
    /// over 10 s (weights 10), 1.33 (weights 100, 4 MiB reads).
    fn charge_ancestors(&mut self, id: EntityId, service: u64) {
        let mut id = id;
        loop {
            let e = self.entities[id as usize];
            if e.state == EState::InService {
                self.entities[id as usize].service += service;
            } else {
                debug_assert_eq!(e.state, EState::Queued);
                self.dequeue(id);
                let d = vdelta(service, u64::from(e.weight));
                let x = &mut self.entities[id as usize];
                (x.start, x.finish) = (e.start + d, e.finish + d);
                let x = *x;
                let (groups, pos) = (&mut self.groups, &mut self.pos);
                Self::enqueue(
                    &mut live(groups, e.parent).trees[e.class as usize],
                    pos,
                    id,
                    &x,
                );
            }
            match self.sd(e.parent).entity {
                Some(pe) => id = pe,
                None => break,
            }
        }
    }

    /// Budget of the entity a group would serve next (for the group's own
    /// timestamps): the least-F queued child of its highest busy class.
    fn next_budget_of(&self, g: GroupId) -> Option<u64> {
        let sd = self.sd(g);
        sd.trees.iter().find(|t| t.wsum > 0).and_then(|t| {
            t.elig
                .first()
                .or(t.inelig.first())
                .map(|&(_, id)| self.entities[id as usize].budget)
        })
    }

    /// Picks the class to serve in group `g`: RT, then BE, then IDLE —
    /// except that IDLE goes first when it waited longer than the
    /// starvation timeout (kernel BFQ_CL_IDLE_TIMEOUT).
    #[inline]
    fn pick_class(&self, g: GroupId, now: Time) -> Option<IoClass> {
        let sd = self.sd(g);
        // Nothing queued (no busy child, none in service while picking).
        if sd.busy == 0 {
            return None;
        }
        let has = |c: IoClass| {
            let t = &sd.trees[c as usize];
            !t.elig.is_empty() || !t.inelig.is_empty()
        };
        if has(IoClass::Idle) && now.saturating_sub(sd.last_idle_service) > self.idle_class_timeout
        {
            return Some(IoClass::Idle);
        }
        IoClass::ALL.into_iter().find(|&c| has(c))
    }

    /// The flow [`Wf2q::select`] would pick now among queued entities
    /// (ignoring the in-service path), without changing anything:
    /// O(depth). Used by injection and preemption.
    pub fn peek_next_flow(&self, now: Time) -> Option<u32> {
        self.peek_in(GroupId::ROOT, now)
    }

    /// The flow [`Wf2q::select`] would pick within group `g`.
    fn peek_in(&self, mut g: GroupId, now: Time) -> Option<u32> {
        loop {
            let class = self.pick_class(g, now)?;
            let t = &self.sd(g).trees[class as usize];
            // The least F among eligible entities, or the least S.
            let mut best = t.elig.first().copied();
            // Ineligible entities that V has reached are eligible too.
            if let Some(&(s, id)) = t.inelig.first() {
                let f = self.entities[id as usize].finish;
                if best.is_none() || (s <= t.v && f < best.map_or(u64::MAX, |b| b.0)) {
                    best = Some((f, id));
                }
            }
            let (_, id) = best?;
            match self.entities[id as usize].kind {
                Kind::Flow(f) => return Some(f),
                Kind::Group(child) => g = child,
            }
        }
    }

    /// Injection candidates, without changing anything: below each of the
    /// first queued entities of the root's tree for the class
    /// [`Wf2q::select`] would serve (the tops of its eligible heap, then
    /// of its not-yet-eligible heap), the flow `select` would pick there.
    /// Fills `out` and returns how many; O(`out.len()` x depth), no scan.
    pub fn peek_flows(&self, now: Time, out: &mut [u32]) -> usize {
        let Some(class) = self.pick_class(GroupId::ROOT, now) else {
            return 0;
        };
        let t = &self.sd(GroupId::ROOT).trees[class as usize];
        let tops = t.elig.iter().chain(t.inelig.iter()).take(out.len());
        let mut n = 0;
        for &(_, id) in tops {
            let flow = match self.entities[id as usize].kind {
                Kind::Flow(f) => Some(f),
                Kind::Group(g) => self.peek_in(g, now),
            };
            if let Some(f) = flow {
                out[n] = f;
                n += 1;
            }
        }
        n
    }

    /// Selects the next flow to serve (Fig. 4 `get_next_application`),
    /// descending from the root through groups. Marks the path in service.
    /// Returns the flow's index, or None when nothing is queued (checked
    /// here, inline: a scheduler whose flows each wait for one request
    /// asks on every dispatch while all of them are in flight).
    #[inline]
    pub fn select(&mut self, now: Time) -> Option<(u32, EntityId)> {
        if self.sd(GroupId::ROOT).busy == 0 {
            return None;
        }
        self.select_queued(now)
    }

    /// [`Wf2q::select`] with an entity queued or in service at the root.
    fn select_queued(&mut self, now: Time) -> Option<(u32, EntityId)> {
        let mut g = GroupId::ROOT;
        loop {
            debug_assert!(self.sd(g).in_service.is_none());
            let class = self.pick_class(g, now)?;
            let (groups, pos) = (&mut self.groups, &mut self.pos);
            let sd = live(groups, g);
            // Kernel: once the starvation timeout has elapsed, the clock
            // restarts at this selection whether or not an idle-class
            // entity was waiting, so that a sparse idle-class flow cannot
            // jump ahead of higher classes on a stale timestamp.
            if class == IoClass::Idle
                || now.saturating_sub(sd.last_idle_service) > self.idle_class_timeout
            {
                sd.last_idle_service = now;
            }
            let t = &mut sd.trees[class as usize];
            let id = Self::take_next(t, pos, &self.entities);
            sd.in_service = Some(id);
            let e = &mut self.entities[id as usize];
            e.state = EState::InService;
            match e.kind {
                Kind::Flow(f) => return Some((f, id)),
                Kind::Group(child) => g = child,
            }
        }
    }

    /// Takes the next entity to serve out of tree `t` (not empty): the
    /// eligible one with the least F, once V has been pushed up to the
    /// least S if nothing is eligible (Fig. 4 lines 19-22) and the entities
    /// V reached have moved to the eligible heap. A lone ineligible entity
    /// is taken at once, as the eligible heap would give it back.
    #[inline]
    fn take_next(t: &mut Tree, pos: &mut [u32], entities: &[Entity]) -> EntityId {
        if t.elig.is_empty() {
            // Nothing eligible: push V up to the least S (Fig. 4 l. 22).
            t.v = t.v.max(t.inelig[0].0);
            if t.inelig.len() == 1 {
                return Self::heap_remove_at(&mut t.inelig, pos, 0).1;
            }
        }
        while let Some(&(s, id)) = t.inelig.first() {
            if s > t.v {
                break;
            }
            Self::heap_remove_at(&mut t.inelig, pos, 0);
            let f = entities[id as usize].finish;
            Self::heap_push(&mut t.elig, pos, (f, id));
        }
        Self::heap_remove_at(&mut t.elig, pos, 0).1
    }

    /// Checks internal invariants (debug builds and tests).
    pub fn check_invariants(&self) {
        for (gi, sd) in self.groups.iter().enumerate() {
            let Some(sd) = sd else { continue };
            let mut busy = 0;
            for t in &sd.trees {
                let mut w = 0;
                for &(f, id) in &t.elig {
                    let e = &self.entities[id as usize];
                    assert_eq!(e.finish, f);
                    assert!(e.start <= t.v, "eligible entity with S > V");
                    assert_eq!(e.parent.index(), gi);
                    w += u64::from(e.weight);
                }
                for &(s, id) in &t.inelig {
                    assert_eq!(self.entities[id as usize].start, s);
                    w += u64::from(self.entities[id as usize].weight);
                }
                busy += t.elig.len() + t.inelig.len();
                if let Some(is) = sd.in_service {
                    let e = &self.entities[is as usize];
                    if std::ptr::eq(t, &sd.trees[e.class as usize]) {
                        w += u64::from(e.weight);
                    }
                }
                assert_eq!(w, t.wsum, "weight sum of group {gi}");
            }
            busy += usize::from(sd.in_service.is_some());
            assert_eq!(busy as u32, sd.busy, "busy children of group {gi}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The heap removal and selection as they were before the lone
    /// entity's shortcut and the pop of a last element.
    fn old_remove_at(
        heap: &mut Vec<(u64, EntityId)>,
        pos: &mut [u32],
        i: usize,
    ) -> (u64, EntityId) {
        let last = heap.len() - 1;
        heap.swap(i, last);
        let item = heap.pop().expect("non-empty heap");
        pos[item.1 as usize] = u32::MAX;
        if i < heap.len() {
            pos[heap[i].1 as usize] = i as u32;
            Wf2q::sift_down(heap, pos, i);
            Wf2q::sift_up(heap, pos, i);
        }
        item
    }

    fn old_take_next(t: &mut Tree, pos: &mut [u32], entities: &[Entity]) -> EntityId {
        if t.elig.is_empty() {
            t.v = t.v.max(t.inelig[0].0);
        }
        while let Some(&(s, id)) = t.inelig.first() {
            if s > t.v {
                break;
            }
            old_remove_at(&mut t.inelig, pos, 0);
            let f = entities[id as usize].finish;
            Wf2q::heap_push(&mut t.elig, pos, (f, id));
        }
        old_remove_at(&mut t.elig, pos, 0).1
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(5000))]
        /// `take_next` and `heap_remove_at` leave the tree (V, both heaps,
        /// positions) and choose as the loop before them did, a lone
        /// ineligible entity included.
        #[test]
        fn take_next_matches_the_loop(
            ents in proptest::collection::vec((0u64..40, 0u64..20), 1..9),
            v in 0u64..40,
            removals in proptest::collection::vec(0usize..9, 0..4),
        ) {
            let entities: Vec<Entity> = ents.iter().map(|&(s, d)| Entity {
                kind: Kind::Flow(0), weight: 1, class: IoClass::Be, parent: GroupId::ROOT,
                start: s, finish: s + d, budget: 0, service: 0, state: EState::Queued,
            }).collect();
            let mut t = Tree { v, ..Default::default() };
            let mut pos = vec![u32::MAX; entities.len()];
            for (id, e) in entities.iter().enumerate() {
                Wf2q::enqueue(&mut t, &mut pos, id as EntityId, e);
            }
            let (mut t2, mut pos2) = (t.clone(), pos.clone());
            // Removals anywhere in a heap (dequeue of a queued entity).
            for &i in &removals {
                let which = i % 2 == 0;
                let (h, h2) = if which { (&mut t.elig, &mut t2.elig) } else { (&mut t.inelig, &mut t2.inelig) };
                if h.is_empty() { continue; }
                let k = i % h.len();
                proptest::prop_assert_eq!(Wf2q::heap_remove_at(h, &mut pos, k), old_remove_at(h2, &mut pos2, k));
                proptest::prop_assert_eq!(&t.elig, &t2.elig);
                proptest::prop_assert_eq!(&t.inelig, &t2.inelig);
                proptest::prop_assert_eq!(&pos, &pos2);
            }
            while !t.elig.is_empty() || !t.inelig.is_empty() {
                let a = Wf2q::take_next(&mut t, &mut pos, &entities);
                let b = old_take_next(&mut t2, &mut pos2, &entities);
                proptest::prop_assert_eq!(a, b);
                proptest::prop_assert_eq!(t.v, t2.v);
                proptest::prop_assert_eq!(&t.elig, &t2.elig);
                proptest::prop_assert_eq!(&t.inelig, &t2.inelig);
                proptest::prop_assert_eq!(&pos, &pos2);
            }
        }
    }

    /// A turn charged more than it was served (time charging) advances V
    /// by the whole charge, as dispatched service does: V moves by
    /// charge / wsum, whatever part of it was dispatched.
    #[test]
    fn a_charge_beyond_the_service_advances_v() {
        let mut w = Wf2q::new(0);
        let root = GroupId::ROOT;
        two_flows(&mut w);
        let (_, first) = w.select(0).expect("a flow");
        let v0 = w.vtime(root, IoClass::Be);
        w.served(first, 10);
        w.expire(first, 1000, true, 1000);
        let v1 = w.vtime(root, IoClass::Be);
        // (10 dispatched and 990 charged at expiry: one unit of rounding.)
        assert!(vdelta(1000, 200).abs_diff(v1 - v0) <= 1, "{}", v1 - v0);
    }

    /// Flows a and b of weight 100 in a group of weight 100 beside flow c
    /// of weight 100 in the root: c is served while a is injected 1000
    /// sectors and leaves, b keeping the group busy. The group's S and F
    /// move on by 1000 / w at once: its S is a budget ahead of V at the
    /// root, past a bound of nothing more (`within`), and it is no longer
    /// eligible (S > V); its next turn starts at that S, and its F after
    /// that turn counts both.
    #[test]
    fn a_busy_group_is_charged_its_childrens_injected_service() {
        let root = GroupId::ROOT;
        let mut w = Wf2q::new(0);
        let g = GroupId(1);
        let ge = w.new_entity(Kind::Group(g), root, IoClass::Be, 100, 1000);
        w.add_group(g, ge, 0);
        let a = w.new_entity(Kind::Flow(0), g, IoClass::Be, 100, 1000);
        let b = w.new_entity(Kind::Flow(1), g, IoClass::Be, 100, 1000);
        let c = w.new_entity(Kind::Flow(2), root, IoClass::Be, 100, 1000);
        w.activate(c, 500);
        w.activate(a, 1000);
        w.activate(b, 1000);
        assert_eq!(w.select(0), Some((2, c)));
        let s0 = w.entity(ge).start;
        w.charge_and_deactivate(a, 1000);
        w.check_invariants();
        let x = *w.entity(ge);
        assert_eq!(
            (x.start, x.finish),
            (s0 + vdelta(1000, 100), s0 + vdelta(2000, 100))
        );
        assert!(x.start > w.vtime(root, IoClass::Be));
        assert!(!w.within(b, 0, 0, true));
        assert!(w.within(b, 0, 1000, true));
        w.served(c, 500);
        w.expire(c, 500, false, 1000);
        assert_eq!(w.select(0), Some((1, b)));
        let x = *w.entity(ge);
        assert_eq!((x.start, x.service), (s0 + vdelta(1000, 100), 0));
        w.served(b, 1000);
        w.expire(b, 1000, false, 1000);
        assert_eq!(w.entity(ge).finish, s0 + vdelta(2000, 100));
        w.check_invariants();
    }

    /// Flows a and b of weight 100 in the root group, both activated with a
    /// budget of 1000.
    fn two_flows(w: &mut Wf2q) -> (EntityId, EntityId) {
        let root = GroupId::ROOT;
        let a = w.new_entity(Kind::Flow(0), root, IoClass::Be, 100, 1000);
        let b = w.new_entity(Kind::Flow(1), root, IoClass::Be, 100, 1000);
        w.activate(a, 1000);
        w.activate(b, 1000);
        (a, b)
    }

    /// Flows a and b of weight 100: a is served a budget of 1000 and
    /// leaves, b alone is served five more, so V runs past a's F. Returns
    /// a and its F.
    fn a_left_and_v_ran_on(w: &mut Wf2q) -> (EntityId, u64) {
        let (a, _) = two_flows(w);
        let (_, first) = w.select(0).expect("a flow");
        assert_eq!(first, a);
        w.served(a, 1000);
        w.expire(a, 1000, false, 1000);
        let old_f = w.entity(a).finish;
        for _ in 0..5 {
            let (_, id) = w.select(0).expect("b");
            w.served(id, 1000);
            w.expire(id, 1000, true, 1000);
        }
        (a, old_f)
    }

    /// A back-shifted flow whose new F is below V: without the push-up it
    /// keeps S = its old F; with it, S and F move up until F = V (by half
    /// of that with a raising coefficient of 2).
    #[test]
    fn a_back_shifted_flow_below_v_is_pushed_up_to_v() {
        let root = GroupId::ROOT;
        let case = |push_up: Option<PushUp>| {
            let mut w = Wf2q::new(0);
            let (a, old_f) = a_left_and_v_ran_on(&mut w);
            let v = w.vtime(root, IoClass::Be);
            w.activate_back_shifted(a, 1000, old_f, push_up);
            (*w.entity(a), old_f, v)
        };
        let (e, old_f, v) = case(None);
        assert_eq!((e.start, e.finish), (old_f, old_f + vdelta(1000, 100)));
        assert!(e.finish < v);
        let up = |slack, div| {
            Some(PushUp {
                slack,
                div,
                anchored: false,
            })
        };
        let (e, _, v) = case(up(0, 1));
        assert_eq!(e.finish, v);
        assert_eq!(e.finish - e.start, vdelta(1000, 100));
        let (e, old_f, v) = case(up(0, 2));
        let f = old_f + vdelta(1000, 100);
        assert_eq!(e.finish, f + (v - f) / 2);
        assert_eq!(e.finish - e.start, vdelta(1000, 100));
        // Bounded: F up to V - 1000 / w, not further.
        let (e, _, v) = case(up(1000, 1));
        assert_eq!(e.finish, v - vdelta(1000, 100));
        // Within the bound it keeps its old F.
        let (e, old_f, _) = case(up(5000, 1));
        assert_eq!(e.start, old_f);
    }

    /// Flow a in group g1 in group g2 beside flow c in the root, all of
    /// weight 100: a is served 1000 and leaves (g1 and g2 go idle with
    /// it), c is served 5000, so V at the root runs past g2's F. a comes
    /// back back-shifted: g2 too starts at its old F, not at V (mutation:
    /// `shifted` false in `activate_at` fails the first check); pushed
    /// up, a group moves by the whole distance to F = V whatever the
    /// flow's raising coefficient (kernel `bfq_update_fin_time_enqueue`
    /// divides by `wr_coeff` for queues only; mutation: the flow's
    /// `push_up` kept for its groups fails the second).
    #[test]
    fn a_back_shifted_flow_back_shifts_every_group_it_activates() {
        let root = GroupId::ROOT;
        let case = |push_up: Option<PushUp>| {
            let mut w = Wf2q::new(0);
            let (g1, g2) = (GroupId(1), GroupId(2));
            let e2 = w.new_entity(Kind::Group(g2), root, IoClass::Be, 100, 1000);
            w.add_group(g2, e2, 0);
            let e1 = w.new_entity(Kind::Group(g1), g2, IoClass::Be, 100, 1000);
            w.add_group(g1, e1, 0);
            let a = w.new_entity(Kind::Flow(0), g1, IoClass::Be, 100, 1000);
            let c = w.new_entity(Kind::Flow(1), root, IoClass::Be, 100, 1000);
            w.activate(a, 1000);
            w.activate(c, 1000);
            assert_eq!(w.select(0), Some((0, a)));
            w.served(a, 1000);
            w.expire(a, 1000, false, 1000);
            for _ in 0..5 {
                assert_eq!(w.select(0), Some((1, c)));
                w.served(c, 1000);
                w.expire(c, 1000, true, 1000);
            }
            let (f1, f2) = (w.entity(e1).finish, w.entity(e2).finish);
            assert!(f2 < w.vtime(root, IoClass::Be));
            w.activate_back_shifted(a, 1000, w.entity(a).finish, push_up);
            w.check_invariants();
            (
                *w.entity(e1),
                f1,
                *w.entity(e2),
                f2,
                w.vtime(root, IoClass::Be),
            )
        };
        let (x1, f1, x2, f2, _) = case(None);
        assert_eq!((x1.start, x2.start), (f1, f2));
        let up = PushUp {
            slack: 0,
            div: 2,
            anchored: false,
        };
        let (_, _, x2, _, v) = case(Some(up));
        assert_eq!(x2.finish, v);
    }

    /// A flow that left and comes back after V ran past its F forfeits
    /// that distance at its weight when timestamped from V (S = max(V, F)),
    /// the push-up's distance when pushed up, and nothing when back-shifted
    /// to its old F (mutation: `activate_at` returning 0 fails the first).
    #[test]
    fn activation_returns_the_service_forfeited() {
        let root = GroupId::ROOT;
        let mut w = Wf2q::new(0);
        let (a, old_f) = a_left_and_v_ran_on(&mut w);
        let v = w.vtime(root, IoClass::Be);
        assert!(v > old_f);
        let lost = w.activate(a, 1000);
        assert_eq!(lost, ((v - old_f) * 100) >> SERVICE_SHIFT);
        assert!(lost > 0);
        let mut w = Wf2q::new(0);
        let (a, old_f) = a_left_and_v_ran_on(&mut w);
        assert_eq!(w.activate_back_shifted(a, 1000, old_f, None), 0);
        let mut w = Wf2q::new(0);
        let (a, old_f) = a_left_and_v_ran_on(&mut w);
        let up = PushUp {
            slack: 0,
            div: 1,
            anchored: false,
        };
        let lost = w.activate_back_shifted(a, 1000, old_f, Some(up));
        let moved = w.entity(a).start - old_f;
        assert_eq!(lost, (moved * 100) >> SERVICE_SHIFT);
        assert!(lost > 0);
    }

    /// V runs past a queued flow's F (a back-shifted return): anchored
    /// (with no slack), a flow activated afresh starts at that F, level
    /// with the backlogged flow, instead of at V, ahead of it by the drift
    /// it would forfeit.
    #[test]
    fn an_anchored_activation_starts_at_the_least_backlogged_f() {
        let root = GroupId::ROOT;
        for anchored in [false, true] {
            let mut w = Wf2q::new(0);
            w.set_anchored(anchored.then_some(Anchor {
                slack: 0,
                span: 1 << 20,
            }));
            let (a, old_f) = a_left_and_v_ran_on(&mut w);
            let c = w.new_entity(Kind::Flow(2), root, IoClass::Be, 100, 1000);
            // a back in time, back-shifted, with no push-up: its F is below V.
            w.activate_back_shifted(a, 1000, old_f, None);
            let (v, fa) = (w.vtime(root, IoClass::Be), w.entity(a).finish);
            assert!(fa < v);
            w.activate(c, 1000);
            let want = if anchored { fa } else { v };
            assert_eq!(w.entity(c).start, want, "anchored {anchored}");
        }
    }
}
