//! Steering: `subpane send`, the pane's input line and `--keep-open`, with a command's stdin
//! pipe and with the pinned agent CLIs against the mock model (its `steer` scenario sleeps
//! in the CLI's shell tool until a message of the conversation holds `STEER:<word>`, then
//! answers `Heard STEER:<word>`).

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::agents::Agent;
use crate::harness::{TestEnv, wait_for_text, wait_until};
use crate::mock::Mock;
use crate::terminal::Terminal;

const LIMIT: Duration = Duration::from_secs(90);

/// The `subpane.input` events of an attempt.
fn said(env: &TestEnv, run: &str) -> Vec<Value> {
    let events = std::fs::read_to_string(env.attempt_dir(run, 1).join("events.jsonl")).unwrap();
    events
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "subpane.input")
        .collect()
}

#[test]
fn send_gives_a_command_with_a_stdin_pipe_each_message_as_a_line_and_records_it() {
    let env = TestEnv::new();
    let script = "read a; echo \"got:$a\"; read b; echo \"got:$b\"";
    let r = env.sp([
        "run", "--run-id", "c", "--stdin", "pipe", "--detach", "--", "sh", "-c", script,
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let s = env.sp_within(
        LIMIT,
        "send waits for the worker",
        ["send", "c", "--json", "first line"],
    );
    assert_eq!(s.code, 0, "{}", s.stderr);
    assert_eq!(s.json()["seq"], 1);
    assert_eq!(s.json()["taken"], true);
    // A message from a file.
    std::fs::write(env.work.join("msg.txt"), "second\n").unwrap();
    let s = env.sp_within(
        LIMIT,
        "send waits for the worker",
        ["send", "c", "@msg.txt"],
    );
    assert_eq!(s.code, 0, "{}", s.stderr);
    assert!(s.stdout.contains("took message #2"), "{}", s.stdout);
    let w = env.sp_within(
        LIMIT,
        "the command reads two lines",
        ["wait", "c", "--json"],
    );
    assert_eq!(w.code, 0, "{}", w.stderr);
    let stdout = std::fs::read_to_string(env.attempt_dir("c", 1).join("stdout.log")).unwrap();
    assert_eq!(stdout, "got:first line\ngot:second\n");
    let e = w.json();
    assert_eq!(e["input"]["messages"], 2);
    assert_eq!(e["input"]["taken"], 2);
    assert_eq!(e["input"]["from"]["cli"], 2);
    let events = said(&env, "c");
    assert_eq!(events.len(), 2);
    assert_eq!(events[0]["from"], "cli");
    assert_eq!(events[0]["text"], "first line");
    assert_eq!(events[1]["seq"], 2);
    // The socket went with the agent.
    assert!(!env.attempt_dir("c", 1).join("input.sock").exists());
    // A finished run takes nothing: exit 2, saying why.
    let late = env.sp(["send", "c", "more"]);
    assert_eq!(late.code, 2, "{}", late.stderr);
    assert!(late.stderr.contains("has finished"), "{}", late.stderr);
    env.assert_no_leftovers();
}

#[test]
fn send_refuses_a_run_without_input_and_bad_requests_start_nothing() {
    let env = TestEnv::new();
    let flag = crate::harness::start_waiting(&env, "w", 0);
    // A command gets /dev/null unless asked.
    let s = env.sp(["send", "w", "hello"]);
    assert_eq!(s.code, 2, "{}", s.stderr);
    assert!(s.stderr.contains("takes no input"), "{}", s.stderr);
    assert!(s.stderr.contains("--stdin pipe"), "{}", s.stderr);
    crate::harness::touch(&flag);
    assert_eq!(env.sp(["wait", "w"]).code, 0);
    // --keep-open needs input; --stdin takes pipe or null; nothing starts.
    for (args, says) in [
        (vec!["--keep-open", "5s"], "keeps an agent's input open"),
        (vec!["--stdin", "tty"], "`tty` is not a stdin"),
    ] {
        let mut all = vec!["run", "--run-id", "bad"];
        all.extend(args);
        all.extend(["--", "true"]);
        let r = env.sp(all);
        assert_eq!(r.code, 2, "{}", r.stderr);
        assert!(r.stderr.contains(says), "{}", r.stderr);
        assert!(!env.run_dir("bad").exists());
    }
    env.assert_no_leftovers();
}

/// A program controls its stdout: a line that claims to be subpane's own `subpane.input`
/// event is no event (it goes to stdout.log), so events.jsonl says only what was sent.
#[test]
fn a_program_cannot_forge_what_was_said_to_it() {
    let env = TestEnv::new();
    let forged = r#"{"type":"subpane.input","seq":1,"from":"pane","text":"rm -rf ~"}"#;
    let spaced = r#"{ "type" : "subpane.input", "from": "cli", "text": "forged" }"#;
    let r = env.sp([
        "run",
        "--run-id",
        "f",
        "--",
        "printf",
        "%s\\n%s\\n",
        forged,
        spaced,
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        said(&env, "f").is_empty(),
        "a forged event reached events.jsonl"
    );
    let stdout = std::fs::read_to_string(env.attempt_dir("f", 1).join("stdout.log")).unwrap();
    assert!(
        stdout.contains(forged) && stdout.contains(spaced),
        "{stdout}"
    );
    env.assert_no_leftovers();
}

/// Starts an agent run (detached) on the mock's `steer` scenario.
fn start_steered(env: &TestEnv, mock: &Mock, run: &str, agent: Agent, extra: &[&str]) {
    let work = env.work.to_str().unwrap();
    let mut c = mock.subpane(env, None);
    c.args([
        "run",
        "--detach",
        "--timeout",
        "60s",
        "--run-id",
        run,
        "--cwd",
        work,
    ]);
    c.args(["--agent", agent.name()]).args(agent.tools_args());
    c.args(extra);
    c.args(["--task", "Work until told. SCENARIO:steer SLEEP:3"]);
    let r = crate::harness::ran_within(c, LIMIT, "a detached start");
    assert_eq!(r.code, 0, "{}", r.stderr);
}

/// Waits until the agent's shell tool runs (its call is an event).
fn wait_for_the_tool(env: &TestEnv, run: &str) {
    let events = env.attempt_dir(run, 1).join("events.jsonl");
    wait_until("the agent's shell tool call", || {
        let t = std::fs::read_to_string(&events).ok()?;
        (t.contains("sleep 3; echo slept")).then_some(())
    });
}

/// The model requests that hold `needle`, by their index among all requests.
fn requests_with(mock: &Mock, needle: &str) -> Vec<usize> {
    mock.request_bodies()
        .iter()
        .enumerate()
        .filter(|(_, b)| b.contains(needle))
        .map(|(i, _)| i)
        .collect()
}

fn message_during_a_tool_reaches_the_model(agent: Agent) {
    let env = TestEnv::new();
    let mock = Mock::start(&env);
    let run = format!("steer-{}", agent.name());
    start_steered(&env, &mock, &run, agent, &[]);
    wait_for_the_tool(&env, &run);
    let word = format!("STEER:word{}", agent.name());
    let mut c = mock.subpane(&env, None);
    c.args(["send", &run, "--json", &format!("Change of plan: {word}")]);
    let s = crate::harness::ran_within(c, LIMIT, "the agent takes a message");
    assert_eq!(s.code, 0, "{}", s.stderr);
    assert_eq!(s.json()["taken"], true);
    let w = env.sp_within(LIMIT, "the steered run ends", ["wait", &run, "--json"]);
    let e = w.json();
    assert_eq!(e["status"], "completed", "{e:#}");
    assert_eq!(e["output"]["final_text"], format!("Heard {word}"), "{e:#}");
    assert_eq!(e["input"]["messages"], 1);
    assert_eq!(e["input"]["taken"], 1);
    // The first request (the task) did not hold it; a later one did.
    let with = requests_with(&mock, &word);
    assert!(
        !with.is_empty() && with[0] > 0,
        "requests with the message: {with:?}"
    );
    assert_eq!(
        said(&env, &run)[0]["text"],
        format!("Change of plan: {word}")
    );
    // A finished run takes nothing.
    let late = env.sp(["send", &run, "more"]);
    assert_eq!(late.code, 2, "{}", late.stderr);
    // Its session, steered, continues: the message is in the resumed conversation.
    let mut c = mock.subpane(&env, None);
    c.args([
        "retry",
        &run,
        "--resume",
        "--json",
        "--task",
        "And now? SCENARIO:plain",
    ]);
    let r = crate::harness::ran_within(c, LIMIT, "a resumed attempt");
    assert_eq!(r.code, 0, "{}", r.stderr);
    let bodies = mock.request_bodies();
    let last = bodies.last().unwrap();
    assert!(
        last.contains(&word) && last.contains("And now?"),
        "the resumed request lacks the steer: {last}"
    );
    env.assert_no_leftovers();
}

#[test]
fn claude_takes_a_message_sent_while_its_tool_runs() {
    message_during_a_tool_reaches_the_model(Agent::Claude);
}

#[test]
fn pi_takes_a_message_sent_while_its_tool_runs() {
    message_during_a_tool_reaches_the_model(Agent::Pi);
}

#[test]
fn codex_takes_a_message_sent_while_its_tool_runs() {
    message_during_a_tool_reaches_the_model(Agent::Codex);
}

/// What the CLI writes when a turn ends (in events.jsonl).
fn turn_end(agent: Agent) -> &'static str {
    match agent {
        Agent::Claude => "\"type\":\"result\"",
        Agent::Pi => "\"type\":\"agent_end\"",
        Agent::Codex => "\"method\":\"turn/completed\"",
    }
}

fn an_interrupt_stops_the_turn_and_the_run_takes_the_next_message(agent: Agent) {
    let env = TestEnv::new();
    let mock = Mock::start(&env);
    start_steered(&env, &mock, "int", agent, &[]);
    wait_for_the_tool(&env, "int");
    let mut c = mock.subpane(&env, None);
    c.args(["send", "int", "--interrupt"]);
    let s = crate::harness::ran_within(c, LIMIT, "the interrupt is taken");
    assert_eq!(s.code, 0, "{}", s.stderr);
    // The turn ended by the interrupt; the run waits for what comes next.
    let events = env.attempt_dir("int", 1).join("events.jsonl");
    wait_for_text(&events, turn_end(agent));
    assert_eq!(
        env.sp(["status", "int"]).code,
        3,
        "the interrupt ended the run"
    );
    let mut c = mock.subpane(&env, None);
    c.args(["send", "int", "Do this instead: STEER:after"]);
    let s = crate::harness::ran_within(c, LIMIT, "the next message is taken");
    assert_eq!(s.code, 0, "{}", s.stderr);
    let e = env
        .sp_within(LIMIT, "the run ends", ["wait", "int", "--json"])
        .json();
    assert_eq!(e["status"], "completed", "{e:#}");
    assert_eq!(e["output"]["final_text"], "Heard STEER:after");
    assert_eq!(e["input"]["interrupts"], 1);
    assert_eq!(e["input"]["messages"], 1);
    env.assert_no_leftovers();
}

#[test]
fn an_interrupt_stops_claudes_turn_and_the_run_takes_the_next_message() {
    an_interrupt_stops_the_turn_and_the_run_takes_the_next_message(Agent::Claude);
}

#[test]
fn an_interrupt_stops_pis_turn_and_the_run_takes_the_next_message() {
    an_interrupt_stops_the_turn_and_the_run_takes_the_next_message(Agent::Pi);
}

#[test]
fn an_interrupt_stops_codexs_turn_and_the_run_takes_the_next_message() {
    an_interrupt_stops_the_turn_and_the_run_takes_the_next_message(Agent::Codex);
}

#[test]
fn a_run_left_waiting_by_keep_open_ends_after_its_time() {
    let env = TestEnv::new();
    let mock = Mock::start(&env);
    let work = env.work.to_str().unwrap();
    let mut c = mock.subpane(&env, None);
    c.args([
        "run", "--detach", "--run-id", "ko", "--cwd", work, "--agent", "claude",
    ]);
    c.args(["--keep-open", "4s", "--task", "Say hi. SCENARIO:plain"]);
    let r = crate::harness::ran_within(c, LIMIT, "a detached start");
    assert_eq!(r.code, 0, "{}", r.stderr);
    let events = env.attempt_dir("ko", 1).join("events.jsonl");
    wait_for_text(&events, "\"type\":\"result\"");
    // Its turn is over, and it waits for a message.
    assert_eq!(env.sp(["status", "ko"]).code, 3, "it did not wait");
    let e = env
        .sp_within(LIMIT, "the keep-open wait ends", ["wait", "ko", "--json"])
        .json();
    assert_eq!(e["status"], "completed", "{e:#}");
    assert_eq!(e["output"]["final_text"], "Hello from the mock model.");
    assert_eq!(e["lingered"], false, "{e:#}");
    assert!(e["duration_ms"].as_u64().unwrap() >= 4000, "{e:#}");
    assert_eq!(e["input"]["messages"], 0);
    env.assert_no_leftovers();
}

/// A person at the pane, through a real terminal: keys typed in a read-only attach reach no
/// one; on the input line of a plain attach, Enter sends what was typed.
#[test]
fn a_message_typed_in_the_pane_reaches_the_agent_and_read_only_never_sends() {
    let env = TestEnv::new();
    let mock = Mock::start(&env);
    start_steered(&env, &mock, "typed", Agent::Claude, &[]);
    wait_for_the_tool(&env, "typed");
    let ro = Terminal::subpane(
        &env,
        "ro",
        (120, 30),
        &[],
        &["attach", "--read-only", "typed"],
    );
    ro.wait_for("send ▸");
    ro.keys(&["-l", "STEER:readonly"]);
    ro.keys(&["Enter"]);
    ro.keys(&["C-b", "d"]);
    ro.wait_exit();
    drop(ro);
    let t = Terminal::subpane(&env, "rw", (120, 30), &[], &["attach", "typed"]);
    // The header says how.
    t.wait_for("press Enter to send the agent a message");
    t.wait_for("send ▸");
    t.keys(&["-l", "Typed here: STEER:pane"]);
    t.wait_for("send ▸ Typed here: STEER:pane");
    t.keys(&["Enter"]);
    // The view shows it as a message.
    t.wait_for("» pane: Typed here: STEER:pane");
    let e = env
        .sp_within(
            LIMIT,
            "the typed message is taken",
            ["wait", "typed", "--json"],
        )
        .json();
    assert_eq!(e["output"]["final_text"], "Heard STEER:pane", "{e:#}");
    assert_eq!(e["input"]["from"]["pane"], 1, "{e:#}");
    assert_eq!(
        e["input"]["messages"], 1,
        "the read-only attach sent: {e:#}"
    );
    assert!(requests_with(&mock, "STEER:readonly").is_empty());
    let events = said(&env, "typed");
    assert_eq!(events[0]["from"], "pane");
    drop(t);
    env.assert_no_leftovers();
}

/// Where the mock's request bodies are (for a failing test's message).
#[allow(dead_code)]
fn dumps(mock: &Mock) -> &Path {
    &mock.dumps
}

/// A sandboxed program never reaches its attempt's input socket: it could say to itself
/// what only the caller and the pane may say (and the home is hidden from it).
#[test]
fn a_sandboxed_program_cannot_reach_the_input_socket() {
    let env = TestEnv::with_home_outside_tmp();
    let sock = env.attempt_dir("sx", 1).join("input.sock");
    let probe = format!(
        "read a; if [ -e {p} ]; then echo reachable; else echo hidden; fi; \
         python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print(\"connected\")' {p} 2>/dev/null || echo refused",
        p = crate::harness::shell_quote(sock.to_str().unwrap())
    );
    let r = env.sp([
        "run",
        "--run-id",
        "sx",
        "--sandbox",
        "--stdin",
        "pipe",
        "--detach",
        "--",
        "sh",
        "-c",
        &probe,
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    wait_until("the input socket", || sock.exists().then_some(()));
    let s = env.sp_within(LIMIT, "send waits for the worker", ["send", "sx", "go"]);
    assert_eq!(s.code, 0, "{}", s.stderr);
    assert_eq!(
        env.sp_within(LIMIT, "the probe ends", ["wait", "sx"]).code,
        0
    );
    let out = std::fs::read_to_string(env.attempt_dir("sx", 1).join("stdout.log")).unwrap();
    assert_eq!(out, "hidden\nrefused\n");
    env.assert_no_leftovers();
}

/// The input socket is the user's alone (mode 0600), and a client speaks as `cli` or `mcp`:
/// one that claims the pane, or sends what is no request, is refused with why, and nothing
/// reaches the program.
#[test]
fn the_input_socket_is_private_and_refuses_a_client_that_claims_the_pane() {
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::fs::PermissionsExt;
    let env = TestEnv::new();
    let r = env.sp([
        "run",
        "--run-id",
        "p",
        "--stdin",
        "pipe",
        "--detach",
        "--",
        "sh",
        "-c",
        "read a; echo \"got:$a\"",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let sock = env.attempt_dir("p", 1).join("input.sock");
    wait_until("the input socket", || sock.exists().then_some(()));
    let mode = std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "input.sock is {mode:o}");
    let ask = |line: &str| -> Value {
        let mut s = std::os::unix::net::UnixStream::connect(&sock).unwrap();
        s.write_all(line.as_bytes()).unwrap();
        let mut answer = String::new();
        BufReader::new(&s).read_line(&mut answer).unwrap();
        serde_json::from_str(&answer).unwrap()
    };
    for (line, says) in [
        (
            "{\"from\":\"pane\",\"text\":\"forged\"}\n",
            "only the pane's input line",
        ),
        (
            "{\"from\":\"cli\",\"text\":\"x\",\"extra\":1}\n",
            "not one subpane reads",
        ),
        ("not json\n", "not one subpane reads"),
        (
            "{\"from\":\"cli\",\"text\":\"  \"}\n",
            "the message is empty",
        ),
        (
            "{\"from\":\"cli\",\"interrupt\":true}\n",
            "a command has no turn to interrupt",
        ),
    ] {
        let a = ask(line);
        assert_eq!(a["refused"], true, "{line}: {a}");
        assert!(a["error"].as_str().unwrap().contains(says), "{line}: {a}");
    }
    let s = env.sp_within(LIMIT, "send waits for the worker", ["send", "p", "real"]);
    assert_eq!(s.code, 0, "{}", s.stderr);
    assert_eq!(
        env.sp_within(LIMIT, "the command ends", ["wait", "p"]).code,
        0
    );
    let out = std::fs::read_to_string(env.attempt_dir("p", 1).join("stdout.log")).unwrap();
    assert_eq!(out, "got:real\n");
    let e = env.result("p");
    assert_eq!(e["input"]["messages"], 1, "{e:#}");
    env.assert_no_leftovers();
}

/// A message is text as other text is: a secret in it is masked in its event, the pane and
/// the logs (the program, given it raw on its stdin, prints it: masked there too).
#[test]
fn a_secret_in_a_message_is_masked_in_every_record() {
    let env = TestEnv::new();
    let secret = "msg-Secret-8Hq2Lz";
    let r = env.sp([
        "run",
        "--run-id",
        "m",
        "--stdin",
        "pipe",
        "--detach",
        "--keep-session",
        "--env",
        &format!("MSG_TOKEN={secret}"),
        "--",
        "sh",
        "-c",
        "read a; echo \"got:$a\"",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let s = env.sp_within(
        LIMIT,
        "send waits for the worker",
        ["send", "m", &format!("use {secret} now")],
    );
    assert_eq!(s.code, 0, "{}", s.stderr);
    assert_eq!(
        env.sp_within(LIMIT, "the command ends", ["wait", "m"]).code,
        0
    );
    assert_eq!(said(&env, "m")[0]["text"], "use *** now");
    let pane = env.capture_pane_until("m-1", "» cli: use *** now");
    assert!(!pane.contains(secret), "{pane}");
    let mut files = Vec::new();
    crate::harness::files_under(&env.home, &mut files);
    for (name, bytes) in &files {
        assert!(
            !crate::harness::holds(bytes, secret.as_bytes()),
            "{name} holds the secret"
        );
    }
    let out = std::fs::read_to_string(env.attempt_dir("m", 1).join("stdout.log")).unwrap();
    assert_eq!(out, "got:use *** now\n");
    env.sp(["gc", "--older-than", "0s"]);
    env.assert_no_leftovers();
}

/// A message the program never takes (it closed its stdin, then ends): `send` waits for the
/// end and exits 1, saying so; the envelope counts it sent, not taken.
#[test]
fn a_message_the_program_never_takes_is_a_failure_of_send() {
    let env = TestEnv::new();
    let flag = env.root.path().join("go");
    let script = format!(
        "exec 0<&-; while [ ! -e {f} ]; do sleep 0.05; done",
        f = crate::harness::shell_quote(flag.to_str().unwrap())
    );
    let r = env.sp([
        "run", "--run-id", "nt", "--stdin", "pipe", "--detach", "--", "sh", "-c", &script,
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let sock = env.attempt_dir("nt", 1).join("input.sock");
    wait_until("the input socket", || sock.exists().then_some(()));
    let mut c = env.cmd();
    c.args(["send", "nt", "hello?"]);
    let child = c
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // It waits: the program is alive and took nothing.
    wait_until("the message's event", || {
        (!said(&env, "nt").is_empty()).then_some(())
    });
    crate::harness::touch(&flag);
    let s = crate::harness::wait_child_within(child, LIMIT, "send waits for the end");
    assert_eq!(s.code, 1, "{s:?}");
    assert!(
        s.stderr.contains("ended before it took the message"),
        "{s:?}"
    );
    let e = env
        .sp_within(LIMIT, "the program ends", ["wait", "nt", "--json"])
        .json();
    assert_eq!(e["status"], "completed", "{e:#}");
    assert_eq!(
        (
            e["input"]["messages"].as_u64(),
            e["input"]["taken"].as_u64()
        ),
        (Some(1), Some(0)),
        "{e:#}"
    );
    env.assert_no_leftovers();
}
