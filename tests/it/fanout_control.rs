//! A detached group's controls: `pause --group` (nothing new starts; `--stop-running` also
//! stops what runs), `resume --group`, `group G --concurrency N`, and why queued tasks wait
//! (`ls --group`, `group G`).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use crate::harness::{TestEnv, detach_tasks, touch, wait_until};

const LIMIT: Duration = Duration::from_secs(60);

/// A task `id` (run id and queue id) that waits for the file `gate`, with `extra` fields.
fn gated(gate: &Path, id: &str, extra: Value) -> Value {
    let script = format!(
        "while [ ! -e '{}' ]; do sleep 0.05; done; echo {id}",
        gate.display()
    );
    let mut v = json!({"argv": ["sh", "-c", script], "run_id": id, "id": id});
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

fn started(env: &TestEnv, run: &str) -> bool {
    env.attempt_dir(run, 1).join("launch.json").exists()
}

fn started_at(env: &TestEnv, run: &str) -> SystemTime {
    let e = env.result(run);
    humantime::parse_rfc3339(e["started_at"].as_str().unwrap()).unwrap()
}

/// The `ls --group G --json` row of `run`.
fn row(env: &TestEnv, group: &str, run: &str) -> Value {
    let l = env.sp(["ls", "--json", "--group", group]);
    assert_eq!(l.code, 0, "{l:?}");
    l.json()
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["run_id"] == run)
        .cloned()
        .unwrap_or_else(|| panic!("no row {run} in {}", l.stdout))
}

/// While its group is paused nothing new starts, though a slot frees; `ls` and `group`
/// say why each queued task waits; after `resume` the rest run, none before it.
#[test]
fn a_paused_group_starts_nothing_until_it_is_resumed() {
    let env = TestEnv::new();
    let gate = env.root.path().join("gate");
    let lines = [
        gated(&gate, "p0", json!({})),
        gated(&gate, "p1", json!({})),
        gated(&gate, "p2", json!({"after": ["p1"]})),
    ];
    let group = detach_tasks(&env, &lines, &["--concurrency", "1"]);
    wait_until("the first task to start", || {
        started(&env, "p0").then_some(())
    });
    let p = env.sp(["pause", "--group", &group, "--json"]);
    assert_eq!(p.code, 0, "{p:?}");
    assert_eq!(
        (&p.json()["paused"], &p.json()["taken"]),
        (&json!(true), &json!(true)),
        "{p:?}"
    );
    assert_eq!(row(&env, &group, "p1")["queue"]["reason"], "paused");
    assert_eq!(
        row(&env, &group, "p2")["queue"],
        json!({"reason": "dependency", "on": ["p1"]})
    );
    let ls = env.sp(["ls", "--group", &group]);
    assert!(ls.stdout.contains("queued (paused)"), "{}", ls.stdout);
    assert!(ls.stdout.contains("queued (after p1)"), "{}", ls.stdout);
    // The running task ends: its slot frees, and still nothing starts.
    touch(&gate);
    wait_until("the first task to end", || {
        env.attempt_dir("p0", 1)
            .join("result.json")
            .exists()
            .then_some(())
    });
    // A second change taken: the driver has settled since the end.
    let again = env.sp(["group", &group, "--concurrency", "1", "--json"]);
    assert_eq!(again.json()["taken"], true, "{again:?}");
    assert!(!env.run_dir("p1").exists(), "p1 started while paused");
    let g = env.sp(["group", &group]);
    assert!(
        g.stdout.contains("group ") && g.stdout.contains(": paused"),
        "{}",
        g.stdout
    );
    let resumed_at = SystemTime::now();
    let r = env.sp(["resume", "--group", &group, "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["paused"], false, "{r:?}");
    let w = env.sp_within(LIMIT, "wait --group hung", ["wait", "--group", &group]);
    assert_eq!(w.code, 0, "{w:?}");
    for t in ["p1", "p2"] {
        assert!(
            started_at(&env, t) >= resumed_at,
            "{t} started before resume"
        );
    }
    env.assert_no_leftovers();
}

/// `group G --concurrency N` raises the limit of a running group: the queued tasks start
/// at once.
#[test]
fn the_concurrency_of_a_running_group_can_be_raised() {
    let env = TestEnv::new();
    let gate = env.root.path().join("gate");
    let lines: Vec<Value> = (0..3)
        .map(|i| gated(&gate, &format!("c{i}"), json!({})))
        .collect();
    let group = detach_tasks(&env, &lines, &["--concurrency", "1"]);
    wait_until("the first task to start", || {
        started(&env, "c0").then_some(())
    });
    assert_eq!(
        row(&env, &group, "c1")["queue"],
        json!({"reason": "concurrency", "limit": 1})
    );
    let c = env.sp(["group", &group, "--concurrency", "3", "--json"]);
    assert_eq!(c.code, 0, "{c:?}");
    assert_eq!(c.json()["concurrency"], 3, "{c:?}");
    // All three at once, while the first still holds its slot.
    wait_until("the others to start", || {
        (started(&env, "c1") && started(&env, "c2")).then_some(())
    });
    assert!(!env.attempt_dir("c0", 1).join("result.json").exists());
    touch(&gate);
    let w = env.sp_within(LIMIT, "wait --group hung", ["wait", "--group", &group]);
    assert_eq!(w.code, 0, "{w:?}");
    env.assert_no_leftovers();
}

/// Bad controls are refused with what to do, and change nothing: a group of a fan-out
/// that was not detached, a group that has ended, a concurrency of 0.
#[test]
fn controls_of_groups_that_cannot_take_them_are_refused() {
    let env = TestEnv::new();
    let p = env.root.path().join("tasks.jsonl");
    std::fs::write(&p, "{\"argv\": [\"true\"], \"run_id\": \"t0\"}\n").unwrap();
    let r = env.sp_within(LIMIT, "fanout", ["fanout", "--json", p.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{r:?}");
    let attached = r.json()["group"].as_str().unwrap().to_owned();
    let e = env.sp(["pause", "--group", &attached]);
    assert_eq!(e.code, 2, "{e:?}");
    assert!(
        e.stderr.contains("driven by the fan-out that started it")
            && e.stderr.contains("subpane fanout --detach"),
        "{}",
        e.stderr
    );
    let gate: PathBuf = env.root.path().join("gate");
    touch(&gate);
    let group = detach_tasks(&env, &[gated(&gate, "e0", json!({}))], &[]);
    let w = env.sp_within(LIMIT, "wait --group hung", ["wait", "--group", &group]);
    assert_eq!(w.code, 0, "{w:?}");
    wait_until("the driver to end", || {
        (env.sp(["status", &group]).code == 0).then_some(())
    });
    let e = env.sp(["resume", "--group", &group]);
    assert_eq!(e.code, 2, "{e:?}");
    assert!(e.stderr.contains("has ended"), "{}", e.stderr);
    let e = env.sp(["group", &group, "--concurrency", "0"]);
    assert_eq!(e.code, 2, "{e:?}");
    assert!(
        !env.home
            .join("groups")
            .join(&group)
            .join("control.json")
            .exists(),
        "a refused change was recorded"
    );
    env.assert_no_leftovers();
}

/// A group record beside a run that is no group's driver never makes that run start again:
/// only a driver is driven again.
#[test]
fn a_group_record_beside_a_plain_run_never_restarts_it() {
    let env = TestEnv::new();
    let r = env.sp(["run", "--run-id", "plain", "--", "sh", "-c", "exit 3"]);
    assert_eq!(r.code, 1, "{r:?}");
    let dir = env.home.join("groups").join("plain");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("requests.jsonl"), "").unwrap();
    let open = env.home.join("groups").join(".open");
    std::fs::create_dir_all(&open).unwrap();
    std::fs::write(open.join("plain"), "").unwrap();
    std::fs::write(
        dir.join("group.json"),
        json!({"schema": "subpane.group/v1", "group": "plain", "created_at": "2026-12-07T00:00:00Z",
               "concurrency": 1, "fail_fast": false, "cancel_siblings": false, "tasks": []})
        .to_string(),
    )
    .unwrap();
    let l = env.sp(["ls"]);
    assert_eq!(l.code, 0, "{l:?}");
    assert!(!l.stderr.contains("driving it again"), "{}", l.stderr);
    assert!(
        !env.attempt_dir("plain", 2).exists(),
        "a plain run was started again"
    );
    env.assert_no_leftovers();
}

/// A driver that does not take a change (here held stopped) leaves the command to say so
/// after its 10 s (`"taken": false`, exit 0); the change is recorded, and the driver takes
/// it once it runs again: nothing more starts.
#[test]
fn a_change_the_driver_has_not_taken_is_said_and_taken_later() {
    let env = TestEnv::new();
    let gate = env.root.path().join("gate");
    let lines = [gated(&gate, "n0", json!({})), gated(&gate, "n1", json!({}))];
    let group = detach_tasks(&env, &lines, &["--concurrency", "1"]);
    wait_until("the first task to start", || {
        started(&env, "n0").then_some(())
    });
    let driver = crate::harness::agent_pid(&env, &group);
    crate::harness::send_signal(driver, libc::SIGSTOP);
    let p = env.sp_within(LIMIT, "pause hung", ["pause", "--group", &group, "--json"]);
    assert_eq!(p.code, 0, "{p:?}");
    assert_eq!(
        (&p.json()["paused"], &p.json()["taken"]),
        (&json!(true), &json!(false)),
        "{p:?}"
    );
    assert!(p.stderr.is_empty() || !p.stderr.contains("error"), "{p:?}");
    crate::harness::send_signal(driver, libc::SIGCONT);
    // Taken once it runs: a later change says so, and the freed slot stays empty.
    let again = env.sp(["pause", "--group", &group, "--json"]);
    assert_eq!(again.json()["taken"], true, "{again:?}");
    touch(&gate);
    wait_until("the first task to end", || {
        env.attempt_dir("n0", 1)
            .join("result.json")
            .exists()
            .then_some(())
    });
    let c = env.sp(["group", &group, "--concurrency", "1", "--json"]);
    assert_eq!(c.json()["taken"], true, "{c:?}");
    assert!(!env.run_dir("n1").exists(), "n1 started while paused");
    assert_eq!(env.sp(["resume", "--group", &group]).code, 0);
    let w = env.sp_within(LIMIT, "wait --group hung", ["wait", "--group", &group]);
    assert_eq!(w.code, 0, "{w:?}");
    env.assert_no_leftovers();
}

/// A driver that keeps dying is driven again at most 5 times in all; then the next command
/// says so, the group is closed, and its tasks never started are named.
#[test]
fn a_driver_that_keeps_dying_is_started_at_most_five_times() {
    let env = TestEnv::new();
    let gate = env.root.path().join("gate");
    let lines = [gated(&gate, "m0", json!({})), gated(&gate, "m1", json!({}))];
    let group = detach_tasks(&env, &lines, &["--concurrency", "1"]);
    for n in 1..=4 {
        crate::harness::kill_driver(&env, &group, n);
        let l = env.sp(["ls"]);
        assert!(
            l.stderr.contains(&format!(
                "driving it again (run {group}, attempt {})",
                n + 1
            )),
            "{}",
            l.stderr
        );
    }
    crate::harness::kill_driver(&env, &group, 5);
    let l = env.sp(["ls"]);
    assert!(
        l.stderr.contains("has died 5 times; not starting it again"),
        "{}",
        l.stderr
    );
    assert!(!env.attempt_dir(&group, 6).exists());
    assert!(!env.home.join("groups/.open").join(&group).exists());
    touch(&gate);
    let w = env.sp_within(LIMIT, "wait --group hung", ["wait", "--group", &group]);
    assert_eq!(w.code, 130, "{w:?}");
    assert!(
        w.stderr
            .contains("never started (its driver ended first): line 2"),
        "{}",
        w.stderr
    );
    assert_eq!(env.result("m0")["status"], "completed");
    env.assert_no_leftovers();
}
