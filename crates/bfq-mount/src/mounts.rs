//! The mount table as `bfq mount` sees it: every mount is known by its
//! mount id (`/proc/self/mountinfo`'s first field), never by its path
//! alone. Two mounts can share a mount point (one stacked on the other's
//! root); an unmount by path removes only the top one, the one a lookup of
//! the path reaches, and a lazy detach removes a mount together with every
//! mount on it. So a server unmounts its own mount only while a lookup of
//! the mount point reaches that mount, and never detaches a mount that
//! another one covers; `--cleanup` removes only mounts whose server is
//! gone.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::{invalid, SOURCE_PREFIX};

/// One line of `/proc/self/mountinfo`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountEntry {
    /// Mount id (unique among the mounts that exist).
    pub id: u64,
    /// Mount id of the mount this one is on.
    pub parent: u64,
    /// Device number of the mount's filesystem (a FUSE mount's names its
    /// connection: `/sys/fs/fuse/connections/MINOR`).
    pub dev: u64,
    /// Where it is mounted.
    pub mountpoint: PathBuf,
    /// Its source (`bfq:BACKING_DIR` for a bfq mount).
    pub source: String,
    /// A bfq mount: FUSE with a `bfq:` source.
    pub bfq: bool,
}

/// Every mount of this process's namespace.
pub fn mount_table() -> Vec<MountEntry> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    parse_mountinfo(&text)
}

/// The bfq mounts (FUSE, source `bfq:...`), oldest first.
pub fn bfq_mounts() -> Vec<MountEntry> {
    mount_table().into_iter().filter(|m| m.bfq).collect()
}

/// Parses mountinfo lines (malformed ones are skipped).
pub fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<MountEntry> {
    let (left, right) = line.split_once(" - ")?;
    let mut r = right.split_whitespace();
    let (fstype, source) = (r.next().unwrap_or(""), r.next().unwrap_or(""));
    let fuse = fstype == "fuse" || fstype == format!("fuse.{}", crate::FS_SUBTYPE);
    let f: Vec<&str> = left.split_whitespace().collect();
    if f.len() < 5 {
        return None;
    }
    let dev = f[2]
        .split_once(':')
        .and_then(|(a, b)| Some(libc::makedev(a.parse().ok()?, b.parse().ok()?)))?;
    Some(MountEntry {
        id: f[0].parse().ok()?,
        parent: f[1].parse().ok()?,
        dev,
        mountpoint: PathBuf::from(unescape_mountinfo(f[4])),
        source: unescape_mountinfo(source),
        bfq: fuse && source.starts_with(SOURCE_PREFIX),
    })
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape_mountinfo(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn cpath(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|e| invalid(e.to_string()))
}

/// (mount id, device number) of the mount a lookup of `path` reaches (for
/// a mount point: the top mount there). `statx` asking for no attributes,
/// without syncing: a FUSE mount answers from the kernel without a request
/// to its server, so this never waits for a server (not even this
/// process's own).
pub fn reached(path: &Path) -> io::Result<(u64, u64)> {
    let c = cpath(path)?;
    // SAFETY: zeroed plain-old-data struct filled by the kernel.
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: valid C string and struct pointer.
    let r = unsafe {
        libc::statx(
            libc::AT_FDCWD,
            c.as_ptr(),
            libc::AT_STATX_DONT_SYNC,
            0,
            &mut st,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    if st.stx_mask & libc::STATX_MNT_ID == 0 {
        return Err(io::Error::other(
            "statx gives no mount id (Linux 5.8 or later needed)",
        ));
    }
    Ok((
        st.stx_mnt_id,
        libc::makedev(st.stx_dev_major, st.stx_dev_minor),
    ))
}

/// The bfq mount a lookup of `path` reaches, if it is one.
pub fn bfq_mount_at(path: &Path) -> Option<MountEntry> {
    let (id, dev) = reached(path).ok()?;
    bfq_mounts()
        .into_iter()
        .find(|m| m.id == id && m.dev == dev && m.mountpoint == path)
}

/// Whether mount `id` with device `dev` is still in the mount table.
pub fn is_mounted(id: u64, dev: u64) -> bool {
    mount_table().iter().any(|m| m.id == id && m.dev == dev)
}

/// Unmounts mount `id` (device `dev`) at `mountpoint`, and nothing else.
/// Nothing to do once it is gone (someone unmounted it). A mount that
/// another one covers is left alone, as neither an unmount by path (which
/// would remove the other one) nor a lazy detach (which would take the other
/// one along) removes it alone: that is an error for the caller. The look
/// at the top mount and the unmount by path are two steps: a mount stacked
/// on this one between them (`bfq mount --nonempty` on the same mount
/// point at that moment) would be the one removed.
pub fn unmount_own(mountpoint: &Path, id: u64, dev: u64) -> io::Result<()> {
    if !is_mounted(id, dev) {
        return Ok(());
    }
    match reached(mountpoint) {
        Ok(top) if top == (id, dev) => unmount_top(mountpoint, dev),
        _ => Err(io::Error::other(format!(
            "{} has another mount on it: leaving this one under it, its connection \
             aborted (`bfq mount --cleanup {}` removes it once it is uncovered)",
            mountpoint.display(),
            mountpoint.display()
        ))),
    }
}

/// Unmounts the top mount at `mountpoint`: a plain unmount, or if it is
/// busy a lazy one that also aborts the FUSE connection `dev` (so the
/// server's workers end and open files fail with `ENOTCONN` instead of
/// hanging); without root, the same through fusermount
/// ([`unmount_unprivileged`]).
fn unmount_top(mountpoint: &Path, dev: u64) -> io::Result<()> {
    let c = cpath(mountpoint)?;
    // SAFETY: valid C string.
    if unsafe { libc::umount2(c.as_ptr(), libc::UMOUNT_NOFOLLOW) } == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EBUSY) => {
            // The lazy unmount below ends the mount whether or not the
            // abort could be written.
            abort_connection(dev);
            let flags = libc::MNT_DETACH | libc::UMOUNT_NOFOLLOW;
            // SAFETY: valid C string.
            if unsafe { libc::umount2(c.as_ptr(), flags) } == 0 {
                return Ok(());
            }
            Err(io::Error::last_os_error())
        }
        Some(libc::EPERM) => unmount_unprivileged(
            |lazy| fusermount_u(mountpoint, lazy),
            || abort_connection(dev),
        ),
        _ => Err(err),
    }
}

/// Unmounting without root, as `umount2` does with root: `fusermount -u`;
/// if that fails (a busy mount: a file still open, a shell inside it), the
/// connection is aborted, which its owner may do (the control files
/// belong to the user who mounted), and the mount detached lazily
/// (`fusermount -u -z`). Without the abort a busy mount's workers would
/// serve its open files until they are closed, and the server would not
/// exit before.
fn unmount_unprivileged(
    mut fusermount: impl FnMut(bool) -> io::Result<()>,
    abort: impl FnOnce() -> bool,
) -> io::Result<()> {
    if fusermount(false).is_ok() {
        return Ok(());
    }
    abort();
    fusermount(true)
}

/// Writes the FUSE connection's `abort` file (connection id = the mount's
/// device minor number). Mounts the FUSE control filesystem where it
/// belongs if it is not there (systemd mounts it at boot; minimal systems
/// may not). Returns whether the abort was written (it is not without
/// root, or where the control filesystem cannot be mounted).
pub fn abort_connection(dev: u64) -> bool {
    if dev == 0 {
        return false;
    }
    let dir = "/sys/fs/fuse/connections";
    let p = format!("{dir}/{}/abort", libc::minor(dev));
    if !Path::new(&p).exists() {
        // SAFETY: valid C strings; fails harmlessly without root.
        unsafe {
            libc::mount(
                c"fusectl".as_ptr(),
                c"/sys/fs/fuse/connections".as_ptr(),
                c"fusectl".as_ptr(),
                0,
                std::ptr::null(),
            )
        };
    }
    std::fs::write(p, "1").is_ok()
}

/// `fusermount3 -u` (or `fusermount`), with `-z` if `lazy`; the plain
/// attempt's complaint (a busy mount) is not shown, as a lazy one follows.
fn fusermount_u(mountpoint: &Path, lazy: bool) -> io::Result<()> {
    for bin in ["fusermount3", "fusermount"] {
        let mut cmd = std::process::Command::new(bin);
        cmd.arg("-u").args(lazy.then_some("-z")).arg(mountpoint);
        if !lazy {
            cmd.stderr(std::process::Stdio::null());
        }
        if let Ok(s) = cmd.status() {
            if s.success() {
                return Ok(());
            }
        }
    }
    Err(io::Error::other(format!(
        "cannot unmount {}: not root and fusermount failed",
        mountpoint.display()
    )))
}

/// Whether the server of the FUSE mount a lookup of `mountpoint` reaches
/// still answers: `statfs` fails with `ENOTCONN` once its connection is
/// gone (the server exited or was killed, or the connection was aborted).
/// Any other answer counts as alive. A stopped (not killed) server makes
/// this wait.
fn server_answers(mountpoint: &Path) -> bool {
    let Ok(c) = cpath(mountpoint) else {
        return true;
    };
    // SAFETY: zeroed plain-old-data struct filled by the kernel.
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid C string and struct pointer.
    let r = unsafe { libc::statfs(c.as_ptr(), &mut s) };
    r == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ENOTCONN)
}

/// What [`cleanup`] did.
#[derive(Debug, Default)]
pub struct Cleaned {
    /// The dead mounts it unmounted, by mount point.
    pub unmounted: Vec<PathBuf>,
    /// The bfq mounts it left, with why.
    pub left: Vec<(PathBuf, &'static str)>,
}

/// The mount points of the bfq mounts [`cleanup`] would unmount now
/// (their server gone, none on them), for a listing that changes nothing.
pub fn dead_mounts() -> Vec<PathBuf> {
    bfq_mounts()
        .into_iter()
        .filter(|m| reached(&m.mountpoint).ok() == Some((m.id, m.dev)))
        .filter(|m| !server_answers(&m.mountpoint))
        .map(|m| m.mountpoint)
        .collect()
}

/// `bfq mount --cleanup`: unmounts the bfq mounts whose server is gone
/// (e.g. killed) at `mountpoint`, or everywhere if none is given. A mount
/// whose server still answers is left, and so is a dead one that another
/// mount covers until that one is gone: stacks are peeled from the top,
/// one dead mount after the other.
pub fn cleanup(mountpoint: Option<&Path>) -> io::Result<Cleaned> {
    let want = mountpoint.map(|p| p.canonicalize().unwrap_or_else(|_| p.to_path_buf()));
    let wanted = |m: &MountEntry| want.as_ref().is_none_or(|p| m.mountpoint == *p);
    if let Some(p) = &want {
        if !bfq_mounts().iter().any(wanted) {
            return Err(invalid(format!("{}: no bfq mount there", p.display())));
        }
    }
    let mut out = Cleaned::default();
    let mut tried = Vec::new();
    loop {
        let mut progress = false;
        for m in bfq_mounts().into_iter().filter(wanted) {
            let top = reached(&m.mountpoint).ok() == Some((m.id, m.dev));
            if tried.contains(&m.id) || !top || server_answers(&m.mountpoint) {
                continue;
            }
            tried.push(m.id);
            let c = cpath(&m.mountpoint)?;
            let flags = libc::MNT_DETACH | libc::UMOUNT_NOFOLLOW;
            // SAFETY: valid C string.
            if unsafe { libc::umount2(c.as_ptr(), flags) } != 0 {
                fusermount_u(&m.mountpoint, true)?;
            }
            out.unmounted.push(m.mountpoint);
            progress = true;
        }
        if !progress {
            break;
        }
    }
    for m in bfq_mounts().into_iter().filter(wanted) {
        let top = reached(&m.mountpoint).ok() == Some((m.id, m.dev));
        let why = if top {
            "still served by a running bfq mount (stop it with Ctrl-C or SIGTERM)"
        } else {
            "under another mount (stop or unmount that one first)"
        };
        out.left.push((m.mountpoint, why));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_gives_ids_parents_devices_and_bfq_mounts() {
        let text = "36 35 98:0 / /mnt/a\\040b rw - fuse bfq:/data rw,user_id=0\n\
                    37 35 8:1 / /home rw - ext4 /dev/sda1 rw\n\
                    38 35 0:50 / /mnt/other rw - fuse sshfs#x rw\n\
                    41 36 0:51 / /mnt/a\\040b rw - fuse.bfq bfq:/d2 rw\n\
                    garbage\n";
        let m = parse_mountinfo(text);
        assert_eq!(m.len(), 4);
        assert_eq!(
            m[0],
            MountEntry {
                id: 36,
                parent: 35,
                dev: libc::makedev(98, 0),
                mountpoint: PathBuf::from("/mnt/a b"),
                source: "bfq:/data".into(),
                bfq: true,
            }
        );
        assert!(!m[1].bfq && !m[2].bfq && m[3].bfq);
        assert_eq!((m[3].id, m[3].parent), (41, 36));
    }

    /// Without root, a busy mount (the plain fusermount fails) has its
    /// connection aborted before the lazy detach, so the server's workers
    /// end; a mount that is not busy is unmounted plainly, not aborted.
    #[test]
    fn unprivileged_unmount_of_a_busy_mount_aborts_before_detaching() {
        for busy in [false, true] {
            let calls = std::cell::RefCell::new(Vec::new());
            let r = unmount_unprivileged(
                |lazy| {
                    calls.borrow_mut().push(if lazy { "lazy" } else { "plain" });
                    if busy && !lazy {
                        Err(io::Error::other("busy"))
                    } else {
                        Ok(())
                    }
                },
                || {
                    calls.borrow_mut().push("abort");
                    true
                },
            );
            assert!(r.is_ok());
            let want: &[&str] = if busy {
                &["plain", "abort", "lazy"]
            } else {
                &["plain"]
            };
            assert_eq!(calls.into_inner(), want, "busy = {busy}");
        }
    }

    #[test]
    fn reached_names_the_mount_of_a_path() {
        let (id, dev) = reached(Path::new("/proc")).unwrap();
        let t = mount_table();
        let e = t.iter().find(|m| m.id == id).expect("in mountinfo");
        assert_eq!((e.dev, e.mountpoint.as_path()), (dev, Path::new("/proc")));
    }
}
