//! `wait_any`: a thread with several requests out wakes for whichever
//! completes first, in both submit modes; in dispatcher mode every
//! completion is reported by another thread, so the wait must be
//! registered with each request still out, not only with the first. No
//! assertion depends on timing (the timeout only turns a hang into a
//! failure).

mod common;
use bfq_engine::{wait_any, Engine, FlowOptions, Pending, ShutdownMode, SubmitMode};
use common::pipe;
use std::io::Write;
use std::sync::{mpsc, Arc};
use std::time::Duration;

const HANG: Duration = Duration::from_secs(60);

/// Whether thread `tid` of this process is asleep (state `S`).
fn asleep(tid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap_or_default();
    // The state follows the command name, which is in parentheses.
    stat.rsplit_once(") ")
        .is_some_and(|(_, rest)| rest.starts_with('S'))
}

/// Waits until `cond` holds (a hang turns into a failure).
fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let give_up = std::time::Instant::now() + HANG;
    while !cond() {
        assert!(std::time::Instant::now() < give_up, "{what} never happened");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Two reads out, the first of a pipe nobody writes yet: `wait_any`
/// sleeps, returns the second once it has its data, then the first once
/// it has.
#[test]
fn wakes_for_whichever_request_completes_first() {
    for mode in [SubmitMode::Local, SubmitMode::Dispatcher] {
        let engine = Arc::new(Engine::nop().submit_mode(mode).open().unwrap());
        let ((ta, mut wa), (tb, mut wb)) = (pipe(), pipe());
        let (tx, rx) = mpsc::channel();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let e = engine.clone();
        let t = std::thread::spawn(move || {
            // SAFETY: plain syscall.
            tx.send(Some(unsafe { libc::gettid() } as usize)).unwrap();
            let flow = e.flow(FlowOptions::default()).unwrap();
            let reqs: Vec<Pending<Vec<u8>>> = vec![
                flow.read_file_async(&ta, 0, vec![0u8; 64]),
                flow.read_file_async(&tb, 0, vec![0u8; 64]),
            ];
            tx.send(wait_any(&reqs)).unwrap();
            go_rx.recv().unwrap();
            tx.send(wait_any(&reqs[..1])).unwrap();
            let got: Vec<usize> = reqs.into_iter().map(|p| p.wait().0.unwrap()).collect();
            assert_eq!(got, vec![64, 64]);
            assert_eq!(wait_any(&Vec::<Pending<Vec<u8>>>::new()), None);
        });
        let tid = rx.recv_timeout(HANG).unwrap().unwrap() as i32;
        // Both reads are out and the thread sleeps in `wait_any`.
        until("both reads in flight", || {
            engine.stats().unwrap().in_flight == 2
        });
        until("the waiting thread asleep", || asleep(tid));
        wb.write_all(&[2; 64]).unwrap();
        let first = rx.recv_timeout(HANG);
        assert_eq!(first, Ok(Some(1)), "{mode:?}: the second read's completion");
        wa.write_all(&[1; 64]).unwrap();
        go_tx.send(()).unwrap();
        assert_eq!(
            rx.recv_timeout(HANG),
            Ok(Some(0)),
            "{mode:?}: the first read"
        );
        t.join().unwrap();
        let engine = Arc::try_unwrap(engine).ok().unwrap();
        engine.shutdown(ShutdownMode::Drain).unwrap();
    }
}
