//! No allocation per request: once a thread's completion slots and the
//! engine's tables have grown to its number of outstanding requests,
//! requests through the engine allocate nothing (counted with a counting
//! allocator, the only test of this binary; nothing is timed).

use bfq_alloc_count::Counting;
use bfq_engine::{AlignedBuf, Engine, FlowOptions, ShutdownMode};
use std::collections::VecDeque;

#[global_allocator]
static A: Counting = Counting;

/// `n` NOP requests, `window` outstanding, half of them waited for at a
/// time (as `bfq bench-engine nop`).
fn requests(engine: &Engine, n: u64, window: usize) {
    let flow = engine.flow(FlowOptions::weight(100).sync(false)).unwrap();
    let mut q: VecDeque<bfq_engine::Pending<()>> = VecDeque::with_capacity(window);
    let mut sector = 0;
    for _ in 0..n {
        if q.len() == window {
            for _ in 0..window / 2 {
                assert!(q.pop_front().unwrap().wait().0.is_ok());
            }
        }
        q.push_back(flow.nop_async(sector, 8));
        sector += 8;
    }
    for p in q {
        assert!(p.wait().0.is_ok());
    }
}

#[test]
fn requests_allocate_nothing_once_warm() {
    // fifo: the engine's own costs (bfq's tables allocate as they grow).
    let engine = Engine::nop().scheduler("fifo").open().unwrap();
    requests(&engine, 20_000, 256);
    let before = Counting::allocations();
    requests(&engine, 100_000, 256);
    let allocs = Counting::allocations() - before;
    // Opening the flow and waking the service thread now and then
    // allocate a little; one completion slot per request was 100 000.
    assert!(allocs < 1_000, "{allocs} allocations for 100 000 requests");
    engine.shutdown(ShutdownMode::Drain).unwrap();

    // Reads and writes into the caller's buffers, blocking.
    let file = tempfile::NamedTempFile::new().unwrap();
    file.as_file().set_len(1 << 20).unwrap();
    let engine = Engine::builder(file.path())
        .writable(true)
        .direct(false)
        .open()
        .unwrap();
    let flow = engine.flow(FlowOptions::weight(100)).unwrap();
    let mut buf = Some(AlignedBuf::new(4096));
    let mut blocking = |n: u64| {
        for i in 0..n {
            let (r, b) = flow.read((i % 256) * 4096, buf.take().unwrap());
            assert_eq!(r.unwrap(), 4096);
            buf = Some(b);
        }
    };
    blocking(1_000);
    let before = Counting::allocations();
    blocking(10_000);
    let allocs = Counting::allocations() - before;
    assert!(allocs < 100, "{allocs} allocations for 10 000 reads");
    drop(flow);
    engine.shutdown(ShutdownMode::Drain).unwrap();
}
