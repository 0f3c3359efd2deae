//! The app-server parser against a recorded session (a turn interrupted during its tool
//! call, then a message as the next turn: `tests/fixtures/app_server/`), and the protocol it
//! speaks back.

use serde_json::Value;

use super::*;
use crate::adapter::{LineAction, StreamParser};

fn say(p: &mut AppServerParser, what: Say<'_>) -> Option<Vec<u8>> {
    StreamParser::say(p, what)
}

fn fixture() -> Vec<String> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/app_server/interrupt_then_message.jsonl"
    );
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Each JSON line of what the parser wrote.
fn sent(bytes: &[u8]) -> Vec<Value> {
    std::str::from_utf8(bytes)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn task() -> TaskSpec {
    TaskSpec {
        prompt: "go".into(),
        model: Some("mock-model".into()),
        system_prompt: Some("be brief".into()),
        tools: vec!["read".into()],
        thinking: Some("off".into()),
        input: true,
        ..TaskSpec::default()
    }
}

#[test]
fn the_handshake_gives_the_tasks_settings_and_the_prompt_is_the_first_turn() {
    let lines = fixture();
    let mut p = AppServerParser::new(&task());
    let init = sent(&say(&mut p, Say::Prompt("go")).unwrap());
    assert_eq!(init[0]["method"], "initialize");
    assert_eq!(init[0]["id"], 0);
    assert_eq!(init[0]["params"]["clientInfo"]["name"], "subpane");
    let r = p.on_line(lines[0].as_bytes());
    let next = sent(r.reply.as_deref().unwrap());
    assert_eq!(next[0], serde_json::json!({"method": "initialized"}));
    assert_eq!(next[1]["method"], "thread/start");
    let params = &next[1]["params"];
    assert_eq!(params["approvalPolicy"], "never");
    assert_eq!(params["model"], "mock-model");
    assert_eq!(params["developerInstructions"], "be brief");
    assert_eq!(params["config"]["model_reasoning_effort"], "none");
    assert_eq!(params["sandbox"], "read-only");
    let r = p.on_line(lines[1].as_bytes());
    assert!(r.reply.is_none());
    let r = p.on_line(lines[2].as_bytes());
    let turn = sent(r.reply.as_deref().unwrap());
    assert_eq!(turn[0]["method"], "turn/start");
    assert_eq!(turn[0]["params"]["input"][0]["text"], "go");
    assert_eq!(turn[0]["params"]["clientUserMessageId"], "subpane-0");
    assert_eq!(
        turn[0]["params"]["threadId"],
        "01a23f4f-5581-7cf0-923c-e7ca8fee1217"
    );
}

#[test]
fn a_session_interrupted_then_steered_reads_as_two_turns_with_the_last_answer() {
    let lines = fixture();
    let mut p = AppServerParser::new(&task());
    say(&mut p, Say::Prompt("go")).unwrap();
    let (mut taken, mut ends, mut terminal) = (Vec::new(), 0, 0);
    for (i, l) in lines.iter().enumerate() {
        let r = p.on_line(l.as_bytes());
        assert_ne!(r.action, LineAction::Plain, "line {}", i + 1);
        taken.extend(r.taken);
        ends += usize::from(r.turn_end);
        terminal += usize::from(r.terminal);
        // While the tool runs (its item started): the interrupt.
        if i == 10 {
            let b = sent(&say(&mut p, Say::Interrupt).unwrap());
            assert_eq!(b[0]["method"], "turn/interrupt");
            assert_eq!(b[0]["id"], 3);
            assert_eq!(
                b[0]["params"]["turnId"],
                "01a23f4f-559c-7cb2-a194-7ed9b02e7b74"
            );
        }
        // After the interrupted turn's end: a message is the next turn.
        if i == 15 {
            assert_eq!(say(&mut p, Say::Interrupt), None, "no turn to interrupt");
            let b = sent(&say(&mut p, Say::Message("now STEER:after")).unwrap());
            assert_eq!(b[0]["method"], "turn/start");
            assert_eq!(b[0]["id"], 4);
            assert_eq!(b[0]["params"]["clientUserMessageId"], "subpane-1");
        }
    }
    assert_eq!(taken, [Took::Message, Took::Interrupt, Took::Message]);
    assert_eq!((ends, terminal), (2, 1));
    let rep = p.finish(b"");
    assert!(!rep.model_error, "an interrupted turn is no failure");
    assert_eq!(rep.terminal_event.as_deref(), Some("turn/completed"));
    let out = rep.output;
    assert_eq!(out.final_text.as_deref(), Some("Heard STEER:aftercxi1"));
    assert_eq!(
        out.session_id.as_deref(),
        Some("01a23f4f-5581-7cf0-923c-e7ca8fee1217")
    );
    assert_eq!(out.turns, Some(2));
    assert_eq!(out.tool_calls, Some(1));
    let u = out.usage.unwrap();
    // The thread's total; the input count without its cached part.
    assert_eq!(u.cache_read_tokens, Some(40));
    assert_eq!(u.input_tokens, Some(240));
    assert!(out.errors.is_empty(), "{:?}", out.errors);
}

#[test]
fn a_steer_that_finds_the_turn_over_is_the_next_turn_and_approvals_are_declined() {
    let lines = fixture();
    let mut p = AppServerParser::new(&TaskSpec::default());
    say(&mut p, Say::Prompt("go")).unwrap();
    for l in &lines[..8] {
        p.on_line(l.as_bytes());
    }
    // A message before the turn has run: steered once it does (line 8 is turn/started).
    let mut early = AppServerParser::new(&TaskSpec::default());
    say(&mut early, Say::Prompt("go")).unwrap();
    for l in &lines[..5] {
        early.on_line(l.as_bytes());
    }
    assert_eq!(say(&mut early, Say::Message("soon")), Some(Vec::new()));
    let r = early.on_line(lines[5].as_bytes());
    let b = sent(r.reply.as_deref().unwrap());
    assert_eq!(b[0]["method"], "turn/steer");
    assert_eq!(b[0]["params"]["input"][0]["text"], "soon");
    // A steer of the running turn, which the server finds over: sent again as a turn.
    let b = sent(&say(&mut p, Say::Message("more")).unwrap());
    assert_eq!(b[0]["method"], "turn/steer");
    assert_eq!(
        b[0]["params"]["expectedTurnId"],
        "01a23f4f-559c-7cb2-a194-7ed9b02e7b74"
    );
    let id = b[0]["id"].as_u64().unwrap();
    let refused =
        format!(r#"{{"error":{{"code":-32600,"message":"no active turn to steer"}},"id":{id}}}"#);
    let r = p.on_line(refused.as_bytes());
    let again = sent(r.reply.as_deref().unwrap());
    assert_eq!(again[0]["method"], "turn/start");
    assert_eq!(again[0]["params"]["input"][0]["text"], "more");
    assert_eq!(again[0]["params"]["clientUserMessageId"], "subpane-1");
    // The server asks for an approval: declined, nobody is there.
    let ask = r#"{"method":"item/commandExecution/requestApproval","id":0,"params":{"command":"rm -rf /"}}"#;
    let r = p.on_line(ask.as_bytes());
    let answer = sent(r.reply.as_deref().unwrap());
    assert_eq!(
        answer[0],
        serde_json::json!({"id": 0, "result": {"decision": "decline"}})
    );
}
