//! The MCP tools `pause` and `resume` on a group started by the `fanout` tool (its driver
//! runs on its own), through rmcp's client over the real binary's stdio: a paused group
//! starts no new task, a resumed one ends; an unknown group and a fan-out that was not
//! detached are refused in the tools' words.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{TestEnv, wait_child_within};
use crate::mcp::{connect, doc, is_error, text, until};

/// The `fanout` tool's call of `tasks`, one at a time, answering at once.
async fn fanout_one_at_a_time(c: &crate::mcp::Conn, tasks: Value) -> rmcp::model::CallToolResult {
    let r = c
        .call(
            "fanout",
            json!({"tasks": tasks, "concurrency": 1, "max_wait": "300ms"}),
        )
        .await;
    assert!(!is_error(&r), "{}", text(&r));
    r
}

/// A program that waits until `gate` exists.
fn gated(gate: &std::path::Path) -> Value {
    let script = format!("while [ ! -e '{}' ]; do sleep 0.05; done", gate.display());
    json!(["sh", "-c", script])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_group_starts_no_new_task_until_resumed() {
    let env = TestEnv::new();
    let c = connect(&env).await;
    let gate = env.root.path().join("gate");
    let tasks = json!([
        {"argv": gated(&gate), "run_id": "pz0"},
        {"argv": ["true"], "run_id": "pz1"},
        {"argv": ["true"], "run_id": "pz2"},
    ]);
    let r = fanout_one_at_a_time(&c, tasks).await;
    let t = text(&r);
    assert!(t.contains("`pause`") && t.contains("`resume`"), "{t}");
    let group = doc(&r)["group"].as_str().unwrap().to_owned();

    let r = c.call("pause", json!({"group": group})).await;
    assert!(!is_error(&r), "{}", text(&r));
    let v = doc(&r);
    assert_eq!(
        (
            &v["paused"],
            &v["stop_running"],
            &v["taken"],
            &v["concurrency"]
        ),
        (&json!(true), &json!(false), &json!(true), &json!(1)),
        "{v}"
    );
    assert_eq!(v["group"], group.as_str(), "{v}");
    let summary = v["summary"].as_str().unwrap();
    assert!(
        summary.starts_with(&format!("group {group} paused: no new task starts"))
            && summary.contains("`resume`"),
        "{summary}"
    );
    assert!(v.get("next").is_none(), "{v}");

    // The first task ends; its slot frees, and the paused group fills it with nothing.
    std::fs::write(&gate, "").unwrap();
    let done = env.attempt_dir("pz0", 1).join("result.json");
    until("the first task to end", move || done.exists()).await;
    // Once the driver has taken a later change, it has seen that end too, and started
    // nothing for it.
    let r = c
        .call(
            "pause",
            json!({"group": group, "stop_running": true, "concurrency": 2}),
        )
        .await;
    let v = doc(&r);
    assert_eq!(
        (
            &v["paused"],
            &v["stop_running"],
            &v["taken"],
            &v["concurrency"]
        ),
        (&json!(true), &json!(true), &json!(true), &json!(2)),
        "{v}"
    );
    for run in ["pz1", "pz2"] {
        assert!(!env.run_dir(run).exists(), "{run} started while paused");
    }
    let r = c.call("status", json!({"run_id": "pz0"})).await;
    assert_eq!(doc(&r)["status"], "completed", "{}", doc(&r));

    let r = c.call("resume", json!({"group": group})).await;
    assert!(!is_error(&r), "{}", text(&r));
    let v = doc(&r);
    assert_eq!(
        (
            &v["paused"],
            &v["stop_running"],
            &v["taken"],
            &v["concurrency"]
        ),
        (&json!(false), &json!(false), &json!(true), &json!(2)),
        "{v}"
    );
    assert_eq!(
        v["next"],
        json!({"tool": "wait", "arguments": {"group": group}}),
        "{v}"
    );
    assert!(
        v["summary"]
            .as_str()
            .unwrap()
            .starts_with(&format!("group {group} resumed")),
        "{v}"
    );
    let r = c.call("wait", json!({"group": group})).await;
    let v = doc(&r);
    assert_eq!(v["group"]["status"], "ended", "{v}");
    assert_eq!(v["group"]["counts"]["completed"], 3, "{v}");
    assert_eq!(v["group"]["counts"]["exit_code"], 0, "{v}");
    // A group that has ended has nothing to change.
    let r = c.call("resume", json!({"group": group})).await;
    assert!(is_error(&r), "{}", text(&r));
    assert!(text(&r).contains("has ended"), "{}", text(&r));
    c.close().await;
    env.assert_no_leftovers();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_refuses_an_unknown_group_and_one_not_detached_in_the_tools_words() {
    let env = TestEnv::new();
    let c = connect(&env).await;
    let r = c.call("pause", json!({"group": "g-nosuch"})).await;
    assert!(is_error(&r), "{}", text(&r));
    let t = text(&r);
    assert!(
        t.contains("no group `g-nosuch`") && t.contains("the `list` tool"),
        "{t}"
    );
    let r = c
        .call("pause", json!({"group": "g", "concurrency": 0}))
        .await;
    assert!(is_error(&r), "{}", text(&r));

    // A fan-out of the command line, not detached: its driver is that command.
    let gate = env.root.path().join("gate");
    let file = env.root.path().join("tasks.jsonl");
    let line = json!({"argv": gated(&gate), "run_id": "nd0"});
    std::fs::write(&file, format!("{line}\n")).unwrap();
    let child = env
        .cmd()
        .args(["fanout".as_ref(), file.as_os_str()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start subpane fanout");
    let spec = env.attempt_dir("nd0", 1).join("spec.json");
    until("the fan-out's task to start", move || spec.exists()).await;
    let r = c.call("list", json!({})).await;
    let row = doc(&r)["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["run_id"] == "nd0")
        .cloned()
        .unwrap_or_else(|| panic!("no nd0 in {}", doc(&r)));
    let group = row["group"].as_str().unwrap().to_owned();
    for (tool, args) in [
        ("pause", json!({"group": group})),
        ("resume", json!({"group": group, "concurrency": 2})),
    ] {
        let r = c.call(tool, args).await;
        assert!(is_error(&r), "{tool}: {}", text(&r));
        let t = text(&r);
        assert!(
            t.contains(&format!(
                "group {group} is driven by the fan-out that started it"
            )) && t.contains("the `fanout` tool"),
            "{tool}: {t}"
        );
        assert!(!t.contains("--") && !t.contains("{@"), "{tool}: {t}");
    }
    std::fs::write(&gate, "").unwrap();
    let ran = tokio::task::spawn_blocking(move || {
        wait_child_within(child, Duration::from_secs(30), "subpane fanout did not end")
    })
    .await
    .unwrap();
    assert_eq!(ran.code, 0, "{ran:?}");
    c.close().await;
    env.assert_no_leftovers();
}

/// A group of the `fanout` tool whose driver was killed is driven again by the server's
/// next call (here `list`): its tasks all run once, and the driver's run has attempt 2;
/// the `list` text names the group, not the driver's command line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_driver_is_driven_again_by_the_next_call() {
    let env = TestEnv::new();
    let c = connect(&env).await;
    let gate = env.root.path().join("gate");
    let tasks = json!([
        {"argv": gated(&gate), "run_id": "kv0"},
        {"argv": ["true"], "run_id": "kv1"},
    ]);
    let r = fanout_one_at_a_time(&c, tasks).await;
    let group = doc(&r)["group"].as_str().unwrap().to_owned();
    tokio::task::block_in_place(|| crate::harness::kill_driver(&env, &group, 1));
    let r = c.call("list", json!({})).await;
    let t = text(&r);
    assert!(
        !t.contains("--driver"),
        "the list names the driver's command line: {t}"
    );
    let second = env.attempt_dir(&group, 2).join("spec.json");
    assert!(second.exists(), "not driven again: {t}");
    std::fs::write(&gate, "").unwrap();
    let r = c.call("wait", json!({"group": group})).await;
    let v = doc(&r);
    assert_eq!(v["group"]["status"], "ended", "{v}");
    assert_eq!(v["group"]["counts"]["completed"], 2, "{v}");
    for run in ["kv0", "kv1"] {
        assert!(!env.attempt_dir(run, 2).exists(), "{run} started twice");
    }
    c.close().await;
    env.assert_no_leftovers();
}

/// The `cancel` tool on a group whose driver was killed stops the group (its running task
/// cancelled, the queued one never started) instead of leaving it to be driven again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_of_a_dead_driver_stops_its_group() {
    let env = TestEnv::new();
    let c = connect(&env).await;
    let gate = env.root.path().join("gate");
    let tasks = json!([
        {"argv": gated(&gate), "run_id": "cd0"},
        {"argv": ["true"], "run_id": "cd1"},
    ]);
    let r = fanout_one_at_a_time(&c, tasks).await;
    let group = doc(&r)["group"].as_str().unwrap().to_owned();
    let first = env.attempt_dir("cd0", 1).join("launch.json");
    until("the first task to start", move || first.exists()).await;
    tokio::task::block_in_place(|| crate::harness::kill_driver(&env, &group, 1));
    let r = c.call("cancel", json!({"run_id": group})).await;
    assert!(!is_error(&r), "{}", text(&r));
    let t = text(&r);
    assert!(
        t.contains("its queued tasks will not start, 1 running task cancelled"),
        "{t}"
    );
    let r = c.call("list", json!({})).await;
    assert!(!is_error(&r), "{}", text(&r));
    assert!(
        !env.attempt_dir(&group, 2).exists(),
        "driven again after its cancel"
    );
    let done = env.attempt_dir("cd0", 1).join("result.json");
    until("the running task to end", move || done.exists()).await;
    assert_eq!(env.result("cd0")["status"], "cancelled");
    assert!(!env.run_dir("cd1").exists());
    c.close().await;
    env.assert_no_leftovers();
}
