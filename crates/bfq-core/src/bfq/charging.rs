//! What service costs a flow: fair time charging of slow and random flows
//! (heuristic 3, H-fairness) and the over-charge of asynchronous requests
//! and writes, with the device-queue limits for them (heuristic 4,
//! H-write-throt).
//!
//! ## Time charging (`time_charging`)
//! - `2010` (2010 paper Sec. III-D): a flow that hits the budget timeout is
//!   charged its whole budget.
//! - `bfq-plus-2014` (report Sec. 4.4): a *slow* flow — one that consumed
//!   its budget at a rate at which the whole budget could not have been
//!   consumed within T_max — is charged its whole budget, except when it
//!   received little service (at most B_max/8: its first seek has not yet
//!   been amortised) or consumed most of its budget (at least 2/3: it is
//!   only in a slow zone of the disk). A flow that hits the budget timeout
//!   (a random one) is charged its whole budget unless it consumed 2/3 of
//!   it (report 3.5 and 4.3: random flows are still over-charged on
//!   timeout; the little-service exemption is for slow flows only).
//! - `kernel` (default; reference "Budget timeout and time charging"): a
//!   flow is slow when it is seeky and its turn lasted at most 20 ms
//!   (kernel `bfq_bfqq_is_slow`; under 1 ms it is charged one seek,
//!   `slice_idle`, on a disk and 2 ms otherwise), or, after more than
//!   20 ms, was served less than B_max/2; a slow flow, or one that hit
//!   the timeout with at least 1/3 of its budget left, is charged for the
//!   *time* it held the device: max(B_max x min(t, T_max) / T_max, service).
//!   A turn ended by its flow staying idle (`TooIdle`) is timed only up to
//!   the start of that idling (kernel `compensate`: the idling is the
//!   scheduler's choice, not the flow's use of the device).
//!   Weight-raised flows are never charged for time, but with
//!   `raised_group_time_charge` (on in `bfq`) a raised seeky flow alone in
//!   its group whose turn reaches T_max while another group is busy, with
//!   less than B_max/8 injected into it, is charged its time
//!   (`Bfq::raised_pays_time`).
//! - `new_flow_charge_service` (on in `bfq`, off in the kernel profiles;
//!   report Sec. 4.4 item 1): a flow that is just starting, one that has
//!   received at most B_max/8 since it began doing I/O (its first request,
//!   or its first after idling longer than `wr_min_idle_time`), is charged
//!   its service, not its time, unless it is seeky: its first seeks have
//!   not yet been amortised. The kernel charges such a flow its time, so
//!   with low_latency off an application starting among greedy readers
//!   waits a full round of their T_max turns each time its turn times
//!   out (bash under five random readers and the flusher: 0.98 s, where
//!   the report measured BFQ+ below 0.55 s). Once past B_max/8 the flow
//!   pays for its time as before, so a light flow that keeps the device
//!   idling for it cannot gain more than one start-up's worth.
//!
//! With injection (heuristic 7), a turn into which other flows' requests
//! were injected is charged its service whatever the rule: the device was
//! not held idle for the flow, the injected flows used it and pay for it.
//! Except for a seeky flow on a rotational device, whose own seeks hold
//! the head, and for a seeky flow's turn that reaches T_max with other
//! groups' requests injected into it (random groups get time shares;
//! `Bfq::held_time`).
//! Injected service counted at the start of a turn (debt) is always
//! charged as service, on top of what the turn's own part costs.
//!
//! ## Write over-charge (`async_charge_factor`, `write_charge_factor`)
//! Each sector of an asynchronous request costs `async_charge_factor`
//! sectors of budget and of B-WF2Q+ service (kernel: 3; `bfq` and Linux
//! 4.x: 10, see docs/bfq-settings.md), and each written
//! sector `write_charge_factor` (report Sec. 4.5: 10; kernel 1), except
//! for weight-raised flows and in asymmetric scenarios (kernel), where the
//! weights alone must decide. Linux 4.x (the 2018 article's bfq) had no
//! asymmetric exemption and a factor of 10: there every group's buffered
//! writes cost ten times their sectors, which is how that bfq "privileges
//! reads" over asynchronous writers in other groups (2018 article, Sec. 9);
//! `async_charge_asymmetric = 1` restores it.
//!
//! ## Device-queue limits (`async_depth_pct`, `sync_write_depth_pct`)
//! Asynchronous requests may occupy at most `async_depth_pct` percent of the
//! device's queue (default 50) and synchronous writes at most
//! `sync_write_depth_pct` (default 75); both are halved while a
//! weight-raised flow is busy, so that writes cannot eat all the device
//! slots that reads need. The kernel does this by limiting the tags such
//! requests may take; the percentages are this project's choice in the
//! spirit of the kernel's, not values from the reference. 100 disables.

use super::budget::ExpireReason;
use crate::error::SchedError;
use crate::settings::Settings;
use crate::types::{Op, Request, Time, MS};

/// Time-charging rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChargeRule {
    /// 2010 paper (Sec. III-D): a flow that hits the budget timeout is charged its whole budget.
    Paper2010,
    /// BFQ+ report (Sec. 4.4): a slow flow, one that could not have consumed its budget within T_max, is charged its whole budget.
    Plus2014,
    /// Today's kernel (default): a slow flow (seeky in a turn of up to 20 ms, or served under B_max/2 in a longer one) or one that timed out with a third of its budget left is charged its time; raised flows are not.
    Kernel,
}

impl ChargeRule {
    /// Every spelling of `time_charging`, names first.
    pub const WORDS: &'static [(&'static str, ChargeRule)] = &[
        ("kernel", ChargeRule::Kernel),
        ("bfq-plus-2014", ChargeRule::Plus2014),
        ("2010", ChargeRule::Paper2010),
        ("plus", ChargeRule::Plus2014),
        ("report", ChargeRule::Plus2014),
        ("2014", ChargeRule::Plus2014),
        ("paper", ChargeRule::Paper2010),
        ("bfq-2010", ChargeRule::Paper2010),
    ];
}

/// Charging parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChargeConfig {
    /// Which turns are charged their time instead of their service (`time_charging`: `kernel`, `bfq-plus-2014` or `2010`).
    pub rule: ChargeRule,
    /// Each asynchronous sector costs this many sectors of budget and service (`async_charge_factor`, 1..=100; kernel default 3).
    pub async_charge_factor: u64,
    /// Each written sector costs this many (`write_charge_factor`, 1..=100; BFQ+ report Sec. 4.5: 10).
    pub write_charge_factor: u64,
    /// The over-charges apply in asymmetric scenarios too (`async_charge_asymmetric`; Linux 4.x: yes, today's kernel: no).
    pub overcharge_asymmetric: bool,
    /// Asynchronous requests may hold at most this percentage of the device queue (`async_depth_pct`, 1..=100, default 50; 100 disables).
    pub async_depth_pct: u32,
    /// Synchronous writes may hold at most this percentage of the device queue (`sync_write_depth_pct`, 1..=100, default 75; 100 disables).
    pub sync_write_depth_pct: u32,
    /// A non-seeky flow still within its first B_max/8 sectors is charged its service, not its time (`new_flow_charge_service`; report Sec. 4.4 item 1; `bfq` on, kernel off).
    pub new_flow_service: bool,
    /// A weight-raised seeky flow alone in its group whose turn reaches T_max while another group is busy, less than B_max/8 injected into it, is charged its time, as if not raised (`raised_group_time_charge`; `bfq` on, kernel off; `Bfq::raised_pays_time`).
    pub raised_group_time: bool,
}

impl ChargeConfig {
    /// 2010: over-charge on timeout only; no write throttling.
    pub fn paper_2010() -> Self {
        ChargeConfig {
            rule: ChargeRule::Paper2010,
            async_charge_factor: 1,
            write_charge_factor: 1,
            overcharge_asymmetric: false,
            async_depth_pct: 100,
            sync_write_depth_pct: 100,
            new_flow_service: false,
            raised_group_time: false,
        }
    }
}

/// The turn being charged.
#[derive(Clone, Copy, Debug)]
pub struct TurnInfo {
    /// Why the turn ended.
    pub reason: ExpireReason,
    /// Budget the turn was granted, in sectors.
    pub budget: u64,
    /// Service counted in the turn (with request over-charges).
    pub served: u64,
    /// How long the flow held the device.
    pub elapsed: Time,
    /// The flow was seeky when its turn ended.
    pub seeky: bool,
    /// The flow was weight-raised during the turn.
    pub raised: bool,
    /// The flow is just starting and `new_flow_charge_service` is on: it
    /// has received at most B_max/8 since it began doing I/O.
    pub starting: bool,
    /// B_max at the end of the turn, in sectors.
    pub max_budget: u64,
    /// T_max, the turn's budget timeout, in ns.
    pub timeout: Time,
    /// The least time a slow turn is charged when it held the device
    /// under 1 ms (kernel: one seek, `slice_idle`, on a disk; `BFQ_MIN_TT`,
    /// 2 ms, on a non-rotational device); 0 when the turn's time is not to
    /// be charged at all (its injected requests shared it).
    pub min_time: Time,
}

/// What a turn costs the flow in B-WF2Q+ (>= the service counted).
pub fn turn_charge(rule: ChargeRule, t: &TurnInfo) -> u64 {
    match rule {
        // 2010 paper Sec. III-D: a flow that does not consume its budget
        // within T_max "is unconditionally (over)charged for a B_i,max
        // service" (B_i,max = B_max with the simplified interface).
        ChargeRule::Paper2010 => match t.reason {
            ExpireReason::Timeout => t.max_budget.max(t.served),
            _ => t.served,
        },
        ChargeRule::Plus2014 => {
            // Report Sec. 3.5 and 4.3: a flow that hits the budget timeout
            // (a random one) is still over-charged its whole budget in
            // BFQ+; the 4.4 refinements only spare it when it consumed at
            // least 2/3 of the budget (item 2, "never"). The little-service
            // exemption (item 1) is for *slow* flows deactivated for
            // another reason (BFQ-v1: `slow || (timeout && budget_left >=
            // budget / 3)`).
            let timeout = t.reason == ExpireReason::Timeout;
            // Slow: at this rate the budget would not fit in T_max.
            let slow = !timeout
                && t.elapsed > 0
                && u128::from(t.served) * u128::from(t.timeout)
                    < u128::from(t.budget) * u128::from(t.elapsed)
                && t.reason != ExpireReason::BudgetExhausted;
            let little = t.served <= t.max_budget / 8;
            let most = 3 * t.served >= 2 * t.budget;
            if ((slow && !little) || timeout) && !most && !t.raised {
                t.budget.max(t.served)
            } else {
                t.served
            }
        }
        ChargeRule::Kernel => {
            if t.raised || (t.starting && !t.seeky) {
                return t.served;
            }
            // Kernel `bfq_bfqq_is_slow`: over 20 ms a turn is slow if it
            // served under half of B_max; shorter turns are slow if the
            // flow is seeky (a random reader's one-request turn costs the
            // disk a seek, not its 8 sectors).
            let slow = if t.elapsed > 20 * MS {
                t.served < t.max_budget / 2
            } else {
                t.seeky
            };
            let timeout_left = t.reason == ExpireReason::Timeout
                && 3 * t.budget.saturating_sub(t.served) >= t.budget;
            if slow || timeout_left {
                // Kernel `bfq_bfqq_charge_time`: the time is bounded by
                // the timeout.
                let tt = if t.elapsed < MS {
                    t.min_time
                } else {
                    t.elapsed
                }
                .min(t.timeout);
                // At most max_budget: tt is at most the timeout.
                let by_time = mul_div(t.max_budget, tt, t.timeout.max(1)).unwrap_or(0);
                by_time.max(t.served)
            } else {
                t.served
            }
        }
    }
}

/// `a * b / c` without overflow, saturated at `u64::MAX`; `None` when
/// `c` is 0. Divided in 64 bits when the product fits: the same quotient
/// as in 128 bits, without the 128-bit division's library call (a seeky
/// flow is charged its time at every turn, and a random reader's turn is
/// one request).
#[inline]
pub(super) fn mul_div(a: u64, b: u64, c: u64) -> Option<u64> {
    match a.checked_mul(b) {
        Some(p) => p.checked_div(c),
        None => (u128::from(a) * u128::from(b))
            .checked_div(u128::from(c))
            .map(|q| q.min(u128::from(u64::MAX)) as u64),
    }
}

/// Budget/service cost of one request of `sectors`.
#[inline]
pub fn request_charge(
    cfg: &ChargeConfig,
    sectors: u64,
    op: Op,
    sync: bool,
    raised: bool,
    asymmetric: bool,
) -> u64 {
    if raised || (asymmetric && !cfg.overcharge_asymmetric) {
        return sectors;
    }
    let mut f = 1;
    if !sync {
        f = cfg.async_charge_factor;
    }
    if op == Op::Write {
        f = f.max(cfg.write_charge_factor);
    }
    sectors * f
}

/// Whether one more request of this kind may go to a device of `depth`
/// slots holding `async_in`/`sync_write_in` such requests.
#[inline]
pub fn depth_allows(
    cfg: &ChargeConfig,
    depth: u32,
    op: Op,
    sync: bool,
    async_in: u32,
    sync_write_in: u32,
    raised_busy: bool,
) -> bool {
    let lim = |pct: u32| {
        let pct = if raised_busy && pct < 100 {
            pct / 2
        } else {
            pct
        };
        (depth * pct / 100).max(1)
    };
    if !sync {
        cfg.async_depth_pct >= 100 || async_in < lim(cfg.async_depth_pct)
    } else if op == Op::Write {
        cfg.sync_write_depth_pct >= 100 || sync_write_in < lim(cfg.sync_write_depth_pct)
    } else {
        true
    }
}

/// Asynchronous and synchronous-write requests in flight, against their
/// device-queue limits.
#[derive(Clone, Copy, Debug, Default)]
pub struct DeviceSlots {
    /// Asynchronous requests in flight.
    pub async_in: u32,
    /// Synchronous writes in flight.
    pub sync_write_in: u32,
}

impl DeviceSlots {
    /// Whether `r` may go to a device of `depth` slots now.
    #[inline]
    pub fn allows(&self, cfg: &ChargeConfig, depth: u32, r: &Request, raised_busy: bool) -> bool {
        depth_allows(
            cfg,
            depth,
            r.op,
            r.sync,
            self.async_in,
            self.sync_write_in,
            raised_busy,
        )
    }

    /// The slot `r` takes (dispatched) or gives back (completed).
    fn slot(&mut self, r: &Request) -> Option<&mut u32> {
        if !r.sync {
            Some(&mut self.async_in)
        } else if r.op == Op::Write {
            Some(&mut self.sync_write_in)
        } else {
            None
        }
    }

    /// `r` was dispatched.
    #[inline]
    pub fn take(&mut self, r: &Request) {
        if let Some(n) = self.slot(r) {
            *n += 1;
        }
    }

    /// `r` completed.
    #[inline]
    pub fn give(&mut self, r: &Request) {
        if let Some(n) = self.slot(r) {
            *n -= 1;
        }
    }
}

impl ChargeConfig {
    /// The charging settings over profile `d` (docs/bfq-settings.md).
    pub(crate) fn with_settings(d: &ChargeConfig, s: &mut Settings) -> Result<Self, SchedError> {
        let pct = |s: &mut Settings, key: &str, v: u32| -> Result<u32, SchedError> {
            Ok(s.u64_in(key, u64::from(v), 1, 100)? as u32)
        };
        Ok(ChargeConfig {
            rule: s.word("time_charging", d.rule, ChargeRule::WORDS)?,
            async_charge_factor: s.u64_in("async_charge_factor", d.async_charge_factor, 1, 100)?,
            write_charge_factor: s.u64_in("write_charge_factor", d.write_charge_factor, 1, 100)?,
            overcharge_asymmetric: s.bool("async_charge_asymmetric", d.overcharge_asymmetric)?,
            async_depth_pct: pct(s, "async_depth_pct", d.async_depth_pct)?,
            sync_write_depth_pct: pct(s, "sync_write_depth_pct", d.sync_write_depth_pct)?,
            new_flow_service: s.bool("new_flow_charge_service", d.new_flow_service)?,
            raised_group_time: s.bool("raised_group_time_charge", d.raised_group_time)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `mul_div` gives the 128-bit quotient whether or not the product
    /// fits in 64 bits, saturated at `u64::MAX`, and `None` for `c` = 0.
    #[test]
    fn mul_div_matches_the_128_bit_quotient() {
        let wide = |a: u64, b: u64, c: u64| {
            let q = u128::from(a) * u128::from(b) / u128::from(c);
            Some(q.min(u128::from(u64::MAX)) as u64)
        };
        let cases = [
            (16384, 125 * MS, 125 * MS),
            (16384, 3 * MS + 7, 125 * MS),
            (u64::MAX / 3, 2, 3),
            (1 << 40, 1 << 40, 1 << 30),
            (u64::MAX, u64::MAX, u64::MAX),
            (u64::MAX, u64::MAX, 1),
            (0, u64::MAX, 1),
        ];
        for (a, b, c) in cases {
            assert_eq!(mul_div(a, b, c), wide(a, b, c), "{a} * {b} / {c}");
        }
        assert_eq!(mul_div(u64::MAX, 2, 0), None);
        assert_eq!(mul_div(3, 2, 0), None);
    }

    fn turn(reason: ExpireReason, served: u64, elapsed: Time) -> TurnInfo {
        TurnInfo {
            reason,
            budget: 8192,
            served,
            elapsed,
            seeky: false,
            raised: false,
            starting: false,
            max_budget: 16384,
            timeout: 125 * MS,
            min_time: 8 * MS,
        }
    }

    #[test]
    fn kernel_charges_slow_flows_for_time() {
        use ExpireReason::*;
        // Served little over 62.5 ms: half of B_max.
        assert_eq!(
            turn_charge(ChargeRule::Kernel, &turn(TooIdle, 100, 62_500_000)),
            8192
        );
        // Fast flow: charged its service.
        assert_eq!(
            turn_charge(ChargeRule::Kernel, &turn(BudgetExhausted, 8192, 30 * MS)),
            8192
        );
        assert_eq!(
            turn_charge(ChargeRule::Kernel, &turn(TooIdle, 100, 5 * MS)),
            100
        );
        // A seeky flow's short turn is charged its time (one 10 ms seek:
        // 16384 x 10 / 125), and under 1 ms at least one seek's 8 ms.
        let mut r = turn(NoMoreRequests, 8, 10 * MS);
        r.seeky = true;
        assert_eq!(turn_charge(ChargeRule::Kernel, &r), 1310);
        r.elapsed = MS / 2;
        assert_eq!(turn_charge(ChargeRule::Kernel, &r), 1048);
        // A seek's time longer than T_max is bounded by it.
        r.min_time = 3600 * 1000 * MS;
        assert_eq!(turn_charge(ChargeRule::Kernel, &r), 16384);
        // Seeky but served B_max / 2 in over 20 ms: not slow.
        let mut r = turn(BudgetExhausted, 8192, 30 * MS);
        r.seeky = true;
        assert_eq!(turn_charge(ChargeRule::Kernel, &r), 8192);
        let mut r = turn(Timeout, 100, 125 * MS);
        assert_eq!(turn_charge(ChargeRule::Kernel, &r), 16384);
        r.raised = true;
        assert_eq!(turn_charge(ChargeRule::Kernel, &r), 100);
    }

    #[test]
    fn report_exemptions() {
        use ExpireReason::*;
        // Timeout after little service (a random flow): still
        // over-charged its whole budget (report 3.5, 4.3).
        assert_eq!(
            turn_charge(ChargeRule::Plus2014, &turn(Timeout, 2000, 125 * MS)),
            8192
        );
        // Slow (not timed out) after little service (<= B_max/8): not
        // over-charged (report 4.4 item 1).
        assert_eq!(
            turn_charge(ChargeRule::Plus2014, &turn(TooIdle, 2000, 100 * MS)),
            2000
        );
        assert_eq!(
            turn_charge(ChargeRule::Plus2014, &turn(TooIdle, 3000, 100 * MS)),
            8192
        );
        // Timeout having consumed 2/3: not over-charged.
        assert_eq!(
            turn_charge(ChargeRule::Plus2014, &turn(Timeout, 6000, 125 * MS)),
            6000
        );
        assert_eq!(
            turn_charge(ChargeRule::Plus2014, &turn(Timeout, 4000, 125 * MS)),
            8192
        );
        // 2010: over-charged B_max (not the flow's own, smaller budget).
        assert_eq!(
            turn_charge(ChargeRule::Paper2010, &turn(Timeout, 2000, 125 * MS)),
            16384
        );
    }

    #[test]
    fn write_overcharge_and_limits() {
        let mut c = ChargeConfig::paper_2010();
        c.async_charge_factor = 3;
        assert_eq!(request_charge(&c, 8, Op::Write, false, false, false), 24);
        assert_eq!(request_charge(&c, 8, Op::Write, false, true, false), 8);
        assert_eq!(request_charge(&c, 8, Op::Write, false, false, true), 8);
        assert_eq!(request_charge(&c, 8, Op::Read, true, false, false), 8);
        c.write_charge_factor = 10;
        assert_eq!(request_charge(&c, 8, Op::Write, true, false, false), 80);
        c.async_depth_pct = 50;
        assert!(depth_allows(&c, 32, Op::Write, false, 15, 0, false));
        assert!(!depth_allows(&c, 32, Op::Write, false, 16, 0, false));
        assert!(!depth_allows(&c, 32, Op::Write, false, 8, 0, true));
        assert!(depth_allows(&c, 1, Op::Write, false, 0, 0, true));
    }

    #[test]
    fn a_starting_flow_is_charged_its_service_unless_seeky() {
        // A bash-like turn: timed out after T_max with 1920 sectors served.
        let mut r = turn(ExpireReason::Timeout, 1920, 125 * MS);
        assert_eq!(turn_charge(ChargeRule::Kernel, &r), 16384);
        r.starting = true;
        assert_eq!(turn_charge(ChargeRule::Kernel, &r), 1920);
        r.seeky = true;
        assert_eq!(turn_charge(ChargeRule::Kernel, &r), 16384);
    }
}
