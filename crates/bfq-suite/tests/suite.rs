//! End-to-end: determinism of a quick subset and option errors.

use bfq_suite::{report, run_suite, Options};

fn opts(dir: &str, jobs: usize) -> Options {
    Options {
        only: Some(vec!["2010-fairness".into(), "2014-throughput".into()]),
        reps: Some(2),
        jobs,
        quick: true,
        out: std::env::temp_dir().join(format!("bfq-suite-test-{}-{dir}", std::process::id())),
        progress: false,
        target: None,
    }
}

#[test]
fn quick_subset_is_byte_identical_across_runs_and_job_counts() {
    let a = run_suite(&opts("a", 1)).unwrap();
    let b = run_suite(&opts("b", 2)).unwrap();
    assert_eq!(report::to_json(&a), report::to_json(&b));
    assert_eq!(report::to_markdown(&a), report::to_markdown(&b));
    assert_eq!(report::to_html(&a), report::to_html(&b));
    // and through the files
    let o = opts("files", 2);
    report::write_all(&a, &o.out).unwrap();
    let first = std::fs::read(o.out.join("report.json")).unwrap();
    report::write_all(&b, &o.out).unwrap();
    assert_eq!(first, std::fs::read(o.out.join("report.json")).unwrap());
    // the subset ran and has numbers
    assert_eq!(a.experiments.len(), 2);
    let e = &a.experiments[0];
    assert_eq!(e.id, "2010-fairness");
    assert!(e.mean("2files", "bfq-2010 B_max=4096", "agg").unwrap() > 1.0);
    assert!(!e.findings.is_empty());
    for d in ["a", "b", "files"] {
        let _ = std::fs::remove_dir_all(opts(d, 1).out);
    }
}

#[test]
fn unknown_experiment_id_is_a_clear_error() {
    let mut o = opts("bad", 1);
    o.only = Some(vec!["2010-fairness".into(), "2099-nope".into()]);
    let e = run_suite(&o).unwrap_err().to_string();
    assert!(e.contains("unknown experiment id '2099-nope'"), "{e}");
    assert!(e.contains("known: 2010-throughput"), "{e}");
}

#[test]
fn zero_reps_is_an_error() {
    let mut o = opts("zero", 1);
    o.reps = Some(0);
    assert!(run_suite(&o).unwrap_err().to_string().contains("--reps"));
}

#[test]
fn every_experiment_id_is_unique_and_documented() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/suite.md"))
        .unwrap();
    let mut seen = std::collections::BTreeSet::new();
    for e in bfq_suite::experiments() {
        assert!(seen.insert(e.id), "duplicate id {}", e.id);
        assert!(
            doc.contains(&format!("`{}`", e.id)),
            "{} not in docs/suite.md",
            e.id
        );
    }
}

/// `--target` selects the real-storage experiments, and only those.
#[test]
fn target_selects_real_storage_experiments() {
    let mut o = opts("target-select", 1);
    o.target = Some(std::env::temp_dir().join("bfq-suite-no-such-target"));
    o.only = None;
    let Ok(sel) = bfq_suite::runner::select(&o) else {
        panic!("selection failed")
    };
    assert!(!sel.is_empty());
    assert!(sel.iter().all(|(e, _)| e.id.starts_with("real-")));
    o.only = Some(vec!["2010-fairness".into()]);
    let Err(err) = bfq_suite::runner::select(&o) else {
        panic!("a simulated experiment id was accepted with --target")
    };
    let err = err.to_string();
    assert!(err.contains("real-fairness"), "{err}");
}
