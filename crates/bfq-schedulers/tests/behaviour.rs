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
    eprintln!("cfq: time ratio {time_ratio:.3}, bandwidth ratio {bw_ratio:.3}, runs {:.1}", mean(&sim.run_lengths()));
    assert!((time_ratio - 1.0).abs() < 0.05, "equal time: {time_ratio}");
    assert!(bw_ratio > 1.4, "outer reader gets more bytes: {bw_ratio}");
    // Each slice is ~100 ms of one reader's sequential requests.
    assert!(mean(&sim.run_lengths()) > 50.0);
}
