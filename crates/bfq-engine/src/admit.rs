//! The bound on the requests the engine holds at once
//! ([`crate::EngineBuilder::max_requests`]), the engine's `nr_requests`.
//!
//! The kernel's block layer bounds the requests a queue holds with
//! `nr_requests`: a submitter takes a tag, and waits for one (or, with
//! `REQ_NOWAIT`, as io_uring asks, gets `EAGAIN`) when none is free.
//! The engine counts the requests it holds, wherever they are: in a
//! thread's plug, queued in the scheduler, on the device, or taken from
//! the core with their result not yet delivered. A request is counted in
//! [`Flow`](crate::Flow)'s submit, before it goes anywhere, and counted
//! off where the core takes its hold on its slot ([`Admission::release`],
//! every path that gives a request its result: completion, the core's own
//! failures, cancellation), before its result is stored: a submitter that
//! has seen the result of one of its requests finds it counted off. One
//! atomic add when a request comes in, one subtract when it goes: no
//! lock, no allocation, nothing that grows with the requests held.
//!
//! A request beyond the bound fails at once (`WouldBlock`) instead of
//! making the submitter wait: `read_async` must never block an async
//! runtime's thread, and a caller that wants back-pressure awaits its
//! earlier requests first. So what the engine holds (its request table,
//! the scheduler's, the per-flow queues, the slots of the requests it
//! holds) stays within the bound whatever its callers do.

use std::io;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// The default of [`crate::EngineBuilder::max_requests`] (65 536).
pub const DEFAULT_MAX_REQUESTS: u32 = 1 << 16;
/// The largest [`crate::EngineBuilder::max_requests`] (2^22).
pub const MAX_REQUESTS_LIMIT: u32 = 1 << 22;

/// The count of requests held and its bound (see the module doc). On a
/// cache line of its own: every submitting thread and every completion
/// updates it, and nothing else near it should move with it.
#[repr(align(64))]
pub(crate) struct Admission {
    /// Requests counted in and not yet counted off (for a moment, plus
    /// the requests being refused: see [`Admission::admit`]).
    held: AtomicUsize,
    max: usize,
    /// Requests refused because `max` were held.
    refused: AtomicU64,
    /// Requests refused at submission as invalid (longer than 4 GiB - 1,
    /// or not ending below 2^64 bytes): never counted in.
    invalid: AtomicU64,
}

impl Admission {
    pub(crate) fn new(max: u32) -> Self {
        Admission {
            held: AtomicUsize::new(0),
            max: max as usize,
            refused: AtomicU64::new(0),
            invalid: AtomicU64::new(0),
        }
    }

    /// Counts a request in; false (and counts it refused) if the engine
    /// holds its most already.
    ///
    /// One `fetch_add`, undone if it went past the bound: a compare and
    /// swap loop would retry under contention. While a refused request's
    /// add is not yet undone, a request of another thread racing it at
    /// the bound may be refused too (never one below the bound otherwise),
    /// and the count is never above the bound for longer than that.
    #[inline]
    pub(crate) fn admit(&self) -> bool {
        // Relaxed: the count orders nothing else. A submitter that saw a
        // request's result (an acquire of its slot's state, stored after
        // the count-off) sees the count-off too (coherence).
        if self.held.fetch_add(1, Ordering::Relaxed) < self.max {
            return true;
        }
        self.refuse();
        false
    }

    #[cold]
    fn refuse(&self) {
        self.held.fetch_sub(1, Ordering::Relaxed);
        self.refused.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a request off (once per request counted in: where the core
    /// takes its hold on its slot).
    #[inline]
    pub(crate) fn release(&self) {
        let before = self.held.fetch_sub(1, Ordering::Relaxed);
        debug_assert!(before > 0, "a request counted off twice");
    }

    /// The error of a request refused at the bound.
    #[cold]
    pub(crate) fn full_error(&self) -> io::Error {
        io::Error::new(
            io::ErrorKind::WouldBlock,
            format!(
                "the engine holds its most requests at once ({}, EngineBuilder::max_requests): \
                 wait for earlier requests before submitting more",
                self.max
            ),
        )
    }

    /// Requests held now.
    pub(crate) fn held(&self) -> u64 {
        self.held.load(Ordering::Relaxed) as u64
    }

    /// Requests refused so far.
    pub(crate) fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Counts a request refused at submission as invalid (it is never
    /// counted in).
    #[cold]
    pub(crate) fn refuse_invalid(&self) {
        self.invalid.fetch_add(1, Ordering::Relaxed);
    }

    /// Requests refused at submission as invalid so far.
    pub(crate) fn invalid(&self) -> u64 {
        self.invalid.load(Ordering::Relaxed)
    }
}
