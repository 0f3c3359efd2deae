use super::*;
use crate::adapter::test_support::{
    self, Replay, assert_answered_plainly, assert_cost, assert_large_prompts_go_by_file,
    assert_wrote_the_file, first_line_field, launch_in,
};
use crate::adapter::{LineAction, Stdin};

macro_rules! transcript {
    ($name:literal) => {
        test_support::transcript!("claude", $name)
    };
}

fn replay(t: &str) -> Replay {
    Replay::run(ClaudeAdapter.parser(), t, "")
}

fn session_of(t: &str) -> String {
    first_line_field(t, "session_id")
}

fn last(t: &str) -> usize {
    t.lines().count() - 1
}

#[test]
fn plain_answer() {
    let t = transcript!("plain");
    let r = replay(t);
    assert_eq!(r.dropped(), vec!["stream_event"; 10]);
    assert_eq!(r.kept(), ["system", "system", "assistant", "result"]);
    assert_eq!(r.terminal_lines(), vec![last(t)]);
    // Streamed once: the assistant line does not repeat the text in the pane.
    assert_eq!(
        r.pane().iter().filter(|p| **p == PaneItem::TextEnd).count(),
        1
    );
    assert_answered_plainly(&r, "result", session_of(t));
    assert_eq!(r.report.output.model.as_deref(), Some("mock-model"));
    assert_cost(r.report.output.cost_usd, 0.000644);
}

#[test]
fn tool_write_runs_bash() {
    let t = transcript!("tool_write");
    let r = replay(t);
    assert_eq!(r.dropped().len(), 14);
    assert_eq!(
        r.kept(),
        [
            "system",
            "system",
            "assistant",
            "user",
            "system",
            "assistant",
            "result"
        ]
    );
    assert_eq!(r.terminal_lines(), vec![last(t)]);
    assert_wrote_the_file(
        &r,
        ("Bash", "echo hi > made_by_agent.txt"),
        "(Bash completed with no output)",
    );
    let rep = &r.report;
    assert_eq!(rep.output.turns, Some(2));
    assert_eq!(rep.output.usage.as_ref().unwrap().total_tokens, Some(296));
    assert_cost(rep.output.cost_usd, 0.001288);
}

#[test]
fn model_error_says_success_but_is_an_error() {
    let t = transcript!("model_error");
    assert!(t.contains(r#""is_error":true"#) && t.contains(r#""subtype":"success""#));
    let r = replay(t);
    assert_eq!(r.terminal_lines(), vec![last(t)]);
    let rep = &r.report;
    assert!(rep.model_error);
    assert_eq!(rep.terminal_event.as_deref(), Some("result"));
    assert_eq!(rep.output.final_text, None);
    assert_eq!(rep.output.errors.len(), 1);
    assert!(
        rep.output.errors[0].starts_with("API Error: 500"),
        "{:?}",
        rep.output.errors
    );
    assert!(!rep.output.context_length_exceeded);
    assert_eq!(rep.output.cost_usd, Some(0.0));
    assert!(r.pane_has_info("retry 1/1"), "{:?}", r.pane());
    assert!(r.pane_has_error("API Error: 500"), "{:?}", r.pane());
}

#[test]
fn context_overflow() {
    let t = transcript!("context_overflow");
    let r = replay(t);
    let rep = &r.report;
    assert!(rep.model_error);
    assert!(rep.output.context_length_exceeded);
    assert!(rep.output.errors[0].starts_with("Prompt is too long"));
    assert_eq!(r.terminal_lines(), vec![last(t)]);
}

#[test]
fn flaky_call_recovers() {
    let r = replay(transcript!("flaky"));
    assert!(!r.report.model_error);
    assert!(r.report.output.errors.is_empty());
    assert_eq!(
        r.report.output.final_text.as_deref(),
        Some("Hello from the mock model.")
    );
}

#[test]
fn resume_continues_the_same_session() {
    let r = replay(transcript!("resume"));
    assert_eq!(
        r.report.output.session_id,
        Some(session_of(transcript!("plain")))
    );
    // Claude counts the cost of the whole session, the usage of this call only.
    assert_cost(r.report.output.cost_usd, 0.001288);
    assert_eq!(
        r.report.output.usage.as_ref().unwrap().input_tokens,
        Some(120)
    );
}

#[test]
fn without_a_result_the_api_error_and_stderr_are_reported() {
    let t = transcript!("model_error");
    let mut p = ClaudeAdapter.parser();
    for l in t.lines().filter(|l| !l.contains(r#""type":"result""#)) {
        assert!(!p.on_line(l.as_bytes()).terminal);
    }
    let rep = p.finish(b"Error: the context window is full\n");
    assert_eq!(rep.terminal_event, None);
    assert!(!rep.model_error);
    assert_eq!(rep.output.errors.len(), 2);
    assert!(rep.output.context_length_exceeded);
}

#[test]
fn garbage_never_panics() {
    let mut p = ClaudeAdapter.parser();
    assert_eq!(
        p.on_line(b"[claude-code:unrecognized_model] {}").action,
        LineAction::Plain
    );
    assert_eq!(p.on_line(b"\xff").action, LineAction::Plain);
    assert_eq!(
        p.on_line(br#"{"type":"stream_event","event":[]}"#).action,
        LineAction::Drop
    );
    assert_eq!(
        p.on_line(br#"{"type":"assistant","message":{"content":"x"}}"#)
            .action,
        LineAction::Keep
    );
    assert_eq!(
        p.on_line(br#"{"type":"user","message":null}"#).action,
        LineAction::Keep
    );
    let r = p.on_line(br#"{"type":"result","usage":7}"#);
    assert!(r.terminal);
    assert!(
        !p.on_line(br#"{"type":"result"}"#).terminal,
        "terminal only once"
    );
}

/// With the pane full, a streamed delta is dropped on its first bytes, unread; a text
/// delta still tells that its block streamed (its `assistant` line adds nothing then,
/// not even to the count of what was not shown).
#[test]
fn with_the_pane_full_deltas_are_dropped_unread() {
    let delta = |kind: &str, rest: &str| {
        format!(
            r#"{{"type":"stream_event","event":{{"type":"content_block_delta","index":12,"delta":{{"type":"{kind}"{rest}"#
        )
    };
    let assistant = br#"{"type":"assistant","message":{"content":[{"type":"text","text":"hi"}]}}"#;
    for (kind, streamed) in [("text_delta", true), ("input_json_delta", false)] {
        let mut p = ClaudeParser::default();
        p.set_pane_room(false);
        // Not even JSON after its first bytes: nobody reads it.
        let r = p.on_line(delta(kind, r#","text":"h"#).as_bytes());
        assert_eq!(r.action, LineAction::Drop, "{kind}");
        assert!(r.pane.is_empty());
        assert_eq!(p.streaming_text, streamed, "{kind}");
        let r = p.on_line(assistant);
        assert_eq!(r.action, LineAction::Keep);
        assert_eq!(r.unshown, u64::from(!streamed), "{kind}");
    }
    // With room, the same delta is read: not JSON, it is a plain line.
    let mut p = ClaudeParser::default();
    assert_eq!(
        p.on_line(delta("text_delta", r#","text":"h"#).as_bytes())
            .action,
        LineAction::Plain
    );
    let r = p.on_line(delta("text_delta", r#","text":"h"}}}"#).as_bytes());
    assert_eq!(r.pane, vec![PaneItem::Text("h".into())]);
}

fn launch(task: &TaskSpec) -> AgentLaunch {
    launch_in(
        &ClaudeAdapter,
        "/bin/claude",
        task,
        "/h/runs/r1",
        "/h/runs/r1/attempts/1",
    )
}

const BASE: [&str; 5] = [
    "/bin/claude",
    "-p",
    "--output-format=stream-json",
    "--verbose",
    "--include-partial-messages",
];

#[test]
fn argv_minimal_keeps_the_prompt_one_element() {
    let l = launch(&TaskSpec {
        prompt: "-it's \"quoted\"\nline two".into(),
        ..Default::default()
    });
    let mut want: Vec<&str> = BASE.to_vec();
    want.extend(["--", "-it's \"quoted\"\nline two"]);
    assert_eq!(l.argv, want);
    assert_eq!(l.stdin, Stdin::Null);
}

#[test]
fn argv_maps_the_task() {
    let task = TaskSpec {
        prompt: "go".into(),
        model: Some("claude-sonnet-4-5".into()),
        system_prompt: Some("be brief".into()),
        tools: vec!["Bash".into(), "Read".into()],
        thinking: Some("minimal".into()),
        resume_session: Some("ebeacbed-2871-424d-bbb0-4c8c5fdc3bf1".into()),
        input: false,
    };
    assert_eq!(
        launch(&task).argv[5..],
        [
            "--resume=ebeacbed-2871-424d-bbb0-4c8c5fdc3bf1",
            "--model=claude-sonnet-4-5",
            "--system-prompt=be brief",
            "--allowedTools=Bash,Read",
            "--effort=low",
            "--",
            "go"
        ]
    );
    let off = TaskSpec {
        prompt: "go".into(),
        thinking: Some("off".into()),
        ..Default::default()
    };
    assert!(!launch(&off).argv.iter().any(|a| a.starts_with("--effort")));
    let high = TaskSpec {
        prompt: "go".into(),
        thinking: Some("high".into()),
        ..Default::default()
    };
    assert!(launch(&high).argv.contains(&"--effort=high".to_owned()));
}

#[test]
fn large_prompts_go_through_stdin() {
    assert_large_prompts_go_by_file(launch, &BASE);
}

#[test]
fn a_rejected_rate_limit_event_is_the_usage_limit_with_its_reset() {
    // As a subscription user sees it: the window's event, then the result that gave up.
    let t = concat!(
        r#"{"type":"system","subtype":"init","session_id":"s1","model":"claude-x"}"#,
        "\n",
        r#"{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1796310000,"rateLimitType":"five_hour"},"session_id":"s1"}"#,
        "\n",
        r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"Claude usage limit reached","session_id":"s1","num_turns":1}"#,
        "\n"
    );
    let r = replay(t);
    let limit = r.report.output.usage_limit.clone().expect("a usage limit");
    assert_eq!(limit.kind.as_deref(), Some("five_hour"));
    assert_eq!(limit.retry_at.as_deref(), Some("2026-12-03T15:00:00Z"));
    assert_eq!(limit.message, "claude: Claude usage limit reached");
    assert!(
        r.pane_has_error("claude: usage limit reached (five_hour)"),
        "{:?}",
        r.pane()
    );
    // A window that only warns is no limit.
    let warned = t.replace(r#""status":"rejected""#, r#""status":"allowed_warning""#);
    let warned = warned.replace(
        r#""is_error":true,"api_error_status":429"#,
        r#""is_error":false"#,
    );
    let warned = replay(&warned);
    assert_eq!(warned.report.output.usage_limit, None);
    assert!(
        warned.pane_has_info("usage window nearly spent (five_hour)"),
        "{:?}",
        warned.pane()
    );
}

/// Recorded as a subscriber (`usage_limit_soon`: a 429 whose `retry-after` is 30 s, with the
/// unified headers of a rejected five-hour window): Claude Code gives up at once and says
/// when the window resets. The event ends the attempt; the `result` still reports.
#[test]
fn a_subscribers_usage_limit_ends_at_its_rate_limit_event() {
    let t = transcript!("usage_limit");
    let r = replay(t);
    assert_eq!(
        r.kept(),
        [
            "system",
            "system",
            "rate_limit_event",
            "assistant",
            "result"
        ]
    );
    assert_eq!(r.terminal_lines(), vec![2]);
    assert_eq!(r.report.terminal_event.as_deref(), Some("rate_limit_event"));
    let limit = r.report.output.usage_limit.clone().expect("a usage limit");
    assert_eq!(limit.kind.as_deref(), Some("five_hour"));
    assert_eq!(limit.retry_at.as_deref(), Some("2026-12-04T02:07:41Z"));
    assert_eq!(
        limit.message,
        "claude: You've hit your 5-hour limit · resets 2:07am (UTC)"
    );
    // The result came: its error is reported once, the synthetic assistant's not again.
    assert_eq!(
        r.report.output.errors,
        ["You've hit your 5-hour limit · resets 2:07am (UTC)"]
    );
    assert!(r.report.model_error);
}

/// Should Claude Code retry on after it said the window is rejected (a `retry-after` under a
/// minute makes it retry a 429 ten times over minutes), the event has ended the attempt
/// already: the worker stops it after the linger. Without the `result`, the limit is still
/// the outcome and the synthetic assistant's error is reported.
#[test]
fn a_rejected_window_is_terminal_though_claude_would_retry_on() {
    let t = concat!(
        r#"{"type":"system","subtype":"init","session_id":"s1","model":"claude-x"}"#,
        "\n",
        r#"{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1796310000,"rateLimitType":"five_hour","isUsingOverage":false},"session_id":"s1"}"#,
        "\n",
        r#"{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":35501,"error_status":429,"error":"rate_limit","session_id":"s1"}"#,
        "\n",
        r#"{"type":"system","subtype":"api_retry","attempt":2,"max_retries":10,"retry_delay_ms":36108,"error_status":429,"error":"rate_limit","session_id":"s1"}"#,
        "\n"
    );
    let r = replay(t);
    assert_eq!(r.terminal_lines(), vec![1]);
    let limit = r.report.output.usage_limit.clone().expect("a usage limit");
    assert_eq!(limit.retry_at.as_deref(), Some("2026-12-03T15:00:00Z"));
    assert_eq!(
        limit.message,
        "claude: usage limit reached (five_hour), resets at 2026-12-03T15:00:00Z"
    );
}

/// A transient 429 (no rejected window: `api_retry` only, as `rate_limit_once` records it) ends
/// nothing; nor does a rejected window that paid extra usage carries on past.
#[test]
fn a_transient_429_or_a_window_overage_pays_for_is_not_terminal() {
    let retry = r#"{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":1000,"error_status":429,"error":"rate_limit","session_id":"s1"}"#;
    let r = replay(&format!("{retry}\n"));
    assert!(r.terminal_lines().is_empty());
    assert_eq!(r.report.output.usage_limit, None);
    for overage in [
        r#""overageStatus":"allowed""#,
        r#""overageStatus":"allowed_warning""#,
        r#""isUsingOverage":true"#,
    ] {
        let ev = format!(
            r#"{{"type":"rate_limit_event","rate_limit_info":{{"status":"rejected","resetsAt":1796310000,{overage}}},"session_id":"s1"}}"#
        );
        let r = replay(&format!("{ev}\n{retry}\n"));
        assert!(r.terminal_lines().is_empty(), "{overage}");
        assert_eq!(r.report.output.usage_limit, None, "{overage}");
    }
    // A rejection that names no window is what Claude Code retries as "temporarily limiting
    // requests (not your usage limit)": no end before its own `result`.
    let unnamed = r#"{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1796310000,"isUsingOverage":false},"session_id":"s1"}"#;
    let r = replay(&format!("{retry}\n{unnamed}\n"));
    assert!(r.terminal_lines().is_empty());
}
