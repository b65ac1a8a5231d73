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
//! The bound, from the paper: G, continuously backlogged from the start,
//! gets at least phi W - (B_max + L_max) (Theorem 1's (11) with no lag
//! at t1 = 0); X, of the same phi and not always backlogged, gets at
//! most phi W plus its lead, which Lemma 3 bounds by its budget, at most
//! B_max. So X's service is at most G's + 2 B_max + L_max, no relative
//! tolerance: the bound does not grow with the service. B_max is the
//! scheduler's largest budget at the end of the run (learned from the
//! peak rate: about 21 000 sectors on `disk()`, 60 000-250 000 on
//! `flash()`), L_max the largest request of X and G.
//!
//! The property holds in every drawn case with `inject_ahead_bound` on,
//! not as `bfq` ships (the rule off): 5 of the 160 cases break it there,
//! kept as an ignored test. The paper has no injection: with the rule an
//! injected flow may still run a budget ahead of V, which the bound does
//! not count; one such case, found in a wider scan, is kept, ignored,
//! below. The cases come from a seeded
//! generator, the same at every run; each run checks that X and G were
//! never weight-raised.

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

/// What X and G got (sectors), and the bound's B_max and L_max.
#[derive(Debug)]
struct Outcome {
    x: u64,
    g: u64,
    b_max: u64,
    l_max: u64,
}

impl Outcome {
    /// X's service beyond G's + 2 B_max + L_max (positive: the bound broke).
    fn excess(&self) -> i64 {
        self.x as i64 - (self.g + 2 * self.b_max + self.l_max) as i64
    }
}

/// Runs `c` under `profile` with settings `kv`; checks X and G were never
/// weight-raised.
fn run_case(c: &Case, profile: &str, kv: &[(&str, &str)]) -> Outcome {
    let settings = Settings::from_pairs(kv.iter().copied());
    let mut s = Bfq::from_profile(profile, &settings).unwrap();
    let mut defs: Vec<FlowDef> = c
        .others
        .iter()
        .map(|&w| FlowDef::new(w, Kind::Sync { think: 0 }))
        .collect();
    defs.push(FlowDef::new(c.w, Kind::Sync { think: 0 }));
    let mut x = FlowDef::new(c.w, Kind::Sync { think: c.think });
    if c.burst > 1 {
        x.kind = Kind::Bursts {
            burst: c.burst,
            pause: c.think,
        };
    }
    x.seq = c.seq;
    defs.push(x);
    let n = defs.len();
    for (i, d) in defs.iter_mut().enumerate() {
        d.base = i as u64 * 100_000_000;
        d.size = if i + 2 >= n { c.sectors } else { 128 };
    }
    let dev = if c.flash { flash() } else { disk() };
    let log = run(&mut s, dev, &defs, c.secs * SEC, 1);
    for &f in &log.flows[n - 2..] {
        assert_eq!(s.flow_weight(f).unwrap(), (c.w, RaiseKind::None), "{c:?}");
    }
    Outcome {
        x: log.per_flow[n - 1],
        g: log.per_flow[n - 2],
        b_max: s.max_budget(),
        l_max: u64::from(c.sectors.max(128)),
    }
}

/// Cases per run: about 4 s in release.
const CASES: u64 = 160;

/// The rule under which the property holds: `inject_ahead_bound`, off in
/// `bfq` (docs/bfq-settings.md says why).
const AHEAD_BOUND: [(&str, &str); 1] = [("inject_ahead_bound", "1")];

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

/// The property over `CASES` drawn cases, `bfq` profile with
/// `inject_ahead_bound` on (module doc). Without the rule, as `bfq`
/// ships, 5 of the 160 cases break it (X / G 1.88, 1.81, 1.54, 1.44 and
/// 1.31: cases 28, 51, 36, 92, 146; case 28: X 770 048 sectors, G 409 600,
/// 177 906 beyond the bound): the injection defect the rule was tried
/// for (`bfq_as_shipped_keeps_the_property`, ignored).
#[test]
fn no_reading_pattern_gains_over_a_greedy_reader_of_its_weight() {
    let broken = breaking("bfq", &AHEAD_BOUND);
    assert!(broken.is_empty(), "{:?}", broken.first());
}

/// What `bfq` as shipped should keep and does not: the property without
/// `inject_ahead_bound` (see `no_reading_pattern_gains_over_a_greedy_reader_of_its_weight`).
#[test]
#[ignore = "known defect: injection lets a reader that leaves B-WF2Q+ at each injected read gain up to 1.88x over a greedy reader of its weight (5 of 160 cases)"]
fn bfq_as_shipped_keeps_the_property() {
    let broken = breaking("bfq", &[]);
    assert!(
        broken.is_empty(),
        "{} of {CASES}: {:?}",
        broken.len(),
        broken.first()
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

/// On `flash()`, readers of weights 1000, 150 and 150, the two light ones
/// reading 4 MiB sequentially: G greedy, X in bursts of 7 reads back to
/// back, then `pause`; for `secs` seconds, `inject_ahead_bound` on.
fn bursts_beside_greedy(pause: Time, secs: u64, kv: &[(&str, &str)]) -> Outcome {
    let c = Case {
        flash: true,
        others: vec![1000],
        w: 150,
        sectors: 8192,
        think: pause,
        seq: true,
        burst: 7,
        secs,
    };
    let kv: Vec<_> = AHEAD_BOUND.iter().chain(kv).copied().collect();
    run_case(&c, "bfq", &kv)
}

/// A reader in bursts back within `preempt_in_time` gets more than the
/// paper's bound over a greedy reader of its weight. Readers of weights
/// 1000, 150 and 150 on `flash()`, the light ones reading 4 MiB: G
/// greedy, X in bursts of 7 reads, back 20 ms after each burst. In 6 s X
/// gets 638 976 sectors, G 450 560 (1.42), B_max 79 318: 21 588 beyond
/// G + 2 B_max + L_max. Most of both is injected into the heavy reader's
/// turns (X 589 824, G 417 792). X's lead over G peaks near 190 000-
/// 210 000 sectors early and stays there (40 s: 3 104 768 against
/// 2 940 928, 1.056, 2 200 beyond): a bounded lead, not a rate. It takes
/// three rules together: injection (off: 0.94), preemption (off: 1.09,
/// the lead 98 304) and the back-shift after a timeout charged its
/// service (`in_time_after_timeout`, off: 0.95); with a pause of 25 ms or
/// more, later than `preempt_in_time` (24 ms), X gets 1.10-1.14, within
/// the bound. An injected turn ends at T_max charged its service; X,
/// back in time, keeps its old timestamps, preempts the heavy reader and
/// is injected again up to a budget ahead of V (`inject_ahead_bound`):
/// one budget beyond Lemma 3's lead, which the paper's bound (no
/// injection) does not count. `bfq-kernel`: 0.82. Of 2000 drawn cases
/// (seeds 0-1999) two more break the bound, both on `flash()` with 4 MiB
/// reads and a think time of 24.3 ms, 1.20 and 1.22 of G's service, 47 394
/// and 39 782 beyond; each is within it with any of the three rules off.
#[test]
#[ignore = "fails: X leads G by 2.4-2.7 B_max, over the paper's 2 B_max + L_max (injection, in-time back-shift after a timeout, preemption)"]
fn a_reader_in_bursts_back_in_time_leads_a_greedy_one_by_at_most_the_bound() {
    let o = bursts_beside_greedy(20 * MS, 6, &[]);
    assert!(o.excess() <= 0, "{o:?}, excess {}", o.excess());
}
