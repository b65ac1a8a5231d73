//! Budgets: how many sectors a flow may be served per turn, and how the
//! next budget follows from how the turn ended (H-throughput).
//!
//! Three feedback rule sets, selected by `budget_feedback`:
//!
//! - `2010` (2010 paper, Fig. 3 lines 24-38 and 59-66): exhaustion grows the
//!   budget linearly by `budget_inc_step`; no more requests sets it to the
//!   service consumed; a budget timeout keeps it. Initial budget B_max:
//!   "BFQ assigns the maximum possible budget B_max to a just-created
//!   application" (2014 report, Sec. 4.3, of the BFQ it compares with).
//! - `bfq-plus-2014` (2014 report, Sec. 4.3, multiplicative increase /
//!   linear decrease): no more backlog with requests still in flight
//!   doubles the budget proactively, without requests in flight decreases
//!   it by B_max/8; budget timeout doubles it; exhaustion multiplies it by
//!   four. Initial budget B_max/2.
//! - `kernel` (today's Linux BFQ, the default; Linux's
//!   `__bfq_bfqq_recalc_budget`): too idle with requests in flight
//!   min(2b, B_max), else b - 4*B_min when b > 5*B_min, otherwise B_min;
//!   timeout min(2b, B_max); exhaustion min(4b, B_max); no more requests
//!   (a flow that does not idle) max(service, B_min). Weight-raised flows
//!   get 2*B_min, asynchronous flows B_max. Initial budget 2/3 of B_max.
//!
//! With injection (heuristic 7, [`super::injection`]), a turn that hits
//! the timeout because other flows' requests were injected into it sets
//! the next budget to the service it got (what fits in T_max next to the
//! injected requests) instead of doubling it: the flow was not slow, it
//! shared the device, and an oversized budget makes B-WF2Q+ timestamp it
//! with an F far beyond what it will consume, delaying its turns (a
//! weight-100 reader among 1:2:3:4:5 ones got 91% of its share). A turn
//! charged its time at T_max for the other groups it shared the device
//! with is not such a turn: its budget doubles (`Bfq::next_budget`).
//!
//! Every rule is capped at B_max and floored at B_min = B_max/32. When
//! B_max is auto-tuned from the peak rate ([`super::peak_rate`]), the
//! derived budgets are rescaled with it ([`BudgetConfig::rescale`]).
//!
//! What a turn *costs* (time charging of slow flows, write over-charge) is
//! in [`super::charging`].
use crate::error::SchedError;
use crate::settings::Settings;

/// Why the active flow's turn ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpireReason {
    /// The next request did not fit in the remaining budget.
    BudgetExhausted,
    /// No request arrived within T_wait after the queue emptied.
    TooIdle,
    /// The queue emptied and the flow does not idle.
    NoMoreRequests,
    /// The turn lasted T_max (budget timeout).
    Timeout,
    /// The flow was removed.
    Removed,
    /// A waking flow preempted it (heuristic 9, [`super::preemption`]).
    Preempted,
}

/// Which budget feedback rules are in force.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Feedback {
    /// 2010 paper: linear increase, set to the consumed service.
    Paper2010,
    /// 2014 report (BFQ+): x2 / x4 / minus B_max/8.
    Plus2014,
    /// Today's kernel (default).
    Kernel,
}

impl Feedback {
    /// Every spelling of `budget_feedback`, names first.
    pub const WORDS: &'static [(&'static str, Feedback)] = &[
        ("kernel", Feedback::Kernel),
        ("bfq-plus-2014", Feedback::Plus2014),
        ("2010", Feedback::Paper2010),
        ("plus", Feedback::Plus2014),
        ("report", Feedback::Plus2014),
        ("2014", Feedback::Plus2014),
        ("paper", Feedback::Paper2010),
        ("bfq-2010", Feedback::Paper2010),
    ];
}

/// What the feedback rules need to know about the flow besides the turn.
#[derive(Clone, Copy, Debug, Default)]
pub struct FeedbackCtx {
    /// Requests of the flow still in flight at expiry.
    pub in_flight: bool,
    /// The flow is weight-raised.
    pub raised: bool,
    /// The flow's latest request was asynchronous.
    pub async_flow: bool,
    /// Other flows' requests were injected into the turn (heuristic 7).
    pub injected: bool,
}

/// Budget parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BudgetConfig {
    /// B_max, in sectors (the current value when auto-tuned).
    pub max_budget: u64,
    /// Budget of a new flow.
    pub initial_budget: u64,
    /// Linear increase on exhaustion (2010 rules only).
    pub inc_step: u64,
    /// Smallest budget ever assigned.
    pub min_budget: u64,
    /// Feedback rules.
    pub feedback: Feedback,
    /// Initial budget as a percentage of B_max (used when rescaling).
    pub initial_pct: u64,
    /// Kernel rules: weight-raised sync flows get the ordinary feedback
    /// (and a new raised flow keeps the initial budget) instead of the
    /// constant 2 x B_min (`wr_budget_feedback`; this project's rule, not
    /// the kernel's). 2 x B_min is smaller than a start-up burst (2014
    /// report Sec. 7.3: bash reads ~1650 sectors; 2 x B_min ~1100 on its
    /// disk), so the application waits for other flows' turns between its
    /// budgets; and greedy flows raised at creation crawl through their
    /// raising period in tiny turns, each a device switch.
    pub raised_feedback: bool,
    /// A weight-raised flow in a group other than the root is timestamped
    /// in B-WF2Q+ with at most the kernel's raised budget, 2 x B_min
    /// (`raised_group_order`; this project's rule), while its turn keeps
    /// its own budget. Raising multiplies a flow's weight within its group
    /// only, so its group's F = S + budget / w_group; with
    /// `wr_budget_feedback` that budget is ~2/3 B_max and an application
    /// alone in its group waited for most other groups' turns, where the
    /// kernel's small raised budget puts its group first (2010 paper
    /// Sec. II-D: the next entity is the eligible one of least F). The
    /// turn is still charged its service at its end.
    pub raised_group_order: bool,
}

impl BudgetConfig {
    /// The 2010 paper's scheme for a given B_max.
    pub fn paper_2010(max_budget: u64) -> Self {
        BudgetConfig {
            max_budget,
            initial_budget: max_budget.max(1),
            inc_step: (max_budget / 8).max(1),
            min_budget: (max_budget / 32).max(1),
            feedback: Feedback::Paper2010,
            initial_pct: 100,
            raised_feedback: false,
            raised_group_order: false,
        }
    }

    /// A scheme with the given rules and initial budget percentage.
    pub fn with_rules(max_budget: u64, feedback: Feedback, initial_pct: u64) -> Self {
        let mut b = BudgetConfig::paper_2010(max_budget);
        b.feedback = feedback;
        b.initial_pct = initial_pct;
        b.rescale(max_budget);
        b
    }

    /// Sets a new B_max and the budgets derived from it (initial budget,
    /// step, B_min = B_max/32).
    pub fn rescale(&mut self, max_budget: u64) {
        let m = max_budget.max(32);
        self.max_budget = m;
        self.initial_budget = (m * self.initial_pct / 100).max(1);
        self.inc_step = (m / 8).max(1);
        self.min_budget = (m / 32).max(1);
    }

    /// The flow's next budget (2010 rules; context-free form).
    pub fn next_budget(&self, reason: ExpireReason, budget: u64, served: u64) -> u64 {
        self.next_budget_with(reason, budget, served, FeedbackCtx::default())
    }

    /// The flow's next budget under the configured feedback rules.
    pub fn next_budget_with(
        &self,
        reason: ExpireReason,
        budget: u64,
        served: u64,
        ctx: FeedbackCtx,
    ) -> u64 {
        let (min, max) = (self.min_budget, self.max_budget);
        use ExpireReason::*;
        let b = match self.feedback {
            Feedback::Paper2010 => match reason {
                BudgetExhausted => budget.saturating_add(self.inc_step),
                TooIdle | NoMoreRequests => served,
                Timeout | Removed | Preempted => budget,
            },
            Feedback::Plus2014 => match reason {
                TooIdle | NoMoreRequests if ctx.in_flight => budget.saturating_mul(2),
                TooIdle | NoMoreRequests => budget.saturating_sub(max / 8),
                Timeout if ctx.injected => served,
                Timeout => budget.saturating_mul(2),
                BudgetExhausted => budget.saturating_mul(4),
                Removed | Preempted => budget,
            },
            Feedback::Kernel => {
                if ctx.raised && !self.raised_feedback {
                    2 * min
                } else if ctx.async_flow {
                    max
                } else {
                    match reason {
                        TooIdle if ctx.in_flight => budget.saturating_mul(2),
                        TooIdle if budget > 5 * min => budget - 4 * min,
                        TooIdle => min,
                        NoMoreRequests => served.max(min),
                        Timeout if ctx.injected => served,
                        Timeout => budget.saturating_mul(2),
                        BudgetExhausted => budget.saturating_mul(4),
                        Removed | Preempted => budget,
                    }
                }
            }
        };
        b.clamp(min, max)
    }
}

impl BudgetConfig {
    /// The budget settings over profile `d` (docs/bfq-settings.md).
    /// `auto`: the profile learns B_max from the peak rate, so
    /// `max_budget` defaults to 0 (automatic). Returns the configuration
    /// and whether B_max is automatic.
    pub(crate) fn with_settings(
        d: &BudgetConfig,
        auto: bool,
        s: &mut Settings,
    ) -> Result<(Self, bool), SchedError> {
        let auto_default = if auto { 0 } else { d.max_budget };
        // 0: automatic; else at least 32, as B_min = B_max/32 must be a
        // whole sector.
        let max_setting = s.u64_zero_or_in("max_budget", auto_default, 32, 1 << 24)?;
        let auto = max_setting == 0;
        let max_budget = if auto {
            super::DEFAULT_MAX_BUDGET
        } else {
            max_setting
        };
        let feedback = s.word("budget_feedback", d.feedback, Feedback::WORDS)?;
        let initial_pct = s.u64_in("initial_budget_pct", d.initial_pct, 1, 100)?;
        let derived = BudgetConfig::with_rules(max_budget, feedback, initial_pct);
        let budget = BudgetConfig {
            max_budget,
            initial_budget: s.u64_in("initial_budget", derived.initial_budget, 1, max_budget)?,
            inc_step: s.u64_in("budget_inc_step", derived.inc_step, 1, max_budget)?,
            min_budget: s.u64_in("min_budget", derived.min_budget, 1, max_budget)?,
            feedback,
            initial_pct,
            raised_feedback: s.bool("wr_budget_feedback", d.raised_feedback)?,
            raised_group_order: s.bool("raised_group_order", d.raised_group_order)?,
        };
        Ok((budget, auto))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_rules() {
        let c = BudgetConfig::paper_2010(16384);
        assert_eq!(
            c.next_budget(ExpireReason::BudgetExhausted, 4096, 4096),
            4096 + 2048
        );
        assert_eq!(
            c.next_budget(ExpireReason::BudgetExhausted, 16000, 16000),
            16384
        );
        assert_eq!(c.next_budget(ExpireReason::TooIdle, 4096, 1000), 1000);
        assert_eq!(c.next_budget(ExpireReason::TooIdle, 4096, 1), 512);
    }

    #[test]
    fn plus_and_kernel_rules() {
        let p = BudgetConfig::with_rules(16384, Feedback::Plus2014, 50);
        assert_eq!(p.initial_budget, 8192);
        let inflight = FeedbackCtx {
            in_flight: true,
            ..FeedbackCtx::default()
        };
        let none = FeedbackCtx::default();
        use ExpireReason::*;
        assert_eq!(p.next_budget_with(TooIdle, 4096, 10, inflight), 8192);
        assert_eq!(p.next_budget_with(TooIdle, 4096, 10, none), 4096 - 2048);
        assert_eq!(p.next_budget_with(Timeout, 4096, 10, none), 8192);
        assert_eq!(p.next_budget_with(BudgetExhausted, 4096, 4096, none), 16384);
        let k = BudgetConfig::with_rules(16384, Feedback::Kernel, 66);
        assert_eq!(k.min_budget, 512);
        assert_eq!(k.next_budget_with(TooIdle, 4096, 10, inflight), 8192);
        assert_eq!(k.next_budget_with(TooIdle, 4096, 10, none), 4096 - 2048);
        assert_eq!(k.next_budget_with(TooIdle, 2000, 10, none), 512);
        assert_eq!(k.next_budget_with(NoMoreRequests, 4096, 100, none), 512);
        assert_eq!(k.next_budget_with(NoMoreRequests, 4096, 1000, none), 1000);
        assert_eq!(k.next_budget_with(BudgetExhausted, 8192, 8192, none), 16384);
        let raised = FeedbackCtx {
            raised: true,
            ..none
        };
        assert_eq!(
            k.next_budget_with(BudgetExhausted, 8192, 8192, raised),
            1024
        );
        let asy = FeedbackCtx {
            async_flow: true,
            ..none
        };
        assert_eq!(k.next_budget_with(TooIdle, 1024, 1, asy), 16384);
    }

    #[test]
    fn a_timeout_with_injection_sets_the_budget_to_the_service() {
        // Heuristic 7: a turn that hit T_max because other flows' requests
        // were injected into it was not slow, it shared the device: the
        // next budget is what it got, not twice its budget.
        use ExpireReason::*;
        let injected = FeedbackCtx {
            injected: true,
            ..FeedbackCtx::default()
        };
        let both = FeedbackCtx {
            in_flight: true,
            ..injected
        };
        for (feedback, pct) in [(Feedback::Kernel, 66), (Feedback::Plus2014, 50)] {
            let c = BudgetConfig::with_rules(16384, feedback, pct);
            assert_eq!(c.next_budget_with(Timeout, 4096, 3000, injected), 3000);
            assert_eq!(c.next_budget_with(Timeout, 4096, 3000, both), 3000);
            // Floored at B_min, like every rule.
            assert_eq!(c.next_budget_with(Timeout, 4096, 100, injected), 512);
            // Without injection a timeout still doubles the budget.
            let none = FeedbackCtx::default();
            assert_eq!(c.next_budget_with(Timeout, 4096, 3000, none), 8192);
            // Other reasons are unchanged by injection.
            assert_eq!(
                c.next_budget_with(BudgetExhausted, 4096, 4096, injected),
                16384
            );
        }
        // The 2010 rules keep the budget on a timeout either way.
        let p = BudgetConfig::paper_2010(16384);
        assert_eq!(p.next_budget_with(Timeout, 4096, 3000, injected), 4096);
    }
}
