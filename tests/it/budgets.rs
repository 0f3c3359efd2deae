//! Budgets across attempts, end to end with pi against the mock model: a budget of a resumed
//! session counts what the session used in its earlier attempts.

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

use crate::harness::{Ran, TestEnv, assert_valid_envelope, wait_child_within};
use crate::mock::Mock;

const LIMIT: Duration = Duration::from_secs(90);

fn subpane(env: &TestEnv, mock: &Mock, args: &[&str]) -> Ran {
    let child = mock
        .subpane(env, None)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run subpane");
    wait_child_within(child, LIMIT, "a pi run against the mock did not finish")
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
