//! throttle-low as blk-throttle: a node held back by its parent's low
//! limit lets the policy upgrade to MAX (`throtl_hierarchy_can_upgrade`),
//! so one greedy reader in a group with a low bandwidth limit and a low
//! IOPS limit of its own it never reaches is not kept at the group's low
//! limit: the policy upgrades and the reader's allowance grows by half its
//! group's low limit per slice (`throtl_adjusted_limit`). Simulated time
//! only.

use bfq_core::Settings;
use bfq_sim::{simulate, Scenario, SimOptions};

const ONE_READER_IN_G1: &str = "name = \"t\"\nduration = \"60s\"\n[device]\npreset = \"maxtor-stm332061\"\n[[group]]\npath = \"/g1\"\n[[flow]]\nname = \"f0\"\ngroup = \"/g1\"\npattern = \"seq\"\n";

/// (mean MiB/s, MiB/s over the first 10 s, over the last 10 s)
fn reader_mib_s(settings: &[(&str, &str)]) -> (f64, f64, f64) {
    let s = Scenario::from_toml_str(ONE_READER_IN_G1, "t.toml").unwrap();
    let sched = bfq_schedulers::build(
        "throttle-low",
        &Settings::from_pairs(settings.iter().copied()),
    )
    .unwrap();
    let r = simulate(&s, sched, 1, SimOptions::default()).unwrap();
    let f = &r.flows[0];
    let s = &f.series_mib_s;
    let first: f64 = s[..10].iter().sum::<f64>() / 10.0;
    let last: f64 = s[s.len() - 10..].iter().sum::<f64>() / 10.0;
    (f.throughput_mib_s, first, last)
}

#[test]
fn a_reader_held_by_its_groups_low_limit_is_not_stuck_in_low() {
    let (unlimited, _, _) = reader_mib_s(&[]);
    let (t, first, last) = reader_mib_s(&[("low_bps.g1", "100k"), ("low_iops.f0", "64")]);
    // 100 KB/s is 0.095 MiB/s: staying in LOW would give about that
    assert!(t > 50.0 * 0.095, "reader {t} MiB/s");
    // gradual: it keeps growing towards the unlimited rate
    assert!(
        last > 3.0 * first,
        "first 10 s {first}, last 10 s {last} MiB/s"
    );
    assert!(last <= unlimited * 1.05, "{last} vs {unlimited}");
}
