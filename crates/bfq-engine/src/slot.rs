//! Completion slots, preallocated: where a request's buffer, its result
//! and its waiter live from submission until both the submitter (its
//! [`Pending`](crate::Pending)) and the engine (the request) are done
//! with it.
//!
//! Each submitting thread has a pool of slots ([`SlotPool`]), allocated
//! in chunks (the first of [`FIRST_CHUNK`] slots, each next one twice the
//! size, up to [`MAX_CHUNK`]) when the thread has more requests
//! outstanding than ever before, and reused afterwards: no allocation per
//! request. A request takes a free slot of its submitting thread's pool;
//! the slot goes back to that pool when its last holder lets go, on
//! whichever thread that is (a lock-free list the owner takes whole when
//! its own free list is empty). The pool's memory stays until the thread
//! has exited and its last slot is back, so a buffer stays in its slot
//! until the kernel is done with it whatever the submitter does (drop the
//! `Pending`, exit the thread).
//!
//! A buffer of up to [`INLINE_WORDS`] words (`Vec<u8>`, `Box<[u8]>`,
//! `AlignedBuf`, `&'static [u8]`, `()`) is stored in the slot itself;
//! larger buffer types are boxed (one allocation each).

use crate::completion::Waiter;
use std::cell::{RefCell, UnsafeCell};
use std::io;
use std::marker::PhantomData;
use std::mem::{align_of, size_of, MaybeUninit};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicIsize, AtomicPtr, AtomicU8, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Slots in a thread's first chunk (64: a thread keeping up to 64
/// requests outstanding never allocates another).
pub(crate) const FIRST_CHUNK: usize = 64;
/// The largest chunk (65 536 slots); chunks double up to it.
pub(crate) const MAX_CHUNK: usize = 1 << 16;
/// Machine words of buffer stored in the slot itself (4: 32 bytes on
/// 64-bit targets).
pub(crate) const INLINE_WORDS: usize = 4;

/// A buffer of any type, stored in place when it fits (else boxed), with
/// the function that drops it.
struct ErasedBuf {
    words: [MaybeUninit<usize>; INLINE_WORDS],
    drop: Option<unsafe fn(*mut MaybeUninit<usize>)>,
}

// SAFETY: only `Send` buffers are stored (`put` requires it).
unsafe impl Send for ErasedBuf {}

/// Whether a `B` is stored in place.
const fn fits<B>() -> bool {
    size_of::<B>() <= size_of::<[usize; INLINE_WORDS]>() && align_of::<B>() <= align_of::<usize>()
}

/// Drops a `B` stored in place.
unsafe fn drop_inline<B>(p: *mut MaybeUninit<usize>) {
    // SAFETY (caller): `p` holds a live `B`, dropped once.
    unsafe { ptr::drop_in_place(p.cast::<B>()) }
}

/// Drops a boxed `B` whose pointer is stored in place.
unsafe fn drop_boxed<B>(p: *mut MaybeUninit<usize>) {
    // SAFETY (caller): `p` holds a pointer from `Box::into_raw`, dropped once.
    unsafe { drop(Box::from_raw(ptr::read(p.cast::<*mut B>()))) }
}

impl ErasedBuf {
    const EMPTY: ErasedBuf = ErasedBuf {
        words: [MaybeUninit::uninit(); INLINE_WORDS],
        drop: None,
    };

    fn put<B: Send + 'static>(&mut self, b: B) {
        self.clear();
        let p = self.words.as_mut_ptr();
        if fits::<B>() {
            // SAFETY: `B` fits the words (size and alignment checked).
            unsafe { ptr::write(p.cast::<B>(), b) };
            self.drop = Some(drop_inline::<B>);
        } else {
            // SAFETY: a pointer fits the words.
            unsafe { ptr::write(p.cast::<*mut B>(), Box::into_raw(Box::new(b))) };
            self.drop = Some(drop_boxed::<B>);
        }
    }

    /// Takes the buffer out.
    ///
    /// # Safety
    /// The buffer stored is a `B`.
    unsafe fn take<B>(&mut self) -> Option<B> {
        self.drop.take()?;
        let p = self.words.as_mut_ptr();
        // SAFETY (caller): a `B` was stored the way `fits` says; `drop`
        // was cleared, so it is read out once.
        Some(unsafe {
            if fits::<B>() {
                ptr::read(p.cast::<B>())
            } else {
                *Box::from_raw(ptr::read(p.cast::<*mut B>()))
            }
        })
    }

    fn clear(&mut self) {
        if let Some(d) = self.drop.take() {
            // SAFETY: `drop` is set only while a buffer of its type is held.
            unsafe { d(self.words.as_mut_ptr()) }
        }
    }
}

impl Drop for ErasedBuf {
    fn drop(&mut self) {
        self.clear();
    }
}

/// [`Slot::state`]: the result is in (set once, by the request).
const DONE: u8 = 1;
/// [`Slot::state`]: a waiter is registered (under the waiter's lock).
const WAITING: u8 = 2;

/// One request's result, buffer and waiter (see the module doc).
///
/// The result is published without a lock: the request writes it, then
/// sets [`DONE`]; the submitter reads it only after seeing `DONE`. Only
/// a submitter that has to wait takes the waiter's lock (and sets
/// [`WAITING`]); the request takes the lock only if it sees `WAITING`.
/// The buffer is written when the slot is taken and read only after
/// `DONE` (the kernel is done with it) or by the last holder.
pub(crate) struct Slot {
    state: AtomicU8,
    result: UnsafeCell<Option<io::Result<usize>>>,
    buf: UnsafeCell<ErasedBuf>,
    waiter: Mutex<Waiter>,
    /// Holders still using the slot (2 when taken: the submitter's side
    /// and the request's); the last to let go gives it back.
    holders: AtomicU8,
    /// The next slot in the pool's list of slots given back.
    next: AtomicPtr<Slot>,
    /// The slot's pool (it outlives every slot in use).
    pool: *const SlotPool,
}

// SAFETY: the buffer and the result are `Send`; `pool` is only used to
// give the slot back.
unsafe impl Send for Slot {}
// SAFETY: the result and the buffer are used by one side at a time, as
// `state` orders them (see the type's doc); the waiter is behind its lock.
unsafe impl Sync for Slot {}

/// The head of a pool's list of slots given back once its owner thread
/// has exited (not a slot's address): slots are then counted off
/// `remaining` instead, and the last one frees the pool.
const ORPHANED: *mut Slot = std::ptr::dangling_mut::<Slot>();

/// A thread's slots (see the module doc).
pub(crate) struct SlotPool {
    /// Every chunk allocated (only their owner adds one).
    chunks: Mutex<Vec<NonNull<[Slot]>>>,
    /// Slots given back by other threads and not yet taken by the owner
    /// (a lock-free stack: any thread pushes, the owner takes it whole);
    /// [`ORPHANED`] once the owner has exited.
    freed: AtomicPtr<Slot>,
    /// Once orphaned: slots still in use (may dip below 0 until the
    /// exiting owner adds its count).
    remaining: AtomicIsize,
}

impl Drop for SlotPool {
    fn drop(&mut self) {
        for c in self.chunks.get_mut().unwrap().drain(..) {
            drop(unsafe { Box::from_raw(c.as_ptr()) });
        }
    }
}

impl SlotPool {
    fn new() -> NonNull<SlotPool> {
        NonNull::from(Box::leak(Box::new(SlotPool {
            chunks: Mutex::new(Vec::new()),
            freed: AtomicPtr::new(ptr::null_mut()),
            remaining: AtomicIsize::new(0),
        })))
    }

    /// Allocates the next chunk; appends its slots to `free`.
    fn grow(&self, me: NonNull<SlotPool>, free: &mut Vec<NonNull<Slot>>) {
        let mut chunks = self.chunks.lock().unwrap_or_else(|p| p.into_inner());
        let n = (FIRST_CHUNK << chunks.len().min(16)).min(MAX_CHUNK);
        let chunk: Box<[Slot]> = (0..n)
            .map(|_| Slot {
                state: AtomicU8::new(0),
                result: UnsafeCell::new(None),
                buf: UnsafeCell::new(ErasedBuf::EMPTY),
                waiter: Mutex::new(Waiter::None),
                holders: AtomicU8::new(0),
                next: AtomicPtr::new(ptr::null_mut()),
                pool: me.as_ptr(),
            })
            .collect();
        let raw = NonNull::from(Box::leak(chunk));
        let base = raw.as_ptr() as *mut Slot;
        free.extend(
            (0..n)
                .rev()
                .map(|i| unsafe { NonNull::new_unchecked(base.add(i)) }),
        );
        chunks.push(raw);
    }

    /// Gives a slot back from a thread other than the owner; frees the
    /// pool if it is the last slot of an orphaned pool.
    ///
    /// # Safety
    /// `slot` is a slot of `pool`, reset, held by nobody.
    unsafe fn push_freed(pool: *const SlotPool, slot: NonNull<Slot>) {
        // SAFETY (caller): the pool outlives its slots in use.
        let p = unsafe { &*pool };
        let mut head = p.freed.load(Ordering::Relaxed);
        loop {
            if head == ORPHANED {
                if p.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
                    // SAFETY: the owner has exited and every slot is back.
                    drop(unsafe { Box::from_raw(pool.cast_mut()) });
                }
                return;
            }
            // SAFETY: pool slots live as long as the pool.
            unsafe { slot.as_ref() }.next.store(head, Ordering::Relaxed);
            match p.freed.compare_exchange_weak(
                head,
                slot.as_ptr(),
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(h) => head = h,
            }
        }
    }

    /// Takes the slots given back (the owner), replacing the list with
    /// `with`; returns how many.
    fn take_freed(&self, free: Option<&mut Vec<NonNull<Slot>>>, with: *mut Slot) -> usize {
        let mut p = self.freed.swap(with, Ordering::Acquire);
        let mut n = 0;
        let mut free = free;
        while let Some(s) = NonNull::new(p) {
            n += 1;
            if let Some(f) = free.as_mut() {
                f.push(s);
            }
            // SAFETY: pool slots live as long as the pool.
            p = unsafe { s.as_ref() }.next.load(Ordering::Relaxed);
        }
        n
    }
}

/// A thread's pool as its owner sees it: the slots free for its next
/// requests, and how many it handed out that have not come back.
struct LocalPool {
    pool: NonNull<SlotPool>,
    free: Vec<NonNull<Slot>>,
    in_use: usize,
}

impl LocalPool {
    fn new() -> Self {
        LocalPool {
            pool: SlotPool::new(),
            free: Vec::new(),
            in_use: 0,
        }
    }

    fn pool(&self) -> &SlotPool {
        // SAFETY: the pool lives at least as long as its owner's view.
        unsafe { self.pool.as_ref() }
    }

    /// Takes a free slot, allocating a chunk if none is free.
    fn take(&mut self) -> NonNull<Slot> {
        if self.free.is_empty() {
            let p = self.pool;
            // SAFETY: as in `pool()`.
            let n = unsafe { p.as_ref() }.take_freed(Some(&mut self.free), ptr::null_mut());
            self.in_use -= n;
            if self.free.is_empty() {
                // SAFETY: as in `pool()`.
                unsafe { p.as_ref() }.grow(p, &mut self.free);
            }
        }
        self.in_use += 1;
        self.free.pop().expect("a chunk has slots")
    }
}

impl Drop for LocalPool {
    /// The owner exits: the pool is freed now if every slot is back,
    /// else by the last slot given back.
    fn drop(&mut self) {
        let back = self.pool().take_freed(None, ORPHANED);
        let in_use = (self.in_use - back) as isize;
        if self.pool().remaining.fetch_add(in_use, Ordering::AcqRel) + in_use == 0 {
            // SAFETY: orphaned with no slot in use: nobody else frees it.
            drop(unsafe { Box::from_raw(self.pool.as_ptr()) });
        }
    }
}

thread_local! {
    static POOL: RefCell<Option<LocalPool>> = const { RefCell::new(None) };
}

#[cfg(test)]
thread_local! {
    /// Waiters this thread registered ([`Submitter::register`]).
    pub(crate) static REGISTERED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// A holder's reference to a slot. Dropping it lets go of the slot; the
/// last holder gives it back to its pool (dropping a buffer nobody took).
struct SlotHold(NonNull<Slot>);

// SAFETY: the slot is Sync; a SlotHold only moves between threads.
unsafe impl Send for SlotHold {}

/// The submitter's side of a slot (in its [`Pending`](crate::Pending)):
/// it reads the result and takes the buffer, a `B`.
pub(crate) struct Submitter<B> {
    hold: SlotHold,
    _buf: PhantomData<fn() -> B>,
}

// SAFETY: through `&Submitter` only `has_result` (an atomic load) and
// `register` (the waiter's lock and an atomic) run; taking the result
// needs `&mut`.
unsafe impl<B> Sync for Submitter<B> {}

/// The request's side of a slot (in its `Op`): it writes the result,
/// once ([`Completer::complete`] consumes it). Not `Sync`: one thread at a
/// time completes it.
pub(crate) struct Completer(SlotHold);

/// A request whose result is in: who to wake, and the request's hold on
/// its slot if it is the last one. Letting go of that may drop the buffer
/// and the waiter, which is the user's code (an
/// [`IoBuf`](crate::IoBuf)'s `Drop`, a `Waker`'s): the engine wakes and
/// releases a `Finished` only after it has released its locks. While the
/// submitter still holds the slot, the request lets go of it at once
/// (nothing is dropped then).
pub(crate) struct Finished {
    waiter: Waiter,
    hold: Option<Release>,
}

/// A finished request's hold on its slot, to let go of outside the
/// engine's locks (see [`Finished`]).
pub(crate) struct Release(#[allow(dead_code)] SlotHold);

/// Takes a slot of this thread's pool for a request with buffer `buf`:
/// returns the submitter's side and the request's.
pub(crate) fn acquire<B: Send + 'static>(buf: B) -> (Submitter<B>, Completer) {
    let taken = POOL.try_with(|p| {
        let mut p = p.try_borrow_mut().ok()?;
        Some(p.get_or_insert_with(LocalPool::new).take())
    });
    // A thread whose pool is gone (it is exiting): a pool of its own,
    // orphaned at once (freed when the slot comes back).
    let slot = taken
        .ok()
        .flatten()
        .unwrap_or_else(|| LocalPool::new().take());
    // SAFETY: a free slot: nobody else holds or reads it.
    let s = unsafe { &mut *slot.as_ptr() };
    *s.holders.get_mut() = 2;
    s.buf.get_mut().put(buf);
    let mine = Submitter {
        hold: SlotHold(slot),
        _buf: PhantomData,
    };
    (mine, Completer(SlotHold(slot)))
}

impl Slot {
    fn waiter(&self) -> MutexGuard<'_, Waiter> {
        self.waiter.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A slot's identity, to tell which request an `Op` and a `Pending` are
/// (compared only, never dereferenced).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SlotId(usize);

impl SlotHold {
    fn id(&self) -> SlotId {
        SlotId(self.0.as_ptr() as usize)
    }

    fn slot(&self) -> &Slot {
        // SAFETY: a held slot stays allocated (its pool outlives it).
        unsafe { self.0.as_ref() }
    }
}

impl Completer {
    /// The request's slot.
    pub(crate) fn id(&self) -> SlotId {
        self.0.id()
    }

    /// Stores the result; returns who to wake and the request's hold
    /// (see [`Finished`]).
    pub(crate) fn complete(self, res: io::Result<usize>) -> Finished {
        let s = self.0.slot();
        // SAFETY: only the request writes the result (this side, consumed
        // here), before DONE; the submitter reads it only after DONE.
        unsafe { *s.result.get() = Some(res) };
        let waiter = if s.state.fetch_or(DONE, Ordering::AcqRel) & WAITING == 0 {
            Waiter::None
        } else {
            std::mem::replace(&mut *s.waiter(), Waiter::None)
        };
        // Not the last holder (the submitter still holds the slot): let
        // go now; the submitter, now the last, resets the slot.
        let hold = if s
            .holders
            .compare_exchange(2, 1, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            std::mem::forget(self.0);
            None
        } else {
            Some(Release(self.0))
        };
        Finished { waiter, hold }
    }
}

impl Finished {
    /// Wakes the waiter, then lets go of the slot.
    pub(crate) fn wake(self) {
        self.waiter.wake();
    }

    /// The waiter to wake and the hold to let go of, if any.
    pub(crate) fn into_parts(self) -> (Waiter, Option<Release>) {
        (self.waiter, self.hold)
    }
}

impl<B> Submitter<B> {
    /// The request's slot.
    pub(crate) fn id(&self) -> SlotId {
        self.hold.id()
    }

    /// Whether the result is in.
    pub(crate) fn has_result(&self) -> bool {
        self.hold.slot().state.load(Ordering::Acquire) & DONE != 0
    }

    /// Leaves `w` to be woken when the result comes in; returns whether
    /// it is in already (then `w` is dropped here, not woken).
    pub(crate) fn register(&self, w: Waiter) -> bool {
        #[cfg(test)]
        REGISTERED.with(|r| r.set(r.get() + 1));
        let s = self.hold.slot();
        let mut g = s.waiter();
        *g = w;
        if s.state.fetch_or(WAITING, Ordering::AcqRel) & DONE == 0 {
            return false;
        }
        // The result came in meanwhile, and the request, which saw no
        // WAITING, will not take the waiter: it is dropped here, on the
        // submitter's thread, not left in the slot.
        let mine = std::mem::replace(&mut *g, Waiter::None);
        drop(g);
        drop(mine);
        true
    }

    /// Takes the result and the buffer if the result is in; else leaves
    /// `waiter()` to be woken.
    pub(crate) fn take_or_wait(
        &mut self,
        waiter: impl FnOnce() -> Waiter,
    ) -> Option<(io::Result<usize>, B)> {
        let s = self.hold.slot();
        if s.state.load(Ordering::Acquire) & DONE == 0 && !self.register(waiter()) {
            return None;
        }
        // SAFETY: DONE was seen (Acquire): the request wrote the result
        // and no longer touches it or the buffer; only this side takes
        // them, and the slot was made with a `B` (`acquire`).
        unsafe {
            let r = (*s.result.get()).take().expect("result taken twice");
            let buf = (*s.buf.get()).take::<B>().expect("buffer taken twice");
            Some((r, buf))
        }
    }
}

impl Drop for SlotHold {
    fn drop(&mut self) {
        if self.slot().holders.fetch_sub(1, Ordering::AcqRel) != 1 {
            return;
        }
        // The last holder: nobody else uses the slot from here on.
        // SAFETY: as above; the other holder's last use happened before
        // its decrement, which the AcqRel above synchronises with.
        let s = unsafe { &mut *self.0.as_ptr() };
        *s.state.get_mut() = 0;
        *s.result.get_mut() = None;
        // The buffer's and the waker's drops are the user's code: a panic
        // there is reported (by the panic hook) and contained, and the
        // slot still goes back to its pool.
        // (Only when there is one to drop: the common case, a buffer the
        // submitter took and no waiter left, pays no call.)
        let buf = s.buf.get_mut();
        if buf.drop.is_some() {
            let _ = catch_unwind(AssertUnwindSafe(|| buf.clear()));
        }
        let waiter = s.waiter.get_mut().unwrap_or_else(|p| p.into_inner());
        if !matches!(waiter, Waiter::None) {
            let _ = catch_unwind(AssertUnwindSafe(|| *waiter = Waiter::None));
        }
        let (pool, slot) = (s.pool, self.0);
        let mine = POOL.try_with(|p| match p.try_borrow_mut() {
            Ok(mut p) => match p.as_mut() {
                Some(l) if l.pool.as_ptr().cast_const() == pool => {
                    l.free.push(slot);
                    l.in_use -= 1;
                    true
                }
                _ => false,
            },
            Err(_) => false,
        });
        if mine != Ok(true) {
            // SAFETY: a reset slot of `pool`, held by nobody.
            unsafe { SlotPool::push_freed(pool, slot) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicU32};
    use std::sync::{mpsc, Arc};

    /// Counts its drops.
    struct Counted(Arc<AtomicU32>, #[allow(dead_code)] [u64; 8]);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn pool_len() -> usize {
        POOL.with(|p| {
            let p = p.borrow();
            let l = p.as_ref().expect("pool");
            let n: usize = l
                .pool()
                .chunks
                .lock()
                .unwrap()
                .iter()
                .map(|c| c.len())
                .sum();
            n
        })
    }

    /// Slots are reused: a thread that keeps at most 64 requests
    /// outstanding never grows its pool past the first chunk, wherever
    /// the slots are given back.
    #[test]
    fn slots_are_reused_not_allocated_per_request() {
        // Fewer rounds under Miri (its interpreter is slow).
        let rounds = if cfg!(miri) { 3 } else { 1000 };
        for round in 0..rounds {
            let held: Vec<_> = (0..FIRST_CHUNK)
                .map(|i| acquire(vec![i as u8; 3]))
                .collect();
            let mut back = Vec::new();
            for (k, (mut mine, req)) in held.into_iter().enumerate() {
                let fin = req.complete(Ok(3));
                if (k + round) % 2 == 0 {
                    fin.wake();
                    let (r, buf) = mine.take_or_wait(|| Waiter::None).expect("result in");
                    assert_eq!(r.unwrap(), 3);
                    assert_eq!(buf, vec![k as u8; 3]);
                    drop(mine);
                } else {
                    // Given back on another thread.
                    back.push((mine, fin));
                }
            }
            std::thread::spawn(move || drop(back)).join().unwrap();
        }
        assert_eq!(pool_len(), FIRST_CHUNK);
        let more: Vec<_> = (0..FIRST_CHUNK + 1).map(|_| acquire(())).collect();
        assert_eq!(
            pool_len(),
            3 * FIRST_CHUNK,
            "the second chunk is twice the first"
        );
        drop(more);
    }

    /// A buffer nobody took is dropped once, when the last holder lets
    /// go, in place or boxed; a slot outlives its thread's pool.
    #[test]
    fn an_untaken_buffer_is_dropped_once_by_the_last_holder() {
        let drops = Arc::new(AtomicU32::new(0));
        let d = drops.clone();
        let (mine, req) = std::thread::spawn(move || acquire(Counted(d, [0; 8])))
            .join()
            .unwrap();
        // The thread and its pool are gone; the slot still holds the buffer.
        drop(mine);
        assert_eq!(
            drops.load(Ordering::SeqCst),
            0,
            "the request still holds it"
        );
        let (w, hold) = req.complete(Ok(1)).into_parts();
        assert!(matches!(w, Waiter::None));
        assert_eq!(
            drops.load(Ordering::SeqCst),
            0,
            "the request still holds it"
        );
        assert!(hold.is_some(), "the request is the last holder");
        drop(hold);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        let (mut mine, req) = acquire(Counted(drops.clone(), [0; 8]));
        drop(req);
        assert!(mine.take_or_wait(|| Waiter::None).is_none());
        drop(mine);
        assert_eq!(drops.load(Ordering::SeqCst), 2);
    }

    /// The result is published without a lock: a submitter that
    /// registers its waiter while the request completes on another
    /// thread either sees the result at once or is woken (no lost
    /// wake-up; a lost one fails after a generous bound), and takes the
    /// result and buffer the request left.
    #[test]
    fn a_waiter_registered_while_the_result_comes_in_is_never_lost() {
        use std::sync::atomic::AtomicBool;
        use std::task::{Wake, Waker};
        struct Flag(AtomicBool, std::thread::Thread);
        impl Wake for Flag {
            fn wake(self: Arc<Self>) {
                self.0.store(true, Ordering::SeqCst);
                self.1.unpark();
            }
        }
        let tries = if cfg!(miri) { 20 } else { 20_000u32 };
        for i in 0..tries {
            let (mut mine, req) = acquire(vec![i as u8; 2]);
            let t = std::thread::spawn(move || {
                for _ in 0..(i % 64) {
                    std::hint::spin_loop();
                }
                req.complete(Ok(2)).wake();
            });
            let flag = Arc::new(Flag(AtomicBool::new(false), std::thread::current()));
            let waker = Waker::from(flag.clone());
            let took = mine.take_or_wait(|| Waiter::Waker(waker));
            let (r, buf) = match took {
                Some(x) => x,
                None => {
                    // Registered before the result: a wake-up must come.
                    let bound = std::time::Instant::now() + std::time::Duration::from_secs(30);
                    while !flag.0.load(Ordering::SeqCst) {
                        assert!(std::time::Instant::now() < bound, "lost wake-up");
                        std::thread::park_timeout(std::time::Duration::from_millis(100));
                    }
                    mine.take_or_wait(|| Waiter::None).expect("woken")
                }
            };
            assert_eq!(r.unwrap(), 2);
            assert_eq!(buf, vec![i as u8; 2]);
            t.join().unwrap();
        }
    }

    /// A slot taken, completed and given back on one thread, then reused.
    #[test]
    fn a_slot_is_reused_on_its_own_thread() {
        let (mut mine, req) = acquire(vec![1u8; 3]);
        req.complete(Ok(3)).wake();
        let (r, b) = mine.take_or_wait(|| Waiter::None).unwrap();
        assert_eq!(r.unwrap(), 3);
        assert_eq!(b, vec![1u8; 3]);
        drop(mine);
        let (mine, req) = acquire(vec![2u8; 3]);
        drop(mine);
        drop(req);
    }

    /// A request completed while the submitter holds the slot lets go at
    /// once (it cannot be the last holder): no hold to let go of later.
    #[test]
    fn a_request_not_the_last_holder_lets_go_at_once() {
        let (mut mine, req) = acquire(vec![7u8; 2]);
        let (w, hold) = req.complete(Ok(2)).into_parts();
        assert!(matches!(w, Waiter::None));
        assert!(hold.is_none());
        let (r, b) = mine.take_or_wait(|| Waiter::None).unwrap();
        assert_eq!((r.unwrap(), b), (2, vec![7u8; 2]));
        drop(mine);
        // The slot is back in this thread's pool and reused.
        let (mine, req) = acquire(());
        drop((mine, req));
    }

    /// The result arrives while the submitter registers its waker.
    #[test]
    fn a_result_racing_the_waker_is_delivered() {
        for i in 0..6u32 {
            let (mut mine, req) = acquire(vec![i as u8; 2]);
            let t = std::thread::spawn(move || {
                req.complete(Ok(2)).wake();
            });
            let flag = Arc::new(AtomicBool::new(false));
            let th = std::thread::current();
            struct F(Arc<AtomicBool>, std::thread::Thread);
            impl std::task::Wake for F {
                fn wake(self: Arc<Self>) {
                    self.0.store(true, Ordering::SeqCst);
                    self.1.unpark();
                }
            }
            let w = std::task::Waker::from(Arc::new(F(flag.clone(), th)));
            let took = mine.take_or_wait(|| Waiter::Waker(w));
            let (r, b) = match took {
                Some(x) => x,
                None => {
                    while !flag.load(Ordering::SeqCst) {
                        std::thread::park();
                    }
                    mine.take_or_wait(|| Waiter::None).unwrap()
                }
            };
            assert_eq!(r.unwrap(), 2);
            assert_eq!(b, vec![i as u8; 2]);
            drop(mine);
            t.join().unwrap();
        }
    }

    /// Slots given back by other threads while the owner keeps taking.
    #[test]
    fn slots_come_back_from_other_threads() {
        let mut hs = Vec::new();
        for round in 0..3 {
            let batch: Vec<_> = (0..4).map(|i| acquire(vec![i as u8; 1])).collect();
            hs.push(std::thread::spawn(move || {
                for (m, r) in batch {
                    r.complete(Ok(1)).wake();
                    drop(m);
                }
                round
            }));
        }
        for _ in 0..8 {
            let (m, r) = acquire(());
            drop(r);
            drop(m);
        }
        for h in hs {
            h.join().unwrap();
        }
    }

    /// The owner exits while two other threads give its slots back.
    #[test]
    fn an_exiting_owner_races_the_threads_giving_its_slots_back() {
        let drops = Arc::new(AtomicU32::new(0));
        let (tx1, rx1) = mpsc::channel::<(Submitter<Counted>, Completer)>();
        let (tx2, rx2) = mpsc::channel::<(Submitter<Counted>, Completer)>();
        let a = std::thread::spawn(move || {
            for (m, r) in rx1 {
                r.complete(Ok(0)).wake();
                drop(m);
            }
        });
        let b = std::thread::spawn(move || {
            for (m, r) in rx2 {
                drop(m);
                r.complete(Ok(0)).wake();
            }
        });
        let d = drops.clone();
        let owner = std::thread::spawn(move || {
            for i in 0..6 {
                let x = acquire(Counted(d.clone(), [0; 8]));
                if i % 2 == 0 {
                    tx1.send(x).unwrap()
                } else {
                    tx2.send(x).unwrap()
                }
            }
            // a slot returned locally, then the thread exits with others out
            let (m, r) = acquire(Counted(d.clone(), [0; 8]));
            drop(r);
            drop(m);
        });
        owner.join().unwrap();
        a.join().unwrap();
        b.join().unwrap();
        assert_eq!(drops.load(Ordering::SeqCst), 7);
    }
}
