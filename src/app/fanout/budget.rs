//! A fan-out group's budget (`fanout --max-tokens`, `--max-cost`): the usage of all its
//! tasks, summed as it comes, against one limit.
//!
//! ```text
//!  a task here: its progress.json changes (Seen::Changed) ─┐
//!  a task ends (here or on a host): its envelope's usage  ─┴► Spent::set(task, so far)
//!     ─► Budget::crossed(the sum) ─► StopReason::Budget: skip the queue, cancel the running
//!        tasks with the hit (origin `budget`): each ends as `budget`, its envelope the group's
//! ```
//!
//! Common pitfalls:
//! * A task's figures replace its earlier ones (they are totals so far), never add to them.
//! * A task on a host is counted when it ends (its progress is there, not here).
//! * A CLI that never reports cost (Codex) would count as free: a group's `max_cost` is
//!   refused for its tasks, as a run's own is.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::app::Error;
use crate::app::invalid::Invalid;
use crate::envelope::{Budget, BudgetHit, BudgetLimit, Envelope, SoFar, Usage, costed};
use crate::spec::{AgentKind, Limits, Price, Usd};

/// The limits of a group's budget, over the usage of all its tasks (`group.json`'s
/// `budget`).
///
/// ```json
/// {"max_tokens": 200000, "max_cost": 2.5}
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupBudget {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost: Option<Usd>,
}

impl GroupBudget {
    pub fn is_empty(&self) -> bool {
        self.max_tokens.is_none() && self.max_cost.is_none()
    }

    /// Refuses a limit that is not above zero, and a `max_cost` for a task whose agent never
    /// reports a cost and that has no price to cost its tokens (`agents`: each task's line,
    /// agent, and whether it has a price).
    pub fn check(&self, agents: &[(usize, Option<AgentKind>, bool)]) -> Result<(), Error> {
        if self.max_tokens == Some(0) {
            return Err(Invalid::new("max_tokens", "must be greater than zero").into());
        }
        if let Some(c) = self.max_cost {
            crate::app::plan::positive_cost(c)?;
            let adapter = |a: AgentKind| crate::adapter::adapter_for(a);
            if let Some((line, a)) = agents.iter().find_map(|(line, a, priced)| {
                a.filter(|a| !priced && adapter(*a).never_reports(BudgetLimit::MaxCost))
                    .map(|a| (line, a))
            }) {
                return Err(Invalid::new(
                    "max_cost",
                    format!(
                        "the group's cost cannot be known: line {line} runs {}, which reports \
                         no cost (give that line a `price`)",
                        a.as_str()
                    ),
                )
                .hint("give the group --max-tokens instead, or run that line apart")
                .into());
            }
        }
        Ok(())
    }

    fn budget(&self) -> Budget {
        Budget::new(&Limits {
            max_tokens: self.max_tokens,
            max_cost_usd: self.max_cost,
            ..Limits::default()
        })
    }
}

/// What the tasks of a group have used so far, by task, and its budget.
pub(super) struct Spent {
    group: String,
    budget: Budget,
    /// By task and attempt (a task whose run waited for a usage limit has two): its tokens
    /// and cost as it last said them (`None`: not reported).
    by_task: HashMap<(usize, u32), (Option<u64>, Option<f64>)>,
    /// Their sums, kept as each changes (a large group's progress comes often).
    tokens: Option<u64>,
    cost: Option<f64>,
}

impl Spent {
    /// `None` for a group without a budget: nothing is counted.
    pub(super) fn new(group: &str, limits: GroupBudget) -> Option<Self> {
        (!limits.is_empty()).then(|| Self {
            group: group.to_owned(),
            budget: limits.budget(),
            by_task: HashMap::new(),
            tokens: None,
            cost: None,
        })
    }

    /// Task `task`'s attempt has used `so_far` (its totals, which replace what it said
    /// before); the group's budget, if this crossed it.
    pub(super) fn set(&mut self, task: (usize, u32), so_far: SoFar) -> Option<BudgetHit> {
        let now = (so_far.total_tokens(), so_far.cost_usd);
        let (t0, c0) = self.by_task.insert(task, now).unwrap_or((None, None));
        if let Some(t) = now.0 {
            let sum = self.tokens.unwrap_or(0).saturating_sub(t0.unwrap_or(0));
            self.tokens = Some(sum.saturating_add(t));
        }
        if let Some(c) = now.1 {
            self.cost = Some(self.cost.unwrap_or(0.0) - c0.unwrap_or(0.0) + c);
        }
        let total = SoFar {
            usage: self.tokens.map(|t| Usage {
                total_tokens: Some(t),
                ..Usage::default()
            }),
            cost_usd: self.cost,
            turns: None,
            tool_calls: None,
        };
        let mut hit = self.budget.crossed(&total)?;
        hit.group = Some(self.group.clone());
        Some(hit)
    }
}

/// What an ended attempt used, as its envelope says (its tokens costed at `price` when its
/// CLI said no cost).
pub(super) fn used(env: &Envelope, price: Option<&Price>) -> SoFar {
    let mut s = SoFar {
        usage: env.output.usage.clone(),
        cost_usd: env.output.cost_usd,
        turns: env.output.turns,
        tool_calls: env.output.tool_calls,
    };
    s.cost_usd = costed(&s, price);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(n: u64) -> SoFar {
        SoFar {
            usage: Some(Usage {
                input_tokens: Some(n),
                ..Usage::default()
            }),
            ..SoFar::default()
        }
    }

    #[test]
    fn a_task_s_later_figures_replace_its_earlier_ones() {
        let limits = GroupBudget {
            max_tokens: Some(1000),
            max_cost: None,
        };
        let mut s = Spent::new("g", limits).unwrap();
        assert_eq!(s.set((0, 1), tokens(600)), None);
        // The same task again, at 900 in all: not 1500.
        assert_eq!(s.set((0, 1), tokens(900)), None);
        let hit = s.set((1, 1), tokens(200)).expect("900 + 200 is over 1000");
        assert_eq!(hit.limit, BudgetLimit::MaxTokens);
        assert_eq!(hit.reached, 1100.into());
        assert_eq!(hit.group.as_deref(), Some("g"));
        assert!(hit.words().starts_with("group g's budget max_tokens 1000"));
    }

    #[test]
    fn cost_sums_what_the_tasks_report() {
        let limits = GroupBudget {
            max_tokens: None,
            max_cost: Some(Usd(0.5)),
        };
        let mut s = Spent::new("g", limits).unwrap();
        let cost = |c| SoFar {
            cost_usd: Some(c),
            ..SoFar::default()
        };
        assert_eq!(s.set((0, 1), cost(0.25)), None);
        // A task without a cost (a command) counts as none.
        assert_eq!(s.set((1, 1), SoFar::default()), None);
        let hit = s.set((2, 1), cost(0.3)).expect("0.55 is over 0.5");
        assert_eq!(hit.limit, BudgetLimit::MaxCost);
    }

    #[test]
    fn no_limits_count_nothing() {
        assert!(Spent::new("g", GroupBudget::default()).is_none());
    }

    #[test]
    fn bad_limits_and_a_cost_nobody_reports_are_refused() {
        let zero = GroupBudget {
            max_tokens: Some(0),
            max_cost: None,
        };
        assert!(zero.check(&[]).is_err());
        let cost = GroupBudget {
            max_tokens: None,
            max_cost: Some(Usd(1.0)),
        };
        assert!(cost.check(&[(1, Some(AgentKind::Pi), false)]).is_ok());
        assert!(cost.check(&[(1, Some(AgentKind::Command), false)]).is_ok());
        let e = cost
            .check(&[
                (1, Some(AgentKind::Pi), false),
                (2, Some(AgentKind::Codex), false),
            ])
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2 runs codex"), "{e}");
        // A price costs its tokens.
        assert!(cost.check(&[(2, Some(AgentKind::Codex), true)]).is_ok());
        let nan = GroupBudget {
            max_tokens: None,
            max_cost: Some(Usd(f64::NAN)),
        };
        assert!(nan.check(&[]).is_err());
    }
}
