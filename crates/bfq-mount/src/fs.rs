//! The passthrough filesystem: FUSE operations on BACKING_DIR, with every
//! read and write of file data submitted through the engine by the flow of
//! the calling process.
//!
//! Inodes are `O_PATH` descriptors of the backing files (so a rename in
//! the backing directory does not lose them); metadata operations are the
//! matching `*at()` calls; data goes through [`crate::io`].

use crate::flows::FlowTable;
use crate::io::DataFile;
use crate::sys::{self, check, cstr, proc_path};
use fuser::{
    AccessFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation,
    INodeNo, InitFlags, KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate,
    ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite,
    ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use std::collections::HashMap;
use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long the kernel may cache names and attributes (the backing
/// directory may change under us).
const TTL: Duration = Duration::from_secs(1);

/// One backing inode the kernel knows.
struct Node {
    /// `O_PATH` descriptor.
    fd: OwnedFd,
    key: (u64, u64),
    nlookup: u64,
    /// Serialises read-modify-write of unaligned `O_DIRECT` writes.
    lock: Arc<RwLock<()>>,
}

#[derive(Default)]
struct Nodes {
    by_ino: HashMap<u64, Node>,
    by_key: HashMap<(u64, u64), u64>,
    next: u64,
}

/// An open directory: its entries, read at opendir.
struct DirHandle {
    entries: Vec<(Vec<u8>, u64, FileType)>,
}

/// Options of the filesystem.
#[derive(Clone, Copy, Debug)]
pub struct FsOptions {
    /// Open backing files with `O_DIRECT` where the filesystem allows it.
    pub backing_direct: bool,
    /// FUSE direct I/O (no page cache in the mount) instead of keep_cache.
    pub direct_io: bool,
}

/// The filesystem served over FUSE.
pub struct PassFs {
    nodes: Mutex<Nodes>,
    files: Mutex<HashMap<u64, Arc<DataFile>>>,
    dirs: Mutex<HashMap<u64, Arc<DirHandle>>>,
    next_fh: AtomicU64,
    table: Arc<FlowTable>,
    opts: FsOptions,
    am_root: bool,
    /// Aligned buffers of every file's reads and writes.
    pool: Arc<crate::io::BufPool>,
}

/// The errno a reply carries for an error: its OS code; else, for the
/// engine's own errors, which carry none, one for its kind (`EAGAIN` for
/// a request refused at the engine's bound, `EINVAL` for a bad one);
/// else `EIO`.
fn errno(e: io::Error) -> Errno {
    Errno::from_i32(e.raw_os_error().unwrap_or(match e.kind() {
        io::ErrorKind::WouldBlock => libc::EAGAIN,
        io::ErrorKind::InvalidInput => libc::EINVAL,
        _ => libc::EIO,
    }))
}

/// Replies to an operation that returns nothing: done, or its error.
fn reply_empty<T>(r: Result<T, Errno>, reply: ReplyEmpty) {
    match r {
        Ok(_) => reply.ok(),
        Err(e) => reply.error(e),
    }
}

/// Replies to an operation that returns bytes: them, or its error.
fn reply_data<B: std::ops::Deref<Target = [u8]>>(r: Result<B, Errno>, reply: ReplyData) {
    match r {
        Ok(b) => reply.data(&b),
        Err(e) => reply.error(e),
    }
}

fn kind_of(mode: u32) -> FileType {
    match mode & libc::S_IFMT {
        libc::S_IFDIR => FileType::Directory,
        libc::S_IFLNK => FileType::Symlink,
        libc::S_IFBLK => FileType::BlockDevice,
        libc::S_IFCHR => FileType::CharDevice,
        libc::S_IFIFO => FileType::NamedPipe,
        libc::S_IFSOCK => FileType::Socket,
        _ => FileType::RegularFile,
    }
}

fn dtype_kind(t: u8) -> FileType {
    match t {
        libc::DT_DIR => FileType::Directory,
        libc::DT_LNK => FileType::Symlink,
        libc::DT_BLK => FileType::BlockDevice,
        libc::DT_CHR => FileType::CharDevice,
        libc::DT_FIFO => FileType::NamedPipe,
        libc::DT_SOCK => FileType::Socket,
        _ => FileType::RegularFile,
    }
}

fn systime(sec: i64, nsec: i64) -> SystemTime {
    if sec >= 0 {
        UNIX_EPOCH + Duration::new(sec as u64, nsec as u32)
    } else {
        UNIX_EPOCH - Duration::from_secs(sec.unsigned_abs())
    }
}

fn attr(ino: u64, st: &libc::stat) -> FileAttr {
    FileAttr {
        ino: INodeNo(ino),
        size: st.st_size as u64,
        blocks: st.st_blocks as u64,
        atime: systime(st.st_atime, st.st_atime_nsec),
        mtime: systime(st.st_mtime, st.st_mtime_nsec),
        ctime: systime(st.st_ctime, st.st_ctime_nsec),
        crtime: systime(st.st_ctime, st.st_ctime_nsec),
        kind: kind_of(st.st_mode),
        perm: (st.st_mode & 0o7777) as u16,
        nlink: st.st_nlink as u32,
        uid: st.st_uid,
        gid: st.st_gid,
        rdev: st.st_rdev as u32,
        blksize: st.st_blksize as u32,
        flags: 0,
    }
}

fn timespec(t: TimeOrNow) -> libc::timespec {
    match t {
        TimeOrNow::Now => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_NOW,
        },
        TimeOrNow::SpecificTime(s) => {
            let d = s.duration_since(UNIX_EPOCH).unwrap_or_default();
            libc::timespec {
                tv_sec: d.as_secs() as libc::time_t,
                tv_nsec: d.subsec_nanos() as libc::c_long,
            }
        }
    }
}

impl PassFs {
    /// A filesystem over `backing` (a directory).
    pub fn new(backing: &Path, table: Arc<FlowTable>, opts: FsOptions) -> io::Result<PassFs> {
        let p = cstr(backing.as_os_str())?;
        let fd = sys::openat(libc::AT_FDCWD, &p, libc::O_PATH | libc::O_DIRECTORY, 0)?;
        let st = sys::fstat(&fd)?;
        let mut nodes = Nodes {
            next: 2,
            ..Nodes::default()
        };
        let key = (st.st_dev, st.st_ino);
        nodes.by_key.insert(key, 1);
        nodes.by_ino.insert(
            1,
            Node {
                fd,
                key,
                nlookup: u64::MAX / 2,
                lock: Arc::default(),
            },
        );
        // SAFETY: plain syscall.
        let am_root = unsafe { libc::geteuid() } == 0;
        Ok(PassFs {
            nodes: Mutex::new(nodes),
            files: Mutex::default(),
            dirs: Mutex::default(),
            next_fh: AtomicU64::new(1),
            table,
            opts,
            am_root,
            pool: crate::io::BufPool::new(crate::io::POOL_BUF, crate::io::POOL_MAX),
        })
    }

    /// Runs `f` with the raw `O_PATH` descriptor of inode `ino`.
    fn with_fd<T>(&self, ino: INodeNo, f: impl FnOnce(RawFd) -> io::Result<T>) -> Result<T, Errno> {
        let nodes = self.nodes.lock().unwrap();
        let node = nodes.by_ino.get(&ino.0).ok_or(Errno::ESTALE)?;
        f(node.fd.as_raw_fd()).map_err(errno)
    }

    /// A duplicate of the node's descriptor (for calls that may block).
    fn node_fd(&self, ino: INodeNo) -> Result<(OwnedFd, Arc<RwLock<()>>), Errno> {
        let nodes = self.nodes.lock().unwrap();
        let node = nodes.by_ino.get(&ino.0).ok_or(Errno::ESTALE)?;
        let fd = node.fd.try_clone().map_err(errno)?;
        Ok((fd, node.lock.clone()))
    }

    /// Looks `name` up in `parent` and counts one more kernel reference.
    fn do_lookup(&self, parent: INodeNo, name: &OsStr) -> Result<FileAttr, Errno> {
        let cname = cstr(name).map_err(errno)?;
        let (pfd, _) = self.node_fd(parent)?;
        let fd = sys::openat(pfd.as_raw_fd(), &cname, libc::O_PATH | libc::O_NOFOLLOW, 0)
            .map_err(errno)?;
        let st = sys::fstat(&fd).map_err(errno)?;
        let key = (st.st_dev, st.st_ino);
        let mut nodes = self.nodes.lock().unwrap();
        let ino = match nodes.by_key.get(&key).copied() {
            Some(ino) => {
                nodes.by_ino.get_mut(&ino).expect("indexed").nlookup += 1;
                ino
            }
            None => {
                let ino = nodes.next;
                nodes.next += 1;
                nodes.by_key.insert(key, ino);
                nodes.by_ino.insert(
                    ino,
                    Node {
                        fd,
                        key,
                        nlookup: 1,
                        lock: Arc::default(),
                    },
                );
                ino
            }
        };
        Ok(attr(ino, &st))
    }

    fn reply_lookup(&self, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match self.do_lookup(parent, name) {
            Ok(a) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    /// Gives a new entry to the caller (when we run as root and they are
    /// not, as the kernel would for a local filesystem).
    fn chown_new(&self, req: &Request, dir: RawFd, name: &CString) {
        if self.am_root && (req.uid() != 0 || req.gid() != 0) {
            // SAFETY: valid C string.
            unsafe {
                libc::fchownat(
                    dir,
                    name.as_ptr(),
                    req.uid(),
                    req.gid(),
                    libc::AT_SYMLINK_NOFOLLOW,
                )
            };
        }
    }

    /// Creates an entry with `make(dirfd, name)`, then looks it up.
    fn make_entry(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        make: impl FnOnce(RawFd, &CString) -> io::Result<()>,
        reply: ReplyEntry,
    ) {
        let r = cstr(name).map_err(errno).and_then(|cname| {
            let (pfd, _) = self.node_fd(parent)?;
            make(pfd.as_raw_fd(), &cname).map_err(errno)?;
            self.chown_new(req, pfd.as_raw_fd(), &cname);
            Ok(())
        });
        match r {
            Ok(()) => self.reply_lookup(parent, name, reply),
            Err(e) => reply.error(e),
        }
    }

    /// Opens inode `ino` for data with the caller's flags.
    fn open_data(&self, ino: INodeNo, flags: i32) -> Result<u64, Errno> {
        let (fd, lock) = self.node_fd(ino)?;
        let st = sys::fstat(&fd).map_err(errno)?;
        let file = DataFile::open(
            fd.as_raw_fd(),
            &st,
            flags,
            self.opts.backing_direct,
            lock,
            self.pool.clone(),
        )
        .map_err(errno)?;
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        self.files.lock().unwrap().insert(fh, Arc::new(file));
        Ok(fh)
    }

    fn open_flags(&self) -> FopenFlags {
        if self.opts.direct_io {
            FopenFlags::FOPEN_DIRECT_IO
        } else {
            FopenFlags::FOPEN_KEEP_CACHE
        }
    }

    fn file(&self, fh: FileHandle) -> Result<Arc<DataFile>, Errno> {
        self.files
            .lock()
            .unwrap()
            .get(&fh.0)
            .cloned()
            .ok_or(Errno::EBADF)
    }

    fn unlink_at(&self, parent: INodeNo, name: &OsStr, flags: i32, reply: ReplyEmpty) {
        let r = cstr(name).map_err(errno).and_then(|c| {
            self.with_fd(parent, |fd| {
                // SAFETY: valid C string.
                check(unsafe { libc::unlinkat(fd, c.as_ptr(), flags) }).map(drop)
            })
        });
        reply_empty(r, reply);
    }

    fn set_attrs(
        &self,
        ino: INodeNo,
        mode: Option<u32>,
        owner: (Option<u32>, Option<u32>),
        size: Option<u64>,
        times: (Option<TimeOrNow>, Option<TimeOrNow>),
        fh: Option<FileHandle>,
    ) -> Result<FileAttr, Errno> {
        let (fd, _) = self.node_fd(ino)?;
        let raw = fd.as_raw_fd();
        let st = sys::fstat(&fd).map_err(errno)?;
        let is_link = st.st_mode & libc::S_IFMT == libc::S_IFLNK;
        if let Some(m) = mode {
            let p = proc_path(raw);
            // SAFETY: valid path.
            check(unsafe { libc::chmod(p.as_ptr(), m & 0o7777) }).map_err(errno)?;
        }
        if owner.0.is_some() || owner.1.is_some() {
            let u = owner.0.unwrap_or(u32::MAX);
            let g = owner.1.unwrap_or(u32::MAX);
            let flags = libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW;
            // SAFETY: empty C string with AT_EMPTY_PATH.
            check(unsafe { libc::fchownat(raw, c"".as_ptr(), u, g, flags) }).map_err(errno)?;
        }
        if let Some(sz) = size {
            match fh.and_then(|h| self.file(h).ok()) {
                Some(f) => f.truncate(sz).map_err(errno)?,
                None => {
                    let p = proc_path(raw);
                    // SAFETY: valid path.
                    check(unsafe { libc::truncate(p.as_ptr(), sz as libc::off_t) })
                        .map_err(errno)?;
                }
            }
        }
        if (times.0.is_some() || times.1.is_some()) && !is_link {
            sys::set_times(raw, times.0.map(timespec), times.1.map(timespec)).map_err(errno)?;
        }
        let st = sys::fstat(&fd).map_err(errno)?;
        Ok(attr(ino.0, &st))
    }

    fn xattr_path(&self, ino: INodeNo) -> Result<CString, Errno> {
        self.with_fd(ino, |fd| {
            let st = sys::statat(fd, c"")?;
            if st.st_mode & libc::S_IFMT == libc::S_IFLNK {
                return Err(io::Error::from_raw_os_error(libc::ENOTSUP));
            }
            Ok(proc_path(fd))
        })
    }

    fn reply_xattr(r: io::Result<Result<Vec<u8>, u32>>, reply: ReplyXattr) {
        match r {
            Ok(Ok(data)) => reply.data(&data),
            Ok(Err(n)) => reply.size(n),
            Err(e) => reply.error(errno(e)),
        }
    }
}

impl Filesystem for PassFs {
    /// With FUSE direct I/O (`--direct`), asks the kernel to let programs
    /// `mmap` the files all the same (`FUSE_DIRECT_IO_ALLOW_MMAP`, Linux
    /// 6.6 and later; the mapped pages go through the kernel's page cache
    /// and reach the mount as its writeback). A kernel without it refuses
    /// such an `mmap` with `ENODEV`.
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> io::Result<()> {
        if self.opts.direct_io {
            let _ = config.add_capabilities(InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP);
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        self.reply_lookup(parent, name, reply)
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        let mut nodes = self.nodes.lock().unwrap();
        let gone = match nodes.by_ino.get_mut(&ino.0) {
            Some(n) if ino != INodeNo::ROOT => {
                n.nlookup = n.nlookup.saturating_sub(nlookup);
                (n.nlookup == 0).then_some(n.key)
            }
            _ => None,
        };
        if let Some(key) = gone {
            nodes.by_ino.remove(&ino.0);
            nodes.by_key.remove(&key);
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.with_fd(ino, |fd| sys::statat(fd, c"")) {
            Ok(st) => reply.attr(&TTL, &attr(ino.0, &st)),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        match self.set_attrs(ino, mode, (uid, gid), size, (atime, mtime), fh) {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let r = self.with_fd(ino, |fd| {
            let mut buf = vec![0u8; libc::PATH_MAX as usize];
            // SAFETY: valid buffer of the given length.
            let n =
                unsafe { libc::readlinkat(fd, c"".as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            buf.truncate(n as usize);
            Ok(buf)
        });
        reply_data(r, reply);
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let make = |dir: RawFd, c: &CString| {
            // SAFETY: valid C string.
            check(unsafe { libc::mknodat(dir, c.as_ptr(), mode & !umask, u64::from(rdev)) })
                .map(drop)
        };
        self.make_entry(req, parent, name, make, reply)
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let make = |dir: RawFd, c: &CString| {
            // SAFETY: valid C string.
            check(unsafe { libc::mkdirat(dir, c.as_ptr(), mode & !umask) }).map(drop)
        };
        self.make_entry(req, parent, name, make, reply)
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.unlink_at(parent, name, 0, reply)
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.unlink_at(parent, name, libc::AT_REMOVEDIR, reply)
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let t = match cstr(target.as_os_str()) {
            Ok(t) => t,
            Err(e) => return reply.error(errno(e)),
        };
        let make = |dir: RawFd, c: &CString| {
            // SAFETY: valid C strings.
            check(unsafe { libc::symlinkat(t.as_ptr(), dir, c.as_ptr()) }).map(drop)
        };
        self.make_entry(req, parent, link_name, make, reply)
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let r = (|| {
            let (a, b) = (cstr(name).map_err(errno)?, cstr(newname).map_err(errno)?);
            let (pa, _) = self.node_fd(parent)?;
            let (pb, _) = self.node_fd(newparent)?;
            // SAFETY: valid descriptors and C strings.
            check(unsafe {
                libc::renameat2(
                    pa.as_raw_fd(),
                    a.as_ptr(),
                    pb.as_raw_fd(),
                    b.as_ptr(),
                    flags.bits(),
                )
            })
            .map_err(errno)
        })();
        reply_empty(r, reply);
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let r = (|| {
            let c = cstr(newname).map_err(errno)?;
            let (fd, _) = self.node_fd(ino)?;
            let (pb, _) = self.node_fd(newparent)?;
            let p = proc_path(fd.as_raw_fd());
            // SAFETY: valid descriptors and C strings.
            check(unsafe {
                libc::linkat(
                    libc::AT_FDCWD,
                    p.as_ptr(),
                    pb.as_raw_fd(),
                    c.as_ptr(),
                    libc::AT_SYMLINK_FOLLOW,
                )
            })
            .map_err(errno)
        })();
        match r {
            Ok(_) => self.reply_lookup(newparent, newname, reply),
            Err(e) => reply.error(e),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        match self.open_data(ino, flags.0) {
            Ok(fh) => reply.opened(FileHandle(fh), self.open_flags()),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let r = self.file(fh).and_then(|f| {
            let flow = self.table.flow_for(req.pid(), req.uid()).map_err(errno)?;
            f.read(&flow, offset, size as usize).map_err(errno)
        });
        reply_data(r, reply);
    }

    fn write(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let r = self.file(fh).and_then(|f| {
            let flow = self.table.flow_for(req.pid(), req.uid()).map_err(errno)?;
            f.write(&flow, offset, data).map_err(errno)
        });
        match r {
            Ok(n) => reply.written(n as u32),
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lo: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok()
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.files.lock().unwrap().remove(&fh.0);
        reply.ok()
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        match self.file(fh).and_then(|f| f.sync(datasync).map_err(errno)) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.with_fd(ino, sys::read_dir) {
            Ok(list) => {
                let entries = list
                    .into_iter()
                    .map(|(n, i, t)| (n, i, dtype_kind(t)))
                    .collect();
                let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
                self.dirs
                    .lock()
                    .unwrap()
                    .insert(fh, Arc::new(DirHandle { entries }));
                reply.opened(FileHandle(fh), FopenFlags::empty())
            }
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let Some(d) = self.dirs.lock().unwrap().get(&fh.0).cloned() else {
            return reply.error(Errno::EBADF);
        };
        for (i, (name, ino, kind)) in d.entries.iter().enumerate().skip(offset as usize) {
            if reply.add(
                INodeNo((*ino).max(2)),
                i as u64 + 1,
                *kind,
                OsStr::from_bytes(name),
            ) {
                break;
            }
        }
        reply.ok()
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.dirs.lock().unwrap().remove(&fh.0);
        reply.ok()
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let r = self.with_fd(ino, |fd| {
            let d = sys::openat(fd, c".", libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
            // SAFETY: valid descriptor.
            check(unsafe { libc::fsync(d.as_raw_fd()) }).map(drop)
        });
        reply_empty(r, reply);
    }

    fn statfs(&self, _req: &Request, ino: INodeNo, reply: ReplyStatfs) {
        match self.with_fd(ino, sys::statvfs) {
            Ok(s) => reply.statfs(
                s.f_blocks,
                s.f_bfree,
                s.f_bavail,
                s.f_files,
                s.f_ffree,
                s.f_bsize as u32,
                s.f_namemax as u32,
                s.f_frsize as u32,
            ),
            Err(e) => reply.error(e),
        }
    }

    fn setxattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        let r = (|| {
            let (p, n) = (self.xattr_path(ino)?, cstr(name).map_err(errno)?);
            // SAFETY: valid C strings and buffer.
            check(unsafe {
                libc::setxattr(
                    p.as_ptr(),
                    n.as_ptr(),
                    value.as_ptr().cast(),
                    value.len(),
                    flags,
                )
            })
            .map_err(errno)
        })();
        reply_empty(r, reply);
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let (p, n) = match (self.xattr_path(ino), cstr(name)) {
            (Ok(p), Ok(n)) => (p, n),
            (Err(e), _) => return reply.error(e),
            (_, Err(e)) => return reply.error(errno(e)),
        };
        // SAFETY: valid C strings; the buffer is the call's.
        let r = sys::xattr_call(size, |b, l| unsafe {
            libc::getxattr(p.as_ptr(), n.as_ptr(), b, l)
        });
        Self::reply_xattr(r, reply)
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let p = match self.xattr_path(ino) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        // SAFETY: valid C string; the buffer is the call's.
        let r = sys::xattr_call(size, |b, l| unsafe {
            libc::listxattr(p.as_ptr(), b.cast(), l)
        });
        Self::reply_xattr(r, reply)
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let r = (|| {
            let (p, n) = (self.xattr_path(ino)?, cstr(name).map_err(errno)?);
            // SAFETY: valid C strings.
            check(unsafe { libc::removexattr(p.as_ptr(), n.as_ptr()) }).map_err(errno)
        })();
        reply_empty(r, reply);
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        // Permissions are checked by the kernel (default_permissions).
        reply.ok()
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let r = (|| {
            let c = cstr(name).map_err(errno)?;
            let (pfd, _) = self.node_fd(parent)?;
            let cflags = libc::O_CREAT | libc::O_WRONLY | (flags & (libc::O_EXCL | libc::O_TRUNC));
            drop(sys::openat(pfd.as_raw_fd(), &c, cflags, mode & !umask).map_err(errno)?);
            self.chown_new(req, pfd.as_raw_fd(), &c);
            let a = self.do_lookup(parent, name)?;
            let fh = self.open_data(
                a.ino,
                flags & !(libc::O_CREAT | libc::O_EXCL | libc::O_TRUNC),
            )?;
            Ok((a, fh))
        })();
        match r {
            Ok((a, fh)) => {
                reply.created(&TTL, &a, Generation(0), FileHandle(fh), self.open_flags())
            }
            Err(e) => reply.error(e),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        match self
            .file(fh)
            .and_then(|f| f.allocate(offset, length, mode).map_err(errno))
        {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_without_an_os_code_is_told_by_its_kind() {
        let e = |k| errno(io::Error::new(k, "engine"));
        assert_eq!(e(io::ErrorKind::WouldBlock), Errno::from_i32(libc::EAGAIN));
        assert_eq!(
            e(io::ErrorKind::InvalidInput),
            Errno::from_i32(libc::EINVAL)
        );
        assert_eq!(e(io::ErrorKind::UnexpectedEof), Errno::from_i32(libc::EIO));
        let os = io::Error::from_raw_os_error(libc::ENOSPC);
        assert_eq!(errno(os), Errno::from_i32(libc::ENOSPC));
    }
}
