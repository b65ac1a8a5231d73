//! File data through the engine: `O_DIRECT` backing files with aligned
//! bounce buffers, or plain ones where the filesystem refuses `O_DIRECT`.
//!
//! With `O_DIRECT` the device, not the page cache, is what the flows share.
//! A read is widened to whole aligned blocks and the caller gets its part.
//! An aligned write goes as it is; an unaligned one is a read-modify-write
//! of its first and last blocks under the inode's write lock (aligned
//! writes take it shared), then the file is cut back to its true length if
//! the write extended it.

use crate::flows::FlowEntry;
use crate::sys::{self, check, proc_path};
use bfq_engine::{AlignedBuf, FileTarget, IoBuf, IoBufMut};
use std::fs::File;
use std::io;
use std::ops::Deref;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::sync::{Arc, RwLock};
use std::time::Instant;

/// Alignment of `O_DIRECT` offsets, lengths and buffers: 4 KiB covers the
/// logical block size of every common device.
pub const ALIGN: u64 = 4096;

/// Bytes read, in the buffer they were read into.
pub enum Data {
    /// Read with `O_DIRECT`: the data are `len` bytes from `start` of the aligned buffer (buffer, start, len).
    Aligned(AlignedBuf, usize, usize),
    /// Read through the page cache.
    Plain(Vec<u8>),
}

impl Deref for Data {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Data::Aligned(b, start, len) => &b[*start..*start + *len],
            Data::Plain(v) => v,
        }
    }
}

/// An open backing file.
pub struct DataFile {
    target: FileTarget,
    direct: bool,
    lock: Arc<RwLock<()>>,
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
    /// `O_DIRECT` if `direct` and the filesystem allows it.
    pub fn open(
        opath: RawFd,
        st: &libc::stat,
        flags: i32,
        direct: bool,
        lock: Arc<RwLock<()>>,
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
            let (r, mut v) = self.engine_read(flow, offset, vec![0u8; size]);
            v.truncate(r?);
            return Ok(Data::Plain(v));
        }
        let start = align_down(offset);
        let end = align_up(offset + size as u64);
        let _g = self.lock.read().unwrap();
        let (r, buf) = self.engine_read(flow, start, AlignedBuf::new((end - start) as usize));
        let head = (offset - start) as usize;
        let n = r?.saturating_sub(head).min(size);
        Ok(Data::Aligned(buf, head, n))
    }

    /// Writes `data` at `offset`; returns the bytes written.
    pub fn write(&self, flow: &FlowEntry, offset: u64, data: &[u8]) -> io::Result<usize> {
        if data.is_empty() {
            return Ok(0);
        }
        if !self.direct {
            return self.engine_write(flow, offset, data.to_vec());
        }
        let end = offset + data.len() as u64;
        if offset.is_multiple_of(ALIGN) && end.is_multiple_of(ALIGN) {
            let _g = self.lock.read().unwrap();
            return self.engine_write(flow, offset, AlignedBuf::from_slice(data));
        }
        let _g = self.lock.write().unwrap();
        let size = sys::fstat(self.target.file())?.st_size as u64;
        let (start, stop) = (align_down(offset), align_up(end));
        let mut buf = AlignedBuf::new((stop - start) as usize);
        // The partial first and last blocks keep their other bytes.
        let mut edges = Vec::with_capacity(2);
        if !offset.is_multiple_of(ALIGN) {
            edges.push(start);
        }
        if !end.is_multiple_of(ALIGN) && !edges.contains(&(stop - ALIGN)) {
            edges.push(stop - ALIGN);
        }
        for at in edges {
            if at >= size {
                continue;
            }
            let (r, blk) = self.engine_read(flow, at, AlignedBuf::new(ALIGN as usize));
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
