//! The kernel side: loop devices, a block device's scheduler, blkio
//! cgroups, I/O priorities, mount checks, and the calling thread's id and
//! CPU affinity (for pinning flow threads). Every resource is a guard that
//! undoes itself on drop (also when a test or a run fails).

use std::ffi::OsStr;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;

use crate::leftovers::Note;

/// The calling thread's id.
pub fn gettid() -> i32 {
    // SAFETY: plain syscall.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

/// Pins the calling thread, and the threads it starts from now on, to
/// these CPUs (`sched_setaffinity`).
pub fn pin_current_thread(cpus: &[usize]) -> io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
    for &c in cpus {
        if c >= max {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("CPU {c} is out of range"),
            ));
        }
        // SAFETY: c is within the set.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: valid set of the size given; 0 = the calling thread.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if r != 0 {
        let e = io::Error::last_os_error();
        let have = current_cpus().map(|c| format!(" (allowed here: {c:?})"));
        return Err(io::Error::new(
            e.kind(),
            format!(
                "cannot pin to CPUs {cpus:?}: {e}{}",
                have.unwrap_or_default()
            ),
        ));
    }
    Ok(())
}

/// The CPUs the calling thread may run on.
pub fn current_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid set of the size given; 0 = the calling thread.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: every index is within the set.
    Ok((0..max)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// Whether the process runs as root.
pub fn is_root() -> bool {
    // SAFETY: plain syscall.
    unsafe { libc::geteuid() == 0 }
}

/// Fails with a clear message when not root.
pub fn require_root(what: &str) -> io::Result<()> {
    if is_root() {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{what} needs root (loop devices, the block device's scheduler in sysfs, \
                 blkio cgroups and ioprio_set); run it as root, e.g. with sudo"
            ),
        ))
    }
}

/// Sets the calling thread's I/O priority (class 1 = RT, 2 = BE, 3 = IDLE;
/// level 0..=7), as `ionice`.
pub fn ioprio_set_thread(class: bfq_core::IoClass, level: u8) -> io::Result<()> {
    let c: i32 = match class {
        bfq_core::IoClass::Rt => 1,
        bfq_core::IoClass::Be => 2,
        bfq_core::IoClass::Idle => 3,
    };
    let prio = (c << 13) | i32::from(level.min(7));
    const IOPRIO_WHO_PROCESS: i32 = 1;
    // SAFETY: plain syscall; who = this thread.
    let r = unsafe { libc::syscall(libc::SYS_ioprio_set, IOPRIO_WHO_PROCESS, gettid(), prio) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// A loop device. [`LoopDevice::create`] returns it attached; drop
/// detaches it unless [`LoopDevice::keep`] was called.
#[derive(Debug)]
pub struct LoopDevice {
    path: PathBuf,
    keep: bool,
    /// Lets `bfq cleanup` detach it if this process dies first.
    note: Note,
}

impl LoopDevice {
    /// Creates (or extends) `file` to `size` bytes and attaches a loop
    /// device of `size` bytes over its start (a longer file is not
    /// shrunk: the device ends at `size`, as `losetup --sizelimit`).
    /// `direct_io` makes the loop device bypass the page cache of the
    /// backing file, as `losetup --direct-io=on`; losetup may leave the
    /// device buffered, with a warning only, when the kernel refuses
    /// direct I/O: [`loop_direct_io`] tells. Errors name `file`.
    pub fn create(file: &Path, size: u64, direct_io: bool) -> io::Result<LoopDevice> {
        Self::create_with(file, size, direct_io, 512)
    }

    /// As [`LoopDevice::create`], with a logical block size of
    /// `sector_size` bytes (512, 1024, 2048 or 4096; `losetup
    /// --sector-size`): a device that, as a 4Kn disk, refuses direct I/O
    /// not in whole 4096-byte blocks.
    pub fn create_with(
        file: &Path,
        size: u64,
        direct_io: bool,
        sector_size: u32,
    ) -> io::Result<LoopDevice> {
        require_root("creating a loop device")?;
        if !Path::new("/dev/loop-control").exists() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "no /dev/loop-control: this kernel has no loop devices",
            ));
        }
        let named = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", file.display()));
        if fs::metadata(file).is_ok_and(|m| !m.is_file()) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{}: not a regular file", file.display()),
            ));
        }
        // What the file was, to put back on an error: removed if made
        // here, its length restored if extended.
        let before = fs::metadata(file).map(|m| m.len()).ok();
        let undo = |e: io::Error| {
            match before {
                None => drop(fs::remove_file(file)),
                Some(len) => drop(
                    fs::OpenOptions::new()
                        .write(true)
                        .open(file)
                        .and_then(|f| f.set_len(len)),
                ),
            }
            e
        };
        let f = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(file)
            .map_err(named)?;
        if f.metadata().map_err(named)?.len() < size {
            f.set_len(size).map_err(named).map_err(undo)?;
        }
        drop(f);
        let opts = [
            format!("--direct-io={}", if direct_io { "on" } else { "off" }),
            format!("--sizelimit={size}"),
            format!("--sector-size={sector_size}"),
        ];
        let (path, note) = attach_free(file, &opts).map_err(undo)?;
        Ok(LoopDevice {
            path,
            keep: false,
            note,
        })
    }

    /// The loop devices attached over `file` (`losetup -j`), by path.
    pub fn over(file: &Path) -> io::Result<Vec<PathBuf>> {
        let out = losetup(&["-j".as_ref(), file.as_os_str()])?;
        Ok(parse_losetup_j(&out))
    }

    /// Adopts an existing device (detached on drop unless kept).
    pub fn adopt(path: &Path) -> LoopDevice {
        LoopDevice {
            path: path.to_path_buf(),
            keep: false,
            note: Note::none(),
        }
    }

    /// `/dev/loopN`.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Leaves the device attached when dropped; returns its path.
    pub fn keep(mut self) -> PathBuf {
        self.keep = true;
        std::mem::replace(&mut self.note, Note::none()).forget();
        self.path.clone()
    }

    /// Detaches the device now.
    pub fn remove(mut self) -> io::Result<()> {
        self.keep = true;
        detach_loop(&self.path)
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        if !self.keep {
            let _ = detach_loop(&self.path);
        }
    }
}

/// Free loop devices tried by [`attach_free`] before it gives up: each
/// one another process attached between our finding it free and
/// attaching it costs a try.
const ATTACH_TRIES: usize = 8;

/// Attaches `file` to a free loop device with losetup's `opts`, and
/// returns the device with its note for `bfq cleanup`. The note is
/// written before the device is attached, so that a process killed in
/// between leaves it noted (cleanup drops the note of a device that is
/// not over the noted file); a device another process took first is
/// passed over for the next free one.
fn attach_free(file: &Path, opts: &[String]) -> io::Result<(PathBuf, Note)> {
    let find = || Ok(PathBuf::from(losetup(&["-f".as_ref()])?.trim()));
    let attach = |dev: &Path| {
        let mut args: Vec<&OsStr> = opts.iter().map(OsStr::new).collect();
        args.extend([dev.as_os_str(), file.as_os_str()]);
        losetup(&args).map(drop)
    };
    attach_noted(file, find, attach)
        .map_err(|e| io::Error::new(e.kind(), format!("attaching {}: {e}", file.display())))
}

/// [`attach_free`]'s steps: `find` a free device, note it, `attach` it;
/// a device found busy by then is passed over, its note dropped.
fn attach_noted(
    file: &Path,
    mut find: impl FnMut() -> io::Result<PathBuf>,
    mut attach: impl FnMut(&Path) -> io::Result<()>,
) -> io::Result<(PathBuf, Note)> {
    let mut busy = None;
    for _ in 0..ATTACH_TRIES {
        let dev = find()?;
        let note = Note::loop_device(&dev_name(&dev)?, file);
        match attach(&dev) {
            Ok(()) => return Ok((dev, note)),
            Err(e) if e.to_string().contains("busy") => busy = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(busy.unwrap_or_else(|| io::Error::other("no free loop device")))
}

/// Runs `losetup` with `args` and returns its output, or an error with
/// its message.
fn losetup(args: &[&OsStr]) -> io::Result<String> {
    let out = Command::new("losetup")
        .args(args)
        .output()
        .map_err(|e| io::Error::new(e.kind(), format!("cannot run losetup: {e}")))?;
    if !out.status.success() {
        let shown: Vec<_> = args.iter().map(|a| a.to_string_lossy()).collect();
        return Err(io::Error::other(format!(
            "losetup {} failed: {}",
            shown.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The devices of `losetup -j`'s lines (`/dev/loop3: [0027]:301
/// (/path/file)`).
fn parse_losetup_j(out: &str) -> Vec<PathBuf> {
    out.lines()
        .filter_map(|l| l.split_once(": ").map(|(dev, _)| PathBuf::from(dev)))
        .collect()
}

/// Detaches a loop device (`losetup -d`). Refuses anything but
/// `/dev/loopN`, a loop device with no file attached (no
/// `/sys/block/loopN/loop`) and devices holding a mounted filesystem.
pub fn detach_loop(dev: &Path) -> io::Result<()> {
    require_root("removing a loop device")?;
    let name = dev_name(dev)?;
    if !name.starts_with("loop") || name == "loop-control" {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a loop device", dev.display()),
        ));
    }
    if !Path::new(&format!("/sys/block/{name}/loop")).exists() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "{} has no file attached (`losetup -a` lists those that have)",
                dev.display()
            ),
        ));
    }
    check_not_mounted(dev)?;
    losetup(&["-d".as_ref(), dev.as_os_str()])?;
    // A device still open (udev probing it) is detached on its last close:
    // wait a little for that.
    let sys = PathBuf::from(format!("/sys/block/{name}/loop"));
    for _ in 0..200 {
        if !sys.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    Ok(())
}

/// The kernel name of a block device (`/dev/loop3` -> `loop3`), following
/// symlinks.
pub fn dev_name(dev: &Path) -> io::Result<String> {
    let real = fs::canonicalize(dev)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dev.display())))?;
    real.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a device path"))
}

/// Whether a loop device reads and writes its backing file with direct
/// I/O, bypassing the page cache (`/sys/block/loopN/loop/dio`); `None`
/// for a device that is not a loop device (or has no such file).
pub fn loop_direct_io(dev: &Path) -> Option<bool> {
    let name = dev_name(dev).ok()?;
    let dio = fs::read_to_string(format!("/sys/block/{name}/loop/dio")).ok()?;
    Some(dio.trim() == "1")
}

/// Whether `path` is a block device.
pub fn is_block_device(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    fs::metadata(path)
        .map(|m| m.file_type().is_block_device())
        .unwrap_or(false)
}

/// Bytes free for unprivileged users on the filesystem holding `dir`
/// (statvfs: available blocks times the fragment size).
pub fn free_bytes(dir: &Path) -> io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: statvfs writes into a zeroed struct from a NUL-terminated path.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("{}: {e}", dir.display())));
    }
    Ok(st.f_bavail.saturating_mul(st.f_frsize))
}

/// Renames `from` to `to` unless `to` exists (`renameat2` with
/// `RENAME_NOREPLACE`: the check and the rename are one step, so a file
/// created at `to` meanwhile is never replaced; `AlreadyExists` then).
pub fn rename_no_replace(from: &Path, to: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
    };
    let (f, t) = (c(from)?, c(to)?);
    // SAFETY: two NUL-terminated paths relative to the working directory.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            f.as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Fails when the block device, one of its partitions or a device stacked
/// on it holds a mounted filesystem or active swap (/proc/self/mounts,
/// /proc/swaps, holders/ in sysfs).
pub fn check_not_mounted(dev: &Path) -> io::Result<()> {
    let name = dev_name(dev)?;
    let mut names = vec![name.clone()];
    if let Ok(rd) = fs::read_dir(format!("/sys/block/{name}")) {
        for e in rd.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.starts_with(&name) {
                names.push(n);
            }
        }
    }
    let busy = |src: &str| -> bool {
        if !src.starts_with("/dev/") {
            return false;
        }
        match dev_name(Path::new(src)) {
            Ok(n) => names.contains(&n),
            Err(_) => false,
        }
    };
    let mounts = fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    for line in mounts.lines() {
        let mut it = line.split_whitespace();
        if let (Some(src), Some(dir)) = (it.next(), it.next()) {
            if busy(src) {
                return Err(io::Error::new(
                    io::ErrorKind::ResourceBusy,
                    format!(
                        "{} holds a mounted filesystem ({src} on {dir}): refusing to touch it",
                        dev.display()
                    ),
                ));
            }
        }
    }
    let swaps = fs::read_to_string("/proc/swaps").unwrap_or_default();
    for line in swaps.lines().skip(1) {
        if let Some(src) = line.split_whitespace().next() {
            if busy(src) {
                return Err(io::Error::new(
                    io::ErrorKind::ResourceBusy,
                    format!("{} is in use as swap: refusing to touch it", dev.display()),
                ));
            }
        }
    }
    for n in &names {
        if let Ok(rd) = fs::read_dir(format!("/sys/class/block/{n}/holders")) {
            if let Some(h) = rd.flatten().next() {
                return Err(io::Error::new(
                    io::ErrorKind::ResourceBusy,
                    format!(
                        "{} is held by {} (device mapper, md...): refusing to touch it",
                        dev.display(),
                        h.file_name().to_string_lossy()
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The block device's I/O scheduler, set for the guard's lifetime and
/// restored on drop.
#[derive(Debug)]
pub struct SchedulerGuard {
    file: PathBuf,
    previous: String,
    /// The note in [`STATE_DIR`] that lets `bfq cleanup`
    /// ([`crate::leftovers`]) restore `previous` if this process dies
    /// without dropping the guard; removed after it.
    _note: Note,
}

/// The schedulers a block device offers and the active one; an error
/// naming `dev` when it is not a block device.
pub fn block_schedulers(dev: &Path) -> io::Result<(Vec<String>, String)> {
    let name = dev_name(dev)?;
    if !is_block_device(dev) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: not a block device", dev.display()),
        ));
    }
    let s = fs::read_to_string(format!("/sys/block/{name}/queue/scheduler")).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "{}: no /sys/block/{name}/queue/scheduler: {e}",
                dev.display()
            ),
        )
    })?;
    let mut all = Vec::new();
    let mut active = String::new();
    for w in s.split_whitespace() {
        if let Some(a) = w.strip_prefix('[').and_then(|w| w.strip_suffix(']')) {
            active = a.to_string();
            all.push(a.to_string());
        } else {
            all.push(w.to_string());
        }
    }
    Ok((all, active))
}

impl SchedulerGuard {
    /// Sets `dev`'s scheduler to `name` (`bfq`, `mq-deadline`, `kyber`,
    /// `none`), loading the module if needed.
    pub fn set(dev: &Path, name: &str) -> io::Result<SchedulerGuard> {
        require_root("setting a block device's scheduler")?;
        let devname = dev_name(dev)?;
        let (all, previous) = block_schedulers(dev)?;
        if !all.iter().any(|s| s == name) {
            let _ = Command::new("modprobe")
                .arg(name.replace('-', "_"))
                .output();
        }
        let file = PathBuf::from(format!("/sys/block/{devname}/queue/scheduler"));
        // Noted first: a SIGKILL right after the change still leaves the
        // note (the note is removed if the change fails).
        let note = Note::write("", &devname, &format!("{previous}\n{name}\n"));
        fs::write(&file, name).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot set scheduler {name} on {}: {e}", dev.display()),
            )
        })?;
        Ok(SchedulerGuard {
            file,
            previous,
            _note: note,
        })
    }
}

impl Drop for SchedulerGuard {
    fn drop(&mut self) {
        let _ = fs::write(&self.file, &self.previous);
    }
}

/// Where cgroup v1 blkio is mounted.
pub const BLKIO_V1: &str = "/sys/fs/cgroup/blkio";

/// A blkio cgroup carrying a BFQ weight; threads join it with
/// [`Cgroup::add_thread`]. Drop moves any remaining thread back to the root
/// and removes the directory.
#[derive(Debug)]
pub struct Cgroup {
    dir: PathBuf,
    root: PathBuf,
    /// `tasks` (v1) or `cgroup.procs` (v2).
    members: &'static str,
}

/// Where the kernel peers' weights go: the cgroup hierarchy found and its
/// file names. cgroup v1 `blkio` puts threads in cgroups (`tasks`) with
/// `blkio.bfq.weight`; cgroup v2 puts whole processes (`cgroup.procs`; the
/// io controller is not threaded) with `io.bfq.weight` (kernel BFQ) or else
/// `io.weight`, after `+io` in the parent's `cgroup.subtree_control`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CgroupLayout {
    /// cgroup v1 with a `blkio` hierarchy.
    V1 {
        /// Mount point of the `blkio` hierarchy.
        root: PathBuf,
    },
    /// cgroup v2 (unified hierarchy).
    V2 {
        /// Mount point of the unified hierarchy.
        root: PathBuf,
    },
}

/// Where cgroup v2 may be mounted: alone, or beside v1 (hybrid).
pub const CGROUP_V2_ROOTS: [&str; 2] = ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"];

impl CgroupLayout {
    /// This machine's: v1 blkio if mounted, else a v2 hierarchy with the
    /// io controller available.
    pub fn detect() -> Option<CgroupLayout> {
        let roots: Vec<&Path> = CGROUP_V2_ROOTS.iter().map(Path::new).collect();
        Self::detect_in(Path::new(BLKIO_V1), &roots)
    }

    /// As [`CgroupLayout::detect`] with the mount points given.
    pub fn detect_in(v1: &Path, v2_roots: &[&Path]) -> Option<CgroupLayout> {
        if v1.join("tasks").exists() {
            return Some(CgroupLayout::V1 { root: v1.into() });
        }
        v2_roots.iter().find_map(|r| {
            let c = fs::read_to_string(r.join("cgroup.controllers")).ok()?;
            c.split_whitespace()
                .any(|x| x == "io")
                .then(|| CgroupLayout::V2 {
                    root: r.to_path_buf(),
                })
        })
    }

    /// The hierarchy's root directory.
    pub fn root(&self) -> &Path {
        match self {
            CgroupLayout::V1 { root } | CgroupLayout::V2 { root } => root,
        }
    }

    /// Whether threads of one process can be in different cgroups.
    pub fn per_thread(&self) -> bool {
        matches!(self, CgroupLayout::V1 { .. })
    }

    /// The file listing a cgroup's members.
    pub fn members_file(&self) -> &'static str {
        match self {
            CgroupLayout::V1 { .. } => "tasks",
            CgroupLayout::V2 { .. } => "cgroup.procs",
        }
    }

    /// The weight file of cgroup `dir`: v1 `blkio.bfq.weight`; v2
    /// `io.bfq.weight` if the kernel's BFQ provides it, else `io.weight`.
    pub fn weight_file(&self, dir: &Path) -> Option<PathBuf> {
        let names: &[&str] = match self {
            CgroupLayout::V1 { .. } => &["blkio.bfq.weight"],
            CgroupLayout::V2 { .. } => &["io.bfq.weight", "io.weight"],
        };
        names.iter().map(|n| dir.join(n)).find(|p| p.exists())
    }

    /// Lets the children of `parent` use the io controller (v2).
    pub fn enable_io(&self, parent: &Path) -> io::Result<()> {
        match self {
            CgroupLayout::V1 { .. } => Ok(()),
            CgroupLayout::V2 { .. } => {
                let f = parent.join("cgroup.subtree_control");
                fs::write(&f, "+io")
                    .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", f.display())))
            }
        }
    }

    /// Sets cgroup `dir`'s weight (1..=1000); the file written, if any.
    pub fn set_weight(&self, dir: &Path, weight: u32) -> io::Result<Option<PathBuf>> {
        let Some(f) = self.weight_file(dir) else {
            return Ok(None);
        };
        fs::write(&f, weight.clamp(1, 1000).to_string())
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", f.display())))?;
        Ok(Some(f))
    }

    /// One line saying which hierarchy holds the flows' cgroups under
    /// kernel scheduler `scheduler` (`bfq`, `none`, ...), and what carries
    /// their weights: the BFQ weight files under `bfq`; the other
    /// schedulers weigh no cgroups.
    pub fn describe(&self, scheduler: &str) -> String {
        let bfq = scheduler == "bfq";
        match self {
            CgroupLayout::V1 { root } if bfq => format!(
                "weights in cgroup v1 blkio ({}, blkio.bfq.weight), one cgroup per flow",
                root.display()
            ),
            CgroupLayout::V1 { root } => format!(
                "one cgroup per flow in cgroup v1 blkio ({}); {scheduler} does not weigh \
                 them (blkio.bfq.weight is kernel:bfq's)",
                root.display()
            ),
            CgroupLayout::V2 { root } if bfq => format!(
                "weights in cgroup v2 ({}, io.bfq.weight or io.weight), which takes processes: \
                 one process and cgroup per flow",
                root.display()
            ),
            CgroupLayout::V2 { root } => format!(
                "one process and cgroup per flow in cgroup v2 ({}), which takes processes; \
                 {scheduler} does not weigh them (io.bfq.weight is kernel:bfq's, io.weight \
                 counts only where io.cost is enabled for the device)",
                root.display()
            ),
        }
    }
}

impl Cgroup {
    /// Creates `name` (a path below the layout's root) with `weight`.
    pub fn create_in(layout: &CgroupLayout, name: &str, weight: u32) -> io::Result<Cgroup> {
        let root = layout.root().to_path_buf();
        let dir = root.join(name);
        if dir.exists() {
            let _ = fs::remove_dir(&dir);
        }
        if let Some(parent) = dir.parent() {
            layout.enable_io(parent)?;
        }
        fs::create_dir(&dir)?;
        let cg = Cgroup {
            dir,
            root,
            members: layout.members_file(),
        };
        layout.set_weight(&cg.dir, weight)?;
        Ok(cg)
    }

    /// The cgroup's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Moves a thread (by tid) into the cgroup.
    pub fn add_thread(&self, tid: i32) -> io::Result<()> {
        fs::write(self.dir.join(self.members), tid.to_string())
    }

    /// Moves the calling thread into the cgroup.
    pub fn join(&self) -> io::Result<()> {
        self.add_thread(gettid())
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        for _ in 0..50 {
            if let Ok(t) = fs::read_to_string(self.dir.join(self.members)) {
                for tid in t.split_whitespace() {
                    let _ = fs::write(self.root.join(self.members), tid);
                }
            }
            if fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

/// The signal (SIGINT or SIGTERM) received while [`catch_interrupts`] was
/// in force, 0 if none.
static INTERRUPTED: AtomicI32 = AtomicI32::new(0);

/// What a second SIGINT or SIGTERM prints before the process exits at once.
const SECOND_INTERRUPT: &[u8] =
    b"bfq: interrupted again: exiting now; `sudo bfq cleanup` puts back what the run changed\n";

/// Whether a second SIGINT or SIGTERM exits at once: false in a flow
/// process ([`catch_forwarded_interrupts`]).
static SECOND_INTERRUPT_EXITS: AtomicBool = AtomicBool::new(true);

/// The first SIGINT or SIGTERM sets [`INTERRUPTED`], and the run stops
/// and puts the machine back; a second one (a run stuck on a device that
/// does not answer) exits at once with status 128 + the signal, leaving
/// what the run changed to `bfq cleanup` (its notes, [`crate::leftovers`]).
extern "C" fn on_interrupt(sig: libc::c_int) {
    // Async-signal-safe: atomic loads and swaps, write(2) and _exit(2).
    let first = INTERRUPTED.swap(sig, Ordering::SeqCst) == 0;
    if !first && SECOND_INTERRUPT_EXITS.load(Ordering::SeqCst) {
        // SAFETY: write and _exit are async-signal-safe; the buffer is static.
        unsafe {
            libc::write(2, SECOND_INTERRUPT.as_ptr().cast(), SECOND_INTERRUPT.len());
            libc::_exit(128 + sig);
        }
    }
}

/// SIGINT and SIGTERM turned into a flag ([`interrupted`]) while this guard
/// lives, so that a run that changed the machine (a device's scheduler,
/// cgroups) stops and puts everything back before the process exits.
/// Dropping it restores the previous handlers.
pub struct InterruptGuard {
    previous: Vec<(libc::c_int, libc::sigaction)>,
}

/// Sets a run's stop flag when SIGINT or SIGTERM has arrived (while
/// [`catch_interrupts`] is in force), looking every 20 ms, until dropped.
pub struct InterruptWatch {
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Starts an [`InterruptWatch`] setting `stop`.
pub fn watch_interrupts(stop: Arc<AtomicBool>) -> InterruptWatch {
    let done = Arc::new(AtomicBool::new(false));
    let d = done.clone();
    let thread = std::thread::spawn(move || {
        while !d.load(Ordering::SeqCst) {
            if interrupted().is_some() {
                stop.store(true, Ordering::SeqCst);
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    });
    InterruptWatch {
        done,
        thread: Some(thread),
    }
}

impl Drop for InterruptWatch {
    fn drop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// [`catch_interrupts`] in a process whose parent forwards its stop (a
/// flow process: a terminal's Ctrl-C reaches it, then its parent's
/// SIGTERM): any number of signals is one, the orderly stop.
pub fn catch_forwarded_interrupts() -> InterruptGuard {
    SECOND_INTERRUPT_EXITS.store(false, Ordering::SeqCst);
    catch_interrupts()
}

/// Catches SIGINT and SIGTERM until the guard is dropped.
pub fn catch_interrupts() -> InterruptGuard {
    let mut previous = Vec::new();
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a plain sigaction with a handler that only stores an
        // atomic; the old action is kept to be restored.
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = on_interrupt as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut act.sa_mask);
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, &act, &mut old) == 0 {
                previous.push((sig, old));
            }
        }
    }
    InterruptGuard { previous }
}

impl Drop for InterruptGuard {
    fn drop(&mut self) {
        for (sig, old) in &self.previous {
            // SAFETY: restores the action saved by `catch_interrupts`.
            unsafe {
                libc::sigaction(*sig, old, std::ptr::null_mut());
            }
        }
    }
}

/// The signal that interrupted a run, if one did.
pub fn interrupted() -> Option<i32> {
    match INTERRUPTED.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// Where runs note what they changed on the machine (a device's
/// scheduler, their own loop devices and files), so that `bfq cleanup`
/// ([`crate::leftovers`]) can undo it after a run was killed (SIGKILL, a
/// crash) before it could.
pub const STATE_DIR: &str = "/run/bfq-rs";

#[cfg(test)]
mod tests {
    use super::*;

    /// A loop device that cannot be made leaves its file as it was: a
    /// file made for it is removed, one extended for it cut back (`bfq
    /// loop create F 100T` left an empty F behind). Needs root (skipped
    /// without). Fails without the `undo` of `create_with`.
    #[test]
    fn a_failed_loop_device_leaves_its_file_as_it_was() {
        if !is_root() {
            eprintln!("skipped: needs root");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("x.img");
        // Past any filesystem's largest file: set_len fails.
        let huge = u64::MAX / 2;
        assert!(LoopDevice::create(&f, huge, true).is_err());
        assert!(!f.exists(), "a file made for the device is removed");
        fs::write(&f, b"data").unwrap();
        assert!(LoopDevice::create(&f, huge, true).is_err());
        assert_eq!(fs::read(&f).unwrap(), b"data");
    }

    /// The note of a loop device exists while losetup attaches it (a
    /// process killed then leaves it noted); a device another process
    /// took first is passed over and loses its note; a failure other than
    /// a busy device is returned at once, its note dropped.
    #[test]
    fn a_loop_device_is_noted_before_it_is_attached() {
        if !is_root() {
            eprintln!("SKIPPED a_loop_device_is_noted_before_it_is_attached: needs root");
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("backing.img");
        let devs: Vec<PathBuf> = (0..3).map(|i| d.path().join(format!("loop9{i}"))).collect();
        for p in devs.iter().chain([&file]) {
            fs::write(p, "").unwrap();
        }
        let note = |n: &str| {
            Path::new(STATE_DIR)
                .join("loops")
                .join(format!("{}-{n}", std::process::id()))
        };
        let backing = fs::canonicalize(&file).unwrap();
        let mut found = devs.clone().into_iter();
        let attach = |dev: &Path| {
            let name = dev_name(dev).unwrap();
            let noted = fs::read_to_string(note(&name)).expect("noted before attaching");
            assert_eq!(Path::new(&noted), backing);
            match name.as_str() {
                "loop90" => Err(io::Error::other("loop90: Device or resource busy")),
                "loop91" => Ok(()),
                _ => Err(io::Error::other("loop92: no such file")),
            }
        };
        let (dev, kept) = attach_noted(&file, || Ok(found.next().unwrap()), attach).unwrap();
        assert_eq!(dev, devs[1]);
        assert!(
            !note("loop90").exists(),
            "the busy device's note is dropped"
        );
        assert!(note("loop91").exists());
        drop(kept);
        assert!(!note("loop91").exists());
        let e = attach_noted(&file, || Ok(devs[2].clone()), attach).unwrap_err();
        assert!(e.to_string().contains("no such file"), "{e}");
        assert!(!note("loop92").exists());
    }

    #[test]
    fn losetup_j_lines_give_the_devices() {
        let out = "/dev/loop1: [65024]:3366913 (/var/tmp/a: b.img), sizelimit 16777216\n\
                   /dev/loop2: [65024]:3366913 (/var/tmp/a: b.img)\n";
        let want = [PathBuf::from("/dev/loop1"), PathBuf::from("/dev/loop2")];
        assert_eq!(parse_losetup_j(out), want);
        assert!(parse_losetup_j("").is_empty());
    }

    /// A fake hierarchy: what the kernel would show, as plain files.
    fn fake_v2(controllers: &str, files: &[&str]) -> (tempfile::TempDir, CgroupLayout) {
        let d = tempfile::tempdir().unwrap();
        fs::write(d.path().join("cgroup.controllers"), controllers).unwrap();
        fs::write(d.path().join("cgroup.subtree_control"), "").unwrap();
        let sub = d.path().join("g");
        fs::create_dir(&sub).unwrap();
        for f in files {
            fs::write(sub.join(f), "default 100\n").unwrap();
        }
        let v1 = d.path().join("no-blkio");
        let l = CgroupLayout::detect_in(&v1, &[d.path()]);
        (d, l.expect("v2 with io"))
    }

    #[test]
    fn cgroup_v2_layout_prefers_io_bfq_weight_then_io_weight() {
        let (d, l) = fake_v2("cpu io memory", &["io.bfq.weight", "io.weight"]);
        assert!(!l.per_thread());
        assert_eq!(l.members_file(), "cgroup.procs");
        let g = d.path().join("g");
        assert_eq!(
            l.set_weight(&g, 300).unwrap(),
            Some(g.join("io.bfq.weight"))
        );
        assert_eq!(fs::read_to_string(g.join("io.bfq.weight")).unwrap(), "300");
        assert_eq!(
            fs::read_to_string(g.join("io.weight")).unwrap(),
            "default 100\n"
        );
        l.enable_io(d.path()).unwrap();
        assert_eq!(
            fs::read_to_string(d.path().join("cgroup.subtree_control")).unwrap(),
            "+io"
        );
        assert!(l.describe("bfq").contains("cgroup v2"));
        let (d, l) = fake_v2("io", &["io.weight"]);
        let g = d.path().join("g");
        assert_eq!(l.set_weight(&g, 5000).unwrap(), Some(g.join("io.weight")));
        assert_eq!(fs::read_to_string(g.join("io.weight")).unwrap(), "1000");
    }

    #[test]
    fn cgroup_layout_detection() {
        let d = tempfile::tempdir().unwrap();
        let v1 = d.path().join("blkio");
        fs::create_dir(&v1).unwrap();
        let v2 = d.path().join("unified");
        fs::create_dir(&v2).unwrap();
        // v2 without the io controller (hybrid systems): not usable.
        fs::write(v2.join("cgroup.controllers"), "cpu memory").unwrap();
        assert_eq!(CgroupLayout::detect_in(&v1, &[&v2]), None);
        fs::write(v2.join("cgroup.controllers"), "cpu io").unwrap();
        assert_eq!(
            CgroupLayout::detect_in(&v1, &[&v2]),
            Some(CgroupLayout::V2 { root: v2.clone() })
        );
        // v1 blkio mounted: it wins (threads can have their own weights).
        fs::write(v1.join("tasks"), "").unwrap();
        let l = CgroupLayout::detect_in(&v1, &[&v2]).unwrap();
        assert_eq!(l, CgroupLayout::V1 { root: v1.clone() });
        assert!(l.per_thread());
        assert_eq!(l.members_file(), "tasks");
        fs::create_dir(v1.join("x")).unwrap();
        fs::write(v1.join("x/blkio.bfq.weight"), "100").unwrap();
        assert_eq!(
            l.set_weight(&v1.join("x"), 250).unwrap(),
            Some(v1.join("x/blkio.bfq.weight"))
        );
        assert_eq!(
            fs::read_to_string(v1.join("x/blkio.bfq.weight")).unwrap(),
            "250"
        );
        l.enable_io(&v1).unwrap();
        assert!(!v1.join("cgroup.subtree_control").exists());
    }

    #[test]
    fn the_weight_files_are_named_only_under_bfq() {
        let v1 = CgroupLayout::V1 {
            root: "/sys/fs/cgroup/blkio".into(),
        };
        let v2 = CgroupLayout::V2 {
            root: "/sys/fs/cgroup".into(),
        };
        let s = v1.describe("bfq");
        assert!(s.starts_with("weights in cgroup v1 blkio"), "{s}");
        assert!(s.contains("blkio.bfq.weight"), "{s}");
        assert!(v2.describe("bfq").starts_with("weights in cgroup v2"));
        for l in [&v1, &v2] {
            for sched in ["none", "mq-deadline", "kyber"] {
                let s = l.describe(sched);
                assert!(!s.starts_with("weights"), "{s}");
                assert!(s.contains(&format!("{sched} does not weigh them")), "{s}");
                assert!(s.contains(&l.root().display().to_string()), "{s}");
            }
        }
    }

    #[test]
    fn this_machine_layout_is_detected() {
        // Whatever this machine has, the description names it.
        match CgroupLayout::detect() {
            Some(l) => {
                let s = l.describe("bfq");
                assert!(s.contains(&l.root().display().to_string()), "{s}");
            }
            None => eprintln!("no usable cgroup hierarchy here"),
        }
    }

    #[test]
    fn pinning_is_inherited_and_bad_cpus_are_refused() {
        std::thread::spawn(|| {
            let all = current_cpus().unwrap();
            let first = all[0];
            pin_current_thread(&[first]).unwrap();
            assert_eq!(current_cpus().unwrap(), vec![first]);
            let child = std::thread::spawn(|| current_cpus().unwrap());
            assert_eq!(child.join().unwrap(), vec![first]);
            assert!(pin_current_thread(&[1 << 20]).is_err());
            // No CPU at all: the kernel refuses an empty set.
            assert!(pin_current_thread(&[]).is_err());
            assert_eq!(current_cpus().unwrap(), vec![first]);
        })
        .join()
        .unwrap();
    }
}
