//! `bfq mount` as a command: unmounts on SIGINT/SIGTERM, refuses a
//! non-empty mountpoint, and `--cleanup` removes what a killed server left.
//! Needs root and /dev/fuse (skips with a message otherwise); every test
//! cleans up its mount and directories, also when it fails.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn can_mount() -> bool {
    // SAFETY: plain syscall.
    let root = unsafe { libc::geteuid() } == 0;
    if !root || !Path::new("/dev/fuse").exists() {
        eprintln!("skipped: needs root and /dev/fuse");
        return false;
    }
    true
}

fn bfq() -> Command {
    Command::new(env!("CARGO_BIN_EXE_bfq"))
}

fn is_mounted(p: &Path) -> bool {
    let p = p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .any(|l| l.split_whitespace().nth(4) == Some(p.to_str().unwrap()))
}

/// Directories under /var/tmp and the server; on drop the server is
/// killed and the mount removed whatever state the test left.
struct Fixture {
    dir: tempfile::TempDir,
    server: Option<Child>,
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
        Fixture { dir, server: None }
    }
    fn back(&self) -> PathBuf {
        self.dir.path().join("back")
    }
    fn mnt(&self) -> PathBuf {
        self.dir.path().join("mnt")
    }
    /// Starts `bfq mount` and waits until the mount is there.
    fn start(&mut self) {
        let child = bfq()
            .arg("mount")
            .arg(self.back())
            .arg(self.mnt())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        self.server = Some(child);
        let t0 = Instant::now();
        while !is_mounted(&self.mnt()) {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "not mounted after 20 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    fn signal(&self, sig: i32) {
        let pid = self.server.as_ref().unwrap().id() as i32;
        // SAFETY: signals our own child.
        assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
    }
    /// Waits for the server to exit (at most 20 s).
    fn wait(&mut self) -> std::process::ExitStatus {
        let c = self.server.as_mut().unwrap();
        let t0 = Instant::now();
        loop {
            if let Some(s) = c.try_wait().unwrap() {
                self.server = None;
                return s;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "server still running after 20 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if let Some(mut c) = self.server.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if is_mounted(&self.mnt()) {
            let _ = bfq().args(["mount", "--cleanup"]).arg(self.mnt()).status();
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
    if !can_mount() {
        return;
    }
    let mut fx = Fixture::new();
    fx.start();
    fx.signal(libc::SIGKILL);
    fx.wait();
    assert!(
        is_mounted(&fx.mnt()),
        "a killed server leaves its mount behind"
    );
    let out = bfq()
        .args(["mount", "--cleanup"])
        .arg(fx.mnt())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!is_mounted(&fx.mnt()));
}
