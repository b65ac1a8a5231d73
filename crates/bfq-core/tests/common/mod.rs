//! A minimal test driver for schedulers: an event loop with a device whose
//! service time depends on request size and seek distance, and flows that
//! are either asynchronous (keep `depth` requests outstanding) or
//! synchronous (one at a time, next issued `think` after completion, or
//! in bursts: `burst` back to back, then `pause`).
//! Deterministic: randomness comes from a seeded xorshift. This is a test
//! harness, not the simulator (crates/bfq-sim).
#![allow(dead_code)]

use bfq_core::fluid::Served;
use bfq_core::*;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

#[derive(Clone, Copy, Debug)]
pub struct Dev {
    pub depth: u32,
    pub per_req: Time,
    pub per_sector: Time,
    /// Extra cost when a request does not start where the last one ended.
    pub seek: Time,
    /// Parallel device (flash-like, internal queueing): up to `depth`
    /// requests are served at once, each taking its own cost.
    pub parallel: bool,
    pub rotational: bool,
}

impl Default for Dev {
    fn default() -> Self {
        Dev {
            depth: 1,
            per_req: 20 * US,
            per_sector: 20,
            seek: 2 * MS,
            parallel: false,
            rotational: true,
        }
    }
}

/// A 100 MB/s disk: 5 us per sector, 100 us per request, 2 ms per seek.
pub fn disk() -> Dev {
    Dev {
        per_req: 100 * US,
        per_sector: 5 * US,
        seek: 2 * MS,
        ..Dev::default()
    }
}

/// A flash-like device serving 8 requests at once.
pub fn flash() -> Dev {
    Dev {
        depth: 8,
        per_req: 200 * US,
        per_sector: 500,
        seek: 0,
        parallel: true,
        rotational: false,
    }
}

#[derive(Clone, Copy, Debug)]
pub enum Kind {
    Async {
        depth: u32,
    },
    /// Synchronous (O_DIRECT through io_uring or AIO, flagged sync as Linux
    /// flags them), `depth` requests outstanding, each issued again as
    /// one completes.
    Direct {
        depth: u32,
    },
    Sync {
        think: Time,
    },
    /// Synchronous, `burst` requests back to back (each issued when the
    /// one before completes), then `pause` before the next burst.
    Bursts {
        burst: u32,
        pause: Time,
    },
}

#[derive(Clone, Copy, Debug)]
pub struct FlowDef {
    pub spec: FlowSpec,
    pub kind: Kind,
    pub size: u32,
    pub seq: bool,
    pub start: Time,
    /// Stop issuing new requests at this time.
    pub stop: Time,
    /// Region start sector.
    pub base: u64,
    /// Distance between consecutive sequential requests (0: `size`).
    pub stride: u64,
    pub op: Op,
    /// Stop after issuing this many sectors (0: never).
    pub limit: u64,
}

impl FlowDef {
    pub fn new(weight: u32, kind: Kind) -> Self {
        FlowDef {
            spec: FlowSpec::with_weight(weight),
            kind,
            size: 64,
            seq: true,
            start: 0,
            stop: Time::MAX,
            base: 0,
            stride: 0,
            op: Op::Read,
            limit: 0,
        }
    }
}

#[derive(Default, Debug)]
pub struct RunLog {
    pub served: Vec<Served>,
    pub per_flow: Vec<u64>,
    /// Backlogged periods per flow (held > 0), merged when gaps are short.
    pub backlog: Vec<Vec<(Time, Time)>>,
    pub dispatched_ids: BTreeSet<u64>,
    pub completed_ids: BTreeSet<u64>,
    pub issued: u64,
    pub flows: Vec<FlowId>,
    pub end: Time,
    /// Issue-to-completion time of each request, per flow.
    pub latency: Vec<Vec<Time>>,
    /// When a flow with a `limit` completed its last sector.
    pub done_at: Vec<Option<Time>>,
    /// Most requests in flight at once.
    pub max_in_flight: u32,
    /// Dispatches that started where the previous one ended.
    pub contiguous: u64,
    pub dispatches: u64,
}

#[derive(PartialEq, Eq, PartialOrd, Ord, Clone, Copy, Debug)]
enum Ev {
    Issue(usize),
    Complete(u64),
    Timer,
}

pub struct Rng(u64);
impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

pub fn run(s: &mut dyn Scheduler, dev: Dev, defs: &[FlowDef], until: Time, seed: u64) -> RunLog {
    run_with(s, dev, defs, until, seed, |_, _| {})
}

/// Runs until `until` (no new events after it; in-flight work drains).
pub fn run_with<S: Scheduler + ?Sized>(
    s: &mut S,
    dev: Dev,
    defs: &[FlowDef],
    until: Time,
    seed: u64,
    mut on_dispatch: impl FnMut(&S, &Request),
) -> RunLog {
    s.set_device(DeviceInfo {
        queue_depth: dev.depth,
        queues_internally: dev.depth > 1,
        rotational: dev.rotational,
    });
    let mut h = Harness::new(dev, defs, until, seed);
    h.add_flows(s);
    loop {
        h.fill(s, &mut on_dispatch);
        let Some(Reverse((t, _, e))) = h.ev.pop() else {
            break;
        };
        h.now = t;
        match e {
            Ev::Timer => {}
            Ev::Issue(i) => h.issue(s, i),
            Ev::Complete(id) => h.complete(s, id),
        }
    }
    h.finish()
}

/// A run's state: the events (time, sequence number, event), the log,
/// each flow's next position, requests held (and since when) and sectors
/// issued and done, and the device's head, busy-until time and requests
/// in flight.
struct Harness<'a> {
    dev: Dev,
    defs: &'a [FlowDef],
    until: Time,
    rng: Rng,
    log: RunLog,
    ev: BinaryHeap<Reverse<(Time, u64, Ev)>>,
    seq: u64,
    pos: Vec<u64>,
    held: Vec<u32>,
    since: Vec<Time>,
    reqflow: BTreeMap<u64, usize>,
    issued_at: BTreeMap<u64, Time>,
    issued_sectors: Vec<u64>,
    done_sectors: Vec<u64>,
    next_id: u64,
    dev_free: Time,
    head: u64,
    now: Time,
    in_flight: u32,
}

impl<'a> Harness<'a> {
    /// A run of `defs` on `dev` until `until`, nothing issued yet.
    fn new(dev: Dev, defs: &'a [FlowDef], until: Time, seed: u64) -> Self {
        let n = defs.len();
        let log = RunLog {
            latency: vec![vec![]; n],
            done_at: vec![None; n],
            per_flow: vec![0; n],
            backlog: vec![vec![]; n],
            ..RunLog::default()
        };
        Harness {
            dev,
            defs,
            until,
            rng: Rng::new(seed),
            log,
            ev: BinaryHeap::new(),
            seq: 0,
            pos: vec![0; n],
            held: vec![0; n],
            since: vec![0; n],
            reqflow: BTreeMap::new(),
            issued_at: BTreeMap::new(),
            issued_sectors: vec![0; n],
            done_sectors: vec![0; n],
            next_id: 1,
            dev_free: 0,
            head: 0,
            now: 0,
            in_flight: 0,
        }
    }

    /// Queues event `e` at time `t` (after the events already queued at `t`).
    fn push(&mut self, t: Time, e: Ev) {
        self.seq += 1;
        self.ev.push(Reverse((t, self.seq, e)));
    }

    /// Adds the flows to the scheduler and queues their first issues (one
    /// per request a flow keeps outstanding) at their start times.
    fn add_flows<S: Scheduler + ?Sized>(&mut self, s: &mut S) {
        for (i, d) in self.defs.iter().enumerate() {
            self.log.flows.push(s.add_flow(0, d.spec).expect("flow"));
            self.pos[i] = d.base;
            let n = match d.kind {
                Kind::Async { depth } | Kind::Direct { depth } => depth,
                Kind::Sync { .. } | Kind::Bursts { .. } => 1,
            };
            for _ in 0..n {
                self.push(d.start, Ev::Issue(i));
            }
        }
    }

    /// Lets the scheduler fill the device.
    fn fill<S: Scheduler + ?Sized>(
        &mut self,
        s: &mut S,
        on_dispatch: &mut impl FnMut(&S, &Request),
    ) {
        while self.in_flight < self.dev.depth {
            match s.dispatch(self.now) {
                Dispatch::Request(r) => {
                    on_dispatch(&*s, &r);
                    self.serve(&r);
                }
                Dispatch::Idle { until: t } => {
                    assert!(t > self.now, "idle until the past");
                    self.push(t, Ev::Timer);
                    break;
                }
                Dispatch::Wait | Dispatch::Empty => break,
            }
        }
    }

    /// Logs a dispatched request and queues its completion: its size's
    /// cost plus a seek unless it starts at the head, after the requests
    /// before it unless the device is parallel.
    fn serve(&mut self, r: &Request) {
        let log = &mut self.log;
        assert!(
            log.dispatched_ids.insert(r.id),
            "request {} dispatched twice",
            r.id
        );
        let f = self.reqflow[&r.id];
        log.served.push(Served {
            time: self.now,
            flow: f,
            sectors: u64::from(r.sectors),
        });
        log.per_flow[f] += u64::from(r.sectors);
        let dev = self.dev;
        let mut cost = dev.per_req + dev.per_sector * Time::from(r.sectors);
        log.dispatches += 1;
        if r.sector != self.head {
            cost += dev.seek;
        } else {
            log.contiguous += 1;
        }
        self.head = r.end();
        self.in_flight += 1;
        log.max_in_flight = log.max_in_flight.max(self.in_flight);
        let done = if dev.parallel {
            self.now + cost
        } else {
            self.dev_free = self.dev_free.max(self.now) + cost;
            self.dev_free
        };
        self.push(done, Ev::Complete(r.id));
    }

    /// Flow `i` issues its next request (at its position if sequential,
    /// anywhere if random), unless it stopped, the run ended or it issued
    /// its limit.
    fn issue<S: Scheduler + ?Sized>(&mut self, s: &mut S, i: usize) {
        let (d, now) = (&self.defs[i], self.now);
        if now >= d.stop || now >= self.until || (d.limit > 0 && self.issued_sectors[i] >= d.limit)
        {
            return;
        }
        self.issued_sectors[i] += u64::from(d.size);
        let sector = if d.seq {
            let p = self.pos[i];
            self.pos[i] += if d.stride > 0 {
                d.stride
            } else {
                u64::from(d.size)
            };
            p
        } else {
            d.base + (self.rng.next() % 1_000_000) * 8
        };
        let sync = !matches!(d.kind, Kind::Async { .. });
        let id = self.next_id;
        let r = Request {
            id,
            flow: self.log.flows[i],
            sector,
            sectors: d.size,
            op: d.op,
            sync,
        };
        self.reqflow.insert(id, i);
        self.issued_at.insert(id, now);
        self.next_id += 1;
        s.add_request(now, r).expect("add");
        self.log.issued += 1;
        if self.held[i] == 0 {
            self.since[i] = now;
        }
        self.held[i] += 1;
    }

    /// Completes request `id`: logs its latency, the flow's end (when it
    /// reached its limit) and backlogged time, and queues the flow's next
    /// issue (after its think time if synchronous, after its pause at the
    /// end of a burst).
    fn complete<S: Scheduler + ?Sized>(&mut self, s: &mut S, id: u64) {
        let now = self.now;
        s.complete(now, id).expect("complete");
        let log = &mut self.log;
        assert!(log.completed_ids.insert(id));
        self.in_flight -= 1;
        let i = self.reqflow[&id];
        let d = &self.defs[i];
        log.latency[i].push(now - self.issued_at[&id]);
        self.done_sectors[i] += u64::from(d.size);
        if d.limit > 0 && self.done_sectors[i] >= d.limit && log.done_at[i].is_none() {
            log.done_at[i] = Some(now);
        }
        self.held[i] -= 1;
        if self.held[i] == 0 {
            let b = &mut log.backlog[i];
            // Quasi-backlogged: merge gaps shorter than T_wait.
            match b.last_mut() {
                Some(last) if self.since[i] <= last.1 + 8 * MS => last.1 = now,
                _ => b.push((self.since[i], now)),
            }
        }
        let think = match d.kind {
            Kind::Sync { think } => think,
            Kind::Bursts { burst, pause } => {
                let done = self.done_sectors[i] / u64::from(d.size);
                if done.is_multiple_of(u64::from(burst.max(1))) {
                    pause
                } else {
                    0
                }
            }
            Kind::Async { .. } | Kind::Direct { .. } => 0,
        };
        self.push(now + think, Ev::Issue(i));
    }

    /// Closes the backlogged periods still open and returns the log.
    fn finish(mut self) -> RunLog {
        for i in 0..self.defs.len() {
            if self.held[i] > 0 {
                self.log.backlog[i].push((self.since[i], self.now));
            }
        }
        self.log.end = self.now;
        self.log
    }
}

/// BFQ profile `name` with settings `kv`.
pub fn profile(name: &str, kv: &[(&str, &str)]) -> Bfq {
    Bfq::from_profile(name, &Settings::from_pairs(kv.iter().copied())).unwrap()
}

/// A greedy sync sequential reader of 32 KiB with `spec`, from sector `base`.
pub fn sync_reader(spec: FlowSpec, base: u64) -> FlowDef {
    let mut d = FlowDef::new(100, Kind::Sync { think: 0 });
    d.spec = spec;
    d.base = base;
    d
}

/// Greedy sync readers of 64 KiB with these weights, each in a region of
/// its own.
pub fn greedy_readers(weights: &[u32]) -> Vec<FlowDef> {
    weights
        .iter()
        .enumerate()
        .map(|(i, &w)| {
            let mut d = sync_reader(FlowSpec::with_weight(w), i as u64 * 100_000_000);
            d.size = 128;
            d
        })
        .collect()
}
