//! Completion slots: how a result travels from the dispatcher thread back
//! to the submitter, as a blocking wait or as a `Future` (Waker-based,
//! usable from any async runtime).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::thread::Thread;

/// The dispatcher's view of a completion slot: it only delivers results.
pub(crate) trait Sink: Send + Sync {
    /// Stores the result; returns who to wake (the caller wakes it, maybe
    /// later, in a batch).
    fn complete(&self, res: io::Result<usize>) -> Waiter;
}

/// Someone waiting for a result.
pub(crate) enum Waiter {
    None,
    Waker(Waker),
    Thread(Thread),
}

struct Inner<B> {
    result: Option<io::Result<usize>>,
    buf: Option<B>,
    waiter: Waiter,
}

/// One request's result and buffer, shared by the submitter and the
/// dispatcher.
pub(crate) struct Slot<B> {
    inner: Mutex<Inner<B>>,
}

impl<B: Send + 'static> Slot<B> {
    pub(crate) fn new(buf: B) -> Arc<Self> {
        Arc::new(Slot {
            inner: Mutex::new(Inner {
                result: None,
                buf: Some(buf),
                waiter: Waiter::None,
            }),
        })
    }
}

impl Waiter {
    /// Wakes the waiter, if any.
    pub(crate) fn wake(self) {
        match self {
            Waiter::None => {}
            Waiter::Waker(w) => w.wake(),
            Waiter::Thread(t) => t.unpark(),
        }
    }

    pub(crate) fn is_none(&self) -> bool {
        matches!(self, Waiter::None)
    }
}

impl<B: Send + 'static> Sink for Slot<B> {
    fn complete(&self, res: io::Result<usize>) -> Waiter {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if g.result.is_some() {
            return Waiter::None;
        }
        g.result = Some(res);
        std::mem::replace(&mut g.waiter, Waiter::None)
    }
}

/// What a request gives back: the byte count or the OS error, and the
/// caller's buffer (always returned, whatever happened).
pub type IoResult<B> = (io::Result<usize>, B);

/// A request in progress. Await it from any async runtime, or block on it
/// with [`Pending::wait`]. Dropping it is safe: the request still runs to
/// completion (or cancellation) and the engine frees the buffer.
#[must_use = "a request's result is only seen through its Pending"]
pub struct Pending<B: Send + 'static> {
    slot: Arc<Slot<B>>,
}

impl<B: Send + 'static> Pending<B> {
    pub(crate) fn new(slot: Arc<Slot<B>>) -> Self {
        Pending { slot }
    }

    fn try_take(&self, waiter: impl FnOnce() -> Waiter) -> Option<IoResult<B>> {
        let mut g = self.slot.inner.lock().unwrap_or_else(|p| p.into_inner());
        match g.result.take() {
            Some(r) => {
                let buf = g.buf.take().expect("buffer taken twice");
                Some((r, buf))
            }
            None => {
                g.waiter = waiter();
                None
            }
        }
    }

    /// Whether the result is in.
    pub fn is_done(&self) -> bool {
        let g = self.slot.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.result.is_some()
    }

    /// Blocks the calling thread until the request completes.
    pub fn wait(self) -> IoResult<B> {
        loop {
            if let Some(r) = self.try_take(|| Waiter::Thread(std::thread::current())) {
                return r;
            }
            std::thread::park();
        }
    }
}

impl<B: Send + 'static> Future for Pending<B> {
    type Output = IoResult<B>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<IoResult<B>> {
        match self.try_take(|| Waiter::Waker(cx.waker().clone())) {
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
