//! The tools' arguments: the MCP edge's own types, their JSON Schemas (through `schemars`)
//! and descriptions written for a model, turned into the application layer's types.
//!
//! A request (`run`, a `fanout` task) is the application layer's [`RunRequest`] itself, its
//! schema made from the one table of its fields ([`crate::app::field`]): a task is text, a
//! file is `task_file` (the `@FILE` convention is the command line's). The other shared types
//! (`AgentKind`, `LogFile`, `RunState`) carry no schema derive: a shared enum's schema is its
//! list of names ([`names`]), checked against the type by a test.

use std::collections::BTreeMap;
use std::path::PathBuf;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Deserialize;

use crate::app::{LogFile, RetryOptions};
use crate::envelope::RunState;
use serde_json::Value;

/// The schema of a request ([`RunRequest`]), from its one table ([`crate::app::field`]).
pub fn request_schema(_: &mut SchemaGenerator) -> Schema {
    let mut s = json_schema!({"type": "object", "additionalProperties": false});
    s.insert(
        "properties".into(),
        Value::Object(crate::app::field::properties()),
    );
    s
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
    // `default`: a `schema_with` field is required in the schema unless serde says otherwise.
    #[serde(default)]
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

/// `send`: a message for a running agent.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendArgs {
    /// The run id.
    pub run_id: String,
    /// The user message; leave it out with interrupt.
    pub text: Option<String>,
    /// Stop the agent's turn under way instead of sending a message.
    #[serde(default)]
    #[schemars(extend("default" = false))]
    pub interrupt: bool,
    /// How long to wait for the agent to take the message, e.g. "30s"; the server's limit
    /// when left out.
    pub max_wait: Option<String>,
}

/// `list`: runs, newest first.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    /// Only runs in this state.
    #[serde(default)]
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
    /// One request per run, with the fields of `run` (without `wait` and `max_wait`), and
    /// the queue fields: `id`, `after`, `after_any`, `priority`, `start_after`, `start_at`.
    #[schemars(schema_with = "tasks_schema")]
    // Read one by one (`app::fanout::Line::from_value`), so an error names the field inside
    // the task (`tasks[1].sandbx`).
    pub tasks: Vec<Value>,
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
    /// Run the tasks without a `host` of their own on these hosts (names from `subpane hosts
    /// ls`), each on the one with the most room when its turn comes; `concurrency` holds on
    /// each.
    #[serde(default)]
    pub hosts: Vec<String>,
    /// The group's budget: once the total tokens of all its tasks (a running task's so far)
    /// pass this, start no new task and stop the running ones, each ending as `budget`.
    #[schemars(range(min = 1))]
    pub max_tokens: Option<u64>,
    /// The group's budget in US dollars, as `max_tokens`, over the cost its tasks' CLIs
    /// report; refused when a task runs a CLI that reports no cost (codex).
    pub max_cost: Option<f64>,
    /// A task whose run hits its account's usage limit: "fail" (default) ends it so;
    /// "wait" starts its next attempt, which waits for the reset and resumes the session
    /// (keeping its slot).
    #[schemars(schema_with = "on_usage_limit_schema")]
    #[serde(default)]
    pub on_usage_limit: crate::app::fanout::OnUsageLimit,
    /// Answer after this long at the latest, e.g. "45s" (the tasks go on; call `wait` with
    /// the group for the rest). The server's default is below the 60 s after which many
    /// clients give up on a call.
    pub max_wait: Option<String>,
}

/// `pause`: a detached fan-out group starts no new task until `resume`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PauseArgs {
    /// The group id (the `group` of a `fanout` answer), or a unique start of it.
    pub group: String,
    /// false (default): the running tasks go on; true: they are stopped too (SIGSTOP) and
    /// continue at `resume`.
    #[serde(default)]
    #[schemars(extend("default" = false))]
    pub stop_running: bool,
    /// Also run at most this many of its tasks at once from now on.
    #[schemars(range(min = 1))]
    pub concurrency: Option<usize>,
}

/// `resume`: a paused group starts its queued tasks again.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResumeArgs {
    /// The group id (the `group` of a `fanout` answer), or a unique start of it.
    pub group: String,
    /// Also run at most this many of its tasks at once from now on.
    #[schemars(range(min = 1))]
    pub concurrency: Option<usize>,
}

/// `retry`: the next attempt of a run that has ended.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RetryArgs {
    /// The run id.
    pub run_id: String,
    /// Continue the agent's session of the latest attempt (with `task` as the follow-up
    /// message) instead of starting over.
    #[serde(default)]
    pub resume: bool,
    /// With `resume`, the follow-up message; else a new task for a fresh session. The
    /// latest attempt's task when left out. Taken as it is, even when it begins with "@".
    #[serde(default)]
    pub task: Option<String>,
    /// A file whose content is the task, instead of `task`.
    #[serde(default)]
    pub task_file: Option<PathBuf>,
    /// Values of variables: those the latest attempt had set (records keep names only) and
    /// any new ones.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The latest attempt hit its account's usage limit: the new attempt waits until the
    /// limit resets (its `output.usage_limit.retry_at`), then continues the session. Give
    /// `wait: false`: the wait may be hours, and the attempt waits on its own.
    #[serde(default)]
    pub at_reset: bool,
    /// Wait this long (e.g. "30m") before the new attempt starts: with `at_reset`, instead
    /// of the reset time (a CLI that said none), or alone.
    #[serde(default)]
    pub after: Option<String>,
    /// true (default): answer when the attempt has ended, or after `max_wait` with it still
    /// going; false: answer at once.
    #[schemars(extend("default" = true))]
    #[serde(default)]
    pub wait: Option<bool>,
    /// Answer after this long at the latest, e.g. "45s" (the attempt goes on).
    #[serde(default)]
    pub max_wait: Option<String>,
}

impl RetryArgs {
    pub fn options(&self) -> RetryOptions {
        RetryOptions {
            resume: self.resume,
            task: self.task.clone(),
            task_file: self.task_file.clone(),
            env: self.env.clone(),
            at_reset: self.at_reset,
            after: self.after.clone(),
        }
    }
}

/// The names a shared enum is written as; its schema.
fn names(names: &[&str]) -> Schema {
    json_schema!({"type": "string", "enum": names})
}

const LOG_FILES: [&str; 4] = ["events", "stderr", "output", "stdout"];
const RUN_STATES: [&str; 7] = [
    "queued",
    "starting",
    "running",
    "completed",
    "failed",
    "cancelled",
    "damaged",
];

/// A task: a request's fields and the queue fields of a fan-out line.
fn tasks_schema(g: &mut SchemaGenerator) -> Schema {
    let mut item = request_schema(g).to_value();
    let props = item["properties"].as_object_mut().expect("an object");
    props.extend(crate::app::fanout::queue::properties());
    let mut s = json_schema!({"type": "array"});
    s.insert("items".into(), item);
    s
}

fn on_usage_limit_schema(_: &mut SchemaGenerator) -> Schema {
    let mut s = names(&["fail", "wait"]);
    s.insert("default".into(), "fail".into());
    s
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
    use crate::app::field::AGENT_NAMES as AGENTS;
    use crate::spec::AgentKind;
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
                RunState::Queued
                | RunState::Starting
                | RunState::Running
                | RunState::Completed
                | RunState::Failed
                | RunState::Cancelled
                | RunState::Damaged => {}
            }
        }
        assert_eq!(states.len(), 7);
    }

    #[test]
    fn a_task_is_text_even_when_it_begins_with_an_at() {
        let r: crate::app::RunRequest = serde_json::from_value(
            serde_json::json!({"agent": "pi", "task": "@alice asked: fix it"}),
        )
        .unwrap();
        assert_eq!(r.task.as_deref(), Some("@alice asked: fix it"));
        assert_eq!(r.task_file, None);
    }
}
