//! `throttle-max` and `throttle-low`: the Linux throttling I/O policy
//! (`block/blk-throttle.c`, 4.18) over the FIFO order of `none`, as the
//! 2018 article tested it (Sections 6-7).
//!
//! Limits are token buckets on *nodes*: flows and groups. A request passes
//! when every limited node on its way up (its flow, its group, the group's
//! parents; never the root) has the tokens for it; then it is charged to
//! all of them. A bucket holds at most `slice` worth of its rate (the
//! kernel's throttle slice: what an idle node saves is capped, and what one
//! node does not use is never given to another). A request larger than the
//! bucket passes when the bucket is full and leaves it in debt.
//! Requests wait per flow, in arrival order; among the flows whose head may
//! pass, the one whose head became passable first goes first (FIFO, as
//! `none` would dispatch them). When no head may pass yet, dispatch returns
//! `Idle { until }` the earliest time one can.
//!
//! `throttle-max`: only max limits (`max_bps`, `max_iops`).
//!
//! `throttle-low`: low limits (`low_bps`, `low_iops`) as well. While in the
//! LOW state, every node is held to its low limit and a flow with no low
//! limit anywhere on its way up is held to `min_bps` and `min_iops`
//! (MIN_THROTL_BPS 320 KiB/s and MIN_THROTL_IOPS 10, as the kernel does
//! for a leaf group without low limits). The policy upgrades to the MAX
//! state when every node with a low limit can upgrade, at least `slice`
//! after the last downgrade: a node can upgrade when it or one of its
//! groups up the hierarchy is being held back by its low limit or is idle
//! (holds nothing for `idle_time`) (`throtl_hierarchy_can_upgrade`), so a
//! node whose parent's low limit holds it back never keeps everyone in
//! LOW.
//!
//! The upgrade is gradual, as the kernel's `throtl_adjusted_limit`: in MAX
//! a node with a low limit may use `low + low / 2 * scale` (bandwidth and
//! IOPS each, never above its max limit), where `scale` is the number of
//! whole slices since the upgrade (up to 4096); nodes without a low limit
//! have their max limits. When some non-idle node with a low limit has not
//! reached its low limit over the last `slice` (at least `slice` after the
//! upgrade or the last step down), the policy steps down: `scale` halves
//! (`throtl_downgrade_state`), and only when it reaches 0 does the state
//! go back to LOW. It starts in LOW when any low limit is set. The state
//! machine runs at most once per `slice` (at a dispatch), as the kernel
//! checks per slice; a change of `scale` changes the buckets' rates and
//! caps in place, keeping their tokens (debt included, at most the cap).
//!
//! Choices: one limit covers both directions together (the kernel has
//! separate read and write limits; the article set them equal); the
//! latency target of the low limits is not modelled.

use crate::util::{ensure, node_settings, parse_rate, Node};
use bfq_core::table::{RequestTable, SlotIdx, Topology};
use bfq_core::{
    DeviceInfo, Dispatch, FlowId, FlowSpec, GroupId, Internals, ReqId, Request, SchedError,
    Scheduler, Settings, Time, MS, SEC, SECTOR_BYTES,
};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

/// A token bucket in units x ns (so that refills are exact integers).
#[derive(Clone, Copy, Debug)]
struct Bucket {
    rate: u64,
    tokens: i128,
    cap: i128,
    last: Time,
}

impl Bucket {
    fn new(rate: u64, slice: Time) -> Self {
        let cap = i128::from(rate) * i128::from(slice.max(1));
        Bucket {
            rate,
            tokens: cap,
            cap,
            last: 0,
        }
    }
    fn refill(&mut self, now: Time) {
        if now > self.last {
            let add = i128::from(self.rate) * i128::from(now - self.last);
            self.tokens = (self.tokens + add).min(self.cap);
            self.last = now;
        }
    }
    fn reset(&mut self, now: Time) {
        self.tokens = self.cap;
        self.last = now;
    }
    /// A new rate (and cap, `rate` x `slice`) from `now` on: the tokens
    /// earned so far are kept, debt included, at most the new cap.
    fn set_rate(&mut self, rate: u64, slice: Time, now: Time) {
        self.refill(now);
        self.last = self.last.max(now);
        self.rate = rate;
        self.cap = i128::from(rate) * i128::from(slice.max(1));
        self.tokens = self.tokens.min(self.cap);
    }
    /// When `units` may pass (given no other use).
    fn ready_at(&self, units: u64) -> Time {
        let need = (i128::from(units) * i128::from(SEC)).min(self.cap);
        // Tokens at `self.last`; refill is linear until the cap.
        if self.tokens >= need {
            return self.last;
        }
        let missing = need - self.tokens;
        let dt = (missing + i128::from(self.rate) - 1) / i128::from(self.rate);
        self.last
            .saturating_add(dt.min(i128::from(u64::MAX)) as u64)
    }
    fn charge(&mut self, units: u64) {
        self.tokens -= i128::from(units) * i128::from(SEC);
    }
}

/// Bandwidth and IOPS buckets of one node for one state.
#[derive(Clone, Copy, Debug, Default)]
struct Limits {
    bps: Option<Bucket>,
    iops: Option<Bucket>,
}

impl Limits {
    fn new(bps: u64, iops: u64, slice: Time) -> Self {
        Limits {
            bps: (bps > 0).then(|| Bucket::new(bps, slice)),
            iops: (iops > 0).then(|| Bucket::new(iops, slice)),
        }
    }
    /// Changes the limits in place (0 = none); a bucket that did not
    /// exist starts full at `now`.
    fn set(&mut self, bps: u64, iops: u64, slice: Time, now: Time) {
        for (b, rate) in [(&mut self.bps, bps), (&mut self.iops, iops)] {
            match b {
                _ if rate == 0 => *b = None,
                Some(x) => x.set_rate(rate, slice, now),
                None => {
                    let mut x = Bucket::new(rate, slice);
                    x.last = now;
                    *b = Some(x);
                }
            }
        }
    }
    fn is_set(&self) -> bool {
        self.bps.is_some() || self.iops.is_some()
    }
    fn ready_at(&mut self, now: Time, bytes: u64) -> Time {
        let mut t = 0;
        if let Some(b) = &mut self.bps {
            b.refill(now);
            t = t.max(b.ready_at(bytes));
        }
        if let Some(b) = &mut self.iops {
            b.refill(now);
            t = t.max(b.ready_at(1));
        }
        t
    }
    fn charge(&mut self, bytes: u64) {
        if let Some(b) = &mut self.bps {
            b.charge(bytes);
        }
        if let Some(b) = &mut self.iops {
            b.charge(1);
        }
    }
    fn reset(&mut self, now: Time) {
        if let Some(b) = &mut self.bps {
            b.reset(now);
        }
        if let Some(b) = &mut self.iops {
            b.reset(now);
        }
    }
}

/// Throttling state of a flow or group.
#[derive(Clone, Debug, Default)]
struct NodeState {
    max: Limits,
    low: Limits,
    /// Configured low limits (bps, iops), for the downgrade check.
    low_cfg: (u64, u64),
    /// Requests held below this node.
    held: u32,
    last_empty: Time,
    /// A request was held back by this node's low limit since the last one
    /// passed it.
    blocked: bool,
    // Rate measurement while in MAX (for the downgrade check).
    bytes: u64,
    ios: u64,
    check_start: Time,
    last_overflow: Time,
}

#[derive(Debug, Default)]
struct TFlow {
    queue: VecDeque<SlotIdx>,
    in_heap: bool,
    group: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Low,
    Max,
}

#[derive(Clone, Copy, Debug, Default)]
struct Extra {
    seq: u64,
}

/// Which buckets a node uses in the current state.
#[derive(Clone, Copy)]
enum Which {
    Max,
    Low,
}

/// blk-throttle with max limits, or max and low limits.
#[derive(Debug)]
pub struct Throttle {
    low_policy: bool,
    table: RequestTable<Extra>,
    topo: Topology<(), ()>,
    flows: Vec<TFlow>,
    fnodes: Vec<NodeState>,
    gnodes: Vec<NodeState>,
    /// (eligible time, head seq, flow)
    heap: BinaryHeap<Reverse<(Time, u64, u32)>>,
    seq: u64,
    mode: Mode,
    mode_since: Time,
    /// Time spent in LOW before `state_since`, when the state last
    /// changed, and how many times it changed ([`Scheduler::internals`]).
    low_ns: Time,
    state_since: Time,
    state_changes: u64,
    /// The state machine runs again at or after this time: once per
    /// `slice`, as the kernel's upgrade and downgrade checks.
    next_check: Time,
    /// MAX: the low-limited nodes' allowance grows with it (see above).
    scale: u64,
    /// MAX: when the scale started counting (`low_upgrade_time`).
    upgrade_at: Time,
    /// Nodes with a low limit.
    low_nodes: Vec<Node>,
    cfg_max: HashMap<Node, (u64, u64)>,
    cfg_low: HashMap<Node, (u64, u64)>,
    slice: Time,
    idle_time: Time,
    min_bps: u64,
    min_iops: u64,
}

fn read_limits(
    s: &mut Settings,
    bps_key: &str,
    iops_key: &str,
) -> Result<HashMap<Node, (u64, u64)>, SchedError> {
    let mut m: HashMap<Node, (u64, u64)> = HashMap::new();
    for (key, is_bps) in [(bps_key, true), (iops_key, false)] {
        for (node, v) in node_settings(s, key)? {
            if node == Node::Group(GroupId::ROOT) {
                return Err(SchedError::InvalidSetting {
                    key: format!("{key}.g0"),
                    value: v,
                    why: "the root group is never throttled".into(),
                });
            }
            let x = parse_rate(key, &v)?;
            let e = m.entry(node).or_default();
            if is_bps {
                e.0 = x;
            } else {
                e.1 = x;
            }
        }
    }
    Ok(m)
}

impl Throttle {
    /// Settings: `max_bps.fN|gN`, `max_iops.fN|gN` (bytes or requests per
    /// second, both directions together; 0 = no limit), `slice` (100 ms);
    /// with `low`: `low_bps.fN|gN`, `low_iops.fN|gN`, `idle_time` (1 ms, the
    /// article's setting), `min_bps` (327680), `min_iops` (10).
    pub fn new(s: &mut Settings, low: bool) -> Result<Self, SchedError> {
        let cfg_max = read_limits(s, "max_bps", "max_iops")?;
        let cfg_low = if low {
            read_limits(s, "low_bps", "low_iops")?
        } else {
            HashMap::new()
        };
        let slice = s.duration_in("slice", 100 * MS, 1, bfq_core::settings::MAX_DURATION)?;
        let (idle_time, min_bps, min_iops) = if low {
            (
                s.duration("idle_time", MS)?,
                s.u64_in("min_bps", 320 * 1024, 1, crate::util::MAX_RATE)?,
                s.u64_in("min_iops", 10, 1, crate::util::MAX_RATE)?,
            )
        } else {
            (0, 0, 0)
        };
        let mode = if cfg_low.values().any(|&(b, i)| b > 0 || i > 0) {
            Mode::Low
        } else {
            Mode::Max
        };
        Ok(Throttle {
            low_policy: low,
            table: RequestTable::new(),
            topo: Topology::new(()),
            flows: Vec::new(),
            fnodes: Vec::new(),
            gnodes: vec![NodeState::default()],
            heap: BinaryHeap::new(),
            seq: 0,
            mode,
            mode_since: 0,
            low_ns: 0,
            state_since: 0,
            state_changes: 0,
            next_check: 0,
            scale: 0,
            upgrade_at: 0,
            low_nodes: Vec::new(),
            cfg_max,
            cfg_low,
            slice,
            idle_time,
            min_bps,
            min_iops,
        })
    }

    fn make_node(&mut self, node: Node, clamp: bool) -> NodeState {
        let (mb, mi) = self.cfg_max.get(&node).copied().unwrap_or((0, 0));
        let (lb, li) = self.cfg_low.get(&node).copied().unwrap_or((0, 0));
        let mut n = NodeState {
            max: Limits::new(mb, mi, self.slice),
            low: Limits::new(lb, li, self.slice),
            low_cfg: (lb, li),
            ..NodeState::default()
        };
        if n.low.is_set() {
            self.low_nodes.push(node);
        } else if clamp && self.low_policy {
            n.low = Limits::new(self.min_bps, self.min_iops, self.slice);
        }
        n
    }

    fn node(&mut self, n: Node) -> &mut NodeState {
        match n {
            Node::Flow(f) => &mut self.fnodes[f.index()],
            Node::Group(g) => &mut self.gnodes[g.index()],
        }
    }

    /// Calls `f` on the flow's node and each group up to (not including)
    /// the root.
    fn for_chain(&mut self, flow: u32, mut f: impl FnMut(&mut NodeState)) {
        f(&mut self.fnodes[flow as usize]);
        let mut g = GroupId(self.flows[flow as usize].group);
        while g != GroupId::ROOT {
            f(&mut self.gnodes[g.index()]);
            g = match self.topo.group(g) {
                Ok(e) => e.parent,
                Err(_) => break,
            };
        }
    }

    fn which(&self) -> Which {
        match self.mode {
            Mode::Low => Which::Low,
            Mode::Max => Which::Max,
        }
    }

    /// When the flow's head request may pass; marks the nodes that hold it
    /// back (in LOW).
    fn ready_at(&mut self, f: u32, now: Time) -> Option<Time> {
        let &h = self.flows[f as usize].queue.front()?;
        let s = self.table.slot(h);
        let bytes = u64::from(s.req.sectors) * SECTOR_BYTES;
        let arrival = s.arrival;
        let which = self.which();
        let mut t = arrival;
        self.for_chain(f, |n| {
            let lim = match which {
                Which::Max => &mut n.max,
                Which::Low => &mut n.low,
            };
            let r = lim.ready_at(now, bytes);
            if r > now {
                n.blocked = true;
            }
            t = t.max(r);
        });
        Some(t)
    }

    fn push_flow(&mut self, f: u32, now: Time) {
        match self.ready_at(f, now) {
            Some(t) => {
                let h = self.flows[f as usize].queue[0];
                let seq = self.table.slot(h).extra.seq;
                self.heap.push(Reverse((t, seq, f)));
                self.flows[f as usize].in_heap = true;
            }
            None => self.flows[f as usize].in_heap = false,
        }
    }

    fn set_mode(&mut self, mode: Mode, now: Time) {
        if mode != self.mode {
            if self.mode == Mode::Low {
                self.low_ns += now.saturating_sub(self.state_since);
            }
            self.state_since = now;
            self.state_changes += 1;
        }
        self.mode = mode;
        self.mode_since = now;
        let reset = |n: &mut NodeState| {
            match mode {
                Mode::Low => n.low.reset(now),
                Mode::Max => n.max.reset(now),
            }
            n.blocked = false;
            n.bytes = 0;
            n.ios = 0;
            n.check_start = now;
            n.last_overflow = now;
        };
        self.fnodes.iter_mut().for_each(reset);
        self.gnodes.iter_mut().for_each(reset);
        self.set_heap(now);
    }

    /// Eligibility times changed: rebuild the heap.
    fn set_heap(&mut self, now: Time) {
        self.heap.clear();
        for f in 0..self.flows.len() as u32 {
            self.flows[f as usize].in_heap = false;
            if !self.flows[f as usize].queue.is_empty() {
                self.push_flow(f, now);
            }
        }
    }

    /// The LOW <-> MAX state machine (blk-throttle's upgrade/downgrade
    /// checks), over the nodes with a low limit only.
    fn update_mode(&mut self, now: Time) {
        if self.low_nodes.is_empty() {
            // Nobody has a low limit (any more): nothing to protect.
            if self.mode == Mode::Low {
                self.set_mode(Mode::Max, now);
            }
            return;
        }
        if now < self.check_at() {
            return;
        }
        self.next_check = now.saturating_add(self.slice);
        match self.mode {
            Mode::Low => {
                let all = (0..self.low_nodes.len())
                    .all(|i| self.hierarchy_can_upgrade(self.low_nodes[i], now));
                if all {
                    self.set_mode(Mode::Max, now);
                    self.scale = 0;
                    self.upgrade_at = now;
                    self.apply_scale(now);
                }
            }
            Mode::Max => {
                let slice = self.slice;
                for i in 0..self.low_nodes.len() {
                    let node = self.low_nodes[i];
                    let n = self.node(node);
                    if n.blocked {
                        // held back by its own (scaled) limit: it would go faster
                        n.last_overflow = now;
                    }
                    let elapsed = now.saturating_sub(n.check_start);
                    if elapsed >= slice {
                        let (lb, li) = n.low_cfg;
                        let bps = u128::from(n.bytes) * u128::from(SEC) / u128::from(elapsed);
                        let iops = u128::from(n.ios) * u128::from(SEC) / u128::from(elapsed);
                        if (lb > 0 && bps >= u128::from(lb)) || (li > 0 && iops >= u128::from(li)) {
                            n.last_overflow = now;
                        }
                        n.bytes = 0;
                        n.ios = 0;
                        n.check_start = now;
                    }
                }
                let below = (0..self.low_nodes.len())
                    .any(|i| self.hierarchy_can_downgrade(self.low_nodes[i], now));
                if below {
                    self.scale /= 2;
                    if self.scale == 0 {
                        self.set_mode(Mode::Low, now);
                    } else {
                        self.mode_since = now;
                        self.upgrade_at = now - (self.scale * self.slice).min(now);
                        self.apply_scale(now);
                    }
                } else {
                    let scale = (now.saturating_sub(self.upgrade_at) / self.slice).min(4096);
                    if scale != self.scale {
                        self.scale = scale;
                        self.apply_scale(now);
                    }
                }
            }
        }
    }

    /// When the state machine may run next: a slice after the last check
    /// and after the last change of state.
    fn check_at(&self) -> Time {
        self.next_check
            .max(self.mode_since.saturating_add(self.slice))
    }

    fn state(&self, node: Node) -> &NodeState {
        match node {
            Node::Flow(f) => &self.fnodes[f.0 as usize],
            Node::Group(g) => &self.gnodes[g.0 as usize],
        }
    }

    /// The group above `node`, if not the root.
    fn parent(&self, node: Node) -> Option<Node> {
        let p = match node {
            Node::Flow(f) => GroupId(self.flows[f.0 as usize].group),
            Node::Group(g) => self
                .topo
                .group(g)
                .map(|e| e.parent)
                .unwrap_or(GroupId::ROOT),
        };
        (p != GroupId::ROOT).then_some(Node::Group(p))
    }

    fn idle(&self, n: &NodeState, now: Time) -> bool {
        n.held == 0 && now.saturating_sub(n.last_empty) >= self.idle_time
    }

    /// The node itself or one of its groups up to the root is held back by
    /// its low limit or idle (`throtl_hierarchy_can_upgrade`).
    fn hierarchy_can_upgrade(&self, node: Node, now: Time) -> bool {
        let mut cur = Some(node);
        while let Some(nd) = cur {
            let n = self.state(nd);
            if n.blocked || self.idle(n, now) {
                return true;
            }
            cur = self.parent(nd);
        }
        false
    }

    /// The node and every group above it that has a low limit are busy and
    /// have not reached their low limit for a slice, counting a low-limited
    /// parent's overflow as the child's (`throtl_hierarchy_can_downgrade`,
    /// `tg_last_low_overflow_time`): a node held back by its parent does
    /// not step the policy down.
    fn hierarchy_can_downgrade(&self, node: Node, now: Time) -> bool {
        let mut cur = Some(node);
        while let Some(nd) = cur {
            let n = self.state(nd);
            let parent = self.parent(nd);
            if n.low_cfg != (0, 0) {
                let mut over = n.last_overflow;
                if let Some(p) = parent.map(|p| self.state(p)) {
                    if p.low_cfg != (0, 0) {
                        over = over.max(p.last_overflow);
                    }
                }
                if self.idle(n, now) || now.saturating_sub(over) < self.slice {
                    return false;
                }
            }
            cur = parent;
        }
        true
    }

    /// MAX: every node with a low limit gets `low + low / 2 * scale`, at
    /// most its max limit (`throtl_adjusted_limit`).
    fn apply_scale(&mut self, now: Time) {
        let (scale, slice) = (self.scale, self.slice);
        for i in 0..self.low_nodes.len() {
            let node = self.low_nodes[i];
            let (mb, mi) = self.cfg_max.get(&node).copied().unwrap_or((0, 0));
            let n = self.node(node);
            let (lb, li) = n.low_cfg;
            let adj = |low: u64, max: u64| -> u64 {
                if low == 0 {
                    return max;
                }
                let a = low.saturating_add((low / 2).saturating_mul(scale));
                if max == 0 {
                    a
                } else {
                    a.min(max)
                }
            };
            n.max.set(adj(lb, mb), adj(li, mi), slice, now);
        }
        self.set_heap(now);
    }
}

impl Scheduler for Throttle {
    fn name(&self) -> &str {
        if self.low_policy {
            "throttle-low"
        } else {
            "throttle-max"
        }
    }
    fn set_device(&mut self, _device: DeviceInfo) {}
    fn add_group(&mut self, parent: GroupId, weight: u32) -> Result<GroupId, SchedError> {
        let g = self.topo.add_group(parent, weight, ())?;
        ensure(&mut self.gnodes, g.index());
        self.gnodes[g.index()] = self.make_node(Node::Group(g), false);
        Ok(g)
    }
    fn remove_group(&mut self, group: GroupId) -> Result<(), SchedError> {
        self.topo.remove_group(group)?;
        self.low_nodes.retain(|n| *n != Node::Group(group));
        Ok(())
    }
    fn queued(&self) -> usize {
        self.table.queued()
    }
    fn in_flight(&self) -> usize {
        self.table.in_flight()
    }
    fn internals(&self, now: Time) -> Internals {
        if !self.low_policy {
            return Internals::default();
        }
        let current = match self.mode {
            Mode::Low => now.saturating_sub(self.state_since),
            Mode::Max => 0,
        };
        Internals {
            low_state_ns: Some(self.low_ns + current),
            state_changes: Some(self.state_changes),
            ..Internals::default()
        }
    }
    fn add_flow(&mut self, now: Time, spec: FlowSpec) -> Result<FlowId, SchedError> {
        let id = self.topo.add_flow(spec, ())?;
        ensure(&mut self.flows, id.index());
        ensure(&mut self.fnodes, id.index());
        self.flows[id.index()] = TFlow {
            queue: VecDeque::new(),
            in_heap: false,
            group: spec.group.0,
        };
        // A flow with no low limit on its way up is clamped in LOW.
        let mut has_low = self
            .cfg_low
            .get(&Node::Flow(id))
            .is_some_and(|&(b, i)| b > 0 || i > 0);
        let mut g = spec.group;
        while g != GroupId::ROOT && !has_low {
            has_low = self.gnodes[g.index()].low.is_set();
            g = self
                .topo
                .group(g)
                .map(|e| e.parent)
                .unwrap_or(GroupId::ROOT);
        }
        let mut n = self.make_node(Node::Flow(id), !has_low);
        n.last_empty = now;
        n.max.reset(now);
        n.low.reset(now);
        self.fnodes[id.index()] = n;
        Ok(id)
    }
    fn remove_flow(&mut self, _now: Time, flow: FlowId) -> Result<(), SchedError> {
        if self.topo.retire_flow(flow)? {
            self.low_nodes.retain(|n| *n != Node::Flow(flow));
        }
        Ok(())
    }
    fn add_request(&mut self, now: Time, req: Request) -> Result<(), SchedError> {
        let idx = self
            .table
            .admit(&mut self.topo, now, req, Extra { seq: self.seq + 1 })?;
        self.seq += 1;
        let f = req.flow.index() as u32;
        self.for_chain(f, |n| n.held += 1);
        self.flows[f as usize].queue.push_back(idx);
        if !self.flows[f as usize].in_heap {
            self.push_flow(f, now);
        }
        Ok(())
    }
    fn dispatch(&mut self, now: Time) -> Dispatch {
        self.update_mode(now);
        loop {
            let Some(&Reverse((t, seq, f))) = self.heap.peek() else {
                return if self.table.queued() == 0 {
                    Dispatch::Empty
                } else {
                    Dispatch::Wait
                };
            };
            if t > now {
                let mut until = t;
                if self.mode == Mode::Low && !self.low_nodes.is_empty() {
                    // Come back to re-check the state machine.
                    until = until.min(self.check_at().max(now + 1));
                }
                return Dispatch::Idle { until };
            }
            self.heap.pop();
            // Recompute: another flow may have used shared tokens.
            let actual = self.ready_at(f, now);
            match actual {
                Some(a) if a > now => {
                    self.heap.push(Reverse((a, seq, f)));
                    continue;
                }
                None => {
                    self.flows[f as usize].in_heap = false;
                    continue;
                }
                Some(_) => {}
            }
            let idx = self.flows[f as usize].queue.pop_front().expect("head");
            let bytes = u64::from(self.table.slot(idx).req.sectors) * SECTOR_BYTES;
            let which = self.which();
            self.for_chain(f, |n| {
                match which {
                    Which::Max => n.max.charge(bytes),
                    Which::Low => n.low.charge(bytes),
                }
                n.blocked = false;
                n.bytes += bytes;
                n.ios += 1;
            });
            let r = self.table.dispatch(now, idx);
            self.push_flow(f, now);
            return Dispatch::Request(r);
        }
    }
    fn complete(&mut self, now: Time, id: ReqId) -> Result<(), SchedError> {
        let slot = self.table.complete(id)?;
        let f = slot.req.flow.index() as u32;
        self.for_chain(f, |n| {
            n.held -= 1;
            if n.held == 0 {
                n.last_empty = now;
            }
        });
        if self.topo.release(slot.req.flow) {
            self.low_nodes.retain(|n| *n != Node::Flow(slot.req.flow));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SLICE: Time = 100 * MS;

    /// throttle-low with the given settings, a group g1 under the root and
    /// a flow f0 in it, in MAX at `scale` since time `t`.
    fn in_max(set: &[(&str, &str)], scale: u64, t: Time) -> Throttle {
        let mut s = Settings::new();
        for (k, v) in set {
            s.set(*k, *v);
        }
        let mut th = Throttle::new(&mut s, true).unwrap();
        let g = th.add_group(GroupId::ROOT, 100).unwrap();
        let spec = FlowSpec {
            group: g,
            ..FlowSpec::default()
        };
        th.add_flow(0, spec).unwrap();
        th.set_mode(Mode::Max, t);
        th.scale = scale;
        th.upgrade_at = t - scale * SLICE;
        th.next_check = t;
        th.apply_scale(t);
        th
    }

    /// Every node busy (a request held) and under its low limit since `t`.
    fn busy_below(th: &mut Throttle, t: Time) {
        for n in th.fnodes.iter_mut().chain(th.gnodes.iter_mut().skip(1)) {
            n.held = 1;
            n.last_overflow = t;
            n.check_start = t;
        }
    }

    fn max_bps(th: &Throttle, node: Node) -> u64 {
        th.state(node).max.bps.expect("a max bucket").rate
    }

    #[test]
    fn a_step_down_halves_the_allowance() {
        let t = 10 * SEC;
        let mut th = in_max(&[("low_bps.f0", "1M")], 8, t);
        let f0 = Node::Flow(FlowId(0));
        assert_eq!(max_bps(&th, f0), (1 << 20) + (1 << 19) * 8);
        busy_below(&mut th, t);
        th.update_mode(t + SLICE);
        assert_eq!((th.mode, th.scale), (Mode::Max, 4));
        assert_eq!(max_bps(&th, f0), (1 << 20) + (1 << 19) * 4);
    }

    #[test]
    fn low_is_reached_only_at_scale_zero() {
        let t = 10 * SEC;
        let mut th = in_max(&[("low_bps.f0", "1M")], 2, t);
        busy_below(&mut th, t);
        th.update_mode(t + SLICE);
        assert_eq!((th.mode, th.scale), (Mode::Max, 1));
        th.update_mode(t + 2 * SLICE);
        assert_eq!((th.mode, th.scale), (Mode::Low, 0));
    }

    #[test]
    fn internals_count_the_time_in_low_and_the_changes() {
        let t = 10 * SEC;
        // LOW from 0 to t, then MAX until it steps down to LOW at t + 2 slices
        let mut th = in_max(&[("low_bps.f0", "1M")], 2, t);
        busy_below(&mut th, t);
        th.update_mode(t + SLICE);
        th.update_mode(t + 2 * SLICE);
        assert_eq!(th.mode, Mode::Low);
        let i = th.internals(t + 5 * SLICE);
        assert_eq!(i.low_state_ns, Some(t + 3 * SLICE));
        assert_eq!(i.state_changes, Some(2));
        // throttle-max has no LOW state
        let max = Throttle::new(&mut Settings::new(), false).unwrap();
        assert_eq!(max.internals(t), Internals::default());
    }

    #[test]
    fn a_child_held_by_its_parents_low_limit_does_not_step_down() {
        let t = 10 * SEC;
        let set = [("low_bps.f0", "1M"), ("low_bps.g1", "1M")];
        let mut th = in_max(&set, 4, t);
        busy_below(&mut th, t);
        // the parent reaches its low limit; the child, under it, does not
        th.gnodes[1].last_overflow = t + SLICE;
        let f0 = Node::Flow(FlowId(0));
        assert!(!th.hierarchy_can_downgrade(f0, t + SLICE + 1));
        // without the parent's overflow, the child would step down
        th.gnodes[1].last_overflow = t;
        assert!(th.hierarchy_can_downgrade(f0, t + SLICE + 1));
    }

    #[test]
    fn a_scale_step_keeps_the_debt_and_does_not_refill() {
        let t = 10 * SEC;
        let mut th = in_max(&[("low_bps.f0", "1M")], 1, t);
        let f0 = Node::Flow(FlowId(0));
        // a 4 MiB request left the bucket in debt
        th.fnodes[0].max.charge(4 << 20);
        let before = th.fnodes[0].max.bps.unwrap().tokens;
        assert!(before < 0);
        th.next_check = t + SLICE;
        th.update_mode(t + SLICE);
        assert_eq!(th.scale, 2);
        let b = th.state(f0).max.bps.unwrap();
        assert_eq!(b.rate, (1 << 20) + (1 << 19) * 2);
        // refilled at the old rate for one slice, still in debt
        let earned = i128::from((1u64 << 20) + (1 << 19)) * i128::from(SLICE);
        assert_eq!(b.tokens, before + earned);
    }

    #[test]
    fn the_state_machine_runs_at_most_once_per_slice() {
        let t = 10 * SEC;
        let mut th = in_max(&[("low_bps.f0", "1M")], 8, t);
        // a check finds f0 at its low limit: no step down
        th.fnodes[0].held = 1;
        th.fnodes[0].last_overflow = t + SLICE;
        th.update_mode(t + SLICE);
        assert_eq!(th.scale, 9);
        // right after, f0 falls under it: nothing until a slice has passed
        th.fnodes[0].last_overflow = 0;
        th.update_mode(t + SLICE + 1);
        assert_eq!(th.scale, 9);
        th.update_mode(t + 2 * SLICE);
        assert_eq!(th.scale, 4);
    }
}
