//! Deceptive idleness (2010 paper, Sections I and V-C): two greedy
//! sequential readers of 128 MB files at the outermost and innermost
//! slices of the IBM disk, read-ahead with one window in flight (the
//! readers the paper measured), a gap between each completion and the next request. Idling
//! must recover the throughput a work-conserving policy loses, C-LOOK must
//! alternate between the files (fair, Table III) and be slower than AS
//! (Table II), and SCAN-EDF must gain from T_wait. Simulated time only.

use bfq_core::Settings;
use bfq_sim::{simulate, Scenario, SimOptions, SimResult};
use std::path::Path;

fn run(sched: &str, settings: &[(&str, &str)], seed: u64) -> SimResult {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/2010-table3-2files.toml");
    let s = Scenario::from_file(p).unwrap();
    let sched =
        bfq_schedulers::build(sched, &Settings::from_pairs(settings.iter().copied())).unwrap();
    simulate(&s, sched, seed, SimOptions::default()).unwrap()
}

#[test]
fn idling_recovers_what_deceptive_idleness_costs() {
    let idle = run("bfq-2010", &[("max_budget", "4096")], 1).aggregate_mib_s;
    let none = run(
        "bfq-2010",
        &[("max_budget", "4096"), ("slice_idle", "0")],
        1,
    )
    .aggregate_mib_s;
    assert!(idle > 2.0 * none, "idling {idle} vs none {none} MiB/s");
    let t0 = run("scan-edf", &[("delta", "640ms"), ("t_wait", "0ms")], 1).aggregate_mib_s;
    let t4 = run("scan-edf", &[("delta", "640ms"), ("t_wait", "4ms")], 1).aggregate_mib_s;
    assert!(t4 > 1.05 * t0, "SCAN-EDF T_wait 4 ms {t4} vs 0 ms {t0}");
}

#[test]
fn clook_alternates_between_the_files_and_is_slower_than_as() {
    let c = run("clook", &[], 1);
    let (a, b) = (c.flows[0].throughput_mib_s, c.flows[1].throughput_mib_s);
    assert!((a / b - 1.0).abs() < 0.2, "C-LOOK shares {a} / {b} MiB/s");
    let as_ = run(
        "as",
        &[
            ("antic_expire", "4ms"),
            ("read_expire", "10s"),
            ("read_batch_expire", "10s"),
        ],
        1,
    );
    assert!(
        as_.aggregate_mib_s > 1.2 * c.aggregate_mib_s,
        "AS {} vs C-LOOK {}",
        as_.aggregate_mib_s,
        c.aggregate_mib_s
    );
}

#[test]
fn seeds_give_different_repetitions_and_each_seed_is_reproducible() {
    let a = run("bfq-2010", &[("max_budget", "4096")], 1);
    let b = run("bfq-2010", &[("max_budget", "4096")], 2);
    let a2 = run("bfq-2010", &[("max_budget", "4096")], 1);
    assert_eq!(a.aggregate_mib_s.to_bits(), a2.aggregate_mib_s.to_bits());
    assert_ne!(a.aggregate_mib_s.to_bits(), b.aggregate_mib_s.to_bits());
}
