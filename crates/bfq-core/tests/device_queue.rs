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
    let mut r = Readers::new(profile, flows);
    for f in 0..flows as usize {
        for _ in 0..per {
            r.add(f);
        }
    }
    r.fill();
    for k in 0..rounds {
        r.round(k);
        let s = &r.s;
        assert!(
            s.queued() == 0 || s.in_flight() == DEPTH as usize,
            "{profile} {flows}x{per}: {} queued with {} in flight",
            s.queued(),
            s.in_flight()
        );
    }
    (r.dispatched, r.idles, r.held_back)
}

/// The readers, the scheduler and the device: the clock, the next
/// request id and the random sectors' stream; the dispatched requests
/// in device order (request id, flow); and the dispatch answers counted.
struct Readers {
    s: Bfq,
    ids: Vec<FlowId>,
    rng: u64,
    now: Time,
    id: u64,
    device: std::collections::VecDeque<(u64, FlowId)>,
    dispatched: u64,
    idles: u64,
    held_back: u64,
}

impl Readers {
    /// `flows` readers of weight 100 under `profile`, on [`ssd`].
    fn new(profile: &str, flows: u32) -> Self {
        let mut s = Bfq::from_profile(profile, &Settings::new()).unwrap();
        s.set_device(ssd());
        let ids: Vec<FlowId> = (0..flows)
            .map(|_| s.add_flow(0, FlowSpec::with_weight(100)).unwrap())
            .collect();
        Readers {
            s,
            ids,
            rng: 0x9E37_79B9_7F4A_7C15,
            now: 0,
            id: 0,
            device: Default::default(),
            dispatched: 0,
            idles: 0,
            held_back: 0,
        }
    }

    /// Reader `f` adds a sync read of 8 sectors at a random sector.
    fn add(&mut self, f: usize) {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let r = Request {
            id: self.id,
            flow: self.ids[f],
            sector: (self.rng % (1 << 21)) * 8,
            sectors: 8,
            op: Op::Read,
            sync: true,
        };
        self.id += 1;
        self.s.add_request(self.now, r).unwrap();
    }

    /// Dispatches until the device is full or the scheduler answers
    /// otherwise (an idle, or an answer with requests queued, counted).
    fn fill(&mut self) {
        while self.s.in_flight() < DEPTH as usize {
            match self.s.dispatch(self.now) {
                Dispatch::Request(r) => {
                    self.dispatched += 1;
                    self.device.push_back((r.id, r.flow));
                }
                d => {
                    self.idles += u64::from(matches!(d, Dispatch::Idle { .. }));
                    if self.s.queued() > 0 {
                        self.held_back += 1;
                    }
                    break;
                }
            }
        }
    }

    /// Round `k`: the device completes one request (every 7th round a
    /// burst of 8 before the readers come back, every 50th everything it
    /// holds), then each reader served adds its next one.
    fn round(&mut self, k: u32) {
        let burst = match k {
            _ if k.is_multiple_of(50) => self.device.len(),
            _ if k.is_multiple_of(7) => 8.min(self.device.len()),
            _ => 1,
        };
        let mut done = Vec::new();
        for _ in 0..burst {
            self.now += 4 * US;
            let (rid, flow) = self.device.pop_front().expect("in flight");
            self.s.complete(self.now, rid).unwrap();
            done.push(self.ids.iter().position(|&x| x == flow).expect("a flow"));
            self.fill();
        }
        self.now += US;
        for f in done {
            self.add(f);
            self.fill();
        }
    }
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
