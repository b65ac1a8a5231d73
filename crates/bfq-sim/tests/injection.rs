//! `bfq`'s injection rules on the simulated SSD, with the 2018 article's
//! workloads (a target of weight 300 against four interferers of weight
//! 100, each in its own group). Deterministic: simulated time only.

use bfq_core::{Bfq, Settings};
use bfq_sim::{simulate, Scenario, SimOptions, SimResult};

/// Total MiB/s after the first 5 s (the raising of the new flows over).
fn steady_total(r: &SimResult) -> f64 {
    let n = r.flows[0].series_mib_s.len();
    let sum: f64 = r
        .flows
        .iter()
        .map(|f| f.series_mib_s[5..].iter().sum::<f64>())
        .sum();
    sum / (n - 5) as f64
}

#[test]
fn a_read_is_always_injected_into_a_seeky_flows_idle_time() {
    // A sequential target (weight 300) against the article's "varying
    // randomness" readers, on a warm bfq with low_latency off (the suite's
    // 2018 set-up). Injected reads make the idling random readers' next
    // reads wait on the host interface, so their learned limits fall to 0
    // and the others are served in their own turns only. With the floor
    // one read is always in flight beside an idling seeky reader, once its
    // baseline is known.
    let s = target_against("seq", "128k", "read", VARYING);
    let go = |floor: &str| {
        let kv = [WARM, ("low_latency", "0"), ("inject_read_floor", floor)];
        let bfq = Bfq::from_profile("bfq", &Settings::from_pairs(kv)).unwrap();
        steady_total(&simulate(&s, Box::new(bfq), 1, SimOptions::default()).unwrap())
    };
    let (on, off) = (go("1"), go("0"));
    eprintln!("total {on:.1} MiB/s with the read floor, {off:.1} without");
    assert!(on > 1.05 * off, "{on} vs {off}");
}

/// The 2018 article's random target (weight 300) against four async
/// writers (weight 100 each), each in its own group; `kinds` gives each
/// writer's pattern and block size.
fn writers(kinds: [(&str, &str); 4]) -> Scenario {
    interferers("write", kinds)
}

/// The 2018 article's random target (weight 300) against four sync
/// readers (weight 100 each), each in its own group.
fn readers(kinds: [(&str, &str); 4]) -> Scenario {
    interferers("read", kinds)
}

fn interferers(op: &str, kinds: [(&str, &str); 4]) -> Scenario {
    target_against("rand", "4k", op, kinds)
}

/// A target of weight 300 (`pattern`, `block`) against four interferers
/// (weight 100 each), each in its own group.
fn target_against(pattern: &str, block: &str, op: &str, kinds: [(&str, &str); 4]) -> Scenario {
    let io = if op == "write" {
        "sync = false\ndepth = 32\n"
    } else {
        ""
    };
    let mut s = format!(
        "name = \"target vs interferers\"\nduration = \"15s\"\n\
         [device]\npreset = \"ssd-plextor-m5s\"\n\
         [[group]]\npath = \"/target\"\nweight = 300\n\
         [[flow]]\nname = \"target\"\ngroup = \"/target\"\npattern = \"{pattern}\"\nblock = \"{block}\"\n\
         region = {{ start = \"0\", size = \"8G\" }}\n",
    );
    for (i, (pattern, block)) in (1..=4).zip(kinds) {
        s.push_str(&format!(
            "[[group]]\npath = \"/i{i}\"\n\
             [[flow]]\nname = \"i{i}\"\ngroup = \"/i{i}\"\nop = \"{op}\"\npattern = \"{pattern}\"\n\
             block = \"{block}\"\n{io}region = {{ start = \"{}G\", size = \"8G\" }}\n",
            8 * i
        ));
    }
    Scenario::from_toml_str(&s, "interferers.toml").unwrap()
}

/// The 2018 article's "varying randomness" interferers: one sequential,
/// three random of 4 KiB, 128 KiB and 1 MiB.
const VARYING: [(&str, &str); 4] = [
    ("seq", "128k"),
    ("rand", "4k"),
    ("rand", "128k"),
    ("rand", "1M"),
];

/// A bfq that has learned the device's rate (B_max = T_max x 500 MB/s).
const WARM: (&str, &str) = ("peak_rate_learned", "976000");

/// The target's MB/s on a warm bfq with the rule `switch` on and off.
fn with_and_without(s: &Scenario, switch: &str) -> (f64, f64) {
    (
        target_mb_s(s, &[WARM]),
        target_mb_s(s, &[WARM, (switch, "0")]),
    )
}

/// The target's MB/s after the first 5 s under `bfq` with `kv`.
fn target_mb_s(s: &Scenario, kv: &[(&str, &str)]) -> f64 {
    target_mb_s_seeded(s, kv, 1)
}

/// [`target_mb_s`] with seed `seed`.
fn target_mb_s_seeded(s: &Scenario, kv: &[(&str, &str)], seed: u64) -> f64 {
    let bfq = Bfq::from_profile("bfq", &Settings::from_pairs(kv.iter().copied())).unwrap();
    let r = simulate(s, Box::new(bfq), seed, SimOptions::default()).unwrap();
    let t = &r.flows[0].series_mib_s[5..];
    t.iter().sum::<f64>() / t.len() as f64 * 1.048576
}

#[test]
fn writers_keep_neither_b_max_nor_injection_from_a_random_reader() {
    // Writers' turns are not peak-rate samples (a write completes once
    // buffered), and writes are not injected under the read floor: the
    // target keeps its 10 MB/s (weight 3/7 of the time at 23 MB/s). With
    // the writers' turns sampled, B_max grew to T_max x the bus rate, each
    // writer's turn filled the write buffer and the target got 2.7 MB/s.
    let mb_s = target_mb_s(&writers([("seq", "128k"); 4]), &[]);
    eprintln!("target {mb_s:.2} MB/s");
    assert!(mb_s >= 10.0, "{mb_s}");
}

#[test]
fn buffered_writers_in_other_groups_pay_their_over_charge() {
    // The article's "varying randomness" writers (one sequential, three
    // random of 4 KiB, 128 KiB and 1 MiB), beside a bfq that has learned
    // the device's rate (B_max = T_max x 500 MB/s). A write completes
    // once the drive buffered it and its programs slow the target's reads
    // later, in the target's own turns: charged their sectors only (today's
    // kernel exempts asymmetric scenarios from the async over-charge), the
    // writers leave the target 2.4 MB/s of its 10; over-charged in every
    // scenario, as Linux 4.x did, 14.
    let (on, off) = with_and_without(&writers(VARYING), "async_charge_asymmetric");
    eprintln!("target {on:.2} MB/s with the over-charge, {off:.2} without");
    assert!(on >= 10.0, "{on}");
    assert!(off < 10.0, "{off}");
}

#[test]
fn a_warm_b_max_needs_the_linux_4_write_over_charge() {
    // A device's bfq that has learned its peak rate (500 MB/s here, as
    // one sequential reader alone teaches it) has B_max = T_max x that
    // rate, so each async writer's turn may dispatch a whole write buffer
    // whose programs then slow the target's reads in its own turns.
    // Charged x3 (today's kernel), four sequential writers leave the
    // random target 3.6 MB/s of its 10; charged x10 (Linux 4.x, the 2018
    // article's bfq), 14.7.
    let s = writers([("seq", "128k"); 4]);
    let warm = WARM;
    let x10 = target_mb_s(&s, &[warm]);
    let x3 = target_mb_s(&s, &[warm, ("async_charge_factor", "3")]);
    eprintln!("target {x10:.2} MB/s charged x10, {x3:.2} charged x3");
    assert!(x10 >= 10.0, "{x10}");
    assert!(x3 < 10.0, "{x3}");
}

/// Total MB/s after the first 5 s under `bfq` with `kv`.
fn total_mb_s(s: &Scenario, kv: &[(&str, &str)]) -> f64 {
    let bfq = Bfq::from_profile("bfq", &Settings::from_pairs(kv.iter().copied())).unwrap();
    steady_total(&simulate(s, Box::new(bfq), 1, SimOptions::default()).unwrap()) * 1.048576
}

#[test]
fn several_flows_are_injected_each_within_its_share() {
    // The 2018 article's static random workload (a random target of
    // weight 300, four random readers of 100, each in its own group), on
    // a bfq that learned the device's rate. Offered only B-WF2Q+'s next
    // flow, injection fills a turn's idle time from one reader, within
    // that reader's share: 46.8 MB/s in all. Offered the next eight,
    // each within its own share: 62.1 (max-none, the article's
    // throttling, gets 70.0; the article's improved bfq "recovers most of
    // the throughput loss").
    let s = readers([("rand", "4k"); 4]);
    let warm = WARM;
    let eight = total_mb_s(&s, &[warm]);
    let one = total_mb_s(&s, &[warm, ("inject_candidates", "1")]);
    eprintln!("total {eight:.1} MB/s with 8 candidates, {one:.1} with 1");
    assert!(eight > 1.2 * one, "{eight} vs {one}");
    let target = target_mb_s(&s, &[warm]);
    assert!(target >= 10.0, "target {target}");
}

#[test]
fn a_lighter_sequential_flow_is_not_injected_into_a_heavier_random_readers_turn() {
    // The 2018 article's "varying randomness" readers (one sequential,
    // three random of 4 KiB, 128 KiB and 1 MiB: all but the 4 KiB one
    // non-seeky on flash) beside the random target of weight 300. Their
    // large reads injected into the target's idle time slow each of its
    // 4 KiB reads, in turns charged their time. Unprotected, the target's
    // figure swings with the flows' phases (seeds 1-3: 9.58, 9.27, 5.34
    // MB/s; 7.06, 10.09, 8.02 before `raised_group_order`), so the
    // contrast is the mean of three seeds.
    let s = readers(VARYING);
    let on = target_mb_s(&s, &[WARM]);
    let unprotected = [WARM, ("inject_protect_seeky", "0")];
    let off = (1..=3)
        .map(|seed| target_mb_s_seeded(&s, &unprotected, seed))
        .sum::<f64>()
        / 3.0;
    eprintln!("target {on:.2} MB/s protected, {off:.2} not (mean of seeds 1-3)");
    assert!(on >= 10.0, "{on}");
    assert!(off < 9.5, "{off}");
}

#[test]
fn the_read_floor_waits_for_the_idling_flows_baseline() {
    // The 2018 article's static random workload, from its start. The
    // inject limit starts at 0 and grows once the idling flow's baseline
    // service time is known, measured with nothing else in flight. A read
    // floor injecting before that kept a read beside every request of the
    // idling flows, so no baseline was measured and no limit grew: the
    // floor cost 11% of the total (58.5 MB/s against 65.5 without it, mean
    // of four seeds). Waiting for the baseline: 65.8.
    let s = readers([("rand", "4k"); 4]);
    // Mean over four seeds: how often the floor's read kept the baseline
    // from being measured depends on the phases of the flows.
    let total = |kv: &[(&str, &str)]| {
        let mut sum = 0.0;
        for seed in 1..=4 {
            let bfq = Bfq::from_profile("bfq", &Settings::from_pairs(kv.iter().copied())).unwrap();
            let r = simulate(&s, Box::new(bfq), seed, SimOptions::default()).unwrap();
            sum += r.flows.iter().map(|f| f.bytes as f64).sum::<f64>() / r.sim_time_s / 1e6;
        }
        sum / 4.0
    };
    let ll = ("low_latency", "0");
    let on = total(&[WARM, ll]);
    let off = total(&[WARM, ll, ("inject_read_floor", "0")]);
    eprintln!("total {on:.1} MB/s with the read floor, {off:.1} without");
    assert!(on >= 0.95 * off, "{on} vs {off}");
}

/// Two sync random 4 KiB readers in a group of weight 1000 (`h0`, `h1`)
/// beside two in a group of 100 (`l0`, `l1`), on the 2018 article's SSD.
fn heavy_and_light_groups() -> Scenario {
    let mut toml = String::from(
        "name = \"random readers in a heavy and a light group\"\nduration = \"20s\"\n\
         [device]\npreset = \"ssd-plextor-m5s\"\n\
         [[group]]\npath = \"/h\"\nweight = 1000\n[[group]]\npath = \"/l\"\nweight = 100\n",
    );
    for (k, name) in ["h0", "h1", "l0", "l1"].iter().enumerate() {
        toml += &format!(
            "[[flow]]\nname = \"{name}\"\ngroup = \"/{}\"\nop = \"read\"\npattern = \"rand\"\n\
             block = \"4k\"\nregion = {{ start = \"{}G\", size = \"10G\" }}\n",
            &name[..1],
            10 * k
        );
    }
    Scenario::from_toml_str(&toml, "groups.toml").unwrap()
}

/// Groups of random readers keep their weights' split when the heavy group
/// holds several flows (2010 paper Sec. II-D, each group served as one
/// entity of its weight; random flows get time shares, Sec. III-D): two
/// readers in a group of 1000 get at least 0.7 of the weights' 10 times
/// the two in a group of 100 (measured 9.81; seeds 1-4 6.1-9.8). Another
/// group's flows are injected into a seeky flow's turn without the share
/// cap only while that flow is alone in its group. Mutation: uncapped
/// whatever the group holds (the `group_busy` test dropped from
/// `Bfq::injectable_share`): 3.56 (seeds 1-4 3.55-3.68), the light group
/// injected into the heavy readers' turns ahead of their capped siblings,
/// the heavy group held to one reader's rate.
#[test]
fn a_light_group_is_not_injected_past_a_heavy_groups_own_flows() {
    let s = heavy_and_light_groups();
    let bfq = Bfq::from_profile("bfq", &Settings::from_pairs([("", ""); 0])).unwrap();
    let r = simulate(&s, Box::new(bfq), 1, SimOptions::default()).unwrap();
    let mib = |p: char| {
        r.flows
            .iter()
            .filter(|f| f.name.starts_with(p))
            .map(|f| f.throughput_mib_s)
            .sum::<f64>()
    };
    let (heavy, light) = (mib('h'), mib('l'));
    eprintln!("heavy group {heavy:.2} MiB/s, light group {light:.2}");
    assert!(heavy >= 7.0 * light, "{heavy:.2} vs {light:.2}");
}

/// A random 4 KiB reader keeping 4 requests in flight beside a random
/// 4 KiB reader thinking 5 ms between reads (each in an 8 GiB region of
/// its own), each in a group of 100 of its own (`groups`) or both in the
/// root group.
fn deep_beside_thinker_in(groups: bool) -> Scenario {
    let mut s = String::from(
        "name = \"deep reader beside a thinking reader\"\nduration = \"15s\"\n\
         [device]\npreset = \"ssd-plextor-m5s\"\n",
    );
    for (i, (name, io)) in [("deep", "depth = 4"), ("thinker", "think = \"5ms\"")]
        .iter()
        .enumerate()
    {
        let group = match groups {
            true => format!("[[group]]\npath = \"/{name}\"\n"),
            false => String::new(),
        };
        let member = match groups {
            true => format!("group = \"/{name}\"\n"),
            false => String::new(),
        };
        s += &format!(
            "{group}[[flow]]\nname = \"{name}\"\n{member}pattern = \"rand\"\nblock = \"4k\"\n\
             {io}\nregion = {{ start = \"{}G\", size = \"8G\" }}\n",
            8 * i
        );
    }
    Scenario::from_toml_str(&s, "deep-beside-thinker.toml").unwrap()
}

/// A reader whose every read is injected into a deep reader's turns keeps
/// its place across its think times only within B_max / w of the
/// backlogged flows (`inject_return_lag_bound`; 2010 paper, appendix,
/// Lemma 2), on the simulated SSD over seconds, low_latency off: the deep
/// reader, of equal weight, waits at most about one T_max turn of the
/// thinking reader's group (the bound: 2 T_max = 250 ms, twice the
/// one-turn wait; measured 46.6 ms over the whole run, 0.5 ms after the
/// first 5 s; seed 1). Mutation: `inject_return_lag_bound=0` with
/// `inject_ahead_waiting_anchor=0`: the thinking reader's group fell
/// about twelve budgets behind V and held the device in T_max turns back
/// to back, the deep reader kept out of them by `inject_ahead_bound`
/// measured from an anchor that counted the group in service (2 977 ms;
/// 2.1-3.6 s after the first 5 s, seeds 1-3, docs/bfq-settings.md);
/// `inject_return_lag_bound=0` alone: 46.6 ms.
#[test]
fn a_deep_reader_is_not_kept_out_for_seconds_by_a_thinking_reader() {
    let worst = deep_readers_worst_wait(&[WARM, ("low_latency", "0")]);
    assert!(worst <= 250.0, "{worst}");
}

/// The deep reader's worst wait (ms, over the whole run, seed 1) beside
/// the thinking reader of [`deep_beside_thinker_in`]`(true)` on a warm `bfq` with
/// settings `kv`.
fn deep_readers_worst_wait(kv: &[(&str, &str)]) -> f64 {
    deep_readers_worst_wait_in(true, kv)
}

/// [`deep_readers_worst_wait`] with [`deep_beside_thinker_in`]`(groups)`.
fn deep_readers_worst_wait_in(groups: bool, kv: &[(&str, &str)]) -> f64 {
    first_flows_worst_wait(&deep_beside_thinker_in(groups), 1, kv)
}

/// The worst wait (ms, arrival to completion, over the whole run) of the
/// first flow of `s` on `bfq` with settings `kv`, seed `seed`.
fn first_flows_worst_wait(s: &Scenario, seed: u64, kv: &[(&str, &str)]) -> f64 {
    let bfq = Bfq::from_profile("bfq", &Settings::from_pairs(kv.iter().copied())).unwrap();
    let r = simulate(s, Box::new(bfq), seed, SimOptions::default()).unwrap();
    let worst = r.flows[0].latency_ms.max;
    eprintln!(
        "{} seed {seed}, {kv:?}: worst wait {worst:.1} ms",
        r.flows[0].name
    );
    worst
}

/// As [`a_deep_reader_is_not_kept_out_for_seconds_by_a_thinking_reader`]
/// with `low_latency` on: the thinking reader, weight-raised, comes back
/// back-shifted after turns of its own that ended at T_max while it was
/// idled for, charged its service; each back-shift is held within
/// B_max / w of the backlogged flows (`raised_backshift_lag_bound`; 2010
/// paper, appendix, Lemma 2), and the deep reader waits at most about one
/// T_max turn of the thinking reader's group (the same bound, 250 ms;
/// measured 46.6 ms). Mutation: `raised_backshift_lag_bound=0` with
/// `inject_ahead_waiting_anchor=0`, `inject_into_raised_b_max=0` and
/// `raised_group_time_charge=0` (checked here: the scenario still builds
/// the lag; the thinking reader's idled T_max turns charged their time
/// leave none): the thinking reader's group fell 3.3 B_max behind V in 2.6 s and, once its F pinned the anchor,
/// took four T_max turns in a row, the deep reader kept out of them by
/// `inject_ahead_bound` measured from an anchor that counted the group in
/// service (with `inject_ahead_waiting_anchor=0` too: 518.4 ms; alone,
/// `raised_backshift_lag_bound=0` now leaves 46.6 ms, the check's anchor
/// no longer held down by the group in service; with
/// `inject_into_raised_b_max` on, 46.6 ms too: the deep reader, not
/// raised, is then held to B_max per turn of the raised thinking reader
/// instead of `inject_ahead_bound`, so the mutation turns it off as well).
#[test]
fn a_deep_reader_is_not_kept_out_by_a_raised_thinking_reader() {
    let worst = deep_readers_worst_wait(&[WARM, ("low_latency", "1")]);
    assert!(worst <= 250.0, "{worst}");
    let off = [
        ("raised_backshift_lag_bound", "0"),
        ("inject_ahead_waiting_anchor", "0"),
        ("inject_into_raised_b_max", "0"),
        ("raised_group_time_charge", "0"),
    ];
    let unbounded =
        deep_readers_worst_wait(&[WARM, ("low_latency", "1"), off[0], off[1], off[2], off[3]]);
    assert!(unbounded > 250.0, "{unbounded}");
}

/// `raised_backshift_lag_bound` alone, `low_latency` on: the two
/// thinking readers of [`two_thinkers_beside_seq`]`(100)`, each
/// weight-raised in its group, come back back-shifted after turns of
/// their own charged their service; each back-shift held within B_max / w
/// of the backlogged flows (2010 paper, appendix, Lemma 2), the
/// sequential reader, of equal group weight, is not kept out for seconds:
/// its worst wait over the whole run stays below 16 T_max turns (2 s;
/// measured 412.8 and 1186.3 ms, seeds 1 and 2, with
/// `raised_group_time_charge=0`; 124.0 and 124.1 ms with it, as shipped).
/// Mutation: `raised_backshift_lag_bound=0` with
/// `raised_group_time_charge=0` (checked here): the thinkers' groups keep
/// their lag and the sequential reader waits 2985.4 and 3666.6 ms. With
/// `raised_group_time_charge` on, `raised_backshift_lag_bound=0` alone
/// leaves 124.0 and 124.1 ms: the thinkers' idled T_max turns, charged
/// their time, build no lag. With `raised_group_order` (as shipped:
/// 103.9 ms, seeds 1-2) the mutation also turns that rule off: the
/// thinkers' groups timestamped with 2 x B_min left the reader 132.8 ms in
/// seed 2 with both other rules off (3518.8 ms in seed 1).
#[test]
fn a_sequential_reader_is_not_kept_out_for_seconds_by_raised_thinkers() {
    let bound = 16.0 * 125.0;
    let s = two_thinkers_beside_seq(100);
    for seed in [1, 2] {
        let on = [WARM, ("low_latency", "1")];
        assert!(first_flows_worst_wait(&s, seed, &on) < bound);
        let off = [
            on[0],
            on[1],
            ("raised_backshift_lag_bound", "0"),
            ("raised_group_time_charge", "0"),
            ("raised_group_order", "0"),
        ];
        assert!(first_flows_worst_wait(&s, seed, &off) > bound);
    }
}

/// Both readers of [`a_deep_reader_is_not_kept_out_by_a_raised_thinking_reader`]
/// in the root group, `low_latency` on: from 0.79 to 3.12 s the thinking
/// reader is weight-raised (1200 against 40) and wins every B-WF2Q+
/// selection, its T_max turns idled through its think times and charged
/// their service (about 200 sectors each); the deep reader is served by
/// injection into those turns. Held to no share of a raised flow's turn
/// and no lead on V there, but to B_max per turn
/// (`inject_into_raised_b_max`), it is injected about 19 000 sectors per
/// turn and waits less than one of those turns (T_max, 125 ms; measured
/// 6.1 ms, seed 1; `bfq-kernel` 0.5 ms). Mutation:
/// `inject_into_raised_b_max=0`: `inject_share_cap` (40/1200 of the
/// thinking reader's 200 sectors) and `inject_ahead_bound` (V barely
/// moves) each keep it to about one read per turn (517.9 ms).
#[test]
fn a_deep_reader_rides_a_raised_thinking_readers_turns_in_the_root_group() {
    let on = [WARM, ("low_latency", "1")];
    let worst = deep_readers_worst_wait_in(false, &on);
    assert!(worst <= 125.0, "{worst}");
    let off = deep_readers_worst_wait_in(false, &[on[0], on[1], ("inject_into_raised_b_max", "0")]);
    assert!(off > 125.0, "{off}");
}

/// A sequential 128 KiB reader and two random 4 KiB readers thinking
/// 5 ms and 30 ms, each in its own group, of weight 100 but the 5 ms
/// reader's, `t5_weight` (8 GiB regions of their own), on the simulated
/// SSD.
fn two_thinkers_beside_seq(t5_weight: u32) -> Scenario {
    thinkers_beside_seq(t5_weight, false)
}

/// [`two_thinkers_beside_seq`], with a third random 4 KiB reader thinking
/// 10 ms after them (`t10`, in a group of 100) if `t10`.
fn thinkers_beside_seq(t5_weight: u32, t10: bool) -> Scenario {
    let mut s = String::from(
        "name = \"thinkers beside a sequential reader\"\nduration = \"15s\"\n\
         [device]\npreset = \"ssd-plextor-m5s\"\n",
    );
    let flows = [
        ("seq", "pattern = \"seq\"\nblock = \"128k\""),
        ("t5", "pattern = \"rand\"\nblock = \"4k\"\nthink = \"5ms\""),
        (
            "t30",
            "pattern = \"rand\"\nblock = \"4k\"\nthink = \"30ms\"",
        ),
        (
            "t10",
            "pattern = \"rand\"\nblock = \"4k\"\nthink = \"10ms\"",
        ),
    ];
    for (i, (name, io)) in flows.iter().take(3 + usize::from(t10)).enumerate() {
        let w = if *name == "t5" { t5_weight } else { 100 };
        s += &format!(
            "[[group]]\npath = \"/{name}\"\nweight = {w}\n\
             [[flow]]\nname = \"{name}\"\ngroup = \"/{name}\"\n{io}\n\
             region = {{ start = \"{}G\", size = \"8G\" }}\n",
            8 * i
        );
    }
    Scenario::from_toml_str(&s, "two-thinkers-beside-seq.toml").unwrap()
}

/// The 99th percentile, in ms, of flow `name`'s waits (arrival to
/// completion) of the requests that arrived after `from` ns, from a
/// simulation trace (`t_ns,event,flow,request,...` lines).
fn p99_after(trace: &str, name: &str, from: u64) -> f64 {
    let mut arrived = std::collections::HashMap::new();
    let mut waits = Vec::new();
    for line in trace.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let (Ok(t), true) = (f[0].parse::<u64>(), f[2] == name) else {
            continue;
        };
        match f[1] {
            "Q" if t >= from => {
                arrived.insert(f[3].to_string(), t);
            }
            "C" => waits.extend(arrived.remove(f[3]).map(|q| t - q)),
            _ => {}
        }
    }
    waits.sort_unstable();
    waits[(waits.len() - 1) * 99 / 100] as f64 / 1e6
}

/// `inject_fair_candidates`: the 5 ms thinker is idled for in T_max
/// turns, the sequential reader (a completion always within 4 ms before
/// the thinker's next read) is its waker and always has a read queued.
/// Tried least injected into the turn per unit of weight first, the
/// 30 ms thinker's read goes in after at most one of the sequential
/// reader's (0.26 ms at 500 MB/s): after the first 5 s its
/// 99th-percentile wait stays below one idling period (slice_idle, 8 ms;
/// measured 0.65 ms, seed 1). Mutation: `inject_fair_candidates=0` (the
/// kernel's order, waker first): the sequential reader takes every slot
/// until its budget is spent (measured 47.5 ms; 47.1 with
/// `inject_ahead_waiting_anchor=0`).
#[test]
fn a_thinking_reader_is_injected_beside_an_always_queued_waker() {
    let p99 = |fair| t30_p99(100, 1, &[("inject_fair_candidates", fair)]);
    let (on, off) = (p99("1"), p99("0"));
    eprintln!("30 ms thinker's p99 wait {on:.2} ms, {off:.2} ms waker first");
    assert!(on <= 8.0, "{on}");
    assert!(off > 8.0, "{off}");
}

/// The 30 ms thinker's 99th-percentile wait (ms) after the first 5 s
/// beside [`two_thinkers_beside_seq`]`(t5_weight)`, on a warm `bfq`,
/// `low_latency` off, seed `seed`, with settings `kv`.
fn t30_p99(t5_weight: u32, seed: u64, kv: &[(&str, &str)]) -> f64 {
    t30_p99_in(&two_thinkers_beside_seq(t5_weight), seed, kv)
}

/// The 30 ms thinker's 99th-percentile wait (ms) after the first 5 s in
/// scenario `s`, on a warm `bfq`, `low_latency` off, seed `seed`, with
/// settings `kv`.
fn t30_p99_in(s: &Scenario, seed: u64, kv: &[(&str, &str)]) -> f64 {
    let mut all = vec![WARM, ("low_latency", "0")];
    all.extend_from_slice(kv);
    let bfq = Bfq::from_profile("bfq", &Settings::from_pairs(all)).unwrap();
    let mut trace = Vec::new();
    let opts = SimOptions {
        trace: Some(&mut trace),
        ..SimOptions::default()
    };
    simulate(s, Box::new(bfq), seed, opts).unwrap();
    let p99 = p99_after(&String::from_utf8(trace).unwrap(), "t30", 5_000_000_000);
    eprintln!(
        "{}, seed {seed}, {kv:?}: 30 ms thinker's p99 wait {p99:.2} ms",
        s.name
    );
    p99
}

/// `inject_ahead_waiting_anchor`: the 30 ms thinker's group, behind V,
/// is injected into the 5 ms thinker's T_max turns (weight 300, idled
/// through its think times) once the check's anchor leaves out the group
/// in service, whose F is its S plus a budget / w, not its time charge:
/// after the first 5 s the 30 ms thinker's 99th-percentile wait stays
/// below one T_max turn (125 ms; 2010 paper Sec. III-D), measured
/// 62.3 ms (seed 3; 57.3 and 64.1 with seeds 1 and 2). Mutation:
/// `inject_ahead_waiting_anchor=0` (the anchor counts the in-service
/// group, held at one budget past its S): it waits out such turns,
/// 174.1 ms (127.9 and 160.6).
#[test]
fn a_waiting_group_behind_v_is_injected_into_a_heavier_thinkers_turns() {
    let t_max = 125.0;
    let on = t30_p99(300, 3, &[]);
    assert!(on < t_max, "{on}");
    let off = t30_p99(300, 3, &[("inject_ahead_waiting_anchor", "0")]);
    assert!(off > t_max, "{off}");
}

/// `inject_return_lag_bound` alone, `low_latency` off: three thinking
/// readers (5, 30 and 10 ms) beside a sequential reader, each in a group
/// of 100 ([`thinkers_beside_seq`]), are injected into each other's turns
/// and leave B-WF2Q+ between turns of their own; their returns in time
/// held within B_max / w of the backlogged flows (2010 paper, appendix,
/// Lemma 2), the 30 ms thinker's 99th-percentile wait after the first
/// 5 s stays within one idling period (slice_idle, 8 ms) in at least half
/// of seeds 1-10 (measured: 6 of 10; 0.59-5.62 ms in those, 20.3-124.4 ms
/// in the others). Mutation: `inject_return_lag_bound=0` alone (checked
/// here): 1 of 10 (0.64 ms; 8.45-158.5 ms in the others), the thinker
/// kept out of the other groups' turns by `inject_ahead_bound` (with
/// `inject_ahead_bound=0` too: 0.5 ms, seeds 4 and 6). The rule does not
/// win every seed: with seeds 1, 2 and 5 the wait is 124.4, 102.2 and
/// 20.3 ms with it, 12.5, 0.6 and 8.5 ms without.
#[test]
fn a_thinker_is_injected_within_an_idling_period_beside_returning_thinkers() {
    let s = thinkers_beside_seq(100, true);
    let within = |kv: &[(&str, &str)]| (1..=10).filter(|&n| t30_p99_in(&s, n, kv) <= 8.0).count();
    let on = within(&[]);
    assert!(on >= 5, "{on} of 10");
    let off = within(&[("inject_return_lag_bound", "0")]);
    assert!(off < 5, "{off} of 10");
}

/// `raised_group_time_charge`, `low_latency` on: a sequential 128 KiB
/// reader and a random 4 KiB reader thinking 10 ms, each in a group of
/// 100 on the simulated SSD, both weight-raised at their start. The
/// thinker's turns, idled for, reach T_max having served ~104 sectors;
/// charged their time for the other group (2010 paper Sec. III-D: a flow
/// that does not use its budget within T_max pays B_max), they cost the
/// thinker's group as much as a reader's turn of B_max costs the reader's,
/// and the turns alternate: the reader waits about one thinker turn.
/// Bound: four T_max (500 ms), measured 378.2 ms (seeds 1-2; 193.3 and
/// 193.4 ms when turns filled by injection paid their time too;
/// `bfq-kernel` 1302 ms, the thinker's 1024-sector turns of 1.3 s).
/// Mutation: `raised_group_time_charge=0` (checked here): each thinker
/// turn charged its 104 sectors against the reader's 41-43 k, the thinker
/// wins 27 turns back to back until its raising ends and the reader waits
/// 3513.0 and 3512.8 ms.
#[test]
fn a_raised_thinker_in_its_own_group_pays_for_its_idled_turns() {
    let bound = 4.0 * 125.0;
    let mut s = String::from(
        "name = \"raised thinker beside a sequential reader\"\nduration = \"10s\"\n\
         [device]\npreset = \"ssd-plextor-m5s\"\n[scheduler]\nname = \"bfq\"\nlow_latency = true\n",
    );
    let flows = [
        ("seq", "pattern = \"seq\"\nblock = \"128k\""),
        (
            "t10",
            "pattern = \"rand\"\nblock = \"4k\"\nthink = \"10ms\"",
        ),
    ];
    each_in_a_group_of_100(&mut s, &flows, 20, 10);
    let s = Scenario::from_toml_str(&s, "raised-thinker-beside-seq.toml").unwrap();
    for seed in [1, 2] {
        let on = first_flows_worst_wait(&s, seed, &[("low_latency", "1")]);
        assert!(on < bound, "{on}");
        let off = [("low_latency", "1"), ("raised_group_time_charge", "0")];
        let off = first_flows_worst_wait(&s, seed, &off);
        assert!(off > bound, "{off}");
    }
}

/// A sequential reader and a buffered sequential writer, each in a group
/// of 100, and a player reading 1 MiB every 40 ms in a group of 300
/// (`ssd-plextor-m5s`, 10 s, regions of their own).
fn seq_and_writer_beside_player() -> Scenario {
    let s = "name = \"player beside a sequential reader and a writer\"\nduration = \"10s\"\n\
         [device]\npreset = \"ssd-plextor-m5s\"\n\
         [[group]]\npath = \"/s\"\nweight = 100\n\
         [[group]]\npath = \"/w\"\nweight = 100\n\
         [[group]]\npath = \"/v\"\nweight = 300\n\
         [[flow]]\nname = \"s\"\npattern = \"seq\"\ngroup = \"/s\"\n\
         region = { start = \"0G\", size = \"10G\" }\n\
         [[flow]]\nname = \"w\"\nop = \"write\"\npattern = \"seq\"\nbuffered = true\ngroup = \"/w\"\n\
         region = { start = \"20G\", size = \"10G\" }\n\
         [[flow]]\nname = \"v\"\npattern = \"seq\"\ngroup = \"/v\"\n\
         periodic = { every = \"40ms\", bytes = \"1M\", warm_up = \"1s\" }\n\
         region = { start = \"40G\", size = \"10G\" }\n";
    Scenario::from_toml_str(s, "seq-and-writer-beside-player.toml").unwrap()
}

/// The player's worst batch latency (ms, over the whole run) in
/// [`seq_and_writer_beside_player`], `low_latency` on, seed `seed`.
fn players_worst_batch(seed: u64) -> f64 {
    let kv = Settings::from_pairs([("low_latency", "1")]);
    let bfq = Bfq::from_profile("bfq", &kv).unwrap();
    let r = simulate(
        &seq_and_writer_beside_player(),
        Box::new(bfq),
        seed,
        SimOptions::default(),
    )
    .unwrap();
    let worst = r.flows[2].batch_latency_ms.max;
    eprintln!("player seed {seed}: worst batch {worst:.1} ms");
    worst
}

/// `inject_into_raised_b_max` rides only a seeky raised flow's turns (a
/// thinking reader idled through T_max turns that barely move V). The
/// player of [`seq_and_writer_beside_player`], raised as it starts, is
/// sequential: its turns are its batches, and the sequential reader is
/// injected there within its group's share (`inject_share_cap`, 100 of
/// 300), so each 1 MiB batch waits for a few of the reader's reads at
/// most: worst batch 9.5 and 8.6 ms, seeds 1-2 (the batch alone at the
/// device's 470 MB/s: 2.2 ms; bound 20 ms, `bfq-kernel`'s 20.4 ms).
/// Mutation: the rule in a sequential raised flow's turns too
/// (`rides_raised_turn` without its seeky check): the reader is injected
/// up to B_max (about 120 000 sectors) per turn, 45 312 sectors while one
/// of the player's reads waited 48.4 ms; worst batch 50.2 and 49.9 ms.
#[test]
fn a_sequential_raised_player_is_not_ridden_past_its_groups_share() {
    for seed in [1, 2] {
        let worst = players_worst_batch(seed);
        assert!(worst <= 20.0, "seed {seed}: {worst}");
    }
}

/// `raised_group_time_charge` spares a raised thinker that shares its
/// group: within a group its raised weight is its share (weight raising,
/// 2014 report Sec. 4.1), so its turns stay charged their service.
/// The set-up of [`a_raised_thinker_in_its_own_group_pays_for_its_idled_turns`]
/// with a second sequential reader, always busy, in the thinker's group:
/// the rule must change nothing (the runs are deterministic, so the
/// bytes each flow is served are compared exactly; no tolerance).
/// Mutation: the rule without its `group_busy(group) <= 1` condition
/// (checked here): the thinker's idled turns are charged their time
/// against its sibling and it is served 0.07-0.08 MiB/s instead of
/// 0.21-0.30 (seeds 1-2).
#[test]
fn a_raised_thinker_sharing_its_group_keeps_its_service_charge() {
    let mut s = String::from(
        "name = \"raised thinker sharing its group\"\nduration = \"10s\"\n\
         [device]\npreset = \"ssd-plextor-m5s\"\n[scheduler]\nname = \"bfq\"\nlow_latency = true\n\
         [[group]]\npath = \"/a\"\nweight = 100\n[[group]]\npath = \"/b\"\nweight = 100\n",
    );
    let flows = [
        ("bseq", "/b", "pattern = \"seq\"\nblock = \"128k\""),
        (
            "t10",
            "/a",
            "pattern = \"rand\"\nblock = \"4k\"\nthink = \"10ms\"",
        ),
        ("aseq", "/a", "pattern = \"seq\"\nblock = \"128k\""),
    ];
    for (i, (name, group, io)) in flows.iter().enumerate() {
        s += &format!(
            "[[flow]]\nname = \"{name}\"\ngroup = \"{group}\"\n{io}\n\
             region = {{ start = \"{}G\", size = \"10G\" }}\n",
            20 * i
        );
    }
    let s = Scenario::from_toml_str(&s, "raised-thinker-sharing-its-group.toml").unwrap();
    let served = |seed: u64, rule: &str| -> Vec<u64> {
        let kv = [("low_latency", "1"), ("raised_group_time_charge", rule)];
        let bfq = Bfq::from_profile("bfq", &Settings::from_pairs(kv)).unwrap();
        let r = simulate(&s, Box::new(bfq), seed, SimOptions::default()).unwrap();
        r.flows.iter().map(|f| f.bytes).collect()
    };
    for seed in [1, 2] {
        let (on, off) = (served(seed, "1"), served(seed, "0"));
        eprintln!("seed {seed}: served {on:?} with the rule, {off:?} without");
        assert_eq!(on, off);
    }
}

/// `raised_group_time_charge` leaves a raised thinker's turn charged its
/// service when other flows' requests filled it (B_max/8 or more
/// injected): such a turn did not hold the device idle, and the injected
/// flows pay for their requests. A 4 KiB random reader thinking 10 ms,
/// ten 128 KiB-request sequential readers and bash's replayed start-up,
/// each in a group of 100, `ssd-plextor-m5s`, `low_latency = true`, 20 s:
/// the thinker's p99 wait stays within two T_max turns (250 ms; measured
/// 123 ms, seeds 1-2, as with the rule off; `bfq-kernel` 115 ms).
/// Mutation: the rule without its injected-service condition (checked
/// here): each of the thinker's T_max turns, 35-108 k sectors of the
/// readers' and bash's requests injected into it, is charged ~B_max; its
/// group waits for a round of the readers' turns and its p99 is 1010.8 ms
/// (seed 1; bash's slowest start-up 0.18-0.57 s against 0.14-0.18 s,
/// seeds 1-4, in a like set-up).
#[test]
fn a_raised_thinkers_turns_filled_by_injection_keep_their_service_charge() {
    let think = ("t", "pattern = \"rand\"\nblock = \"4k\"\nthink = \"10ms\"");
    let s = bash_beside_readers_in_groups("raised thinker beside readers and bash", Some(think));
    for seed in [1, 2] {
        let kv = [("low_latency", "1")];
        let bfq = Bfq::from_profile("bfq", &Settings::from_pairs(kv)).unwrap();
        let r = simulate(&s, Box::new(bfq), seed, SimOptions::default()).unwrap();
        let p99 = r.flows[0].latency_ms.p99;
        eprintln!("seed {seed}: the thinker's p99 {p99:.1} ms");
        assert!(p99 < 2.0 * 125.0, "{p99}");
    }
}

/// bash's replayed start-up alone in a group of 100 beside ten greedy
/// sequential readers, each in a group of 100 (`ssd-plextor-m5s`,
/// `low_latency = true`, six start-ups from 5 s, 20 s): with
/// `raised_group_order` its group is timestamped with 2 x B_min and comes
/// first (2010 paper Sec. II-D: least F among the eligible), so a start-up
/// waits for at most the reader's turn in service (T_max, 125 ms) besides
/// its own service: bound 2 x T_max. Without the rule its group's F
/// carried ~2/3 B_max and bash waited for several readers' turns (slowest
/// 0.54 and 0.72 s, seeds 1-2; with it 0.154 and 0.152; `bfq-kernel` 0.150
/// and 0.143).
#[test]
fn an_application_alone_in_its_group_comes_before_other_groups_turns() {
    let s = bash_beside_readers_in_groups("bash beside readers in groups", None);
    let bound = 2.0 * 0.125;
    for seed in [1, 2] {
        let slowest = |order: &str| {
            let kv = [("low_latency", "1"), ("raised_group_order", order)];
            let bfq = Bfq::from_profile("bfq", &Settings::from_pairs(kv)).unwrap();
            let r = simulate(&s, Box::new(bfq), seed, SimOptions::default()).unwrap();
            assert_eq!(r.flows[0].run_times_s.len(), 6);
            r.flows[0].run_times_s.iter().copied().fold(0.0, f64::max)
        };
        let (on, off) = (slowest("1"), slowest("0"));
        eprintln!("seed {seed}: slowest start-up {on:.3} s, {off:.3} s without the rule");
        assert!(on < bound, "{on}");
        assert!(off > bound, "{off}");
    }
}

/// `lead` (a flow's name and I/O lines, first if given), bash's replayed
/// start-up (six runs from 5 s, 1 s apart) and ten greedy sequential
/// readers, each flow in a group of 100 of its own (`ssd-plextor-m5s`,
/// `low_latency = true`, 20 s, 5 GiB regions 10 GiB apart).
fn bash_beside_readers_in_groups(name: &str, lead: Option<(&str, &str)>) -> Scenario {
    let mut s = format!(
        "name = \"{name}\"\nduration = \"20s\"\n\
         [device]\npreset = \"ssd-plextor-m5s\"\n[scheduler]\nname = \"bfq\"\nlow_latency = true\n",
    );
    let mut flows: Vec<(String, String)> = lead
        .iter()
        .map(|(n, io)| (n.to_string(), io.to_string()))
        .collect();
    flows.push((
        "bash".to_string(),
        "pattern = \"replay\"\nreplay = \"traces/bash.csv\"\nstart = \"5s\"\n\
         start_jitter = \"500ms\"\nrepeat = \"1s\"\nruns = 6"
            .to_string(),
    ));
    for i in 0..10 {
        flows.push((format!("r{i}"), "pattern = \"seq\"".to_string()));
    }
    each_in_a_group_of_100(&mut s, &flows, 10, 5);
    let dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios"));
    Scenario::from_toml_str_in(&s, &format!("{name}.toml"), dir).unwrap()
}

/// Appends to scenario text `s` each of `flows` (name, I/O lines) alone in
/// a group of weight 100 named after it, flow i reading `size` GiB from
/// `i * step` GiB.
fn each_in_a_group_of_100<N: std::fmt::Display, I: std::fmt::Display>(
    s: &mut String,
    flows: &[(N, I)],
    step: u64,
    size: u64,
) {
    for (i, (name, io)) in flows.iter().enumerate() {
        *s += &format!(
            "[[group]]\npath = \"/{name}\"\nweight = 100\n\
             [[flow]]\nname = \"{name}\"\ngroup = \"/{name}\"\n{io}\n\
             region = {{ start = \"{}G\", size = \"{size}G\" }}\n",
            step * i as u64
        );
    }
}
