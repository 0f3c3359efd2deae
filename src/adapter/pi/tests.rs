use std::path::Path;

use super::parser::pi_retries;
use super::*;
use crate::adapter::MAX_INLINE_PROMPT;
use crate::adapter::Stdin;
use crate::adapter::test_support::{
    self, Replay, assert_answered_plainly, assert_wrote_the_file, first_line_field, launch_in,
    usage,
};

macro_rules! transcript {
    ($name:literal) => {
        test_support::transcript!("pi", $name)
    };
}

fn replay(t: &str) -> Replay {
    Replay::run(PiAdapter.parser(), t, "")
}

const SESSION: &str = "01a22a91-b11a-7ae9-9c6e-8b2a6d4b6c4d";

fn session_of(t: &str) -> String {
    first_line_field(t, "id")
}

#[test]
fn plain_answer() {
    let t = transcript!("plain");
    let r = replay(t);
    assert_eq!(r.dropped(), vec!["message_update"; 7]);
    assert_eq!(
        r.kept(),
        [
            "session",
            "agent_start",
            "turn_start",
            "message_start",
            "message_end",
            "message_start",
            "message_end",
            "turn_end",
            "agent_end"
        ]
    );
    assert_eq!(r.terminal_lines(), vec![15]);
    assert!(r.pane().contains(&PaneItem::TextEnd));
    assert_answered_plainly(&r, "agent_end", session_of(t));
    let rep = &r.report;
    assert_eq!(rep.output.model.as_deref(), Some("mock-model"));
    assert!((rep.output.cost_usd.unwrap() - 0.000146).abs() < 1e-12);
    // The usage line closes the pane.
    match r.lines[15].1.pane.last() {
        Some(PaneItem::Info(s)) => assert!(s.contains("in 120 out 8"), "{s}"),
        other => panic!("no usage info: {other:?}"),
    }
}

#[test]
fn transcript_repeats_are_reduced() {
    let r = replay(transcript!("plain"));
    let reduced: Vec<Value> = r
        .lines
        .iter()
        .filter_map(|(_, res)| match &res.action {
            LineAction::Replace(v) => Some(serde_json::from_slice(v).unwrap()),
            _ => None,
        })
        .collect();
    assert_eq!(
        reduced,
        vec![
            serde_json::json!({"type": "turn_end"}),
            serde_json::json!({"type": "agent_end"})
        ]
    );
}

#[test]
fn tool_write_runs_bash() {
    let r = replay(transcript!("tool_write"));
    assert_eq!(
        r.dropped()
            .iter()
            .filter(|t| *t == "message_update")
            .count(),
        9
    );
    assert_eq!(
        r.dropped()
            .iter()
            .filter(|t| *t == "tool_execution_update")
            .count(),
        1
    );
    assert_eq!(r.terminal_lines().len(), 1);
    assert_wrote_the_file(&r, ("bash", "echo hi > made_by_agent.txt"), "(no output)");
    let rep = &r.report;
    assert_eq!(rep.output.turns, Some(2));
    assert_eq!(rep.output.usage, usage(240, 16, 40, 296));
    assert!((rep.output.cost_usd.unwrap() - 0.000292).abs() < 1e-12);
}

#[test]
fn model_error_is_terminal_only_when_retries_are_exhausted() {
    let t = transcript!("model_error");
    let r = replay(t);
    let last = t.lines().count() - 1;
    // Three agent_end lines, none terminal: pi retried after each; then auto_retry_end.
    assert_eq!(r.terminal_lines(), vec![last]);
    let rep = &r.report;
    assert_eq!(rep.terminal_event.as_deref(), Some("auto_retry_end"));
    assert!(rep.model_error);
    assert_eq!(rep.output.final_text, None);
    assert_eq!(rep.output.errors.len(), 3);
    assert!(rep.output.errors[0].starts_with("500 The server had an error"));
    assert_eq!(rep.output.turns, Some(3));
    assert_eq!(rep.output.cost_usd, Some(0.0));
    assert!(!rep.output.context_length_exceeded);
    assert!(r.pane_has_error("500"), "{:?}", r.pane());
    assert!(r.pane_has_info("retry 1/2"), "{:?}", r.pane());
}

#[test]
fn flaky_call_recovers_after_a_retry() {
    let r = replay(transcript!("flaky"));
    let ends: Vec<usize> = r
        .lines
        .iter()
        .enumerate()
        .filter(|(_, (l, _))| l.starts_with(r#"{"type":"agent_end""#))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(ends.len(), 2);
    // The first agent_end was followed by a retry, the second is the end.
    assert_eq!(r.terminal_lines(), vec![ends[1]]);
    let rep = &r.report;
    assert!(!rep.model_error);
    assert!(rep.output.errors.is_empty(), "{:?}", rep.output.errors);
    assert_eq!(
        rep.output.final_text.as_deref(),
        Some("Hello from the mock model.")
    );
    assert_eq!(rep.output.turns, Some(2));
}

#[test]
fn context_overflow_is_terminal_and_flagged() {
    let t = transcript!("context_overflow");
    let r = replay(t);
    // agent_end (line 8) ends it: pi does not retry an overflow; it starts compacting.
    assert_eq!(r.terminal_lines(), vec![8]);
    let rep = &r.report;
    assert_eq!(rep.terminal_event.as_deref(), Some("agent_end"));
    assert!(rep.model_error);
    assert!(rep.output.context_length_exceeded);
    assert_eq!(rep.output.errors.len(), 1);
    assert!(rep.output.errors[0].contains("maximum context length"));
}

#[test]
fn resume_continues_the_same_session() {
    let plain = transcript!("plain");
    let r = replay(transcript!("resume"));
    assert_eq!(r.report.output.session_id, Some(session_of(plain)));
    assert_eq!(
        r.report.output.final_text.as_deref(),
        Some("Hello from the mock model.")
    );
    assert_eq!(r.terminal_lines().len(), 1);
}

#[test]
fn newer_builds_say_whether_they_retry() {
    let mut p = PiAdapter.parser();
    assert!(
        !p.on_line(br#"{"type":"agent_end","messages":[],"willRetry":true}"#)
            .terminal
    );
    let end = p.on_line(br#"{"type":"agent_end","messages":[{"role":"user"}],"willRetry":false}"#);
    assert!(end.terminal);
    assert_eq!(
        end.action,
        LineAction::Replace(br#"{"type":"agent_end","willRetry":false}"#.to_vec())
    );
    assert!(
        !p.on_line(br#"{"type":"agent_settled"}"#).terminal,
        "terminal only once"
    );
    assert_eq!(p.finish(b"").terminal_event.as_deref(), Some("agent_end"));

    let mut p = PiAdapter.parser();
    assert!(p.on_line(br#"{"type":"agent_settled"}"#).terminal);
}

#[test]
fn garbage_never_panics() {
    let mut p = PiAdapter.parser();
    assert_eq!(p.on_line(b"Warning: something").action, LineAction::Plain);
    assert_eq!(p.on_line(b"\xff\xfe\x00").action, LineAction::Plain);
    assert_eq!(
        p.on_line(b"{\"type\":\"message_end\"").action,
        LineAction::Plain
    );
    assert_eq!(
        p.on_line(br#"{"type":"message_end","message":7}"#).action,
        LineAction::Keep
    );
    assert_eq!(
        p.on_line(br#"{"type":"message_update","assistantMessageEvent":5}"#)
            .action,
        LineAction::Drop
    );
    assert_eq!(
        p.on_line(br#"{"type":"tool_execution_start","args":null}"#)
            .action,
        LineAction::Keep
    );
    assert_eq!(p.on_line(br#"[1]"#).action, LineAction::Keep);
    let rep = p.finish(b"Error: boom\n");
    assert_eq!(rep.output.errors, vec!["Error: boom".to_owned()]);
    assert_eq!(rep.terminal_event, None);
}

#[test]
fn retry_classification_follows_pi() {
    assert!(pi_retries("500 The server had an error"));
    assert!(pi_retries("Rate-limit reached"));
    assert!(pi_retries("fetch failed"));
    assert!(!pi_retries(
        "400 This model's maximum context length is 128000 tokens"
    ));
    assert!(!pi_retries("401 invalid api key"));
}

fn launch(task: &TaskSpec) -> AgentLaunch {
    launch_in(
        &PiAdapter,
        "/bin/pi",
        task,
        "/h/sessions/pi",
        "/h/runs/r1/attempts/2",
    )
}

#[test]
fn argv_minimal() {
    let task = TaskSpec {
        prompt: "it's \"quoted\"\nand two lines".into(),
        ..Default::default()
    };
    let l = launch(&task);
    assert_eq!(
        l.argv,
        [
            "/bin/pi",
            "--mode",
            "json",
            "-p",
            "--session-dir",
            "/h/sessions/pi",
            "it's \"quoted\"\nand two lines"
        ]
    );
    assert_eq!(l.stdin, Stdin::Null);
    assert!(Path::new(&l.argv[5]).starts_with("/h/sessions"));
}

#[test]
fn argv_maps_the_task() {
    let task = TaskSpec {
        prompt: "go".into(),
        model: Some("mock/mock-model".into()),
        system_prompt: Some("-be brief".into()),
        tools: vec!["read".into(), "bash".into()],
        thinking: Some("high".into()),
        resume_session: Some(SESSION.into()),
        input: false,
    };
    assert_eq!(
        launch(&task).argv[6..],
        [
            "--session",
            SESSION,
            "--model",
            "mock/mock-model",
            "--system-prompt",
            "-be brief",
            "--tools",
            "read,bash",
            "--thinking",
            "high",
            "go"
        ]
    );
}

#[test]
fn large_or_option_like_prompts_go_through_stdin() {
    for prompt in [
        "x".repeat(3 * 1024 * 1024),
        "x".repeat(MAX_INLINE_PROMPT + 1),
        "-v".into(),
        "@file".into(),
    ] {
        let l = launch(&TaskSpec {
            prompt: prompt.clone(),
            ..Default::default()
        });
        assert_eq!(l.stdin, Stdin::PromptFile, "{}", &prompt[..2]);
        assert!(
            l.argv.iter().all(|a| a.len() < 1024),
            "prompt leaked into argv"
        );
        assert_eq!(l.argv.len(), 6);
    }
    let l = launch(&TaskSpec {
        prompt: "x".repeat(MAX_INLINE_PROMPT),
        ..Default::default()
    });
    assert_eq!(l.stdin, Stdin::Null);
}

#[test]
fn a_final_429_or_limit_is_the_usage_limit() {
    use super::parser::usage_limit;
    let l = usage_limit("429 You've hit your usage limit").unwrap();
    assert_eq!(l.message, "pi: 429 You've hit your usage limit");
    assert_eq!((l.retry_at, l.kind), (None, None));
    assert!(usage_limit("Rate limit reached for requests").is_some());
    assert_eq!(
        usage_limit("insufficient quota").unwrap().kind.as_deref(),
        Some("quota")
    );
    assert!(usage_limit("500 The server had an error").is_none());
    assert!(usage_limit("error 4290 in frobnicator").is_none());
}
