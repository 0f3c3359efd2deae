//! Test support for the agent adapters: a transcript fed through a parser ([`Replay`]), the
//! recorded transcripts ([`transcript!`]), the argv of a task in a run directory
//! ([`launch_in`]), and the checks every agent's tests make the same way (its `plain` and
//! `tool_write` transcripts, prompts too large for argv).

use std::path::Path;

use super::{
    Adapter, AgentLaunch, AgentReport, ArgvContext, LineAction, LineResult, MAX_INLINE_PROMPT,
    PaneItem, StreamParser,
};
use crate::spec::{Stdin, TaskSpec};

/// A recorded transcript of an agent (`tests/fixtures/transcripts/<agent>/<name>.jsonl`).
macro_rules! transcript {
    ($agent:literal, $name:literal) => {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/transcripts/",
            $agent,
            "/",
            $name,
            ".jsonl"
        ))
    };
}
pub(crate) use transcript;

/// The argv `adapter` builds for `task` in run `/h/runs/r1`, with the given sessions and
/// attempt directories (the prompt file in the attempt's).
pub(crate) fn launch_in(
    adapter: &dyn Adapter,
    program: &str,
    task: &TaskSpec,
    sessions_dir: &str,
    attempt_dir: &str,
) -> AgentLaunch {
    let attempt = Path::new(attempt_dir);
    let prompt = attempt.join("prompt.txt");
    let c = ArgvContext {
        run_dir: Path::new("/h/runs/r1"),
        sessions_dir: Path::new(sessions_dir),
        attempt_dir: attempt,
        prompt_file: &prompt,
    };
    adapter.launch(program, task, &c)
}

/// A prompt too large for one argv element (3 MiB, and one byte over the limit) goes by the
/// prompt file, and the argv is then `want`.
pub(crate) fn assert_large_prompts_go_by_file(
    launch: impl Fn(&TaskSpec) -> AgentLaunch,
    want: &[&str],
) {
    for n in [3 * 1024 * 1024, MAX_INLINE_PROMPT + 1] {
        let l = launch(&TaskSpec {
            prompt: "x".repeat(n),
            ..Default::default()
        });
        assert_eq!(l.stdin, Stdin::PromptFile);
        assert_eq!(l.argv, want);
    }
}

/// A cost, to the float's precision.
pub(crate) fn assert_cost(got: Option<f64>, want: f64) {
    let got = got.expect("a cost");
    assert!((got - want).abs() < 1e-9, "cost {got} != {want}");
}

/// What every agent's `plain` transcript (the mock model answers in one call) must show: the
/// answer streamed to the pane and as the final text, one turn, the mock model's usage, no
/// tool call, no failure, ended by `terminal` in session `session`.
pub(crate) fn assert_answered_plainly(r: &Replay, terminal: &str, session: String) {
    const ANSWER: &str = "Hello from the mock model.";
    assert_eq!(r.pane_text(), ANSWER);
    let rep = &r.report;
    assert_eq!(rep.terminal_event.as_deref(), Some(terminal));
    assert!(!rep.model_error);
    assert_eq!(rep.output.final_text.as_deref(), Some(ANSWER));
    assert_eq!(rep.output.session_id, Some(session));
    assert_eq!(rep.output.usage, usage(120, 8, 20, 148));
    assert_eq!(rep.output.turns, Some(1));
    assert_eq!(rep.output.tool_calls, Some(0));
    assert!(rep.output.errors.is_empty());
    assert!(!rep.output.context_length_exceeded);
}

/// What every agent's `tool_write` transcript (the mock model asks for one shell command that
/// writes `made_by_agent.txt`) must show: the call and its result in the pane, the final text,
/// one tool call, no failure.
pub(crate) fn assert_wrote_the_file(r: &Replay, call: (&str, &str), result: &str) {
    assert!(
        r.pane().contains(&PaneItem::ToolCall {
            name: call.0.into(),
            summary: call.1.into()
        }),
        "{:?}",
        r.pane()
    );
    assert!(r.pane().contains(&PaneItem::ToolResult {
        summary: result.into(),
        is_error: false
    }));
    let rep = &r.report;
    assert_eq!(
        rep.output.final_text.as_deref(),
        Some("I wrote made_by_agent.txt.")
    );
    assert_eq!(rep.output.tool_calls, Some(1));
    assert!(!rep.model_error);
}

pub(crate) struct Replay {
    pub lines: Vec<(String, LineResult)>,
    pub report: AgentReport,
}

/// The usage the mock model reports, `n` calls' worth, as the envelope holds it.
pub(crate) fn usage(
    input: u64,
    output: u64,
    read: u64,
    total: u64,
) -> Option<crate::envelope::Usage> {
    Some(crate::envelope::Usage {
        input_tokens: Some(input),
        output_tokens: Some(output),
        cache_read_tokens: Some(read),
        cache_write_tokens: Some(0),
        total_tokens: Some(total),
    })
}

/// A string field of the first line of a transcript (the session or thread id).
pub(crate) fn first_line_field(transcript: &str, field: &str) -> String {
    let first: serde_json::Value =
        serde_json::from_str(transcript.lines().next().unwrap()).unwrap();
    first[field].as_str().unwrap().to_owned()
}

impl Replay {
    pub fn run(mut parser: Box<dyn StreamParser>, transcript: &str, stderr: &str) -> Self {
        let lines = transcript
            .lines()
            .map(|l| (l.to_owned(), parser.on_line(l.as_bytes())))
            .collect();
        let report = parser.finish(stderr.as_bytes());
        Replay { lines, report }
    }
    /// The `type` of each line with the given action (`"?"` for untyped lines).
    pub fn types_where(&self, pred: impl Fn(&LineAction) -> bool) -> Vec<String> {
        self.lines
            .iter()
            .filter(|(_, r)| pred(&r.action))
            .map(|(l, _)| {
                serde_json::from_str::<serde_json::Value>(l)
                    .ok()
                    .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_owned))
                    .unwrap_or_else(|| "?".to_owned())
            })
            .collect()
    }
    pub fn dropped(&self) -> Vec<String> {
        self.types_where(|a| *a == LineAction::Drop)
    }
    pub fn kept(&self) -> Vec<String> {
        self.types_where(|a| {
            matches!(
                a,
                LineAction::Keep | LineAction::KeepAndPlain | LineAction::Replace(_)
            )
        })
    }
    /// Indexes of the lines marked terminal.
    pub fn terminal_lines(&self) -> Vec<usize> {
        self.lines
            .iter()
            .enumerate()
            .filter(|(_, (_, r))| r.terminal)
            .map(|(i, _)| i)
            .collect()
    }
    pub fn pane(&self) -> Vec<PaneItem> {
        self.lines
            .iter()
            .flat_map(|(_, r)| r.pane.clone())
            .collect()
    }
    /// Whether the pane showed an info line starting so.
    pub fn pane_has_info(&self, start: &str) -> bool {
        self.pane()
            .iter()
            .any(|p| matches!(p, PaneItem::Info(i) if i.starts_with(start)))
    }
    /// Whether the pane showed an error starting so.
    pub fn pane_has_error(&self, start: &str) -> bool {
        self.pane()
            .iter()
            .any(|p| matches!(p, PaneItem::Error(e) if e.starts_with(start)))
    }
    /// What the worker wrote to `events.jsonl`: the lines kept, as kept.
    pub fn events_jsonl(&self) -> String {
        let mut out = String::new();
        for (l, r) in &self.lines {
            match &r.action {
                LineAction::Keep | LineAction::KeepAndPlain => out.push_str(l),
                LineAction::Replace(b) => out.push_str(&String::from_utf8_lossy(b)),
                LineAction::Drop | LineAction::Plain => continue,
            }
            out.push('\n');
        }
        out
    }
    /// All streamed text, concatenated.
    pub fn pane_text(&self) -> String {
        self.pane()
            .into_iter()
            .filter_map(|p| match p {
                PaneItem::Text(t) => Some(t),
                _ => None,
            })
            .collect()
    }
}
