//! The engine under tokio, as a storage server would run it: tasks on a
//! multi-thread runtime (a future may be polled on one worker and woken
//! on another), one current-thread runtime per core (thread-per-core),
//! with each core's ring bound to its runtime (`Engine::thread_ring`) or
//! not, futures dropped before their result, and a `Cancel` shutdown
//! while tasks wait. Every read's bytes are checked against the file. No
//! assertion depends on timing (the timeout only turns a hang into a
//! failure).

mod common;
use bfq_engine::{AlignedBuf, Engine, Flow, FlowOptions, Pending, ShutdownMode, SubmitMode};
use common::pipe;
use std::future::Future;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::{mpsc, Arc};
use std::task::{Context, Waker};
use std::time::Duration;
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

const HANG: Duration = Duration::from_secs(60);
const BLOCK: usize = 4096;
const BLOCKS: u64 = 2048;

/// A file of `BLOCKS` blocks, each filled with its own number (u64 LE).
fn numbered_file() -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new_in("/var/tmp").unwrap();
    let mut block = vec![0u8; BLOCK];
    for b in 0..BLOCKS {
        for w in block.chunks_mut(8) {
            w.copy_from_slice(&b.to_le_bytes());
        }
        f.write_all(&block).unwrap();
    }
    f.as_file().sync_all().unwrap();
    f
}

/// Whether `buf` holds block `b` of [`numbered_file`].
fn holds_block(buf: &[u8], b: u64) -> bool {
    buf.chunks(8).all(|w| w == b.to_le_bytes())
}

/// Runs `f` on a thread of its own; a hang becomes a failure.
fn within<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(f()).unwrap());
    rx.recv_timeout(HANG).expect("the test hung")
}

/// Reads `n` blocks through `flow`, `depth` at a time, at blocks picked by
/// a generator seeded with `seed`, and checks each one's bytes.
async fn read_and_check(flow: Arc<Flow>, seed: u64, n: usize, depth: usize) -> usize {
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % BLOCKS
    };
    let mut done = 0;
    while done < n {
        let blocks: Vec<u64> = (0..depth).map(|_| next()).collect();
        let reads = blocks
            .iter()
            .map(|&b| flow.read_async(b * BLOCK as u64, AlignedBuf::new(BLOCK)));
        let reads: Vec<_> = reads.collect();
        for (p, &b) in reads.into_iter().zip(&blocks) {
            let (res, buf) = p.await;
            assert_eq!(res.unwrap(), BLOCK);
            assert!(holds_block(&buf, b), "block {b} read wrong");
        }
        done += depth;
        tokio::task::yield_now().await;
    }
    done
}

fn bfq_engine_on(f: &tempfile::NamedTempFile) -> (Engine, Vec<Arc<Flow>>) {
    let engine = Engine::builder(f.path())
        .scheduler("bfq")
        .queue_depth(16)
        .open()
        .unwrap();
    let flows = [100, 200, 300]
        .map(|w| Arc::new(engine.flow(FlowOptions::weight(w)).unwrap()))
        .to_vec();
    (engine, flows)
}

/// 24 tasks on a runtime of 4 workers (on however many CPUs), 3 flows,
/// each task with up to 4 reads out: every read gets its block, and the
/// engine's counters add up with nothing held at the end.
#[test]
fn tasks_on_a_multi_thread_runtime_read_their_blocks() {
    let f = numbered_file();
    let (engine, flows) = bfq_engine_on(&f);
    let total = within(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .build()
            .unwrap();
        rt.block_on(async move {
            let tasks: Vec<_> = (0..24u64)
                .map(|t| {
                    let flow = flows[t as usize % 3].clone();
                    let depth = 1 + t as usize % 4;
                    tokio::spawn(read_and_check(flow, 0x9e37 * (t + 1), 200, depth))
                })
                .collect();
            let mut total = 0;
            for t in tasks {
                total += t.await.unwrap();
            }
            total
        })
    });
    let s = engine.shutdown(ShutdownMode::Drain).unwrap();
    assert_eq!(s.completed as usize, total);
    assert_eq!((s.errors, s.cancelled, s.held), (0, 0, 0));
}

/// Thread-per-core: two threads, each with its own current-thread
/// runtime and its own flow, share one engine; each runtime's tasks are
/// polled, and their completions reaped, on that thread.
#[test]
fn a_current_thread_runtime_per_core_reads_its_blocks() {
    let f = numbered_file();
    let (engine, flows) = bfq_engine_on(&f);
    let cores: Vec<_> = (0..2u64)
        .map(|c| {
            let flow = flows[c as usize].clone();
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .unwrap();
                rt.block_on(async move {
                    let mut set = tokio::task::JoinSet::new();
                    for t in 0..8 {
                        let seed = 0x51ed * (c * 8 + t + 1);
                        set.spawn(read_and_check(flow.clone(), seed, 100, 4));
                    }
                    let mut total = 0;
                    while let Some(n) = set.join_next().await {
                        total += n.unwrap();
                    }
                    total
                })
            })
        })
        .collect();
    let total: usize = within(move || cores.into_iter().map(|c| c.join().unwrap()).sum());
    let s = engine.shutdown(ShutdownMode::Drain).unwrap();
    assert_eq!(s.completed as usize, total);
    assert_eq!((s.errors, s.held), (0, 0));
}

/// Futures dropped after one poll (a `timeout` of zero, a `select!`
/// losing branch): the requests still complete, their buffers go back to
/// the engine, and later reads on the same flows are unaffected.
#[test]
fn futures_dropped_by_tokio_leave_nothing_behind() {
    let f = numbered_file();
    let (engine, flows) = bfq_engine_on(&f);
    let flow = flows[0].clone();
    within(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async move {
            for b in 0..256u64 {
                let read = flow.read_async(b * BLOCK as u64, AlignedBuf::new(BLOCK));
                // Polled once, then dropped unless already done.
                let _ = tokio::time::timeout(Duration::ZERO, read).await;
            }
            read_and_check(flow, 7, 64, 4).await
        })
    });
    let s = engine.shutdown(ShutdownMode::Drain).unwrap();
    assert_eq!(s.completed, 256 + 64);
    assert_eq!((s.errors, s.held), (0, 0));
}

/// A `Cancel` shutdown while tokio tasks wait for reads that would never
/// complete (a pipe nobody writes): every task wakes with `ECANCELED`
/// and its buffer.
#[test]
fn a_cancel_shutdown_wakes_waiting_tasks() {
    let engine = Engine::nop().scheduler("bfq").open().unwrap();
    let (target, _w) = pipe();
    let target = Arc::new(target);
    let flow = Arc::new(engine.flow(FlowOptions::default()).unwrap());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let (started_tx, started_rx) = mpsc::channel();
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (flow, target, started) = (flow.clone(), target.clone(), started_tx.clone());
            rt.spawn(async move {
                let read = flow.read_file_async(&target, 0, vec![0u8; 64]);
                started.send(()).unwrap();
                let (res, buf) = read.await;
                (res.map_err(|e| e.raw_os_error()), buf.len())
            })
        })
        .collect();
    for _ in 0..8 {
        started_rx.recv_timeout(HANG).unwrap();
    }
    let s = within(move || engine.shutdown(ShutdownMode::Cancel).unwrap());
    let results = within(move || {
        rt.block_on(async move {
            let mut out = Vec::new();
            for t in tasks {
                out.push(t.await.unwrap());
            }
            out
        })
    });
    for r in results {
        assert_eq!(r, (Err(Some(libc::ECANCELED)), 64));
    }
    assert_eq!(s.held, 0);
}

/// Thread-per-core with each core's ring bound to its runtime
/// (`Engine::thread_ring` in tokio's reactor): every read gets its block.
#[test]
fn bound_rings_on_current_thread_runtimes_read_their_blocks() {
    bound_rings_read_their_blocks(Defer::No);
}

/// As above, with the futures' submissions deferred to the runtime's
/// park (`ThreadRing::defer_submits`, `submit_plugged` before each park);
/// and deferred without that hook, where the plug still goes out (at the
/// next reap, a full plug, or the service thread's take-over).
#[test]
fn deferred_submissions_on_current_thread_runtimes_read_their_blocks() {
    bound_rings_read_their_blocks(Defer::UntilPark);
    bound_rings_read_their_blocks(Defer::UntilPlugged);
    bound_rings_read_their_blocks(Defer::WithoutHook);
}

#[derive(Clone, Copy, PartialEq)]
enum Defer {
    No,
    /// `submit_plugged` as the runtime's `on_thread_park`.
    UntilPark,
    /// The loop awaits `ThreadRing::plugged` and submits (no park hook).
    UntilPlugged,
    WithoutHook,
}

fn bound_rings_read_their_blocks(defer: Defer) {
    let f = numbered_file();
    let (engine, flows) = bfq_engine_on(&f);
    let engine = Arc::new(engine);
    let cores: Vec<_> = (0..2u64)
        .map(|c| {
            let (engine, flows) = (engine.clone(), flows.clone());
            std::thread::spawn(move || {
                let mut rt = tokio::runtime::Builder::new_current_thread();
                if defer == Defer::UntilPark {
                    rt.on_thread_park(bfq_engine::submit_plugged);
                }
                let rt = rt.enable_io().build().unwrap();
                rt.block_on(async move {
                    let ring = engine.thread_ring().unwrap();
                    ring.defer_submits(defer != Defer::No);
                    // SAFETY: the descriptor stays open while `ring` lives.
                    let ring = unsafe { AsyncFd::register_with_interest(ring, Interest::READABLE) }
                        .map_err(|e| e.into_parts().1)
                        .unwrap();
                    let mut set = tokio::task::JoinSet::new();
                    for t in 0..9 {
                        let seed = 0x7a11 * (c * 9 + t + 1);
                        set.spawn(read_and_check(flows[t as usize % 3].clone(), seed, 100, 4));
                    }
                    let mut total = 0;
                    loop {
                        tokio::select! {
                            n = set.join_next() => match n {
                                Some(n) => total += n.unwrap(),
                                None => return total,
                            },
                            ready = ring.readable() => {
                                let mut ready = ready.unwrap();
                                if ready.get_inner().reap() {
                                    ready.clear_ready();
                                }
                            }
                            () = plugged(&ring, defer) => bfq_engine::submit_plugged(),
                        }
                    }
                })
            })
        })
        .collect();
    let total: usize = within(move || cores.into_iter().map(|c| c.join().unwrap()).sum());
    drop(flows);
    let engine = Arc::try_unwrap(engine).ok().unwrap();
    let s = engine.shutdown(ShutdownMode::Drain).unwrap();
    assert_eq!(s.completed as usize, total);
    assert_eq!((s.errors, s.held), (0, 0));
}

/// Ready when requests wait in the ring's plug, with `Defer::UntilPlugged`;
/// never otherwise.
async fn plugged(ring: &AsyncFd<bfq_engine::ThreadRing>, defer: Defer) {
    match defer {
        Defer::UntilPlugged => ring.get_ref().plugged().await,
        _ => std::future::pending().await,
    }
}

/// A NOP engine with bfq and one flow, this thread's ring bound, and a
/// read of `len` bytes of a pipe polled once (on the bound ring, out
/// until the pipe's write end `w` is written to).
struct BoundRead {
    engine: Engine,
    _flow: Flow,
    _target: bfq_engine::FileTarget,
    w: std::fs::File,
    ring: bfq_engine::ThreadRing,
    read: Pending<Vec<u8>>,
}

impl BoundRead {
    fn polled(len: usize) -> BoundRead {
        let engine = Engine::nop().scheduler("bfq").open().unwrap();
        let flow = engine.flow(FlowOptions::default()).unwrap();
        let (target, w) = pipe();
        let ring = engine.thread_ring().unwrap();
        let mut read = flow.read_file_async(&target, 0, vec![0u8; len]);
        assert!(!poll_once(&mut read));
        BoundRead {
            engine,
            _flow: flow,
            _target: target,
            w,
            ring,
            read,
        }
    }
}

/// Polls `p` once (submitting it) with a waker that does nothing.
fn poll_once<B: Send + 'static>(p: &mut Pending<B>) -> bool {
    let mut cx = Context::from_waker(Waker::noop());
    Pin::new(p).poll(&mut cx).is_ready()
}

/// Reaps `ring` until `read` has its result (a reap finds the ring's
/// lock busy while the service thread looks at it).
fn reap_until_done<B: Send + 'static>(ring: &bfq_engine::ThreadRing, read: &Pending<B>) {
    let give_up = std::time::Instant::now() + HANG;
    while !read.is_done() {
        assert!(std::time::Instant::now() < give_up, "never reaped");
        ring.reap();
    }
}

/// Whether `fd` is readable within `ms` milliseconds.
fn readable(fd: i32, ms: i32) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut p, 1, ms) };
    n == 1 && p.revents & libc::POLLIN != 0
}

/// The contract a runtime relies on: with a request on the thread's
/// bound ring, the ring's descriptor is not readable until the request
/// completes, and is then (the thread sleeping in `poll(2)` on it is
/// woken); `reap` delivers the result.
#[test]
fn a_bound_rings_descriptor_turns_readable_when_a_request_completes() {
    let BoundRead {
        engine,
        _flow,
        _target,
        mut w,
        ring,
        read,
    } = BoundRead::polled(5);
    assert!(!readable(ring.as_raw_fd(), 0));
    let writer = std::thread::spawn(move || w.write_all(b"hello").unwrap());
    assert!(readable(ring.as_raw_fd(), HANG.as_millis() as i32));
    reap_until_done(&ring, &read);
    let (res, buf) = read.wait();
    assert_eq!((res.unwrap(), &buf[..]), (5, &b"hello"[..]));
    writer.join().unwrap();
    drop(ring);
    let again = engine.thread_ring();
    assert!(again.is_ok(), "bound again once unbound: {:?}", again.err());
}

/// One bound ring per thread and engine; none in dispatcher mode.
#[test]
fn a_second_binding_and_dispatcher_mode_are_refused() {
    let engine = Engine::nop().open().unwrap();
    let _ring = engine.thread_ring().unwrap();
    let second = engine.thread_ring().err().map(|e| e.kind());
    assert_eq!(second, Some(std::io::ErrorKind::AlreadyExists));
    let other = std::thread::scope(|s| s.spawn(|| engine.thread_ring().is_ok()).join());
    assert!(other.unwrap(), "another thread binds its own ring");
    let dispatcher = Engine::nop()
        .submit_mode(SubmitMode::Dispatcher)
        .open()
        .unwrap();
    let refused = dispatcher.thread_ring().err().map(|e| e.kind());
    assert_eq!(refused, Some(std::io::ErrorKind::Unsupported));
}

/// A `Cancel` shutdown while the owner of a bound ring sleeps on its
/// descriptor with a read out that would never complete: the shutdown
/// ends, and the read is cancelled.
#[test]
fn a_cancel_shutdown_ends_while_a_bound_ring_waits() {
    let engine = Engine::nop().scheduler("bfq").open().unwrap();
    let flow = Arc::new(engine.flow(FlowOptions::default()).unwrap());
    let target = Arc::new(pipe());
    let (tx, rx) = mpsc::channel();
    let (engine_tx, engine_rx) = mpsc::channel();
    let owner = {
        let (flow, target) = (flow.clone(), target.clone());
        std::thread::spawn(move || {
            let engine: Arc<Engine> = engine_rx.recv().unwrap();
            let ring = engine.thread_ring().unwrap();
            drop(engine);
            let mut read = flow.read_file_async(&target.0, 0, vec![0u8; 8]);
            assert!(!poll_once(&mut read));
            tx.send(()).unwrap();
            // In a shutdown the service thread takes the ring over and
            // may reap the read itself: its result then comes through
            // the waker, not the descriptor.
            let give_up = std::time::Instant::now() + HANG;
            while !read.is_done() && std::time::Instant::now() < give_up {
                readable(ring.as_raw_fd(), 10);
                ring.reap();
            }
            let (res, _) = read.wait();
            res.map_err(|e| e.raw_os_error())
        })
    };
    let engine = Arc::new(engine);
    engine_tx.send(engine.clone()).unwrap();
    rx.recv_timeout(HANG).unwrap();
    let engine = Arc::try_unwrap(engine).ok().unwrap();
    let s = within(move || engine.shutdown(ShutdownMode::Cancel).unwrap());
    assert_eq!(owner.join().unwrap(), Err(Some(libc::ECANCELED)));
    assert_eq!(s.held, 0);
}

/// Dropping a `ThreadRing` with a request on the ring leaves the ring to
/// the service thread: a read completing after the drop reaches its
/// waiter on another thread while the owner sleeps elsewhere.
#[test]
fn a_dropped_thread_ring_leaves_its_requests_to_the_service_thread() {
    let BoundRead {
        engine: _engine,
        _flow,
        _target,
        mut w,
        ring,
        read,
    } = BoundRead::polled(3);
    drop(ring);
    let waiter = std::thread::spawn(move || read.wait());
    w.write_all(b"abc").unwrap();
    let (res, buf) = within(move || waiter.join().unwrap());
    assert_eq!((res.unwrap(), &buf[..]), (3, &b"abc"[..]));
}

/// A runtime with an io_uring of its own (glommio, monoio) watches a
/// bound ring with a poll request in its ring: it completes once a
/// request on the bound ring has.
#[test]
fn a_bound_ring_is_watched_from_another_io_uring() {
    use io_uring::{opcode, types, IoUring};
    let BoundRead {
        engine: _engine,
        _flow,
        _target,
        mut w,
        ring,
        read,
    } = BoundRead::polled(2);
    let mut runtime = IoUring::new(8).unwrap();
    let poll = opcode::PollAdd::new(types::Fd(ring.as_raw_fd()), libc::POLLIN as u32);
    // SAFETY: the entry refers to no memory.
    unsafe { runtime.submission().push(&poll.build().user_data(7)) }.unwrap();
    runtime.submit().unwrap();
    let writer = std::thread::spawn(move || w.write_all(b"ok").unwrap());
    let ts = types::Timespec::from(HANG);
    let args = types::SubmitArgs::new().timespec(&ts);
    runtime.submitter().submit_with_args(1, &args).unwrap();
    let cqe = runtime
        .completion()
        .next()
        .expect("the poll request completed");
    assert_eq!(cqe.user_data(), 7);
    assert!(cqe.result() > 0 && cqe.result() as i16 & libc::POLLIN != 0);
    reap_until_done(&ring, &read);
    let (res, buf) = read.wait();
    assert_eq!((res.unwrap(), &buf[..]), (2, &b"ok"[..]));
    writer.join().unwrap();
}

/// The owner of a bound ring polls a read once, hands it to another
/// thread and then sleeps elsewhere (not on the descriptor): once the
/// read completes, the service thread takes the ring over from the
/// unresponsive owner and the other thread gets the result.
#[test]
fn a_bound_ring_whose_owner_sleeps_elsewhere_is_taken_over() {
    let BoundRead {
        engine,
        _flow,
        _target,
        mut w,
        ring,
        read,
    } = BoundRead::polled(4);
    let waiter = std::thread::spawn(move || read.wait());
    w.write_all(b"away").unwrap();
    // The owner sleeps here, not in the engine, until the result is in.
    let (res, buf) = within(move || waiter.join().unwrap());
    assert_eq!((res.unwrap(), &buf[..]), (4, &b"away"[..]));
    assert!(engine.stats().unwrap().bound_takeovers >= 1);
    drop(ring);
}
