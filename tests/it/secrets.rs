//! Issue 29, for the real agent CLIs: a secret value the agent's tool prints (its own API
//! key, or a value given with `--env`) is masked as `***` everywhere subpane writes or
//! answers. The mock's `tool_echo_env` scenario makes each CLI's shell tool print the
//! variable named by `ECHO_VAR:` raw and as base64 on stdout, and raw on stderr; the final
//! answer is `Tool said: ` and the tool's output. Then no form of the value (raw, JSON-escaped,
//! URL-encoded, base64 at each of the three alignments) may be in any file under subpane's
//! home (the agent's transcripts there included), in `subpane logs`, `status`, `ls`, in an
//! answer of `subpane mcp`, or in the pane. The same for any program (`command`) printing
//! each form, sandboxed and not.
//!
//! The values are long and distinctive (a real key is too), so a masker with a minimum
//! length has no excuse, and a hit is never a coincidence.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::Instant;

use serde_json::{Value, json};

use crate::agents::{Agent, run_agent_as};
use crate::harness::{DEADLINE, TestEnv, assert_valid_envelope};
use crate::mock::Mock;

/// What Claude Code and Codex get as their key in these tests instead of the mock's short one.
const CLAUDE_KEY: &str = "sk-ant-mock-Qx7Lp2Vz9Kd4Rt8WmN3b";
const CODEX_KEY: &str = "mock-key-Hj5Tq8Zr2Xw6Lc9Pv4Ns";
/// A value given with `--env` to pi (whose key is a literal in its models.json).
const PI_TOKEN: &str = "pi-token-Bf3Ky7Qm1Wd9Ze5Ur2Ta";
/// A value given with `--env` to Claude Code, with characters that JSON and URLs escape.
const CLAUDE_PASSWORD: &str = "pw/Gq4+Mx8\"Ls2\\Yn6=Vc1 Jh7&Rk3";

/// `subpane run --agent A` on the `tool_echo_env` scenario echoing `var`, with the pane kept
/// (to read it afterwards), `extra` arguments and the environment changed by `how`. Checks
/// that the run completed, that the tool ran (a tool call, `Tool said: ` in the answer);
/// returns the envelope.
fn echo_run(
    env: &TestEnv,
    mock: &Mock,
    run: &str,
    agent: Agent,
    var: &str,
    extra: &[&str],
    how: impl FnOnce(&mut std::process::Command),
) -> Value {
    let task = format!("SCENARIO:tool_echo_env ECHO_VAR:{var} Print the variable.");
    let mut args = vec!["--keep-session"];
    args.extend(agent.tools_args());
    args.extend(extra);
    args.extend(["--task", &task]);
    let (code, v) = run_agent_as(env, mock, None, run, agent, &args, how);
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(v["status"], "completed", "{v:#}");
    assert!(
        v["output"]["tool_calls"].as_u64().is_some_and(|n| n >= 1),
        "the shell tool was not called: {v:#}"
    );
    let text = v["output"]["final_text"].as_str().unwrap_or_default();
    assert!(
        text.starts_with("Tool said: "),
        "the mock never got the tool's result: {v:#}\n{}",
        mock.log_text()
    );
    v
}

/// After [`assert_nowhere`]: the tool printed the value (raw and base64 on stdout), masked.
fn assert_masked_answer(v: &Value) {
    let text = v["output"]["final_text"].as_str().unwrap_or_default();
    assert!(
        text.matches("***").count() >= 2,
        "the tool's output (the value raw and base64) is not masked in the answer: {text:?}"
    );
}

/// The forms of `value` that must not be anywhere: raw, JSON-escaped, URL-encoded, and its
/// base64 at each alignment (the characters that depend on the value's bytes alone).
fn forms(value: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut out = vec![("raw".to_owned(), value.to_vec())];
    let text = String::from_utf8_lossy(value);
    let json = serde_json::to_string(&text).unwrap();
    let json = json.as_bytes()[1..json.len() - 1].to_vec();
    if json != value {
        out.push(("JSON-escaped".to_owned(), json));
    }
    let url: String = value
        .iter()
        .map(|&b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    if url.as_bytes() != value {
        out.push(("URL-encoded".to_owned(), url.into_bytes()));
    }
    for k in 0..3usize {
        let mut padded = vec![0u8; k];
        padded.extend_from_slice(value);
        let enc = base64(&padded);
        // The first characters carry bits of the k bytes before; the last group's, when it is
        // partial, of the bytes after.
        let skip = [0, 2, 3][k];
        let end = padded.len() / 3 * 4;
        if end > skip + 8 {
            out.push((
                format!("base64 at offset {k}"),
                enc.as_bytes()[skip..end].to_vec(),
            ));
        }
    }
    out
}

/// Standard base64 (RFC 4648, with padding).
fn base64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// `subpane mcp`'s answers to `calls` (tool name, arguments), each as its whole JSON-RPC line
/// and as the texts of its content (decoded once more: a text is often a JSON document).
fn mcp_answers(env: &TestEnv, calls: &[(&str, Value)]) -> Vec<(String, Vec<u8>)> {
    let mut child = env
        .cmd()
        .arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start subpane mcp");
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut send = move |v: Value| {
        writeln!(stdin, "{v}").expect("write to subpane mcp");
        stdin.flush().unwrap();
    };
    let end = Instant::now() + DEADLINE;
    let answer = |id: u64| -> String {
        loop {
            let left = end.saturating_duration_since(Instant::now());
            let line = rx
                .recv_timeout(left)
                .unwrap_or_else(|e| panic!("subpane mcp gave no answer to request {id}: {e}"));
            let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
                panic!("subpane mcp wrote a line that is not JSON ({e}): {line}")
            });
            if v["id"] == id {
                return line;
            }
        }
    };
    send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "secrets-agents-test", "version": "0"}}}),
    );
    answer(0);
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let mut out = Vec::new();
    for (i, (tool, args)) in calls.iter().enumerate() {
        let id = i as u64 + 1;
        send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": tool, "arguments": args}}));
        let line = answer(id);
        let v: Value = serde_json::from_str(&line).unwrap();
        assert!(
            v["result"].is_object() && v["result"]["isError"] != true,
            "mcp {tool} {args} failed: {line}"
        );
        let what = format!("the mcp answer to {tool} {args}");
        for (n, part) in v["result"]["content"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            if let Some(t) = part["text"].as_str() {
                out.push((format!("{what}, its text {n}"), t.as_bytes().to_vec()));
            }
        }
        out.push((what, line.into_bytes()));
    }
    drop(send);
    crate::harness::wait_child_within_or_kill(&mut child, DEADLINE);
    out
}

/// No form of any of `values` (see [`forms`]) is in a file of subpane's home (the run's
/// directory, its attempts' among them), in
/// what `subpane logs`, `status`, `ls` and `subpane mcp` answer about `run`, or in the kept
/// pane of its attempt. The panic names every place and the form of the value it held.
fn assert_nowhere(env: &TestEnv, run: &str, values: &[&[u8]]) {
    // Everything the worker writes is written once it is gone (it renames its last records
    // after result.json: a walk before would race them).
    let w = env.read_json(&env.attempt_dir(run, 1).join("worker.json"));
    crate::harness::wait_pid_gone(w["worker"]["pid"].as_i64().unwrap() as i32);
    let mut places: Vec<(String, Vec<u8>)> = Vec::new();
    // pi's session transcripts too (pi writes them where subpane keeps them for `--resume`),
    // and a sandboxed agent's state directory: masked when the attempt ends.
    crate::harness::files_under(&env.home, &mut places);
    assert!(
        places
            .iter()
            .any(|(p, _)| p.ends_with("/attempts/1/events.jsonl")),
        "no events.jsonl under {}",
        env.home.display()
    );
    let cli: [&[&str]; 10] = [
        &["logs", run],
        &["logs", "--events", run],
        &["logs", "--pretty", run],
        &["logs", "--stdout", run],
        &["logs", "--stderr", run],
        &["logs", "--output", run],
        &["status", run, "--json"],
        &["status", run],
        &["ls", "--json"],
        &["ls"],
    ];
    // A command has no final text: `logs --output` refuses it.
    let command = env.result(run)["agent"] == "command";
    for args in cli {
        if command && args.contains(&"--output") {
            continue;
        }
        let r = env.sp(args);
        assert_eq!(r.code, 0, "subpane {}: {r:?}", args.join(" "));
        places.push((
            format!("`subpane {}` (stdout and stderr)", args.join(" ")),
            [r.stdout.as_bytes(), r.stderr.as_bytes()].concat(),
        ));
    }
    let mut calls = vec![
        ("status", json!({"run_id": run})),
        ("status", json!({"run_id": run, "detail": true})),
        ("wait", json!({"run_ids": [run], "detail": true})),
        ("list", json!({})),
    ];
    for file in ["events", "stderr", "output", "stdout"] {
        if command && file == "output" {
            continue;
        }
        calls.push((
            "logs",
            json!({"run_id": run, "file": file, "max_bytes": 48 * 1024}),
        ));
    }
    places.extend(mcp_answers(env, &calls));
    // The worker writes its closing lines after result.json.
    let session = env.result(run)["tmux"]["session"]
        .as_str()
        .expect("the envelope names the tmux session")
        .to_owned();
    let pane = env.capture_pane_until(&session, "session kept");
    places.push((format!("the pane of {session}"), pane.into_bytes()));

    let mut found = Vec::new();
    for (place, bytes) in &places {
        for value in values {
            let held: Vec<String> = forms(value)
                .into_iter()
                .filter(|(_, needle)| crate::harness::holds(bytes, needle))
                .map(|(form, _)| form)
                .collect();
            if !held.is_empty() {
                let shown = String::from_utf8_lossy(value);
                found.push(format!("{place} holds {shown:?}: {}", held.join(", ")));
            }
        }
    }
    assert!(
        found.is_empty(),
        "secret values were not masked, in {} places:\n  {}",
        found.len(),
        found.join("\n  ")
    );
}

/// Ends a test: the kept session goes with `gc`, and nothing of the attempt is left.
fn finish(env: &TestEnv, run: &str) {
    let w = env.read_json(&env.attempt_dir(run, 1).join("worker.json"));
    crate::harness::wait_pid_gone(w["worker"]["pid"].as_i64().unwrap() as i32);
    let gc = env.sp(["gc", "--older-than", "0s"]);
    assert_eq!(gc.code, 0, "{gc:?}");
    env.assert_no_leftovers();
}

/// One real CLI's case: the tool echoes `var`, given `extra` arguments and `vars` in the
/// environment of `subpane run`; none of `values` may be anywhere, and the answer shows
/// them masked.
fn echo_case(
    run: &str,
    agent: Agent,
    var: &str,
    extra: &[&str],
    vars: &[(&str, &str)],
    values: &[&str],
) {
    let env = TestEnv::new();
    let mock = Mock::start(&env);
    let v = echo_run(&env, &mock, run, agent, var, extra, |c| {
        c.envs(vars.iter().copied());
    });
    let values: Vec<&[u8]> = values.iter().map(|v| v.as_bytes()).collect();
    assert_nowhere(&env, run, &values);
    assert_masked_answer(&v);
    finish(&env, run);
}

/// pi's tool prints a token given with `--env`.
#[test]
fn pi_masks_an_env_token_its_tool_prints() {
    pi_echoes_a_token("pi-env", &[]);
}

/// pi's tool prints PI_ECHO_TOKEN, given with `--env` after `front`.
fn pi_echoes_a_token(run: &str, front: &[&str]) {
    let pass = format!("PI_ECHO_TOKEN={PI_TOKEN}");
    let extra = [front, &["--env", pass.as_str()]].concat();
    echo_case(run, Agent::Pi, "PI_ECHO_TOKEN", &extra, &[], &[PI_TOKEN]);
}

/// Claude Code's tool prints its own key, ANTHROPIC_API_KEY (inherited).
#[test]
fn claude_masks_its_api_key_its_tool_prints() {
    let key = [("ANTHROPIC_API_KEY", CLAUDE_KEY)];
    echo_case(
        "claude-key",
        Agent::Claude,
        "ANTHROPIC_API_KEY",
        &[],
        &key,
        &[CLAUDE_KEY],
    );
}

/// Claude Code's tool prints a password given with `--env`, one with characters that JSON
/// and URLs escape; its key is in the attempt's environment too and must not show either.
#[test]
fn claude_masks_an_env_password_its_tool_prints() {
    let pass = format!("DEPLOY_PASSWORD={CLAUDE_PASSWORD}");
    let extra = ["--env", pass.as_str()];
    let key = [("ANTHROPIC_API_KEY", CLAUDE_KEY)];
    let values = [CLAUDE_PASSWORD, CLAUDE_KEY];
    echo_case(
        "claude-env",
        Agent::Claude,
        "DEPLOY_PASSWORD",
        &extra,
        &key,
        &values,
    );
}

/// Sandboxed, Claude Code keeps its transcript in the attempt's own state directory: masked
/// there too; and pi's in the run's sessions.
#[test]
fn sandboxed_agents_transcripts_are_masked_too() {
    let sandbox = ["--sandbox", "--network", "allow:127.0.0.1"];
    let key = [("ANTHROPIC_API_KEY", CLAUDE_KEY)];
    let var = "ANTHROPIC_API_KEY";
    echo_case(
        "claude-sbx",
        Agent::Claude,
        var,
        &sandbox,
        &key,
        &[CLAUDE_KEY],
    );
    pi_echoes_a_token("pi-sbx", &sandbox);
}

/// Codex's tool prints its provider's key, MOCK_API_KEY (the config's `env_key`): codex
/// 0.169 hands its shell tool the whole environment, the key included.
#[test]
fn codex_masks_its_provider_key_its_tool_prints() {
    let key = [("MOCK_API_KEY", CODEX_KEY)];
    echo_case(
        "codex-key",
        Agent::Codex,
        "MOCK_API_KEY",
        &[],
        &key,
        &[CODEX_KEY],
    );
}

/// The forms searched for are the ones an encoder writes.
#[test]
fn forms_are_what_encoders_write() {
    assert_eq!(base64(b"ab\"c/d+e"), "YWIiYy9kK2U=");
    assert_eq!(base64(b"xy"), "eHk=");
    let f = forms(b"a-b\"c/d e0123456789abcdef");
    let get = |name: &str| {
        f.iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| String::from_utf8(v.clone()).unwrap())
            .unwrap_or_else(|| panic!("no {name}"))
    };
    assert_eq!(get("JSON-escaped"), "a-b\\\"c/d e0123456789abcdef");
    assert_eq!(get("URL-encoded"), "a-b%22c%2Fd%20e0123456789abcdef");
    // Each alignment's core is in the base64 of the value after 0, 1 or 2 other bytes.
    for k in 0..3 {
        let core = get(&format!("base64 at offset {k}"));
        let stream = [&b"XYZ"[..k], b"a-b\"c/d e0123456789abcdef", b"tail"].concat();
        assert!(base64(&stream).contains(&core), "offset {k}");
    }
}

// ---------------------------------------------------------------- any program (`command`)

/// A value with what JSON, URLs and shells escape.
const TOKEN: &str = "tok/Gq4+Mx8\"Ls2\\Yn6=Vc1 Jh7&Rk3";
/// A multi-line value (a key file's shape): each line is masked on its own too.
const KEY_FILE: &str =
    "-----BEGIN TEST KEY-----\nMIIEowIBAAKCAQEAz9Wq\nQx7Lp2Vz9Kd4Rt8WmN3b\n-----END TEST KEY-----";
/// Inherited from the caller: masked because its name looks secret.
const INHERITED: &str = "inherited-Zt5Wq2Lm8Xc4";
/// Given with `--env-plain`: shown as it is.
const PLAIN: &str = "visible-plain-value";

/// A program that prints each secret of its environment raw, split across two writes with a
/// pause between, as base64 at each alignment, URL-encoded (both ways), inside a JSON line,
/// and on stderr (raw, and split); the multi-line value whole. Its text is read from a file,
/// never the command line, so the values reach it by its environment only.
const PRINTER: &str = r#"
import base64, json, os, sys, time, urllib.parse

def out(s, f=sys.stdout):
    f.write(s)
    f.flush()

for name in ["SECRET_TOKEN", "KEY_FILE", "MY_SERVICE_TOKEN"]:
    v = os.environ[name]
    out(f"raw {v}\n")
    out(f"split {v[:7]}")
    time.sleep(0.2)
    out(f"{v[7:]} end\n")
    for prefix in ["", "u:", "us:"]:
        out("b64 " + base64.b64encode((prefix + v).encode()).decode() + "\n")
    out("url " + urllib.parse.quote(v, safe="") + "\n")
    out("path " + urllib.parse.quote(v) + "\n")
    out(json.dumps({"type": "said", "name": name, "text": f"the value is {v}!"}) + "\n")
    out(f"stderr {v}\n", sys.stderr)
    out(f"stderr split {v[:5]}", sys.stderr)
    time.sleep(0.2)
    out(f"{v[5:]} end\n", sys.stderr)
out("plain " + os.environ["MODE"] + "\n")
out("pin " + os.environ["PIN"] + "\n")
# The start of a value last, with no newline: held back until the end, then written.
out("last " + os.environ["SECRET_TOKEN"][:4], sys.stderr)
"#;

fn command_values() -> Vec<&'static [u8]> {
    let mut v: Vec<&[u8]> = vec![TOKEN.as_bytes(), KEY_FILE.as_bytes(), INHERITED.as_bytes()];
    v.extend(KEY_FILE.lines().filter(|l| l.len() >= 6).map(str::as_bytes));
    v
}

/// `subpane run --json --keep-session --run-id RUN EXTRA… -- PROGRAM…`, with
/// MY_SERVICE_TOKEN inherited; its envelope (which must be `completed`) and its stderr.
fn run_command(env: &TestEnv, run: &str, extra: &[&str], program: &[&str]) -> (Value, String) {
    let r = env
        .cmd()
        .env("MY_SERVICE_TOKEN", INHERITED)
        .args([
            "run",
            "--json",
            "--keep-session",
            "--timeout",
            "60s",
            "--run-id",
            run,
        ])
        .args(extra)
        .arg("--")
        .args(program)
        .output()
        .expect("run subpane");
    let stderr = String::from_utf8_lossy(&r.stderr).into_owned();
    let v: Value = serde_json::from_slice(&r.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{stderr}", String::from_utf8_lossy(&r.stdout)));
    assert_valid_envelope(&v);
    assert_eq!(r.status.code(), Some(0), "{v:#}\n{stderr}");
    assert_eq!(v["status"], "completed", "{v:#}");
    (v, stderr)
}

/// [`PRINTER`] run with the secrets (and a short and a plain value), `extra` before `--`.
fn run_printer(env: &TestEnv, run: &str, extra: &[&str]) -> (Value, String) {
    let script = env.work.join("printer.py");
    std::fs::write(&script, PRINTER).unwrap();
    let token = format!("SECRET_TOKEN={TOKEN}");
    let key = format!("KEY_FILE={KEY_FILE}");
    let plain = format!("MODE={PLAIN}");
    let mut args = vec![
        "--env",
        &token,
        "--env",
        &key,
        "--env",
        "PIN=1234",
        "--env-plain",
        &plain,
    ];
    args.extend(extra);
    run_command(env, run, &args, &["python3", script.to_str().unwrap()])
}

/// What every command run must show besides masking: the plain value as it is, each event a
/// JSON document, `***` where the values were, the names in the envelope, the short value's
/// warning.
fn assert_printed_masked(env: &TestEnv, run: &str, v: &Value, stderr: &str) {
    let dir = env.attempt_dir(run, 1);
    let stdout = std::fs::read_to_string(dir.join("stdout.log")).unwrap();
    assert!(
        stdout.contains(&format!("plain {PLAIN}")),
        "--env-plain is not masked: {stdout}"
    );
    assert!(
        stdout.contains("pin 1234"),
        "a short value is not masked: {stdout}"
    );
    assert!(
        stdout.contains("raw ***\n") && stdout.contains("split *** end\n"),
        "{stdout}"
    );
    let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    let said: Vec<Value> = events
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(said.len(), 3, "{events}");
    for e in &said {
        assert_eq!(e["text"], "the value is ***!", "{e}");
    }
    let err = std::fs::read_to_string(dir.join("stderr.log")).unwrap();
    assert_eq!(err.matches("stderr ***\n").count(), 3, "{err}");
    assert_eq!(err.matches("stderr split *** end\n").count(), 3, "{err}");
    assert!(
        err.ends_with("\nlast tok/"),
        "what was held back is written at the end: {err}"
    );
    assert_eq!(
        v["secrets"],
        json!({"masked": ["KEY_FILE", "MY_SERVICE_TOKEN", "SECRET_TOKEN"], "too_short": ["PIN"]}),
        "{v:#}"
    );
    assert!(
        stderr.contains("PIN") && stderr.contains("not masked"),
        "no warning of the short value: {stderr}"
    );
}

#[test]
fn a_programs_secrets_are_masked_in_every_form_and_place() {
    let env = TestEnv::new();
    let (v, stderr) = run_printer(&env, "printer", &[]);
    assert_printed_masked(&env, "printer", &v, &stderr);
    assert_nowhere(&env, "printer", &command_values());
    finish(&env, "printer");
}

#[test]
fn a_sandboxed_programs_secrets_are_masked_and_a_refused_url_too() {
    let env = TestEnv::new();
    // The proxy refuses a URL with user info, and says why with the URL in its reason.
    let script = env.work.join("url.py");
    std::fs::write(
        &script,
        r#"
import os, socket, urllib.parse
proxy = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])
for target in ["http://me:" + urllib.parse.quote(os.environ["SECRET_TOKEN"], safe="") + "@example.com/",
               "ftp://example.com/?key=" + os.environ["MY_SERVICE_TOKEN"]]:
    s = socket.create_connection((proxy.hostname, proxy.port))
    s.sendall(f"GET {target} HTTP/1.1\r\nHost: example.com\r\n\r\n".encode())
    print(s.recv(200).split(b"\r\n")[0].decode())
    s.close()
"#,
    )
    .unwrap();
    let token = format!("SECRET_TOKEN={TOKEN}");
    let sandbox = ["--sandbox", "--network", "allow:example.com", "--env-pass"];
    let mut extra = sandbox.to_vec();
    extra.extend(["MY_SERVICE_TOKEN", "--env", &token]);
    run_command(&env, "urls", &extra, &["python3", script.to_str().unwrap()]);
    let log = std::fs::read_to_string(env.attempt_dir("urls", 1).join("network.jsonl")).unwrap();
    let entries: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(entries.len(), 2, "{log}");
    for e in &entries {
        assert_eq!(e["decision"], "deny", "{e}");
        assert!(e["reason"].as_str().unwrap().contains("***"), "{e}");
    }
    assert_nowhere(&env, "urls", &[TOKEN.as_bytes(), INHERITED.as_bytes()]);
    finish(&env, "urls");

    // The printer in the sandbox: the passed variable is masked for its name.
    let (v, stderr) = run_printer(
        &env,
        "sandboxed",
        &["--sandbox", "--env-pass", "MY_SERVICE_TOKEN"],
    );
    assert_printed_masked(&env, "sandboxed", &v, &stderr);
    assert_nowhere(&env, "sandboxed", &command_values());
    finish(&env, "sandboxed");
}
