//! The tools' arguments: the MCP edge's own types, their JSON Schemas (through `schemars`)
//! and descriptions written for a model, turned into the application layer's types.
//!
//! The shared types (`RunRequest`, `AgentKind`, `LogFile`, `RunState`) carry no schema
//! derive: a tool argument is what a model fills in (a task is text, a file is `task_file`),
//! which need not be what the command line fills in (`--task @FILE`). A shared enum's schema
//! is its list of names ([`names`]), checked against the type by a test.

use std::collections::BTreeMap;
use std::path::PathBuf;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Deserialize;

use crate::app::{LogFile, RetryOptions, RunRequest};
use crate::envelope::RunState;
use crate::spec::{AgentKind, DEFAULT_GRACE, DEFAULT_LINGER, DEFAULT_MAX_DEPTH, duration_text};

/// The request of a `run` call or of one `fanout` task: what to run, and how.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct TaskArgs {
    /// The agent CLI to run with `task`: "pi", "claude" or "codex". Leave it out (or give
    /// "command") to run `argv` instead.
    #[schemars(schema_with = "agent_schema")]
    pub agent: Option<AgentKind>,
    /// What the agent should do, as text. Taken as it is, even when it begins with "@".
    pub task: Option<String>,
    /// A file whose content is the agent's task, instead of `task` (a relative path is
    /// relative to the server's directory).
    pub task_file: Option<PathBuf>,
    /// A program and its arguments, e.g. ["make", "test"]. Not a shell line: use
    /// ["sh", "-c", "..."] for one. Give either this or `agent` with `task`.
    pub argv: Vec<String>,
    /// The run id (letters, digits, ".", "_", "-"); generated when left out. Must be new.
    pub run_id: Option<String>,
    /// The directory the program runs in; the server's own directory when left out.
    pub cwd: Option<PathBuf>,
    /// The agent's model, as the agent CLI names it.
    pub model: Option<String>,
    /// The agent's system prompt, as text.
    pub system_prompt: Option<String>,
    /// A file whose content is the agent's system prompt, instead of `system_prompt`.
    pub system_prompt_file: Option<PathBuf>,
    /// Tools the agent may use (for claude they are pre-approved).
    pub tools: Vec<String>,
    /// The agent's thinking level.
    pub thinking: Option<String>,
    /// An agent session to continue: the `output.session_id` of an earlier result.
    pub resume: Option<String>,
    /// Labels recorded with the run, e.g. {"team": "core"}; `list` filters by them.
    pub labels: BTreeMap<String, String>,
    /// An id of your own, recorded with the run as it is.
    pub correlation_id: Option<String>,
    /// Stop (kill) the run after this long, with a unit: "30s", "10m", "2h". No limit when
    /// left out.
    pub timeout: Option<String>,
    /// Stop (kill) the run after this long without output, e.g. "5m".
    pub idle_timeout: Option<String>,
    /// How long an agent may stay alive after its final event before it is killed.
    #[schemars(extend("default" = duration_text(DEFAULT_LINGER)))]
    pub linger: Option<String>,
    /// Time between the polite stop signal and the kill, when a run is stopped.
    #[schemars(extend("default" = duration_text(DEFAULT_GRACE)))]
    pub grace: Option<String>,
    /// Variables set for the program. Records keep their names only, never the values.
    pub env: BTreeMap<String, String>,
    /// Keep the run's terminal session after it ends, so a human can read its screen.
    pub keep_session: bool,
    /// Run the program in the kernel sandbox: it writes only its workspace (`cwd`), a
    /// private /tmp and the `writable` paths; no network unless `network` says so.
    pub sandbox: bool,
    /// Network of a sandboxed program: "none" (the default), "full", or "allow:HOST,..."
    /// (host names, IP literals or *.example.com).
    pub network: Option<String>,
    /// More files or directories the sandboxed program may write.
    pub writable: Vec<PathBuf>,
    /// Paths the sandboxed program cannot see.
    pub hide: Vec<PathBuf>,
    /// Names of variables of the server's environment passed into the sandbox.
    pub env_pass: Vec<String>,
    /// Processes and threads the sandboxed program may have at once (at least 300).
    #[schemars(extend("default" = 4096))]
    pub max_procs: Option<u32>,
    /// What one sandboxed process may allocate, e.g. "4G".
    #[schemars(extend("default" = "8G"))]
    pub max_memory: Option<String>,
    /// The size of the sandbox's private /tmp (its files take memory), e.g. "512M".
    #[schemars(extend("default" = "2G"))]
    pub max_tmp: Option<String>,
    /// The largest file a sandboxed process may write, e.g. "1G".
    #[schemars(extend("default" = "8G"))]
    pub max_file_size: Option<String>,
    /// Run in a new git worktree of the `cwd` repository; its diff is kept at the end.
    pub worktree: bool,
    /// How deep runs started by this run's program (and theirs) may nest. It can only
    /// lower the limit of an enclosing run.
    #[schemars(extend("default" = DEFAULT_MAX_DEPTH))]
    pub max_depth: Option<u32>,
}

impl From<TaskArgs> for RunRequest {
    fn from(a: TaskArgs) -> Self {
        // Every field, so a field added to the request and not here does not compile.
        RunRequest {
            agent: a.agent,
            task: a.task,
            task_file: a.task_file,
            argv: a.argv,
            run_id: a.run_id,
            cwd: a.cwd,
            model: a.model,
            system_prompt: a.system_prompt,
            system_prompt_file: a.system_prompt_file,
            tools: a.tools,
            thinking: a.thinking,
            resume: a.resume,
            labels: a.labels,
            correlation_id: a.correlation_id,
            timeout: a.timeout,
            idle_timeout: a.idle_timeout,
            linger: a.linger,
            grace: a.grace,
            env: a.env,
            keep_session: a.keep_session,
            sandbox: a.sandbox,
            network: a.network,
            writable: a.writable,
            hide: a.hide,
            env_pass: a.env_pass,
            max_procs: a.max_procs,
            max_memory: a.max_memory,
            max_tmp: a.max_tmp,
            max_file_size: a.max_file_size,
            worktree: a.worktree,
            max_depth: a.max_depth,
        }
    }
}

/// How long a call that waits answers at the latest (`run`, `retry`, `wait`, `fanout`).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Waiting {
    /// true (default): answer when the run has ended, or after `max_wait` with the run
    /// still going; false: answer at once with the run id.
    #[schemars(extend("default" = true))]
    pub wait: Option<bool>,
    /// Answer after this long at the latest, e.g. "45s" (the run goes on; call `wait` with
    /// its run id for the result). The server's default is below the 60 s after which many
    /// clients give up on a call.
    pub max_wait: Option<String>,
}

/// `status`: one run's state.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StatusArgs {
    /// The run id.
    pub run_id: String,
    /// Which attempt (1, 2, ...); the latest when left out.
    #[schemars(range(min = 1))]
    pub attempt: Option<u32>,
}

/// Answer when any run finishes, or when all have.
#[derive(Clone, Copy, Debug, Default, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Any,
    #[default]
    All,
}

/// `wait`: one, any or all of several runs.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitArgs {
    /// The run ids to wait for.
    #[serde(default)]
    pub run_ids: Vec<String>,
    /// Also every run of this fan-out group (the `group` of a `fanout` answer).
    pub group: Option<String>,
    /// "all" (default): until every run has ended; "any": until the first one has.
    #[serde(default)]
    pub mode: Mode,
    /// Stop waiting after this long, e.g. "30s" or "10m" (the runs go on). At most
    /// `max_wait`.
    pub timeout: Option<String>,
    /// Answer after this long at the latest, e.g. "45s" (the runs go on). The server's
    /// default is below the 60 s after which many clients give up on a call.
    pub max_wait: Option<String>,
    /// Wait for this attempt (1, 2, ...) of each run; the latest when left out.
    #[schemars(range(min = 1))]
    pub attempt: Option<u32>,
}

/// `logs`: the end of one file of an attempt.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogsArgs {
    /// The run id.
    pub run_id: String,
    /// Which file: "events" (an agent's JSON events; the default for agents), "stderr",
    /// "output" (an agent's final text) or "stdout" (the default for programs).
    #[schemars(schema_with = "log_file_schema")]
    pub file: Option<LogFile>,
    /// Which attempt (1, 2, ...); the latest when left out.
    #[schemars(range(min = 1))]
    pub attempt: Option<u32>,
    /// At most this many bytes from the end of the file.
    #[schemars(range(min = 1, max = super::LOGS_MAX), extend("default" = super::LOGS_DEFAULT))]
    pub max_bytes: Option<u64>,
}

/// `cancel`: stop a run.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelArgs {
    /// The run id.
    pub run_id: String,
    /// Which attempt (1, 2, ...); the latest when left out.
    #[schemars(range(min = 1))]
    pub attempt: Option<u32>,
    /// Time between the polite stop signal and the kill, e.g. "3s"; the run's own when
    /// left out.
    pub grace: Option<String>,
}

/// `list`: runs, newest first.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    /// Only runs in this state.
    #[schemars(schema_with = "run_state_schema")]
    pub status: Option<RunState>,
    /// Only runs of this fan-out group.
    pub group: Option<String>,
    /// Only runs with all of these labels, e.g. {"team": "core"}.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// At most this many runs.
    #[schemars(range(min = 1, max = super::LIST_MAX), extend("default" = super::LIST_DEFAULT))]
    pub limit: Option<usize>,
}

/// `fanout`: many runs, at most `concurrency` at once.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FanoutArgs {
    /// One request per run, with the fields of `run` (without `wait` and `max_wait`).
    pub tasks: Vec<TaskArgs>,
    /// Run at most this many at once.
    #[schemars(range(min = 1), extend("default" = crate::app::fanout::DEFAULT_CONCURRENCY))]
    pub concurrency: Option<usize>,
    /// Start no new task after the first one that does not complete (or cannot start); the
    /// rest are skipped.
    #[serde(default)]
    pub fail_fast: bool,
    /// With the first task that does not complete (or cannot start), also cancel the
    /// running ones.
    #[serde(default)]
    pub cancel_siblings: bool,
    /// Answer after this long at the latest, e.g. "45s" (the tasks go on; call `wait` with
    /// the group for the rest). The server's default is below the 60 s after which many
    /// clients give up on a call.
    pub max_wait: Option<String>,
}

/// `retry`: the next attempt of a run that has ended.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct RetryArgs {
    /// The run id.
    pub run_id: String,
    /// Continue the agent's session of the latest attempt (with `task` as the follow-up
    /// message) instead of starting over.
    pub resume: bool,
    /// With `resume`, the follow-up message; else a new task for a fresh session. The
    /// latest attempt's task when left out. Taken as it is, even when it begins with "@".
    pub task: Option<String>,
    /// A file whose content is the task, instead of `task`.
    pub task_file: Option<PathBuf>,
    /// Values of variables: those the latest attempt had set (records keep names only) and
    /// any new ones.
    pub env: BTreeMap<String, String>,
    /// true (default): answer when the attempt has ended, or after `max_wait` with it still
    /// going; false: answer at once.
    #[schemars(extend("default" = true))]
    pub wait: Option<bool>,
    /// Answer after this long at the latest, e.g. "45s" (the attempt goes on).
    pub max_wait: Option<String>,
}

impl RetryArgs {
    pub fn options(&self) -> RetryOptions {
        RetryOptions {
            resume: self.resume,
            task: self.task.clone(),
            task_file: self.task_file.clone(),
            env: self.env.clone(),
        }
    }
}

/// The names a shared enum is written as; its schema.
fn names(names: &[&str]) -> Schema {
    json_schema!({"type": "string", "enum": names})
}

const AGENTS: [&str; 4] = ["pi", "claude", "codex", "command"];
const LOG_FILES: [&str; 4] = ["events", "stderr", "output", "stdout"];
const RUN_STATES: [&str; 6] = [
    "starting",
    "running",
    "completed",
    "failed",
    "cancelled",
    "damaged",
];

fn agent_schema(_: &mut SchemaGenerator) -> Schema {
    names(&AGENTS)
}

fn log_file_schema(_: &mut SchemaGenerator) -> Schema {
    names(&LOG_FILES)
}

fn run_state_schema(_: &mut SchemaGenerator) -> Schema {
    names(&RUN_STATES)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::de::DeserializeOwned;

    fn every<T: DeserializeOwned + std::fmt::Debug + PartialEq>(names: &[&str]) -> Vec<T> {
        let all: Vec<T> = names
            .iter()
            .map(|n| serde_json::from_value(serde_json::json!(n)).unwrap())
            .collect();
        for (i, a) in all.iter().enumerate() {
            assert!(!all[..i].contains(a), "{names:?} names {a:?} twice");
        }
        all
    }

    /// A variant added to a shared enum fails to compile here, until its name is listed.
    #[test]
    fn the_names_are_every_variant_of_the_shared_types() {
        let agents: Vec<AgentKind> = every(&AGENTS);
        for a in &agents {
            match a {
                AgentKind::Pi | AgentKind::Claude | AgentKind::Codex | AgentKind::Command => {}
            }
        }
        assert_eq!(agents.len(), 4);
        let files: Vec<LogFile> = every(&LOG_FILES);
        for f in &files {
            match f {
                LogFile::Events | LogFile::Stderr | LogFile::Output | LogFile::Stdout => {}
            }
        }
        assert_eq!(files.len(), 4);
        let states: Vec<RunState> = every(&RUN_STATES);
        for s in &states {
            match s {
                RunState::Starting
                | RunState::Running
                | RunState::Completed
                | RunState::Failed
                | RunState::Cancelled
                | RunState::Damaged => {}
            }
        }
        assert_eq!(states.len(), 6);
    }

    /// Every field of a request is an argument of `run` and of a `fanout` task (and the
    /// MCP-only ones are not in the request).
    #[test]
    fn the_task_arguments_are_the_request_fields() {
        let req = serde_json::to_value(RunRequest::default()).unwrap();
        let schema = super::super::schema::of::<TaskArgs>();
        let mut args: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
        let mut fields: Vec<&String> = req.as_object().unwrap().keys().collect();
        args.sort();
        fields.sort();
        assert_eq!(args, fields);
    }

    #[test]
    fn a_task_is_text_even_when_it_begins_with_an_at() {
        let a: TaskArgs = serde_json::from_value(
            serde_json::json!({"agent": "pi", "task": "@alice asked: fix it"}),
        )
        .unwrap();
        let r = RunRequest::from(a);
        assert_eq!(r.task.as_deref(), Some("@alice asked: fix it"));
        assert_eq!(r.task_file, None);
    }
}
