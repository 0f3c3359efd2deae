//! The envelope's `budget`: the limit of its budget that stopped an agent, and its usage then;
//! and the [`Budget`] that finds it.
//!
//! The usage budget of an attempt (`max_turns`, `max_tokens`, `max_cost`) is checked by its
//! worker after each event the adapter read: the first limit crossed stops the agent (the
//! stop machine's `Event::BudgetCrossed`). A fan-out group's (`max_tokens`, `max_cost`) is
//! checked by its driver over the usage of all its tasks.
//!
//! A limit is crossed when the figure passes it (more turns than `max_turns`): an agent that
//! ends within its budget completes. Turns come first, then tokens, then cost, when one event
//! crosses several.

use serde::{Deserialize, Serialize};
use serde_json::Number;

use super::SoFar;
use crate::spec::Limits;

/// The limit of a budget that stopped an agent: the envelope's `budget`. A fan-out group's
/// budget names the group, and its usage is the group's (all its tasks') at the stop.
///
/// ```json
/// {"limit": "max_tokens", "value": 1000, "reached": 1234,
///  "usage": {"total_tokens": 1234, "turns": 2, "cost_usd": null}}
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetHit {
    /// The field: `max_turns`, `max_tokens` or `max_cost`.
    pub limit: BudgetLimit,
    /// Its value (turns, tokens, or US dollars).
    pub value: serde_json::Number,
    /// The figure that crossed it, when the agent was stopped.
    pub reached: serde_json::Number,
    /// The agent's usage when it was stopped (its group's, for a group's budget).
    pub usage: BudgetUsage,
    /// The fan-out group whose budget this is; absent for the run's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
}

/// A limit of a budget, named as its field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetLimit {
    MaxTurns,
    MaxTokens,
    MaxCost,
}

impl BudgetLimit {
    pub fn as_str(self) -> &'static str {
        match self {
            BudgetLimit::MaxTurns => "max_turns",
            BudgetLimit::MaxTokens => "max_tokens",
            BudgetLimit::MaxCost => "max_cost",
        }
    }
}

/// An agent's usage when its budget stopped it (what its CLI had reported by then).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetUsage {
    pub total_tokens: Option<u64>,
    pub turns: Option<u64>,
    pub cost_usd: Option<serde_json::Number>,
}

impl BudgetHit {
    /// For people: `budget max_tokens 1000 crossed at 1234 tokens`.
    pub fn words(&self) -> String {
        let (value, reached) = match self.limit {
            BudgetLimit::MaxTurns => (self.value.to_string(), format!("{} turns", self.reached)),
            BudgetLimit::MaxTokens => (self.value.to_string(), format!("{} tokens", self.reached)),
            BudgetLimit::MaxCost => (format!("${}", self.value), format!("${}", self.reached)),
        };
        let whose = match &self.group {
            Some(g) => format!("group {g}'s "),
            None => String::new(),
        };
        format!(
            "{whose}budget {} {value} crossed at {reached}",
            self.limit.as_str()
        )
    }
}

/// The limits of a budget; checks usage against them.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Budget {
    max_turns: Option<u64>,
    max_tokens: Option<u64>,
    max_cost_usd: Option<f64>,
    /// What the resumed session used before this attempt (`Limits::session_before`): the
    /// figures the attempt reports are added to it.
    before: Before,
    /// The model's price (`--price`): the cost of usage the CLI reports no cost for.
    price: Option<crate::spec::Price>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Before {
    tokens: u64,
    turns: u64,
    cost_usd: f64,
}

impl Budget {
    pub(crate) fn new(limits: &Limits) -> Self {
        let before = limits
            .session_before
            .as_ref()
            .map_or_else(Before::default, |b| Before {
                tokens: b.total_tokens.unwrap_or(0),
                turns: b.turns.unwrap_or(0),
                cost_usd: b.cost_usd.as_ref().and_then(Number::as_f64).unwrap_or(0.0),
            });
        Self {
            max_turns: limits.max_turns,
            max_tokens: limits.max_tokens,
            max_cost_usd: limits.max_cost_usd.map(|c| c.0),
            before,
            price: limits.price,
        }
    }

    /// The first limit the resumed session's earlier usage alone crossed (see
    /// `Limits::session_before`): nothing is left for a further attempt.
    pub(crate) fn spent_before(&self) -> Option<BudgetHit> {
        let nothing = SoFar {
            usage: Some(super::Usage {
                total_tokens: Some(0),
                ..super::Usage::default()
            }),
            cost_usd: Some(0.0),
            turns: Some(0),
            tool_calls: None,
        };
        self.crossed(&nothing)
    }

    /// Whether any limit is set (else nothing need be checked).
    pub(crate) fn any(&self) -> bool {
        self.max_turns.is_some() || self.max_tokens.is_some() || self.max_cost_usd.is_some()
    }

    /// The first limit `s` crossed, with the usage at that point; `None` within the budget.
    pub(crate) fn crossed(&self, s: &SoFar) -> Option<BudgetHit> {
        let b = self.before;
        let tokens = s.total_tokens().map(|t| t.saturating_add(b.tokens));
        let turns = s.turns.map(|t| t.saturating_add(b.turns));
        let cost = costed(s, self.price.as_ref()).map(|c| c + b.cost_usd);
        let hit = |limit, value: Number, reached: Number| BudgetHit {
            limit,
            value,
            reached,
            usage: BudgetUsage {
                total_tokens: tokens,
                turns,
                cost_usd: cost.and_then(Number::from_f64),
            },
            group: None,
        };
        if let (Some(max), Some(t)) = (self.max_turns, turns)
            && t > max
        {
            return Some(hit(BudgetLimit::MaxTurns, max.into(), t.into()));
        }
        if let (Some(max), Some(t)) = (self.max_tokens, tokens)
            && t > max
        {
            return Some(hit(BudgetLimit::MaxTokens, max.into(), t.into()));
        }
        if let (Some(max), Some(c)) = (self.max_cost_usd, cost)
            && c > max
        {
            let num = |v: f64| Number::from_f64(v).unwrap_or_else(|| 0.into());
            return Some(hit(BudgetLimit::MaxCost, num(max), num(c)));
        }
        None
    }
}

/// The cost of `s`: as the CLI reported it, else its usage at `price` (if given).
pub(crate) fn costed(s: &SoFar, price: Option<&crate::spec::Price>) -> Option<f64> {
    s.cost_usd.or_else(|| {
        let u = s.usage.as_ref()?;
        price?.cost([
            u.input_tokens,
            u.output_tokens,
            u.cache_read_tokens,
            u.cache_write_tokens,
        ])
    })
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

    /// With a price, the tokens of a CLI that reports no cost are costed.
    #[test]
    fn a_price_costs_the_tokens_of_a_cli_without_a_cost() {
        let b = Budget::new(&Limits {
            max_cost_usd: Some(Usd(0.01)),
            price: Some("3,15".parse().unwrap()),
            ..Limits::default()
        });
        // 3000 tokens: 2250 in, 750 out = $0.00675 + $0.01125.
        let hit = b.crossed(&so_far(Some(3000), None, None)).unwrap();
        assert_eq!(hit.limit, BudgetLimit::MaxCost);
        assert_eq!(b.crossed(&so_far(Some(1000), None, None)), None);
        // A cost the CLI reports is the one that counts.
        assert_eq!(b.crossed(&so_far(Some(3000), None, Some(0.001))), None);
    }

    /// A resumed session's earlier usage counts: the attempt's figures are added to it.
    #[test]
    fn a_resumed_session_counts_what_it_used_before() {
        let b = Budget::new(&Limits {
            max_tokens: Some(1000),
            max_turns: Some(5),
            session_before: Some(BudgetUsage {
                total_tokens: Some(900),
                turns: Some(2),
                cost_usd: None,
            }),
            ..Limits::default()
        });
        assert_eq!(b.spent_before(), None);
        assert_eq!(b.crossed(&so_far(Some(100), Some(3), None)), None);
        let hit = b.crossed(&so_far(Some(120), Some(3), None)).unwrap();
        assert_eq!(hit.limit, BudgetLimit::MaxTokens);
        assert_eq!(hit.reached, 1020.into());
        assert_eq!(hit.usage.turns, Some(5));
        // Nothing left: the session alone is past a limit.
        let spent = Budget::new(&Limits {
            max_tokens: Some(800),
            session_before: Some(BudgetUsage {
                total_tokens: Some(900),
                turns: None,
                cost_usd: None,
            }),
            ..Limits::default()
        });
        assert_eq!(spent.spent_before().unwrap().reached, 900.into());
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
