//! SIGINT and SIGTERM during a `kernel:*` run put the device's scheduler
//! back and remove the run's cgroups, and the process exits 128 + signal;
//! `bfq cleanup` puts back what a killed run left. Needs root, cgroup v1
//! blkio and a loop device: skips with a message where unavailable. Loop
//! devices and files are removed even when an assertion fails (guards).
//! Nothing is timed: the test waits for states, with a one-minute guard
//! against hangs.

use bfq_real::sys;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn bfq() -> Command {
    Command::new(env!("CARGO_BIN_EXE_bfq"))
}

/// A run in progress: killed, and what it left put back, if the test
/// fails before it ended.
struct Run(Option<std::process::Child>);

impl Run {
    fn id(&self) -> u32 {
        self.0.as_ref().unwrap().id()
    }
    fn running(&mut self) -> bool {
        self.0.as_mut().unwrap().try_wait().unwrap().is_none()
    }
    fn take(&mut self) -> std::process::Child {
        self.0.take().unwrap()
    }
}

/// Starts a ten-minute `kernel:SCHED` run of `flows` on `dev`.
fn start(dev: &Path, sched: &str, flows: &[&str]) -> Run {
    let mut cmd = bfq();
    cmd.args(["run", "--target"]).arg(dev);
    cmd.args([
        "--scheduler",
        &format!("kernel:{sched}"),
        "--seconds",
        "600",
    ]);
    for f in flows {
        cmd.args(["--flow", f]);
    }
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    Run(Some(child))
}

/// The scheduler a run switches `dev` to: another than its current one,
/// so that putting it back is visible.
fn other_than(before: &str) -> &'static str {
    if before == "mq-deadline" {
        "none"
    } else {
        "mq-deadline"
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
            let _ = sys::cleanup_dead_runs();
        }
    }
}

/// A loop device over a temporary file, or why there is none.
fn loop_device() -> Result<(tempfile::TempDir, sys::LoopDevice), String> {
    if !sys::is_root() {
        return Err("not root".into());
    }
    if !Path::new(sys::BLKIO_V1).join("tasks").exists() {
        return Err("no cgroup v1 blkio hierarchy".into());
    }
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let file = dir.path().join("loop.img");
    let dev = sys::LoopDevice::create(&file, 64 << 20, false).map_err(|e| e.to_string())?;
    Ok((dir, dev))
}

fn scheduler_of(dev: &Path) -> String {
    sys::block_schedulers(dev).unwrap().1
}

fn cgroups_of(pid: u32) -> Vec<PathBuf> {
    let prefix = format!("bfq-rs-{pid}-");
    std::fs::read_dir(sys::BLKIO_V1)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect()
}

/// Waits until `cond` holds; fails the test after a minute (a hang guard,
/// not a measurement).
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let give_up = Instant::now() + Duration::from_secs(60);
    while !cond() {
        assert!(Instant::now() < give_up, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn interrupting_a_kernel_run_puts_the_machine_back() {
    let (_dir, dev) = match loop_device() {
        Ok(d) => d,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    let before = scheduler_of(dev.path());
    let other = other_than(&before);
    for (sig, code) in [(libc::SIGINT, 130), (libc::SIGTERM, 143)] {
        let mut run = start(
            dev.path(),
            other,
            &["name=a,bs=4k", "name=b,bs=4k,weight=300"],
        );
        let pid = run.id();
        // Running: scheduler switched and both flows' cgroups made.
        wait_for("the run to start", || {
            cgroups_of(pid).len() == 2 && scheduler_of(dev.path()) == other || !run.running()
        });
        assert!(run.running(), "the run ended early");
        // SAFETY: signalling our own child.
        unsafe { libc::kill(pid as i32, sig) };
        let out = run.take().wait_with_output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(code),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(scheduler_of(dev.path()), before, "scheduler put back");
        assert!(cgroups_of(pid).is_empty(), "cgroups removed");
        assert!(
            !Path::new(sys::STATE_DIR)
                .join(format!("{pid}-{}", sys::dev_name(dev.path()).unwrap()))
                .exists(),
            "no state left for cleanup"
        );
    }
}

#[test]
fn cleanup_puts_back_what_a_killed_run_left() {
    let (_dir, dev) = match loop_device() {
        Ok(d) => d,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    let before = scheduler_of(dev.path());
    let other = other_than(&before);
    let mut run = start(dev.path(), other, &["name=a,bs=4k"]);
    let pid = run.id();
    wait_for("the run to start", || {
        cgroups_of(pid).len() == 1 && scheduler_of(dev.path()) == other
    });
    let mut child = run.take();
    child.kill().unwrap(); // SIGKILL: nothing is put back
    child.wait().unwrap();
    assert_eq!(
        scheduler_of(dev.path()),
        other,
        "SIGKILL leaves the scheduler"
    );
    assert_eq!(cgroups_of(pid).len(), 1, "SIGKILL leaves the cgroup");
    let out = bfq().arg("cleanup").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(scheduler_of(dev.path()), before, "scheduler put back");
    assert!(cgroups_of(pid).is_empty(), "cgroup removed");
}
