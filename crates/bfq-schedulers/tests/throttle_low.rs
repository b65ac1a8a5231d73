//! throttle-low's idle threshold and latency target are each group's own
//! (io.low's `idle=` and `latency=`, `throtl_tg_is_idle`), on the harness
//! in `common/` (a disk: the device latency is 4 ms for every request).
//!
//! Two groups under the root, each with a low limit on reads only: g1 a
//! random reader that cannot reach its 10 MiB/s, g2 a greedy sequential
//! reader held at its 1 MiB/s. The policy leaves LOW only when g1 is idle
//! (g2, held in its only limited direction, can always upgrade), and in
//! MAX only a busy g1 steps the scale down (g2 is above its low limit).
//! So g2 goes past its low limit exactly when g1 counts as idle by *its
//! own* idle threshold or latency target.

mod common;

use bfq_core::{FlowSpec, GroupId, MS, SEC};
use common::{Disk, FlowCfg, Sim};

const MIB: f64 = (1 << 20) as f64;

/// g1's random reader (thinking `think` between requests) and g2's
/// sequential reader for 10 s with `set`: (g2's MiB/s, LOW/MAX changes).
fn g2_beside_a_random_reader(think: u64, set: &[(&str, &str)]) -> (f64, u64) {
    let mut all = vec![("low_rbps.g1", "10M"), ("low_rbps.g2", "1M")];
    all.extend_from_slice(set);
    let mut sim = Sim::with("throttle-low", &all, Disk::default());
    let g1 = sim.add_group(GroupId::ROOT, 100);
    let g2 = sim.add_group(GroupId::ROOT, 100);
    let spec = |group| FlowSpec {
        group,
        ..FlowSpec::default()
    };
    sim.add_flow(FlowCfg::rand_reader(0, 1 << 26).think(think).spec(spec(g1)));
    let reader = sim.add_flow(FlowCfg::seq_reader(1 << 26).spec(spec(g2)));
    sim.run(10 * SEC);
    let mib_s = sim.stats[reader].bytes as f64 / 10.0 / MIB;
    let changes = sim.sched.internals(sim.now).state_changes.unwrap();
    eprintln!("{set:?}: g2 {mib_s:.2} MiB/s, {changes} LOW/MAX changes");
    (mib_s, changes)
}

/// g1 thinks 20 ms between requests: idle by its own `idle_time.g1=5ms`,
/// busy under the 100 ms every other group has, whatever g2's threshold.
/// Its requests are late (over 4 ms + 1 us), so only the think time can
/// make it idle.
#[test]
fn a_group_idle_by_its_own_idle_time_lets_a_held_group_upgrade() {
    let all = [("idle_time", "100ms"), ("latency", "1us")];
    let with = |own: (&str, &str)| {
        let mut set = all.to_vec();
        set.push(own);
        g2_beside_a_random_reader(20 * MS, &set)
    };
    let (idle, changes) = with(("idle_time.g1", "5ms"));
    assert!(changes >= 1 && idle > 2.0, "g1 idle: {idle} MiB/s");
    for (busy, changes) in [
        g2_beside_a_random_reader(20 * MS, &all),
        with(("idle_time.g2", "5ms")),
    ] {
        assert_eq!(changes, 0, "g1 busy: LOW throughout");
        assert!(busy < 1.2, "g2 held at its low limit: {busy} MiB/s");
    }
}

/// g1 reads back to back: busy by think time, and by latency under the
/// 100 us target every group has (its requests take more than the disk's
/// 4 ms plus 100 us); with `latency.g1=1s` it meets its own target, counts
/// as idle and never steps the scale down: g2 runs past its low limit.
/// g2's own target changes nothing.
#[test]
fn a_group_meeting_its_own_latency_target_keeps_the_others_past_their_low_limits() {
    let (met, changes) = g2_beside_a_random_reader(0, &[("latency.g1", "1s")]);
    assert!(
        changes >= 1 && met > 2.0,
        "g1 within its target: {met} MiB/s"
    );
    for set in [&[][..], &[("latency.g2", "1s")][..]] {
        let (missed, _) = g2_beside_a_random_reader(0, set);
        assert!(missed < 1.2, "g1 late: g2 at its low limit: {missed} MiB/s");
    }
}
