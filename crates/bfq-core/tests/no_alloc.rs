//! No allocation per request in a deep queue: once a flow's queue of
//! thousands of random writes (deeper than the sorted buffer, so kept in
//! chunks) has grown, requests through it allocate nothing (counted with
//! a counting allocator on the thread that drives the scheduler, so the
//! test harness's own threads do not count; nothing is timed).

use bfq_alloc_count::PerThread;
use bfq_core::{Bfq, BfqConfig, Dispatch, FlowSpec, Op, Request, Scheduler, Time, US};

#[global_allocator]
static A: PerThread = PerThread;

/// A sector scattered over ~1 TiB by request number (as `bfq bench-core
/// --random`).
fn sector(n: u64) -> u64 {
    (n.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 33) << 3
}

/// `n` cycles of one backlogged flow: dispatch, complete, and a new
/// random write under the completed one's id.
fn cycles(s: &mut Bfq, next: &mut u64, now: &mut Time, n: u64) {
    for _ in 0..n {
        *now += US;
        let Dispatch::Request(r) = s.dispatch(*now) else {
            panic!("a backlogged flow dispatched nothing")
        };
        s.complete(*now, r.id).unwrap();
        let req = Request {
            sector: sector(*next),
            ..r
        };
        *next += 1;
        s.add_request(*now, req).unwrap();
    }
}

#[test]
fn a_deep_random_queue_allocates_nothing_per_request() {
    for queued in [2_000u64, 16_000] {
        let mut s = Bfq::new(BfqConfig::kernel());
        let flow = s.add_flow(0, FlowSpec::with_weight(100)).unwrap();
        for id in 0..queued {
            let req = Request {
                id,
                flow,
                sector: sector(id),
                sectors: 8,
                op: Op::Write,
                sync: false,
            };
            s.add_request(0, req).unwrap();
        }
        let (mut next, mut now) = (queued, 0);
        cycles(&mut s, &mut next, &mut now, 4 * queued);
        let before = PerThread::allocations();
        cycles(&mut s, &mut next, &mut now, 300_000);
        let allocs = PerThread::allocations() - before;
        // A B-tree allocated some 13 000 times per 100 000 requests here.
        assert_eq!(allocs, 0, "{queued} queued: {allocs} allocations");
    }
}
