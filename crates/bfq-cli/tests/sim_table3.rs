//! The simulator with BFQ on the 2010 paper's Table III setting (Section
//! V-D): two and five 128 MB files at the outermost to innermost slices of
//! the IBM-DTLA-307030, B_max = 4096 sectors. The paper measured
//! 9.95 / 9.81 MB/s (2 files) and 4.29-4.31 MB/s each (5 files): equal
//! shares, aggregate ~19.8 and ~21.5 MB/s. Deterministic (simulated time).

use bfq_core::Settings;
use bfq_sim::{simulate, Scenario, SimOptions};
use std::path::Path;

fn table3(files: usize) -> Vec<f64> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("../../scenarios/2010-table3-{files}files.toml"));
    let s = Scenario::from_file(p).unwrap();
    let sched =
        bfq_schedulers::build("bfq-2010", &Settings::from_pairs([("max_budget", "4096")])).unwrap();
    let r = simulate(&s, sched, s.seed, SimOptions::default()).unwrap();
    // MB/s (10^6), as the paper
    r.flows
        .iter()
        .map(|f| f.throughput_mib_s * 1.048576)
        .collect()
}

#[test]
fn bfq_2010_table3_two_and_five_files() {
    for (n, paper_each) in [(2, 9.88), (5, 4.30)] {
        let t = table3(n);
        let (lo, hi) = t
            .iter()
            .fold((f64::MAX, 0.0f64), |(a, b), &x| (a.min(x), b.max(x)));
        eprintln!("{n} files: {t:.2?} MB/s (paper ~{paper_each} each)");
        assert!(hi / lo < 1.05, "shares are not equal: {t:?}");
        let agg: f64 = t.iter().sum();
        let paper = paper_each * n as f64;
        assert!(
            (agg - paper).abs() / paper < 0.2,
            "aggregate {agg} vs paper {paper}"
        );
    }
}
