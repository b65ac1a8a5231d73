//! Weight raising (heuristic 5, H-low-latency; switch `low_latency`).
//!
//! - **Interactive** (report Sec. 4.1; kernel): a synchronous flow that
//!   starts, or restarts after staying idle (empty, nothing in flight) for
//!   more than `wr_min_idle_time` (2 s), has its weight multiplied by
//!   `wr_coeff` (kernel 30) for `wr_max_time`. With `wr_max_time = 0` (auto,
//!   kernel) the duration is derived from the peak rate: the reference
//!   duration (7 s rotational, 2.5 s non-rotational) scaled by reference
//!   rate / estimated rate, clamped to [3 s, 25 s]. Raising ends early after
//!   `wr_max_service` (120000) sectors of raised service. The report's
//!   variant (profile `bfq-plus-2014`): C_rais = 10, B_rais = 24 MiB, T_rais =
//!   6 s, T_idle = 2 s, with the weight decreasing linearly with the service
//!   received (`wr_linear_decay = 1`), so that it is back to the original
//!   weight when B_rais is consumed.
//! - **Soft real-time** (kernel): a flow that is not totally seeky, has
//!   nothing in flight, and issues its new batch no earlier than
//!   `soft_rt_next_start` — computed when it empties so that its rate stays
//!   below `wr_max_softrt_rate` (7000 sectors/s) — is raised by
//!   `wr_rt_coeff` (3000) for `wr_rt_max_time` (300 ms), renewed at each
//!   batch while the pattern holds. `wr_max_softrt_rate = 0` disables it.
//! - **Burst detection** (kernel): flows whose first requests arrive less
//!   than `burst_interval` (180 ms) after the previous one in the same
//!   group form a burst; once a burst holds `burst_thresh` (8) flows, they
//!   and the later ones of the burst are "in a large burst" and get no
//!   raising (many threads of one job starting together are not
//!   interactive). `burst_thresh = 0` disables detection.
//! - Only flows whose weight is the default of their priority level are
//!   raised (`wr_default_weight_only`, kernel: an explicit weight means the
//!   user wants to control it); the report raised every application.
//! - Raised flows keep idling even when seeky, at least `wr_min_idle_slice`
//!   (20 ms) for interactive raising ([`super::idling`]); the raising time
//!   cap bounds how long a random flow may profit from it.
//!
//! The flow "creation" of the kernel is its first request here (the
//! interface creates flows ahead of time).

use crate::error::SchedError;
use crate::settings::Settings;
use crate::types::{GroupId, Time, MS, SEC};

/// Weight-raising parameters, in declaration order (`repr(C)`): first
/// those a request's arrival reads ([`super::BfqConfig`]'s layout).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct WrConfig {
    /// `low_latency`.
    pub enabled: bool,
    /// Raise only flows with their priority level's default weight (`wr_default_weight_only`; kernel).
    pub default_weight_only: bool,
    /// A flow idle longer than this is raised again when it restarts (`wr_min_idle_time`, default 2 s; BFQ+ report T_idle).
    pub min_idle_time: Time,
    /// Sectors per second; 0 disables soft real-time raising.
    pub max_softrt_rate: u64,
    /// Interactive raising coefficient: the weight is multiplied by it (`wr_coeff`, 1..=1000; kernel 30, BFQ+ report C_rais = 10).
    pub coeff: u32,
    /// 0: derived from the peak rate.
    pub max_time: Time,
    /// Shortest automatic raising duration (`wr_min_auto_time`, default 3 s).
    pub min_auto_time: Time,
    /// Longest automatic raising duration (`wr_max_auto_time`, default 25 s; not below `wr_min_auto_time`).
    pub max_auto_time: Time,
    /// Reference raising time of a rotational device (`wr_ref_time_rotational`, default 7 s): the automatic duration is this x reference rate / estimated rate.
    pub ref_time_rotational: Time,
    /// Reference raising time of a non-rotational device (`wr_ref_time_nonrot`, default 2.5 s).
    pub ref_time_nonrot: Time,
    /// Interactive raising ends after this much raised service (0: never).
    pub max_service: u64,
    /// Report: weight decays linearly to the original over `max_service`.
    pub linear_decay: bool,
    /// Soft real-time raising coefficient (`wr_rt_coeff`, 1..=100000, default 3000).
    pub rt_coeff: u32,
    /// Soft real-time raising duration, renewed at each batch (`wr_rt_max_time`, default 300 ms).
    pub rt_max_time: Time,
    /// 0 disables burst detection.
    pub burst_thresh: u32,
    /// Flows whose first requests come less than this apart in one group form a burst (`burst_interval`, default 180 ms).
    pub burst_interval: Time,
    /// Raised (interactive) flows idle at least this long.
    pub min_idle_slice: Time,
}

impl WrConfig {
    /// Today's kernel defaults.
    pub fn kernel() -> Self {
        WrConfig {
            enabled: true,
            coeff: 30,
            max_time: 0,
            min_auto_time: 3 * SEC,
            max_auto_time: 25 * SEC,
            ref_time_rotational: 7 * SEC,
            ref_time_nonrot: 2500 * MS,
            max_service: 120_000,
            linear_decay: false,
            min_idle_time: 2 * SEC,
            default_weight_only: true,
            rt_coeff: 3000,
            rt_max_time: 300 * MS,
            max_softrt_rate: 7000,
            burst_thresh: 8,
            burst_interval: 180 * MS,
            min_idle_slice: 20 * MS,
        }
    }

    /// The 2014 report's parameters.
    pub fn plus_2014() -> Self {
        WrConfig {
            coeff: 10,
            max_time: 6 * SEC,
            max_service: 24 * 2048,
            linear_decay: true,
            default_weight_only: false,
            max_softrt_rate: 0,
            burst_thresh: 0,
            min_idle_slice: 0,
            ..WrConfig::kernel()
        }
    }

    /// Interactive raising duration for the estimated peak rate.
    pub fn interactive_time(&self, rate: u64, rotational: bool) -> Time {
        if self.max_time > 0 {
            return self.max_time;
        }
        let (rref, tref) = if rotational {
            (
                super::peak_rate::REF_RATE_ROTATIONAL,
                self.ref_time_rotational,
            )
        } else {
            (super::peak_rate::REF_RATE_NONROT, self.ref_time_nonrot)
        };
        let t = (u128::from(tref) * u128::from(rref) / u128::from(rate.max(1))) as Time;
        // Not `clamp`: it panics when min > max, which settings refuse but a
        // hand-built config may hold.
        t.max(self.min_auto_time).min(self.max_auto_time)
    }
}

/// Kind of raising in force.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RaiseKind {
    /// Not raised.
    #[default]
    None,
    /// Raised as interactive (new or long-idle flow; BFQ+ report Sec. 4.6).
    Interactive,
    /// Raised as soft real-time (periodic batches at a bounded rate; kernel).
    SoftRt,
}

/// A flow's raising state.
#[derive(Clone, Copy, Debug, Default)]
pub struct Raise {
    /// Kind of raising in force.
    pub kind: RaiseKind,
    /// Coefficient the weight is multiplied by (1: not raised).
    pub coeff: u32,
    /// When the raising started, in ns.
    pub start: Time,
    /// How long it lasts, in ns.
    pub duration: Time,
    /// Raised service received (sectors).
    pub served: u64,
}

impl Raise {
    /// Whether raising is in force.
    #[inline]
    pub fn on(&self) -> bool {
        self.kind != RaiseKind::None
    }

    /// Starts (or renews) raising.
    pub fn start(&mut self, kind: RaiseKind, coeff: u32, now: Time, duration: Time) {
        *self = Raise {
            kind,
            coeff,
            start: now,
            duration,
            served: 0,
        };
    }

    /// Whether raising must end now (time cap or service cap).
    pub fn expired(&self, cfg: &WrConfig, now: Time) -> bool {
        self.on()
            && (now.saturating_sub(self.start) > self.duration
                || (self.kind == RaiseKind::Interactive
                    && cfg.max_service > 0
                    && self.served >= cfg.max_service))
    }

    /// The effective weight of a flow of original weight `w`.
    pub fn weight(&self, cfg: &WrConfig, w: u32) -> u32 {
        if !self.on() {
            return w;
        }
        let c = u64::from(self.coeff.max(1));
        let eff = if self.kind == RaiseKind::Interactive && cfg.linear_decay && cfg.max_service > 0
        {
            let left = cfg.max_service.saturating_sub(self.served);
            u64::from(w) + u64::from(w) * (c - 1) * left / cfg.max_service
        } else {
            u64::from(w) * c
        };
        eff.clamp(1, u64::from(u32::MAX)) as u32
    }
}

/// Burst detection state (one per scheduler, like the kernel's per device
/// list): O(1) per flow start, members remembered only until the burst is
/// declared large.
#[derive(Clone, Debug, Default)]
pub struct Burst {
    group: Option<GroupId>,
    last: Time,
    size: u32,
    /// Members before the burst became large (at most `burst_thresh`).
    pub members: Vec<u32>,
    large: bool,
}

/// What [`Burst::flow_started`] decided.
#[derive(Debug, PartialEq, Eq)]
pub enum BurstVerdict {
    /// Not in a large burst (yet).
    Normal,
    /// In a large burst.
    Large,
    /// The burst just became large: the flow and all of `members` are in it.
    BecameLarge,
}

impl Burst {
    /// A flow of `group` issued its first request at `now`.
    pub fn flow_started(
        &mut self,
        cfg: &WrConfig,
        flow: u32,
        group: GroupId,
        now: Time,
    ) -> BurstVerdict {
        if cfg.burst_thresh == 0 {
            return BurstVerdict::Normal;
        }
        if self.size == 0
            || self.group != Some(group)
            || now.saturating_sub(self.last) > cfg.burst_interval
        {
            self.size = 0;
            self.members.clear();
            self.large = false;
            self.group = Some(group);
        }
        self.size += 1;
        self.last = now;
        if self.large {
            return BurstVerdict::Large;
        }
        if self.size >= cfg.burst_thresh {
            self.large = true;
            return BurstVerdict::BecameLarge;
        }
        self.members.push(flow);
        BurstVerdict::Normal
    }
}

impl WrConfig {
    /// The weight-raising settings over profile `w`
    /// (docs/bfq-settings.md); `wr_min_auto_time` must not exceed
    /// `wr_max_auto_time`.
    pub(crate) fn with_settings(w: &WrConfig, s: &mut Settings) -> Result<Self, SchedError> {
        let wr = WrConfig {
            enabled: s.bool("low_latency", w.enabled)?,
            coeff: s.u64_in("wr_coeff", u64::from(w.coeff), 1, 1000)? as u32,
            max_time: s.duration("wr_max_time", w.max_time)?,
            min_auto_time: s.duration("wr_min_auto_time", w.min_auto_time)?,
            max_auto_time: s.duration("wr_max_auto_time", w.max_auto_time)?,
            ref_time_rotational: s.duration("wr_ref_time_rotational", w.ref_time_rotational)?,
            ref_time_nonrot: s.duration("wr_ref_time_nonrot", w.ref_time_nonrot)?,
            max_service: s.u64_in("wr_max_service", w.max_service, 0, 1 << 40)?,
            linear_decay: s.bool("wr_linear_decay", w.linear_decay)?,
            min_idle_time: s.duration("wr_min_idle_time", w.min_idle_time)?,
            default_weight_only: s.bool("wr_default_weight_only", w.default_weight_only)?,
            rt_coeff: s.u64_in("wr_rt_coeff", u64::from(w.rt_coeff), 1, 100_000)? as u32,
            rt_max_time: s.duration("wr_rt_max_time", w.rt_max_time)?,
            max_softrt_rate: s.u64_in("wr_max_softrt_rate", w.max_softrt_rate, 0, 1 << 32)?,
            burst_thresh: s.u64_in("burst_thresh", u64::from(w.burst_thresh), 0, 1000)? as u32,
            burst_interval: s.duration("burst_interval", w.burst_interval)?,
            min_idle_slice: s.duration("wr_min_idle_slice", w.min_idle_slice)?,
        };
        if wr.min_auto_time > wr.max_auto_time {
            // The value as given, else the default.
            let given = s.pairs().find(|(k, _)| *k == "wr_max_auto_time");
            let value = given.map_or_else(
                || crate::settings::format_duration(wr.max_auto_time),
                |(_, v)| v.to_string(),
            );
            return Err(Settings::invalid(
                "wr_max_auto_time",
                &value,
                format!(
                    "must not be below wr_min_auto_time ({})",
                    crate::settings::format_duration(wr.min_auto_time)
                ),
            ));
        }
        Ok(wr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duration_from_peak_rate_is_clamped() {
        let c = WrConfig::kernel();
        let r = super::super::peak_rate::REF_RATE_ROTATIONAL;
        assert_eq!(c.interactive_time(r, true), 7 * SEC);
        assert_eq!(c.interactive_time(r * 10, true), 3 * SEC);
        assert_eq!(c.interactive_time(r / 10, true), 25 * SEC);
        assert_eq!(WrConfig::plus_2014().interactive_time(r, true), 6 * SEC);
    }

    #[test]
    fn linear_decay_and_caps() {
        let c = WrConfig::plus_2014();
        let mut r = Raise::default();
        r.start(RaiseKind::Interactive, 10, 0, 6 * SEC);
        assert_eq!(r.weight(&c, 100), 1000);
        r.served = c.max_service / 2;
        assert_eq!(r.weight(&c, 100), 550);
        r.served = c.max_service;
        assert!(r.expired(&c, 1));
        let k = WrConfig::kernel();
        let mut r = Raise::default();
        r.start(RaiseKind::Interactive, 30, 0, 7 * SEC);
        assert_eq!(r.weight(&k, 40), 1200);
        assert!(!r.expired(&k, 7 * SEC));
        assert!(r.expired(&k, 7 * SEC + 1));
    }

    #[test]
    fn eighth_flow_in_180ms_makes_a_large_burst() {
        let c = WrConfig::kernel();
        let mut b = Burst::default();
        for i in 0..7 {
            assert_eq!(
                b.flow_started(&c, i, GroupId::ROOT, u64::from(i) * 100 * MS),
                BurstVerdict::Normal
            );
        }
        assert_eq!(
            b.flow_started(&c, 7, GroupId::ROOT, 750 * MS),
            BurstVerdict::BecameLarge
        );
        assert_eq!(b.members.len(), 7);
        assert_eq!(
            b.flow_started(&c, 8, GroupId::ROOT, 800 * MS),
            BurstVerdict::Large
        );
        // A pause ends the burst.
        assert_eq!(
            b.flow_started(&c, 9, GroupId::ROOT, 2 * SEC),
            BurstVerdict::Normal
        );
    }
}
