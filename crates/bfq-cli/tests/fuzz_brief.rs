//! A brief run of `bfq fuzz` (a fixed number of seeded cases, no time
//! budget): every scheduler through random API calls and mutated shipped
//! scenarios. Longer runs by hand: `bfq fuzz --minutes 30`.

use std::path::Path;
use std::process::Command;

#[test]
fn fuzz_brief_is_clean() {
    let scenarios = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let o = Command::new(env!("CARGO_BIN_EXE_bfq"))
        .args([
            "fuzz",
            "--cases",
            "30",
            "--ops",
            "1500",
            "--seed",
            "7",
            "--scenarios",
        ])
        .arg(&scenarios)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Every scheduler and the scenarios were exercised.
    for e in bfq_schedulers::SCHEDULERS {
        assert!(
            out.contains(&format!("scheduler {}: 30 cases", e.name)),
            "{out}"
        );
    }
    assert!(out.contains("scenarios: 30 cases"), "{out}");
}

/// A seed replays the same case: the same seed gives the same calls (the
/// count of calls made differs when any choice does), so a failure found
/// by a long run is reproduced with `--seed SEED --cases 1`.
#[test]
fn a_seed_replays_the_same_case() {
    let run = || {
        let o = Command::new(env!("CARGO_BIN_EXE_bfq"))
            .args([
                "fuzz", "--target", "bfq", "--cases", "5", "--ops", "3000", "--seed", "201838",
            ])
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(o.status.success(), "{out}");
        // "scheduler bfq: 5 cases, N calls/runs, clean, in T s (...)"
        out.split(", clean").next().unwrap().to_string()
    };
    let first = run();
    assert!(first.starts_with("scheduler bfq: 5 cases, "), "{first}");
    for _ in 0..3 {
        assert_eq!(run(), first);
    }
}

#[test]
fn an_unknown_target_lists_the_valid_ones() {
    let o = Command::new(env!("CARGO_BIN_EXE_bfq"))
        .args(["fuzz", "--target", "nope", "--cases", "1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("'nope'") && err.contains("bfq-plus-2014"),
        "{err}"
    );
}
