//! One deterministic, scripted test per heuristic, each showing its effect
//! by switching it off and on (the harness in common/ is an event loop with
//! a modelled device; nothing is timed on the wall clock).

mod common;
use bfq_core::bfq::weight_raising::RaiseKind;
use bfq_core::fluid::{max_deficit_since, Served};
use bfq_core::*;
use common::*;

/// A device that queues 8 requests internally but serves them one after
/// another, 264 us per 64 KiB read: an SSD whose bus is the bottleneck.
fn ssd() -> Dev {
    Dev {
        parallel: false,
        ..flash()
    }
}

/// A greedy sync random reader of 4 KiB requests.
fn random_reader(w: u32, base: u64) -> FlowDef {
    let mut d = sync_reader(FlowSpec::with_weight(w), base);
    d.seq = false;
    d.size = 8;
    d
}

/// A synchronous read request.
fn sync_read(id: u64, flow: FlowId, sector: u64, sectors: u32) -> Request {
    Request {
        id,
        flow,
        sector,
        sectors,
        op: Op::Read,
        sync: true,
    }
}

fn mean(v: &[Time]) -> f64 {
    v.iter().sum::<Time>() as f64 / v.len().max(1) as f64
}

/// Greedy sequential sync readers (one 64 KiB request at a time, the next
/// issued when it completes) with the given weights for 20 s, on the
/// parallel `flash()` device (on the serial `ssd()` injection slows the
/// idling reader, so the kernel's limit keeps it rare): what each got, as
/// a fraction of its weight's share of the total (1.0 is exact), and how
/// many requests were injected.
fn weighted_reader_shares(s: &mut Bfq, weights: &[u32]) -> (Vec<f64>, u64) {
    let (shares, _) = weighted_reader_shares_on(s, flash(), weights);
    (shares, s.stats().injected)
}

/// As [`weighted_reader_shares`], on `dev`; also the total service.
fn weighted_reader_shares_on(s: &mut Bfq, dev: Dev, weights: &[u32]) -> (Vec<f64>, u64) {
    let defs = greedy_readers(weights);
    let log = run(s, dev, &defs, 20 * SEC, 1);
    let total: u64 = log.per_flow.iter().sum();
    let wsum: u32 = weights.iter().sum();
    let shares = log
        .per_flow
        .iter()
        .zip(weights)
        .map(|(&x, &w)| (x as f64 / total as f64) / (f64::from(w) / f64::from(wsum)))
        .collect();
    (shares, total)
}

// ---- Heuristic 5: weight raising --------------------------------------

/// Ten greedy sequential readers, then (at 8 s, when the raising the
/// report's variant gives every new flow is over) an "application"
/// reading 24 MiB: its load time with and without low_latency.
fn app_load_time(s: &mut Bfq) -> Time {
    let mut defs: Vec<FlowDef> = (0..10)
        .map(|i| {
            let mut d = sync_reader(FlowSpec::default(), i * 20_000_000);
            d.size = 256; // 128 KiB reads
            d
        })
        .collect();
    let mut app = sync_reader(FlowSpec::default(), 500_000_000);
    app.start = 8 * SEC;
    app.limit = 24 * 2048;
    defs.push(app);
    let log = run(s, disk(), &defs, 40 * SEC, 1);
    log.done_at[10].expect("application loaded") - 8 * SEC
}

#[test]
fn h5_interactive_application_loads_many_times_sooner_with_low_latency() {
    // Kernel: x30; report: x10 decaying linearly over 24 MiB, so less.
    for (p, factor) in [("bfq", 5), ("bfq-plus-2014", 2)] {
        let on = app_load_time(&mut profile(p, &[]));
        let off = app_load_time(&mut profile(p, &[("low_latency", "0")]));
        eprintln!(
            "{p}: load time {} ms with low_latency, {} ms without",
            on / MS,
            off / MS
        );
        assert!(on * factor < off, "{p}: {on} vs {off}");
    }
}

#[test]
fn h5_a_flow_bursting_in_with_seven_siblings_gets_no_raising() {
    for (n, raised) in [(7u64, true), (8, false)] {
        let mut s = profile("bfq", &[]);
        let defs: Vec<FlowDef> = (0..n)
            .map(|i| {
                let mut d = sync_reader(FlowSpec::default(), i * 20_000_000);
                d.start = i * 20 * MS;
                d
            })
            .collect();
        let log = run(&mut s, disk(), &defs, 500 * MS, 1);
        for &f in &log.flows {
            let (w, kind) = s.flow_weight(f).unwrap();
            assert_eq!(
                kind == RaiseKind::Interactive,
                raised,
                "{n} flows: {w} {kind:?}"
            );
            assert_eq!(w, if raised { 40 * 30 } else { 40 });
        }
    }
    // With explicit weights (the user controls them) nothing is raised.
    let mut s = profile("bfq", &[]);
    let log = run(
        &mut s,
        disk(),
        &[sync_reader(FlowSpec::with_weight(100), 0)],
        100 * MS,
        1,
    );
    assert_eq!(s.flow_weight(log.flows[0]).unwrap(), (100, RaiseKind::None));
}

#[test]
fn h5_soft_real_time_flow_is_raised_and_keeps_low_latency() {
    // A player reading 64 sectors every 40 ms (1600 sectors/s), against
    // four greedy readers in a burst (not raised).
    let run_player = |s: &mut Bfq| {
        let mut defs: Vec<FlowDef> = (0..8)
            .map(|i| sync_reader(FlowSpec::default(), i * 20_000_000))
            .collect();
        let mut player = FlowDef::new(40, Kind::Sync { think: 40 * MS });
        player.spec = FlowSpec::default();
        player.base = 900_000_000;
        player.start = 500 * MS;
        defs.push(player);
        let log = run(s, disk(), &defs, 20 * SEC, 1);
        let lat = &log.latency[8];
        // Past the interactive raising (3..25 s from the peak rate; the
        // player reads little, so it is ended by time), look at the tail.
        let kind = s.flow_weight(log.flows[8]).unwrap().1;
        (mean(&lat[lat.len() / 2..]), kind)
    };
    let (on, kind) = run_player(&mut profile("bfq", &[("wr_max_time", "1s")]));
    let (off, _) = run_player(&mut profile(
        "bfq",
        &[("wr_max_time", "1s"), ("wr_max_softrt_rate", "0")],
    ));
    eprintln!("player latency: soft-rt {on:.0} ns, without {off:.0} ns; kind {kind:?}");
    assert_eq!(kind, RaiseKind::SoftRt);
    assert!(on * 3.0 < off, "{on} vs {off}");
}

// ---- Heuristics 1 and 2: peak rate, budget feedback --------------------

#[test]
fn h1_peak_rate_estimate_converges_to_the_device_rate() {
    let dev = Dev {
        per_req: 50 * US,
        per_sector: 5 * US,
        ..Dev::default()
    };
    // 256-sector requests: 256 / 1330 us = 192 481 sectors/s.
    let rate = 256.0 * 1e9 / 1_330_000.0;
    // The report's estimator samples sync flows' turns only (see
    // `h1_the_turn_estimators_sample_sync_flows_only`).
    let plus_reader = Kind::Sync { think: 0 };
    for (p, tol, kind) in [
        ("bfq", 0.05, Kind::Async { depth: 4 }),
        ("bfq-plus-2014", 0.10, plus_reader),
    ] {
        let mut s = profile(p, &[]);
        let mut d = FlowDef::new(100, kind);
        d.size = 256;
        run(&mut s, dev, &[d], 20 * SEC, 1);
        let est = s.peak_rate() as f64;
        eprintln!(
            "{p}: estimate {est:.0}, device {rate:.0}, B_max {}",
            s.max_budget()
        );
        assert!((est - rate).abs() / rate < tol, "{p}: {est} vs {rate}");
        // B_max = T_max x R_est.
        let want = (est * 0.125) as u64;
        assert!(
            s.max_budget().abs_diff(want) <= 2,
            "{} vs {want}",
            s.max_budget()
        );
    }
    // With a fixed max_budget the estimate is not used.
    let mut s = profile("bfq", &[("max_budget", "4096")]);
    run(
        &mut s,
        dev,
        &[FlowDef::new(100, Kind::Async { depth: 4 })],
        SEC,
        1,
    );
    assert_eq!(s.max_budget(), 4096);
}

/// The turn estimators (the original, `peak_rate_estimator=bfq-2010`, and
/// the report's, 2014 report Sec. 4.2) sample a sync flow's turns only,
/// as the original BFQ and BFQ+ did (`bfq_update_peak_rate` returns at
/// once for an async queue): an async flow's turns (a flusher's, whose
/// writes a drive acknowledges from its cache) leave B_max where it was;
/// a sync reader's raise it.
#[test]
fn h1_the_turn_estimators_sample_sync_flows_only() {
    // 256-sector requests: 256 / 562 us = 455 516 sectors/s, above the
    // initial estimate; a 16384-sector budget lasts 36 ms (>= 20 ms).
    let dev = Dev {
        per_req: 50 * US,
        per_sector: 2 * US,
        ..Dev::default()
    };
    let original = [("max_budget", "0"), ("peak_rate_estimator", "bfq-2010")];
    for (p, set) in [("bfq-2010", &original[..]), ("bfq-plus-2014", &[])] {
        let b_max = |kind| {
            let mut s = profile(p, set);
            let mut d = FlowDef::new(100, kind);
            d.size = 256;
            run(&mut s, dev, &[d], 5 * SEC, 1);
            s.max_budget()
        };
        let writer = b_max(Kind::Async { depth: 4 });
        let reader = b_max(Kind::Sync { think: 0 });
        eprintln!("{p}: B_max: async flow {writer}, sync flow {reader}");
        assert_eq!(writer, 16384, "{p}");
        assert!(reader > 40_000, "{p}: {reader}");
    }
}

#[test]
fn h2_ten_readers_started_at_once_reach_bmax_within_a_few_budgets() {
    let defs: Vec<FlowDef> = (0..10)
        .map(|i| sync_reader(FlowSpec::with_weight(100), i * 20_000_000))
        .collect();
    // Turns each reader needed before it was served with B_max. Under
    // bfq-plus-2014 every new flow starts raised, with the small raised
    // budget (2 x min), so one more x4 step is needed. The original BFQ
    // "assigns them the maximum possible budget B_max from the beginning"
    // (2014 report, Sec. 7.2.1 and 4.3): its first turn.
    for (p, most) in [("bfq", 2), ("bfq-plus-2014", 3), ("bfq-2010", 1)] {
        let mut s = profile(p, &[("max_budget", "16384")]);
        let mut turns = [0u32; 10];
        let mut reached = [0u32; 10];
        let mut last = None;
        run_with(&mut s, disk(), &defs, 8 * SEC, 1, |s: &Bfq, r| {
            let i = r.flow.0 as usize;
            if last != Some(r.flow) {
                turns[i] += 1;
                last = Some(r.flow);
            }
            if reached[i] == 0 && s.flow_budget(r.flow) == Some(16384) {
                reached[i] = turns[i];
            }
        });
        eprintln!("{p}: turns to reach B_max {reached:?}");
        assert!(
            reached.iter().all(|&t| t > 0 && t <= most),
            "{p}: {reached:?}"
        );
    }
}

#[test]
fn h2_a_timeout_shared_with_injection_sets_the_budget_to_the_service() {
    // A (weight 300) reads 4 KiB at a time, the next read issued when the
    // previous one completes; B (weight 100) keeps 8 writes outstanding.
    // While A waits for its read, B's writes are injected, so A's first
    // turn ends on the budget timeout with part of its budget unused. It
    // was not slow, it shared the device: its next budget is the service
    // it got (a timeout without injection doubles it, here to B_max).
    let mut a = sync_reader(FlowSpec::with_weight(300), 0);
    a.size = 8;
    let mut b = FlowDef::new(100, Kind::Async { depth: 8 });
    b.op = Op::Write;
    b.base = 900_000_000;
    let mut s = profile("bfq", &[("max_budget", "16384"), ("low_latency", "0")]);
    let a_id = FlowId(0);
    // A's own and B's injected sectors in A's first turn; A's budget after.
    let (mut own, mut injected, mut after) = (0u64, 0u64, None);
    run_with(
        &mut s,
        flash(),
        &[a, b],
        300 * MS,
        1,
        |s: &Bfq, r| match s.active_flow() {
            _ if after.is_some() => {}
            Some(f) if f == a_id && r.flow == a_id => own += u64::from(r.sectors),
            Some(f) if f == a_id => injected += u64::from(r.sectors),
            _ => after = s.flow_budget(a_id),
        },
    );
    let initial = 16384 * 66 / 100;
    eprintln!(
        "A's first turn: {own} sectors of its own, {injected} injected; next budget {after:?}"
    );
    assert!(injected > 0 && own > 0 && own < initial, "{own} {injected}");
    assert_eq!(after, Some(own));
}

// ---- Heuristic 3: fair charging of slow flows --------------------------

#[test]
fn h3_time_charging_gives_random_and_sequential_readers_equal_time() {
    // A random and a sequential sync reader, same weight. Charged by
    // service, the random one (few sectors per ms) would get almost all the
    // disk time; charged by time (kernel) it gets about half.
    let mut rnd = sync_reader(FlowSpec::with_weight(100), 0);
    rnd.seq = false;
    rnd.size = 8;
    let seq = sync_reader(FlowSpec::with_weight(100), 900_000_000);
    let share_time = |s: &mut Bfq| {
        let log = run(s, disk(), &[rnd, seq], 10 * SEC, 1);
        // Disk time of the random reader: its requests each cost a seek.
        let n_rnd = log.latency[0].len() as f64;
        let t_rnd = n_rnd * (2e6 + 100e3 + 8.0 * 5e3);
        t_rnd / log.end as f64
    };
    let kernel = share_time(&mut profile(
        "bfq",
        &[("max_budget", "16384"), ("low_latency", "0")],
    ));
    let by_service = share_time(&mut profile(
        "bfq",
        &[
            ("max_budget", "16384"),
            ("low_latency", "0"),
            ("time_charging", "2010"),
            ("timeout_sync", "10s"),
        ],
    ));
    eprintln!("random reader's disk time: {kernel:.2} charged by time, {by_service:.2} by service");
    assert!((kernel - 0.5).abs() < 0.1, "{kernel}");
    assert!(by_service > 0.85, "{by_service}");
}

#[test]
fn h3_injected_time_is_not_charged_to_the_idling_flow() {
    // Three greedy readers 1:2:3 on a queueing device, injection on: while
    // the in-service reader waits for its one request, the others' are
    // injected, so much of its turn's time is other flows' service (two
    // thirds for the weight-100 reader). Its turns hit the budget timeout
    // having served less than B_max/2, so heuristic 3 charges it for time:
    // charged for the whole turn (over twice its service), the weight-100
    // reader got about 55% of its share; charged only for its own
    // service's part of the turn's time, each reader gets its share within
    // 5%. (A turn shared by injection is now charged its service.)
    let mut s = profile("bfq", &[]);
    let (shares, injected) = weighted_reader_shares(&mut s, &[100, 200, 300]);
    eprintln!("1:2:3 readers, share of their weight's share: {shares:.3?} ({injected} injected)");
    assert!(injected > 1000, "{injected}");
    for (i, x) in shares.iter().enumerate() {
        assert!((x - 1.0).abs() <= 0.05, "reader {i}: {shares:.3?}");
    }
}

/// A random reader (8-sector reads, weight 100) and a sequential reader
/// (64 KiB reads, weight 200) on a rotational disk that queues 8 requests
/// (NCQ) but serves them one by one, 2 ms per seek. The weights differ,
/// so the random reader is idled for (asymmetric scenario) and the
/// sequential reader's requests are injected into its turns. Charged its
/// few sectors for such turns (the rule for other flows and devices), the
/// random reader got 80% of the disk time (weight share 33%) and the
/// sequential reader 100480 sectors over 10 s; time-charged as a seeky
/// flow on a disk, 45% and 405888 sectors (injection off: 45% and
/// 932736).
#[test]
fn h3_injection_does_not_let_a_random_reader_escape_time_charging_on_a_disk() {
    let hdd = Dev {
        depth: 8,
        per_req: 100 * US,
        per_sector: 5 * US,
        seek: 2 * MS,
        parallel: false,
        rotational: true,
    };
    let mut random = FlowDef::new(100, Kind::Sync { think: 0 });
    random.seq = false;
    random.size = 8;
    let mut seq = FlowDef::new(200, Kind::Sync { think: 0 });
    seq.base = 100_000_000;
    seq.size = 128;
    let mut s = Bfq::from_profile("bfq", &Settings::from_pairs([("low_latency", "0")])).unwrap();
    let mut head = 0u64;
    let mut time = [0u64; 2];
    let log = run_with(&mut s, hdd, &[random, seq], 10 * SEC, 1, |_, r| {
        let mut c = hdd.per_req + hdd.per_sector * u64::from(r.sectors);
        if r.sector != head {
            c += hdd.seek;
        }
        head = r.end();
        time[r.flow.0 as usize] += c;
    });
    let random_time = time[0] as f64 / (time[0] + time[1]) as f64;
    eprintln!(
        "random reader: {random_time:.3} of the disk time; sectors {:?}; {} injected",
        log.per_flow,
        s.stats().injected
    );
    assert!(
        random_time < 0.5,
        "random reader (weight 1/3) got {random_time:.3} of the disk time"
    );
    assert!(
        log.per_flow[1] > 200_000,
        "sequential reader got {} sectors",
        log.per_flow[1]
    );
}

/// A sequential reader (64 KiB reads, weight 300) against four random
/// 4 KiB readers (weight 100 each) on a device serving 8 requests at once:
/// the 2018 article's static random workload with a sequential target
/// (Sec. 9, Fig. 3). The random readers' requests are injected into each
/// other's turns; charged only their service for such turns, each random
/// reader's T_max turn cost it as little as a few of the sequential
/// reader's requests, and the sequential reader got 0.45 of the sectors
/// the kernel's time charging gives it. Charged their time while a
/// sequential flow is busy, they leave it its share of the time.
#[test]
fn h3_injection_does_not_let_random_readers_escape_time_charging_beside_a_sequential_one() {
    let defs = sequential_beside_random_readers();
    let seq_sectors = |kv: &[(&str, &str)]| {
        let mut s = profile("bfq", kv);
        let log = run(&mut s, flash(), &defs, 10 * SEC, 1);
        (log.per_flow[0], s.stats().injected)
    };
    let base = [("low_latency", "0"), ("max_budget", "60000")];
    let (ours, injected) = seq_sectors(&base);
    let (kernel, _) = seq_sectors(&[base[0], base[1], ("inject_charge_service", "0")]);
    eprintln!("sequential reader: {ours} sectors ({injected} injected); kernel charging {kernel}");
    assert!(injected > 10_000, "{injected}");
    assert!(ours as f64 >= 0.9 * kernel as f64, "{ours} vs {kernel}");
}

/// A sequential reader of weight 300 (64 KiB reads) and four random 4 KiB
/// readers of weight 100, all in the root group.
fn sequential_beside_random_readers() -> Vec<FlowDef> {
    let mut seq = FlowDef::new(300, Kind::Sync { think: 0 });
    seq.base = 900_000_000;
    seq.size = 128;
    let mut defs = vec![seq];
    for i in 0..4u64 {
        defs.push(random_reader(100, i * 100_000_000));
    }
    defs
}

/// `inject_ahead_bound` costs the readers of
/// `h3_injection_does_not_let_random_readers_escape_time_charging_beside_a_sequential_one`
/// little of their total on `flash()` in 10 s: random readers emptied by
/// each injected read come back ahead of V, and the rule keeps them out
/// of the device's free slots. 1.0% at two budgets ahead of V, the
/// flow's debt and the request counted, when the rule was set (4 110 048
/// sectors against 4 150 176), 23% at one budget (3 194 008); with S
/// alone 2.6% and 9.0% (`low_latency=0 max_budget=60000`: 2.2%, 7.1%).
/// With the injection rules since, none (4 075 224 sectors with the rule,
/// 4 008 112 without).
#[test]
fn inject_ahead_bound_keeps_most_of_the_total_beside_a_sequential_reader() {
    let defs = sequential_beside_random_readers();
    let total = |kv: &[(&str, &str)]| -> u64 {
        let log = run(&mut profile("bfq", kv), flash(), &defs, 10 * SEC, 1);
        log.per_flow.iter().sum()
    };
    let (on, off) = (total(&[]), total(&[("inject_ahead_bound", "0")]));
    eprintln!("total {on} sectors, {off} without the rule");
    assert!(on as f64 >= 0.97 * off as f64, "{on} vs {off}");
}

// ---- Heuristic 4: write over-charge and device-queue limits ------------

#[test]
fn h4_async_writes_are_overcharged() {
    let reader = sync_reader(FlowSpec::with_weight(100), 0);
    let mut writer = FlowDef::new(100, Kind::Async { depth: 8 });
    writer.op = Op::Write;
    writer.base = 900_000_000;
    let ratio = |kv: &[(&str, &str)]| {
        let mut s = profile("bfq", kv);
        let log = run(&mut s, disk(), &[reader, writer], 10 * SEC, 1);
        log.per_flow[0] as f64 / log.per_flow[1] as f64
    };
    let x3 = ratio(&[("max_budget", "16384"), ("async_charge_factor", "3")]);
    let x1 = ratio(&[("max_budget", "16384"), ("async_charge_factor", "1")]);
    let x10 = ratio(&[
        ("max_budget", "16384"),
        ("async_charge_factor", "1"),
        ("write_charge_factor", "10"),
    ]);
    eprintln!("reader/writer service: x3 {x3:.2}, x1 {x1:.2}, writes x10 {x10:.2}");
    assert!((x3 - 3.0).abs() < 0.3, "{x3}");
    assert!((x1 - 1.0).abs() < 0.1, "{x1}");
    assert!((x10 - 10.0).abs() < 1.5, "{x10}");
}

#[test]
fn h4_async_requests_take_at_most_half_the_device_queue() {
    let dev = Dev {
        depth: 32,
        ..flash()
    };
    let mut w = FlowDef::new(100, Kind::Async { depth: 64 });
    w.op = Op::Write;
    let mut s = profile("bfq", &[]);
    let log = run(&mut s, dev, &[w], SEC, 1);
    assert_eq!(log.max_in_flight, 16);
    let mut s = profile("bfq", &[("async_depth_pct", "100")]);
    let log = run(&mut s, dev, &[w], SEC, 1);
    assert_eq!(log.max_in_flight, 32);
}

// ---- Heuristic 6: idling where guarantees need it ----------------------

#[test]
fn h6_idling_only_where_guarantees_need_it() {
    // Two sync random readers on a flash device.
    let reader = random_reader;
    let go = |kv: &[(&str, &str)], w: u32| {
        let mut s = profile("bfq", kv);
        let log = run(
            &mut s,
            flash(),
            &[reader(100, 0), reader(w, 900_000_000)],
            5 * SEC,
            1,
        );
        let total: u64 = log.per_flow.iter().sum();
        (log.per_flow[1] as f64 / log.per_flow[0] as f64, total)
    };
    let off = [("injection", "0")];
    let (r_asym, _) = go(&off, 300);
    // Three flows, 300:100:100: the in-service flow counts in the scenario
    // while it is idled for, so it stays asymmetric.
    let mut s = profile("bfq", &off);
    let log = run(
        &mut s,
        flash(),
        &[
            reader(300, 0),
            reader(100, 500_000_000),
            reader(100, 900_000_000),
        ],
        5 * SEC,
        1,
    );
    let r3 = log.per_flow[0] as f64 / log.per_flow[1] as f64;
    eprintln!("300:100:100: ratio {r3:.2}");
    assert!((r3 - 3.0).abs() < 0.3, "{r3}");
    let (r_2010, _) = go(&[("injection", "0"), ("guarantee_idling", "0")], 300);
    eprintln!("3:1 weights: ratio {r_asym:.2} with guarantee idling, {r_2010:.2} without");
    assert!((r_asym - 3.0).abs() < 0.3, "{r_asym}");
    assert!(r_2010 < 1.5, "{r_2010}");
    // Symmetric: no idling, so the same throughput as never idling.
    let (_, t_sym) = go(&off, 100);
    let (_, t_noidle) = go(&[("injection", "0"), ("slice_idle", "0")], 100);
    eprintln!("symmetric throughput {t_sym} vs no idling {t_noidle}");
    assert!(t_sym as f64 > 0.95 * t_noidle as f64);
}

#[test]
fn h6_strict_guarantees_one_request_at_a_time() {
    let defs = [
        FlowDef::new(100, Kind::Async { depth: 8 }),
        FlowDef::new(100, Kind::Async { depth: 8 }),
    ];
    let mut s = profile("bfq", &[("strict_guarantees", "1")]);
    let log = run(&mut s, flash(), &defs, SEC, 1);
    assert_eq!(log.max_in_flight, 1);
    let mut s = profile("bfq", &[]);
    let log = run(&mut s, flash(), &defs, SEC, 1);
    assert!(log.max_in_flight > 1);
}

// ---- Heuristic 7: injection --------------------------------------------

#[test]
fn h7_injection_keeps_3_to_1_and_raises_throughput() {
    let reader = random_reader;
    let defs = [reader(300, 0), reader(100, 900_000_000)];
    let go = |inj: &str| {
        let mut s = profile("bfq", &[("injection", inj)]);
        let log = run(&mut s, flash(), &defs, 5 * SEC, 1);
        let total: u64 = log.per_flow.iter().sum();
        (
            log.per_flow[0] as f64 / log.per_flow[1] as f64,
            total,
            s.stats().injected,
        )
    };
    let (r_on, t_on, n) = go("1");
    let (r_off, t_off, _) = go("0");
    eprintln!("injection: ratio {r_on:.2}, {t_on} sectors ({n} injected); without: ratio {r_off:.2}, {t_off} sectors");
    assert!((r_on - 3.0).abs() < 0.4, "{r_on}");
    assert!((r_off - 3.0).abs() < 0.4, "{r_off}");
    assert!(t_on as f64 > 1.2 * t_off as f64, "{t_on} vs {t_off}");
}

#[test]
fn h7_returning_flow_keeps_its_place() {
    // Five greedy readers 1:2:3:4:5, one request each at a time, on a
    // device that queues internally. Injecting a reader's one request
    // empties its queue, so readers keep leaving B-WF2Q+ with a request in
    // flight and coming back when it completes. Re-timestamped on return
    // with S = max(V, F), they lost their place each time (the weight-100
    // reader got about 46% of its share); coming back within
    // preempt_in_time of the completion with S = their old F, each gets
    // its share within 5%.
    let mut s = profile("bfq", &[]);
    let (shares, injected) = weighted_reader_shares(&mut s, &[100, 200, 300, 400, 500]);
    eprintln!(
        "1:2:3:4:5 readers, share of their weight's share: {shares:.3?} ({injected} injected)"
    );
    assert!(injected > 1000, "{injected}");
    for (i, x) in shares.iter().enumerate() {
        assert!((x - 1.0).abs() <= 0.05, "reader {i}: {shares:.3?}");
    }
}

#[test]
fn h7_uneven_weights_keep_their_shares_with_injection() {
    // On a device that serves its queue one request after another, a
    // reader's completion and its next request are a moment apart. If the
    // reader leaves the idling census in that gap, the others look
    // symmetric: with 100:500:500, whenever a weight-500 reader's queue
    // emptied the weight-100 reader was in such a gap, the 500 was not
    // idled for, and all three got a third. Sync flows with a short think
    // time linger in the census for slice_idle after a completion.
    for weights in [&[100, 500, 500][..], &[100, 100, 400][..]] {
        let mut s = profile("bfq", &[]);
        let (shares, _) = weighted_reader_shares_on(&mut s, ssd(), weights);
        let injected = s.stats().injected;
        eprintln!("{weights:?}: {shares:.3?} ({injected} injected)");
        // Injection slows the idling reader's next request on this device,
        // so its limit falls to 0 and is tried again once a second, after
        // a new baseline (kernel): 53 and 46 injected (175 and 350 when
        // every new flow's limit started at 1; 92 and 106 before the
        // readers' 128 KiB requests were injected only with nothing else
        // in flight, `inject_large_once`). The shares must hold while
        // injection runs.
        assert!(injected > 30, "{injected}");
        for (i, x) in shares.iter().enumerate() {
            assert!(
                (x - 1.0).abs() <= 0.05,
                "{weights:?} reader {i}: {shares:.3?}"
            );
        }
    }
}

// ---- Heuristic 8: queue merging ----------------------------------------

/// Adds request `id`, a 64-sector sync read of `f` at `sector`, then
/// dispatches all it can at `now`, each completing 100 us later; returns
/// how many it dispatched.
fn read_and_serve(s: &mut Bfq, id: u64, f: FlowId, sector: u64, now: Time) -> u32 {
    let r = Request {
        id,
        flow: f,
        sector,
        sectors: 64,
        op: Op::Read,
        sync: true,
    };
    s.add_request(now, r).unwrap();
    let mut n = 0;
    while let Dispatch::Request(r) = s.dispatch(now) {
        s.complete(now + 100 * US, r.id).unwrap();
        n += 1;
    }
    n
}

#[test]
fn h8_interleaved_readers_are_merged_and_served_sequentially() {
    let mk = |base: u64| {
        let mut d = sync_reader(FlowSpec::with_weight(100), base);
        d.size = 64;
        d.stride = 128;
        d
    };
    let defs = [mk(0), mk(64)];
    let go = |m: &str| {
        let mut s = profile("bfq", &[("queue_merge", m), ("max_budget", "16384")]);
        let log = run(&mut s, disk(), &defs, 5 * SEC, 1);
        (log, s.stats().merges)
    };
    let (on, merges) = go("1");
    let (off, _) = go("0");
    let seq = on.contiguous as f64 / on.dispatches as f64;
    let t_on: u64 = on.per_flow.iter().sum();
    let t_off: u64 = off.per_flow.iter().sum();
    eprintln!("merged: {merges} merges, {seq:.2} contiguous, {t_on} sectors; unmerged {t_off}");
    assert!(merges >= 1);
    assert!(seq > 0.9, "{seq}");
    assert!(t_on > 3 * t_off, "{t_on} vs {t_off}");
    // Both flows still see their own requests completed.
    let r = on.per_flow[0] as f64 / on.per_flow[1] as f64;
    assert!((r - 1.0).abs() < 0.05, "{r}");
}

#[test]
fn h8_merged_queue_is_split_when_it_turns_seeky() {
    // Two readers that start interleaved, then jump around at random.
    let mut a = sync_reader(FlowSpec::with_weight(100), 0);
    a.size = 64;
    a.stride = 128;
    let mut b = a;
    b.base = 64;
    a.stop = 300 * MS;
    b.stop = 300 * MS;
    let mut a2 = a;
    a2.seq = false;
    a2.start = 300 * MS;
    a2.stop = Time::MAX;
    let mut s = profile("bfq", &[("max_budget", "16384")]);
    // Same flows continuing randomly: model as the same FlowSpec issuing
    // random requests through a second definition is not possible in the
    // harness, so drive it by hand.
    let fa = s.add_flow(0, FlowSpec::with_weight(100)).unwrap();
    let fb = s.add_flow(0, FlowSpec::with_weight(100)).unwrap();
    let mut id = 0u64;
    let mut now: Time = 0;
    let mut rng = common::Rng::new(7);
    let mut step = |s: &mut Bfq, f: FlowId, sector: u64, now: Time| {
        id += 1;
        read_and_serve(s, id, f, sector, now)
    };
    for k in 0..40u64 {
        now += MS;
        step(&mut s, fa, k * 128, now);
        step(&mut s, fb, k * 128 + 64, now);
    }
    assert_eq!(s.flow_merged_into(fb), Some(fa));
    for _ in 0..200 {
        now += MS;
        step(&mut s, fb, (rng.next() % 1_000_000) * 1024, now);
        step(&mut s, fa, (rng.next() % 1_000_000) * 1024, now);
        let _ = s.dispatch(now + 50 * MS);
    }
    assert!(s.stats().splits >= 1);
    assert_eq!(s.flow_merged_into(fb), None);
    let _ = (a2, b);
}

/// Kernel `bfq_too_late_for_merging`: a flow served for longer than
/// `merge_time_limit` (100 ms) since the first service of its busy period
/// is not merged into. A reader that starts next to where a reader served
/// for `served_ms` will read next is merged into it when that reader is
/// young, not when it has been reading for 150 ms (two long-running
/// readers meeting by chance are not cooperators), unless the limit is
/// raised. Mutations: `too_late` always false fails the second case,
/// always true the first, ignoring whether the flow was served at all
/// (timing from 0) the last.
#[test]
fn h8_a_flow_served_past_the_merge_time_limit_is_not_merged_into() {
    let merges = |start: Time, served_ms: u64, limit: &str| {
        let mut s = profile(
            "bfq",
            &[("max_budget", "16384"), ("merge_time_limit", limit)],
        );
        let fa = s.add_flow(0, FlowSpec::with_weight(100)).unwrap();
        let fb = s.add_flow(0, FlowSpec::with_weight(100)).unwrap();
        let mut id = 0u64;
        let mut step = |s: &mut Bfq, f: FlowId, sector: u64, now: Time| {
            id += 1;
            read_and_serve(s, id, f, sector, now);
        };
        let mut now: Time = start;
        for k in 0..served_ms {
            now += MS;
            step(&mut s, fa, k * 64, now);
        }
        // A's next request is due at served_ms * 64; it is in service,
        // idling for it. B reads right behind that position.
        step(&mut s, fb, served_ms * 64 + 64, now + 100 * US);
        (s.stats().merges, s.flow_merged_into(fb))
    };
    assert_eq!(
        merges(0, 50, "100ms"),
        (1, Some(FlowId(0))),
        "a young reader is merged into"
    );
    assert_eq!(
        merges(0, 150, "100ms"),
        (0, None),
        "served 150 ms: too late"
    );
    assert_eq!(
        merges(0, 150, "1h"),
        (1, Some(FlowId(0))),
        "the limit raised"
    );
    // The limit runs from the first service, not from time 0.
    assert_eq!(
        merges(SEC, 50, "100ms"),
        (1, Some(FlowId(0))),
        "young, 1 s in"
    );
}

// ---- Heuristic 9: preemption -------------------------------------------

#[test]
fn h9_waking_rt_flow_preempts_a_greedy_be_flow() {
    let mut be = FlowDef::new(100, Kind::Async { depth: 8 });
    be.size = 64;
    let mut rt = FlowDef::new(100, Kind::Sync { think: 50 * MS });
    rt.spec.prio = IoPrio {
        class: IoClass::Rt,
        level: 4,
    };
    rt.size = 8;
    rt.seq = false;
    rt.base = 900_000_000;
    let go = |p: &str| {
        // The kernel's async over-charge (x3): at `bfq`'s x10 the greedy
        // flow's turns are short enough that waiting for them costs little.
        let kv = [
            ("preemption", p),
            ("max_budget", "16384"),
            ("async_charge_factor", "3"),
        ];
        let mut s = profile("bfq", &kv);
        let log = run(&mut s, disk(), &[be, rt], 5 * SEC, 1);
        (mean(&log.latency[1]), s.stats().preemptions)
    };
    let (on, n) = go("1");
    let (off, _) = go("0");
    eprintln!(
        "RT latency: {:.2} ms with preemption ({n}), {:.2} ms without",
        on / 1e6,
        off / 1e6
    );
    assert!(n > 10);
    assert!(on * 5.0 < off, "{on} vs {off}");
}

#[test]
fn h9_preemption_needs_a_smaller_finish_time() {
    // A (weight 100) is in service with many requests queued; B (weight
    // 200) issues its first request after A was served `served` sectors.
    // B is heavier, and B-WF2Q+ would pick it next among the queued flows,
    // but it preempts A only if it would also finish before A (kernel
    // next_in_service rule): V has advanced with A's service, so late in
    // A's turn B's F = V + budget/200 is beyond A's F = S + budget/100.
    // Returns the number of preemptions and whether B is served next.
    let wake_after = |served: u64| {
        let mut s = profile("bfq", &[("max_budget", "16384"), ("low_latency", "0")]);
        let a = s.add_flow(0, FlowSpec::with_weight(100)).unwrap();
        let b = s.add_flow(0, FlowSpec::with_weight(200)).unwrap();
        let req = |id: u64, flow: FlowId, sector: u64| sync_read(id, flow, sector, 256);
        for k in 0..64 {
            s.add_request(0, req(k, a, k * 256)).unwrap();
        }
        let mut now: Time = 0;
        for _ in 0..served / 256 {
            let Dispatch::Request(r) = s.dispatch(now) else {
                panic!()
            };
            assert_eq!(r.flow, a);
            now += MS;
            s.complete(now, r.id).unwrap();
        }
        s.add_request(now, req(100, b, 10_000_000)).unwrap();
        let Dispatch::Request(r) = s.dispatch(now) else {
            panic!()
        };
        (s.stats().preemptions, r.flow == b)
    };
    // Early in A's turn (initial budgets 10813): F_B < F_A.
    assert_eq!(wake_after(256), (1, true));
    // After 7680 of A's 10813 sectors: F_B > F_A, no preemption.
    assert_eq!(wake_after(7680), (0, false));
}

#[test]
fn h9_a_flow_of_a_heavier_group_preempts_another_group() {
    // 2018 article layout: a random reader in a group of weight 300, a
    // sequential reader in a group of weight 100. The random reader had a
    // long turn (its F is far ahead) and wakes while the sequential reader
    // is in service: the kernel preempts it anyway
    // (`bfq_bfqq_higher_class_or_weight` compares the groups' weights and
    // `next_queue_may_preempt` passes); `preempt_group_weight=0` does not.
    let go = |profile_name: &str, kv: &[(&str, &str)]| {
        let mut s = profile(profile_name, kv);
        let mut flow_in_group = |weight: u32| {
            let group = s.add_group(GroupId::ROOT, weight).unwrap();
            let spec = FlowSpec {
                group,
                ..FlowSpec::default()
            };
            s.add_flow(0, spec).unwrap()
        };
        let (t, q) = (flow_in_group(300), flow_in_group(100));
        let mut now: Time = 0;
        // The random reader is served alone for 100 requests.
        for k in 0..100 {
            s.add_request(now, sync_read(k, t, k * 100_000, 8)).unwrap();
            let Dispatch::Request(r) = s.dispatch(now) else {
                panic!()
            };
            assert_eq!(r.flow, t);
            now += MS / 10;
            s.complete(now, r.id).unwrap();
        }
        // It stops; once it has been expired, the sequential reader runs.
        for k in 0..64 {
            s.add_request(now, sync_read(1000 + k, q, 50_000_000 + k * 256, 256))
                .unwrap();
        }
        let mut served_q = 0;
        loop {
            match s.dispatch(now) {
                Dispatch::Request(r) if r.flow == q => {
                    served_q += 1;
                    now += MS;
                    s.complete(now, r.id).unwrap();
                    if served_q == 2 {
                        break;
                    }
                }
                Dispatch::Idle { until } => now = until,
                d => panic!("{d:?}"),
            }
        }
        // The random reader wakes.
        let before = s.stats().preemptions;
        s.add_request(now, sync_read(500, t, 7_000_000, 8)).unwrap();
        let Dispatch::Request(r) = s.dispatch(now) else {
            panic!()
        };
        (s.stats().preemptions - before, r.flow == t)
    };
    let kv = [("max_budget", "16384"), ("low_latency", "0")];
    assert_eq!(go("bfq-kernel", &kv).0, 1);
    assert_eq!(go("bfq", &kv).0, 1);
    let off = [kv[0], kv[1], ("preempt_group_weight", "0")];
    assert_eq!(go("bfq-kernel", &off), (0, false));
}

#[test]
fn h9_in_time_wakeup_keeps_budget_and_timestamps() {
    // A reads one request and goes idle; B is served for a while; A wakes
    // 14 ms after its completion (within 3 x slice_idle = 24 ms).
    let go = |p: &str| {
        let mut s = profile(p, &[("max_budget", "16384"), ("low_latency", "0")]);
        let a = s.add_flow(0, FlowSpec::with_weight(100)).unwrap();
        let b = s.add_flow(0, FlowSpec::with_weight(100)).unwrap();
        let req = |id: u64, flow: FlowId, sector: u64| sync_read(id, flow, sector, 64);
        s.add_request(0, req(1, a, 0)).unwrap();
        let Dispatch::Request(r) = s.dispatch(0) else {
            panic!()
        };
        s.complete(MS, r.id).unwrap();
        assert!(matches!(s.dispatch(MS), Dispatch::Idle { .. }));
        assert_eq!(s.dispatch(10 * MS), Dispatch::Empty); // A expired: too idle
        let after_idle = s.flow_budget(a).unwrap();
        for k in 0..4 {
            s.add_request(10 * MS, req(10 + k, b, 1_000_000 + k * 64))
                .unwrap();
        }
        let Dispatch::Request(r) = s.dispatch(10 * MS) else {
            panic!()
        };
        s.complete(11 * MS, r.id).unwrap();
        s.add_request(15 * MS, req(2, a, 64)).unwrap();
        (s.flow_budget(a).unwrap(), after_idle)
    };
    let (kept, _) = go("bfq");
    let (renewed, after_idle) = go("bfq-2010");
    // Initial budget 2/3 of 16384, minus the 64 sectors served.
    assert_eq!(kept, 16384 * 66 / 100 - 64);
    assert_eq!(renewed, after_idle);
    assert!(renewed < 1000, "{renewed}");
}

// ---- Every heuristic together, random workloads --------------------------

use proptest::prelude::*;

#[derive(Clone, Debug)]
struct RFlow {
    default_weight: bool,
    weight: u32,
    sync: bool,
    seq: bool,
    write: bool,
    size: u32,
    start_ms: u64,
    stop_ms: Option<u64>,
    group: usize,
    class: u8,
    think_us: u64,
}

fn rflow() -> impl Strategy<Value = RFlow> {
    (
        (
            any::<bool>(),
            1u32..=1000,
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
        ),
        (
            1u32..=256,
            0u64..400,
            proptest::option::of(50u64..1500),
            0usize..3,
            0u8..3,
            0u64..20_000,
        ),
    )
        .prop_map(
            |(
                (default_weight, weight, sync, seq, write),
                (size, start_ms, stop_ms, group, class, think_us),
            )| RFlow {
                default_weight,
                weight,
                sync,
                seq,
                write,
                size,
                start_ms,
                stop_ms,
                group,
                class,
                think_us,
            },
        )
}

/// The harness's flows for generated ones, in `groups` (root, g1, g2).
fn rflow_defs(flows: &[RFlow], groups: [GroupId; 3]) -> Vec<FlowDef> {
    flows
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let kind = if p.sync {
                Kind::Sync {
                    think: p.think_us * US,
                }
            } else {
                Kind::Async { depth: 4 }
            };
            let mut d = FlowDef::new(p.weight, kind);
            let class = IoClass::ALL[p.class as usize];
            d.spec = FlowSpec {
                weight: if p.default_weight {
                    None
                } else {
                    Some(p.weight)
                },
                prio: IoPrio { class, level: 4 },
                group: groups[p.group],
            };
            d.seq = p.seq;
            d.size = p.size;
            d.op = if p.write { Op::Write } else { Op::Read };
            d.start = p.start_ms * MS;
            d.stop = p.stop_ms.map_or(Time::MAX, |x| x * MS);
            // Pairs of flows read interleaved regions: merge candidates.
            d.base = (i as u64 / 2) * 10_000_000 + (i as u64 % 2) * u64::from(p.size);
            d.stride = if i % 2 == 0 { 0 } else { 2 * u64::from(p.size) };
            d
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, .. ProptestConfig::default() })]

    /// Whatever the mix of flows, classes, groups, devices and profiles:
    /// every request is dispatched and completed exactly once, B-WF2Q+'s
    /// invariants hold, and every flow that issued requests was served.
    #[test]
    fn all_heuristics_exactly_once(flows in proptest::collection::vec(rflow(), 1..12), seed in any::<u64>(), dev_kind in 0u8..3, prof in 0u8..3) {
        let name = ["bfq", "bfq-plus-2014", "bfq-2010"][prof as usize];
        let mut s = profile(name, &[]);
        let g1 = s.add_group(GroupId::ROOT, 200).unwrap();
        let g2 = s.add_group(g1, 50).unwrap();
        let groups = [GroupId::ROOT, g1, g2];
        let defs = rflow_defs(&flows, groups);
        let dev = match dev_kind {
            0 => disk(),
            1 => flash(),
            _ => Dev { depth: 32, ..flash() },
        };
        let log = run(&mut s, dev, &defs, 2 * SEC, seed);
        served_exactly_once(&s, &log)?;
    }
}

/// Every request dispatched and completed once, nothing left, B-WF2Q+'s
/// invariants, and every flow that had a backlog was served.
fn served_exactly_once(s: &Bfq, log: &RunLog) -> Result<(), TestCaseError> {
    s.check_invariants();
    prop_assert_eq!(&log.dispatched_ids, &log.completed_ids);
    prop_assert_eq!(log.dispatched_ids.len() as u64, log.issued);
    prop_assert_eq!(s.queued() + s.in_flight(), 0);
    for (i, b) in log.backlog.iter().enumerate() {
        prop_assert!(b.is_empty() || log.per_flow[i] > 0, "flow {} starved", i);
    }
    Ok(())
}

#[test]
fn h5_raised_flows_keep_idling_when_seeky() {
    // A lone random reader: after 40 requests it is seeky. Raised
    // (interactive) it is waited for at least 20 ms; not raised, 2 ms.
    let idle_after_seeks = |kv: &[(&str, &str)]| {
        let mut s = profile("bfq", kv);
        let f = s.add_flow(0, FlowSpec::default()).unwrap();
        let mut now = 0;
        let mut rng = common::Rng::new(3);
        for id in 0..40u64 {
            let sector = (rng.next() % 1_000_000) * 1024;
            s.add_request(
                now,
                Request {
                    id,
                    flow: f,
                    sector,
                    sectors: 8,
                    op: Op::Read,
                    sync: true,
                },
            )
            .unwrap();
            let Dispatch::Request(r) = s.dispatch(now) else {
                panic!()
            };
            now += MS;
            s.complete(now, r.id).unwrap();
        }
        match s.dispatch(now) {
            Dispatch::Idle { until } => until - now,
            d => panic!("{d:?}"),
        }
    };
    assert_eq!(idle_after_seeks(&[]), 20 * MS);
    assert_eq!(idle_after_seeks(&[("low_latency", "0")]), 2 * MS);
}

#[test]
fn h5_interactive_raising_ends_after_its_service_cap() {
    // A lone greedy reader of default weight: raised at start, the raising
    // ends once it got 120000 sectors (about 0.6 s on this disk), long
    // before its duration (3..25 s).
    let go = |kv: &[(&str, &str)]| {
        let mut s = profile("bfq", kv);
        let log = run(
            &mut s,
            disk(),
            &[sync_reader(FlowSpec::default(), 0)],
            2 * SEC,
            1,
        );
        s.flow_weight(log.flows[0]).unwrap()
    };
    assert_eq!(go(&[]), (40, RaiseKind::None));
    assert_eq!(
        go(&[("wr_max_service", "0")]),
        (1200, RaiseKind::Interactive)
    );
}

#[derive(Clone, Debug)]
enum FuzzOp {
    AddFlow {
        default_weight: bool,
        weight: u32,
        group: usize,
        class: u8,
    },
    RemoveFlow(usize),
    AddReq {
        flow: usize,
        near: bool,
        sync: bool,
        write: bool,
        size: u32,
    },
    Dispatch {
        dt_us: u64,
    },
    Complete {
        which: usize,
        dt_us: u64,
    },
}

fn fuzz_op() -> impl Strategy<Value = FuzzOp> {
    prop_oneof![
        1 => (any::<bool>(), 1u32..=1000, 0usize..3, 0u8..3).prop_map(|(d, w, g, c)| FuzzOp::AddFlow { default_weight: d, weight: w, group: g, class: c }),
        1 => (0usize..16).prop_map(FuzzOp::RemoveFlow),
        6 => (0usize..16, any::<bool>(), any::<bool>(), any::<bool>(), 1u32..=256).prop_map(|(flow, near, sync, write, size)| FuzzOp::AddReq { flow, near, sync, write, size }),
        6 => (0u64..20_000).prop_map(|dt_us| FuzzOp::Dispatch { dt_us }),
        5 => (0usize..8, 0u64..5_000).prop_map(|(which, dt_us)| FuzzOp::Complete { which, dt_us }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 60, .. ProptestConfig::default() })]

    /// Random calls through the interface — flows created and removed at
    /// any time, requests of removed flows, merges, injection, preemption:
    /// no panic, every accepted request dispatched and completed exactly
    /// once, nothing left behind.
    #[test]
    fn interface_fuzz_with_every_heuristic(ops in proptest::collection::vec(fuzz_op(), 1..400), prof in 0u8..3, dev in 0u8..3) {
        let mut z = Fuzz::new(prof, dev);
        for op in ops {
            z.apply(op);
        }
        z.drain()?;
        let Fuzz { mut s, flows, accepted, dispatched, now, .. } = z;
        s.check_invariants();
        prop_assert_eq!(&accepted, &dispatched);
        prop_assert_eq!(s.queued() + s.in_flight(), 0);
        // Nothing leaks: with every flow removed and lingering over, the
        // idling census counts no busy flow and no tree holds weight (read
        // from the Debug dump: no accessor for these internals).
        if let Err(e) = nothing_left_behind(&mut s, now, &flows) {
            return Err(TestCaseError::fail(e));
        }
    }
}

/// The interface fuzz's state: the scheduler, its groups and flows (and
/// each flow's next position), the requests accepted, dispatched and in
/// flight, the clock, the last request id and the random sectors' stream.
struct Fuzz {
    s: Bfq,
    groups: [GroupId; 3],
    flows: Vec<FlowId>,
    pos: Vec<u64>,
    in_flight: Vec<u64>,
    accepted: std::collections::BTreeSet<u64>,
    dispatched: std::collections::BTreeSet<u64>,
    now: Time,
    next_id: u64,
    rng: common::Rng,
}

impl Fuzz {
    /// Profile `prof` (bfq, bfq-plus-2014, bfq-2010) on device `dev`
    /// (default; 8 deep, flash; 32 deep, rotational), with two nested
    /// groups and four flows (two of the default weight, two weighted).
    fn new(prof: u8, dev: u8) -> Self {
        let name = ["bfq", "bfq-plus-2014", "bfq-2010"][prof as usize];
        let mut s = profile(name, &[]);
        s.set_device(match dev {
            0 => DeviceInfo::default(),
            1 => DeviceInfo {
                queue_depth: 8,
                queues_internally: true,
                rotational: false,
            },
            _ => DeviceInfo {
                queue_depth: 32,
                queues_internally: true,
                rotational: true,
            },
        });
        let g1 = s.add_group(GroupId::ROOT, 300).unwrap();
        let g2 = s.add_group(g1, 100).unwrap();
        let groups = [GroupId::ROOT, g1, g2];
        let flows: Vec<FlowId> = (0..4)
            .map(|i| {
                let spec = if i % 2 == 0 {
                    FlowSpec::default()
                } else {
                    FlowSpec::with_weight(100 * i)
                };
                s.add_flow(0, spec).unwrap()
            })
            .collect();
        let pos: Vec<u64> = (0..4).map(|i| (i / 2) * 10_000_000).collect();
        Fuzz {
            s,
            groups,
            flows,
            pos,
            in_flight: vec![],
            accepted: Default::default(),
            dispatched: Default::default(),
            now: 0,
            next_id: 0,
            rng: common::Rng::new(11),
        }
    }

    /// Asks for a dispatch: a request (dispatched only once) goes in
    /// flight; an idle answer gives the time it idles until (in the future).
    fn take(&mut self) -> Option<Time> {
        match self.s.dispatch(self.now) {
            Dispatch::Request(r) => {
                assert!(self.dispatched.insert(r.id), "dispatched twice");
                self.in_flight.push(r.id);
                None
            }
            Dispatch::Idle { until } => {
                assert!(until > self.now);
                Some(until)
            }
            _ => None,
        }
    }

    /// Makes one random call.
    fn apply(&mut self, op: FuzzOp) {
        match op {
            FuzzOp::AddFlow {
                default_weight,
                weight,
                group,
                class,
            } => {
                let spec = FlowSpec {
                    weight: if default_weight { None } else { Some(weight) },
                    prio: IoPrio {
                        class: IoClass::ALL[class as usize],
                        level: 4,
                    },
                    group: self.groups[group],
                };
                self.flows.push(self.s.add_flow(self.now, spec).unwrap());
                // Pairs of flows share a region: merge candidates.
                self.pos.push((self.flows.len() as u64 / 2) * 10_000_000);
            }
            FuzzOp::RemoveFlow(i) => {
                if let Some(&f) = self.flows.get(i) {
                    let _ = self.s.remove_flow(self.now, f);
                }
            }
            FuzzOp::AddReq {
                flow,
                near,
                sync,
                write,
                size,
            } => self.add_request(flow, near, sync, write, size),
            FuzzOp::Dispatch { dt_us } => {
                self.now += dt_us * US;
                self.take();
            }
            FuzzOp::Complete { which, dt_us } => {
                self.now += dt_us * US;
                if !self.in_flight.is_empty() {
                    let id = self.in_flight.swap_remove(which % self.in_flight.len());
                    self.s.complete(self.now, id).unwrap();
                }
            }
        }
    }

    /// Adds a request of flow number `flow` (if there is one): next to its
    /// last one if `near`, else at a random sector.
    fn add_request(&mut self, flow: usize, near: bool, sync: bool, write: bool, size: u32) {
        let Some(&f) = self.flows.get(flow) else {
            return;
        };
        let sector = if near {
            self.pos[flow] += 2 * u64::from(size);
            self.pos[flow] + (flow as u64 % 2) * u64::from(size)
        } else {
            (self.rng.next() % 1_000_000) * 1024
        };
        self.next_id += 1;
        let r = Request {
            id: self.next_id,
            flow: f,
            sector,
            sectors: size,
            op: if write { Op::Write } else { Op::Read },
            sync,
        };
        if self.s.add_request(self.now, r).is_ok() {
            self.accepted.insert(self.next_id);
        }
    }

    /// Dispatches and completes until nothing is queued or in flight.
    fn drain(&mut self) -> Result<(), TestCaseError> {
        let mut guard = 0;
        loop {
            guard += 1;
            prop_assert!(guard < 1_000_000, "no progress");
            if let Some(until) = self.take() {
                if let Some(id) = self.in_flight.pop() {
                    self.now += 10 * US;
                    self.s.complete(self.now, id).unwrap();
                } else {
                    self.now = until;
                }
                continue;
            }
            if self.s.queued() == 0 && self.in_flight.is_empty() {
                return Ok(());
            }
            if let Some(id) = self.in_flight.pop() {
                self.now += 10 * US;
                self.s.complete(self.now, id).unwrap();
            } else {
                self.now += MS;
            }
        }
    }
}

/// Removes every flow and lets lingering end: then the idling census must
/// count no busy flow and no tree hold weight (read from the Debug dump:
/// no accessor for these internals).
fn nothing_left_behind(s: &mut Bfq, now: Time, flows: &[FlowId]) -> Result<(), String> {
    for &f in flows {
        let _ = s.remove_flow(now, f);
    }
    let now = now + SEC;
    if s.dispatch(now) != Dispatch::Empty {
        return Err("requests left".into());
    }
    s.check_invariants();
    let dump = format!("{s:?}");
    let all_zero = |field: &str| debug_values(&dump, field).iter().all(|&v| v == 0);
    for field in ["busy_flows", "raised_busy", "wsum", "busy"] {
        if !all_zero(field) {
            return Err(format!("{field} left non-zero: census or tree leak"));
        }
    }
    Ok(())
}

/// The `field: N` values in a Debug dump.
fn debug_values(dump: &str, field: &str) -> Vec<u64> {
    let pat = format!("{field}: ");
    dump.match_indices(&pat)
        .filter_map(|(i, _)| {
            let rest = &dump[i + pat.len()..];
            let end = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            rest[..end].parse().ok()
        })
        .collect()
}

/// A real-time flow of weight 100 (level 4) in the root group.
fn rt_flow(s: &mut Bfq) -> FlowId {
    let prio = IoPrio {
        class: IoClass::Rt,
        level: 4,
    };
    s.add_flow(
        0,
        FlowSpec {
            prio,
            ..FlowSpec::with_weight(100)
        },
    )
    .unwrap()
}

#[test]
fn h7_waker_is_injected_first() {
    // X (weight 300) wakes up each time W completes: W becomes X's waker.
    // While X is idled for, W's request is injected before Z's, which
    // B-WF2Q+ would pick otherwise (it is real-time; preemption is off so
    // that it waits). `gap` is how long after W's completion
    // X issues: 1 ms makes W its waker, 6 ms does not.
    let injected_flow = |gap: Time| {
        let mut s = profile("bfq", &[("low_latency", "0"), ("preemption", "0")]);
        s.set_device(DeviceInfo {
            queue_depth: 8,
            queues_internally: true,
            rotational: false,
        });
        let x = s.add_flow(0, FlowSpec::with_weight(300)).unwrap();
        let w = s.add_flow(0, FlowSpec::with_weight(100)).unwrap();
        // Z is real-time: B-WF2Q+ serves it first.
        let z = rt_flow(&mut s);
        let mut id = 0;
        let mut now: Time = 0;
        let mut req = |flow: FlowId, sector: u64| {
            id += 1;
            sync_read(id, flow, sector, 8)
        };
        wake_three_times(&mut s, &mut now, &mut req, (w, x), gap);
        // X in service: its next request, arriving while it is idled for
        // with nothing else in flight, gives the baseline service time
        // that starts injection into its idle time (kernel: a queue has
        // nothing injected until then).
        s.add_request(now, req(x, 590_000)).unwrap();
        let Dispatch::Request(r0) = s.dispatch(now) else {
            panic!()
        };
        now += 100 * US;
        s.complete(now, r0.id).unwrap();
        // X idled for; W and Z have a request each.
        s.add_request(now, req(x, 600_000)).unwrap();
        let Dispatch::Request(r) = s.dispatch(now) else {
            panic!()
        };
        assert_eq!(r.flow, x);
        s.add_request(now, req(w, 700_000)).unwrap();
        s.add_request(now, req(z, 800_000)).unwrap();
        now += 100 * US;
        s.complete(now, r.id).unwrap();
        match s.dispatch(now) {
            Dispatch::Request(r) => r.flow,
            d => panic!("{d:?}"),
        }
    };
    let (x_waker, x_no_waker) = (injected_flow(MS), injected_flow(6 * MS));
    assert_eq!(x_waker, FlowId(1));
    assert_eq!(x_no_waker, FlowId(2));
}

/// Serves what is queued, each request in 100 us; on idling, waits it out
/// (`wait`) or stops.
fn serve_queued(s: &mut Bfq, now: &mut Time, wait: bool) {
    loop {
        match s.dispatch(*now) {
            Dispatch::Request(r) => {
                *now += 100 * US;
                s.complete(*now, r.id).unwrap();
            }
            Dispatch::Idle { until } if wait => *now = until,
            _ => break,
        }
    }
}

/// Three times: a request of `w` served, then `gap` later one of `x`
/// served with its idling waited out, 50 ms apart (X wakes up `gap` after
/// each of W's completions).
fn wake_three_times(
    s: &mut Bfq,
    now: &mut Time,
    req: &mut impl FnMut(FlowId, u64) -> Request,
    (w, x): (FlowId, FlowId),
    gap: Time,
) {
    for k in 0..3u64 {
        s.add_request(*now, req(w, k * 1000)).unwrap();
        serve_queued(s, now, false);
        *now += gap;
        s.add_request(*now, req(x, 500_000 + k * 1000)).unwrap();
        serve_queued(s, now, true);
        *now += 50 * MS;
    }
}

#[test]
fn h7_a_waker_is_injected_beyond_the_limit() {
    // Kernel `bfq_select_queue`: the idling queue's waker is tried before
    // `bfq_choose_bfqq_for_injection`, the only place the inject limit is
    // applied. X (weight 300) wakes up 1 ms after each of W's completions,
    // so W becomes its waker; X's limit is still 0 (its baseline service
    // time was never measured alone), so only the waker may go in.
    let injected = |beyond: &str| {
        let mut s = profile(
            "bfq",
            &[
                ("low_latency", "0"),
                ("preemption", "0"),
                ("inject_waker_beyond_limit", beyond),
            ],
        );
        s.set_device(DeviceInfo {
            queue_depth: 8,
            queues_internally: true,
            rotational: false,
        });
        let x = s.add_flow(0, FlowSpec::with_weight(300)).unwrap();
        let w = s.add_flow(0, FlowSpec::with_weight(100)).unwrap();
        let mut id = 0;
        let mut now: Time = 0;
        let mut req = |flow: FlowId, sector: u64| {
            id += 1;
            sync_read(id, flow, sector, 8)
        };
        wake_three_times(&mut s, &mut now, &mut req, (w, x), MS);
        // X in service, W with a request queued: X's request completes
        // and X is idled for.
        s.add_request(now, req(x, 600_000)).unwrap();
        let Dispatch::Request(r) = s.dispatch(now) else {
            panic!()
        };
        assert_eq!(r.flow, x);
        s.add_request(now, req(w, 700_000)).unwrap();
        now += 100 * US;
        s.complete(now, r.id).unwrap();
        match s.dispatch(now) {
            Dispatch::Request(r) => Some(r.flow),
            Dispatch::Idle { .. } => None,
            d => panic!("{d:?}"),
        }
    };
    assert_eq!(injected("1"), Some(FlowId(1)), "the waker goes in");
    assert_eq!(injected("0"), None, "limit 0: nothing injected");
}

/// `inject_fair_candidates`: X (weight 100, random 4 KiB reads) wakes up
/// 1 ms after each completion of W (weight `w_weight`, sequential 32 KiB
/// reads, not seeky on flash), so W is X's waker; then X is idled for while W has
/// `W_QUEUED` reads queued and Z (real-time, weight 100, so B-WF2Q+'s
/// next flow; preemption off so that it waits) `z_queued` random 4 KiB
/// reads. Returns, for the requests injected in order until `n` were or
/// X's idling ran out, whether each was W's (each completes 100 us after
/// dispatch).
fn injected_beside_waker(fair: &str, w_weight: u32, z_queued: u64, n: usize) -> Vec<bool> {
    const W_QUEUED: u64 = 64;
    let mut s = profile(
        "bfq",
        &[
            ("low_latency", "0"),
            ("preemption", "0"),
            ("inject_fair_candidates", fair),
        ],
    );
    s.set_device(DeviceInfo {
        queue_depth: 32,
        queues_internally: true,
        rotational: false,
    });
    let x = s.add_flow(0, FlowSpec::with_weight(100)).unwrap();
    let w = s.add_flow(0, FlowSpec::with_weight(w_weight)).unwrap();
    let z = rt_flow(&mut s);
    let (mut id, mut now, mut w_next, mut x_next) = (0u64, 0, 0u64, 10_000_000u64);
    let mut req = |flow: FlowId| {
        id += 1;
        if flow == w {
            w_next += 64;
            sync_read(id, flow, w_next - 64, 64)
        } else {
            x_next += 7919 * 8;
            sync_read(id, flow, x_next, 8)
        }
    };
    // X's reads are seeks (kernel: more than 19 of its last 32); then W
    // wakes X three times (the waker); X's turn starts, and its next read,
    // arriving while it is idled for and served with nothing else in
    // flight, gives its baseline service time.
    for _ in 0..24 {
        s.add_request(now, req(x)).unwrap();
        serve_queued(&mut s, &mut now, true);
        now += MS;
    }
    for _ in 0..3 {
        s.add_request(now, req(w)).unwrap();
        serve_queued(&mut s, &mut now, false);
        now += MS;
        s.add_request(now, req(x)).unwrap();
        serve_queued(&mut s, &mut now, true);
        now += 50 * MS;
    }
    let mut r = sync_read(0, x, 0, 8);
    for k in 0..2 {
        if k > 0 {
            now += 100 * US;
            s.complete(now, r.id).unwrap();
        }
        s.add_request(now, req(x)).unwrap();
        let Dispatch::Request(d) = s.dispatch(now) else {
            panic!()
        };
        assert_eq!(d.flow, x);
        r = d;
    }
    for _ in 0..W_QUEUED {
        s.add_request(now, req(w)).unwrap();
    }
    for i in 0..z_queued {
        s.add_request(now, sync_read(9999 + i, z, 90_000_000 + i * 7919 * 8, 8))
            .unwrap();
    }
    now += 100 * US;
    s.complete(now, r.id).unwrap();
    let mut order = Vec::new();
    while order.len() < n {
        let Dispatch::Request(r) = s.dispatch(now) else {
            break;
        };
        assert!(r.flow == w || r.flow == z, "only W and Z are queued");
        order.push(r.flow == w);
        now += 100 * US;
        s.complete(now, r.id).unwrap();
    }
    order
}

/// How many of W's reads were injected before Z's only one (W of weight
/// 100; None: Z's never was, X's idling ran out).
fn waker_reads_before_next_flow(fair: &str) -> Option<u64> {
    let order = injected_beside_waker(fair, 100, 1, usize::MAX);
    order.iter().position(|&is_w| !is_w).map(|i| i as u64)
}

#[test]
fn h7_fair_candidates_share_the_slots_with_an_always_queued_waker() {
    // One read at a time is injected into X's idle time (its limit, 1).
    // Tried waker first, W (always a read queued) takes each slot until
    // its injected service reaches its budget (8 of its reads here) or
    // X's idling ends; tried least
    // injected into the turn per unit of weight first, Z (0 injected)
    // goes before W once W has had one read injected: at most one of W's
    // reads before Z's (the bound: one per other candidate that may give
    // any request, W; no tolerance, the order is exact).
    let fair = waker_reads_before_next_flow("1");
    let kernel_order = waker_reads_before_next_flow("0");
    assert!(fair.is_some_and(|n| n <= 1), "fair: {fair:?}");
    assert!(
        kernel_order.is_none_or(|n| n > 1),
        "waker first: {kernel_order:?}"
    );
}

#[test]
fn h7_fair_candidates_share_the_slots_by_weight() {
    // W (waker, weight 800, 64-sector reads) and Z (B-WF2Q+'s next flow,
    // weight 100, 8-sector reads) have reads queued; one read at a time
    // is injected into X's idle time. Tried least injected into the turn
    // per unit of weight first: W (tie at 0, waker first), Z (0 < W's
    // 64/800), then W and Z again (tie: Z's 8/100 equals W's 64/800).
    // Exact order, no tolerance. Mutation (the key without the weight,
    // sectors only): W, Z, Z, W (Z's 16 sectors still below W's 64).
    let order = injected_beside_waker("1", 800, 64, 4);
    assert_eq!(order, [true, false, true, false], "W's reads: {order:?}");
}

#[test]
fn h7_injection_engages_when_the_next_request_arrives_at_completion() {
    // Regression: two sync random readers (weights 300 and 100) on a
    // queueing flash device, each issuing its next request at the very
    // instant its previous one completes, before the scheduler dispatches
    // again (as bfq-sim does). The idling flow is never empty with nothing
    // in flight, so counting its own in-flight request against the inject
    // limit (which starts at 1) meant nothing was ever injected, the limit
    // never grew, and injection changed nothing (2018-io-control). That is
    // the kernel's count (`tot_rq_in_driver`), `inject_limit_counts_all`,
    // on in `bfq-kernel`: with it nothing is injected here.
    let (on, injected) = two_readers_on_flash("1", "0");
    let (off, _) = two_readers_on_flash("0", "0");
    let (all, injected_all) = two_readers_on_flash("1", "1");
    eprintln!("with injection {on} requests ({injected} injected), without {off}; counting the idling flow's own request {all} ({injected_all})");
    assert!(injected > 0);
    assert!(on as f64 > 1.3 * off as f64, "{on} vs {off}");
    assert_eq!(injected_all, 0);
    assert_eq!(all, off);
}

/// Two sync random readers (weights 300 and 100) on a 32-deep flash
/// device for one second, `injection` and `inject_limit_counts_all` as
/// given (`low_latency` off): the requests served, and those injected.
fn two_readers_on_flash(inj: &str, all: &str) -> (u64, u64) {
    let mut s = profile(
        "bfq",
        &[
            ("injection", inj),
            ("low_latency", "0"),
            ("inject_limit_counts_all", all),
        ],
    );
    s.set_device(DeviceInfo {
        queue_depth: 32,
        queues_internally: true,
        rotational: false,
    });
    let flows = [
        s.add_flow(0, FlowSpec::with_weight(300)).unwrap(),
        s.add_flow(0, FlowSpec::with_weight(100)).unwrap(),
    ];
    let mut reads = RandomReads {
        flows,
        id: 0,
        seed: 12345,
        owner: std::collections::HashMap::new(),
    };
    for f in 0..2 {
        reads.add(&mut s, 0, f);
    }
    let done = reissue_at_completion(&mut s, &mut reads);
    (done[0] + done[1], s.stats().injected)
}

/// Two flows' sync random reads of 8 sectors, each flow in its own
/// 200M-sector region, from a seeded linear congruential stream; and
/// which flow each request is of.
struct RandomReads {
    flows: [FlowId; 2],
    id: u64,
    seed: u64,
    owner: std::collections::HashMap<u64, usize>,
}

impl RandomReads {
    /// Adds flow `f`'s next read at `now`.
    fn add(&mut self, s: &mut Bfq, now: Time, f: usize) {
        self.id += 1;
        self.seed = self
            .seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let r = Request {
            id: self.id,
            flow: self.flows[f],
            sector: (self.seed >> 20) % 100_000_000 / 8 * 8 + f as u64 * 200_000_000,
            sectors: 8,
            op: Op::Read,
            sync: true,
        };
        self.owner.insert(r.id, f);
        s.add_request(now, r).unwrap();
    }
}

/// Serves for one second, every request taking 150 us in parallel (a
/// flash device), each flow issuing its next request at the instant its
/// previous one completes, before the scheduler dispatches again: the
/// requests each flow completed.
fn reissue_at_completion(s: &mut Bfq, reads: &mut RandomReads) -> [u64; 2] {
    let mut in_flight: Vec<(Time, u64)> = vec![];
    let mut done = [0u64; 2];
    let mut now: Time = 0;
    let mut idle: Option<Time> = None;
    while now < SEC {
        loop {
            match s.dispatch(now) {
                Dispatch::Request(r) => in_flight.push((now + 150 * US, r.id)),
                Dispatch::Idle { until } => {
                    idle = Some(until);
                    break;
                }
                _ => break,
            }
        }
        let t_c = in_flight.iter().map(|x| x.0).min().unwrap_or(Time::MAX);
        now = t_c.min(idle.take().unwrap_or(Time::MAX));
        assert!(now < Time::MAX);
        let (fin, rest): (Vec<_>, Vec<_>) = in_flight.iter().partition(|x| x.0 <= now);
        in_flight = rest;
        for (_, rid) in fin {
            s.complete(now, rid).unwrap();
            let f = reads.owner[&rid];
            done[f] += 1;
            reads.add(s, now, f);
        }
    }
    done
}

#[test]
fn h7_weighted_readers_keep_their_shares_on_a_parallel_device() {
    // 1:2:3:4:5 greedy readers on a device serving 8 requests at once:
    // injection more than doubles the throughput here, and must not buy it
    // with the shares. (When a reader emptied by each injection left
    // B-WF2Q+, its budget never limited it and V ran ahead on a small
    // weight sum: 0.89/0.88/0.89/0.89/1.23 of their shares.)
    let go = |kv: &[(&str, &str)]| {
        weighted_reader_shares_on(&mut profile("bfq", kv), flash(), &[100, 200, 300, 400, 500])
    };
    let (on, t_on) = go(&[]);
    let (off, t_off) = go(&[("injection", "0")]);
    eprintln!("injection on {on:.3?} {t_on} sectors; off {off:.3?} {t_off} sectors");
    for shares in [&on, &off] {
        for (i, x) in shares.iter().enumerate() {
            assert!((x - 1.0).abs() <= 0.05, "reader {i}: {shares:.3?}");
        }
    }
    assert!(t_on as f64 > 1.5 * t_off as f64, "{t_on} vs {t_off}");
}

/// Removes each flow at its stop time (+ a few us), whatever it holds.
struct Remover {
    stops: Vec<(Time, FlowId)>,
    flows: Vec<FlowId>,
}

impl<S: Scheduler> Hooks<S> for Remover {
    fn add_flow(&mut self, inner: &mut S, now: Time, spec: FlowSpec) -> Result<FlowId, SchedError> {
        let f = inner.add_flow(now, spec)?;
        self.flows.push(f);
        Ok(f)
    }
    fn add_request(&mut self, inner: &mut S, now: Time, r: Request) -> Result<(), SchedError> {
        self.tick(inner, now);
        inner.add_request(now, r)
    }
    fn dispatch(&mut self, inner: &mut S, now: Time) -> Dispatch {
        self.tick(inner, now);
        inner.dispatch(now)
    }
    fn complete(&mut self, inner: &mut S, now: Time, id: ReqId) -> Result<(), SchedError> {
        self.tick(inner, now);
        inner.complete(now, id)
    }
}

impl Remover {
    fn tick<S: Scheduler>(&mut self, inner: &mut S, now: Time) {
        while let Some(&(t, f)) = self.stops.first() {
            if t > now {
                break;
            }
            self.stops.remove(0);
            let _ = inner.remove_flow(now, f);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    /// The `bfq` profile with injection on devices that queue internally
    /// (serial or parallel, rotational or not, depth 2..32), flows removed
    /// at their stop time whatever they hold: every request dispatched and
    /// completed once, no flow starved, nothing left behind.

    #[test]
    fn injection_exactly_once_and_no_leak(flows in proptest::collection::vec(rflow(), 1..10), seed in any::<u64>(), depth in prop_oneof![Just(2u32), Just(8), Just(32)], parallel in any::<bool>(), rotational in any::<bool>(), low_latency in any::<bool>(), remove in any::<bool>()) {
        let mut s = Bfq::from_profile("bfq", &Settings::from_pairs([("low_latency", if low_latency { "1" } else { "0" }), ("max_budget", "4096")])).unwrap();
        let g1 = s.add_group(GroupId::ROOT, 200).unwrap();
        let g2 = s.add_group(g1, 50).unwrap();
        let groups = [GroupId::ROOT, g1, g2];
        let defs = rflow_defs(&flows, groups);
        let mut stops: Vec<(Time, FlowId)> = vec![];
        if remove {
            for (i, d) in defs.iter().enumerate() {
                if d.stop != Time::MAX {
                    stops.push((d.stop + 37 * US, FlowId(i as u32)));
                }
            }
            stops.sort();
        }
        let mut r = Hooked::new(s, Remover { stops, flows: vec![] });
        let dev = Dev { depth, per_req: 100 * US, per_sector: 1000, seek: if rotational { 2 * MS } else { 0 }, parallel, rotational };
        let log = run(&mut r, dev, &defs, 2 * SEC, seed);
        let mut s = r.inner;
        served_exactly_once(&s, &log)?;
        if let Err(e) = nothing_left_behind(&mut s, log.end, &r.hooks.flows) {
            return Err(TestCaseError::fail(e));
        }
    }
}

// ---- Where `bfq` departs from the kernel (docs/bfq-settings.md) -------

/// Four greedy readers of 64 KiB requests and a random 4 KiB reader
/// weighted 3x, each alone in its group, on `flash()` for 5 s: the 2018
/// article's static-sequential mix (`bfq-kernel`). Returns the tuned B_max.
fn mixed_workload_max_budget(kv: &[(&str, &str)]) -> u64 {
    let mut s = profile("bfq-kernel", kv);
    let mut defs = vec![random_reader(300, 0)];
    for i in 1..=4u64 {
        let mut d = sync_reader(FlowSpec::with_weight(100), i * 100_000_000);
        d.size = 128;
        defs.push(d);
    }
    run(&mut s, flash(), &defs, 5 * SEC, 1);
    s.max_budget()
}

#[test]
fn h1_turn_samples_tune_b_max_under_a_mixed_workload_on_flash() {
    // The kernel's windows count every dispatch: the random reader's small
    // requests keep them under 3/4 sequential and the mixed rate is below
    // the estimate, so no window is accepted and B_max keeps its default.
    // (Injection off: on this device injection into the random reader's
    // idle turns serves the readers, and their own turns stay short.)
    let base = [("low_latency", "0"), ("injection", "0")];
    let kernel = mixed_workload_max_budget(&base);
    let turns = mixed_workload_max_budget(&[base[0], base[1], ("peak_rate_turn_samples", "1")]);
    eprintln!("B_max: kernel windows {kernel}, with turn samples {turns}");
    assert_eq!(kernel, bfq_core::bfq::DEFAULT_MAX_BUDGET);
    // A reader alone: 128 sectors per 264 us = 484 848 sectors/s, so
    // T_max x rate = 60 606 sectors.
    assert!(turns.abs_diff(60_606) <= 3_000, "{turns}");
}

#[test]
fn h1_a_learned_peak_rate_sets_b_max_and_survives_a_mixed_workload() {
    // A device's bfq keeps its estimate from test to test: started with
    // the rate a reader alone gives (484 848 sectors/s), B_max is T_max x
    // that rate from the first request, and the mixed workload's windows
    // (mostly random, below the estimate) do not pull it back down.
    let base = [("low_latency", "0"), ("injection", "0")];
    let learned = mixed_workload_max_budget(&[base[0], base[1], ("peak_rate_learned", "484848")]);
    let fresh = profile("bfq-kernel", &[("peak_rate_learned", "484848")]);
    eprintln!(
        "B_max: {} at start, {learned} after the mixed workload",
        fresh.max_budget()
    );
    assert!(
        fresh.max_budget().abs_diff(60_606) <= 1,
        "{}",
        fresh.max_budget()
    );
    assert!(learned.abs_diff(60_606) <= 3_000, "{learned}");
    assert_eq!(
        profile("bfq-kernel", &[]).max_budget(),
        bfq_core::bfq::DEFAULT_MAX_BUDGET
    );
}

#[test]
fn h1_turn_samples_come_from_reads_only() {
    // Four async sequential writers and a random reader (the 2018
    // article's static sequential workload with writers): a write
    // completes once the device buffered it, so the writers' turns would
    // measure the write buffer. Sampled, they tuned B_max up to T_max x
    // the bus rate, each writer's turn then filled the drive's buffer, and
    // the reader's next turns ran behind its programs.
    let mut s = profile("bfq", &[("low_latency", "0")]);
    let mut defs = vec![random_reader(300, 0)];
    for i in 1..=4u64 {
        let mut d = FlowDef::new(100, Kind::Async { depth: 32 });
        d.base = i * 100_000_000;
        d.size = 256;
        d.op = Op::Write;
        defs.push(d);
    }
    run(&mut s, flash(), &defs, 5 * SEC, 1);
    assert_eq!(s.max_budget(), bfq_core::bfq::DEFAULT_MAX_BUDGET);
}

#[test]
fn bfq_kernel_is_the_kernel_without_this_projects_rules() {
    let k = BfqConfig::profile("bfq-kernel").unwrap();
    let b = BfqConfig::profile("bfq").unwrap();
    // The kernel's rules only.
    assert!(!k.inject.charge_service && !k.inject.share_cap && !k.inject.read_floor);
    assert!(!k.peak_rate.turn_samples && !k.budget.raised_feedback);
    assert!(
        !k.charge.overcharge_asymmetric
            && !k.charge.new_flow_service
            && !k.charge.raised_group_time
    );
    // `bfq` = the kernel plus the rules listed in docs/bfq-settings.md.
    assert!(b.inject.charge_service && b.inject.share_cap && b.inject.read_floor);
    assert!(b.inject.protect_seeky && !k.inject.protect_seeky);
    assert!(b.inject.protect_deep_seeky && !k.inject.protect_deep_seeky);
    assert!(b.inject.ahead_bound && !k.inject.ahead_bound);
    assert!(b.inject.into_raised_b_max && !k.inject.into_raised_b_max);
    assert_eq!(
        (b.peak_rate.lower_min_request, k.peak_rate.lower_min_request),
        (128, 0)
    );
    assert!(!b.peak_rate.large_seq);
    assert!(b.peak_rate.turn_samples && b.budget.raised_feedback);
    assert!(k.peak_rate.large_seq);
    assert!(
        b.charge.overcharge_asymmetric && b.charge.new_flow_service && b.charge.raised_group_time
    );
    assert_eq!(
        (b.charge.async_charge_factor, k.charge.async_charge_factor),
        (10, 3)
    );
    assert!(k.inject.waker_kernel_detection && !b.inject.waker_kernel_detection);
    assert!(k.inject.waker_beyond_limit && !b.inject.waker_beyond_limit);
    assert!(k.inject.limit_counts_all && !b.inject.limit_counts_all);
    assert!(k.inject.recent_first && !b.inject.recent_first);
    assert!(b.inject.fair_candidates && !k.inject.fair_candidates);
    assert!(!k.inject.when_idling_boosts && b.inject.when_idling_boosts);
    assert!(k.inject.kernel_sampling && !b.inject.kernel_sampling);
    assert!(b.preempt.after_timeout && !k.preempt.after_timeout);
    assert!(k.preempt.push_up && !b.preempt.push_up);
    assert!(b.preempt.lag_anchor && !k.preempt.lag_anchor);
    assert!(!b.preempt.lag_bound && !k.preempt.lag_bound);
    assert!(b.inject.return_lag_bound && !k.inject.return_lag_bound);
    assert!(b.preempt.timeout_keeps_place && !k.preempt.timeout_keeps_place);
    assert!(k.timeout_defers_to_idling && !b.timeout_defers_to_idling);
    assert_eq!((b.rotational_probe, k.rotational_probe), (MS, 0));
    assert!(b.budget.raised_group_order && !k.budget.raised_group_order);
    let back = BfqConfig::from_settings_on(
        b,
        &mut Settings::from_pairs([
            ("inject_charge_service", "0"),
            ("inject_share_cap", "0"),
            ("inject_read_floor", "0"),
            ("inject_protect_seeky", "0"),
            ("inject_protect_deep_seeky", "0"),
            ("peak_rate_lower_min_request", "0"),
            ("peak_rate_large_seq", "1"),
            ("peak_rate_turn_samples", "0"),
            ("wr_budget_feedback", "0"),
            ("raised_group_order", "0"),
            ("async_charge_asymmetric", "0"),
            ("new_flow_charge_service", "0"),
            ("raised_group_time_charge", "0"),
            ("async_charge_factor", "3"),
            ("waker_kernel_detection", "1"),
            ("inject_waker_beyond_limit", "1"),
            ("inject_limit_counts_all", "1"),
            ("inject_recent_first", "1"),
            ("inject_fair_candidates", "0"),
            ("inject_when_idling_boosts", "0"),
            ("inject_kernel_sampling", "1"),
            ("inject_ahead_bound", "0"),
            ("inject_return_lag_bound", "0"),
            ("inject_into_raised_b_max", "0"),
            ("raised_backshift_lag_bound", "0"),
            ("in_time_after_timeout", "0"),
            ("timeout_keeps_place", "0"),
            ("timeout_defers_to_idling", "1"),
            ("backshift_push_up", "1"),
            ("lag_anchor", "0"),
            ("rotational_probe", "0"),
        ]),
    )
    .unwrap();
    assert_eq!(back, k);
}

#[test]
fn h5_raised_budget_feedback_covers_a_start_up_burst() {
    // A new raised flow keeps the initial budget (2/3 B_max) instead of
    // 2 x B_min = 1024 sectors: a 1650-sector start-up burst (the 2014
    // report's bash) fits in its first turn.
    for (kv, want_small) in [(&[][..], false), (&[("wr_budget_feedback", "0")][..], true)] {
        let mut s = profile("bfq", kv);
        let f = s.add_flow(0, FlowSpec::default()).unwrap();
        s.add_request(0, sync_read(1, f, 0, 8)).unwrap();
        let b = s.flow_budget(f).unwrap();
        assert_eq!(b < 1650, want_small, "{kv:?}: budget {b}");
    }
}

#[test]
fn h3_a_turn_that_ends_idle_is_not_charged_its_idling() {
    // Kernel (`bfq_bfqq_is_slow` with `compensate`): a turn that ends
    // because its flow stayed idle is charged its time only up to the start
    // of that idling. A sequential reader is served four 8-sector reads in
    // 16 ms, then sends nothing; after slice_idle (8 ms) the turn ends. Its
    // time up to the idling (16 ms, under 20 ms, not seeky) is not slow,
    // so it is charged its 32 sectors; counted with the idling (24 ms, and
    // 32 sectors under B_max / 2) it would be charged 16384 x 24 / 125.
    let mut s = profile(
        "bfq-kernel",
        &[("low_latency", "0"), ("max_budget", "16384")],
    );
    let a = s.add_flow(0, FlowSpec::with_weight(100)).unwrap();
    let b = s.add_flow(0, FlowSpec::with_weight(100)).unwrap();
    let mut now = 0;
    for i in 0..4u64 {
        s.add_request(now, sync_read(i, a, 8 * i, 8)).unwrap();
        if i == 0 {
            s.add_request(now + US, sync_read(100, b, 1 << 30, 8))
                .unwrap();
        }
        let Dispatch::Request(r) = s.dispatch(now + US) else {
            panic!("A's read is served")
        };
        assert_eq!(r.flow, a);
        now += 4 * MS;
        s.complete(now, r.id).unwrap();
    }
    let Dispatch::Idle { until } = s.dispatch(now) else {
        panic!("idling for A")
    };
    assert_eq!(until, now + 8 * MS);
    let Dispatch::Request(r) = s.dispatch(until) else {
        panic!("B's turn")
    };
    assert_eq!(r.flow, b);
    assert_eq!(s.flow_internals(a).charged, Some(32));
}

/// `bfq-kernel` with `kv`, low latency and preemption off, on a device
/// that queues 8 requests internally.
fn kernel_on_queueing_device(kv: &[(&str, &str)], rotational: bool) -> Bfq {
    let mut kv = kv.to_vec();
    kv.extend([("low_latency", "0"), ("preemption", "0")]);
    let mut s = profile("bfq-kernel", &kv);
    s.set_device(DeviceInfo {
        queue_depth: 8,
        queues_internally: true,
        rotational,
    });
    s
}

/// Request `id` of `x` arrives at `now`, is served at once, completes
/// 100 us later, and `x` is idled for. Returns the completion time.
fn serve_then_idle(s: &mut Bfq, x: FlowId, id: u64, now: Time) -> Time {
    s.add_request(now, sync_read(id, x, 1000 + 8 * (id - 1), 8))
        .unwrap();
    let Dispatch::Request(r) = s.dispatch(now) else {
        panic!("X is served")
    };
    let now = now + 100 * US;
    s.complete(now, r.id).unwrap();
    assert!(matches!(s.dispatch(now), Dispatch::Idle { .. }));
    now
}

/// The flow whose request the dispatch at `now` sends while X is idled
/// for (None: the device is idled).
fn injected_at(s: &mut Bfq, now: Time) -> Option<FlowId> {
    match s.dispatch(now) {
        Dispatch::Request(r) => Some(r.flow),
        Dispatch::Idle { .. } => None,
        d => panic!("{d:?}"),
    }
}

/// X (weight 300, sync reader) is in service with its inject limit at 1
/// (a first request served with nothing else in flight gave its
/// baseline); its queue then empties and it is idled for, while A, B and
/// C (weight 100) get one request each, in that order. Which flow's
/// request is injected (None: the device is idled)?
fn injected_into_idling(kv: &[(&str, &str)], rotational: bool) -> Option<FlowId> {
    let mut s = kernel_on_queueing_device(kv, rotational);
    let x = s.add_flow(0, FlowSpec::with_weight(300)).unwrap();
    let others: Vec<FlowId> = (0..3)
        .map(|_| s.add_flow(0, FlowSpec::with_weight(100)).unwrap())
        .collect();
    // Past the kernel's 10 ms without samples after a queue's creation.
    let mut now: Time = 20 * MS;
    // X's first request, then (X idled for) its next one with nothing
    // else in flight: the baseline that starts injection.
    for id in 0..2u64 {
        now = serve_then_idle(&mut s, x, id + 1, now) + 50 * US;
    }
    for (k, &f) in others.iter().enumerate() {
        let k = k as u64;
        s.add_request(now, sync_read(10 + k, f, 1_000_000 * (k + 1), 8))
            .unwrap();
        now += 10 * US;
    }
    injected_at(&mut s, now)
}

#[test]
fn h7_kernel_injects_the_latest_activated_flow_first() {
    // Kernel `bfq_choose_bfqq_for_injection` walks `active_list` from its
    // head, where each queue is put when it is (re)activated: C, whose
    // request came last, goes in first; B-WF2Q+'s order gives A (same
    // weight and budget, activated first).
    let on = injected_into_idling(&[("inject_recent_first", "1")], false);
    let off = injected_into_idling(&[("inject_recent_first", "0")], false);
    assert_eq!(on, Some(FlowId(3)), "the latest activated flow");
    assert_eq!(off, Some(FlowId(1)), "B-WF2Q+'s next flow");
}

#[test]
fn h7_kernel_injects_nothing_where_idling_boosts_throughput() {
    // Kernel `bfq_select_queue`: a sequential, I/O-bound flow of short
    // think time on a rotational device is idled for throughput, and only
    // its waker or the flow it woke may be injected into its idle time.
    // The loop device over a disk file reports itself rotational and
    // queues internally: injecting there kept 3+ requests in flight 20%
    // of the time where the kernel's bfq keeps them under 1%.
    let kernel = injected_into_idling(&[("inject_when_idling_boosts", "0")], true);
    let ours = injected_into_idling(&[("inject_when_idling_boosts", "1")], true);
    assert_eq!(kernel, None, "the device is idled");
    assert!(ours.is_some(), "another flow is injected");
    // On a non-rotational queueing device idling does not boost
    // throughput: the kernel injects there too.
    let flash = injected_into_idling(&[("inject_when_idling_boosts", "0")], false);
    assert!(flash.is_some());
}

/// `bfq-kernel`: flow X (weight 300) reads one request, stays idle 30 ms
/// (its think time turns long, with no baseline learned yet), then reads
/// again and is idled for while Y (weight 100) gets a request. Is Y
/// injected at once (None: the device is idled)?
fn injected_after_a_long_think(kv: &[(&str, &str)]) -> Option<FlowId> {
    let mut s = kernel_on_queueing_device(kv, false);
    let x = s.add_flow(0, FlowSpec::with_weight(300)).unwrap();
    let y = s.add_flow(0, FlowSpec::with_weight(100)).unwrap();
    // The idle timer fires: X's turn ends.
    let now = serve_then_idle(&mut s, x, 1, 20 * MS) + 30 * MS;
    assert_eq!(s.dispatch(now), Dispatch::Empty);
    let now = serve_then_idle(&mut s, x, 2, now) + 10 * US;
    s.add_request(now, sync_read(10, y, 1_000_000, 8)).unwrap();
    injected_at(&mut s, now + 10 * US)
}

#[test]
fn h7_kernel_resets_the_limit_when_the_think_time_turns_long() {
    // Kernel `bfq_update_has_short_ttime`: until a queue's baseline is
    // known its limit stands for its think time, 0 short, 1 long; a
    // think time turning long resets it to 1, so Y goes in at once
    // instead of after `slice_idle` of idling ("drive speed is being
    // wasted"). `bfq`'s own sampling waits for a baseline.
    let kernel = injected_after_a_long_think(&[]);
    assert_eq!(kernel, Some(FlowId(1)), "Y (flow 1) is injected");
    let ours = injected_after_a_long_think(&[("inject_kernel_sampling", "0")]);
    assert_eq!(ours, None, "the device is idled");
}

/// Where [`late_joiner`]'s fourth reader sits: the groups under the root
/// (their weights; none: every reader in the root group), the group of
/// each reader (an index into `groups`; None: the root group), and the
/// joiner's spec.
struct Joining {
    groups: &'static [u32],
    group_of: [Option<usize>; 4],
    joiner: FlowSpec,
}

impl Joining {
    /// The joiner of weight `w` beside readers 100, 200 and 300, all in
    /// the root group.
    fn flat(w: u32) -> Self {
        Joining {
            groups: &[],
            group_of: [None; 4],
            joiner: FlowSpec::with_weight(w),
        }
    }
}

/// What [`late_joiner`] measured from the join at 10 s to 12 s.
#[derive(Debug)]
struct Joined {
    /// At each level from the root down (the root group, then the
    /// joiner's group if it is in one): the largest shortfall since the
    /// join of the joiner's entity behind its share of its parent's
    /// service (phi W(10 s, t) - W_i(10 s, t) over the window, sectors).
    shortfall: Vec<f64>,
    /// The joiner's share of the device (its shares down the levels).
    share: f64,
    /// The joiner's longest wait from a request's issue to its completion.
    wait: Time,
    /// The largest B_max of the run (it only grows here).
    b_max: u64,
    /// Sectors dispatched per second over the window.
    rate: f64,
}

/// The readers' request size, L_max.
const L_MAX: u64 = 128;

impl Joined {
    /// Whether the joiner kept within bounds taken from the 2010 paper's
    /// appendix: at each level a shortfall since the join of at most
    /// B_max + L_max (Lemma 2's lag bound, (7); Theorem 1's (11) for a flow
    /// with no lag when it joins, so without (12)'s B_i,max), and a longest
    /// wait of at most ((B_max - L_max) / share + B_max + L_max) / rate.
    /// The wait bound has the form of Theorem 2's d_i,max, (3), and is
    /// stricter than the paper's for these greedy readers: (3) assumes a
    /// request issued after the previous one completed in the ideal system,
    /// and it leaves out (2)'s B_i,max terms and the ideal completion time;
    /// the window's mean rate stands for the minimum, and across levels
    /// the product of shares for the share (not derived in the paper).
    fn within_lemma_2(&self) -> [bool; 2] {
        let (b, l) = (self.b_max as f64, L_MAX as f64);
        let wait = ((b - l) / self.share + b + l) / self.rate;
        [
            self.shortfall.iter().all(|&x| x <= b + l),
            (self.wait as f64) <= wait * SEC as f64,
        ]
    }
}

/// Greedy 64 KiB readers of weights 100, 200 and 300 on flash (as in
/// `h3_injected_time_is_not_charged_to_the_idling_flow`), and a fourth
/// from 10 s to 12 s, placed as `at` says.
fn late_joiner(settings: &[(&str, &str)], at: &Joining) -> Joined {
    let mut s = profile("bfq", settings);
    let ids: Vec<GroupId> = (at.groups.iter())
        .map(|&w| s.add_group(GroupId::ROOT, w).unwrap())
        .collect();
    let mut defs = greedy_readers(&[100, 200, 300, 1]);
    defs[3].spec = at.joiner;
    defs[3].start = 10 * SEC;
    for (d, g) in defs.iter_mut().zip(at.group_of) {
        d.spec.group = g.map_or(GroupId::ROOT, |g| ids[g]);
    }
    let mut b_max = 0;
    let log = run_with(&mut s, flash(), &defs, 12 * SEC, 1, |s, _| {
        b_max = b_max.max(s.max_budget())
    });
    let w: Vec<f64> = (log.flows.iter())
        .map(|&f| f64::from(s.flow_weight(f).unwrap().0))
        .collect();
    let (shortfall, share) = joiner_shortfalls(&log.served, at, &w);
    let window = log.served.iter().filter(|x| x.time >= 10 * SEC);
    Joined {
        shortfall,
        share,
        wait: log.latency[3].iter().max().copied().unwrap_or(Time::MAX),
        b_max,
        rate: window.map(|x| x.sectors).sum::<u64>() as f64 / 2.0,
    }
}

/// [`Joined::shortfall`] and [`Joined::share`] from a run's service log,
/// the flows' weights `w` (the joiner's as it ended) and their groups.
fn joiner_shortfalls(served: &[Served], at: &Joining, w: &[f64]) -> (Vec<f64>, f64) {
    // Each flow's entity in the root group: itself, or its group (4 + g).
    let top = |i: usize| at.group_of[i].map_or(i, |g| 4 + g);
    let weight = |k: usize| {
        w.get(k)
            .copied()
            .unwrap_or_else(|| f64::from(at.groups[k - 4]))
    };
    let tops: std::collections::BTreeSet<usize> = (0..4).map(top).collect();
    let root = weight(top(3)) / tops.iter().map(|&k| weight(k)).sum::<f64>();
    let mut levels = vec![(root, (0..4).map(|i| Some(top(i) == top(3))).collect())];
    if let Some(g) = at.group_of[3] {
        let sibling = |i: usize| at.group_of[i] == Some(g);
        let sum: f64 = (0..4).filter(|&i| sibling(i)).map(|i| w[i]).sum();
        levels.push((
            w[3] / sum,
            (0..4).map(|i| sibling(i).then_some(i == 3)).collect(),
        ));
    }
    // The log of each level: its parent's flows, the joiner's entity as 0.
    let shortfall = (levels.iter())
        .map(|(phi, mine): &(f64, Vec<Option<bool>>)| {
            let log: Vec<Served> = (served.iter())
                .filter_map(|x| {
                    mine[x.flow].map(|m| Served {
                        flow: usize::from(!m),
                        ..*x
                    })
                })
                .collect();
            max_deficit_since(&log, 0, *phi, 10 * SEC, 12 * SEC)
        })
        .collect();
    (shortfall, levels.iter().map(|x| x.0).product())
}

/// A reader that joins readers whose timestamps have drifted below V (V
/// advanced over the smaller weight sum while one of them was out for a
/// moment, and back-shifting hid the absence: 3.4 million sectors' worth
/// at weight 300 after 20 s) starts at S = V, ahead of them all by that
/// drift: B-WF2Q+ serves them alone until they catch up, and its requests
/// are injected only up to its budget. Started from the backlogged flows'
/// least F + B_max / w (`lag_anchor`) it keeps within the bounds of
/// [`Joined::within_lemma_2`] in the 2 s after the join (B_max 121 076 and
/// 116 436 sectors, L_max 128, the device serving 1.10 and 1.33 million
/// sectors/s): a weight-100 joiner (share 1/7) falls short by at most
/// 0.37 (B_max + L_max) and waits at most 284 ms (bound 879 ms), a
/// weight-300 one (share 1/3) by 0.95 and 297 ms (bound 349 ms). Not
/// beyond: from the join to 14, 16, 20 and 30 s the weight-300 joiner
/// falls short by 1.11, 1.09, 1.03 and 1.10 (B_max + L_max at each end:
/// the shortfall, 142 000 to 184 000 sectors, grows with the peak-rate
/// estimate's B_max, 128 000 to 167 000), past the bound a flow with no
/// lag at its join should keep at any horizon. Injection's share cap
/// makes that excess: with `inject_share_cap=0` 0.22 to 30 s (longest
/// wait 34 ms), with `injection=0` 0.23 (at a third of the rate);
/// `inject_ahead_bound=0` changes nothing. Without `lag_anchor`: 2.28
/// and 5.45 (B_max + L_max), 1.9 s
/// waits (bounds 929 and 460 ms), the forfeit a reader that left for
/// longer than `preempt_in_time` and came back takes too: a starvation
/// episode of seconds in a long run.
#[test]
fn a_reader_joining_drifted_readers_gets_its_share_at_once() {
    for w in [100u32, 300] {
        let on = late_joiner(&[], &Joining::flat(w));
        assert_eq!(on.within_lemma_2(), [true; 2], "weight {w}: {on:?}");
        let off = late_joiner(&[("lag_anchor", "0")], &Joining::flat(w));
        assert_eq!(off.within_lemma_2(), [false; 2], "weight {w}: {off:?}");
    }
}

/// The drifted readers in groups. (a) Readers 100 and 200 in a group of
/// weight 400, 300 in one of weight 300, and a weight-100 reader joining
/// them at 10 s beside readers 100 and 200: in the 2 s after the join it
/// keeps within the bounds of [`Joined::within_lemma_2`] at each level,
/// falling short of its group's share at the root by 0.54
/// (B_max + L_max) and of its share of its group by nothing, its longest
/// wait 396 ms; the same without `lag_anchor`. (b) Each reader in a group
/// of its own (weights 100, 200, 300) and the joiner in a new group of
/// 100: groups come back back-shifted with their readers
/// (`Wf2q::activate_at`), so V at the root drifts past them as it does
/// past flows in the root group, and the joiner's group, activated
/// afresh, needs the anchor: 0.37 and 285 ms, as for the readers in the
/// root group (`a_reader_joining_drifted_readers_gets_its_share_at_once`);
/// without `lag_anchor` 2.28 and 1.9 s (mutation: fails the second
/// check). (Before groups were back-shifted, (b) fell short by nothing
/// with or without the anchor, and (a) by 0.08 at the root and 0.66 in
/// its group, 1.26 without `lag_anchor`.)
#[test]
fn a_reader_joining_drifted_readers_in_groups_keeps_its_share_per_level() {
    let at = Joining {
        groups: &[300, 400],
        group_of: [Some(1), Some(1), Some(0), Some(1)],
        joiner: FlowSpec::with_weight(100),
    };
    let on = late_joiner(&[], &at);
    assert_eq!(on.within_lemma_2(), [true; 2], "{on:?}");
    let own = Joining {
        groups: &[100, 200, 300, 100],
        group_of: [Some(0), Some(1), Some(2), Some(3)],
        joiner: FlowSpec::with_weight(100),
    };
    let on = late_joiner(&[], &own);
    assert_eq!(on.within_lemma_2(), [true; 2], "{on:?}");
    let off = late_joiner(&[("lag_anchor", "0")], &own);
    assert_eq!(off.within_lemma_2(), [false; 2], "{off:?}");
}

/// A raised joiner (default weight 40, interactive raising x30 over the
/// window: `wr_max_service=0` ends it by time only, after 3 s at least)
/// among the drifted readers waits at most 297 ms (the bound of
/// [`Joined::within_lemma_2`] 345 ms, share 2/3); 1.9 s without
/// `lag_anchor` (bound 297 ms). Its shortfall breaks Lemma 2's bound:
/// 2.38 (B_max + L_max) since the join (10.9 without `lag_anchor`).
/// Started at F_e + B_max / w_e, e the in-service or least-F eligible
/// entity, the joiner comes after every backlogged flow whose F lies
/// below that, each with a budget: a flow of weight w_k passes first with
/// up to (w_k / w_e) B_max, where Lemma 2 lets only the budget in service
/// pass. The joiner falls short by its share of those budgets: of the
/// order of share x (N - 1) B_max with N - 1 = 3 other readers, about
/// 2 B_max here (share 2/3; 2.38 seen), B_max for a weight-300 joiner
/// (1/3; 0.95) and 0.43 B_max for weight 100 (1/7; 0.37). With no slack
/// the raised joiner falls short by 0.97 (B_max + L_max), and the flat
/// joiners' waits drop from 284-297 ms to 69-72 ms: the slack is most of
/// their wait.
#[test]
fn a_raised_reader_joining_drifted_readers_waits_within_lemma_2() {
    let at = Joining {
        joiner: FlowSpec::default(),
        ..Joining::flat(1)
    };
    let raised = [("wr_max_service", "0")];
    let on = late_joiner(&raised, &at);
    assert_eq!(on.share, 2.0 / 3.0, "raised to 1200 (against 600)");
    assert!(on.within_lemma_2()[1], "{on:?}");
    let off = late_joiner(&[raised[0], ("lag_anchor", "0")], &at);
    assert!(!off.within_lemma_2()[1], "{off:?}");
}

/// Two readers of weight 50 beside one of weight 1000 on a disk, reading
/// 1 MiB at a time: one greedy, the other back 30 ms after each
/// completion, later than `preempt_in_time` (24 ms) and too late to be
/// idled for or to linger, so that its entity has left B-WF2Q+ and each
/// return is a fresh activation. Served a whole request at a weight of
/// 50, it leaves with its F far ahead of V, which its absence moves on by
/// little at the weight sum 1050; it starts again from max(V or the
/// anchor, its own F) and gets 73 728 sectors in 10 s, the greedy one
/// 88 064. Started from V or the anchor alone (its F ignored) it would
/// get 1.33 of the greedy one's: leaving and coming back would pay.
#[test]
fn a_reader_that_leaves_and_returns_gains_nothing_over_one_that_stays() {
    let mut defs = greedy_readers(&[1000, 50, 50]);
    for d in &mut defs[1..] {
        d.size = 2048;
    }
    defs[2].kind = Kind::Sync { think: 30 * MS };
    let log = run(&mut profile("bfq", &[]), disk(), &defs, 10 * SEC, 1);
    let (stayed, left) = (log.per_flow[1], log.per_flow[2]);
    assert!(left <= stayed, "left {left}, stayed {stayed}");
}

/// Three readers on `flash()` for 10 s: one of weight 1000 reading 64 KiB
/// at a time, and two of `weight` reading `sectors` at a time, one greedy,
/// the other back 30 ms after each completion: the thinking reader's
/// service over the greedy one's. With `grouped`, each reader is in a
/// group of its own, of the reader's weight (the flows of weight 100).
fn thinker_over_greedy(weight: u32, sectors: u32, grouped: bool, kv: &[(&str, &str)]) -> f64 {
    let mut s = profile("bfq", kv);
    let mut defs = greedy_readers(&[1000, weight, weight]);
    for d in &mut defs[1..] {
        d.size = sectors;
    }
    defs[2].kind = Kind::Sync { think: 30 * MS };
    if grouped {
        for d in &mut defs {
            let w = d.spec.weight.expect("weighted reader");
            d.spec.group = s.add_group(GroupId::ROOT, w).unwrap();
            d.spec.weight = Some(100);
        }
    }
    let log = run(&mut s, flash(), &defs, 10 * SEC, 1);
    log.per_flow[2] as f64 / log.per_flow[1] as f64
}

/// Injection (heuristic 7) lets a reader that thinks 30 ms between its
/// reads take far more than a greedy reader of the same weight: both are
/// injected into the device's idle slots while the weight-1000 reader
/// waits for its one request, each charged what it was injected. Neither
/// is raised (their weights are not the default, and 2 MiB per 30 ms is
/// far above the soft real-time rate), and with injection off both get
/// their share alone (0.92 of the greedy one's in both cases). The debt
/// of an injected flow that stays in B-WF2Q+ is bounded by its budget:
/// the greedy reader is injected until its debt fills its budget, then
/// waits for a turn its F allows. The thinking reader, emptied by each
/// injection and not idled for, leaves the tree at each read charged its
/// debt (F = S + debt / w) and comes back afresh without debt, its S
/// ahead of V by what it was charged, and is injected again: without
/// `inject_ahead_bound`, at each of the heavy reader's 102 turns, 7.92
/// times the greedy one's service (weights 10, 2 MiB reads), 1.69
/// (weights 100, 4 MiB reads). The rule (on in `bfq`) holds it to two
/// budgets ahead of V (2010 paper, Sec. II-D: only flows with S <= V are
/// served): 0.70 and 1.05, within the test's 1.25; at one budget 0.57
/// and 1.03. `bfq-kernel`: 23.85 (no share cap either) and 0.21 (the
/// greedy one of weight 100, no share cap, takes more than the heavy
/// reader).
#[test]
fn inject_ahead_bound_holds_a_thinking_reader_to_two_budgets_ahead_of_v() {
    for (weight, sectors) in [(10, 4096), (100, 8192)] {
        let off = thinker_over_greedy(weight, sectors, false, &[("injection", "0")]);
        assert!(off <= 1.0, "weight {weight}, injection off: {off:.2}");
        let on = thinker_over_greedy(weight, sectors, false, &[]);
        assert!(on <= 1.25, "weight {weight}: {on:.2}");
    }
    let unbounded = thinker_over_greedy(10, 4096, false, &[("inject_ahead_bound", "0")]);
    assert!(unbounded > 2.0, "{unbounded:.2}");
}

/// The thinking reader of
/// `inject_ahead_bound_holds_a_thinking_reader_to_two_budgets_ahead_of_v`
/// with each reader in a group of its own (weights 1000, w, w). Injection
/// empties the thinking reader's group with it: the rule checks each
/// level (a check of the flow's level alone let it come back at its
/// group's V: 7.92 and 1.69), and the group's F is set from the service
/// injected, as at the end of a turn (left at S + a budget / w, a group
/// charged a full budget per injection kept a thinking reader of 64 KiB
/// to 0.01 of the greedy one's service, 0.78 without the rule and 0.10
/// with injection off). 0.70, 1.05 and 0.78, as in the root group.
#[test]
fn inject_ahead_bound_holds_a_thinking_reader_in_a_group_of_its_own() {
    for (weight, sectors) in [(10, 4096), (100, 8192)] {
        let x = thinker_over_greedy(weight, sectors, true, &[]);
        assert!(x <= 1.25, "weight {weight}: {x:.2}");
    }
    let small = thinker_over_greedy(10, 128, true, &[]);
    assert!(small >= 0.5, "{small:.2}");
}

/// `n` readers like the thinking one of [`thinker_over_greedy`] (reading
/// `sectors` at a time, back `think` after each completion, weight 100
/// each) in one group of weight `weight`, beside a greedy reader of that
/// weight in a group of its own and one of 1000 reading 64 KiB at a time
/// in another, on `flash()` for 10 s: the thinking readers' total service
/// over the greedy one's.
fn thinkers_in_a_group_over_greedy(
    n: usize,
    weight: u32,
    sectors: u32,
    think: Time,
    kv: &[(&str, &str)],
) -> f64 {
    let mut s = profile("bfq", kv);
    let heavy = s.add_group(GroupId::ROOT, 1000).unwrap();
    let greedy = s.add_group(GroupId::ROOT, weight).unwrap();
    let thinking = s.add_group(GroupId::ROOT, weight).unwrap();
    let mut defs = greedy_readers(&vec![100; n + 2]);
    defs[0].spec.group = heavy;
    defs[1].spec.group = greedy;
    defs[1].size = sectors;
    for d in &mut defs[2..] {
        d.spec.group = thinking;
        d.size = sectors;
        d.kind = Kind::Sync { think };
    }
    let log = run(&mut s, flash(), &defs, 10 * SEC, 1);
    log.per_flow[2..].iter().sum::<u64>() as f64 / log.per_flow[1] as f64
}

/// Several thinking readers in one group, which stays busy while each of
/// them is emptied by injection in turn: each injection charges the group
/// the service as the flow leaves B-WF2Q+ (V advances; the group, waiting in
/// B-WF2Q+, has its S and F moved on by it at once, so that the rule's
/// check and its eligibility both see it), as B-WF2Q+ serves a group what
/// its children are served (2010 paper, Sec. II-D; the kernel's
/// `bfq_bfqq_served` charges every ancestor). Against a greedy reader of
/// the group's weight alone in a group: readers back 30 ms after each
/// completion, two in weight-10 groups reading 2 MiB get 0.74 of its
/// service, three 0.78 (one: 0.70, as
/// `inject_ahead_bound_holds_a_thinking_reader_in_a_group_of_its_own`);
/// weight-100 groups, 4 MiB reads: 0.99 and 1.00 (one: 1.05). Readers
/// back 5 ms after each completion (shorter than `slice_idle`): 0.87 and
/// 0.91; 1.03 and 1.10. All within the test's 1.25. A group charged only
/// when it went idle gave 2.54, 3.62; 2.25, 3.67 (30 ms); without the
/// rule 15.85, 23.69; 3.31, 5.02. A group that kept the injected service
/// beside its timestamps until its next turn started (as the kernel's
/// `entity->service` does) was eligible on its old S, got a turn on top
/// of being injected up to two budgets ahead of V, and led V by up to
/// 3 B_max: 0.59, 0.78; 0.97, 1.00 at 30 ms, but 1.71, 1.33; 1.33, 1.34
/// at 5 ms. With injection off the 5 ms readers get 1.23, 1.46; 1.26,
/// 0.97 over 10 s: a weight-10 group's share of 10 s is below one B_max,
/// and the ratio swings with where the groups' turns fall at the end
/// (0.58 to 1.46 over 10 to 80 s; 1.02 to 1.03 over 320 s), within
/// B-WF2Q+'s bound on the lag (B_max + L_max, 2010 paper, Lemma 3), so
/// the test does not assert it.
#[test]
fn inject_ahead_bound_holds_thinking_readers_sharing_a_group() {
    for think in [30 * MS, 5 * MS] {
        for (weight, sectors) in [(10, 4096), (100, 8192)] {
            for n in [2, 3] {
                let x = thinkers_in_a_group_over_greedy(n, weight, sectors, think, &[]);
                assert!(
                    x <= 1.25,
                    "think {think}, weight {weight}, {n} readers: {x:.2}"
                );
            }
        }
    }
    let off = [("inject_ahead_bound", "0")];
    let unbounded = thinkers_in_a_group_over_greedy(2, 10, 4096, 30 * MS, &off);
    assert!(unbounded > 2.0, "{unbounded:.2}");
}

/// `backshift_lag_bound` (a back-shifted flow keeps at most B_max / w of
/// lag behind the backlogged flows' least F) leaves injection's shares
/// as they are without it (it does no harm here; it does not show what
/// it bounds), where the kernel's push-up to F = V gave 3:1 readers
/// 2.42:1 and 1:2:3 readers 0.92-1.09 of their shares: 2.66:1 and
/// 1.007/1.003/0.996, as without it (1.003/1.004/0.996). With
/// `lag_anchor` off it measures against V alone and gives 1.073/1.072/0.928.
#[test]
fn the_bounded_push_up_leaves_injections_shares() {
    let on = [("backshift_lag_bound", "1")];
    let defs = [random_reader(300, 0), random_reader(100, 900_000_000)];
    let mut s = profile("bfq", &on);
    let log = run(&mut s, flash(), &defs, 5 * SEC, 1);
    let ratio = log.per_flow[0] as f64 / log.per_flow[1] as f64;
    assert!((ratio - 3.0).abs() < 0.4, "{ratio}");
    let mut s = profile("bfq", &on);
    let (shares, _) = weighted_reader_shares(&mut s, &[100, 200, 300]);
    eprintln!("3:1 ratio {ratio:.2}; 1:2:3 shares {shares:.3?}");
    for (i, x) in shares.iter().enumerate() {
        assert!((x - 1.0).abs() <= 0.05, "reader {i}: {shares:.3?}");
    }
}

/// A greedy reader whose turn reaches T_max in the moment between a
/// completion and its next request (50 us later) left B-WF2Q+ there and
/// came back at S = max(V, F), V having jumped to the other reader's S:
/// 100:500 readers on a disk got 2.04 and 0.79 of their shares. The
/// kernel does not expire a flow for timeout while it is idled for
/// (`timeout_defers_to_idling`, on in `bfq-kernel`): its next request ends
/// the turn with that request queued. `bfq` expires it there but lets it
/// keep its place if it comes back in time (`timeout_keeps_place`). Both
/// within 5%, nothing forfeited; each rule off fails.
#[test]
fn h9_a_reader_timed_out_between_requests_keeps_its_place() {
    let shares = |prof: &str, key: &str, on: &str| {
        let w = [100u32, 500];
        let mut defs = greedy_readers(&w);
        for d in &mut defs {
            d.kind = Kind::Sync { think: 50 * US };
        }
        let mut s = profile(prof, &[(key, on), ("max_budget", "65536")]);
        let log = run(&mut s, disk(), &defs, 20 * SEC, 1);
        let total: u64 = log.per_flow.iter().sum();
        let forfeited: u64 = log
            .flows
            .iter()
            .map(|&f| s.flow_internals(f).forfeited.unwrap_or(0))
            .sum();
        let share = |i: usize| log.per_flow[i] as f64 / total as f64 * 600.0 / f64::from(w[i]);
        eprintln!(
            "{prof} {key}={on}: {:.3} {:.3}, {forfeited} forfeited",
            share(0),
            share(1)
        );
        (share(0), share(1), forfeited)
    };
    for (prof, key) in [
        ("bfq", "timeout_keeps_place"),
        ("bfq-kernel", "timeout_defers_to_idling"),
    ] {
        let (a, b, forfeited) = shares(prof, key, "1");
        assert!(
            (a - 1.0).abs() <= 0.05 && (b - 1.0).abs() <= 0.05,
            "{prof}: {a:.3} {b:.3}"
        );
        assert_eq!(forfeited, 0, "{prof}");
        let (_, b, _) = shares(prof, key, "0");
        assert!(b < 0.9, "{prof} without {key}: {b:.3}");
    }
}

/// Kernel (`bfq_idle_slice_timer_body`): a turn whose idling runs out
/// past T_max ends for its budget timeout (the budget grows, B_max at
/// most), one whose idling runs out before T_max for being too idle (the
/// budget shrinks). A sequential reader whose reads take 10 ms each stops
/// reading after 12 reads (or 5); `bfq-kernel` idles for it, then its
/// idling runs out. Mutation: `idle_end_reason` always too idle fails the
/// first.
#[test]
fn h9_an_idling_that_runs_out_past_t_max_is_a_timeout() {
    let budget_after = |reads: u64| {
        let mut s = profile("bfq-kernel", &[("max_budget", "65536")]);
        let a = s.add_flow(0, FlowSpec::with_weight(100)).unwrap();
        let mut now: Time = 0;
        let mut before = None;
        for k in 0..reads {
            let r = Request {
                id: k,
                flow: a,
                sector: k * 64,
                sectors: 64,
                op: Op::Read,
                sync: true,
            };
            s.add_request(now, r).unwrap();
            let Dispatch::Request(d) = s.dispatch(now) else {
                panic!("read {k} not dispatched");
            };
            before = before.or(s.flow_budget(a));
            now += 10 * MS;
            s.complete(now, d.id).unwrap();
        }
        let Dispatch::Idle { until } = s.dispatch(now) else {
            panic!("not idled for");
        };
        assert!(!matches!(s.dispatch(until), Dispatch::Request(_)));
        (before.unwrap(), s.flow_budget(a).unwrap())
    };
    // The last read completes at 120 ms; the idling (slice_idle, 8 ms)
    // runs out past T_max (125 ms).
    let (b0, timed_out) = budget_after(12);
    let (_, too_idle) = budget_after(5);
    eprintln!("budget {b0}: after 120 ms {timed_out}, after 50 ms {too_idle}");
    assert!(timed_out > b0, "{b0} -> {timed_out}");
    assert!(too_idle < b0, "{b0} -> {too_idle}");
}

/// A greedy 64 KiB reader alone in a chain of `depth` groups of weight
/// 1000 (each inside the last, the first in the root) beside a greedy
/// 4 MiB reader alone in a group of 100 (`flash()`, 10 s, injection off):
/// the heavy reader's service over the other's, due 10 (both backlogged;
/// 2010 paper, Sec. II-D: each group is served as one entity of its
/// weight).
///
/// `bfq`'s B_max (T_max x the device's rate, from its turn samples) is
/// more than a 64 KiB reader at depth 1 reads in T_max: the heavy
/// reader's turns end at T_max, each in the moment between a completion
/// and its next read (`timeout_keeps_place`), and B-WF2Q+ gives the light
/// reader the device. The heavy reader comes back back-shifted (S = its
/// F), and so must each group it reactivates (`Wf2q::activate_at`): its
/// F is then the least and it preempts the light reader's turn. With
/// preemption off nothing acts on the back-shift before the light turn
/// ends, and turns alternate 1:1: 0.45, the same for the two readers in
/// the root group (the kernel defers such a timeout instead,
/// `timeout_defers_to_idling`: `bfq-kernel` 9.30).
fn heavy_group_over_light(prof: &str, depth: usize) -> f64 {
    let mut s = profile(prof, &[("injection", "0")]);
    let mut heavy = GroupId::ROOT;
    for _ in 0..depth {
        heavy = s.add_group(heavy, 1000).unwrap();
    }
    let light = s.add_group(GroupId::ROOT, 100).unwrap();
    let mut defs = greedy_readers(&[100, 100]);
    defs[0].spec.group = heavy;
    defs[1].spec.group = light;
    defs[1].size = 8192;
    let log = run(&mut s, flash(), &defs, 10 * SEC, 1);
    log.per_flow[0] as f64 / log.per_flow[1] as f64
}

/// `heavy_group_over_light` one group deep: at least 9 (due 10, 10%
/// tolerance; 9.81, as for the two readers in the root group, and
/// `bfq-kernel` 9.30). Mutation: ancestors activated with a back-shifted
/// flow timestamped S = max(V, F) (`shifted` false in
/// `Wf2q::activate_at`): 4.96.
#[test]
fn a_heavy_group_timed_out_between_reads_keeps_its_share() {
    for prof in ["bfq", "bfq-kernel"] {
        let x = heavy_group_over_light(prof, 1);
        assert!(x >= 9.0, "{prof}: {x:.2}");
    }
}

/// `heavy_group_over_light` two groups deep: the back-shift reaches
/// every group the flow reactivates, at least 9 (9.81). Mutation: the
/// back-shift stops at the flow's own group (its parent back at
/// S = max(V, F)): 4.36.
#[test]
fn a_heavy_group_two_levels_down_keeps_its_share() {
    let x = heavy_group_over_light("bfq", 2);
    assert!(x >= 9.0, "{x:.2}");
}

/// The 2018 article's static random workload in small (Sec. 9, Fig. 3):
/// a random 4 KiB reader alone in a group of weight 300 beside four in
/// groups of 100 (`flash()`, 10 s, `max_budget=113000`: 23 times what a
/// random reader reads alone in T_max, 4 904 sectors, as B_max is to the
/// target's turn in the suite's run). Returns the share of the time the
/// target's turns held the device (from each of its dispatches to the
/// next one), the total sectors and the four other readers' longest
/// request latency.
fn static_random_in_groups(kv: &[(&str, &str)]) -> (f64, u64, Time) {
    let mut kv = kv.to_vec();
    kv.push(("max_budget", "113000"));
    let mut s = profile("bfq", &kv);
    let mut defs = vec![random_reader(100, 0)];
    defs[0].spec.group = s.add_group(GroupId::ROOT, 300).unwrap();
    for i in 1..5u64 {
        let mut d = random_reader(100, i * 100_000_000);
        d.spec.group = s.add_group(GroupId::ROOT, 100).unwrap();
        defs.push(d);
    }
    let mut in_turn = Vec::new();
    let log = run_with(&mut s, flash(), &defs, 10 * SEC, 1, |s: &Bfq, _| {
        in_turn.push(s.active_flow() == Some(FlowId(0)));
    });
    let mut held = 0;
    for (k, w) in log.served.windows(2).enumerate() {
        if in_turn[k] {
            held += w[1].time - w[0].time;
        }
    }
    let span = log.served.last().unwrap().time - log.served[0].time;
    let worst = others_worst_latency(&log);
    (held as f64 / span as f64, log.per_flow.iter().sum(), worst)
}

/// Random flows in groups get time shares (2010 paper Sec. III-D: a flow
/// that does not use its budget within T_max is charged B_max; 2014
/// report Sec. 3.5) while the other groups' flows fill the device
/// (`inject_share_cap`, `inject_charge_service`): the target's turns hold
/// the device 3/7 of the time, within 0.12 (about ten of its 125 ms
/// turns in 10 s; measured 0.49), and the total is at least 0.9 of the
/// total with `inject_share_cap=0` (measured 0.94). Mutations: the
/// timed-out turn charged its service (`groups_timed_out` false in
/// `Bfq::held_time`): 0.88 of the time; the other groups' flows capped
/// (`time_shared` false in `Bfq::injectable_share`): 0.73 of the
/// total. (Both, as before: 0.82 and 0.72.)
#[test]
fn random_groups_share_the_time_and_fill_the_device() {
    let (time, total, _) = static_random_in_groups(&[]);
    let (_, uncapped, _) = static_random_in_groups(&[("inject_share_cap", "0")]);
    let ratio = total as f64 / uncapped as f64;
    eprintln!(
        "target's turns: {time:.3} of the time; total {total} sectors, {ratio:.3} of uncapped"
    );
    assert!((time - 3.0 / 7.0).abs() <= 0.12, "{time:.3}");
    assert!(ratio >= 0.9, "{total} vs {uncapped}");
}

/// A random reader whose group's T_max turn was charged its time
/// (`Bfq::held_time`) is injected into the other groups' turns right
/// after it: its next budget doubles as after any timeout charged its
/// time (kernel budget feedback), so `inject_ahead_bound` (two budgets
/// ahead of V) covers the B_max / w its time charge moved its S. Each of
/// the four readers in groups of 100 waits at most 2 T_max (250 ms) for a
/// request (measured 122 ms; without injection a weight-100 group waits
/// for the others' six T_max turns, 750 ms), and the target's turns keep
/// their time share (`random_groups_share_the_time_and_fill_the_device`).
/// Mutation: the next budget set to the turn's service (`groups_timed_out`
/// passed false to `Bfq::next_budget`): 748 ms, and 0.72 of the total.
#[test]
fn a_random_group_charged_its_time_is_injected_in_the_next_turn() {
    let (time, total, worst) = static_random_in_groups(&[]);
    eprintln!(
        "readers' worst latency {:.1} ms; target's turns {time:.3} of the time; total {total}",
        worst as f64 / MS as f64
    );
    assert!(worst <= 250 * MS, "{} us", worst / US);
}

/// On a rotational disk queueing 4 requests, a random reader in a group
/// of 1000 beside one in a group of 100 keeps at least its weight's
/// share of the sectors (10/11 = 0.909, less 1%: 0.90; measured 0.933):
/// the other group's reads injected into its turns stay within their
/// share (`inject_share_cap`; on flash, other groups are uncapped in a
/// lone seeky flow's turn). Mutation: `!self.device.rotational` left out
/// of `Bfq::shares_time_with`: 0.870.
#[test]
fn a_heavy_random_group_keeps_its_sectors_on_a_queueing_disk() {
    let mut s = profile("bfq", &[]);
    let mut defs = Vec::new();
    for (i, w) in [1000, 100].into_iter().enumerate() {
        let mut d = random_reader(100, i as u64 * 100_000_000);
        d.spec.group = s.add_group(GroupId::ROOT, w).unwrap();
        defs.push(d);
    }
    let ncq = Dev { depth: 4, ..disk() };
    let log = run(&mut s, ncq, &defs, 20 * SEC, 1);
    let heavy = log.per_flow[0] as f64 / log.per_flow.iter().sum::<u64>() as f64;
    eprintln!("heavy group's share of the sectors: {heavy:.3}");
    assert!(heavy >= 0.90, "{heavy:.3}");
}

/// Two random readers of weights 300 and 100 in the root group beside a
/// third in a group of its own (weight 100), on flash: the pair keeps
/// 3:1 of its sectors within 0.4 (as `h7_injection_keeps_3_to_1_and_raises_throughput`;
/// measured 2.95 with the third reader's injections capped and charged
/// as service). Only a seeky flow alone in its group shares the device's
/// time with other groups (`Bfq::shares_time_with`): charged its time
/// whenever the third reader was injected into its turn, the pair got 2.0:1.
#[test]
fn a_weighted_random_pair_keeps_3_to_1_beside_a_group() {
    let mut s = profile("bfq", &[]);
    let mut defs = Vec::new();
    for (i, w) in [300, 100, 100].into_iter().enumerate() {
        defs.push(random_reader(w, i as u64 * 100_000_000));
    }
    defs[2].spec.group = s.add_group(GroupId::ROOT, 100).unwrap();
    let log = run(&mut s, flash(), &defs, 20 * SEC, 1);
    let ratio = log.per_flow[0] as f64 / log.per_flow[1] as f64;
    eprintln!("3:1 pair beside a group: {ratio:.2} ({:?})", log.per_flow);
    assert!((ratio - 3.0).abs() <= 0.4, "{ratio:.2}");
}

/// The longest request latency of every flow but the first (0 if none).
fn others_worst_latency(log: &RunLog) -> Time {
    log.latency[1..]
        .iter()
        .flatten()
        .copied()
        .max()
        .unwrap_or(0)
}

/// Random readers of `depth` requests outstanding (sync, as O_DIRECT
/// through io_uring), each alone in a group of the given weight, on
/// flash for 10 s (`max_budget=113000`, as `static_random_in_groups`):
/// the first group's share of the sectors, the other readers' longest
/// request latency and the sectors served in all.
fn deep_random_groups(weights: &[u32], depth: u32, kv: &[(&str, &str)]) -> (f64, Time, u64) {
    let mut kv = kv.to_vec();
    kv.push(("max_budget", "113000"));
    let mut s = profile("bfq", &kv);
    let mut defs = Vec::new();
    for (i, &w) in weights.iter().enumerate() {
        let mut d = random_reader(100, i as u64 * 100_000_000);
        d.kind = Kind::Direct { depth };
        d.spec.group = s.add_group(GroupId::ROOT, w).unwrap();
        defs.push(d);
    }
    let log = run(&mut s, flash(), &defs, 10 * SEC, 1);
    let total = log.per_flow.iter().sum::<u64>();
    let share = log.per_flow[0] as f64 / total as f64;
    let worst = others_worst_latency(&log);
    (share, worst, total)
}

/// Random readers that keep 4 requests in flight each, each alone in a
/// group, get their groups' weights' shares of the sectors on flash
/// within 10% (2010 paper Sec. II, B-WF2Q+'s weighted shares; Sec. III-D
/// for the time-charged turns of random flows): the 2018 article's
/// static random layout (a group of 300 beside four of 100, Sec. 9,
/// Table 2) gives the first 3/7 (0.386..0.471; measured 0.444), two
/// groups of 1000 and 100 give the first 10/11 (0.818..1; measured
/// 0.908). Each such reader uses the device's parallelism itself, so
/// the lighter groups are kept out of its turns
/// (`inject_protect_deep_seeky`). Mutation: `inject_protect_deep_seeky=0`
/// (uncapped injection across groups, as for a sync reader of depth 1):
/// 0.243 and 0.629 (depth 8: 0.311 and 0.822; depth 2: 0.200 and 0.552).
#[test]
fn deep_random_readers_keep_their_groups_weighted_shares() {
    for (weights, due) in [
        (&[300, 100, 100, 100, 100][..], 3.0 / 7.0),
        (&[1000, 100][..], 10.0 / 11.0),
    ] {
        let (share, worst, _) = deep_random_groups(weights, 4, &[]);
        eprintln!(
            "{weights:?} at depth 4: first group {share:.3} of the sectors (due {due:.3}); others' worst latency {:.1} ms",
            worst as f64 / MS as f64
        );
        assert!((share - due).abs() <= 0.1 * due, "{weights:?}: {share:.3}");
    }
}

/// Random readers that keep 4 requests in flight each, each alone in a
/// group of weight 100, are still injected into each other's turns
/// (`inject_protect_deep_seeky` keeps only lighter groups out): each gets
/// half the sectors within 10% (2010 paper Sec. II, equal weights), and
/// the device holds both readers' requests at once, so the total is above
/// what one such reader gets alone (their turns one at a time, nothing
/// injected): measured 2.00x. The bound is halfway between 1x (nothing
/// injected) and what one reader of depth 8 gets alone (2.00x on this
/// flash: the most two readers of depth 4 can get together). Mutation:
/// the rule for every other group (without `wc < wa`): 1.00x.
#[test]
fn deep_random_readers_of_equal_weights_are_injected_into_each_other() {
    let (share, _, total) = deep_random_groups(&[100, 100], 4, &[]);
    let (_, _, alone) = deep_random_groups(&[100], 4, &[]);
    let (_, _, deeper) = deep_random_groups(&[100], 8, &[]);
    let (gain, most) = (total as f64 / alone as f64, deeper as f64 / alone as f64);
    eprintln!(
        "100:100 at depth 4: first {share:.3}; total {gain:.2}x one reader's (depth 8: {most:.2}x)"
    );
    assert!((share - 0.5).abs() <= 0.05, "{share:.3}");
    assert!(gain >= (1.0 + most) / 2.0, "{gain:.2} (depth 8: {most:.2})");
}

/// A random 4 KiB reader keeping 4 requests in flight (sync, as O_DIRECT
/// through io_uring) in a group of weight 100, beside a random 4 KiB
/// reader thinking 5 ms between reads in another group of 100, on flash
/// for 15 s with `low_latency` off: the deep reader's longest request
/// latency, the least it was served in any whole second after the first
/// (sectors), and what it is served per second alone.
fn deep_beside_thinker(kv: &[(&str, &str)]) -> (Time, u64, u64) {
    let mut kv = kv.to_vec();
    kv.push(("low_latency", "0"));
    let mut s = profile("bfq", &kv);
    let mut deep = random_reader(100, 0);
    deep.kind = Kind::Direct { depth: 4 };
    deep.spec.group = s.add_group(GroupId::ROOT, 100).unwrap();
    let alone = run(&mut s, flash(), &[deep], 15 * SEC, 1).per_flow[0] / 15;
    let mut s = profile("bfq", &kv);
    deep.spec.group = s.add_group(GroupId::ROOT, 100).unwrap();
    let mut thinker = random_reader(100, 100_000_000);
    thinker.kind = Kind::Sync { think: 5 * MS };
    thinker.spec.group = s.add_group(GroupId::ROOT, 100).unwrap();
    let log = run(&mut s, flash(), &[deep, thinker], 15 * SEC, 1);
    let mut per_second = [0u64; 15];
    for x in log.served.iter().filter(|x| x.flow == 0) {
        if let Some(n) = per_second.get_mut((x.time / SEC) as usize) {
            *n += x.sectors;
        }
    }
    let worst = log.latency[0].iter().copied().max().unwrap_or(0);
    let least = per_second[1..].iter().copied().min().unwrap_or(0);
    (worst, least, alone)
}

/// A reader whose every read is injected into a deep reader's turns
/// keeps its place across its think times only within B_max / w of the
/// backlogged flows (`inject_return_lag_bound`; 2010 paper, appendix,
/// Lemma 2): without the rule its group fell some 18 of its budgets
/// behind V in 2 s, and when it was next queued at the end of a turn
/// its T_max turn idled through its think times with the deep reader
/// kept out by `inject_ahead_bound`, measured from the thinker's F: the
/// deep reader waited 128 ms, a whole turn (in the simulator's
/// `ssd-plextor-m5s`, where the thinker's turns came back to back, 2.1-3.6
/// s, docs/bfq-settings.md). With it the deep reader is injected into
/// those turns: its longest wait 6.3 ms, within the test's T_max / 4
/// (31 ms: held out of no more than a quarter of a turn), and each
/// second it gets at least half of what it gets alone (the fluid
/// system's guarantee to one of two backlogged flows of equal weight;
/// measured 0.905). Mutation: `inject_return_lag_bound=0` with
/// `inject_ahead_waiting_anchor=0` (checked here: 128 ms, over T_max).
/// `inject_return_lag_bound=0` alone no longer shows it (6.3 ms): the
/// check's anchor leaves out the thinker's group in service, so its F
/// no longer holds the deep reader out of that group's turns.
#[test]
fn a_thinking_reader_injected_at_every_read_keeps_no_lag_beyond_b_max() {
    let t_max = 125 * MS;
    let (worst, least, alone) = deep_beside_thinker(&[]);
    eprintln!(
        "deep reader: worst wait {:.1} ms, least per second {:.2} of alone",
        worst as f64 / MS as f64,
        least as f64 / alone as f64
    );
    assert!(worst <= t_max / 4, "{worst}");
    assert!(2 * least >= alone, "{least} of {alone}");
    let lag = ("inject_return_lag_bound", "0");
    let (unbounded, _, _) = deep_beside_thinker(&[lag, ("inject_ahead_waiting_anchor", "0")]);
    assert!(unbounded > t_max, "{unbounded}");
    let (waiting, _, _) = deep_beside_thinker(&[lag]);
    eprintln!(
        "without the rule: {:.1} ms, {:.1} ms anchored on the group in service",
        waiting as f64 / MS as f64,
        unbounded as f64 / MS as f64
    );
}

/// `raised_group_order`: a raised flow below a group is timestamped with
/// at most 2 x B_min but its turns keep its own budget, also the first
/// turn after its raising ends (it was requeued with the small budget at
/// its last raised expiry, or is selected with it). Two greedy readers of
/// the default weight (raised as new flows, `wr_max_time=1s`), each alone
/// in a group of 100, on a disk, 3 s: every turn starts with at least the
/// flow's budget. Mutation: the turn's budget raised to the flow's only
/// while the flow is raised (as merged): the first unraised turn of each
/// reader started with 2 x B_min.
#[test]
fn a_reader_below_a_group_keeps_its_budget_once_its_raising_ends() {
    let mut s = profile("bfq", &[("low_latency", "1"), ("wr_max_time", "1s")]);
    let defs: Vec<FlowDef> = (0..2u64)
        .map(|i| {
            let group = s.add_group(GroupId::ROOT, 100).unwrap();
            let spec = FlowSpec {
                group,
                ..FlowSpec::default()
            };
            sync_reader(spec, i * 100_000_000)
        })
        .collect();
    let mut seen = std::collections::HashMap::new();
    let (mut raised_turns, mut unraised_turns, mut short) = (0, 0, vec![]);
    run_with(&mut s, disk(), &defs, 3 * SEC, 1, |s, r| {
        let fi = s.flow_internals(r.flow);
        let (turns, sum) = (fi.turns.unwrap(), fi.budget_sum.unwrap());
        let last = seen.insert(r.flow, (turns, sum)).unwrap_or((0, 0));
        if turns == last.0 {
            return;
        }
        let (granted, own) = (sum - last.1, s.flow_budget(r.flow).unwrap());
        let raised = s.flow_weight(r.flow).unwrap().1 != RaiseKind::None;
        if raised {
            raised_turns += 1;
        } else {
            unraised_turns += 1;
        }
        if granted < own {
            short.push((r.flow, raised, granted, own));
        }
    });
    assert!(
        raised_turns > 0 && unraised_turns > 0,
        "{raised_turns} {unraised_turns}"
    );
    assert!(short.is_empty(), "{short:?}");
}
