//! `throttle-max` and `throttle-low`: the Linux throttling I/O policy
//! (`block/blk-throttle.c`, 4.18) over the FIFO order of `none`, as the
//! 2018 article tested it (Sections 6-7).
//!
//! Limits are token buckets on *nodes*: flows and groups, one per
//! direction (the kernel's `rbps`/`wbps` and `riops`/`wiops`; a `*_bps` or
//! `*_iops` setting sets both, as the article did: "the same limits are set
//! for both reads and writes", Table 2). A request passes when every
//! limited node on its way up (its flow, its group, the group's parents;
//! never the root) has the tokens for it in its direction; then it is
//! charged to all of them. A bucket holds at most `slice` worth of its rate
//! (the kernel's throttle slice: what an idle node saves is capped, and
//! what one node does not use is never given to another). A request larger
//! than the bucket passes when the bucket is full and leaves it in debt.
//! Requests wait per flow, in arrival order; among the flows whose head may
//! pass, the one whose head became passable first goes first (FIFO, as
//! `none` would dispatch them). When no head may pass yet, dispatch returns
//! `Idle { until }` the earliest time one can.
//!
//! `throttle-max`: only max limits (`max_bps`, `max_iops`).
//!
//! `throttle-low`: low limits (`low_bps`, `low_iops`) as well, with the
//! kernel's LOW/MAX state machine (see the `low` module): checked when a
//! request arrives, as `blk_throtl_bio` does, never on a timer.
//!
//! Mapping to cgroups: every group but the root is a throttling group; a
//! flow is one too when it has limits of its own (or is clamped in LOW,
//! below), and is then a leaf below its group; a flow without limits is a
//! process of its group. In LOW a flow with no low limit anywhere on its
//! way up is held to `min_bps` and `min_iops` (MIN_THROTL_BPS 320 KiB/s and
//! MIN_THROTL_IOPS 10, as the kernel does for a leaf group without low
//! limits).

mod low;

use crate::util::{ensure, node_settings, parse_rate, Node};
use bfq_core::table::{check_time, dispatch_past_end, RequestTable, SlotIdx, Topology};
use bfq_core::{
    DeviceInfo, Dispatch, FlowId, FlowSpec, GroupId, Internals, Op, ReqId, Request, SchedError,
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

/// Reads (0) and writes (1), as the kernel's `READ` and `WRITE` indices.
const DIRS: usize = 2;

fn dir_of(op: Op) -> usize {
    match op {
        Op::Read => 0,
        Op::Write => 1,
    }
}

/// A node's state for one direction.
#[derive(Clone, Debug, Default)]
struct DirState {
    /// The limits of the current state, changed in place (tokens and debt
    /// kept) when the state or the scale changes, as the kernel keeps a
    /// slice's dispatched bytes when its limit changes.
    lim: Limits,
    /// Configured low and max limits (bps, iops); 0 = none.
    low_cfg: (u64, u64),
    max_cfg: (u64, u64),
    /// A request of this direction is held back by this node's limit
    /// (the kernel's `nr_queued[rw]` > 0).
    queued: bool,
    /// When a request of this direction last wanted more than the node's
    /// limit, or the node was found at or above its low limit
    /// (`last_low_overflow_time[rw]`); 0 until the first request of this
    /// direction arrives, as in the kernel.
    last_overflow: Time,
    /// Bytes and requests passed since the last downgrade check
    /// (`last_bytes_disp`, `last_io_disp`).
    bytes: u64,
    ios: u64,
}

/// Throttling state of a flow or group.
#[derive(Clone, Debug, Default)]
struct NodeState {
    dir: [DirState; DIRS],
    /// Held to `min_bps`/`min_iops` in LOW: no low limit on its way up.
    clamp: bool,
    /// A throttling group (see the module documentation): every group,
    /// and a flow with limits of its own or clamped in LOW.
    tnode: bool,
    /// Child throttling nodes (groups only): a group without any is a leaf.
    children: u32,
    /// When the state machine last ran its checks for this node
    /// (`last_check_time`, shared by the upgrade and downgrade checks).
    last_check: Time,
    /// When a request of this node last completed (0 = never), and the
    /// completion the think time was last measured from.
    last_finish: Time,
    checked_finish: Time,
    /// Mean think time, from a completion to the next arrival, weighted
    /// 7/8 old, 1/8 new (`avg_idletime`).
    avg_idle: Time,
    /// Its idle threshold and latency target; `None` when it has no low
    /// limit or sits below a group without one (see [`low::Targets`]).
    targets: Option<low::Targets>,
    /// Requests counted for the latency target, and those above it
    /// (`bio_cnt`, `bad_bio_cnt`), halved every slice.
    bio_cnt: u32,
    bad_cnt: u32,
    cnt_reset_at: Time,
}

impl NodeState {
    fn has_low(&self) -> bool {
        self.dir.iter().any(|d| d.low_cfg != (0, 0))
    }
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
    /// Time spent in LOW before `state_since`, when the state last
    /// changed, and how many times it changed ([`Scheduler::internals`]).
    low_ns: Time,
    state_since: Time,
    state_changes: u64,
    /// MAX: the low-limited nodes' allowance grows with it (`td->scale`).
    scale: u64,
    /// MAX: when the scale started counting (`low_upgrade_time`).
    upgrade_at: Time,
    /// When the state last went back to LOW (`low_downgrade_time`).
    downgrade_at: Time,
    /// Nodes with a low limit.
    low_nodes: Vec<Node>,
    cfg_max: HashMap<Node, Cfg>,
    cfg_low: HashMap<Node, Cfg>,
    slice: Time,
    /// The kernel's timer tick (1 / HZ): a held request is released at a
    /// tick, as blk-throttle's dispatch times are in jiffies.
    tick: Time,
    /// `slice` was given: the device does not choose it.
    slice_set: bool,
    /// Idle thresholds and latency targets as configured (`low` only).
    targets: low::TargetCfg,
    min_bps: u64,
    min_iops: u64,
    rotational: bool,
    /// The device's latency per request size, measured in LOW.
    base: low::Baseline,
}

/// Configured limits of a node, per direction: (bytes/s, requests/s),
/// 0 = none.
type Cfg = [(u64, u64); DIRS];

/// Reads `{kind}_bps`, `{kind}_iops` (both directions), `{kind}_rbps`,
/// `{kind}_riops` (reads), `{kind}_wbps`, `{kind}_wiops` (writes); a
/// per-direction setting wins over the both-direction one.
fn read_limits(s: &mut Settings, kind: &str) -> Result<HashMap<Node, Cfg>, SchedError> {
    let mut m: HashMap<Node, Cfg> = HashMap::new();
    let keys = [
        ("bps", [true, true], true),
        ("iops", [true, true], false),
        ("rbps", [true, false], true),
        ("riops", [true, false], false),
        ("wbps", [false, true], true),
        ("wiops", [false, true], false),
    ];
    for (suffix, dirs, is_bps) in keys {
        let key = format!("{kind}_{suffix}");
        for (node, v) in node_settings(s, &key)? {
            if node == Node::Group(GroupId::ROOT) {
                return Err(SchedError::InvalidSetting {
                    key: format!("{key}.g0"),
                    value: v,
                    why: "the root group is never throttled".into(),
                });
            }
            let x = parse_rate(&key, &v)?;
            let e = m.entry(node).or_default();
            for d in (0..DIRS).filter(|&d| dirs[d]) {
                if is_bps {
                    e[d].0 = x;
                } else {
                    e[d].1 = x;
                }
            }
        }
    }
    Ok(m)
}

/// The throttle slice of the kernel with low limits configured
/// (`DFL_THROTL_SLICE_HD`, `DFL_THROTL_SLICE_SSD`).
const SLICE_HD: Time = 100 * MS;
const SLICE_SSD: Time = 20 * MS;

impl Throttle {
    /// Settings: `max_bps.fN|gN`, `max_iops.fN|gN` (bytes or requests per
    /// second, each direction; 0 = no limit), `slice` (100 ms; with `low`,
    /// 100 ms on a rotational device and 20 ms on others, as the kernel);
    /// with `low`: `low_bps.fN|gN`, `low_iops.fN|gN`, `idle_time` and
    /// `idle_time.fN|gN` (1 ms), `latency` and `latency.fN|gN` (100 us),
    /// `min_bps` (327680), `min_iops` (10).
    pub fn new(s: &mut Settings, low: bool) -> Result<Self, SchedError> {
        let cfg_max = read_limits(s, "max")?;
        let cfg_low = if low {
            read_limits(s, "low")?
        } else {
            HashMap::new()
        };
        let slice_set = s.pairs().any(|(k, _)| k == "slice");
        let slice = s.duration_in("slice", SLICE_HD, 1, bfq_core::settings::MAX_DURATION)?;
        let tick = s.duration_in("tick", 4 * MS, 0, SEC)?;
        let (targets, min_bps, min_iops) = if low {
            (
                low::TargetCfg::read(s)?,
                s.u64_in("min_bps", 320 * 1024, 1, crate::util::MAX_RATE)?,
                s.u64_in("min_iops", 10, 1, crate::util::MAX_RATE)?,
            )
        } else {
            (low::TargetCfg::default(), 0, 0)
        };
        let mode = if cfg_low.values().flatten().any(|&l| l != (0, 0)) {
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
            low_ns: 0,
            state_since: 0,
            state_changes: 0,
            scale: 0,
            upgrade_at: 0,
            downgrade_at: 0,
            low_nodes: Vec::new(),
            cfg_max,
            cfg_low,
            slice,
            tick,
            slice_set,
            targets,
            min_bps,
            min_iops,
            rotational: true,
            base: low::Baseline::default(),
        })
    }

    fn make_node(&mut self, node: Node, clamp: bool, now: Time) -> NodeState {
        let max = self.cfg_max.get(&node).copied().unwrap_or_default();
        let low = self.cfg_low.get(&node).copied().unwrap_or_default();
        // a low limit above the max limit is the max limit (`tg_set_limit`)
        let cut = |low: u64, max: u64| if max > 0 { low.min(max) } else { low };
        let mut n = NodeState {
            tnode: matches!(node, Node::Group(_)) || max != Cfg::default() || low != Cfg::default(),
            ..NodeState::default()
        };
        for (d, x) in n.dir.iter_mut().enumerate() {
            x.max_cfg = max[d];
            x.low_cfg = (cut(low[d].0, max[d].0), cut(low[d].1, max[d].1));
        }
        if n.has_low() {
            self.low_nodes.push(node);
            n.targets = self
                .targets
                .of(node, self.parent(node).map(|p| self.state(p)));
        } else if clamp && self.low_policy {
            n.clamp = true;
            n.tnode = true;
        }
        for d in 0..DIRS {
            let (bps, iops) = self.rates(&n, d);
            n.dir[d].lim = Limits::new(bps, iops, self.slice);
            n.dir[d].lim.reset(now);
        }
        n
    }

    /// A node's limits (bps, iops; 0 = none) in the current state. LOW:
    /// its low limits, or `min_bps`/`min_iops` when clamped. MAX: a node
    /// with a low limit may use `low + low / 2 * scale`, at most its max
    /// limit (`throtl_adjusted_limit`, `tg_bps_limit`); others their max
    /// limits.
    fn rates(&self, n: &NodeState, d: usize) -> (u64, u64) {
        let (low, max) = (n.dir[d].low_cfg, n.dir[d].max_cfg);
        match self.mode {
            Mode::Low if n.has_low() => low,
            Mode::Low if n.clamp => (self.min_bps, self.min_iops),
            Mode::Low => (0, 0),
            Mode::Max => {
                let scale = self.scale;
                let adj = |low: u64, max: u64| -> u64 {
                    if low == 0 || low == max {
                        return max;
                    }
                    let a = low.saturating_add((low / 2).saturating_mul(scale));
                    if max == 0 {
                        a
                    } else {
                        a.min(max)
                    }
                };
                (adj(low.0, max.0), adj(low.1, max.1))
            }
        }
    }

    /// Every node's limits follow the state and the scale (in place).
    fn apply_limits(&mut self, now: Time) {
        let slice = self.slice;
        for i in 0..self.fnodes.len() + self.gnodes.len() {
            let n = if i < self.fnodes.len() {
                &self.fnodes[i]
            } else {
                &self.gnodes[i - self.fnodes.len()]
            };
            let r = [self.rates(n, 0), self.rates(n, 1)];
            let n = if i < self.fnodes.len() {
                &mut self.fnodes[i]
            } else {
                &mut self.gnodes[i - self.fnodes.len()]
            };
            for (d, (bps, iops)) in n.dir.iter_mut().zip(r) {
                d.lim.set(bps, iops, slice, now);
            }
        }
        self.set_heap(now);
    }

    fn node(&mut self, n: Node) -> &mut NodeState {
        match n {
            Node::Flow(f) => &mut self.fnodes[f.index()],
            Node::Group(g) => &mut self.gnodes[g.index()],
        }
    }

    fn state(&self, node: Node) -> &NodeState {
        match node {
            Node::Flow(f) => &self.fnodes[f.index()],
            Node::Group(g) => &self.gnodes[g.index()],
        }
    }

    /// The group above `node`, if not the root.
    fn parent(&self, node: Node) -> Option<Node> {
        let p = match node {
            Node::Flow(f) => GroupId(self.flows[f.index()].group),
            Node::Group(g) => self
                .topo
                .group(g)
                .map(|e| e.parent)
                .unwrap_or(GroupId::ROOT),
        };
        (p != GroupId::ROOT).then_some(Node::Group(p))
    }

    /// The flow's lowest throttling group (the cgroup its requests are
    /// issued in), if any.
    fn home(&self, flow: u32) -> Option<Node> {
        let f = Node::Flow(FlowId(flow));
        if self.state(f).tnode {
            Some(f)
        } else {
            self.parent(f)
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

    /// When the flow's head request may pass; marks the nodes that hold it
    /// back.
    fn ready_at(&mut self, f: u32, now: Time) -> Option<Time> {
        let &h = self.flows[f as usize].queue.front()?;
        let s = self.table.slot(h);
        let bytes = u64::from(s.req.sectors) * SECTOR_BYTES;
        let (arrival, d) = (s.arrival, dir_of(s.req.op));
        let mut t = arrival;
        self.for_chain(f, |n| {
            let r = n.dir[d].lim.ready_at(now, bytes);
            if r > now {
                n.dir[d].queued = true;
            }
            t = t.max(r);
        });
        if t > now && self.tick > 1 {
            // released at the next timer tick (`disptime` in jiffies)
            t = t.div_ceil(self.tick).saturating_mul(self.tick);
        }
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
        self.apply_limits(now);
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

    /// Counts `node` as a child of its parent group (`delta` 1) or no
    /// longer (`delta` -1), for the leaf test.
    fn count_child(&mut self, node: Node, add: bool) {
        if let Some(Node::Group(p)) = self.parent(node) {
            let c = &mut self.gnodes[p.index()].children;
            *c = if add { *c + 1 } else { c.saturating_sub(1) };
        }
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
    fn set_device(&mut self, device: DeviceInfo) {
        self.rotational = device.rotational;
        if self.low_policy && !self.slice_set {
            self.slice = if device.rotational {
                SLICE_HD
            } else {
                SLICE_SSD
            };
        }
        self.base = low::Baseline::new(device.rotational);
    }
    fn add_group(&mut self, parent: GroupId, weight: u32) -> Result<GroupId, SchedError> {
        let g = self.topo.add_group(parent, weight, ())?;
        ensure(&mut self.gnodes, g.index());
        self.gnodes[g.index()] = self.make_node(Node::Group(g), false, 0);
        self.count_child(Node::Group(g), true);
        Ok(g)
    }
    fn remove_group(&mut self, group: GroupId) -> Result<(), SchedError> {
        let parent = self.parent(Node::Group(group));
        self.topo.remove_group(group)?;
        if let Some(Node::Group(p)) = parent {
            let c = &mut self.gnodes[p.index()].children;
            *c = c.saturating_sub(1);
        }
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
        check_time(now)?;
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
            .is_some_and(|c| c.iter().any(|&l| l != (0, 0)));
        let mut g = spec.group;
        while g != GroupId::ROOT && !has_low {
            has_low = self.gnodes[g.index()].has_low();
            g = self
                .topo
                .group(g)
                .map(|e| e.parent)
                .unwrap_or(GroupId::ROOT);
        }
        let n = self.make_node(Node::Flow(id), !has_low, now);
        let tnode = n.tnode;
        self.fnodes[id.index()] = n;
        if tnode {
            self.count_child(Node::Flow(id), true);
        }
        Ok(id)
    }
    fn remove_flow(&mut self, now: Time, flow: FlowId) -> Result<(), SchedError> {
        check_time(now)?;
        if self.topo.retire_flow(flow)? {
            self.forget_flow(flow);
        }
        Ok(())
    }
    fn add_request(&mut self, now: Time, req: Request) -> Result<(), SchedError> {
        check_time(now)?;
        let idx = self
            .table
            .admit(&mut self.topo, now, req, Extra { seq: self.seq + 1 })?;
        self.seq += 1;
        let f = req.flow.index() as u32;
        if self.low_policy {
            self.on_arrival(f, &req, now);
        }
        self.flows[f as usize].queue.push_back(idx);
        if !self.flows[f as usize].in_heap {
            self.push_flow(f, now);
        }
        Ok(())
    }
    fn dispatch(&mut self, now: Time) -> Dispatch {
        if let Some(d) = dispatch_past_end(now, self.queued()) {
            return d;
        }
        if self.low_policy {
            self.refresh_scale(now);
        }
        loop {
            let Some(&Reverse((t, seq, f))) = self.heap.peek() else {
                return if self.table.queued() == 0 {
                    Dispatch::Empty
                } else {
                    Dispatch::Wait
                };
            };
            if t > now {
                return Dispatch::Idle { until: t };
            }
            self.heap.pop();
            if self.low_policy && self.mode == Mode::Low && self.held(f) {
                // blk-throttle's pending timer releases a held request:
                // it first tries the upgrade (`throtl_pending_timer_fn`)
                if self.can_upgrade(None, now) {
                    self.upgrade(now);
                    continue;
                }
            }
            // Recompute: another flow may have used shared tokens.
            match self.ready_at(f, now) {
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
            let req = self.table.slot(idx).req;
            let (bytes, d) = (u64::from(req.sectors) * SECTOR_BYTES, dir_of(req.op));
            self.for_chain(f, |n| {
                let x = &mut n.dir[d];
                x.lim.charge(bytes);
                x.queued = false;
                x.bytes += bytes;
                x.ios += 1;
            });
            let r = self.table.dispatch(now, idx);
            self.push_flow(f, now);
            return Dispatch::Request(r);
        }
    }
    fn complete(&mut self, now: Time, id: ReqId) -> Result<(), SchedError> {
        check_time(now)?;
        let slot = self.table.complete(id)?;
        if self.low_policy {
            self.on_completion(&slot.req, slot.arrival, slot.dispatched_at, now);
        }
        if self.topo.release(slot.req.flow) {
            self.forget_flow(slot.req.flow);
        }
        Ok(())
    }
}

impl Throttle {
    /// The flow's head request is held back by a limit on its way up.
    fn held(&self, f: u32) -> bool {
        let Some(&h) = self.flows[f as usize].queue.front() else {
            return false;
        };
        let d = dir_of(self.table.slot(h).req.op);
        let mut cur = Some(Node::Flow(FlowId(f)));
        while let Some(n) = cur {
            if self.state(n).dir[d].queued {
                return true;
            }
            cur = self.parent(n);
        }
        false
    }

    /// A retired flow with nothing left: no longer a node with a low
    /// limit, nor a child of its group.
    fn forget_flow(&mut self, flow: FlowId) {
        self.low_nodes.retain(|n| *n != Node::Flow(flow));
        if self.fnodes[flow.index()].tnode {
            self.fnodes[flow.index()].tnode = false;
            self.count_child(Node::Flow(flow), false);
        }
    }
}

#[cfg(test)]
mod tests;
