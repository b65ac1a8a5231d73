//! Peak-rate estimation and automatic B_max (H-peak-rate).
//!
//! B_max = T_max x R_est: the sectors the device transfers at its estimated
//! peak rate in one maximum time slice (2014 report Sec. 3.3 and 4.2).
//! Enabled when `max_budget = 0` (auto, the default of `bfq` and
//! `bfq-plus-2014`); until the first accepted sample B_max is 16384 sectors.
//!
//! Three estimators (`peak_rate_estimator`):
//!
//! - `kernel` (default; Linux's `bfq_update_peak_rate` and
//!   `bfq_update_rate_reset`): the device's completed sectors are sampled over windows
//!   of at least 300 ms and 32 completions (closed at 1 s, or when the
//!   device went idle); a sample above 20 sectors/us is rejected, and so is
//!   one with under 3/4 sequential requests unless it is higher than the
//!   estimate; the sample enters a low-pass filter whose weight grows with
//!   the fraction of sequential requests and the window length, at most
//!   8/10. Initial estimate: 2/3 of the reference rate (rotational 213 623
//!   sectors/s, non-rotational 503 540 sectors/s: the kernel's 14000 and
//!   33000 in its 2^-16 sectors/us fixed point).
//! - `bfq-plus-2014` (report Sec. 4.2): at the end of each turn that lasted
//!   at least 20 ms, R_meas = served / turn length; if R_est < R_meas, or the
//!   flow is not random and hit the budget timeout (B_max is probably too
//!   large), R_est = 7/8 R_est + 1/8 R_meas.
//! - `bfq-2010` (the original BFQ's, report Sec. 4.2): at the end of each
//!   turn that lasted at least 20 ms, R_meas = served / turn length; if
//!   R_est < R_meas, R_est = R_meas. R_est starts where the other
//!   estimators start (2/3 of the reference rate, B_max 16384 until a turn
//!   beats it) and is the highest rate observed since.
//!
//! Both turn estimators sample a sync flow's turns only, as the original
//! BFQ and BFQ+ did (the caller, `Bfq::sample_turn_rate`, decides).
//!
//! All rates are in sectors per second. No allocation; O(1) per event.

use super::idling::NONROT_SEQ_SECTORS;
use crate::error::SchedError;
use crate::settings::Settings;
use crate::types::{Request, Time, SEC};

/// Reference peak rate of a rotational device (sectors/s).
pub const REF_RATE_ROTATIONAL: u64 = 213_623;
/// Reference peak rate of a non-rotational device (sectors/s).
pub const REF_RATE_NONROT: u64 = 503_540;

/// Which estimator runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Estimator {
    /// Today's kernel: windows of at least 300 ms and 32 completions, outliers rejected, low-pass filtered.
    Kernel,
    /// BFQ+ report Sec. 4.2 (H-peak-rate): the rate of each budget-exhausting sequential turn, low-pass filtered.
    Plus2014,
    /// The original BFQ's, report Sec. 4.2: the highest rate of a turn of at least 20 ms.
    Original,
}

impl Estimator {
    /// Every spelling of `peak_rate_estimator`, names first.
    pub const WORDS: &'static [(&'static str, Estimator)] = &[
        ("kernel", Estimator::Kernel),
        ("bfq-plus-2014", Estimator::Plus2014),
        ("report", Estimator::Plus2014),
        ("plus", Estimator::Plus2014),
        ("2014", Estimator::Plus2014),
        ("bfq-2010", Estimator::Original),
        ("original", Estimator::Original),
    ];
}

/// Estimator parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeakRateConfig {
    /// Tune B_max from the estimate (`max_budget = 0`).
    pub auto: bool,
    /// Which estimator runs (`peak_rate_estimator`: `kernel`, `bfq-plus-2014` or `bfq-2010`).
    pub estimator: Estimator,
    /// Shortest sampling window (kernel estimator).
    pub min_window: Time,
    /// Fewest completions per window (kernel estimator).
    pub min_samples: u32,
    /// Window length at which a sample is taken anyway.
    pub max_window: Time,
    /// Shortest turn sampled (report estimator).
    pub min_turn: Time,
    /// Distance (sectors) under which a request counts as sequential.
    pub seq_distance: u64,
    /// Kernel estimator: also sample the turns of I/O-bound, non-seeky
    /// flows nothing was injected into, with the report's rule
    /// ([`PeakRate::on_turn_end`]) and `min_turn` (`peak_rate_turn_samples`;
    /// this project's rule, not the kernel's). The kernel's windows count
    /// every dispatch: with a random reader's small requests among the
    /// sequential readers' large ones, fewer than 3/4 of them are
    /// sequential and the mixed rate is below the estimate, so no window
    /// is ever accepted and B_max stays at its 16384 default.
    pub turn_samples: bool,
    /// Kernel estimator: on a non-rotational device a request of at least
    /// [`NONROT_SEQ_SECTORS`] counts as sequential wherever it lands
    /// (kernel `BFQ_RQ_SEEKY`; `peak_rate_large_seq`).
    pub large_seq: bool,
    /// The estimate the device's scheduler had learned before this run, in
    /// sectors/s (`peak_rate_learned`, 0..=20 000 000; 0, the default:
    /// none, start from 2/3 of the reference rate). The kernel keeps its
    /// estimate for as long as the device keeps its scheduler, so a bfq
    /// that has served sequential I/O on the device (creating the test
    /// files, earlier tests) starts a test with that estimate and its B_max
    /// (T_max x the estimate); the estimator then goes on as after an
    /// accepted sample.
    pub learned: u64,
    /// Kernel estimator: a window whose requests average fewer sectors
    /// than this may raise the estimate but not lower it
    /// (`peak_rate_lower_min_request`, 0..=2048 sectors; 0: off, the
    /// kernel; this project's rule). Small requests do not show a
    /// device's peak rate: a start-up's small sequential reads (konsole's
    /// 24 sectors, with think time between them) make windows the kernel
    /// counts as sequential at a few MB/s, and among ten random readers on
    /// the 2014 report's disk B_max fell from 16384 to ~1400 sectors
    /// (5.6 MB/s of a 36 MB/s disk) within 20 s; konsole then started in
    /// 3.59 s instead of 2.70 (idle 2.41).
    pub lower_min_request: u64,
}

impl Default for PeakRateConfig {
    fn default() -> Self {
        PeakRateConfig {
            auto: true,
            estimator: Estimator::Kernel,
            min_window: 300 * crate::types::MS,
            min_samples: 32,
            max_window: SEC,
            min_turn: 20 * crate::types::MS,
            seq_distance: 800,
            turn_samples: false,
            large_seq: true,
            learned: 0,
            lower_min_request: 0,
        }
    }
}

/// Estimator state.
#[derive(Clone, Copy, Debug)]
pub struct PeakRate {
    /// Current estimate, sectors/s.
    pub rate: u64,
    /// Accepted samples so far.
    pub accepted: u32,
    win_start: Option<Time>,
    win_sectors: u64,
    win_done: u32,
    win_dispatched: u32,
    win_seq: u32,
    last_completion: Time,
    last_end: u64,
}

impl PeakRate {
    /// An estimator for a rotational or non-rotational device: fresh, or
    /// starting from a `learned` estimate (sectors/s; 0: none).
    pub fn new(rotational: bool, learned: u64) -> Self {
        let r = if rotational {
            REF_RATE_ROTATIONAL
        } else {
            REF_RATE_NONROT
        };
        PeakRate {
            rate: if learned > 0 { learned } else { r * 2 / 3 },
            accepted: u32::from(learned > 0),
            win_start: None,
            win_sectors: 0,
            win_done: 0,
            win_dispatched: 0,
            win_seq: 0,
            last_completion: 0,
            last_end: 0,
        }
    }

    /// B_max for the current estimate and T_max; None until a sample was
    /// accepted (keep the default).
    pub fn max_budget(&self, timeout: Time) -> Option<u64> {
        (self.accepted > 0).then(|| {
            ((u128::from(self.rate) * u128::from(timeout) / u128::from(SEC)) as u64)
                .clamp(64, 1 << 24)
        })
    }

    /// A request was dispatched (kernel estimator). It counts as
    /// sequential when it starts near where the previous one ended, or, on
    /// a non-rotational device (`nonrot`) with `large_seq`, when it is at
    /// least [`NONROT_SEQ_SECTORS`] long (kernel `BFQ_RQ_SEEKY`):
    /// otherwise large reads of several flows interleaved never give a
    /// sample.
    /// `device_idle`: nothing was in flight before it. Returns true when
    /// the estimate changed.
    #[inline]
    pub fn on_dispatch(
        &mut self,
        cfg: &PeakRateConfig,
        now: Time,
        req: &Request,
        nonrot: bool,
        device_idle: bool,
    ) -> bool {
        let (sector, end) = (req.sector, req.end());
        let mut changed = false;
        if let Some(start) = self.win_start {
            let stale =
                device_idle && now.saturating_sub(self.last_completion) > 20 * crate::types::MS;
            if stale || now.saturating_sub(start) >= cfg.max_window {
                changed = self.close(cfg);
            }
        }
        if self.win_start.is_none() {
            self.win_start = Some(now);
            self.win_sectors = 0;
            self.win_done = 0;
            self.win_dispatched = 0;
            self.win_seq = 0;
        }
        self.win_dispatched += 1;
        if sector.abs_diff(self.last_end) <= cfg.seq_distance
            || (cfg.large_seq && nonrot && req.sectors >= NONROT_SEQ_SECTORS)
        {
            self.win_seq += 1;
        }
        self.last_end = end;
        changed
    }

    /// A request of `sectors` completed (kernel estimator).
    pub fn on_complete(&mut self, now: Time, sectors: u64) {
        if self.win_start.is_some() {
            self.win_sectors += sectors;
            self.win_done += 1;
        }
        self.last_completion = now;
    }

    /// Ends the window; folds its sample into the estimate if valid.
    #[cold]
    fn close(&mut self, cfg: &PeakRateConfig) -> bool {
        let Some(start) = self.win_start.take() else {
            return false;
        };
        let len = self.last_completion.saturating_sub(start);
        if len < cfg.min_window || self.win_done < cfg.min_samples || self.win_dispatched == 0 {
            return false;
        }
        let sample = (u128::from(self.win_sectors) * u128::from(SEC) / u128::from(len)) as u64;
        // Above 20 sectors/us: a measurement artefact.
        if sample > 20_000_000 {
            return false;
        }
        let seq4 = u64::from(self.win_seq) * 4;
        if seq4 < 3 * u64::from(self.win_dispatched) && sample <= self.rate {
            return false;
        }
        let small = self.win_sectors < cfg.lower_min_request * u64::from(self.win_done);
        if small && sample <= self.rate {
            return false;
        }
        // Weight 1..=8 tenths, growing with sequentiality and window length.
        let frac = u128::from(self.win_seq) * 1000 / u128::from(self.win_dispatched);
        let tf = u128::from(len.min(SEC)) * 1000 / u128::from(SEC);
        let w = (1 + 7 * frac * tf / 1_000_000) as u64;
        self.rate = ((10 - w) * self.rate + w * sample) / 10;
        self.accepted += 1;
        true
    }

    /// End of a turn (report and original estimators). Returns true when
    /// the estimate changed.
    pub fn on_turn_end(
        &mut self,
        cfg: &PeakRateConfig,
        elapsed: Time,
        served: u64,
        timeout_hit: bool,
        seeky: bool,
    ) -> bool {
        if elapsed < cfg.min_turn || elapsed == 0 {
            return false;
        }
        let meas = (u128::from(served) * u128::from(SEC) / u128::from(elapsed)) as u64;
        if cfg.estimator == Estimator::Original {
            return self.keep_highest(meas);
        }
        if self.rate < meas || (timeout_hit && !seeky) {
            self.rate = (7 * self.rate + meas) / 8;
            self.accepted += 1;
            return true;
        }
        false
    }

    /// The original BFQ's estimator (2014 report Sec. 4.2, "If R_est <
    /// R_meas, then R_est <- R_meas"): R_est only rises, from the initial
    /// estimate the other estimators start from (the report gives none of
    /// its own). No filter: a turn whose writes the drive acknowledged
    /// from its cache, at bus rate, raises R_est, and B_max with it, for
    /// good (Sec. 4.2; a too high B_max degrades service, Sec. 3.1, 3.5).
    fn keep_highest(&mut self, meas: u64) -> bool {
        if meas <= self.rate {
            return false;
        }
        self.rate = meas;
        self.accepted += 1;
        true
    }
}

impl PeakRateConfig {
    /// The peak-rate settings over profile `d` (docs/bfq-settings.md);
    /// `auto`: B_max follows the estimate (`max_budget` 0).
    pub(crate) fn with_settings(
        d: &PeakRateConfig,
        auto: bool,
        s: &mut Settings,
    ) -> Result<Self, SchedError> {
        Ok(PeakRateConfig {
            auto,
            estimator: s.word("peak_rate_estimator", d.estimator, Estimator::WORDS)?,
            turn_samples: s.bool("peak_rate_turn_samples", d.turn_samples)?,
            large_seq: s.bool("peak_rate_large_seq", d.large_seq)?,
            min_turn: s.duration("peak_rate_min_turn", d.min_turn)?,
            learned: s.u64_in("peak_rate_learned", d.learned, 0, 20_000_000)?,
            lower_min_request: s.u64_in(
                "peak_rate_lower_min_request",
                d.lower_min_request,
                0,
                2048,
            )?,
            ..*d
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{FlowId, Op, MS, US};

    fn req(sector: u64, sectors: u32) -> Request {
        Request {
            id: 0,
            flow: FlowId(0),
            sector,
            sectors,
            op: Op::Read,
            sync: true,
        }
    }

    /// Feeds `n` requests of `len` sectors, one every `gap`, at sectors
    /// given by `at(i)`.
    fn feed(p: &mut PeakRate, nonrot: bool, n: u64, len: u32, gap: Time, at: impl Fn(u64) -> u64) {
        let cfg = PeakRateConfig::default();
        let mut t = 0;
        for i in 0..n {
            p.on_dispatch(&cfg, t, &req(at(i), len), nonrot, false);
            t += gap;
            p.on_complete(t, u64::from(len));
        }
    }

    #[test]
    fn converges_to_a_steady_sequential_rate() {
        let mut p = PeakRate::new(true, 0);
        // 256 sectors every 1.28 ms: 200 000 sectors/s.
        feed(&mut p, false, 20_000, 256, 1280 * US, |i| i * 256);
        assert!((p.rate as i64 - 200_000).abs() < 4_000, "rate {}", p.rate);
        assert_eq!(p.max_budget(125 * MS), Some(p.rate / 8));
    }

    #[test]
    fn large_interleaved_reads_are_sampled_on_non_rotational_devices() {
        // Four readers' 128 KiB requests interleaved far apart at 1 GB/s
        // (256 sectors every 256 us, 1 000 000 sectors/s): on an SSD they
        // are sequential samples (kernel), on a disk they are seeks, and
        // slower than the estimate, so rejected.
        let at = |i: u64| (i % 4) * (1 << 30) + (i / 4) * 256;
        let mut ssd = PeakRate::new(false, 0);
        feed(&mut ssd, true, 20_000, 256, 256 * US, at);
        assert!(ssd.accepted > 0);
        assert!(
            (ssd.rate as i64 - 1_000_000).abs() < 20_000,
            "rate {}",
            ssd.rate
        );
        let mut ssd_small = PeakRate::new(false, 0);
        feed(&mut ssd_small, true, 20_000, 8, 256 * US, at);
        assert_eq!(ssd_small.accepted, 0);
    }

    #[test]
    fn the_original_estimator_keeps_the_highest_turn_rate() {
        let cfg = PeakRateConfig {
            estimator: Estimator::Original,
            ..PeakRateConfig::default()
        };
        let mut p = PeakRate::new(true, 0);
        assert_eq!(p.max_budget(125 * MS), None);
        // A turn below the initial estimate (2/3 of the reference rate)
        // leaves it, and B_max at 16384: 1500 sectors in 25 ms, 60 000/s.
        assert!(!p.on_turn_end(&cfg, 25 * MS, 1500, false, false));
        assert_eq!(p.rate, REF_RATE_ROTATIONAL * 2 / 3);
        assert_eq!(p.max_budget(125 * MS), None);
        // A higher rate replaces it exactly (no filter): 180 000/s.
        assert!(p.on_turn_end(&cfg, 20 * MS, 3600, false, false));
        assert_eq!(p.rate, 180_000);
        // A lower rate, a budget timeout or a shorter turn leaves it.
        assert!(!p.on_turn_end(&cfg, 125 * MS, 5000, true, false));
        assert!(!p.on_turn_end(&cfg, 19 * MS, 19_000, false, false));
        assert_eq!(p.rate, 180_000);
        assert_eq!(p.max_budget(125 * MS), Some(22_500));
    }
}
