//! Regression replay: the exact scheduler calls the io_uring engine made
//! with two greedy sequential readers (weights 100 and 300, device depth
//! 32, internally queueing, non-rotational) whose client threads closed
//! their flows when done. `bfq` used to panic in `dispatch` after
//! `remove_flow` ("flow with held requests").

use bfq_core::{Bfq, DeviceInfo, Dispatch, FlowId, FlowSpec, Op, Request, Scheduler, Settings};

const CALLS: &str = include_str!("data/remove-flow-replay.calls");

#[test]
fn replay_engine_calls_with_flows_closing() {
    // Recorded under `bfq`: other profiles would dispatch other requests.
    for profile in ["bfq"] {
        let mut s = Bfq::from_profile(profile, &Settings::new()).unwrap();
        s.set_device(DeviceInfo {
            queue_depth: 32,
            queues_internally: true,
            rotational: false,
        });
        let mut last = 0;
        for line in CALLS.lines() {
            let w: Vec<&str> = line.split_whitespace().collect();
            let n = |i: usize| w[i].parse::<u64>().unwrap();
            last = n(1);
            match w[0] {
                "add_flow" => {
                    s.add_flow(n(1), FlowSpec::with_weight(n(2) as u32))
                        .unwrap();
                }
                "remove_flow" => s.remove_flow(n(1), FlowId(n(2) as u32)).unwrap(),
                "add_request" => {
                    let r = Request {
                        id: n(2),
                        flow: FlowId(n(3) as u32),
                        sector: n(4),
                        sectors: n(5) as u32,
                        op: Op::Read,
                        sync: true,
                    };
                    s.add_request(n(1), r).unwrap()
                }
                "dispatch" => {
                    let _ = s.dispatch(n(1));
                }
                "complete" => s.complete(n(1), n(2)).unwrap(),
                other => panic!("unknown call {other}"),
            }
            s.check_invariants();
        }
        // Everything drains: nothing is left once idling has ended.
        let mut now = last;
        for _ in 0..4 {
            match s.dispatch(now) {
                Dispatch::Idle { until } => now = until,
                d => {
                    assert_eq!(d, Dispatch::Empty, "{profile}");
                    break;
                }
            }
        }
        assert_eq!(s.queued() + s.in_flight(), 0, "{profile}");
    }
}
