//! Bad settings and bad requests give errors naming what is wrong; every
//! setting at the ends of its documented range works, with a huge device
//! queue and times near the largest the interface allows.

use bfq_core::settings::{format_duration, SettingKind, MAX_DURATION};
use bfq_core::{
    DeviceInfo, Dispatch, FlowSpec, Op, Request, SchedError, Scheduler, Settings, Time, MAX_TIME,
    MS,
};
use bfq_schedulers::{build, settings_of, SCHEDULERS};
use std::collections::HashSet;

mod common;
use common::read4k;

/// Drives `s` with a few flows of mixed requests from time `t0` until all
/// are completed; checks exactly-once dispatch and that it does not stall.
fn drive(name: &str, s: &mut dyn Scheduler, t0: Time, device: DeviceInfo) {
    s.set_device(device);
    let flows: Vec<_> = (0..3)
        .map(|i| {
            s.add_flow(t0, FlowSpec::with_weight(100 * (i + 1)))
                .unwrap()
        })
        .collect();
    let mut now = t0;
    let mut id = 0u64;
    for round in 0..4u64 {
        for (i, &f) in flows.iter().enumerate() {
            id += 1;
            let write = id % 3 == 2;
            let r = Request {
                id,
                flow: f,
                sector: ((i as u64) << 30) | (round * 64),
                sectors: 8,
                op: if write { Op::Write } else { Op::Read },
                sync: !write,
            };
            s.add_request(now, r).unwrap();
        }
    }
    let total = id;
    let mut seen = HashSet::new();
    let mut in_flight = Vec::new();
    let mut steps = 0;
    while (seen.len() as u64) < total || !in_flight.is_empty() {
        steps += 1;
        assert!(steps < 100_000, "{name}: stalled");
        match s.dispatch(now) {
            Dispatch::Request(r) => {
                assert!(seen.insert(r.id), "{name}: request {} twice", r.id);
                in_flight.push(r.id);
                if in_flight.len() < 4 {
                    continue;
                }
            }
            Dispatch::Idle { until } => {
                assert!(until > now, "{name}: idle until the past");
                assert!(until - now <= 3 * MAX_DURATION, "{name}: idle too long");
                if in_flight.is_empty() {
                    now = until;
                    continue;
                }
            }
            Dispatch::Wait | Dispatch::Empty => {
                assert!(
                    !in_flight.is_empty(),
                    "{name}: holds requests, none in flight"
                );
            }
        }
        now += MS;
        if let Some(r) = in_flight.pop() {
            s.complete(now, r).unwrap();
        }
    }
    assert_eq!(s.queued() + s.in_flight(), 0, "{name}");
    for f in flows {
        s.remove_flow(now, f).unwrap();
    }
}

/// The devices and start times every range end is tried with.
fn conditions() -> Vec<(Time, DeviceInfo)> {
    let huge = DeviceInfo {
        queue_depth: u32::MAX,
        queues_internally: true,
        rotational: false,
    };
    vec![
        (0, DeviceInfo::default()),
        (MAX_TIME - 100 * MAX_DURATION, huge),
    ]
}

/// Pairs of settings that contradict each other at the ends of their
/// ranges: building may refuse the first, naming the second.
const PAIRS: &[(&str, &str)] = &[
    ("wr_min_auto_time", "wr_max_auto_time"),
    ("wr_max_auto_time", "wr_max_auto_time"),
];

#[test]
fn every_setting_has_a_range_and_its_ends_work() {
    for e in SCHEDULERS {
        let infos = settings_of(e.name).unwrap();
        for info in &infos {
            let (ends, outside): (Vec<String>, Vec<String>) = match &info.kind {
                &SettingKind::Integer { lo, hi } => {
                    let mut out = vec!["18446744073709551615".to_string()];
                    if hi < u64::MAX {
                        out.push((hi + 1).to_string());
                    }
                    (vec![lo.to_string(), hi.to_string()], out)
                }
                // The range listed is the one enforced: 0 and both ends
                // are taken, the values just outside refused.
                &SettingKind::IntegerOrZero { lo, hi } => {
                    let mut out = vec!["18446744073709551615".to_string()];
                    if hi < u64::MAX {
                        out.push((hi + 1).to_string());
                    }
                    if lo > 1 {
                        out.push((lo - 1).to_string());
                    }
                    (vec!["0".into(), lo.to_string(), hi.to_string()], out)
                }
                // Every word listed is taken (each alias is built, below).
                SettingKind::Word { names, aliases } => {
                    for a in aliases {
                        let s = Settings::from_pairs([(info.key.as_str(), *a)]);
                        assert!(build(e.name, &s).is_ok(), "{}: {}={a}", e.name, info.key);
                    }
                    let ends = names.iter().map(|w| w.to_string());
                    (ends.collect(), vec!["nosuch".into(), String::new()])
                }
                SettingKind::Bool => (
                    vec!["yes".into(), "OFF".into()],
                    vec!["2".into(), "y".into()],
                ),
                &SettingKind::Duration { lo, hi } => {
                    assert!(hi <= MAX_DURATION, "{}: {}", e.name, info.key);
                    let out = vec![
                        format!("{}ns", hi + 1),
                        "10000000000s".into(),
                        "18446744073709551615ns".into(),
                    ];
                    (vec![format_duration(lo), format_duration(hi)], out)
                }
                _ => continue,
            };
            for v in outside {
                let got = build(
                    e.name,
                    &Settings::from_pairs([(info.key.as_str(), v.as_str())]),
                );
                match got {
                    Err(SchedError::InvalidSetting { key, .. }) => {
                        assert_eq!(key, info.key, "{}: {}={v}", e.name, info.key)
                    }
                    Err(other) => panic!("{}: {}={v}: {other}", e.name, info.key),
                    Ok(_) => panic!("{}: {}={v} accepted", e.name, info.key),
                }
            }
            for v in ends {
                let settings = Settings::from_pairs([(info.key.as_str(), v.as_str())]);
                let mut s = match build(e.name, &settings) {
                    Ok(s) => s,
                    Err(SchedError::InvalidSetting { key, .. })
                        if PAIRS.contains(&(info.key.as_str(), key.as_str())) =>
                    {
                        continue
                    }
                    Err(err) => panic!("{}: {}={v} refused: {err}", e.name, info.key),
                };
                for (t0, device) in conditions() {
                    drive(e.name, &mut s, t0, device);
                }
            }
        }
    }
}

#[test]
fn contradictory_settings_are_refused_naming_the_setting() {
    let s = Settings::from_pairs([("wr_min_auto_time", "10s"), ("wr_max_auto_time", "5000ms")]);
    for p in ["bfq", "bfq-plus-2014", "bfq-2010"] {
        let e = build(p, &s).err().expect("contradiction refused");
        assert!(
            matches!(&e, SchedError::InvalidSetting { key, .. } if key == "wr_max_auto_time"),
            "{p}: {e}"
        );
        // The value as given.
        assert!(
            e.to_string()
                .starts_with("setting wr_max_auto_time=5000ms:"),
            "{e}"
        );
    }
    let e = build("bfq", &Settings::from_pairs([("max_budget", "1")]))
        .err()
        .expect("max_budget=1 refused");
    assert!(
        e.to_string().starts_with("setting max_budget=1:"),
        "names the setting given: {e}"
    );
}

#[test]
fn huge_durations_are_refused_not_accepted() {
    for (name, key) in [
        ("bfq", "slice_idle"),
        ("bfq", "fifo_expire_sync"),
        ("cfq", "slice_idle"),
        ("cfq", "slice_sync"),
        ("as", "antic_expire"),
        ("as", "write_batch_expire"),
    ] {
        let s = Settings::from_pairs([(key, "10000000000s")]);
        let e = build(name, &s).err().expect("refused");
        let e = e.to_string();
        assert!(
            e.starts_with(&format!(
                "setting {key}=10000000000s: must be a duration in "
            )) && e.ends_with("..=3600s"),
            "{name}: {e}"
        );
    }
    let e = build(
        "cfq",
        &Settings::from_pairs([("back_seek_max", "18446744073709551615")]),
    )
    .err()
    .expect("refused");
    assert!(e.to_string().contains("back_seek_max"), "{e}");
}

#[test]
fn requests_ending_past_the_last_sector_are_refused() {
    for e in SCHEDULERS {
        let mut s = build(e.name, &Settings::new()).unwrap();
        let f = s.add_flow(0, FlowSpec::default()).unwrap();
        for (sector, sectors) in [(u64::MAX, 1), (u64::MAX - 4, 8), (u64::MAX - 7, u32::MAX)] {
            let r = Request {
                id: 1,
                flow: f,
                sector,
                sectors,
                op: Op::Read,
                sync: true,
            };
            assert_eq!(
                s.add_request(0, r),
                Err(SchedError::SectorOverflow(1)),
                "{}",
                e.name
            );
            assert_eq!(s.queued(), 0, "{}", e.name);
        }
        // The last addressable request is fine.
        let r = Request {
            id: 2,
            flow: f,
            sector: u64::MAX - 8,
            sectors: 8,
            op: Op::Read,
            sync: true,
        };
        s.add_request(0, r).unwrap();
        assert!(matches!(s.dispatch(MS), Dispatch::Request(_)), "{}", e.name);
        s.complete(2 * MS, 2).unwrap();
    }
}

/// Requests at both ends of the sector space, one flow: seek distances near
/// 2^64 (the BFQ+ mean-distance rule overflowed in an overflow-checked
/// build; found by `bfq fuzz`).
#[test]
fn seeks_across_the_whole_sector_space() {
    for e in SCHEDULERS {
        let mut s = build(e.name, &Settings::new()).unwrap();
        let f = s.add_flow(0, FlowSpec::default()).unwrap();
        let mut now = 0;
        for id in 0..8u64 {
            let sector = if id % 2 == 0 { 0 } else { u64::MAX - 8 };
            s.add_request(now, read4k(id, f, sector)).unwrap();
            loop {
                match s.dispatch(now) {
                    Dispatch::Request(r) => {
                        now += MS;
                        s.complete(now, r.id).unwrap();
                        break;
                    }
                    Dispatch::Idle { until } => now = until,
                    other => panic!("{}: {other:?} with a request queued", e.name),
                }
            }
        }
    }
}

/// `Dispatch::Idle { until }` always names a later time, whatever
/// duration setting is at the low end of its range (0): a zero idle time
/// means "do not idle", not "idle until now" (BFQ with `slice_idle_seeky
/// = 0` answered `Idle { until: now }` for seeky flows).
#[test]
fn idle_answers_name_a_later_time_with_zero_durations() {
    for e in SCHEDULERS {
        for info in settings_of(e.name).unwrap() {
            if !matches!(info.kind, SettingKind::Duration { lo: 0, .. }) {
                continue;
            }
            let mut set = Settings::new();
            let what = format!("{} {}=0", e.name, info.key);
            set.set(info.key, "0ns");
            let Ok(mut s) = build(e.name, &set) else {
                continue;
            };
            idle_is_later(&what, &mut *s);
        }
    }
}

/// Two flows, one seeky and one sequential, each reading one request at a
/// time (served to the end before the next), on a device that changes
/// between queueing internally or not after every completion (so that a
/// flow's idling decision changes between its completion and the next
/// dispatch); every `Idle` answer must be later than now.
fn idle_is_later(what: &str, s: &mut dyn Scheduler) {
    let flows = [
        s.add_flow(0, FlowSpec::default()).unwrap(),
        s.add_flow(0, FlowSpec::with_weight(300)).unwrap(),
    ];
    let mut now = 0;
    let mut id = 0u64;
    for round in 0..64u64 {
        for (i, &f) in flows.iter().enumerate() {
            id += 1;
            let sector = if i == 0 {
                (round * 7_919_999) % (1 << 40)
            } else {
                (1 << 41) + round * 8
            };
            s.add_request(now, read4k(id, f, sector)).unwrap();
            loop {
                match s.dispatch(now) {
                    Dispatch::Request(r) => {
                        now += MS / 4;
                        s.complete(now, r.id).unwrap();
                        let queues = r.id % 2 == 0;
                        s.set_device(DeviceInfo {
                            queue_depth: 32,
                            queues_internally: queues,
                            rotational: true,
                        });
                    }
                    Dispatch::Idle { until } => {
                        assert!(until > now, "{what}: Idle {{ until: {until} }} at {now}");
                        now = until;
                    }
                    _ => break,
                }
            }
        }
    }
    for f in flows {
        s.remove_flow(now, f).unwrap();
    }
}

/// Requests near the last sector arriving while a scheduler anticipates
/// (or idles for) the flow that just completed: the closeness tests
/// (e.g. AS's `close_req`, sector + window) must not overflow (found by
/// `bfq fuzz` in an overflow-checked build).
#[test]
fn requests_near_the_last_sector_arrive_while_anticipating() {
    for e in SCHEDULERS {
        let mut s = build(e.name, &Settings::new()).unwrap();
        let f = s.add_flow(0, FlowSpec::default()).unwrap();
        let g = s.add_flow(0, FlowSpec::default()).unwrap();
        let (mut now, mut id) = (0, 0u64);
        for round in 0..8u64 {
            let first = if round % 2 == 0 { 0 } else { u64::MAX - 8 };
            id += 1;
            s.add_request(now, read4k(id, f, first)).unwrap();
            serve(e.name, &mut *s, &mut now, 1);
            // The flow just completed: these arrive during anticipation.
            s.add_request(now, read4k(id + 1, f, u64::MAX - 8 - 8 * round))
                .unwrap();
            s.add_request(now, read4k(id + 2, g, u64::MAX - 4096))
                .unwrap();
            id += 2;
            serve(e.name, &mut *s, &mut now, 2);
        }
    }
}

/// Dispatches and completes `n` requests, advancing `now` 1 ms per request
/// and to the end of every idle period.
fn serve(name: &str, s: &mut dyn Scheduler, now: &mut Time, n: usize) {
    let mut done = 0;
    while done < n {
        match s.dispatch(*now) {
            Dispatch::Request(r) => {
                *now += MS;
                s.complete(*now, r.id).unwrap();
                done += 1;
            }
            Dispatch::Idle { until } => *now = until,
            other => panic!("{name}: {other:?} with requests queued"),
        }
    }
}

/// A `now` past `MAX_TIME` (the end of a scheduler's clock) is refused by
/// every call that takes one, changing nothing: the `Result` calls give
/// `TimeOutOfRange`, `dispatch` answers `Wait` (`Empty` with nothing
/// queued); `internals`, which changes nothing, answers. Driven on at
/// `MAX_TIME`, the scheduler then serves what it holds. Unchecked, such a
/// time makes deadlines (`now + duration`) that can pass `u64::MAX`: a
/// panic in an overflow-checked build.
#[test]
fn times_past_the_end_of_the_clock_are_refused() {
    let late = [MAX_TIME + 1, u64::MAX - MAX_DURATION, u64::MAX];
    for e in SCHEDULERS {
        let what = e.name;
        let mut s = build(e.name, &Settings::new()).unwrap();
        let t0 = MAX_TIME - 10 * MS;
        let f = s.add_flow(t0, FlowSpec::default()).unwrap();
        for t in late {
            assert_eq!(s.dispatch(t), Dispatch::Empty, "{what}: empty at {t}");
        }
        s.add_request(t0, read4k(1, f, 0)).unwrap();
        s.add_request(t0, read4k(2, f, 1 << 20)).unwrap();
        let first = match s.dispatch(t0) {
            Dispatch::Request(r) => r.id,
            other => panic!("{what}: {other:?} with requests queued"),
        };
        for t in late {
            let refused = Err(SchedError::TimeOutOfRange(t));
            let flow = s.add_flow(t, FlowSpec::default()).map(|_| ());
            assert_eq!(flow, refused, "{what}: add_flow at {t}");
            assert_eq!(s.remove_flow(t, f), refused, "{what}: remove_flow at {t}");
            assert_eq!(s.add_request(t, read4k(3, f, 8)), refused, "{what}");
            assert_eq!(s.complete(t, first), refused, "{what}: complete at {t}");
            assert_eq!(s.dispatch(t), Dispatch::Wait, "{what}: dispatch at {t}");
            // Read-only, and safe at any time.
            let _ = s.internals(t);
            assert_eq!(
                (s.queued(), s.in_flight()),
                (1, 1),
                "{what}: changed at {t}"
            );
        }
        assert!(
            SchedError::TimeOutOfRange(u64::MAX)
                .to_string()
                .contains("past the end of a scheduler's clock"),
            "{what}"
        );
        // The clock's last instant is still valid: serve what is held.
        s.complete(MAX_TIME, first).unwrap();
        match s.dispatch(MAX_TIME) {
            Dispatch::Request(r) => s.complete(MAX_TIME, r.id).unwrap(),
            other => panic!("{what}: {other:?} at MAX_TIME with a request queued"),
        }
        s.remove_flow(MAX_TIME, f).unwrap();
        assert_eq!((s.queued(), s.in_flight()), (0, 0), "{what}");
    }
}

/// `node_settings_of` names exactly the `PREFIX.fN|gN` families each
/// scheduler reads: a key of a listed family with a bad node (`.x0`) is
/// read and refused as a value, any other family's is an unknown setting.
#[test]
fn node_settings_of_names_the_families_each_scheduler_reads() {
    // Every family docs/schedulers.md names, and any the lists add.
    let mut all: std::collections::BTreeSet<&str> =
        ["deadline", "idle_time", "latency", "slice_idle", "weight"].into();
    for side in ["max", "low"] {
        for what in ["bps", "iops", "rbps", "riops", "wbps", "wiops"] {
            all.insert(format!("{side}_{what}").leak());
        }
    }
    all.extend(
        SCHEDULERS
            .iter()
            .flat_map(|e| bfq_schedulers::node_settings_of(e.name).iter().copied()),
    );
    for e in SCHEDULERS {
        let listed = bfq_schedulers::node_settings_of(e.name);
        for prefix in &all {
            let s = bfq_core::Settings::from_pairs([(format!("{prefix}.x0"), "1".to_string())]);
            match build(e.name, &s).err() {
                Some(bfq_core::SchedError::InvalidSetting { why, .. }) => assert!(
                    listed.contains(prefix) && why.contains(&format!("expected {prefix}.fN")),
                    "{}: {prefix}: {why}",
                    e.name
                ),
                Some(bfq_core::SchedError::UnknownSetting { .. }) => {
                    assert!(!listed.contains(prefix), "{}: {prefix} not read", e.name)
                }
                other => panic!("{}: {prefix}: {other:?}", e.name),
            }
        }
    }
}
