//! One deterministic test of each baseline's defining behaviour, on the
//! harness in `common/`.

mod common;

use bfq_core::{FlowSpec, IoClass, IoPrio, Time, MS, SEC};
use common::{Disk, FlowCfg, Sim};

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
