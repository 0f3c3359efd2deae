//! The envelope's `budget`: the limit of its budget that stopped an agent, and its usage then.

use serde::{Deserialize, Serialize};

/// The limit of a budget that stopped an agent: the envelope's `budget`.
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
    /// The agent's usage when it was stopped.
    pub usage: BudgetUsage,
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
        format!(
            "budget {} {value} crossed at {reached}",
            self.limit.as_str()
        )
    }
}
