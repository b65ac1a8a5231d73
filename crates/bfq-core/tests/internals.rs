//! `Scheduler::internals` and `Scheduler::flow_internals`: what BFQ's
//! mechanisms did, counted on the paths that already run, read through
//! the trait (also behind a `Box<dyn Scheduler>`); a policy without the
//! mechanisms reports none.

use bfq_core::*;

/// Queues `n` requests of each flow and serves them one at a time,
/// completing each 1 ms after its dispatch and waiting out idling.
fn serve(s: &mut dyn Scheduler, flows: &[FlowId], n: u64) -> Time {
    let mut now = 0;
    let mut id = 0;
    for k in 0..n {
        for &f in flows {
            id += 1;
            let sector = u64::from(f.0) * 1_000_000 + k * 64;
            let (op, sync, sectors) = (Op::Read, true, 64);
            s.add_request(
                now,
                Request {
                    id,
                    flow: f,
                    sector,
                    sectors,
                    op,
                    sync,
                },
            )
            .unwrap();
        }
    }
    while s.queued() > 0 {
        match s.dispatch(now) {
            Dispatch::Request(r) => {
                now += MS;
                s.complete(now, r.id).unwrap();
            }
            Dispatch::Idle { until } => now = until.max(now + 1),
            d => panic!("expected a request or idling, got {d:?}"),
        }
    }
    now
}

#[test]
fn bfq_counts_turns_and_budgets_per_flow_and_in_total() {
    let cfg = Settings::from_pairs([("max_budget", "4096"), ("low_latency", "0")]);
    let mut s: Box<dyn Scheduler> = Box::new(Bfq::from_profile("bfq", &cfg).unwrap());
    let a = s.add_flow(0, FlowSpec::default()).unwrap();
    let b = s.add_flow(0, FlowSpec::default()).unwrap();
    let now = serve(s.as_mut(), &[a, b], 4);
    let all = s.internals(now);
    assert_eq!(all.max_budget, Some(4096));
    assert!(all.peak_rate.is_some());
    assert_eq!(all.injected, Some(0));
    assert_eq!((all.low_state_ns, all.state_changes), (None, None));
    let (fa, fb) = (s.flow_internals(a), s.flow_internals(b));
    let turns = fa.turns.unwrap() + fb.turns.unwrap();
    assert!(
        fa.turns.unwrap() >= 1 && fb.turns.unwrap() >= 1,
        "{fa:?} {fb:?}"
    );
    assert_eq!(all.turns, Some(turns));
    // every turn is granted a budget of at least one request, at most B_max
    for f in [fa, fb] {
        let (t, sum) = (f.turns.unwrap(), f.budget_sum.unwrap());
        assert!(sum >= 64 * t && sum <= 4096 * t, "{f:?}");
    }
    // counters of a removed flow's periods add up
    assert_eq!(fa.plus(fb).turns, Some(turns));
    assert_eq!(
        FlowInternals::default().plus(FlowInternals::default()),
        FlowInternals::default()
    );
}

#[test]
fn a_policy_without_the_mechanisms_reports_none() {
    let mut s: Box<dyn Scheduler> = Box::new(Fifo::new());
    let a = s.add_flow(0, FlowSpec::default()).unwrap();
    let now = serve(s.as_mut(), &[a], 2);
    assert_eq!(s.internals(now), Internals::default());
    assert_eq!(s.flow_internals(a), FlowInternals::default());
}
