//! What the builder, `open` and the engine's calls promise at the edges of
//! their ranges (no root needed; no assertion depends on timing).

use bfq_engine::{AlignedBuf, Engine, FlowOptions, ShutdownMode};

/// A read or write on an engine from `Engine::nop()` is an io_uring NOP:
/// it moves no bytes (a read's buffer is left as it was) and reports its
/// full length, as `nop_async` does; none counts as an error.
#[test]
fn reads_and_writes_on_a_nop_engine_report_their_full_length() {
    let engine = Engine::nop().open().unwrap();
    let flow = engine.flow(FlowOptions::weight(100)).unwrap();
    let (r, buf) = flow.read(0, AlignedBuf::from_slice(&[7u8; 4096]));
    assert_eq!(r.unwrap(), 4096);
    assert!(buf.iter().all(|&b| b == 7), "a NOP read wrote the buffer");
    let (r, _) = flow.write(1 << 20, vec![1u8; 512]);
    assert_eq!(r.unwrap(), 512);
    let (r, _) = flow.read_async(0, vec![0u8; 100]).wait();
    assert_eq!(r.unwrap(), 100);
    let (r, ()) = flow.nop_async(0, 8).wait();
    assert_eq!(r.unwrap(), 4096);
    drop(flow);
    let stats = engine.shutdown(ShutdownMode::Drain).unwrap();
    assert_eq!((stats.completed, stats.errors), (4, 0), "{stats:?}");
}
