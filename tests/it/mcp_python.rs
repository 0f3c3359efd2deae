//! `subpane mcp` spoken to by a client nobody here wrote: the official Python MCP SDK
//! (`mcp`, pinned in scripts/install-python-clients, installed by scripts/test into
//! `.py-clients/`). Each test runs one scenario of `tests/mcp_python/client.py`.
//!
//! A missing client fails the test with its name and how to install it: these tests never
//! pass without running.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use crate::harness::{BIN, TestEnv, wait_child_within};

/// The venv's Python, which imports the pinned `mcp`.
fn python() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let py = root.join(".py-clients/bin/python");
    let ok = py.exists()
        && std::process::Command::new(&py)
            .args(["-c", "import mcp"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
    assert!(
        ok,
        "the Python MCP client (PyPI package mcp==2.3.0) is missing from {}: run \
         scripts/install-python-clients (scripts/test does)",
        py.display()
    );
    py
}

/// Runs `scenario` against the real binary with this test's home and tmux socket.
fn scenario(env: &TestEnv, name: &str, limit: Duration) {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_python/client.py");
    let child = std::process::Command::new(python())
        .arg(&script)
        .arg(name)
        .env("SUBPANE_BIN", BIN)
        .env("SUBPANE_HOME", &env.home)
        .env("SUBPANE_TMUX_SOCKET", &env.socket)
        .env("SUBPANE_TEST_WORK", &env.work)
        .env_remove("TMUX")
        .env_remove("TMUX_PANE")
        .current_dir(&env.work)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the Python client");
    let ran = wait_child_within(child, limit, "the Python client hung");
    assert_eq!(ran.code, 0, "{name}:\n{}\n{}", ran.stdout, ran.stderr);
    eprintln!("{}", ran.stdout);
}

/// Issue 29 through the official SDK: `env` values are masked in every answer and progress
/// message; `env_plain` is not; a short value is named.
#[test]
fn secrets_reach_no_answer_of_the_python_sdk() {
    let env = TestEnv::new();
    scenario(&env, "secrets", Duration::from_secs(60));
    env.assert_no_leftovers();
}

#[test]
fn the_python_sdk_takes_every_schema() {
    let env = TestEnv::new();
    scenario(&env, "schemas", Duration::from_secs(60));
    env.assert_no_leftovers();
}

/// With the default arguments, a program longer than 60 s: the answer comes before 60 s
/// (a client's usual limit), with the run still going.
#[test]
fn a_run_longer_than_a_clients_limit_answers_before_it() {
    let env = TestEnv::new();
    scenario(&env, "long_run", Duration::from_secs(120));
    env.assert_no_leftovers();
}

#[test]
fn answers_stay_under_64_kib_for_the_python_sdk() {
    let env = TestEnv::new();
    scenario(&env, "sizes", Duration::from_secs(120));
    env.assert_no_leftovers();
}

#[test]
fn closing_stdin_mid_fanout_loses_no_task() {
    let env = TestEnv::new();
    scenario(&env, "close_mid_fanout", Duration::from_secs(60));
    env.assert_no_leftovers();
}

/// What a model reads first: `summary` leads, `next` is the call to make, a finished run
/// fits 4 KiB without `detail`, and a cancel is named (`cancelled_by`).
#[test]
fn answers_lead_with_summary_and_next_for_the_python_sdk() {
    let env = TestEnv::new();
    scenario(&env, "answers", Duration::from_secs(90));
    env.assert_no_leftovers();
}

/// A fan-out past max_wait reports `running` with counts and `next`, never an exit code.
#[test]
fn a_running_fanout_says_running_to_the_python_sdk() {
    let env = TestEnv::new();
    scenario(&env, "running_fanout", Duration::from_secs(60));
    env.assert_no_leftovers();
}

#[test]
fn list_pages_through_eighty_runs_for_the_python_sdk() {
    let env = TestEnv::new();
    scenario(&env, "pages", Duration::from_secs(90));
    env.assert_no_leftovers();
}

/// `pause` and `resume` of a group of the `fanout` tool: their answers fit their output
/// schemas (the SDK checks), and a paused group starts no new task until resumed.
#[test]
fn the_python_sdk_pauses_and_resumes_a_group() {
    let env = TestEnv::new();
    scenario(&env, "group_controls", Duration::from_secs(60));
    env.assert_no_leftovers();
}

/// `{}`, `[1,2,3]` and `7` get JSON-RPC's -32600 with id null.
#[test]
fn json_that_is_no_request_gets_32600() {
    let env = TestEnv::new();
    scenario(&env, "invalid_requests", Duration::from_secs(30));
    env.assert_no_leftovers();
}

/// Each tool's arguments filled with its schema's defaults (as Ajv's `useDefaults` does) are
/// taken; `required` is only what the server needs.
#[test]
fn schema_defaults_are_taken_by_the_server() {
    let env = TestEnv::new();
    scenario(&env, "defaults", Duration::from_secs(90));
    env.assert_no_leftovers();
}

/// Bad requests name their field as the tools spell it, never as a command-line flag.
#[test]
fn bad_requests_name_fields_never_flags() {
    let env = TestEnv::new();
    scenario(&env, "bad_requests", Duration::from_secs(60));
    env.assert_no_leftovers();
}
