//! The result contract: `result.json`, schema `subpane.result/v1`.
//!
//! Every field is always present (`null` where unknown), keys are snake_case. The JSON Schema
//! in `schema/result.v1.json` describes the same shape; a test validates real envelopes
//! against it so the two cannot drift.

mod answers;
mod budget;
mod build;
mod git;
mod hints;
mod outcome;
mod progress;
mod records;
mod remote;
mod sandbox;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use answers::{
    CancelRequested, DamagedRun, FanoutReport, FanoutSummary, FanoutTask, GcReport, LiveStatus,
    QueueWait, RunRow, RunState, STATUS_SCHEMA, SlurmJob, Started, StatusDoc, StopRequested,
    TaskStatus,
};
pub(crate) use budget::{Budget, costed};
pub use budget::{BudgetHit, BudgetLimit, BudgetUsage};
pub use build::{build, duration_between};
pub use git::{CarryResult, GitCarry, MAX_SUBMODULES, RefusalReason, bounded_paths};
pub use hints::{network_hint, says_connection_failed};
pub use outcome::{Facts, KillReason, Outcome, Start, decide};
pub use progress::{
    EventKind, LAST_EVENT_CHARS, LastEvent, PROGRESS_EVERY, PROGRESS_FIRST, PROGRESS_SCHEMA,
    Progress, SoFar,
};
pub use records::{
    CancelRequest, LaunchRecord, NetworkEntry, ProcRef, STOP_REQUEST_LIMIT, StopRequest, Verdict,
    WORKER_SCHEMA, WorkerFacts, WorkerState,
};
pub use remote::{Untrusted, compile_schema, from_remote};
pub use sandbox::{Enforced, EnforcedLimit, EnforcedLimits, LimitKind, SandboxInfo};

use crate::exit_code;
use crate::spec::AgentKind;

/// Schema tag of `result.json`.
pub const RESULT_SCHEMA: &str = "subpane.result/v1";

/// How the attempt ended.
///
/// ```json
/// "completed"
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Completed,
    Failed,
    Cancelled,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
        }
    }
}

/// Why an attempt did not complete.
///
/// ```json
/// "idle_timeout"
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The program exited non-zero or was killed by a signal nobody asked for.
    Exit,
    /// The program could not be started.
    Spawn,
    Timeout,
    IdleTimeout,
    Cancelled,
    Sandbox,
    /// The agent reported an error, even if it exited 0.
    Model,
    /// The agent's output could not be understood (e.g. no terminal event).
    Parse,
    /// The worker or its pane vanished without recording the end.
    Lost,
    /// A sandbox limit was reached (`sandbox.limit_hit` says which) and the program failed.
    ResourceLimit,
    /// The agent's usage crossed a limit of its budget, and subpane stopped it (`budget`
    /// says which).
    Budget,
    /// The agent hit its account's usage limit (a subscription window, a quota): try again
    /// later (`output.usage_limit` says when, where the CLI said). Exit 75.
    UsageLimit,
}

impl FailureKind {
    /// The name used in the envelope (`"idle_timeout"`).
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Exit => "exit",
            FailureKind::Spawn => "spawn",
            FailureKind::Timeout => "timeout",
            FailureKind::IdleTimeout => "idle_timeout",
            FailureKind::Cancelled => "cancelled",
            FailureKind::Sandbox => "sandbox",
            FailureKind::Model => "model",
            FailureKind::Parse => "parse",
            FailureKind::Lost => "lost",
            FailureKind::ResourceLimit => "resource_limit",
            FailureKind::Budget => "budget",
            FailureKind::UsageLimit => "usage_limit",
        }
    }
}

/// What stopped an attempt before its program ended by itself: the envelope's
/// `cancelled_by`, present on a cancelled attempt and on one stopped by its timeout.
///
/// ```json
/// "mcp_client"
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CancelOrigin {
    /// An interrupt (Ctrl-C) of the command that waited for the run.
    Interrupt,
    /// A cancel of the run: `subpane cancel`, or the MCP `cancel` tool.
    Cancel,
    /// The MCP client cancelled the tool call that waited for the run.
    McpClient,
    /// Its `timeout` or `idle_timeout` passed.
    Timeout,
    /// A task of its fan-out failed, and the fan-out cancels the others (`cancel_siblings`).
    Sibling,
    /// Its fan-out group was stopped (an interrupt of the fan-out, or a cancel of its group).
    Fanout,
    /// Its fan-out group's budget was crossed (`fanout --max-tokens`, `--max-cost`): the
    /// request carries the group's [`BudgetHit`], and the attempt ends as `budget`.
    Budget,
    /// The attempt of its parent run ended (a nested run ends with its parent).
    Parent,
    /// A signal to its worker (SIGTERM, SIGINT or SIGQUIT) from outside subpane.
    Signal,
}

impl CancelOrigin {
    /// The name used in the envelope (`"mcp_client"`).
    pub fn as_str(self) -> &'static str {
        match self {
            CancelOrigin::Interrupt => "interrupt",
            CancelOrigin::Cancel => "cancel",
            CancelOrigin::McpClient => "mcp_client",
            CancelOrigin::Timeout => "timeout",
            CancelOrigin::Sibling => "sibling",
            CancelOrigin::Fanout => "fanout",
            CancelOrigin::Budget => "budget",
            CancelOrigin::Parent => "parent",
            CancelOrigin::Signal => "signal",
        }
    }

    /// Who asked, for people: the envelope's error `cancelled by …` says it.
    pub fn words(self) -> &'static str {
        match self {
            CancelOrigin::Interrupt => "an interrupt (Ctrl-C) of the command that waited for it",
            CancelOrigin::Cancel => "a cancel of the run",
            CancelOrigin::McpClient => "the MCP client (its tool call was cancelled)",
            CancelOrigin::Timeout => "its timeout",
            CancelOrigin::Sibling => "its fan-out, after another task failed",
            CancelOrigin::Fanout => "the stop of its fan-out group",
            CancelOrigin::Budget => "the budget of its fan-out group",
            CancelOrigin::Parent => "the end of its parent attempt",
            CancelOrigin::Signal => "a signal to its worker",
        }
    }
}

/// Token counts, summed over the attempt.
///
/// ```json
/// {"input_tokens": 1200, "output_tokens": 80, "cache_read_tokens": 0, "cache_write_tokens": 0, "total_tokens": 1280}
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cache_read_tokens: Option<u64>,
    pub cache_write_tokens: Option<u64>,
    pub total_tokens: Option<u64>,
}

/// What the agent produced, as read from its events (all `null` for the `command` adapter).
///
/// ```json
/// {"final_text": "Done.", "session_id": "0b5e…", "model": "claude-sonnet-4", "usage": {…},
///  "cost_usd": 0.0123, "turns": 2, "tool_calls": 1, "errors": [], "context_length_exceeded": false}
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Output {
    pub final_text: Option<String>,
    pub session_id: Option<String>,
    pub model: Option<String>,
    pub usage: Option<Usage>,
    pub cost_usd: Option<f64>,
    pub turns: Option<u64>,
    pub tool_calls: Option<u64>,
    /// At most [`MAX_ERRORS`] messages.
    pub errors: Vec<String>,
    pub context_length_exceeded: bool,
    /// The account's usage limit the agent hit, when it hit one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_limit: Option<UsageLimit>,
}

/// A usage limit an agent's CLI reported: its account may run again at `retry_at`.
///
/// ```json
/// {"retry_at": "2026-12-03T15:00:00Z", "kind": "five_hour", "message": "Claude usage limit reached"}
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageLimit {
    /// When the limit resets (RFC 3339), when the CLI said.
    pub retry_at: Option<String>,
    /// Which limit, as the CLI names it (`five_hour`, `seven_day`, `quota`), when it said.
    pub kind: Option<String>,
    /// What the CLI said.
    pub message: String,
}

/// The most error strings an envelope carries.
pub const MAX_ERRORS: usize = 20;

impl Output {
    /// Adds an error message, keeping at most [`MAX_ERRORS`] and each at most 2000 chars.
    pub fn push_error(&mut self, msg: impl Into<String>) {
        if self.errors.len() < MAX_ERRORS {
            let mut m: String = msg.into();
            crate::term::cut(&mut m, 2000);
            self.errors.push(m);
        }
    }
}

/// What the stdout filter kept and dropped.
///
/// ```json
/// {"kept_lines": 12, "dropped_lines": 340, "dropped_bytes": 81234, "oversized_lines": 0,
///  "plain_lines": 3, "lost_lines": 0, "lost_stderr_bytes": 0}
/// ```
///
/// `lost_lines` and `lost_stderr_bytes` came later in v1: envelopes written before them lack
/// them (read as 0).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilterCounts {
    /// Lines written to `events.jsonl`.
    pub kept_lines: u64,
    /// Lines the adapter dropped (streaming deltas), plus oversized lines.
    pub dropped_lines: u64,
    pub dropped_bytes: u64,
    /// Lines over the 64 MiB bound, dropped without being buffered.
    pub oversized_lines: u64,
    /// Lines written to `stdout.log` (for a command every stdout line, events included).
    pub plain_lines: u64,
    /// Lines for `events.jsonl` or `stdout.log` that could not be written (a full disk): not
    /// in `kept_lines` or `plain_lines`; `output.errors` says why.
    #[serde(default)]
    pub lost_lines: u64,
    /// Bytes of stderr that could not be written to `stderr.log`.
    #[serde(default)]
    pub lost_stderr_bytes: u64,
}

/// Where the attempt's pane was.
///
/// ```json
/// {"socket": "/tmp/tmux-0/subpane", "session": "build-42-1", "pane_id": "%3"}
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TmuxInfo {
    pub socket: Option<String>,
    pub session: Option<String>,
    pub pane_id: Option<String>,
}

/// One file of the attempt directory. `sha256` is of the whole file unless `hashed_bytes`
/// is there: then it is of the file's first `hashed_bytes` bytes only (hashing at the end of
/// an attempt is bounded, see `store::artifacts`).
///
/// ```json
/// {"kind": "events", "path": "events.jsonl", "bytes": 5321, "sha256": "9f86d0…"}
/// {"kind": "out", "path": "out/disk.img", "bytes": 8589934592, "sha256": "3a1b…",
///  "hashed_bytes": 268435456}
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Artifact {
    pub kind: String,
    pub path: String,
    pub bytes: u64,
    pub sha256: String,
    /// Present only when the file was not hashed whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hashed_bytes: Option<u64>,
}

/// What subpane had to clean up at the end.
///
/// ```json
/// {"output_held_open": true, "killed_descendants": 1}
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cleanup {
    /// A descendant still held stdout or stderr open after the program exited.
    pub output_held_open: bool,
    /// Processes of the attempt killed after the program itself had exited.
    pub killed_descendants: u64,
}

/// The envelope, `result.json`.
///
/// ```json
/// {"schema": "subpane.result/v1", "run_id": "build-42", "attempt": 1, "agent": "command",
///  "argv": ["/usr/bin/make", "test"], "cwd": "/src/app", "labels": {}, "correlation_id": null,
///  "status": "failed", "failure_kind": "exit", "exit_code": 2, "signal": null,
///  "signals_sent": [], "started_at": "2026-11-30T03:39:43.123Z",
///  "finished_at": "2026-11-30T03:39:45.456Z", "duration_ms": 2333, "terminal_event": null,
///  "lingered": false, "output": {…}, "filter": {…}, "cleanup": {…}, "tmux": {…},
///  "sandbox": {"enabled": false}, "artifacts": [{…}]}
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    pub schema: String,
    pub run_id: String,
    pub attempt: u32,
    pub agent: AgentKind,
    pub argv: Vec<String>,
    pub cwd: String,
    pub labels: BTreeMap<String, String>,
    pub correlation_id: Option<String>,
    pub status: Status,
    pub failure_kind: Option<FailureKind>,
    pub exit_code: Option<i32>,
    /// The signal that ended the program, e.g. `"SIGKILL"`.
    pub signal: Option<String>,
    /// Signals subpane sent to the process group, in order.
    pub signals_sent: Vec<String>,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    pub duration_ms: Option<u64>,
    pub terminal_event: Option<String>,
    pub lingered: bool,
    pub output: Output,
    pub filter: FilterCounts,
    pub cleanup: Cleanup,
    pub tmux: TmuxInfo,
    pub sandbox: SandboxInfo,
    pub artifacts: Vec<Artifact>,
    /// The fan-out group of the run (absent outside a fan-out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// The host the attempt ran on (absent for this machine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<HostRef>,
    /// The run whose program started this one (absent for a top-level run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_run: Option<String>,
    /// How deep below a top-level run (absent for a top-level run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth: Option<u32>,
    /// The attempt whose agent session this one continued (`retry --resume`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed_from: Option<u32>,
    /// What stopped the attempt before its program ended by itself (absent when nothing did).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancelled_by: Option<CancelOrigin>,
    /// The git worktree of the attempt (`--worktree`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<WorktreeInfo>,
    /// What came back of the program's branch (`--sandbox` in a repository).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<GitCarry>,
    /// The limit of its budget that stopped the agent (`failure_kind: "budget"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetHit>,
    /// The variables whose values were masked as `***`, and those too short to mask
    /// (absent when the program was given no secret).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secrets: Option<Secrets>,
    /// What was said to the running agent (`subpane send`, MCP `send`, the pane's input
    /// line); absent for an attempt without input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<InputCounts>,
    /// How many milliseconds of `duration_ms` the agent was held stopped (`subpane pause`:
    /// SIGSTOP to its process group, until `resume` or the attempt's end); absent when it
    /// never was. `duration_ms` is the wall time and includes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_ms: Option<u64>,
    /// How many times the agent was held stopped; absent when it never was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stops: Option<u32>,
}

/// The messages and interrupts given to an attempt's agent while it ran (each is a
/// `subpane.input` event of `events.jsonl`), and how many of them it took.
///
/// ```json
/// {"messages": 2, "interrupts": 0, "taken": 2, "from": {"cli": 1, "pane": 1}}
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputCounts {
    pub messages: u64,
    pub interrupts: u64,
    /// Of both, those the agent said it took (or, for a command, written to its stdin).
    pub taken: u64,
    /// Who sent them: `cli`, `mcp`, `pane`.
    pub from: BTreeMap<String, u64>,
}

/// The attempt's secrets, by name (never a value): whose values were masked in every file
/// and answer, and those under 6 bytes that were not (the run warned of them).
///
/// ```json
/// {"masked": ["API_TOKEN", "ANTHROPIC_API_KEY"], "too_short": ["PIN"]}
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Secrets {
    pub masked: Vec<String>,
    pub too_short: Vec<String>,
}

/// Where an attempt ran, when not on this machine (`host` in the envelope).
///
/// ```json
/// {"name": "gpu-1", "kind": "ssh", "job_id": null}
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostRef {
    /// The host's name (`subpane hosts add NAME`).
    pub name: String,
    /// `ssh` (or `slurm`).
    pub kind: String,
    /// The scheduler's job id (null over ssh).
    pub job_id: Option<String>,
    /// Slurm's state of the job (`TIMEOUT`, `CANCELLED`, `NODE_FAIL`, …) when Slurm ended
    /// it, or its signal stopped the attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

/// The git worktree an attempt ran in, and what became of it.
///
/// ```json
/// {"path": "/h/worktrees/fix-1-1", "branch": "subpane/fix-1", "base": "4b825dc6…",
///  "kept": true, "branch_kept": true}
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorktreeInfo {
    pub path: String,
    pub branch: String,
    pub base: String,
    /// The worktree is still there (a failed or cancelled attempt's, for debugging).
    pub kept: bool,
    /// The branch is still there (it has commits, or the worktree was kept).
    pub branch_kept: bool,
}

impl Envelope {
    /// The documented exit code for this envelope.
    pub fn exit_code(&self) -> i32 {
        code_for(self.status, self.failure_kind)
    }

    /// How the program ended, for people: `exit 2`, `killed by SIGKILL`, `no exit status`.
    pub fn how_it_ended(&self) -> String {
        match (self.exit_code, &self.signal) {
            (Some(c), _) => format!("exit {c}"),
            (None, Some(sig)) => format!("killed by {sig}"),
            _ => "no exit status".into(),
        }
    }

    /// The outcome in a few words, for people: `completed (exit 0)`, `failed (exit 7)`,
    /// `failed: timeout (killed by SIGTERM)`, `cancelled by interrupt (killed by SIGTERM)`,
    /// `failed: spawn`. The failure kind is named unless the status already says it
    /// (`cancelled`, with who asked) or the exit does (`exit`).
    pub fn outcome_words(&self) -> String {
        let how = match (self.exit_code, &self.signal) {
            (None, None) => String::new(),
            _ => format!(" ({})", self.how_it_ended()),
        };
        if let (Some(FailureKind::Budget), Some(b)) = (self.failure_kind, &self.budget) {
            return format!("{}: stopped: {}{how}", self.status.as_str(), b.words());
        }
        match self.failure_kind {
            Some(k) if !matches!(k, FailureKind::Exit | FailureKind::Cancelled) => {
                format!("{}: {}{how}", self.status.as_str(), k.as_str())
            }
            _ => match self
                .cancelled_by
                .filter(|_| self.status == Status::Cancelled)
            {
                Some(by) => format!("{} by {}{how}", self.status.as_str(), by.as_str()),
                None => format!("{}{how}", self.status.as_str()),
            },
        }
    }
}

/// Maps an outcome to the exit code of `run`/`wait`/`status`.
pub fn code_for(status: Status, kind: Option<FailureKind>) -> i32 {
    match (status, kind) {
        (Status::Completed, _) => exit_code::COMPLETED,
        (Status::Cancelled, _) => exit_code::CANCELLED,
        (Status::Failed, Some(FailureKind::Timeout | FailureKind::IdleTimeout)) => {
            exit_code::TIMED_OUT
        }
        (Status::Failed, Some(FailureKind::UsageLimit)) => exit_code::USAGE_LIMIT,
        (Status::Failed, _) => exit_code::FAILED,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_the_table() {
        assert_eq!(code_for(Status::Completed, None), 0);
        assert_eq!(code_for(Status::Failed, Some(FailureKind::Exit)), 1);
        assert_eq!(code_for(Status::Failed, Some(FailureKind::Lost)), 1);
        assert_eq!(code_for(Status::Failed, Some(FailureKind::Model)), 1);
        assert_eq!(code_for(Status::Failed, Some(FailureKind::Timeout)), 124);
        assert_eq!(
            code_for(Status::Failed, Some(FailureKind::IdleTimeout)),
            124
        );
        assert_eq!(
            code_for(Status::Cancelled, Some(FailureKind::Cancelled)),
            130
        );
    }

    #[test]
    fn names_match_the_serialised_form() {
        use FailureKind::*;
        for k in [
            Exit,
            Spawn,
            Timeout,
            IdleTimeout,
            Cancelled,
            Sandbox,
            Model,
            Parse,
            Lost,
            ResourceLimit,
        ] {
            assert_eq!(serde_json::to_value(k).unwrap(), k.as_str());
        }
        for s in [Status::Completed, Status::Failed, Status::Cancelled] {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
    }

    #[test]
    fn outcomes_read_plainly() {
        let env = |status, kind, exit_code, signal: Option<&str>| {
            let mut e: Envelope = serde_json::from_value(serde_json::json!({
                "schema": RESULT_SCHEMA, "run_id": "r", "attempt": 1, "agent": "command",
                "argv": [], "cwd": "/", "labels": {}, "correlation_id": null,
                "status": "completed", "failure_kind": null, "exit_code": null, "signal": null,
                "signals_sent": [], "started_at": null, "finished_at": null,
                "duration_ms": null, "terminal_event": null, "lingered": false,
                "output": Output::default(), "filter": FilterCounts::default(),
                "cleanup": Cleanup::default(), "tmux": TmuxInfo::default(),
                "sandbox": SandboxInfo::default(), "artifacts": []
            }))
            .unwrap();
            e.status = status;
            e.failure_kind = kind;
            e.exit_code = exit_code;
            e.signal = signal.map(str::to_owned);
            e.outcome_words()
        };
        use FailureKind as K;
        use Status as S;
        assert_eq!(env(S::Completed, None, Some(0), None), "completed (exit 0)");
        assert_eq!(
            env(S::Failed, Some(K::Exit), Some(7), None),
            "failed (exit 7)"
        );
        assert_eq!(
            env(S::Cancelled, Some(K::Cancelled), None, Some("SIGTERM")),
            "cancelled (killed by SIGTERM)"
        );
        assert_eq!(
            env(S::Cancelled, Some(K::Cancelled), None, None),
            "cancelled"
        );
        assert_eq!(
            env(S::Failed, Some(K::IdleTimeout), None, Some("SIGKILL")),
            "failed: idle_timeout (killed by SIGKILL)"
        );
        assert_eq!(env(S::Failed, Some(K::Spawn), None, None), "failed: spawn");
    }

    #[test]
    fn a_cancel_says_who_asked() {
        let mut e: Envelope = serde_json::from_value(serde_json::json!({
            "schema": RESULT_SCHEMA, "run_id": "r", "attempt": 1, "agent": "command",
            "argv": [], "cwd": "/", "labels": {}, "correlation_id": null,
            "status": "cancelled", "failure_kind": "cancelled", "exit_code": null,
            "signal": "SIGTERM", "signals_sent": [], "started_at": null, "finished_at": null,
            "duration_ms": null, "terminal_event": null, "lingered": false,
            "output": Output::default(), "filter": FilterCounts::default(),
            "cleanup": Cleanup::default(), "tmux": TmuxInfo::default(),
            "sandbox": SandboxInfo::default(), "artifacts": [], "cancelled_by": "mcp_client"
        }))
        .unwrap();
        assert_eq!(e.cancelled_by, Some(CancelOrigin::McpClient));
        assert_eq!(
            e.outcome_words(),
            "cancelled by mcp_client (killed by SIGTERM)"
        );
        // A timeout is said by the failure kind already.
        e.status = Status::Failed;
        e.failure_kind = Some(FailureKind::Timeout);
        e.cancelled_by = Some(CancelOrigin::Timeout);
        assert_eq!(e.outcome_words(), "failed: timeout (killed by SIGTERM)");
        for o in [
            CancelOrigin::Interrupt,
            CancelOrigin::Cancel,
            CancelOrigin::McpClient,
            CancelOrigin::Timeout,
            CancelOrigin::Sibling,
            CancelOrigin::Fanout,
            CancelOrigin::Parent,
            CancelOrigin::Signal,
        ] {
            assert_eq!(serde_json::to_value(o).unwrap(), o.as_str());
        }
    }

    #[test]
    fn errors_are_bounded() {
        let mut o = Output::default();
        for i in 0..30 {
            o.push_error(format!("e{i}"));
        }
        assert_eq!(o.errors.len(), MAX_ERRORS);
        o.errors.clear();
        o.push_error("é".repeat(3000));
        assert!(o.errors[0].len() <= 2004);
    }
}
