//! An output file that replaces its path only once complete.
//!
//! A long run streams its trace (`--trace FILE`) as it goes. Written to
//! FILE directly, an interrupted or killed run would leave FILE cut off
//! and the previous trace lost. A [`Replacing`] file is written unnamed
//! in FILE's directory (Linux `O_TMPFILE`: a killed process leaves
//! nothing behind, the kernel frees it) and linked over FILE by
//! [`Replacing::finish`]. Where the filesystem cannot make unnamed
//! files, a hidden `.FILE.part-XXXXXX` beside FILE stands in for it
//! (removed on an error; a killed run leaves it), as it does where
//! `/proc` is not mounted (the unnamed file is linked through
//! `/proc/self/fd`). A symbolic link is followed: the file it names is
//! replaced and the link kept. The new file gets the permissions of the
//! one it replaces (a new path: 0666 less the umask, as `File::create`)
//! and, run as root, its owner.
//! A path that is not a regular file (a FIFO, `/dev/null`) is written
//! directly.

use std::ffi::{CString, OsString};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// Where the data goes until [`Replacing::finish`].
enum Stage {
    /// An `O_TMPFILE` file in FILE's directory.
    Unnamed(File),
    /// A named temporary file beside FILE.
    Named(tempfile::TempPath),
    /// FILE itself (not a regular file).
    Direct,
}

/// A file written elsewhere and put in place at its path once complete.
pub struct Replacing {
    path: PathBuf,
    stage: Stage,
}

impl Replacing {
    /// Makes the file for `path`; returns it and a handle to write to.
    /// Fails at once for a path that cannot be written (a directory, a
    /// missing or read-only directory).
    pub fn create(path: &Path) -> io::Result<(Replacing, File)> {
        Self::create_as(path, Path::new(PROC_FD).is_dir())
    }

    /// [`Replacing::create`], with an unnamed file if `unnamed` (else a
    /// named one).
    fn create_as(path: &Path, unnamed: bool) -> io::Result<(Replacing, File)> {
        let (real, meta) = resolve(path)?;
        let path = real.as_path();
        if meta.as_ref().is_some_and(|m| !m.is_file()) {
            let f = OpenOptions::new().write(true).open(path)?;
            return Ok((Self::at(path, Stage::Direct), f));
        }
        let dir = parent(path);
        let mode = meta
            .as_ref()
            .map_or(0o666, |m| m.permissions().mode() & 0o777);
        let unnamed = if unnamed {
            OpenOptions::new()
                .write(true)
                .mode(mode)
                .custom_flags(libc::O_TMPFILE)
                .open(dir)
        } else {
            Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP))
        };
        let (stage, f) = match unnamed {
            Ok(f) => (Stage::Unnamed(f.try_clone()?), f),
            // Any other error (no such directory, no permission) is the
            // path's own.
            Err(e) if !unnamed_unsupported(&e) => return Err(e),
            Err(_) => {
                // The error without the temporary name it carries (the
                // caller names the path it was asked for).
                let tmp = tempfile::Builder::new()
                    .prefix(&part_prefix(path))
                    .permissions(std::fs::Permissions::from_mode(mode))
                    .tempfile_in(dir)
                    .map_err(|e| io::Error::from(e.kind()))?;
                let (f, p) = tmp.into_parts();
                (Stage::Named(p), f)
            }
        };
        if let Some(m) = &meta {
            // The mode asked for at creation lost the umask's bits.
            keep_owner_and_mode(&f, m);
        }
        Ok((Self::at(path, stage), f))
    }

    fn at(path: &Path, stage: Stage) -> Replacing {
        Replacing {
            path: path.to_path_buf(),
            stage,
        }
    }

    /// Puts the written file at its path, replacing what was there. Call
    /// it once every write through the handle has been flushed.
    pub fn finish(self) -> io::Result<()> {
        match self.stage {
            Stage::Direct => Ok(()),
            Stage::Named(p) => p.persist(&self.path).map_err(|e| e.error),
            Stage::Unnamed(f) => link_over(&f, &self.path),
        }
    }
}

/// The file `path` names (a symbolic link followed; a path that does
/// not exist yet as it is) and what is there now; a directory is
/// refused.
pub fn resolve(path: &Path) -> io::Result<(PathBuf, Option<std::fs::Metadata>)> {
    let real = match std::fs::canonicalize(path) {
        Ok(real) => real,
        Err(e) if e.kind() == io::ErrorKind::NotFound => path.to_path_buf(),
        Err(e) => return Err(e),
    };
    let meta = std::fs::metadata(&real).ok();
    if meta.as_ref().is_some_and(|m| m.is_dir()) {
        return Err(io::Error::new(
            io::ErrorKind::IsADirectory,
            "is a directory",
        ));
    }
    Ok((real, meta))
}

/// Where a process's open files are named (`linkat` of an unnamed file
/// goes through it).
const PROC_FD: &str = "/proc/self/fd";

/// Gives `f`, made to replace a file, that file's owner and permission
/// bits: run as root, a user's file stays the user's (otherwise the
/// owner's part is a no-op or refused, and ignored).
pub fn keep_owner_and_mode(f: &File, old: &std::fs::Metadata) {
    use std::os::unix::fs::MetadataExt;
    let _ = std::os::unix::fs::fchown(f, Some(old.uid()), Some(old.gid()));
    let mode = old.permissions().mode() & 0o777;
    let _ = f.set_permissions(std::fs::Permissions::from_mode(mode));
}

/// Links the unnamed file `f` at a fresh hidden name beside `path`, then
/// renames it over `path` (`linkat` cannot replace a name).
fn link_over(f: &File, path: &Path) -> io::Result<()> {
    let from = CString::new(format!("{PROC_FD}/{}", f.as_raw_fd()))?;
    for n in 0..16u32 {
        let mut name = part_prefix(path);
        name.push(format!("{}-{n}", std::process::id()));
        let tmp = parent(path).join(name);
        let to = CString::new(tmp.as_os_str().as_bytes())?;
        // SAFETY: two valid C strings; no pointers kept.
        let rc = unsafe {
            libc::linkat(
                libc::AT_FDCWD,
                from.as_ptr(),
                libc::AT_FDCWD,
                to.as_ptr(),
                libc::AT_SYMLINK_FOLLOW,
            )
        };
        if rc == 0 {
            return std::fs::rename(&tmp, path).inspect_err(|_| {
                let _ = std::fs::remove_file(&tmp);
            });
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::AlreadyExists {
            return Err(e);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        "no free temporary name beside the file",
    ))
}

/// Whether `open(O_TMPFILE)` failed because the filesystem (or kernel)
/// cannot make unnamed files.
fn unnamed_unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL)
    )
}

/// `path`'s directory (`.` for a bare name).
pub fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// `.NAME.part-`, the prefix of the hidden names beside `path`.
fn part_prefix(path: &Path) -> OsString {
    let mut p = OsString::from(".");
    p.push(path.file_name().unwrap_or_default());
    p.push(".part-");
    p
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::io::Write;

    /// The names in `dir`, sorted.
    pub(crate) fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn the_old_file_stays_until_the_new_one_is_finished() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("trace.csv");
        std::fs::write(&p, "old\n").unwrap();
        let (r, mut w) = Replacing::create(&p).unwrap();
        w.write_all(b"new\n").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "old\n");
        r.finish().unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new\n");
        assert_eq!(names(dir.path()), ["trace.csv"]);
    }

    #[test]
    fn an_unfinished_file_leaves_the_old_one_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t");
        std::fs::write(&p, "old").unwrap();
        let (r, mut w) = Replacing::create(&p).unwrap();
        w.write_all(b"partial").unwrap();
        drop((r, w));
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "old");
        assert_eq!(names(dir.path()), ["t"]);
    }

    #[test]
    fn a_new_path_is_made_and_a_directory_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("new");
        let (r, mut w) = Replacing::create(&p).unwrap();
        w.write_all(b"x").unwrap();
        r.finish().unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "x");
        assert!(Replacing::create(dir.path()).is_err());
        assert!(Replacing::create(&dir.path().join("no/such/dir/f")).is_err());
    }

    /// Replaces `p` through a new file, unnamed or named, with `text`.
    /// A named file that cannot be made is an error without the hidden
    /// temporary name nobody asked for (`--json /sys/x.json` said
    /// `Permission denied (os error 13) at path "/sys/.x.json.part-lnbvI9"`).
    /// Fails without the `map_err` after `tempfile_in`.
    #[test]
    fn an_error_names_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("missing").join("x.json");
        let e = Replacing::create_as(&p, false).err().unwrap().to_string();
        assert!(!e.contains(".part-"), "{e}");
        assert!(e.contains("not found"), "{e}");
    }

    fn replace(p: &Path, unnamed: bool, text: &str) {
        let (r, mut w) = Replacing::create_as(p, unnamed).unwrap();
        w.write_all(text.as_bytes()).unwrap();
        r.finish().unwrap();
    }

    /// Mutation: `create_as` without its `canonicalize` (the link replaced
    /// by a regular file, the file it named left as it was).
    #[test]
    fn a_link_is_kept_and_the_file_it_names_replaced() {
        for unnamed in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let (file, link) = (dir.path().join("real"), dir.path().join("link"));
            std::fs::write(&file, "old").unwrap();
            std::os::unix::fs::symlink("real", &link).unwrap();
            replace(&link, unnamed, "new");
            let kind = std::fs::symlink_metadata(&link).unwrap().file_type();
            assert!(kind.is_symlink(), "unnamed {unnamed}");
            assert_eq!(std::fs::read_to_string(&file).unwrap(), "new");
            assert_eq!(names(dir.path()), ["link", "real"]);
        }
    }

    /// Mutation: the new file made with a fixed mode (0644 and no
    /// `set_permissions`): an old 0600 file came back 0644 (unnamed) or
    /// 0600 only by tempfile's default (named), an old 0664 one 0644.
    #[test]
    fn the_new_file_keeps_the_old_ones_permissions() {
        for unnamed in [true, false] {
            for mode in [0o600, 0o664, 0o640] {
                let dir = tempfile::tempdir().unwrap();
                let p = dir.path().join("t");
                std::fs::write(&p, "old").unwrap();
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
                replace(&p, unnamed, "new");
                let got = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
                assert_eq!(got, mode, "unnamed {unnamed}: {got:o}");
                assert_eq!(std::fs::read_to_string(&p).unwrap(), "new");
            }
        }
    }

    /// Without an unnamed file (no `O_TMPFILE`, no `/proc`) the named one
    /// replaces the old file at the end and is gone if never finished.
    /// Mutation: `finish` drops the named file instead of persisting it.
    #[test]
    fn a_named_file_replaces_the_old_one_or_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t");
        std::fs::write(&p, "old").unwrap();
        let (r, mut w) = Replacing::create_as(&p, false).unwrap();
        w.write_all(b"partial").unwrap();
        assert_eq!(names(dir.path()).len(), 2);
        drop((r, w));
        assert_eq!(names(dir.path()), ["t"]);
        replace(&p, false, "new");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new");
        assert_eq!(names(dir.path()), ["t"]);
    }

    #[test]
    fn a_device_is_written_directly() {
        let (r, mut w) = Replacing::create(Path::new("/dev/null")).unwrap();
        w.write_all(b"x").unwrap();
        r.finish().unwrap();
    }

    /// Run as root, the new file keeps the old one's owner. Mutation:
    /// without the `fchown`: owned by root.
    #[test]
    fn the_new_file_keeps_the_old_ones_owner() {
        use std::os::unix::fs::MetadataExt;
        // SAFETY: plain syscall.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: needs root to give a file another owner");
            return;
        }
        for unnamed in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let p = dir.path().join("t");
            std::fs::write(&p, "old").unwrap();
            std::os::unix::fs::chown(&p, Some(65534), Some(65534)).unwrap();
            let (r, mut w) = Replacing::create_as(&p, unnamed).unwrap();
            w.write_all(b"new").unwrap();
            r.finish().unwrap();
            let m = std::fs::metadata(&p).unwrap();
            assert_eq!((m.uid(), m.gid()), (65534, 65534), "unnamed {unnamed}");
        }
    }
}
