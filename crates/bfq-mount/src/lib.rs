//! # bfq-mount
//!
//! `bfq mount`: a passthrough FUSE filesystem over a backing directory
//! whose file reads and writes go through a [`bfq_engine::Engine`], so the
//! device sees them in the order a bfq-rs scheduler chooses. Each calling
//! process is a flow (weight and class from its I/O priority or the
//! policy file), each cgroup a group. See `docs/mount.md`.

#![warn(missing_docs)]

pub mod flows;
pub mod fs;
pub mod io;
pub mod mounts;
pub mod policy;
pub mod procinfo;
pub mod stats;
pub mod sys;

use bfq_engine::{DeviceInfo, Engine};
use flows::FlowTable;
use fuser::{BackgroundSession, Config, MountOption, SessionACL};
pub use mounts::{bfq_mounts, cleanup, dead_mounts, Cleaned, MountEntry};
pub use policy::Policy;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// The filesystem's subtype; its source in /proc/mounts is
/// `bfq:BACKING_DIR` (type `fuse`, or `fuse.bfq` when mounted through
/// fusermount).
pub const FS_SUBTYPE: &str = "bfq";
/// Prefix of the mount's source name.
pub const SOURCE_PREFIX: &str = "bfq:";
/// Bounds of the number of FUSE worker threads.
pub const THREADS_RANGE: (usize, usize) = (1, 256);
/// Bounds of the queue depth (requests on the device at once): the
/// engine's own range.
pub const DEPTH_RANGE: (u32, u32) = (1, bfq_engine::MAX_QUEUE_DEPTH);

/// How to mount.
#[derive(Clone, Debug)]
pub struct MountConfig {
    /// Directory whose files the mount shows.
    pub backing: PathBuf,
    /// Where the filesystem is mounted.
    pub mountpoint: PathBuf,
    /// Scheduler registry name (`bfq`, `fifo`, ...).
    pub scheduler: String,
    /// Scheduler settings, key=value.
    pub settings: Vec<(String, String)>,
    /// Which caller's requests go to which flow and group, with what weight.
    pub policy: Policy,
    /// FUSE direct I/O (no page cache in the mount) instead of keep_cache.
    pub direct_io: bool,
    /// Open backing files with `O_DIRECT` where allowed (default true).
    pub backing_direct: bool,
    /// Mount over a non-empty directory.
    pub nonempty: bool,
    /// FUSE worker threads (requests served at once), 1..=256.
    pub threads: usize,
    /// Requests on the device at once, 1..=4096 ([`DEPTH_RANGE`]).
    pub queue_depth: u32,
}

impl MountConfig {
    /// A mount of `backing` at `mountpoint` with the defaults: `bfq`, no settings, the default policy, page cache kept, `O_DIRECT` backing files, 16 threads, queue depth 32.
    pub fn new(backing: impl Into<PathBuf>, mountpoint: impl Into<PathBuf>) -> Self {
        MountConfig {
            backing: backing.into(),
            mountpoint: mountpoint.into(),
            scheduler: "bfq".into(),
            settings: Vec::new(),
            policy: Policy::default(),
            direct_io: false,
            backing_direct: true,
            nonempty: false,
            threads: 16,
            queue_depth: 32,
        }
    }
}

pub(crate) fn invalid(msg: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, msg)
}

/// A mounted filesystem. Dropping it unmounts.
///
/// It unmounts its own mount and nothing else (see [`mounts`]); so it never
/// drops fuser's session, which unmounts whatever is at the mount point by
/// path (fuser 0.18 does so even when its own mount is gone): the session's
/// thread is joined and the rest forgotten, which keeps one descriptor of
/// `/dev/fuse` per mount open until the process exits.
pub struct Mounted {
    session: Option<BackgroundSession>,
    table: Arc<FlowTable>,
    mountpoint: PathBuf,
    /// The mount's id in /proc/self/mountinfo.
    id: u64,
    /// The mount's device number (names its FUSE connection).
    dev: u64,
    stop: Arc<AtomicBool>,
    reaper: Option<JoinHandle<()>>,
}

/// Whether `dir` is a directory with something in it.
fn non_empty(dir: &Path) -> std::io::Result<bool> {
    Ok(std::fs::read_dir(dir)?.next().is_some())
}

fn device_of(backing: &Path, depth: u32) -> DeviceInfo {
    use std::os::unix::fs::MetadataExt;
    let rotational = std::fs::metadata(backing)
        .ok()
        .map(|m| {
            let (ma, mi) = (libc::major(m.dev()), libc::minor(m.dev()));
            std::fs::read_to_string(format!("/sys/dev/block/{ma}:{mi}/queue/rotational"))
                .or_else(|_| {
                    std::fs::read_to_string(format!("/sys/dev/block/{ma}:0/queue/rotational"))
                })
                .map(|s| s.trim() == "1")
                .unwrap_or(false)
        })
        .unwrap_or(false);
    DeviceInfo {
        queue_depth: depth,
        queues_internally: depth > 1,
        rotational,
    }
}

/// Whether this process has what the mount tests and the suite's real
/// application runs mount with: root (effective uid 0) and the kernel's
/// FUSE device, `/dev/fuse`. `Err` says what is needed.
pub fn can_mount() -> Result<(), &'static str> {
    // SAFETY: plain syscall.
    let root = unsafe { libc::geteuid() } == 0;
    if !root || !Path::new("/dev/fuse").exists() {
        return Err("needs root and /dev/fuse");
    }
    Ok(())
}

/// Mounts `cfg.backing` on `cfg.mountpoint` and serves it in the
/// background.
pub fn mount(cfg: &MountConfig) -> std::io::Result<Mounted> {
    check_config(cfg)?;
    let mut b = Engine::nop()
        .scheduler(&cfg.scheduler)
        .queue_depth(cfg.queue_depth)
        .device_info(device_of(&cfg.backing, cfg.queue_depth))
        .allow_short(true);
    for (k, v) in &cfg.settings {
        b = b.set(k, v);
    }
    let engine = Arc::new(b.open()?);
    let table = Arc::new(FlowTable::new(engine, cfg.policy.clone()));
    let fs = fs::PassFs::new(
        &cfg.backing,
        table.clone(),
        fs::FsOptions {
            backing_direct: cfg.backing_direct,
            direct_io: cfg.direct_io,
        },
    )?;
    // The mountpoint is resolved before mounting, and the new mount's id and
    // device number read without a request to the mount
    // ([`mounts::reached`]): a server that accesses its own mount can never
    // exit if it is killed while that request is with its FUSE threads (the
    // accessing thread waits uninterruptibly for an answer, so the device
    // stays open).
    let mountpoint = cfg.mountpoint.canonicalize()?;
    let session =
        fuser::spawn_mount(fs, &mountpoint, &fuse_config(cfg)).map_err(explain_mount_error)?;
    // The id is what the server unmounts and the device number (its
    // connection) what a busy unmount aborts: a mount that cannot be named
    // so is refused (dropping the session unmounts).
    let (id, dev) = mounts::bfq_mount_at(&mountpoint)
        .map(|m| (m.id, m.dev))
        .ok_or_else(|| std::io::Error::other("the new mount is not in /proc/self/mountinfo"))?;
    let stop = Arc::new(AtomicBool::new(false));
    let reaper = spawn_reaper(table.clone(), stop.clone())?;
    Ok(Mounted {
        session: Some(session),
        table,
        mountpoint,
        id,
        dev,
        stop,
        reaper: Some(reaper),
    })
}

/// FUSE's refusal to mount, for the user: a permission error (no access
/// to `/dev/fuse` or `fusermount3` for this user) says that mounting needs
/// root or that access; others are kept as they are.
fn explain_mount_error(e: std::io::Error) -> std::io::Error {
    // SAFETY: plain syscall.
    explain_mount_error_as(e, unsafe { libc::geteuid() } == 0)
}

/// [`explain_mount_error`] for a process running as root or not: root
/// refused is missing the capability (`CAP_SYS_ADMIN`, often dropped in
/// a container), anyone else is not root.
fn explain_mount_error_as(e: std::io::Error, root: bool) -> std::io::Error {
    if e.kind() != std::io::ErrorKind::PermissionDenied {
        return e;
    }
    let what = if root {
        "FUSE did not let root mount: the process needs CAP_SYS_ADMIN (a container \
         may drop it) and access to /dev/fuse"
    } else {
        "FUSE did not let this user mount (it needs /dev/fuse and fusermount3 for this \
         user): run bfq mount as root"
    };
    std::io::Error::new(e.kind(), format!("{e}: {what}"))
}

/// Refuses `path` unless it is a directory: one that does not exist is
/// said to be missing (with the OS's reason when it cannot be looked at),
/// anything else not to be a directory.
fn check_dir(path: &Path) -> std::io::Result<()> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(invalid(format!("{}: not a directory", path.display()))),
        Err(e) => Err(dir_error(path, e)),
    }
}

/// Why `path` cannot be looked at, for the user: missing, or a FUSE mount
/// whose server is gone (`ENOTCONN`: what a killed server leaves, which
/// `bfq mount --cleanup` removes), or the OS's reason as it is.
fn dir_error(path: &Path, e: std::io::Error) -> std::io::Error {
    let p = path.display();
    if e.kind() == std::io::ErrorKind::NotFound {
        return invalid(format!("{p}: does not exist"));
    }
    if e.raw_os_error() == Some(libc::ENOTCONN) {
        return invalid(format!(
            "{p}: {e}: a FUSE mount whose server is gone (killed or crashed); \
             `bfq mount --cleanup {p}` removes a bfq one (`fusermount -u` or `umount -l` any)"
        ));
    }
    invalid(format!("{p}: {e}"))
}

/// Refuses a mount point below the backing directory: the mount would
/// serve itself (the backing directory's entry of the mount point is the
/// mount), and a lookup through the mount of its own mount point waits for
/// an answer the mount cannot give, so `ls MOUNTPOINT/...` hangs until the
/// connection is aborted. The backing directory itself is allowed (the
/// server opens it before mounting, so it serves what the mount covers).
fn check_not_inside(backing: &Path, mountpoint: &Path) -> std::io::Result<()> {
    if mountpoint != backing && mountpoint.starts_with(backing) {
        return Err(invalid(format!(
            "{} is inside {}: the mount would serve itself (a lookup of its mount point \
             through it would never be answered); mount outside the backing directory, \
             or on it",
            mountpoint.display(),
            backing.display()
        )));
    }
    Ok(())
}

/// Checks a mount's directories (both exist, the mountpoint not inside
/// the backing directory, empty and not a bfq mount's unless `nonempty`), threads ([`THREADS_RANGE`]) and depth
/// ([`DEPTH_RANGE`]).
fn check_config(cfg: &MountConfig) -> std::io::Result<()> {
    check_dir(&cfg.backing)?;
    check_dir(&cfg.mountpoint)?;
    check_not_inside(
        &cfg.backing.canonicalize()?,
        &cfg.mountpoint.canonicalize()?,
    )?;
    if let Some(m) = mounts::bfq_mount_at(&cfg.mountpoint.canonicalize()?) {
        if !cfg.nonempty {
            return Err(invalid(format!(
                "{} is already a bfq mount ({}; use --nonempty to mount over it)",
                cfg.mountpoint.display(),
                m.source
            )));
        }
    }
    if !cfg.nonempty && non_empty(&cfg.mountpoint)? {
        return Err(invalid(format!(
            "{} is not empty (use --nonempty to mount over it)",
            cfg.mountpoint.display()
        )));
    }
    let (lo, hi) = THREADS_RANGE;
    if !(lo..=hi).contains(&cfg.threads) {
        return Err(invalid(format!(
            "threads = {}: must be {lo}..={hi}",
            cfg.threads
        )));
    }
    let (lo, hi) = DEPTH_RANGE;
    if !(lo..=hi).contains(&cfg.queue_depth) {
        return Err(invalid(format!(
            "depth = {}: must be {lo}..={hi}",
            cfg.queue_depth
        )));
    }
    Ok(())
}

/// The FUSE session's options: source `bfq:BACKING_DIR`, subtype
/// [`FS_SUBTYPE`], the kernel's permission checks, `cfg.threads` workers;
/// as root, access for every user and suid and device files allowed.
fn fuse_config(cfg: &MountConfig) -> Config {
    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::FSName(format!("{SOURCE_PREFIX}{}", cfg.backing.display())),
        MountOption::Subtype(FS_SUBTYPE.into()),
        MountOption::DefaultPermissions,
    ];
    // SAFETY: plain syscall.
    if unsafe { libc::geteuid() } == 0 {
        config.acl = SessionACL::All;
        config.mount_options.push(MountOption::Suid);
        config.mount_options.push(MountOption::Dev);
    }
    config.n_threads = Some(cfg.threads);
    config
}

/// The thread that ends the flows of exited or idle processes
/// ([`FlowTable::reap`]) every 200 ms until `stop` is set.
fn spawn_reaper(table: Arc<FlowTable>, stop: Arc<AtomicBool>) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("bfq-mount-reaper".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(200));
                table.reap();
            }
        })
}

impl Mounted {
    /// The flow table (statistics, live flows and groups).
    pub fn table(&self) -> &Arc<FlowTable> {
        &self.table
    }

    /// The canonical mountpoint.
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// Whether the FUSE session still runs (false once someone unmounted
    /// it, e.g. `fusermount -u`).
    pub fn is_running(&self) -> bool {
        self.session
            .as_ref()
            .is_some_and(|s| !s.guard.is_finished())
    }

    /// Unmounts its own mount (lazily, aborting the connection, if the mount
    /// is busy), waits for the workers, ends every flow and stops the
    /// engine. A mount that another mount covers is not unmounted: its
    /// connection is aborted and the error says so. One that can be
    /// neither unmounted nor aborted (without root, or without the FUSE
    /// control filesystem) gives the error at once instead of waiting for
    /// workers that keep serving; dropping the value then leaves the mount
    /// to fuser's own unmount by path.
    pub fn unmount(mut self) -> std::io::Result<()> {
        self.teardown()
    }

    fn teardown(&mut self) -> std::io::Result<()> {
        let Some(session) = self.session.take() else {
            return Ok(());
        };
        let unmounted = mounts::unmount_own(&self.mountpoint, self.id, self.dev);
        if unmounted.is_err()
            && mounts::is_mounted(self.id, self.dev)
            && !mounts::abort_connection(self.dev)
        {
            // Left mounted (covered by another mount, or the unmount
            // failed) and the connection could not be aborted: its workers
            // keep serving, so waiting for them would never end. Keep
            // everything, for a later unmount (or drop) to try again.
            self.session = Some(session);
            return unmounted;
        }
        // Left mounted and aborted: the workers end and the server can
        // exit; the dead mount is for `bfq mount --cleanup`.
        // After an aborted connection the workers end with an error: the
        // unmount itself succeeded.
        let r = join_session(session).or_else(|e| match e.raw_os_error() {
            Some(libc::ECONNABORTED) | Some(libc::ENODEV) | Some(libc::ENOTCONN) => Ok(()),
            _ => Err(e),
        });
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.reaper.take() {
            let _ = t.join();
        }
        self.table.clear();
        let _ = self.table.engine().stats();
        unmounted.and(r)
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = self.teardown();
    }
}

/// Waits for the session's thread (which ends once the connection is
/// gone) and forgets the rest of the session, so that fuser never unmounts
/// by path (see [`Mounted`]).
fn join_session(session: BackgroundSession) -> std::io::Result<()> {
    let session = std::mem::ManuallyDrop::new(session);
    // SAFETY: `guard` is moved out exactly once and the session is never
    // dropped, so nothing in it is used or freed twice.
    let guard = unsafe { std::ptr::read(&session.guard) };
    guard
        .join()
        .map_err(|_| std::io::Error::other("the FUSE session's thread panicked"))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_non_empty_mountpoint_and_bad_dirs() {
        let back = tempfile::tempdir().unwrap();
        let mnt = tempfile::tempdir().unwrap();
        std::fs::write(mnt.path().join("x"), b"x").unwrap();
        let e = mount(&MountConfig::new(back.path(), mnt.path()))
            .err()
            .unwrap();
        assert!(e.to_string().contains("not empty"), "{e}");
        let e = mount(&MountConfig::new(back.path().join("nope"), mnt.path()))
            .err()
            .unwrap();
        assert!(e.to_string().ends_with("nope: does not exist"), "{e}");
        let file = back.path().join("f");
        std::fs::write(&file, b"f").unwrap();
        let e = mount(&MountConfig::new(back.path(), &file)).err().unwrap();
        assert!(e.to_string().ends_with("f: not a directory"), "{e}");
    }

    /// A permission error from FUSE says what to do (as root: the
    /// capability; otherwise: root); others are kept.
    #[test]
    fn a_mount_refused_for_permission_says_what_is_missing() {
        let denied = || std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let e = explain_mount_error_as(denied(), false);
        assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied);
        assert!(e.to_string().ends_with("run bfq mount as root"), "{e}");
        let e = explain_mount_error_as(denied(), true);
        assert!(e.to_string().contains("CAP_SYS_ADMIN"), "{e}");
        assert!(!e.to_string().contains("as root"), "{e}");
        let other = explain_mount_error(std::io::Error::other("busy"));
        assert_eq!(other.to_string(), "busy");
    }

    /// A mount point inside the backing directory is refused before
    /// mounting (the mount would serve itself); the backing directory
    /// itself is not.
    #[test]
    fn refuses_a_mountpoint_inside_the_backing_directory() {
        let back = tempfile::tempdir().unwrap();
        let sub = back.path().join("a/b");
        std::fs::create_dir_all(&sub).unwrap();
        let e = mount(&MountConfig::new(back.path(), &sub)).err().unwrap();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("inside"), "{e}");
        assert!(check_not_inside(back.path(), back.path()).is_ok());
        assert!(check_not_inside(&sub, back.path()).is_ok());
    }

    /// A directory on a FUSE mount whose server is gone (`ENOTCONN`, as a
    /// killed server's mount point) names the way out; other errors are
    /// the OS's.
    #[test]
    fn a_dead_mount_in_the_way_names_cleanup() {
        let p = Path::new("/mnt/x");
        let e = dir_error(p, std::io::Error::from_raw_os_error(libc::ENOTCONN));
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("bfq mount --cleanup /mnt/x"), "{e}");
        let e = dir_error(p, std::io::Error::from_raw_os_error(libc::EACCES));
        assert!(!e.to_string().contains("cleanup"), "{e}");
        assert!(
            e.to_string().starts_with("/mnt/x: Permission denied"),
            "{e}"
        );
    }

    #[test]
    fn refuses_threads_and_depth_out_of_range_before_mounting() {
        let back = tempfile::tempdir().unwrap();
        let mnt = tempfile::tempdir().unwrap();
        for (threads, depth, says) in [
            (0, 32, "threads = 0: must be 1..=256"),
            (257, 32, "threads = 257"),
            (16, 0, "depth = 0: must be 1..=4096"),
            (16, 4097, "depth = 4097: must be 1..=4096"),
        ] {
            let mut c = MountConfig::new(back.path(), mnt.path());
            c.threads = threads;
            c.queue_depth = depth;
            let e = mount(&c).err().unwrap();
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
            assert!(e.to_string().contains(says), "{e}");
        }
    }
}
