//! The engine's heap stays flat while flows come and go: 8 000 flows
//! opened, used once and closed leave no more memory behind than the first
//! thousand. Measured with a counting allocator (the only test of this
//! binary, so nothing else allocates meanwhile); nothing is timed.

use bfq_alloc_count::Counting;
use bfq_engine::{Engine, FlowOptions, ShutdownMode};

#[global_allocator]
static A: Counting = Counting;

fn churn(engine: &Engine, n: u64) {
    for i in 0..n {
        let flow = engine.flow(FlowOptions::weight(100)).unwrap();
        assert_eq!(flow.nop_async(i * 8, 8).wait().0.unwrap(), 4096);
    }
    // Every close has reached the dispatcher once a call after it returns.
    engine.stats().unwrap();
}

#[test]
fn engine_heap_stays_flat_under_flow_churn() {
    // Each scheduler alone keeps flat (crates/bfq-schedulers/tests/churn.rs);
    // here the engine's own state around it.
    let engine = Engine::nop().scheduler("bfq").open().unwrap();
    churn(&engine, 1_000);
    let before = Counting::live_bytes();
    churn(&engine, 8_000);
    let grown = Counting::live_bytes() - before;
    // Before flows' state was freed: about 500 bytes per flow, 4 MB.
    assert!(
        grown < 128 * 1024,
        "heap grew by {grown} bytes over 8000 flows"
    );
    engine.shutdown(ShutdownMode::Drain).unwrap();
}
