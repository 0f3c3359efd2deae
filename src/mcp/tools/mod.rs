//! The tools: their names, titles, descriptions, annotations, and input and output schemas.
//!
//! ```text
//!  args.rs    the arguments (serde + schemars), turned into the application layer's types
//!  schema.rs  input schemas made strict-client safe; output schemas by hand
//!  mod.rs     the list a client gets from tools/list
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
    CancelArgs, FanoutArgs, ListArgs, LogsArgs, Mode, RetryArgs, SendArgs, StatusArgs, WaitArgs,
    Waiting,
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

/// Every tool's name, in the order tools/list gives them.
pub const NAMES: [&str; 9] = [RUN, STATUS, WAIT, LOGS, CANCEL, SEND, LIST, FANOUT, RETRY];

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
             group id does. `wait` and `list` take the group id.",
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
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walk(v: &Value, f: &mut dyn FnMut(&serde_json::Map<String, Value>)) {
        match v {
            Value::Object(o) => {
                f(o);
                o.values().for_each(|x| walk(x, f));
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, f)),
            _ => {}
        }
    }

    #[test]
    fn every_tool_has_a_title_annotations_and_strict_schemas() {
        let tools = all();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(names, NAMES);
        for t in &tools {
            assert_eq!(
                t.input_schema.get("type"),
                Some(&Value::from("object")),
                "{}",
                t.name
            );
            assert!(
                t.title.as_deref().is_some_and(|x| !x.is_empty()),
                "{}",
                t.name
            );
            let a = t.annotations.as_ref().expect("annotations");
            assert!(
                a.read_only_hint.is_some() && a.open_world_hint.is_some(),
                "{}",
                t.name
            );
            let d = t.description.as_deref().unwrap_or_default();
            assert!(d.len() > 40, "{}", t.name);
            let out = t.output_schema.as_ref().expect("an output schema");
            assert_eq!(out.get("type"), Some(&Value::from("object")), "{}", t.name);
            let input = Value::Object((*t.input_schema).clone());
            let text = input.to_string();
            assert!(
                !text.contains("$ref") && !text.contains("\"null\""),
                "{}: {text}",
                t.name
            );
            // Written for a model: no Rust doc links or types, no command-line flags.
            for bad in ["[`", "Debug", "schemars", "RunRequest", "--"] {
                assert!(
                    !text.contains(bad) && !d.contains(bad),
                    "{}: `{bad}` in {text}",
                    t.name
                );
            }
            walk(&input, &mut |o| {
                if let Some(f) = o.get("format").and_then(Value::as_str) {
                    assert!(STANDARD_FORMATS.contains(&f), "{}: format {f}", t.name);
                }
            });
        }
        let hint = |name: &str| {
            let t = tools.iter().find(|t| t.name == name).unwrap();
            t.annotations.clone().unwrap()
        };
        for name in [STATUS, LIST, LOGS, WAIT] {
            assert_eq!(hint(name).read_only_hint, Some(true), "{name}");
        }
        assert_eq!(hint(CANCEL).destructive_hint, Some(true));
        for name in [RUN, FANOUT, RETRY] {
            assert_eq!(hint(name).open_world_hint, Some(true), "{name}");
            assert_eq!(hint(name).read_only_hint, Some(false), "{name}");
        }
    }

    /// The minimums are what the server accepts: attempts count from 1, a limit or a
    /// concurrency of 0 is refused.
    #[test]
    fn minimums_match_the_server() {
        let tools = all();
        let prop = |tool: &str, field: &str| {
            let t = tools.iter().find(|t| t.name == tool).unwrap();
            t.input_schema["properties"][field].clone()
        };
        for (tool, field) in [
            (STATUS, "attempt"),
            (WAIT, "attempt"),
            (LOGS, "attempt"),
            (CANCEL, "attempt"),
            (LOGS, "max_bytes"),
            (LIST, "limit"),
            (FANOUT, "concurrency"),
        ] {
            assert_eq!(prop(tool, field)["minimum"], 1, "{tool}.{field}");
        }
        assert_eq!(prop(RUN, "max_depth")["minimum"], 0);
    }

    #[test]
    fn run_takes_the_request_fields_wait_and_max_wait() {
        let s = run_schema();
        let props = s["properties"].as_object().unwrap();
        for f in [
            "agent",
            "task",
            "task_file",
            "argv",
            "cwd",
            "model",
            "timeout",
            "idle_timeout",
            "labels",
            "sandbox",
            "worktree",
            "wait",
            "max_wait",
        ] {
            assert!(props.contains_key(f), "{f}");
        }
        let agents = serde_json::to_string(&props["agent"]).unwrap();
        assert!(
            agents.contains("claude") && agents.contains("codex"),
            "{agents}"
        );
        assert!(
            props["timeout"]["description"]
                .as_str()
                .unwrap()
                .contains("30s")
        );
    }

    /// The defaults the schemas show are the ones in force (defined once, in `spec`,
    /// `app::fanout` and here).
    #[test]
    fn the_schemas_show_the_defaults_in_force() {
        use crate::app::fanout::DEFAULT_CONCURRENCY;
        use crate::spec::{DEFAULT_MAX_DEPTH, Limits, millis, parse_duration};
        let run = run_schema();
        let p = &run["properties"];
        let ms = |v: &Value| millis(parse_duration("", v.as_str().unwrap()).unwrap());
        assert_eq!(ms(&p["linger"]["default"]), Limits::default().linger_ms);
        assert_eq!(ms(&p["grace"]["default"]), Limits::default().grace_ms);
        assert_eq!(p["max_depth"]["default"], DEFAULT_MAX_DEPTH);
        let f = schema::of::<FanoutArgs>();
        assert_eq!(
            f["properties"]["concurrency"]["default"],
            DEFAULT_CONCURRENCY
        );
        let l = schema::of::<LogsArgs>();
        assert_eq!(l["properties"]["max_bytes"]["default"], LOGS_DEFAULT);
        assert_eq!(l["properties"]["max_bytes"]["maximum"], LOGS_MAX);
        let l = schema::of::<ListArgs>();
        assert_eq!(l["properties"]["limit"]["default"], LIST_DEFAULT);
        assert_eq!(l["properties"]["limit"]["maximum"], LIST_MAX);
    }

    /// The tools that answer with envelopes take `detail`; `list` takes `offset`; and the
    /// output schemas have every answer lead with `summary`.
    #[test]
    fn detail_offset_and_summary_are_where_they_belong() {
        let tools = all();
        let t = |name: &str| tools.iter().find(|t| t.name == name).unwrap().clone();
        for name in [RUN, STATUS, WAIT, CANCEL, RETRY] {
            let p = &t(name).input_schema["properties"];
            assert_eq!(p["detail"]["type"], "boolean", "{name}");
            assert_eq!(p["detail"]["default"], false, "{name}");
        }
        for name in [LOGS, LIST, FANOUT] {
            assert!(
                t(name).input_schema["properties"].get("detail").is_none(),
                "{name}"
            );
        }
        let offset = &t(LIST).input_schema["properties"]["offset"];
        assert_eq!(
            (offset["type"].as_str(), &offset["default"]),
            (Some("integer"), &0.into())
        );
        for tool in &tools {
            let out = tool.output_schema.as_ref().unwrap();
            let required = out["required"].as_array().unwrap();
            assert_eq!(required[0], "summary", "{}", tool.name);
        }
        assert_eq!(
            names_of::<Waiting>(),
            ["wait", "max_wait"],
            "what `run` takes out of its arguments"
        );
    }

    #[test]
    fn fanout_tasks_take_the_task_arguments() {
        let s = schema::of::<FanoutArgs>();
        let items = &s["properties"]["tasks"]["items"]["properties"];
        assert!(
            items.get("argv").is_some() && items.get("task_file").is_some(),
            "{s:?}"
        );
        assert!(items.get("wait").is_none(), "{s:?}");
    }

    /// A `fanout` task takes the queue fields, described for a model (no flags), and `run`
    /// takes none of them.
    #[test]
    fn fanout_tasks_take_the_queue_fields_and_run_does_not() {
        let s = schema::of::<FanoutArgs>();
        let items = &s["properties"]["tasks"]["items"]["properties"];
        let run = run_schema();
        for (name, ..) in crate::app::fanout::QUEUE_FIELDS {
            let d = items[name]["description"].as_str().unwrap_or_default();
            assert!(!d.is_empty() && !d.contains("--"), "{name}: {d:?}");
            assert!(run["properties"].get(name).is_none(), "run: {name}");
        }
        assert_eq!(items["after"]["items"]["type"], "string");
        use crate::app::fanout::Line;
        let l = Line::from_value(serde_json::json!(
            {"argv": ["true"], "after": ["a"], "priority": 2, "start_after": "1s"}))
        .unwrap();
        assert_eq!(l.queue.after, ["a"]);
        let bad = serde_json::json!({"argv": ["true"], "aftr": ["a"]});
        assert_eq!(
            Line::from_value(bad).unwrap_err().path().to_string(),
            "aftr"
        );
    }

    /// Every field of the table is an argument of `run` and of a `fanout` task, and the
    /// server takes it: a field the tools lack fails here.
    #[test]
    fn run_and_fanout_take_every_field() {
        let tools = all();
        let schema = |name: &str| {
            let t = tools.iter().find(|t| t.name == name).unwrap();
            Value::Object((*t.input_schema).clone())
        };
        let run = schema(RUN);
        let fanout = schema(FANOUT);
        let defaults = serde_json::to_value(crate::app::RunRequest::default()).unwrap();
        for f in crate::app::field::FIELDS {
            assert!(run["properties"].get(f.name).is_some(), "run: {}", f.name);
            assert!(
                fanout["properties"]["tasks"]["items"]["properties"]
                    .get(f.name)
                    .is_some(),
                "fanout: {}",
                f.name
            );
            let one = serde_json::json!({ f.name: defaults[f.name] });
            server_takes(RUN, one.clone()).unwrap_or_else(|e| panic!("{one}: {e}"));
        }
    }

    /// Parses `args` as the server does for `tool`.
    fn server_takes(tool: &str, mut args: Value) -> Result<(), String> {
        fn de<T: serde::de::DeserializeOwned>(v: Value) -> Result<(), String> {
            serde_json::from_value::<T>(v)
                .map(drop)
                .map_err(|e| e.to_string())
        }
        // The arguments a tool takes besides its own type's, taken out as the server does.
        fn take<T: serde::de::DeserializeOwned + JsonSchema>(
            args: &mut Value,
        ) -> Result<(), String> {
            let o = args.as_object_mut().unwrap();
            let mut taken = serde_json::Map::new();
            for k in names_of::<T>() {
                if let Some(v) = o.remove(&k) {
                    taken.insert(k, v);
                }
            }
            de::<T>(Value::Object(taken))
        }
        match tool {
            RUN | STATUS | WAIT | CANCEL | RETRY => take::<Detail>(&mut args)?,
            LIST => take::<Paging>(&mut args)?,
            _ => {}
        }
        match tool {
            RUN => {
                take::<Waiting>(&mut args)?;
                de::<crate::app::RunRequest>(args)
            }
            STATUS => de::<StatusArgs>(args),
            WAIT => de::<WaitArgs>(args),
            LOGS => de::<LogsArgs>(args),
            CANCEL => de::<CancelArgs>(args),
            SEND => de::<SendArgs>(args),
            LIST => de::<ListArgs>(args),
            FANOUT => de::<FanoutArgs>(args),
            RETRY => de::<RetryArgs>(args),
            other => panic!("no tool {other}"),
        }
    }

    /// Every property with a default gets it, as Ajv's `useDefaults` does (in nested
    /// objects too).
    fn fill_defaults(schema: &Value, v: &mut Value) {
        if let (Some(props), Some(o)) = (schema["properties"].as_object(), v.as_object_mut()) {
            for (k, p) in props {
                if let Some(d) = p.get("default") {
                    o.entry(k.clone()).or_insert(d.clone());
                }
                if let Some(x) = o.get_mut(k) {
                    fill_defaults(p, x);
                }
            }
        }
        if let (Some(items), Some(a)) = (schema.get("items"), v.as_array_mut()) {
            a.iter_mut().for_each(|x| fill_defaults(items, x));
        }
    }

    /// `required` is exactly what the server needs: the required properties alone are
    /// taken, and each one left out is refused; and the schema's defaults are taken.
    #[test]
    fn the_schemas_agree_with_the_server() {
        for t in all() {
            let schema = Value::Object((*t.input_schema).clone());
            let required: Vec<&str> = schema["required"]
                .as_array()
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let mut minimal = serde_json::Map::new();
            for r in &required {
                let v = match schema["properties"][r]["type"].as_str() {
                    Some("array") => serde_json::json!([{"argv": ["true"]}]),
                    _ => Value::from("r1"),
                };
                minimal.insert((*r).to_owned(), v);
            }
            let name = t.name.as_ref();
            let minimal = Value::Object(minimal);
            server_takes(name, minimal.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
            for r in &required {
                let mut less = minimal.clone();
                less.as_object_mut().unwrap().remove(*r);
                assert!(server_takes(name, less).is_err(), "{name} takes no {r}");
            }
            let mut full = minimal.clone();
            fill_defaults(&schema, &mut full);
            server_takes(name, full.clone()).unwrap_or_else(|e| panic!("{name} {full}: {e}"));
        }
        let required = |tool: &str| {
            let t = all().into_iter().find(|t| t.name == tool).unwrap();
            t.input_schema
                .get("required")
                .cloned()
                .unwrap_or(Value::Null)
        };
        assert_eq!(required(LIST), Value::Null, "list needs no status");
        assert_eq!(required(LOGS), serde_json::json!(["run_id"]));
        assert_eq!(required(RETRY), serde_json::json!(["run_id"]));
        assert_eq!(required(RUN), Value::Null);
    }

    /// A sandbox setting says so, and its bounds are the planner's.
    #[test]
    fn sandbox_settings_say_so_and_show_the_planners_bounds() {
        use crate::spec::SandboxLimits;
        let s = run_schema();
        let p = &s["properties"];
        for f in crate::app::field::FIELDS.iter().filter(|f| f.sandbox) {
            let d = p[f.name]["description"].as_str().unwrap();
            assert!(d.contains("A sandbox setting"), "{}: {d}", f.name);
        }
        assert_eq!(p["max_procs"]["minimum"], SandboxLimits::MIN_PROCESSES);
        assert_eq!(p["max_procs"]["maximum"], SandboxLimits::MAX_PROCESSES);
        assert_eq!(p["max_procs"]["default"], SandboxLimits::DEFAULT.processes);
        assert_eq!(p["max_tmp"]["default"], "2G");
        assert_eq!(p["network"]["default"], "none");
    }

    #[test]
    fn misspelt_arguments_are_refused() {
        let e = serde_json::from_value::<StatusArgs>(serde_json::json!({"run": "x"}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field `run`"), "{e}");
    }
}
