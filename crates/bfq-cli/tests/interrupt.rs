//! SIGINT and SIGTERM during a `kernel:*` run put the device's scheduler
//! back and remove the run's cgroups, and the process exits 128 + signal;
//! `bfq cleanup` puts back what a killed run left. Flows run as processes
//! of their own (`--kernel-groups per-process`, what cgroup v2 needs; here
//! on cgroup v1) sit in their cgroups, report, follow `after`, and stop
//! with the run. Needs root, cgroup v1
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
    start_with(dev, sched, flows, &[])
}

/// [`start`] with more arguments of `bfq run`.
fn start_with(dev: &Path, sched: &str, flows: &[&str], more: &[&str]) -> Run {
    let mut cmd = bfq();
    cmd.args(["run", "--target"]).arg(dev).args(more);
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
            // flow processes get SIGTERM when the run dies; give them a
            // moment to leave their cgroups
            std::thread::sleep(Duration::from_millis(200));
            let _ = bfq_real::leftovers::cleanup(false);
        }
    }
}

/// Holds the tests of this file one at a time: each kills runs with
/// SIGKILL and checks what they left before `bfq cleanup`, which
/// another test's cleanup (of every dead run's leftovers) would race.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
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

/// [`loop_device`], or `None` after saying why the test is skipped.
fn loop_device_or_skip() -> Option<(tempfile::TempDir, sys::LoopDevice)> {
    loop_device()
        .map_err(|why| eprintln!("skipped: {why}"))
        .ok()
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
    let _serial = serial();
    let Some((_dir, dev)) = loop_device_or_skip() else {
        return;
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

/// Starts a `kernel:SCHED` run of one flow on `dev`, waits until it has
/// set the scheduler and made its cgroup, and kills it with SIGKILL,
/// which puts nothing back. Its pid.
fn kill_9_a_run(dev: &Path, sched: &str) -> u32 {
    let mut run = start(dev, sched, &["name=a,bs=4k"]);
    let pid = run.id();
    wait_for("the run to start", || {
        cgroups_of(pid).len() == 1 && scheduler_of(dev) == sched || !run.running()
    });
    let mut child = run.take();
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(scheduler_of(dev), sched, "SIGKILL leaves the scheduler");
    assert_eq!(cgroups_of(pid).len(), 1, "SIGKILL leaves the cgroup");
    pid
}

/// `bfq cleanup ARGS`: its stdout, after checking it succeeded.
fn cleanup(args: &[&str]) -> String {
    let out = bfq().arg("cleanup").args(args).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

#[test]
fn cleanup_puts_back_what_a_killed_run_left() {
    let _serial = serial();
    let Some((_dir, dev)) = loop_device_or_skip() else {
        return;
    };
    let before = scheduler_of(dev.path());
    let other = other_than(&before);
    let pid = kill_9_a_run(dev.path(), other);
    // A second run started while the first had changed the scheduler,
    // killed too: the scheduler before both is put back, not the first
    // run's.
    let (all, _) = sys::block_schedulers(dev.path()).unwrap();
    let third = all.iter().find(|s| **s != before && *s != other);
    let second = third.map(|t| kill_9_a_run(dev.path(), t));
    let name = sys::dev_name(dev.path()).unwrap();
    let listed = cleanup(&["--dry-run"]);
    assert!(
        listed.contains(&format!("{name}: scheduler {before} to restore")),
        "{listed}"
    );
    assert_eq!(cgroups_of(pid).len(), 1, "--dry-run changes nothing");
    assert_ne!(
        scheduler_of(dev.path()),
        before,
        "--dry-run changes nothing"
    );
    cleanup(&[]);
    assert_eq!(scheduler_of(dev.path()), before, "scheduler put back");
    assert!(cgroups_of(pid).is_empty(), "cgroup removed");
    assert!(second.is_none_or(|p| cgroups_of(p).is_empty()));
}

/// Starts `bench-engine fairness` (600 s) on `file` and waits until it
/// has made its loop device over it (or ended).
fn fairness_benchmark_on(file: &std::path::Path, stderr: Stdio) -> Run {
    let mut cmd = bfq();
    cmd.args([
        "bench-engine",
        "fairness",
        "--seconds",
        "600",
        "--size",
        "16M",
    ]);
    let child = cmd.arg("--file").arg(file).stdout(Stdio::null());
    let mut run = Run(Some(child.stderr(stderr).spawn().unwrap()));
    wait_for("the benchmark's loop device", || {
        !sys::LoopDevice::over(file).unwrap().is_empty() || !run.running()
    });
    run
}

/// Starts `bench-engine fairness` on `file`, kills it with SIGKILL once
/// its loop device exists, and returns that device (left behind).
fn killed_fairness_benchmark_on(file: &std::path::Path) -> PathBuf {
    let mut run = fairness_benchmark_on(file, Stdio::null());
    let mut child = run.take();
    child.kill().unwrap();
    child.wait().unwrap();
    let made = sys::LoopDevice::over(file).unwrap();
    assert_eq!(made.len(), 1, "SIGKILL leaves the loop device");
    made[0].clone()
}

/// A `bench-engine` killed with SIGKILL leaves the loop device and the
/// file it made for itself; `bfq cleanup` detaches and removes them, and
/// leaves a loop device it did not make over a file of the same
/// directory.
#[test]
fn cleanup_removes_the_loop_device_and_file_of_a_killed_benchmark() {
    let _serial = serial();
    let Some((dir, own)) = loop_device_or_skip() else {
        return;
    };
    let file = dir.path().join("bench.img");
    let made = killed_fairness_benchmark_on(&file);
    let out = cleanup(&[]);
    assert!(
        out.contains(&format!("{} detached", made.display())),
        "{out}"
    );
    assert!(sys::LoopDevice::over(&file).unwrap().is_empty());
    assert!(!file.exists(), "{out}");
    let backing = dir.path().join("loop.img");
    assert_eq!(sys::LoopDevice::over(&backing).unwrap(), [own.path()]);
}

/// A `bench-engine` killed with SIGKILL, its file deleted since: its
/// loop device, still over the deleted file (and keeping its space), is
/// detached by `bfq cleanup`. Needs root and loop devices only.
#[test]
fn cleanup_detaches_a_killed_benchmarks_loop_device_over_its_deleted_file() {
    let _serial = serial();
    if !sys::is_root() || !Path::new("/dev/loop-control").exists() {
        eprintln!("skipped: needs root and loop devices");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bench.img");
    let made = killed_fairness_benchmark_on(&file);
    let _guard = DetachIfOver(made.clone(), file.clone());
    std::fs::remove_file(&file).unwrap();
    let out = cleanup(&[]);
    assert!(
        out.contains(&format!("{} detached", made.display())),
        "{out}"
    );
}

/// Detaches loop device `.0` when dropped if it is still over file `.1`,
/// deleted (a test that failed before `bfq cleanup` did).
struct DetachIfOver(PathBuf, PathBuf);

impl Drop for DetachIfOver {
    fn drop(&mut self) {
        let Ok(name) = sys::dev_name(&self.0) else {
            return;
        };
        let sysfs = format!("/sys/block/{name}/loop/backing_file");
        let now = std::fs::read_to_string(sysfs).unwrap_or_default();
        if now.trim_end() == format!("{} (deleted)", self.1.display()) {
            let _ = sys::detach_loop(&self.0);
        }
    }
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, r)| !r.starts_with('Z')))
        .unwrap_or(false)
}

/// The user processes in a cgroup: a kernel thread (no command line),
/// such as the loop device's worker for the cgroup, is not one of the
/// run's.
fn procs_in(cg: &Path) -> Vec<u32> {
    std::fs::read_to_string(cg.join("cgroup.procs"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .filter(|p| std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| !c.is_empty()))
        .collect()
}

#[test]
fn flows_as_processes_sit_in_their_cgroups_and_stop_with_the_run() {
    let _serial = serial();
    let Some((_dir, dev)) = loop_device_or_skip() else {
        return;
    };
    let before = scheduler_of(dev.path());
    let mut run = start_with(
        dev.path(),
        "bfq",
        &[
            "name=a,bs=4k,pattern=rand,weight=100",
            "name=b,bs=4k,pattern=rand,weight=300",
        ],
        &["--kernel-groups", "per-process"],
    );
    let pid = run.id();
    wait_for("each flow's process in its cgroup", || {
        let cgs = cgroups_of(pid);
        cgs.len() == 2 && cgs.iter().all(|c| procs_in(c).len() == 1) || !run.running()
    });
    assert!(run.running(), "the run ended early");
    let mut cgs = cgroups_of(pid);
    cgs.sort();
    let weights: Vec<String> = cgs
        .iter()
        .map(|c| std::fs::read_to_string(c.join("blkio.bfq.weight")).unwrap())
        .collect();
    let children: Vec<u32> = cgs.iter().flat_map(|c| procs_in(c)).collect();
    for c in &children {
        let cmd = std::fs::read_to_string(format!("/proc/{c}/cmdline")).unwrap();
        assert!(cmd.contains("kernel-flow") && *c != pid, "{cmd:?}");
    }
    assert!(
        weights[0].contains("100") && weights[1].contains("300"),
        "{weights:?}"
    );
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid as i32, libc::SIGINT) };
    let out = run.take().wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(cgroups_of(pid).is_empty(), "cgroups removed");
    assert_eq!(scheduler_of(dev.path()), before, "scheduler put back");
    for c in children {
        assert!(
            !Path::new(&format!("/proc/{c}")).exists(),
            "flow process {c} left"
        );
    }
}

/// Ctrl-C at a terminal signals the whole process group: the flow
/// processes get SIGINT from the terminal and then SIGTERM from the run,
/// and take the two as one orderly stop: the run prints what each flow
/// did and exits 130 (fails with a second signal exiting a flow process
/// at once, as it does the run itself: no flow's report).
#[test]
fn ctrl_c_at_a_terminal_stops_flow_processes_in_order() {
    use std::os::unix::process::CommandExt;
    let _serial = serial();
    let Some((_dir, dev)) = loop_device_or_skip() else {
        return;
    };
    let mut cmd = bfq();
    cmd.args(["run", "--target"]).arg(dev.path());
    cmd.args([
        "--scheduler",
        "kernel:none",
        "--kernel-groups",
        "per-process",
    ]);
    cmd.args([
        "--seconds",
        "600",
        "--flow",
        "name=a,bs=4k",
        "--flow",
        "name=b,bs=4k",
    ]);
    let child = cmd
        .process_group(0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut run = Run(Some(child));
    let pid = run.id();
    wait_for("each flow's process in its cgroup", || {
        let cgs = cgroups_of(pid);
        cgs.len() == 2 && cgs.iter().all(|c| procs_in(c).len() == 1) || !run.running()
    });
    assert!(run.running(), "the run ended early");
    // SAFETY: signalling our own child's process group, as a terminal does.
    unsafe { libc::kill(-(pid as i32), libc::SIGINT) };
    let out = run.take().wait_with_output().unwrap();
    let (table, err) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(!err.contains("interrupted again"), "{err}");
    assert!(
        table.contains("\n  a ") && table.contains("\n  b "),
        "{table}\n{err}"
    );
    assert!(cgroups_of(pid).is_empty(), "cgroups removed");
}

#[test]
fn flows_as_processes_report_and_follow_after() {
    let _serial = serial();
    let Some((_dir, dev)) = loop_device_or_skip() else {
        return;
    };
    let out = bfq()
        .args(["run", "--target"])
        .arg(dev.path())
        .args([
            "--scheduler",
            "kernel:bfq",
            "--kernel-groups",
            "per-process",
        ])
        .args(["--seconds", "60", "--json", "-"])
        .args(["--flow", "name=a,bs=64k,bytes=2M"])
        .args([
            "--flow",
            "name=b,bs=4k,pattern=rand,depth=4,weight=300,duration=300ms",
        ])
        .args(["--flow", "name=c,bs=64k,bytes=1M,after=a+b"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let flow = |n: &str| {
        let f = j["flows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == n);
        f.unwrap().clone()
    };
    let end = |n: &str| flow(n)["completions_s"][0].as_f64().unwrap();
    let run_time = |n: &str| flow(n)["run_times_s"][0].as_f64().unwrap();
    assert_eq!(flow("a")["bytes"], 2 << 20);
    assert_eq!(flow("c")["bytes"], 1 << 20);
    assert!(run_time("b") >= 0.3, "b stops at its own end, not before");
    // c's run starts after a and b ended
    assert!(end("c") - run_time("c") >= end("a").max(end("b")));
}

#[test]
fn a_killed_run_leaves_no_flow_process() {
    let _serial = serial();
    let Some((_dir, dev)) = loop_device_or_skip() else {
        return;
    };
    let mut run = start_with(
        dev.path(),
        "bfq",
        &["name=a,bs=4k,pattern=rand"],
        &["--kernel-groups", "per-process"],
    );
    let pid = run.id();
    wait_for("the flow's process in its cgroup", || {
        cgroups_of(pid).iter().any(|c| procs_in(c).len() == 1) || !run.running()
    });
    assert!(run.running(), "the run ended early");
    let children: Vec<u32> = cgroups_of(pid).iter().flat_map(|c| procs_in(c)).collect();
    let mut c = run.take();
    c.kill().unwrap();
    c.wait().unwrap();
    wait_for("the flow process to end", || {
        children.iter().all(|&c| !alive(c))
    });
    bfq_real::leftovers::cleanup(false).unwrap();
    assert!(cgroups_of(pid).is_empty());
}

/// SIGTERM while `bench-engine fairness` runs stops it, removes its loop
/// device and the file it made, and exits 143.
#[test]
fn interrupting_the_fairness_benchmark_removes_its_loop_device_and_file() {
    let _serial = serial();
    let Some((dir, _own)) = loop_device_or_skip() else {
        return;
    };
    let file = dir.path().join("bench.img");
    let mut run = fairness_benchmark_on(&file, Stdio::piped());
    assert!(run.running(), "the benchmark ended early");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(run.id() as i32, libc::SIGTERM) };
    let out = run.take().wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(143), "{err}");
    assert!(err.contains("interrupted by signal 15"), "{err}");
    assert!(sys::LoopDevice::over(&file).unwrap().is_empty(), "{err}");
    assert!(!file.exists(), "{err}");
}

/// SIGINT while `bench-engine randread` runs stops it, removes its loop
/// device and its file in /dev/shm, and exits 130.
#[test]
fn interrupting_randread_removes_its_loop_device_and_file() {
    let _serial = serial();
    let Some((_dir, _own)) = loop_device_or_skip() else {
        return;
    };
    let mut cmd = bfq();
    cmd.args([
        "bench-engine",
        "randread",
        "--seconds",
        "600",
        "--size",
        "16M",
    ]);
    cmd.args(["--flows", "1", "--schedulers", "fifo", "--no-fio"]);
    let child = cmd.stdout(Stdio::null()).stderr(Stdio::piped());
    let mut run = Run(Some(child.spawn().unwrap()));
    let file = PathBuf::from(format!("/dev/shm/bfq-randread-{}.img", run.id()));
    wait_for("the benchmark's loop device", || {
        !sys::LoopDevice::over(&file).unwrap().is_empty() || !run.running()
    });
    assert!(run.running(), "the benchmark ended early");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(run.id() as i32, libc::SIGINT) };
    let out = run.take().wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(sys::LoopDevice::over(&file).unwrap().is_empty(), "{err}");
    assert!(!file.exists(), "{err}");
}
