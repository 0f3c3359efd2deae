use super::*;
use crate::adapter::test_support::{
    self, Replay, assert_answered_plainly, assert_large_prompts_go_by_file, assert_wrote_the_file,
    first_line_field, launch_in, usage,
};
use crate::adapter::{LineAction, MAX_INLINE_PROMPT, Stdin};

macro_rules! transcript {
    ($name:literal) => {
        test_support::transcript!("codex", $name)
    };
}

fn replay(t: &str, stderr: &str) -> Replay {
    Replay::run(CodexAdapter.parser(), t, stderr)
}

fn thread_of(t: &str) -> String {
    first_line_field(t, "thread_id")
}

#[test]
fn plain_answer() {
    let t = transcript!("plain");
    let r = replay(t, "");
    assert!(r.dropped().is_empty());
    assert_eq!(
        r.kept(),
        [
            "thread.started",
            "item.completed",
            "turn.started",
            "item.completed",
            "turn.completed"
        ]
    );
    assert_eq!(r.terminal_lines(), vec![4]);
    // codex says input 140 of which 20 cached; the unknown-model warning is shown, not
    // counted as an error.
    assert_answered_plainly(&r, "turn.completed", thread_of(t));
    assert_eq!(r.report.output.model, None);
    assert_eq!(r.report.output.cost_usd, None);
    assert!(r.pane_has_error("Model metadata"), "{:?}", r.pane());
}

#[test]
fn tool_write_runs_a_command() {
    let r = replay(transcript!("tool_write"), "");
    assert_eq!(r.terminal_lines(), vec![6]);
    assert_eq!(
        r.pane()
            .iter()
            .filter(|p| matches!(p, PaneItem::ToolCall { .. }))
            .count(),
        1,
        "started and completed count once"
    );
    assert_wrote_the_file(
        &r,
        ("shell", "/bin/bash -lc 'echo hi > made_by_agent.txt'"),
        "(no output)",
    );
    let rep = &r.report;
    assert_eq!(rep.output.turns, Some(1));
    assert_eq!(rep.output.usage, usage(240, 16, 40, 296));
}

#[test]
fn model_error_fails_the_turn() {
    let r = replay(transcript!("model_error"), "");
    assert_eq!(r.terminal_lines(), vec![4]);
    let rep = &r.report;
    assert_eq!(rep.terminal_event.as_deref(), Some("turn.failed"));
    assert!(rep.model_error);
    assert_eq!(rep.output.final_text, None);
    assert_eq!(
        rep.output.errors,
        ["We’re currently experiencing high demand, which may cause temporary errors."]
    );
    assert!(!rep.output.context_length_exceeded);
    assert_eq!(rep.output.usage, None);
}

#[test]
fn context_overflow() {
    let r = replay(transcript!("context_overflow"), "");
    let rep = &r.report;
    assert!(rep.model_error);
    assert!(rep.output.context_length_exceeded);
    assert_eq!(rep.output.errors.len(), 1);
    assert!(rep.output.errors[0].contains("context window"));
}

#[test]
fn flaky_call_recovers_silently() {
    let r = replay(transcript!("flaky"), "");
    assert!(!r.report.model_error);
    assert_eq!(r.report.terminal_event.as_deref(), Some("turn.completed"));
}

#[test]
fn resume_continues_the_thread() {
    let r = replay(transcript!("resume"), "");
    assert_eq!(
        r.report.output.session_id,
        Some(thread_of(transcript!("plain")))
    );
    // The thread's usage so far: both calls.
    assert_eq!(r.report.output.usage, usage(240, 16, 40, 296));
}

#[test]
fn a_refused_input_is_reported_from_stderr() {
    let stdout = r#"{"type":"thread.started","thread_id":"01a22a90-4955-7210-b4cc-6e44af3441cd"}"#;
    let stderr = "WARNING: proceeding\nError: turn/start: turn/start failed: Input exceeds the maximum length of 1048576 characters. (code -32602)\n\nStack backtrace:\n   0: <unknown>\n";
    let r = replay(stdout, stderr);
    assert_eq!(r.report.terminal_event, None);
    assert_eq!(r.report.output.errors.len(), 1);
    assert!(r.report.output.errors[0].starts_with("Error: turn/start"));
}

#[test]
fn deltas_and_garbage() {
    let mut p = CodexAdapter.parser();
    assert_eq!(
        p.on_line(br#"{"type":"item.updated","item":{"type":"todo_list"}}"#)
            .action,
        LineAction::Drop
    );
    assert_eq!(
        p.on_line(b"Reading additional input from stdin...").action,
        LineAction::Plain
    );
    assert_eq!(p.on_line(b"\xc3\x28").action, LineAction::Plain);
    assert_eq!(
        p.on_line(br#"{"type":"item.completed","item":5}"#).action,
        LineAction::Keep
    );
    assert_eq!(
        p.on_line(br#"{"type":"turn.completed","usage":"x"}"#)
            .action,
        LineAction::Keep
    );
    assert!(
        !p.on_line(br#"{"type":"turn.failed"}"#).terminal,
        "terminal only once"
    );
    let rep = p.finish(b"");
    assert_eq!(rep.terminal_event.as_deref(), Some("turn.completed"));
    assert!(rep.model_error, "the last turn failed");
}

fn launch(task: &TaskSpec) -> AgentLaunch {
    launch_in(
        &CodexAdapter,
        "/bin/codex",
        task,
        "/h/runs/r1",
        "/h/runs/r1/attempts/1",
    )
}

#[test]
fn argv_minimal_keeps_the_prompt_one_element() {
    let l = launch(&TaskSpec {
        prompt: "-it's \"quoted\"\nline two".into(),
        ..Default::default()
    });
    assert_eq!(
        l.argv,
        [
            "/bin/codex",
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--",
            "-it's \"quoted\"\nline two"
        ]
    );
    assert_eq!(l.stdin, Stdin::Null);
}

#[test]
fn argv_maps_the_task() {
    let task = TaskSpec {
        prompt: "go".into(),
        model: Some("gpt-5.1-codex".into()),
        system_prompt: Some("be \"brief\"\nplease".into()),
        tools: vec!["read".into(), "bash".into()],
        thinking: Some("off".into()),
        resume_session: Some("01a22a90-2642-7fd3-95f6-5a10c206c2bd".into()),
        input: false,
    };
    assert_eq!(
        launch(&task).argv[4..],
        [
            "--model=gpt-5.1-codex",
            "-c",
            r#"developer_instructions="be \"brief\"\nplease""#,
            "-c",
            r#"model_reasoning_effort="none""#,
            "-c",
            r#"sandbox_mode="workspace-write""#,
            "resume",
            "01a22a90-2642-7fd3-95f6-5a10c206c2bd",
            "--",
            "go"
        ]
    );
    let ro = TaskSpec {
        prompt: "go".into(),
        tools: vec!["read".into(), "grep".into()],
        ..Default::default()
    };
    assert!(
        launch(&ro)
            .argv
            .contains(&r#"sandbox_mode="read-only""#.to_owned())
    );
}

#[test]
fn large_prompts_go_through_stdin() {
    assert_large_prompts_go_by_file(
        launch,
        &["/bin/codex", "exec", "--json", "--skip-git-repo-check", "-"],
    );
    let resume = TaskSpec {
        prompt: "x".repeat(MAX_INLINE_PROMPT + 1),
        resume_session: Some("t1".into()),
        ..Default::default()
    };
    assert_eq!(launch(&resume).argv[4..], ["resume", "t1", "-"]);
}

#[test]
fn a_usage_limit_is_said_with_when_it_resets() {
    let t = transcript!("usage_limit");
    assert!(t.contains("hit your usage limit"));
    let r = replay(t, "");
    let limit = r.report.output.usage_limit.clone().expect("a usage limit");
    assert!(
        limit
            .message
            .starts_with("codex: You’ve hit your usage limit"),
        "{limit:?}"
    );
    // 11:30 AM in this machine's zone, to the minute.
    assert!(
        limit.retry_at.is_some_and(|t| t.ends_with(":00Z")),
        "the transcript's 11:30 AM"
    );
    assert_eq!(limit.kind, None);
    // A quota's words are one too.
    let q = parser::usage_limit("Quota exceeded. Check your plan and billing details.").unwrap();
    assert_eq!(q.kind.as_deref(), Some("quota"));
    assert_eq!(q.retry_at, None);
    assert!(parser::usage_limit("We’re currently experiencing high demand").is_none());
}
