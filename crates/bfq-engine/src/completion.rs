//! How a result travels from the thread that reaped it back to the
//! submitter, as a blocking wait or as a `Future` (Waker-based, usable
//! from any async runtime): [`Pending`], the waiters and the wake relay.
//! The slot that holds a request's buffer, result and waiter is
//! the engine's slot pool's (`src/slot.rs`).

use crate::slot::{SlotId, Submitter};
use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::marker::PhantomData;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::thread::Thread;

/// Someone waiting for a result.
#[derive(Clone)]
pub(crate) enum Waiter {
    None,
    Waker(Waker),
    Thread(Thread),
    /// A thread blocked in its own io_uring ring, which keeps a read of
    /// this eventfd armed.
    Event(Arc<EventFd>),
}

/// A non-blocking eventfd (wakes a thread waiting in a ring).
pub(crate) struct EventFd(OwnedFd, AtomicU64);

impl EventFd {
    pub(crate) fn new() -> io::Result<Self> {
        // SAFETY: plain syscall; the result is checked.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor we own.
        Ok(EventFd(
            unsafe { OwnedFd::from_raw_fd(fd) },
            AtomicU64::new(0),
        ))
    }

    pub(crate) fn fd(&self) -> i32 {
        self.0.as_raw_fd()
    }

    /// [`EventFd::signal`] for a waiter: also notes when (CLOCK_MONOTONIC
    /// ns), unless an earlier wake not yet seen is noted, for
    /// [`EventFd::take_stamp`].
    pub(crate) fn signal_waiter(&self) {
        let _ = self.1.compare_exchange(
            0,
            crate::clock::monotonic_ns(),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
        self.signal();
    }

    /// When the earliest wake not yet seen was noted (0 if none), and
    /// forgets it.
    pub(crate) fn take_stamp(&self) -> u64 {
        if self.1.load(Ordering::Relaxed) == 0 {
            return 0;
        }
        self.1.swap(0, Ordering::Relaxed)
    }

    /// Adds one to the counter (wakes a pending read).
    pub(crate) fn signal(&self) {
        let one: u64 = 1;
        // SAFETY: writing 8 bytes from a valid u64 to our eventfd.
        unsafe { libc::write(self.fd(), &one as *const u64 as *const libc::c_void, 8) };
    }
}

/// How the thread that waits for a result spends the wait: on its own
/// ring, doing the engine's work that landed there, or parked.
pub(crate) trait Driver: Send + Sync {
    /// Sleeps until woken, or until work of its own (a request it
    /// completes itself) brings the result in. `waited`: the waited
    /// request's count among its submitting thread's outstanding requests
    /// (tells whether this thread submitted it); `slot`: its slot.
    /// `register` gives the request the waiter to wake when another
    /// thread completes it and returns whether the result is in already
    /// (then the thread does not sleep); the driver calls it before any
    /// sleep, and need not when the thread completes the request itself
    /// (a wait on its private ring).
    fn block(&self, waited: Option<&Hold>, slot: Option<SlotId>, register: Register<'_>);
    /// Does this thread's pending engine work without blocking: submits
    /// what its plug holds and reaps its ring. `linger`: the caller is
    /// blocking-style code that comes back to the engine (`is_done`), so
    /// the ring may stay with it; else (a future's `poll`, after which a
    /// runtime may park the thread) completions go to the service thread
    /// until the thread is back.
    fn poll_work(&self, linger: bool);
    /// A result was taken (the wake relay's cue to help).
    fn taken(&self);
    /// A blocking wait is over: the thread keeps its ring if requests it
    /// submitted are still outstanding (it comes back for them), else
    /// leaves it to the service thread.
    fn finish_wait(&self);
}

/// Registers a blocking wait's waiter with the waited request's slot;
/// returns whether the result is in already (see [`Driver::block`]).
pub(crate) type Register<'a> = &'a dyn Fn(Waiter) -> bool;

/// Wake-ups the dispatcher hands to its clients (a wake relay).
///
/// Waking a sleeping thread on another CPU costs an inter-processor
/// interrupt, several microseconds in a VM, and the dispatcher is the one
/// thread every request passes through. So when a batch of completions
/// has several waiters, the dispatcher wakes one itself and publishes the
/// rest here; every client that takes a result wakes up to
/// [`RELAY_FANOUT`] of them (the woken do the same, a wake-up tree), on
/// its own CPU time, oldest first. The dispatcher wakes whatever has
/// waited there [`RELAY_MAX_WAIT_NS`] (it checks on every loop turn, and
/// bounds its blocking waits by it), so a waiter whose helper never comes
/// (a future nobody polls again) still wakes.
#[derive(Default)]
pub(crate) struct WakeRelay {
    waiters: Mutex<VecDeque<Waiter>>,
    len: AtomicUsize,
}

/// Waiters one helper wakes.
pub(crate) const RELAY_FANOUT: usize = 4;
/// The longest the dispatcher leaves a published waiter to the helpers.
pub(crate) const RELAY_MAX_WAIT_NS: u64 = 50_000;

impl WakeRelay {
    /// Wakes the first waiter and publishes the rest; returns whether
    /// anything was published. Leaves `ws` empty.
    pub(crate) fn wake_or_publish(&self, ws: &mut Vec<Waiter>) -> bool {
        if ws.len() <= 1 {
            if let Some(w) = ws.pop() {
                w.wake();
            }
            return false;
        }
        let first = ws.swap_remove(0);
        {
            let mut g = self.waiters.lock().unwrap_or_else(|p| p.into_inner());
            g.extend(ws.drain(..));
            self.len.store(g.len(), Ordering::Release);
        }
        first.wake();
        true
    }

    /// Whether nobody waits in the relay.
    pub(crate) fn is_empty(&self) -> bool {
        self.len.load(Ordering::Acquire) == 0
    }

    /// Wakes up to `max` published waiters.
    pub(crate) fn help(&self, max: usize) {
        if self.is_empty() {
            return;
        }
        let mut take = [const { None }; RELAY_FANOUT];
        let mut n = 0;
        {
            let mut g = self.waiters.lock().unwrap_or_else(|p| p.into_inner());
            while n < max.min(RELAY_FANOUT) {
                match g.pop_front() {
                    Some(w) => take[n] = Some(w),
                    None => break,
                }
                n += 1;
            }
            self.len.store(g.len(), Ordering::Release);
        }
        for w in take.into_iter().flatten() {
            w.wake();
        }
    }

    /// Wakes every published waiter (the dispatcher's fallback).
    pub(crate) fn drain(&self) {
        if self.is_empty() {
            return;
        }
        let ws = {
            let mut g = self.waiters.lock().unwrap_or_else(|p| p.into_inner());
            self.len.store(0, Ordering::Release);
            std::mem::take(&mut *g)
        };
        for w in ws {
            w.wake();
        }
    }
}

impl Waiter {
    /// Wakes the waiter, if any.
    pub(crate) fn wake(self) {
        match self {
            Waiter::None => {}
            Waiter::Waker(w) => w.wake(),
            Waiter::Thread(t) => t.unpark(),
            Waiter::Event(e) => e.signal_waiter(),
        }
    }
}

/// What a request gives back: the byte count or the OS error, and the
/// caller's buffer (always returned, whatever happened).
pub type IoResult<B> = (io::Result<usize>, B);

/// Counts a request among those its submitting thread has outstanding
/// (the ring's owner lingers while it has some, see
/// [`Driver::finish_wait`]); uncounted when its `Pending` is done with.
/// The count is the strong count of the ring's [`Outstanding`] `Arc`
/// (one reference per hold, plus the ring's own): a request updates one
/// atomic to be counted and one to be uncounted, where a separate
/// counter beside the `Arc` took two more.
pub(crate) struct Hold(pub(crate) Arc<Outstanding>);

/// What the holds of a ring's requests share (see [`Hold`]).
pub(crate) struct Outstanding;

/// A request in progress. Await it from any async runtime, or block on it
/// with [`Pending::wait`]. Dropping it is safe: the request still runs to
/// completion (or cancellation) and the engine frees the buffer.
///
/// Its result (and buffer) is taken once: by `wait`, or by the `poll`
/// that returns `Poll::Ready`. A `Pending` polled to `Ready` is done
/// with (its [`is_done`](Pending::is_done) stays true): polling it again
/// or calling `wait` on it panics, as the `Future` contract allows.
///
/// The `Waker` a poll leaves, and the buffer of a dropped `Pending`, are
/// woken and dropped on an engine thread (the service thread among
/// them): keep them cheap, never blocking (see
/// [`EngineBuilder::submit_mode`](crate::EngineBuilder::submit_mode)).
#[must_use = "a request's result is only seen through its Pending"]
pub struct Pending<B: Send + 'static> {
    /// The submitter's hold on the request's slot (`None` once the
    /// result is taken).
    slot: Option<Submitter<B>>,
    driver: Arc<dyn Driver>,
    hold: Option<Hold>,
    _buf: PhantomData<fn() -> B>,
}

impl<B: Send + 'static> Pending<B> {
    /// `slot`: the submitter's side of the request's slot (see
    /// [`crate::slot::acquire`]).
    pub(crate) fn new(slot: Submitter<B>, driver: Arc<dyn Driver>) -> Self {
        Pending {
            slot: Some(slot),
            driver,
            hold: None,
            _buf: PhantomData,
        }
    }

    pub(crate) fn set_hold(&mut self, hold: Option<Hold>) {
        self.hold = hold;
    }

    /// Takes the result if it is in (and then wakes a few of the
    /// dispatcher's other waiters, see [`WakeRelay`]); otherwise leaves
    /// `waiter` to be woken.
    fn try_take(&mut self, waiter: impl FnOnce() -> Waiter) -> Option<IoResult<B>> {
        let slot = self
            .slot
            .as_mut()
            .expect("a Pending polled after it returned Ready");
        let r = slot.take_or_wait(waiter)?;
        // The slot goes back to its pool (the request let go of it when
        // it delivered the result).
        self.slot = None;
        self.driver.taken();
        Some(r)
    }

    /// Whether the result is in (submitting what this thread's plug
    /// holds and reaping its ring first, if it has one: completions that
    /// landed there are this thread's to report).
    pub fn is_done(&self) -> bool {
        if self.has_result() {
            return true;
        }
        self.driver.poll_work(true);
        self.has_result()
    }

    fn has_result(&self) -> bool {
        self.slot.as_ref().is_none_or(|s| s.has_result())
    }

    /// Blocks the calling thread until the request completes (doing the
    /// engine's work that landed on this thread's ring meanwhile).
    ///
    /// The waiter is registered by the driver, only where the thread may
    /// sleep while another thread completes the request: a thread that
    /// completes its request itself (its private ring) registers none.
    ///
    /// # Panics
    ///
    /// If the result was taken already (the `Pending` was polled to
    /// `Ready` as a future).
    pub fn wait(mut self) -> IoResult<B> {
        assert!(
            self.slot.is_some(),
            "Pending::wait on a Pending polled to Ready (its result was taken)"
        );
        loop {
            if self.has_result() {
                let r = self.try_take(|| Waiter::None).expect("the result is in");
                drop(self.hold.take());
                self.driver.finish_wait();
                return r;
            }
            let slot = self
                .slot
                .as_ref()
                .expect("a Pending waited after it completed");
            let register = |w: Waiter| slot.register(w);
            self.driver
                .block(self.hold.as_ref(), Some(slot.id()), &register);
        }
    }
}

/// Blocks the calling thread until at least one of `pending` has its
/// result, and returns the position (in `pending`'s order) of the first
/// that has; at once if one has already, `None` if `pending` is empty.
/// The results stay in their `Pending`s (take them with
/// [`Pending::wait`], which then returns at once); a `Pending` whose
/// result was already taken (a future polled to `Ready`) counts as done,
/// though it has no result left to take (`wait` on it panics).
///
/// For a thread with many requests outstanding (a deep flow): it wakes
/// for whichever completes first, where [`Pending::wait`] on the oldest
/// would sleep past the others' completions, and leave their slots idle,
/// whenever the scheduler has dispatched the oldest after them (bfq
/// serves a flow's queue in sector order). While it sleeps, its waiter
/// is registered with each request still out, so a completion reported
/// by another thread wakes it as one on its own ring does.
pub fn wait_any<'a, B, I>(pending: I) -> Option<usize>
where
    B: Send + 'static,
    I: IntoIterator<Item = &'a Pending<B>>,
    I::IntoIter: Clone,
{
    let all = pending.into_iter();
    loop {
        let mut first_out = None;
        for (i, p) in all.clone().enumerate() {
            if p.has_result() {
                return Some(i);
            }
            first_out.get_or_insert(p);
        }
        let p = first_out?;
        let slot = p.slot.as_ref().expect("a request still out has its slot");
        // Whether a result came in while registering: then no sleep.
        let register = |w: Waiter| {
            all.clone()
                .any(|q| q.slot.as_ref().is_none_or(|s| s.register(w.clone())))
        };
        p.driver.block(p.hold.as_ref(), Some(slot.id()), &register);
    }
}

impl<B: Send + 'static> Future for Pending<B> {
    type Output = IoResult<B>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<IoResult<B>> {
        if !self.has_result() {
            self.driver.poll_work(false);
        }
        // A `Pending` is `Unpin`.
        let this = self.get_mut();
        match this.try_take(|| Waiter::Waker(cx.waker().clone())) {
            Some(r) => Poll::Ready(r),
            None => Poll::Pending,
        }
    }
}

/// A minimal executor for tests and examples: runs one future to
/// completion on the calling thread (parks between wake-ups).
pub fn block_on<F: Future>(fut: F) -> F::Output {
    use std::task::Wake;
    struct ThreadWaker(Thread);
    impl Wake for ThreadWaker {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut fut = std::pin::pin!(fut);
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;
    use std::task::Wake;

    /// A waker that counts its wake-ups.
    struct Count(AtomicU32);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn waiters(n: usize) -> (Vec<Arc<Count>>, Vec<Waiter>) {
        let counts: Vec<_> = (0..n).map(|_| Arc::new(Count(AtomicU32::new(0)))).collect();
        let ws = counts
            .iter()
            .map(|c| Waiter::Waker(Waker::from(c.clone())))
            .collect();
        (counts, ws)
    }

    fn woken(counts: &[Arc<Count>]) -> u32 {
        counts.iter().map(|c| c.0.load(Ordering::SeqCst)).sum()
    }

    #[test]
    fn relay_wakes_one_then_helpers_then_the_rest() {
        let relay = WakeRelay::default();
        let (counts, mut ws) = waiters(2 + 2 * RELAY_FANOUT);
        assert!(relay.wake_or_publish(&mut ws));
        assert!(ws.is_empty());
        assert_eq!(woken(&counts), 1, "the dispatcher wakes one itself");
        assert!(!relay.is_empty());
        relay.help(RELAY_FANOUT);
        assert_eq!(woken(&counts), 1 + RELAY_FANOUT as u32);
        relay.help(1);
        assert_eq!(woken(&counts), 2 + RELAY_FANOUT as u32);
        relay.drain();
        assert!(relay.is_empty());
        // Everyone woken exactly once.
        assert!(counts.iter().all(|c| c.0.load(Ordering::SeqCst) == 1));
        relay.help(RELAY_FANOUT);
        relay.drain();
        assert_eq!(woken(&counts), counts.len() as u32);
    }

    #[test]
    fn a_lone_waiter_is_woken_directly() {
        let relay = WakeRelay::default();
        let (counts, mut ws) = waiters(1);
        assert!(!relay.wake_or_publish(&mut ws));
        assert_eq!(woken(&counts), 1);
        assert!(relay.is_empty());
        assert!(!relay.wake_or_publish(&mut Vec::new()));
    }

    #[test]
    fn taking_a_result_helps_the_relay() {
        let relay = Arc::new(WakeRelay::default());
        let (counts, mut ws) = waiters(3);
        assert!(relay.wake_or_publish(&mut ws));
        struct Relay(Arc<WakeRelay>);
        impl Driver for Relay {
            fn block(&self, _: Option<&Hold>, _: Option<SlotId>, register: Register<'_>) {
                if !register(Waiter::Thread(std::thread::current())) {
                    std::thread::park();
                }
            }
            fn poll_work(&self, _: bool) {}
            fn taken(&self) {
                self.0.help(RELAY_FANOUT);
            }
            fn finish_wait(&self) {}
        }
        let (mine, req) = crate::slot::acquire(vec![0u8; 8]);
        let mut pending = Pending::<Vec<u8>>::new(mine, Arc::new(Relay(relay.clone())));
        assert!(pending.try_take(|| Waiter::None).is_none());
        assert_eq!(woken(&counts), 1, "no result, no help");
        req.complete(Ok(8)).wake();
        let (res, buf) = pending.wait();
        assert_eq!(res.unwrap(), 8);
        assert_eq!(buf.len(), 8);
        assert_eq!(woken(&counts), 3);
        assert!(relay.is_empty());
    }
}
