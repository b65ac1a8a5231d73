//! `bfq bench-core`: CPU nanoseconds per request (add + dispatch +
//! complete) in steady state, for BFQ and the FIFO policy through the same
//! interface, at each number of backlogged flows, side by side in one run.
//! Also counts heap allocations per request on that path. With
//! `--blocking`, flows instead issue one request at a time and their
//! queues empty between requests, as threads waiting for each request
//! through the engine; `--threads` has threads take turns at the one
//! scheduler behind a mutex, as the engine's threads at its core's lock.

use crate::alloc_count;
use bfq_core::{DeviceInfo, Dispatch, FlowSpec, Op, Request, Scheduler, Settings, Time, US};
use clap::Args as ClapArgs;
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::Instant;

#[derive(ClapArgs)]
pub struct Args {
    /// Numbers of flows to measure, backlogged (or waiting for each
    /// request with `--blocking`) (repeatable; default 1, 100, 1000,
    /// 10000).
    #[arg(long = "flows")]
    pub flows: Vec<u32>,
    /// Schedulers to measure (repeatable; default bfq and fifo).
    #[arg(long = "scheduler")]
    pub schedulers: Vec<String>,
    /// Requests kept queued per flow (flows x queued at most 16777216).
    #[arg(long, default_value_t = 2)]
    pub queued: u32,
    /// Flows that wait for each request: every flow has one read at a time
    /// and issues the next once it completed, with a dispatch in between
    /// (the engine asks for one after each completion), so its queue
    /// empties and, unless BFQ idles for it, every request is a turn of
    /// its own. The device is told it is non-rotational with a queue of
    /// 64 (`bfq bench-engine nop`'s default). `--queued` does not apply;
    /// with `--random` each flow reads random sectors (seeky, as the
    /// engine's `randread` flows) instead of a sequential stream.
    #[arg(long, conflicts_with = "queued")]
    pub blocking: bool,
    /// With `--blocking`: the reads are asynchronous (as `bfq bench-engine
    /// nop`'s flows), never idled for; default synchronous (as a thread's
    /// blocking reads: BFQ idles for a lone one).
    #[arg(long = "async", requires = "blocking")]
    pub async_reads: bool,
    /// With `--blocking`: threads (1-64) that take turns driving the one
    /// scheduler behind a mutex, each `--batch` request cycles at a time
    /// in strict rotation, so that the scheduler's state moves between
    /// CPUs' caches as in the engine, where every flow's thread takes the
    /// core's lock itself. The figure is wall time per request, the
    /// hand-overs included; `held ns` is the time inside the lock alone
    /// (with the timing of each batch, some 20-25 ns per batch). With 1,
    /// the baseline: the same batches and timing in one thread. More
    /// threads than CPUs measure the kernel's scheduling of them.
    #[arg(long, requires = "blocking")]
    pub threads: Option<u32>,
    /// With `--threads`: request cycles a thread runs before handing the
    /// scheduler over (1-1000000); `--requests` is rounded up to whole
    /// batches.
    #[arg(long, default_value_t = 2, requires = "threads")]
    pub batch: u64,
    /// Random sectors instead of sequential streams (deep random queues
    /// exercise the per-flow sorted order; with `--blocking`, seeky flows:
    /// the same sectors in every run, drawn from the request counter).
    #[arg(long)]
    pub random: bool,
    /// Each new request takes the id of the request that just completed,
    /// as in the engine, which numbers requests by its slots (ids stay
    /// below the number of requests held); default: a counter.
    #[arg(long)]
    pub reuse_ids: bool,
    /// Requests measured per configuration.
    #[arg(long, default_value_t = 2_000_000)]
    pub requests: u64,
    /// Scheduler setting key=value (repeatable), e.g. `--set max_budget=64`
    /// to switch flows every few requests and stress B-WF2Q+ selection.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Row {
    scheduler: String,
    flows: u32,
    ns_per_request: f64,
    allocs_per_request: f64,
    /// With `--threads`: ns per request inside the lock.
    #[serde(skip_serializing_if = "Option::is_none")]
    held_ns_per_request: Option<f64>,
}

#[derive(Serialize)]
struct Report {
    results: Vec<Row>,
}

/// Where each new request goes: after the one just served, or anywhere;
/// and its id: the next of a counter, or the one just completed.
#[derive(Clone, Copy)]
struct Placement {
    random: bool,
    reuse_ids: bool,
}

impl Placement {
    fn sector(self, id: u64, after: u64) -> u64 {
        if self.random {
            // A fixed odd multiplier scatters ids over 2^34 sectors (8 TiB),
            // 4 KiB-aligned.
            (id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 33) << 3
        } else {
            after
        }
    }
}

/// Runs `n` add+dispatch+complete cycles; returns (ns, allocations).
fn cycles(
    s: &mut dyn Scheduler,
    place: Placement,
    next_id: &mut u64,
    now: &mut Time,
    n: u64,
) -> (f64, u64) {
    timed(|| {
        for _ in 0..n {
            cycle(s, place, next_id, now);
        }
    })
}

/// One add+dispatch+complete cycle of a backlogged flow.
fn cycle(s: &mut dyn Scheduler, place: Placement, next_id: &mut u64, now: &mut Time) {
    *now += US;
    let Dispatch::Request(r) = s.dispatch(*now) else {
        panic!("backlogged scheduler dispatched nothing")
    };
    s.complete(*now, r.id).expect("complete");
    let req = Request {
        id: if place.reuse_ids { r.id } else { *next_id },
        flow: r.flow,
        sector: place.sector(*next_id, r.end() + 8),
        sectors: 8,
        op: Op::Write,
        sync: false,
    };
    *next_id += 1;
    s.add_request(*now, req).expect("add");
}

/// Runs `work` once; returns (ns, heap allocations) it took.
fn timed(work: impl FnOnce()) -> (f64, u64) {
    let a0 = alloc_count();
    let t0 = Instant::now();
    work();
    let ns = t0.elapsed().as_nanos() as f64;
    (ns, alloc_count() - a0)
}

/// `--blocking`'s device: non-rotational, queueing, 64 deep.
const BLOCKING_DEVICE: DeviceInfo = DeviceInfo {
    queue_depth: 64,
    queues_internally: true,
    rotational: false,
};

/// Flows that wait for each request (`--blocking`): the device's
/// requests in dispatch order, completed oldest first.
struct Blocking {
    sync: bool,
    /// Where a flow's next request goes, and whether it takes the id of
    /// the one that completed.
    place: Placement,
    device: VecDeque<Request>,
}

impl Blocking {
    /// Dispatches until the scheduler has nothing to send; the idle
    /// deadline if it idles.
    fn drain(&mut self, s: &mut dyn Scheduler, now: Time) -> Option<Time> {
        loop {
            match s.dispatch(now) {
                Dispatch::Request(r) => self.device.push_back(r),
                Dispatch::Idle { until } => return Some(until),
                _ => return None,
            }
        }
    }

    /// A read of `flow` at `sector`, sync or not as the mode says.
    fn next(&self, id: u64, flow: bfq_core::FlowId, sector: u64) -> Request {
        Request {
            id,
            flow,
            sector,
            sectors: 8,
            op: Op::Read,
            sync: self.sync,
        }
    }

    /// Runs `n` complete+dispatch+add+dispatch cycles (the oldest request
    /// on the device completes, its flow issues its next one); returns
    /// (ns, allocations).
    fn cycles(
        &mut self,
        s: &mut dyn Scheduler,
        next_id: &mut u64,
        now: &mut Time,
        n: u64,
    ) -> (f64, u64) {
        timed(|| {
            for _ in 0..n {
                self.cycle(s, next_id, now);
            }
        })
    }

    /// The oldest request on the device completes, its flow issues its
    /// next one, and the scheduler dispatches (moving the time on to an
    /// idle deadline while nothing is on the device).
    fn cycle(&mut self, s: &mut dyn Scheduler, next_id: &mut u64, now: &mut Time) {
        *now += US;
        let done = self.device.pop_front().expect("a request on the device");
        s.complete(*now, done.id).expect("complete");
        self.drain(s, *now);
        let id = if self.place.reuse_ids {
            done.id
        } else {
            *next_id
        };
        let sector = self.place.sector(*next_id, done.end());
        let req = self.next(id, done.flow, sector);
        *next_id += 1;
        s.add_request(*now, req).expect("add");
        let mut idle = self.drain(s, *now);
        // Idling with requests of others queued and none on the
        // device: the time moves on to the deadline.
        while self.device.is_empty() {
            *now = idle
                .expect("a scheduler with queued requests dispatched nothing")
                .max(*now);
            idle = self.drain(s, *now);
        }
    }
}

/// `--blocking`'s start: scheduler `name` with `nflows` flows, each with
/// its first read on the device (ids `0..nflows`).
fn start_blocking(
    name: &str,
    settings: &Settings,
    nflows: u32,
    sync: bool,
) -> anyhow::Result<(Box<dyn Scheduler>, Blocking)> {
    let mut s = bfq_schedulers::build(name, settings)?;
    s.set_device(BLOCKING_DEVICE);
    let mut b = Blocking {
        sync,
        place: Placement {
            random: false,
            reuse_ids: false,
        },
        device: VecDeque::with_capacity(nflows as usize),
    };
    for i in 0..nflows {
        let f = s.add_flow(0, FlowSpec::with_weight(100))?;
        let req = b.next(u64::from(i), f, u64::from(i) << 32);
        s.add_request(0, req)?;
        b.drain(s.as_mut(), 0);
    }
    anyhow::ensure!(!b.device.is_empty(), "{name} dispatched nothing");
    Ok((s, b))
}

/// `--blocking`: `nflows` flows each with one read on the device.
fn measure_blocking(
    name: &str,
    settings: &Settings,
    nflows: u32,
    (sync, place): (bool, Placement),
    requests: u64,
) -> anyhow::Result<Row> {
    let (mut s, mut b) = start_blocking(name, settings, nflows, sync)?;
    b.place = place;
    let (mut next_id, mut now) = (u64::from(nflows), 0);
    let warm = (requests / 4).max(u64::from(nflows) * 8);
    b.cycles(s.as_mut(), &mut next_id, &mut now, warm);
    let (ns, allocs) = b.cycles(s.as_mut(), &mut next_id, &mut now, requests);
    Ok(Row {
        scheduler: name.to_string(),
        flows: nflows,
        ns_per_request: ns / requests as f64,
        allocs_per_request: allocs as f64 / requests as f64,
        held_ns_per_request: None,
    })
}

/// `--threads`: the scheduler, its device and its clock, taken in turns,
/// with who held it last and when the measured batches began and ended.
struct Shared {
    s: Box<dyn Scheduler>,
    b: Blocking,
    next_id: u64,
    now: Time,
    /// The thread that ran the last batch, and how many batches ran on
    /// another thread than the batch before (every one but the first in
    /// strict rotation with two threads or more).
    holder: u64,
    handovers: u64,
    span: Option<(Instant, Instant)>,
}

impl Shared {
    /// The scheduler and its device at time 0, behind the bench's mutex;
    /// request ids continue from `next_id`.
    fn new(s: Box<dyn Scheduler>, b: Blocking, next_id: u64) -> Mutex<Shared> {
        Mutex::new(Shared {
            s,
            b,
            next_id,
            now: 0,
            holder: 0,
            handovers: 0,
            span: None,
        })
    }
}

/// The turn counter's value once a thread has panicked: the others stop.
const ABANDONED: u64 = u64::MAX;

/// Marks the turns abandoned if its thread unwinds, so that no other
/// thread waits for a batch that will never run.
struct AbandonOnPanic<'a>(&'a AtomicU64);

impl Drop for AbandonOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(ABANDONED, Ordering::Release);
        }
    }
}

/// Waits until batch `mine` is the next to run (true) or the turns were
/// abandoned (false): spins, yielding the CPU after a while (the thread
/// before may be waiting for one).
fn wait_for(next: &AtomicU64, mine: u64) -> bool {
    let mut spins = 0u32;
    loop {
        match next.load(Ordering::Acquire) {
            n if n == mine => return true,
            ABANDONED => return false,
            _ => {}
        }
        spins += 1;
        if spins < 1000 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// Runs batch `mine` of `batch` cycles under the lock as thread `me`,
/// noting a hand-over and the measured span; returns (ns held, allocations).
fn run_batch(shared: &Mutex<Shared>, me: u64, mine: u64, batch: u64) -> (f64, u64) {
    let mut g = shared.lock().expect("bench lock");
    let sh = &mut *g;
    let start = Instant::now();
    let (ns, allocs) =
        sh.b.cycles(sh.s.as_mut(), &mut sh.next_id, &mut sh.now, batch);
    if mine > 0 && sh.holder != me {
        sh.handovers += 1;
    }
    sh.holder = me;
    let first = sh.span.map_or(start, |x| x.0);
    sh.span = Some((if mine == 0 { start } else { first }, Instant::now()));
    (ns, allocs)
}

/// Runs `batches` batches of `batch` cycles on `threads` threads in
/// strict rotation (thread i runs batches i, i + threads, ...), each
/// under the mutex, every thread started before the first batch; returns
/// (wall ns from the first batch's start to the last one's end, ns
/// inside the lock, allocations).
fn take_turns(shared: &Mutex<Shared>, threads: u32, batch: u64, batches: u64) -> (f64, f64, u64) {
    {
        let mut sh = shared.lock().expect("bench lock");
        (sh.handovers, sh.span) = (0, None);
    }
    let next = AtomicU64::new(0);
    let ready = Barrier::new(threads as usize);
    let sums: Vec<(f64, u64)> = std::thread::scope(|sc| {
        let handles: Vec<_> = (0..u64::from(threads))
            .map(|me| {
                let (next, ready) = (&next, &ready);
                sc.spawn(move || {
                    let _abandon = AbandonOnPanic(next);
                    ready.wait();
                    let (mut held, mut allocs) = (0.0, 0);
                    for mine in (me..batches).step_by(threads as usize) {
                        if !wait_for(next, mine) {
                            break;
                        }
                        let (ns, a) = run_batch(shared, me, mine, batch);
                        next.store(mine + 1, Ordering::Release);
                        held += ns;
                        allocs += a;
                    }
                    (held, allocs)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("bench thread"))
            .collect()
    });
    let sh = shared.lock().expect("bench lock");
    let wall = sh.span.map_or(0.0, |(a, b)| (b - a).as_nanos() as f64);
    let held = sums.iter().map(|x| x.0).sum();
    (wall, held, sums.iter().map(|x| x.1).sum())
}

/// `--blocking --threads`: as [`measure_blocking`], with `threads`
/// threads taking turns at the scheduler, `batch` cycles each.
fn measure_threads(
    name: &str,
    settings: &Settings,
    nflows: u32,
    (sync, place): (bool, Placement),
    requests: u64,
    (threads, batch): (u32, u64),
) -> anyhow::Result<Row> {
    let (s, mut b) = start_blocking(name, settings, nflows, sync)?;
    b.place = place;
    let shared = Shared::new(s, b, u64::from(nflows));
    let warm = (requests / 4).max(u64::from(nflows) * 8);
    take_turns(&shared, threads, batch, warm.div_ceil(batch));
    let batches = requests.div_ceil(batch);
    let (wall, held, allocs) = take_turns(&shared, threads, batch, batches);
    let n = (batches * batch) as f64;
    Ok(Row {
        scheduler: name.to_string(),
        flows: nflows,
        ns_per_request: wall / n,
        allocs_per_request: allocs as f64 / n,
        held_ns_per_request: Some(held / n),
    })
}

fn measure(
    name: &str,
    settings: &Settings,
    nflows: u32,
    queued: u32,
    place: Placement,
    requests: u64,
) -> anyhow::Result<Row> {
    let mut s = bfq_schedulers::build(name, settings)?;
    let flows: Vec<_> = (0..nflows)
        .map(|i| s.add_flow(0, FlowSpec::with_weight(1 + i % 1000)))
        .collect::<Result<_, _>>()?;
    let mut next_id = 0u64;
    let mut now: Time = 0;
    for (i, &f) in flows.iter().enumerate() {
        for k in 0..u64::from(queued) {
            let req = Request {
                id: next_id,
                flow: f,
                sector: place.sector(next_id, i as u64 * 1_000_000 + k * 8),
                sectors: 8,
                op: Op::Write,
                sync: false,
            };
            next_id += 1;
            s.add_request(now, req)?;
        }
    }
    // Warm up: every flow served several times, capacities settled.
    let warm = (requests / 4).max(u64::from(nflows) * 8);
    cycles(s.as_mut(), place, &mut next_id, &mut now, warm);
    let (ns, allocs) = cycles(s.as_mut(), place, &mut next_id, &mut now, requests);
    Ok(Row {
        scheduler: name.to_string(),
        flows: nflows,
        ns_per_request: ns / requests as f64,
        allocs_per_request: allocs as f64 / requests as f64,
        held_ns_per_request: None,
    })
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let flows = if a.flows.is_empty() {
        vec![1, 100, 1000, 10000]
    } else {
        a.flows.clone()
    };
    let scheds = if a.schedulers.is_empty() {
        vec!["bfq".to_string(), "fifo".to_string()]
    } else {
        a.schedulers.clone()
    };
    check_counts(&a, &flows)?;
    let mut settings = Settings::new();
    crate::args::apply_sets(&mut settings, &a.set)?;
    // A bad name or setting is refused before any measurement (fifo takes
    // no settings: measure_all gives it none).
    for name in &scheds {
        let set = if name == "fifo" {
            &Settings::new()
        } else {
            &settings
        };
        crate::args::check_scheduler(name, set)?;
    }
    let results = measure_all(&a, &flows, &scheds, &settings)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&Report { results })?);
    } else {
        print_table(&results);
    }
    Ok(())
}

/// The most requests `bfq bench-core` queues at once (flows x
/// `--queued`; about 150 bytes each in bfq: some 2.5 GB).
const MAX_QUEUED_TOTAL: u64 = 1 << 24;

/// Refuses counts out of range before anything is measured, naming the
/// value and its range: `--requests`, each of `--flows` and `--queued`
/// positive, flows x queued at most [`MAX_QUEUED_TOTAL`] (each flow's
/// requests are queued at once), `--threads` 1-64, `--batch` 1-1000000.
fn check_counts(a: &Args, flows: &[u32]) -> anyhow::Result<()> {
    if a.requests == 0 {
        anyhow::bail!("--requests 0: must be positive");
    }
    if a.queued == 0 {
        anyhow::bail!("--queued 0: must be positive");
    }
    if flows.contains(&0) {
        anyhow::bail!("--flows 0: must be positive");
    }
    let most = u64::from(flows.iter().copied().max().unwrap_or(1));
    if !a.blocking && most * u64::from(a.queued) > MAX_QUEUED_TOTAL {
        anyhow::bail!(
            "--flows {most} x --queued {}: {} requests queued at once, more than the \
             {MAX_QUEUED_TOTAL} bench-core holds",
            a.queued,
            most * u64::from(a.queued)
        );
    }
    if let Some(t) = a.threads.filter(|t| !(1..=64).contains(t)) {
        anyhow::bail!("--threads {t}: must be 1-64");
    }
    if !(1..=1_000_000).contains(&a.batch) {
        anyhow::bail!("--batch {}: must be 1-1000000", a.batch);
    }
    Ok(())
}

/// Measures each scheduler at each number of flows (`settings` for the
/// schedulers that know them, not fifo); with `--json`, each row goes to
/// stderr as it is measured.
fn measure_all(
    a: &Args,
    flows: &[u32],
    scheds: &[String],
    settings: &Settings,
) -> anyhow::Result<Vec<Row>> {
    let place = Placement {
        random: a.random,
        reuse_ids: a.reuse_ids,
    };
    let no_settings = Settings::new();
    let mut results = vec![];
    for &n in flows {
        for name in scheds {
            // Settings apply to the schedulers that know them (BFQ).
            let set = if name == "fifo" {
                &no_settings
            } else {
                settings
            };
            let row = if let Some(threads) = a.threads {
                let mode = (!a.async_reads, place);
                measure_threads(name, set, n, mode, a.requests, (threads, a.batch))?
            } else if a.blocking {
                measure_blocking(name, set, n, (!a.async_reads, place), a.requests)?
            } else {
                measure(name, set, n, a.queued, place, a.requests)?
            };
            if a.json {
                eprintln!(
                    "{:<12} flows {:>6}: {:>8.1} ns/request, {:.4} allocations/request{}",
                    row.scheduler,
                    row.flows,
                    row.ns_per_request,
                    row.allocs_per_request,
                    row.held_ns_per_request
                        .map_or(String::new(), |h| format!(", {h:.1} ns held"))
                );
            }
            results.push(row);
        }
    }
    Ok(results)
}

/// The results as a table, each row also relative to fifo's at the same
/// number of flows (with `--threads`, also the time inside the lock).
fn print_table(results: &[Row]) {
    let held = results.iter().any(|r| r.held_ns_per_request.is_some());
    print!(
        "{:<12} {:>7} {:>14} {:>12} {:>10}",
        "scheduler", "flows", "ns/request", "allocs/req", "vs fifo"
    );
    println!("{}", if held { "   held ns" } else { "" });
    for r in results {
        let fifo = results
            .iter()
            .find(|x| x.scheduler == "fifo" && x.flows == r.flows)
            .map(|x| r.ns_per_request / x.ns_per_request);
        print!(
            "{:<12} {:>7} {:>14.1} {:>12.4} {:>10}",
            r.scheduler,
            r.flows,
            r.ns_per_request,
            r.allocs_per_request,
            fifo.map_or("-".into(), |x| format!("{x:.2}x"))
        );
        println!(
            "{}",
            r.held_ns_per_request
                .map_or(String::new(), |h| format!(" {h:>9.1}"))
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts out of range are refused naming the value, before anything
    /// is queued: 10000 flows x 10^8 queued requests would be 10^12
    /// requests, hundreds of terabytes. Fails with the product's check
    /// left out of `check_counts`.
    #[test]
    fn counts_out_of_range_are_refused_naming_them() {
        #[derive(clap::Parser)]
        struct W {
            #[command(flatten)]
            a: Args,
        }
        let check = |args: &[&str], flows: &[u32]| {
            let w = <W as clap::Parser>::try_parse_from([&["bfq"], args].concat()).unwrap();
            check_counts(&w.a, flows).map_err(|e| e.to_string())
        };
        assert_eq!(
            check(&["--queued", "100000000"], &[1, 10000]).unwrap_err(),
            "--flows 10000 x --queued 100000000: 1000000000000 requests queued at once, more \
             than the 16777216 bench-core holds"
        );
        check(&["--queued", "1677"], &[10000]).unwrap();
        assert!(check(&["--queued", "1678"], &[10000]).is_err());
        assert_eq!(
            check(&[], &[4, 0]).unwrap_err(),
            "--flows 0: must be positive"
        );
        let e = check(&["--blocking", "--threads", "2", "--batch", "0"], &[1]).unwrap_err();
        assert_eq!(e, "--batch 0: must be 1-1000000");
        let e = check(&["--blocking", "--threads", "65"], &[1]).unwrap_err();
        assert_eq!(e, "--threads 65: must be 1-64");
    }

    /// BFQ's turns in `n` requests of `--blocking` flows after a warm-up.
    fn turns(nflows: u32, sync: bool, n: u64) -> u64 {
        let (mut s, mut b) = start_blocking("bfq", &Settings::new(), nflows, sync).unwrap();
        let (mut next_id, mut now) = (u64::from(nflows), 0);
        b.cycles(s.as_mut(), &mut next_id, &mut now, 1000);
        let before = s.internals(now).turns.unwrap();
        b.cycles(s.as_mut(), &mut next_id, &mut now, n);
        s.internals(now).turns.unwrap() - before
    }

    /// `--threads`: the threads run every batch between them in strict
    /// rotation (every batch after the first on another thread than the
    /// one before), each cycle a turn of its own as in one thread.
    #[test]
    fn threads_take_turns_through_every_batch() {
        let (s, b) = start_blocking("bfq", &Settings::new(), 64, true).unwrap();
        let shared = Shared::new(s, b, 64);
        take_turns(&shared, 2, 3, 100);
        let sh = shared.into_inner().unwrap();
        let now = sh.now;
        assert_eq!(sh.handovers, 99);
        assert_eq!(sh.next_id, 64 + 300);
        assert_eq!(sh.s.internals(now).turns, Some(64 + 300));
        assert_eq!(sh.b.device.len(), 64);
    }

    /// A thread that panics ends the other threads' waits instead of
    /// leaving them waiting for its batch.
    #[test]
    fn a_panicking_thread_abandons_the_turns() {
        let next = AtomicU64::new(3);
        std::thread::scope(|sc| {
            let h = sc.spawn(|| {
                let _abandon = AbandonOnPanic(&next);
                panic!("a batch failed");
            });
            assert!(h.join().is_err());
        });
        assert!(!wait_for(&next, 4));
    }

    /// `--blocking` reproduces the engine's pattern: every request a turn
    /// of its own (asynchronous reads, or several synchronous readers on
    /// a queueing flash device), except for a lone synchronous reader,
    /// which BFQ idles for.
    #[test]
    fn blocking_flows_take_a_turn_per_request_unless_idled_for() {
        assert_eq!(turns(1, false, 500), 500);
        assert_eq!(turns(4, false, 500), 500);
        assert_eq!(turns(4, true, 500), 500);
        assert_eq!(turns(64, true, 500), 500);
        assert!(turns(1, true, 500) < 10);
    }

    /// The sectors `--blocking` flows read over `n` cycles.
    fn blocking_sectors(random: bool, n: u64) -> Vec<u64> {
        let (mut s, mut b) = start_blocking("fifo", &Settings::new(), 4, true).unwrap();
        b.place = Placement {
            random,
            reuse_ids: true,
        };
        let (mut next_id, mut now) = (4, 0);
        (0..n)
            .map(|_| {
                b.cycle(s.as_mut(), &mut next_id, &mut now);
                b.device.back().expect("a request on the device").sector
            })
            .collect()
    }

    /// `--blocking --random`: each flow's next read lands at a random
    /// sector (not after its last one), the same sectors in every run;
    /// without it, each flow reads on from where its last read ended.
    #[test]
    fn blocking_random_draws_the_same_random_sectors_every_run() {
        let random = blocking_sectors(true, 200);
        assert_eq!(random, blocking_sectors(true, 200));
        let mut distinct = random.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert!(distinct.len() > 190, "{} distinct sectors", distinct.len());
        // Four flows take turns on the device: a flow's reads are four
        // apart in the list.
        let follows = |v: &[u64]| v.windows(5).filter(|w| w[4] == w[0] + 8).count();
        assert!(follows(&random) < 5);
        assert_eq!(follows(&blocking_sectors(false, 200)), 196);
    }
}
