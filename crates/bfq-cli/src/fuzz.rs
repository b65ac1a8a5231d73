//! `bfq fuzz`: seeded random calls of the scheduler API against every
//! scheduler, and mutated scenario files against the scenario parser,
//! planner and simulator, checking:
//!
//! - no panic;
//! - bad calls (unknown or removed flows and groups, bad weights and
//!   levels, zero-length requests, requests ending past the last sector,
//!   duplicate ids, completions of requests not in flight, times past
//!   `MAX_TIME`) give an error (`dispatch`: `Wait` or `Empty`) and change
//!   nothing;
//! - every request is dispatched exactly once and completed exactly once,
//!   `queued()` and `in_flight()` agree with what was handed in;
//! - no stall: with no new requests, serving what is held ends;
//! - bounded memory: flow and group ids index tables no larger than the
//!   most flows or groups held at once plus the reuse pool.
//!
//! Runs a number of cases, or for a wall-clock budget (by hand); seeded
//! and deterministic (the harness keeps its model in ordered sets), so a
//! failing case is replayed with its seed: `bfq fuzz --target NAME --seed
//! SEED --cases 1 --ops OPS`.

use bfq_core::{
    DeviceInfo, Dispatch, FlowId, FlowSpec, GroupId, IoClass, IoPrio, Op, Request, SchedError,
    Scheduler, Settings, Time, MAX_TIME, MS, SEC,
};
use clap::Args as ClapArgs;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(ClapArgs)]
pub struct Args {
    /// What to fuzz: `schedulers` (every scheduler, one after the
    /// other), one scheduler by name (e.g. `bfq`), `scenarios`, or `all`.
    #[arg(long, default_value = "all")]
    pub target: String,
    /// Cases per target (one case: a scheduler driven through `--ops`
    /// calls, or one mutated scenario); at least 1.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    pub cases: u64,
    /// Instead of a number of cases, run each target for this many
    /// minutes of wall time (above 0, at most 10080: a week).
    #[arg(long, value_parser = minutes)]
    pub minutes: Option<f64>,
    /// Scheduler calls per scheduler case (at least 1).
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(1..))]
    pub ops: u32,
    /// First seed; case N uses seed + N.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Directory of the scenario files (`*.toml`) to mutate. Default:
    /// `scenarios` in the current directory, else the `scenarios`
    /// directory of the source tree this binary was built from (the
    /// shipped scenarios), if it is still there. Read before any case
    /// runs.
    #[arg(long)]
    pub scenarios: Option<PathBuf>,
}

/// `--minutes`: above 0 and at most a week (it panicked on `nan`, `inf`,
/// a negative or a huge value, building the time budget).
fn minutes(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(m) if m.is_finite() && m > 0.0 && m <= 10_080.0 => Ok(m),
        _ => Err(format!(
            "'{s}': give minutes above 0 and at most 10080 (a week)"
        )),
    }
}

/// The shipped scenarios: `scenarios/` of the source tree this binary
/// was built from.
const SHIPPED_SCENARIOS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios");

/// The scenario files (name, text) of `--scenarios`, or of the default
/// directory (see [`Args::scenarios`]); an error naming the directory
/// when it cannot be read or holds none.
fn load_scenarios(given: Option<&std::path::Path>) -> anyhow::Result<Vec<(String, String)>> {
    let dir = match given {
        Some(d) => d.to_path_buf(),
        None if std::path::Path::new("scenarios").is_dir() => PathBuf::from("scenarios"),
        None if std::path::Path::new(SHIPPED_SCENARIOS).is_dir() => {
            PathBuf::from(SHIPPED_SCENARIOS)
        }
        None => anyhow::bail!(
            "no scenarios directory here or at {SHIPPED_SCENARIOS}: give --scenarios DIR \
             (the project's scenarios/)"
        ),
    };
    let named = |e: std::io::Error| anyhow::anyhow!("--scenarios {}: {e}", dir.display());
    let mut texts = Vec::new();
    for e in std::fs::read_dir(&dir).map_err(named)? {
        let p = e.map_err(named)?.path();
        if p.extension().is_some_and(|x| x == "toml") {
            let text =
                std::fs::read_to_string(&p).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
            texts.push((p.display().to_string(), text));
        }
    }
    if texts.is_empty() {
        anyhow::bail!("--scenarios {}: no scenario files (*.toml)", dir.display());
    }
    // read_dir's order is the filesystem's: a seed picks the same file
    // on every machine.
    texts.sort();
    Ok(texts)
}

/// The settings every scheduler case picks from (besides the defaults):
/// the ends of ranges that once broke schedulers.
fn settings_for(name: &str, rng: &mut Pcg64) -> Settings {
    let mut s = Settings::new();
    let Ok(infos) = bfq_schedulers::settings_of(name) else {
        return s;
    };
    for info in infos {
        if rng.gen_ratio(1, 6) {
            let v = match info.kind {
                bfq_core::settings::SettingKind::Integer { lo, hi } => {
                    [lo, hi, rng.gen_range(lo..=hi)][rng.gen_range(0..3)].to_string()
                }
                bfq_core::settings::SettingKind::IntegerOrZero { lo, hi } => {
                    [0, lo, hi, rng.gen_range(lo..=hi)][rng.gen_range(0..4)].to_string()
                }
                bfq_core::settings::SettingKind::Duration { lo, hi } => {
                    format!(
                        "{}ns",
                        [lo, hi, rng.gen_range(lo..=hi)][rng.gen_range(0..3)]
                    )
                }
                bfq_core::settings::SettingKind::Bool => rng.gen_range(0..2).to_string(),
                bfq_core::settings::SettingKind::Word { ref names, .. } => {
                    names[rng.gen_range(0..names.len())].to_string()
                }
                _ => continue,
            };
            s.set(info.key, v);
        }
    }
    s
}

/// What the harness knows the scheduler holds.
#[derive(Default)]
struct Model {
    flows: Vec<FlowId>,
    removed: Vec<FlowId>,
    groups: Vec<GroupId>,
    /// Flows and groups held by each group (removal must be refused while
    /// it holds any).
    children: BTreeMap<GroupId, u32>,
    group_of: BTreeMap<FlowId, GroupId>,
    parent_of: BTreeMap<GroupId, GroupId>,
    queued: BTreeSet<u64>,
    in_flight: BTreeSet<u64>,
    next_id: u64,
    most_flows: usize,
    most_groups: usize,
}

/// A failed check: what, and the case to replay.
pub struct Failure(pub String);

fn fail<T>(what: String) -> Result<T, Failure> {
    Err(Failure(what))
}

/// One scheduler case: `ops` random calls on a fresh `name` built with
/// random settings. Returns the calls made.
fn scheduler_case(name: &str, seed: u64, ops: u32) -> Result<u64, Failure> {
    let mut rng = Pcg64::seed_from_u64(seed);
    let settings = settings_for(name, &mut rng);
    let mut s = match bfq_schedulers::build(name, &settings) {
        Ok(s) => s,
        // A contradictory pair drawn from the ranges: refused, fine.
        Err(SchedError::InvalidSetting { .. }) => bfq_schedulers::build(name, &Settings::new())
            .map_err(|e| Failure(format!("{name}: default build: {e}")))?,
        Err(e) => return fail(format!("{name}: build: {e}")),
    };
    let mut m = Model {
        groups: vec![GroupId::ROOT],
        ..Model::default()
    };
    // Start anywhere up to near the end of time.
    let mut now: Time = if rng.gen_ratio(1, 4) {
        MAX_TIME - 10_000 * 3600 * SEC
    } else {
        rng.gen_range(0..1_000 * SEC)
    };
    // Calls past the end of the clock come from a stream of their own, so
    // that a seed's other calls are the same with or without them.
    let mut late = Pcg64::seed_from_u64(seed ^ LATE_STREAM);
    let mut calls = 0;
    for _ in 0..ops {
        calls += 1;
        if late.gen_ratio(1, 50) {
            calls += 1;
            late_call(&mut *s, &m, &mut late, name)?;
        }
        step(&mut *s, &mut m, &mut rng, &mut now, name)?;
        check_counts(&*s, &m, name)?;
    }
    calls += drain(&mut *s, &mut m, &mut now, name)?;
    // Everything removed: nothing may remain held.
    for f in std::mem::take(&mut m.flows) {
        s.remove_flow(now, f)
            .map_err(|e| Failure(format!("{name}: remove {f:?}: {e}")))?;
    }
    Ok(calls)
}

/// Seeds the stream of calls past `MAX_TIME` (with the case's seed).
const LATE_STREAM: u64 = 0x6c61_7465_5f74_696d;

/// One call with a `now` past `MAX_TIME`, the end of a scheduler's clock:
/// it must be refused (`TimeOutOfRange`; `dispatch`: `Wait`, or `Empty`
/// with nothing queued) and change nothing.
fn late_call(s: &mut dyn Scheduler, m: &Model, rng: &mut Pcg64, name: &str) -> Result<(), Failure> {
    let t = match rng.gen_range(0..3) {
        0 => MAX_TIME + 1,
        1 => rng.gen_range(MAX_TIME + 1..u64::MAX),
        _ => u64::MAX,
    };
    let flow = pick(&m.flows, rng).unwrap_or(FlowId(0));
    let (call, got) = match rng.gen_range(0..5) {
        0 => ("add_flow", s.add_flow(t, FlowSpec::default()).map(|_| ())),
        1 => ("remove_flow", s.remove_flow(t, flow)),
        2 => {
            let r = Request {
                id: m.next_id + 1,
                flow,
                sector: rng.gen_range(0..1u64 << 30),
                sectors: 8,
                op: Op::Read,
                sync: true,
            };
            ("add_request", s.add_request(t, r))
        }
        3 => {
            let id = pick(&m.in_flight.iter().copied().collect::<Vec<_>>(), rng);
            ("complete", s.complete(t, id.unwrap_or(u64::MAX - 1)))
        }
        _ => {
            let want = if m.queued.is_empty() {
                Dispatch::Empty
            } else {
                Dispatch::Wait
            };
            match s.dispatch(t) {
                d if d == want => return check_counts(s, m, name),
                d => return fail(format!("{name}: dispatch({t}) = {d:?}, not {want:?}")),
            }
        }
    };
    if got != Err(SchedError::TimeOutOfRange(t)) {
        return fail(format!("{name}: {call} at {t} (past MAX_TIME) = {got:?}"));
    }
    check_counts(s, m, name)
}

fn check_counts(s: &dyn Scheduler, m: &Model, name: &str) -> Result<(), Failure> {
    if s.queued() != m.queued.len() || s.in_flight() != m.in_flight.len() {
        return fail(format!(
            "{name}: queued/in_flight {}/{} but {}/{} handed in",
            s.queued(),
            s.in_flight(),
            m.queued.len(),
            m.in_flight.len()
        ));
    }
    Ok(())
}

fn pick<T: Copy>(v: &[T], rng: &mut Pcg64) -> Option<T> {
    (!v.is_empty()).then(|| v[rng.gen_range(0..v.len())])
}

fn step(
    s: &mut dyn Scheduler,
    m: &mut Model,
    rng: &mut Pcg64,
    now: &mut Time,
    name: &str,
) -> Result<(), Failure> {
    match rng.gen_range(0..100) {
        0..=5 => add_flow(s, m, rng, *now, name),
        6..=9 => remove_flow(s, m, rng, *now, name),
        10..=12 => groups(s, m, rng, name),
        13..=14 => {
            let depth = [0, 1, 32, 1 << 20, u32::MAX][rng.gen_range(0..5)];
            s.set_device(DeviceInfo {
                queue_depth: depth,
                queues_internally: rng.gen(),
                rotational: rng.gen(),
            });
            Ok(())
        }
        15..=54 => add_request(s, m, rng, *now, name),
        55..=79 => dispatch_once(s, m, *now, name).map(|_| ()),
        80..=94 => complete(s, m, rng, *now, name),
        _ => {
            let dt = [MS / 10, MS, 50 * MS, 2 * SEC, 3600 * SEC][rng.gen_range(0..5)];
            *now = now.saturating_add(dt).min(MAX_TIME);
            Ok(())
        }
    }
}

fn spec(m: &Model, rng: &mut Pcg64) -> (FlowSpec, bool) {
    let bad = rng.gen_ratio(1, 10);
    let weight = if bad && rng.gen() {
        Some([0, 1001, u32::MAX][rng.gen_range(0..3)])
    } else {
        rng.gen_ratio(1, 2).then(|| rng.gen_range(1..=1000))
    };
    let level = if bad && rng.gen() {
        8
    } else {
        rng.gen_range(0..8)
    };
    let class = IoClass::ALL[rng.gen_range(0..3)];
    let group = if bad && rng.gen() {
        GroupId(rng.gen_range(1000..2000))
    } else {
        pick(&m.groups, rng).unwrap_or(GroupId::ROOT)
    };
    let valid =
        weight.is_none_or(|w| (1..=1000).contains(&w)) && level <= 7 && m.groups.contains(&group);
    let spec = FlowSpec {
        weight,
        prio: IoPrio { class, level },
        group,
    };
    (spec, valid)
}

fn add_flow(
    s: &mut dyn Scheduler,
    m: &mut Model,
    rng: &mut Pcg64,
    now: Time,
    name: &str,
) -> Result<(), Failure> {
    let (spec, valid) = spec(m, rng);
    match (s.add_flow(now, spec), valid) {
        (Ok(f), true) => {
            if m.flows.contains(&f) {
                return fail(format!("{name}: add_flow returned live id {f:?}"));
            }
            m.flows.push(f);
            m.group_of.insert(f, spec.group);
            *m.children.entry(spec.group).or_default() += 1;
            m.most_flows = m.most_flows.max(m.flows.len());
            // Bounded memory: ids index tables sized by the most flows
            // held at once plus the reuse pool, not by flows ever made.
            if f.index() > m.most_flows + 2 * 256 + 64 {
                return fail(format!(
                    "{name}: flow index {} with at most {} flows held",
                    f.index(),
                    m.most_flows
                ));
            }
            Ok(())
        }
        (Err(_), false) => Ok(()),
        (r, _) => fail(format!("{name}: add_flow({spec:?}) = {r:?}")),
    }
}

fn remove_flow(
    s: &mut dyn Scheduler,
    m: &mut Model,
    rng: &mut Pcg64,
    now: Time,
    name: &str,
) -> Result<(), Failure> {
    if rng.gen_ratio(1, 4) {
        // A stale or bogus id must be refused.
        let f = pick(&m.removed, rng).unwrap_or(FlowId(u32::MAX));
        if !m.flows.contains(&f) && s.remove_flow(now, f).is_ok() {
            return fail(format!("{name}: removed flow {f:?} removed again"));
        }
        return Ok(());
    }
    let Some(i) = (!m.flows.is_empty()).then(|| rng.gen_range(0..m.flows.len())) else {
        return Ok(());
    };
    let f = m.flows.swap_remove(i);
    s.remove_flow(now, f)
        .map_err(|e| Failure(format!("{name}: remove_flow({f:?}): {e}")))?;
    if let Some(g) = m.group_of.remove(&f) {
        *m.children.entry(g).or_default() -= 1;
    }
    m.removed.push(f);
    if m.removed.len() > 64 {
        m.removed.remove(0);
    }
    Ok(())
}

fn groups(
    s: &mut dyn Scheduler,
    m: &mut Model,
    rng: &mut Pcg64,
    name: &str,
) -> Result<(), Failure> {
    if rng.gen() {
        let parent = pick(&m.groups, rng).unwrap_or(GroupId::ROOT);
        let w = if rng.gen_ratio(1, 8) {
            0
        } else {
            rng.gen_range(1..=1000)
        };
        match (s.add_group(parent, w), w > 0) {
            (Ok(g), true) => {
                m.groups.push(g);
                m.parent_of.insert(g, parent);
                *m.children.entry(parent).or_default() += 1;
                m.most_groups = m.most_groups.max(m.groups.len());
                if g.index() > m.most_groups + 2 * 256 + 64 {
                    return fail(format!("{name}: group index {} unbounded", g.index()));
                }
            }
            (Err(_), false) => {}
            (r, _) => return fail(format!("{name}: add_group({parent:?}, {w}) = {r:?}")),
        }
        return Ok(());
    }
    let Some(g) = pick(&m.groups, rng) else {
        return Ok(());
    };
    let empty = g != GroupId::ROOT && m.children.get(&g).copied().unwrap_or(0) == 0;
    match (s.remove_group(g), empty) {
        (Ok(()), true) => {
            m.groups.retain(|&x| x != g);
            m.children.remove(&g);
            if let Some(p) = m.parent_of.remove(&g) {
                *m.children.entry(p).or_default() -= 1;
            }
            Ok(())
        }
        (Err(_), false) => Ok(()),
        // Removed flows still holding requests keep their group busy.
        (Err(SchedError::GroupNotEmpty(_)), true) => Ok(()),
        (r, _) => fail(format!("{name}: remove_group({g:?}) = {r:?}")),
    }
}

fn add_request(
    s: &mut dyn Scheduler,
    m: &mut Model,
    rng: &mut Pcg64,
    now: Time,
    name: &str,
) -> Result<(), Failure> {
    let live = pick(&m.flows, rng);
    let (flow, flow_ok) = match (rng.gen_range(0..20), live) {
        (0, _) | (_, None) => (pick(&m.removed, rng).unwrap_or(FlowId(777_777)), false),
        (_, Some(f)) => (f, true),
    };
    let sectors = match rng.gen_range(0..20) {
        0 => 0,
        1 => u32::MAX,
        _ => 8 << rng.gen_range(0..6),
    };
    let sector = match rng.gen_range(0..20) {
        0 => u64::MAX - rng.gen_range(0..64),
        _ => rng.gen_range(0..1u64 << 30),
    };
    let dup = rng.gen_ratio(1, 30) && !m.queued.is_empty();
    let id = if dup {
        *m.queued.iter().next().expect("non-empty")
    } else {
        m.next_id += 1;
        m.next_id
    };
    let r = Request {
        id,
        flow,
        sector,
        sectors,
        op: if rng.gen_ratio(1, 4) {
            Op::Write
        } else {
            Op::Read
        },
        sync: rng.gen_ratio(3, 4),
    };
    let ok = flow_ok && !dup && sectors > 0 && sector.checked_add(u64::from(sectors)).is_some();
    let got = s.add_request(now, r);
    match (&got, ok) {
        (Ok(()), true) => {
            m.queued.insert(id);
            Ok(())
        }
        (Err(_), false) => Ok(()),
        _ => fail(format!("{name}: add_request({r:?}) = {got:?}")),
    }
}

/// One `dispatch`; returns the answer after checking it.
fn dispatch_once(
    s: &mut dyn Scheduler,
    m: &mut Model,
    now: Time,
    name: &str,
) -> Result<Dispatch, Failure> {
    let d = s.dispatch(now);
    match d {
        Dispatch::Request(r) => {
            if !m.queued.remove(&r.id) {
                return fail(format!("{name}: dispatched {} not queued (twice?)", r.id));
            }
            m.in_flight.insert(r.id);
        }
        Dispatch::Idle { until } if until <= now => {
            return fail(format!("{name}: idle until {until} <= now {now}"));
        }
        Dispatch::Empty if !m.queued.is_empty() => {
            return fail(format!("{name}: Empty with {} queued", m.queued.len()));
        }
        _ => {}
    }
    Ok(d)
}

fn complete(
    s: &mut dyn Scheduler,
    m: &mut Model,
    rng: &mut Pcg64,
    now: Time,
    name: &str,
) -> Result<(), Failure> {
    if rng.gen_ratio(1, 8) {
        // Not in flight: queued, completed already, or unknown.
        let id = pick(&m.queued.iter().copied().collect::<Vec<_>>(), rng).unwrap_or(u64::MAX - 1);
        if s.complete(now, id).is_ok() {
            return fail(format!("{name}: completed {id}, which was not in flight"));
        }
        return Ok(());
    }
    // Any request in flight, not only the oldest: devices reorder.
    let n = m.in_flight.len();
    let Some(id) = (n > 0)
        .then(|| rng.gen_range(0..n))
        .and_then(|i| m.in_flight.iter().nth(i).copied())
    else {
        return Ok(());
    };
    m.in_flight.remove(&id);
    s.complete(now, id)
        .map_err(|e| Failure(format!("{name}: complete({id}): {e}")))
}

/// Serves everything held, with no new requests: must end (no stall).
fn drain(s: &mut dyn Scheduler, m: &mut Model, now: &mut Time, name: &str) -> Result<u64, Failure> {
    let mut calls = 0;
    while !m.queued.is_empty() || !m.in_flight.is_empty() {
        calls += 1;
        let d = dispatch_once(s, m, *now, name)?;
        if calls > 1_000_000 {
            return fail(format!(
                "{name}: stalled with {} queued, {} in flight at {now}: {d:?}",
                m.queued.len(),
                m.in_flight.len()
            ));
        }
        match d {
            Dispatch::Request(_) => {}
            Dispatch::Idle { until } if m.in_flight.is_empty() => *now = until.min(MAX_TIME),
            _ => {
                let Some(&id) = m.in_flight.iter().next() else {
                    return fail(format!(
                        "{name}: holds {} queued, dispatches none",
                        m.queued.len()
                    ));
                };
                *now = (*now + MS / 2).min(MAX_TIME);
                m.in_flight.remove(&id);
                s.complete(*now, id)
                    .map_err(|e| Failure(format!("{name}: complete({id}): {e}")))?;
            }
        }
        check_counts(s, m, name)?;
    }
    Ok(calls)
}

/// Replaces one value of a scenario text with an extreme one, or damages
/// a line.
fn mutate(text: &str, rng: &mut Pcg64) -> String {
    const VALUES: &[&str] = &[
        "0",
        "\"0\"",
        "\"1ns\"",
        "\"1\"",
        "-1",
        "1e300",
        "\"nan\"",
        "18446744073709551615",
        "\"18446744073709551615\"",
        "\"10000000000s\"",
        "\"1G\"",
        "\"1T\"",
        "\"\"",
        "\"0%\"",
        "\"100%\"",
        "\"1..0\"",
        "true",
        "[]",
        "{}",
        "4294967295",
        "\"64M..1k\"",
    ];
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for _ in 0..rng.gen_range(1..4) {
        if lines.is_empty() {
            break;
        }
        let i = rng.gen_range(0..lines.len());
        let l = &lines[i];
        lines[i] = match (l.find('='), rng.gen_range(0..10)) {
            (Some(eq), 0..=7) => {
                format!("{}= {}", &l[..eq], VALUES[rng.gen_range(0..VALUES.len())])
            }
            (_, 8) => String::new(),
            _ => {
                let cut = rng.gen_range(0..=l.len());
                l.get(..cut).unwrap_or(l).to_string()
            }
        };
    }
    lines.join("\n")
}

/// One scenario case: a mutated shipped scenario is parsed, planned and
/// (if valid) simulated for up to 200 ms of simulated time.
fn scenario_case(texts: &[(String, String)], seed: u64) -> Result<bool, Failure> {
    let mut rng = Pcg64::seed_from_u64(seed);
    let (name, text) = &texts[rng.gen_range(0..texts.len())];
    let text = mutate(text, &mut rng);
    let outcome = std::panic::catch_unwind(|| -> Result<bool, String> {
        let Ok(sc) = bfq_sim::Scenario::from_toml_str(&text, name) else {
            return Ok(false);
        };
        if sc.plan().is_err() {
            return Ok(false);
        }
        let Ok(sched) = bfq_schedulers::build(sc.scheduler_name(), &sc.scheduler.settings) else {
            return Ok(false);
        };
        let opts = bfq_sim::SimOptions {
            stop_at: Some(200 * MS),
            ..Default::default()
        };
        bfq_sim::simulate(&sc, sched, sc.seed, opts)
            .map(|_| true)
            .map_err(|e| e.to_string())
            .or(Ok(false))
    });
    match outcome {
        Ok(Ok(ran)) => Ok(ran),
        Ok(Err(e)) => fail(format!("{name} (seed {seed}): {e}")),
        Err(_) => fail(format!("{name} (seed {seed}): panicked on\n{text}")),
    }
}

/// Runs `case` for `args.cases` cases or `args.minutes`; prints and
/// returns the count.
fn run_cases(
    what: &str,
    a: &Args,
    mut case: impl FnMut(u64) -> Result<u64, Failure>,
) -> anyhow::Result<()> {
    let start = Instant::now();
    let budget = a.minutes.map(|m| Duration::from_secs_f64(m * 60.0));
    let (mut n, mut units) = (0u64, 0u64);
    loop {
        let done = match budget {
            Some(b) => start.elapsed() >= b,
            None => n >= a.cases,
        };
        if done {
            break;
        }
        let seed = a.seed.wrapping_add(n);
        // A panic is a failure of this seed too.
        let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| case(seed)))
            .unwrap_or_else(|_| Err(Failure("panicked (message above)".into())));
        units += got.map_err(|Failure(why)| anyhow::anyhow!("{what}: seed {seed}: {why}"))?;
        n += 1;
    }
    println!(
        "{what}: {n} cases, {units} calls/runs, clean, in {:.1} s (seeds {}..{})",
        start.elapsed().as_secs_f64(),
        a.seed,
        a.seed.wrapping_add(n)
    );
    Ok(())
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let names: Vec<&str> = bfq_schedulers::SCHEDULERS.iter().map(|e| e.name).collect();
    let picked: Vec<&str> = match a.target.as_str() {
        "all" | "schedulers" => names.clone(),
        "scenarios" => Vec::new(),
        one if names.contains(&one) => vec![one],
        other => anyhow::bail!(
            "--target '{other}': expected schedulers, scenarios, all or a scheduler ({})",
            names.join(", ")
        ),
    };
    // The scenarios are read first: a missing directory fails before the
    // scheduler cases run.
    let texts = match a.target.as_str() {
        "all" | "scenarios" => Some(load_scenarios(a.scenarios.as_deref())?),
        _ => None,
    };
    for name in picked {
        run_cases(&format!("scheduler {name}"), &a, |seed| {
            scheduler_case(name, seed, a.ops)
        })?;
    }
    if let Some(texts) = texts {
        // Parsing and planning print nothing; silence the simulator's
        // panics' messages only through catch_unwind's report above.
        run_cases("scenarios", &a, |seed| {
            scenario_case(&texts, seed).map(u64::from)
        })?;
    }
    Ok(())
}
