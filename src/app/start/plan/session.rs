//! The budget of an attempt that resumes an agent session counts the whole session: what its
//! earlier attempts in this home used, read from their envelopes (`output.session_id`).
//!
//! Common pitfalls:
//! * Each attempt's envelope has what that attempt used (the CLIs report a resumed
//!   session's usage per process), so the session's is their sum.
//! * Only with a budget: the walk reads every attempt's envelope in the home.

use serde::Deserialize;

use crate::envelope::{BudgetUsage, SoFar, Usage};
use crate::spec::AgentKind;
use crate::store::{self, AttemptPaths, Home};

/// What `agent`'s session `session` used in the attempts of this home that ran in it;
/// `None` when none did.
pub(super) fn used_before(home: &Home, agent: AgentKind, session: &str) -> Option<BudgetUsage> {
    let mut found = false;
    let (mut tokens, mut turns, mut cost) = (None::<u64>, None::<u64>, None::<f64>);
    let add = |sum: &mut Option<u64>, v: Option<u64>| {
        if let Some(v) = v {
            *sum = Some(sum.unwrap_or(0).saturating_add(v));
        }
    };
    for run in std::fs::read_dir(home.runs_dir()).ok()?.flatten() {
        let Ok(attempts) = std::fs::read_dir(run.path().join("attempts")) else {
            continue;
        };
        for a in attempts.flatten() {
            let paths = AttemptPaths::new(a.path());
            let Ok(Some(e)) = store::read_json::<Ended>(&paths.result()) else {
                continue;
            };
            if e.agent != agent || e.output.session_id.as_deref() != Some(session) {
                continue;
            }
            found = true;
            let so_far = SoFar {
                usage: e.output.usage,
                ..SoFar::default()
            };
            add(&mut tokens, so_far.total_tokens());
            add(&mut turns, e.output.turns);
            if let Some(c) = e.output.cost_usd {
                cost = Some(cost.unwrap_or(0.0) + c);
            }
        }
    }
    found.then(|| BudgetUsage {
        total_tokens: tokens,
        turns,
        cost_usd: cost.and_then(serde_json::Number::from_f64),
    })
}

/// The part of an envelope the sum needs.
#[derive(Deserialize)]
struct Ended {
    agent: AgentKind,
    output: EndedOutput,
}

#[derive(Deserialize)]
struct EndedOutput {
    session_id: Option<String>,
    usage: Option<Usage>,
    cost_usd: Option<f64>,
    turns: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ended(home: &Home, run: &str, n: u32, agent: &str, session: &str, tokens: u64) {
        let dir = home
            .runs_dir()
            .join(run)
            .join("attempts")
            .join(n.to_string());
        std::fs::create_dir_all(&dir).unwrap();
        let env = json!({"agent": agent, "output": {"session_id": session,
            "usage": {"input_tokens": tokens, "output_tokens": null, "cache_read_tokens": null,
                      "cache_write_tokens": null, "total_tokens": null},
            "cost_usd": 0.25, "turns": 2}});
        std::fs::write(dir.join("result.json"), env.to_string()).unwrap();
    }

    #[test]
    fn the_session_s_attempts_are_summed_and_no_others() {
        let d = tempfile::tempdir().unwrap();
        let home = Home::at(d.path().to_path_buf());
        assert_eq!(used_before(&home, AgentKind::Pi, "s1"), None);
        ended(&home, "a", 1, "pi", "s1", 100);
        ended(&home, "a", 2, "pi", "s1", 50);
        ended(&home, "b", 1, "pi", "s1", 7);
        ended(&home, "c", 1, "pi", "s2", 1000);
        ended(&home, "d", 1, "claude", "s1", 1000);
        let u = used_before(&home, AgentKind::Pi, "s1").unwrap();
        assert_eq!(u.total_tokens, Some(157));
        assert_eq!(u.turns, Some(6));
        assert_eq!(u.cost_usd, serde_json::Number::from_f64(0.75));
    }
}
