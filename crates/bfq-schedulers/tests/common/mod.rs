//! A small deterministic test harness (not the project simulator, which
//! lives in `bfq-sim` and does not depend on this crate).
//!
//! [`Sim`] drives any `Box<dyn Scheduler>` with:
//! - a disk that serves one request at a time in dispatch order (up to
//!   `queue_depth` dispatched requests wait at the device, no internal
//!   reordering); a request's service time is a positioning cost (zero when
//!   it starts exactly where the head is, else a minimum seek plus a part
//!   proportional to the distance plus half a rotation) plus its transfer
//!   time at the zone's rate, which falls linearly from `outer_rate` at
//!   sector 0 to `inner_rate` at the last sector (ZBR);
//! - flows of two kinds: closed-loop ([`Kind::Closed`]: keep `depth`
//!   requests outstanding, issue the next `think` after a completion;
//!   greedy sync readers, async writers, readers with think time) and
//!   periodic ([`Kind::Periodic`]: one request every `period`).
//!
//! Everything is integer nanoseconds and a fixed event order, so runs are
//! exactly reproducible. The harness also checks the scheduler contract:
//! it never hands out a request it does not hold or twice, `Empty` only
//! when nothing is queued, and it never stalls (`Wait` with nothing in
//! flight).

#![allow(dead_code)]

use bfq_core::{
    DeviceInfo, Dispatch, FlowId, FlowSpec, GroupId, Op, Request, Scheduler, Time, MS, SEC,
    SECTOR_BYTES,
};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

/// A synchronous 4 KiB read.
pub fn read4k(id: u64, flow: FlowId, sector: u64) -> Request {
    Request {
        id,
        flow,
        sector,
        sectors: 8,
        op: Op::Read,
        sync: true,
    }
}

/// The simulated disk.
#[derive(Clone, Copy, Debug)]
pub struct Disk {
    /// Size in sectors.
    pub capacity: u64,
    /// Transfer rate at sector 0, bytes/s.
    pub outer_rate: u64,
    /// Transfer rate at the last sector, bytes/s.
    pub inner_rate: u64,
    /// Seek time for the shortest non-zero move.
    pub seek_min: Time,
    /// Seek time for a full stroke.
    pub seek_max: Time,
    /// Rotational latency added to every non-sequential access.
    pub rotation: Time,
    /// Requests the device accepts at once.
    pub queue_depth: u32,
}

impl Default for Disk {
    /// A 64 GiB disk, 60 MB/s outer, 36 MB/s inner (40% slower, as the
    /// 2010 paper's drive), 1-9 ms seeks, 4 ms half rotation, depth 1.
    fn default() -> Self {
        Disk {
            capacity: 1 << 27,
            outer_rate: 60_000_000,
            inner_rate: 36_000_000,
            seek_min: MS,
            seek_max: 9 * MS,
            rotation: 4 * MS,
            queue_depth: 1,
        }
    }
}

impl Disk {
    pub fn zone_rate(&self, sector: u64) -> u64 {
        let s = sector.min(self.capacity);
        self.outer_rate - (self.outer_rate - self.inner_rate) * s / self.capacity
    }

    pub fn service_time(&self, head: u64, r: &Request) -> Time {
        let pos = if r.sector == head {
            0
        } else {
            let dist = r.sector.abs_diff(head).min(self.capacity);
            self.seek_min + (self.seek_max - self.seek_min) * dist / self.capacity + self.rotation
        };
        let bytes = u64::from(r.sectors) * SECTOR_BYTES;
        pos + bytes * SEC / self.zone_rate(r.sector)
    }
}

/// Access pattern of a flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    Seq,
    Random,
}

/// What a flow does.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// Keeps `depth` requests outstanding; after each completion waits
    /// `think` and issues the next one.
    Closed { depth: u32, think: Time },
    /// Issues one request every `period`, whatever happens to the others.
    Periodic { period: Time },
}

/// One flow of the workload.
#[derive(Clone, Copy, Debug)]
pub struct FlowCfg {
    pub spec: FlowSpec,
    pub kind: Kind,
    pub op: Op,
    pub sync: bool,
    pub pattern: Pattern,
    /// First sector of the flow's area.
    pub start_sector: u64,
    /// Size of the area in sectors (random requests fall inside it;
    /// sequential ones wrap around in it).
    pub span: u64,
    pub req_sectors: u32,
    /// The flow issues requests from `start` until `stop`.
    pub start: Time,
    pub stop: Time,
}

impl FlowCfg {
    /// A greedy sequential sync reader at `start_sector` (64 KiB requests).
    pub fn seq_reader(start_sector: u64) -> Self {
        FlowCfg {
            spec: FlowSpec::default(),
            kind: Kind::Closed { depth: 1, think: 0 },
            op: Op::Read,
            sync: true,
            pattern: Pattern::Seq,
            start_sector,
            span: 1 << 22,
            req_sectors: 128,
            start: 0,
            stop: Time::MAX,
        }
    }

    /// A random sync reader of 4 KiB blocks in `[start_sector, +span)`.
    pub fn rand_reader(start_sector: u64, span: u64) -> Self {
        FlowCfg {
            pattern: Pattern::Random,
            span,
            req_sectors: 8,
            ..Self::seq_reader(start_sector)
        }
    }

    /// A greedy async sequential writer keeping `depth` requests queued.
    pub fn async_writer(start_sector: u64, depth: u32) -> Self {
        FlowCfg {
            kind: Kind::Closed { depth, think: 0 },
            op: Op::Write,
            sync: false,
            ..Self::seq_reader(start_sector)
        }
    }

    pub fn think(mut self, think: Time) -> Self {
        if let Kind::Closed { think: t, .. } = &mut self.kind {
            *t = think;
        }
        self
    }
    pub fn depth(mut self, depth: u32) -> Self {
        if let Kind::Closed { depth: d, .. } = &mut self.kind {
            *d = depth;
        }
        self
    }
    pub fn spec(mut self, spec: FlowSpec) -> Self {
        self.spec = spec;
        self
    }
    pub fn during(mut self, start: Time, stop: Time) -> Self {
        self.start = start;
        self.stop = stop;
        self
    }
    pub fn sectors(mut self, n: u32) -> Self {
        self.req_sectors = n;
        self
    }
}

/// What happened to one flow.
#[derive(Clone, Debug, Default)]
pub struct FlowStats {
    pub issued: u64,
    pub completed: u64,
    pub bytes: u64,
    /// Completion minus arrival, per completed request.
    pub latencies: Vec<Time>,
    /// Device time spent on the flow's requests.
    pub dev_time: Time,
}

impl FlowStats {
    pub fn mean_latency(&self) -> Time {
        if self.latencies.is_empty() {
            0
        } else {
            self.latencies.iter().sum::<Time>() / self.latencies.len() as Time
        }
    }
    pub fn max_latency(&self) -> Time {
        self.latencies.iter().copied().max().unwrap_or(0)
    }
    /// Bytes per second over `secs_ns` nanoseconds.
    pub fn bw(&self, over: Time) -> f64 {
        self.bytes as f64 * SEC as f64 / over as f64
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    DevDone,
    Timer,
    Arrive(usize),
}

struct FlowRt {
    cfg: FlowCfg,
    id: FlowId,
    next_seq: u64,
    rng: u64,
}

/// The event loop.
pub struct Sim {
    pub sched: Box<dyn Scheduler>,
    pub disk: Disk,
    pub now: Time,
    flows: Vec<FlowRt>,
    pub stats: Vec<FlowStats>,
    /// Every dispatch: (time, flow index, request).
    pub log: Vec<(Time, usize, Request)>,
    events: BinaryHeap<Reverse<(Time, u64, Ev)>>,
    ev_seq: u64,
    next_id: u64,
    /// id -> (flow index, arrival, dispatched)
    held: HashMap<u64, (usize, Time, bool)>,
    device: VecDeque<Request>,
    head: u64,
    timer_at: Option<Time>,
    started: bool,
}

impl Sim {
    pub fn new(mut sched: Box<dyn Scheduler>, disk: Disk) -> Self {
        sched.set_device(DeviceInfo {
            queue_depth: disk.queue_depth,
            queues_internally: false,
            rotational: true,
        });
        Sim {
            sched,
            disk,
            now: 0,
            flows: Vec::new(),
            stats: Vec::new(),
            log: Vec::new(),
            events: BinaryHeap::new(),
            ev_seq: 0,
            next_id: 1,
            held: HashMap::new(),
            device: VecDeque::new(),
            head: 0,
            timer_at: None,
            started: false,
        }
    }

    /// Builds scheduler `name` with `key=value` settings.
    pub fn with(name: &str, settings: &[(&str, &str)], disk: Disk) -> Self {
        let s = bfq_core::Settings::from_pairs(settings.iter().copied());
        Sim::new(bfq_schedulers::build(name, &s).expect("builds"), disk)
    }

    pub fn add_group(&mut self, parent: GroupId, weight: u32) -> GroupId {
        self.sched.add_group(parent, weight).expect("group")
    }

    /// Adds a flow; returns its index in [`Sim::stats`].
    pub fn add_flow(&mut self, cfg: FlowCfg) -> usize {
        let id = self.sched.add_flow(0, cfg.spec).expect("flow");
        let i = self.flows.len();
        self.flows.push(FlowRt {
            cfg,
            id,
            next_seq: 0,
            rng: 0x9E37_79B9_7F4A_7C15 ^ (i as u64 + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9),
        });
        self.stats.push(FlowStats::default());
        let n = match cfg.kind {
            Kind::Closed { depth, .. } => depth,
            Kind::Periodic { .. } => 1,
        };
        for _ in 0..n {
            self.push(cfg.start, Ev::Arrive(i));
        }
        i
    }

    pub fn flow_id(&self, i: usize) -> FlowId {
        self.flows[i].id
    }

    fn push(&mut self, t: Time, ev: Ev) {
        self.ev_seq += 1;
        self.events.push(Reverse((t, self.ev_seq, ev)));
    }

    fn new_request(&mut self, i: usize) -> Request {
        let f = &mut self.flows[i];
        let c = f.cfg;
        let slots = (c.span / u64::from(c.req_sectors)).max(1);
        let k = match c.pattern {
            Pattern::Seq => f.next_seq % slots,
            Pattern::Random => {
                f.rng = f
                    .rng
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (f.rng >> 17) % slots
            }
        };
        f.next_seq += 1;
        let id = self.next_id;
        self.next_id += 1;
        Request {
            id,
            flow: f.id,
            sector: c.start_sector + k * u64::from(c.req_sectors),
            sectors: c.req_sectors,
            op: c.op,
            sync: c.sync,
        }
    }

    /// Runs until `until` (ns). Can be called again to continue.
    pub fn run(&mut self, until: Time) {
        while let Some(&Reverse((t, _, ev))) = self.events.peek() {
            if t > until {
                break;
            }
            self.events.pop();
            self.now = t;
            match ev {
                Ev::Arrive(i) => {
                    let c = self.flows[i].cfg;
                    if t < c.stop {
                        let r = self.new_request(i);
                        self.sched.add_request(t, r).expect("add_request");
                        self.held.insert(r.id, (i, t, false));
                        self.stats[i].issued += 1;
                        if let Kind::Periodic { period } = c.kind {
                            self.push(t + period, Ev::Arrive(i));
                        }
                    }
                }
                Ev::Timer => {
                    if self.timer_at == Some(t) {
                        self.timer_at = None;
                    }
                }
                Ev::DevDone => self.finish_head(),
            }
            // Handle every event at this instant before asking the scheduler.
            if matches!(self.events.peek(), Some(Reverse((t2, _, _))) if *t2 == t) {
                continue;
            }
            self.kick();
        }
        self.now = until;
    }

    fn finish_head(&mut self) {
        let r = self.device.pop_front().expect("device busy");
        let now = self.now;
        self.sched.complete(now, r.id).expect("complete");
        let (i, arrival, _) = self.held.remove(&r.id).expect("held");
        let svc = self.disk.service_time(self.head, &r);
        self.head = r.end();
        let st = &mut self.stats[i];
        st.completed += 1;
        st.bytes += u64::from(r.sectors) * SECTOR_BYTES;
        st.latencies.push(now - arrival);
        st.dev_time += svc;
        if let Some(next) = self.device.front() {
            let t = now + self.disk.service_time(self.head, next);
            self.push(t, Ev::DevDone);
        }
        let c = self.flows[i].cfg;
        if let Kind::Closed { think, .. } = c.kind {
            self.push(now + think, Ev::Arrive(i));
        }
    }

    fn kick(&mut self) {
        while (self.device.len() as u32) < self.disk.queue_depth {
            match self.sched.dispatch(self.now) {
                Dispatch::Request(r) => {
                    let e = self
                        .held
                        .get_mut(&r.id)
                        .unwrap_or_else(|| panic!("dispatched unknown request {}", r.id));
                    assert!(!e.2, "request {} dispatched twice", r.id);
                    e.2 = true;
                    self.log.push((self.now, e.0, r));
                    if self.device.is_empty() {
                        let t = self.now + self.disk.service_time(self.head, &r);
                        self.push(t, Ev::DevDone);
                    }
                    self.device.push_back(r);
                }
                Dispatch::Idle { until } => {
                    let until = until.max(self.now + 1);
                    if self.timer_at.is_none_or(|t| t > until || t <= self.now) {
                        self.timer_at = Some(until);
                        self.push(until, Ev::Timer);
                    }
                    break;
                }
                Dispatch::Wait => {
                    assert!(
                        !self.device.is_empty() || self.sched.in_flight() > 0,
                        "{}: Wait with nothing in flight at {} (queued {})",
                        self.sched.name(),
                        self.now,
                        self.sched.queued()
                    );
                    break;
                }
                Dispatch::Empty => {
                    assert_eq!(
                        self.sched.queued(),
                        0,
                        "{}: Empty while holding requests",
                        self.sched.name()
                    );
                    break;
                }
            }
        }
    }

    /// Lengths of the runs of consecutive dispatches from one flow.
    pub fn run_lengths(&self) -> Vec<usize> {
        let mut out = Vec::new();
        let mut last = usize::MAX;
        for &(_, i, _) in &self.log {
            if i == last {
                *out.last_mut().unwrap() += 1;
            } else {
                out.push(1);
                last = i;
            }
        }
        out
    }

    /// Total bytes completed by all flows.
    pub fn total_bytes(&self) -> u64 {
        self.stats.iter().map(|s| s.bytes).sum()
    }
}
