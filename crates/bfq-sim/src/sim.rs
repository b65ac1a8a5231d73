//! The discrete-event loop and the workload generators.
//!
//! Events: flow wake-ups and periodic releases in a binary heap ordered by
//! (time, sequence number); the device's next internal event and the
//! scheduler's idle timer are kept beside it (a newer `Idle{until}`
//! replaces the older timer, so stale timers never fire). After every
//! event, `dispatch` is called while the device has a free slot.
//!
//! Workloads (docs/scenarios.md): greedy sync readers with OS-like
//! read-ahead, random readers, async readers/writers with a depth,
//! buffered writers through one system-wide flusher flow (async, as
//! Linux's writeback), ON/OFF flows, periodic soft real-time flows with
//! deadlines, replays (application start-ups, CSV and MSR traces), and the
//! 2010 paper's web-server processes (Section V-E); the DBMS workload
//! (Section V-F) is `pattern = "rand"` with `count` and `depth`.
//!
//! Determinism: one PCG stream per flow, seeded from the scenario seed and
//! the flow's index; no hash maps; no clock.

use crate::device::{self, DevRequest, Device};
use crate::readahead::ReadAhead;
use crate::replay::ReplayRow;
use crate::result::{secs, FlowResult, Hist, SimResult};
use crate::scenario::{FlowPlan, OnOffDef, Pattern, Plan, Scenario, ScenarioError};
use bfq_core::{
    Dispatch, FlowId, FlowInternals, FlowSpec, GroupId, Op, ReqId, Request, SchedError, Scheduler,
    Time, SECTOR_BYTES,
};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io::Write;

/// Why a simulation failed.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The scenario is invalid.
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    /// The scheduler refused a call the simulator made.
    #[error("scheduler '{scheduler}' refused {what}: {err}")]
    Scheduler {
        /// The scheduler's name.
        scheduler: String,
        /// The call refused.
        what: String,
        /// The scheduler's error.
        err: SchedError,
    },
    /// Writing the trace failed.
    #[error("writing the trace: {0}")]
    Trace(#[from] std::io::Error),
}

/// Options of a run.
#[derive(Default)]
pub struct SimOptions<'a> {
    /// Receives the trace CSV (`t_ns,event,flow,req,sector,sectors,op`);
    /// pass a buffered writer.
    pub trace: Option<&'a mut dyn Write>,
    /// Called now and then with (simulated now, simulated end).
    pub progress: Option<&'a mut dyn FnMut(Time, Time)>,
    /// Stop earlier than the scenario's duration.
    pub stop_at: Option<Time>,
}

/// Runs `scenario` with `scheduler` on the scenario's device.
pub fn simulate(
    scenario: &Scenario,
    scheduler: Box<dyn Scheduler>,
    seed: u64,
    opts: SimOptions<'_>,
) -> Result<SimResult, SimError> {
    let plan = scenario.plan()?;
    let dev = device::build_seeded(&plan.device, seed);
    simulate_plan(
        &plan,
        &scenario.name,
        &scenario.device.preset,
        scheduler,
        dev,
        seed,
        opts,
    )
}

/// Runs a resolved plan on a device built by the caller (e.g. a preset
/// with overrides from the suite).
pub fn simulate_plan(
    plan: &Plan,
    scenario_name: &str,
    device_name: &str,
    scheduler: Box<dyn Scheduler>,
    dev: Box<dyn Device>,
    seed: u64,
    opts: SimOptions<'_>,
) -> Result<SimResult, SimError> {
    let mut sim = Sim::new(plan, scheduler, dev, seed)?;
    sim.run(opts)?;
    Ok(sim.result(scenario_name, device_name, seed))
}

const NONE: u32 = u32::MAX;

/// What a request is for, beyond its flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tag {
    Plain,
    /// A blocking replay row.
    ReplayBlock,
    /// Written by the flusher on behalf of `owner`.
    Flush,
    /// A read-ahead reader's indirect block (`indirect_every`).
    Indirect,
}

#[derive(Clone, Copy, Debug)]
struct ReqInfo {
    gen: u32,
    owner: u32,
    sector: u64,
    sectors: u32,
    op: Op,
    queued_at: Time,
    tag: Tag,
    live: bool,
    /// End of the request in its reader's file (read-ahead readers).
    vend: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    /// Flow wake-up; ignored unless it matches the flow's `wake_at`.
    Wake(u32),
    /// Periodic batch release.
    Release(u32),
    /// Start of a run.
    RunStart(u32),
    /// The flow's own end (`stop`, or `duration` after its first start).
    Stop(u32),
}

#[derive(Default, Debug)]
struct Stats {
    bytes: u64,
    requests: u64,
    lat: Hist,
    batch_lat: Hist,
    completions: Vec<Time>,
    run_times: Vec<Time>,
    misses: u64,
    batches: u64,
    series: Vec<u64>,
    finished_at: Option<Time>,
    /// The scheduler's counters for the flow's earlier runs (each run
    /// is a new scheduler flow).
    internals: FlowInternals,
}

/// Per-flow run-time state.
struct Flow {
    plan: FlowPlan,
    rng: Pcg64Mcg,
    sched: Option<FlowId>,
    window: u32,
    outstanding: u32,
    /// In a run.
    active: bool,
    /// Past its own end (`stop` / `duration`): issues nothing more.
    stopped: bool,
    /// Ended for good (its last run, or stopped between runs).
    done: bool,
    /// Flows in `after` that have not ended yet.
    waiting: u32,
    /// When it may start: `start`, or later when the flows it waits for
    /// end after that (its throughput is counted from here).
    released_at: Time,
    run_start: Time,
    runs_done: u32,
    /// Sleeping (think / off) until then.
    wake_at: Option<Time>,
    /// Sectors issued and completed in this run.
    run_issued: u64,
    run_done: u64,
    /// Sector limit for this run (None: unlimited).
    run_limit: Option<u64>,
    /// Next sequential offset in the region.
    pos: u64,
    /// ON/OFF: sectors allowed in this ON phase (issued counted in phase_issued).
    phase_budget: u64,
    phase_issued: u64,
    phase_done: u64,
    /// Periodic: sectors released so far; batches pending (release, cumulative end).
    released: u64,
    batches: VecDeque<(Time, u64)>,
    /// Replay.
    cursor: usize,
    blocked: bool,
    delay_done: bool,
    /// Linux read-ahead (`plan.ra`).
    ra: ReadAhead,
    /// Block map (`plan.indirect_every`): file offset mapped so far, the
    /// window waiting for an indirect block, and whether one is in flight.
    mapped_to: u64,
    pending_window: Option<u64>,
    indirect_inflight: bool,
    /// Web: current file (absolute start, sectors left to issue, total, small, started).
    web_file: Option<(u64, u64, u64, bool, Time)>,
    web_done_in_file: u64,
    files: u32,
    stats: Stats,
}

/// A source of dirty data for the flusher.
struct Dirty {
    owner: u32,
    rand: bool,
    block: u32,
    start: u64,
    len: u64,
    pos: u64,
    left: u64,
    extents: VecDeque<(u64, u32)>,
}

struct Flusher {
    sched: FlowId,
    sources: Vec<Dirty>,
    current: usize,
    quantum_left: u64,
    outstanding: u32,
    depth: u32,
    rng: Pcg64Mcg,
}

/// Writeback chunk per source turn (Linux MAX_WRITEBACK_PAGES: 4 MiB).
const FLUSH_QUANTUM: u64 = (4 << 20) / SECTOR_BYTES;
/// Where a read-ahead reader's file offset `off` (in sectors) lies: its
/// sector on the device (the file wraps around the flow's region) and the
/// sectors left before the wrap.
fn file_sector(plan: &FlowPlan, off: u64) -> (u64, u64) {
    let len = plan.region_len;
    (plan.region_start + off % len, len - off % len)
}

/// An indirect block (4 KiB, ext2/ext3's usual block size).
const INDIRECT_BLOCK_SECTORS: u64 = 8;
/// Largest merged writeback request (512 KiB, a common max_sectors_kb).
const FLUSH_MAX_REQ: u32 = 1024;

impl Flow {
    /// Flow `p`'s state before its first run, drawing from `rng`; its
    /// window of outstanding requests: the read-ahead window's blocks plus
    /// one for a sync reader of depth 1 not under Linux read-ahead, else
    /// its depth.
    fn new(p: &FlowPlan, rng: Pcg64Mcg) -> Flow {
        let window = if p.sync && p.depth == 1 && !p.ra {
            1 + p.readahead.div_ceil(u64::from(p.block)) as u32
        } else {
            p.depth
        };
        Flow {
            plan: p.clone(),
            rng,
            sched: None,
            window: window.max(1),
            outstanding: 0,
            active: false,
            stopped: false,
            done: false,
            waiting: p.after.len() as u32,
            released_at: p.start,
            run_start: 0,
            runs_done: 0,
            wake_at: None,
            run_issued: 0,
            run_done: 0,
            run_limit: None,
            pos: 0,
            phase_budget: u64::MAX,
            phase_issued: 0,
            phase_done: 0,
            released: 0,
            batches: VecDeque::new(),
            cursor: 0,
            blocked: false,
            delay_done: false,
            ra: ReadAhead::new(p.readahead, p.ra_style),
            mapped_to: p.indirect_every,
            pending_window: None,
            indirect_inflight: false,
            web_file: None,
            web_done_in_file: 0,
            files: 0,
            stats: Stats::default(),
        }
    }

    /// Resets the flow for a run starting at `now` with scheduler flow
    /// `sched` (None: a buffered writer, served by the flusher): its byte
    /// limit, file position, read-ahead, block map and replay cursor; an
    /// ON/OFF flow draws its first ON budget, a periodic one has released
    /// nothing yet.
    fn begin_run(&mut self, now: Time, sched: Option<FlowId>) {
        self.sched = sched;
        self.active = true;
        self.run_start = now;
        self.run_issued = 0;
        self.run_done = 0;
        self.run_limit = self.plan.bytes.map(|b| b.div_ceil(SECTOR_BYTES));
        self.pos = 0;
        self.ra.reset();
        self.mapped_to = self.plan.indirect_every;
        self.pending_window = None;
        self.indirect_inflight = false;
        self.cursor = 0;
        self.blocked = false;
        self.delay_done = false;
        self.wake_at = None;
        if let Some(oo) = self.plan.on_off {
            self.phase_budget = rng_range(&mut self.rng, oo.on.lo.0, oo.on.hi.0)
                .div_ceil(SECTOR_BYTES)
                .max(1);
            self.phase_issued = 0;
            self.phase_done = 0;
        }
        if self.plan.periodic.is_some() {
            self.released = 0;
            self.batches.clear();
        }
    }

    /// Starts an ON phase of an ON/OFF flow (`oo`): draws the OFF pause
    /// before it, then its budget (at least a sector); returns the pause.
    fn next_on_phase(&mut self, oo: OnOffDef) -> Time {
        let off = rng_range(&mut self.rng, oo.off.lo.0, oo.off.hi.0);
        self.phase_budget = rng_range(&mut self.rng, oo.on.lo.0, oo.on.hi.0)
            .div_ceil(SECTOR_BYTES)
            .max(1);
        self.phase_issued = 0;
        self.phase_done = 0;
        off
    }

    /// The next request (sector, sectors) of a seq, rand or web flow; None
    /// when it must wait (a web server between files).
    fn next_extent(&mut self, now: Time) -> Option<(u64, u64)> {
        let block = u64::from(self.plan.block);
        Some(match self.plan.pattern {
            Pattern::Seq => {
                if self.pos >= self.plan.region_len {
                    self.pos = 0;
                }
                let n = block.min(self.plan.region_len - self.pos);
                let s = self.plan.region_start + self.pos;
                self.pos += n;
                (s, n)
            }
            Pattern::Rand => {
                let blocks = self.plan.region_len / block;
                let b = self.rng.gen_range(0..blocks.max(1));
                (self.plan.region_start + b * block, block)
            }
            Pattern::Web => return self.next_web_extent(now),
            Pattern::Replay => unreachable!(),
        })
    }

    /// A web server's next request: the next block of its current file,
    /// after picking a file (small or large, 2010 paper Section V-E) once
    /// the previous one is done; None while waiting for it.
    fn next_web_extent(&mut self, now: Time) -> Option<(u64, u64)> {
        if self.web_file.is_none() {
            if self.outstanding > 0 {
                return None;
            }
            self.open_web_file(now);
        }
        let (start, left, total, small, t0) = self.web_file.expect("file");
        if left == 0 {
            return None;
        }
        let n = left.min(u64::from(self.plan.block));
        let s = start + (total - left);
        self.web_file = Some((start, left - n, total, small, t0));
        Some((s, n))
    }

    /// Picks a web server's next file: small with probability
    /// `small_prob` in the first `split` of its region, else large in the
    /// rest, at a random 4 KiB-aligned place.
    fn open_web_file(&mut self, now: Time) {
        let w = self.plan.web.expect("web");
        let small_area = ((self.plan.region_len as f64) * w.split) as u64;
        let small = self.rng.gen_bool(w.small_prob);
        let (lo, hi, len) = if small {
            (0, small_area, w.small.0.div_ceil(SECTOR_BYTES))
        } else {
            let b = rng_range(&mut self.rng, w.large.lo.0, w.large.hi.0);
            (
                small_area,
                self.plan.region_len,
                b.div_ceil(SECTOR_BYTES).max(1),
            )
        };
        let span = hi.saturating_sub(lo).max(1);
        let len = len.min(span).max(1);
        let start = self.plan.region_start
            + lo.min(self.plan.region_len - 1)
            + (rng_range(&mut self.rng, 0, span - len) & !7);
        self.web_file = Some((start, len, len, small, now));
        self.web_done_in_file = 0;
    }
}

impl Dirty {
    /// The dirty data of buffered writer `owner` (plan `p`), written back
    /// in `p`'s blocks over its region.
    fn writer(owner: u32, p: &FlowPlan) -> Dirty {
        Dirty {
            owner,
            rand: p.pattern == Pattern::Rand,
            block: p.block,
            start: p.region_start,
            len: p.region_len,
            pos: 0,
            left: 0,
            extents: VecDeque::new(),
        }
    }

    /// The web servers' common log on a device of `cap` sectors (owner
    /// [`NONE`]), written back in requests of up to [`FLUSH_MAX_REQ`].
    fn web_log(cap: u64) -> Dirty {
        Dirty {
            owner: NONE,
            rand: false,
            block: FLUSH_MAX_REQ,
            start: 0,
            len: cap,
            pos: 0,
            left: 0,
            extents: VecDeque::new(),
        }
    }
}

struct Sim<'p> {
    sched: Box<dyn Scheduler>,
    sched_name: String,
    dev: Box<dyn Device>,
    qd: usize,
    cap: u64,
    flows: Vec<Flow>,
    flusher: Option<Flusher>,
    groups: Vec<GroupId>,
    reqs: Vec<ReqInfo>,
    free: Vec<u32>,
    heap: BinaryHeap<Reverse<(Time, u64, Ev)>>,
    seq: u64,
    timer: Option<Time>,
    now: Time,
    end: Time,
    live: usize,
    done: Vec<(Time, ReqId)>,
    interval: Time,
    web_log_pos: u64,
    trace: Option<&'p mut dyn Write>,
    requests: u64,
    /// For each flow, the flows waiting for it to end (`after`).
    dependents: Vec<Vec<u32>>,
}

fn mix(seed: u64, i: u64) -> u64 {
    // splitmix64 of seed and index
    let mut z = seed
        ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .wrapping_add(0x632B_E59B_D9B4_E019);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn rng_range(rng: &mut Pcg64Mcg, lo: u64, hi: u64) -> u64 {
    if hi <= lo {
        lo
    } else {
        rng.gen_range(lo..=hi)
    }
}

impl<'p> Sim<'p> {
    /// Sets up a run of `plan`: the device's parameters given to the
    /// scheduler, the plan's groups and flows (flow `i`'s random stream
    /// seeded from `seed` and `i`), the flusher when a flow needs one, and
    /// each flow's first events.
    fn new(
        plan: &Plan,
        mut sched: Box<dyn Scheduler>,
        dev: Box<dyn Device>,
        seed: u64,
    ) -> Result<Self, SimError> {
        let sched_name = sched.name().to_string();
        let info = dev.info();
        sched.set_device(info);
        let cap = dev.capacity_sectors();
        let flows = plan
            .flows
            .iter()
            .enumerate()
            .map(|(i, p)| Flow::new(p, Pcg64Mcg::seed_from_u64(mix(seed, i as u64 + 1))))
            .collect();
        let mut sim = Sim {
            sched,
            sched_name,
            qd: info.queue_depth.max(1) as usize,
            cap,
            dev,
            flows,
            flusher: None,
            groups: Vec::with_capacity(plan.groups.len()),
            reqs: Vec::with_capacity(1024),
            free: Vec::with_capacity(1024),
            heap: BinaryHeap::with_capacity(plan.flows.len() * 2 + 16),
            seq: 0,
            timer: None,
            now: 0,
            end: plan.duration,
            live: plan.flows.len(),
            done: Vec::with_capacity(64),
            interval: plan.series_interval,
            web_log_pos: 0,
            trace: None,
            requests: 0,
            dependents: vec![Vec::new(); plan.flows.len()],
        };
        sim.add_groups(plan)?;
        sim.flusher = sim.new_flusher(plan, info.queue_depth, seed)?;
        sim.schedule_starts(plan);
        Ok(sim)
    }

    /// Adds the plan's groups to the scheduler, parents before children.
    fn add_groups(&mut self, plan: &Plan) -> Result<(), SimError> {
        for g in &plan.groups {
            let parent = g.parent.map(|p| self.groups[p]).unwrap_or(GroupId::ROOT);
            let id = self
                .sched
                .add_group(parent, g.weight)
                .map_err(|e| self.serr(format!("group {}", g.path), e))?;
            self.groups.push(id);
        }
        Ok(())
    }

    /// The system-wide flusher (Linux's writeback), when a flow needs one:
    /// its scheduler flow and its sources of dirty data, each buffered
    /// writer in order, then the web servers' common log; its depth is 64
    /// requests, its random stream seeded from `seed` alone.
    fn new_flusher(
        &mut self,
        plan: &Plan,
        queue_depth: u32,
        seed: u64,
    ) -> Result<Option<Flusher>, SimError> {
        let mut sources: Vec<Dirty> = (plan.flows.iter().enumerate())
            .filter(|(_, p)| p.buffered)
            .map(|(i, p)| Dirty::writer(i as u32, p))
            .collect();
        let web = plan.flows.iter().any(|p| p.pattern == Pattern::Web);
        if sources.is_empty() && !web {
            return Ok(None);
        }
        let id = self
            .sched
            .add_flow(0, FlowSpec::default())
            .map_err(|e| self.serr("the flusher flow".into(), e))?;
        if web {
            sources.push(Dirty::web_log(self.cap));
        }
        Ok(Some(Flusher {
            sched: id,
            sources,
            current: 0,
            quantum_left: FLUSH_QUANTUM,
            outstanding: 0,
            depth: 64.min(queue_depth.max(1) * 64),
            rng: Pcg64Mcg::seed_from_u64(mix(seed, 0)),
        }))
    }

    /// Each flow's first events: its `stop`, and its first run's start
    /// (after its start jitter) unless it waits for other flows, which
    /// then list it as a dependent.
    fn schedule_starts(&mut self, plan: &Plan) {
        for (i, p) in plan.flows.iter().enumerate() {
            for &d in &p.after {
                self.dependents[d].push(i as u32);
            }
            if let Some(stop) = p.stop {
                self.push(stop, Ev::Stop(i as u32));
            }
            if p.after.is_empty() {
                let t = p.start + self.start_jitter(i);
                self.push(t, Ev::RunStart(i as u32));
            }
        }
    }

    /// A draw in [0, start_jitter] of flow `i` (docs/scenarios.md).
    fn start_jitter(&mut self, i: usize) -> Time {
        let f = &mut self.flows[i];
        rng_range(&mut f.rng, 0, f.plan.start_jitter)
    }

    /// The pause before flow `i`'s next request after a completion it
    /// waited for: its gap drawn in [gap/2, 3 gap/2] (a read-ahead reader
    /// thinks after consuming the data, in `pump_ra`), plus its think time.
    fn pause(&mut self, i: usize) -> Time {
        let f = &mut self.flows[i];
        let g = f.plan.gap;
        let gap = if g > 1 {
            rng_range(&mut f.rng, g / 2, g + g / 2)
        } else {
            g
        };
        if f.plan.ra {
            gap
        } else {
            gap + f.plan.think
        }
    }

    fn push(&mut self, t: Time, ev: Ev) {
        self.seq += 1;
        self.heap.push(Reverse((t, self.seq, ev)));
    }

    fn serr(&self, what: String, err: SchedError) -> SimError {
        SimError::Scheduler {
            scheduler: self.sched_name.clone(),
            what,
            err,
        }
    }

    fn trace_line(
        &mut self,
        t: Time,
        ev: char,
        owner: u32,
        id: ReqId,
        r: &ReqInfo,
    ) -> Result<(), SimError> {
        if let Some(w) = self.trace.as_mut() {
            let name = if r.tag == Tag::Flush {
                "flusher"
            } else {
                self.flows[owner as usize].plan.name.as_str()
            };
            writeln!(
                w,
                "{t},{ev},{name},{id},{},{},{}",
                r.sector,
                r.sectors,
                if r.op == Op::Read { 'R' } else { 'W' }
            )?;
        }
        Ok(())
    }

    /// Queues a request with the scheduler.
    #[allow(clippy::too_many_arguments)]
    fn issue(
        &mut self,
        owner: u32,
        sched_flow: FlowId,
        sector: u64,
        sectors: u32,
        op: Op,
        sync: bool,
        tag: Tag,
    ) -> Result<ReqId, SimError> {
        let now = self.now;
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.reqs.push(ReqInfo {
                    gen: 0,
                    owner: 0,
                    sector: 0,
                    sectors: 0,
                    op,
                    queued_at: 0,
                    tag,
                    live: false,
                    vend: 0,
                });
                (self.reqs.len() - 1) as u32
            }
        };
        let info = &mut self.reqs[slot as usize];
        info.gen = info.gen.wrapping_add(1);
        info.owner = owner;
        info.sector = sector;
        info.sectors = sectors;
        info.op = op;
        info.queued_at = now;
        info.tag = tag;
        info.live = true;
        info.vend = 0;
        let id = (u64::from(info.gen) << 32) | u64::from(slot);
        let r = *info;
        self.sched
            .add_request(
                now,
                Request {
                    id,
                    flow: sched_flow,
                    sector,
                    sectors,
                    op,
                    sync,
                },
            )
            .map_err(|e| self.serr(format!("request {id}"), e))?;
        self.trace_line(now, 'Q', owner, id, &r)?;
        Ok(id)
    }

    fn run(&mut self, mut opts: SimOptions<'p>) -> Result<(), SimError> {
        if let Some(s) = opts.stop_at {
            self.end = self.end.min(s);
        }
        self.trace = opts.trace.take();
        if let Some(w) = self.trace.as_mut() {
            writeln!(w, "t_ns,event,flow,req,sector,sectors,op")?;
        }
        let mut progress = opts.progress.take();
        let mut iter: u64 = 0;
        loop {
            let th = self.heap.peek().map(|r| r.0 .0).unwrap_or(Time::MAX);
            let td = self.dev.next_event().unwrap_or(Time::MAX);
            let tt = self.timer.unwrap_or(Time::MAX);
            let t = th.min(td).min(tt);
            if t == Time::MAX || t >= self.end {
                break;
            }
            if self.live == 0 && self.dev.in_flight() == 0 && self.sched.queued() == 0 {
                break;
            }
            self.now = t;
            if td == t {
                self.dev.advance(t, &mut self.done);
                let mut done = std::mem::take(&mut self.done);
                for &(tc, id) in &done {
                    self.now = tc;
                    self.on_complete(id)?;
                }
                done.clear();
                self.done = done;
                self.now = t;
            }
            while let Some(Reverse((te, _, ev))) = self.heap.peek().copied() {
                if te != t {
                    break;
                }
                self.heap.pop();
                self.on_event(ev)?;
            }
            if tt == t {
                self.timer = None;
            }
            self.dispatch()?;
            iter += 1;
            if iter & 0xFFFF == 0 {
                if let Some(p) = progress.as_mut() {
                    p(self.now, self.end);
                }
            }
        }
        // if everything finished early, the run ends at the last activity
        if self.live > 0 || self.now > self.end {
            self.now = self.end;
        }
        if let Some(p) = progress.as_mut() {
            p(self.now, self.end);
        }
        if let Some(w) = self.trace.as_mut() {
            w.flush()?;
        }
        Ok(())
    }

    fn dispatch(&mut self) -> Result<(), SimError> {
        let now = self.now;
        while self.dev.in_flight() < self.qd {
            match self.sched.dispatch(now) {
                Dispatch::Request(r) => {
                    let slot = (r.id & 0xFFFF_FFFF) as usize;
                    let info = self.reqs.get(slot).copied();
                    match info {
                        Some(info) if info.live && u64::from(info.gen) == r.id >> 32 => {
                            self.trace_line(now, 'D', info.owner, r.id, &info)?;
                        }
                        _ => {
                            return Err(self.serr(
                                "nothing: it dispatched an unknown request".into(),
                                SchedError::UnknownRequest(r.id),
                            ))
                        }
                    }
                    self.dev.submit(
                        now,
                        DevRequest {
                            id: r.id,
                            sector: r.sector.min(self.cap - 1),
                            sectors: r.sectors.max(1),
                            op: r.op,
                        },
                    );
                }
                Dispatch::Idle { until } => {
                    self.timer = Some(until.max(now + 1));
                    break;
                }
                Dispatch::Wait | Dispatch::Empty => break,
            }
        }
        Ok(())
    }

    fn on_complete(&mut self, id: ReqId) -> Result<(), SimError> {
        let now = self.now;
        self.sched
            .complete(now, id)
            .map_err(|e| self.serr(format!("completion of {id}"), e))?;
        let slot = (id & 0xFFFF_FFFF) as u32;
        let r = self.reqs[slot as usize];
        self.reqs[slot as usize].live = false;
        self.free.push(slot);
        self.trace_line(now, 'C', r.owner, id, &r)?;
        self.requests += 1;
        let bytes = u64::from(r.sectors) * SECTOR_BYTES;
        if r.tag == Tag::Flush {
            if let Some(fl) = self.flusher.as_mut() {
                fl.outstanding -= 1;
            }
        }
        if r.tag == Tag::Indirect {
            return self.indirect_completed(r.owner as usize);
        }
        if r.owner != NONE {
            let interval = self.interval;
            let f = &mut self.flows[r.owner as usize];
            let st = &mut f.stats;
            st.bytes += bytes;
            st.requests += 1;
            st.lat.add(now - r.queued_at);
            let b = (now / interval) as usize;
            if b >= st.series.len() {
                st.series.resize(b + 1, 0);
            }
            st.series[b] += bytes;
            if r.tag != Tag::Flush {
                self.flow_completed(r.owner as usize, &r)?;
            } else {
                let f = &mut self.flows[r.owner as usize];
                f.run_done += u64::from(r.sectors);
                f.outstanding -= 1;
                let ended = f.run_limit.is_some_and(|l| f.run_done >= l)
                    || (f.stopped && f.outstanding == 0);
                if f.active && ended {
                    self.end_run(r.owner as usize)?;
                }
            }
        }
        if r.tag == Tag::Flush {
            self.flush()?;
        }
        Ok(())
    }

    fn on_event(&mut self, ev: Ev) -> Result<(), SimError> {
        let now = self.now;
        match ev {
            Ev::Wake(i) => {
                let f = &mut self.flows[i as usize];
                if f.wake_at == Some(now) {
                    f.wake_at = None;
                    self.pump(i as usize)?;
                }
            }
            Ev::RunStart(i) => self.start_run(i as usize)?,
            Ev::Stop(i) => self.stop(i as usize)?,
            Ev::Release(i) => {
                let f = &mut self.flows[i as usize];
                if !f.active || f.stopped {
                    return Ok(());
                }
                let p = f.plan.periodic.expect("periodic");
                let n = p.bytes.0.div_ceil(SECTOR_BYTES);
                f.released += n;
                f.batches.push_back((now, f.released));
                f.stats.batches += 1;
                let next = now + p.every.0;
                self.push(next, Ev::Release(i));
                self.settle_batches(i as usize);
                self.pump(i as usize)?;
            }
        }
        Ok(())
    }

    /// Flow `i` reached its own end (docs/scenarios.md, `stop` and
    /// `duration`): it issues nothing more; its run ends when its requests
    /// in flight have completed (a buffered writer's dirty data stops
    /// growing: no backlog is modelled), at once if it is between runs or
    /// not started.
    fn stop(&mut self, i: usize) -> Result<(), SimError> {
        let f = &mut self.flows[i];
        if f.stopped || f.done {
            return Ok(());
        }
        f.stopped = true;
        if f.plan.buffered {
            if let Some(src) = self
                .flusher
                .as_mut()
                .and_then(|fl| fl.sources.iter_mut().find(|s| s.owner == i as u32))
            {
                src.left = 0;
            }
        }
        let f = &self.flows[i];
        match (f.active, f.outstanding) {
            (true, 0) => self.end_run(i),
            (true, _) => Ok(()),
            (false, _) => {
                self.finish(i);
                Ok(())
            }
        }
    }

    /// Flow `i` has ended for good: the flows waiting for it may start
    /// once all they wait for have ended.
    fn finish(&mut self, i: usize) {
        let now = self.now;
        let f = &mut self.flows[i];
        f.done = true;
        f.stats.finished_at = Some(now);
        self.live -= 1;
        for k in 0..self.dependents[i].len() {
            let d = self.dependents[i][k] as usize;
            let g = &mut self.flows[d];
            g.waiting -= 1;
            if g.waiting == 0 && !g.done {
                g.released_at = g.plan.start.max(now);
                let t = g.released_at + self.start_jitter(d);
                self.push(t, Ev::RunStart(d as u32));
            }
        }
    }

    /// Starts a run of flow `i` (unless it ended for good): its end after
    /// `duration` (first run only), a new scheduler flow, its state reset,
    /// then its first requests (a buffered writer's dirty data, through
    /// the flusher).
    fn start_run(&mut self, i: usize) -> Result<(), SimError> {
        let now = self.now;
        if self.flows[i].done {
            return Ok(());
        }
        if self.flows[i].runs_done == 0 {
            if let Some(d) = self.flows[i].plan.duration {
                self.push(now + d, Ev::Stop(i as u32));
            }
        }
        let spec = {
            let p = &self.flows[i].plan;
            FlowSpec {
                weight: p.weight,
                prio: p.prio,
                group: p.group.map(|g| self.groups[g]).unwrap_or(GroupId::ROOT),
            }
        };
        let name = self.flows[i].plan.name.clone();
        let buffered = self.flows[i].plan.buffered;
        let sched = if buffered {
            None
        } else {
            Some(
                self.sched
                    .add_flow(now, spec)
                    .map_err(|e| self.serr(format!("flow '{name}'"), e))?,
            )
        };
        self.flows[i].begin_run(now, sched);
        if self.flows[i].plan.periodic.is_some() {
            self.push(now, Ev::Release(i as u32));
        }
        if buffered {
            let limit = self.flows[i].run_limit.unwrap_or(u64::MAX);
            if let Some(fl) = self.flusher.as_mut() {
                if let Some(s) = fl.sources.iter_mut().find(|s| s.owner == i as u32) {
                    s.left = limit;
                    s.pos = 0;
                }
            }
            self.flush()?;
            return Ok(());
        }
        self.pump(i)
    }

    /// A run ended (all issued and completed).
    fn end_run(&mut self, i: usize) -> Result<(), SimError> {
        let now = self.now;
        let f = &mut self.flows[i];
        f.active = false;
        f.stats.completions.push(now);
        f.stats.run_times.push(now - f.run_start);
        f.runs_done += 1;
        if let Some(id) = f.sched.take() {
            f.stats.internals = f.stats.internals.plus(self.sched.flow_internals(id));
            self.sched
                .remove_flow(now, id)
                .map_err(|e| self.serr("flow removal".into(), e))?;
        }
        let f = &mut self.flows[i];
        let again =
            !f.stopped && f.plan.repeat.is_some() && f.plan.runs.is_none_or(|r| f.runs_done < r);
        if again {
            let t = now + f.plan.repeat.unwrap_or(0) + self.start_jitter(i);
            self.push(t, Ev::RunStart(i as u32));
        } else {
            self.finish(i);
        }
        Ok(())
    }

    fn sleep(&mut self, i: usize, until: Time) {
        self.flows[i].wake_at = Some(until);
        self.push(until, Ev::Wake(i as u32));
    }

    fn flow_completed(&mut self, i: usize, r: &ReqInfo) -> Result<(), SimError> {
        let now = self.now;
        let f = &mut self.flows[i];
        f.outstanding -= 1;
        let n = u64::from(r.sectors);
        f.run_done += n;
        f.phase_done += n;
        if r.tag == Tag::ReplayBlock {
            f.blocked = false;
        }
        if f.plan.ra {
            f.ra.completed(r.vend);
        }
        self.settle_batches(i);
        let f = &mut self.flows[i];
        if f.stopped {
            // past its own end: the run ends with its last completion
            return if f.active && f.outstanding == 0 {
                self.end_run(i)
            } else {
                Ok(())
            };
        }
        // web file
        if f.plan.pattern == Pattern::Web {
            f.web_done_in_file += n;
            if let Some((_, left, total, small, t0)) = f.web_file {
                if left == 0 && f.web_done_in_file >= total {
                    if small {
                        f.stats.batch_lat.add(now - t0);
                        f.stats.batches += 1;
                    }
                    f.web_file = None;
                    f.files += 1;
                    let w = f.plan.web.expect("web");
                    if f.files.checked_rem(w.log_every) == Some(0) {
                        let bytes = rng_range(&mut f.rng, w.log.lo.0, w.log.hi.0).max(1);
                        self.web_log(bytes)?;
                    }
                }
            }
        }
        let f = &mut self.flows[i];
        if f.plan.ra {
            if !(f.ra.waiting && f.ra.done_to >= f.ra.wait_end && f.active) {
                return Ok(());
            }
            f.ra.waiting = false;
        }
        let f = &self.flows[i];
        let waits = f.plan.sync || f.plan.think > 0;
        if waits && f.active && f.plan.pattern != Pattern::Replay {
            return self.pause_then_pump(i);
        }
        self.pump(i)
    }

    /// Flow `i` goes on issuing after its pause (think time and the
    /// completion-to-next-request gap), unless it is already pausing after
    /// an earlier completion.
    fn pause_then_pump(&mut self, i: usize) -> Result<(), SimError> {
        if self.flows[i].wake_at.is_some() {
            return Ok(());
        }
        let now = self.now;
        let t = now + self.pause(i);
        if t > now {
            self.sleep(i, t);
            return Ok(());
        }
        self.pump(i)
    }

    /// Periodic flows: the batches whose data has been read (by the flow's
    /// requests or, under read-ahead, ahead of them) are complete now.
    fn settle_batches(&mut self, i: usize) {
        let now = self.now;
        let f = &mut self.flows[i];
        let Some(p) = f.plan.periodic else {
            return;
        };
        let deadline = p.deadline.map(|d| d.0).unwrap_or(p.every.0);
        let measured_from = p.measured_from(f.run_start);
        let ready = if f.plan.ra { f.ra.done_to } else { f.run_done };
        while let Some(&(rel, end)) = f.batches.front() {
            if ready < end {
                break;
            }
            f.batches.pop_front();
            if rel < measured_from {
                continue;
            }
            let l = now - rel;
            f.stats.batch_lat.add(l);
            if l > deadline {
                f.stats.misses += 1;
            }
        }
    }

    fn web_log(&mut self, bytes: u64) -> Result<(), SimError> {
        let Some(fl) = self.flusher.as_mut() else {
            return Ok(());
        };
        // the common log lies just before the middle of the device
        let base = self.cap / 2 - (1 << 21).min(self.cap / 4);
        let n = bytes.div_ceil(SECTOR_BYTES) as u32;
        let s = base + self.web_log_pos % (1 << 21);
        self.web_log_pos += u64::from(n);
        if let Some(src) = fl.sources.iter_mut().find(|s| s.owner == NONE) {
            src.extents.push_back((s, n));
        }
        self.flush()
    }

    /// Issues what flow `i` may issue now.
    fn pump(&mut self, i: usize) -> Result<(), SimError> {
        loop {
            let now = self.now;
            let f = &mut self.flows[i];
            if !f.active || f.plan.buffered {
                return Ok(());
            }
            if f.stopped {
                return if f.outstanding == 0 {
                    self.end_run(i)
                } else {
                    Ok(())
                };
            }
            if f.wake_at.is_some() {
                return Ok(());
            }
            if f.plan.pattern == Pattern::Replay {
                return self.pump_replay(i);
            }
            if f.plan.ra {
                return self.pump_ra(i);
            }
            // end of run?
            let limit_hit = f.run_limit.is_some_and(|l| f.run_issued >= l);
            if limit_hit {
                if f.outstanding == 0 {
                    return self.end_run(i);
                }
                return Ok(());
            }
            if f.outstanding >= f.window {
                return Ok(());
            }
            // ON/OFF
            if let Some(oo) = f.plan.on_off.filter(|_| f.phase_issued >= f.phase_budget) {
                if f.outstanding > 0 {
                    return Ok(());
                }
                let off = f.next_on_phase(oo);
                if off > 0 {
                    self.sleep(i, now + off);
                    return Ok(());
                }
                continue;
            }
            // periodic credit
            if f.plan.periodic.is_some() && f.run_issued >= f.released {
                return Ok(());
            }
            let Some((sector, mut n)) = f.next_extent(now) else {
                return Ok(());
            };
            if let Some(l) = f.run_limit {
                n = n.min(l - f.run_issued);
            }
            if f.plan.periodic.is_some() {
                n = n.min(f.released - f.run_issued);
            }
            f.run_issued += n;
            f.phase_issued += n;
            f.outstanding += 1;
            let (op, sync) = (f.plan.op, f.plan.sync);
            let sf = f.sched.expect("active flow has a scheduler flow");
            self.issue(i as u32, sf, sector, n as u32, op, sync, Tag::Plain)?;
        }
    }

    /// A buffered sequential reader under Linux read-ahead
    /// ([`crate::readahead`]): the program reads `block` at a time from the
    /// page cache, sleeping `think` between reads; the kernel issues the
    /// windows; the program waits when it reaches data still in flight.
    fn pump_ra(&mut self, i: usize) -> Result<(), SimError> {
        if let Some(end) = self.flows[i].pending_window {
            if self.flows[i].indirect_inflight {
                return Ok(());
            }
            self.flows[i].pending_window = None;
            if !self.map_then_issue(i, end)? {
                return Ok(());
            }
        }
        loop {
            let f = &mut self.flows[i];
            let limit = f.run_limit.unwrap_or(u64::MAX);
            if f.ra.app_pos >= limit {
                if f.outstanding == 0 {
                    return self.end_run(i);
                }
                return Ok(());
            }
            // a periodic program reads what has been released
            let credit = if f.plan.periodic.is_some() {
                f.released
            } else {
                u64::MAX
            };
            if f.ra.app_pos >= credit {
                return Ok(());
            }
            let len = u64::from(f.plan.block)
                .min(limit - f.ra.app_pos)
                .min(credit - f.ra.app_pos);
            if let Some((start, size)) = f.ra.on_read(len) {
                if !self.map_then_issue(i, start + size)? {
                    return Ok(());
                }
                continue;
            }
            let f = &mut self.flows[i];
            if f.ra.app_pos + len > f.ra.done_to {
                f.ra.waiting = true;
                f.ra.wait_end = f.ra.app_pos + len;
                return Ok(());
            }
            f.ra.app_pos += len;
            if f.plan.think > 0 {
                let t = self.now + self.flows[i].plan.think;
                self.sleep(i, t);
                return Ok(());
            }
        }
    }

    /// File-system block map of a read-ahead reader (`indirect_every`,
    /// docs/scenarios.md), as ext2/ext3 read an indirect block in
    /// `get_block` while the read-ahead path maps a window: if flow `i`'s
    /// window up to `end` reaches past the mapped part of its file, the
    /// next range's 4 KiB indirect block is read first (at the range's
    /// start) and the window waits for it (returns false); else the window
    /// is issued (true).
    fn map_then_issue(&mut self, i: usize, end: u64) -> Result<bool, SimError> {
        let f = &mut self.flows[i];
        let every = f.plan.indirect_every;
        let needed = end.min(f.run_limit.unwrap_or(u64::MAX));
        if every == 0 || f.mapped_to >= needed {
            self.issue_window(i, end)?;
            return Ok(true);
        }
        let (sector, to_wrap) = file_sector(&f.plan, f.mapped_to);
        let n = INDIRECT_BLOCK_SECTORS.min(to_wrap);
        f.pending_window = Some(end);
        f.indirect_inflight = true;
        f.outstanding += 1;
        let sf = f.sched.expect("active flow has a scheduler flow");
        self.issue(
            i as u32,
            sf,
            sector,
            n as u32,
            Op::Read,
            true,
            Tag::Indirect,
        )?;
        Ok(false)
    }

    /// Flow `i`'s indirect block arrived: its range is mapped, and the
    /// program goes on issuing its window a `gap` later.
    fn indirect_completed(&mut self, i: usize) -> Result<(), SimError> {
        let f = &mut self.flows[i];
        f.outstanding -= 1;
        f.indirect_inflight = false;
        f.mapped_to += f.plan.indirect_every;
        if f.stopped || !f.active {
            return if f.active && f.outstanding == 0 {
                self.end_run(i)
            } else {
                Ok(())
            };
        }
        self.pause_then_pump(i)
    }

    /// Issues a read-ahead window of flow `i` up to `end` (in its file),
    /// clipped to the run's bytes, in requests of at most 512 KiB that do
    /// not cross the end of the region.
    fn issue_window(&mut self, i: usize, end: u64) -> Result<(), SimError> {
        let f = &mut self.flows[i];
        let end = end.min(f.run_limit.unwrap_or(u64::MAX));
        if end <= f.ra.issued_to {
            f.ra.clip();
            return Ok(());
        }
        while self.flows[i].ra.issued_to < end {
            let f = &mut self.flows[i];
            let from = f.ra.issued_to;
            let (sector, to_wrap) = file_sector(&f.plan, from);
            let n = (end - from).min(u64::from(FLUSH_MAX_REQ)).min(to_wrap);
            f.ra.issued(from + n);
            f.run_issued += n;
            f.outstanding += 1;
            let sf = f.sched.expect("active flow has a scheduler flow");
            let id = self.issue(i as u32, sf, sector, n as u32, Op::Read, true, Tag::Plain)?;
            let slot = (id & 0xFFFF_FFFF) as usize;
            self.reqs[slot].vend = from + n;
        }
        Ok(())
    }

    fn pump_replay(&mut self, i: usize) -> Result<(), SimError> {
        loop {
            let now = self.now;
            let f = &mut self.flows[i];
            let rows = f.plan.replay.clone().expect("replay rows");
            if f.cursor >= rows.len() {
                if f.outstanding == 0 {
                    return self.end_run(i);
                }
                return Ok(());
            }
            if f.blocked {
                return Ok(());
            }
            let row: ReplayRow = rows[f.cursor];
            if row.delay > 0 && !f.delay_done {
                f.delay_done = true;
                self.sleep(i, now + row.delay);
                return Ok(());
            }
            f.delay_done = false;
            f.cursor += 1;
            let len = f.plan.region_len;
            let sector = f.plan.region_start + row.sector % len;
            let end = (f.plan.region_start + len).min(self.cap);
            let n = (u64::from(row.sectors)).min(end - sector).max(1) as u32;
            let blocking = row.sync && !f.plan.replay_open_loop;
            if blocking {
                f.blocked = true;
            }
            f.outstanding += 1;
            f.run_issued += u64::from(n);
            let sf = f.sched.expect("active flow has a scheduler flow");
            let tag = if blocking {
                Tag::ReplayBlock
            } else {
                Tag::Plain
            };
            self.issue(i as u32, sf, sector, n, row.op, row.sync, tag)?;
        }
    }

    /// Lets the flusher issue writeback requests up to its depth.
    fn flush(&mut self) -> Result<(), SimError> {
        loop {
            let Some(fl) = self.flusher.as_mut() else {
                return Ok(());
            };
            if fl.outstanding >= fl.depth || fl.sources.is_empty() {
                return Ok(());
            }
            // find a source with data, round robin with a quantum
            let k = fl.sources.len();
            let mut found = None;
            for step in 0..k {
                let idx = (fl.current + step) % k;
                let s = &fl.sources[idx];
                if s.left > 0 || !s.extents.is_empty() {
                    found = Some(idx);
                    break;
                }
            }
            let Some(idx) = found else {
                return Ok(());
            };
            if idx != fl.current {
                fl.current = idx;
                fl.quantum_left = FLUSH_QUANTUM;
            }
            let src = &mut fl.sources[idx];
            let (sector, n) = if let Some((s, n)) = src.extents.pop_front() {
                (s, n)
            } else if src.rand {
                let blocks = (src.len / u64::from(src.block)).max(1);
                let b = fl.rng.gen_range(0..blocks);
                let n = u64::from(src.block).min(src.left);
                (src.start + b * u64::from(src.block), n as u32)
            } else {
                if src.pos >= src.len {
                    src.pos = 0;
                }
                let n = u64::from(src.block.max(FLUSH_MAX_REQ))
                    .min(src.len - src.pos)
                    .min(src.left);
                let s = src.start + src.pos;
                src.pos += n;
                (s, n as u32)
            };
            if src.owner != NONE {
                src.left -= u64::from(n);
            }
            let owner = src.owner;
            fl.quantum_left = fl.quantum_left.saturating_sub(u64::from(n));
            if fl.quantum_left == 0 {
                fl.current = (fl.current + 1) % k;
                fl.quantum_left = FLUSH_QUANTUM;
            }
            fl.outstanding += 1;
            let sf = fl.sched;
            self.issue(owner, sf, sector, n.max(1), Op::Write, false, Tag::Flush)?;
            if owner != NONE {
                let f = &mut self.flows[owner as usize];
                f.run_issued += u64::from(n);
                f.outstanding += 1;
            }
        }
    }

    fn result(&mut self, scenario: &str, device: &str, seed: u64) -> SimResult {
        let end = self.now;
        // buffered writers with a byte limit: their run ends when written
        let mut flows = Vec::with_capacity(self.flows.len());
        let mut total = 0u64;
        for f in &mut self.flows {
            // periodic batches past deadline but unfinished
            if let Some(p) = f.plan.periodic {
                let dl = p.deadline.map(|d| d.0).unwrap_or(p.every.0);
                let from = p.measured_from(f.run_start);
                let late = |&&(rel, _): &&(Time, u64)| rel >= from && end > rel + dl;
                f.stats.misses += f.batches.iter().filter(late).count() as u64;
            }
            if let Some(id) = f.sched {
                f.stats.internals = f.stats.internals.plus(self.sched.flow_internals(id));
            }
            let st = &f.stats;
            total += st.bytes;
            let fin = st.finished_at.unwrap_or(end);
            let span = fin.saturating_sub(f.released_at).max(1);
            let nb = end.div_ceil(self.interval).max(1) as usize;
            let mut series: Vec<f64> = st
                .series
                .iter()
                .map(|&b| b as f64 / 1048576.0 / secs(self.interval))
                .collect();
            series.resize(nb.max(series.len()), 0.0);
            flows.push(FlowResult {
                name: f.plan.name.clone(),
                bytes: st.bytes,
                requests: st.requests,
                throughput_mib_s: st.bytes as f64 / 1048576.0 / secs(span),
                latency_ms: st.lat.stats_ms(),
                completions_s: st.completions.iter().map(|&t| secs(t)).collect(),
                deadline_misses: st.misses,
                run_times_s: st.run_times.iter().map(|&t| secs(t)).collect(),
                batches: st.batches,
                batch_latency_ms: st.batch_lat.stats_ms(),
                latency_cdf_ms: st.lat.cdf_ms(),
                series_mib_s: series,
                internals: st.internals,
            });
        }
        SimResult {
            scenario: scenario.to_string(),
            scheduler: self.sched_name.clone(),
            seed,
            sim_time_s: secs(end),
            aggregate_mib_s: total as f64 / 1048576.0 / secs(end.max(1)),
            flows,
            device: device.to_string(),
            requests: self.requests,
            series_interval_s: secs(self.interval),
            internals: self.sched.internals(end),
        }
    }
}
