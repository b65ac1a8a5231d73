//! `EngineStats` add up: every request issued is counted exactly once,
//! as completed (ok or error), cancelled, refused at the bound, refused
//! as invalid, or failed because the scheduler panicked, and each count
//! matches the results the callers saw. NOP engines and pipes; no
//! assertion depends on timing.

use bfq_core::{Dispatch, Fifo, Hooked, Hooks, Request, SchedError, Scheduler, Time};
use bfq_engine::{Engine, EngineStats, FileTarget, Flow, FlowOptions, Pending, ShutdownMode};
use bfq_engine::{IoResult, SubmitMode};
use std::collections::BTreeMap;
use std::io::{self, Write};

mod common;
use common::pipe;

const MODES: [SubmitMode; 2] = [SubmitMode::Local, SubmitMode::Dispatcher];

/// What callers saw, by the class `EngineStats` counts it in.
#[derive(Default, Debug)]
struct Seen {
    issued: u64,
    by: BTreeMap<&'static str, u64>,
}

impl Seen {
    fn note<B>(&mut self, r: IoResult<B>) {
        let class = match r.0 {
            Ok(_) => "ok",
            Err(e) if e.raw_os_error() == Some(libc::ECANCELED) => "ECANCELED",
            Err(e) if e.raw_os_error().is_some() => "os error",
            Err(e) => match e.kind() {
                io::ErrorKind::WouldBlock => "WouldBlock",
                io::ErrorKind::InvalidInput => "InvalidInput",
                io::ErrorKind::BrokenPipe => "BrokenPipe",
                _ => "other",
            },
        };
        self.issued += 1;
        *self.by.entry(class).or_default() += 1;
    }

    fn wait_all<B: Send + 'static>(&mut self, ps: Vec<Pending<B>>) {
        for p in ps {
            self.note(p.wait());
        }
    }

    fn get(&self, class: &str) -> u64 {
        self.by.get(class).copied().unwrap_or(0)
    }

    /// The counters add up to the requests issued, and each matches what
    /// the callers saw. `cancel_on_device`: `ECANCELED` results that
    /// count as completed with an error (cancelled on the device).
    fn check(&self, s: &EngineStats, cancel_on_device: u64, what: &str) {
        let sum = s.completed + s.cancelled + s.refused_full + s.refused_invalid + s.broken;
        assert_eq!(s.held, 0, "{what}: {s:?}");
        assert_eq!(sum, self.issued, "{what}: {s:?} against {self:?}");
        assert_eq!(self.get("other"), 0, "{what}: {self:?}");
        let device_errors = self.get("os error") + cancel_on_device;
        assert_eq!(
            s.completed,
            self.get("ok") + device_errors,
            "{what}: {s:?} {self:?}"
        );
        assert_eq!(s.errors, device_errors, "{what}: {s:?} {self:?}");
        assert_eq!(
            s.cancelled + cancel_on_device,
            self.get("ECANCELED"),
            "{what}"
        );
        assert_eq!(s.refused_full, self.get("WouldBlock"), "{what}: {s:?}");
        assert_eq!(s.refused_invalid, self.get("InvalidInput"), "{what}: {s:?}");
        assert_eq!(s.broken, self.get("BrokenPipe"), "{what}: {s:?}");
    }
}

/// A FIFO that refuses every request at an odd sector (as a scheduler
/// refuses bad input).
struct OddRefused;

impl Hooks<Fifo> for OddRefused {
    fn add_request(&mut self, inner: &mut Fifo, now: Time, req: Request) -> Result<(), SchedError> {
        if req.sector % 2 == 1 {
            return Err(SchedError::UnknownFlow(req.flow));
        }
        inner.add_request(now, req)
    }
}

/// Requests of every kind of end: served, failed by the kernel, refused
/// as invalid by the engine and by the scheduler, refused at the bound,
/// submitted after a shutdown began.
fn every_end(flow: &Flow, seen: &mut Seen) {
    for i in 0..40 {
        seen.note(flow.nop_async(2 * i, 1).wait());
    }
    // Refused by the scheduler.
    for i in 0..7 {
        seen.note(flow.nop_async(2 * i + 1, 1).wait());
    }
    // Refused by the engine: 4 GiB or more, ending past 2^64 bytes.
    seen.note(flow.nop_async(0, u32::MAX).wait());
    seen.note(flow.nop_async(u64::MAX / 512, 8).wait());
    seen.note(flow.read(u64::MAX - 4095, vec![0u8; 8192]));
    // The kernel's error: a read of a pipe's write end (EBADF).
    let (_t, w) = pipe();
    let wt = FileTarget::new(w, 0);
    for _ in 0..5 {
        seen.note(flow.read_file_async(&wt, 0, vec![0u8; 1]).wait());
    }
    // Refused at the bound (8): reads of pipes nobody has written to yet
    // are held until the test writes them.
    let (mut ps, mut ws, mut ts) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..8 {
        let (t, w) = pipe();
        ps.push(flow.read_file_async(&t, 0, vec![0u8; 1]));
        ws.push(w);
        ts.push(t);
    }
    for i in 0..3 {
        seen.note(flow.nop_async(2 * i, 1).wait());
    }
    for w in &mut ws {
        w.write_all(b"x").unwrap();
    }
    seen.wait_all(ps);
}

#[test]
fn the_counters_add_up_to_the_requests_issued() {
    for mode in MODES {
        let engine = Engine::nop()
            .submit_mode(mode)
            .max_requests(8)
            .scheduler_instance(Box::new(Hooked::new(Fifo::new(), OddRefused)))
            .open()
            .unwrap();
        let flow = engine.flow(FlowOptions::weight(100)).unwrap();
        let mut seen = Seen::default();
        every_end(&flow, &mut seen);
        let s = engine.stats().unwrap();
        seen.check(&s, 0, &format!("{mode:?} running"));
        assert_eq!(s.refused_full, 3, "{mode:?}: {s:?}");
        assert_eq!(s.refused_invalid, 10, "{mode:?}: {s:?}");
        assert_eq!(s.errors, 5, "{mode:?}: {s:?}");
        let s = engine.shutdown(ShutdownMode::Drain).unwrap();
        seen.check(&s, 0, &format!("{mode:?} shut down"));
        // Requests after the engine stopped are refused; the flow outlived
        // the engine, the counters are final.
        let (r, ()) = flow.nop_async(0, 1).wait();
        assert!(r.is_err());
    }
}

/// Requests queued at a `Cancel` shutdown are `cancelled`; one on the
/// device (a read of a pipe nobody writes) is cancelled there and counts
/// as completed with an error.
#[test]
fn a_cancel_shutdown_counts_each_request_once() {
    for mode in MODES {
        let engine = Engine::nop()
            .submit_mode(mode)
            .queue_depth(1)
            .open()
            .unwrap();
        let flow = engine.flow(FlowOptions::weight(100)).unwrap();
        let mut seen = Seen::default();
        let (t, _w) = pipe();
        let stuck = flow.read_file_async(&t, 0, vec![0u8; 1]);
        assert!(!stuck.is_done());
        let queued: Vec<_> = (0..10).map(|i| flow.nop_async(i, 1)).collect();
        // Submitted in the plug, flushed (queued behind the stuck read).
        assert!(queued.iter().all(|p| !p.is_done()), "{mode:?}");
        let s = engine.shutdown(ShutdownMode::Cancel).unwrap();
        seen.note(stuck.wait());
        seen.wait_all(queued);
        // In dispatcher mode the service thread may not have dispatched
        // the stuck read yet: then it is cancelled before the device too.
        assert!(s.completed <= 1, "{mode:?}: {s:?}");
        seen.check(&s, s.completed, &format!("{mode:?}"));
        if mode == SubmitMode::Local {
            assert_eq!((s.cancelled, s.completed), (10, 1), "{s:?}");
        }
    }
}

/// A FIFO that panics at its `at`-th `add_request` (`in_dispatch` false)
/// or at the first `dispatch` once `at` requests were added.
struct PanicsAt {
    at: u64,
    added: u64,
    in_dispatch: bool,
}

impl Hooks<Fifo> for PanicsAt {
    fn add_request(&mut self, inner: &mut Fifo, now: Time, req: Request) -> Result<(), SchedError> {
        self.added += 1;
        if !self.in_dispatch && self.added == self.at {
            panic!("test scheduler panics in add_request (expected)");
        }
        inner.add_request(now, req)
    }
    fn dispatch(&mut self, inner: &mut Fifo, now: Time) -> Dispatch {
        if self.in_dispatch && self.added >= self.at {
            panic!("test scheduler panics in dispatch (expected)");
        }
        inner.dispatch(now)
    }
}

/// After a scheduler's panic (in `add_request`, in `dispatch`) the
/// requests it failed, and those submitted later, are `broken`, as many
/// as the `BrokenPipe` results; requests on the device complete.
#[test]
fn a_scheduler_panic_counts_each_request_once() {
    for mode in MODES {
        for in_dispatch in [false, true] {
            let hooks = PanicsAt {
                at: 50,
                added: 0,
                in_dispatch,
            };
            let engine = Engine::nop()
                .submit_mode(mode)
                .queue_depth(2)
                .scheduler_instance(Box::new(Hooked::new(Fifo::new(), hooks)))
                .open()
                .unwrap();
            let flow = engine.flow(FlowOptions::weight(100)).unwrap();
            let mut seen = Seen::default();
            let ps: Vec<_> = (0..100).map(|i| flow.nop_async(i, 1)).collect();
            seen.wait_all(ps);
            let what = format!("{mode:?} in_dispatch={in_dispatch}");
            let s = engine.stats().unwrap();
            seen.check(&s, 0, &what);
            assert!(s.broken >= 50, "{what}: {s:?}");
            let s = engine.shutdown(ShutdownMode::Drain).unwrap();
            seen.check(&s, 0, &what);
        }
    }
}
