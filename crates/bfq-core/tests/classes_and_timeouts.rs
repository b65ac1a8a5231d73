//! The idle class and the budget timeout, measured in disk time (what they
//! are about), not only in sectors.

mod common;
use bfq_core::*;
use common::*;

/// Disk time each flow held the device, from the harness's cost model.
fn disk_time(s: &mut Bfq, dev: Dev, defs: &[FlowDef], until: Time) -> (RunLog, [u64; 2]) {
    let mut head = 0u64;
    let mut time = [0u64; 2];
    let log = run_with(s, dev, defs, until, 1, |_, r| {
        let mut c = dev.per_req + dev.per_sector * u64::from(r.sectors);
        if r.sector != head {
            c += dev.seek;
        }
        head = r.end();
        time[r.flow.0 as usize] += c;
    });
    (log, time)
}

/// A random idle-class flow next to a backlogged best-effort one gets one
/// request per turn, every 200 ms at most: a few percent of the disk time,
/// not the 60% a whole 125 ms turn every 200 ms would give it.
#[test]
fn idle_class_takes_only_a_small_share_of_disk_time() {
    for profile in ["bfq-2010", "bfq"] {
        let mut s = Bfq::from_profile(profile, &Settings::new()).unwrap();
        let be = FlowDef::new(100, Kind::Async { depth: 4 });
        let mut idle = FlowDef::new(100, Kind::Async { depth: 4 });
        idle.spec.prio = IoPrio {
            class: IoClass::Idle,
            level: 7,
        };
        idle.seq = false;
        idle.size = 8;
        idle.base = 50_000_000;
        let dev = Dev {
            seek: 10 * MS,
            ..Dev::default()
        };
        let (log, time) = disk_time(&mut s, dev, &[be, idle], 5 * SEC);
        let share = time[1] as f64 / (time[0] + time[1]) as f64;
        assert!(log.per_flow[1] > 0, "{profile}: idle class starved");
        assert!(
            share < 0.15,
            "{profile}: idle class took {share:.2} of the disk time"
        );
    }
}

/// An idle-class request arriving after a long quiet spell waits behind a
/// backlogged RT flow: the starvation clock restarts whenever it elapses,
/// so a stale timestamp does not let it jump ahead.
#[test]
fn sparse_idle_class_request_does_not_jump_ahead_of_rt() {
    let mut s = Bfq::from_profile("bfq-2010", &Settings::new()).unwrap();
    let prio = |class, level| FlowSpec {
        weight: Some(100),
        prio: IoPrio { class, level },
        group: GroupId::ROOT,
    };
    let rt = s.add_flow(0, prio(IoClass::Rt, 0)).unwrap();
    let idle = s.add_flow(0, prio(IoClass::Idle, 7)).unwrap();
    let req = |id: u64, flow, sector| Request {
        id,
        flow,
        sector,
        sectors: 256,
        op: Op::Write,
        sync: false,
    };
    let mut id = 0;
    let mut now = 300 * MS;
    for _ in 0..8 {
        s.add_request(now, req(id, rt, id * 256)).unwrap();
        id += 1;
    }
    let idle_req = 1_000_000;
    let mut rt_before = 0;
    loop {
        if rt_before == 1 {
            // RT is being served; now the idle-class request arrives.
            let r = Request {
                id: idle_req,
                flow: idle,
                sector: 9_000_000,
                sectors: 8,
                op: Op::Read,
                sync: true,
            };
            s.add_request(now, r).unwrap();
        }
        let Dispatch::Request(r) = s.dispatch(now) else {
            panic!("backlogged")
        };
        now += 10 * US;
        s.complete(now, r.id).unwrap();
        if r.id == idle_req {
            break;
        }
        rt_before += 1;
        s.add_request(now, req(id, rt, id * 256)).unwrap();
        id += 1;
    }
    // 10 us per request: 200 ms of RT service is 20000 requests.
    assert!(
        rt_before > 10_000,
        "idle-class request overtook RT after {rt_before} RT requests"
    );
}

/// 2010 paper Sec. III-D: a flow that hits T_max is over-charged B_max,
/// whatever its own budget, so a slow random flow cannot get more turns by
/// having small budgets: the sequential flow's service does not depend on
/// the random flow's budget.
#[test]
fn timeout_overcharges_b_max_whatever_the_budget() {
    let mut fast_service = vec![];
    for initial in ["512", "4096"] {
        let mut s = Bfq::from_profile(
            "bfq-2010",
            &Settings::from_pairs([("initial_budget", initial)]),
        )
        .unwrap();
        let mut slow = FlowDef::new(100, Kind::Async { depth: 4 });
        slow.seq = false;
        slow.size = 8;
        let fast = FlowDef::new(100, Kind::Async { depth: 4 });
        let dev = Dev {
            seek: 10 * MS,
            ..Dev::default()
        };
        let (log, _) = disk_time(&mut s, dev, &[slow, fast], 5 * SEC);
        // Each ~125 ms random turn costs B_max: the sequential flow gets
        // about B_max per random turn, 40 turns in 5 s.
        assert!(
            log.per_flow[1] > 30 * 16384,
            "initial {initial}: sequential flow got {}",
            log.per_flow[1]
        );
        fast_service.push(log.per_flow[1] as f64);
    }
    let r = fast_service[0] / fast_service[1];
    assert!(
        (0.9..1.1).contains(&r),
        "sequential flow's service depends on the random flow's budget: {fast_service:?}"
    );
}

/// Virtual time does not overflow: 1100 requests of u32::MAX sectors at
/// weight 1 push V past 2^64 without the rebase.
#[test]
fn virtual_time_survives_petabytes_of_service() {
    for profile in ["bfq-2010", "bfq"] {
        let mut s = Bfq::from_profile(profile, &Settings::new()).unwrap();
        let a = s.add_flow(0, FlowSpec::with_weight(1)).unwrap();
        let b = s.add_flow(0, FlowSpec::with_weight(2)).unwrap();
        let mut now = 0;
        let mut served = [0u64; 2];
        for id in 0..1100u64 {
            let flow = if id % 2 == 0 { a } else { b };
            s.add_request(
                now,
                Request {
                    id,
                    flow,
                    sector: id << 32,
                    sectors: u32::MAX,
                    op: Op::Write,
                    sync: false,
                },
            )
            .unwrap();
            let Dispatch::Request(r) = s.dispatch(now) else {
                panic!("{profile}: nothing dispatched")
            };
            now += 1;
            s.complete(now, r.id).unwrap();
            served[r.flow.0 as usize] += 1;
        }
        s.check_invariants();
        assert_eq!(served.iter().sum::<u64>(), 1100);
    }
    let e = Bfq::from_settings(&Settings::from_pairs([(
        "back_seek_max",
        "9223372036854775808",
    )]));
    assert!(matches!(e, Err(SchedError::InvalidSetting { .. })));
}
