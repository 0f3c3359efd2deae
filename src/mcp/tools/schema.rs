//! JSON Schemas of the tools, made for strict validators and for models: inlined (no
//! `$ref`), no `null` types (leaving a field out says "none"), only the formats JSON Schema
//! defines, and every output schema written by hand for what the answers hold.
//!
//! Common pitfalls:
//! * schemars writes `"format": "uint32"` (and `uint`, `uint64`, `int64`, …) for Rust's
//!   integer types. They are not JSON Schema formats: Ajv with its default options refuses a
//!   schema that uses one. [`of`] drops every format JSON Schema does not define.
//! * An output schema is checked by clients against every answer (the Python SDK does):
//!   it must hold for each shape a tool answers with (an envelope, a summary of one, a
//!   running run), so it names what they share and leaves the rest open.

use rmcp::model::JsonObject;
use schemars::JsonSchema;
use serde_json::{Value, json};

/// The formats JSON Schema (2020-12) defines.
pub const STANDARD_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// The input schema of `T`: inlined, without `null` types or formats JSON Schema does not
/// define, and without the type's own title and description (the tool has its own).
pub fn of<T: JsonSchema>() -> JsonObject {
    let settings = schemars::generate::SchemaSettings::draft2020_12().with(|s| {
        s.inline_subschemas = true;
        s.meta_schema = None;
    });
    let mut v = serde_json::to_value(settings.into_generator().into_root_schema_for::<T>())
        .unwrap_or(Value::Null);
    clean(&mut v);
    match v {
        Value::Object(mut o) => {
            o.remove("title");
            o.remove("description");
            o
        }
        _ => JsonObject::new(),
    }
}

/// Removes `null` from the types of optional fields (`["string", "null"]` → `"string"`,
/// `anyOf: [X, {"type": "null"}]` → X), and every format JSON Schema does not define.
fn clean(v: &mut Value) {
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
                    if alts.len() == 1
                        && let Value::Object(only) = alts.remove(0)
                    {
                        o.remove(key);
                        for (k, x) in only {
                            o.entry(k).or_insert(x);
                        }
                    }
                }
            }
            if let Some(Value::Array(vals)) = o.get_mut("enum") {
                vals.retain(|x| !x.is_null());
            }
            if o.get("default").is_some_and(Value::is_null) {
                o.remove("default");
            }
            if o.get("format")
                .and_then(Value::as_str)
                .is_some_and(|f| !STANDARD_FORMATS.contains(&f))
            {
                o.remove("format");
            }
            for x in o.values_mut() {
                clean(x);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(clean),
        _ => {}
    }
}

fn object(v: Value) -> JsonObject {
    match v {
        Value::Object(o) => o,
        _ => JsonObject::new(),
    }
}

/// `summary`, the first property of every answer.
fn summary() -> Value {
    json!({"type": "string", "description":
        "Read this first. One line per run: the run, its status, exit, duration, and the end of its final text (or of stderr when it failed)."})
}

/// `next`: the call to make when the answer came before its runs ended.
fn next() -> Value {
    json!({
        "type": "object",
        "description": "Present when runs go on after this answer: the tool to call for their end, and its arguments.",
        "properties": {
            "tool": {"type": "string", "enum": ["wait"]},
            "arguments": {"type": "object"},
        },
        "required": ["tool", "arguments"],
    })
}

/// What every answer about one run holds: an envelope (`subpane.result/v1`, brief unless
/// `detail`, possibly summarised), a running run's status (`subpane.status/v1`) or a fresh
/// start.
fn one_run() -> Value {
    json!({
        "type": "object",
        "properties": {
            "summary": summary(),
            "next": next(),
            "run_id": {"type": "string"},
            "attempt": {"type": "integer", "minimum": 1},
            "status": {"type": "string", "enum":
                ["queued", "starting", "running", "completed", "failed", "cancelled"]},
            "failure_kind": {"type": ["string", "null"]},
            "exit_code": {"type": ["integer", "null"]},
            "duration_ms": {"type": ["integer", "null"], "minimum": 0},
            "cancelled_by": {"type": "string", "enum":
                ["interrupt", "cancel", "mcp_client", "timeout", "sibling", "fanout", "parent", "signal"]},
            "schema": {"type": "string"},
            "result_path": {"type": "string", "description": "The run's whole envelope (result.json)."},
            "truncated": {"type": "boolean", "description":
                "Parts were cut to keep the answer small; `result_path` has all of it."},
        },
        "required": ["summary", "run_id", "status"],
    })
}

/// The output schema of `run`, `status`, `retry` and `cancel`: one run.
pub fn run_output() -> JsonObject {
    object(one_run())
}

/// The output schema of `wait`.
pub fn wait_output() -> JsonObject {
    object(json!({
        "type": "object",
        "properties": {
            "summary": summary(),
            "next": next(),
            "counts": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}},
            "timed_out": {"type": "boolean"},
            "max_wait_passed": {"type": "boolean"},
            "first_finished": {"type": ["string", "null"]},
            "runs": {"type": "array", "items": one_run()},
            "left_out": {"type": "integer", "minimum": 0},
            "group": {"type": ["object", "null"], "properties": {
                "status": {"type": "string", "enum": ["running", "ended"]}}},
        },
        "required": ["summary", "runs", "timed_out", "first_finished"],
    }))
}

/// The output schema of `send`.
pub fn send_output() -> JsonObject {
    object(json!({
        "type": "object",
        "properties": {
            "summary": summary(),
            "run_id": {"type": "string"},
            "attempt": {"type": "integer", "minimum": 1},
            "seq": {"type": "integer", "minimum": 0},
            "taken": {"type": "boolean"},
        },
        "required": ["summary", "run_id", "attempt", "taken"],
    }))
}

/// The output schema of `pause` and `resume`: the group's controls after the change.
pub fn control_output() -> JsonObject {
    object(json!({
        "type": "object",
        "properties": {
            "summary": {"type": "string", "description":
                "Read this first: the group's state now and what to call next."},
            "next": next(),
            "group": {"type": "string", "description": "The group's full id."},
            "paused": {"type": "boolean", "description": "No new task of the group starts."},
            "stop_running": {"type": "boolean", "description":
                "Its running tasks are stopped (SIGSTOP) until `resume`."},
            "concurrency": {"type": "integer", "minimum": 1, "description":
                "How many of its tasks run at once (once resumed, when paused)."},
            "taken": {"type": "boolean", "description":
                "The group's driver took the change; false: it takes it as it runs again."},
        },
        "required": ["summary", "group", "paused", "stop_running", "concurrency", "taken"],
    }))
}

/// The output schema of `logs`.
pub fn logs_output() -> JsonObject {
    object(json!({
        "type": "object",
        "properties": {
            "summary": summary(),
            "run_id": {"type": "string"},
            "attempt": {"type": "integer", "minimum": 1},
            "path": {"type": "string"},
            "exists": {"type": "boolean"},
            "size": {"type": "integer", "minimum": 0},
            "truncated": {"type": "boolean"},
        },
        "required": ["summary", "run_id", "attempt", "path", "exists", "size", "truncated"],
    }))
}

/// The output schema of `list`.
pub fn list_output() -> JsonObject {
    object(json!({
        "type": "object",
        "properties": {
            "summary": summary(),
            "total": {"type": "integer", "minimum": 0},
            "offset": {"type": "integer", "minimum": 0},
            "more": {"type": "boolean", "description": "More runs match after this page."},
            "next_offset": {"type": ["integer", "null"], "minimum": 0, "description":
                "The `offset` of the next page; null on the last."},
            "truncated": {"type": "boolean"},
            "runs": {"type": "array", "items": {"type": "object", "properties": {
                "run_id": {"type": "string"}, "status": {"type": "string"}},
                "required": ["run_id", "status"]}},
        },
        "required": ["summary", "total", "offset", "more", "next_offset", "truncated", "runs"],
    }))
}

/// The output schema of `fanout`.
pub fn fanout_output() -> JsonObject {
    object(json!({
        "type": "object",
        "properties": {
            "summary": summary(),
            "next": next(),
            "group": {"type": "string"},
            "status": {"type": "string", "enum": ["running", "ended"], "description":
                "running: tasks run or wait to start (counts has `running` and `queued`, and no exit_code or duration_ms yet); ended: every task has ended or was skipped."},
            "counts": {"type": "object", "properties": {
                "total": {"type": "integer", "minimum": 0},
                "completed": {"type": "integer", "minimum": 0},
                "failed": {"type": "integer", "minimum": 0},
                "cancelled": {"type": "integer", "minimum": 0},
                "skipped": {"type": "integer", "minimum": 0},
                "running": {"type": "integer", "minimum": 0},
                "queued": {"type": "integer", "minimum": 0},
                "exit_code": {"type": "integer"},
                "duration_ms": {"type": "integer", "minimum": 0}},
                "required": ["total", "completed", "failed", "cancelled", "skipped"]},
            "tasks": {"type": "array", "items": {"type": "object", "properties": {
                "line": {"type": "integer", "minimum": 1},
                "run_id": {"type": ["string", "null"]},
                "status": {"type": "string"}},
                "required": ["line", "run_id", "status"]}},
            "max_wait_passed": {"type": "boolean"},
            "left_out": {"type": "integer", "minimum": 0},
        },
        "required": ["summary", "group", "status", "counts", "tasks"],
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn formats(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(o) => {
                if let Some(f) = o.get("format").and_then(Value::as_str) {
                    out.push(f.to_owned());
                }
                o.values().for_each(|x| formats(x, out));
            }
            Value::Array(a) => a.iter().for_each(|x| formats(x, out)),
            _ => {}
        }
    }

    #[test]
    fn only_standard_formats_remain() {
        #[derive(schemars::JsonSchema)]
        #[allow(dead_code)]
        struct Ints {
            a: u32,
            b: usize,
            c: Option<u64>,
            d: i64,
        }
        let s = Value::Object(of::<Ints>());
        let mut found = Vec::new();
        formats(&s, &mut found);
        assert!(found.is_empty(), "{found:?}: {s}");
        assert_eq!(s["properties"]["c"]["type"], "integer", "{s}");
    }
}
