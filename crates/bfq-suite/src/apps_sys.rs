//! The machine side of the `real-apps` experiment (`bfq suite --real-apps
//! --target DIR`). **This is where the suite copies applications into a
//! backing directory, makes the readers' files and the ext4 image, drops
//! the page cache, mounts `bfq mount` (FUSE), attaches and mounts the loop
//! device and switches its kernel scheduler, forks the reader and writer
//! processes, and starts an application in a chroot.** Every resource is a
//! guard undone on drop, also when a run fails.
//!
//! Layout of DIR: `back/` (the application's files at their absolute
//! paths, and `data/f0`, `data/f1`, ... for the readers and writers),
//! `mnt/` (the FUSE mountpoint), `apps.ext4` (an ext4 image holding the
//! same tree, made with `mkfs.ext4 -d`), `loopmnt/` (where the image's
//! loop device is mounted) and `real-apps.stamp` (what was prepared, so a
//! later run with the same sizes reuses it).

use anyhow::{anyhow, bail, Context, Result};
use bfq_real::sys::{LoopDevice, SchedulerGuard};
use std::ffi::CString;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Size of each reader's and writer's request (one FUSE request through
/// the mount; one bio on the loop device).
pub const REQUEST: usize = 128 << 10;

/// Where the page cache is dropped.
const DROP_CACHES: &str = "/proc/sys/vm/drop_caches";

/// An application whose start-up is timed.
#[derive(Clone, Debug, PartialEq)]
pub struct App {
    /// Name (a metric key): `python3`, `bash`.
    pub name: String,
    /// The executable, an absolute path inside the copied tree.
    pub exe: PathBuf,
    /// Its arguments (`-c pass`, `-c exit`).
    pub args: Vec<String>,
    /// Directories copied whole (the interpreter's standard library).
    pub trees: Vec<PathBuf>,
}

/// The applications: the system's Python 3 with its standard library
/// (`python3 -c pass`) and bash (`bash -c exit`), each with its shared
/// libraries and loader.
pub fn apps() -> Result<Vec<App>> {
    let find = |name: &str, places: &[&str]| -> Result<PathBuf> {
        places
            .iter()
            .map(|p| Path::new(p).join(name))
            .find(|p| p.is_file())
            .map(|p| std::fs::canonicalize(&p).unwrap_or(p))
            .ok_or_else(|| anyhow!("{name} not found in {}", places.join(", ")))
    };
    let py = find("python3", &["/usr/bin", "/usr/local/bin", "/bin"])?;
    let base = py
        .file_name()
        .ok_or_else(|| anyhow!("{}: no file name", py.display()))?;
    let stdlib = py
        .parent()
        .and_then(Path::parent)
        .map(|prefix| prefix.join("lib").join(base))
        .filter(|d| d.join("os.py").is_file())
        .ok_or_else(|| {
            anyhow!(
                "{}: no standard library (lib/{}/os.py) beside it",
                py.display(),
                base.to_string_lossy()
            )
        })?;
    let bash = find("bash", &["/usr/bin", "/bin"])?;
    Ok(vec![
        App {
            name: "python3".into(),
            exe: py,
            args: vec!["-c".into(), "pass".into()],
            trees: vec![stdlib],
        },
        App {
            name: "bash".into(),
            exe: bash,
            args: vec!["-c".into(), "exit".into()],
            trees: vec![],
        },
    ])
}

/// How many data files, and their size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spec {
    /// Files `data/f0` .. (readers take the first ones, writers the next).
    pub files: usize,
    /// Bytes per file.
    pub file_size: u64,
}

/// The paths under DIR.
#[derive(Clone, Debug)]
pub struct Layout {
    /// DIR.
    pub dir: PathBuf,
    /// The backing directory of the mount.
    pub back: PathBuf,
    /// The FUSE mountpoint.
    pub mnt: PathBuf,
    /// The ext4 image of the loop device.
    pub image: PathBuf,
    /// Where the loop device's filesystem is mounted.
    pub loopmnt: PathBuf,
    /// What was prepared.
    pub stamp: PathBuf,
}

impl Layout {
    /// The layout of `dir`.
    pub fn of(dir: &Path) -> Layout {
        Layout {
            dir: dir.to_path_buf(),
            back: dir.join("back"),
            mnt: dir.join("mnt"),
            image: dir.join("apps.ext4"),
            loopmnt: dir.join("loopmnt"),
            stamp: dir.join("real-apps.stamp"),
        }
    }
    /// Data file `i` under the root of a tree (the mount or the loop
    /// device's filesystem).
    pub fn data(root: &Path, i: usize) -> PathBuf {
        root.join("data").join(format!("f{i}"))
    }
}

/// Refuses a target the experiment cannot use, naming what is missing:
/// DIR must be an existing directory, the process root (it drops caches,
/// mounts and makes loop devices), with `/dev/fuse`, `losetup` and
/// `mkfs.ext4` present.
pub fn check_target(dir: &Path) -> Result<()> {
    check_target_with(dir, bfq_real::sys::is_root(), Path::new("/dev/fuse"))?;
    for tool in ["losetup", "mkfs.ext4"] {
        which(tool).ok_or_else(|| {
            anyhow!("--real-apps needs `{tool}` (util-linux, e2fsprogs) on PATH: not found")
        })?;
    }
    Ok(())
}

/// [`check_target`] with the root check and the FUSE device given.
pub fn check_target_with(dir: &Path, root: bool, fuse: &Path) -> Result<()> {
    let md = std::fs::metadata(dir).map_err(|e| {
        anyhow!(
            "--target {}: {e} (give an existing directory for the application's files, the readers' files and the ext4 image)",
            dir.display()
        )
    })?;
    if !md.is_dir() {
        bail!("--target {}: not a directory", dir.display());
    }
    if !root {
        bail!("--real-apps needs root (it drops the page cache, mounts FUSE and ext4, makes a loop device and sets its scheduler); run it as root, e.g. with sudo");
    }
    if !fuse.exists() {
        bail!(
            "--real-apps needs {} (the kernel's FUSE device; `modprobe fuse`): not found",
            fuse.display()
        );
    }
    Ok(())
}

fn which(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin"].iter().map(PathBuf::from))
        .map(|d| d.join(tool))
        .find(|p| p.is_file())
}

fn run_cmd(cmd: &mut Command) -> Result<()> {
    let out = cmd
        .output()
        .with_context(|| format!("cannot run {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// The shared libraries and loader of an executable, as `ldd` lists them
/// (absolute paths; the vDSO has none).
fn libraries(exe: &Path) -> Result<Vec<PathBuf>> {
    let out = Command::new("ldd")
        .arg(exe)
        .output()
        .with_context(|| format!("cannot run ldd {}", exe.display()))?;
    if !out.status.success() {
        bail!("ldd {} failed", exe.display());
    }
    Ok(parse_ldd(&String::from_utf8_lossy(&out.stdout)))
}

/// The absolute paths in `ldd` output.
pub fn parse_ldd(text: &str) -> Vec<PathBuf> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim();
            let p = match l.split_once("=>") {
                Some((_, right)) => right.trim(),
                None => l,
            };
            let p = p.split_whitespace().next()?;
            p.starts_with('/').then(|| PathBuf::from(p))
        })
        .collect()
}

fn stamp_text(spec: &Spec, apps: &[App]) -> String {
    let names: Vec<String> = apps.iter().map(|a| a.exe.display().to_string()).collect();
    format!(
        "real-apps v1 files={} size={} apps={}\n",
        spec.files,
        spec.file_size,
        names.join(",")
    )
}

/// Copies the applications and makes the data files under `back/`, and
/// the ext4 image holding the same tree; reuses them when the stamp says
/// they were made with the same spec. `say` gets progress lines.
pub fn prepare(dir: &Path, spec: &Spec, say: &mut dyn FnMut(&str)) -> Result<Layout> {
    let lay = Layout::of(dir);
    check_made_here(dir, &lay)?;
    let apps = apps()?;
    let want = stamp_text(spec, &apps);
    if std::fs::read_to_string(&lay.stamp).ok().as_deref() == Some(want.as_str())
        && lay.back.is_dir()
        && lay.image.is_file()
    {
        say(&format!(
            "reusing {} and {}",
            lay.back.display(),
            lay.image.display()
        ));
        return Ok(lay);
    }
    std::fs::write(&lay.stamp, "preparing\n")
        .with_context(|| format!("writing {}", lay.stamp.display()))?;
    if lay.back.exists() {
        std::fs::remove_dir_all(&lay.back)
            .with_context(|| format!("removing {}", lay.back.display()))?;
    }
    let _ = std::fs::remove_file(&lay.image);
    for d in [&lay.back, &lay.mnt, &lay.loopmnt] {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    for app in &apps {
        copy_app(app, &lay.back, say)?;
    }
    let data = lay.back.join("data");
    std::fs::create_dir_all(&data)?;
    say(&format!(
        "writing {} data files of {} MiB",
        spec.files,
        spec.file_size >> 20
    ));
    for i in 0..spec.files {
        write_data(&Layout::data(&lay.back, i), spec.file_size, i as u64)?;
    }
    make_image(&lay, say)?;
    std::fs::write(&lay.stamp, want)?;
    Ok(lay)
}

/// Only what an earlier preparation made is replaced (its stamp is
/// written before anything else): without the stamp, `back/` and the
/// image must not exist.
fn check_made_here(dir: &Path, lay: &Layout) -> Result<()> {
    if lay.stamp.exists() {
        return Ok(());
    }
    for p in [&lay.back, &lay.image] {
        if p.exists() {
            bail!(
                "--target {}: {} exists and was not made by --real-apps (no {}); remove it or give another directory",
                dir.display(),
                p.display(),
                lay.stamp.display()
            );
        }
    }
    Ok(())
}

/// Copies `app`'s executable, its libraries and its trees under `back`
/// at their absolute paths.
fn copy_app(app: &App, back: &Path, say: &mut dyn FnMut(&str)) -> Result<()> {
    say(&format!(
        "copying {} and its libraries into {}",
        app.exe.display(),
        back.display()
    ));
    let mut files = vec![app.exe.clone()];
    files.extend(libraries(&app.exe)?);
    for f in files {
        let to = under(back, &f);
        std::fs::create_dir_all(to.parent().expect("absolute path"))?;
        run_cmd(
            Command::new("cp")
                .arg("-L")
                .arg("--preserve=mode,timestamps")
                .arg(&f)
                .arg(&to),
        )?;
    }
    for t in &app.trees {
        let to = under(back, t);
        std::fs::create_dir_all(to.parent().expect("absolute path"))?;
        // -a keeps the modification times the compiled modules are
        // checked against.
        run_cmd(Command::new("cp").arg("-a").arg(t).arg(&to))?;
    }
    Ok(())
}

/// Makes the ext4 image of `back/`: its data plus an eighth and 128 MiB,
/// rounded down to MiB; inode tables and journal initialised now, so no
/// background initialisation writes while the experiment measures.
fn make_image(lay: &Layout, say: &mut dyn FnMut(&str)) -> Result<()> {
    let bytes = tree_bytes(&lay.back)?;
    let size = (bytes + bytes / 8 + (128 << 20)) >> 20 << 20;
    say(&format!(
        "making the ext4 image {} ({} MiB)",
        lay.image.display(),
        size >> 20
    ));
    let f = std::fs::File::create(&lay.image)?;
    f.set_len(size)?;
    drop(f);
    run_cmd(
        Command::new(which("mkfs.ext4").unwrap_or_else(|| "mkfs.ext4".into()))
            .args([
                "-F",
                "-q",
                "-E",
                "lazy_itable_init=0,lazy_journal_init=0",
                "-d",
            ])
            .arg(&lay.back)
            .arg(&lay.image),
    )?;
    std::fs::File::open(&lay.image)?.sync_all()?;
    Ok(())
}

/// `root` joined with the absolute path `p`.
fn under(root: &Path, p: &Path) -> PathBuf {
    root.join(p.strip_prefix("/").unwrap_or(p))
}

/// Writes `size` bytes of pseudo-random data (never all-zero blocks,
/// which `mkfs.ext4 -d` would turn into holes that cost no I/O).
fn write_data(path: &Path, size: u64, seed: u64) -> Result<()> {
    let mut f =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ (seed + 1);
    let mut buf = vec![0u8; 1 << 20];
    let mut left = size;
    while left > 0 {
        for c in buf.chunks_exact_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            c.copy_from_slice(&x.to_le_bytes());
        }
        let n = left.min(buf.len() as u64) as usize;
        f.write_all(&buf[..n])?;
        left -= n as u64;
    }
    f.sync_all()?;
    Ok(())
}

fn tree_bytes(dir: &Path) -> Result<u64> {
    let mut sum = 0;
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let t = e.file_type()?;
        if t.is_dir() {
            sum += tree_bytes(&e.path())?;
        } else {
            sum += e.metadata()?.len().max(4096);
        }
    }
    Ok(sum)
}

/// `sync`, then drops the page cache, dentries and inodes.
pub fn drop_caches() -> Result<()> {
    // SAFETY: plain syscall.
    unsafe { libc::sync() };
    std::fs::write(DROP_CACHES, "3").with_context(|| format!("writing {DROP_CACHES}"))
}

/// Where the applications and data files are served for one
/// configuration: `bfq mount` of `back/` with one of our schedulers, or
/// the ext4 image on a direct-I/O loop device under a kernel scheduler.
pub enum Stage {
    /// Our scheduler through the FUSE mount.
    Fuse(bfq_mount::Mounted),
    /// The kernel's scheduler on the loop device.
    Loop(LoopStage),
}

/// The loop device side: fields drop in order (unmount, restore the
/// scheduler, detach).
pub struct LoopStage {
    mnt: Ext4Mount,
    _sched: SchedulerGuard,
    _dev: LoopDevice,
}

impl Stage {
    /// Serves the tree for `scheduler` (`kernel:NAME` on the loop device,
    /// anything else through `bfq mount`) with `settings`.
    pub fn open(lay: &Layout, scheduler: &str, settings: &[(String, String)]) -> Result<Stage> {
        if let Some(k) = scheduler.strip_prefix("kernel:") {
            let size = std::fs::metadata(&lay.image)?.len();
            let dev = LoopDevice::create(&lay.image, size, true)
                .with_context(|| format!("loop device over {}", lay.image.display()))?;
            let sched = SchedulerGuard::set(dev.path(), k)?;
            let mnt = Ext4Mount::mount(dev.path(), &lay.loopmnt)?;
            return Ok(Stage::Loop(LoopStage {
                mnt,
                _sched: sched,
                _dev: dev,
            }));
        }
        let mut cfg = bfq_mount::MountConfig::new(&lay.back, &lay.mnt);
        cfg.scheduler = scheduler.into();
        cfg.settings = settings.to_vec();
        let m = bfq_mount::mount(&cfg).with_context(|| {
            format!(
                "bfq mount {} {} --scheduler {scheduler}",
                lay.back.display(),
                lay.mnt.display()
            )
        })?;
        Ok(Stage::Fuse(m))
    }

    /// The root of the served tree.
    pub fn root(&self) -> &Path {
        match self {
            Stage::Fuse(m) => m.mountpoint(),
            Stage::Loop(l) => &l.mnt.dir,
        }
    }
}

/// An ext4 filesystem mounted for the guard's lifetime (noted for `bfq
/// cleanup` if the process is killed first).
struct Ext4Mount {
    dir: PathBuf,
    _note: bfq_real::leftovers::Note,
}

impl Ext4Mount {
    fn mount(dev: &Path, dir: &Path) -> Result<Ext4Mount> {
        let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).expect("no NUL in a path");
        let (d, m) = (c(dev), c(dir));
        // SAFETY: valid C strings; no mount data.
        let r = unsafe {
            libc::mount(
                d.as_ptr(),
                m.as_ptr(),
                c"ext4".as_ptr(),
                0,
                std::ptr::null(),
            )
        };
        if r != 0 {
            bail!(
                "mount -t ext4 {} {}: {}",
                dev.display(),
                dir.display(),
                std::io::Error::last_os_error()
            );
        }
        Ok(Ext4Mount {
            dir: dir.to_path_buf(),
            _note: bfq_real::leftovers::Note::mount(dev, dir),
        })
    }
}

impl Drop for Ext4Mount {
    fn drop(&mut self) {
        let m = CString::new(self.dir.as_os_str().as_bytes()).expect("no NUL in a path");
        for _ in 0..50 {
            // SAFETY: valid C string.
            if unsafe { libc::umount2(m.as_ptr(), 0) } == 0 {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        // Still busy after 5 s: detach it (freed when the last user goes).
        // SAFETY: valid C string.
        unsafe { libc::umount2(m.as_ptr(), libc::MNT_DETACH) };
    }
}

/// Greedy readers and writers: one process each (forked, so each is its
/// own flow for the mount and its own queue for the kernel's BFQ), issuing
/// [`REQUEST`]-byte `O_DIRECT` requests one at a time, sequentially over
/// its own file and around again. Their byte counts are in shared memory.
/// Dropping it kills and reaps them.
pub struct Load {
    pids: Vec<libc::pid_t>,
    writer: Vec<bool>,
    counters: *mut AtomicU64,
    page: usize,
}

impl Load {
    /// Starts a reader of each of `readers` and a writer of each of
    /// `writers` (files of `file_size` bytes).
    pub fn start(readers: &[PathBuf], writers: &[PathBuf], file_size: u64) -> Result<Load> {
        let n = readers.len() + writers.len();
        let page = (n * 8).max(4096).next_multiple_of(4096);
        // SAFETY: anonymous shared mapping, checked below.
        let mem = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if mem == libc::MAP_FAILED {
            bail!("mmap: {}", std::io::Error::last_os_error());
        }
        let mut load = Load {
            pids: vec![],
            writer: vec![],
            counters: mem.cast(),
            page,
        };
        let mut buf: *mut libc::c_void = std::ptr::null_mut();
        // SAFETY: out pointer to a local; freed below.
        if unsafe { libc::posix_memalign(&mut buf, 4096, REQUEST) } != 0 {
            bail!("posix_memalign failed");
        }
        // SAFETY: REQUEST bytes just allocated; written data is non-zero.
        unsafe { std::ptr::write_bytes(buf.cast::<u8>(), 0x5a, REQUEST) };
        let jobs: Vec<(CString, bool)> = readers
            .iter()
            .map(|p| (p, false))
            .chain(writers.iter().map(|p| (p, true)))
            .map(|(p, w)| (CString::new(p.as_os_str().as_bytes()).expect("no NUL"), w))
            .collect();
        // SAFETY: plain syscall.
        let parent = unsafe { libc::getpid() };
        let mut failed = None;
        for (i, (path, write)) in jobs.iter().enumerate() {
            // SAFETY: the child runs only async-signal-safe system calls on
            // memory set up before the fork, and never returns.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                // SAFETY: see above; counter i is inside the mapping.
                unsafe {
                    greedy_child(
                        path,
                        *write,
                        file_size,
                        buf.cast(),
                        load.counters.add(i),
                        parent,
                    )
                }
            }
            if pid < 0 {
                failed = Some(std::io::Error::last_os_error());
                break;
            }
            load.pids.push(pid);
            load.writer.push(*write);
        }
        // SAFETY: allocated above; the children have their own copies.
        unsafe { libc::free(buf) };
        if let Some(e) = failed {
            bail!("fork: {e}");
        }
        Ok(load)
    }

    /// Bytes read and written so far.
    pub fn bytes(&self) -> (u64, u64) {
        let (mut r, mut w) = (0, 0);
        for (i, &is_w) in self.writer.iter().enumerate() {
            // SAFETY: counter i is inside the mapping, which lives as long
            // as self.
            let b = unsafe { &*self.counters.add(i) }.load(Ordering::Relaxed);
            if is_w {
                w += b;
            } else {
                r += b;
            }
        }
        (r, w)
    }

    /// Fails if a reader or writer has exited (it could not open or
    /// access its file).
    pub fn check_alive(&self) -> Result<()> {
        for &pid in &self.pids {
            let mut st = 0;
            // SAFETY: our child; WNOHANG.
            let r = unsafe { libc::waitpid(pid, &mut st, libc::WNOHANG) };
            if r == pid {
                let code = if libc::WIFEXITED(st) {
                    libc::WEXITSTATUS(st)
                } else {
                    -1
                };
                bail!(
                    "a reader/writer process exited early (status {code}: {})",
                    match code {
                        3 => "cannot open its file with O_DIRECT",
                        4 => "an I/O error",
                        _ => "killed",
                    }
                );
            }
        }
        Ok(())
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        for &pid in &self.pids {
            // SAFETY: our children.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        for &pid in &self.pids {
            let mut st = 0;
            // SAFETY: our child.
            unsafe { libc::waitpid(pid, &mut st, 0) };
        }
        // SAFETY: the mapping made in start.
        unsafe { libc::munmap(self.counters.cast(), self.page) };
    }
}

/// A forked reader or writer: requests one at a time over its file, bytes
/// added to `counter`. Only system calls (async-signal-safe); never
/// returns. Exit status 3: cannot open; 4: an I/O error.
///
/// # Safety
/// Call only in a freshly forked child, with `buf` [`REQUEST`] bytes
/// aligned to 4096 and `counter` in shared memory.
unsafe fn greedy_child(
    path: &CString,
    write: bool,
    size: u64,
    buf: *mut u8,
    counter: *mut AtomicU64,
    parent: libc::pid_t,
) -> ! {
    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
    if libc::getppid() != parent {
        libc::_exit(2);
    }
    let flags = if write {
        libc::O_WRONLY
    } else {
        libc::O_RDONLY
    } | libc::O_DIRECT;
    let fd = libc::open(path.as_ptr(), flags);
    if fd < 0 {
        libc::_exit(3);
    }
    // Nothing else of the parent's stays open (its FUSE device, rings).
    if fd > 0 {
        libc::syscall(libc::SYS_close_range, 0u32, (fd - 1) as u32, 0u32);
    }
    libc::syscall(libc::SYS_close_range, (fd + 1) as u32, u32::MAX, 0u32);
    let req = REQUEST as u64;
    let last = size / req * req;
    let mut off: u64 = 0;
    loop {
        if off + req > last {
            off = 0;
        }
        let n = if write {
            libc::pwrite(fd, buf.cast(), REQUEST, off as libc::off_t)
        } else {
            libc::pread(fd, buf.cast(), REQUEST, off as libc::off_t)
        };
        if n < 0 {
            if *libc::__errno_location() == libc::EINTR {
                continue;
            }
            libc::_exit(4);
        }
        if n == 0 {
            off = 0;
            continue;
        }
        (*counter).fetch_add(n as u64, Ordering::Relaxed);
        off += n as u64;
    }
}

/// Starts `app` from the tree at `root` (chroot, so the executable, its
/// loader, libraries and modules all come from there) and returns the
/// time to its exit in seconds, or after `timeout` a lower bound (killed;
/// the flag is true).
pub fn time_start(root: &Path, app: &App, timeout: Duration) -> Result<(f64, bool)> {
    let root_c = CString::new(root.as_os_str().as_bytes()).expect("no NUL in a path");
    let mut cmd = Command::new(&app.exe);
    cmd.args(&app.args)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONNOUSERSITE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: chroot and chdir are async-signal-safe system calls on a C
    // string made before the fork.
    unsafe {
        cmd.pre_exec(move || {
            if libc::chroot(root_c.as_ptr()) != 0 || libc::chdir(c"/".as_ptr()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let t0 = Instant::now();
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting {} in {}", app.exe.display(), root.display()))?;
    let done = Arc::new(AtomicBool::new(false));
    let killed = Arc::new(AtomicBool::new(false));
    let pid = child.id() as libc::pid_t;
    let watchdog = {
        let (done, killed) = (done.clone(), killed.clone());
        std::thread::spawn(move || {
            while t0.elapsed() < timeout {
                if done.load(Ordering::SeqCst) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            if !done.load(Ordering::SeqCst) {
                killed.store(true, Ordering::SeqCst);
                // SAFETY: our child, not yet reaped (done is false).
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        })
    };
    let mut err = Vec::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_end(&mut err);
    }
    let status = child.wait();
    let secs = t0.elapsed().as_secs_f64();
    done.store(true, Ordering::SeqCst);
    let _ = watchdog.join();
    let status = status?;
    if killed.load(Ordering::SeqCst) {
        return Ok((secs, true));
    }
    if !status.success() {
        bail!(
            "{} {} in {} failed ({status}): {}",
            app.exe.display(),
            app.args.join(" "),
            root.display(),
            String::from_utf8_lossy(&err).trim()
        );
    }
    Ok((secs, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_output_gives_the_library_and_loader_paths() {
        let t = "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibtinfo.so.6 => /lib/x86_64-linux-gnu/libtinfo.so.6 (0x00007f87)\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f87)\n\t/lib64/ld-linux-x86-64.so.2 (0x00007f87)\n";
        assert_eq!(
            parse_ldd(t),
            vec![
                PathBuf::from("/lib/x86_64-linux-gnu/libtinfo.so.6"),
                PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2"),
            ]
        );
        assert!(parse_ldd("\tstatically linked\n").is_empty());
    }

    #[test]
    fn bad_targets_are_refused_naming_what_is_missing() {
        let d = tempfile::tempdir().unwrap();
        let missing = d.path().join("nope");
        let e = check_target_with(&missing, true, d.path())
            .unwrap_err()
            .to_string();
        assert!(e.contains("--target") && e.contains("nope"), "{e}");
        let file = d.path().join("file");
        std::fs::write(&file, "x").unwrap();
        let e = check_target_with(&file, true, d.path())
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a directory"), "{e}");
        let e = check_target_with(d.path(), false, d.path())
            .unwrap_err()
            .to_string();
        assert!(e.contains("needs root"), "{e}");
        let e = check_target_with(d.path(), true, &missing)
            .unwrap_err()
            .to_string();
        assert!(e.contains("nope") && e.contains("FUSE"), "{e}");
        check_target_with(d.path(), true, d.path()).unwrap();
    }

    #[test]
    fn a_directory_it_did_not_make_is_not_replaced() {
        let d = tempfile::tempdir().unwrap();
        let back = d.path().join("back");
        std::fs::create_dir(&back).unwrap();
        std::fs::write(back.join("mine"), "keep").unwrap();
        let spec = Spec {
            files: 1,
            file_size: 1 << 20,
        };
        let e = prepare(d.path(), &spec, &mut |_| {})
            .unwrap_err()
            .to_string();
        assert!(e.contains("was not made by --real-apps"), "{e}");
        assert_eq!(std::fs::read_to_string(back.join("mine")).unwrap(), "keep");
    }
}
