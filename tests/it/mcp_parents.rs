//! End to end with a real agent CLI as the parent: Claude Code and Codex (at the versions
//! pinned in `scripts/install-agent-clis`) get `subpane mcp` as an MCP server, and the mock
//! model (`SCENARIO:mcp_call`) has them call its `run` tool. The subagent is a command, or pi
//! against the same mock.
//!
//! ```text
//! test ──► claude -p / codex exec ──HTTP──► server.py: "call …run {MCP_ARGS}", later
//!               │ stdio (MCP)                          "Subagent said: <the tool result>"
//!               ▼
//!           subpane mcp ──► pane: worker ──► sh -c … | pi ──HTTP──► server.py (plain)
//!   ▲ the parent's final answer, result.json of the child run, the mock's request log
//! ```
//!
//! Common pitfalls:
//! * The MCP server gets its environment from the parent CLI's MCP config, and the child's
//!   program gets the MCP server's. Claude Code passes its whole environment plus the
//!   server's `env`; Codex passes only a few variables (`HOME`, `PATH`, `LANG`, `SHELL`,
//!   `TERM`, certificate paths, …) plus `[mcp_servers.NAME.env]`: so everything the server
//!   and the child need (subpane's home and socket, `PATH`, the mock's settings) goes in
//!   `env`, for both.
//! * Claude Code 2.1.328 defers MCP tools: the first request lists them by name only (in a
//!   system text) beside a `ToolSearch` tool; the mock calls `ToolSearch` with
//!   `select:mcp__subpane__run` first, then the tool.
//! * Codex 0.169.0 offers MCP tools as a Responses `namespace` tool (`mcp__subpane`, holding
//!   `run`, `status`, …), called as `function_call` with `namespace` and `name`; `codex exec`
//!   reports the call as an `mcp_tool_call` item.
//! * Both CLIs give the model a tool result's `structuredContent` (as JSON) in place of its
//!   text blocks when it has one (codex after `Wall time: …\nOutput:\n`): what a parent
//!   must read (a command's output: the envelope's `tails`) has to be in the structured
//!   content. The parent's answer here is what its model really read.
//! * The child's task (with its own `SCENARIO:` marker) travels in the parent's tool call and
//!   its output in the tool result: the mock reads markers in user text only.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{BIN, DEADLINE, TestEnv, pid_alive, wait_child_within, wait_until};
use crate::mock::{Mock, clis_bin, path_with_clis};

/// Upper bound for one parent CLI run; the child's own `timeout` is shorter, so a hung child
/// shows up as a `timeout` envelope first.
const PARENT_LIMIT: Duration = Duration::from_secs(75);
const CHILD_TIMEOUT: &str = "45s";

const MOCK_TEXT: &str = "Hello from the mock model.";

#[derive(Clone, Copy, Debug)]
enum Parent {
    Claude,
    Codex,
}

impl Parent {
    fn name(self) -> &'static str {
        match self {
            Parent::Claude => "claude",
            Parent::Codex => "codex",
        }
    }
}

/// The environment of `subpane mcp`: this test's subpane home and tmux socket, PATH with the
/// pinned CLIs (for an agent child), and the mock's settings (inherited by the child).
fn server_env(env: &TestEnv, mock: &Mock) -> BTreeMap<String, String> {
    let mut m = mock.env.clone();
    let s = |p: &Path| p.to_str().expect("a UTF-8 path").to_owned();
    m.insert("SUBPANE_HOME".into(), s(&env.home));
    m.insert("SUBPANE_TMUX_SOCKET".into(), s(&env.socket));
    m.insert(
        "PATH".into(),
        path_with_clis(None).into_string().expect("a UTF-8 PATH"),
    );
    m.insert("NO_COLOR".into(), "1".into());
    m
}

/// The parent CLI, run in the work directory with the mock's environment. Its environment
/// also names this test's tmux socket, so a server that missed its `env` still never
/// touches the default tmux server (its runs then land outside this test's home, and the
/// test fails on that).
fn parent_command(env: &TestEnv, mock: &Mock, parent: Parent) -> Command {
    let mut c = Command::new(clis_bin().join(parent.name()));
    c.envs(&mock.env)
        .env("PATH", path_with_clis(None))
        .env("SUBPANE_TMUX_SOCKET", &env.socket)
        .env_remove("SUBPANE_HOME")
        .env_remove("TMUX")
        .env_remove("TMUX_PANE")
        .current_dir(&env.work)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Standard base64 with padding (the mock decodes `MCP_ARGS:` with it).
fn base64(text: impl AsRef<[u8]>) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// A TOML basic string (JSON's escapes are TOML's).
fn toml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// `claude -p` with subpane's MCP server (and no other) and its `run` tool pre-approved.
fn claude(env: &TestEnv, mock: &Mock, task: &str) -> Command {
    let config = json!({"mcpServers": {"subpane": {
        "command": BIN,
        "args": ["mcp"],
        "env": server_env(env, mock),
    }}});
    let file = env.root.path().join("mcp-config.json");
    std::fs::write(&file, serde_json::to_vec_pretty(&config).unwrap()).unwrap();
    let mut c = parent_command(env, mock, Parent::Claude);
    c.args([
        "-p",
        "--output-format=stream-json",
        "--verbose",
        "--mcp-config",
    ])
    .arg(&file)
    .args([
        "--strict-mcp-config",
        // In -p mode nobody can approve a tool call: pre-approve the one the model makes.
        "--allowedTools=mcp__subpane__run",
        "--",
        task,
    ]);
    c
}

/// `codex exec` with subpane's MCP server added to the mock's `$CODEX_HOME/config.toml`.
fn codex(env: &TestEnv, mock: &Mock, task: &str) -> Command {
    let config = Path::new(&mock.env["CODEX_HOME"]).join("config.toml");
    let mut toml = format!(
        "\n[mcp_servers.subpane]\n\
         command = {}\n\
         args = [\"mcp\"]\n\
         # codex exec fails at once if the server does not start, instead of going on without it.\n\
         required = true\n\
         startup_timeout_sec = 30\n\
         # the default (60 s) is shorter than a child run may take\n\
         tool_timeout_sec = 120\n\
         # with approval_policy = \"never\" (the mock's) nothing asks; say so for MCP tools too\n\
         default_tools_approval_mode = \"approve\"\n\
         \n[mcp_servers.subpane.env]\n",
        toml_str(BIN)
    );
    for (k, v) in server_env(env, mock) {
        toml.push_str(&format!("{k} = {}\n", toml_str(&v)));
    }
    std::fs::OpenOptions::new()
        .append(true)
        .open(&config)
        .and_then(|mut f| f.write_all(toml.as_bytes()))
        .unwrap_or_else(|e| panic!("append to {}: {e}", config.display()));
    let mut c = parent_command(env, mock, Parent::Codex);
    c.args(["exec", "--json", "--skip-git-repo-check", "--", task]);
    c
}

/// Processes of this test outside its attempts: anything whose environment puts subpane's
/// home or a CLI's state directory in this test's temp dir (the MCP server, a CLI's helper).
/// The test's tmux server is not one: it stays until the `TestEnv` is dropped.
fn strays(env: &TestEnv) -> Vec<i32> {
    let root = env.root.path().as_os_str().as_encoded_bytes().to_vec();
    let socket = env.socket.as_os_str().as_encoded_bytes().to_vec();
    let me = std::process::id() as i32;
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if pid == me || !pid_alive(pid) {
            continue;
        }
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let tmux = std::fs::read_link(format!("/proc/{pid}/exe"))
            .is_ok_and(|e| e.file_name().is_some_and(|n| n == "tmux"));
        if tmux
            && cmdline
                .windows(socket.len())
                .any(|w| w == socket.as_slice())
        {
            continue;
        }
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let ours = environ.split(|b| *b == 0).any(|kv| {
            ["SUBPANE_HOME=", "CODEX_HOME=", "CLAUDE_CONFIG_DIR="]
                .iter()
                .any(|k| kv.starts_with(k.as_bytes()) && kv[k.len()..].starts_with(&root))
        });
        if ours {
            out.push(pid);
        }
    }
    out
}

/// `pid: command line` of each process, for a failure message.
fn describe(pids: &[i32]) -> String {
    pids.iter()
        .map(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmd: Vec<String> = cmd
                .split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            format!("{pid}: {}", cmd.join(" "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Kills what [`strays`] finds when dropped (a failed test leaves nothing either).
struct KillStrays<'a>(&'a TestEnv);

impl Drop for KillStrays<'_> {
    fn drop(&mut self) {
        for pid in strays(self.0) {
            // SAFETY: plain kill(2) on one pid of this test.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

/// What the parent answered in the end, from its stdout: claude's `result` line, codex's
/// last `agent_message`. Also checks that the parent reported a call of subpane's `run`.
fn final_answer(parent: Parent, stdout: &str) -> String {
    let lines: Vec<Value> = stdout
        .lines()
        .filter(|l| l.trim_start().starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    match parent {
        Parent::Claude => {
            let init = lines
                .iter()
                .find(|e| e["type"] == "system" && e["subtype"] == "init")
                .unwrap_or_else(|| panic!("no init line:\n{stdout}"));
            let servers: Vec<(&Value, &Value)> = init["mcp_servers"]
                .as_array()
                .map(|a| a.iter().map(|s| (&s["name"], &s["status"])).collect())
                .unwrap_or_default();
            assert_eq!(
                servers,
                [(&json!("subpane"), &json!("connected"))],
                "`{BIN} mcp` did not start as claude's only MCP server: {}",
                init["mcp_servers"]
            );
            let called = lines.iter().any(|e| {
                e["type"] == "assistant"
                    && e["message"]["content"].as_array().is_some_and(|c| {
                        c.iter()
                            .any(|b| b["type"] == "tool_use" && b["name"] == "mcp__subpane__run")
                    })
            });
            assert!(called, "claude never called mcp__subpane__run:\n{stdout}");
            let result = lines
                .iter()
                .rev()
                .find(|e| e["type"] == "result")
                .unwrap_or_else(|| panic!("no result line:\n{stdout}"));
            assert_eq!(result["is_error"], false, "{result:#}");
            assert_eq!(
                result["permission_denials"],
                json!([]),
                "a tool was refused"
            );
            result["result"].as_str().unwrap_or_default().to_owned()
        }
        Parent::Codex => {
            let call = lines
                .iter()
                .find(|e| e["type"] == "item.completed" && e["item"]["type"] == "mcp_tool_call")
                .unwrap_or_else(|| panic!("codex reported no MCP tool call:\n{stdout}"));
            assert_eq!(call["item"]["server"], "subpane", "{call:#}");
            assert_eq!(call["item"]["tool"], "run", "{call:#}");
            assert_eq!(call["item"]["status"], "completed", "{call:#}");
            lines
                .iter()
                .rev()
                .find(|e| e["type"] == "item.completed" && e["item"]["type"] == "agent_message")
                .and_then(|e| e["item"]["text"].as_str())
                .unwrap_or_else(|| panic!("no agent_message:\n{stdout}"))
                .to_owned()
        }
    }
}

/// Runs `parent` with a task that makes it call subpane's `run` with `args`; returns the
/// parent's final answer after checking how it ended and that nothing of it is left.
fn parent_calls_run(env: &TestEnv, mock: &Mock, parent: Parent, args: &Value) -> String {
    let b64 = base64(args.to_string());
    let task = format!(
        "SCENARIO:mcp_call MCP_TOOL:run MCP_ARGS:{b64} Run the subagent with subpane's run tool."
    );
    let mut c = match parent {
        Parent::Claude => claude(env, mock, &task),
        Parent::Codex => codex(env, mock, &task),
    };
    let started = Instant::now();
    let child = c
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", parent.name()));
    let ran = wait_child_within(
        child,
        PARENT_LIMIT,
        "a parent CLI calling subpane's MCP run tool did not finish",
    );
    eprintln!(
        "{} exited {} after {:?}",
        parent.name(),
        ran.code,
        started.elapsed()
    );
    assert_eq!(
        ran.code,
        0,
        "{} failed\nstdout:\n{}\nstderr:\n{}\nmock log:\n{}",
        parent.name(),
        ran.stdout,
        ran.stderr,
        mock.log_text()
    );
    let answer = final_answer(parent, &ran.stdout);
    eprintln!("{} answered: {answer}", parent.name());
    assert!(
        answer.starts_with("Subagent said: "),
        "the mock never got the tool's result: {answer}\nmock log:\n{}",
        mock.log_text()
    );
    // The parent took its MCP server with it.
    let end = Instant::now() + DEADLINE;
    loop {
        let left = strays(env);
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < end,
            "processes outlived {}: {}",
            parent.name(),
            describe(&left)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    answer
}

/// The child run's envelope, checked: completed, attempt 1, recorded in this test's home.
fn child_envelope(env: &TestEnv, run: &str) -> Value {
    let path = env.attempt_dir(run, 1).join("result.json");
    assert!(
        path.exists(),
        "no {}: the MCP server did not run `{run}` with this test's SUBPANE_HOME",
        path.display()
    );
    let v = env.result(run);
    crate::harness::assert_valid_envelope(&v);
    assert_eq!(v["run_id"], run);
    assert_eq!(v["status"], "completed", "{v:#}");
    assert_eq!(v["exit_code"], 0, "{v:#}");
    v
}

fn command_child(parent: Parent) {
    let env = TestEnv::new();
    let _strays = KillStrays(&env);
    let mock = Mock::start(&env);
    let args = json!({
        "argv": ["sh", "-c", "echo sub-$((6*7))"],
        "run_id": "child-cmd",
        "timeout": CHILD_TIMEOUT,
        "wait": true,
    });
    let answer = parent_calls_run(&env, &mock, parent, &args);
    let v = child_envelope(&env, "child-cmd");
    let argv = v["argv"].as_array().unwrap();
    assert!(argv[0].as_str().unwrap().ends_with("sh"), "{v:#}");
    assert_eq!(
        argv[1..],
        [json!("-c"), json!("echo sub-$((6*7))")],
        "{v:#}"
    );
    // The parent runs in the work directory, its MCP server too, and so the child.
    assert_eq!(v["cwd"], env.work.to_str().unwrap(), "{v:#}");
    let stdout = std::fs::read_to_string(env.attempt_dir("child-cmd", 1).join("stdout.log"))
        .unwrap_or_default();
    assert!(stdout.contains("sub-42"), "the child's stdout: {stdout:?}");
    for want in ["child-cmd", "completed", "sub-42"] {
        let why = if answer.contains(r#""schema":"subpane.result/v1""#) {
            "\n(the parent's model read the result's structuredContent, the envelope, which \
             holds no stdout: Claude Code and Codex pass structuredContent instead of the \
             text blocks whenever a result has one)"
        } else {
            ""
        };
        assert!(
            answer.contains(want),
            "{}'s answer lacks {want:?}: {answer}{why}",
            parent.name()
        );
    }
    env.assert_no_leftovers();
}

fn pi_child(parent: Parent) {
    let env = TestEnv::new();
    let _strays = KillStrays(&env);
    let mock = Mock::start(&env);
    let args = json!({
        "agent": "pi",
        "task": "SCENARIO:plain hello",
        "run_id": "child-pi",
        "timeout": CHILD_TIMEOUT,
        "wait": true,
    });
    let answer = parent_calls_run(&env, &mock, parent, &args);
    let v = child_envelope(&env, "child-pi");
    assert_eq!(v["agent"], "pi", "{v:#}");
    assert_eq!(v["output"]["final_text"], MOCK_TEXT, "{v:#}");
    assert!(
        answer.contains(MOCK_TEXT),
        "{}'s answer lacks pi's answer: {answer}",
        parent.name()
    );
    assert!(
        answer.contains("child-pi"),
        "{}'s answer lacks the run id: {answer}",
        parent.name()
    );
    // pi asked the same mock, with its own task's scenario.
    let log = mock.log_text();
    assert!(
        log.contains("POST /v1/chat/completions api=chat scenario=plain"),
        "pi never reached the mock:\n{log}"
    );
    env.assert_no_leftovers();
}

#[test]
fn claude_parent_runs_a_command_through_mcp() {
    command_child(Parent::Claude);
}

#[test]
fn codex_parent_runs_a_command_through_mcp() {
    command_child(Parent::Codex);
}

#[test]
fn claude_parent_runs_pi_through_mcp() {
    pi_child(Parent::Claude);
}

#[test]
fn codex_parent_runs_pi_through_mcp() {
    pi_child(Parent::Codex);
}

/// Without a tool of that name on offer, the mock answers with the tools it saw, so a
/// misconfigured parent fails with a reason (checked here with Codex and no MCP server).
#[test]
fn mock_names_the_offered_tools_when_none_matches() {
    let env = TestEnv::new();
    let _strays = KillStrays(&env);
    let mock = Mock::start(&env);
    let b64 = base64(r#"{"run_id":"x"}"#);
    let task = format!("SCENARIO:mcp_call MCP_TOOL:run MCP_ARGS:{b64}");
    let mut c = parent_command(&env, &mock, Parent::Codex);
    c.args(["exec", "--json", "--skip-git-repo-check", "--", &task]);
    let ran = wait_child_within(c.spawn().unwrap(), PARENT_LIMIT, "codex did not finish");
    assert_eq!(ran.code, 0, "{ran:?}");
    let text = ran
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "item.completed" && e["item"]["type"] == "agent_message")
        .filter_map(|e| e["item"]["text"].as_str().map(str::to_owned))
        .next_back()
        .unwrap_or_else(|| panic!("no agent_message: {ran:?}"));
    assert!(
        text.starts_with("mock mcp_call: no tool ending in 'run' was offered; tools: ["),
        "{text}"
    );
    assert!(
        text.contains("exec_command"),
        "the offered tools are named: {text}"
    );
    wait_until("codex's processes to be gone", || {
        strays(&env).is_empty().then_some(())
    });
}

#[test]
fn base64_encodes_with_padding() {
    assert_eq!(base64("Man"), "TWFu");
    assert_eq!(base64("Ma"), "TWE=");
    assert_eq!(base64("M"), "TQ==");
    assert_eq!(base64(""), "");
}
