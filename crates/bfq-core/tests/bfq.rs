//! Behaviour of the 2010 BFQ algorithm through the public interface.

mod common;
use bfq_core::fluid::{max_service_deficit, Fluid};
use bfq_core::*;
use common::*;
use proptest::prelude::*;

/// The 2010 algorithm (these tests check its core: B-WF2Q+, budgets,
/// idling).
fn bfq() -> Bfq {
    Bfq::new(BfqConfig::paper_2010())
}

/// Today's BFQ with every heuristic, but a fixed B_max (the harness device
/// is so fast that the auto-tuned B_max would make turns very long).
fn bfq_kernel() -> Bfq {
    Bfq::from_settings(&Settings::from_pairs([("max_budget", "16384")])).unwrap()
}

fn share(log: &RunLog, i: usize) -> f64 {
    log.per_flow[i] as f64 / log.per_flow.iter().sum::<u64>() as f64
}

#[test]
fn async_backlogged_flows_share_by_weight() {
    for mut s in [bfq(), bfq_kernel()] {
        let defs = [
            FlowDef::new(100, Kind::Async { depth: 8 }),
            FlowDef::new(200, Kind::Async { depth: 8 }),
        ];
        let log = run(&mut s, Dev::default(), &defs, 5 * SEC, 1);
        let r = log.per_flow[1] as f64 / log.per_flow[0] as f64;
        assert!((r - 2.0).abs() < 0.05, "ratio {r}");
    }
}

#[test]
fn sync_sequential_readers_keep_weights_thanks_to_idling() {
    let mut s = bfq();
    let mut a = FlowDef::new(100, Kind::Sync { think: 100 * US });
    let mut b = FlowDef::new(300, Kind::Sync { think: 100 * US });
    a.base = 0;
    b.base = 50_000_000;
    let log = run(&mut s, Dev::default(), &[a, b], 10 * SEC, 1);
    assert!(
        (share(&log, 1) - 0.75).abs() < 0.03,
        "share {}",
        share(&log, 1)
    );
    // Without idling a sync reader loses its turn after each request and
    // the device seeks between the two files every time.
    let mut s0 = Bfq::from_settings(&Settings::from_pairs([("slice_idle", "0")])).unwrap();
    let log0 = run(&mut s0, Dev::default(), &[a, b], 10 * SEC, 1);
    let total: u64 = log.per_flow.iter().sum();
    let total0: u64 = log0.per_flow.iter().sum();
    assert!(
        total > 3 * total0,
        "idling should boost throughput: {total} vs {total0}"
    );
}

#[test]
fn a_group_is_one_entity_among_its_siblings() {
    let mut s = bfq();
    let a = s.add_group(GroupId::ROOT, 200).unwrap();
    let b = s.add_group(GroupId::ROOT, 100).unwrap();
    let mut defs = vec![];
    let mut f = FlowDef::new(100, Kind::Async { depth: 4 });
    f.spec.group = a;
    defs.push(f);
    for _ in 0..3 {
        let mut f = FlowDef::new(100, Kind::Async { depth: 4 });
        f.spec.group = b;
        defs.push(f);
    }
    let log = run(&mut s, Dev::default(), &defs, 5 * SEC, 1);
    assert!(
        (share(&log, 0) - 2.0 / 3.0).abs() < 0.03,
        "group a share {}",
        share(&log, 0)
    );
    // Inside group b the three flows split their third evenly.
    for i in 1..4 {
        assert!((share(&log, i) - 1.0 / 9.0).abs() < 0.02);
    }
}

#[test]
fn nested_groups() {
    let mut s = bfq();
    let a = s.add_group(GroupId::ROOT, 100).unwrap();
    let a1 = s.add_group(a, 300).unwrap();
    let a2 = s.add_group(a, 100).unwrap();
    let mut defs = vec![];
    for g in [a1, a2, GroupId::ROOT] {
        let mut f = FlowDef::new(100, Kind::Async { depth: 4 });
        f.spec.group = g;
        defs.push(f);
    }
    let log = run(&mut s, Dev::default(), &defs, 5 * SEC, 1);
    // Root: group a (100) vs flow (100) -> 1/2 each; a splits 3:1.
    assert!((share(&log, 2) - 0.5).abs() < 0.03);
    assert!((share(&log, 0) - 0.375).abs() < 0.03);
    assert!((share(&log, 1) - 0.125).abs() < 0.03);
}

#[test]
fn classes_are_served_in_strict_priority_and_idle_is_not_starved() {
    classes_check(bfq);
    classes_check(bfq_kernel);
}

fn classes_check(mk: fn() -> Bfq) {
    let mut s = mk();
    let mut rt = FlowDef::new(100, Kind::Async { depth: 4 });
    rt.spec.prio = IoPrio {
        class: IoClass::Rt,
        level: 4,
    };
    let be = FlowDef::new(100, Kind::Async { depth: 4 });
    let mut idle = FlowDef::new(100, Kind::Async { depth: 4 });
    idle.spec.prio = IoPrio {
        class: IoClass::Idle,
        level: 7,
    };
    let log = run(&mut s, Dev::default(), &[rt, be, idle], 3 * SEC, 1);
    // While the flows issue requests (until 3 s), RT is always backlogged.
    let before = |f: usize| {
        log.served
            .iter()
            .filter(|e| e.flow == f && e.time < 3 * SEC)
            .map(|e| e.sectors)
            .sum::<u64>()
    };
    assert_eq!(before(1), 0, "BE served while RT backlogged");
    assert!(before(2) > 0, "idle class starved");
    assert!(before(0) > 10 * before(2));
    // Without RT, BE goes first; idle only gets the starvation share.
    let mut s = mk();
    let log = run(&mut s, Dev::default(), &[be, idle], 3 * SEC, 1);
    assert!(share(&log, 0) > 0.9 && log.per_flow[1] > 0);
}

#[test]
fn budget_timeout_overcharges_slow_flows() {
    // One flow's requests are slow (random, seeking), the other's fast
    // (sequential). Each turn lasts at most T_max = 125 ms. Both are
    // async: without the async over-charge, so that only time charging
    // sets their shares.
    let mut cfg = BfqConfig::default();
    cfg.charge.async_charge_factor = 1;
    let mut s = Bfq::new(cfg);
    let mut slow = FlowDef::new(100, Kind::Async { depth: 4 });
    slow.seq = false;
    slow.size = 8;
    let fast = FlowDef::new(100, Kind::Async { depth: 4 });
    let dev = Dev {
        seek: 10 * MS,
        ..Dev::default()
    };
    let mut turns: Vec<(FlowId, Time)> = vec![];
    let log = run_with(&mut s, dev, &[slow, fast], 5 * SEC, 3, |sch, r| {
        let _ = sch;
        match turns.last_mut() {
            Some(t) if t.0 == r.flow => {}
            _ => turns.push((r.flow, 0)),
        }
    });
    // The slow flow is over-charged its full budget each time: it gets far
    // fewer sectors but not less disk time than the fast one.
    assert!(log.per_flow[0] * 20 < log.per_flow[1], "{:?}", log.per_flow);
    assert!(turns.len() > 10);
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    let mut s = bfq();
    let f = s.add_flow(0, FlowSpec::with_weight(100)).unwrap();
    let r = Request {
        id: 1,
        flow: f,
        sector: 0,
        sectors: 8,
        op: Op::Read,
        sync: true,
    };
    refuses_bad_flows_and_groups(&mut s);
    refuses_bad_requests(&mut s, r);
    // Removing a flow: new requests refused, then the id is unknown.
    s.remove_flow(2, f).unwrap();
    assert_eq!(
        s.add_request(2, Request { id: 2, ..r }),
        Err(SchedError::UnknownFlow(f))
    );
    assert_eq!(s.remove_flow(2, f), Err(SchedError::UnknownFlow(f)));
    assert!(matches!(
        Bfq::from_settings(&Settings::from_pairs([("max_budget", "x")])),
        Err(SchedError::InvalidSetting { .. })
    ));
    assert!(matches!(
        Bfq::from_settings(&Settings::from_pairs([("nope", "1")])),
        Err(SchedError::UnknownSetting { .. })
    ));
}

/// Flows of weight 0 or 1001, of level 8 or in an unknown group, and a
/// group of weight 0, are refused.
fn refuses_bad_flows_and_groups(s: &mut Bfq) {
    assert_eq!(
        s.add_flow(0, FlowSpec::with_weight(0)),
        Err(SchedError::InvalidWeight(0))
    );
    assert_eq!(
        s.add_flow(0, FlowSpec::with_weight(1001)),
        Err(SchedError::InvalidWeight(1001))
    );
    let bad_level = FlowSpec {
        prio: IoPrio {
            class: IoClass::Be,
            level: 8,
        },
        ..FlowSpec::default()
    };
    assert_eq!(s.add_flow(0, bad_level), Err(SchedError::InvalidLevel(8)));
    let bad_group = FlowSpec {
        group: GroupId(42),
        ..FlowSpec::default()
    };
    assert_eq!(
        s.add_flow(0, bad_group),
        Err(SchedError::UnknownGroup(GroupId(42)))
    );
    assert_eq!(
        s.add_group(GroupId::ROOT, 0),
        Err(SchedError::InvalidWeight(0))
    );
}

/// A request of an unknown flow, of no sectors or added twice is
/// refused, and so is the completion of a request not dispatched,
/// unknown or completed already; request `r` (id 1) is served meanwhile.
fn refuses_bad_requests(s: &mut Bfq, r: Request) {
    assert_eq!(
        s.add_request(
            0,
            Request {
                flow: FlowId(9),
                ..r
            }
        ),
        Err(SchedError::UnknownFlow(FlowId(9)))
    );
    assert_eq!(
        s.add_request(0, Request { sectors: 0, ..r }),
        Err(SchedError::ZeroLength(1))
    );
    s.add_request(0, r).unwrap();
    assert_eq!(s.add_request(0, r), Err(SchedError::DuplicateRequest(1)));
    assert_eq!(s.complete(0, 1), Err(SchedError::NotDispatched(1)));
    assert_eq!(s.complete(0, 7), Err(SchedError::UnknownRequest(7)));
    assert!(matches!(s.dispatch(0), Dispatch::Request(_)));
    s.complete(1, 1).unwrap();
    assert_eq!(s.complete(1, 1), Err(SchedError::UnknownRequest(1)));
}

#[test]
fn removed_flow_with_queued_requests_drains() {
    let mut s = bfq();
    let g = s.add_group(GroupId::ROOT, 100).unwrap();
    let f = s
        .add_flow(
            0,
            FlowSpec {
                group: g,
                ..FlowSpec::with_weight(100)
            },
        )
        .unwrap();
    for id in 0..4 {
        s.add_request(
            0,
            Request {
                id,
                flow: f,
                sector: id * 8,
                sectors: 8,
                op: Op::Write,
                sync: false,
            },
        )
        .unwrap();
    }
    s.remove_flow(0, f).unwrap();
    assert_eq!(s.remove_group(g), Err(SchedError::GroupNotEmpty(g)));
    let mut n = 0;
    while let Dispatch::Request(r) = s.dispatch(n) {
        s.complete(n + 1, r.id).unwrap();
        n += 1;
    }
    assert_eq!(n, 4);
    s.remove_group(g).unwrap();
    s.check_invariants();
}

#[derive(Clone, Debug)]
struct PFlow {
    weight: u32,
    sync: bool,
    seq: bool,
    size: u32,
    start_ms: u64,
    stop_ms: Option<u64>,
}

fn pflow() -> impl Strategy<Value = PFlow> {
    (
        1u32..=1000,
        any::<bool>(),
        any::<bool>(),
        1u32..=256,
        0u64..300,
        proptest::option::of(100u64..1500),
    )
        .prop_map(|(weight, sync, seq, size, start_ms, stop_ms)| PFlow {
            weight,
            sync,
            seq,
            size,
            start_ms,
            stop_ms,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    /// Theorem 1 of the 2010 paper, every request dispatched and completed
    /// exactly once, and no backlogged flow passed over for long: Theorem 1
    /// bounds the service others get while flow i waits to
    /// (B_max + B_i,max + L_max) / phi_i, checked directly.
    #[test]
    fn theorem_1_and_exactly_once(flows in proptest::collection::vec(pflow(), 1..8), seed in any::<u64>(), max_budget in prop_oneof![Just(512u64), Just(4096), Just(16384)], profile in prop_oneof![Just("bfq-2010"), Just("bfq"), Just("bfq-plus-2014")]) {
        // With the heuristics on (profiles bfq and bfq-plus-2014), the two
        // heuristics whose purpose is to give some flows less or more than
        // their weighted share are switched off: weight raising, and the
        // async over-charge (it applies to async flows in symmetric
        // scenarios, e.g. a sync and an async flow of equal weight).
        // Everything else stays on.
        // Theorem 1 assumes no budget timeout (no over-charge): random
        // 1-sector requests can make a turn outlast the default 125 ms even
        // on this fast device, so T_max is made long here.
        let mut s = Bfq::from_profile(profile, &Settings::from_pairs([("max_budget", max_budget.to_string()), ("low_latency", "0".to_string()), ("async_charge_factor", "1".to_string()), ("timeout_sync", "10s".to_string())])).unwrap();
        let defs: Vec<FlowDef> = flows.iter().enumerate().map(|(i, p)| {
            let kind = if p.sync { Kind::Sync { think: 50 * US } } else { Kind::Async { depth: 4 } };
            let mut d = FlowDef::new(p.weight, kind);
            d.seq = p.seq;
            d.size = p.size;
            d.start = p.start_ms * MS;
            d.stop = p.stop_ms.map_or(Time::MAX, |x| x * MS);
            d.base = i as u64 * 10_000_000;
            d
        }).collect();
        // A fast device: no turn reaches the budget timeout, so Theorem 1's
        // assumptions hold.
        let dev = Dev { per_req: 5 * US, per_sector: 2, seek: 100 * US, depth: 1, ..Dev::default() };
        let mut fluid = Fluid::new();
        for d in &defs { fluid.add_flow(d.spec.effective_weight()); }
        let log = run(&mut s, dev, &defs, 2 * SEC, seed);
        s.check_invariants();
        prop_assert_eq!(&log.dispatched_ids, &log.completed_ids);
        prop_assert_eq!(log.dispatched_ids.len() as u64, log.issued);
        prop_assert_eq!(s.queued() + s.in_flight(), 0);
        let l_max = flows.iter().map(|p| u64::from(p.size)).max().unwrap();
        for (i, p) in flows.iter().enumerate() {
            for &(t1, t2) in &log.backlog[i] {
                // phi_i over the flows present during the interval.
                let wsum: u32 = defs.iter().filter(|d| d.start <= t2 && d.stop > t1).map(|d| d.spec.effective_weight()).sum();
                let phi = f64::from(p.weight) / f64::from(wsum);
                let deficit = max_service_deficit(&log.served, i, phi, t1, t2);
                let bound = (max_budget + max_budget + l_max) as f64;
                prop_assert!(deficit <= bound, "flow {} deficit {} > bound {} over [{}, {}]", i, deficit, bound, t1, t2);
                // Bounded wait: service to the others between two of flow
                // i's dispatches (or from the start of its backlog).
                let mut others = 0u64;
                for e in log.served.iter().filter(|e| e.time >= t1 && e.time <= t2) {
                    if e.flow == i {
                        prop_assert!(others as f64 <= bound / phi, "flow {} waited while others got {} sectors (bound {})", i, others, bound / phi);
                        others = 0;
                    } else {
                        others += e.sectors;
                    }
                }
            }
        }
    }

    /// Against the fluid GPS reference: with all flows continuously
    /// backlogged, each flow's lag stays within B_max + B_i,max + L_max.
    #[test]
    fn lag_against_fluid_reference(weights in proptest::collection::vec(1u32..=1000, 2..10), size in 8u32..=256, kernel in any::<bool>()) {
        let mut s = if kernel { bfq_kernel() } else { bfq() };
        let defs: Vec<FlowDef> = weights.iter().map(|&w| { let mut d = FlowDef::new(w, Kind::Async { depth: 2 }); d.size = size; d }).collect();
        let mut fluid = Fluid::new();
        for &w in &weights { fluid.add_flow(w); }
        for i in 0..weights.len() { fluid.arrive(i, u64::MAX / 4); }
        let log = run(&mut s, Dev::default(), &defs, SEC, 1);
        let mut real = vec![0u64; weights.len()];
        let bound = (2 * 16384 + u64::from(size)) as f64;
        for e in &log.served {
            fluid.serve(e.sectors);
            real[e.flow] += e.sectors;
            for (i, &r) in real.iter().enumerate() {
                prop_assert!(fluid.lag(i, r) <= bound, "flow {} lag {}", i, fluid.lag(i, r));
            }
        }
    }
}
