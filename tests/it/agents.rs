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

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::{TestEnv, assert_valid_envelope, wait_child_within, wait_for_text, wait_until};

/// Upper bound for one `subpane run` of a real CLI; the run's own `--timeout` is shorter, so
/// a hang shows up as a `timeout` envelope first.
const RUN_LIMIT: Duration = Duration::from_secs(90);
const RUN_TIMEOUT: &str = "60s";

const MOCK_TEXT: &str = "Hello from the mock model.";
const TOOL_DONE_TEXT: &str = "I wrote made_by_agent.txt.";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Agent {
    Pi,
    Claude,
    Codex,
}

impl Agent {
    fn name(self) -> &'static str {
        match self {
            Agent::Pi => "pi",
            Agent::Claude => "claude",
            Agent::Codex => "codex",
        }
    }
    /// The CLI's shell tool, as its `--tools` takes it.
    fn shell_tool(self) -> &'static str {
        match self {
            Agent::Pi => "bash",
            Agent::Claude => "Bash",
            Agent::Codex => "exec_command",
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
            Agent::Pi => "15s",
            _ => "8s",
        }
    }
}

/// `<repo>/.agent-clis/node_modules/.bin`, failing the test when the CLIs are not installed.
fn clis_bin() -> PathBuf {
    let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join(".agent-clis/node_modules/.bin");
    for cli in ["pi", "claude", "codex"] {
        assert!(
            bin.join(cli).exists(),
            "the agent CLIs are not installed ({} is missing): run scripts/install-agent-clis \
             (scripts/test does it for CI)",
            bin.join(cli).display()
        );
    }
    bin
}

/// A mock model server of this test, killed on drop.
struct Mock {
    child: Child,
    dir: PathBuf,
    log: PathBuf,
    dumps: PathBuf,
    /// The environment that points the CLIs at this server (from agent_env.py).
    env: BTreeMap<String, String>,
}

impl Mock {
    fn start(env: &TestEnv) -> Mock {
        let dir = env.root.path().join("mock");
        let dumps = dir.join("requests");
        std::fs::create_dir_all(&dumps).unwrap();
        let port_file = dir.join("port");
        let log = dir.join("requests.log");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mock_model");
        let child = Command::new("python3")
            .arg(script.join("server.py"))
            .arg("--port-file")
            .arg(&port_file)
            .arg("--log")
            .arg(&log)
            .arg("--dump-dir")
            .arg(&dumps)
            .arg("--max-seconds")
            .arg("300")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start python3 tests/mock_model/server.py");
        let mut mock = Mock { child, dir: dir.clone(), log, dumps, env: BTreeMap::new() };
        let port: u16 = wait_until("the mock model server's port file", || {
            std::fs::read_to_string(&port_file).ok().and_then(|s| s.trim().parse().ok())
        });
        let out = Command::new("python3")
            .arg(script.join("agent_env.py"))
            .arg(dir.join("scratch"))
            .arg(port.to_string())
            .args(["--format", "json"])
            .output()
            .expect("run agent_env.py");
        assert!(out.status.success(), "agent_env.py failed: {}", String::from_utf8_lossy(&out.stderr));
        mock.env = serde_json::from_slice(&out.stdout).expect("agent_env.py prints a JSON object");
        mock
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Bodies of the model requests so far (`/v1/...` posts), oldest first.
    fn request_bodies(&self) -> Vec<String> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&self.dumps).unwrap().flatten().map(|e| e.path()).collect();
        files.sort();
        files.iter().map(|p| std::fs::read_to_string(p).unwrap_or_default()).collect()
    }

    /// A command for `subpane` whose environment points the CLIs at this server, with
    /// `front` (if any) and the pinned CLIs first on PATH.
    fn subpane(&self, env: &TestEnv, front: Option<&Path>) -> Command {
        let mut c = env.cmd();
        c.envs(&self.env);
        let mut paths: Vec<PathBuf> = front.into_iter().map(Path::to_path_buf).collect();
        paths.push(clis_bin());
        paths.extend(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()));
        c.env("PATH", std::env::join_paths(paths).unwrap());
        c
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = &self.dir;
    }
}

/// `subpane run --json --timeout 60s --run-id RUN --cwd WORK --agent A <extra…>`; returns
/// the run's exit code and its (schema-checked) envelope.
fn run_agent(env: &TestEnv, mock: &Mock, front: Option<&Path>, run: &str, agent: Agent, extra: &[&str]) -> (i32, Value) {
    let work = env.work.to_str().unwrap();
    let mut c = mock.subpane(env, front);
    c.args(["run", "--json", "--timeout", RUN_TIMEOUT, "--run-id", run, "--cwd", work, "--agent", agent.name()]);
    c.args(extra);
    let started = Instant::now();
    let child = c.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("run subpane");
    let ran = wait_child_within(child, RUN_LIMIT, "a real agent CLI against the mock model did not finish");
    eprintln!("{run}: {} exited {} after {:?}", agent.name(), ran.code, started.elapsed());
    let v = ran.json();
    assert_valid_envelope(&v);
    assert_eq!(v, env.result(run), "the printed envelope is result.json");
    assert_eq!(v["agent"], agent.name());
    (ran.code, v)
}

fn events(env: &TestEnv, run: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(env.attempt_dir(run, 1).join("events.jsonl")).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("events.jsonl line is not JSON ({e}): {l}")))
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
    assert_eq!(v["filter"]["kept_lines"].as_u64(), Some(evs.len() as u64), "{}", v["filter"]);
    if agent.streams_deltas() {
        assert!(v["filter"]["dropped_lines"].as_u64().unwrap() > 0, "nothing was dropped: {}", v["filter"]);
        assert!(v["filter"]["dropped_bytes"].as_u64().unwrap() > 0, "{}", v["filter"]);
    }
}

/// A clean answer: completed, the text in the envelope, output.txt and `logs --output`,
/// a session id, usage of `calls` model calls, a cost (pi and claude), turns.
fn assert_completed(env: &TestEnv, run: &str, agent: Agent, code: i32, v: &Value, text: &str, calls: u64) {
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
    assert!(out["session_id"].as_str().is_some_and(|s| !s.is_empty()), "{out:#}");
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
    assert_eq!(out["errors"], serde_json::json!([]));
    assert_eq!(out["context_length_exceeded"], false);
    assert_no_deltas(env, run, agent, v);
}

fn plain(agent: Agent) {
    let env = TestEnv::new();
    let mock = Mock::start(&env);
    let (code, v) = run_agent(&env, &mock, None, "plain", agent, &["--task", "SCENARIO:plain Say hello."]);
    assert_completed(&env, "plain", agent, code, &v, MOCK_TEXT, 1);
    assert_eq!(v["output"]["tool_calls"], 0);
    assert!(mock.log_text().contains("scenario=plain"), "{}", mock.log_text());
    env.assert_no_leftovers();
}

fn tool_write(agent: Agent) {
    let env = TestEnv::new();
    let mock = Mock::start(&env);
    let target = env.work.join("made_by_agent.txt");
    assert!(!target.exists());
    let (code, v) = run_agent(
        &env,
        &mock,
        None,
        "tool",
        agent,
        &["--tools", agent.shell_tool(), "--task", "SCENARIO:tool_write Write the file."],
    );
    assert_completed(&env, "tool", agent, code, &v, TOOL_DONE_TEXT, 2);
    assert!(v["output"]["tool_calls"].as_u64().is_some_and(|n| n >= 1), "{v:#}");
    assert_eq!(std::fs::read_to_string(&target).expect("the agent's tool wrote the file in --cwd"), "hi\n");
    env.assert_no_leftovers();
}

fn model_error(agent: Agent) {
    let env = TestEnv::new();
    let mock = Mock::start(&env);
    let (code, v) = run_agent(&env, &mock, None, "err", agent, &["--task", "SCENARIO:model_error Say hello."]);
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
            let result = evs.iter().rev().find(|e| e["type"] == "result").expect("a result event");
            assert_eq!(result["is_error"], true, "{result}");
        }
        Agent::Codex => assert!(evs.iter().any(|e| e["type"] == "turn.failed"), "no turn.failed"),
    }
    assert!(v["terminal_event"].is_string(), "{v:#}");
    assert!(mock.log_text().contains("scenario=model_error"));
    env.assert_no_leftovers();
}

fn context_overflow(agent: Agent) {
    let env = TestEnv::new();
    let mock = Mock::start(&env);
    let (code, v) = run_agent(&env, &mock, None, "overflow", agent, &["--task", "SCENARIO:context_overflow Say hello."]);
    assert_eq!(code, 1, "{v:#}");
    assert_eq!(v["status"], "failed", "{v:#}");
    assert_eq!(v["failure_kind"], "model", "{v:#}");
    assert_eq!(v["output"]["context_length_exceeded"], true, "{v:#}");
    assert!(!v["output"]["errors"].as_array().unwrap().is_empty(), "{v:#}");
    assert!(mock.log_text().contains("scenario=context_overflow"));
    env.assert_no_leftovers();
}

fn stall(agent: Agent) {
    let env = TestEnv::new();
    let mock = Mock::start(&env);
    let idle = agent.stall_idle_timeout();
    let (code, v) =
        run_agent(&env, &mock, None, "stall", agent, &["--idle-timeout", idle, "--task", "SCENARIO:stall Say hello."]);
    assert_eq!(code, 124, "{v:#}");
    assert_eq!(v["status"], "failed", "{v:#}");
    assert_eq!(v["failure_kind"], "idle_timeout", "{v:#}");
    assert_eq!(v["terminal_event"], Value::Null);
    assert_eq!(v["output"]["final_text"], Value::Null);
    // The CLI reached the model and was stopped while the stream hung, not before it started.
    assert!(mock.log_text().contains("scenario=stall"), "the CLI never asked the model:\n{}", mock.log_text());
    assert!(v["output"]["session_id"].is_string(), "the CLI started its session before the stall: {v:#}");
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
