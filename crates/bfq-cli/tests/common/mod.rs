//! Helpers shared by the command-line tests: run the `bfq` binary with a
//! one-minute guard (a hang fails the test; nothing is timed), and check a
//! refusal.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

pub fn bfq(args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_bfq"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let give_up = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > give_up {
            let _ = child.kill();
            panic!("bfq {args:?} hung");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).to_string()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

pub fn scenario() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios/2010-table3-2files.toml")
        .display()
        .to_string()
}

/// Fails (exit 1 or 2, no panic) with an error containing `says`; the
/// output, for more checks.
pub fn refused(args: &[&str], says: &str) -> Output {
    let o = bfq(args);
    let e = stderr(&o);
    assert!(
        matches!(o.status.code(), Some(1) | Some(2)),
        "{args:?}: {:?} {e}",
        o.status
    );
    assert!(!e.contains("panicked"), "{args:?}: {e}");
    assert!(e.contains(says), "{args:?}: '{e}' does not say '{says}'");
    o
}

/// [`refused`] before anything ran: nothing on stdout.
pub fn refused_first(args: &[&str], says: &str) {
    let o = refused(args, says);
    assert_eq!(stdout(&o), "", "{args:?}: nothing ran");
}
