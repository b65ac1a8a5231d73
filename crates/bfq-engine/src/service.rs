//! The service thread: the idle timer, rings whose owner is away, and
//! shutdown; in [`SubmitMode::Dispatcher`] also every submission.
//!
//! It blocks in its own ring on a read of the engine's notify eventfd
//! (written by the kernel for completions on away rings, by shutdown, by
//! exiting threads, and by dispatcher-mode submitters when it said it
//! was about to block) and a read of the idle timer. In local mode it
//! sleeps while the clients do the work.

use crate::completion::RELAY_MAX_WAIT_NS;
use crate::driver::{arm_reads, reap, submit_pending, Ring, RingState, Shared, SubmitMode};
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;

/// Starts the service thread (its ring is made on it).
pub(crate) fn spawn(shared: Arc<Shared>, nice: i32, sqpoll_ms: u32) -> io::Result<JoinHandle<()>> {
    let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel(1);
    let thread = std::thread::Builder::new()
        .name("bfq-service".into())
        .spawn(move || {
            set_nice(nice);
            match shared.new_ring(shared.notify.clone(), sqpoll_ms) {
                Ok(ring) => {
                    let _ = ready_tx.send(Ok(()));
                    run(&shared, &ring);
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                }
            }
        })?;
    match ready_rx.recv() {
        Ok(Ok(())) => Ok(thread),
        Ok(Err(e)) => {
            let _ = thread.join();
            Err(e)
        }
        Err(_) => {
            let _ = thread.join();
            Err(io::Error::other("the service thread failed to start"))
        }
    }
}

fn set_nice(nice: i32) {
    if nice != 0 {
        // SAFETY: plain syscalls on this thread; failure (not root) is
        // harmless.
        unsafe {
            let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
            libc::setpriority(libc::PRIO_PROCESS, tid, nice);
        }
    }
}

/// Runs until a shutdown is complete.
fn run(shared: &Shared, ring: &Ring) {
    let mut st = ring.st.lock().unwrap_or_else(|p| p.into_inner());
    let timerfd = shared.timerfd.as_raw_fd();
    let mut seen;
    loop {
        arm_reads(ring, &mut st, Some(timerfd));
        seen = shared.added.load(Ordering::SeqCst);
        let busy = turn(shared, ring, &mut st);
        if shared.core().done() {
            break;
        }
        if busy {
            continue;
        }
        if shared.mode == SubmitMode::Dispatcher {
            // About to block: announce it, then look once more.
            shared.parked.store(true, Ordering::SeqCst);
            if shared.added.load(Ordering::SeqCst) != seen {
                shared.parked.store(false, Ordering::SeqCst);
                continue;
            }
        }
        shared.parks.fetch_add(1, Ordering::Relaxed);
        wait(shared, &mut st);
        shared.parked.store(false, Ordering::SeqCst);
    }
    shared.core().closed = true;
    shared.relay.drain();
    shared
        .rings
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clear();
}

/// One turn: own completions, the timer, dispatching, away rings.
/// Returns whether anything happened.
fn turn(shared: &Shared, ring: &Ring, st: &mut RingState) -> bool {
    submit_pending(st);
    reap(ring, st);
    let mut busy = !st.cqes.is_empty();
    let cqes = std::mem::take(&mut st.cqes);
    if st.timer_fired {
        st.timer_fired = false;
        shared.core().timer_fired();
    }
    // Also with no completions: after a timer, a notify, or (dispatcher
    // mode) new requests.
    shared.settle(&cqes, ring, st);
    st.cqes = cqes;
    st.cqes.clear();
    if st.woken {
        st.woken = false;
        busy = true;
        scan_rings(shared, ring, st);
    }
    busy
}

/// Reaps the rings whose owner is away (or gone), sends cancellations in
/// a `Cancel` shutdown, and forgets rings of exited threads once empty.
fn scan_rings(shared: &Shared, s: &Ring, ss: &mut RingState) {
    let mut rings = shared.rings.lock().unwrap_or_else(|p| p.into_inner());
    for x in rings.iter() {
        let away = x.away.load(Ordering::SeqCst);
        let guard = if away {
            // The owner is leaving or gone: its lock is free at once.
            Some(x.st.lock().unwrap_or_else(|p| p.into_inner()))
        } else {
            // A busy owner reaps its own ring.
            x.st.try_lock().ok()
        };
        let Some(mut xs) = guard else { continue };
        shared.reap_for_owner(x, &mut xs, s, ss);
        shared.cancel_if_stopping(x, &mut xs);
    }
    rings.retain(|x| !(x.dead.load(Ordering::SeqCst) && x.in_flight.load(Ordering::SeqCst) == 0));
}

/// Blocks in the service ring until a completion, a notify or the timer
/// (bounded by the wake relay's deadline when waiters wait there).
fn wait(shared: &Shared, st: &mut RingState) {
    submit_pending(st);
    let r = if shared.relay.is_empty() {
        st.uring.submit_and_wait(1)
    } else {
        let ts = io_uring::types::Timespec::new().nsec(RELAY_MAX_WAIT_NS as u32);
        let args = io_uring::types::SubmitArgs::new().timespec(&ts);
        let r = st.uring.submitter().submit_with_args(1, &args);
        shared.relay.drain();
        r
    };
    match r {
        Ok(_) => {}
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EINTR | libc::EBUSY | libc::ETIME)
            ) => {}
        Err(e) => panic!("io_uring_enter failed: {e}"),
    }
}
