//! Medium probe: whether a device that says it is rotational serves
//! random reads like one.
//!
//! Many devices report themselves rotational whatever they are: a
//! virtio disk does by default, and so does a loop device over it, even
//! when the storage behind them is flash. Every rotational rule of BFQ
//! then works against throughput: a seeky flow is charged the time of its
//! turn (`charging.rs`), idling is kept for throughput, large requests
//! count as seeks, and a random reader served alone for its weight's share
//! of the time holds the device at one request in flight. In the simulator
//! the 2018 article's static sequential workload on its SSD drops from
//! 253 to 110 MiB/s under `bfq` when the SSD reports itself rotational.
//!
//! The kernel trusts the flag (its `blk_queue_nonrot`). The probe
//! (`rotational_probe`, `bfq` only; this project's rule) measures instead:
//! a small synchronous read of a seeky flow, dispatched with nothing else
//! in flight and completed before anything else was dispatched, times the
//! device's positioning. A disk needs a seek plus on average half a
//! revolution for it (7200 rpm: 4.2 ms of rotation alone; the presets'
//! random 4 KiB reads take 12.9-13.8 ms), unless its cache holds the data
//! (a hot region: ~0.1 ms); flash answers in tens to hundreds of
//! microseconds, with rare slow ones. So the verdict weighs the samples by
//! their time, not their count: of the device time the lone samples took
//! (sums halved every second), a disk spends a large part in slow ones
//! (over twice the threshold) whatever its cache serves in between, flash
//! almost none. With at least [`MIN_SAMPLES`] samples in the sums, the
//! device counts as non-rotational once under 1/8 of that time was slow
//! and the samples' mean is under the threshold, and as rotational again
//! once over 1/4 was slow or the mean is over twice the threshold. A
//! device that says it is non-rotational is always believed.
//!
//! Where the device is never left with one small seeky read alone (several
//! seeky flows served at once, injection on every turn) the probe takes
//! few samples and keeps the device's word: on the 2018 workload of a
//! sequential target against four random readers on the SSD reporting
//! itself rotational, it takes 2 samples in 10 s.
//!
//! No allocation; O(1) per event.

use super::idling::NONROT_SEQ_SECTORS;
use crate::types::{Op, ReqId, Request, Time, SEC};

/// Samples in the sums before the probe may decide.
pub const MIN_SAMPLES: u64 = 32;

/// Largest `rotational_probe` threshold accepted (10 ms: above it a
/// disk's random read could count as flash).
pub const MAX_THRESHOLD: Time = 10 * crate::types::MS;

/// The probe's state.
#[derive(Clone, Copy, Debug, Default)]
pub struct MediumProbe {
    /// The request being timed and its dispatch time.
    lone: Option<(ReqId, Time)>,
    /// Samples, their total time and the time of the slow ones (ns), all
    /// halved each second since `decayed`.
    count: u64,
    total: Time,
    slow: Time,
    decayed: Time,
    /// The measured verdict: serves random reads like flash.
    flash_like: bool,
}

impl MediumProbe {
    /// Notes a dispatch: a small sync read of a seeky flow alone on the
    /// device (`in_flight` counts it) is timed; any other dispatch ends
    /// the current timing, since the device no longer serves one request
    /// alone.
    pub fn on_dispatch(&mut self, now: Time, req: &Request, seeky: bool, in_flight: usize) {
        let probe = req.sync
            && req.op == Op::Read
            && req.sectors < NONROT_SEQ_SECTORS
            && seeky
            && in_flight == 1;
        self.lone = probe.then_some((req.id, now));
    }

    /// Forgets the request being timed (the device changed).
    pub fn forget(&mut self) {
        self.lone = None;
    }

    /// Takes the sample of a completed timed request; returns whether the
    /// verdict changed. `threshold` is `rotational_probe` (> 0).
    pub fn on_complete(&mut self, now: Time, id: ReqId, threshold: Time) -> bool {
        match self.lone {
            Some((lone, since)) if lone == id => {
                self.lone = None;
                // Bounded: a disk's slowest read (a full stroke and a
                // revolution) is under 8 ms x its threshold, and a rare
                // stall of a flash device must not outweigh a second of
                // its fast reads.
                let t = now.saturating_sub(since).min(8 * threshold);
                self.add(now, t, threshold);
                self.decide(threshold)
            }
            _ => false,
        }
    }

    fn add(&mut self, now: Time, t: Time, threshold: Time) {
        let halvings = now.saturating_sub(self.decayed) / SEC;
        if halvings > 0 {
            let k = halvings.min(63) as u32;
            (self.count, self.total, self.slow) =
                (self.count >> k, self.total >> k, self.slow >> k);
            self.decayed += halvings * SEC;
        }
        self.count += 1;
        self.total += t;
        if t > 2 * threshold {
            self.slow += t;
        }
    }

    fn decide(&mut self, threshold: Time) -> bool {
        if self.count < MIN_SAMPLES {
            return false;
        }
        let was = self.flash_like;
        let mean = self.total / self.count;
        if 8 * self.slow < self.total && mean < threshold {
            self.flash_like = true;
        } else if 4 * self.slow > self.total || mean > 2 * threshold {
            self.flash_like = false;
        }
        was != self.flash_like
    }

    /// The measured verdict.
    pub fn flash_like(&self) -> bool {
        self.flash_like
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{FlowId, MS, US};

    fn read(id: u64, sectors: u32) -> Request {
        Request {
            id,
            flow: FlowId(0),
            sector: id * 100_000,
            sectors,
            op: Op::Read,
            sync: true,
        }
    }

    /// Times `n` lone reads that take `took` each, one every `took` + 20 us
    /// from `clock` on; returns whether the verdict changed.
    fn feed(p: &mut MediumProbe, clock: &mut Time, n: u64, took: Time) -> bool {
        let mut changed = false;
        for _ in 0..n {
            let id = *clock;
            p.on_dispatch(*clock, &read(id, 8), true, 1);
            *clock += took;
            changed |= p.on_complete(*clock, id, MS);
            *clock += 20 * US;
        }
        changed
    }

    #[test]
    fn flash_latency_flips_after_enough_samples_and_disk_latency_flips_back() {
        let (mut p, mut now) = (MediumProbe::default(), 0);
        assert!(!feed(&mut p, &mut now, MIN_SAMPLES - 1, 100 * US));
        assert!(!p.flash_like());
        assert!(feed(&mut p, &mut now, 1, 100 * US));
        assert!(p.flash_like());
        // 1.5 ms: between the threshold and twice it, no change.
        assert!(!feed(&mut p, &mut now, 64, 1_500 * US));
        assert!(p.flash_like());
        assert!(feed(&mut p, &mut now, 64, 8 * MS));
        assert!(!p.flash_like());
    }

    #[test]
    fn a_disk_serving_a_hot_region_from_its_cache_stays_rotational() {
        // Turns of a reader whose region the drive caches (0.1 ms) between
        // turns of a random reader (13 ms seeks): most samples are fast,
        // most of the time is slow.
        let (mut p, mut now) = (MediumProbe::default(), 0);
        for _ in 0..50 {
            assert!(!feed(&mut p, &mut now, 10, 13 * MS));
            assert!(!feed(&mut p, &mut now, 500, 100 * US));
        }
        assert!(!p.flash_like());
    }

    #[test]
    fn a_rare_stall_does_not_make_flash_rotational() {
        let (mut p, mut now) = (MediumProbe::default(), 0);
        assert!(feed(&mut p, &mut now, 5000, 60 * US));
        for _ in 0..20 {
            assert!(!feed(&mut p, &mut now, 1, 300 * MS));
            assert!(!feed(&mut p, &mut now, 5000, 60 * US));
        }
        assert!(p.flash_like());
    }

    #[test]
    fn only_small_sync_seeky_reads_alone_are_timed() {
        let mut p = MediumProbe::default();
        let write = Request {
            op: Op::Write,
            ..read(1, 8)
        };
        let cases = [
            (read(1, 8), false, 1),
            (read(1, NONROT_SEQ_SECTORS), true, 1),
            (read(1, 8), true, 2),
            (write, true, 1),
        ];
        for (r, seeky, inf) in cases {
            for _ in 0..MIN_SAMPLES * 2 {
                p.on_dispatch(0, &r, seeky, inf);
                assert!(!p.on_complete(10 * US, r.id, MS));
            }
        }
        assert!(!p.flash_like());
        // Another dispatch before the completion ends the timing, and so
        // does a change of device.
        for i in 0..MIN_SAMPLES * 2 {
            p.on_dispatch(0, &read(i, 8), true, 1);
            p.on_dispatch(1, &read(i + 1000, 8), true, 2);
            assert!(!p.on_complete(10 * US, i, MS));
            p.on_dispatch(0, &read(i, 8), true, 1);
            p.forget();
            assert!(!p.on_complete(10 * US, i, MS));
        }
        assert!(!p.flash_like());
    }
}
