//! Regressions found by reviewing the injection fairness rules (flows kept
//! backlogged while their request is in flight, lingering in the idling
//! census): removed flows leaking in the census, and a merged, removed flow
//! freeing a still-queued entity. Each test drives the public interface
//! call by call; each failed before the fix (`Bfq::retire`/`release`).

use bfq_core::*;

/// `inject_large_once` off: these 64-sector reads are injected beside the
/// idling flow's own request in flight, which is what reaches the paths
/// under test.
fn bfq(kv: &[(&str, &str)]) -> Bfq {
    let mut pairs = vec![
        ("max_budget", "16384"),
        ("low_latency", "0"),
        ("inject_large_once", "0"),
    ];
    pairs.extend_from_slice(kv);
    Bfq::from_profile("bfq", &Settings::from_pairs(pairs.iter().copied())).unwrap()
}

fn read(id: u64, flow: FlowId, sector: u64) -> Request {
    Request {
        id,
        flow,
        sector,
        sectors: 64,
        op: Op::Read,
        sync: true,
    }
}

fn req(d: Dispatch) -> Request {
    match d {
        Dispatch::Request(r) => r,
        d => panic!("expected a request, got {d:?}"),
    }
}

/// Puts `y` in service with the baseline service time that starts
/// injection into its idle time: nothing is injected into a flow's idle
/// time until a request of its own, arriving while it is idled for, was
/// served with nothing else in flight (kernel). Request ids 101 and 102,
/// times 0 to 3 ns.
fn in_service_with_baseline(s: &mut Bfq, y: FlowId) {
    s.add_request(0, read(101, y, 0)).unwrap();
    assert_eq!(req(s.dispatch(0)).flow, y);
    s.complete(1, 101).unwrap();
    s.add_request(2, read(102, y, 0)).unwrap();
    assert_eq!(req(s.dispatch(2)).flow, y);
    s.complete(3, 102).unwrap();
}

const SSD: DeviceInfo = DeviceInfo {
    queue_depth: 8,
    queues_internally: true,
    rotational: false,
};

const NCQ_DISK: DeviceInfo = DeviceInfo {
    queue_depth: 32,
    queues_internally: true,
    rotational: true,
};

/// a sync flow removed while its last request is in flight, and not
/// in service when it completes, "lingers" in the idling census
/// (`complete` pushes it to `Lingering` without checking `retired`), then
/// is freed by `topo.release`; `end_lingering` later finds no flow
/// (`existing_flow_mut` is None) and skips it, so the flow stays counted
/// busy in the census forever. Here the leaked weight-100 flow makes a lone
/// weight-100 reader look like one of two symmetric flows: it is no longer
/// idled for (heuristic 6), unlike when the same flow is removed after its
/// completion. With another weight, the leak instead makes every later
/// scenario asymmetric (idling for everyone, forever).
#[test]
fn removed_flow_lingering_at_its_last_completion_leaks_in_the_census() {
    let go = |remove_before_completion: bool| -> Dispatch {
        let mut s = bfq(&[]);
        s.set_device(SSD);
        let y = s.add_flow(0, FlowSpec::with_weight(200)).unwrap();
        let x = s.add_flow(0, FlowSpec::with_weight(100)).unwrap();
        in_service_with_baseline(&mut s, y);
        s.add_request(4, read(1, y, 0)).unwrap();
        let r1 = req(s.dispatch(4));
        assert_eq!(r1.flow, y);
        // X's request arrives while Y (heavier: no preemption) idles for
        // its own request; it is injected.
        s.add_request(10, read(2, x, 50_000_000)).unwrap();
        let r2 = req(s.dispatch(10));
        assert_eq!(r2.flow, x);
        assert_eq!(s.stats().injected, 1);
        if remove_before_completion {
            s.remove_flow(20, x).unwrap();
        }
        // X's request completes while Y is in service: X lingers.
        s.complete(100, 2).unwrap();
        if !remove_before_completion {
            s.remove_flow(110, x).unwrap();
        }
        // Y's request completes; its turn ends once idling is over.
        s.complete(200, 1).unwrap();
        let mut now = 200;
        loop {
            match s.dispatch(now) {
                Dispatch::Idle { until } => now = until,
                Dispatch::Empty => break,
                d => panic!("{d:?}"),
            }
        }
        s.remove_flow(now, y).unwrap();
        now += 100 * MS;
        // A lone weight-100 sync reader: waited for after its request
        // (busy_flows <= 1 in the census).
        let z = s.add_flow(now, FlowSpec::with_weight(100)).unwrap();
        s.add_request(now, read(3, z, 0)).unwrap();
        let r = req(s.dispatch(now));
        s.complete(now + 100, r.id).unwrap();
        s.dispatch(now + 200)
    };
    let reference = go(false);
    assert!(matches!(reference, Dispatch::Idle { .. }), "{reference:?}");
    assert_eq!(go(true), reference, "census leaked the removed flow");
}

/// a flow kept Queued in B-WF2Q+ with an empty queue (injection
/// emptied it, `stays_backlogged`) keeps that state while it lingers after
/// its completion. If its next request is merged into the active flow's
/// queue (heuristic 8) and the flow is then removed, the merged request's
/// completion frees it through `topo.release(flow)` in `complete`, which
/// calls `free_entity` on the still-Queued entity (no `leave_tree` on that
/// path): debug_assert in debug builds; in release builds the Dead entity
/// stays in the service tree, is selected later and `start_turn` panics
/// ("flow with held requests", table.rs) — a crash, not just a skew.
#[test]
fn merged_flow_removed_while_queued_with_an_empty_queue_frees_a_queued_entity() {
    let mut s = bfq(&[]);
    s.set_device(NCQ_DISK);
    let y = s.add_flow(0, FlowSpec::with_weight(200)).unwrap();
    let x = s.add_flow(0, FlowSpec::with_weight(100)).unwrap();
    in_service_with_baseline(&mut s, y);
    s.add_request(4, read(1, y, 0)).unwrap();
    assert_eq!(req(s.dispatch(4)).flow, y);
    // X's far request is injected while Y waits for its own.
    s.add_request(10, read(2, x, 50_000_000)).unwrap();
    let r2 = req(s.dispatch(10));
    assert_eq!(r2.flow, x);
    // X completes while Y is in service: lingers, entity still Queued.
    s.complete(100, 2).unwrap();
    // X's next request lands right after Y's: merged into Y's queue.
    s.add_request(110, read(3, x, 64)).unwrap();
    assert_eq!(s.flow_merged_into(x), Some(y));
    s.remove_flow(120, x).unwrap();
    s.check_invariants();
    let mut now = 130;
    let r3 = req(s.dispatch(now));
    assert_eq!(r3.id, 3);
    s.complete(200, 1).unwrap();
    s.complete(210, 3).unwrap(); // frees X: free_entity on a Queued entity
    s.check_invariants();
    // Drain: nothing left, no panic.
    for _ in 0..100 {
        match s.dispatch(now) {
            Dispatch::Idle { until } => now = until,
            Dispatch::Empty => break,
            d => panic!("{d:?}"),
        }
    }
    s.check_invariants();
}

/// `busy_flows: N` of the idling census, read from the Debug dump.
fn census_busy_flows(s: &Bfq) -> u64 {
    let d = format!("{s:?}");
    let i = d.find("busy_flows: ").expect("census in Debug") + "busy_flows: ".len();
    let rest = &d[i..];
    rest[..rest.find(|c: char| !c.is_ascii_digit()).unwrap()]
        .parse()
        .unwrap()
}

/// Minimal form of the census leak (found by the injection property test
/// of tests/heuristics.rs): no injection and a single flow. An idle-class sync flow is never idled for, so its
/// turn ends as soon as its request is dispatched; removed while that
/// request is in flight, it lingers at the completion and is freed: it
/// stays in the census for good.
#[test]
fn a_single_removed_flow_stays_in_the_census() {
    let mut s = bfq(&[]);
    let f = s
        .add_flow(
            0,
            FlowSpec {
                prio: IoPrio {
                    class: IoClass::Idle,
                    level: 4,
                },
                ..FlowSpec::with_weight(100)
            },
        )
        .unwrap();
    s.add_request(0, read(1, f, 0)).unwrap();
    req(s.dispatch(0));
    assert_eq!(s.dispatch(1), Dispatch::Empty); // turn over, request out
    assert_eq!(s.active_flow(), None);
    s.remove_flow(2, f).unwrap();
    s.complete(100, 1).unwrap();
    assert_eq!(s.dispatch(SEC), Dispatch::Empty);
    assert_eq!(census_busy_flows(&s), 0, "freed flow still counted busy");
}
