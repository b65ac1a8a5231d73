//! What a run leaves if it is killed with SIGKILL (or crashes) before its
//! guards can undo it, and `bfq cleanup`, which undoes it afterwards.
//!
//! A run notes in [`STATE_DIR`] each change it makes to the machine, one
//! file per change, removed when the change is undone:
//!
//! - `PID-DEV`: the scheduler it set on block device `DEV`
//!   ([`crate::sys::SchedulerGuard`]): the one to put back, then the one
//!   it set.
//! - `loops/PID-loopN`: a loop device it attached for its own use
//!   ([`crate::sys::LoopDevice`] not kept, e.g. `bench-engine`'s): the
//!   backing file. Written before the device is attached, so a note of
//!   a device that is not over that file is dropped.
//! - `mounts/PID-N`: a filesystem it mounted for its own use (the suite's
//!   ext4 image on its loop device): the source and the mount point.
//! - `files/PID-N`: a file it made for its own use (`--create`'s
//!   `.NAME.part-PID` while it fills, `bench-engine`'s backing file): its
//!   device, inode and path, so that a file made at that path since is
//!   never taken for it.
//!
//! Its cgroups need no note: they are named `bfq-rs-PID-*`, in the cgroup
//! v1 blkio hierarchy or a cgroup v2 one. [`cleanup`] undoes what
//! processes that no longer exist left, and nothing of a live one's.

use crate::sys::{detach_loop, require_root, BLKIO_V1, CGROUP_V2_ROOTS, STATE_DIR};
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A note in [`STATE_DIR`] of something this process made, removed when
/// dropped (the thing undone). Best effort: a note that cannot be written
/// (no `/run`, not root) is none, and only `bfq cleanup` misses it.
#[derive(Debug)]
pub struct Note(Option<PathBuf>);

impl Note {
    /// Notes `content` in `STATE_DIR/sub/PID-key` (`sub` empty: in
    /// [`STATE_DIR`] itself).
    pub(crate) fn write(sub: &str, key: &str, content: &str) -> Note {
        let dir = Path::new(STATE_DIR).join(sub);
        let path = dir.join(format!("{}-{key}", std::process::id()));
        let ok = fs::create_dir_all(&dir).and_then(|()| fs::write(&path, content));
        Note(ok.is_ok().then_some(path))
    }

    /// Notes loop device `dev` (`loopN`), attached over `backing` for this
    /// process's own use.
    pub(crate) fn loop_device(dev: &str, backing: &Path) -> Note {
        let backing = fs::canonicalize(backing).unwrap_or_else(|_| backing.to_path_buf());
        Note::write("loops", dev, &backing.to_string_lossy())
    }

    /// Notes file `path`, just made by this process for its own use (the
    /// file there now, by device and inode).
    pub fn file(path: &Path) -> Note {
        let Ok(m) = fs::symlink_metadata(path) else {
            return Note(None);
        };
        let path = fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let content = format!("{} {} {}", m.dev(), m.ino(), path.to_string_lossy());
        Note::write("files", &next_key(), &content)
    }

    /// Notes the mount of `source` on `dir`, just made by this process
    /// for its own use.
    pub fn mount(source: &Path, dir: &Path) -> Note {
        let dir = fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        let content = format!("{}\n{}", source.display(), dir.display());
        Note::write("mounts", &next_key(), &content)
    }

    /// No note (nothing to undo).
    pub(crate) fn none() -> Note {
        Note(None)
    }

    /// Drops the note, leaving what it noted (kept on purpose).
    pub fn forget(mut self) {
        self.remove();
    }

    fn remove(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = fs::remove_file(p);
        }
    }
}

impl Drop for Note {
    fn drop(&mut self) {
        self.remove();
    }
}

/// A key for a note of this process not used before.
fn next_key() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed).to_string()
}

/// What [`cleanup`] did (or, dry, would do): one line per thing.
#[derive(Debug, Default)]
pub struct Cleaned {
    /// Restored or removed (dry: to restore or remove).
    pub done: Vec<String>,
    /// Left on purpose, with why (a live run uses it, changed since).
    pub left: Vec<String>,
    /// Could not be undone, with the error.
    pub failed: Vec<String>,
}

/// Undoes what processes that no longer exist left (see the module's
/// documentation): the schedulers they set, their loop devices, their
/// files, their `bfq-rs-PID-*` cgroups; nothing of a live process's, and
/// nothing they did not make. `dry`: only says what it would do.
pub fn cleanup(dry: bool) -> io::Result<Cleaned> {
    require_root("bfq cleanup")?;
    let r = Roots::system();
    let mut out = Cleaned::default();
    schedulers(&r, dry, &mut out);
    mounts(&r, dry, &mut out);
    loops(&r, dry, &mut out);
    files(&r, dry, &mut out);
    let mut roots = vec![PathBuf::from(BLKIO_V1)];
    roots.extend(CGROUP_V2_ROOTS.iter().map(PathBuf::from));
    for root in roots.iter().filter(|r| is_cgroup_root(r)) {
        cgroups(&r, root, dry, &mut out);
    }
    Ok(out)
}

/// Where [`cleanup`] looks: the notes ([`STATE_DIR`]), sysfs and procfs
/// (other directories in tests, as fake trees).
#[derive(Debug)]
pub(crate) struct Roots {
    state: PathBuf,
    sys: PathBuf,
    proc: PathBuf,
}

impl Roots {
    /// This machine's.
    fn system() -> Roots {
        Roots {
            state: STATE_DIR.into(),
            sys: "/sys".into(),
            proc: "/proc".into(),
        }
    }
}

/// `past` done, or `would` when dry.
fn verb<'a>(dry: bool, past: &'a str, would: &'a str) -> &'a str {
    if dry {
        would
    } else {
        past
    }
}

/// Whether the process that made `made` (a note, a cgroup) still lives:
/// process `pid` exists, is not a zombie (it has ended, its parent has
/// not reaped it yet), and started before `made` was last modified. One
/// that started later only got the pid again, after the maker died.
fn maker_alive(proc: &Path, pid: u32, made: &Path) -> bool {
    let (alive, start) = process_status(proc, pid);
    let Some(start) = start else {
        return alive;
    };
    let when = fs::metadata(made).and_then(|m| m.modified());
    // The start is known to the second (the boot time's unit).
    alive && when.map_or(true, |w| start <= w + std::time::Duration::from_secs(2))
}

/// Whether process `pid` lives (`PROC/PID` exists and its state, in
/// `PROC/PID/stat`, is not zombie or dead) and when it started (the
/// start time after boot there, plus `PROC/stat`'s boot time; `None` if
/// this cannot be read).
fn process_status(proc: &Path, pid: u32) -> (bool, Option<std::time::SystemTime>) {
    let dir = proc.join(pid.to_string());
    let Ok(stat) = fs::read_to_string(dir.join("stat")) else {
        return (dir.exists(), None);
    };
    // Fields after the command name, which may hold spaces and ')':
    // state is field 3, start time field 22.
    let mut rest = stat[stat.rfind(')').map_or(0, |i| i + 1)..].split_whitespace();
    if matches!(rest.next(), Some("Z" | "X" | "x")) {
        return (false, None);
    }
    (true, start_time(proc, rest.nth(18)))
}

/// A process's start time from `ticks` after boot (`PROC/stat`'s boot
/// time).
fn start_time(proc: &Path, ticks: Option<&str>) -> Option<std::time::SystemTime> {
    let ticks: u64 = ticks?.parse().ok()?;
    let boot: u64 = fs::read_to_string(proc.join("stat"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime ")?.trim().parse().ok())?;
    // SAFETY: plain sysconf.
    let hz = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) })
        .ok()?
        .max(1);
    let secs =
        std::time::Duration::from_secs(boot) + std::time::Duration::from_millis(ticks * 1000 / hz);
    Some(std::time::UNIX_EPOCH + secs)
}

/// The notes in `dir` (`PID-KEY`): (pid, key, path), oldest first.
fn notes_in(dir: &Path) -> Vec<(u32, String, PathBuf)> {
    let Ok(rd) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<_> = rd
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let (pid, key) = name.split_once('-')?;
            let pid = pid.parse::<u32>().ok()?;
            let when = e.metadata().and_then(|m| m.modified()).ok()?;
            Some((when, pid, key.to_string(), e.path()))
        })
        .collect();
    v.sort();
    v.into_iter().map(|(_, p, k, path)| (p, k, path)).collect()
}

/// A note's removal; "not found" is success (another `bfq cleanup`, or
/// the run itself, removed it meanwhile).
fn drop_note(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        r => r,
    }
}

/// Puts back the schedulers dead runs set. With several dead runs on one
/// device (one started while an earlier one had changed it, both killed)
/// the earliest's is put back: the device's scheduler before any of them.
/// A device a live run uses is left (that run puts back what it found;
/// `bfq cleanup` again after it ends), and so is one whose scheduler is
/// no longer the one the last dead run set (changed by hand since).
/// Their notes go once the device is dealt with; they stay when putting
/// the scheduler back failed (to try again).
fn schedulers(r: &Roots, dry: bool, out: &mut Cleaned) {
    let notes = notes_in(&r.state);
    let mut devs: Vec<&str> = notes.iter().map(|n| n.1.as_str()).collect();
    devs.sort_unstable();
    devs.dedup();
    for dev in devs {
        let mine = notes.iter().filter(|n| n.1 == dev);
        let (dead, live): (Vec<_>, Vec<_>) = mine.partition(|n| !maker_alive(&r.proc, n.0, &n.2));
        let (Some(first), Some(last)) = (dead.first(), dead.last()) else {
            continue;
        };
        if let Some(l) = live.first() {
            out.left.push(format!(
                "{dev}: scheduler left as it is: run {} still uses the device \
                 (run bfq cleanup again once it ends)",
                l.0
            ));
            continue;
        }
        let read = |p: &Path| fs::read_to_string(p).unwrap_or_default();
        let (first_note, last_note) = (read(&first.2), read(&last.2));
        let previous = first_note.lines().next().unwrap_or("").trim().to_string();
        let set = last_note.lines().nth(1).map(str::trim);
        let file = r.sys.join(format!("block/{dev}/queue/scheduler"));
        if restore_scheduler(&file, dev, &previous, set, dry, out) && !dry {
            for n in &dead {
                drop_or_say(&n.2, out);
            }
        }
    }
}

/// Removes note `path`; says in `out.failed` if it cannot.
fn drop_or_say(path: &Path, out: &mut Cleaned) {
    if let Err(e) = drop_note(path) {
        out.failed
            .push(format!("cannot remove note {}: {e}", path.display()));
    }
}

/// Writes `previous` to `dev`'s scheduler (`file`), unless it is no
/// longer `set` (what the last dead run set, when noted). Whether the
/// device is dealt with (restored, left on purpose or gone): false only
/// when the write failed.
fn restore_scheduler(
    file: &Path,
    dev: &str,
    previous: &str,
    set: Option<&str>,
    dry: bool,
    out: &mut Cleaned,
) -> bool {
    let Ok(now) = fs::read_to_string(file) else {
        out.done.push(format!(
            "{dev}: gone (no such block device now); its note {}",
            verb(dry, "removed", "to remove")
        ));
        return true;
    };
    let active = now
        .split_whitespace()
        .find_map(|w| w.strip_prefix('[').and_then(|w| w.strip_suffix(']')))
        .unwrap_or("");
    if set.is_some_and(|s| !s.is_empty() && s != active) {
        out.left.push(format!(
            "{dev}: scheduler left at {active}: a dead run set {}, changed since; \
             it was {previous} before the run",
            set.unwrap_or("")
        ));
        return true;
    }
    if active == previous {
        return true;
    }
    let line = format!(
        "{dev}: scheduler {previous} {} (was {active})",
        verb(dry, "restored", "to restore")
    );
    match if dry {
        Ok(())
    } else {
        fs::write(file, previous)
    } {
        Ok(()) => out.done.push(line),
        Err(e) => {
            out.failed.push(format!(
                "{dev}: cannot restore scheduler {previous}: {e} (its notes kept)"
            ));
            return false;
        }
    }
    true
}

/// Unmounts the filesystems dead runs mounted for their own use, if
/// still mounted from the same source on the same mount point (the top
/// mount there; not lazily: a busy one is said and left).
fn mounts(r: &Roots, dry: bool, out: &mut Cleaned) {
    for (pid, _, note) in notes_in(&r.state.join("mounts")) {
        if maker_alive(&r.proc, pid, &note) {
            continue;
        }
        let text = fs::read_to_string(&note).unwrap_or_default();
        let Some((source, dir)) = text.split_once('\n') else {
            forget_unless(dry, &note);
            continue;
        };
        let table = fs::read_to_string(r.proc.join("self/mounts")).unwrap_or_default();
        let escaped = escape_mount_path(dir);
        let at_dir: Vec<&str> = table
            .lines()
            .filter_map(|l| {
                let mut f = l.split(' ');
                let (src, at) = (f.next()?, f.next()?);
                (at == escaped).then_some(src)
            })
            .collect();
        if at_dir.last() != Some(&source) {
            if at_dir.contains(&source) {
                out.left.push(format!(
                    "{dir} ({source}): under another mount (unmount that one first)"
                ));
            } else {
                forget_unless(dry, &note);
            }
            continue;
        }
        let line = format!("{dir} ({source}) {}", verb(dry, "unmounted", "to unmount"));
        match if dry { Ok(()) } else { unmount(dir) } {
            Ok(()) => {
                forget_unless(dry, &note);
                out.done.push(line);
            }
            Err(e) => out.failed.push(format!("unmounting {dir}: {e}")),
        }
    }
}

/// A path as `/proc/self/mounts` writes it (space, tab, newline and
/// backslash as octal escapes).
fn escape_mount_path(p: &str) -> String {
    let mut s = String::with_capacity(p.len());
    for c in p.chars() {
        match c {
            ' ' => s.push_str("\\040"),
            '\t' => s.push_str("\\011"),
            '\n' => s.push_str("\\012"),
            '\\' => s.push_str("\\134"),
            c => s.push(c),
        }
    }
    s
}

/// `umount2(dir, 0)`.
fn unmount(dir: &str) -> io::Result<()> {
    let c =
        std::ffi::CString::new(dir).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: a NUL-terminated path.
    match unsafe { libc::umount2(c.as_ptr(), 0) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// Detaches the loop devices dead runs attached for their own use, if
/// still over the file they attached them to, also when that file was
/// deleted since (the device keeps it, and its space, until detached).
/// One over another file now is said and left; one detached since only
/// loses its note.
fn loops(r: &Roots, dry: bool, out: &mut Cleaned) {
    for (pid, dev, note) in notes_in(&r.state.join("loops")) {
        if maker_alive(&r.proc, pid, &note) {
            continue;
        }
        let backing = fs::read_to_string(&note).unwrap_or_default();
        let sys = r.sys.join(format!("block/{dev}/loop/backing_file"));
        let path = PathBuf::from("/dev").join(&dev);
        let Ok(now) = fs::read_to_string(&sys) else {
            forget_unless(dry, &note);
            continue;
        };
        let now = now.trim_end_matches('\n');
        if !same_backing(now, &backing) {
            out.left.push(format!(
                "{}: over {now} now, not {backing} (a dead run's), left as it is",
                path.display()
            ));
            forget_unless(dry, &note);
            continue;
        }
        let line = format!(
            "{} {} (over {backing})",
            path.display(),
            verb(dry, "detached", "to detach")
        );
        match if dry { Ok(()) } else { detach_loop(&path) } {
            Ok(()) => {
                forget_unless(dry, &note);
                out.done.push(line);
            }
            Err(e) => out.failed.push(format!("{}: {e}", path.display())),
        }
    }
}

/// Whether a loop device's `backing_file` in sysfs (`now`) is the file
/// noted (`noted`): its path, or its path and " (deleted)" once removed.
fn same_backing(now: &str, noted: &str) -> bool {
    !noted.is_empty() && (now == noted || now.strip_suffix(" (deleted)") == Some(noted))
}

/// Removes the files dead runs made for their own use, if the file at
/// the path is still the one they made.
fn files(r: &Roots, dry: bool, out: &mut Cleaned) {
    for (pid, _, note) in notes_in(&r.state.join("files")) {
        if maker_alive(&r.proc, pid, &note) {
            continue;
        }
        let text = fs::read_to_string(&note).unwrap_or_default();
        let mut it = text.splitn(3, ' ');
        let (dev, ino, path) = (it.next(), it.next(), it.next().map(PathBuf::from));
        let same = |m: fs::Metadata| {
            Some(m.dev().to_string()).as_deref() == dev
                && Some(m.ino().to_string()).as_deref() == ino
        };
        let Some(path) = path.filter(|p| fs::symlink_metadata(p).is_ok_and(same)) else {
            forget_unless(dry, &note);
            continue;
        };
        let line = format!("{} {}", path.display(), verb(dry, "removed", "to remove"));
        match if dry { Ok(()) } else { fs::remove_file(&path) } {
            Ok(()) => {
                forget_unless(dry, &note);
                out.done.push(line);
            }
            Err(e) => out.failed.push(format!("{}: {e}", path.display())),
        }
    }
}

/// Removes `note` unless `dry` (its thing is gone, or undone).
fn forget_unless(dry: bool, note: &Path) {
    if !dry {
        let _ = drop_note(note);
    }
}

/// Whether `root` is a cgroup hierarchy's root (v1 blkio or v2).
fn is_cgroup_root(root: &Path) -> bool {
    root.join("tasks").exists() || root.join("cgroup.controllers").exists()
}

/// Removes the `bfq-rs-PID-*` cgroups under `root` whose process is gone.
/// One that still holds live processes (a dead run's flow processes that
/// outlived it, or processes moved there since) is said and left: removing
/// it would move them to the root cgroup. Kernel threads in one (a loop
/// device's worker) do not count and are moved.
pub(crate) fn cgroups(r: &Roots, root: &Path, dry: bool, out: &mut Cleaned) {
    let Ok(rd) = fs::read_dir(root) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let Some(pid) = name
            .strip_prefix("bfq-rs-")
            .and_then(|r| r.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if maker_alive(&r.proc, pid, &e.path()) || !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let dir = e.path();
        let live = live_members(&r.proc, &dir);
        if !live.is_empty() {
            let ids: Vec<String> = live.iter().map(u32::to_string).collect();
            let n = live.len();
            out.left.push(format!(
                "cgroup {}: has {n} {} ({}), left as it is",
                dir.display(),
                if n == 1 { "process" } else { "processes" },
                ids.join(" ")
            ));
            continue;
        }
        let line = format!(
            "cgroup {} {}",
            dir.display(),
            verb(dry, "removed", "to remove")
        );
        match if dry {
            Ok(())
        } else {
            remove_cgroup_tree(&dir, root)
        } {
            Ok(()) => out.done.push(line),
            Err(err) if err.kind() == io::ErrorKind::NotFound => {}
            Err(err) => out.failed.push(format!("{}: {err}", dir.display())),
        }
    }
}

/// The live user processes in cgroup `dir` and the ones below it
/// (`cgroup.procs`, or `tasks` without it): not zombies, not kernel
/// threads (an empty `PROC/PID/cmdline`).
fn live_members(proc: &Path, dir: &Path) -> Vec<u32> {
    let mut ids = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        let list = fs::read_to_string(d.join("cgroup.procs"))
            .or_else(|_| fs::read_to_string(d.join("tasks")))
            .unwrap_or_default();
        ids.extend(
            list.split_whitespace()
                .filter_map(|i| i.parse::<u32>().ok()),
        );
        let sub = fs::read_dir(&d).into_iter().flatten().flatten();
        dirs.extend(
            sub.filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path()),
        );
    }
    ids.sort_unstable();
    ids.dedup();
    ids.retain(|&id| {
        process_status(proc, id).0
            && fs::read(proc.join(format!("{id}/cmdline"))).is_ok_and(|c| !c.is_empty())
    });
    ids
}

/// Removes a cgroup directory and the ones below it, moving any thread
/// (v1 `tasks`) or process (v2 `cgroup.procs`) left in them to the
/// hierarchy's root first.
fn remove_cgroup_tree(dir: &Path, root: &Path) -> io::Result<()> {
    for e in fs::read_dir(dir)?.flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            remove_cgroup_tree(&e.path(), root)?;
        }
    }
    let members = match root.join("tasks").exists() {
        true => "tasks",
        false => "cgroup.procs",
    };
    if let Ok(t) = fs::read_to_string(dir.join(members)) {
        for id in t.split_whitespace() {
            let _ = fs::write(root.join(members), id);
        }
    }
    fs::remove_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pid no process has (above the kernel's limit, 2^22).
    const DEAD: u32 = 4_194_305;

    #[test]
    fn dead_runs_cgroups_go_in_either_hierarchy_and_live_ones_stay() {
        for tasks in [true, false] {
            let root = tempfile::tempdir().unwrap();
            let r = root.path();
            fs::write(
                r.join(if tasks { "tasks" } else { "cgroup.controllers" }),
                "",
            )
            .unwrap();
            assert!(is_cgroup_root(r));
            let me = std::process::id();
            for d in [
                format!("bfq-rs-{DEAD}-0"),
                format!("bfq-rs-{DEAD}-g0/g1/f2"),
                format!("bfq-rs-{me}-0"),
                "user-own".into(),
                "bfq-rs-x".into(),
            ] {
                fs::create_dir_all(r.join(d)).unwrap();
            }
            let mut out = Cleaned::default();
            cgroups(&Roots::system(), r, true, &mut out);
            assert_eq!(out.done.len(), 2, "{:?}", out.done);
            assert!(out.done.iter().all(|l| l.ends_with("to remove")));
            assert!(r.join(format!("bfq-rs-{DEAD}-0")).exists(), "dry: kept");
            let mut out = Cleaned::default();
            cgroups(&Roots::system(), r, false, &mut out);
            assert_eq!(out.done.len(), 2, "{:?}", out.done);
            assert!(out.failed.is_empty(), "{:?}", out.failed);
            let mut left: Vec<String> = fs::read_dir(r)
                .unwrap()
                .flatten()
                .filter(|e| e.file_type().unwrap().is_dir())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            left.sort();
            assert_eq!(
                left,
                [
                    format!("bfq-rs-{me}-0"),
                    "bfq-rs-x".into(),
                    "user-own".into()
                ]
            );
        }
    }

    #[test]
    fn a_pid_taken_again_by_a_later_process_is_not_the_maker() {
        let d = tempfile::tempdir().unwrap();
        let note = d.path().join("note");
        fs::write(&note, "").unwrap();
        let me = std::process::id();
        let proc = Path::new("/proc");
        assert!(
            maker_alive(proc, me, &note),
            "made after this process started"
        );
        let long_ago = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        fs::File::options()
            .write(true)
            .open(&note)
            .unwrap()
            .set_modified(long_ago)
            .unwrap();
        assert!(
            !maker_alive(proc, me, &note),
            "made before this process started"
        );
        assert!(!maker_alive(proc, DEAD, &note));
        let (alive, start) = process_status(proc, me);
        assert!(alive && start.is_some_and(|t| t <= std::time::SystemTime::now()));
    }

    /// A mount a dead process noted is unmounted; one over it that it did
    /// not make (another source) is not. Root only.
    #[test]
    fn a_dead_processes_mount_is_unmounted_and_no_other() {
        if !crate::sys::is_root() {
            eprintln!("SKIPPED a_dead_processes_mount_is_unmounted_and_no_other: needs root");
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("m t");
        fs::create_dir(&dir).unwrap();
        let me = std::process::id();
        let (ours, theirs) = (format!("bfq-test-{me}"), format!("user-test-{me}"));
        let mount = |src: &str| {
            let st = std::process::Command::new("mount")
                .args(["-t", "tmpfs", src])
                .arg(&dir)
                .status();
            st.is_ok_and(|s| s.success())
        };
        let mounted = |src: &str| {
            let t = fs::read_to_string("/proc/self/mounts").unwrap();
            t.lines().any(|l| l.starts_with(&format!("{src} ")))
        };
        if !mount(&ours) || !mount(&theirs) {
            eprintln!("SKIPPED a_dead_processes_mount_is_unmounted_and_no_other: no tmpfs mount");
            let _ = unmount(&dir.to_string_lossy());
            let _ = unmount(&dir.to_string_lossy());
            return;
        }
        let state = tempfile::tempdir().unwrap();
        let r = Roots {
            state: state.path().into(),
            ..Roots::system()
        };
        let notes = state.path().join("mounts");
        fs::create_dir_all(&notes).unwrap();
        let note = notes.join(format!("{DEAD}-test{me}"));
        let dir_s = fs::canonicalize(&dir)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        fs::write(&note, format!("{ours}\n{dir_s}")).unwrap();
        let mut out = Cleaned::default();
        mounts(&r, false, &mut out);
        assert!(
            mounted(&theirs) && mounted(&ours),
            "covered by another: left"
        );
        assert!(out.left.iter().any(|l| l.contains("under another mount")));
        unmount(&dir_s).unwrap();
        mounts(&r, false, &mut out);
        let gone = !mounted(&ours);
        if !gone {
            let _ = unmount(&dir_s);
        }
        assert!(gone, "{:?}", out);
        assert!(!note.exists());
    }

    /// A fake machine: the notes' directory, sysfs and procfs as plain
    /// directories, booted at 1000 s after the epoch.
    fn fake() -> (tempfile::TempDir, Roots) {
        let d = tempfile::tempdir().unwrap();
        let r = Roots {
            state: d.path().join("run"),
            sys: d.path().join("sys"),
            proc: d.path().join("proc"),
        };
        put(&r.proc, "stat", "cpu 1 2 3\nbtime 1000\n");
        fs::create_dir_all(&r.state).unwrap();
        (d, r)
    }

    /// Writes `text` to `root/path`, making its directories.
    fn put(root: &Path, path: &str, text: &str) -> PathBuf {
        let p = root.join(path);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, text).unwrap();
        p
    }

    /// Fake process `pid` in `state` (`R`, `S`, `Z`...), started at boot,
    /// with `cmdline` (empty: a kernel thread).
    fn fake_process(r: &Roots, pid: u32, state: char, cmdline: &str) {
        let fields: Vec<String> = (1..=18).map(|i| i.to_string()).collect();
        let stat = format!("{pid} (a) b) {state} {} 0 7\n", fields.join(" "));
        put(&r.proc, &format!("{pid}/stat"), &stat);
        put(&r.proc, &format!("{pid}/cmdline"), cmdline);
    }

    #[test]
    fn zombies_are_dead() {
        let (_d, r) = fake();
        let note = put(&r.state, "note", "");
        fake_process(&r, 10, 'S', "x\0");
        fake_process(&r, 11, 'Z', "x\0");
        fake_process(&r, 12, 'X', "x\0");
        assert!(maker_alive(&r.proc, 10, &note));
        assert!(!maker_alive(&r.proc, 11, &note));
        assert!(!maker_alive(&r.proc, 12, &note));
        assert!(!maker_alive(&r.proc, DEAD, &note));
    }

    /// A dead run's loop device over its file deleted since is detached;
    /// one over another file now is said and left; one detached since
    /// only loses its note.
    #[test]
    fn a_loop_device_is_detached_over_its_deleted_file_and_not_over_another() {
        let (_d, r) = fake();
        put(&r.state, &format!("loops/{DEAD}-loop90"), "/x/a.img");
        put(
            &r.sys,
            "block/loop90/loop/backing_file",
            "/x/a.img (deleted)\n",
        );
        let other = put(&r.state, &format!("loops/{DEAD}-loop91"), "/x/b.img");
        put(&r.sys, "block/loop91/loop/backing_file", "/x/c.img\n");
        let gone = put(&r.state, &format!("loops/{DEAD}-loop92"), "/x/d.img");
        let mut out = Cleaned::default();
        loops(&r, true, &mut out);
        assert_eq!(
            out.done,
            ["/dev/loop90 to detach (over /x/a.img)"],
            "{out:?}"
        );
        assert_eq!(out.left.len(), 1, "{out:?}");
        assert!(out.left[0].starts_with("/dev/loop91: over /x/c.img now"));
        assert!(other.exists() && gone.exists(), "dry: notes kept");
        // Not dry (without the one it would really detach).
        fs::remove_file(r.state.join(format!("loops/{DEAD}-loop90"))).unwrap();
        let mut out = Cleaned::default();
        loops(&r, false, &mut out);
        assert!(out.done.is_empty() && out.failed.is_empty(), "{out:?}");
        assert_eq!(out.left.len(), 1, "{out:?}");
        assert!(!other.exists() && !gone.exists());
    }

    /// A dead run's cgroup still holding live processes (below it too)
    /// is left, said, also when dry; zombies and kernel threads in one do
    /// not count.
    #[test]
    fn a_dead_runs_cgroup_with_live_processes_is_left() {
        let (d, r) = fake();
        let root = d.path().join("cg");
        put(&root, "cgroup.controllers", "io");
        put(&root, &format!("bfq-rs-{DEAD}-0/cgroup.procs"), "100\n");
        put(&root, &format!("bfq-rs-{DEAD}-1/cgroup.procs"), "");
        put(
            &root,
            &format!("bfq-rs-{DEAD}-1/g/cgroup.procs"),
            "101\n200\n",
        );
        put(
            &root,
            &format!("bfq-rs-{DEAD}-2/cgroup.procs"),
            "300\n301\n",
        );
        fake_process(&r, 100, 'S', "a\0");
        fake_process(&r, 101, 'R', "b\0");
        fake_process(&r, 200, 'Z', "c\0");
        fake_process(&r, 300, 'S', "");
        fake_process(&r, 301, 'Z', "d\0");
        for dry in [true, false] {
            let mut out = Cleaned::default();
            cgroups(&r, &root, dry, &mut out);
            out.left.sort();
            let want = [(0, 100), (1, 101)].map(|(n, pid)| {
                let dir = root.join(format!("bfq-rs-{DEAD}-{n}"));
                format!(
                    "cgroup {}: has 1 process ({pid}), left as it is",
                    dir.display()
                )
            });
            assert_eq!(out.left, want, "dry {dry}: {out:?}");
            if dry {
                let dir = root.join(format!("bfq-rs-{DEAD}-2"));
                assert_eq!(out.done, [format!("cgroup {} to remove", dir.display())]);
            }
            assert!(root.join(format!("bfq-rs-{DEAD}-1/g")).exists());
        }
    }

    /// A dead run's file is removed; a file at its path since (another
    /// inode) is not.
    #[test]
    fn a_file_made_at_a_dead_runs_path_since_is_left() {
        let (d, r) = fake();
        let note = |name: &str, path: &Path| {
            let m = fs::metadata(path).unwrap();
            let text = format!("{} {} {}", m.dev(), m.ino(), path.display());
            put(&r.state, &format!("files/{DEAD}-{name}"), &text)
        };
        let (mine, since) = (d.path().join("mine"), d.path().join("since"));
        fs::write(&mine, "").unwrap();
        fs::write(&since, "").unwrap();
        let notes = [note("0", &mine), note("1", &since)];
        // A new file (another inode: made while the first still was) now
        // at the noted path.
        let new = d.path().join("new");
        fs::write(&new, "").unwrap();
        fs::rename(&new, &since).unwrap();
        let mut out = Cleaned::default();
        files(&r, false, &mut out);
        assert_eq!(out.done, [format!("{} removed", mine.display())]);
        assert!(!mine.exists() && since.exists(), "{out:?}");
        assert!(notes.iter().all(|n| !n.exists()));
    }

    /// A dead run's scheduler is put back; one changed by hand since is
    /// left; one that cannot be written keeps its note (to try again).
    #[test]
    fn schedulers_changed_since_are_left_and_failed_ones_keep_their_notes() {
        let (_d, r) = fake();
        let queue = |dev: &str| format!("block/{dev}/queue/scheduler");
        let back = put(&r.sys, &queue("fake0"), "none mq-deadline [bfq]\n");
        let hand = put(&r.sys, &queue("fake1"), "none [mq-deadline] bfq\n");
        let ro = r.sys.join(queue("fake2"));
        fs::create_dir_all(ro.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink("/proc/version", &ro).unwrap();
        let notes = ["fake0", "fake1", "fake2"].map(|dev| {
            let set = if dev == "fake2" { "" } else { "bfq\n" };
            put(&r.state, &format!("{DEAD}-{dev}"), &format!("none\n{set}"))
        });
        let mut out = Cleaned::default();
        schedulers(&r, false, &mut out);
        assert_eq!(out.done, ["fake0: scheduler none restored (was bfq)"]);
        assert_eq!(fs::read_to_string(&back).unwrap(), "none");
        assert_eq!(out.left.len(), 1, "{out:?}");
        assert!(out.left[0].starts_with("fake1: scheduler left at mq-deadline"));
        assert_eq!(
            fs::read_to_string(&hand).unwrap(),
            "none [mq-deadline] bfq\n"
        );
        assert_eq!(out.failed.len(), 1, "{out:?}");
        assert!(out.failed[0].starts_with("fake2: cannot restore scheduler none"));
        assert_eq!(notes.map(|n| n.exists()), [false, false, true]);
    }

    #[test]
    fn mount_paths_are_escaped_as_the_mount_table_writes_them() {
        assert_eq!(escape_mount_path("/a b\\c"), "/a\\040b\\134c");
        assert_eq!(escape_mount_path("/x"), "/x");
    }

    #[test]
    fn notes_are_listed_oldest_first_by_pid_and_key() {
        let d = tempfile::tempdir().unwrap();
        for (name, age) in [("7-loop1", 30), ("5-loop1", 10), ("9-dm-0", 20)] {
            let p = d.path().join(name);
            fs::write(&p, "none\nbfq\n").unwrap();
            let t = std::time::SystemTime::now() - std::time::Duration::from_secs(age);
            fs::File::options()
                .write(true)
                .open(&p)
                .unwrap()
                .set_modified(t)
                .unwrap();
        }
        fs::write(d.path().join("not-a-note"), "").unwrap();
        fs::create_dir(d.path().join("loops")).unwrap();
        let got: Vec<(u32, String)> = notes_in(d.path()).into_iter().map(|n| (n.0, n.1)).collect();
        assert_eq!(
            got,
            [(7, "loop1".into()), (9, "dm-0".into()), (5, "loop1".into())]
        );
    }
}
