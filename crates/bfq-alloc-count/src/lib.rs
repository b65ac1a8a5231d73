//! Counting heap allocators: what bfq-rs's checks that a hot path
//! allocates nothing per request (`bfq bench-core`, the `no_alloc` tests)
//! and that memory stays flat while flows come and go (the `churn` tests)
//! count with. Each forwards every call to the system allocator unchanged
//! and counts it, either for the whole process ([`Counting`]) or for the
//! calling thread ([`PerThread`], for tests that run beside others in one
//! binary). Install one with `#[global_allocator]`:
//!
//! ```
//! use bfq_alloc_count::Counting;
//!
//! #[global_allocator]
//! static A: Counting = Counting;
//!
//! fn main() {
//!     let before = Counting::allocations();
//!     let v = vec![1u8; 64];
//!     assert!(Counting::allocations() > before && v.len() == 64);
//! }
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// Counts every allocation (`alloc`, `alloc_zeroed`, `realloc`) and the
/// bytes held, for the whole process: two relaxed atomic additions per
/// call.
pub struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static LIVE: AtomicI64 = AtomicI64::new(0);

impl Counting {
    /// Allocations the process made so far.
    pub fn allocations() -> u64 {
        ALLOCATIONS.load(Ordering::Relaxed)
    }

    /// Bytes allocated and not freed (since the allocator was installed).
    pub fn live_bytes() -> i64 {
        LIVE.load(Ordering::Relaxed)
    }

    fn note(allocated: bool, bytes: i64) {
        if allocated {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        LIVE.fetch_add(bytes, Ordering::Relaxed);
    }
}

/// Counts the same as [`Counting`], for the calling thread only.
pub struct PerThread;

thread_local! {
    static THREAD_ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    static THREAD_LIVE: Cell<i64> = const { Cell::new(0) };
}

impl PerThread {
    /// Allocations the calling thread made so far.
    pub fn allocations() -> u64 {
        THREAD_ALLOCATIONS.with(Cell::get)
    }

    /// Bytes the calling thread allocated less those it freed.
    pub fn live_bytes() -> i64 {
        THREAD_LIVE.with(Cell::get)
    }

    fn note(allocated: bool, bytes: i64) {
        // `try_with`: a thread's locals may be gone while it exits.
        if allocated {
            let _ = THREAD_ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        }
        let _ = THREAD_LIVE.try_with(|c| c.set(c.get() + bytes));
    }
}

/// The allocator calls, forwarded to [`System`] and noted by the type's `note`.
macro_rules! forwarding {
    ($t:ty) => {
        // SAFETY: every call is passed to the system allocator unchanged;
        // noting it allocates nothing.
        unsafe impl GlobalAlloc for $t {
            unsafe fn alloc(&self, l: Layout) -> *mut u8 {
                <$t>::note(true, l.size() as i64);
                // SAFETY: as the caller's.
                unsafe { System.alloc(l) }
            }
            unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
                <$t>::note(true, l.size() as i64);
                // SAFETY: as the caller's.
                unsafe { System.alloc_zeroed(l) }
            }
            unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
                <$t>::note(false, -(l.size() as i64));
                // SAFETY: as the caller's.
                unsafe { System.dealloc(p, l) }
            }
            unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
                <$t>::note(true, new as i64 - l.size() as i64);
                // SAFETY: as the caller's.
                unsafe { System.realloc(p, l, new) }
            }
        }
    };
}

forwarding!(Counting);
forwarding!(PerThread);
