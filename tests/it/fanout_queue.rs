//! `subpane fanout`'s queue fields: `id` with `after` / `after_any` (dependencies),
//! `priority`, `start_after` / `start_at` (delays), and how bad ones are refused.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use crate::harness::{TestEnv, wait_until};

/// How long a fan-out here may take before the test fails instead of hanging.
const LIMIT: Duration = Duration::from_secs(60);

/// A task line: `argv` with run id `id` (also its queue `id`), and `extra` fields.
fn line(id: &str, argv: &[&str], extra: Value) -> String {
    let mut v = json!({"argv": argv, "run_id": id, "id": id});
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v.to_string()
}

fn write_tasks(env: &TestEnv, lines: &[String]) -> PathBuf {
    let p = env.root.path().join("tasks.jsonl");
    std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    p
}

fn fanout(env: &TestEnv, file: &std::path::Path, args: &[&str]) -> crate::harness::Ran {
    let mut all = vec!["fanout", "--json", file.to_str().unwrap()];
    all.extend_from_slice(args);
    env.sp_within(LIMIT, "fanout did not end", all)
}

/// An RFC 3339 time of an envelope.
fn time(env: &TestEnv, run: &str, key: &str) -> SystemTime {
    let e = env.read_json(&env.attempt_dir(run, 1).join("result.json"));
    let t = e[key]
        .as_str()
        .unwrap_or_else(|| panic!("{run}: {key} in {e}"));
    humantime::parse_rfc3339(t).unwrap()
}

/// `b` started once `a` had ended.
fn assert_after(env: &TestEnv, a: &str, b: &str) {
    let (end, start) = (time(env, a, "finished_at"), time(env, b, "started_at"));
    assert!(end <= start, "{b} started before {a} ended");
}

/// The report's task of queue id `id`.
fn task<'a>(doc: &'a Value, id: &str) -> &'a Value {
    doc["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == id)
        .unwrap_or_else(|| panic!("no task {id} in {doc}"))
}

#[test]
fn fanout_a_dependency_chain_runs_in_order() {
    let env = TestEnv::new();
    let nap = ["sh", "-c", "sleep 0.2"];
    // Listed backwards, with room for all three: only `after` orders them.
    let lines = [
        line("c", &nap, json!({"after": ["b"]})),
        line("b", &nap, json!({"after": ["a"]})),
        line("a", &nap, json!({})),
    ];
    let file = write_tasks(&env, &lines);
    let r = fanout(&env, &file, &["--concurrency", "4"]);
    assert_eq!(r.code, 0, "{r:?}");
    let doc = r.json();
    for id in ["a", "b", "c"] {
        assert_eq!(task(&doc, id)["status"], "completed", "{doc}");
    }
    assert_eq!(task(&doc, "c")["line"], 1);
    assert_after(&env, "a", "b");
    assert_after(&env, "b", "c");
    env.assert_no_leftovers();
}

#[test]
fn fanout_a_failed_dependency_skips_its_dependants_only() {
    let env = TestEnv::new();
    let lines = [
        line("plan", &["sh", "-c", "exit 3"], json!({})),
        line("x", &["true"], json!({"after": ["plan"]})),
        line("y", &["true"], json!({"after": ["x"]})),
        line("z", &["true"], json!({})),
        line("w", &["true"], json!({"after_any": ["plan"]})),
    ];
    let file = write_tasks(&env, &lines);
    let r = fanout(&env, &file, &[]);
    assert_eq!(r.code, 1, "{r:?}");
    let doc = r.json();
    assert_eq!(task(&doc, "plan")["status"], "failed");
    let x = task(&doc, "x");
    assert_eq!(x["status"], "skipped", "{doc}");
    assert_eq!(x["error"], "its dependency \"plan\" failed", "{doc}");
    let y = task(&doc, "y");
    assert_eq!(y["status"], "skipped", "{doc}");
    assert_eq!(y["error"], "its dependency \"x\" was skipped", "{doc}");
    assert!(!env.run_dir("x").exists() && !env.run_dir("y").exists());
    assert_eq!(task(&doc, "z")["status"], "completed", "{doc}");
    // `after_any`: once it ended, however.
    assert_eq!(task(&doc, "w")["status"], "completed", "{doc}");
    assert_after(&env, "plan", "w");
    env.assert_no_leftovers();
}

#[test]
fn fanout_a_cycle_or_an_unknown_id_starts_nothing() {
    let env = TestEnv::new();
    let lines = [
        line("a", &["true"], json!({"after": ["b"]})),
        "# a comment".to_owned(),
        line("b", &["true"], json!({"after_any": ["a"]})),
        line("c", &["true"], json!({"after": ["nope"]})),
        line("d", &["true"], json!({"id": "c"})),
        line("e", &["true"], json!({"start_after": "5"})),
    ];
    let file = write_tasks(&env, &lines);
    let r = fanout(&env, &file, &[]);
    assert_eq!(r.code, 2, "{r:?}");
    for want in [
        "line 1: a cycle: a → b → a",
        "line 4: after: no task has the id \"nope\"",
        "line 5: id \"c\" is also on line 4",
        "line 6: field start_after `5` needs a unit",
        "nothing was started",
    ] {
        assert!(r.stderr.contains(want), "{want:?} in {}", r.stderr);
    }
    assert!(!r.stderr.contains("--"), "{}", r.stderr);
    let runs = std::fs::read_dir(env.home.join("runs")).map_or(0, |d| d.count());
    assert_eq!(runs, 0, "a run was created");
    // `run` takes none of them.
    let r = env.sp(["run", "--json", "--", "true"]);
    assert_eq!(r.code, 0, "{r:?}");
    env.assert_no_leftovers();
}

#[test]
fn fanout_priority_orders_the_ready_tasks() {
    let env = TestEnv::new();
    let p = |id: &str, n: i64| line(id, &["true"], json!({"priority": n}));
    let lines = [
        p("p0", 0),
        p("p5a", 5),
        p("p5b", 5),
        p("m1", -1),
        p("p10", 10),
    ];
    let file = write_tasks(&env, &lines);
    let r = fanout(&env, &file, &["--concurrency", "1"]);
    assert_eq!(r.code, 0, "{r:?}");
    let order = ["p10", "p5a", "p5b", "p0", "m1"];
    for w in order.windows(2) {
        assert_after(&env, w[0], w[1]);
    }
    env.assert_no_leftovers();
}

#[test]
fn fanout_start_after_delays_a_task_and_blocks_no_other() {
    let env = TestEnv::new();
    let lines = [
        line("later", &["true"], json!({"start_after": "2s"})),
        line("now", &["sh", "-c", "sleep 0.3"], json!({})),
    ];
    let file = write_tasks(&env, &lines);
    let t0 = SystemTime::now();
    let r = fanout(&env, &file, &["--concurrency", "1"]);
    assert_eq!(r.code, 0, "{r:?}");
    let started = time(&env, "later", "started_at");
    assert!(
        started >= t0 + Duration::from_secs(2),
        "started {:?} after the fan-out",
        started.duration_since(t0)
    );
    // The other task ran meanwhile, in the only slot.
    assert_after(&env, "now", "later");
    env.assert_no_leftovers();
}

/// `start_at` (an RFC 3339 UTC time) holds a task until then; a detached group's queued
/// task says so (`delayed`, until that time).
#[test]
fn fanout_start_at_holds_a_task_until_its_time() {
    let env = TestEnv::new();
    let at = SystemTime::now() + Duration::from_secs(2);
    let stamp = humantime::format_rfc3339_millis(at).to_string();
    let lines = [line("timed", &["true"], json!({"start_at": stamp}))];
    let file = write_tasks(&env, &lines);
    let r = env.sp_within(
        LIMIT,
        "fanout --detach waited",
        ["fanout", "--detach", "--json", file.to_str().unwrap()],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let group = r.json()["group"].as_str().unwrap().to_owned();
    let ls = env.sp(["ls", "--json", "--group", &group]);
    let rows = ls.json();
    let row = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["run_id"] == "timed")
        .cloned();
    // Queued with its time, unless the machine was slow enough for it to have started.
    if let Some(row) = row.filter(|r| r["attempt"] == 0) {
        assert_eq!(
            row["queue"],
            json!({"reason": "delayed", "until": stamp}),
            "{row}"
        );
    }
    let w = env.sp_within(LIMIT, "wait --group", ["wait", "--group", &group]);
    assert_eq!(w.code, 0, "{w:?}");
    // Against the time as given (to the millisecond), which is what the driver waits for.
    let given = humantime::parse_rfc3339(&stamp).unwrap();
    let started = time(&env, "timed", "started_at");
    assert!(
        started >= given,
        "started {:?} early",
        given.duration_since(started)
    );
    env.assert_no_leftovers();
}

#[test]
fn fanout_a_detached_driver_keeps_the_dependencies() {
    let env = TestEnv::new();
    let nap = ["sh", "-c", "sleep 0.2"];
    let lines = [
        line("dc", &nap, json!({"after": ["db"]})),
        line("db", &nap, json!({"after": ["da"], "priority": 3})),
        line("da", &nap, json!({})),
    ];
    let file = write_tasks(&env, &lines);
    let r = env.sp_within(
        LIMIT,
        "fanout --detach waited",
        ["fanout", "--detach", "--json", file.to_str().unwrap()],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let group = r.json()["group"].as_str().unwrap().to_owned();
    let w = env.sp_within(LIMIT, "wait --group", ["wait", "--group", &group]);
    assert_eq!(w.code, 0, "{w:?}");
    wait_until("the driver to end", || {
        (env.sp(["status", &group]).code == 0).then_some(())
    });
    assert_after(&env, "da", "db");
    assert_after(&env, "db", "dc");
    let record = env.read_json(&env.home.join("groups").join(&group).join("group.json"));
    let t = &record["tasks"][0];
    assert_eq!(
        (&t["id"], &t["after"]),
        (&json!("dc"), &json!(["db"])),
        "{record}"
    );
    env.assert_no_leftovers();
}
