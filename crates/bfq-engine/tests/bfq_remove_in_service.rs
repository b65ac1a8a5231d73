//! Regression replay for a bfq-core issue the engine hit when clients close
//! their flows: the scheduler calls an engine made with two greedy
//! sequential readers (weights 100 and 300, device depth 32, internally
//! queueing, non-rotational) whose threads drop their flows when done,
//! recorded verbatim. Replaying them makes `bfq`'s `dispatch` panic with
//! "flow with held requests" (bfq-core table.rs) after `remove_flow`.
//! Ignored until bfq-core fixes it; run with
//! `cargo test -p bfq-engine --test bfq_remove_in_service -- --ignored`.
//! (The engine survives it: the dispatcher catches the panic and fails the
//! pending requests.)

use bfq_core::{DeviceInfo, FlowId, FlowSpec, Op, Request, Settings};

const CALLS: &str = include_str!("data/bfq-remove-flow-panic.calls");

#[test]
#[ignore = "bfq-core: dispatch panics after remove_flow (see the module doc)"]
fn replay_recorded_engine_calls() {
    let mut s = bfq_schedulers::build("bfq", &Settings::new()).unwrap();
    s.set_device(DeviceInfo {
        queue_depth: 32,
        queues_internally: true,
        rotational: false,
    });
    for line in CALLS.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        let n = |i: usize| w[i].parse::<u64>().unwrap();
        match w[0] {
            "add_flow" => {
                s.add_flow(n(1), FlowSpec::with_weight(n(2) as u32))
                    .unwrap();
            }
            "remove_flow" => s.remove_flow(n(1), FlowId(n(2) as u32)).unwrap(),
            "add_request" => s
                .add_request(
                    n(1),
                    Request {
                        id: n(2),
                        flow: FlowId(n(3) as u32),
                        sector: n(4),
                        sectors: n(5) as u32,
                        op: Op::Read,
                        sync: true,
                    },
                )
                .unwrap(),
            "dispatch" => {
                let _ = s.dispatch(n(1));
            }
            "complete" => s.complete(n(1), n(2)).unwrap(),
            other => panic!("unknown call {other}"),
        }
    }
}
