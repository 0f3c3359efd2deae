//! How attempts end when subpane stops them: deadlines, idle timeouts, cancel (by command and
//! by Ctrl-C/SIGTERM to a waiting `run`), the termination ladder, limits without a
//! supervisor, and descendants that try to outlive the attempt.

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{
    self, BIN, TestEnv, agent_pid, assert_valid_envelope, fixture, pid_alive, send_signal,
    wait_for_text, wait_until,
};

/// How long any one `subpane` command here may take before the test fails instead of hanging.
const LIMIT: Duration = Duration::from_secs(20);
/// Why a command of these tests may hang (a known bug, see `sigkill_escalation_always_finishes`).
const HANG: &str = "the attempt never ended: after a SIGKILL the worker can reap the agent in \
    kill_descendants()/reap_all() without recording its status, then poll forever (src/worker/run.rs)";

fn fx(name: &str) -> String {
    fixture(name).display().to_string()
}

/// `run --json ARGS…` in the foreground; returns (exit code, envelope).
fn run_json(env: &TestEnv, args: &[&str]) -> (i32, Value) {
    let mut all = vec!["run", "--json"];
    all.extend_from_slice(args);
    let r = env.sp_within(LIMIT, HANG, &all);
    let v = r.json();
    assert_valid_envelope(&v);
    (r.code, v)
}

fn stdout_log(env: &TestEnv, run: &str) -> std::path::PathBuf {
    env.attempt_dir(run, 1).join("stdout.log")
}

/// A foreground `run --json` started in the background of the test, so it can be signalled.
fn spawn_run(env: &TestEnv, args: &[&str]) -> Child {
    env.cmd()
        .arg("run")
        .arg("--json")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn subpane run")
}

fn finish(child: Child) -> harness::Ran {
    harness::wait_child_within(child, LIMIT, HANG)
}

fn ms(v: &Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} is not a number in {v}"))
}

// ---- deadlines ------------------------------------------------------------------------

#[test]
fn timeout_escalates_to_sigkill_when_sigterm_is_ignored() {
    let env = TestEnv::new();
    let (code, v) = run_json(
        &env,
        &[
            "--run-id",
            "t",
            "--timeout",
            "300ms",
            "--grace",
            "400ms",
            "--",
            &fx("ignores_sigterm.sh"),
        ],
    );
    assert_eq!(code, 124, "{v}");
    assert_eq!(v["status"], "failed");
    assert_eq!(v["failure_kind"], "timeout");
    assert_eq!(v["signals_sent"], json!(["SIGTERM", "SIGKILL"]));
    assert_eq!(v["signal"], "SIGKILL");
    assert_eq!(v["exit_code"], Value::Null);
    // The grace was given in full: SIGKILL came no earlier than timeout + grace.
    assert!(
        ms(&v, "duration_ms") >= 700,
        "duration {} < timeout + grace",
        v["duration_ms"]
    );
    assert!(
        ms(&v, "duration_ms") < 10_000,
        "duration {}",
        v["duration_ms"]
    );
    assert_eq!(
        env.result("t"),
        v,
        "result.json and the printed envelope differ"
    );
    env.assert_no_leftovers();
}

#[test]
fn timeout_stops_with_sigterm_alone_when_the_program_obeys() {
    let env = TestEnv::new();
    let (code, v) = run_json(
        &env,
        &[
            "--run-id",
            "t",
            "--timeout",
            "300ms",
            "--grace",
            "20s",
            "--",
            &fx("never_exits.sh"),
        ],
    );
    assert_eq!(code, 124, "{v}");
    assert_eq!(v["status"], "failed");
    assert_eq!(v["failure_kind"], "timeout");
    assert_eq!(v["signals_sent"], json!(["SIGTERM"]));
    assert_eq!(v["signal"], "SIGTERM");
    assert!(
        ms(&v, "duration_ms") >= 300,
        "stopped before the deadline: {}",
        v["duration_ms"]
    );
    // It died of SIGTERM: the 20 s grace was not waited out.
    assert!(
        ms(&v, "duration_ms") < 5_000,
        "duration {}",
        v["duration_ms"]
    );
    env.assert_no_leftovers();
}

#[test]
fn grace_zero_kills_at_once() {
    let env = TestEnv::new();
    let (code, v) = run_json(
        &env,
        &[
            "--run-id",
            "t",
            "--timeout",
            "300ms",
            "--grace",
            "0s",
            "--",
            &fx("ignores_sigterm.sh"),
        ],
    );
    assert_eq!(code, 124, "{v}");
    assert_eq!(v["failure_kind"], "timeout");
    assert_eq!(
        v["signals_sent"],
        json!(["SIGKILL"]),
        "no SIGTERM with --grace 0s"
    );
    assert_eq!(v["signal"], "SIGKILL");
    assert!(
        ms(&v, "duration_ms") < 3_000,
        "duration {}",
        v["duration_ms"]
    );
    env.assert_no_leftovers();
}

#[test]
fn idle_timeout_stops_a_program_that_went_silent() {
    let env = TestEnv::new();
    let (code, v) = run_json(
        &env,
        &[
            "--run-id",
            "t",
            "--idle-timeout",
            "400ms",
            "--",
            &fx("never_exits.sh"),
        ],
    );
    assert_eq!(code, 124, "{v}");
    assert_eq!(v["status"], "failed");
    assert_eq!(v["failure_kind"], "idle_timeout");
    assert_eq!(v["signals_sent"], json!(["SIGTERM"]));
    assert!(
        ms(&v, "duration_ms") >= 400,
        "duration {}",
        v["duration_ms"]
    );
    // What it printed before going silent was kept.
    assert_eq!(
        std::fs::read_to_string(stdout_log(&env, "t")).unwrap(),
        "started\n"
    );
    env.assert_no_leftovers();
}

#[test]
fn idle_timeout_spares_a_program_that_keeps_printing() {
    let env = TestEnv::new();
    // 12 ticks 100 ms apart: 1.2 s in all, never silent for 500 ms.
    let (code, v) = run_json(
        &env,
        &[
            "--run-id",
            "t",
            "--idle-timeout",
            "500ms",
            "--",
            &fx("slow_counter.sh"),
            "0.1",
            "12",
        ],
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["status"], "completed");
    assert_eq!(v["failure_kind"], Value::Null);
    assert_eq!(v["exit_code"], 0);
    assert_eq!(v["signals_sent"], json!([]));
    assert!(
        ms(&v, "duration_ms") >= 1_000,
        "it ran longer than the idle timeout: {}",
        v["duration_ms"]
    );
    let log = std::fs::read_to_string(stdout_log(&env, "t")).unwrap();
    assert!(
        log.contains("tick 12\n") && log.ends_with("done\n"),
        "{log}"
    );
    env.assert_no_leftovers();
}

// ---- cancel ---------------------------------------------------------------------------

#[test]
fn cancel_command_stops_a_detached_run() {
    let env = TestEnv::new();
    let r = env.sp([
        "run",
        "--detach",
        "--run-id",
        "c",
        "--",
        &fx("never_exits.sh"),
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    wait_for_text(&stdout_log(&env, "c"), "started");
    let agent = agent_pid(&env, "c");
    let r = env.sp_within(LIMIT, HANG, ["cancel", "c", "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let v = r.json();
    assert_valid_envelope(&v);
    assert_eq!(v["status"], "cancelled");
    assert_eq!(v["failure_kind"], "cancelled");
    assert_eq!(v["signals_sent"], json!(["SIGTERM"]));
    assert_eq!(v["signal"], "SIGTERM");
    assert!(!pid_alive(agent), "the agent outlived its cancel");
    let w = env.sp_within(LIMIT, HANG, ["wait", "c", "--json"]);
    assert_eq!(w.code, 130, "{w:?}");
    assert_eq!(w.json(), v);
    env.assert_no_leftovers();
}

#[test]
fn cancel_grace_overrides_the_runs_grace() {
    let env = TestEnv::new();
    // The run's own grace is a minute: only `cancel --grace` can make this quick.
    let r = env.sp([
        "run",
        "--detach",
        "--run-id",
        "c",
        "--grace",
        "60s",
        "--",
        &fx("ignores_sigterm.sh"),
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    wait_for_text(&stdout_log(&env, "c"), "ready");
    let t0 = Instant::now();
    let r = env.sp_within(LIMIT, HANG, ["cancel", "c", "--grace", "500ms", "--json"]);
    let took = t0.elapsed();
    assert_eq!(r.code, 0, "{r:?}");
    let v = r.json();
    assert_valid_envelope(&v);
    assert_eq!(v["status"], "cancelled");
    assert_eq!(v["failure_kind"], "cancelled");
    assert_eq!(v["signals_sent"], json!(["SIGTERM", "SIGKILL"]));
    assert_eq!(v["signal"], "SIGKILL");
    assert!(
        took >= Duration::from_millis(500),
        "SIGKILL came before the grace: {took:?}"
    );
    assert!(
        took < Duration::from_secs(10),
        "the run's 60 s grace was used: {took:?}"
    );
    assert_eq!(env.sp_within(LIMIT, HANG, ["wait", "c"]).code, 130);
    env.assert_no_leftovers();
}

/// Ctrl-C or SIGTERM to a waiting `run` cancels the attempt.
fn interrupt_foreground_run(sig: i32) {
    let env = TestEnv::new();
    let child = spawn_run(&env, &["--run-id", "i", "--", &fx("never_exits.sh")]);
    // Once the agent runs, `run` is past its launch and waiting with the signals blocked.
    wait_for_text(&stdout_log(&env, "i"), "started");
    let agent = agent_pid(&env, "i");
    send_signal(child.id() as i32, sig);
    let r = finish(child);
    assert_eq!(r.code, 130, "{r:?}");
    let v = r.json();
    assert_valid_envelope(&v);
    assert_eq!(v["status"], "cancelled");
    assert_eq!(v["failure_kind"], "cancelled");
    assert_eq!(v["signals_sent"], json!(["SIGTERM"]));
    assert_eq!(v["cancelled_by"], "interrupt", "{v}");
    assert!(!pid_alive(agent), "the agent outlived the cancel");
    assert_eq!(env.result("i"), v);
    env.assert_no_leftovers();
}

#[test]
fn sigint_to_a_waiting_run_cancels_the_attempt() {
    interrupt_foreground_run(libc::SIGINT);
}

#[test]
fn sigterm_to_a_waiting_run_cancels_the_attempt() {
    interrupt_foreground_run(libc::SIGTERM);
}

#[test]
fn second_ctrl_c_kills_at_once() {
    let env = TestEnv::new();
    let child = spawn_run(
        &env,
        &[
            "--run-id",
            "i",
            "--grace",
            "60s",
            "--",
            &fx("ignores_sigterm.sh"),
        ],
    );
    wait_for_text(&stdout_log(&env, "i"), "ready");
    let t0 = Instant::now();
    send_signal(child.id() as i32, libc::SIGINT);
    // The first Ctrl-C wrote the cancel request; the second must not wait out the 60 s.
    wait_until("cancel.json", || {
        env.attempt_dir("i", 1)
            .join("cancel.json")
            .exists()
            .then_some(())
    });
    send_signal(child.id() as i32, libc::SIGINT);
    let r = finish(child);
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "the second Ctrl-C did not kill at once"
    );
    assert_eq!(r.code, 130, "{r:?}");
    let v = r.json();
    assert_eq!(v["status"], "cancelled");
    assert_eq!(v["signal"], "SIGKILL");
    // Whether the worker saw the first request before the second one arrived, SIGKILL ends it.
    let sent = v["signals_sent"].as_array().unwrap().clone();
    assert_eq!(sent.last(), Some(&json!("SIGKILL")), "{sent:?}");
    env.assert_no_leftovers();
}

// ---- limits with nobody waiting -------------------------------------------------------

/// `subpane` processes (other than workers) that use this test's home.
fn supervisors(env: &TestEnv) -> Vec<i32> {
    let mut marker = b"SUBPANE_HOME=".to_vec();
    marker.extend_from_slice(env.home.as_os_str().as_encoded_bytes());
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
        if exe != std::path::Path::new(BIN) || !pid_alive(pid) {
            continue;
        }
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if cmdline.split(|b| *b == 0).any(|a| a == b"__worker") {
            continue;
        }
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        if environ.split(|b| *b == 0).any(|kv| kv == marker.as_slice()) {
            out.push(pid);
        }
    }
    out
}

#[test]
fn detached_timeout_is_enforced_without_a_supervisor() {
    let env = TestEnv::new();
    let r = env.sp([
        "run",
        "--detach",
        "--json",
        "--run-id",
        "d",
        "--timeout",
        "500ms",
        "--grace",
        "300ms",
        "--",
        &fx("ignores_sigterm.sh"),
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    // The pane was started; whether its worker runs yet is not known.
    assert_eq!(r.json()["status"], "starting");
    assert_eq!(
        supervisors(&env),
        Vec::<i32>::new(),
        "a subpane process stayed behind to supervise"
    );
    // Only the file system is watched: no `subpane wait`, `status` or `ls` may write it.
    let result = env.attempt_dir("d", 1).join("result.json");
    let v = wait_until(
        &format!("result.json without a supervisor ({HANG})"),
        || {
            std::fs::read(&result)
                .ok()
                .map(|b| serde_json::from_slice::<Value>(&b).expect("a complete result.json"))
        },
    );
    assert_valid_envelope(&v);
    assert_eq!(v["status"], "failed");
    assert_eq!(v["failure_kind"], "timeout");
    assert_eq!(v["signals_sent"], json!(["SIGTERM", "SIGKILL"]));
    assert_eq!(v["signal"], "SIGKILL");
    assert!(
        ms(&v, "duration_ms") >= 800,
        "duration {}",
        v["duration_ms"]
    );
    env.assert_no_leftovers();
}

#[test]
fn detached_idle_timeout_is_enforced_without_a_supervisor() {
    let env = TestEnv::new();
    let r = env.sp([
        "run",
        "--detach",
        "--run-id",
        "d",
        "--idle-timeout",
        "300ms",
        "--",
        &fx("never_exits.sh"),
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let result = env.attempt_dir("d", 1).join("result.json");
    let v = wait_until(
        &format!("result.json without a supervisor ({HANG})"),
        || {
            std::fs::read(&result)
                .ok()
                .map(|b| serde_json::from_slice::<Value>(&b).expect("a complete result.json"))
        },
    );
    assert_valid_envelope(&v);
    assert_eq!(v["failure_kind"], "idle_timeout");
    assert_eq!(v["signals_sent"], json!(["SIGTERM"]));
    env.assert_no_leftovers();
}

// ---- descendants ----------------------------------------------------------------------

#[test]
fn grandchild_holding_stdout_is_killed_and_status_follows_the_exit() {
    let env = TestEnv::new();
    let t0 = Instant::now();
    let (code, v) = run_json(
        &env,
        &["--run-id", "g", "--", &fx("leaks_grandchild.sh"), "5"],
    );
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["status"], "failed");
    assert_eq!(v["failure_kind"], "exit");
    assert_eq!(v["exit_code"], 5);
    assert_eq!(v["signal"], Value::Null);
    assert_eq!(v["cleanup"]["output_held_open"], true);
    assert!(
        v["cleanup"]["killed_descendants"].as_u64().unwrap() >= 1,
        "{}",
        v["cleanup"]
    );
    // The leak did not hold the attempt open for the grandchild's hour (a bound far from
    // the noise of a loaded machine, far below the hour).
    assert!(t0.elapsed() < Duration::from_secs(600));
    assert!(
        std::fs::read_to_string(stdout_log(&env, "g"))
            .unwrap()
            .contains("leaked a grandchild")
    );
    env.assert_no_leftovers();
}

#[test]
fn setsid_child_holding_stdout_is_killed() {
    let env = TestEnv::new();
    let (code, v) = run_json(
        &env,
        &["--run-id", "s", "--", &fx("setsid_holds_output.sh"), "0"],
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["status"], "completed");
    assert_eq!(v["exit_code"], 0);
    assert_eq!(v["cleanup"]["output_held_open"], true);
    assert!(
        v["cleanup"]["killed_descendants"].as_u64().unwrap() >= 1,
        "{}",
        v["cleanup"]
    );
    env.assert_no_leftovers();
}

#[test]
fn detached_setsid_child_is_killed_at_the_end() {
    let env = TestEnv::new();
    let (code, v) = run_json(
        &env,
        &["--run-id", "s", "--", &fx("setsid_detached.sh"), "0"],
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["status"], "completed");
    // Its output went elsewhere, so the pipes closed with the script...
    assert_eq!(v["cleanup"]["output_held_open"], false);
    // ...but the daemon was still found and killed.
    assert!(
        v["cleanup"]["killed_descendants"].as_u64().unwrap() >= 1,
        "{}",
        v["cleanup"]
    );
    env.assert_no_leftovers();
}

#[test]
fn never_exiting_program_killed_by_timeout_leaves_nothing() {
    let env = TestEnv::new();
    let (code, v) = run_json(
        &env,
        &[
            "--run-id",
            "n",
            "--timeout",
            "400ms",
            "--grace",
            "200ms",
            "--",
            &fx("never_exits.sh"),
        ],
    );
    assert_eq!(code, 124, "{v}");
    assert_eq!(v["failure_kind"], "timeout");
    // The run is over: its tmux session is gone and nothing of it lives on.
    wait_until("the session to close", || {
        (!env.has_session(v["tmux"]["session"].as_str().unwrap())).then_some(())
    });
    env.assert_no_leftovers();
}

// ---- races under load ------------------------------------------------------------------

/// Many attempts stopped by an immediate SIGKILL, all at once (load makes the race likely).
/// Each must end with a `timeout` envelope.
///
/// Guards a race: `kill_now` reaps what it killed, and when the scan of `/proc` still saw the
/// agent (SIGKILL sent, not yet acted on) the agent was reaped there with its status thrown
/// away; the worker then slept in `poll` forever. Every reap now records the agent's status.
#[test]
fn sigkill_escalation_always_finishes() {
    let env = TestEnv::new();
    let ids: Vec<String> = (0..60).map(|i| format!("k{i}")).collect();
    for id in &ids {
        let r = env.sp([
            "run",
            "--detach",
            "--run-id",
            id,
            "--timeout",
            "100ms",
            "--grace",
            "0s",
            "--",
            &fx("ignores_sigterm.sh"),
        ]);
        assert_eq!(r.code, 0, "{r:?}");
    }
    let mut args = vec!["wait", "--all", "--timeout", "15s", "--json"];
    args.extend(ids.iter().map(String::as_str));
    let r = env.sp_within(
        Duration::from_secs(25),
        "wait --timeout 15s did not return",
        &args,
    );
    let docs = r.json();
    let hung: Vec<&str> = docs
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["status"] == "running")
        .map(|d| d["run_id"].as_str().unwrap())
        .collect();
    assert!(
        hung.is_empty(),
        "{} of {} attempts never ended after SIGKILL: {hung:?}",
        hung.len(),
        ids.len()
    );
    assert_eq!(r.code, 124, "{r:?}");
    for d in docs.as_array().unwrap() {
        assert_eq!(d["failure_kind"], "timeout", "{d}");
        assert_eq!(d["signals_sent"], json!(["SIGKILL"]), "{d}");
    }
    env.assert_no_leftovers();
}
