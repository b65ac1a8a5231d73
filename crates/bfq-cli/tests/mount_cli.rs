//! `bfq mount` as a command: unmounts on SIGINT/SIGTERM, refuses a
//! non-empty mountpoint, `--cleanup` removes what a killed server left and
//! nothing a running one serves, and of two mounts stacked on one mount
//! point each server unmounts only its own.
//! Needs root and /dev/fuse (skips with a message otherwise); every test
//! cleans up its mount and directories, also when it fails.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// [`bfq_mount::can_mount`], saying why a test is skipped when not.
fn can_mount() -> bool {
    bfq_mount::can_mount()
        .map_err(|why| eprintln!("skipped: {why}"))
        .is_ok()
}

/// `--cleanup` without a mount point acts on every bfq mount: the tests
/// that leave a dead mount or run it go one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The serial lock and a started server over a fresh fixture; `None`
/// (skipped, said) without root or /dev/fuse.
fn serial_started() -> Option<(std::sync::MutexGuard<'static, ()>, Fixture)> {
    if !can_mount() {
        return None;
    }
    let serial = serial();
    let mut fx = Fixture::new();
    fx.start();
    Some((serial, fx))
}

fn bfq() -> Command {
    Command::new(env!("CARGO_BIN_EXE_bfq"))
}

/// `bfq mount --cleanup [MOUNTPOINT]`, run to its end.
fn cleanup(mnt: Option<&Path>) -> Output {
    let mut c = bfq();
    c.args(["mount", "--cleanup"]);
    if let Some(m) = mnt {
        c.arg(m);
    }
    c.output().unwrap()
}

/// Asserts that a command succeeded, showing its stderr if not.
fn succeeded(out: &Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// How many mounts are at `p` (stacked ones count one each).
fn mounts_at(p: &Path) -> usize {
    let p = p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter(|l| l.split_whitespace().nth(4) == Some(p.to_str().unwrap()))
        .count()
}

fn is_mounted(p: &Path) -> bool {
    mounts_at(p) > 0
}

/// Directories under /var/tmp and the server (and a second one stacked
/// on its mount point); on drop the servers are killed and the mounts
/// removed whatever state the test left.
struct Fixture {
    dir: tempfile::TempDir,
    server: Option<Child>,
    upper: Option<Child>,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::Builder::new()
            .prefix("bfq-mount-cli")
            .tempdir_in("/var/tmp")
            .unwrap();
        for d in ["back", "mnt"] {
            std::fs::create_dir(dir.path().join(d)).unwrap();
        }
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        Fixture {
            dir,
            server: None,
            upper: None,
        }
    }
    fn back(&self) -> PathBuf {
        self.dir.path().join("back")
    }
    fn mnt(&self) -> PathBuf {
        self.dir.path().join("mnt")
    }
    /// Starts `bfq mount` and waits until the mount is there.
    fn start(&mut self) {
        self.server = Some(self.spawn_mount(&[], 1));
    }
    /// Starts a second `bfq mount` of the same directories with `--nonempty`,
    /// over the first, and waits until it is there.
    fn start_upper(&mut self) {
        self.upper = Some(self.spawn_mount(&["--nonempty"], 2));
    }
    fn spawn_mount(&self, args: &[&str], mounts: usize) -> Child {
        let child = bfq()
            .arg("mount")
            .arg(self.back())
            .arg(self.mnt())
            .args(args)
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let t0 = Instant::now();
        while mounts_at(&self.mnt()) < mounts {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "not mounted after 20 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        child
    }
    fn signal(&self, sig: i32) {
        signal(self.server.as_ref().unwrap(), sig);
    }
    fn signal_upper(&self, sig: i32) {
        signal(self.upper.as_ref().unwrap(), sig);
    }
    /// Waits for the server to exit (at most 20 s).
    fn wait(&mut self) -> std::process::ExitStatus {
        wait(&mut self.server)
    }
}

fn signal(c: &Child, sig: i32) {
    // SAFETY: signals our own child.
    assert_eq!(unsafe { libc::kill(c.id() as i32, sig) }, 0);
}

/// Waits for a server to exit (at most 20 s).
fn wait(server: &mut Option<Child>) -> std::process::ExitStatus {
    let c = server.as_mut().unwrap();
    let t0 = Instant::now();
    loop {
        if let Some(s) = c.try_wait().unwrap() {
            *server = None;
            return s;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "server still running after 20 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn still_running(server: &mut Option<Child>) -> bool {
    server.as_mut().unwrap().try_wait().unwrap().is_none()
}

impl Drop for Fixture {
    fn drop(&mut self) {
        for mut c in [self.upper.take(), self.server.take()]
            .into_iter()
            .flatten()
        {
            let _ = c.kill();
            let _ = c.wait();
        }
        if is_mounted(&self.mnt()) {
            let _ = cleanup(Some(&self.mnt()));
        }
    }
}

#[test]
fn unmounts_on_sigterm_and_sigint_with_data_in_place() {
    if !can_mount() {
        return;
    }
    for sig in [libc::SIGTERM, libc::SIGINT] {
        let mut fx = Fixture::new();
        fx.start();
        std::fs::write(fx.mnt().join("note"), b"kept").unwrap();
        // A file held open does not stop the unmount.
        let held = std::fs::File::open(fx.mnt().join("note")).unwrap();
        fx.signal(sig);
        let status = fx.wait();
        drop(held);
        assert!(status.success(), "signal {sig}: exit {status}");
        assert!(!is_mounted(&fx.mnt()), "signal {sig}: still mounted");
        assert_eq!(std::fs::read(fx.back().join("note")).unwrap(), b"kept");
    }
}

#[test]
fn refuses_a_non_empty_mountpoint_without_nonempty() {
    if !can_mount() {
        return;
    }
    let fx = Fixture::new();
    std::fs::write(fx.mnt().join("x"), b"x").unwrap();
    let out = bfq()
        .arg("mount")
        .arg(fx.back())
        .arg(fx.mnt())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not empty"), "{err}");
    assert!(!is_mounted(&fx.mnt()));
}

#[test]
fn cleanup_removes_the_mount_of_a_killed_server() {
    let Some((_serial, mut fx)) = serial_started() else {
        return;
    };
    fx.signal(libc::SIGKILL);
    fx.wait();
    assert!(
        is_mounted(&fx.mnt()),
        "a killed server leaves its mount behind"
    );
    succeeded(&cleanup(Some(&fx.mnt())));
    assert!(!is_mounted(&fx.mnt()));
}

#[test]
fn stacked_mounts_each_server_unmounts_only_its_own() {
    let Some((_serial, mut fx)) = serial_started() else {
        return;
    };
    std::fs::write(fx.mnt().join("note"), b"kept").unwrap();
    fx.start_upper();
    fx.signal_upper(libc::SIGTERM);
    let status = wait(&mut fx.upper);
    assert!(status.success(), "upper server: exit {status}");
    assert_eq!(mounts_at(&fx.mnt()), 1, "the lower mount went too");
    assert!(still_running(&mut fx.server), "the lower server stopped");
    assert_eq!(std::fs::read(fx.mnt().join("note")).unwrap(), b"kept");
    // A server whose mount is covered leaves it (aborted) under the other
    // one, which keeps serving; --cleanup removes it once it is uncovered.
    fx.start_upper();
    fx.signal(libc::SIGTERM);
    let status = fx.wait();
    assert!(!status.success(), "covered lower server: exit {status}");
    assert_eq!(mounts_at(&fx.mnt()), 2);
    assert_eq!(std::fs::read(fx.mnt().join("note")).unwrap(), b"kept");
    fx.signal_upper(libc::SIGTERM);
    assert!(wait(&mut fx.upper).success());
    assert_eq!(mounts_at(&fx.mnt()), 1);
    succeeded(&cleanup(Some(&fx.mnt())));
    assert!(!is_mounted(&fx.mnt()));
}

#[test]
fn refuses_to_mount_over_a_bfq_mount_without_nonempty() {
    let Some((_serial, mut fx)) = serial_started() else {
        return;
    };
    // Refused although the mount point (the first mount's root) is empty.
    let mut c = bfq()
        .arg("mount")
        .arg(fx.back())
        .arg(fx.mnt())
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while c.try_wait().unwrap().is_none() && t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(50));
    }
    if c.try_wait().unwrap().is_none() {
        fx.upper = Some(c);
        panic!("mounted over a bfq mount without --nonempty");
    }
    let out = c.wait_with_output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("already a bfq mount"), "{err}");
    assert_eq!(mounts_at(&fx.mnt()), 1);
}

#[test]
fn cleanup_leaves_the_mount_of_a_running_server() {
    let Some((_serial, mut fx)) = serial_started() else {
        return;
    };
    std::fs::write(fx.mnt().join("note"), b"kept").unwrap();
    let out = cleanup(None);
    succeeded(&out);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("still served"), "{said}");
    let out = cleanup(Some(&fx.mnt()));
    assert!(
        !out.status.success(),
        "--cleanup MOUNTPOINT of a running server succeeded"
    );
    assert!(still_running(&mut fx.server), "the server stopped");
    assert_eq!(std::fs::read(fx.mnt().join("note")).unwrap(), b"kept");
    fx.signal(libc::SIGTERM);
    assert!(fx.wait().success());
    assert!(!is_mounted(&fx.mnt()));
}
