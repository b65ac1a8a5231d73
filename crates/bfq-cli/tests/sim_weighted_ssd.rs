//! Five greedy sequential readers with weights 1:2:3:4:5 on the simulated
//! SATA SSD (internal queueing): every BFQ profile must give each reader
//! most of its weighted share. Before injected service was charged to the
//! injected flow when its queue emptied, `bfq` gave the weight-300 reader
//! 8% of its share and the weight-100 reader three times its share.

use bfq_core::Settings;
use bfq_sim::{simulate, Scenario, SimOptions};
use std::path::Path;

#[test]
fn weighted_readers_on_an_ssd_get_their_shares() {
    let p =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/ssd-5-weighted-readers.toml");
    let s = Scenario::from_file(p).unwrap();
    for (profile, settings) in [
        ("bfq", vec![]),
        ("bfq", vec![("injection", "0")]),
        ("bfq-plus-2014", vec![]),
        ("bfq-2010", vec![("idle_on_queueing_devices", "1")]),
    ] {
        let sched =
            bfq_schedulers::build(profile, &Settings::from_pairs(settings.clone())).unwrap();
        let r = simulate(&s, sched, s.seed, SimOptions::default()).unwrap();
        let t: Vec<f64> = r.flows.iter().map(|f| f.throughput_mib_s).collect();
        let total: f64 = t.iter().sum();
        for (i, &x) in t.iter().enumerate() {
            let ideal = total * (i + 1) as f64 / 15.0;
            assert!(
                x >= 0.75 * ideal && x <= 1.25 * ideal,
                "{profile} {settings:?}: reader {i} got {x:.1} MiB/s, its share is {ideal:.1} ({t:.1?})"
            );
        }
    }
}
