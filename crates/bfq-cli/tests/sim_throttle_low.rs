//! throttle-low as blk-throttle (Linux 4.18 low limits), simulated time
//! only.
//!
//! 1. The 2018 article's `low-none` (Sec. 9, Fig. 1): a random reader
//!    and four sequential readers, each in a group with a 10 MB/s low limit
//!    for reads and writes, five more groups with 20 MB/s that never do
//!    I/O, on the article's SSD. A group of readers limited in both
//!    directions never has requests held in both, so it can upgrade only
//!    when idle, and in MAX it steps the scale down at each of its checks
//!    while busy: every active group stays near its low limit, for every
//!    seed.
//! 2. One greedy reader in a group with a low bandwidth limit and a low
//!    IOPS limit of its own: the policy leaves LOW (the group holding it
//!    back lets it upgrade) but, the reader being busy at each of its own
//!    checks, it steps down again: more than the group's low limit, far
//!    from the unlimited rate.

use bfq_core::Settings;
use bfq_sim::{simulate, Scenario, SimOptions, SimResult};

const ONE_READER_IN_G1: &str = "name = \"t\"\nduration = \"60s\"\n[device]\npreset = \"maxtor-stm332061\"\n[[group]]\npath = \"/g1\"\n[[flow]]\nname = \"f0\"\ngroup = \"/g1\"\npattern = \"seq\"\n";

fn run(text: &str, settings: &[(String, String)], seed: u64) -> SimResult {
    let s = Scenario::from_toml_str(text, "t.toml").unwrap();
    let pairs = settings.iter().map(|(k, v)| (k.as_str(), v.as_str()));
    let sched = bfq_schedulers::build("throttle-low", &Settings::from_pairs(pairs)).unwrap();
    simulate(&s, sched, seed, SimOptions::default()).unwrap()
}

fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
    p.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// (mean MiB/s, changes between LOW and MAX, share of the run in LOW)
fn reader(settings: &[(&str, &str)]) -> (f64, u64, f64) {
    let r = run(ONE_READER_IN_G1, &pairs(settings), 1);
    let i = r.internals;
    let low = i.low_state_ns.unwrap_or(0) as f64 / 60e9;
    (
        r.flows[0].throughput_mib_s,
        i.state_changes.unwrap_or(0),
        low,
    )
}

#[test]
fn a_reader_held_by_its_groups_low_limit_leaves_low() {
    let unlimited = run(ONE_READER_IN_G1, &[], 1).flows[0].throughput_mib_s;
    // 100 KB/s is 0.095 MiB/s: staying in LOW would give about that
    for g1 in ["low_bps.g1", "low_rbps.g1"] {
        let (t, changes, low) = reader(&[(g1, "100k"), ("low_iops.f0", "64")]);
        eprintln!(
            "{g1}: {t:.3} MiB/s, {changes} changes, {:.0}% in LOW",
            100.0 * low
        );
        assert!(changes >= 1 && low < 0.5, "{g1}: not stuck in LOW");
        assert!(t > 2.0 * 0.095, "{g1}: above the group's low limit: {t}");
        assert!(t < 0.1 * unlimited, "{g1}: {t} vs {unlimited}");
    }
}

/// The 2018 low-none scenario (Table 2), 15 s.
fn low_none() -> (String, Vec<(String, String)>) {
    let mut s = String::from("name = \"low-none\"\nduration = \"15s\"\n[device]\npreset = \"ssd-plextor-m5s\"\n[[group]]\npath = \"/target\"\n");
    for i in 1..=9 {
        s += &format!("[[group]]\npath = \"/i{i}\"\n");
    }
    let gib = 8u64 << 20; // KiB
    s += &format!("[[flow]]\nname = \"target\"\ngroup = \"/target\"\npattern = \"rand\"\nblock = \"4k\"\nregion = {{ start = \"0k\", size = \"{gib}k\" }}\n");
    for i in 1..=4u64 {
        s += &format!("[[flow]]\nname = \"i{i}\"\ngroup = \"/i{i}\"\npattern = \"seq\"\nblock = \"128k\"\nregion = {{ start = \"{}k\", size = \"{gib}k\" }}\n", i * gib);
    }
    let set = (1..=10)
        .map(|g| {
            let v = if g <= 5 { "10000000" } else { "20000000" };
            (format!("low_bps.g{g}"), v.to_string())
        })
        .collect();
    (s, set)
}

#[test]
fn low_none_holds_every_active_group_near_its_low_limit_for_every_seed() {
    let (text, set) = low_none();
    let mut totals = Vec::new();
    for seed in 1..=4 {
        let r = run(&text, &set, seed);
        let mb = |f: &bfq_sim::FlowResult| f.bytes as f64 / 15.0 / 1e6;
        let total: f64 = r.flows.iter().map(mb).sum();
        eprintln!("seed {seed}: total {total:.1} MB/s");
        for f in &r.flows {
            // 10 MB/s low limit: LOW, or MAX at scale 1 (15 MB/s)
            assert!(mb(f) < 15.0, "seed {seed}: {} {:.1} MB/s", f.name, mb(f));
        }
        totals.push(total);
    }
    let mean = totals.iter().sum::<f64>() / totals.len() as f64;
    for t in &totals {
        assert!((t / mean - 1.0).abs() < 0.15, "seed spread: {totals:?}");
    }
}
