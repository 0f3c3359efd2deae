//! The tool list's tests: names, titles, annotations, strict schemas, and schemas that agree
//! with what the server takes.

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
    // A group's controls change it, reversibly, to what the call says however often made.
    for name in [PAUSE, RESUME] {
        let a = hint(name);
        assert_eq!(
            (
                a.read_only_hint,
                a.destructive_hint,
                a.idempotent_hint,
                a.open_world_hint
            ),
            (Some(false), Some(false), Some(true), Some(false)),
            "{name}"
        );
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
        (PAUSE, "concurrency"),
        (RESUME, "concurrency"),
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
    for name in [LOGS, LIST, FANOUT, PAUSE, RESUME] {
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
    fn take<T: serde::de::DeserializeOwned + JsonSchema>(args: &mut Value) -> Result<(), String> {
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
        PAUSE => de::<PauseArgs>(args),
        RESUME => de::<ResumeArgs>(args),
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
    assert_eq!(required(PAUSE), serde_json::json!(["group"]));
    assert_eq!(required(RESUME), serde_json::json!(["group"]));
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
