//! The private ring (`EngineBuilder::private_rings`): a thread's lone
//! blocking wait submits its request on a ring only that thread can reap
//! (`IORING_SETUP_SINGLE_ISSUER | DEFER_TASKRUN`). These tests check that
//! it is used where it may be, and that nothing another thread waits for
//! is ever left on it: requests the waiting thread dispatches for others
//! still complete when it then blocks on something else or exits, and a
//! `Cancel` shutdown reaches the request it waits for. No assertion
//! depends on timing (the timeouts only turn a hang into a failure); a
//! thread descheduled between submitting and waiting may have its ring
//! taken over by the service thread, and those cases are tried again.

mod common;
use bfq_engine::{Engine, FlowOptions, ShutdownMode};
use common::pipe;
use std::sync::mpsc;
use std::time::Duration;

const HANG: Duration = Duration::from_secs(60);

fn tmpfile(size: u64) -> tempfile::NamedTempFile {
    let f = tempfile::NamedTempFile::new_in(std::env::temp_dir()).unwrap();
    f.as_file().set_len(size).unwrap();
    f
}

/// Whether the kernel sets up rings with `DEFER_TASKRUN` (Linux 6.1 and
/// later); without it the engine waits on the thread's ring instead.
fn private_rings_available() -> bool {
    // SAFETY: uname fills the zeroed struct.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut u) } != 0 {
        return false;
    }
    // SAFETY: `release` is NUL-terminated by uname.
    let rel = unsafe { std::ffi::CStr::from_ptr(u.release.as_ptr()) };
    let mut parts = rel.to_str().unwrap_or("").split(['.', '-']);
    let major: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let minor: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    (major, minor) >= (6, 1)
}

/// Skips a test (with a message) on kernels without private rings.
macro_rules! require_private_rings {
    () => {
        if !private_rings_available() {
            eprintln!("skipped: the kernel has no IORING_SETUP_DEFER_TASKRUN (Linux < 6.1)");
            return;
        }
    };
}

/// Polls the engine's counters until `what` holds (a guard against
/// hangs, not a measurement).
fn until(engine: &Engine, what: &str, f: impl Fn(&bfq_engine::EngineStats) -> bool) {
    let t0 = std::time::Instant::now();
    while !f(&engine.stats().unwrap()) {
        assert!(t0.elapsed() < HANG, "never: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Blocking reads and writes of a thread with nothing else outstanding
/// wait on its private ring, and move the right bytes; a thread with
/// several requests outstanding, or an engine built without private
/// rings, does not use it.
#[test]
fn lone_blocking_requests_wait_on_the_private_ring() {
    require_private_rings!();
    let f = tmpfile(1 << 20);
    for private in [true, false] {
        let engine = Engine::builder(f.path())
            .writable(true)
            .direct(false)
            .queue_depth(8)
            .private_rings(private)
            .open()
            .unwrap();
        let flow = engine.flow(FlowOptions::default()).unwrap();
        for i in 0..64u64 {
            let data = vec![i as u8 + 1; 4096];
            let (res, _) = flow.write(i * 4096, data);
            assert_eq!(res.unwrap(), 4096);
        }
        for i in 0..64u64 {
            let (res, buf) = flow.read(i * 4096, vec![0u8; 4096]);
            assert_eq!(res.unwrap(), 4096);
            assert!(buf.iter().all(|&b| b == i as u8 + 1), "block {i}");
        }
        let lone = engine.stats().unwrap().private_waits;
        assert_eq!(lone, if private { 128 } else { 0 });
        // Four outstanding: every wait leaves others in flight.
        let mut q = std::collections::VecDeque::new();
        for i in 0..64u64 {
            q.push_back(flow.read_async(i * 4096, vec![0u8; 4096]));
            if q.len() == 4 {
                let (res, buf) = q.pop_front().unwrap().wait();
                assert_eq!(res.unwrap(), 4096);
                assert_eq!(buf[0], (i - 3) as u8 + 1);
            }
        }
        // Newest first: its wait flushes the plug with the others still
        // outstanding. (Oldest first, the newest could be left alone in
        // the plug, with nothing else outstanding, whenever the waits
        // before it found their results already in; its wait would then
        // rightly be a lone one.)
        for p in q.into_iter().rev() {
            assert_eq!(p.wait().0.unwrap(), 4096);
        }
        let s = engine.shutdown(ShutdownMode::Drain).unwrap();
        assert_eq!(s.private_waits, lone, "private_rings({private})");
        assert_eq!(s.completed, 192);
    }
}

/// Thread A waits on its private ring; B's request is queued behind it
/// (queue depth 1). A's completion dispatches B's request, on A's own
/// ring: A then blocks on something else (waiting for B) or exits. B's
/// request must still complete: it must not be left where only A could
/// reap it (the private ring: B would hang, and A with it).
#[test]
fn requests_dispatched_for_others_complete_when_the_waiter_blocks_or_exits() {
    require_private_rings!();
    for exits in [false, true] {
        assert!(
            (0..ATTEMPTS).any(|_| a_and_b(exits)),
            "A's wait never went to its private ring"
        );
    }
}

/// Tries each case this many times: a thread descheduled for more than
/// the take-over period between submitting and waiting has its ring
/// taken over by the service thread, and its wait is no longer lone.
const ATTEMPTS: usize = 20;

/// Waits until the thread's blocking wait is on its private ring, or its
/// ring was taken over (then returns false).
fn went_private(engine: &Engine, what: &str) -> bool {
    until(engine, what, |s| {
        s.private_waits == 1 || s.service_submits > 0
    });
    let private = engine.stats().unwrap().private_waits == 1;
    if !private {
        eprintln!("{what}: taken over by the service thread before the wait; again");
    }
    private
}

/// One run of the case above; false if A's wait did not go private.
fn a_and_b(exits: bool) -> bool {
    let engine = std::sync::Arc::new(Engine::nop().queue_depth(1).open().unwrap());
    let ((ta, mut wa), (tb, mut wb)) = (pipe(), pipe());
    let (b_tx, b_rx) = mpsc::channel::<i64>();
    let (m_tx, m_rx) = mpsc::channel::<i64>();
    let (a_tx, a_rx) = mpsc::channel::<i64>();
    let e = engine.clone();
    let a = std::thread::spawn(move || {
        let flow = e.flow(FlowOptions::default()).unwrap();
        let (res, _) = flow.read_file_async(&ta, 0, vec![0u8; 64]).wait();
        let _ = a_tx.send(res.map_or(-1, |n| n as i64));
        if !exits {
            // Blocks elsewhere, with B's request on its ring.
            if let Ok(b) = b_rx.recv_timeout(HANG) {
                let _ = a_tx.send(b);
            }
        }
    });
    if !went_private(&engine, "A's read on its private ring") {
        drop(b_tx);
        std::io::Write::write_all(&mut wa, &[1; 64]).unwrap();
        assert_eq!(a_rx.recv_timeout(HANG).expect("A's read hung"), 64);
        a.join().unwrap();
        return false;
    }
    let e = engine.clone();
    let b = std::thread::spawn(move || {
        let flow = e.flow(FlowOptions::default()).unwrap();
        let (res, _) = flow.read_file_async(&tb, 0, vec![0u8; 64]).wait();
        let n = res.map_or_else(|e| -i64::from(e.raw_os_error().unwrap_or(0)), |n| n as i64);
        let _ = b_tx.send(n);
        let _ = m_tx.send(n);
    });
    until(&engine, "B's read queued", |s| s.queued == 1);
    std::io::Write::write_all(&mut wa, &[1; 64]).unwrap();
    assert_eq!(a_rx.recv_timeout(HANG).expect("A's read hung"), 64);
    let a = if exits {
        a.join().unwrap();
        None
    } else {
        Some(a)
    };
    // A is blocked on the channel (or gone): B's read completes now.
    std::io::Write::write_all(&mut wb, &[2; 64]).unwrap();
    if let Some(a) = a {
        let got = a_rx.recv_timeout(HANG);
        assert_eq!(got, Ok(64), "B's read, as A saw it");
        a.join().unwrap();
    }
    // A pipe read waits for data in a poll the kernel re-issues on
    // the task that submitted it: once that thread (A) has exited,
    // the kernel cancels it instead. It completes either way.
    let got = m_rx.recv_timeout(HANG).expect("B's read hung");
    let ok = if exits {
        got == 64 || got == -i64::from(libc::ECANCELED)
    } else {
        got == 64
    };
    assert!(ok, "B's read: {got} (exits: {exits})");
    b.join().unwrap();
    let engine = std::sync::Arc::try_unwrap(engine).ok().unwrap();
    let s = engine.shutdown(ShutdownMode::Drain).unwrap();
    assert_eq!((s.completed, s.private_waits), (2, 1), "exits: {exits}");
    true
}

/// A read that completes only when cancelled (a pipe nobody writes),
/// waited for on the thread's private ring: `shutdown(Cancel)` wakes the
/// thread there, which cancels it; shutdown returns and the read fails
/// with `ECANCELED`, its buffer back.
#[test]
fn cancel_reaches_a_request_on_a_private_ring() {
    require_private_rings!();
    assert!(
        (0..ATTEMPTS).any(|_| cancel_once()),
        "the read never waited on its private ring"
    );
}

/// One run of the case above; false if the wait did not go private (the
/// read is cancelled all the same).
fn cancel_once() -> bool {
    let (t, w) = pipe();
    let engine = Engine::nop().open().unwrap();
    let flow = engine.flow(FlowOptions::default()).unwrap();
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let (res, buf) = flow.read_file_async(&t, 0, vec![0u8; 64]).wait();
        let _ = tx.send((res.map_err(|e| e.raw_os_error()), buf.len()));
    });
    let private = went_private(&engine, "the read on the private ring");
    let (stx, srx) = mpsc::channel();
    let stopper = std::thread::spawn(move || {
        let _ = stx.send(
            engine
                .shutdown(ShutdownMode::Cancel)
                .map(|s| s.private_waits),
        );
    });
    let stats = srx.recv_timeout(HANG).expect("shutdown(Cancel) hung");
    assert_eq!(stats.unwrap(), u64::from(private));
    let got = rx.recv_timeout(HANG).expect("the read hung");
    assert_eq!(got, (Err(Some(libc::ECANCELED)), 64));
    reader.join().unwrap();
    stopper.join().unwrap();
    drop(w);
    private
}

/// A thread waits for a request another thread submitted while its own
/// one request is in its plug: the wait must not sleep on the private
/// ring (its own request, a pipe nobody writes yet, would keep it there
/// while the waited request's completion wakes the thread's ring).
#[test]
fn waiting_for_another_threads_request_does_not_use_the_private_ring() {
    let engine = std::sync::Arc::new(Engine::nop().open().unwrap());
    let ((ta, mut wa), (tb, mut wb)) = (pipe(), pipe());
    let (p_tx, p_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let e = engine.clone();
    let first = std::thread::spawn(move || {
        let flow = e.flow(FlowOptions::default()).unwrap();
        let p = flow.read_file_async(&ta, 0, vec![0u8; 64]);
        // Submitted (not only plugged) before it changes hands.
        assert!(!p.is_done());
        p_tx.send(p).unwrap();
        // Away from the engine until the test is over.
        let _ = done_rx.recv_timeout(HANG);
    });
    let p = p_rx.recv_timeout(HANG).expect("the first thread hung");
    let (r_tx, r_rx) = mpsc::channel();
    let e = engine.clone();
    let second = std::thread::spawn(move || {
        let flow = e.flow(FlowOptions::default()).unwrap();
        let mine = flow.read_file_async(&tb, 0, vec![0u8; 64]);
        let (res, _) = p.wait();
        let _ = r_tx.send(res.map_err(|e| e.raw_os_error()));
        mine.wait().0.map_err(|e| e.raw_os_error())
    });
    // The second thread is in `p.wait`'s block: its own read was flushed
    // there (before, the first read could complete before that wait).
    until(&engine, "the second thread blocked", |s| s.in_flight == 2);
    std::io::Write::write_all(&mut wa, &[1; 64]).unwrap();
    let got = r_rx.recv_timeout(HANG);
    std::io::Write::write_all(&mut wb, &[2; 64]).unwrap();
    assert_eq!(got, Ok(Ok(64)), "the other thread's read, as waited for");
    assert_eq!(second.join().unwrap(), Ok(64));
    done_tx.send(()).unwrap();
    first.join().unwrap();
    let engine = std::sync::Arc::try_unwrap(engine).ok().unwrap();
    let s = engine.shutdown(ShutdownMode::Drain).unwrap();
    assert_eq!(s.completed, 2);
    // The second thread's own read waits on its private ring only if the
    // other read was done before the second thread waited for it (its
    // own read then still in its plug, alone).
    assert!(s.private_waits <= 1, "{s:?}");
}

/// A thread waits for its own request B, which another thread's ring
/// carries, while a request A whose `Pending` it dropped is alone in its
/// plug: A is not the waited request, so the wait must not sleep on the
/// private ring with it (B's completion wakes the thread's ring, not the
/// private one; A, a pipe nobody writes, would keep the thread asleep).
#[test]
fn a_dropped_request_in_the_plug_does_not_take_the_wait_to_the_private_ring() {
    let engine = std::sync::Arc::new(Engine::nop().queue_depth(2).open().unwrap());
    let ((t1, mut w1), (t2, mut w2)) = (pipe(), pipe());
    let ((t3, mut w3), (t4, mut w4)) = (pipe(), pipe());
    let (u_done_tx, u_done_rx) = mpsc::channel::<()>();
    let (u_stay_tx, u_stay_rx) = mpsc::channel::<()>();
    let e = engine.clone();
    // U fills the device queue (depth 2), so T's B waits in the scheduler
    // and is dispatched later by U, on U's ring.
    let u = std::thread::spawn(move || {
        let flow = e.flow(FlowOptions::default()).unwrap();
        let x = flow.read_file_async(&t1, 0, vec![0u8; 64]);
        let y = flow.read_file_async(&t2, 0, vec![0u8; 64]);
        assert!(!x.is_done());
        assert_eq!(x.wait().0.unwrap(), 64);
        assert_eq!(y.wait().0.unwrap(), 64);
        u_done_tx.send(()).unwrap();
        let _ = u_stay_rx.recv_timeout(HANG);
    });
    until(&engine, "U's two reads in flight", |s| s.in_flight == 2);
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (b_tx, b_rx) = mpsc::channel::<i64>();
    let e = engine.clone();
    let t = std::thread::spawn(move || {
        let flow = e.flow(FlowOptions::default()).unwrap();
        let b = flow.read_file_async(&t3, 0, vec![0u8; 64]);
        assert!(!b.is_done());
        go_rx.recv_timeout(HANG).unwrap();
        drop(flow.read_file_async(&t4, 0, vec![0u8; 64]));
        let (res, _) = b.wait();
        let _ = b_tx.send(res.map_or(-1, |n| n as i64));
    });
    until(&engine, "B queued", |s| s.queued == 1);
    std::io::Write::write_all(&mut w1, &[1; 64]).unwrap();
    std::io::Write::write_all(&mut w2, &[2; 64]).unwrap();
    u_done_rx.recv_timeout(HANG).unwrap();
    until(&engine, "B on U's ring", |s| {
        s.queued == 0 && s.in_flight == 1
    });
    go_tx.send(()).unwrap();
    until(&engine, "A dispatched beside B", |s| s.in_flight == 2);
    std::io::Write::write_all(&mut w3, &[3; 64]).unwrap();
    let got = b_rx.recv_timeout(Duration::from_secs(5));
    // A's pipe is written in any case, so that a trapped wait ends.
    std::io::Write::write_all(&mut w4, &[4; 64]).unwrap();
    u_stay_tx.send(()).unwrap();
    u.join().unwrap();
    t.join().unwrap();
    assert_eq!(got, Ok(64), "B's wait slept on after B completed");
}
