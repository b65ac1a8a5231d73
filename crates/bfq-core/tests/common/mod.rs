//! A minimal test driver for schedulers: an event loop with a device whose
//! service time depends on request size and seek distance, and flows that
//! are either asynchronous (keep `depth` requests outstanding) or
//! synchronous (one at a time, next issued `think` after completion).
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

#[derive(Clone, Copy, Debug)]
pub enum Kind {
    Async { depth: u32 },
    Sync { think: Time },
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
    let mut rng = Rng::new(seed);
    let mut log = RunLog::default();
    let mut ev: BinaryHeap<Reverse<(Time, u64, Ev)>> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut push = |ev: &mut BinaryHeap<Reverse<(Time, u64, Ev)>>, t: Time, e: Ev| {
        seq += 1;
        ev.push(Reverse((t, seq, e)));
    };
    let mut pos = vec![0u64; defs.len()];
    let mut held = vec![0u32; defs.len()];
    let mut since = vec![0 as Time; defs.len()];
    let mut reqflow: BTreeMap<u64, usize> = BTreeMap::new();
    let mut issued_at: BTreeMap<u64, Time> = BTreeMap::new();
    let mut issued_sectors = vec![0u64; defs.len()];
    let mut done_sectors = vec![0u64; defs.len()];
    log.latency = vec![vec![]; defs.len()];
    log.done_at = vec![None; defs.len()];
    log.per_flow = vec![0; defs.len()];
    log.backlog = vec![vec![]; defs.len()];
    for (i, d) in defs.iter().enumerate() {
        log.flows.push(s.add_flow(0, d.spec).expect("flow"));
        pos[i] = d.base;
        let n = match d.kind {
            Kind::Async { depth } => depth,
            Kind::Sync { .. } => 1,
        };
        for _ in 0..n {
            push(&mut ev, d.start, Ev::Issue(i));
        }
    }
    let mut next_id = 1u64;
    let mut dev_free: Time = 0;
    let mut head = 0u64;
    let mut now: Time = 0;
    let mut in_flight = 0u32;
    loop {
        // Let the scheduler fill the device.
        while in_flight < dev.depth {
            match s.dispatch(now) {
                Dispatch::Request(r) => {
                    on_dispatch(&*s, &r);
                    assert!(
                        log.dispatched_ids.insert(r.id),
                        "request {} dispatched twice",
                        r.id
                    );
                    let f = reqflow[&r.id];
                    log.served.push(Served {
                        time: now,
                        flow: f,
                        sectors: u64::from(r.sectors),
                    });
                    log.per_flow[f] += u64::from(r.sectors);
                    let mut cost = dev.per_req + dev.per_sector * Time::from(r.sectors);
                    log.dispatches += 1;
                    if r.sector != head {
                        cost += dev.seek;
                    } else {
                        log.contiguous += 1;
                    }
                    head = r.end();
                    in_flight += 1;
                    log.max_in_flight = log.max_in_flight.max(in_flight);
                    let done = if dev.parallel {
                        now + cost
                    } else {
                        dev_free = dev_free.max(now) + cost;
                        dev_free
                    };
                    push(&mut ev, done, Ev::Complete(r.id));
                }
                Dispatch::Idle { until: t } => {
                    assert!(t > now, "idle until the past");
                    push(&mut ev, t, Ev::Timer);
                    break;
                }
                Dispatch::Wait | Dispatch::Empty => break,
            }
        }
        let Some(Reverse((t, _, e))) = ev.pop() else {
            break;
        };
        now = t;
        match e {
            Ev::Timer => {}
            Ev::Issue(i) => {
                let d = &defs[i];
                if now >= d.stop || now >= until || (d.limit > 0 && issued_sectors[i] >= d.limit) {
                    continue;
                }
                issued_sectors[i] += u64::from(d.size);
                let sector = if d.seq {
                    let p = pos[i];
                    pos[i] += if d.stride > 0 {
                        d.stride
                    } else {
                        u64::from(d.size)
                    };
                    p
                } else {
                    d.base + (rng.next() % 1_000_000) * 8
                };
                let sync = matches!(d.kind, Kind::Sync { .. });
                let r = Request {
                    id: next_id,
                    flow: log.flows[i],
                    sector,
                    sectors: d.size,
                    op: d.op,
                    sync,
                };
                reqflow.insert(next_id, i);
                issued_at.insert(next_id, now);
                next_id += 1;
                s.add_request(now, r).expect("add");
                log.issued += 1;
                if held[i] == 0 {
                    since[i] = now;
                }
                held[i] += 1;
            }
            Ev::Complete(id) => {
                s.complete(now, id).expect("complete");
                assert!(log.completed_ids.insert(id));
                in_flight -= 1;
                let i = reqflow[&id];
                log.latency[i].push(now - issued_at[&id]);
                done_sectors[i] += u64::from(defs[i].size);
                if defs[i].limit > 0 && done_sectors[i] >= defs[i].limit && log.done_at[i].is_none()
                {
                    log.done_at[i] = Some(now);
                }
                held[i] -= 1;
                if held[i] == 0 {
                    let b = &mut log.backlog[i];
                    // Quasi-backlogged: merge gaps shorter than T_wait.
                    match b.last_mut() {
                        Some(last) if since[i] <= last.1 + 8 * MS => last.1 = now,
                        _ => b.push((since[i], now)),
                    }
                }
                let think = match defs[i].kind {
                    Kind::Sync { think } => think,
                    Kind::Async { .. } => 0,
                };
                push(&mut ev, now + think, Ev::Issue(i));
            }
        }
    }
    for i in 0..defs.len() {
        if held[i] > 0 {
            log.backlog[i].push((since[i], now));
        }
    }
    log.end = now;
    log
}
