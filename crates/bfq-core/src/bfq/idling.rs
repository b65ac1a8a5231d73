//! Idling (T_wait): keeping the device idle after the active flow's queue
//! empties, so that a synchronous flow's next request — issued a moment
//! after the previous one completes — does not lose the flow its turn
//! (deceptive idleness). 2010 paper Sec. II-B; kernel `slice_idle`.
//!
//! - T_wait 8 ms (kernel slice_idle), cut to 2 ms for flows detected as
//!   seeky: waiting for a random flow buys no throughput (Sec. II-B).
//! - No idling for asynchronous flows, for the idle class, or on devices
//!   that queue internally (unless `idle_on_queueing_devices`).
//! - Seeky detection (kernel): a flow is seeky when more than 19 of its
//!   last 32 requests started farther than 800 sectors from the end of
//!   the previous one.

use crate::types::{DeviceInfo, IoClass, Time};

/// Idling parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdleConfig {
    /// T_wait for non-seeky sync flows (0 disables idling).
    pub slice_idle: Time,
    /// T_wait for seeky flows.
    pub slice_idle_seeky: Time,
    /// Idle even when the device queues internally.
    pub idle_on_queueing_devices: bool,
    /// Distance (sectors) beyond which a request counts as a seek.
    pub seek_threshold: u64,
}

/// Per-flow access-pattern history for seeky detection.
#[derive(Clone, Copy, Debug, Default)]
pub struct SeekHistory {
    /// One bit per recent request: 1 = seek.
    bits: u32,
    /// End sector of the last request added.
    last_end: u64,
    /// Requests seen (saturating at 32).
    samples: u8,
}

impl SeekHistory {
    /// Records a request at `sector..end`.
    pub fn record(&mut self, sector: u64, end: u64, threshold: u64) {
        let seek = self.samples > 0 && sector.abs_diff(self.last_end) > threshold;
        self.bits = (self.bits << 1) | u32::from(seek);
        self.last_end = end;
        self.samples = self.samples.saturating_add(1).min(32);
    }

    /// More than 19 of the last 32 requests were seeks.
    pub fn is_seeky(&self) -> bool {
        self.bits.count_ones() > 19
    }
}

impl IdleConfig {
    /// How long to keep the device idle for a flow whose queue just emptied
    /// (None: do not idle).
    pub fn wait_time(
        &self,
        device: &DeviceInfo,
        class: IoClass,
        sync: bool,
        seeky: bool,
    ) -> Option<Time> {
        if self.slice_idle == 0 || !sync || class == IoClass::Idle {
            return None;
        }
        if device.queues_internally && !self.idle_on_queueing_devices {
            return None;
        }
        Some(if seeky {
            self.slice_idle_seeky.min(self.slice_idle)
        } else {
            self.slice_idle
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::MS;

    #[test]
    fn seeky_after_twenty_far_requests() {
        let mut h = SeekHistory::default();
        for i in 0..32u64 {
            h.record(i * 8, i * 8 + 8, 800);
        }
        assert!(!h.is_seeky());
        for i in 1..=20u64 {
            h.record(i * 1_000_000, i * 1_000_000 + 8, 800);
        }
        assert!(h.is_seeky());
    }

    #[test]
    fn no_idling_where_it_cannot_help() {
        let c = IdleConfig {
            slice_idle: 8 * MS,
            slice_idle_seeky: 2 * MS,
            idle_on_queueing_devices: false,
            seek_threshold: 800,
        };
        let disk = DeviceInfo::default();
        let ncq = DeviceInfo {
            queues_internally: true,
            queue_depth: 32,
            rotational: true,
        };
        assert_eq!(c.wait_time(&disk, IoClass::Be, true, false), Some(8 * MS));
        assert_eq!(c.wait_time(&disk, IoClass::Be, true, true), Some(2 * MS));
        assert_eq!(c.wait_time(&disk, IoClass::Be, false, false), None);
        assert_eq!(c.wait_time(&disk, IoClass::Idle, true, false), None);
        assert_eq!(c.wait_time(&ncq, IoClass::Be, true, false), None);
    }
}
