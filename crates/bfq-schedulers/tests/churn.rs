//! Memory stays flat while flows and groups come and go: after 100 000
//! flows (in groups that come and go too) were created, used and removed,
//! every scheduler holds no more heap than after the first few thousand.
//!
//! The heap is measured by a counting allocator, per thread, so tests
//! running in parallel do not disturb each other. Nothing is timed.

use bfq_alloc_count::PerThread;
use bfq_core::{Dispatch, FlowSpec, GroupId, Op, Request, Scheduler, Settings, MS};
use bfq_schedulers::{build, SCHEDULERS};

#[global_allocator]
static A: PerThread = PerThread;

fn live() -> i64 {
    PerThread::live_bytes()
}

/// Creates `n` flows, 8 at a time, in a group made for each batch, gives
/// each a request, serves everything, removes them and the group (half of
/// the flows are removed while their request is still held).
fn churn(s: &mut dyn Scheduler, n: u64, next_id: &mut u64, now: &mut u64) {
    for _ in 0..n / 8 {
        let g = s.add_group(GroupId::ROOT, 100).unwrap();
        let mut flows = Vec::with_capacity(8);
        for i in 0..8u64 {
            let f = s
                .add_flow(
                    *now,
                    FlowSpec {
                        group: g,
                        ..FlowSpec::with_weight(100)
                    },
                )
                .unwrap();
            *next_id += 1;
            let r = Request {
                id: *next_id,
                flow: f,
                sector: (*next_id % 1000) * 4096 + i,
                sectors: 8,
                op: Op::Read,
                sync: true,
            };
            s.add_request(*now, r).unwrap();
            if i % 2 == 0 {
                s.remove_flow(*now, f).unwrap();
            } else {
                flows.push(f);
            }
        }
        let mut guard = 0;
        while s.queued() > 0 {
            guard += 1;
            assert!(guard < 10_000, "{}: stalled", s.name());
            match s.dispatch(*now) {
                Dispatch::Request(r) => {
                    *now += MS / 10;
                    s.complete(*now, r.id).unwrap();
                }
                Dispatch::Idle { until } => *now = until,
                Dispatch::Wait | Dispatch::Empty => *now += MS,
            }
        }
        for f in flows {
            s.remove_flow(*now, f).unwrap();
        }
        s.remove_group(g).unwrap();
        // Let lingering state (idle timers, think-time windows) expire.
        *now += 10 * MS;
        assert!(matches!(s.dispatch(*now), Dispatch::Empty), "{}", s.name());
    }
}

#[test]
fn heap_stays_flat_under_flow_and_group_churn() {
    for e in SCHEDULERS {
        let mut s = build(e.name, &Settings::new()).unwrap();
        let (mut id, mut now) = (0, 0);
        // Warm up: reuse pools and tables reach their working size.
        churn(&mut s, 4_000, &mut id, &mut now);
        let before = live();
        churn(&mut s, 100_000, &mut id, &mut now);
        let grown = live() - before;
        // 100 000 flows at even 8 bytes each would be 800 KB.
        assert!(
            grown < 64 * 1024,
            "{}: heap grew by {grown} bytes over 100000 flows",
            e.name
        );
    }
}
