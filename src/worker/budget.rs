//! The usage budget of an attempt (`max_turns`, `max_tokens`, `max_cost`), checked after
//! each event the adapter read: the first limit crossed stops the agent (the stop machine's
//! [`Event::BudgetCrossed`](super::stop::Event::BudgetCrossed)).
//!
//! A limit is crossed when the figure passes it (more turns than `max_turns`): an agent that
//! ends within its budget completes. Turns come first, then tokens, then cost, when one event
//! crosses several.

use serde_json::Number;

use crate::envelope::{BudgetHit, BudgetLimit, BudgetUsage, SoFar};
use crate::spec::Limits;

/// The limits of a budget; checks usage against them.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Budget {
    max_turns: Option<u64>,
    max_tokens: Option<u64>,
    max_cost_usd: Option<f64>,
}

impl Budget {
    pub(crate) fn new(limits: &Limits) -> Self {
        Self {
            max_turns: limits.max_turns,
            max_tokens: limits.max_tokens,
            max_cost_usd: limits.max_cost_usd.map(|c| c.0),
        }
    }

    /// Whether any limit is set (else nothing need be checked).
    pub(crate) fn any(&self) -> bool {
        self.max_turns.is_some() || self.max_tokens.is_some() || self.max_cost_usd.is_some()
    }

    /// The first limit `s` crossed, with the usage at that point; `None` within the budget.
    pub(crate) fn crossed(&self, s: &SoFar) -> Option<BudgetHit> {
        let tokens = s.total_tokens();
        let hit = |limit, value: Number, reached: Number| BudgetHit {
            limit,
            value,
            reached,
            usage: BudgetUsage {
                total_tokens: tokens,
                turns: s.turns,
                cost_usd: s.cost_usd.and_then(Number::from_f64),
            },
        };
        if let (Some(max), Some(t)) = (self.max_turns, s.turns)
            && t > max
        {
            return Some(hit(BudgetLimit::MaxTurns, max.into(), t.into()));
        }
        if let (Some(max), Some(t)) = (self.max_tokens, tokens)
            && t > max
        {
            return Some(hit(BudgetLimit::MaxTokens, max.into(), t.into()));
        }
        if let (Some(max), Some(c)) = (self.max_cost_usd, s.cost_usd)
            && c > max
        {
            let num = |v: f64| Number::from_f64(v).unwrap_or_else(|| 0.into());
            return Some(hit(BudgetLimit::MaxCost, num(max), num(c)));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::Usage;
    use crate::spec::Usd;

    fn so_far(tokens: Option<u64>, turns: Option<u64>, cost: Option<f64>) -> SoFar {
        SoFar {
            usage: tokens.map(|t| Usage {
                input_tokens: Some(t - t / 4),
                output_tokens: Some(t / 4),
                ..Usage::default()
            }),
            cost_usd: cost,
            turns,
            tool_calls: None,
        }
    }

    fn budget(turns: Option<u64>, tokens: Option<u64>, cost: Option<f64>) -> Budget {
        Budget::new(&Limits {
            max_turns: turns,
            max_tokens: tokens,
            max_cost_usd: cost.map(Usd),
            ..Limits::default()
        })
    }

    #[test]
    fn no_limit_is_no_budget() {
        let b = budget(None, None, None);
        assert!(!b.any());
        assert_eq!(
            b.crossed(&so_far(Some(1 << 40), Some(1 << 20), Some(1e9))),
            None
        );
    }

    /// At the limit is within it; one past it crosses, and says where.
    #[test]
    fn a_limit_is_crossed_when_passed_not_when_reached() {
        let b = budget(Some(2), None, None);
        assert!(b.any());
        assert_eq!(b.crossed(&so_far(None, Some(2), None)), None);
        let hit = b.crossed(&so_far(Some(400), Some(3), None)).unwrap();
        assert_eq!(hit.limit, BudgetLimit::MaxTurns);
        assert_eq!(
            (hit.value.as_u64(), hit.reached.as_u64()),
            (Some(2), Some(3))
        );
        assert_eq!(hit.usage.total_tokens, Some(400));
        assert_eq!(hit.words(), "budget max_turns 2 crossed at 3 turns");

        let b = budget(None, Some(1000), None);
        assert_eq!(b.crossed(&so_far(Some(1000), Some(9), None)), None);
        let hit = b.crossed(&so_far(Some(1234), Some(9), None)).unwrap();
        assert_eq!(hit.words(), "budget max_tokens 1000 crossed at 1234 tokens");
        assert_eq!(hit.usage.turns, Some(9));

        let b = budget(None, None, Some(0.5));
        assert_eq!(b.crossed(&so_far(None, None, Some(0.5))), None);
        let hit = b.crossed(&so_far(None, None, Some(0.75))).unwrap();
        assert_eq!(hit.limit, BudgetLimit::MaxCost);
        assert_eq!(hit.words(), "budget max_cost $0.5 crossed at $0.75");
        assert_eq!(hit.usage.cost_usd.and_then(|c| c.as_f64()), Some(0.75));
    }

    /// Tokens are the sum of the parts when the CLI gives no total, cache included; the
    /// total when it gives one.
    #[test]
    fn tokens_count_input_output_and_cache() {
        let b = budget(None, Some(100), None);
        let parts = |input, output, cache_read, cache_write| SoFar {
            usage: Some(Usage {
                input_tokens: Some(input),
                output_tokens: Some(output),
                cache_read_tokens: Some(cache_read),
                cache_write_tokens: Some(cache_write),
                total_tokens: None,
            }),
            ..SoFar::default()
        };
        assert_eq!(b.crossed(&parts(40, 20, 20, 20)), None);
        let hit = b.crossed(&parts(40, 20, 20, 21)).unwrap();
        assert_eq!(hit.reached.as_u64(), Some(101));
        let mut total = parts(1, 1, 1, 1);
        total.usage.as_mut().unwrap().total_tokens = Some(150);
        assert_eq!(b.crossed(&total).unwrap().reached.as_u64(), Some(150));
    }

    /// A figure the agent never reported crosses nothing (codex's cost, a command's usage).
    #[test]
    fn an_unreported_figure_crosses_nothing() {
        let b = budget(Some(1), Some(1), Some(0.01));
        assert_eq!(b.crossed(&SoFar::default()), None);
    }

    /// One event crossing several limits names the first: turns, tokens, cost.
    #[test]
    fn the_first_limit_in_order_is_named() {
        let b = budget(Some(1), Some(10), Some(0.01));
        let all = so_far(Some(100), Some(5), Some(1.0));
        assert_eq!(b.crossed(&all).unwrap().limit, BudgetLimit::MaxTurns);
        let no_turns = so_far(Some(100), None, Some(1.0));
        assert_eq!(b.crossed(&no_turns).unwrap().limit, BudgetLimit::MaxTokens);
    }
}
