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
}

impl Default for Dev {
    fn default() -> Self {
        Dev {
            depth: 1,
            per_req: 20 * US,
            per_sector: 20,
            seek: 2 * MS,
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
pub fn run_with(
    s: &mut dyn Scheduler,
    dev: Dev,
    defs: &[FlowDef],
    until: Time,
    seed: u64,
    mut on_dispatch: impl FnMut(&dyn Scheduler, &Request),
) -> RunLog {
    s.set_device(DeviceInfo {
        queue_depth: dev.depth,
        queues_internally: dev.depth > 1,
        rotational: true,
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
                    if r.sector != head {
                        cost += dev.seek;
                    }
                    head = r.end();
                    dev_free = dev_free.max(now) + cost;
                    in_flight += 1;
                    push(&mut ev, dev_free, Ev::Complete(r.id));
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
                if now >= d.stop || now >= until {
                    continue;
                }
                let sector = if d.seq {
                    let p = pos[i];
                    pos[i] += u64::from(d.size);
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
                    op: Op::Read,
                    sync,
                };
                reqflow.insert(next_id, i);
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
