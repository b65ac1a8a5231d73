//! Thin wrappers over the *at() system calls the passthrough uses.

use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;

/// Converts a name to a C string (`EINVAL` on an embedded NUL).
pub fn cstr(s: &OsStr) -> io::Result<CString> {
    CString::new(s.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// `-1` -> the last OS error.
pub fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// `openat`, owning the result.
pub fn openat(dir: RawFd, name: &CStr, flags: i32, mode: u32) -> io::Result<OwnedFd> {
    // SAFETY: valid C string; the descriptor returned is ours.
    let fd = check(unsafe { libc::openat(dir, name.as_ptr(), flags | libc::O_CLOEXEC, mode) })?;
    // SAFETY: fresh descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `/proc/self/fd/N`: a path that reopens an `O_PATH` descriptor.
pub fn proc_path(fd: RawFd) -> CString {
    CString::new(format!("/proc/self/fd/{fd}")).expect("no NUL")
}

/// `fstatat(fd, name, AT_SYMLINK_NOFOLLOW)`; an empty name stats `fd`.
pub fn statat(fd: RawFd, name: &CStr) -> io::Result<libc::stat> {
    // SAFETY: zeroed plain-old-data struct filled by the kernel.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let flags = libc::AT_SYMLINK_NOFOLLOW
        | if name.is_empty() {
            libc::AT_EMPTY_PATH
        } else {
            0
        };
    // SAFETY: valid pointers.
    check(unsafe { libc::fstatat(fd, name.as_ptr(), &mut st, flags) })?;
    Ok(st)
}

/// `fstat` of an open file.
pub fn fstat(fd: &impl AsRawFd) -> io::Result<libc::stat> {
    statat(fd.as_raw_fd(), c"")
}

/// Reads a directory: (name, d_ino, d_type) of every entry but `.` and `..`.
pub fn read_dir(dirfd: RawFd) -> io::Result<Vec<(Vec<u8>, u64, u8)>> {
    let fd = openat(dirfd, c".", libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
    // SAFETY: fdopendir takes ownership of the descriptor on success.
    let dir = unsafe { libc::fdopendir(fd.as_raw_fd()) };
    if dir.is_null() {
        return Err(io::Error::last_os_error());
    }
    std::mem::forget(fd);
    let mut out = Vec::new();
    loop {
        // SAFETY: dir is a valid DIR*; the entry is read before the next call.
        let ent = unsafe { libc::readdir64(dir) };
        if ent.is_null() {
            break;
        }
        // SAFETY: the kernel's entry; d_name is NUL-terminated.
        let (name, ino, ty) = unsafe {
            let e = &*ent;
            (
                CStr::from_ptr(e.d_name.as_ptr()).to_bytes().to_vec(),
                e.d_ino,
                e.d_type,
            )
        };
        if name != b"." && name != b".." {
            out.push((name, ino, ty));
        }
    }
    // SAFETY: closes the DIR and its descriptor.
    unsafe { libc::closedir(dir) };
    Ok(out)
}

/// Sets both times of a (non-symlink) file through its `/proc` path.
pub fn set_times(
    fd: RawFd,
    atime: Option<libc::timespec>,
    mtime: Option<libc::timespec>,
) -> io::Result<()> {
    let omit = libc::timespec {
        tv_sec: 0,
        tv_nsec: libc::UTIME_OMIT,
    };
    let ts = [atime.unwrap_or(omit), mtime.unwrap_or(omit)];
    let p = proc_path(fd);
    // SAFETY: valid path and array of two timespecs.
    check(unsafe { libc::utimensat(libc::AT_FDCWD, p.as_ptr(), ts.as_ptr(), 0) })?;
    Ok(())
}

/// `statvfs` of the filesystem holding `fd`.
pub fn statvfs(fd: RawFd) -> io::Result<libc::statvfs> {
    // SAFETY: zeroed plain-old-data struct filled by the kernel.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer.
    check(unsafe { libc::fstatvfs(fd, &mut s) })?;
    Ok(s)
}

/// A getxattr/listxattr style call with a size: `size == 0` asks for the
/// length, else the value.
pub fn xattr_call(
    size: u32,
    call: impl Fn(*mut libc::c_void, usize) -> libc::ssize_t,
) -> io::Result<Result<Vec<u8>, u32>> {
    if size == 0 {
        let n = call(std::ptr::null_mut(), 0);
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        return Ok(Err(n as u32));
    }
    let mut buf = vec![0u8; size as usize];
    let n = call(buf.as_mut_ptr().cast(), buf.len());
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(n as usize);
    Ok(Ok(buf))
}
