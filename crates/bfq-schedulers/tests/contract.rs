//! Properties every registered scheduler must have: bad input gives the
//! shared errors and changes nothing, and for random workloads every
//! request is dispatched exactly once, nothing unknown is ever returned,
//! and the scheduler never stalls.

use bfq_core::{
    Dispatch, FlowId, FlowSpec, GroupId, IoClass, IoPrio, Op, Request, SchedError, Scheduler,
    Settings, Time, MS,
};
use bfq_schedulers::{build, SCHEDULERS};
use proptest::prelude::*;
use std::collections::HashMap;

mod common;
use common::read4k;

/// Every scheduler name with the settings to test it with. Throttling
/// policies are also tested with limits set.
fn configs() -> Vec<(&'static str, Settings)> {
    let mut v: Vec<(&'static str, Settings)> = SCHEDULERS
        .iter()
        .map(|e| (e.name, Settings::new()))
        .collect();
    for (name, pairs) in [
        (
            "throttle-max",
            vec![
                ("max_bps.f0", "1M"),
                ("max_iops.f1", "50"),
                ("max_bps.g1", "2M"),
            ],
        ),
        (
            "throttle-low",
            vec![
                ("low_bps.f0", "1M"),
                ("low_iops.g1", "20"),
                ("max_bps.f2", "4M"),
            ],
        ),
        (
            "scan-edf",
            vec![("t_wait", "4ms"), ("deadline.f1", "5ms"), ("delta", "0")],
        ),
        (
            "yfq",
            vec![("bt_size", "1"), ("t_wait", "4ms"), ("batch_overlap", "0")],
        ),
        ("cfq", vec![("low_latency", "0"), ("slice_idle", "0")]),
        ("as", vec![("antic_expire", "0")]),
    ] {
        if SCHEDULERS.iter().any(|e| e.name == name) {
            v.push((name, Settings::from_pairs(pairs)));
        }
    }
    v
}

#[test]
fn bad_input_gives_shared_errors() {
    for (name, settings) in configs() {
        let mut s = build(name, &settings).unwrap();
        let f = s.add_flow(0, FlowSpec::default()).unwrap();
        assert_eq!(
            s.add_flow(0, FlowSpec::with_weight(0)),
            Err(SchedError::InvalidWeight(0)),
            "{name}"
        );
        let bad_level = FlowSpec {
            prio: IoPrio {
                class: IoClass::Be,
                level: 9,
            },
            ..FlowSpec::default()
        };
        assert_eq!(s.add_flow(0, bad_level), Err(SchedError::InvalidLevel(9)));
        let bad_group = FlowSpec {
            group: GroupId(77),
            ..FlowSpec::default()
        };
        assert_eq!(
            s.add_flow(0, bad_group),
            Err(SchedError::UnknownGroup(GroupId(77)))
        );
        assert_eq!(
            s.add_group(GroupId(5), 100),
            Err(SchedError::UnknownGroup(GroupId(5)))
        );
        assert_eq!(
            s.add_group(GroupId::ROOT, 0),
            Err(SchedError::InvalidWeight(0))
        );
        let mut zero = read4k(1, f, 0);
        zero.sectors = 0;
        assert_eq!(
            s.add_request(0, zero),
            Err(SchedError::ZeroLength(1)),
            "{name}"
        );
        assert_eq!(
            s.add_request(0, read4k(2, FlowId(99), 0)),
            Err(SchedError::UnknownFlow(FlowId(99))),
            "{name}"
        );
        s.add_request(0, read4k(3, f, 100)).unwrap();
        assert_eq!(
            s.add_request(0, read4k(3, f, 200)),
            Err(SchedError::DuplicateRequest(3)),
            "{name}"
        );
        assert_eq!(s.queued(), 1, "{name}: errors must not change the state");
        assert_eq!(
            s.complete(1, 3),
            Err(SchedError::NotDispatched(3)),
            "{name}"
        );
        assert_eq!(
            s.complete(1, 42),
            Err(SchedError::UnknownRequest(42)),
            "{name}"
        );
        // Drain.
        let mut now: Time = 1;
        let mut got = None;
        for _ in 0..100 {
            match s.dispatch(now) {
                Dispatch::Request(r) => {
                    got = Some(r);
                    break;
                }
                Dispatch::Idle { until } => now = until.max(now + 1),
                Dispatch::Wait | Dispatch::Empty => panic!("{name}: stalled"),
            }
        }
        let r = got.unwrap_or_else(|| panic!("{name}: never dispatched"));
        assert_eq!(r.id, 3);
        assert_eq!(s.in_flight(), 1);
        s.complete(now + MS, 3).unwrap();
        assert_eq!(s.complete(now + MS, 3), Err(SchedError::UnknownRequest(3)));
        s.remove_flow(now, f).unwrap();
        assert_eq!(
            s.remove_flow(now, f),
            Err(SchedError::UnknownFlow(f)),
            "{name}"
        );
        assert_eq!(
            s.add_request(now, read4k(4, f, 0)),
            Err(SchedError::UnknownFlow(f)),
            "{name}"
        );
        let g = s.add_group(GroupId::ROOT, 100).unwrap();
        let f2 = s
            .add_flow(
                now,
                FlowSpec {
                    group: g,
                    ..FlowSpec::default()
                },
            )
            .unwrap();
        assert_eq!(
            s.remove_group(g),
            Err(SchedError::GroupNotEmpty(g)),
            "{name}"
        );
        assert_eq!(
            s.remove_group(GroupId::ROOT),
            Err(SchedError::GroupNotEmpty(GroupId::ROOT))
        );
        s.remove_flow(now, f2).unwrap();
        s.remove_group(g).unwrap();
        assert_eq!(s.dispatch(now), Dispatch::Empty, "{name}");
    }
}

#[test]
fn unknown_settings_are_rejected() {
    for e in SCHEDULERS {
        let s = Settings::from_pairs([("no_such_knob", "1")]);
        assert!(
            matches!(build(e.name, &s), Err(SchedError::UnknownSetting { .. })),
            "{}",
            e.name
        );
    }
}

#[derive(Clone, Debug)]
enum OpKind {
    AddFlow {
        class: u8,
        level: u8,
        weight: Option<u32>,
        in_group: bool,
    },
    AddGroup,
    Add {
        flow: usize,
        sector: u64,
        len: u32,
        write: bool,
        sync: bool,
    },
    Dispatch {
        dt: Time,
    },
    Complete {
        pick: usize,
    },
    RemoveFlow {
        pick: usize,
    },
}

fn op_strategy() -> impl Strategy<Value = OpKind> {
    prop_oneof![
        1 => (0u8..3, 0u8..8, proptest::option::of(1u32..1000), any::<bool>())
            .prop_map(|(class, level, weight, in_group)| OpKind::AddFlow { class, level, weight, in_group }),
        1 => Just(OpKind::AddGroup),
        8 => (0usize..16, 0u64..4096, 1u32..64, any::<bool>(), any::<bool>())
            .prop_map(|(flow, s, len, write, sync)| OpKind::Add { flow, sector: s * 64, len, write, sync }),
        6 => (0u64..20_000_000).prop_map(|dt| OpKind::Dispatch { dt }),
        5 => (0usize..64).prop_map(|pick| OpKind::Complete { pick }),
        1 => (0usize..16).prop_map(|pick| OpKind::RemoveFlow { pick }),
    ]
}

/// Runs `ops` on a fresh scheduler, then drains it; checks every request is
/// dispatched exactly once and only requests it holds come back.
fn check(name: &str, settings: &Settings, ops: &[OpKind]) {
    let mut s = build(name, settings).unwrap();
    let mut now: Time = 0;
    let mut flows: Vec<FlowId> = Vec::new();
    let mut groups: Vec<GroupId> = vec![GroupId::ROOT];
    let mut queued: HashMap<u64, FlowId> = HashMap::new();
    let mut in_flight: Vec<u64> = Vec::new();
    let mut next_id = 1u64;
    let mut dispatched = 0u64;
    let mut added = 0u64;
    let mut take = |s: &mut Box<dyn Scheduler>,
                    now: Time,
                    queued: &mut HashMap<u64, FlowId>,
                    in_flight: &mut Vec<u64>|
     -> Dispatch {
        let d = s.dispatch(now);
        match d {
            Dispatch::Request(r) => {
                let f = queued.remove(&r.id).unwrap_or_else(|| {
                    panic!("{name}: returned request {} it does not hold", r.id)
                });
                assert_eq!(f, r.flow, "{name}: request came back with another flow");
                in_flight.push(r.id);
                dispatched += 1;
            }
            Dispatch::Empty => assert!(queued.is_empty(), "{name}: Empty with requests queued"),
            Dispatch::Idle { until } => assert!(until > now, "{name}: Idle until the past"),
            Dispatch::Wait => {}
        }
        assert_eq!(s.queued(), queued.len(), "{name}: queued()");
        assert_eq!(s.in_flight(), in_flight.len(), "{name}: in_flight()");
        d
    };
    for op in ops {
        match *op {
            OpKind::AddFlow {
                class,
                level,
                weight,
                in_group,
            } => {
                let spec = FlowSpec {
                    weight,
                    prio: IoPrio {
                        class: IoClass::ALL[class as usize],
                        level,
                    },
                    group: if in_group {
                        *groups.last().unwrap()
                    } else {
                        GroupId::ROOT
                    },
                };
                flows.push(s.add_flow(now, spec).unwrap());
            }
            OpKind::AddGroup => {
                let parent = *groups.last().unwrap();
                groups.push(s.add_group(parent, 100).unwrap());
            }
            OpKind::Add {
                flow,
                sector,
                len,
                write,
                sync,
            } => {
                if flows.is_empty() {
                    continue;
                }
                let f = flows[flow % flows.len()];
                let r = Request {
                    id: next_id,
                    flow: f,
                    sector,
                    sectors: len,
                    op: if write { Op::Write } else { Op::Read },
                    sync: sync || !write,
                };
                match s.add_request(now, r) {
                    Ok(()) => {
                        queued.insert(next_id, f);
                        added += 1;
                    }
                    Err(SchedError::UnknownFlow(_)) => {}
                    Err(e) => panic!("{name}: {e}"),
                }
                next_id += 1;
            }
            OpKind::Dispatch { dt } => {
                now += dt;
                take(&mut s, now, &mut queued, &mut in_flight);
            }
            OpKind::Complete { pick } => {
                if !in_flight.is_empty() {
                    let id = in_flight.remove(pick % in_flight.len());
                    now += 100_000;
                    s.complete(now, id).unwrap();
                }
            }
            OpKind::RemoveFlow { pick } => {
                if !flows.is_empty() {
                    let f = flows.remove(pick % flows.len());
                    s.remove_flow(now, f).unwrap();
                }
            }
        }
    }
    // Drain: complete what is in flight, keep dispatching.
    let mut steps = 0;
    while !queued.is_empty() || !in_flight.is_empty() {
        steps += 1;
        assert!(steps < 200_000, "{name}: does not drain");
        match take(&mut s, now, &mut queued, &mut in_flight) {
            Dispatch::Request(_) => {}
            Dispatch::Idle { until } => {
                if let Some(id) = in_flight.pop() {
                    now += MS;
                    s.complete(now, id).unwrap();
                } else {
                    now = until;
                }
            }
            Dispatch::Wait | Dispatch::Empty => {
                let id = in_flight
                    .pop()
                    .unwrap_or_else(|| panic!("{name}: stalled with {} queued", queued.len()));
                now += MS;
                s.complete(now, id).unwrap();
            }
        }
    }
    assert_eq!(dispatched, added, "{name}");
    // Idling schedulers may keep the device idle a while for the last
    // flow's next request; once that time has passed, nothing is left.
    let mut last = s.dispatch(now);
    for _ in 0..4 {
        let Dispatch::Idle { until } = last else {
            break;
        };
        assert!(until > now, "{name}: idle until the past");
        now = until;
        last = s.dispatch(now);
    }
    assert_eq!(last, Dispatch::Empty, "{name}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
    #[test]
    fn every_request_dispatched_exactly_once(ops in proptest::collection::vec(op_strategy(), 1..300)) {
        for (name, settings) in configs() {
            check(name, &settings, &ops);
        }
    }
}
