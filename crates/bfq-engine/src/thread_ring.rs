//! A thread's ring bound to the thread's own event loop: for async
//! runtimes that wait in a poller of their own (tokio, mio, a plain
//! `epoll` loop), so that completions wake the thread that submitted
//! them, which reaps them itself, instead of the engine's service
//! thread reaping them and waking the runtime from another CPU.
//!
//! Without it, a runtime thread whose futures are all pending parks in
//! its own poller, its ring is left to the service thread, and every
//! completion costs a second thread's wake-up and a cross-CPU hand-over
//! (docs/engine.md, "Thread-per-core servers").

use crate::driver::{Ring, Shared};
use crate::engine::Engine;
use std::io;
use std::marker::PhantomData;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};

/// This thread's io_uring ring for one engine, bound to the thread's
/// event loop ([`Engine::thread_ring`]).
///
/// While it lives, whenever the thread leaves the engine with requests on its ring
/// (a future's `poll` returned `Pending`) the ring stays the thread's:
/// its descriptor ([`AsRawFd`], [`AsFd`]) turns readable when a
/// completion arrives, and the event loop then calls [`ThreadRing::reap`]
/// (or polls any future of the engine on this thread, unless the ring
/// defers its futures' submissions), which reports the
/// completions to the scheduler, submits what that dispatches and wakes
/// the futures' wakers, on this thread. The descriptor is an io_uring
/// instance: watch it for readability only (edge- or level-triggered),
/// never read it; it stays open, and the same, while the `ThreadRing`
/// lives (what `tokio::io::unix::AsyncFd::register` asks of it).
///
/// The ring is set up with `COOP_TASKRUN` unless the engine's
/// [`crate::CoopTaskrun`] is `Off`: a completion then does not interrupt
/// the thread while it runs; it is posted at the thread's next entry
/// into the kernel (a system call: an event loop makes one at least
/// every few dozen tasks; an interrupt or a timer tick), or
/// wakes the thread if it sleeps in its poller. The ring is not set up
/// again while bound.
///
/// A ring whose owner leaves completions or plugged requests waiting from
/// one look of the service thread to the next (1-2 ms) is taken over by
/// the service thread, as any lingering ring is, and so is every ring
/// once a shutdown begins; the completions of a ring with `COOP_TASKRUN`
/// still wait for the owner's next entry into the kernel, so an event loop that
/// computes for long without one delays them (other threads' requests
/// dispatched on its ring included).
///
/// The results of a ring taken over come through the futures' wakers,
/// not the descriptor.
///
/// Not `Send`: it belongs to the thread that made it. Dropping it
/// unbinds the ring (what is on it is then reaped by the service thread
/// whenever the thread is not in the engine); leaked (`mem::forget`), it
/// keeps the ring bound and the engine's shared state alive.
pub struct ThreadRing {
    shared: Arc<Shared>,
    ring: Arc<Ring>,
    fd: RawFd,
    _thread: PhantomData<*const ()>,
}

impl ThreadRing {
    /// Binds the calling thread's ring (see [`Engine::thread_ring`]).
    pub(crate) fn bind(engine: &Engine) -> io::Result<ThreadRing> {
        let shared = engine.shared.clone();
        let (ring, fd) = shared.bind_ring()?;
        Ok(ThreadRing {
            shared,
            ring,
            fd,
            _thread: PhantomData,
        })
    }

    /// Reaps the ring now, without blocking: reports its completions to
    /// the scheduler, submits what that dispatches and this thread's
    /// plugged requests, and wakes the waiters of the requests completed.
    /// Call it when the descriptor turns readable. Returns false if it
    /// could not take everything (another thread, such as the service
    /// thread, was working on the ring, or completions kept coming): the
    /// event loop then keeps the descriptor's readiness and calls it
    /// again, as for a non-blocking read that would have blocked.
    pub fn reap(&self) -> bool {
        self.shared.look(&self.ring, true)
    }

    /// With `on`, a future of the engine polled on this thread leaves its
    /// request in the thread's plug instead of submitting it at once, so
    /// that the requests an event loop's tasks issue in one pass over
    /// them reach the kernel in one `io_uring_enter`, as a blocking
    /// thread's batch does, instead of one each. The plug is submitted by
    /// [`ThreadRing::reap`], by [`submit_plugged`] (which the event loop
    /// calls just before it parks: tokio's
    /// `runtime::Builder::on_thread_park(bfq_engine::submit_plugged)`),
    /// when it holds 32 requests, or when the thread blocks on the
    /// engine; requests left in it across two of the service thread's
    /// looks (1-2 ms) are submitted by the service thread. A loop that
    /// stays busy never parks (tokio's current-thread runtime then polls
    /// its reactor without calling `on_thread_park`): it also awaits
    /// [`ThreadRing::plugged`] and calls [`submit_plugged`] when that is
    /// ready. For one runtime per core: on a multi-thread runtime a
    /// task moved to another worker leaves its request in this thread's
    /// plug. Default off.
    pub fn defer_submits(&self, on: bool) {
        self.ring.defer.store(on, Ordering::Relaxed);
    }

    /// Ready while this thread's futures have left requests in its plug
    /// ([`ThreadRing::defer_submits`]); otherwise `cx`'s waker is woken
    /// when the next one is left there. An event loop awaits it beside
    /// the descriptor's readiness and calls [`ThreadRing::reap`] (which
    /// submits the plug) when it is ready: the wake puts the loop's task
    /// behind the tasks already runnable, so it submits what a whole pass
    /// over them plugged, in one `io_uring_enter`, whether or not the
    /// runtime parks after the pass (tokio does not call `on_thread_park`
    /// while it has runnable tasks). The waker is woken on this thread,
    /// while the request is plugged.
    pub fn poll_plugged(&self, cx: &mut Context<'_>) -> Poll<()> {
        self.shared.poll_plugged(&self.ring, cx)
    }

    /// [`ThreadRing::poll_plugged`] as a future.
    pub async fn plugged(&self) {
        std::future::poll_fn(|cx| self.poll_plugged(cx)).await
    }
}

/// Submits what the calling thread's futures left in its plug on each of
/// its rings that defers their submissions
/// ([`ThreadRing::defer_submits`]), and reaps those rings as
/// [`ThreadRing::reap`] does, waiting for a ring's lock while another
/// thread (the service thread) holds it briefly; nothing on a thread
/// without such a ring, and nothing when called from code the engine runs
/// under the ring's lock (a waker, a buffer it lets go): that look
/// submits the plug itself. An event loop calls it just before it parks
/// (tokio: `runtime::Builder::on_thread_park(bfq_engine::submit_plugged)`,
/// whose closure cannot hold the thread's `ThreadRing`), and where it
/// yields if it stays busy.
pub fn submit_plugged() {
    crate::driver::submit_plugged();
}

impl AsRawFd for ThreadRing {
    /// The ring's io_uring descriptor: readable while completions wait
    /// on the ring.
    fn as_raw_fd(&self) -> RawFd {
        self.fd
    }
}

impl AsFd for ThreadRing {
    /// The ring's io_uring descriptor (see [`AsRawFd`]).
    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the ring (which `self.ring` keeps alive) owns the
        // descriptor and closes it only when dropped, after `self`.
        unsafe { BorrowedFd::borrow_raw(self.fd) }
    }
}

impl Drop for ThreadRing {
    fn drop(&mut self) {
        self.shared.unbind_ring(&self.ring);
    }
}
