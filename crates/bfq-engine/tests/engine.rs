//! Engine tests on regular files: no root needed. No assertion depends on
//! timing.

use bfq_core::{Dispatch, Fifo, GroupId, Hooked, Hooks, Scheduler, Time};
use bfq_engine::{block_on, AlignedBuf, Engine, FlowOptions, IoClass, ShutdownMode, SubmitMode};
use std::io;
use std::sync::Arc;

fn tmpfile(size: u64) -> tempfile::NamedTempFile {
    let f = tempfile::NamedTempFile::new_in(std::env::temp_dir()).unwrap();
    f.as_file().set_len(size).unwrap();
    f
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seed.wrapping_mul(31).wrapping_add(i as u64 * 7) % 251) as u8)
        .collect()
}

/// O_DIRECT where the filesystem supports it, buffered otherwise.
fn open_rw(path: &std::path::Path, sched: &str) -> Engine {
    match Engine::builder(path)
        .writable(true)
        .scheduler(sched)
        .queue_depth(8)
        .open()
    {
        Ok(e) => e,
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Engine::builder(path)
            .writable(true)
            .direct(false)
            .scheduler(sched)
            .open()
            .unwrap(),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn write_then_read_round_trip() {
    let f = tmpfile(1 << 20);
    let engine = open_rw(f.path(), "fifo");
    let flow = engine.flow(FlowOptions::weight(100)).unwrap();
    for i in 0..32u64 {
        let (r, _) = flow.write(i * 4096, AlignedBuf::from_slice(&pattern(i, 4096)));
        assert_eq!(r.unwrap(), 4096);
    }
    for i in 0..32u64 {
        let (r, buf) = flow.read(i * 4096, AlignedBuf::new(4096));
        assert_eq!(r.unwrap(), 4096);
        assert_eq!(&buf[..], &pattern(i, 4096)[..], "block {i}");
    }
    let stats = engine.shutdown(ShutdownMode::Drain).unwrap();
    assert_eq!(stats.errors, 0);
    assert_eq!(stats.completed, 64);
}

#[test]
fn buffered_with_vec_and_futures() {
    let f = tmpfile(256 << 10);
    let engine = Engine::builder(f.path())
        .writable(true)
        .direct(false)
        .open()
        .unwrap();
    let flow = engine
        .flow(FlowOptions::default().prio(IoClass::Rt, 2).sync(false))
        .unwrap();
    // Unaligned offsets and lengths are fine without O_DIRECT.
    let writes: Vec<_> = (0..20u64)
        .map(|i| flow.write_async(i * 1000 + 3, pattern(i, 1000)))
        .collect();
    block_on(async {
        for w in writes {
            let (r, buf) = w.await;
            assert_eq!(r.unwrap(), 1000);
            assert_eq!(buf.len(), 1000);
        }
    });
    let reads: Vec<_> = (0..20u64)
        .map(|i| (i, flow.read_async(i * 1000 + 3, vec![0u8; 1000])))
        .collect();
    for (i, p) in reads {
        let (r, buf) = block_on(p);
        assert_eq!(r.unwrap(), 1000);
        assert_eq!(buf, pattern(i, 1000));
    }
}

#[test]
fn errors_fail_only_their_request() {
    let f = tmpfile(64 << 10);
    let engine = open_rw(f.path(), "fifo");
    let direct = engine.block_size() > 0;
    let flow = engine.flow(FlowOptions::weight(10)).unwrap();
    // Short read at EOF: the last 4 KiB block is fine, the next crosses EOF.
    let (r, _) = flow.read(60 << 10, AlignedBuf::new(8192));
    let e = r.unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof, "{e}");
    // Reading entirely past EOF is a short (empty) read too.
    let (r, _) = flow.read(1 << 30, AlignedBuf::new(4096));
    assert_eq!(r.unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
    // Misaligned O_DIRECT offset: refused up front where the block is
    // known, else the kernel's EINVAL (or, on tmpfs, served).
    if direct {
        let (r, buf) = flow.read(100, AlignedBuf::new(4096));
        if let Err(e) = r {
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
        }
        assert_eq!(buf.len(), 4096, "buffer returned");
    }
    // The engine keeps serving.
    let (r, _) = flow.write(0, AlignedBuf::from_slice(&[1u8; 4096]));
    assert_eq!(r.unwrap(), 4096);

    // Writes to a read-only engine: refused, naming the option.
    let ro = Engine::builder(f.path()).direct(false).open().unwrap();
    let rf = ro.flow(FlowOptions::default()).unwrap();
    let (r, buf) = rf.write(0, vec![0u8; 512]);
    let e = r.unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
    assert!(e.to_string().contains("writable(true)"), "{e}");
    assert_eq!(buf.len(), 512, "buffer returned");
    let (r, buf) = rf.read(0, vec![0u8; 4096]);
    assert_eq!(r.unwrap(), 4096);
    assert_eq!(buf[0], 1);

    // Short reads as counts when asked.
    let short = Engine::builder(f.path())
        .direct(false)
        .allow_short(true)
        .open()
        .unwrap();
    let sf = short.flow(FlowOptions::default()).unwrap();
    let (r, _) = sf.read((64 << 10) - 100, vec![0u8; 4096]);
    assert_eq!(r.unwrap(), 100);

    // Bad scheduler input: invalid weight, unknown group.
    assert!(engine.flow(FlowOptions::weight(0)).is_err());
    assert!(engine
        .flow(FlowOptions::weight(5).group(GroupId(99)))
        .is_err());
    let g = engine.add_group(GroupId::ROOT, 200).unwrap();
    let gf = engine.flow(FlowOptions::weight(5).group(g)).unwrap();
    assert!(engine.remove_group(g).is_err(), "group not empty");
    drop(gf);
    // Missing target.
    let e = Engine::builder("/nonexistent/bfq-engine-test")
        .open()
        .err()
        .unwrap();
    assert_eq!(e.kind(), io::ErrorKind::NotFound);
    // Unknown scheduler.
    let e = Engine::builder(f.path())
        .scheduler("nope")
        .open()
        .err()
        .unwrap();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
}

#[test]
fn nothing_hangs_on_drop_or_cancel() {
    let f = tmpfile(4 << 20);
    let engine = Engine::builder(f.path())
        .direct(false)
        .queue_depth(1)
        .open()
        .unwrap();
    let flow = engine.flow(FlowOptions::weight(100)).unwrap();
    // Pending requests dropped unobserved, then the flow dropped.
    for i in 0..100u64 {
        drop(flow.read_async(i * 4096, vec![0u8; 4096]));
    }
    let flow2 = engine.flow(FlowOptions::weight(100)).unwrap();
    let kept: Vec<_> = (0..200u64)
        .map(|i| flow2.read_async(i * 4096, vec![0u8; 4096]))
        .collect();
    drop(flow);
    let stats = engine.shutdown(ShutdownMode::Cancel).unwrap();
    let _ = stats;
    let (mut ok, mut cancelled) = (0, 0);
    for p in kept {
        let (r, buf) = p.wait();
        assert_eq!(buf.len(), 4096, "every buffer comes back");
        match r {
            Ok(n) => {
                assert_eq!(n, 4096);
                ok += 1
            }
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(libc::ECANCELED), "{e}");
                cancelled += 1
            }
        }
    }
    assert_eq!(ok + cancelled, 200);
    // Submitting after shutdown fails at once and returns the buffer.
    let (r, buf) = flow2.read(0, vec![0u8; 512]);
    assert!(r.is_err());
    assert_eq!(buf.len(), 512);
}

#[test]
fn drain_shutdown_serves_everything() {
    let f = tmpfile(1 << 20);
    let engine = Engine::builder(f.path())
        .direct(false)
        .queue_depth(2)
        .open()
        .unwrap();
    let flow = engine.flow(FlowOptions::weight(100)).unwrap();
    let pend: Vec<_> = (0..256u64)
        .map(|i| flow.read_async(i * 4096, vec![0u8; 4096]))
        .collect();
    let stats = engine.shutdown(ShutdownMode::Drain).unwrap();
    let _ = stats;
    for p in pend {
        assert_eq!(p.wait().0.unwrap(), 4096);
    }
}

/// Requests still in the submitting thread's plug when a `Drain`
/// shutdown begins are served, not cancelled.
#[test]
fn drain_serves_requests_still_in_the_plug() {
    let engine = Engine::nop().open().unwrap();
    let flow = engine.flow(FlowOptions::default()).unwrap();
    // Fewer than a plug's worth: they wait in this thread's plug.
    let pend: Vec<_> = (0..5u64).map(|i| flow.nop_async(i * 8, 8)).collect();
    let stats = engine.shutdown(ShutdownMode::Drain).unwrap();
    assert_eq!((stats.completed, stats.cancelled), (5, 0));
    for p in pend {
        assert_eq!(p.wait().0.unwrap(), 4096);
    }
}

#[test]
fn many_flows_many_threads() {
    let f = tmpfile(8 << 20);
    let engine = Arc::new(open_rw(f.path(), "fifo"));
    let threads: Vec<_> = (0..32u64)
        .map(|t| {
            let engine = engine.clone();
            std::thread::spawn(move || {
                let flow = engine
                    .flow(FlowOptions::weight(1 + (t as u32 * 37) % 1000))
                    .unwrap();
                let base = (t * 256) << 10;
                for i in 0..16u64 {
                    let data = pattern(t * 100 + i, 4096);
                    let (r, _) = flow.write(base + i * 4096, AlignedBuf::from_slice(&data));
                    assert_eq!(r.unwrap(), 4096);
                }
                for i in 0..16u64 {
                    let (r, buf) = flow.read(base + i * 4096, AlignedBuf::new(4096));
                    assert_eq!(r.unwrap(), 4096);
                    assert_eq!(&buf[..], &pattern(t * 100 + i, 4096)[..]);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let engine = Arc::try_unwrap(engine).ok().unwrap();
    let s = engine.shutdown(ShutdownMode::Drain).unwrap();
    assert_eq!(s.completed, 32 * 32);
    assert_eq!(s.errors, 0);
}

/// FIFO that idles for 1 ms the first time it has something queued: it
/// answers `Idle { until }` until `now >= until`, as BFQ does while idling.
struct IdleOnce {
    until: Option<Time>,
    dispatched_at: Arc<std::sync::Mutex<Option<(Time, Time)>>>,
}

impl Hooks<Fifo> for IdleOnce {
    fn name<'a>(&'a self, _: &'a Fifo) -> &'a str {
        "idle-once"
    }
    fn dispatch(&mut self, inner: &mut Fifo, now: Time) -> Dispatch {
        if inner.queued() > 0 {
            let until = *self.until.get_or_insert(now + 1_000_000);
            if now < until {
                return Dispatch::Idle { until };
            }
            self.dispatched_at
                .lock()
                .unwrap()
                .get_or_insert((until, now));
        }
        inner.dispatch(now)
    }
}

#[test]
fn idle_timer_fires_and_dispatch_resumes() {
    let seen = Arc::new(std::sync::Mutex::new(None));
    let engine = Engine::nop()
        .scheduler_instance(Box::new(Hooked::new(
            Fifo::new(),
            IdleOnce {
                until: None,
                dispatched_at: seen.clone(),
            },
        )))
        .open()
        .unwrap();
    let flow = engine.flow(FlowOptions::default()).unwrap();
    // After the first Idle answer nothing but the idle timer wakes the
    // dispatcher (at most one stale eventfd wake-up aside): if the timer
    // were not armed this would hang.
    let (r, ()) = flow.nop_async(0, 8).wait();
    assert_eq!(r.unwrap(), 4096);
    let (until, at) = seen.lock().unwrap().expect("dispatched");
    assert!(at >= until, "dispatched only once the idle period ended");
    let s = engine.stats().unwrap();
    assert!(s.timers_armed >= 1);
}

#[test]
fn a_request_alone_on_the_device_leaves_it_idle_when_it_completes() {
    let engine = Engine::nop().scheduler("fifo").open().unwrap();
    let flow = engine.flow(FlowOptions::default()).unwrap();
    for i in 0..10 {
        let (r, ()) = flow.nop_async(i * 8, 8).wait();
        assert_eq!(r.unwrap(), 4096);
    }
    // Four at once, then waited for: the device runs dry once more.
    let all: Vec<_> = (0..4).map(|i| flow.nop_async(i * 8, 8)).collect();
    for p in all {
        p.wait().0.unwrap();
    }
    let s = engine.stats().unwrap();
    assert_eq!(s.completed, 14);
    assert!((11..=14).contains(&s.device_idles), "{}", s.device_idles);
}

/// FIFO that, the first time it is asked with something queued, idles
/// until the end of time (a scheduler with an absurd idle setting).
struct IdleForever {
    asked: u32,
}

impl Hooks<Fifo> for IdleForever {
    fn name<'a>(&'a self, _: &'a Fifo) -> &'a str {
        "idle-forever"
    }
    fn dispatch(&mut self, inner: &mut Fifo, now: Time) -> Dispatch {
        if inner.queued() > 0 {
            self.asked += 1;
            if self.asked == 1 {
                return Dispatch::Idle { until: u64::MAX };
            }
        }
        inner.dispatch(now)
    }
}

/// Waits for `p`, failing the test (not hanging it) if nothing comes for
/// a minute: a guard against hangs, not a measurement.
fn wait_or_fail<T: Send + 'static>(
    p: bfq_engine::Pending<T>,
    what: &str,
) -> bfq_engine::IoResult<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(p.wait());
    });
    rx.recv_timeout(std::time::Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("{what}: hung"))
}

#[test]
fn an_idle_period_to_the_end_of_time_does_not_hang_the_engine() {
    let engine = Engine::nop()
        .scheduler_instance(Box::new(Hooked::new(Fifo::new(), IdleForever { asked: 0 })))
        .open()
        .unwrap();
    let flow = engine.flow(FlowOptions::default()).unwrap();
    let (r, ()) = wait_or_fail(flow.nop_async(0, 8), "idle until u64::MAX");
    assert_eq!(r.unwrap(), 4096);
}

#[test]
fn requests_ending_past_u64_are_refused_and_the_engine_keeps_serving() {
    let f = tmpfile(1 << 20);
    let engine = Engine::builder(f.path()).direct(false).open().unwrap();
    let a = engine.flow(FlowOptions::default()).unwrap();
    let b = engine.flow(FlowOptions::default()).unwrap();
    let (r, buf) = a.read(u64::MAX - 4095, vec![0u8; 8192]);
    assert_eq!(r.unwrap_err().kind(), io::ErrorKind::InvalidInput);
    assert_eq!(buf.len(), 8192, "buffer returned");
    let (r, ()) = a.nop_async(u64::MAX / 512, 8).wait();
    assert_eq!(r.unwrap_err().kind(), io::ErrorKind::InvalidInput);
    // Ending exactly at 2^64 - 1 is the kernel's to refuse (EINVAL).
    let (r, _) = a.read(u64::MAX - 4096, vec![0u8; 4096]);
    assert!(r.is_err());
    for flow in [&a, &b] {
        let (r, _) = flow.read(0, vec![0u8; 4096]);
        assert_eq!(r.unwrap(), 4096, "the dispatcher still serves every flow");
    }
}

/// A scheduler that panics on dispatch: requests fail, nothing hangs.
struct Panicky;

impl Hooks<Fifo> for Panicky {
    fn name<'a>(&'a self, _: &'a Fifo) -> &'a str {
        "panicky"
    }
    fn dispatch(&mut self, inner: &mut Fifo, now: Time) -> Dispatch {
        if inner.queued() > 0 {
            panic!("test scheduler panics (expected)");
        }
        inner.dispatch(now)
    }
}

#[test]
fn scheduler_panic_fails_requests_without_hanging() {
    let engine = Engine::nop()
        .scheduler_instance(Box::new(Hooked::new(Fifo::new(), Panicky)))
        .open()
        .unwrap();
    let flow = engine.flow(FlowOptions::default()).unwrap();
    let (r, ()) = flow.nop_async(0, 1).wait();
    assert!(r.is_err());
    let (r, ()) = flow.nop_async(0, 1).wait();
    assert!(r.is_err());
    // The dispatcher caught the panic: shutting down still works.
    engine.shutdown(ShutdownMode::Drain).unwrap();
}

/// A scheduler that panics when told of a completion.
struct PanicOnComplete;

impl Hooks<Fifo> for PanicOnComplete {
    fn complete(
        &mut self,
        _: &mut Fifo,
        _: Time,
        _: bfq_core::ReqId,
    ) -> Result<(), bfq_core::SchedError> {
        panic!("test scheduler panics on complete (expected)");
    }
}

/// A waker that panics when woken.
struct PanickyWaker;

impl std::task::Wake for PanickyWaker {
    fn wake(self: Arc<Self>) {
        panic!("test waker panics (expected)");
    }
}

/// A failed request's waker that panics, woken while a completion is
/// settled (the scheduler panicked on it), neither loses the completed
/// request's result nor leaves a shutdown waiting for its delivery.
#[test]
fn a_panicking_waker_while_results_are_delivered_does_not_hang() {
    use std::future::Future;
    let engine = Engine::nop()
        .queue_depth(1)
        .private_rings(false)
        .scheduler_instance(Box::new(Hooked::new(Fifo::new(), PanicOnComplete)))
        .open()
        .unwrap();
    let flow = engine.flow(FlowOptions::default()).unwrap();
    let a = flow.nop_async(0, 1);
    let b = flow.nop_async(8, 1);
    // b stays queued (depth 1) with a panicking waker, registered from a
    // thread with no ring.
    let b = std::thread::spawn(move || {
        let mut b = b;
        let w = std::task::Waker::from(Arc::new(PanickyWaker));
        let mut cx = std::task::Context::from_waker(&w);
        assert!(std::pin::Pin::new(&mut b).poll(&mut cx).is_pending());
        b
    })
    .join()
    .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| a.wait()));
        drop(b);
        let _ = tx.send(r.is_ok());
    });
    rx.recv_timeout(std::time::Duration::from_secs(60))
        .expect("the completed request's wait hung");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(engine.shutdown(ShutdownMode::Drain).is_ok());
    });
    rx.recv_timeout(std::time::Duration::from_secs(60))
        .expect("the shutdown hung on a delivery");
}

/// FIFO that notes how many requests are queued at each dispatch call.
struct QueuedAtDispatch {
    seen: Arc<std::sync::Mutex<Vec<usize>>>,
}

impl Hooks<Fifo> for QueuedAtDispatch {
    fn name<'a>(&'a self, _: &'a Fifo) -> &'a str {
        "queued-at-dispatch"
    }
    fn dispatch(&mut self, inner: &mut Fifo, now: Time) -> Dispatch {
        self.seen.lock().unwrap().push(inner.queued());
        inner.dispatch(now)
    }
}

/// The plug: a thread's asynchronous requests reach the scheduler
/// together (one lock for the batch), not one add and dispatch each.
#[test]
fn requests_of_one_plug_reach_the_scheduler_together() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let engine = Engine::nop()
        .queue_depth(64)
        .scheduler_instance(Box::new(Hooked::new(
            Fifo::new(),
            QueuedAtDispatch { seen: seen.clone() },
        )))
        .open()
        .unwrap();
    let flow = engine.flow(FlowOptions::default()).unwrap();
    let pend: Vec<_> = (0..32u64).map(|i| flow.nop_async(i * 8, 8)).collect();
    for p in pend {
        assert_eq!(p.wait().0.unwrap(), 4096);
    }
    // The first dispatch that found anything queued (the service thread
    // may ask before any request arrives).
    let first = seen.lock().unwrap().iter().copied().find(|&q| q > 0);
    assert_eq!(first, Some(32), "the scheduler saw the 32 requests at once");
}

/// Starts a thread that plugs `n` NOPs of `flow` (dropping its handle),
/// then waits for them once the returned sender says so. Returns once
/// the requests are plugged.
fn plug_on_another_thread(
    flow: Arc<bfq_engine::Flow>,
    n: u64,
) -> (
    std::thread::JoinHandle<Vec<io::Result<usize>>>,
    std::sync::mpsc::Sender<()>,
) {
    let (plugged_tx, plugged_rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let t = std::thread::spawn(move || {
        let pend: Vec<_> = (0..n).map(|i| flow.nop_async(i * 8, 8)).collect();
        drop(flow);
        plugged_tx.send(()).unwrap();
        go_rx.recv().unwrap();
        pend.into_iter().map(|p| p.wait().0).collect::<Vec<_>>()
    });
    plugged_rx.recv().unwrap();
    (t, go_tx)
}

/// A flow closed on one thread while another thread's plug still holds
/// its requests: they reach the scheduler (the flow leaves it after) and
/// complete.
#[test]
fn a_flow_closed_while_another_thread_plugs_its_requests_still_serves_them() {
    let engine = Engine::nop().queue_depth(8).open().unwrap();
    let flow = Arc::new(engine.flow(FlowOptions::default()).unwrap());
    let (t, go) = plug_on_another_thread(flow.clone(), 5);
    // The last handle: the flow closes while the other thread's plug may
    // still hold its requests.
    drop(flow);
    go.send(()).unwrap();
    for r in t.join().unwrap() {
        assert_eq!(r.unwrap(), 4096);
    }
    let s = engine.shutdown(ShutdownMode::Drain).unwrap();
    assert_eq!((s.completed, s.errors), (5, 0));
}

#[test]
fn nop_engine_serves_many_requests() {
    let engine = Engine::nop().queue_depth(64).open().unwrap();
    let flows: Vec<_> = (0..8)
        .map(|i| engine.flow(FlowOptions::weight(10 * (i + 1))).unwrap())
        .collect();
    let pend: Vec<_> = (0..4000u64)
        .map(|i| flows[(i % 8) as usize].nop_async(i * 8, 8))
        .collect();
    for p in pend {
        assert_eq!(p.wait().0.unwrap(), 4096);
    }
    let s = engine.shutdown(ShutdownMode::Drain).unwrap();
    assert_eq!(s.completed, 4000);
}

#[test]
fn target_shrinking_under_the_engine_fails_only_reads_past_the_end() {
    let f = tmpfile(1 << 20);
    let engine = Engine::builder(f.path()).direct(false).open().unwrap();
    let flow = engine.flow(FlowOptions::default()).unwrap();
    let (r, _) = flow.read(900 << 10, vec![0u8; 4096]);
    assert_eq!(r.unwrap(), 4096);
    // The file loses its second half while the engine has it open.
    f.as_file().set_len(512 << 10).unwrap();
    let (r, _) = flow.read(900 << 10, vec![0u8; 4096]);
    assert_eq!(r.unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
    let (r, _) = flow.read(0, vec![0u8; 4096]);
    assert_eq!(r.unwrap(), 4096, "the rest is still served");
}

#[test]
fn requests_of_a_closed_flow_complete_and_new_flows_work() {
    let engine = Engine::nop().queue_depth(1).open().unwrap();
    let a = engine.flow(FlowOptions::weight(100)).unwrap();
    let pend: Vec<_> = (0..50).map(|i| a.nop_async(i, 1)).collect();
    drop(a); // remove_flow while its requests are queued
    let b = engine.flow(FlowOptions::weight(100)).unwrap();
    for p in pend {
        assert_eq!(p.wait().0.unwrap(), 512);
    }
    assert_eq!(b.nop_async(0, 1).wait().0.unwrap(), 512);
}

#[test]
fn bfq_through_the_engine_if_registered() {
    let f = tmpfile(1 << 20);
    let engine = match Engine::builder(f.path())
        .direct(false)
        .scheduler("bfq")
        .queue_depth(4)
        .open()
    {
        Ok(e) => e,
        Err(e) => {
            eprintln!("SKIPPED bfq_through_the_engine_if_registered: {e}");
            return;
        }
    };
    let flows: Vec<_> = (1..=3)
        .map(|w| engine.flow(FlowOptions::weight(100 * w)).unwrap())
        .collect();
    let pend: Vec<_> = (0..300u64)
        .map(|i| flows[(i % 3) as usize].read_async((i % 256) * 4096, vec![0u8; 4096]))
        .collect();
    for p in pend {
        assert_eq!(p.wait().0.unwrap(), 4096);
    }
    engine.shutdown(ShutdownMode::Drain).unwrap();
}

/// Holds every request until `n` are queued, then serves them in order
/// (they complete together, in one batch).
struct Gate {
    n: usize,
}

impl Hooks<Fifo> for Gate {
    fn name<'a>(&'a self, _: &'a Fifo) -> &'a str {
        "gate"
    }
    fn dispatch(&mut self, inner: &mut Fifo, now: Time) -> Dispatch {
        if inner.queued() < self.n {
            return Dispatch::Wait;
        }
        self.n = 0;
        inner.dispatch(now)
    }
}

/// The dispatcher wakes one waiter of a completion batch and leaves the
/// rest to clients taking results (the wake relay). Here the one it wakes
/// is a future nobody polls again, so no client ever helps: the
/// dispatcher must still wake everyone else itself.
#[test]
fn waiters_are_woken_when_no_client_helps() {
    use std::future::Future;
    use std::task::{Context, Poll, Wake, Waker};
    struct Nobody;
    impl Wake for Nobody {
        fn wake(self: Arc<Self>) {}
    }
    const THREADS: usize = 12;
    let engine = Engine::nop()
        .queue_depth(64)
        .scheduler_instance(Box::new(Hooked::new(Fifo::new(), Gate { n: THREADS + 1 })))
        .open()
        .unwrap();
    let flow = Arc::new(engine.flow(FlowOptions::default()).unwrap());
    // First in the batch: polled once, then never again.
    let mut dead = flow.nop_async(0, 8);
    let waker = Waker::from(Arc::new(Nobody));
    let polled = std::pin::Pin::new(&mut dead).poll(&mut Context::from_waker(&waker));
    assert!(polled.is_pending());
    let (tx, rx) = std::sync::mpsc::channel();
    for i in 0..THREADS {
        let flow = flow.clone();
        let tx = tx.clone();
        std::thread::spawn(move || {
            let (r, ()) = flow.nop_async(8 * (i as u64 + 1), 8).wait();
            tx.send(r.map_err(|e| e.to_string())).unwrap();
        });
    }
    for _ in 0..THREADS {
        // A generous bound that only turns a hang into a failure.
        let r = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("a blocked submitter was never woken");
        assert_eq!(r.unwrap(), 4096);
    }
    assert!(matches!(
        std::pin::Pin::new(&mut dead).poll(&mut Context::from_waker(&waker)),
        Poll::Ready((Ok(4096), ()))
    ));
    engine.shutdown(ShutdownMode::Drain).unwrap();
}

#[test]
fn requests_naming_their_own_files_go_to_them() {
    // A NOP engine serves no target of its own; requests that name a file
    // (a filesystem front end's many files) still reach that file, and the
    // scheduler sees them at the file's sector base.
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let engine = Engine::nop()
        .scheduler("bfq")
        .allow_short(true)
        .trace(move |e| {
            if e.event == 'Q' {
                s2.lock().unwrap().push(e.sector);
            }
        })
        .open()
        .unwrap();
    let flow = engine.flow(FlowOptions::weight(100)).unwrap();
    let files: Vec<_> = (0..2).map(|_| tempfile::tempfile().unwrap()).collect();
    let targets: Vec<bfq_engine::FileTarget> = files
        .iter()
        .enumerate()
        .map(|(i, f)| bfq_engine::FileTarget::new(f.try_clone().unwrap(), (i as u64 + 1) << 32))
        .collect();
    for (i, t) in targets.iter().enumerate() {
        let data = pattern(i as u64, 5000);
        let (r, _) = flow.write_file_async(t, 512, data).wait();
        assert_eq!(r.unwrap(), 5000);
    }
    for (i, t) in targets.iter().enumerate() {
        let (r, buf) = flow.read_file_async(t, 512, vec![0u8; 6000]).wait();
        assert_eq!(r.unwrap(), 5000, "short read at the end of the file");
        assert_eq!(&buf[..5000], &pattern(i as u64, 5000)[..]);
    }
    let sectors = seen.lock().unwrap().clone();
    assert_eq!(
        sectors,
        vec![(1 << 32) + 1, (2 << 32) + 1, (1 << 32) + 1, (2 << 32) + 1]
    );
}

/// Threads keep several reads in flight and exit at different times:
/// requests one thread dispatched for another stay on its ring after it
/// has left (or exited), and must still complete.
#[test]
fn threads_leaving_with_others_requests_on_their_rings() {
    for mode in [SubmitMode::Local, SubmitMode::Dispatcher] {
        let f = tmpfile(4 << 20);
        let engine = Arc::new(
            Engine::builder(f.path())
                .direct(false)
                .queue_depth(8)
                .submit_mode(mode)
                .open()
                .unwrap(),
        );
        let (tx, rx) = std::sync::mpsc::channel();
        let mut threads = Vec::new();
        for t in 0..16u64 {
            let engine = engine.clone();
            let tx = tx.clone();
            threads.push(std::thread::spawn(move || {
                let flow = engine.flow(FlowOptions::weight(100)).unwrap();
                let mut q = std::collections::VecDeque::new();
                let mut done = 0u64;
                for i in 0..(50 + 20 * t) {
                    q.push_back(
                        flow.read_async(((t * 97 + i * 13) % 1000) * 4096, vec![0u8; 4096]),
                    );
                    if q.len() == 4 {
                        let p = q.pop_front().unwrap();
                        let _ = p.is_done();
                        done += u64::from(p.wait().0.is_ok());
                    }
                }
                for p in q {
                    done += u64::from(p.wait().0.is_ok());
                }
                tx.send(done).unwrap();
            }));
        }
        let mut total = 0;
        for _ in 0..16 {
            total += rx
                .recv_timeout(std::time::Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("{mode:?}: a reader hung"));
        }
        assert_eq!(total, (0..16).map(|t| 50 + 20 * t).sum::<u64>(), "{mode:?}");
        for t in threads {
            t.join().unwrap();
        }
        let engine = Arc::try_unwrap(engine).ok().unwrap();
        let s = engine.shutdown(ShutdownMode::Drain).unwrap();
        assert_eq!(s.completed, total, "{mode:?}");
    }
}

/// A read that never completes on its own (a pipe nobody writes) is
/// cancelled by `shutdown(Cancel)` in both submit modes, and its buffer
/// comes back.
#[test]
fn cancel_reaches_requests_that_would_never_complete() {
    use std::os::fd::FromRawFd;
    for mode in [SubmitMode::Local, SubmitMode::Dispatcher] {
        let mut fds = [0i32; 2];
        // SAFETY: pipe writes two descriptors into the array.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: fresh descriptors we own.
        let (r, w) = unsafe {
            (
                std::fs::File::from_raw_fd(fds[0]),
                std::fs::File::from_raw_fd(fds[1]),
            )
        };
        let target = bfq_engine::FileTarget::new(r, 0);
        let engine = Engine::nop().submit_mode(mode).open().unwrap();
        let flow = engine.flow(FlowOptions::default()).unwrap();
        let p = flow.read_file_async(&target, 0, vec![0u8; 64]);
        let (tx, rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            let _ = tx.send(engine.shutdown(ShutdownMode::Cancel).is_ok());
        });
        let ok = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("{mode:?}: shutdown(Cancel) hung"));
        assert!(ok);
        t.join().unwrap();
        let (res, buf) = wait_or_fail(p, "cancelled pipe read");
        assert_eq!(
            res.unwrap_err().raw_os_error(),
            Some(libc::ECANCELED),
            "{mode:?}"
        );
        assert_eq!(buf.len(), 64);
        drop(w);
    }
}

/// A pipe: (read end, write end).
fn pipe_files() -> (std::fs::File, std::fs::File) {
    use std::os::fd::FromRawFd;
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 writes two descriptors into the array.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: fresh descriptors we own.
    unsafe {
        (
            std::fs::File::from_raw_fd(fds[0]),
            std::fs::File::from_raw_fd(fds[1]),
        )
    }
}

/// Shuts `engine` down in another thread, failing the test (not hanging
/// it) if that takes a minute: a guard against hangs, not a measurement.
fn shutdown_or_fail(engine: Engine, mode: ShutdownMode, what: &str) -> bfq_engine::EngineStats {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(engine.shutdown(mode));
    });
    rx.recv_timeout(std::time::Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("{what}: shutdown({mode:?}) hung"))
        .unwrap()
}

/// `DrainFor` ends a drain that would never end (reads of a pipe nobody
/// writes: one a thread waits for, blocked, one a future's, one queued
/// behind them) by cancelling what is left at its deadline, in both
/// submit modes; every buffer comes back and the counters add up.
#[test]
fn drain_for_cancels_what_is_left_at_its_deadline() {
    use std::time::Duration;
    for mode in [SubmitMode::Local, SubmitMode::Dispatcher] {
        for limit in [Duration::ZERO, Duration::from_millis(5)] {
            let what = format!("{mode:?} {limit:?}");
            let (r, _w) = pipe_files();
            let engine = Engine::builder_for_file(r)
                .submit_mode(mode)
                .queue_depth(2)
                .open()
                .unwrap();
            let flow = Arc::new(engine.flow(FlowOptions::default()).unwrap());
            let f = flow.clone();
            let blocked = std::thread::spawn(move || f.read(0, vec![0u8; 16]));
            let p = flow.read_async(0, vec![0u8; 32]);
            let queued = flow.read_async(0, vec![0u8; 48]);
            assert!(!p.is_done() && !queued.is_done(), "{what}");
            // The blocked thread's read has reached the scheduler (not
            // one still on its way, which the engine may find stopped and
            // fail with BrokenPipe).
            while {
                let s = engine.stats().unwrap();
                s.queued + s.in_flight < 3
            } {
                std::thread::yield_now();
            }
            let s = shutdown_or_fail(engine, ShutdownMode::DrainFor(limit), &what);
            let mut cancelled = 0;
            for (res, len) in [blocked.join().unwrap(), p.wait(), queued.wait()]
                .map(|(res, buf)| (res, buf.len()))
            {
                let e = res.unwrap_err();
                assert_eq!(e.raw_os_error(), Some(libc::ECANCELED), "{what}: {e:?}");
                assert!([16, 32, 48].contains(&len), "{what}: buffer back");
                cancelled += 1;
            }
            assert_eq!(s.held, 0, "{what}");
            assert_eq!(s.completed + s.cancelled, cancelled, "{what}: {s:?}");
            assert_eq!(s.errors, s.completed, "{what}: cancelled on the device");
        }
    }
}

/// `DrainFor` serves what completes before its deadline: a read of a
/// pipe written to after the shutdown began (`Duration::MAX`: no
/// deadline, as `Drain`).
#[test]
fn drain_for_serves_what_completes_in_time() {
    use std::io::Write;
    for mode in [SubmitMode::Local, SubmitMode::Dispatcher] {
        let (r, mut w) = pipe_files();
        let engine = Engine::builder_for_file(r)
            .submit_mode(mode)
            .open()
            .unwrap();
        let flow = engine.flow(FlowOptions::default()).unwrap();
        let probe = engine.flow(FlowOptions::default()).unwrap();
        let p = flow.read_async(0, vec![0u8; 4]);
        assert!(!p.is_done());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(engine.shutdown(ShutdownMode::DrainFor(std::time::Duration::MAX)));
        });
        // The pipe is written only once the shutdown has begun (a request
        // submitted from then on is cancelled), so that the read is served
        // by the drain, not before it.
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let mut probes_ok = 0;
        loop {
            let (res, ()) = probe.nop_async(0, 1).wait();
            match res {
                Ok(_) => probes_ok += 1,
                Err(e) if e.raw_os_error() == Some(libc::ECANCELED) => break,
                Err(e) => panic!("{mode:?}: probe: {e}"),
            }
            assert!(std::time::Instant::now() < give_up, "{mode:?}: no shutdown");
        }
        // A pause before the write gives a shutdown that wrongly cancels
        // the read the time to do so; a correct one passes however long
        // it is (nothing is timed).
        std::thread::sleep(std::time::Duration::from_millis(20));
        w.write_all(b"abcd").unwrap();
        let s = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("{mode:?}: shutdown hung"))
            .unwrap();
        let (res, buf) = p.wait();
        assert_eq!(res.unwrap(), 4, "{mode:?}");
        assert_eq!(&buf[..], b"abcd");
        let counts = (s.completed, s.errors, s.cancelled);
        assert_eq!(counts, (1 + probes_ok, 0, 1), "{mode:?}");
    }
}

/// FIFO that idles twice, 1 ms each, before every request it dispatches:
/// when the first idle timer fires it answers with a second idle period
/// (nothing is dispatched on that wake-up).
struct IdleEach {
    until: Option<Time>,
    second: bool,
}

impl Hooks<Fifo> for IdleEach {
    fn name<'a>(&'a self, _: &'a Fifo) -> &'a str {
        "idle-each"
    }
    fn dispatch(&mut self, inner: &mut Fifo, now: Time) -> Dispatch {
        if inner.queued() == 0 {
            return Dispatch::Empty;
        }
        let until = *self.until.get_or_insert(now + 1_000_000);
        if now < until {
            return Dispatch::Idle { until };
        }
        if !self.second {
            self.second = true;
            self.until = Some(now + 1_000_000);
            return Dispatch::Idle {
                until: now + 1_000_000,
            };
        }
        (self.until, self.second) = (None, false);
        inner.dispatch(now)
    }
}

/// Every request waits for an idle timer, one after the other: the
/// service thread must re-arm its timer read each time, also when
/// nothing else wakes it (in local mode nothing else does).
#[test]
fn every_idle_timer_fires_in_both_modes() {
    for mode in [SubmitMode::Local, SubmitMode::Dispatcher] {
        let engine = Engine::nop()
            .submit_mode(mode)
            .scheduler_instance(Box::new(Hooked::new(
                Fifo::new(),
                IdleEach {
                    until: None,
                    second: false,
                },
            )))
            .open()
            .unwrap();
        let flow = engine.flow(FlowOptions::default()).unwrap();
        for i in 0..20u64 {
            let (r, ()) = wait_or_fail(flow.nop_async(i * 8, 8), "a request behind an idle timer");
            assert_eq!(r.unwrap(), 4096, "{mode:?}");
        }
        let s = engine.stats().unwrap();
        assert!(s.timers_fired >= 40, "{mode:?}: {s:?}");
    }
}

/// Whether the first rust block of `doc` (a path from the workspace's
/// root) is the program `example`, up to spacing (which rustfmt sets in
/// the example) and its `//!` lines.
fn assert_snippet_is_example(doc: &str, example: &str) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let doc = std::fs::read_to_string(root.join(doc)).unwrap();
    let snippet = doc
        .split("```rust\n")
        .nth(1)
        .and_then(|s| s.split("```").next())
        .expect("a rust block");
    let example = std::fs::read_to_string(root.join(example)).unwrap();
    let code: String = example
        .lines()
        .filter(|l| !l.starts_with("//!"))
        .collect::<Vec<_>>()
        .join("\n");
    let squeeze = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(squeeze(snippet), squeeze(&code));
}

/// The API program of docs/engine.md is `examples/api.rs`, and the
/// example of docs/scheduler-interface.md bfq-schedulers'
/// `examples/interface.rs`, which `cargo test` compiles: the snippets
/// cannot drift into code that does not compile.
#[test]
fn the_documented_api_snippet_is_the_compiled_example() {
    assert_snippet_is_example("docs/engine.md", "crates/bfq-engine/examples/api.rs");
    assert_snippet_is_example(
        "docs/scheduler-interface.md",
        "crates/bfq-schedulers/examples/interface.rs",
    );
}

/// Local mode's plug: a thread that submits asynchronously and then
/// never comes back to the engine (it neither waits nor polls) leaves
/// its requests unsubmitted on its ring; the service thread must take the
/// ring over, submit them and deliver their results to whoever waits.
#[test]
fn plugged_requests_of_a_thread_that_goes_away_still_complete() {
    let f = tmpfile(1 << 20);
    let engine = Arc::new(
        Engine::builder(f.path())
            .direct(false)
            .submit_mode(SubmitMode::Local)
            .open()
            .unwrap(),
    );
    let (tx, rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let e = engine.clone();
    let t = std::thread::spawn(move || {
        let flow = e.flow(FlowOptions::weight(100)).unwrap();
        let ps: Vec<_> = (0..5u64)
            .map(|i| flow.read_async(i * 4096, vec![0u8; 4096]))
            .collect();
        tx.send(ps).unwrap();
        // Away from the engine until the reads are in.
        let _ = done_rx.recv();
    });
    for p in rx.recv().unwrap() {
        let (r, buf) = wait_or_fail(p, "a plugged read of a thread gone elsewhere");
        assert_eq!(r.unwrap(), 4096);
        assert_eq!(buf.len(), 4096);
    }
    done_tx.send(()).unwrap();
    t.join().unwrap();
    let s = engine.stats().unwrap();
    assert_eq!(s.completed, 5, "{s:?}");
    assert!(
        s.service_submits >= 1,
        "the service thread submitted: {s:?}"
    );
}

/// A flow closed while another thread's plug holds only other flows'
/// requests leaves the scheduler at once: its group can be removed
/// right after.
#[test]
fn a_flow_closed_beside_other_flows_plugs_leaves_at_once() {
    let engine = Arc::new(Engine::nop().open().unwrap());
    let g = engine.add_group(GroupId::ROOT, 100).unwrap();
    let f = engine.flow(FlowOptions::weight(100).group(g)).unwrap();
    let other = Arc::new(engine.flow(FlowOptions::default()).unwrap());
    // `other` stays open here: the thread's plug keeps its requests.
    let (t, go) = plug_on_another_thread(other.clone(), 3);
    drop(f);
    let removed = engine.remove_group(g);
    go.send(()).unwrap();
    for r in t.join().unwrap() {
        assert_eq!(r.unwrap(), 4096);
    }
    removed.unwrap();
}

/// A waker owning the last handle of a flow, which it drops when woken.
struct DropFlowOnWake(std::sync::Mutex<Option<bfq_engine::Flow>>);

impl std::task::Wake for DropFlowOnWake {
    fn wake(self: Arc<Self>) {
        self.0.lock().unwrap().take();
    }
}

/// A `Flow` dropped by a waker that the engine runs on a thread working
/// on its own ring (reaping another request's completion) does not
/// deadlock on that ring.
#[test]
fn a_flow_dropped_by_a_waker_the_engine_runs_does_not_deadlock() {
    use std::io::Write;
    use std::os::unix::net::UnixStream;
    let engine = Engine::nop().open().unwrap();
    let a = engine.flow(FlowOptions::default()).unwrap();
    let b = engine.flow(FlowOptions::default()).unwrap();
    let (r1, mut w1) = UnixStream::pair().unwrap();
    let (r2, mut w2) = UnixStream::pair().unwrap();
    let t1 = bfq_engine::FileTarget::new(std::fs::File::from(std::os::fd::OwnedFd::from(r1)), 0);
    let t2 =
        bfq_engine::FileTarget::new(std::fs::File::from(std::os::fd::OwnedFd::from(r2)), 1 << 20);
    // The first read waits for data with a waker that drops `b`.
    let dropper = Arc::new(DropFlowOnWake(std::sync::Mutex::new(Some(b))));
    let waker = std::task::Waker::from(dropper.clone());
    let mut first = Box::pin(a.read_file_async(&t1, 0, vec![0u8; 1]));
    let polled =
        std::future::Future::poll(first.as_mut(), &mut std::task::Context::from_waker(&waker));
    assert!(polled.is_pending());
    // Data for both reads comes while this thread sleeps in its ring on
    // the second one (it reaps the first one's completion there).
    let writer = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(50));
        w1.write_all(&[1]).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        w2.write_all(&[2]).unwrap();
    });
    let (r, buf) = a.read_file_async(&t2, 0, vec![0u8; 1]).wait();
    assert_eq!((r.unwrap(), buf[0]), (1, 2));
    writer.join().unwrap();
    let (r, buf) = block_on(first);
    assert_eq!((r.unwrap(), buf[0]), (1, 1));
    assert!(dropper.0.lock().unwrap().is_none(), "the waker ran");
    engine.shutdown(ShutdownMode::Drain).unwrap();
}

/// A read buffer that counts its drops; `PAD` words of padding make it
/// too large to live in a completion slot itself (it is then boxed).
struct Counted<const PAD: usize> {
    bytes: Vec<u8>,
    drops: Arc<std::sync::atomic::AtomicUsize>,
    _pad: [u64; PAD],
}

impl<const PAD: usize> Drop for Counted<PAD> {
    fn drop(&mut self) {
        self.drops.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

// SAFETY: the bytes are the Vec's heap memory, which does not move with
// the value.
unsafe impl<const PAD: usize> bfq_engine::IoBuf for Counted<PAD> {
    fn stable_ptr(&self) -> *const u8 {
        self.bytes.as_ptr()
    }
    fn bytes_len(&self) -> usize {
        self.bytes.len()
    }
}

// SAFETY: as above.
unsafe impl<const PAD: usize> bfq_engine::IoBufMut for Counted<PAD> {
    fn stable_mut_ptr(&mut self) -> *mut u8 {
        self.bytes.as_mut_ptr()
    }
}

/// Requests outlive the threads that submitted them: short-lived threads
/// read into counted buffers (stored in their completion slot, or boxed),
/// drop some `Pending`s at once, hand the others to the main thread and
/// exit. Every result arrives with its data, and every buffer is dropped
/// exactly once (by its taker, or by the engine when nobody took it).
#[test]
fn requests_and_their_buffers_outlive_their_threads() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let tmp = tmpfile(1 << 20);
    let data = pattern(7, 1 << 20);
    std::fs::write(tmp.path(), &data).unwrap();
    // Buffered: `Vec` buffers are not aligned for O_DIRECT.
    let engine = Engine::builder(tmp.path()).direct(false).queue_depth(8);
    let engine = Arc::new(engine.open().unwrap());
    let drops = Arc::new(AtomicUsize::new(0));
    let (threads, per) = (16, 40);
    let handed: Vec<_> = (0..threads)
        .map(|t| {
            let (engine, drops) = (engine.clone(), drops.clone());
            std::thread::spawn(move || {
                let flow = engine.flow(FlowOptions::weight(100)).unwrap();
                let mut keep = Vec::new();
                for i in 0..per {
                    let off = ((t * per + i) % 256) as u64 * 4096;
                    let bytes = vec![0u8; 4096];
                    let small = Counted::<0> {
                        bytes: bytes.clone(),
                        drops: drops.clone(),
                        _pad: [],
                    };
                    let big = Counted::<8> {
                        bytes,
                        drops: drops.clone(),
                        _pad: [0; 8],
                    };
                    let (a, b) = (flow.read_async(off, small), flow.read_async(off, big));
                    if i % 3 == 0 {
                        drop((a, b)); // the engine drops the buffers
                    } else {
                        keep.push((off, a, b));
                    }
                }
                keep
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    let kept = handed.len();
    for (off, a, b) in handed {
        let want = &data[off as usize..off as usize + 4096];
        let (r, buf) = a.wait();
        assert_eq!(r.unwrap(), 4096);
        assert_eq!(&buf.bytes[..], want);
        let (r, buf) = b.wait();
        assert_eq!(r.unwrap(), 4096);
        assert_eq!(&buf.bytes[..], want);
    }
    assert!(
        drops.load(Ordering::SeqCst) >= 2 * kept,
        "the taken buffers"
    );
    Arc::try_unwrap(engine)
        .ok()
        .unwrap()
        .shutdown(ShutdownMode::Drain)
        .unwrap();
    assert_eq!(
        drops.load(Ordering::SeqCst),
        2 * threads * per,
        "every buffer, once"
    );
}

/// A thread that plugs a request and then waits for it, again and again,
/// with work of its own between its requests, lingers
/// for a moment each time (see docs/engine.md, "Lingering rings"). While
/// rings keep lingering the service thread looks at them on its own every
/// 1 ms; the lingering threads must not wake it (an eventfd write and a
/// wake-up of the service thread per request: before, nearly every one
/// of the requests did). The bound leaves room for the thread
/// being descheduled for more than 1 ms hundreds of times (each such gap
/// may let the service thread go to sleep without a bound).
#[test]
fn threads_that_keep_lingering_do_not_wake_the_service_thread_each_time() {
    const N: u64 = 2_000;
    let engine = Engine::nop().submit_mode(SubmitMode::Local).open().unwrap();
    let flow = engine.flow(FlowOptions::default()).unwrap();
    for i in 0..N {
        let (res, ()) = flow.nop_async(i, 1).wait();
        assert_eq!(res.unwrap(), 512);
        // Work of its own between requests (tens of microseconds).
        let mut x = i;
        for k in 0..20_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(k));
        }
    }
    drop(flow);
    let s = engine.shutdown(ShutdownMode::Drain).unwrap();
    assert_eq!(s.completed, N);
    assert!(s.linger_wakes < N / 4, "{s:?}");
}

#[test]
fn a_write_to_a_file_given_read_only_is_refused_naming_the_option() {
    let f = tmpfile(64 << 10);
    let ro = std::fs::File::open(f.path()).unwrap();
    let engine = Engine::builder_for_file(ro).open().unwrap();
    let flow = engine.flow(FlowOptions::default()).unwrap();
    let (r, _) = flow.write(0, vec![1u8; 4096]);
    let e = r.unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
    assert!(
        e.to_string().contains("EngineBuilder::writable(true)"),
        "{e}"
    );
    let (r, _) = flow.read(0, vec![1u8; 4096]);
    assert_eq!(r.unwrap(), 4096);
    // A file given open for writing takes writes, without `writable`.
    let rw = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(f.path())
        .unwrap();
    let engine = Engine::builder_for_file(rw).open().unwrap();
    let flow = engine.flow(FlowOptions::default()).unwrap();
    let (r, _) = flow.write(0, vec![1u8; 100]);
    assert_eq!(r.unwrap(), 100);
}
