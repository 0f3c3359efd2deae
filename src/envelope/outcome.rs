//! The outcome of an attempt, decided by one pure function from the facts.
//!
//! Precedence, first match wins:
//!
//! | facts                                   | status    | failure_kind   |
//! |-----------------------------------------|-----------|----------------|
//! | sandbox could not be enforced           | failed    | sandbox        |
//! | program could not be started            | failed    | spawn          |
//! | the worker or its pane vanished         | failed    | lost           |
//! | subpane stopped it for a cancel         | cancelled | cancelled      |
//! | subpane stopped it for the deadline     | failed    | timeout        |
//! | subpane stopped it for silence          | failed    | idle_timeout   |
//! | subpane stopped it for its budget       | failed    | budget         |
//! | a sandbox limit was reached, not exit 0 | failed    | resource_limit |
//! | the agent reported an error             | failed    | model          |
//! | stopped for lingering after its answer  | completed | —              |
//! | exit 0, but no terminal event (agents)  | failed    | parse          |
//! | exit 0                                  | completed | —              |
//! | anything else                           | failed    | exit           |

use super::{FailureKind, Status};

/// Why subpane started stopping the process group (the first reason wins).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KillReason {
    Timeout,
    IdleTimeout,
    Cancel,
    Linger,
    /// The pane closed under the worker (SIGHUP: tmux server or session killed).
    PaneClosed,
    /// The agent's usage crossed a limit of its budget (`max_turns`, `max_tokens`, `max_cost`).
    Budget,
}

/// How far the attempt got before anything ran: the three ends that leave nothing to look
/// at exclude each other (and each other's facts).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Start {
    /// The program ran (whatever became of it).
    #[default]
    Ran,
    /// The sandbox could not be enforced: the program did not run.
    SandboxFailed,
    /// The program (or its pane) could not be started.
    SpawnFailed,
    /// The worker or its pane vanished without recording the end.
    Lost,
}

/// Everything the decision looks at.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Facts {
    pub start: Start,
    pub kill_reason: Option<KillReason>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// The adapter knows a terminal event (agent adapters do; `command` does not).
    pub expects_terminal_event: bool,
    pub terminal_event_seen: bool,
    pub model_error: bool,
    /// The agent's CLI reported its account's usage limit (`output.usage_limit`).
    pub usage_limit: bool,
    /// The sandbox found one of its limits reached when the program ended.
    pub limit_hit: bool,
}

/// The decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub status: Status,
    pub failure_kind: Option<FailureKind>,
}

impl Outcome {
    fn failed(kind: FailureKind) -> Self {
        Self {
            status: Status::Failed,
            failure_kind: Some(kind),
        }
    }
    fn completed() -> Self {
        Self {
            status: Status::Completed,
            failure_kind: None,
        }
    }
}

/// Decides the outcome from the facts. Pure: no IO, no clock.
pub fn decide(f: &Facts) -> Outcome {
    match f.start {
        Start::SandboxFailed => return Outcome::failed(FailureKind::Sandbox),
        Start::SpawnFailed => return Outcome::failed(FailureKind::Spawn),
        Start::Lost => return Outcome::failed(FailureKind::Lost),
        Start::Ran => {}
    }
    if f.kill_reason == Some(KillReason::PaneClosed) {
        return Outcome::failed(FailureKind::Lost);
    }
    match f.kill_reason {
        Some(KillReason::Cancel) => {
            return Outcome {
                status: Status::Cancelled,
                failure_kind: Some(FailureKind::Cancelled),
            };
        }
        Some(KillReason::Timeout) => return Outcome::failed(FailureKind::Timeout),
        Some(KillReason::IdleTimeout) => return Outcome::failed(FailureKind::IdleTimeout),
        Some(KillReason::Budget) => return Outcome::failed(FailureKind::Budget),
        _ => {}
    }
    let clean_exit = f.exit_code == Some(0) && f.signal.is_none();
    // A limit explains a failure better than what the program made of it (an agent reports
    // a failed tool, a build fails on EAGAIN); a program that coped with it completed.
    if f.limit_hit && !clean_exit && f.kill_reason != Some(KillReason::Linger) {
        return Outcome::failed(FailureKind::ResourceLimit);
    }
    // A usage limit is the model's refusal of a kind of its own: try again later.
    if f.usage_limit {
        return Outcome::failed(FailureKind::UsageLimit);
    }
    if f.model_error {
        return Outcome::failed(FailureKind::Model);
    }
    if f.kill_reason == Some(KillReason::Linger) {
        return Outcome::completed();
    }
    if f.exit_code == Some(0) && f.signal.is_none() {
        if f.expects_terminal_event && !f.terminal_event_seen {
            return Outcome::failed(FailureKind::Parse);
        }
        return Outcome::completed();
    }
    Outcome::failed(FailureKind::Exit)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exited(code: i32) -> Facts {
        Facts {
            exit_code: Some(code),
            ..Facts::default()
        }
    }

    #[test]
    fn clean_exit_completes() {
        assert_eq!(decide(&exited(0)), Outcome::completed());
    }

    #[test]
    fn nonzero_exit_or_signal_fails_with_exit() {
        assert_eq!(decide(&exited(3)), Outcome::failed(FailureKind::Exit));
        let f = Facts {
            signal: Some(9),
            ..Facts::default()
        };
        assert_eq!(decide(&f), Outcome::failed(FailureKind::Exit));
    }

    #[test]
    fn kill_reasons_beat_exit_status() {
        let mut f = exited(0);
        f.kill_reason = Some(KillReason::Timeout);
        assert_eq!(decide(&f), Outcome::failed(FailureKind::Timeout));
        f.kill_reason = Some(KillReason::IdleTimeout);
        assert_eq!(decide(&f), Outcome::failed(FailureKind::IdleTimeout));
        f.kill_reason = Some(KillReason::Budget);
        assert_eq!(decide(&f), Outcome::failed(FailureKind::Budget));
        f.kill_reason = Some(KillReason::Cancel);
        assert_eq!(decide(&f).status, Status::Cancelled);
        f.kill_reason = Some(KillReason::PaneClosed);
        assert_eq!(decide(&f), Outcome::failed(FailureKind::Lost));
    }

    #[test]
    fn model_error_fails_even_on_exit_zero() {
        let mut f = exited(0);
        f.expects_terminal_event = true;
        f.terminal_event_seen = true;
        f.model_error = true;
        assert_eq!(decide(&f), Outcome::failed(FailureKind::Model));
    }

    #[test]
    fn lingering_after_a_clean_answer_completes() {
        let f = Facts {
            signal: Some(9),
            kill_reason: Some(KillReason::Linger),
            expects_terminal_event: true,
            terminal_event_seen: true,
            ..Facts::default()
        };
        assert_eq!(decide(&f), Outcome::completed());
    }

    #[test]
    fn agent_without_terminal_event_is_a_parse_failure() {
        let mut f = exited(0);
        f.expects_terminal_event = true;
        assert_eq!(decide(&f), Outcome::failed(FailureKind::Parse));
    }

    #[test]
    fn a_limit_reached_names_a_failure_but_not_a_clean_exit() {
        let hit = |exit_code, signal| Facts {
            exit_code,
            signal,
            limit_hit: true,
            model_error: true,
            ..Facts::default()
        };
        let limit = Outcome::failed(FailureKind::ResourceLimit);
        assert_eq!(decide(&hit(Some(1), None)), limit);
        assert_eq!(decide(&hit(None, Some(25))), limit);
        // A program that coped with it: its own outcome (here the agent's error).
        assert_eq!(
            decide(&hit(Some(0), None)),
            Outcome::failed(FailureKind::Model)
        );
        // What subpane stopped comes first.
        let timed_out = Facts {
            kill_reason: Some(KillReason::Timeout),
            ..hit(None, Some(9))
        };
        assert_eq!(decide(&timed_out), Outcome::failed(FailureKind::Timeout));
    }

    #[test]
    fn spawn_and_sandbox_come_first() {
        let f = Facts {
            start: Start::SpawnFailed,
            kill_reason: Some(KillReason::Cancel),
            ..Facts::default()
        };
        assert_eq!(decide(&f), Outcome::failed(FailureKind::Spawn));
        let f = Facts {
            start: Start::SandboxFailed,
            ..Facts::default()
        };
        assert_eq!(decide(&f), Outcome::failed(FailureKind::Sandbox));
        let f = Facts {
            start: Start::Lost,
            exit_code: Some(0),
            ..Facts::default()
        };
        assert_eq!(decide(&f), Outcome::failed(FailureKind::Lost));
    }
}
