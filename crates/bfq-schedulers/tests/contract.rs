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
        refuses_bad_flows_and_groups(s.as_mut(), name);
        refuses_bad_requests(s.as_mut(), name, f);
        let now = serves_request_3(s.as_mut(), name);
        refuses_removed_and_busy(s.as_mut(), name, f, now);
    }
}

/// A weight of 0, a level of 9 and an unknown group are refused.
fn refuses_bad_flows_and_groups(s: &mut dyn Scheduler, name: &str) {
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
}

/// Empty, unknown-flow and duplicate requests, and completions of
/// requests not dispatched or unknown, are refused without changing the
/// state (request 3 of flow `f` stays queued).
fn refuses_bad_requests(s: &mut dyn Scheduler, name: &str, f: FlowId) {
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
}

/// Dispatches request 3 (through any idling) and completes it; a second
/// completion is refused. Returns the time of the dispatch.
fn serves_request_3(s: &mut dyn Scheduler, name: &str) -> Time {
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
    now
}

/// A removed flow is unknown (to a second removal and to new requests);
/// a group with a flow, and the root, cannot be removed; once empty, the
/// group can, and the scheduler is empty.
fn refuses_removed_and_busy(s: &mut dyn Scheduler, name: &str, f: FlowId, now: Time) {
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

/// A scheduler under a random workload, with what the test knows it
/// holds: queued requests (by flow) and requests in flight.
struct Harness<'a> {
    name: &'a str,
    s: Box<dyn Scheduler>,
    now: Time,
    flows: Vec<FlowId>,
    groups: Vec<GroupId>,
    queued: HashMap<u64, FlowId>,
    in_flight: Vec<u64>,
    next_id: u64,
    dispatched: u64,
    added: u64,
}

impl<'a> Harness<'a> {
    fn new(name: &'a str, settings: &Settings) -> Self {
        Harness {
            name,
            s: build(name, settings).unwrap(),
            now: 0,
            flows: Vec::new(),
            groups: vec![GroupId::ROOT],
            queued: HashMap::new(),
            in_flight: Vec::new(),
            next_id: 1,
            dispatched: 0,
            added: 0,
        }
    }

    /// Dispatches once; checks that a request comes back once, with its
    /// flow, that Empty means nothing queued, that Idle ends in the
    /// future, and the scheduler's counts.
    fn take(&mut self) -> Dispatch {
        let name = self.name;
        let d = self.s.dispatch(self.now);
        match d {
            Dispatch::Request(r) => {
                let f = self.queued.remove(&r.id).unwrap_or_else(|| {
                    panic!("{name}: returned request {} it does not hold", r.id)
                });
                assert_eq!(f, r.flow, "{name}: request came back with another flow");
                self.in_flight.push(r.id);
                self.dispatched += 1;
            }
            Dispatch::Empty => {
                assert!(self.queued.is_empty(), "{name}: Empty with requests queued")
            }
            Dispatch::Idle { until } => assert!(until > self.now, "{name}: Idle until the past"),
            Dispatch::Wait => {}
        }
        assert_eq!(self.s.queued(), self.queued.len(), "{name}: queued()");
        assert_eq!(
            self.s.in_flight(),
            self.in_flight.len(),
            "{name}: in_flight()"
        );
        d
    }

    /// Applies one random operation.
    fn apply(&mut self, op: &OpKind) {
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
                        *self.groups.last().unwrap()
                    } else {
                        GroupId::ROOT
                    },
                };
                self.flows.push(self.s.add_flow(self.now, spec).unwrap());
            }
            OpKind::AddGroup => {
                let parent = *self.groups.last().unwrap();
                self.groups.push(self.s.add_group(parent, 100).unwrap());
            }
            OpKind::Add {
                flow,
                sector,
                len,
                write,
                sync,
            } => self.add(flow, sector, len, write, sync),
            OpKind::Dispatch { dt } => {
                self.now += dt;
                self.take();
            }
            OpKind::Complete { pick } => {
                if !self.in_flight.is_empty() {
                    let id = self.in_flight.remove(pick % self.in_flight.len());
                    self.now += 100_000;
                    self.s.complete(self.now, id).unwrap();
                }
            }
            OpKind::RemoveFlow { pick } => {
                if !self.flows.is_empty() {
                    let f = self.flows.remove(pick % self.flows.len());
                    self.s.remove_flow(self.now, f).unwrap();
                }
            }
        }
    }

    /// Adds a request to flow `flow` (modulo the flows there are; none:
    /// nothing); a removed flow's UnknownFlow is the only error allowed.
    fn add(&mut self, flow: usize, sector: u64, len: u32, write: bool, sync: bool) {
        if self.flows.is_empty() {
            return;
        }
        let f = self.flows[flow % self.flows.len()];
        let r = Request {
            id: self.next_id,
            flow: f,
            sector,
            sectors: len,
            op: if write { Op::Write } else { Op::Read },
            sync: sync || !write,
        };
        match self.s.add_request(self.now, r) {
            Ok(()) => {
                self.queued.insert(self.next_id, f);
                self.added += 1;
            }
            Err(SchedError::UnknownFlow(_)) => {}
            Err(e) => panic!("{}: {e}", self.name),
        }
        self.next_id += 1;
    }

    /// Completes the last request in flight a millisecond later; false
    /// when none is.
    fn complete_last(&mut self) -> bool {
        let Some(id) = self.in_flight.pop() else {
            return false;
        };
        self.now += MS;
        self.s.complete(self.now, id).unwrap();
        true
    }

    /// Completes what is in flight and keeps dispatching until nothing is
    /// queued or in flight; checks every request added was dispatched.
    fn drain(&mut self) {
        let name = self.name;
        let mut steps = 0;
        while !self.queued.is_empty() || !self.in_flight.is_empty() {
            steps += 1;
            assert!(steps < 200_000, "{name}: does not drain");
            match self.take() {
                Dispatch::Request(_) => {}
                Dispatch::Idle { until } => {
                    if !self.complete_last() {
                        self.now = until;
                    }
                }
                Dispatch::Wait | Dispatch::Empty => {
                    if !self.complete_last() {
                        panic!("{name}: stalled with {} queued", self.queued.len());
                    }
                }
            }
        }
        assert_eq!(self.dispatched, self.added, "{name}");
    }

    /// Idling schedulers may keep the device idle a while for the last
    /// flow's next request; once that time has passed, nothing is left.
    fn check_empty(&mut self) {
        let name = self.name;
        let mut last = self.s.dispatch(self.now);
        for _ in 0..4 {
            let Dispatch::Idle { until } = last else {
                break;
            };
            assert!(until > self.now, "{name}: idle until the past");
            self.now = until;
            last = self.s.dispatch(self.now);
        }
        assert_eq!(last, Dispatch::Empty, "{name}");
    }
}

/// Runs `ops` on a fresh scheduler, then drains it; checks every request is
/// dispatched exactly once and only requests it holds come back.
fn check(name: &str, settings: &Settings, ops: &[OpKind]) {
    let mut h = Harness::new(name, settings);
    for op in ops {
        h.apply(op);
    }
    h.drain();
    h.check_empty();
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
