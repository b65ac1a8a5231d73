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
        real_apps: false,
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

/// Checks the completeness of a report's findings: each cites its table
/// or figure and section, each that does not hold carries a cause with
/// evidence that report.md and report.html show, none lacks a number it
/// needs from a run that ran ("no value"), and there are at least 45.
fn assert_complete(r: &bfq_suite::Report) {
    let findings: Vec<_> = r.experiments.iter().flat_map(|e| &e.findings).collect();
    assert!(findings.len() >= 45, "{} findings", findings.len());
    let problems: Vec<String> = findings.iter().flat_map(|f| f.problems()).collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let md = report::to_markdown(r);
    let html = report::to_html(r);
    for f in findings
        .iter()
        .filter(|f| f.verdict != bfq_suite::model::Verdict::Holds)
    {
        let c = f.cause.as_ref().unwrap();
        assert!(
            !c.evidence.starts_with("no value"),
            "{}: {}",
            f.claim,
            c.evidence
        );
        assert!(
            md.contains(&format!("**{}**", c.kind.as_str())),
            "md lacks a cause"
        );
        assert!(html.contains(&format!("<b>cause ({})</b>", c.kind.as_str())));
    }
}

/// Every experiment in its quick form (`--quick` with every id named, one
/// repetition): findings whose variants the quick form leaves out are NOT
/// COMPARABLE with a cause saying so; the others are checked in full, at
/// least one per experiment.
#[test]
fn every_finding_cites_its_source_and_every_failure_has_a_cause() {
    let mut o = opts("complete", 2);
    o.only = Some(
        bfq_suite::experiments()
            .iter()
            .map(|e| e.id.to_string())
            .collect(),
    );
    o.reps = Some(1);
    let r = run_suite(&o).unwrap();
    assert_eq!(r.experiments.len(), bfq_suite::experiments().len());
    assert_complete(&r);
    // each quick form checks at least one finding against its runs
    for e in &r.experiments {
        let checked = e
            .findings
            .iter()
            .filter(|f| f.verdict != bfq_suite::model::Verdict::NotComparable);
        assert!(
            checked.count() > 0,
            "{}: no finding checked in its quick form",
            e.id
        );
    }
    let _ = std::fs::remove_dir_all(&o.out);
}

/// The same over the whole suite (every variant, one repetition), where
/// every finding's own cause is computed. Slower: run it with
/// `cargo test --release -p bfq-suite -- --ignored`.
#[test]
#[ignore]
fn every_finding_of_the_full_suite_has_its_cause() {
    let mut o = opts("complete-full", 2);
    o.only = None;
    o.quick = false;
    o.reps = Some(1);
    let r = run_suite(&o).unwrap();
    assert_complete(&r);
    let _ = std::fs::remove_dir_all(&o.out);
}

/// The 2010 video stream is described one way: the report's description,
/// docs/suite.md and scenarios/2010-video.toml say what the code runs.
#[test]
fn the_video_stream_is_described_as_it_runs() {
    use bfq_suite::exp2010::{
        STREAM_BYTES, STREAM_DEADLINE, STREAM_EVERY, STREAM_GAP, STREAM_READAHEAD,
    };
    let kib = STREAM_BYTES.trim_end_matches('k');
    let ms = STREAM_EVERY.trim_end_matches("ms");
    let text = format!("{kib} KiB every {ms} ms");
    let e = bfq_suite::exp2010::video();
    assert!(e.what.contains(&text), "report: {}", e.what);
    let late = format!("more than {} s", STREAM_DEADLINE.trim_end_matches('s'));
    assert!(e.what.contains(&late), "{}", e.what);
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let doc = std::fs::read_to_string(format!("{root}/docs/suite.md")).unwrap();
    assert!(doc.contains(&text), "docs/suite.md does not say {text}");
    let sc = std::fs::read_to_string(format!("{root}/scenarios/2010-video.toml")).unwrap();
    let want = format!(
        "periodic = {{ every = \"{STREAM_EVERY}\", bytes = \"{STREAM_BYTES}\", deadline = \"{STREAM_DEADLINE}\" }}"
    );
    let movies = sc.matches("name = \"movie").count();
    assert_eq!(movies, 30);
    assert_eq!(
        sc.matches(&want).count(),
        movies,
        "scenario streams differ from {want}"
    );
    assert!(
        sc.contains(&text),
        "scenario description does not say {text}"
    );
    // one window at a time, and the thread's time between reads
    for want in [
        format!("readahead_style = \"{STREAM_READAHEAD}\""),
        format!("gap = \"{STREAM_GAP}\""),
    ] {
        assert_eq!(
            sc.matches(&want).count(),
            movies,
            "scenario streams lack {want}"
        );
        assert!(e.what.contains(&want), "report: {}", e.what);
        assert!(
            doc.contains(&format!("`{want}`")),
            "docs/suite.md does not say `{want}`"
        );
    }
}
