//! bfq never holds back the requests of deep random readers on a fast
//! device that queues internally: whatever it keeps queued, the device
//! queue is full. (A front end that calls `dispatch` after every arrival
//! and completion, as the engine does, then keeps the device as busy as
//! FIFO would.)

use bfq_core::*;

const DEPTH: u32 = 64;

fn ssd() -> DeviceInfo {
    DeviceInfo {
        queue_depth: DEPTH,
        queues_internally: true,
        rotational: false,
    }
}

/// `flows` sync random readers with `per` requests outstanding each, for
/// `rounds` completions. The device completes requests in the order they
/// were dispatched, sometimes several at once before the readers
/// resubmit (so a reader's queue empties, and bfq may idle for it).
/// Returns the dispatch answers: requests, idles, and waits or idles
/// with requests queued and room on the device.
fn run(profile: &str, flows: u32, per: u32, rounds: u32) -> (u64, u64, u64) {
    let mut s = Bfq::from_profile(profile, &Settings::new()).unwrap();
    s.set_device(ssd());
    let ids: Vec<FlowId> = (0..flows)
        .map(|_| s.add_flow(0, FlowSpec::with_weight(100)).unwrap())
        .collect();
    let mut rng: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next_sector = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng % (1 << 21)) * 8
    };
    let (mut now, mut id) = (0, 0u64);
    // Dispatched, in device order: (request id, flow).
    let mut device = std::collections::VecDeque::new();
    let (mut dispatched, mut idles, mut held_back) = (0u64, 0u64, 0u64);
    let mut add = |s: &mut Bfq, now: Time, f: usize, id: &mut u64| {
        let r = Request {
            id: *id,
            flow: ids[f],
            sector: next_sector(),
            sectors: 8,
            op: Op::Read,
            sync: true,
        };
        *id += 1;
        s.add_request(now, r).unwrap();
    };
    let mut fill =
        |s: &mut Bfq, now: Time, device: &mut std::collections::VecDeque<(u64, FlowId)>| {
            while s.in_flight() < DEPTH as usize {
                match s.dispatch(now) {
                    Dispatch::Request(r) => {
                        dispatched += 1;
                        device.push_back((r.id, r.flow));
                    }
                    d => {
                        idles += u64::from(matches!(d, Dispatch::Idle { .. }));
                        if s.queued() > 0 {
                            held_back += 1;
                        }
                        break;
                    }
                }
            }
        };
    for f in 0..flows as usize {
        for _ in 0..per {
            add(&mut s, now, f, &mut id);
        }
    }
    fill(&mut s, now, &mut device);
    for k in 0..rounds {
        // Every 7th round the device completes a burst of 8 before the
        // readers come back, every 50th everything it holds.
        let burst = match k {
            _ if k % 50 == 0 => device.len(),
            _ if k % 7 == 0 => 8.min(device.len()),
            _ => 1,
        };
        let mut done = Vec::new();
        for _ in 0..burst {
            now += 4 * US;
            let (rid, flow) = device.pop_front().expect("in flight");
            s.complete(now, rid).unwrap();
            done.push(ids.iter().position(|&x| x == flow).expect("a flow"));
            fill(&mut s, now, &mut device);
        }
        now += US;
        for f in done {
            add(&mut s, now, f, &mut id);
            fill(&mut s, now, &mut device);
        }
        assert!(
            s.queued() == 0 || s.in_flight() == DEPTH as usize,
            "{profile} {flows}x{per}: {} queued with {} in flight",
            s.queued(),
            s.in_flight()
        );
    }
    (dispatched, idles, held_back)
}

#[test]
fn deep_random_readers_keep_the_device_queue_full() {
    for profile in ["bfq", "bfq-kernel"] {
        for (flows, per) in [(1, 64), (4, 16), (16, 4), (64, 1), (4, 32)] {
            let (dispatched, idles, held_back) = run(profile, flows, per, 20_000);
            assert!(dispatched > 20_000, "{profile} {flows}x{per}");
            assert_eq!(held_back, 0, "{profile} {flows}x{per}");
            // The lone reader is idled for (the kernel's rule for the only
            // busy queue) whenever it has nothing queued or in flight,
            // which holds nothing back.
            if flows == 1 {
                assert!(idles > 0, "{profile}: a lone reader is idled for");
            }
        }
    }
}
