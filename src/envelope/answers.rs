//! The other JSON answers of the command line (and of anything else built on the
//! application layer): a running attempt's status, a detached start, a cancel request, a
//! row of `ls`, and the report of `gc`. Like the envelope, each is a stable contract:
//! snake_case keys, every field present, `null` where unknown.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{FailureKind, Status, TmuxInfo};
use crate::spec::{AgentKind, TmuxTarget};

/// Schema tag of the status document.
pub const STATUS_SCHEMA: &str = "subpane.status/v1";

/// Where an unfinished attempt is in its life.
///
/// ```json
/// "running"
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LiveStatus {
    /// Created; no worker is known yet.
    Starting,
    /// The worker runs.
    Running,
}

impl LiveStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            LiveStatus::Starting => "starting",
            LiveStatus::Running => "running",
        }
    }
}

/// `status --json` (and `wait --json` past its timeout) of an attempt that has not finished,
/// schema `subpane.status/v1`. A finished attempt is answered with its envelope instead.
///
/// ```json
/// {"schema": "subpane.status/v1", "run_id": "build-42", "attempt": 1, "agent": "command",
///  "status": "running", "started_at": "2026-11-30T03:39:43.130Z", "worker_pid": 4242,
///  "agent_pid": 4243, "attempt_dir": "/home/u/.local/state/subpane/runs/build-42/attempts/1",
///  "labels": {}, "correlation_id": null,
///  "tmux": {"socket": "/tmp/tmux-0/subpane", "session": "build-42-1", "pane_id": "%3"}}
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusDoc {
    pub schema: String,
    pub run_id: String,
    pub attempt: u32,
    pub agent: AgentKind,
    pub status: LiveStatus,
    /// When the program started (`null` until it has).
    pub started_at: Option<String>,
    pub worker_pid: Option<i32>,
    pub agent_pid: Option<i32>,
    pub attempt_dir: PathBuf,
    pub labels: BTreeMap<String, String>,
    pub correlation_id: Option<String>,
    pub tmux: TmuxInfo,
}

/// `run --detach --json`: the attempt was started and runs on.
///
/// ```json
/// {"run_id": "build-42", "attempt": 1, "status": "running",
///  "attempt_dir": "/home/u/.local/state/subpane/runs/build-42/attempts/1",
///  "tmux": {"socket": "/tmp/tmux-0/subpane", "session": "build-42-1"}}
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Started {
    pub run_id: String,
    pub attempt: u32,
    /// Always `running`: a pane that could not start is answered with its envelope.
    pub status: LiveStatus,
    pub attempt_dir: PathBuf,
    pub tmux: TmuxTarget,
}

/// `cancel --no-wait --json`: the request was recorded (and the worker signalled if it runs).
///
/// ```json
/// {"run_id": "build-42", "attempt": 1, "cancel_requested": true}
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelRequested {
    pub run_id: String,
    pub attempt: u32,
    pub cancel_requested: bool,
}

/// The state of a run in a listing: an envelope's status, or where it is while unfinished.
///
/// ```json
/// "running"
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    Starting,
    Running,
    Completed,
    Failed,
    Cancelled,
}

impl RunState {
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Starting => "starting",
            RunState::Running => "running",
            RunState::Completed => "completed",
            RunState::Failed => "failed",
            RunState::Cancelled => "cancelled",
        }
    }
}

impl From<Status> for RunState {
    fn from(s: Status) -> Self {
        match s {
            Status::Completed => RunState::Completed,
            Status::Failed => RunState::Failed,
            Status::Cancelled => RunState::Cancelled,
        }
    }
}

impl From<LiveStatus> for RunState {
    fn from(s: LiveStatus) -> Self {
        match s {
            LiveStatus::Starting => RunState::Starting,
            LiveStatus::Running => RunState::Running,
        }
    }
}

/// One row of `ls --json`: a run and its latest attempt.
///
/// ```json
/// {"run_id": "build-42", "attempt": 1, "agent": "command", "status": "failed",
///  "failure_kind": "exit", "exit_code": 2, "created_at": "2026-11-30T03:39:43.123Z",
///  "started_at": "2026-11-30T03:39:43.130Z", "finished_at": "2026-11-30T03:39:45.456Z",
///  "duration_ms": 2326, "labels": {}, "correlation_id": null, "group": null,
///  "parent_run": null, "depth": 0, "what": "make test"}
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRow {
    pub run_id: String,
    pub attempt: u32,
    pub agent: AgentKind,
    pub status: RunState,
    pub failure_kind: Option<FailureKind>,
    pub exit_code: Option<i32>,
    pub created_at: String,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    pub duration_ms: Option<u64>,
    pub labels: BTreeMap<String, String>,
    pub correlation_id: Option<String>,
    pub group: Option<String>,
    /// The run whose program started this one (`null` for a top-level run).
    pub parent_run: Option<String>,
    /// 0 for a top-level run, 1 for a run its program started, and so on.
    pub depth: u32,
    /// The command line or the start of the task, one line made safe for a terminal.
    pub what: String,
}

/// `gc --json`: what was (or, with `dry_run`, would be) cleaned up.
///
/// ```json
/// {"dry_run": false, "removed_runs": ["build-41"], "closed_sessions": ["review-1-1"],
///  "running": ["build-42"], "server_stopped": false,
///  "removed_worktrees": ["/h/worktrees/build-41-1"]}
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GcReport {
    pub dry_run: bool,
    /// Runs whose directories were removed.
    pub removed_runs: Vec<String>,
    /// Kept tmux sessions of finished attempts that were closed.
    pub closed_sessions: Vec<String>,
    /// Runs left alone because an attempt has not finished.
    pub running: Vec<String>,
    /// The private tmux server had no session left and was stopped.
    pub server_stopped: bool,
    /// Kept git worktrees (`run --worktree`) removed with their runs.
    #[serde(default)]
    pub removed_worktrees: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_the_serialised_form() {
        for s in [LiveStatus::Starting, LiveStatus::Running] {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
            assert_eq!(RunState::from(s).as_str(), s.as_str());
        }
        for s in [Status::Completed, Status::Failed, Status::Cancelled] {
            assert_eq!(serde_json::to_value(RunState::from(s)).unwrap(), s.as_str());
        }
    }

    #[test]
    fn started_answer_has_the_documented_keys() {
        let s = Started {
            run_id: "r".into(),
            attempt: 1,
            status: LiveStatus::Running,
            attempt_dir: "/h/runs/r/attempts/1".into(),
            tmux: TmuxTarget {
                socket: "/tmp/s".into(),
                session: "r-1".into(),
            },
        };
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"run_id": "r", "attempt": 1, "status": "running",
                "attempt_dir": "/h/runs/r/attempts/1",
                "tmux": {"socket": "/tmp/s", "session": "r-1"}})
        );
    }
}
