//! The example of docs/scheduler-interface.md (kept identical to it).

use bfq_core::{Dispatch, FlowSpec, Op, Request, Scheduler, Settings, MS};

fn main() -> Result<(), bfq_core::SchedError> {
    let mut s = bfq_schedulers::build("bfq", &Settings::from_pairs([("max_budget", "4096")]))?;
    let reader = s.add_flow(0, FlowSpec::with_weight(300))?;
    let writer = s.add_flow(0, FlowSpec::with_weight(100))?;
    let read = Request {
        id: 1,
        flow: reader,
        sector: 0,
        sectors: 256,
        op: Op::Read,
        sync: true,
    };
    let write = Request {
        id: 2,
        flow: writer,
        sector: 1 << 20,
        sectors: 256,
        op: Op::Write,
        sync: false,
    };
    s.add_request(0, read)?;
    s.add_request(0, write)?;
    let mut now = 0;
    loop {
        match s.dispatch(now) {
            Dispatch::Request(r) => {
                // submit r to the device; when it completes:
                now += MS;
                s.complete(now, r.id)?;
            }
            Dispatch::Idle { until } => now = until, // arm a timer; nothing arrives here
            Dispatch::Wait | Dispatch::Empty => break,
        }
    }
    Ok(())
}
