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
