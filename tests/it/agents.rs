//! End to end with the real agent CLIs: pi, Claude Code and Codex at the versions pinned in
//! `scripts/install-agent-clis` (installed in `.agent-clis/`), run through `subpane run`
//! against the mock model server (`tests/mock_model/server.py`) that each test starts on
//! loopback. The scenario is picked by a `SCENARIO:<name>` marker in the task.
//!
//! ```text
//! test ──► subpane run --agent X ──► pane: worker ──► real CLI ──HTTP──► server.py (this test's)
//!   ▲                                                                        │ --log, --dump-dir
//!   └──── result.json, events.jsonl, output.txt, the pane, the mock's request log
//! ```
//!
//! Common pitfalls:
//! * pi needs ~6 s to load its modules on this machine before it prints anything: an idle
//!   timeout shorter than that stops it before it ever reaches the model.
//! * The environment of `subpane run` is what the agent gets, so the mock's settings and the
//!   CLIs' directory on PATH go on the `subpane` command, not on the tmux server.
//! * pi's tool names are lower case (`bash`), Claude's are not (`Bash`): `--tools Bash` gives
//!   pi no tool at all.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::{TestEnv, assert_valid_envelope, wait_child_within, wait_for_text};
use crate::mock::{Mock, clis_bin};

/// Upper bound for one `subpane run` of a real CLI; the run's own `--timeout` is shorter, so
/// a hang shows up as a `timeout` envelope first.
const RUN_LIMIT: Duration = Duration::from_secs(90);
const RUN_TIMEOUT: &str = "60s";

const MOCK_TEXT: &str = "Hello from the mock model.";
const TOOL_DONE_TEXT: &str = "I wrote made_by_agent.txt.";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Agent {
    Pi,
    Claude,
    Codex,
}

impl Agent {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Agent::Pi => "pi",
            Agent::Claude => "claude",
            Agent::Codex => "codex",
        }
    }
    /// `--tools` that let the CLI run its shell tool. None for codex: any `--tools` turns on
    /// codex's own sandbox (`workspace-write`), which containers may not support, and the
    /// mock's config already gives it full access.
    pub(crate) fn tools_args(self) -> &'static [&'static str] {
        match self {
            Agent::Pi => &["--tools", "bash"],
            Agent::Claude => &["--tools", "Bash"],
            Agent::Codex => &[],
        }
    }
    /// The tool's name as the pane shows the call (codex reports a command execution).
    fn shell_tool_in_pane(self) -> &'static str {
        match self {
            Agent::Pi => "bash",
            Agent::Claude => "Bash",
            Agent::Codex => "shell",
        }
    }
    /// A streaming delta line type that must never reach events.jsonl.
    fn delta_type(self) -> &'static str {
        match self {
            Agent::Pi => "message_update",
            Agent::Claude => "stream_event",
            Agent::Codex => "item.updated",
        }
    }
    /// Whether the CLI writes streaming deltas on stdout that the filter drops.
    fn streams_deltas(self) -> bool {
        self != Agent::Codex
    }
    /// The idle timeout for the stall scenario: longer than the CLI's silent start.
    fn stall_idle_timeout(self) -> &'static str {
        match self {
            Agent::Pi => "12s",
            _ => "8s",
        }
    }
}

/// `subpane run --json --timeout 60s --run-id RUN --cwd WORK --agent A <extra…>`; returns
/// the run's exit code and its (schema-checked) envelope.
fn run_agent(
    env: &TestEnv,
    mock: &Mock,
    front: Option<&Path>,
    run: &str,
    agent: Agent,
    extra: &[&str],
) -> (i32, Value) {
    run_agent_as(env, mock, front, run, agent, extra, |_| {})
}

/// [`run_agent`] with the environment of `subpane run` changed by `how`.
pub(crate) fn run_agent_as(
    env: &TestEnv,
    mock: &Mock,
    front: Option<&Path>,
    run: &str,
    agent: Agent,
    extra: &[&str],
    how: impl FnOnce(&mut std::process::Command),
) -> (i32, Value) {
    let work = env.work.to_str().unwrap();
    let mut c = mock.subpane(env, front);
    how(&mut c);
    c.args([
        "run",
        "--json",
        "--timeout",
        RUN_TIMEOUT,
        "--run-id",
        run,
        "--cwd",
        work,
        "--agent",
        agent.name(),
    ]);
    c.args(extra);
    let started = Instant::now();
    let child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run subpane");
    let ran = wait_child_within(
        child,
        RUN_LIMIT,
        "a real agent CLI against the mock model did not finish",
    );
    eprintln!(
        "{run}: {} exited {} after {:?}",
        agent.name(),
        ran.code,
        started.elapsed()
    );
    let v = ran.json();
    assert_valid_envelope(&v);
    assert_eq!(v, env.result(run), "the printed envelope is result.json");
    assert_eq!(v["agent"], agent.name());
    (ran.code, v)
}

fn events(env: &TestEnv, run: &str) -> Vec<Value> {
    let text =
        std::fs::read_to_string(env.attempt_dir(run, 1).join("events.jsonl")).unwrap_or_default();
    text.lines()
        .map(|l| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("events.jsonl line is not JSON ({e}): {l}"))
        })
        .collect()
}

/// No streaming delta reached events.jsonl, and the filter counted the ones it dropped.
fn assert_no_deltas(env: &TestEnv, run: &str, agent: Agent, v: &Value) {
    let evs = events(env, run);
    assert!(!evs.is_empty(), "events.jsonl is empty");
    let delta = agent.delta_type();
    assert!(
        !evs.iter().any(|e| e["type"] == delta),
        "events.jsonl keeps {delta} lines"
    );
    assert_eq!(
        v["filter"]["kept_lines"].as_u64(),
        Some(evs.len() as u64),
        "{}",
        v["filter"]
    );
    if agent.streams_deltas() {
        assert!(
            v["filter"]["dropped_lines"].as_u64().unwrap() > 0,
            "nothing was dropped: {}",
            v["filter"]
        );
        assert!(
            v["filter"]["dropped_bytes"].as_u64().unwrap() > 0,
            "{}",
            v["filter"]
        );
    }
}

/// A clean answer: completed, the text in the envelope, output.txt and `logs --output`,
/// a session id, usage of `calls` model calls, a cost (pi and claude), turns.
fn assert_completed(
    env: &TestEnv,
    run: &str,
    agent: Agent,
    code: i32,
    v: &Value,
    text: &str,
    calls: u64,
) {
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(v["status"], "completed", "{v:#}");
    assert_eq!(v["failure_kind"], Value::Null);
    assert_eq!(v["exit_code"], 0);
    assert_eq!(v["lingered"], false);
    assert!(v["terminal_event"].is_string(), "{v:#}");
    let out = &v["output"];
    assert_eq!(out["final_text"], text);
    let txt = std::fs::read_to_string(env.attempt_dir(run, 1).join("output.txt")).unwrap();
    assert_eq!(txt.trim_end(), text);
    let logs = env.sp(["logs", "--output", run]);
    assert_eq!(logs.code, 0, "{logs:?}");
    assert_eq!(logs.stdout.trim_end(), text);
    assert!(
        out["session_id"].as_str().is_some_and(|s| !s.is_empty()),
        "{out:#}"
    );
    // The mock's fixed usage: 120 input, 8 output, 20 cache-read tokens per call.
    let u = &out["usage"];
    assert_eq!(u["input_tokens"].as_u64(), Some(120 * calls), "{u}");
    assert_eq!(u["output_tokens"].as_u64(), Some(8 * calls), "{u}");
    assert_eq!(u["cache_read_tokens"].as_u64(), Some(20 * calls), "{u}");
    match agent {
        // models.json: 1 $/M input, 2 $/M output, 0.5 $/M cache read.
        Agent::Pi => {
            let c = out["cost_usd"].as_f64().expect("pi reports a cost");
            assert!((c - 0.000146 * calls as f64).abs() < 1e-9, "cost {c}");
        }
        Agent::Claude => assert!(out["cost_usd"].as_f64().is_some_and(|c| c > 0.0), "{out:#}"),
        Agent::Codex => assert_eq!(out["cost_usd"], Value::Null, "codex reports no cost"),
    }
    assert!(out["turns"].as_u64().is_some_and(|t| t >= 1), "{out:#}");
    // The summary a person reads gives the same: usage, and the session to resume.
    let st = env.sp(["status", run]);
    let sid = out["session_id"].as_str().unwrap();
    assert!(
        st.stdout.contains(&format!(
            "\nsession   {sid} (`subpane retry {run} --resume`"
        )),
        "{}",
        st.stdout
    );
    let usage = st
        .stdout
        .lines()
        .find(|l| l.starts_with("usage     "))
        .unwrap_or_else(|| panic!("no usage line:\n{}", st.stdout));
    let tokens = u["total_tokens"].as_u64().unwrap();
    assert!(
        usage.contains(&format!("usage     {tokens} tokens (")),
        "{usage}"
    );
    assert!(usage.contains(" turn"), "{usage}");
    if let Some(c) = out["tool_calls"].as_u64() {
        assert!(usage.contains(&format!("· {c} tool call")), "{usage}");
    }
    if out["cost_usd"].is_number() {
        assert!(usage.contains(" · $0."), "{usage}");
    }
    assert_eq!(out["errors"], serde_json::json!([]));
    assert_eq!(out["context_length_exceeded"], false);
    assert_no_deltas(env, run, agent, v);
}

fn plain(agent: Agent) {
    let env = TestEnv::new();
    let mock = Mock::start(&env);
    let (code, v) = run_agent(
        &env,
        &mock,
        None,
        "plain",
        agent,
        &["--task", "SCENARIO:plain Say hello."],
    );
    assert_completed(&env, "plain", agent, code, &v, MOCK_TEXT, 1);
    assert_eq!(v["output"]["tool_calls"], 0);
    assert!(
        mock.log_text().contains("scenario=plain"),
        "{}",
        mock.log_text()
    );
    env.assert_no_leftovers();
}

fn tool_write(agent: Agent) {
    let env = TestEnv::new();
    let mock = Mock::start(&env);
    let target = env.work.join("made_by_agent.txt");
    assert!(!target.exists());
    let args = [
        agent.tools_args(),
        &["--task", "SCENARIO:tool_write Write the file."],
    ]
    .concat();
    let (code, v) = run_agent(&env, &mock, None, "tool", agent, &args);
    assert_completed(&env, "tool", agent, code, &v, TOOL_DONE_TEXT, 2);
    assert!(
        v["output"]["tool_calls"].as_u64().is_some_and(|n| n >= 1),
        "{v:#}"
    );
    assert_eq!(
        std::fs::read_to_string(&target).expect("the agent's tool wrote the file in --cwd"),
        "hi\n"
    );
    env.assert_no_leftovers();
}

/// The same tool call in `--sandbox` with only the mock's address allowed: the agent reaches
/// its model through subpane's egress proxy, its tool writes in the workspace, and the same
/// command's write to a directory outside (visible, not under the private /tmp) fails.
fn sandboxed_tool_write(agent: Agent) {
    let env = TestEnv::new();
    let mock = Mock::start(&env);
    let target = env.work.join("made_by_agent.txt");
    let outside = crate::harness::outside_the_sandbox("agent-outside-");
    let task = format!(
        "SCENARIO:tool_write_outside OUTSIDE:{} Write the file.",
        outside.path().display()
    );
    let args = [
        &[
            "--sandbox",
            "--network",
            "allow:127.0.0.1",
            "--env-pass",
            "MOCK_API_KEY",
        ],
        agent.tools_args(),
        &["--task", &task],
    ]
    .concat();
    let (code, v) = run_agent(&env, &mock, None, "sbx", agent, &args);
    assert_completed(&env, "sbx", agent, code, &v, TOOL_DONE_TEXT, 2);
    assert_eq!(
        std::fs::read_to_string(&target).expect("the agent's tool wrote the file in --cwd"),
        "hi\n"
    );
    let escaped = outside.path().join("escaped.txt");
    assert!(
        !escaped.exists(),
        "the sandboxed tool wrote outside the workspace"
    );
    // The command did run the write that failed: the mock saw the tool result after it.
    assert!(mock.request_bodies().len() >= 2);
    let sb = &v["sandbox"];
    assert_eq!(sb["enabled"], true, "{sb}");
    assert!(
        sb["enforced"]["landlock_abi"].as_u64().unwrap() >= 6,
        "{sb}"
    );
    let log = std::fs::read_to_string(env.attempt_dir("sbx", 1).join("network.jsonl")).unwrap();
    assert!(
        log.lines().any(|l| {
            let e: Value = serde_json::from_str(l).unwrap();
            e["host"] == "127.0.0.1" && e["decision"] == "allow"
        }),
        "the model was not reached through the proxy:\n{log}"
    );
    env.assert_no_leftovers();
}

fn model_error(agent: Agent) {
    let env = TestEnv::new();
    let mock = Mock::start(&env);
    let (code, v) = run_agent(
        &env,
        &mock,
        None,
        "err",
        agent,
        &["--task", "SCENARIO:model_error Say hello."],
    );
    assert_eq!(code, 1, "{v:#}");
    assert_eq!(v["status"], "failed", "{v:#}");
    assert_eq!(v["failure_kind"], "model", "{v:#}");
    assert_eq!(v["output"]["final_text"], Value::Null);
    assert_eq!(v["output"]["context_length_exceeded"], false);
    let errors = v["output"]["errors"].as_array().unwrap();
    assert!(!errors.is_empty(), "the model's error is reported: {v:#}");
    assert!(errors.iter().all(|e| !e.as_str().unwrap().is_empty()));
    let evs = events(&env, "err");
    match agent {
        // pi exits 0 after a failed model call: the outcome comes from its events.
        Agent::Pi => {
            assert_eq!(v["exit_code"], 0, "{v:#}");
            assert!(errors[0].as_str().unwrap().contains("500"), "{errors:?}");
        }
        Agent::Claude => {
            let result = evs
                .iter()
                .rev()
                .find(|e| e["type"] == "result")
                .expect("a result event");
            // Claude says "success" for a failed call; is_error is what counts.
            assert_eq!(result["subtype"], "success", "{result}");
            assert_eq!(result["is_error"], true, "{result}");
        }
        // Codex's app-server: the turn's end says it failed.
        Agent::Codex => assert!(
            evs.iter()
                .any(|e| e["method"] == "turn/completed"
                    && e["params"]["turn"]["status"] == "failed"),
            "no failed turn/completed"
        ),
    }
    assert!(v["terminal_event"].is_string(), "{v:#}");
    assert!(mock.log_text().contains("scenario=model_error"));
    env.assert_no_leftovers();
}

/// A run that met the account's usage limit, with what it ran against.
struct Limited {
    env: TestEnv,
    mock: Mock,
    v: Value,
    evs: Vec<Value>,
}

/// The account's usage limit (the mock's 429 with a reset an hour ahead), as `agent` meets
/// it: an outcome of its own, exit 75, never a model failure. The envelope and the events.
fn usage_limit(agent: Agent, extra: &[&str]) -> Limited {
    let env = TestEnv::new();
    let mock = Mock::start(&env);
    let args = [extra, &["--task", "SCENARIO:usage_limit Say hello."]].concat();
    let (code, v) = run_agent(&env, &mock, None, "limit", agent, &args);
    let evs = events(&env, "limit");
    assert_eq!(code, 75, "{v:#}\n{evs:#?}");
    assert_eq!(v["status"], "failed", "{v:#}");
    assert_eq!(v["failure_kind"], "usage_limit", "{v:#}");
    let said = v["output"]["usage_limit"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(said.starts_with(&format!("{}: ", agent.name())), "{v:#}");
    assert_valid_envelope(&v);
    assert!(mock.log_text().contains("scenario=usage_limit"));
    env.assert_no_leftovers();
    Limited { env, mock, v, evs }
}

/// Claude Code with an API key gives up at once on a `retry-after` over a minute; its
/// `result` says `api_error_status: 429`.
#[test]
fn claude_usage_limit_is_its_own_outcome_with_exit_75() {
    let Limited { evs, .. } = usage_limit(Agent::Claude, &[]);
    let result = evs
        .iter()
        .rev()
        .find(|e| e["type"] == "result")
        .expect("a result event");
    assert_eq!(result["api_error_status"], 429, "{result}");
}

/// As a subscriber (an OAuth token, no API key) Claude Code meets its five-hour window: the
/// mock's 429 says retry after 30 s, which Claude would retry ten times over some six
/// minutes were it transient, and the unified headers say the window is rejected until an
/// hour from now. Its `rate_limit_event` ends the attempt: usage_limit, exit 75, `retry_at` the
/// window's reset, after one request and no retry.
#[test]
fn claude_subscribers_usage_limit_ends_at_its_rate_limit_event() {
    let env = TestEnv::new();
    let mock = Mock::start(&env);
    let task = ["--task", "SCENARIO:usage_limit_soon Say hello."];
    let (code, v) = run_agent_as(&env, &mock, None, "sub", Agent::Claude, &task, |c| {
        c.env_remove("ANTHROPIC_API_KEY")
            .env_remove("CLAUDE_CODE_MAX_RETRIES")
            .env("CLAUDE_CODE_OAUTH_TOKEN", "sk-ant-oat01-mock");
    });
    let evs = events(&env, "sub");
    assert_eq!(code, 75, "{v:#}\n{evs:#?}");
    assert_eq!(v["failure_kind"], "usage_limit", "{v:#}");
    assert_eq!(v["terminal_event"], "rate_limit_event", "{v:#}");
    let window = evs
        .iter()
        .find(|e| e["type"] == "rate_limit_event")
        .expect("a rate_limit_event");
    let reset = window["rate_limit_info"]["resetsAt"].as_u64().unwrap();
    let reset = std::time::UNIX_EPOCH + Duration::from_secs(reset);
    let limit = &v["output"]["usage_limit"];
    assert_eq!(
        limit["retry_at"],
        humantime::format_rfc3339_seconds(reset).to_string(),
        "{v:#}"
    );
    assert_eq!(limit["kind"], "five_hour", "{v:#}");
    assert!(!evs.iter().any(|e| e["subtype"] == "api_retry"), "{evs:#?}");
    let requests = mock
        .log_text()
        .lines()
        .filter(|l| l.contains("scenario=usage_limit_soon"))
        .count();
    assert_eq!(requests, 1, "{}", mock.log_text());
    assert_valid_envelope(&v);
    env.assert_no_leftovers();
}

/// Codex never retries it, and says when only as its local clock, to the minute.
#[test]
fn codex_usage_limit_is_its_own_outcome_with_exit_75() {
    let Limited { v, .. } = usage_limit(Agent::Codex, &[]);
    let at = v["output"]["usage_limit"]["retry_at"].as_str();
    assert!(at.is_some_and(|t| t.ends_with(":00Z")), "{v:#}");
}

/// pi as a user's settings leave it (the tests' say nothing of its provider's retries): its
/// provider's SDK would sleep the whole hour of `retry-after` before each retry, without a
/// word. subpane turns those off for the attempt, so pi's own retries run (events), and its
/// last error is the limit. The user's settings file stays as it was; the attempt's has the
/// user's settings with the retries off.
fn pi_usage_limit(extra: &[&str]) {
    let Limited { env, mock, v, evs } = usage_limit(Agent::Pi, extra);
    assert!(
        evs.iter().any(|e| e["type"] == "auto_retry_start"),
        "{evs:#?}"
    );
    let said = v["output"]["usage_limit"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(said.starts_with("pi: 429"), "{v:#}");
    let read = |p: &Path| -> Value {
        serde_json::from_str(&std::fs::read_to_string(p).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    };
    let users = PathBuf::from(&mock.env["PI_CODING_AGENT_DIR"]);
    let theirs = read(&users.join("settings.json"));
    assert_eq!(
        theirs["retry"]["provider"]["maxRetries"],
        Value::Null,
        "{theirs:#}"
    );
    let own = read(&env.attempt_dir("limit", 1).join("agent/settings.json"));
    assert_eq!(own["retry"]["provider"]["maxRetries"], 0, "{own:#}");
    assert_eq!(
        own["defaultProvider"], "mock",
        "the user's settings are kept: {own:#}"
    );
    assert_eq!(own["retry"]["baseDelayMs"], 100, "{own:#}");
}

#[test]
fn pi_usage_limit_is_its_own_outcome_with_exit_75() {
    pi_usage_limit(&[]);
}

/// Sandboxed, pi's state directory is the attempt's own copy, with the same settings.
#[test]
fn pi_sandboxed_usage_limit_is_its_own_outcome_with_exit_75() {
    pi_usage_limit(&[
        "--sandbox",
        "--network",
        "allow:127.0.0.1",
        "--env-pass",
        "MOCK_API_KEY",
    ]);
}

/// A transient rate limit (the mock's 429 with `retry-after: 1`, once) is no usage limit:
/// the CLI's own retry runs, shown as its event, and the run completes.
fn transient_rate_limit(agent: Agent, retry_event: &str) {
    let env = TestEnv::new();
    let mock = Mock::start(&env);
    let (code, v) = run_agent(
        &env,
        &mock,
        None,
        "rl",
        agent,
        &["--task", "SCENARIO:rate_limit_once Say hello."],
    );
    assert_completed(&env, "rl", agent, code, &v, MOCK_TEXT, 1);
    assert_eq!(v["output"]["usage_limit"], Value::Null, "{v:#}");
    let evs = events(&env, "rl");
    assert!(
        evs.iter()
            .any(|e| e["type"] == retry_event || e["subtype"] == retry_event),
        "no {retry_event}: {evs:#?}"
    );
    let calls = mock
        .log_text()
        .lines()
        .filter(|l| l.contains("scenario=rate_limit_once"))
        .count();
    assert_eq!(calls, 2, "{}", mock.log_text());
    env.assert_no_leftovers();
}

#[test]
fn pi_transient_rate_limit_is_retried_and_completes() {
    transient_rate_limit(Agent::Pi, "auto_retry_start");
}

#[test]
fn claude_transient_rate_limit_is_retried_and_completes() {
    transient_rate_limit(Agent::Claude, "api_retry");
}

fn context_overflow(agent: Agent) {
    let env = TestEnv::new();
    let mock = Mock::start(&env);
    let (code, v) = run_agent(
        &env,
        &mock,
        None,
        "overflow",
        agent,
        &["--task", "SCENARIO:context_overflow Say hello."],
    );
    assert_eq!(code, 1, "{v:#}");
    assert_eq!(v["status"], "failed", "{v:#}");
    assert_eq!(v["failure_kind"], "model", "{v:#}");
    assert_eq!(v["output"]["context_length_exceeded"], true, "{v:#}");
    assert!(
        !v["output"]["errors"].as_array().unwrap().is_empty(),
        "{v:#}"
    );
    assert!(mock.log_text().contains("scenario=context_overflow"));
    env.assert_no_leftovers();
}

fn stall(agent: Agent) {
    let env = TestEnv::new();
    let mock = Mock::start(&env);
    let idle = agent.stall_idle_timeout();
    let (code, v) = run_agent(
        &env,
        &mock,
        None,
        "stall",
        agent,
        &[
            "--idle-timeout",
            idle,
            "--task",
            "SCENARIO:stall Say hello.",
        ],
    );
    assert_eq!(code, 124, "{v:#}");
    assert_eq!(v["status"], "failed", "{v:#}");
    assert_eq!(v["failure_kind"], "idle_timeout", "{v:#}");
    assert_eq!(v["terminal_event"], Value::Null);
    assert_eq!(v["output"]["final_text"], Value::Null);
    // The CLI reached the model and was stopped while the stream hung, not before it started.
    assert!(
        mock.log_text().contains("scenario=stall"),
        "the CLI never asked the model:\n{}",
        mock.log_text()
    );
    assert!(
        v["output"]["session_id"].is_string(),
        "the CLI started its session before the stall: {v:#}"
    );
    // Stopping the CLI closed its connection to the model.
    wait_for_text(&mock.log, "stall: client gone");
    env.assert_no_leftovers();
}

#[test]
fn pi_plain_answer() {
    plain(Agent::Pi);
}
#[test]
fn claude_plain_answer() {
    plain(Agent::Claude);
}
#[test]
fn codex_plain_answer() {
    plain(Agent::Codex);
}
#[test]
fn pi_tool_call_writes_a_file() {
    tool_write(Agent::Pi);
}
#[test]
fn claude_tool_call_writes_a_file() {
    tool_write(Agent::Claude);
}
#[test]
fn codex_tool_call_writes_a_file() {
    tool_write(Agent::Codex);
}
#[test]
fn pi_sandboxed_tool_call_stays_in_the_workspace() {
    sandboxed_tool_write(Agent::Pi);
}
#[test]
fn claude_sandboxed_tool_call_stays_in_the_workspace() {
    sandboxed_tool_write(Agent::Claude);
}
#[test]
fn codex_sandboxed_tool_call_stays_in_the_workspace() {
    sandboxed_tool_write(Agent::Codex);
}
#[test]
fn pi_model_error_fails_though_pi_exits_0() {
    model_error(Agent::Pi);
}
#[test]
fn claude_model_error_fails() {
    model_error(Agent::Claude);
}
#[test]
fn codex_model_error_fails() {
    model_error(Agent::Codex);
}
#[test]
fn pi_context_overflow() {
    context_overflow(Agent::Pi);
}
#[test]
fn claude_context_overflow() {
    context_overflow(Agent::Claude);
}
#[test]
fn codex_context_overflow() {
    context_overflow(Agent::Codex);
}
#[test]
fn pi_stalled_stream_hits_the_idle_timeout() {
    stall(Agent::Pi);
}
#[test]
fn claude_stalled_stream_hits_the_idle_timeout() {
    stall(Agent::Claude);
}
#[test]
fn codex_stalled_stream_hits_the_idle_timeout() {
    stall(Agent::Codex);
}

/// A task that works on for many turns (`many_turns`: a shell call on every model call) under
/// a budget: the worker stops the agent within one turn of the limit, through the stop
/// ladder, and the envelope says which limit, its value and the usage at the stop.
fn budget_stops(agent: Agent, limit: &str, value: u64, per_turn: u64) {
    let env = TestEnv::new();
    let mock = Mock::start(&env);
    let flag = format!("--{}", limit.replace('_', "-"));
    let value_text = value.to_string();
    let args = [
        agent.tools_args(),
        &[
            flag.as_str(),
            value_text.as_str(),
            "--task",
            "SCENARIO:many_turns Keep going.",
        ],
    ]
    .concat();
    let (code, v) = run_agent(&env, &mock, None, "budget", agent, &args);
    assert_eq!(code, 1, "{v:#}");
    assert_eq!(v["status"], "failed", "{v:#}");
    assert_eq!(v["failure_kind"], "budget", "{v:#}");
    let b = &v["budget"];
    assert_eq!(b["limit"], limit, "{v:#}");
    assert_eq!(b["value"], value, "{v:#}");
    let reached = b["reached"].as_u64().expect("the figure at the stop");
    // Crossed, and by no more than one turn's worth.
    assert!(
        reached > value && reached <= value + per_turn,
        "reached {reached}: {v:#}"
    );
    assert_eq!(v["signals_sent"][0], "SIGTERM", "{v:#}");
    let words = format!("stopped: budget {limit} {value} crossed at {reached}");
    let errors = v["output"]["errors"].to_string();
    assert!(errors.contains(&words), "{errors}");
    // The model was asked a few times, far from the scenario's 30 turns.
    let asked = mock
        .log_text()
        .lines()
        .filter(|l| l.contains("scenario=many_turns"))
        .count();
    assert!(asked <= 4, "{asked} model requests:\n{}", mock.log_text());
    env.assert_no_leftovers();
}

#[test]
fn pi_max_turns_stops_a_many_turn_task_within_a_turn() {
    budget_stops(Agent::Pi, "max_turns", 1, 1);
}
#[test]
fn pi_max_tokens_stops_a_many_turn_task_within_a_turn() {
    // The mock's usage: 148 tokens a call.
    budget_stops(Agent::Pi, "max_tokens", 200, 148);
}
#[test]
fn claude_max_tokens_stops_a_many_turn_task_within_a_turn() {
    budget_stops(Agent::Claude, "max_tokens", 200, 148);
}

/// Every string inside a JSON value, recursively.
fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(m) => m.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

/// Whether one of the model requests carries `text` in one of its strings, byte for byte.
fn requests_carry(bodies: &[String], text: &str) -> bool {
    bodies.iter().any(|b| {
        let Ok(v) = serde_json::from_str::<Value>(b) else {
            return false;
        };
        let mut all = Vec::new();
        strings(&v, &mut all);
        all.iter().any(|s| s.contains(text))
    })
}

/// A PATH without any directory that holds `binary`.
fn path_without(binary: &str) -> std::ffi::OsString {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let kept: Vec<PathBuf> = std::env::split_paths(&path)
        .filter(|d| !d.join(binary).exists())
        .collect();
    std::env::join_paths(kept).unwrap()
}

#[test]
fn a_missing_cli_is_refused_with_its_install_hint() {
    clis_bin();
    let env = TestEnv::new();
    for (cli, name, package) in [
        ("pi", "pi", "@mariozechner/pi-coding-agent"),
        ("claude", "Claude Code", "@anthropic-ai/claude-code"),
        ("codex", "Codex", "@openai/codex"),
    ] {
        let ran: crate::harness::Ran = env
            .cmd()
            .env("PATH", path_without(cli))
            .args([
                "run",
                "--json",
                "--run-id",
                cli,
                "--agent",
                cli,
                "--task",
                "SCENARIO:plain hi",
            ])
            .output()
            .unwrap()
            .into();
        assert_eq!(ran.code, 2, "{ran:?}");
        assert!(
            ran.stderr.contains(&format!("`{cli}`")),
            "the error names the binary: {}",
            ran.stderr
        );
        assert!(
            ran.stderr.contains("was not found on PATH"),
            "{}",
            ran.stderr
        );
        // One sentence, said once: not "install it with `install pi with `npm …``".
        assert!(
            ran.stderr.contains(&format!(
                "was not found on PATH; install {name} with `npm install -g {package}`"
            )) && !ran.stderr.contains("install it with"),
            "the hint reads right: {}",
            ran.stderr
        );
        assert!(
            ran.stderr.contains(&format!("npm install -g {package}")),
            "the error says how to install it: {}",
            ran.stderr
        );
        assert!(ran.stdout.is_empty(), "{ran:?}");
        assert!(!env.run_dir(cli).exists(), "nothing was created for {cli}");
    }
    assert!(!env.server_alive(), "no tmux server was started");
    env.assert_no_leftovers();
}

/// A stand-in for `cli` first on PATH: runs the real CLI, then stays alive (as a CLI does
/// when an MCP server or a grandchild keeps it from exiting).
fn lingering_wrapper(env: &TestEnv, cli: &str) -> PathBuf {
    let dir = env.root.path().join("wrapper");
    std::fs::create_dir_all(&dir).unwrap();
    let real = clis_bin().join(cli);
    let script = dir.join(cli);
    std::fs::write(
        &script,
        format!("#!/bin/sh\n'{}' \"$@\"\nsleep 300\n", real.display()),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

fn lingering(agent: Agent, scenario: &str) -> Value {
    let env = TestEnv::new();
    let mock = Mock::start(&env);
    let front = lingering_wrapper(&env, agent.name());
    let task = format!("SCENARIO:{scenario} Say hello.");
    let (code, v) = run_agent(
        &env,
        &mock,
        Some(&front),
        "linger",
        agent,
        &["--linger", "1s", "--task", &task],
    );
    assert_eq!(v["lingered"], true, "{v:#}");
    assert!(v["terminal_event"].is_string(), "{v:#}");
    assert_eq!(
        v["argv"][0],
        front.join(agent.name()).to_str().unwrap(),
        "the wrapper ran"
    );
    assert!(v["duration_ms"].as_u64().unwrap() < 60_000, "{v:#}");
    let ok = scenario == "plain";
    assert_eq!(code, if ok { 0 } else { 1 }, "{v:#}");
    env.assert_no_leftovers();
    v
}

#[test]
fn codex_lingering_after_its_answer_is_killed_and_completed() {
    let v = lingering(Agent::Codex, "plain");
    assert_eq!(v["status"], "completed", "{v:#}");
    assert_eq!(v["failure_kind"], Value::Null);
    assert_eq!(v["terminal_event"], "turn/completed");
    assert_eq!(v["output"]["final_text"], MOCK_TEXT);
}

#[test]
fn claude_lingering_after_a_model_error_is_killed_and_failed() {
    let v = lingering(Agent::Claude, "model_error");
    assert_eq!(v["status"], "failed", "{v:#}");
    assert_eq!(v["failure_kind"], "model", "{v:#}");
    assert_eq!(v["terminal_event"], "result");
}

#[test]
fn pi_takes_a_3mb_task_with_quotes_and_newlines() {
    let env = TestEnv::new();
    let mock = Mock::start(&env);
    let head = "SCENARIO:plain He said \"it's fine\" -- `ls` $HOME 'single' \\back\\slash\nsecond line\n\ttabbed";
    let mut task = String::from(head);
    let mut i = 0;
    while task.len() < 3 * 1024 * 1024 {
        task.push_str(&format!(
            "\nfiller line {i}: \"quoted\" and 'single' and ünïcödé"
        ));
        i += 1;
    }
    task.push_str("\nTHE END");
    let file = env.root.path().join("task.txt");
    std::fs::write(&file, &task).unwrap();
    let at = format!("@{}", file.display());
    let (code, v) = run_agent(&env, &mock, None, "big", Agent::Pi, &["--task", &at]);
    assert_completed(&env, "big", Agent::Pi, code, &v, MOCK_TEXT, 1);
    assert!(
        requests_carry(&mock.request_bodies(), &task),
        "the model did not get the whole task intact"
    );
    env.assert_no_leftovers();
}

fn quoted_inline_task(agent: Agent) {
    let env = TestEnv::new();
    let mock = Mock::start(&env);
    let task =
        "SCENARIO:plain it's \"quoted\", $HOME, `uname` && echo no\nsecond line\n--not-a-flag";
    let (code, v) = run_agent(&env, &mock, None, "quoted", agent, &["--task", task]);
    assert_completed(&env, "quoted", agent, code, &v, MOCK_TEXT, 1);
    assert!(
        requests_carry(&mock.request_bodies(), task),
        "the model did not get the task intact"
    );
    env.assert_no_leftovers();
}

#[test]
fn claude_takes_a_task_with_quotes_and_newlines() {
    quoted_inline_task(Agent::Claude);
}

#[test]
fn codex_takes_a_task_with_quotes_and_newlines() {
    quoted_inline_task(Agent::Codex);
}

/// A second run with `--resume <session_id>` of the first continues its conversation: the
/// model sees the first run's words in the second run's request.
fn resume(agent: Agent) {
    let env = TestEnv::new();
    let mock = Mock::start(&env);
    let (code, first) = run_agent(
        &env,
        &mock,
        None,
        "first",
        agent,
        &["--task", "SCENARIO:plain Remember BANANA-42."],
    );
    assert_completed(&env, "first", agent, code, &first, MOCK_TEXT, 1);
    let session = first["output"]["session_id"].as_str().unwrap().to_owned();
    let before = mock.request_bodies().len();
    let (code, second) = run_agent(
        &env,
        &mock,
        None,
        "second",
        agent,
        &["--resume", &session, "--task", "SCENARIO:plain Which word?"],
    );
    let bodies = mock.request_bodies();
    assert_eq!(
        code,
        0,
        "{second:#}\nstderr: {}",
        std::fs::read_to_string(env.attempt_dir("second", 1).join("stderr.log"))
            .unwrap_or_default()
    );
    assert_eq!(second["status"], "completed", "{second:#}");
    assert_eq!(second["output"]["final_text"], MOCK_TEXT);
    assert_eq!(
        second["output"]["session_id"],
        session.as_str(),
        "the same session goes on"
    );
    let new = &bodies[before..];
    assert!(
        requests_carry(new, "Which word?"),
        "the second task reached the model"
    );
    assert!(
        requests_carry(new, "Remember BANANA-42."),
        "the resumed request lacks the first conversation"
    );
    env.assert_no_leftovers();
}

#[test]
fn claude_resume_continues_the_session() {
    resume(Agent::Claude);
}

#[test]
fn codex_resume_continues_the_session() {
    resume(Agent::Codex);
}

#[test]
fn pi_resume_continues_the_session() {
    resume(Agent::Pi);
}

/// `retry RUN --resume --task …` makes attempt 2 of the same run, and attempt 2 continues the
/// session attempt 1 left: the model gets attempt 1's first message in attempt 2's request,
/// and the session id goes on.
fn retry_resume(agent: Agent) {
    let env = TestEnv::new();
    let mock = Mock::start(&env);
    let (code, first) = run_agent(
        &env,
        &mock,
        None,
        "conv",
        agent,
        &["--task", "SCENARIO:plain Remember BANANA-42."],
    );
    assert_completed(&env, "conv", agent, code, &first, MOCK_TEXT, 1);
    let session = first["output"]["session_id"].as_str().unwrap().to_owned();
    let before = mock.request_bodies().len();
    let child = mock
        .subpane(&env, None)
        .args([
            "retry",
            "conv",
            "--resume",
            "--json",
            "--task",
            "SCENARIO:plain follow up",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run subpane retry");
    let ran = wait_child_within(child, RUN_LIMIT, "a resumed retry did not finish");
    let second = ran.json();
    assert_valid_envelope(&second);
    let dir2 = env.attempt_dir("conv", 2);
    assert_eq!(second, env.read_json(&dir2.join("result.json")));
    assert_eq!(
        ran.code,
        0,
        "{second:#}\nstderr: {}",
        std::fs::read_to_string(dir2.join("stderr.log")).unwrap_or_default()
    );
    assert_eq!(second["status"], "completed", "{second:#}");
    assert_eq!(second["attempt"], 2);
    assert_eq!(second["resumed_from"], 1);
    assert_eq!(second["output"]["final_text"], MOCK_TEXT);
    assert_eq!(
        second["output"]["session_id"],
        session.as_str(),
        "attempt 2 goes on in attempt 1's session"
    );
    let spec = env.read_json(&dir2.join("spec.json"));
    assert_eq!(spec["task"]["resume_session"], session.as_str());
    assert_eq!(spec["resumed_from"], 1);
    let bodies = mock.request_bodies();
    let new = &bodies[before..];
    assert!(!new.is_empty(), "attempt 2 made no model request");
    assert!(
        requests_carry(new, "SCENARIO:plain follow up"),
        "the follow-up reached the model"
    );
    assert!(
        requests_carry(new, "Remember BANANA-42."),
        "attempt 2's request lacks attempt 1's conversation"
    );
    assert!(
        !requests_carry(&bodies[..before], "follow up"),
        "attempt 1 saw the follow-up"
    );
    assert_eq!(env.result("conv"), first, "attempt 1's envelope changed");
    env.assert_no_leftovers();
}

#[test]
fn pi_retry_resume_continues_attempt_1s_session() {
    retry_resume(Agent::Pi);
}

#[test]
fn claude_retry_resume_continues_attempt_1s_session() {
    retry_resume(Agent::Claude);
}

#[test]
fn codex_retry_resume_continues_attempt_1s_session() {
    retry_resume(Agent::Codex);
}

/// The pane of a kept session shows the answer, the tool call with its name and an argument
/// summary, and the usage/cost line at the end of the agent's output.
fn pane_shows_the_conversation(agent: Agent, usage_line: &str) {
    let env = TestEnv::new();
    let mock = Mock::start(&env);
    let args = [
        agent.tools_args(),
        &[
            "--keep-session",
            "--task",
            "SCENARIO:tool_write Write the file.",
        ],
    ]
    .concat();
    let (code, v) = run_agent(&env, &mock, None, "pane", agent, &args);
    assert_completed(&env, "pane", agent, code, &v, TOOL_DONE_TEXT, 2);
    let session = v["tmux"]["session"].as_str().unwrap().to_owned();
    // The worker writes its closing lines after result.json.
    let pane = env.capture_pane_until(&session, "session kept");
    let lines: Vec<&str> = pane
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.is_empty())
        .collect();
    let find = |what: &str| {
        lines
            .iter()
            .position(|l| l.contains(what))
            .unwrap_or_else(|| panic!("the pane lacks {what:?}:\n{pane}"))
    };
    let tool = lines
        .iter()
        .position(|l| {
            l.starts_with(&format!("▸ {} ", agent.shell_tool_in_pane()))
                && l.contains("echo hi > made_by_agent.txt")
        })
        .unwrap_or_else(|| panic!("the pane lacks the tool call with its command:\n{pane}"));
    let text = find(TOOL_DONE_TEXT);
    let usage = find(usage_line);
    assert!(tool < text && text < usage, "out of order:\n{pane}");
    // The usage line closes the agent's part; only subpane's own closing lines follow.
    assert!(
        lines[usage + 1].starts_with('─'),
        "the usage line is not the last agent line:\n{pane}"
    );
    assert!(lines[usage + 2].starts_with("✔ completed"), "{pane}");
    let w = env.read_json(&env.attempt_dir("pane", 1).join("worker.json"));
    crate::harness::wait_pid_gone(w["worker"]["pid"].as_i64().unwrap() as i32);
    let gc = env.sp(["gc", "--older-than", "0s"]);
    assert_eq!(gc.code, 0, "{gc:?}");
    env.assert_no_leftovers();
}

#[test]
fn pi_pane_shows_text_tool_call_and_cost() {
    pane_shows_the_conversation(
        Agent::Pi,
        "done · tokens in 240 out 16 cache r/w 40/0 · $0.0003 · ",
    );
}

#[test]
fn claude_pane_shows_text_tool_call_and_cost() {
    pane_shows_the_conversation(
        Agent::Claude,
        "done · tokens in 240 out 16 cache r/w 40/0 · $0.0013 · 2 turns · 1 tool call",
    );
}

#[test]
fn codex_pane_shows_text_tool_call_and_usage() {
    pane_shows_the_conversation(
        Agent::Codex,
        "done · tokens in 240 out 16 cache r/w 40/0 · 1 turn · 1 tool call",
    );
}
