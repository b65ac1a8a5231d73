//! What the engine checks a request for its own target against before
//! submitting it: the two refusals the kernel would give only as a bare
//! OS error (`EINVAL` for an `O_DIRECT` request not in whole direct-I/O
//! blocks, `EBADF` for a write to a target open read-only), told instead
//! as `InvalidInput` naming the block size or the builder option. Both
//! facts are read once, when the engine opens; the check per request is
//! one comparison of values at hand, no system call, no allocation.

use crate::core::OpKind;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileTypeExt;

/// A target's direct-I/O alignment as the kernel reports it: `None`
/// where it does not (e.g. tmpfs, which takes any alignment).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct DioAlign {
    /// The unit of offsets and lengths: a block device's logical block
    /// size (`BLKSSZGET`), a regular file's `stx_dio_offset_align`, or its
    /// `stx_dio_read_offset_align` where that is smaller (see
    /// [`offset_unit`]).
    pub offset: Option<u32>,
    /// What the kernel reports as enough for buffer addresses
    /// (`stx_dio_mem_align`). Enough, not needed: a kernel may take less
    /// (ext4 on a virtio disk reporting 512 served 8-byte aligned
    /// buffers), so it only explains an `EINVAL` after the fact.
    pub mem: Option<u32>,
}

const BLKSSZGET: libc::c_ulong = 0x1268;

/// The direct-I/O alignment of `f` (see [`DioAlign`]).
pub(crate) fn dio_align(f: &File) -> io::Result<DioAlign> {
    let m = f.metadata()?;
    // SAFETY: statx of the descriptor itself (empty path) into a zeroed
    // struct; the result checked.
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    let r = unsafe {
        libc::statx(
            f.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            libc::STATX_DIOALIGN | libc::STATX_DIO_READ_ALIGN,
            &mut st,
        )
    };
    let reported = r == 0 && st.stx_mask & libc::STATX_DIOALIGN != 0;
    let known = |v: u32| (reported && v > 0).then_some(v);
    let read_reported = r == 0 && st.stx_mask & libc::STATX_DIO_READ_ALIGN != 0;
    let read =
        (read_reported && st.stx_dio_read_offset_align > 0).then_some(st.stx_dio_read_offset_align);
    let mem = known(st.stx_dio_mem_align);
    if m.file_type().is_block_device() {
        let mut bs: libc::c_int = 0;
        // SAFETY: an ioctl writing into a properly sized local.
        let r = unsafe { libc::ioctl(f.as_raw_fd(), BLKSSZGET, &mut bs) };
        let offset = (r == 0 && bs > 0).then_some(bs as u32);
        return Ok(DioAlign { offset, mem });
    }
    Ok(DioAlign {
        offset: offset_unit(known(st.stx_dio_offset_align), read),
        mem,
    })
}

/// The unit the engine holds a regular file's direct-I/O offsets and
/// lengths to: the smaller of the alignment the kernel reports for
/// direct I/O (`offset`) and the one it reports for direct reads
/// (`read`, `STATX_DIO_READ_ALIGN`, Linux 6.14). XFS reports its block
/// as `offset` for a file with shared (reflinked) blocks, whose writes
/// may need it, and 512 for its reads; the engine refuses only what no
/// request may do, and leaves a write between the two to the kernel.
fn offset_unit(offset: Option<u32>, read: Option<u32>) -> Option<u32> {
    match (offset, read) {
        (Some(o), Some(r)) => Some(o.min(r)),
        (o, r) => o.or(r),
    }
}

/// The checks a flow makes on each request for the engine's target
/// (a request naming its own file, or a NOP, is not checked).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TargetRules {
    /// The direct-I/O block - 1 where the target is open with `O_DIRECT`
    /// and the kernel reports the block; 0 otherwise (nothing checked).
    block_mask: u64,
    /// The target is open for writing (or there is none: a NOP engine).
    writable: bool,
    /// The target is open with `O_DIRECT`.
    direct: bool,
}

impl TargetRules {
    /// No checks: an engine without storage ([`crate::Engine::nop`]).
    pub(crate) const NONE: TargetRules = TargetRules {
        block_mask: 0,
        writable: true,
        direct: false,
    };

    /// The rules of the open target `f`: its access mode and `O_DIRECT`
    /// as the descriptor has them (`F_GETFL`: the caller's flags for a
    /// file given open), and its direct-I/O block.
    pub(crate) fn of(f: &File, align: DioAlign) -> TargetRules {
        // SAFETY: plain fcntl on a descriptor we hold; checked.
        let flags = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_GETFL) };
        if flags < 0 {
            return TargetRules::NONE;
        }
        let direct = flags & libc::O_DIRECT != 0;
        TargetRules {
            block_mask: match (direct, align.offset) {
                (true, Some(b)) if b.is_power_of_two() => u64::from(b) - 1,
                _ => 0,
            },
            writable: flags & libc::O_ACCMODE != libc::O_RDONLY,
            direct,
        }
    }

    /// Whether the target is open with `O_DIRECT`.
    pub(crate) fn direct(&self) -> bool {
        self.direct
    }

    /// Whether a request of `len` bytes at `offset` is refused: a write
    /// to a read-only target, or a read or write not in whole direct-I/O
    /// blocks. A power-of-two block, so one mask.
    #[inline]
    pub(crate) fn refuses(&self, kind: OpKind, offset: u64, len: u32) -> bool {
        match kind {
            OpKind::Nop => false,
            OpKind::Write if !self.writable => true,
            _ => (offset | u64::from(len)) & self.block_mask != 0,
        }
    }

    /// Why [`refuses`](Self::refuses) refused it.
    #[cold]
    pub(crate) fn refusal(&self, kind: OpKind, offset: u64, len: u32) -> io::Error {
        if kind == OpKind::Write && !self.writable {
            return io::Error::new(
                io::ErrorKind::InvalidInput,
                "a write to an engine whose target is open read-only: open it with \
                 EngineBuilder::writable(true) (with Engine::builder_for_file, give a file \
                 opened for writing)",
            );
        }
        let block = self.block_mask + 1;
        let what = match (
            offset & self.block_mask != 0,
            u64::from(len) & self.block_mask != 0,
        ) {
            (true, true) => format!("offset {offset} and length {len} are not"),
            (true, false) => format!("offset {offset} is not"),
            _ => format!("length {len} is not"),
        };
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "an O_DIRECT request's offset and length must be multiples of the target's \
                 direct-I/O block, {block} bytes (Engine::block_size): {what}"
            ),
        )
    }
}

/// The kernel's `EINVAL` for a request on an `O_DIRECT` target whose
/// buffer address is not a multiple of the alignment the kernel reports
/// for buffers (`mem_align`, 0 if none): told as such, still
/// `InvalidInput`. `None` for any other error, which stays the OS's.
#[cold]
pub(crate) fn misaligned_buffer(errno: i32, ptr: *const u8, mem_align: u32) -> Option<io::Error> {
    let misaligned = mem_align > 1 && !(ptr as usize).is_multiple_of(mem_align as usize);
    (errno == libc::EINVAL && misaligned).then(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "the kernel refused an O_DIRECT request (EINVAL): its buffer address {ptr:p} \
                 is not a multiple of {mem_align} bytes, the target's direct-I/O buffer \
                 alignment (AlignedBuf's buffers are 4096-aligned)"
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{block_on, AlignedBuf, Engine, FlowOptions, ShutdownMode};

    /// A reflinked XFS file reports its 4096-byte block for direct I/O
    /// and 512 for direct reads: requests in 512-byte units are not
    /// refused (the kernel serves reads, and writes it takes).
    #[test]
    fn the_smaller_of_the_reported_alignments_is_the_unit() {
        assert_eq!(offset_unit(Some(4096), Some(512)), Some(512));
        assert_eq!(offset_unit(Some(512), Some(4096)), Some(512));
        assert_eq!(offset_unit(Some(4096), None), Some(4096));
        assert_eq!(offset_unit(None, Some(512)), Some(512));
        assert_eq!(offset_unit(None, None), None);
    }

    fn rules(block: u64, writable: bool) -> TargetRules {
        TargetRules {
            block_mask: block.saturating_sub(1),
            writable,
            direct: block > 0,
        }
    }

    #[test]
    fn misaligned_requests_and_read_only_writes_are_refused_with_reasons() {
        let r = rules(4096, true);
        assert!(!r.refuses(OpKind::Read, 8192, 4096));
        assert!(!r.refuses(OpKind::Write, 0, 0));
        for (off, len, says) in [
            (100, 4096, "offset 100 is not"),
            (0, 1000, "length 1000 is not"),
            (512, 512, "offset 512 and length 512 are not"),
        ] {
            assert!(r.refuses(OpKind::Read, off, len));
            let e = r.refusal(OpKind::Read, off, len);
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
            let s = e.to_string();
            assert!(s.contains("4096 bytes") && s.contains(says), "{s}");
        }
        // A NOP is never checked; an unknown block checks nothing.
        assert!(!r.refuses(OpKind::Nop, 100, 7));
        assert!(!rules(0, true).refuses(OpKind::Write, 100, 7));
        let ro = rules(0, false);
        assert!(!ro.refuses(OpKind::Read, 100, 7));
        assert!(ro.refuses(OpKind::Write, 0, 4096));
        let s = ro.refusal(OpKind::Write, 0, 4096).to_string();
        assert!(s.contains("EngineBuilder::writable(true)"), "{s}");
        assert!(!TargetRules::NONE.refuses(OpKind::Write, 1, 1));
    }

    #[test]
    fn a_kernel_einval_for_a_misaligned_buffer_names_the_alignment() {
        let p = 0x1008 as *const u8;
        let e = misaligned_buffer(libc::EINVAL, p, 512).unwrap();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("512 bytes"), "{e}");
        // Aligned, unknown alignment, or another error: the OS's error.
        assert!(misaligned_buffer(libc::EINVAL, 0x1200 as *const u8, 512).is_none());
        assert!(misaligned_buffer(libc::EINVAL, p, 0).is_none());
        assert!(misaligned_buffer(libc::EIO, p, 512).is_none());
    }

    #[test]
    fn misaligned_direct_requests_are_refused_naming_the_block() {
        let f = tempfile::NamedTempFile::new_in(std::env::temp_dir()).unwrap();
        f.as_file().set_len(64 << 10).unwrap();
        if dio_align(f.as_file()).unwrap().offset.is_none() {
            eprintln!("skipped: the filesystem reports no direct-I/O alignment");
            return;
        }
        let Ok(engine) = Engine::builder(f.path()).writable(true).open() else {
            eprintln!("skipped: no O_DIRECT here");
            return;
        };
        let bs = engine.block_size() as u64;
        let flow = engine.flow(FlowOptions::default()).unwrap();
        let block = format!("direct-I/O block, {bs} bytes");
        let (r, _) = flow.read(100, AlignedBuf::new(bs as usize));
        let e = r.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
        let s = e.to_string();
        assert!(s.contains(&block) && s.contains("offset 100 is not"), "{s}");
        let (r, buf) = block_on(flow.write_async(0, AlignedBuf::new(bs as usize - 12)));
        let s = r.unwrap_err().to_string();
        assert!(s.contains(&block) && s.contains("is not"), "{s}");
        assert_eq!(buf.len(), bs as usize - 12, "buffer returned");
        // Whole blocks are served, with the same buffer type.
        let (r, _) = flow.write(bs, AlignedBuf::new(bs as usize));
        assert_eq!(r.unwrap(), bs as usize);
        drop((buf, flow));
        let stats = engine.shutdown(ShutdownMode::Drain).unwrap();
        assert_eq!((stats.refused_invalid, stats.completed), (2, 1));
    }
}
