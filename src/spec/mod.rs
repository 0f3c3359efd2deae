//! The launch contract: what one attempt runs, where, and under which limits.
//!
//! A [`AttemptSpec`] is fully resolved and immutable once written to `spec.json`: the worker
//! reads it and nothing else (plus the one-shot environment file, see [`crate::store`]).

mod budget;
mod duration;
mod input;
mod run_id;
mod sandbox;
mod size;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use budget::{Price, Usd};
pub use duration::{DurationError, duration_text, millis, parse_duration, parse_positive_duration};
pub use input::{INPUT_REQUEST_LIMIT, InputAnswer, InputFrom, InputRequest};
pub use run_id::{RunId, RunIdError};
pub use sandbox::{
    AgentState, GitRepo, HostPattern, Network, SandboxAsk, SandboxLimits, SandboxSpec,
    valid_host_name,
};
pub use size::{format_size, parse_size};

/// Schema tag of `spec.json`.
pub const SPEC_SCHEMA: &str = "subpane.spec/v1";
/// Schema tag of `run.json`.
pub const RUN_SCHEMA: &str = "subpane.run/v1";

/// Which adapter reads the program's output.
///
/// ```json
/// "command"
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Hash)]
#[serde(rename_all = "snake_case")]
pub enum AgentKind {
    Pi,
    Claude,
    Codex,
    Command,
}

impl AgentKind {
    pub fn as_str(self) -> &'static str {
        match self {
            AgentKind::Pi => "pi",
            AgentKind::Claude => "claude",
            AgentKind::Codex => "codex",
            AgentKind::Command => "command",
        }
    }
}

/// Limits of an attempt, enforced by the worker (so they hold with `--detach`): time, and
/// the budget of an agent's usage (absent when not set).
///
/// ```json
/// {"timeout_ms": 600000, "idle_timeout_ms": null, "linger_ms": 5000, "grace_ms": 3000,
///  "max_turns": 10, "max_tokens": 200000, "max_cost_usd": 0.5}
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Wall-clock limit from the agent's start.
    pub timeout_ms: Option<u64>,
    /// Limit on silence: no bytes on stdout or stderr for this long.
    pub idle_timeout_ms: Option<u64>,
    /// How long an agent may stay alive after its terminal event.
    pub linger_ms: u64,
    /// Time between SIGTERM and SIGKILL when stopping the process group.
    pub grace_ms: u64,
    /// The agent is stopped once it has done more turns than this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u64>,
    /// The agent is stopped once its total tokens (input, output, cache) pass this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// The agent is stopped once the cost its CLI reports passes this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<Usd>,
    /// With a budget, for an attempt that resumes an agent session: what the session's
    /// earlier attempts in this home used (their envelopes), which the budget counts too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_before: Option<crate::envelope::BudgetUsage>,
    /// The model's price (`--price`): the cost of a CLI that reports none, from its usage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price: Option<Price>,
    /// With input (`stdin: "input"`): how long an agent that finished its turn waits for a
    /// next message before its input is closed (`--keep-open`); `None` closes it at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_open_ms: Option<u64>,
}

/// How long an agent may stay alive after its terminal event when nobody said (`--linger`).
pub const DEFAULT_LINGER: Duration = Duration::from_secs(5);
/// Time between SIGTERM and SIGKILL when nobody said (`--grace`).
pub const DEFAULT_GRACE: Duration = Duration::from_secs(3);

impl Default for Limits {
    fn default() -> Self {
        Self {
            timeout_ms: None,
            idle_timeout_ms: None,
            linger_ms: millis(DEFAULT_LINGER),
            grace_ms: millis(DEFAULT_GRACE),
            max_turns: None,
            max_tokens: None,
            max_cost_usd: None,
            session_before: None,
            price: None,
            keep_open_ms: None,
        }
    }
}

/// The agent's environment, by name only: values never reach a record.
///
/// ```json
/// {"inherit": true, "set": ["API_BASE"], "removed": ["TMUX", "TMUX_PANE"], "passed": []}
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvSpec {
    /// The launching process's environment is passed on (all of it but `removed`). False in
    /// a sandbox, where only `passed` is.
    pub inherit: bool,
    /// Names set with `--env K=V` (or by subpane for the sandbox: `TMPDIR`, proxy variables).
    pub set: Vec<String>,
    /// Names removed from the environment.
    pub removed: Vec<String>,
    /// In a sandbox: the names passed on from the caller's environment (what the adapter
    /// needs, and `--env-pass`).
    #[serde(default)]
    pub passed: Vec<String>,
    /// The names whose values are secret, masked as `***` wherever subpane writes: every
    /// `--env` name, the caller's variables named like a secret (`*_TOKEN`, `*_KEY`, …, see
    /// [`crate::secrets::looks_secret`]) and the agent's key variables, but never an
    /// `--env-plain` name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secret: Vec<String>,
    /// Names set with `--env-plain` (values that are not secret; a retry keeps them so).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plain: Vec<String>,
}

/// What an agent adapter was asked to do (absent for the `command` adapter).
///
/// ```json
/// {"prompt": "fix the test", "model": null, "system_prompt": null, "tools": [], "thinking": null, "resume_session": null}
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskSpec {
    pub prompt: String,
    pub model: Option<String>,
    pub system_prompt: Option<String>,
    pub tools: Vec<String>,
    pub thinking: Option<String>,
    /// The agent session to continue (`--resume`).
    pub resume_session: Option<String>,
    /// The CLI runs in its input mode (stream-json input, RPC): the prompt is its first
    /// message on stdin and more may follow (`Stdin::Input`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub input: bool,
}

/// Where the attempt's pane lives.
///
/// ```json
/// {"socket": "/tmp/tmux-0/subpane", "session": "build-42-1"}
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TmuxTarget {
    pub socket: PathBuf,
    pub session: String,
}

/// Where the agent's stdin comes from.
///
/// ```json
/// "null"
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stdin {
    /// `/dev/null`: nothing can block on input.
    #[default]
    Null,
    /// `prompt.txt` of the attempt (CLIs that read a large prompt from stdin).
    PromptFile,
    /// A pipe from the worker: the agent CLI's structured input (its prompt first, then the
    /// messages `subpane send`, MCP `send` and the pane's input line give it), or for a
    /// command (`--stdin pipe`) each message's text and a newline.
    Input,
}

/// The resolved launch spec, `runs/<id>/attempts/<n>/spec.json`.
///
/// ```json
/// {"schema": "subpane.spec/v1", "run_id": "build-42", "attempt": 1, "agent": "command",
///  "argv": ["/usr/bin/make", "test"], "cwd": "/src/app", "stdin": "null", "labels": {},
///  "correlation_id": null, "limits": {"timeout_ms": null, "idle_timeout_ms": null, "linger_ms": 5000, "grace_ms": 3000},
///  "env": {"inherit": true, "set": [], "removed": ["TMUX", "TMUX_PANE"]}, "task": null,
///  "keep_session": false, "tmux": {"socket": "/tmp/tmux-0/subpane", "session": "build-42-1"},
///  "sandbox": {"enabled": false}, "created_at": "2026-11-30T03:39:43.123Z"}
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptSpec {
    pub schema: String,
    pub run_id: RunId,
    pub attempt: u32,
    pub agent: AgentKind,
    /// The exact argv executed; `argv[0]` is resolved to an absolute path.
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    pub stdin: Stdin,
    pub labels: BTreeMap<String, String>,
    pub correlation_id: Option<String>,
    pub limits: Limits,
    pub env: EnvSpec,
    pub task: Option<TaskSpec>,
    pub keep_session: bool,
    pub tmux: TmuxTarget,
    pub sandbox: SandboxSpec,
    pub created_at: String,
    /// The fan-out group of the run.
    #[serde(default)]
    pub group: Option<String>,
    /// The run and attempt that started this run, when one did (a subagent calling subpane).
    #[serde(default)]
    pub lineage: Option<Lineage>,
    /// The attempt whose agent session this attempt continues (`retry --resume`).
    #[serde(default)]
    pub resumed_from: Option<u32>,
    /// The git worktree the attempt runs in (`--worktree`).
    #[serde(default)]
    pub worktree: Option<WorktreeSpec>,
    /// How deep runs started below this one may nest (given to the program as
    /// `SUBPANE_MAX_DEPTH`).
    #[serde(default = "default_max_depth")]
    pub max_depth: u32,
    /// The attempt this one lives within: a run from inside a sandbox ends when its
    /// parent's attempt ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within: Option<Within>,
    /// The attempt waits in its pane until then before its program starts (`retry
    /// --at-reset`, `--after`): its worker sleeps on a timer, cancellable, and `ls`, `top`
    /// and `status` say `waiting until …`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at: Option<StartAt>,
    /// An unsandboxed agent whose CLI takes settings per attempt (see
    /// `Adapter::settings_defaults`): its state directory for the attempt, made of links to
    /// the user's and the merged settings file. (A sandboxed one gets them in its own
    /// `sandbox.agent_state`.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_overlay: Option<AgentOverlay>,
}

/// The state directory an unsandboxed attempt's CLI is pointed at (`var`): `dir`, in the
/// attempt, links to every entry of the user's `from` but the settings file, which is the
/// user's with the adapter's defaults under it. What the CLI writes through a link (a
/// refreshed login) reaches the user's own file.
///
/// ```json
/// {"var": "PI_CODING_AGENT_DIR", "dir": "/h/runs/r/attempts/1/agent",
///  "from": "/home/u/.pi/agent"}
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentOverlay {
    pub var: String,
    pub dir: PathBuf,
    pub from: PathBuf,
}

/// When an attempt's program starts, and why it waits until then.
///
/// ```json
/// {"at": "2026-12-04T00:38:00Z", "why": "usage limit"}
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartAt {
    /// RFC 3339.
    pub at: String,
    /// In words: `usage limit` (its reset, `retry --at-reset`), or `asked` (`--after`).
    pub why: String,
}

impl StartAt {
    /// The instant, `None` when `at` is not RFC 3339 (then nothing waits).
    pub fn instant(&self) -> Option<std::time::SystemTime> {
        humantime::parse_rfc3339_weak(&self.at).ok()
    }
}

/// The attempt a run from inside a sandbox lives within (`app::nest` sets it): its worker
/// watches the parent's worker and cancels its own attempt when that one has exited
/// (`worker::within`). A `retry` does not carry it: a retry is a run of its own.
///
/// ```json
/// {"run_id": "review", "attempt": 1, "worker": {"pid": 4242, "start_ticks": 123456}}
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Within {
    pub run_id: String,
    pub attempt: u32,
    /// The parent's worker, named so that a reused pid is never taken for it.
    pub worker: crate::envelope::ProcRef,
}

/// The nesting limit when nobody set one.
pub const DEFAULT_MAX_DEPTH: u32 = 3;

/// The variables the worker sets for an attempt's program: who it is and where it sits
/// (lineage), and for a sandboxed program where it asks for nested runs. They describe one
/// process tree, so nothing else may carry them on: the tmux server (and so every pane)
/// never gets them from the client that starts it.
pub const ATTEMPT_VARS: &[&str] = &[
    "SUBPANE_RUN_ID",
    "SUBPANE_ATTEMPT",
    "SUBPANE_ATTEMPT_DIR",
    "SUBPANE_OUT_DIR",
    "SUBPANE_DEPTH",
    "SUBPANE_MAX_DEPTH",
    "SUBPANE_CHAIN",
    NEST_SOCKET_VAR,
];

/// The variable that names a sandboxed program's request socket: its `subpane run` asks the
/// attempt's worker for a nested run there (see `app::nest`).
pub const NEST_SOCKET_VAR: &str = "SUBPANE_NEST_SOCKET";

/// The request socket's name in the attempt directory.
pub const NEST_SOCKET: &str = "nest.sock";

impl AttemptSpec {
    /// The [`ATTEMPT_VARS`] the worker gives this attempt's program, whose attempt directory
    /// is `dir` and artifact directory `out_dir`: who it is, where it sits, and where its
    /// artifacts go. One list for the worker and for a nested run that finds the worker as
    /// its nearest ancestor.
    pub fn program_vars(
        &self,
        dir: &std::path::Path,
        out_dir: &std::path::Path,
    ) -> Vec<(&'static str, std::ffi::OsString)> {
        let depth = self.lineage.as_ref().map_or(0, |l| l.depth);
        let mut chain = self
            .lineage
            .as_ref()
            .map(|l| l.chain.join("/"))
            .unwrap_or_default();
        if !chain.is_empty() {
            chain.push('/');
        }
        chain.push_str(self.run_id.as_str());
        let mut vars = vec![
            ("SUBPANE_RUN_ID", self.run_id.as_str().into()),
            ("SUBPANE_ATTEMPT", self.attempt.to_string().into()),
            ("SUBPANE_ATTEMPT_DIR", dir.as_os_str().to_owned()),
            ("SUBPANE_OUT_DIR", out_dir.as_os_str().to_owned()),
            // Lineage: a run that this program starts knows its parent, its depth and the
            // limit (see `app::plan`).
            ("SUBPANE_DEPTH", depth.to_string().into()),
            ("SUBPANE_MAX_DEPTH", self.max_depth.to_string().into()),
            ("SUBPANE_CHAIN", chain.into()),
        ];
        // A sandboxed program cannot reach the home: its nested runs go through the worker.
        if self.sandbox.enabled {
            vars.push((NEST_SOCKET_VAR, dir.join(NEST_SOCKET).into_os_string()));
        }
        vars
    }
}

fn default_max_depth() -> u32 {
    DEFAULT_MAX_DEPTH
}

/// Where a run came from: the attempt whose program started it, and how deep it is.
///
/// ```json
/// {"parent_run": "review", "parent_attempt": 1, "depth": 1, "chain": ["review"]}
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lineage {
    pub parent_run: String,
    pub parent_attempt: u32,
    /// 1 for a run started by a top-level run's program, 2 below that, and so on.
    pub depth: u32,
    /// The run ids from the top down to the parent.
    pub chain: Vec<String>,
}

/// A git worktree made for one attempt, outside the repository.
///
/// ```json
/// {"repo": "/src/app", "path": "/h/worktrees/fix-1-1", "branch": "subpane/fix-1",
///  "base": "4b825dc642cb6eb9a060e54bf8d69288fbee4904", "subdir": "",
///  "common_dir": "/src/app/.git", "git_dir": "/src/app/.git/worktrees/fix-1-1"}
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorktreeSpec {
    /// The top of the repository the worktree belongs to.
    pub repo: PathBuf,
    /// The worktree's directory (under `$SUBPANE_HOME/worktrees/`).
    pub path: PathBuf,
    /// The branch made for it, named after the run.
    pub branch: String,
    /// The commit it started from (filled in when it is made).
    pub base: String,
    /// Where `--cwd` was inside the repository; the program runs there in the worktree.
    pub subdir: PathBuf,
    /// The repository's own git directory (`git rev-parse --git-common-dir`), shared by
    /// all its worktrees.
    #[serde(default)]
    pub common_dir: PathBuf,
    /// The worktree's private git directory (`<common_dir>/worktrees/<name>`, filled in when
    /// it is made). Git is pointed at it explicitly at the end rather than through the
    /// worktree's `.git` file, which the program could have rewritten.
    #[serde(default)]
    pub git_dir: PathBuf,
    /// How long one git command for this worktree may take before it is killed
    /// (`SUBPANE_GIT_TIMEOUT` of the caller; absent: the default, 2 minutes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_time_limit_ms: Option<u64>,
}

/// One entry of `run.json`'s attempt list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptRef {
    pub attempt: u32,
    pub created_at: String,
}

/// `runs/<id>/run.json`: the request and its attempts.
///
/// ```json
/// {"schema": "subpane.run/v1", "run_id": "build-42", "agent": "command", "labels": {"team": "core"},
///  "correlation_id": null, "group": null, "created_at": "2026-11-30T03:39:43.123Z",
///  "attempts": [{"attempt": 1, "created_at": "2026-11-30T03:39:43.123Z"}]}
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRecord {
    pub schema: String,
    pub run_id: RunId,
    pub agent: AgentKind,
    pub labels: BTreeMap<String, String>,
    pub correlation_id: Option<String>,
    /// Fan-out group id, when the run was started by `fanout`.
    pub group: Option<String>,
    pub created_at: String,
    pub attempts: Vec<AttemptRef>,
    /// The attempt that started this run, when one did.
    #[serde(default)]
    pub lineage: Option<Lineage>,
}

/// `K=V\0` pairs, the kernel's format of an environment (`/proc/PID/environ`), also used for
/// an attempt's one-shot environment file. Entries without `=` are skipped.
pub fn parse_env_block(raw: &[u8]) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    use std::os::unix::ffi::OsStringExt;
    raw.split(|b| *b == 0)
        .filter_map(|kv| {
            let eq = kv.iter().position(|b| *b == b'=')?;
            Some((
                std::ffi::OsString::from_vec(kv[..eq].to_vec()),
                std::ffi::OsString::from_vec(kv[eq + 1..].to_vec()),
            ))
        })
        .collect()
}
