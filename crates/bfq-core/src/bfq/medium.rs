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
//! random 4 KiB reads take 12.9-13.8 ms); flash answers in tens to
//! hundreds of microseconds. The samples enter a 7/8 low-pass filter (as
//! the kernel's think-time and peak-rate filters); after
//! [`MIN_SAMPLES`] of them, a mean under the threshold makes the device
//! count as non-rotational, and a mean above twice the threshold makes it
//! rotational again. A device that says it is non-rotational is always
//! believed.
//!
//! No allocation; O(1) per event.

use super::idling::NONROT_SEQ_SECTORS;
use crate::types::{Op, ReqId, Request, Time};

/// Samples before the probe may decide.
pub const MIN_SAMPLES: u32 = 32;

/// Largest `rotational_probe` threshold accepted (10 ms: above it a
/// disk's random read could count as flash).
pub const MAX_THRESHOLD: Time = 10 * crate::types::MS;

/// The probe's state.
#[derive(Clone, Copy, Debug, Default)]
pub struct MediumProbe {
    /// The request being timed and its dispatch time.
    lone: Option<(ReqId, Time)>,
    /// Low-pass filtered lone seeky read time, ns.
    mean: Time,
    samples: u32,
    /// The measured verdict: serves random reads like flash.
    flash_like: bool,
}

impl MediumProbe {
    /// Whether a dispatched request is timed: a small sync read of a seeky
    /// flow, alone on the device (`in_flight` counts it). Any other
    /// dispatch ends the current timing, since the device is no longer
    /// serving one request alone.
    pub fn on_dispatch(&mut self, now: Time, req: &Request, seeky: bool, in_flight: usize) {
        let probe = req.sync
            && req.op == Op::Read
            && req.sectors < NONROT_SEQ_SECTORS
            && seeky
            && in_flight == 1;
        self.lone = probe.then_some((req.id, now));
    }

    /// Takes the sample of a completed timed request; returns whether the
    /// verdict changed. `threshold` is `rotational_probe` (> 0).
    pub fn on_complete(&mut self, now: Time, id: ReqId, threshold: Time) -> bool {
        let Some((lone, since)) = self.lone else {
            return false;
        };
        if lone != id {
            return false;
        }
        self.lone = None;
        let t = now.saturating_sub(since);
        self.mean = if self.samples == 0 {
            t
        } else {
            (self.mean * 7 + t) / 8
        };
        self.samples = self.samples.saturating_add(1);
        if self.samples < MIN_SAMPLES {
            return false;
        }
        let was = self.flash_like;
        if self.mean < threshold {
            self.flash_like = true;
        } else if self.mean > 2 * threshold {
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
            id: id,
            flow: FlowId(0),
            sector: id * 100_000,
            sectors,
            op: Op::Read,
            sync: true,
        }
    }

    fn feed(p: &mut MediumProbe, n: u64, took: Time) -> bool {
        let mut changed = false;
        for i in 0..n {
            let now = i * 20 * MS;
            p.on_dispatch(now, &read(i, 8), true, 1);
            changed |= p.on_complete(now + took, i, MS);
        }
        changed
    }

    #[test]
    fn flash_latency_flips_after_enough_samples_and_disk_latency_flips_back() {
        let mut p = MediumProbe::default();
        assert!(!feed(&mut p, u64::from(MIN_SAMPLES) - 1, 100 * US));
        assert!(!p.flash_like());
        assert!(feed(&mut p, 1, 100 * US));
        assert!(p.flash_like());
        // 1.5 ms: between the threshold and twice it, no change.
        assert!(!feed(&mut p, 64, 1_500 * US));
        assert!(p.flash_like());
        assert!(feed(&mut p, 64, 8 * MS));
        assert!(!p.flash_like());
    }

    #[test]
    fn only_small_sync_seeky_reads_alone_are_timed() {
        let mut p = MediumProbe::default();
        let cases = [
            (read(1, 8), false, 1),
            (read(1, NONROT_SEQ_SECTORS), true, 1),
            (read(1, 8), true, 2),
            (
                Request {
                    op: Op::Write,
                    ..read(1, 8)
                },
                true,
                1,
            ),
        ];
        for (r, seeky, inf) in cases {
            for _ in 0..MIN_SAMPLES * 2 {
                p.on_dispatch(0, &r, seeky, inf);
                assert!(!p.on_complete(10 * US, r.id, MS));
            }
        }
        assert!(!p.flash_like());
        // Another dispatch before the completion ends the timing.
        for i in 0..u64::from(MIN_SAMPLES) * 2 {
            p.on_dispatch(0, &read(i, 8), true, 1);
            p.on_dispatch(1, &read(i + 1000, 8), true, 2);
            assert!(!p.on_complete(10 * US, i, MS));
        }
        assert!(!p.flash_like());
    }
}
