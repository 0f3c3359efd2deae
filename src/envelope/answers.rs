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
    /// Waiting in a scheduler's queue (a Slurm job pending): nothing of it runs yet, and
    /// `slurm.reason` says why it waits.
    Queued,
    /// Created; no worker is known yet.
    Starting,
    /// The worker runs.
    Running,
}

impl LiveStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            LiveStatus::Queued => "queued",
            LiveStatus::Starting => "starting",
            LiveStatus::Running => "running",
        }
    }
}

/// A run's Slurm job as Slurm sees it, in a status document (and a row of `ls`).
///
/// ```json
/// {"job_id": "1234", "state": "PENDING", "reason": "Priority"}
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlurmJob {
    pub job_id: String,
    /// Slurm's state (`PENDING`, `RUNNING`, `TIMEOUT`, …), when asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Slurm's reason (`Priority`, `Resources`, `None`), when asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl RunRow {
    /// Its host as a table shows it: the name, and a Slurm job's id (`hpc:1234`).
    pub fn host_shown(&self) -> Option<String> {
        let h = self.host.as_ref()?;
        Some(match &self.slurm {
            Some(j) => format!("{h}:{}", j.job_id),
            None => h.clone(),
        })
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
    /// Its Slurm job, for a run on a Slurm host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm: Option<SlurmJob>,
    /// It waits to start until then (`retry --at-reset`, `--after`); `status` is `queued`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<crate::spec::StartAt>,
}

/// `run --detach --json`: the attempt's pane was started and it runs on.
///
/// ```json
/// {"run_id": "build-42", "attempt": 1, "status": "starting",
///  "attempt_dir": "/home/u/.local/state/subpane/runs/build-42/attempts/1",
///  "tmux": {"socket": "/tmp/tmux-0/subpane", "session": "build-42-1"}}
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Started {
    pub run_id: String,
    pub attempt: u32,
    /// Always `starting`: the pane started, and whether its worker runs yet is not known
    /// (`status` tells). A pane that could not start is answered with its envelope.
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

/// `pause --json` and `resume --json`: the state asked for the attempt's agent is recorded
/// (`stopped`: held stopped, or going on), and the worker signalled if it runs (one that does
/// not run the program yet applies it once it does).
///
/// ```json
/// {"run_id": "build-42", "attempt": 1, "stopped": true}
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopRequested {
    pub run_id: String,
    pub attempt: u32,
    pub stopped: bool,
}

/// The state of a run in a listing: an envelope's status, or where it is while unfinished.
///
/// ```json
/// "running"
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// In a scheduler's queue (a Slurm job pending).
    Queued,
    Starting,
    Running,
    Completed,
    Failed,
    Cancelled,
    /// A record of the run cannot be read (`problem` says which and why): nothing is known
    /// of its state, and nothing acts on it.
    Damaged,
}

impl RunState {
    /// Not ended: queued, starting or running.
    pub fn is_live(self) -> bool {
        matches!(
            self,
            RunState::Queued | RunState::Starting | RunState::Running
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Queued => "queued",
            RunState::Starting => "starting",
            RunState::Running => "running",
            RunState::Completed => "completed",
            RunState::Failed => "failed",
            RunState::Cancelled => "cancelled",
            RunState::Damaged => "damaged",
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
            LiveStatus::Queued => RunState::Queued,
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
///  "parent_run": null, "depth": 0, "what": "make test", "problem": null}
/// ```
///
/// A run whose records cannot be read is a row of its own with `"status": "damaged"` and a
/// `problem`; its other fields are what could be read (for a run without a readable
/// `run.json`: `agent` `command`, `created_at` empty).
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
    /// Why the run is `damaged`: the record that cannot be read, and why (`null` otherwise).
    #[serde(default)]
    pub problem: Option<String>,
    /// The host the run lives on (`run --host`); `null` for a run of this machine.
    #[serde(default)]
    pub host: Option<String>,
    /// Its Slurm job (a run on a Slurm host that has not ended): the queue's state and
    /// reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm: Option<SlurmJob>,
    /// It waits to start until then (`retry --at-reset`, `--after`); `status` is `queued`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<crate::spec::StartAt>,
    /// A task of a detached fan-out that has not started (its run does not exist yet,
    /// `attempt` is 0): why it waits; `status` is `queued`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<QueueWait>,
}

impl RunRow {
    /// The row of a run whose latest attempt ended with `env`.
    pub fn ended(&mut self, env: &super::Envelope) {
        self.status = env.status.into();
        self.failure_kind = env.failure_kind;
        self.exit_code = env.exit_code;
        self.started_at = env.started_at.clone();
        self.finished_at = env.finished_at.clone();
        self.duration_ms = env.duration_ms;
    }
}

/// `gc --json`: what was (or, with `dry_run`, would be) cleaned up.
///
/// ```json
/// {"dry_run": false, "removed_runs": ["build-41"], "closed_sessions": ["review-1-1"],
///  "running": ["build-42"], "server_stopped": false,
///  "removed_worktrees": ["/h/worktrees/build-41-1"], "damaged": []}
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
    /// Runs left alone because a record cannot be read or names something subpane did not
    /// make (a worktree outside its worktrees directory, a session not its own).
    #[serde(default)]
    pub damaged: Vec<DamagedRun>,
    /// tmux servers that did not answer (hung): the sessions there were neither checked nor
    /// closed, and the server was not stopped. Each names its socket and what happened.
    #[serde(default)]
    pub unanswered: Vec<String>,
}

/// A run `gc` left alone, and why.
///
/// ```json
/// {"run_id": "build-40", "problem": "…/result.json is not valid: expected value at line 1"}
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DamagedRun {
    pub run_id: String,
    pub problem: String,
}

/// What became of one task of a fan-out: its run's status, or `skipped` when it never
/// started (after `--fail-fast` stopped the fan-out, an interrupt, or its driver ended).
/// A report of a group whose driver runs on (`fanout --detach`, the MCP `fanout` tool) also
/// has `running` tasks and `queued` ones (not started yet).
///
/// ```json
/// "skipped"
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    Completed,
    Failed,
    Cancelled,
    Skipped,
    Running,
    Queued,
}

impl TaskStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
            TaskStatus::Skipped => "skipped",
            TaskStatus::Running => "running",
            TaskStatus::Queued => "queued",
        }
    }
}

impl From<Status> for TaskStatus {
    fn from(s: Status) -> Self {
        match s {
            Status::Completed => TaskStatus::Completed,
            Status::Failed => TaskStatus::Failed,
            Status::Cancelled => TaskStatus::Cancelled,
        }
    }
}

/// One task of `fanout --json`: a line of the file and what became of its run.
/// `run_id` and `attempt_dir` are `null` for a task that never started; `error` says why a
/// task could not start (its run was not created, or its pane failed: `failure_kind:
/// "spawn"`), with the end of the program's stderr when it started and failed.
///
/// ```json
/// {"line": 3, "run_id": "lint-1", "status": "failed", "failure_kind": "exit",
///  "exit_code": 2, "duration_ms": 1520,
///  "attempt_dir": "/home/u/.local/state/subpane/runs/lint-1/attempts/1",
///  "what": "make lint", "error": null}
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FanoutTask {
    /// The line of the file (1-based, counting blank and comment lines).
    pub line: usize,
    /// The line's queue `id`, when it has one (what `after` of other lines names).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The task's run; `null` for a task that never started (skipped, or its run could
    /// not be created).
    pub run_id: Option<String>,
    pub status: TaskStatus,
    pub failure_kind: Option<FailureKind>,
    pub exit_code: Option<i32>,
    pub duration_ms: Option<u64>,
    pub attempt_dir: Option<PathBuf>,
    /// The command line or the start of the task, one line made safe for a terminal.
    pub what: String,
    pub error: Option<String>,
    /// Why it has not started yet: only for a `queued` task of a group whose driver runs on
    /// its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<QueueWait>,
}

/// Why a fan-out task that has not started waits (`ls --group`, `wait --group`, MCP).
///
/// ```json
/// {"reason": "dependency", "on": ["plan"]}   {"reason": "delayed", "until": "2026-12-07T10:00:00.000Z"}
/// {"reason": "paused"}                       {"reason": "concurrency", "limit": 4}
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum QueueWait {
    /// For the tasks its `after` / `after_any` name (their ids) to end.
    Dependency { on: Vec<String> },
    /// For its start time (`start_after`, `start_at`), RFC 3339 UTC.
    Delayed { until: String },
    /// Its group is paused (`subpane pause --group`).
    Paused,
    /// For a free slot: its group runs at most `limit` tasks at once.
    Concurrency { limit: usize },
}

impl QueueWait {
    /// For people: `after plan`, `until 14:05`, `paused`, `concurrency 4`.
    pub fn words(&self) -> String {
        match self {
            QueueWait::Dependency { on } => format!("after {}", on.join(", ")),
            QueueWait::Delayed { until } => {
                let at = crate::spec::StartAt {
                    at: until.clone(),
                    why: String::new(),
                };
                match at.instant() {
                    Some(t) => format!("until {}", crate::fresh::local_hh_mm(t)),
                    None => format!("until {until}"),
                }
            }
            QueueWait::Paused => "paused".into(),
            QueueWait::Concurrency { limit } => format!("concurrency {limit}"),
        }
    }
}

impl FanoutTask {
    /// The task as its run ended: the envelope's outcome, and (when it did not complete)
    /// why in the envelope's words (for a program that failed, the end of its stderr).
    pub fn ended(&mut self, env: &super::Envelope) {
        self.status = env.status.into();
        self.failure_kind = env.failure_kind;
        self.exit_code = env.exit_code;
        self.duration_ms = env.duration_ms;
        self.error = match env.status {
            Status::Completed => None,
            _ => env.output.errors.first().cloned(),
        };
    }

    /// The task's share of the fan-out's exit code: its run's code, and `130` (cancelled)
    /// for a skipped task. A task is only ever skipped after a failure or an interrupt, so
    /// this never hides a worse code.
    pub fn code(&self) -> i32 {
        match self.status {
            TaskStatus::Completed => crate::exit_code::COMPLETED,
            TaskStatus::Skipped | TaskStatus::Cancelled => crate::exit_code::CANCELLED,
            TaskStatus::Failed => super::code_for(Status::Failed, self.failure_kind),
            TaskStatus::Running | TaskStatus::Queued => crate::exit_code::STILL_RUNNING,
        }
    }
}

/// The counts of `fanout --json`, and its exit code (the worst of the tasks').
///
/// ```json
/// {"total": 20, "completed": 17, "failed": 1, "cancelled": 0, "skipped": 2,
///  "concurrency": 4, "duration_ms": 9120, "exit_code": 1}
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FanoutSummary {
    pub total: usize,
    pub completed: usize,
    pub failed: usize,
    pub cancelled: usize,
    pub skipped: usize,
    /// Of a group whose driver runs on: tasks running, and not started yet (left out when
    /// none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub running: usize,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub queued: usize,
    pub concurrency: usize,
    /// From the first start to the last end.
    pub duration_ms: u64,
    pub exit_code: i32,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// `fanout --json`: the group id, every task in the order of the file, and the counts.
///
/// ```json
/// {"group": "g-20261130-033943-a1b2c3",
///  "tasks": [{"line": 1, "run_id": "lint-1", "status": "completed", "failure_kind": null,
///             "exit_code": 0, "duration_ms": 1520,
///             "attempt_dir": "/home/u/.local/state/subpane/runs/lint-1/attempts/1",
///             "what": "make lint", "error": null},
///            {"line": 2, "run_id": null, "status": "skipped", "failure_kind": null,
///             "exit_code": null, "duration_ms": null, "attempt_dir": null,
///             "what": "make test", "error": null}],
///  "summary": {"total": 2, "completed": 1, "failed": 0, "cancelled": 0, "skipped": 1,
///              "concurrency": 4, "duration_ms": 1604, "exit_code": 130}}
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FanoutReport {
    pub group: String,
    pub tasks: Vec<FanoutTask>,
    pub summary: FanoutSummary,
}

impl FanoutReport {
    /// A report of `tasks`, counted.
    pub fn new(
        group: String,
        tasks: Vec<FanoutTask>,
        concurrency: usize,
        duration_ms: u64,
    ) -> Self {
        let count = |s: TaskStatus| tasks.iter().filter(|t| t.status == s).count();
        let summary = FanoutSummary {
            total: tasks.len(),
            completed: count(TaskStatus::Completed),
            failed: count(TaskStatus::Failed),
            cancelled: count(TaskStatus::Cancelled),
            skipped: count(TaskStatus::Skipped),
            running: count(TaskStatus::Running),
            queued: count(TaskStatus::Queued),
            concurrency,
            duration_ms,
            exit_code: crate::exit_code::worst(tasks.iter().map(FanoutTask::code)),
        };
        Self {
            group,
            tasks,
            summary,
        }
    }
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
            status: LiveStatus::Starting,
            attempt_dir: "/h/runs/r/attempts/1".into(),
            tmux: TmuxTarget {
                socket: "/tmp/s".into(),
                session: "r-1".into(),
            },
        };
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"run_id": "r", "attempt": 1, "status": "starting",
                "attempt_dir": "/h/runs/r/attempts/1",
                "tmux": {"socket": "/tmp/s", "session": "r-1"}})
        );
    }

    #[test]
    fn a_fanout_report_counts_and_takes_the_worst_code() {
        let task = |line, status, kind| FanoutTask {
            line,
            id: None,
            run_id: Some(format!("r{line}")),
            status,
            failure_kind: kind,
            exit_code: None,
            duration_ms: None,
            attempt_dir: None,
            what: "true".into(),
            error: None,
            waiting: None,
        };
        let r = FanoutReport::new(
            "g-1".into(),
            vec![
                task(1, TaskStatus::Completed, None),
                task(2, TaskStatus::Skipped, None),
            ],
            4,
            10,
        );
        assert_eq!((r.summary.completed, r.summary.skipped), (1, 1));
        assert_eq!(r.summary.exit_code, 130, "skipped counts as cancelled");
        let r = FanoutReport::new(
            "g-1".into(),
            vec![
                task(1, TaskStatus::Failed, Some(FailureKind::Timeout)),
                task(2, TaskStatus::Skipped, None),
                task(3, TaskStatus::Failed, Some(FailureKind::Exit)),
            ],
            4,
            10,
        );
        assert_eq!(r.summary.exit_code, 1);
        assert_eq!(r.tasks[0].code(), 124);
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["tasks"][1]["status"], "skipped");
        for k in ["group", "tasks", "summary"] {
            assert!(v.get(k).is_some(), "{k}");
        }
        for s in [
            TaskStatus::Completed,
            TaskStatus::Failed,
            TaskStatus::Cancelled,
            TaskStatus::Skipped,
            TaskStatus::Running,
            TaskStatus::Queued,
        ] {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
    }
}
