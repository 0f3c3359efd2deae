//! The tools: their names, titles, descriptions, annotations, and input and output schemas.
//!
//! ```text
//!  args.rs    the arguments (serde + schemars), turned into the application layer's types
//!  schema.rs  input schemas made strict-client safe; output schemas by hand
//!  mod.rs     the list a client gets from tools/list
//!  tests.rs   the list checked: titles, annotations, strict schemas, agreeing with the server
//! ```
//!
//! Every argument type refuses unknown fields, like `RunRequest`: a misspelt argument is an
//! error the model can read, never silently ignored. Descriptions are written for a model:
//! they speak of the tools and their arguments, never of command-line flags.

mod args;
mod schema;

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

pub use args::{
    CancelArgs, FanoutArgs, ListArgs, LogsArgs, Mode, PauseArgs, ResumeArgs, RetryArgs, SendArgs,
    StatusArgs, WaitArgs, Waiting,
};
#[cfg(test)]
use schema::STANDARD_FORMATS;

pub const RUN: &str = "run";
pub const STATUS: &str = "status";
pub const WAIT: &str = "wait";
pub const LOGS: &str = "logs";
pub const CANCEL: &str = "cancel";
pub const SEND: &str = "send";
pub const LIST: &str = "list";
pub const FANOUT: &str = "fanout";
pub const RETRY: &str = "retry";
pub const PAUSE: &str = "pause";
pub const RESUME: &str = "resume";

/// Every tool's name, in the order tools/list gives them.
pub const NAMES: [&str; 11] = [
    RUN, STATUS, WAIT, LOGS, CANCEL, SEND, LIST, FANOUT, RETRY, PAUSE, RESUME,
];

/// How long a call waits at most unless its `max_wait` (or `subpane mcp --max-wait`) says
/// otherwise: below the 60 s after which the TypeScript SDK and Codex give up on a call.
pub const MAX_WAIT_DEFAULT: Duration = Duration::from_secs(45);

/// `logs`: default and largest `max_bytes`.
pub const LOGS_DEFAULT: u64 = 16 * 1024;
pub const LOGS_MAX: u64 = 48 * 1024;
/// `list`: default and largest `limit`.
pub const LIST_DEFAULT: usize = 50;
pub const LIST_MAX: usize = 500;

/// How a tool that answers with runs shapes its answer.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Detail {
    /// true: each run's whole envelope (its artifacts and their hashes, filter counts, the
    /// sandbox's policy, the terminal session); false (default): what a model reads, in a
    /// few KiB (`result_path` has the rest).
    #[schemars(extend("default" = false))]
    pub detail: bool,
}

/// Where a `list` answer starts.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Paging {
    /// Skip this many of the runs that match (newest first): give the `next_offset` of the
    /// answer before for the next page.
    #[schemars(extend("default" = 0))]
    pub offset: usize,
}

/// The schema of `run`: a task's, plus `wait`, `max_wait` and `detail`.
fn run_schema() -> JsonObject {
    let mut s = JsonObject::new();
    s.insert("type".into(), Value::from("object"));
    s.insert(
        "properties".into(),
        Value::Object(crate::app::field::properties()),
    );
    with::<Detail>(with::<Waiting>(s))
}

/// `s` with the properties of `T` added.
fn with<T: JsonSchema>(mut s: JsonObject) -> JsonObject {
    let more = schema::of::<T>();
    if let (Some(Value::Object(props)), Some(Value::Object(more))) =
        (s.get_mut("properties"), more.get("properties"))
    {
        for (k, v) in more {
            props.insert(k.clone(), v.clone());
        }
    }
    s
}

/// The names of the properties of `T`: what a tool that adds `T` to its arguments takes out
/// of them first.
pub fn names_of<T: JsonSchema>() -> Vec<String> {
    schema::of::<T>()
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}

/// What a tool does to the world, for its annotations.
#[derive(Clone, Copy)]
enum Acts {
    /// Reads records only.
    Reads,
    /// Stops runs.
    Stops,
    /// Starts programs that may do anything.
    Starts,
    /// Tells a running program something (it may act on it).
    Tells,
    /// Sets what a fan-out group does from now on, as its last call said: undone by the
    /// other control (`pause`, `resume`), the same again when repeated.
    Controls,
}

fn tool(
    name: &'static str,
    title: &str,
    description: &'static str,
    input: JsonObject,
    output: JsonObject,
    acts: Acts,
) -> Tool {
    let a = ToolAnnotations::with_title(title);
    let a = match acts {
        Acts::Reads => a.read_only(true).destructive(false).open_world(false),
        Acts::Stops => a
            .read_only(false)
            .destructive(true)
            .idempotent(true)
            .open_world(false),
        Acts::Starts => a.read_only(false).destructive(true).open_world(true),
        Acts::Tells => a
            .read_only(false)
            .destructive(false)
            .idempotent(false)
            .open_world(false),
        Acts::Controls => a
            .read_only(false)
            .destructive(false)
            .idempotent(true)
            .open_world(false),
    };
    Tool::new(name, description, Arc::new(input))
        .with_title(title)
        .with_raw_output_schema(Arc::new(output))
        .with_annotations(a)
}

/// Every tool, as `tools/list` answers.
pub fn all() -> Vec<Tool> {
    vec![
        tool(
            RUN,
            "Run a subagent or a program",
            "Run a subagent (pi, claude or codex, with a task) or any program (argv) as a \
             supervised, recorded run in its own terminal pane. It answers when the run has \
             ended, or after max_wait at the latest (below 60 s by default) with the run still \
             going: then call what its `next` says (`wait` with its run_id). The answer's \
             `summary` comes first and says how it went (status, exit code, duration, the end \
             of the final text or of stderr); the rest of the structured content is the \
             result, without its bulky parts unless `detail` is true. With wait: false it \
             answers at once with the run id. Cancelling this call cancels the run (its result records that the cancel \
             came from the MCP client); a timeout of your own does not, once max_wait has \
             answered. A human can watch the run with `subpane attach RUN_ID`.",
            run_schema(),
            schema::run_output(),
            Acts::Starts,
        ),
        tool(
            STATUS,
            "Status of a run",
            "The state of a run: its result if it has ended, else whether it is starting or \
             running. Answers at once.",
            with::<Detail>(schema::of::<StatusArgs>()),
            schema::run_output(),
            Acts::Reads,
        ),
        tool(
            WAIT,
            "Wait for runs",
            "Wait for runs to end: all of them (mode \"all\"), or the first one (mode \"any\"). \
             Answers when they have, when `timeout` passes, or after max_wait at the latest \
             (below 60 s by default); the runs go on in every case, so call it again to wait \
             longer. The answer gives the counts first, then one line per run in the order \
             they ended (the ones still running last). Cancelling this call stops only the \
             waiting.",
            with::<Detail>(schema::of::<WaitArgs>()),
            schema::wait_output(),
            Acts::Reads,
        ),
        tool(
            LOGS,
            "Read a run's output",
            "The end of one file of a run: an agent's events, stderr, the final text, or a \
             program's stdout, at most max_bytes of it. Control characters are shown as text.",
            schema::of::<LogsArgs>(),
            schema::logs_output(),
            Acts::Reads,
        ),
        tool(
            CANCEL,
            "Cancel a run",
            "Cancel a run: a polite stop signal to its processes, then a kill after the grace \
             period. Its result then says cancelled. A run that has already ended is left as \
             it is. Answers at once; `wait` shows the end.",
            with::<Detail>(schema::of::<CancelArgs>()),
            schema::run_output(),
            Acts::Stops,
        ),
        tool(
            SEND,
            "Send a message to a running subagent",
            "Give a running agent a user message (text), as its CLI's input: taken into the \
             turn under way (claude at its next tool call, pi and codex after their running \
             tool), else \
             its next turn; or interrupt: true to stop the turn under way (the run goes on and \
             waits for a next message). Answers once the agent took it (taken: true), or after \
             max_wait with taken: false (it still reaches the agent). A run that has ended, \
             was started without input, or whose agent finished its last turn is refused.",
            schema::of::<SendArgs>(),
            schema::send_output(),
            Acts::Tells,
        ),
        tool(
            LIST,
            "List runs",
            "List runs, newest first: all, or those in one state, of one fan-out group, or \
             with some labels, one page of at most `limit` from `offset`. When `more` is true, \
             call it again with `offset` set to the answer's `next_offset`.",
            with::<Paging>(schema::of::<ListArgs>()),
            schema::list_output(),
            Acts::Reads,
        ),
        tool(
            FANOUT,
            "Run many tasks",
            "Start many runs (tasks, each with the arguments of `run`), at most `concurrency` \
             at once. Every task is checked before anything starts. A driver of its own (a \
             run whose id is the group id) starts the queued tasks as others end, so the group \
             goes on when this call answers (after max_wait at the latest, below 60 s by \
             default) or the client goes away: then its `status` is \"running\" (with how many \
             tasks run and wait in `counts`) and `next` says to call `wait` with the group. \
             The answer gives each task's state (queued, running, completed, failed, \
             cancelled, or skipped with why). Cancelling this call stops the group, as `cancel` of the \
             group id does. `wait` and `list` take the group id; `pause` holds its queued \
             tasks (and may stop the running ones) and `resume` lets them go on, each of them \
             able to change its concurrency.",
            schema::of::<FanoutArgs>(),
            schema::fanout_output(),
            Acts::Starts,
        ),
        tool(
            RETRY,
            "Retry a run",
            "Start the next attempt of a run that has ended, with the same program and \
             settings. With resume: true, the agent continues its session and `task` is the \
             follow-up message; otherwise `task` (if given) replaces the task. Answers like \
             `run`.",
            with::<Detail>(schema::of::<RetryArgs>()),
            schema::run_output(),
            Acts::Starts,
        ),
        tool(
            PAUSE,
            "Pause a fan-out group",
            "Hold a group started by `fanout`: no new task of it starts until `resume`. Its \
             running tasks go on, or with stop_running: true are stopped (SIGSTOP) until \
             `resume`. With concurrency, also change how many of its tasks run at once. \
             Answers once the group's driver took the change (taken: true), else within \
             seconds with taken: false (it takes it as it runs again). Pausing a paused group \
             again changes nothing; a group that has ended is refused.",
            schema::of::<PauseArgs>(),
            schema::control_output(),
            Acts::Controls,
        ),
        tool(
            RESUME,
            "Resume a fan-out group",
            "Let a group paused by `pause` go on: its queued tasks start again as slots free \
             up, and tasks stopped by stop_running continue. With concurrency, also change \
             how many of its tasks run at once. Answers once the group's driver took it \
             (taken: true), else within seconds with taken: false; `next` is the `wait` for \
             the group. Resuming a group that is not paused changes nothing; a group that has \
             ended is refused.",
            schema::of::<ResumeArgs>(),
            schema::control_output(),
            Acts::Controls,
        ),
    ]
}

#[cfg(test)]
mod tests;
