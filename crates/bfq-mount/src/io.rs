//! File data through the engine: `O_DIRECT` backing files with aligned
//! bounce buffers, or plain ones where the filesystem refuses `O_DIRECT`.
//!
//! With `O_DIRECT` the device, not the page cache, is what the flows share.
//! A read is widened to whole aligned blocks and the caller gets its part.
//! An aligned write goes as it is; an unaligned one is a read-modify-write
//! of its first and last blocks under the inode's write lock (aligned
//! writes take it shared), then the file is cut back to its true length if
//! the write extended it.
//!
//! The aligned buffers come from a bounded [`BufPool`] shared by the
//! mount's files, so a read or write does not allocate (and zero) a new
//! buffer per call.

use crate::flows::FlowEntry;
use crate::sys::{self, check, proc_path};
use bfq_engine::{AlignedBuf, FileTarget, IoBuf, IoBufMut};
use std::fs::File;
use std::io;
use std::ops::Deref;
use std::ops::DerefMut;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

/// Alignment of `O_DIRECT` offsets, lengths and buffers: 4 KiB covers the
/// logical block size of every common device.
pub const ALIGN: u64 = 4096;

/// Aligned buffers kept for reuse: at most `max` idle buffers of `size`
/// bytes (a request's whole aligned span up to `size`; a larger one gets
/// a buffer of its own, freed after use).
pub struct BufPool {
    free: Mutex<Vec<AlignedBuf>>,
    size: usize,
    max: usize,
}

/// Buffer size of the mount's pool: a FUSE request's largest data (1 MiB)
/// widened to whole blocks at both ends.
pub const POOL_BUF: usize = (1 << 20) + 2 * ALIGN as usize;
/// Idle buffers the mount's pool keeps at most (the rest are freed): one
/// per default FUSE worker thread, about 16 MiB.
pub const POOL_MAX: usize = 16;

impl BufPool {
    /// A pool of buffers of `size` bytes keeping at most `max` idle ones.
    pub fn new(size: usize, max: usize) -> Arc<BufPool> {
        Arc::new(BufPool {
            free: Mutex::new(Vec::new()),
            size,
            max,
        })
    }

    /// A buffer of `len` bytes (a reused one holds old bytes: callers
    /// overwrite or zero what they use).
    pub fn get(self: &Arc<Self>, len: usize) -> PooledBuf {
        let buf = if len <= self.size {
            self.free
                .lock()
                .unwrap()
                .pop()
                .unwrap_or_else(|| AlignedBuf::with_align(self.size, ALIGN as usize))
        } else {
            AlignedBuf::with_align(len, ALIGN as usize)
        };
        PooledBuf {
            buf: Some(buf),
            len,
            pool: self.clone(),
        }
    }

    /// Idle buffers held.
    pub fn idle(&self) -> usize {
        self.free.lock().unwrap().len()
    }
}

/// A buffer from a [`BufPool`]: `len` bytes at the start of an aligned
/// allocation, given back to the pool when dropped.
pub struct PooledBuf {
    buf: Option<AlignedBuf>,
    len: usize,
    pool: Arc<BufPool>,
}

impl PooledBuf {
    fn inner(&self) -> &AlignedBuf {
        self.buf.as_ref().expect("present until drop")
    }
}

impl Drop for PooledBuf {
    fn drop(&mut self) {
        if let Some(b) = self.buf.take() {
            if b.len() == self.pool.size {
                let mut free = self.pool.free.lock().unwrap();
                if free.len() < self.pool.max {
                    free.push(b);
                }
            }
        }
    }
}

impl Deref for PooledBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.inner()[..self.len]
    }
}

impl DerefMut for PooledBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        let len = self.len;
        &mut self.buf.as_mut().expect("present until drop")[..len]
    }
}

// SAFETY: the bytes are the first `len` of an AlignedBuf's heap
// allocation (len <= its length), which does not move with the value.
unsafe impl IoBuf for PooledBuf {
    fn stable_ptr(&self) -> *const u8 {
        self.inner().stable_ptr()
    }
    fn bytes_len(&self) -> usize {
        self.len
    }
}

// SAFETY: as IoBuf; the buffer is owned exclusively.
unsafe impl IoBufMut for PooledBuf {
    fn stable_mut_ptr(&mut self) -> *mut u8 {
        self.buf
            .as_mut()
            .expect("present until drop")
            .stable_mut_ptr()
    }
}

/// Bytes read, in the pool's buffer they were read into: `len` bytes
/// from `start` (buffer, start, len; `start` is past the head of the
/// first block of an `O_DIRECT` read, 0 through the page cache).
pub struct Data(PooledBuf, usize, usize);

impl Deref for Data {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0[self.1..self.1 + self.2]
    }
}

/// An open backing file.
pub struct DataFile {
    target: FileTarget,
    direct: bool,
    lock: Arc<RwLock<()>>,
    pool: Arc<BufPool>,
}

fn align_down(x: u64) -> u64 {
    x & !(ALIGN - 1)
}

fn align_up(x: u64) -> u64 {
    x.div_ceil(ALIGN) * ALIGN
}

/// Where a file starts in the scheduler's sector space: files are far
/// apart (a seek), positions within one are contiguous.
pub fn sector_base(st: &libc::stat) -> u64 {
    (st.st_ino & 0xff_ffff) << 32
}

fn reopen(opath: RawFd, flags: i32) -> io::Result<File> {
    let p = proc_path(opath);
    // SAFETY: valid path; the descriptor is ours.
    let fd = check(unsafe { libc::open(p.as_ptr(), flags | libc::O_CLOEXEC) })?;
    // SAFETY: fresh descriptor.
    Ok(unsafe { File::from_raw_fd(fd) })
}

impl DataFile {
    /// Opens the file behind `opath` with the caller's `flags`: read-write
    /// when the caller writes (the read-modify-write needs to read),
    /// without `O_APPEND` (the kernel gives us the offsets), with
    /// `O_DIRECT` if `direct` and the filesystem allows it; its aligned
    /// buffers come from `pool`.
    pub fn open(
        opath: RawFd,
        st: &libc::stat,
        flags: i32,
        direct: bool,
        lock: Arc<RwLock<()>>,
        pool: Arc<BufPool>,
    ) -> io::Result<DataFile> {
        let keep = flags & (libc::O_TRUNC | libc::O_SYNC | libc::O_DSYNC | libc::O_NOATIME);
        let acc = flags & libc::O_ACCMODE;
        let regular = st.st_mode & libc::S_IFMT == libc::S_IFREG;
        let mut tries = Vec::with_capacity(4);
        let rw = if acc == libc::O_RDONLY {
            libc::O_RDONLY
        } else {
            libc::O_RDWR
        };
        for mode in [rw, acc] {
            if direct && regular {
                tries.push((mode | keep | libc::O_DIRECT, true));
            }
            tries.push((mode | keep, false));
        }
        let mut last = io::Error::from_raw_os_error(libc::EINVAL);
        for (f, is_direct) in tries {
            match reopen(opath, f) {
                Ok(file) => {
                    return Ok(DataFile {
                        target: FileTarget::new(file, sector_base(st)),
                        direct: is_direct,
                        lock,
                        pool,
                    })
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// Whether the backing file is open with `O_DIRECT`.
    pub fn is_direct(&self) -> bool {
        self.direct
    }

    fn raw(&self) -> RawFd {
        self.target.file().as_raw_fd()
    }

    fn engine_read<B: IoBufMut>(
        &self,
        flow: &FlowEntry,
        off: u64,
        buf: B,
    ) -> (io::Result<usize>, B) {
        let t = Instant::now();
        let (r, b) = flow.flow().read_file_async(&self.target, off, buf).wait();
        if let Ok(n) = r {
            flow.account(false, n as u64, t.elapsed().as_nanos() as u64);
        }
        (r, b)
    }

    fn engine_write<B: IoBuf>(&self, flow: &FlowEntry, off: u64, buf: B) -> io::Result<usize> {
        let t = Instant::now();
        let (r, _) = flow.flow().write_file_async(&self.target, off, buf).wait();
        if let Ok(n) = r {
            flow.account(true, n as u64, t.elapsed().as_nanos() as u64);
        }
        r
    }

    /// Reads up to `size` bytes at `offset` (fewer at the end of the file).
    pub fn read(&self, flow: &FlowEntry, offset: u64, size: usize) -> io::Result<Data> {
        if !self.direct {
            let (r, buf) = self.engine_read(flow, offset, self.pool.get(size));
            let n = r?.min(size);
            return Ok(Data(buf, 0, n));
        }
        let start = align_down(offset);
        let end = align_up(offset + size as u64);
        let _g = self.lock.read().unwrap();
        let (r, buf) = self.engine_read(flow, start, self.pool.get((end - start) as usize));
        let head = (offset - start) as usize;
        let n = r?.saturating_sub(head).min(size);
        Ok(Data(buf, head, n))
    }

    /// Writes `data` at `offset`; returns the bytes written.
    pub fn write(&self, flow: &FlowEntry, offset: u64, data: &[u8]) -> io::Result<usize> {
        if data.is_empty() {
            return Ok(0);
        }
        let copy = || {
            let mut buf = self.pool.get(data.len());
            buf.copy_from_slice(data);
            buf
        };
        if !self.direct {
            return self.engine_write(flow, offset, copy());
        }
        let end = offset + data.len() as u64;
        if offset.is_multiple_of(ALIGN) && end.is_multiple_of(ALIGN) {
            let _g = self.lock.read().unwrap();
            return self.engine_write(flow, offset, copy());
        }
        let _g = self.lock.write().unwrap();
        let size = sys::fstat(self.target.file())?.st_size as u64;
        let (start, stop) = (align_down(offset), align_up(end));
        let mut buf = self.pool.get((stop - start) as usize);
        // A reused buffer holds old bytes: the parts of the blocks beyond
        // the end of the file must be zeros.
        buf.fill(0);
        // The partial first and last blocks keep their other bytes.
        let first = (!offset.is_multiple_of(ALIGN)).then_some(start);
        let last =
            (!end.is_multiple_of(ALIGN) && first != Some(stop - ALIGN)).then_some(stop - ALIGN);
        for at in [first, last].into_iter().flatten() {
            if at >= size {
                continue;
            }
            let (r, blk) = self.engine_read(flow, at, self.pool.get(ALIGN as usize));
            let n = r?;
            let o = (at - start) as usize;
            buf[o..o + n].copy_from_slice(&blk[..n]);
        }
        let h = (offset - start) as usize;
        buf[h..h + data.len()].copy_from_slice(data);
        self.engine_write(flow, start, buf)?;
        if stop > size {
            self.target.file().set_len(end.max(size))?;
        }
        Ok(data.len())
    }

    /// Sets the file's length.
    pub fn truncate(&self, len: u64) -> io::Result<()> {
        let _g = self.lock.write().unwrap();
        self.target.file().set_len(len)
    }

    /// `fsync` / `fdatasync`.
    pub fn sync(&self, datasync: bool) -> io::Result<()> {
        if datasync {
            self.target.file().sync_data()
        } else {
            self.target.file().sync_all()
        }
    }

    /// `fallocate`.
    pub fn allocate(&self, offset: u64, len: u64, mode: i32) -> io::Result<()> {
        let _g = self.lock.write().unwrap();
        // SAFETY: plain syscall.
        check(unsafe {
            libc::fallocate(self.raw(), mode, offset as libc::off_t, len as libc::off_t)
        })
        .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flows::FlowTable;
    use bfq_engine::Engine;
    use std::os::fd::AsRawFd;

    #[test]
    fn the_pool_reuses_buffers_and_keeps_at_most_its_bound() {
        let pool = BufPool::new(8192, 2);
        let a = pool.get(4096);
        assert_eq!((a.len(), a.bytes_len()), (4096, 4096));
        assert_eq!(a.stable_ptr() as usize % ALIGN as usize, 0);
        let pa = a.stable_ptr();
        drop(a);
        assert_eq!(pool.idle(), 1);
        let b = pool.get(8192);
        assert_eq!(b.stable_ptr(), pa, "the idle buffer is reused");
        let c = pool.get(100);
        let d = pool.get(8192);
        drop((b, c, d));
        assert_eq!(pool.idle(), 2, "no more than the bound are kept");
        // A request larger than the pool's buffers gets its own, not kept.
        let big = pool.get(3 * 8192);
        assert_eq!(big.len(), 3 * 8192);
        drop(big);
        assert_eq!(pool.idle(), 2);
    }

    /// An empty file `f` in `dir` opened read-write (with O_DIRECT where
    /// `direct` and the filesystem allows), with its buffer pool.
    fn empty_data_file(
        dir: &std::path::Path,
        direct: bool,
    ) -> (std::path::PathBuf, DataFile, Arc<BufPool>) {
        let path = dir.join("f");
        std::fs::write(&path, b"").unwrap();
        let c = sys::cstr(path.as_os_str()).unwrap();
        let opath = sys::openat(libc::AT_FDCWD, &c, libc::O_PATH, 0).unwrap();
        let st = sys::fstat(&opath).unwrap();
        let pool = BufPool::new(POOL_BUF, 4);
        let f = DataFile::open(
            opath.as_raw_fd(),
            &st,
            libc::O_RDWR,
            direct,
            Arc::new(RwLock::new(())),
            pool.clone(),
        )
        .unwrap();
        (path, f, pool)
    }

    /// A flow of this thread through a NOP engine (short transfers
    /// allowed), with the table that keeps it.
    fn nop_flow() -> (FlowTable, Arc<crate::flows::FlowEntry>) {
        let engine = Arc::new(
            Engine::nop()
                .scheduler("fifo")
                .allow_short(true)
                .open()
                .unwrap(),
        );
        let table = FlowTable::new(engine, crate::Policy::default());
        let flow = table.flow_for(std::process::id(), 0).unwrap();
        (table, flow)
    }

    #[test]
    fn reads_and_writes_through_the_page_cache_take_their_buffers_from_the_pool() {
        let dir = tempfile::tempdir().unwrap();
        let (path, f, pool) = empty_data_file(dir.path(), false);
        assert!(!f.is_direct());
        let (_table, flow) = nop_flow();
        // Leave a buffer full of non-zero bytes in the pool.
        let mut dirty = pool.get(POOL_BUF);
        dirty.fill(0xff);
        let reused = dirty.stable_ptr();
        drop(dirty);
        assert_eq!(f.write(&flow, 5000, b"hello").unwrap(), 5);
        assert_eq!(pool.idle(), 1, "the write's buffer is back");
        let data = f.read(&flow, 4998, 100).unwrap();
        assert_eq!(pool.idle(), 0, "the read's data are in the pool's buffer");
        assert_eq!(data.as_ptr(), reused);
        assert_eq!(&data[..], b"\0\0hello", "only the bytes read");
        drop(data);
        assert_eq!(pool.idle(), 1);
        assert_eq!(std::fs::read(&path).unwrap().len(), 5005);
    }

    #[test]
    fn an_unaligned_write_past_the_end_writes_zeros_with_a_reused_buffer() {
        let dir = tempfile::tempdir().unwrap();
        let (path, f, pool) = empty_data_file(dir.path(), true);
        if !f.is_direct() {
            eprintln!("skipped: the temporary directory's filesystem refuses O_DIRECT");
            return;
        }
        // Leave a buffer full of non-zero bytes in the pool.
        let mut dirty = pool.get(POOL_BUF);
        dirty.fill(0xff);
        drop(dirty);
        let (_table, flow) = nop_flow();
        assert_eq!(f.write(&flow, 5000, b"hello").unwrap(), 5);
        let got = std::fs::read(&path).unwrap();
        assert_eq!(got.len(), 5005);
        assert!(
            got[..5000].iter().all(|&b| b == 0),
            "stale bytes before the data"
        );
        assert_eq!(&got[5000..], b"hello");
        let data = f.read(&flow, 4998, 100).unwrap();
        assert_eq!(&data[..], b"\0\0hello");
    }
}
