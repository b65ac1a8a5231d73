//! The service thread: the idle timer, rings whose owner is away, and
//! shutdown; in [`SubmitMode::Dispatcher`] also every submission.
//!
//! It blocks in its own ring on a read of the engine's notify eventfd
//! (written by the kernel for completions on away rings, by shutdown, by
//! exiting threads, and by dispatcher-mode submitters when it said it
//! was about to block) and a read of the idle timer. In local mode it
//! sleeps while the clients do the work.

use crate::completion::RELAY_MAX_WAIT_NS;
use crate::driver::{
    arm_reads, enter_and_wait, reap, submit_pending, Ring, RingState, Shared, SubmitMode,
};
use crate::taskrun::CoopTaskrun;
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
            // Tells a bounded shutdown the thread is gone, however it
            // ends (see `Shared::wait_service_exit`).
            let _exiting = Exiting(shared.clone());
            set_nice(nice);
            match shared.new_ring(
                shared.notify.clone(),
                sqpoll_ms,
                shared.coop_taskrun == CoopTaskrun::On,
            ) {
                Ok(ring) => {
                    let _ = ready_tx.send(Ok(()));
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        run(&shared, &ring)
                    }));
                    if r.is_err() {
                        failed(&shared);
                    }
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

/// Tells a shutdown waiting for the service thread that it exits, when
/// dropped (the thread's last act).
struct Exiting(Arc<Shared>);

impl Drop for Exiting {
    fn drop(&mut self) {
        self.0.service_exiting();
    }
}

/// The service thread died: refuse new work; if requests may still be on
/// the device, leak the engine's state rather than free buffers the
/// kernel may still write.
fn failed(shared: &Arc<Shared>) {
    let in_flight = {
        let mut core = shared.core();
        core.closed = true;
        core.begin_shutdown(crate::core::ShutdownMode::Cancel);
        core.snapshot().in_flight
    };
    if in_flight > 0 {
        std::mem::forget(shared.clone());
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
    // The ring list, copied for each scan (not held while reaping).
    let mut rings: Vec<Arc<Ring>> = Vec::new();
    loop {
        arm_reads(ring, &mut st, Some(timerfd));
        seen = shared.added.load(Ordering::SeqCst);
        let (busy, timeout) = turn(shared, ring, &mut st, &mut rings);
        if shared.done() {
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
        // The turn may have consumed the timer's or the notify's read:
        // sleep only with both armed.
        arm_reads(ring, &mut st, Some(timerfd));
        let timeout = linger_bound(shared, timeout);
        wait(shared, &mut st, timeout);
        shared.parked.store(false, Ordering::SeqCst);
        shared.service_idle.store(false, Ordering::SeqCst);
    }
    shared.core().closed = true;
    shared.relay.drain();
    shared
        .rings
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clear();
}

/// The bound of the next sleep: [`LINGER_NS`] at most while rings
/// linger (their owners may not come back), or lingered since the last
/// look (threads that plug requests and then wait for them linger again
/// and again, each for a few microseconds: looking every [`LINGER_NS`]
/// costs one wake-up per period, where waking for each of them would
/// cost an eventfd write and a wake-up per linger); otherwise tells
/// lingering threads to wake the service thread (`service_idle`), then
/// looks again.
fn linger_bound(shared: &Shared, timeout: Option<u64>) -> Option<u64> {
    let bounded = |t: Option<u64>| Some(t.map_or(LINGER_NS, |t| t.min(LINGER_NS)));
    if shared.lingered_lately() {
        return bounded(timeout);
    }
    // Announced before the flags are looked at (see `Shared::linger`),
    // for any sleep longer than a look's period: a ring that starts to
    // linger during a 10 ms sleep kept for away rings must not wait it out.
    if timeout.is_none_or(|t| t > LINGER_NS) {
        shared.service_idle.store(true, Ordering::SeqCst);
    }
    if shared.any_lingering() {
        shared.service_idle.store(false, Ordering::SeqCst);
        return bounded(timeout);
    }
    timeout
}

/// One turn: own completions, the timer, dispatching, away rings.
/// Returns whether anything happened, and how long the next wait may
/// last (bounded while rings whose owner is away hold requests: a safety
/// net should a notification be missed, and a retry for a ring whose lock
/// was busy).
fn turn(
    shared: &Shared,
    ring: &Ring,
    st: &mut RingState,
    rings: &mut Vec<Arc<Ring>>,
) -> (bool, Option<u64>) {
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
    shared.cancel_if_stopping(ring, st);
    let mut timeout = None;
    if std::mem::take(&mut st.woken) {
        busy = true;
        timeout = scan_rings(shared, ring, st, rings);
    } else if shared.away_in_flight.load(Ordering::SeqCst) || shared.any_lingering() {
        timeout = scan_rings(shared, ring, st, rings);
    }
    (busy, timeout)
}

/// Reaps the rings whose owner is away (or gone), takes over lingering
/// rings whose owner has not been back since the last look, sends
/// cancellations in a `Cancel` shutdown, and forgets rings of exited
/// threads once empty. Returns the bound of the next wait: [`RETRY_NS`]
/// if an away ring's lock was busy, [`SAFETY_NS`] while away rings hold
/// requests.
fn scan_rings(
    shared: &Shared,
    s: &Ring,
    ss: &mut RingState,
    rings: &mut Vec<Arc<Ring>>,
) -> Option<u64> {
    {
        let mut all = shared.rings.lock().unwrap_or_else(|p| p.into_inner());
        all.retain(|x| !(x.dead.load(Ordering::SeqCst) && x.in_flight.load(Ordering::SeqCst) == 0));
        rings.clear();
        rings.extend(all.iter().cloned());
    }
    // Cleared first: an owner leaving during the scan sets it again.
    shared.away_in_flight.store(false, Ordering::SeqCst);
    let (mut retry, mut pending) = (false, false);
    for x in rings.iter() {
        let away = x.away.load(Ordering::SeqCst);
        if !away && x.lingering.load(Ordering::SeqCst) && came_back(x) {
            continue;
        }
        // A busy owner reaps its own ring; one that is leaving is retried
        // shortly (never waited for: it may go to sleep in its ring).
        let Ok(mut xs) = x.st.try_lock() else {
            retry |= away;
            continue;
        };
        if x.lingering.load(Ordering::SeqCst) {
            if came_back(x)
                || (x.bound.load(Ordering::Relaxed) && !shared.owner_unresponsive(x, &mut xs))
            {
                continue;
            }
            if x.bound.load(Ordering::Relaxed) {
                shared.bound_takeovers.fetch_add(1, Ordering::Relaxed);
            }
            shared.take_over(x, &mut xs);
        }
        shared.reap_for_owner(x, &mut xs, s, ss);
        shared.cancel_if_stopping(x, &mut xs);
        pending |= x.away.load(Ordering::SeqCst) && x.in_flight.load(Ordering::SeqCst) > 0;
    }
    rings.clear();
    if pending || retry {
        shared.away_in_flight.store(true, Ordering::SeqCst);
    }
    if retry {
        Some(RETRY_NS)
    } else if pending {
        Some(SAFETY_NS)
    } else {
        None
    }
}

/// Whether a lingering ring's owner has been in the engine since the
/// service thread last looked (and notes this look).
fn came_back(x: &Ring) -> bool {
    let v = x.visits.load(Ordering::SeqCst);
    x.seen.swap(v, Ordering::SeqCst) != v
}

/// How often the service thread looks at lingering rings: a ring whose
/// owner has not been back for one such period (so 1-2 ms) is taken over
/// (its plug submitted, its completions reaped by the service thread).
pub(crate) const LINGER_NS: u64 = 1_000_000;

/// How soon a ring whose lock was busy is looked at again.
const RETRY_NS: u64 = 50_000;
/// The longest the service thread sleeps while rings whose owner is away
/// hold requests (their completions notify it; this bounds the cost of a
/// missed notification).
const SAFETY_NS: u64 = 10_000_000;

/// Blocks in the service ring until a completion, a notify or the timer
/// (bounded by the wake relay's deadline when waiters wait there).
fn wait(shared: &Shared, st: &mut RingState, timeout: Option<u64>) {
    if shared.relay.is_empty() {
        enter_and_wait(st, timeout);
    } else {
        let t = timeout.map_or(RELAY_MAX_WAIT_NS, |t| t.min(RELAY_MAX_WAIT_NS));
        enter_and_wait(st, Some(t));
        shared.relay.drain();
    }
}
