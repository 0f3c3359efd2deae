//! Records written while an attempt runs: `launch.json`, `worker.json`, `cancel.json`,
//! `stop.json`.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::{Cleanup, FilterCounts, KillReason, TmuxInfo};

/// Schema tag of `worker.json`.
pub const WORKER_SCHEMA: &str = "subpane.worker/v1";

/// A process, named so that a reused pid is never mistaken for it: the pid plus its start
/// time in clock ticks since boot (field 22 of `/proc/<pid>/stat`).
///
/// ```json
/// {"pid": 4242, "start_ticks": 123456}
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcRef {
    pub pid: i32,
    pub start_ticks: u64,
}

/// `launch.json`: written by the launcher right after tmux created the pane, so an observer
/// can find the worker before the worker has written anything.
///
/// ```json
/// {"socket": "/tmp/tmux-0/subpane", "session": "build-42-1", "pane_id": "%3",
///  "worker": {"pid": 4242, "start_ticks": 123456}, "launched_at": "2026-11-30T03:39:43.130Z"}
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchRecord {
    pub socket: String,
    pub session: String,
    pub pane_id: String,
    /// `None` when the pane's process had already exited when it was looked at.
    pub worker: Option<ProcRef>,
    pub launched_at: String,
}

/// Where the worker is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkerState {
    /// Signals are set up; the agent is not started yet.
    Starting,
    Running,
    Finished,
}

/// `worker.json`: the worker's facts. Rewritten atomically at start and at the end.
///
/// ```json
/// {"schema": "subpane.worker/v1", "state": "finished", "worker": {"pid": 4242, "start_ticks": 1},
///  "agent": {"pid": 4243, "start_ticks": 2}, "started_at": "…", "finished_at": "…",
///  "exit_code": 0, "signal": null, "signals_sent": [], "kill_reason": null, "spawn_error": null,
///  "terminal_event": null, "lingered": false, "filter": {…}, "pane_lines_skipped": 0,
///  "cleanup": {…}, "tmux": {…}}
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerFacts {
    pub schema: String,
    pub state: Option<WorkerState>,
    pub worker: Option<ProcRef>,
    /// The agent; its pid is also its process group id.
    pub agent: Option<ProcRef>,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    pub exit_code: Option<i32>,
    pub signal: Option<String>,
    pub signals_sent: Vec<String>,
    pub kill_reason: Option<KillReason>,
    pub spawn_error: Option<String>,
    pub terminal_event: Option<String>,
    pub lingered: bool,
    pub filter: FilterCounts,
    /// Pane lines skipped because the pane could not keep up.
    pub pane_lines_skipped: u64,
    pub cleanup: Cleanup,
    pub tmux: TmuxInfo,
    /// What the sandbox enforced, when the program ran sandboxed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<super::Enforced>,
    /// Why the sandbox could not be set up (the program did not run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_error: Option<String>,
    /// The sandbox limit found reached when the program ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_limit_hit: Option<super::LimitKind>,
    /// What stopped the attempt before its program ended by itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancelled_by: Option<super::CancelOrigin>,
    /// What became of the attempt's git worktree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<super::WorktreeInfo>,
    /// What came back of the program's branch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<super::GitCarry>,
    /// The limit of its budget that stopped the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<super::BudgetHit>,
    /// The attempt's secrets by name (see the envelope's `secrets`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secrets: Option<super::Secrets>,
    /// What was said to the running agent (see the envelope's `input`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<super::InputCounts>,
    /// How long the agent was held stopped in all (`subpane pause`; see the envelope's
    /// `stopped_ms`), and how many times: absent when it never was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stops: Option<u32>,
}

/// `cancel.json`: a cancel request. Written before the worker is signalled, so a worker that
/// had not yet started still sees it.
///
/// ```json
/// {"id": "9f2c41d07a3be815", "requested_at": "2026-11-30T03:39:50.000Z", "grace_ms": 3000,
///  "origin": "mcp_client"}
/// ```
///
/// `origin` says who asked: the envelope's `cancelled_by`. `by`, who asked in words, is read
/// (the envelope's errors say it) but no longer written.
///
/// `id` tells one request from the next (two in the same millisecond are two); files written
/// before it existed have none, and are told apart by `requested_at`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelRequest {
    #[serde(default)]
    pub id: String,
    pub requested_at: String,
    pub grace_ms: u64,
    /// Who asked: the envelope's `cancelled_by` (a request without it is a cancel of the run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<super::CancelOrigin>,
    /// Who asked, in words, when a request says it (subpane writes `origin` instead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// With `origin` `budget`: the group's budget that was crossed, for the envelope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<super::BudgetHit>,
}

impl CancelRequest {
    /// A new request with the id `id` (`crate::fresh::request_id`) and the time
    /// `requested_at` (`crate::fresh::now_rfc3339`).
    pub fn new(
        id: String,
        requested_at: String,
        grace_ms: u64,
        origin: super::CancelOrigin,
        budget: Option<super::BudgetHit>,
    ) -> Self {
        Self {
            id,
            requested_at,
            grace_ms,
            origin: Some(origin),
            by: None,
            budget,
        }
    }

    /// What tells this request from another.
    pub fn key(&self) -> &str {
        if self.id.is_empty() {
            &self.requested_at
        } else {
            &self.id
        }
    }
}

/// `stop.json`: the state asked for the agent, held stopped (`stopped: true`: SIGSTOP to its
/// process group) or running (`false`: SIGCONT). Written by `subpane pause` and `resume`
/// (renamed into place whole) before the worker is signalled (SIGUSR2); a worker that starts
/// later reads it once its program runs.
///
/// ```json
/// {"id": "9f2c41d07a3be815", "requested_at": "2026-11-30T03:39:50.000Z", "stopped": true}
/// ```
///
/// The file is a state, not an event: the latest request is the one that counts, and asking
/// for the state the agent is in changes nothing. The worker reads it as untrusted bytes (an
/// unsandboxed program can write its attempt directory): at most [`STOP_REQUEST_LIMIT`]
/// bytes, never through a link; anything else under that name is no request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopRequest {
    pub id: String,
    pub requested_at: String,
    pub stopped: bool,
}

/// The most bytes of a `stop.json` the worker reads (subpane writes about 90).
pub const STOP_REQUEST_LIMIT: u64 = 4096;

/// One decision of the egress proxy: a line of `network.jsonl`.
///
/// ```json
/// {"at":"2026-11-30T03:39:43.512Z","method":"CONNECT","host":"github.com","port":443,
///  "decision":"deny","reason":"not listed","address":null}
/// ```
///
/// `host` and `port` are the request's target (`host` lower case, no trailing dot); for a
/// request that could not be read (400) or did not arrive in time (408) `host` is as much of
/// it as could be made out and `port` is `null`; a connection refused because the proxy was
/// full (503) was never read, so `method`, `host` and `port` are `null`. `address` is the IP the proxy connected to; `null` when it did not
/// connect, with `reason` saying why (`"cannot connect to 203.0.113.9:443: …"` for an
/// allowed host that did not answer).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkEntry {
    /// RFC 3339 UTC with milliseconds.
    pub at: String,
    pub method: Option<String>,
    pub host: Option<String>,
    pub port: Option<u16>,
    pub decision: Verdict,
    pub reason: Option<String>,
    pub address: Option<IpAddr>,
}

/// What the policy said.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Allow,
    Deny,
}
