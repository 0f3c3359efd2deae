//! The tools: their names, descriptions, input schemas, and argument types.
//!
//! Every argument type refuses unknown fields, like [`RunRequest`]: a misspelt argument is
//! an error the model can read, never silently ignored. The schemas are generated from these
//! types (inlined, no `null` types: what every client's schema subset understands).

use std::collections::BTreeMap;
use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::app::fanout::DEFAULT_CONCURRENCY;
use crate::app::{LogFile, RunRequest};
use crate::envelope::RunState;

/// `run`: the request's fields plus `wait` (taken out before the rest is a [`RunRequest`]).
pub const RUN: &str = "run";
pub const STATUS: &str = "status";
pub const WAIT: &str = "wait";
pub const LOGS: &str = "logs";
pub const CANCEL: &str = "cancel";
pub const LIST: &str = "list";
pub const FANOUT: &str = "fanout";

/// `logs`: default and largest `max_bytes`.
pub const LOGS_DEFAULT: u64 = 16 * 1024;
pub const LOGS_MAX: u64 = 256 * 1024;
/// `list`: default and largest `limit`.
pub const LIST_DEFAULT: usize = 50;
pub const LIST_MAX: usize = 500;

/// `status`: one run's state.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StatusArgs {
    /// The run id.
    pub run_id: String,
    /// Which attempt (default: the latest).
    pub attempt: Option<u32>,
}

/// Return when any run finishes, or when all have.
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
    /// Also every run of this fan-out group.
    pub group: Option<String>,
    /// "all" (default): until every run finished; "any": until the first one did.
    #[serde(default)]
    pub mode: Mode,
    /// Stop waiting after this long, e.g. "30s" or "10m"; the runs go on. Default: no limit
    /// (your client's own tool timeout still applies).
    pub timeout: Option<String>,
    /// Wait for this attempt of each run (default: the latest).
    pub attempt: Option<u32>,
}

/// `logs`: the end of one file of an attempt.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogsArgs {
    /// The run id.
    pub run_id: String,
    /// Which file: "events", "stderr", "output" or "stdout" (default: "events" for agents,
    /// "stdout" for commands).
    pub file: Option<LogFile>,
    /// Which attempt (default: the latest).
    pub attempt: Option<u32>,
    /// At most this many bytes from the end of the file.
    #[schemars(extend("default" = LOGS_DEFAULT, "maximum" = LOGS_MAX))]
    pub max_bytes: Option<u64>,
}

/// `cancel`: stop a run.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelArgs {
    /// The run id.
    pub run_id: String,
    /// Which attempt (default: the latest).
    pub attempt: Option<u32>,
    /// Time between SIGTERM and SIGKILL, e.g. "3s" (default: the run's own).
    pub grace: Option<String>,
}

/// `list`: runs, newest first.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    /// Only runs in this state.
    pub status: Option<RunState>,
    /// Only runs of this fan-out group.
    pub group: Option<String>,
    /// Only runs with all of these labels, e.g. {"team": "core"}.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// At most this many runs.
    #[schemars(extend("default" = LIST_DEFAULT, "maximum" = LIST_MAX))]
    pub limit: Option<usize>,
}

/// `fanout`: many runs, at most `concurrency` at once.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FanoutArgs {
    /// One request per run, with the same fields as the `run` tool (without `wait`).
    #[schemars(with = "Vec<RunRequest>")]
    pub tasks: Vec<Value>,
    /// Run at most this many at once.
    #[schemars(extend("default" = DEFAULT_CONCURRENCY))]
    pub concurrency: Option<usize>,
    /// Start no new task after the first one that does not complete; the rest are skipped.
    #[serde(default)]
    pub fail_fast: bool,
    /// With the first task that does not complete, also cancel the running ones.
    #[serde(default)]
    pub cancel_siblings: bool,
}

/// The schema of `T` as an inlined JSON object without `null` types.
fn schema<T: JsonSchema>() -> JsonObject {
    let settings = schemars::generate::SchemaSettings::draft2020_12().with(|s| {
        s.inline_subschemas = true;
        s.meta_schema = None;
    });
    let mut v = serde_json::to_value(settings.into_generator().into_root_schema_for::<T>())
        .unwrap_or(Value::Null);
    strip_null(&mut v);
    match v {
        Value::Object(mut o) => {
            o.remove("title");
            o
        }
        _ => JsonObject::new(),
    }
}

/// Removes `null` from the types of optional fields (`["string", "null"]` → `"string"`,
/// `anyOf: [X, {"type": "null"}]` → X): leaving a field out is how to say "none", and some
/// clients' schema subsets have no `null`.
fn strip_null(v: &mut Value) {
    match v {
        Value::Object(o) => {
            if let Some(Value::Array(types)) = o.get_mut("type") {
                types.retain(|t| t != "null");
                if types.len() == 1 {
                    let t = types.remove(0);
                    o.insert("type".into(), t);
                }
            }
            for key in ["anyOf", "oneOf"] {
                if let Some(Value::Array(alts)) = o.get_mut(key) {
                    alts.retain(|a| a.get("type").is_none_or(|t| t != "null"));
                    if alts.len() == 1 {
                        if let Value::Object(only) = alts.remove(0) {
                            o.remove(key);
                            for (k, x) in only {
                                o.entry(k).or_insert(x);
                            }
                        }
                    }
                }
            }
            if o.get("enum").is_some_and(Value::is_array) {
                if let Some(Value::Array(vals)) = o.get_mut("enum") {
                    vals.retain(|x| !x.is_null());
                }
            }
            if o.get("default").is_some_and(Value::is_null) {
                o.remove("default");
            }
            for x in o.values_mut() {
                strip_null(x);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(strip_null),
        _ => {}
    }
}

/// `run`'s schema: the request's, plus `wait`.
fn run_schema() -> JsonObject {
    let mut s = schema::<RunRequest>();
    s.remove("description");
    if let Some(Value::Object(props)) = s.get_mut("properties") {
        props.insert(
            "wait".into(),
            serde_json::json!({
                "type": "boolean",
                "default": true,
                "description": "true (default): return when the run has finished, with its \
                    result; false: return at once with its run id (then use `wait` or `status`)."
            }),
        );
    }
    s
}

fn tool(
    name: &'static str,
    description: &'static str,
    schema: JsonObject,
    read_only: bool,
) -> Tool {
    Tool::new(name, description, Arc::new(schema)).with_annotations(
        ToolAnnotations::new()
            .read_only(read_only)
            .open_world(false),
    )
}

/// Every tool, as `tools/list` answers.
pub fn all() -> Vec<Tool> {
    vec![
        tool(
            RUN,
            "Run a subagent (pi, claude or codex with a task) or any program (argv) as a \
             supervised, recorded attempt in its own tmux pane. With wait (the default) it \
             returns when the run ends: the first line says how (completed, failed, cancelled; \
             exit code; duration), then the agent's final text or the end of the program's \
             output, and the result envelope as structured content. With wait: false it \
             returns the run id at once. A human can watch with `subpane attach RUN_ID`.",
            run_schema(),
            false,
        ),
        tool(
            STATUS,
            "The state of a run: its result envelope if it has finished, else whether it is \
             starting or running.",
            schema::<StatusArgs>(),
            true,
        ),
        tool(
            WAIT,
            "Wait for runs to finish (all of them, or the first one with mode \"any\"), with an \
             optional timeout. Returns each run's envelope, or its live state if it is still \
             running when the timeout passes (the runs go on).",
            schema::<WaitArgs>(),
            true,
        ),
        tool(
            LOGS,
            "The end of one file of a run's attempt (the agent's events, stderr, the final \
             text, or a program's stdout), bounded by max_bytes. Control characters are shown \
             as text.",
            schema::<LogsArgs>(),
            true,
        ),
        tool(
            CANCEL,
            "Cancel a run: SIGTERM to its process group, SIGKILL after the grace period. Its \
             envelope then says cancelled. A run that already finished is left as it is.",
            schema::<CancelArgs>(),
            false,
        ),
        tool(
            LIST,
            "List runs, newest first, optionally only those in one state, of one fan-out group \
             or with some labels.",
            schema::<ListArgs>(),
            true,
        ),
        tool(
            FANOUT,
            "Start many runs (tasks, each with the fields of `run`), at most `concurrency` at \
             once, and return when all have ended, with one line per task that did not \
             complete. Every task is checked before anything starts. The runs share a group \
             id (`list` and `wait` take it).",
            schema::<FanoutArgs>(),
            false,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_has_an_object_schema_and_a_description() {
        let tools = all();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(names, [RUN, STATUS, WAIT, LOGS, CANCEL, LIST, FANOUT]);
        for t in &tools {
            assert_eq!(
                t.input_schema.get("type"),
                Some(&Value::from("object")),
                "{}",
                t.name
            );
            assert!(
                t.description.as_ref().is_some_and(|d| d.len() > 40),
                "{}",
                t.name
            );
            let text = serde_json::to_string(&*t.input_schema).unwrap();
            assert!(
                !text.contains("$ref") && !text.contains("\"null\""),
                "{}: {text}",
                t.name
            );
        }
    }

    #[test]
    fn run_takes_the_request_fields_and_wait() {
        let s = run_schema();
        let props = s["properties"].as_object().unwrap();
        for f in [
            "agent",
            "task",
            "argv",
            "cwd",
            "model",
            "timeout",
            "idle_timeout",
            "labels",
            "sandbox",
            "wait",
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
        use crate::spec::{DEFAULT_MAX_DEPTH, Limits, millis, parse_duration};
        let run = run_schema();
        let p = &run["properties"];
        let ms = |v: &Value| millis(parse_duration("", v.as_str().unwrap()).unwrap());
        assert_eq!(ms(&p["linger"]["default"]), Limits::default().linger_ms);
        assert_eq!(ms(&p["grace"]["default"]), Limits::default().grace_ms);
        assert_eq!(p["max_depth"]["default"], DEFAULT_MAX_DEPTH);
        let f = schema::<FanoutArgs>();
        assert_eq!(
            f["properties"]["concurrency"]["default"],
            DEFAULT_CONCURRENCY
        );
        let l = schema::<LogsArgs>();
        assert_eq!(l["properties"]["max_bytes"]["default"], LOGS_DEFAULT);
        assert_eq!(l["properties"]["max_bytes"]["maximum"], LOGS_MAX);
        let l = schema::<ListArgs>();
        assert_eq!(l["properties"]["limit"]["default"], LIST_DEFAULT);
        assert_eq!(l["properties"]["limit"]["maximum"], LIST_MAX);
    }

    #[test]
    fn fanout_tasks_are_run_requests() {
        let s = schema::<FanoutArgs>();
        let items = &s["properties"]["tasks"]["items"]["properties"];
        assert!(items.get("argv").is_some(), "{s:?}");
    }

    #[test]
    fn misspelt_arguments_are_refused() {
        let e = serde_json::from_value::<StatusArgs>(serde_json::json!({"run": "x"}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field `run`"), "{e}");
    }
}
