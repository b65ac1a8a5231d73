//! One deterministic test of each baseline's defining behaviour, on the
//! harness in `common/`.

mod common;

use bfq_core::{Dispatch, FlowSpec, GroupId, IoClass, IoPrio, Scheduler, Settings, MS, SEC};
use common::{read4k, Disk, FlowCfg, Sim};

fn mean(v: &[usize]) -> f64 {
    v.iter().sum::<usize>() as f64 / v.len().max(1) as f64
}

/// Two sequential sync readers far apart, each thinking 2 ms between
/// requests. AS idles through the think time and keeps serving the same
/// reader; the work-conserving deadline elevator switches at every request.
#[test]
fn as_keeps_a_sequential_reader_going_through_its_think_time() {
    let run = |name: &str| {
        let mut sim = Sim::with(name, &[], Disk::default());
        sim.add_flow(FlowCfg::seq_reader(0).think(2 * MS));
        sim.add_flow(FlowCfg::seq_reader(100_000_000).think(2 * MS));
        sim.run(5 * SEC);
        (mean(&sim.run_lengths()), sim.total_bytes())
    };
    let (as_run, as_bytes) = run("as");
    let (dl_run, dl_bytes) = run("deadline");
    eprintln!("as: run {as_run:.1} bytes {as_bytes}; deadline: run {dl_run:.1} bytes {dl_bytes}");
    assert!(dl_run < 1.5, "deadline alternates: {dl_run}");
    assert!(as_run > 20.0, "AS keeps serving one reader: {as_run}");
    assert!(as_bytes > 3 * dl_bytes, "and gets much more throughput");
    // With anticipation off, AS degenerates to a deadline-like elevator.
    let mut sim = Sim::with("as", &[("antic_expire", "0")], Disk::default());
    sim.add_flow(FlowCfg::seq_reader(0).think(2 * MS));
    sim.add_flow(FlowCfg::seq_reader(100_000_000).think(2 * MS));
    sim.run(5 * SEC);
    assert!(mean(&sim.run_lengths()) < 1.5);
}

/// Two greedy sequential readers, one in the outer zone (60 MB/s) and one
/// in the inner zone (~36 MB/s). CFQ gives them equal disk time, so the
/// outer reader gets proportionally more bandwidth.
#[test]
fn cfq_hands_equal_time_not_equal_bytes() {
    let disk = Disk::default();
    let mut sim = Sim::with("cfq", &[], disk);
    let outer = sim.add_flow(FlowCfg::seq_reader(0));
    let inner = sim.add_flow(FlowCfg::seq_reader(disk.capacity - (1 << 23)));
    let t = 10 * SEC;
    sim.run(t);
    let (o, i) = (&sim.stats[outer], &sim.stats[inner]);
    let time_ratio = o.dev_time as f64 / i.dev_time as f64;
    let bw_ratio = o.bw(t) / i.bw(t);
    eprintln!(
        "cfq: time ratio {time_ratio:.3}, bandwidth ratio {bw_ratio:.3}, runs {:.1}",
        mean(&sim.run_lengths())
    );
    assert!((time_ratio - 1.0).abs() < 0.05, "equal time: {time_ratio}");
    assert!(bw_ratio > 1.4, "outer reader gets more bytes: {bw_ratio}");
    // Each slice is ~100 ms of one reader's sequential requests.
    assert!(mean(&sim.run_lengths()) > 50.0);
}

/// Two sequential readers with four requests outstanding each (read-ahead).
/// YFQ fills every batch of four with requests of both, by WFQ finish tag,
/// so the disk switches between the files inside every batch; CFQ serves
/// one file for a whole slice.
#[test]
fn yfq_interleaves_flows_inside_batches_and_loses_sequentiality() {
    let run = |name: &str| {
        let mut sim = Sim::with(
            name,
            &[("bt_size", "4")][..if name == "yfq" { 1 } else { 0 }],
            Disk::default(),
        );
        sim.add_flow(FlowCfg::seq_reader(0).depth(4));
        sim.add_flow(FlowCfg::seq_reader(60_000_000).depth(4));
        sim.run(5 * SEC);
        sim
    };
    let yfq = run("yfq");
    let cfq = run("cfq");
    // Each batch takes two requests of each reader (equal tags); C-LOOK
    // then serves the two of the reader under the head first, so the
    // longest a reader keeps the disk is 2 + 2 requests across a batch
    // boundary: never more than bt_size in a row.
    let runs = yfq.run_lengths();
    let yr = mean(&runs);
    let longest = runs.iter().copied().max().unwrap_or(0);
    eprintln!(
        "yfq: run mean {yr:.2} max {longest}, bytes {} vs cfq {} (cfq run {:.1})",
        yfq.total_bytes(),
        cfq.total_bytes(),
        mean(&cfq.run_lengths())
    );
    assert!(
        longest <= 4,
        "no reader gets more than a batch in a row: {longest}"
    );
    assert!(mean(&cfq.run_lengths()) > 10.0 * yr);
    assert!(
        yfq.total_bytes() * 2 < cfq.total_bytes(),
        "throughput is lost"
    );
    // Still fair between the two equal-weight flows.
    let (a, b) = (yfq.stats[0].bytes as f64, yfq.stats[1].bytes as f64);
    assert!((a / b - 1.0).abs() < 0.05);
}

/// Three periodic flows (one random 4 KiB read every 100 ms, relative
/// deadline 100 ms) next to an async writer keeping sixteen 1 MiB writes
/// queued (relative deadline 1 s). The load is feasible, and SCAN-EDF meets
/// every periodic deadline; FIFO does not.
#[test]
fn scan_edf_meets_deadlines_of_periodic_flows_when_feasible() {
    let run = |name: &str, settings: &[(&str, &str)]| {
        let mut sim = Sim::with(name, settings, Disk::default());
        for i in 0..3u64 {
            let mut p = FlowCfg::rand_reader(i * 30_000_000, 20_000_000);
            p.kind = common::Kind::Periodic { period: 100 * MS };
            p.start = i * 7 * MS;
            sim.add_flow(p);
        }
        sim.add_flow(FlowCfg::async_writer(100_000_000, 16).sectors(2048));
        sim.run(10 * SEC);
        sim
    };
    let edf = run(
        "scan-edf",
        &[
            ("deadline.f0", "100ms"),
            ("deadline.f1", "100ms"),
            ("deadline.f2", "100ms"),
            ("deadline.f3", "1s"),
            ("delta", "20ms"),
        ],
    );
    let fifo = run("fifo", &[]);
    for i in 0..3 {
        let (e, f) = (&edf.stats[i], &fifo.stats[i]);
        eprintln!(
            "flow {i}: scan-edf max {} ms ({} done), fifo max {} ms",
            e.max_latency() / MS,
            e.completed,
            f.max_latency() / MS
        );
        assert!(e.completed >= 99);
        assert!(e.max_latency() <= 100 * MS, "deadline met");
        assert!(f.max_latency() > 100 * MS, "FIFO misses it");
    }
    assert!(
        edf.stats[3].bw(10 * SEC) > 20e6,
        "the writer still gets the rest"
    );
}

const MIB: f64 = 1024.0 * 1024.0;

/// Two groups limited to 10 MiB/s each; only one has a (greedy) reader.
/// It gets its 10 MiB/s and no more, though the disk could do ~6x that:
/// what the idle group does not use is lost.
#[test]
fn throttle_max_leaves_bandwidth_unused_when_a_group_is_idle() {
    let set = [("max_bps.g1", "10M"), ("max_bps.g2", "10M")];
    let mut sim = Sim::with("throttle-max", &set, Disk::default());
    let g1 = sim.add_group(GroupId::ROOT, 100);
    let _g2 = sim.add_group(GroupId::ROOT, 100);
    let spec = FlowSpec {
        group: g1,
        ..FlowSpec::default()
    };
    let a = sim.add_flow(FlowCfg::seq_reader(0).spec(spec));
    let t = 10 * SEC;
    sim.run(t);
    let bw = sim.stats[a].bw(t) / MIB;
    let mut free = Sim::with("fifo", &[], Disk::default());
    let b = free.add_flow(FlowCfg::seq_reader(0));
    free.run(t);
    let free_bw = free.stats[b].bw(t) / MIB;
    eprintln!("throttle-max: {bw:.2} MiB/s (unthrottled {free_bw:.2})");
    assert!((bw - 10.0).abs() < 0.5, "held to its max: {bw}");
    assert!(free_bw > 4.0 * bw, "the rest of the disk stays unused");
}

/// A random-reading target with a 10 MiB/s low limit it cannot reach, and
/// two sequential readers with 1 MiB/s low limits (`key`), on a disk.
/// Returns the target's MiB/s over the first 5 s and the interferers'
/// over the first and the next 5 s (the target stops at 5 s).
fn low_limits_with_a_target(key: &str) -> (f64, [f64; 2], [f64; 2]) {
    let set = [
        (format!("{key}.g1"), "10M"),
        (format!("{key}.g2"), "1M"),
        (format!("{key}.g3"), "1M"),
    ];
    let set: Vec<(&str, &str)> = set.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    let mut sim = Sim::with("throttle-low", &set, Disk::default());
    let groups: Vec<GroupId> = (0..3).map(|_| sim.add_group(GroupId::ROOT, 100)).collect();
    let in_group = |g: GroupId| FlowSpec {
        group: g,
        ..FlowSpec::default()
    };
    let target = sim.add_flow(
        FlowCfg::rand_reader(0, 1 << 26)
            .spec(in_group(groups[0]))
            .during(0, 5 * SEC),
    );
    let i1 = sim.add_flow(FlowCfg::seq_reader(1 << 25).spec(in_group(groups[1])));
    let i2 = sim.add_flow(FlowCfg::seq_reader(1 << 26).spec(in_group(groups[2])));
    sim.run(5 * SEC);
    let before: Vec<u64> = sim.stats.iter().map(|s| s.bytes).collect();
    sim.run(10 * SEC);
    let rate = |b: u64| b as f64 / 5.0 / MIB;
    let after = |i: usize| rate(sim.stats[i].bytes - before[i]);
    let r = (
        rate(before[target]),
        [rate(before[i1]), rate(before[i2])],
        [after(i1), after(i2)],
    );
    eprintln!(
        "throttle-low {key}: target {:.2}; interferers {:.2?} -> {:.2?} MiB/s",
        r.0, r.1, r.2
    );
    r
}

/// While the target is active (and under its low limit) everyone is held
/// to its low limit. Once it stops: with low limits on reads only, the
/// interferers' held reads let the policy upgrade and they go faster; with
/// the same low limits on reads and writes (the 2018 article's setting),
/// a group of readers never has requests held in both directions, so it
/// upgrades only when idle and steps down at each of its checks while
/// busy: the readers stay near their low limits (`throtl_tg_can_upgrade`,
/// `throtl_downgrade_check`).
#[test]
fn throttle_low_clamps_everyone_while_the_target_is_under_its_low_limit() {
    // with read limits only the held target lets the policy upgrade now
    // and then (within 25%)
    for (key, tol) in [("low_bps", 0.1), ("low_rbps", 0.25)] {
        let (t, a, _) = low_limits_with_a_target(key);
        assert!(t < 10.0, "the target stays under its low limit");
        for x in a {
            assert!((x - 1.0).abs() < tol, "clamped to the low limit: {x}");
        }
    }
    let (_, _, b) = low_limits_with_a_target("low_rbps");
    for x in b {
        assert!(
            x > 2.0,
            "read limits only: faster once the target is idle: {x}"
        );
    }
    let (_, _, b) = low_limits_with_a_target("low_bps");
    for x in b {
        assert!(x < 1.6, "reads and writes limited: near the low limit: {x}");
    }
}

/// A high-priority random reader (BE level 0) against 1 then 4
/// low-priority random readers (BE level 7). as-prio anticipates the
/// high-priority reader and gives the low level a few tokens per round, so
/// its latency stays flat; plain AS treats them alike and the latency grows
/// with the number of readers.
#[test]
fn as_prio_keeps_high_priority_latency_flat_as_low_priority_readers_are_added() {
    let run = |name: &str, lows: u64| {
        let mut sim = Sim::with(name, &[], Disk::default());
        let hi = FlowSpec {
            prio: IoPrio {
                class: IoClass::Be,
                level: 0,
            },
            ..FlowSpec::default()
        };
        let lo = FlowSpec {
            prio: IoPrio {
                class: IoClass::Be,
                level: 7,
            },
            ..FlowSpec::default()
        };
        let h = sim.add_flow(FlowCfg::rand_reader(0, 1 << 24).spec(hi).think(MS));
        for i in 0..lows {
            sim.add_flow(FlowCfg::rand_reader((i + 1) << 24, 1 << 24).spec(lo));
        }
        sim.run(10 * SEC);
        sim.stats[h].mean_latency()
    };
    let (p1, p4) = (run("as-prio", 1), run("as-prio", 4));
    let (a1, a4) = (run("as", 1), run("as", 4));
    eprintln!(
        "high-priority mean latency: as-prio {:.2} -> {:.2} ms, as {:.2} -> {:.2} ms",
        p1 as f64 / 1e6,
        p4 as f64 / 1e6,
        a1 as f64 / 1e6,
        a4 as f64 / 1e6
    );
    assert!((p4 as f64) < 1.25 * p1 as f64, "flat under as-prio");
    assert!((a4 as f64) > 1.5 * a1 as f64, "grows under as");
    assert!(p4 < a4);
}

fn order(s: &mut Box<dyn Scheduler>) -> Vec<u64> {
    let mut v = Vec::new();
    while let Dispatch::Request(r) = s.dispatch(0) {
        v.push(r.id);
    }
    v
}

/// noop is FIFO, but a request contiguous to a queued one is dispatched
/// right behind it (back merge), whoever issued it.
#[test]
fn noop_merges_contiguous_requests() {
    let mut s = bfq_schedulers::build("noop", &Settings::new()).unwrap();
    let a = s.add_flow(0, FlowSpec::default()).unwrap();
    let b = s.add_flow(0, FlowSpec::default()).unwrap();
    s.add_request(0, read4k(1, a, 0)).unwrap();
    s.add_request(0, read4k(2, b, 5000)).unwrap();
    s.add_request(0, read4k(3, b, 8)).unwrap();
    s.add_request(0, read4k(4, a, 16)).unwrap();
    assert_eq!(order(&mut s), vec![1, 3, 4, 2]);
    let mut off =
        bfq_schedulers::build("noop", &Settings::from_pairs([("max_sectors", "0")])).unwrap();
    let a = off.add_flow(0, FlowSpec::default()).unwrap();
    for (id, sec) in [(1, 0), (2, 5000), (3, 8)] {
        off.add_request(0, read4k(id, a, sec)).unwrap();
    }
    assert_eq!(order(&mut off), vec![1, 2, 3]);
}

/// clook sweeps upwards from the head and wraps; deadline serves an
/// expired read before continuing its sweep.
#[test]
fn clook_sweeps_and_deadline_expires() {
    let mut s = bfq_schedulers::build("clook", &Settings::new()).unwrap();
    let a = s.add_flow(0, FlowSpec::default()).unwrap();
    s.add_request(0, read4k(1, a, 500)).unwrap();
    let Dispatch::Request(_) = s.dispatch(0) else {
        panic!()
    };
    for (id, sec) in [(2, 100), (3, 900), (4, 600), (5, 50)] {
        s.add_request(0, read4k(id, a, sec)).unwrap();
    }
    assert_eq!(order(&mut s), vec![4, 3, 5, 2]);

    // deadline: one-way batches in sector order; with fifo_batch = 1 every
    // request starts a batch and an expired FIFO head goes first.
    let run = |settings: &[(&str, &str)]| {
        let mut d =
            bfq_schedulers::build("deadline", &Settings::from_pairs(settings.iter().copied()))
                .unwrap();
        let a = d.add_flow(0, FlowSpec::default()).unwrap();
        for (id, sec) in [(1, 100), (2, 50), (3, 200), (4, 300)] {
            d.add_request(0, read4k(id, a, sec)).unwrap();
        }
        let mut v = Vec::new();
        let mut now = 0;
        while let Dispatch::Request(r) = d.dispatch(now) {
            v.push(r.id);
            now += 20 * MS;
            d.complete(now, r.id).unwrap();
        }
        v
    };
    assert_eq!(run(&[]), vec![1, 3, 4, 2]);
    assert_eq!(
        run(&[("fifo_batch", "1"), ("read_expire", "10ms")]),
        vec![1, 2, 3, 4]
    );
}

/// CFQ classes: an RT reader preempts the BE queue in service, so its
/// latency is about one request's service time; an IDLE-class reader gets
/// (almost) nothing while a BE reader keeps the disk busy.
#[test]
fn cfq_serves_rt_first_and_idle_class_last() {
    let mut sim = Sim::with("cfq", &[], Disk::default());
    let prio = |class| FlowSpec {
        prio: IoPrio { class, level: 4 },
        ..FlowSpec::default()
    };
    let be = sim.add_flow(FlowCfg::seq_reader(0).spec(prio(IoClass::Be)));
    let rt = sim.add_flow(
        FlowCfg::rand_reader(50_000_000, 1 << 24)
            .spec(prio(IoClass::Rt))
            .think(20 * MS),
    );
    let idle = sim.add_flow(FlowCfg::seq_reader(100_000_000).spec(prio(IoClass::Idle)));
    sim.run(10 * SEC);
    let (b, r, i) = (&sim.stats[be], &sim.stats[rt], &sim.stats[idle]);
    eprintln!(
        "cfq classes: rt mean {:.1} ms max {:.1} ms; be {} MiB, idle {} KiB",
        r.mean_latency() as f64 / 1e6,
        r.max_latency() as f64 / 1e6,
        b.bytes >> 20,
        i.bytes >> 10
    );
    assert!(r.max_latency() < 25 * MS, "RT waits at most one request");
    assert!(i.bytes * 100 < b.bytes, "IDLE class starves behind BE");
}

/// Every registered scheduler runs a mixed workload (sequential and random
/// sync readers with and without think time, an async writer, a periodic
/// reader, flows in groups, a depth-4 device) to the end without breaking
/// the harness's contract checks, and serves every flow. 30 s: BFQ's weight
/// raising legitimately holds back an async writer next to raised readers
/// for the raising period (seconds), not for ever.
#[test]
fn every_scheduler_runs_a_mixed_workload() {
    for e in bfq_schedulers::SCHEDULERS {
        let disk = Disk {
            queue_depth: 4,
            ..Disk::default()
        };
        let mut sim = Sim::with(e.name, &[], disk);
        let g = sim.add_group(GroupId::ROOT, 200);
        let in_g = FlowSpec {
            group: g,
            ..FlowSpec::default()
        };
        sim.add_flow(FlowCfg::seq_reader(0));
        sim.add_flow(FlowCfg::seq_reader(1 << 26).think(3 * MS).spec(in_g));
        sim.add_flow(FlowCfg::rand_reader(1 << 25, 1 << 25).depth(2));
        sim.add_flow(FlowCfg::async_writer(90_000_000, 8).spec(in_g));
        let mut p = FlowCfg::rand_reader(0, 1 << 27);
        p.kind = common::Kind::Periodic { period: 50 * MS };
        sim.add_flow(p);
        sim.run(30 * SEC);
        for (i, s) in sim.stats.iter().enumerate() {
            assert!(s.completed > 0, "{}: flow {i} starved", e.name);
        }
    }
}

/// CFQ with `low_latency` (2.6.33+, the 2014 report's 2.6.34) holds async
/// requests back only after a *delayed* sync completion, one that came
/// `fifo_expire_sync` (125 ms) or more after its request was queued: the
/// async queue may then keep one request in flight per whole `slice_sync`
/// (100 ms) since that completion. A sync read served at once does not
/// count (2.6.32 counted it, and kept every async queue at one request).
#[test]
fn cfq_throttles_async_requests_only_after_a_delayed_sync_completion() {
    // In flight for the async flow at 250 ms, after a sync read queued at
    // 0 and completed at `done`.
    let async_in_flight_after = |done: u64| {
        let mut s = bfq_schedulers::build("cfq", &Settings::new()).unwrap();
        s.set_device(bfq_core::DeviceInfo {
            queue_depth: 32,
            queues_internally: true,
            rotational: true,
        });
        let r = s.add_flow(0, FlowSpec::default()).unwrap();
        let w = s.add_flow(0, FlowSpec::default()).unwrap();
        s.add_request(0, read4k(1, r, 0)).unwrap();
        let Dispatch::Request(_) = s.dispatch(0) else {
            panic!("the read is dispatched")
        };
        s.complete(done, 1).unwrap();
        let now = 250 * MS;
        for id in 2..10 {
            let mut req = read4k(id, w, 1_000_000 + 8 * id);
            (req.op, req.sync) = (bfq_core::Op::Write, false);
            s.add_request(now, req).unwrap();
        }
        let mut n = 0;
        while let Dispatch::Request(_) = s.dispatch(now) {
            n += 1;
        }
        n
    };
    // served at once: not delayed, the async queue goes to its quantum (4)
    assert_eq!(async_in_flight_after(MS), 4);
    // delayed (130 ms): 120 ms later, one whole slice_sync has passed
    assert_eq!(async_in_flight_after(130 * MS), 1);
}

/// YFQ with `t_wait`, as the 2010 paper ran SCAN-EDF and YFQ (Sec. V-A):
/// after the last request of an application completes, the disk is kept
/// idle until that application issues again or `t_wait` passes, even
/// with other requests of the current batch waiting; a new request of the
/// application ends the wait.
#[test]
fn yfq_keeps_the_disk_idle_for_the_flow_just_served() {
    let mut s = bfq_schedulers::build(
        "yfq",
        &Settings::from_pairs([("bt_size", "4"), ("t_wait", "4ms")]),
    )
    .unwrap();
    let a = s.add_flow(0, FlowSpec::default()).unwrap();
    let b = s.add_flow(0, FlowSpec::default()).unwrap();
    s.add_request(0, read4k(1, a, 0)).unwrap();
    s.add_request(0, read4k(2, b, 1000)).unwrap();
    let Dispatch::Request(r) = s.dispatch(0) else {
        panic!("a's read first (C-LOOK from sector 0)")
    };
    assert_eq!(r.id, 1);
    s.complete(MS, 1).unwrap();
    // b's read is in the batch, but the disk waits for a
    match s.dispatch(MS) {
        Dispatch::Idle { until } => assert_eq!(until, 5 * MS),
        d => panic!("expected idling for a, got {d:?}"),
    }
    // a issues again within t_wait: the wait ends
    s.add_request(2 * MS, read4k(3, a, 8)).unwrap();
    let Dispatch::Request(_) = s.dispatch(2 * MS) else {
        panic!("dispatches once a has issued")
    };
}

/// CFQ's workload types (Linux 2.6.33+, the 2014 report's 2.6.34): a
/// sync read arriving while the async queue is served preempts that
/// queue, but the ASYNC workload keeps its slot; the read waits for the
/// workload slice to end. Here the writer is alone when the ASYNC workload
/// is chosen: slice `target_latency` (300 ms) times `slice_async /
/// slice_sync` (0.4) = 120 ms, and the async queue in service then ends
/// its own turn (its `2 * (slice_async_rq + slice_async_rq * 3)` = 16
/// requests, 4 ms here). Without workload types the read goes at once.
#[test]
fn cfq_sync_read_does_not_end_the_async_workload_slot() {
    // (time the read is dispatched, writes dispatched before it)
    let run = |settings: &[(&str, &str)]| {
        let mut s = bfq_schedulers::build("cfq", &Settings::from_pairs(settings.to_vec())).unwrap();
        let r = s.add_flow(0, FlowSpec::default()).unwrap();
        let w = s.add_flow(0, FlowSpec::default()).unwrap();
        let mut next_id = 2;
        let mut in_flight: Vec<(u64, u64)> = Vec::new();
        let mut writes = 0;
        for t in 0..400u64 {
            let now = t * MS;
            // the writer keeps 16 writes queued
            while (next_id as usize) < 18 + writes {
                let mut req = read4k(next_id, w, 1_000_000 + 8 * next_id);
                (req.op, req.sync) = (bfq_core::Op::Write, false);
                s.add_request(now, req).unwrap();
                next_id += 1;
            }
            if t == 1 {
                s.add_request(now, read4k(1, r, 0)).unwrap();
            }
            for &(id, _) in in_flight.iter().filter(|x| x.1 == now) {
                s.complete(now, id).unwrap();
            }
            in_flight.retain(|x| x.1 != now);
            while let Dispatch::Request(req) = s.dispatch(now) {
                if req.id == 1 {
                    return (now, writes);
                }
                writes += 1;
                in_flight.push((req.id, now + MS));
            }
        }
        panic!("the read was never dispatched");
    };
    let (at, writes) = run(&[]);
    let (at0, writes0) = run(&[("workloads", "0")]);
    eprintln!("cfq: read at {at} ns after {writes} writes; workloads=0: {at0} after {writes0}");
    assert!(
        (120 * MS..=130 * MS).contains(&at),
        "read waits for the ASYNC slot: {at}"
    );
    assert!(writes > 50, "the async queue keeps being served: {writes}");
    assert!(
        at0 <= 2 * MS,
        "without workload types the read preempts: {at0}"
    );
}

/// Five sequential readers that issue their next read 0.1 ms after a
/// completion (as programs do) and an async writer (the 2014 report's
/// 5r5w-seq): a reader whose slice ended at a completion issues again just
/// after the writer's turn has begun. With workload types the ASYNC
/// workload keeps its slot whenever it is chosen (the preemption only
/// restarts the async queue's turn): `target_latency / 6 * slice_async /
/// slice_sync` = 20 ms against the readers' 250 ms, chosen less than every
/// round since the async queue's tree key carries the larger offset; the
/// writer gets 3.9% of the disk time. Without them that read ends the
/// writer's turn at once: 1.2%.
#[test]
fn cfq_async_queue_keeps_its_workload_slot_under_sync_readers() {
    let run = |settings: &[(&str, &str)]| {
        let disk = Disk::default();
        let mut sim = Sim::with("cfq", settings, disk);
        for i in 0..5 {
            sim.add_flow(FlowCfg::seq_reader(i * (1 << 24)).think(MS / 10));
        }
        let w = sim.add_flow(FlowCfg::async_writer(disk.capacity / 2, 32));
        sim.run(10 * SEC);
        let total: u64 = sim.stats.iter().map(|s| s.dev_time).sum();
        sim.stats[w].dev_time as f64 / total as f64
    };
    let with = run(&[]);
    let without = run(&[("workloads", "0")]);
    eprintln!(
        "writer's share of the disk time: {with:.4} with workload types, {without:.4} without"
    );
    assert!((0.03..0.08).contains(&with), "the ASYNC slot: {with}");
    assert!(without < with / 2.0, "without workload types: {without}");
}
