//! Buffers the engine can read into and write from.
//!
//! The engine takes ownership of a buffer for the duration of a request
//! (the kernel writes into it asynchronously) and hands it back with the
//! result, whatever happens: completion, error, cancellation or shutdown.
//! A buffer therefore has to keep its memory at a stable address when the
//! value itself is moved: heap buffers (`Vec<u8>`, `Box<[u8]>`,
//! [`AlignedBuf`]) do.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ptr::NonNull;

/// A buffer the engine can write to a file from.
///
/// # Safety
/// `stable_ptr()` must point to `bytes_len()` initialised bytes that stay
/// valid and at the same address while the value is moved (not dropped).
pub unsafe trait IoBuf: Send + 'static {
    /// Start of the bytes.
    fn stable_ptr(&self) -> *const u8;
    /// Number of bytes to write.
    fn bytes_len(&self) -> usize;
}

/// A buffer the engine can read from a file into.
///
/// # Safety
/// As [`IoBuf`], and `stable_mut_ptr()` must be writable for
/// `bytes_len()` bytes.
pub unsafe trait IoBufMut: IoBuf {
    /// Start of the writable bytes.
    fn stable_mut_ptr(&mut self) -> *mut u8;
}

unsafe impl IoBuf for Vec<u8> {
    fn stable_ptr(&self) -> *const u8 {
        self.as_ptr()
    }
    fn bytes_len(&self) -> usize {
        self.len()
    }
}
unsafe impl IoBufMut for Vec<u8> {
    fn stable_mut_ptr(&mut self) -> *mut u8 {
        self.as_mut_ptr()
    }
}
unsafe impl IoBuf for Box<[u8]> {
    fn stable_ptr(&self) -> *const u8 {
        self.as_ptr()
    }
    fn bytes_len(&self) -> usize {
        self.len()
    }
}
unsafe impl IoBufMut for Box<[u8]> {
    fn stable_mut_ptr(&mut self) -> *mut u8 {
        self.as_mut_ptr()
    }
}
unsafe impl IoBuf for &'static [u8] {
    fn stable_ptr(&self) -> *const u8 {
        self.as_ptr()
    }
    fn bytes_len(&self) -> usize {
        self.len()
    }
}

/// A zero-filled heap buffer whose start is aligned (4096 bytes by
/// default), as `O_DIRECT` needs: the address, the length and the file
/// offset of a direct request must be multiples of the device's logical
/// block size.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
    align: usize,
}

// SAFETY: AlignedBuf owns its allocation exclusively, like Vec<u8>.
unsafe impl Send for AlignedBuf {}
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// Default alignment: one page.
    pub const DEFAULT_ALIGN: usize = 4096;

    /// A zeroed buffer of `len` bytes aligned to 4096.
    pub fn new(len: usize) -> Self {
        Self::with_align(len, Self::DEFAULT_ALIGN)
    }

    /// A zeroed buffer of `len` bytes aligned to `align` (a power of two).
    ///
    /// # Panics
    /// If `align` is not a power of two or the allocation fails.
    pub fn with_align(len: usize, align: usize) -> Self {
        let layout = Layout::from_size_align(len.max(1), align).expect("bad alignment");
        // SAFETY: layout has non-zero size.
        let p = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(p).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        AlignedBuf { ptr, len, align }
    }

    /// A buffer holding a copy of `data`.
    pub fn from_slice(data: &[u8]) -> Self {
        let mut b = Self::new(data.len());
        b.copy_from_slice(data);
        b
    }

    /// The alignment of the start.
    pub fn align(&self) -> usize {
        self.align
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        let layout = Layout::from_size_align(self.len.max(1), self.align).expect("checked");
        // SAFETY: allocated in with_align with this layout.
        unsafe { dealloc(self.ptr.as_ptr(), layout) }
    }
}

impl std::ops::Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr is valid for len initialised (zeroed) bytes.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl std::ops::DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as Deref, and we own the bytes exclusively.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlignedBuf")
            .field("len", &self.len)
            .field("align", &self.align)
            .finish()
    }
}

unsafe impl IoBuf for AlignedBuf {
    fn stable_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }
    fn bytes_len(&self) -> usize {
        self.len
    }
}
unsafe impl IoBufMut for AlignedBuf {
    fn stable_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned() {
        let mut b = AlignedBuf::with_align(8192, 4096);
        assert_eq!(b.as_ptr() as usize % 4096, 0);
        assert!(b.iter().all(|&x| x == 0));
        b[10] = 7;
        assert_eq!(b[10], 7);
        let c = AlignedBuf::from_slice(b"abc");
        assert_eq!(&c[..], b"abc");
        let z = AlignedBuf::new(0);
        assert_eq!(z.len(), 0);
    }
}
