//! The bound on the requests the engine holds (`EngineBuilder::max_requests`):
//! a request beyond it fails at once with its buffer, and every request
//! gives its count back exactly once, whatever its end. NOP engines and
//! pipes (a read of a pipe nobody writes to is held until the test
//! writes); no assertion depends on timing.

use bfq_core::{Fifo, Hooked, Hooks, Request, SchedError, Scheduler, Time};
use bfq_engine::{Engine, FileTarget, Flow, FlowOptions, ShutdownMode, SubmitMode};
use std::fs::File;
use std::io::{self, Write};

mod common;
use common::pipe;

const MODES: [SubmitMode; 2] = [SubmitMode::Local, SubmitMode::Dispatcher];

/// `n` reads of one byte each, of pipes nobody has written to yet: held
/// by the engine until the test writes their pipes.
fn held_reads(
    flow: &Flow,
    n: usize,
) -> (
    Vec<bfq_engine::Pending<Vec<u8>>>,
    Vec<File>,
    Vec<FileTarget>,
) {
    let (mut ps, mut ws, mut ts) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..n {
        let (t, w) = pipe();
        ps.push(flow.read_file_async(&t, 0, vec![0u8; 1]));
        ws.push(w);
        ts.push(t);
    }
    (ps, ws, ts)
}

fn assert_refused<B: std::fmt::Debug + PartialEq>(r: io::Result<usize>, buf: B, want: B, k: u32) {
    let e = r.expect_err("a request beyond the bound");
    assert_eq!(e.kind(), io::ErrorKind::WouldBlock, "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains(&format!("({k}, EngineBuilder::max_requests)")),
        "{msg}"
    );
    assert_eq!(buf, want, "the buffer comes back");
}

/// With `max_requests(k)` and k requests held (in the plug, queued, on the
/// device), the next one fails at once, async or blocking, with its
/// buffer; once the k are done, k new ones are taken again.
#[test]
fn a_request_beyond_the_bound_fails_at_once_and_the_count_comes_back() {
    const K: u32 = 4;
    for mode in MODES {
        let engine = Engine::nop()
            .submit_mode(mode)
            .queue_depth(2)
            .max_requests(K)
            .open()
            .unwrap();
        let flow = engine.flow(FlowOptions::weight(100)).unwrap();
        let (held, mut ws, _ts) = held_reads(&flow, K as usize);
        assert_eq!(engine.stats().unwrap().held, u64::from(K), "{mode:?}");
        // Beyond the bound: the result is in at once.
        let (t, _w) = pipe();
        let p = flow.read_file_async(&t, 0, vec![7u8; 3]);
        assert!(p.is_done(), "{mode:?}: refused at once");
        let (r, buf) = p.wait();
        assert_refused(r, buf, vec![7u8; 3], K);
        let (r, buf) = flow.read(0, vec![9u8; 512]);
        assert_refused(r, buf, vec![9u8; 512], K);
        let (r, ()) = flow.nop_async(0, 1).wait();
        assert_refused(r, (), (), K);
        let s = engine.stats().unwrap();
        assert_eq!((s.held, s.refused_full), (u64::from(K), 3), "{mode:?}");
        // The first k complete: their counts come back before their
        // results are seen.
        for w in &mut ws {
            w.write_all(b"x").unwrap();
        }
        for p in held {
            let (r, buf) = p.wait();
            assert_eq!((r.unwrap(), buf), (1, vec![b'x']), "{mode:?}");
        }
        assert_eq!(engine.stats().unwrap().held, 0, "{mode:?}");
        let again: Vec<_> = (0..K).map(|i| flow.nop_async(u64::from(i), 1)).collect();
        for p in again {
            assert_eq!(p.wait().0.unwrap(), 512, "{mode:?}: taken again");
        }
        drop(flow);
        let s = engine.shutdown(ShutdownMode::Drain).unwrap();
        assert_eq!((s.held, s.refused_full), (0, 3), "{mode:?}");
    }
}

/// A `Cancel` shutdown with requests in flight, queued in the scheduler
/// and in a thread's plug gives every count back.
#[test]
fn a_cancel_shutdown_gives_every_count_back() {
    for mode in MODES {
        let engine = Engine::nop()
            .submit_mode(mode)
            .queue_depth(2)
            .max_requests(8)
            .open()
            .unwrap();
        let flow = engine.flow(FlowOptions::weight(100)).unwrap();
        let (mut ps, _ws, _ts) = held_reads(&flow, 5);
        // Hands this thread's plug to the scheduler: 2 on the device, 3
        // queued.
        assert!(!ps[0].is_done());
        let (more, _ws2, _ts2) = held_reads(&flow, 3);
        ps.extend(more);
        assert!(
            flow.nop_async(0, 1).is_done(),
            "{mode:?}: the ninth is refused"
        );
        assert_eq!(engine.stats().unwrap().held, 8, "{mode:?}");
        drop(flow);
        let s = engine.shutdown(ShutdownMode::Cancel).unwrap();
        assert_eq!(s.held, 0, "{mode:?}: {s:?}");
        for p in ps {
            let (r, buf) = p.wait();
            assert_eq!(r.unwrap_err().raw_os_error(), Some(libc::ECANCELED));
            assert_eq!(buf.len(), 1);
        }
    }
}

/// A FIFO that refuses every request at an odd sector (as a scheduler
/// refuses bad input) and panics when asked to dispatch a request at
/// sector 1000.
struct Refusing;

impl Hooks<Fifo> for Refusing {
    fn add_request(&mut self, inner: &mut Fifo, now: Time, req: Request) -> Result<(), SchedError> {
        if req.sector % 2 == 1 {
            return Err(SchedError::UnknownFlow(req.flow));
        }
        inner.add_request(now, req)
    }
    fn dispatch(&mut self, inner: &mut Fifo, now: Time) -> bfq_core::Dispatch {
        match inner.dispatch(now) {
            bfq_core::Dispatch::Request(r) if r.sector == 1000 => {
                panic!("test scheduler panics (expected)")
            }
            d => d,
        }
    }
}

/// Requests that fail (refused by the scheduler, failed by the kernel,
/// failed by the core after the scheduler's panic) give their counts
/// back: with a bound of 2, twenty failures waited for one by one leave
/// room for two requests.
#[test]
fn failed_requests_give_their_counts_back() {
    for mode in MODES {
        let engine = Engine::nop()
            .submit_mode(mode)
            .max_requests(2)
            .scheduler_instance(Box::new(Hooked::new(Fifo::new(), Refusing)))
            .open()
            .unwrap();
        let flow = engine.flow(FlowOptions::weight(100)).unwrap();
        for i in 0..20 {
            let (r, ()) = flow.nop_async(2 * i + 1, 1).wait();
            assert_eq!(r.unwrap_err().kind(), io::ErrorKind::InvalidInput);
        }
        // A read of a pipe's write end: the kernel's EBADF.
        let (_t, w) = pipe();
        let wt = FileTarget::new(w, 0);
        for _ in 0..20 {
            let (r, _) = flow.read_file_async(&wt, 0, vec![0u8; 1]).wait();
            assert_eq!(r.unwrap_err().raw_os_error(), Some(libc::EBADF));
        }
        assert_eq!(engine.stats().unwrap().held, 0, "{mode:?}");
        let both: Vec<_> = (0..2).map(|i| flow.nop_async(2 * i, 1)).collect();
        for p in both {
            assert_eq!(p.wait().0.unwrap(), 512, "{mode:?}");
        }
        // The scheduler panics: the request queued behind the panicking
        // dispatch fails with it, later ones at once.
        let (t, mut w) = pipe();
        let first = flow.read_file_async(&t, 0, vec![0u8; 1]);
        let dies = flow.nop_async(1000, 1);
        assert!(!first.is_done(), "{mode:?}: nobody wrote to the pipe");
        w.write_all(b"x").unwrap();
        assert!(dies.wait().0.is_err(), "{mode:?}");
        let _ = first.wait();
        for _ in 0..5 {
            let (r, ()) = flow.nop_async(0, 1).wait();
            assert_eq!(r.unwrap_err().kind(), io::ErrorKind::BrokenPipe, "{mode:?}");
        }
        assert_eq!(engine.stats().unwrap().held, 0, "{mode:?}");
        drop(flow);
        engine.shutdown(ShutdownMode::Drain).unwrap();
    }
}

/// A flow dropped with requests in flight, and a thread that exits with
/// requests in its plug: their counts come back when they complete.
#[test]
fn requests_outliving_their_flow_or_thread_give_their_counts_back() {
    for mode in MODES {
        let engine = std::sync::Arc::new(
            Engine::nop()
                .submit_mode(mode)
                .max_requests(3)
                .open()
                .unwrap(),
        );
        let flow = engine.flow(FlowOptions::weight(100)).unwrap();
        let (ps, mut ws, _ts) = held_reads(&flow, 3);
        drop(flow);
        for w in &mut ws {
            w.write_all(b"x").unwrap();
        }
        for p in ps {
            assert_eq!(p.wait().0.unwrap(), 1, "{mode:?}");
        }
        assert_eq!(engine.stats().unwrap().held, 0, "{mode:?}");
        // The flow outlives the thread: the thread leaves its requests
        // in its plug when it exits.
        let flow = std::sync::Arc::new(engine.flow(FlowOptions::weight(100)).unwrap());
        let f = flow.clone();
        let plugged =
            std::thread::spawn(move || (0..3).map(|i| f.nop_async(i, 1)).collect::<Vec<_>>())
                .join()
                .unwrap();
        for p in plugged {
            assert_eq!(p.wait().0.unwrap(), 512, "{mode:?}");
        }
        assert_eq!(engine.stats().unwrap().held, 0, "{mode:?}");
    }
}

/// `open` refuses a bound of 0 and one above 2^22, naming the range.
#[test]
fn open_refuses_a_bound_out_of_range() {
    for n in [0, (1 << 22) + 1, u32::MAX] {
        let e = Engine::nop().max_requests(n).open().err().expect("refused");
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("1..=4194304"), "{e}");
    }
    for n in [1, 1 << 22] {
        let engine = Engine::nop().max_requests(n).open().unwrap();
        let flow = engine.flow(FlowOptions::weight(100)).unwrap();
        assert_eq!(flow.nop_async(0, 1).wait().0.unwrap(), 512);
    }
}

/// `open` refuses every numeric setting outside its documented range,
/// naming the setting and the range, instead of clamping it.
#[test]
fn open_refuses_settings_out_of_range() {
    type Case = (fn() -> bfq_engine::EngineBuilder, &'static str);
    let cases: [Case; 5] = [
        (
            || Engine::nop().queue_depth(0),
            "queue_depth=0: must be in 1..=4096",
        ),
        (
            || Engine::nop().queue_depth(4097),
            "queue_depth=4097: must be in 1..=4096",
        ),
        (
            || Engine::nop().service_nice(-21),
            "service_nice=-21: must be in -20..=19",
        ),
        (
            || Engine::nop().service_nice(20),
            "service_nice=20: must be in -20..=19",
        ),
        (
            || Engine::nop().sqpoll(60_001),
            "sqpoll=60001: must be in 0..=60000",
        ),
    ];
    for (builder, says) in cases {
        let e = builder().open().err().expect("refused");
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains(says), "{e}");
    }
    for depth in [1, 4096] {
        let engine = Engine::nop().queue_depth(depth).open().unwrap();
        assert_eq!(engine.device_info().queue_depth, depth);
    }
}
