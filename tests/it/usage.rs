//! Budgets and usage limits across attempts, end to end with the pinned CLIs against the
//! mock model: a budget of a resumed session counts what the session used in its earlier
//! attempts; `retry --at-reset` waits in its pane for a usage limit to reset (cancellable,
//! `queued` meanwhile), then resumes the session.

use std::time::Duration;

use serde_json::Value;

use crate::harness::{Ran, TestEnv, assert_valid_envelope, ran_within};
use crate::mock::Mock;

const LIMIT: Duration = Duration::from_secs(90);

fn subpane(env: &TestEnv, mock: &Mock, args: &[&str]) -> Ran {
    let mut c = mock.subpane(env, None);
    c.args(args);
    ran_within(c, LIMIT, "an agent run against the mock did not finish")
}

fn total(v: &Value) -> u64 {
    let u = &v["output"]["usage"];
    [
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
    ]
    .iter()
    .filter_map(|k| u[k].as_u64())
    .sum()
}

/// `retry --resume` of a run with `--max-tokens`: the session's first attempt used some of
/// the budget, and the second is stopped once the two together pass it, its envelope saying
/// the session's figures; a further resume of the spent session is refused before it starts.
#[test]
fn a_resumed_session_s_budget_counts_its_earlier_attempts() {
    let env = TestEnv::new();
    let mock = Mock::start(&env);
    let work = env.work.to_str().unwrap();
    let first = subpane(
        &env,
        &mock,
        &[
            "run",
            "--json",
            "--timeout",
            "60s",
            "--run-id",
            "sess",
            "--cwd",
            work,
            "--agent",
            "pi",
            "--tools",
            "bash",
            "--max-tokens",
            "1000",
            "--task",
            "SCENARIO:plain Say hello.",
        ],
    );
    let v1 = first.json();
    assert_eq!(first.code, 0, "{v1:#}");
    let before = total(&v1);
    assert!(before > 0 && before < 1000, "{v1:#}");
    let second = subpane(
        &env,
        &mock,
        &[
            "retry",
            "sess",
            "--resume",
            "--json",
            "--task",
            "SCENARIO:many_turns PAUSE:0.05 Keep going.",
        ],
    );
    let v2 = second.json();
    assert_valid_envelope(&v2);
    assert_eq!(second.code, 1, "{v2:#}\n{}", second.stderr);
    assert_eq!(v2["failure_kind"], "budget", "{v2:#}");
    let spec = env.read_json(&env.attempt_dir("sess", 2).join("spec.json"));
    assert_eq!(
        spec["limits"]["session_before"]["total_tokens"], before,
        "{spec:#}"
    );
    let b = &v2["budget"];
    assert_eq!(b["limit"], "max_tokens", "{v2:#}");
    let reached = b["reached"].as_u64().unwrap();
    // The session's: attempt 1's tokens and attempt 2's at the stop, past the limit by at
    // most one call (the mock's 148 tokens).
    assert!(reached > 1000 && reached <= 1000 + 148, "{v2:#}");
    assert_eq!(b["usage"]["total_tokens"], reached, "{v2:#}");
    // Attempt 2 alone stayed under the limit: only the session's sum crossed it.
    assert!(reached - before <= 1000, "{v2:#}");
    // Nothing is left: a further resume is refused, and starts nothing.
    let third = subpane(
        &env,
        &mock,
        &["retry", "sess", "--resume", "--task", "more"],
    );
    assert_eq!(third.code, 2, "{}", third.stderr);
    assert!(
        third.stderr.contains("has spent it already")
            && third.stderr.contains("budget max_tokens 1000 crossed at"),
        "{}",
        third.stderr
    );
    assert!(!env.attempt_dir("sess", 3).exists());
    env.assert_no_leftovers();
}

/// `subpane run --agent AGENT --task TASK` against the mock, as run `id`.
fn run_agent(env: &TestEnv, mock: &Mock, id: &str, agent: &str, task: &str) -> Ran {
    let work = env.work.to_str().unwrap();
    subpane(
        env,
        mock,
        &[
            "run",
            "--json",
            "--timeout",
            "60s",
            "--run-id",
            id,
            "--cwd",
            work,
            "--agent",
            agent,
            "--task",
            task,
        ],
    )
}

/// The model requests the mock has answered so far.
fn requests(mock: &Mock) -> usize {
    mock.log_text()
        .lines()
        .filter(|l| l.contains("POST "))
        .count()
}

/// pi says no reset time: `--at-reset` alone is refused, with `--after` the new attempt is
/// `queued`, `waiting until … (usage limit)` in `ls`, asks the model nothing meanwhile, then
/// resumes the session and completes.
#[test]
fn at_reset_waits_in_its_pane_then_resumes_the_session() {
    let env = TestEnv::new();
    let mock = Mock::start(&env);
    let first = run_agent(&env, &mock, "lim", "pi", "SCENARIO:usage_limit Say hello.");
    let v1 = first.json();
    assert_eq!(first.code, 75, "{v1:#}");
    let session = v1["output"]["session_id"].as_str().unwrap().to_owned();
    // No time to wait for.
    let refused = subpane(&env, &mock, &["retry", "lim", "--at-reset"]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("said no time it resets") && refused.stderr.contains("--after"),
        "{}",
        refused.stderr
    );
    assert!(!env.attempt_dir("lim", 2).exists());
    let asked = requests(&mock);
    let started = subpane(
        &env,
        &mock,
        &[
            "retry",
            "lim",
            "--at-reset",
            "--after",
            "3s",
            "--detach",
            "--json",
            "--task",
            "SCENARIO:plain Go on.",
        ],
    );
    assert_eq!(started.code, 0, "{}", started.stderr);
    let spec = env.read_json(&env.attempt_dir("lim", 2).join("spec.json"));
    assert_eq!(spec["start_at"]["why"], "usage limit", "{spec:#}");
    assert_eq!(spec["task"]["resume_session"], session.as_str(), "{spec:#}");
    let rows = env.sp(["ls", "--json"]).json();
    let row = &rows.as_array().unwrap()[0];
    assert_eq!(row["status"], "queued", "{rows:#}");
    assert_eq!(row["waiting"], spec["start_at"], "{rows:#}");
    let text = env.sp(["ls"]).stdout;
    assert!(
        text.contains("waiting until ") && text.contains("(usage limit)"),
        "{text}"
    );
    let status = env.sp(["status", "lim", "--json"]).json();
    assert_eq!(status["status"], "queued", "{status:#}");
    crate::harness::wait_until("the waiting worker's pane line", || {
        env.capture_pane("lim-2")
            .contains("subpane: waiting until ")
            .then_some(())
    });
    let done = subpane(&env, &mock, &["wait", "lim", "--json"]);
    let v2 = done.json();
    assert_eq!(done.code, 0, "{v2:#}\n{}", done.stderr);
    assert_eq!(v2["status"], "completed", "{v2:#}");
    assert_eq!(v2["resumed_from"], 1, "{v2:#}");
    assert_eq!(v2["output"]["session_id"], session.as_str(), "{v2:#}");
    // It started at its time, not before: the start is past the time it waited for.
    let start_at = humantime::parse_rfc3339_weak(spec["start_at"]["at"].as_str().unwrap()).unwrap();
    let began = humantime::parse_rfc3339_weak(v2["started_at"].as_str().unwrap()).unwrap();
    assert!(began >= start_at, "started {began:?}, before {start_at:?}");
    assert!(requests(&mock) > asked, "attempt 2 asked the model nothing");
    env.assert_no_leftovers();
}

/// Codex says when its limit resets (an hour ahead here): `--at-reset` waits for that, and a
/// cancel during the wait ends the attempt `cancelled` without its program ever starting.
#[test]
fn at_reset_waits_for_the_reset_time_and_a_cancel_ends_the_wait() {
    let env = TestEnv::new();
    let mock = Mock::start(&env);
    let first = run_agent(
        &env,
        &mock,
        "cx",
        "codex",
        "SCENARIO:usage_limit Say hello.",
    );
    let v1 = first.json();
    assert_eq!(first.code, 75, "{v1:#}");
    let reset = v1["output"]["usage_limit"]["retry_at"]
        .as_str()
        .unwrap()
        .to_owned();
    let asked = requests(&mock);
    let started = subpane(&env, &mock, &["retry", "cx", "--at-reset", "--detach"]);
    assert_eq!(started.code, 0, "{}", started.stderr);
    let spec = env.read_json(&env.attempt_dir("cx", 2).join("spec.json"));
    let at = |t: &str| humantime::parse_rfc3339_weak(t).unwrap();
    assert_eq!(
        at(spec["start_at"]["at"].as_str().unwrap()),
        at(&reset),
        "{spec:#}"
    );
    // The worker is up and waiting (a cancel reaches it).
    crate::harness::wait_until("the waiting worker's pane line", || {
        env.capture_pane("cx-2")
            .contains("subpane: waiting until ")
            .then_some(())
    });
    let top_row = env.sp(["ls", "--json"]).json();
    assert_eq!(top_row[0]["status"], "queued", "{top_row:#}");
    // Its agent is not there yet to take a message: refused at once, saying when.
    let early = env.sp(["send", "cx", "are you there?"]);
    assert_eq!(early.code, 2, "{}", early.stderr);
    assert!(early.stderr.contains("waits until"), "{}", early.stderr);
    let cancel = env.sp(["cancel", "cx", "--json"]);
    assert_eq!(cancel.code, 0, "{}", cancel.stderr);
    let done = subpane(&env, &mock, &["wait", "cx", "--json"]);
    let v2 = done.json();
    assert_eq!(done.code, 130, "{v2:#}");
    assert_eq!(v2["status"], "cancelled", "{v2:#}");
    assert_eq!(v2["cancelled_by"], "cancel", "{v2:#}");
    assert_eq!(v2["signals_sent"], serde_json::json!([]), "{v2:#}");
    assert_eq!(requests(&mock), asked, "the cancelled wait asked the model");
    env.assert_no_leftovers();
}

/// `--at-reset` of a run that did not end at a usage limit starts nothing.
#[test]
fn at_reset_of_a_run_without_a_usage_limit_is_refused() {
    let env = TestEnv::new();
    let ran = env.sp(["run", "--run-id", "ok", "--", "true"]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let refused = env.sp(["retry", "ok", "--at-reset"]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("did not end at one"),
        "{}",
        refused.stderr
    );
    assert!(!env.attempt_dir("ok", 2).exists());
    env.assert_no_leftovers();
}

/// Claude Code reports its cost only in its final `result`: `--max-cost` is refused alone,
/// and with a price its tokens are costed as they come, and the budget stops it.
#[test]
fn claude_max_cost_holds_with_a_price() {
    let env = TestEnv::new();
    let mock = Mock::start(&env);
    let work = env.work.to_str().unwrap();
    let base = [
        "run",
        "--json",
        "--timeout",
        "60s",
        "--cwd",
        work,
        "--agent",
        "claude",
        "--tools",
        "Bash",
        "--max-cost",
        "0.3",
        "--task",
        "SCENARIO:many_turns Keep going.",
    ];
    let refused = subpane(&env, &mock, &[&base[..], &["--run-id", "c0"]].concat());
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(refused.stderr.contains("--price"), "{}", refused.stderr);
    // $1000 a million tokens: the mock's 148 tokens a call cost $0.148.
    let ran = subpane(
        &env,
        &mock,
        &[
            &base[..],
            &["--run-id", "c1", "--price", "1000,1000,1000,1000"],
        ]
        .concat(),
    );
    let v = ran.json();
    assert_eq!(ran.code, 1, "{v:#}\n{}", ran.stderr);
    assert_eq!(v["failure_kind"], "budget", "{v:#}");
    assert_eq!(v["budget"]["limit"], "max_cost", "{v:#}");
    let reached = v["budget"]["reached"].as_f64().unwrap();
    assert!(reached > 0.3 && reached < 0.3 + 0.148 * 2.0, "{v:#}");
    let spec = env.read_json(&env.attempt_dir("c1", 1).join("spec.json"));
    assert_eq!(spec["limits"]["price"]["input"], 1000.0, "{spec:#}");
    env.assert_no_leftovers();
}

/// A person attached to a waiting attempt's pane cancels it with Ctrl-C twice, as any run:
/// it ends `cancelled` by the interrupt, its program never started.
#[test]
fn ctrl_c_twice_in_the_pane_cancels_a_waiting_attempt() {
    let env = TestEnv::new();
    assert_eq!(env.sp(["run", "--run-id", "w", "--", "true"]).code, 0);
    let started = env.sp(["retry", "w", "--after", "10m", "--detach"]);
    assert_eq!(started.code, 0, "{}", started.stderr);
    let t =
        crate::terminal::Terminal::subpane(&env, "wait-ctrl-c", (120, 30), &[], &["attach", "w"]);
    t.wait_for("(asked); `subpane cancel w`");
    t.keys(&["C-c"]);
    t.wait_for("press it again");
    t.keys(&["C-c"]);
    t.wait_exit();
    let done = env.sp(["wait", "w", "--json"]);
    let v = done.json();
    assert_eq!(done.code, 130, "{v:#}");
    assert_eq!(v["attempt"], 2, "{v:#}");
    assert_eq!(v["cancelled_by"], "interrupt", "{v:#}");
    assert_eq!(v["exit_code"], serde_json::Value::Null, "{v:#}");
    env.assert_no_leftovers();
}

/// `retry --literal` (what a retry passed to a host gets) takes `--task` as its text even
/// when it starts with `@`; without it, `@` names a file.
#[test]
fn a_literal_task_of_a_retry_is_its_text() {
    let env = TestEnv::new();
    let mock = Mock::start(&env);
    let first = run_agent(&env, &mock, "lit", "pi", "SCENARIO:plain Say hello.");
    assert_eq!(first.code, 0, "{}", first.stderr);
    let file = subpane(
        &env,
        &mock,
        &["retry", "lit", "--task", "@no-such-task-file"],
    );
    assert_eq!(file.code, 2, "{}", file.stderr);
    assert!(file.stderr.contains("no-such-task-file"), "{}", file.stderr);
    assert!(!env.attempt_dir("lit", 2).exists());
    let text = subpane(
        &env,
        &mock,
        &[
            "retry",
            "lit",
            "--literal",
            "--task",
            "@no-such-task-file SCENARIO:plain",
        ],
    );
    assert_eq!(text.code, 0, "{}", text.stderr);
    let prompt = std::fs::read_to_string(env.attempt_dir("lit", 2).join("prompt.txt")).unwrap();
    assert!(prompt.contains("@no-such-task-file"), "{prompt}");
    env.assert_no_leftovers();
}
