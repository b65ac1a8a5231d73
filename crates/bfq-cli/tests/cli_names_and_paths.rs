//! What the command line says about names and paths: unknown schedulers
//! (the project's and `kernel:NAME`) and bad `--set` arguments refused as
//! typed, naming what is accepted, before anything runs; `bfq schedulers
//! NAME` listing the ranges and words the scheduler checks; zero flows
//! refused; missing or wrong directories named before any work; a loop
//! device of the size asked for, and one device per file unless asked.
//! The loop device test needs root and skips with a message without it.
//! Nothing is timed: a one-minute guard only turns a hang into a failure.

mod common;

use common::{bfq, refused_first as refused, scenario, stderr, stdout};
use std::path::Path;
use std::process::Command;

#[test]
fn set_arguments_are_echoed_as_typed_with_what_is_accepted() {
    let sim = |set: &str, says: &str| {
        refused(
            &["sim", &scenario(), "-q", "--scheduler", "bfq", "--set", set],
            says,
        )
    };
    sim(
        "max_budget",
        "--set: 'max_budget' is not a setting: expected KEY=VALUE",
    );
    sim("=5", "--set: '=5' is not a setting: expected KEY=VALUE");
    sim(
        "max_budget=+5",
        "setting max_budget=+5: must be 0 or an integer in 32..=16777216",
    );
    sim("low_latency=y", "1/0, true/false, on/off, yes/no");
    sim("budget_feedback=x", "kernel|bfq-plus-2014|2010");
}

#[test]
fn schedulers_lists_the_ranges_and_words_checked() {
    let o = bfq(&["schedulers", "bfq"]);
    let out = stdout(&o);
    assert!(o.status.success(), "{}", stderr(&o));
    let line = |key: &str| {
        out.lines()
            .find(|l| l.split_whitespace().next() == Some(key))
            .unwrap_or_else(|| panic!("no {key} in {out}"))
            .to_string()
    };
    assert!(line("max_budget").ends_with("0 or integer 32..=16777216"));
    for key in ["budget_feedback", "time_charging"] {
        assert!(line(key).contains("word kernel|bfq-plus-2014|2010 (also "));
    }
    assert!(line("seeky_detection").contains("word kernel|bfq-plus-2014"));
    assert!(line("peak_rate_estimator").contains("word kernel|bfq-plus-2014"));
    assert!(out.contains("yes/no"), "{out}");
    let o = bfq(&["schedulers", "fifo"]);
    assert_eq!(stdout(&o), "fifo has no settings\n");
    // The per-flow and per-group settings are named too.
    let o = bfq(&["schedulers", "scan-edf"]);
    assert!(
        stdout(&o).ends_with(
            "per flow N or group N, as NAME.fN or NAME.gN (docs/schedulers.md): deadline\n"
        ),
        "{}",
        stdout(&o)
    );
    assert!(!stdout(&bfq(&["schedulers", "bfq"])).contains("per flow N"));
}

#[test]
fn unknown_schedulers_and_zero_flows_are_refused_first() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("t.img");
    std::fs::File::create(&t)
        .unwrap()
        .set_len(16 << 20)
        .unwrap();
    let t = t.to_str().unwrap();
    let run = |sched: &str, says: &str| {
        let args = ["run", "--target", t, "--flow", "name=a,bs=4k"];
        refused(&[&args[..], &["--scheduler", sched]].concat(), says);
    };
    run("nosuch", "known: bfq,");
    run("kernel:foo", "unknown kernel scheduler 'foo' (kernel:bfq, ");
    let randread = ["bench-engine", "randread", "--schedulers"];
    refused(
        &[&randread[..], &["kernel:foo"]].concat(),
        "kernel:mq-deadline",
    );
    refused(&[&randread[..], &["nosuch@local"]].concat(), "known: bfq,");
    refused(
        &["bench-engine", "nop", "--schedulers", "kernel:bfq"],
        "not kernel:*",
    );
    refused(&["bench-engine", "nop", "--flows", "0"], "--flows");
    refused(&["bench-engine", "randread", "--flows", "4,0"], "--flows");
    // A regular file as --device (the root check may come first).
    let o = bfq(&["bench-engine", "randread", "--device", t, "--no-fio"]);
    let e = stderr(&o);
    assert!(!o.status.success());
    assert!(
        e.contains(&format!("{t}: not a block device")) || e.contains("root"),
        "{e}"
    );
}

#[test]
fn directories_are_checked_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let missing = missing.to_str().unwrap();
    // No scheduler case runs before the scenarios are found.
    refused(
        &["fuzz", "--cases", "1", "--scenarios", missing],
        &format!("--scenarios {missing}: "),
    );
    refused(
        &[
            "fuzz",
            "--cases",
            "1",
            "--scenarios",
            dir.path().to_str().unwrap(),
        ],
        "no scenario files",
    );
    let file = dir.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let file = file.to_str().unwrap();
    refused(
        &["suite", "--quick", "--out", file],
        &format!("--out {file}: exists and is not a directory"),
    );
}

/// Detaches the loop devices it holds when dropped.
struct Attached(Vec<String>);

impl Drop for Attached {
    fn drop(&mut self) {
        for d in &self.0 {
            let _ = Command::new("losetup").arg("-d").arg(d).status();
        }
    }
}

#[test]
fn loop_create_makes_a_device_of_size_once_per_file() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || !Path::new("/dev/loop-control").exists() {
        eprintln!(
            "SKIPPED loop_create_makes_a_device_of_size_once_per_file: needs root and loop devices"
        );
        return;
    }
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let img = dir.path().join("big.img");
    std::fs::File::create(&img)
        .unwrap()
        .set_len(32 << 20)
        .unwrap();
    let f = img.to_str().unwrap();
    let mut held = Attached(Vec::new());
    let o = bfq(&["loop", "create", f, "16M"]);
    let dev = stdout(&o).trim().to_string();
    assert!(
        o.status.success() && dev.starts_with("/dev/loop"),
        "{}",
        stderr(&o)
    );
    held.0.push(dev.clone());
    assert!(
        stderr(&o).contains("covers its first 16777216"),
        "{}",
        stderr(&o)
    );
    let name = Path::new(&dev).file_name().unwrap().to_str().unwrap();
    let sectors = std::fs::read_to_string(format!("/sys/block/{name}/size")).unwrap();
    assert_eq!(sectors.trim(), "32768", "a device of 16 MiB");
    assert_eq!(
        std::fs::metadata(&img).unwrap().len(),
        32 << 20,
        "not shrunk"
    );
    refused(
        &["loop", "create", f, "16M"],
        &format!("already attached as {dev}"),
    );
    let o = bfq(&["loop", "create", f, "16M", "--again"]);
    assert!(o.status.success(), "{}", stderr(&o));
    held.0.push(stdout(&o).trim().to_string());
    refused(
        &["loop", "create", dir.path().to_str().unwrap(), "16M"],
        "not a regular file",
    );
}
