//! `subpane pause RUN` and `subpane resume RUN`: the agent's process group held stopped
//! (SIGSTOP) and continued (SIGCONT), its clocks standing still meanwhile, and the time it was
//! stopped in the envelope (`stopped_ms`, `stops`). Whether the agent is stopped is read from
//! `/proc/PID/stat` (state `T`), never from how long something took.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{TestEnv, agent_pid, assert_valid_envelope, touch, wait_for_text, wait_until};

const LIMIT: Duration = Duration::from_secs(60);
const HANG: &str = "the run may never end: a stopped agent that is never continued";

/// The state letter of every process in the process group `pgid` (`T`: stopped).
fn group_states(pgid: i32) -> Vec<(i32, char)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // After the command's `)`: state, ppid, pgrp.
        let rest: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, r)| r.split_whitespace().collect())
            .unwrap_or_default();
        if rest.len() > 2 && rest[2].parse::<i32>().ok() == Some(pgid) {
            out.push((pid, rest[0].chars().next().unwrap_or('?')));
        }
    }
    out
}

/// Whether the group's processes are all stopped: `T`, but for a child that had exited
/// before the stop (a zombie, `Z`, until its stopped parent reaps it) and a shell waiting in
/// vfork(2) for a child that was stopped before its exec (`D`, until that child goes on).
fn all_stopped(pgid: i32) -> bool {
    let s = group_states(pgid);
    s.iter().any(|(_, c)| *c == 'T') && s.iter().all(|(_, c)| matches!(c, 'T' | 'Z' | 'D'))
}

/// Waits until every process of the group is stopped.
fn wait_group(pgid: i32) {
    wait_until(&format!("the agent's group {pgid} stopped"), || {
        all_stopped(pgid).then_some(())
    });
}

/// A command that appends a line to `beat` every 20 ms until the file `go` exists.
fn beats_until_go(env: &TestEnv, id: &str, extra: &[&str]) -> (std::path::PathBuf, i32) {
    let beat = env.work.join(format!("beat-{id}"));
    let go = env.work.join(format!("go-{id}"));
    let script = format!(
        "while [ ! -e '{}' ]; do echo tick >> '{}'; sleep 0.02; done; echo done",
        go.display(),
        beat.display()
    );
    let mut args = vec!["run", "--detach", "--run-id", id];
    args.extend(extra);
    args.extend(["--", "sh", "-c", &script]);
    let r = env.sp(args);
    assert_eq!(r.code, 0, "{r:?}");
    wait_for_text(&beat, "tick");
    (go, agent_pid(env, id))
}

fn beats(env: &TestEnv, id: &str) -> usize {
    std::fs::read_to_string(env.work.join(format!("beat-{id}")))
        .unwrap_or_default()
        .lines()
        .count()
}

#[test]
fn pause_stops_the_group_resume_continues_it_and_the_envelope_says_for_how_long() {
    let env = TestEnv::new();
    let (go, agent) = beats_until_go(&env, "p", &[]);
    let r = env.sp(["pause", "p", "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        r.json(),
        json!({"run_id": "p", "attempt": 1, "stopped": true})
    );
    wait_group(agent);
    let seen_stopped = Instant::now();
    let n = beats(&env, "p");
    // Pausing a paused run is no error, and no second stop.
    let again = env.sp(["pause", "p"]);
    assert_eq!(again.code, 0, "{again:?}");
    assert!(again.stdout.contains("stopped"), "{again:?}");
    wait_until("progress.json to say the agent is stopped", || {
        let p = env.attempt_dir("p", 1).join("progress.json");
        std::fs::read(&p)
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .filter(|v| v["stopped_since"].is_string())
    });
    env.capture_pane_until("p-1", "stopped by subpane");
    let st = env.sp(["status", "p"]);
    assert_eq!(st.code, 3, "{st:?}");
    assert!(st.stdout.contains("stopped   since"), "{}", st.stdout);
    assert!(all_stopped(agent));
    assert_eq!(beats(&env, "p"), n, "a stopped agent went on writing");
    let held = seen_stopped.elapsed();
    let r = env.sp(["resume", "p", "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        r.json(),
        json!({"run_id": "p", "attempt": 1, "stopped": false})
    );
    wait_until("the heartbeat to go on", || {
        (beats(&env, "p") > n).then_some(())
    });
    env.capture_pane_until("p-1", "continued by subpane after");
    touch(&go);
    let w = env.sp_within(LIMIT, HANG, ["wait", "p", "--json"]);
    assert_eq!(w.code, 0, "{w:?}");
    let v = w.json();
    assert_valid_envelope(&v);
    assert_eq!(v["status"], "completed", "{v:#}");
    assert_eq!(v["stops"], 1, "{v:#}");
    let stopped = v["stopped_ms"].as_u64().expect("stopped_ms");
    assert!(
        stopped >= held.as_millis() as u64,
        "stopped_ms {stopped} < the {held:?} the test saw it stopped"
    );
    assert!(v["duration_ms"].as_u64().unwrap() >= stopped, "{v:#}");
    assert!(v["signals_sent"].as_array().unwrap().is_empty(), "{v:#}");
    env.assert_no_leftovers();
}

#[test]
fn resume_of_a_running_run_is_no_error_and_an_attempt_never_stopped_says_nothing() {
    let env = TestEnv::new();
    let (go, agent) = beats_until_go(&env, "r", &[]);
    let r = env.sp(["resume", "r"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(group_states(agent).iter().all(|(_, c)| *c != 'T'));
    touch(&go);
    let w = env.sp_within(LIMIT, HANG, ["wait", "r", "--json"]);
    assert_eq!(w.code, 0, "{w:?}");
    let v = w.json();
    assert!(v.get("stopped_ms").is_none(), "{v:#}");
    assert!(v.get("stops").is_none(), "{v:#}");
    env.assert_no_leftovers();
}

/// A group paused for longer than its tasks' timeout must not time them out on resume: the
/// timeout counts the time the agent ran, not the time it was held stopped. It still counts:
/// a run that goes on after the resume times out when it has run its 3 s.
#[test]
fn the_timeout_stands_still_while_the_agent_is_stopped() {
    let env = TestEnv::new();
    let (go, done) = beats_until_go(&env, "t", &["--timeout", "3s"]);
    let (_never, runs_on) = beats_until_go(&env, "u", &["--timeout", "3s"]);
    let paused_at = Instant::now();
    assert_eq!(env.sp(["pause", "t", "u"]).code, 0);
    wait_group(done);
    wait_group(runs_on);
    // Past the timeout, stopped: the worker must not stop the runs.
    while paused_at.elapsed() < Duration::from_millis(3500) {
        std::thread::sleep(Duration::from_millis(50));
    }
    for id in ["t", "u"] {
        assert!(
            !env.attempt_dir(id, 1).join("result.json").exists(),
            "{id} ended while stopped"
        );
    }
    touch(&go);
    assert_eq!(env.sp(["resume", "t", "u"]).code, 0);
    let w = env.sp_within(LIMIT, HANG, ["wait", "t", "--json"]);
    let v = w.json();
    assert_eq!(w.code, 0, "{v:#}");
    assert_eq!(v["status"], "completed", "{v:#}");
    assert!(v["stopped_ms"].as_u64().unwrap() >= 3000, "{v:#}");
    let w = env.sp_within(LIMIT, HANG, ["wait", "u", "--json"]);
    let v = w.json();
    assert_eq!(w.code, 124, "{v:#}");
    assert_eq!(v["failure_kind"], "timeout", "{v:#}");
    let stopped = v["stopped_ms"].as_u64().unwrap();
    let wall = v["duration_ms"].as_u64().unwrap();
    // It ran 3 s besides the time it was stopped (a few ms of the two clocks apart).
    assert!(wall + 50 >= stopped + 3000, "{v:#}");
    assert!(wall < stopped + 3000 + 2000, "{v:#}");
    env.assert_no_leftovers();
}

/// SIGTERM to a stopped process waits for a SIGCONT: a cancel must still end a stopped agent
/// by its SIGTERM, not only by the SIGKILL after the grace (a minute here).
#[test]
fn a_stopped_run_is_cancelled_promptly_and_counts_its_stop_to_the_cancel() {
    let env = TestEnv::new();
    let (_go, agent) = beats_until_go(&env, "c", &["--grace", "60s"]);
    assert_eq!(env.sp(["pause", "c"]).code, 0);
    wait_group(agent);
    let t0 = Instant::now();
    let r = env.sp_within(Duration::from_secs(20), HANG, ["cancel", "c", "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let v = r.json();
    assert_valid_envelope(&v);
    assert_eq!(v["status"], "cancelled", "{v:#}");
    assert_eq!(v["signals_sent"], json!(["SIGTERM"]), "{v:#}");
    assert_eq!(v["signal"], "SIGTERM", "{v:#}");
    assert!(t0.elapsed() < Duration::from_secs(20));
    assert_eq!(v["stops"], 1, "{v:#}");
    assert!(v["stopped_ms"].as_u64().is_some(), "{v:#}");
    env.assert_no_leftovers();
}

#[test]
fn pause_refuses_finished_unknown_and_missing_runs() {
    let env = TestEnv::new();
    assert_eq!(env.sp(["run", "--run-id", "f", "--", "true"]).code, 0);
    for verb in ["pause", "resume"] {
        let r = env.sp([verb, "f"]);
        assert_eq!(r.code, 2, "{r:?}");
        assert!(
            r.stderr.contains("run f") && r.stderr.contains("completed"),
            "{r:?}"
        );
        assert_eq!(
            r.stderr.contains("retry f --resume"),
            verb == "resume",
            "{r:?}"
        );
        let r = env.sp([verb, "nosuch"]);
        assert_eq!(r.code, 2, "{r:?}");
        assert!(r.stderr.contains("nosuch"), "{r:?}");
        let r = env.sp([verb]);
        assert_eq!(r.code, 2, "{r:?}");
        assert!(r.stderr.contains("RUN"), "{r:?}");
    }
    assert!(!env.attempt_dir("f", 1).join("stop.json").exists());
}

/// A request written before the program starts (an attempt that waits for its start) is
/// honoured as it starts: the agent is stopped at once.
#[test]
fn a_run_paused_before_its_start_is_stopped_as_it_starts() {
    let env = TestEnv::new();
    let flag = env.work.join("flag");
    let script = format!(
        "echo started; while [ ! -e '{}' ]; do sleep 0.02; done",
        flag.display()
    );
    // The first attempt ends at once (the flag is there); the second, a retry that waits
    // for its start, loops until the flag comes again.
    touch(&flag);
    let first = env.sp(["run", "--run-id", "w", "--", "sh", "-c", &script]);
    assert_eq!(first.code, 0, "{first:?}");
    std::fs::remove_file(&flag).unwrap();
    let r = env.sp(["retry", "w", "--after", "1s", "--detach"]);
    assert_eq!(r.code, 0, "{r:?}");
    let p = env.sp(["pause", "w", "--json"]);
    assert_eq!(p.code, 0, "{p:?}");
    assert_eq!(p.json()["attempt"], 2);
    let worker = env.attempt_dir("w", 2).join("worker.json");
    let agent = wait_until("the second attempt's agent", || {
        std::fs::read(&worker)
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .and_then(|v| v["agent"]["pid"].as_i64())
    }) as i32;
    wait_group(agent);
    touch(&flag);
    assert_eq!(env.sp(["resume", "w"]).code, 0);
    let w = env.sp_within(LIMIT, HANG, ["wait", "w", "--json"]);
    let v = w.json();
    assert_eq!(w.code, 0, "{v:#}");
    assert_eq!(v["attempt"], 2, "{v:#}");
    assert_eq!(v["stops"], 1, "{v:#}");
    env.assert_no_leftovers();
}

/// An unsandboxed program can write its attempt directory and signal its worker (its
/// parent): a `stop.json` that is a FIFO, a link to /dev/zero, a sparse gigabyte, garbage or a
/// directory, each followed by SIGUSR2 to the worker, must neither hang nor stop nor kill
/// the worker; the program goes on and completes.
#[test]
fn a_forged_stop_request_does_nothing_harmful() {
    let env = TestEnv::new();
    for (id, plant) in [
        ("fifo", "mkfifo \"$D/stop.json\""),
        ("link", "ln -s /dev/zero \"$D/stop.json\""),
        ("huge", "truncate -s 1G \"$D/stop.json\""),
        (
            "garbage",
            "printf '\\000{\"stopped\": tru' > \"$D/stop.json\"",
        ),
        ("dir", "mkdir \"$D/stop.json\""),
    ] {
        let script = format!(
            "D=\"$SUBPANE_ATTEMPT_DIR\"; {plant} || exit 9; kill -USR2 $PPID; \
             i=0; while [ $i -lt 10 ]; do i=$((i+1)); echo beat $i; sleep 0.02; done"
        );
        let r = env.sp_within(
            LIMIT,
            HANG,
            ["run", "--run-id", id, "--json", "--", "sh", "-c", &script],
        );
        let v = r.json();
        assert_eq!(r.code, 0, "{id}: {v:#}\n{}", r.stderr);
        assert_eq!(v["status"], "completed", "{id}: {v:#}");
        assert!(v.get("stops").is_none(), "{id}: {v:#}");
        let out = std::fs::read_to_string(env.attempt_dir(id, 1).join("stdout.log")).unwrap();
        assert!(out.contains("beat 10"), "{id}: {out}");
    }
    // A request the program wrote as subpane would is the program stopping itself, which
    // it could do anyway: it is honoured, and `resume` continues it.
    let go = env.work.join("go-self");
    let script = format!(
        "printf '{{\"id\":\"x\",\"requested_at\":\"2026-01-01T00:00:00.000Z\",\"stopped\":true}}' \
         > \"$SUBPANE_ATTEMPT_DIR/stop.json\"; kill -USR2 $PPID; \
         while [ ! -e '{}' ]; do sleep 0.02; done",
        go.display()
    );
    let r = env.sp([
        "run", "--run-id", "self", "--detach", "--", "sh", "-c", &script,
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let agent = agent_pid(&env, "self");
    wait_group(agent);
    touch(&go);
    assert_eq!(env.sp(["resume", "self"]).code, 0);
    let w = env.sp_within(LIMIT, HANG, ["wait", "self", "--json"]);
    assert_eq!(w.code, 0, "{w:?}");
    assert_eq!(w.json()["stops"], 1);
    env.assert_no_leftovers();
}

#[test]
fn pause_and_resume_take_several_runs() {
    let env = TestEnv::new();
    let (go_a, a) = beats_until_go(&env, "a", &[]);
    let (go_b, b) = beats_until_go(&env, "b", &[]);
    let r = env.sp(["pause", "a", "b", "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        r.json(),
        json!([
            {"run_id": "a", "attempt": 1, "stopped": true},
            {"run_id": "b", "attempt": 1, "stopped": true}
        ])
    );
    wait_group(a);
    wait_group(b);
    touch(&go_a);
    touch(&go_b);
    assert_eq!(env.sp(["resume", "a", "b"]).code, 0);
    for id in ["a", "b"] {
        let w = env.sp_within(LIMIT, HANG, ["wait", id, "--json"]);
        assert_eq!(w.code, 0, "{w:?}");
        assert_eq!(w.json()["stops"], 1);
    }
    env.assert_no_leftovers();
}

/// `pause --group G --stop-running` stops the group's running task as `pause RUN` does (and
/// starts nothing new); `resume --group G` continues it and starts the rest; the stopped
/// task's envelope says for how long.
#[test]
fn pausing_a_group_with_stop_running_stops_its_running_tasks_until_resume() {
    let env = TestEnv::new();
    let go = env.work.join("go");
    let script = format!("while [ ! -e '{}' ]; do sleep 0.02; done", go.display());
    let lines = [
        json!({"argv": ["sh", "-c", script], "run_id": "gs0"}),
        json!({"argv": ["true"], "run_id": "gs1"}),
    ];
    let group = crate::harness::detach_tasks(&env, &lines, &["--concurrency", "1"]);
    let agent = agent_pid(&env, "gs0");
    let p = env.sp(["pause", "--group", &group, "--stop-running", "--json"]);
    assert_eq!(p.code, 0, "{p:?}");
    assert_eq!(p.json()["stop_running"], true, "{p:?}");
    wait_group(agent);
    // Stopped, it cannot see the file: only a continue lets it end.
    touch(&go);
    assert!(all_stopped(agent));
    assert!(!env.run_dir("gs1").exists(), "a task started while paused");
    let r = env.sp(["resume", "--group", &group, "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let w = env.sp_within(LIMIT, HANG, ["wait", "--group", &group]);
    assert_eq!(w.code, 0, "{w:?}");
    let e = env.result("gs0");
    assert_eq!(e["stops"], 1, "{e:#}");
    assert!(e["stopped_ms"].as_u64().unwrap() > 0, "{e:#}");
    assert_eq!(env.result("gs1")["status"], "completed");
    env.assert_no_leftovers();
}

/// A paused group whose driver is killed stays paused when the next command drives it
/// again: its stopped task stays stopped and nothing starts until `resume --group`.
#[test]
fn a_paused_group_stays_paused_across_its_drivers_death() {
    let env = TestEnv::new();
    let go = env.work.join("go");
    let script = format!("while [ ! -e '{}' ]; do sleep 0.02; done", go.display());
    let lines = [
        json!({"argv": ["sh", "-c", script], "run_id": "pd0"}),
        json!({"argv": ["true"], "run_id": "pd1"}),
    ];
    let group = crate::harness::detach_tasks(&env, &lines, &["--concurrency", "1"]);
    let agent = agent_pid(&env, "pd0");
    let p = env.sp(["pause", "--group", &group, "--stop-running"]);
    assert_eq!(p.code, 0, "{p:?}");
    wait_group(agent);
    crate::harness::kill_driver(&env, &group, 1);
    touch(&go);
    // This command drives it again; the new driver takes the pause as it starts.
    let l = env.sp(["ls", "--group", &group]);
    assert!(l.stderr.contains("driving it again"), "{}", l.stderr);
    // A change the new driver takes: it has started, adopted and applied the controls.
    let c = env.sp(["group", &group, "--concurrency", "1", "--json"]);
    assert_eq!(c.json()["taken"], true, "{c:?}");
    assert_eq!(c.json()["paused"], true, "{c:?}");
    assert!(
        all_stopped(agent),
        "the adopted task was continued while paused"
    );
    assert!(!env.run_dir("pd1").exists(), "a task started while paused");
    let r = env.sp(["resume", "--group", &group]);
    assert_eq!(r.code, 0, "{r:?}");
    let w = env.sp_within(LIMIT, HANG, ["wait", "--group", &group]);
    assert_eq!(w.code, 0, "{w:?}");
    assert_eq!(env.result("pd0")["attempt"], 1);
    assert!(!env.attempt_dir("pd0", 2).exists(), "pd0 started twice");
    assert_eq!(env.result("pd1")["status"], "completed");
    env.assert_no_leftovers();
}
