//! No reading pattern gains service over a greedy reader of the same
//! weight (2010 paper, Sec. III-A, Theorem 1 and Lemma 3): BFQ serves
//! flows in proportion to their weights whatever their request sizes,
//! think times and bursts, except where it means to favour a flow (weight
//! raising, which `wr_default_weight_only` keeps from flows with an
//! explicit weight other than their level's default of 40), and a flow
//! that is not always backlogged may get less.
//!
//! Each case draws a device (`flash()` or `disk()`), a greedy reader of
//! 64 KiB of weight 100-1000, up to two more of weight 10-1000, and two
//! flows of one weight w in 10-300 (not 40) reading one request size in
//! 4 KiB-4 MiB: G, greedy and sequential, and X, sequential or random,
//! back after a think time in 0-60 ms (half the cases within 0.5 ms of
//! 2, 4, 8, 16 or 24 ms: `slice_idle_seeky`, the short-think threshold,
//! `slice_idle`, twice it and `preempt_in_time`) after each read or,
//! half the time, after each burst of 2-16 reads back to back; 5-10 s.
//!
//! The bound, from the paper: at any time t, G, continuously backlogged
//! from the start, has got at least phi V(t) - (B_max + L_max) (Theorem
//! 1's (11) with no lag at t1 = 0); X, of the same phi and not always
//! backlogged, at most phi V(t) plus a lead of at most its budget, at most
//! B_max (its F is at most V + B_max / phi: (4), with Lemma 3). So X's
//! lead over G is at most 2 B_max + L_max at every dispatch, no relative
//! tolerance: the bound does not grow with the service. B_max is the
//! scheduler's largest budget over the run (learned from the peak rate,
//! which may also fall: 16 384-22 200 sectors on `disk()`, 16 384 or
//! 48 000-157 000 on `flash()`), L_max the largest request of X and G.
//!
//! The property holds in every drawn case as `bfq` ships, with
//! `inject_ahead_bound`; with the rule off 5 of the 160 cases break it.
//! The paper has no injection: with the rule an injected flow may be up
//! to two of its budgets ahead of V (its S with its debt and the request
//! injected), where the bound counts one. Of the first 2000 drawn cases,
//! 3 broke it while the rule measured from V (616, 1260, 1799), 1 since
//! (1260: X / G 1.17, 8 442 sectors beyond the bound; X held at two of
//! its budgets ahead of V, G's turns starting some 23 000 sectors behind
//! V, more than 2 B_max + L_max leaves; the check without the flow's own
//! debt let X 24 386 sectors past it; one budget would hold it, at 23% of
//! the total in `inject_ahead_bound_keeps_most_of_the_total_beside_a_sequential_reader`);
//! case 616 is kept below. The cases come from a
//! seeded generator, the same at every run; each run checks that X and G
//! were never weight-raised.

mod common;
use bfq_core::bfq::weight_raising::RaiseKind;
use bfq_core::*;
use common::*;

/// One scenario: the device, the other readers' weights (the heavy one
/// first), w, and X's pattern.
#[derive(Clone, Debug)]
struct Case {
    flash: bool,
    others: Vec<u32>,
    w: u32,
    sectors: u32,
    think: Time,
    seq: bool,
    /// Reads back to back before each think time (1: a think after each).
    burst: u32,
    secs: u64,
}

/// `lo..=hi` from `rng`.
fn pick(rng: &mut Rng, lo: u64, hi: u64) -> u64 {
    lo + rng.next() % (hi - lo + 1)
}

/// A think time: uniform in 0-60 ms, or within 0.5 ms of a threshold.
fn think(rng: &mut Rng) -> Time {
    if rng.next().is_multiple_of(2) {
        return pick(rng, 0, 60_000) * US;
    }
    let at = [2, 4, 8, 16, 24][pick(rng, 0, 4) as usize] * 1000;
    (at + pick(rng, 0, 1000) - 500) * US
}

/// Case number `seed` (see the module doc).
fn draw(seed: u64) -> Case {
    let mut rng = Rng::new(seed);
    let mut others = vec![pick(&mut rng, 100, 1000) as u32];
    for _ in 0..pick(&mut rng, 0, 2) {
        others.push(pick(&mut rng, 10, 1000) as u32);
    }
    let mut w = pick(&mut rng, 10, 299) as u32;
    if w >= 40 {
        w += 1;
    }
    let burst = if rng.next().is_multiple_of(2) {
        1
    } else {
        pick(&mut rng, 2, 16) as u32
    };
    Case {
        flash: rng.next().is_multiple_of(2),
        others,
        w,
        sectors: 8 << pick(&mut rng, 0, 10),
        think: think(&mut rng),
        seq: rng.next().is_multiple_of(2),
        burst,
        secs: pick(&mut rng, 5, 10),
    }
}

/// What X and G got (sectors), X's largest lead over G at any dispatch,
/// and the bound's B_max (the largest over the run) and L_max.
#[derive(Debug)]
struct Outcome {
    x: u64,
    g: u64,
    lead: i64,
    b_max: u64,
    l_max: u64,
}

impl Outcome {
    /// X's largest lead over G beyond 2 B_max + L_max (positive: the bound
    /// broke at some time of the run).
    fn excess(&self) -> i64 {
        self.lead - (2 * self.b_max + self.l_max) as i64
    }
}

/// Runs `c` under profile `name` with settings `kv`; checks X and G were not
/// weight-raised at any of their dispatches nor at the end.
fn run_case(c: &Case, name: &str, kv: &[(&str, &str)]) -> Outcome {
    run_beside(c, None, name, kv)
}

/// [`run_case`] with flow `rider` (if any) first, beside the others.
fn run_beside(c: &Case, rider: Option<FlowDef>, name: &str, kv: &[(&str, &str)]) -> Outcome {
    let mut s = profile(name, kv);
    let weights: Vec<u32> = c.others.iter().copied().chain([c.w, c.w]).collect();
    let mut defs: Vec<FlowDef> = rider.into_iter().collect();
    defs.extend(greedy_readers(&weights));
    let n = defs.len();
    for d in &mut defs[n - 2..] {
        d.size = c.sectors;
    }
    let x = &mut defs[n - 1];
    x.kind = if c.burst > 1 {
        Kind::Bursts {
            burst: c.burst,
            pause: c.think,
        }
    } else {
        Kind::Sync { think: c.think }
    };
    x.seq = c.seq;
    let dev = if c.flash { flash() } else { disk() };
    let (mut b_max, mut raised) = (0, vec![]);
    let log = run_with(&mut s, dev, &defs, c.secs * SEC, 1, |s, r| {
        b_max = b_max.max(s.max_budget());
        if s.flow_weight(r.flow)
            .is_some_and(|(_, k)| k != RaiseKind::None)
        {
            raised.push(r.flow);
        }
    });
    // The rider, if any, was raised at some of its dispatches.
    if defs.len() > weights.len() {
        assert!(raised.contains(&log.flows[0]), "{c:?}");
    }
    for &f in &log.flows[n - 2..] {
        assert!(!raised.contains(&f), "{c:?}");
        assert_eq!(s.flow_weight(f).unwrap(), (c.w, RaiseKind::None), "{c:?}");
    }
    let lead = (log.served.iter())
        .scan(0i64, |lead, x| {
            let d = x.sectors as i64;
            *lead += match n - 1 - x.flow {
                0 => d,
                1 => -d,
                _ => 0,
            };
            Some(*lead)
        })
        .fold(0, i64::max);
    Outcome {
        x: log.per_flow[n - 1],
        g: log.per_flow[n - 2],
        lead,
        b_max,
        l_max: u64::from(c.sectors.max(128)),
    }
}

/// Cases per run: about 4 s in release.
const CASES: u64 = 160;

/// The drawn cases that break the bound under `profile` with `kv`, the
/// worst X / G first: (X / G, seed, case, outcome).
fn breaking(profile: &str, kv: &[(&str, &str)]) -> Vec<(f64, u64, Case, Outcome)> {
    let mut broken: Vec<_> = (0..CASES)
        .map(|seed| (seed, draw(seed)))
        .map(|(seed, c)| (seed, run_case(&c, profile, kv), c))
        .filter(|(_, o, _)| o.excess() > 0)
        .map(|(seed, o, c)| (o.x as f64 / o.g.max(1) as f64, seed, c, o))
        .collect();
    broken.sort_by(|a, b| b.0.total_cmp(&a.0));
    broken
}

/// The property over `CASES` drawn cases, `bfq` profile (module doc).
#[test]
fn no_reading_pattern_gains_over_a_greedy_reader_of_its_weight() {
    let broken = breaking("bfq", &[]);
    assert!(broken.is_empty(), "{:?}", broken.first());
}

/// `inject_ahead_bound` is what keeps the property: without it 5 of the
/// 160 cases break it (X / G 1.88, 1.81, 1.54, 1.44 and 1.31: cases 28,
/// 51, 36, 92, 146; case 28: X 770 048 sectors, G 409 600, 177 906 beyond
/// the bound), readers that leave B-WF2Q+ at each injected read.
#[test]
fn without_inject_ahead_bound_injection_breaks_the_property() {
    let broken = breaking("bfq", &[("inject_ahead_bound", "0")]);
    assert!(
        !broken.is_empty(),
        "no case broke the bound without the rule"
    );
}

/// The same cases under `bfq-kernel`, reported, not asserted: how many
/// break the bound, and the worst X / G ratios. Run with `--ignored
/// --nocapture`.
#[test]
#[ignore = "a report on the kernel's mechanisms, not a check"]
fn kernel_profile_against_the_property() {
    let worst = breaking("bfq-kernel", &[]);
    eprintln!(
        "bfq-kernel: {} of {CASES} cases break the bound",
        worst.len()
    );
    for (ratio, seed, c, o) in worst.iter().take(8) {
        eprintln!(
            "case {seed}: X/G {ratio:.2}, excess {} {c:?} {o:?}",
            o.excess()
        );
    }
}

/// X reading 4 MiB at random positions and back 24.3 ms after each
/// completion (just later than `preempt_in_time`, 24 ms), beside G and
/// readers of weights 149 and 417, all on `flash()`, w 129, 10 s (drawn
/// case 616). Neither X nor G ever has a request of its own served in a
/// turn: both are injected into the other readers' turns, G held to its
/// budget by its debt (its 23 turns each charge the debt and end at once),
/// X charged at each read as it leaves B-WF2Q+ and back at S = its F. V
/// runs thousands of units of weight-1 service past every backlogged
/// reader (the drift `lag_anchor` describes) and 1 600-2 400 past X's S:
/// `inject_ahead_bound` measured from V never held X, which led G by up
/// to 352 256 sectors, 96 120 beyond the bound's 256 136 (B_max
/// 123 972), with 1.23 of G's service. Measured from the anchored V
/// ([`bfq_core::bfq::wf2q::Wf2q::within`]; 2010 paper, appendix, Lemma
/// 2) with the entity in service counted (`inject_ahead_waiting_anchor=0`):
/// lead 32 768, X / G 0.95 (B_max 119 013) when first measured, 0.80 on
/// the build that added that setting; from the anchor without the entity
/// in service (as `bfq` ships): lead 131 072, X / G 1.06 (B_max
/// 121 751), 120 622 sectors within the bound (over the 160 drawn cases
/// the least margin is 26 010 sectors either way, case 42); with injection,
/// preemption or the in-time back-shift after a timeout off 0.53, 0.85
/// and 0.81; with `lag_anchor` off, which also takes the anchor from the
/// check, 1.16 (8 394 sectors within the bound); `bfq-kernel` 0.65. Drawn
/// case 1799 (sequential, bursts of 4, the same think time) was alike:
/// 1.29, now 1.11 within the bound.
#[test]
fn a_reader_back_in_time_leads_a_greedy_one_by_at_most_the_bound() {
    let o = run_case(&draw(616), "bfq", &[]);
    assert!(o.excess() <= 0, "{o:?}, excess {}", o.excess());
}

/// A flow of the default weight, so weight-raised: an application
/// starting at 0 (a 4 KiB random reader thinking 5 ms, raised as
/// interactive) or, `soft_rt`, a player reading 32 KiB every 40 ms from
/// 0.5 s on (raised as soft real-time once its interactive raising ends,
/// `wr_max_time=1s`). Its region is far from the readers'.
fn raised_rider(soft_rt: bool) -> FlowDef {
    let think = if soft_rt { 40 * MS } else { 5 * MS };
    let mut d = FlowDef::new(40, Kind::Sync { think });
    d.spec = FlowSpec::default();
    d.base = 900_000_000;
    if soft_rt {
        d.size = 64;
        d.start = 500 * MS;
    } else {
        d.size = 8;
        d.seq = false;
    }
    d
}

/// The drawn cases that break the bound beside a raised rider
/// ([`raised_rider`]), `bfq` with settings `kv`: (seed, excess, outcome).
fn breaking_beside(soft_rt: bool, kv: &[(&str, &str)]) -> Vec<(u64, i64, Outcome)> {
    let mut kv = kv.to_vec();
    if soft_rt {
        kv.push(("wr_max_time", "1s"));
    }
    (0..CASES)
        .map(|seed| {
            (
                seed,
                run_beside(&draw(seed), Some(raised_rider(soft_rt)), "bfq", &kv),
            )
        })
        .filter(|(_, o)| o.excess() > 0)
        .map(|(seed, o)| (seed, o.excess(), o))
        .collect()
}

/// The property beside a weight-raised flow, over the same drawn cases:
/// X and G (never raised) are injected into the raised flow's turns held
/// to B_max sectors per turn, not to a share of the turn nor to a lead on
/// V (`inject_into_raised_b_max`). Whatever it is injected there is
/// charged to its timestamps (its debt at its next turn, or its S and F
/// as it leaves B-WF2Q+), and the flows injected into one turn are tried
/// least injected into it per unit of weight first, so X's lead over G
/// stays within 2 B_max + L_max (module doc). Measured: the least margin
/// 32 880 sectors beside the starting application (case 149; 31 616
/// with the rule off, case 143), 25 778 beside the player (case 157, the
/// same with the rule off); X / G at most 1.18 and 1.37 (1.27 and 1.37
/// off). The rider is raised at its dispatches (checked): the
/// application as interactive, the player as soft real-time once its
/// first second is over. The player is sequential, so its turns are not
/// ridden (only a seeky raised flow's are): beside it the rule must not
/// act at all.
/// Mutation: the rule in every turn, not only a raised flow's
/// (`rides_raised_turn` without its raised check): 16 of 160 cases break
/// the bound beside the application, up to 1 976 092 sectors beyond it
/// (case 90: X 2 478 080 sectors, G 262 144), as they break it without
/// `inject_ahead_bound` (readers that leave B-WF2Q+ at each injected
/// read).
#[test]
fn no_reading_pattern_rides_a_raised_flows_turns_past_the_bound() {
    for soft_rt in [false, true] {
        let broken = breaking_beside(soft_rt, &[]);
        let worst = broken.iter().max_by_key(|b| b.1);
        assert!(
            broken.is_empty(),
            "{soft_rt}: {} broken, worst {worst:?}",
            broken.len()
        );
    }
}
