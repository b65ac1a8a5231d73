//! Budgets: how many sectors a flow may be served per turn, and what a turn
//! costs it. 2010 paper Sec. II-B/II-C and Fig. 3 lines 24-38 and 59-66;
//! Sec. III-D for T_max and the over-charge.
//!
//! - Budget exhausted (the next request does not fit): the budget grows
//!   linearly by `budget_inc_step`, up to B_max (Fig. 3 lines 30-34).
//! - No more requests (idle after T_wait, or a non-idling flow emptied):
//!   the next budget is the service consumed (Fig. 3 lines 60-61).
//! - Budget timeout (the turn lasted T_max, default 125 ms): the flow is
//!   charged its whole budget, so that slow, random flows cannot steal
//!   disk time (Sec. III-D); the budget is kept.
//!
//! Defaults: B_max 16384 sectors; the paper leaves the initial budget and
//! the step configurable; we start every flow at B_max/4 and step by B_max/8.
//! The BFQ+ feedback rules (issue "BFQ+ heuristics") plug in here.

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
}

/// Budget parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BudgetConfig {
    /// B_max, in sectors.
    pub max_budget: u64,
    /// Budget of a new flow.
    pub initial_budget: u64,
    /// Linear increase on exhaustion.
    pub inc_step: u64,
    /// Smallest budget ever assigned.
    pub min_budget: u64,
}

impl BudgetConfig {
    /// The 2010 paper's scheme for a given B_max.
    pub fn paper_2010(max_budget: u64) -> Self {
        BudgetConfig {
            max_budget,
            initial_budget: (max_budget / 4).max(1),
            inc_step: (max_budget / 8).max(1),
            min_budget: (max_budget / 32).max(1),
        }
    }

    /// What the turn costs the flow in the scheduler: the service received,
    /// or the whole budget on a timeout (over-charge).
    pub fn charge(&self, reason: ExpireReason, budget: u64, served: u64) -> u64 {
        match reason {
            ExpireReason::Timeout => budget.max(served),
            _ => served,
        }
    }

    /// The flow's next budget (2010 paper: linear increase, set to the
    /// consumed service on idling).
    pub fn next_budget(&self, reason: ExpireReason, budget: u64, served: u64) -> u64 {
        let b = match reason {
            ExpireReason::BudgetExhausted => budget.saturating_add(self.inc_step),
            ExpireReason::TooIdle | ExpireReason::NoMoreRequests => served,
            ExpireReason::Timeout | ExpireReason::Removed => budget,
        };
        b.clamp(self.min_budget, self.max_budget)
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
        assert_eq!(c.charge(ExpireReason::Timeout, 4096, 100), 4096);
        assert_eq!(c.charge(ExpireReason::TooIdle, 4096, 100), 100);
    }
}
