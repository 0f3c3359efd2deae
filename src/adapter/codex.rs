//! The `codex` adapter (`codex exec --json`).
//!
//! ```text
//! thread.started ─ turn.started ─ item.started|updated|completed* ─ turn.completed | turn.failed
//!                                 (error events may come before turn.failed)
//! ```
//!
//! * Dropped: `item.updated` (progress of an item whose `item.completed` follows whole).
//! * Terminal: the first `turn.completed` or `turn.failed`. `exec` runs one turn (the prompt)
//!   and exits; it does not start another turn by itself, so the first end is the end.
//! * Tools: codex has no per-tool allowlist; its tools are gated by its sandbox. A task's tool
//!   list therefore picks the sandbox: only read-only tools (read, grep, ls, …) give
//!   `sandbox_mode="read-only"`, anything else `"workspace-write"`. No tools: codex's own config.
//! * Thinking is `model_reasoning_effort` (`off` becomes `none`); the system prompt is
//!   `developer_instructions`. Both are `-c key=<TOML string>` overrides.
//!
//! Common pitfalls:
//! * `item.completed` with `type: "error"` is a warning (e.g. unknown model metadata), not a
//!   failure: it goes to the pane only. `turn.failed` and a top-level `error` not followed by a
//!   completed turn are failures.
//! * codex exits 1 on `turn.failed`, and dies with `Error: …` on stderr and no turn at all when
//!   it refuses the input (e.g. more than 1 MiB of prompt): that line becomes the error.
//! * `usage` counts cached input inside `input_tokens`; the envelope's `input_tokens` does not
//!   (as pi and Claude report it). After `exec resume` the usage is the whole thread's.
//! * With stdin not a terminal, codex appends it to the prompt: the worker gives `/dev/null`,
//!   or the prompt file when the prompt is `-` (too large for argv).
//! * No cost and no model name appear in the events.

use serde_json::Value;

use super::lenient::{LazyStr, List, Num, Present, Str, lenient};

use super::common::{
    Peeked, abbreviate, finish_common, fits_argv, from_line, leading_type, not_an_event, one_line,
    peek, stdin_for, summarize_args, toml_string, usage_info,
};
use super::{
    Adapter, AgentLaunch, AgentReport, ArgvContext, LineResult, PaneItem, SandboxNeeds, StateDir,
    StreamParser, mentions_context_overflow,
};
use crate::envelope::{Output, SoFar, Usage};
use crate::spec::{AgentKind, TaskSpec};

pub struct CodexAdapter;

/// Tools that only read: a task limited to these runs codex's read-only sandbox.
const READ_ONLY_TOOLS: [&str; 9] = [
    "read",
    "grep",
    "find",
    "ls",
    "glob",
    "view",
    "view_image",
    "web_search",
    "search",
];

impl Adapter for CodexAdapter {
    fn kind(&self) -> AgentKind {
        AgentKind::Codex
    }
    fn binary(&self) -> Option<&'static str> {
        Some("codex")
    }
    fn install_hint(&self) -> &'static str {
        "install Codex with `npm install -g @openai/codex`"
    }
    fn launch(&self, program: &str, task: &TaskSpec, _ctx: &ArgvContext<'_>) -> AgentLaunch {
        let mut argv: Vec<String> = vec![
            program.to_owned(),
            "exec".into(),
            "--json".into(),
            "--skip-git-repo-check".into(),
        ];
        if let Some(m) = &task.model {
            argv.push(format!("--model={m}"));
        }
        if let Some(s) = &task.system_prompt {
            argv.extend([
                "-c".into(),
                format!("developer_instructions={}", toml_string(s)),
            ]);
        }
        if let Some(t) = &task.thinking {
            let effort = if t == "off" { "none" } else { t.as_str() };
            argv.extend([
                "-c".into(),
                format!("model_reasoning_effort={}", toml_string(effort)),
            ]);
        }
        if !task.tools.is_empty() {
            let read_only = task
                .tools
                .iter()
                .all(|t| READ_ONLY_TOOLS.contains(&t.to_ascii_lowercase().as_str()));
            let mode = if read_only {
                "read-only"
            } else {
                "workspace-write"
            };
            argv.extend(["-c".into(), format!("sandbox_mode={}", toml_string(mode))]);
        }
        if let Some(id) = &task.resume_session {
            argv.extend(["resume".into(), id.clone()]);
        }
        let inline = fits_argv(&task.prompt) && !task.prompt.is_empty();
        if inline {
            argv.extend(["--".into(), task.prompt.clone()]);
        } else {
            argv.push("-".into());
        }
        AgentLaunch {
            argv,
            stdin: stdin_for(inline),
        }
    }
    fn parser(&self) -> Box<dyn StreamParser> {
        Box::new(CodexParser::default())
    }
    fn expects_terminal_event(&self) -> bool {
        true
    }
    fn sandbox_needs(&self) -> SandboxNeeds {
        SandboxNeeds {
            env: &["OPENAI_*", "CODEX_*"],
            state_dir: Some(StateDir {
                var: "CODEX_HOME",
                default: ".codex",
                copy: &[
                    "config.toml",
                    "auth.json",
                    "AGENTS.md",
                    "AGENTS.override.md",
                ],
                link: &["prompts", "skills", "rules"],
                home_file: None,
                session: Some("sessions/*/*/*/rollout-*-{id}.jsonl"),
            }),
        }
    }
}

lenient! {
    /// The fields of a kept event that the report and the pane use (see lenient.rs).
    struct Event<'a> {
        thread_id: Str<'a> = "thread_id",
        item: Present<Item<'a>> = "item",
        usage: Present<TurnUsage<'a>> = "usage",
        error: ErrorField<'a> = "error",
        message: Str<'a> = "message",
    }
}

lenient! {
    struct Item<'a> {
        kind: Str<'a> = "type",
        id: Str<'a> = "id",
        command: Str<'a> = "command",
        server: Str<'a> = "server",
        tool: Str<'a> = "tool",
        query: Str<'a> = "query",
        text: LazyStr<'a> = "text",
        aggregated_output: LazyStr<'a> = "aggregated_output",
        status: Str<'a> = "status",
        message: Str<'a> = "message",
        arguments: Present<Value> = "arguments",
        exit_code: Num = "exit_code",
        error: ErrorField<'a> = "error",
        changes: List<Change<'a>> = "changes",
    }
}

lenient! {
    struct Change<'a> {
        path: Str<'a> = "path",
    }
}

lenient! {
    struct ErrorField<'a> {
        message: Str<'a> = "message",
    }
}

lenient! {
    struct TurnUsage<'a> {
        input_tokens: Num = "input_tokens",
        cached_input_tokens: Num = "cached_input_tokens",
        output_tokens: Num = "output_tokens",
        cache_write_input_tokens: Num = "cache_write_input_tokens",
    }
}

/// Reads `codex exec --json`.
#[derive(Default)]
pub struct CodexParser {
    out: Output,
    usage: Option<Usage>,
    turns: u64,
    /// Ids of tool items already counted (an item can be started and completed); a set, as a
    /// long session has tens of thousands.
    tool_items: std::collections::HashSet<String>,
    /// The last turn failed.
    turn_failed: bool,
    /// An `error` event that no completed turn has followed yet.
    pending_error: bool,
    terminal: Option<String>,
    /// The pane takes no more now: its lines are not built (see `StreamParser::set_pane_room`).
    pane_full: bool,
}

impl StreamParser for CodexParser {
    fn on_line(&mut self, line: &[u8]) -> LineResult {
        // Fast path (codex writes `type` first): one pass reads the line, and only a line
        // that fails it takes the slow path, which says whether it was JSON at all.
        if let Some(kind) = leading_type(line) {
            if kind == "item.updated" {
                return match from_line::<serde::de::IgnoredAny>(line) {
                    Some(_) => LineResult::drop_line(),
                    None => LineResult::plain(line),
                };
            }
            if let Some(ev) = from_line::<Event<'_>>(line) {
                return self.on_event(kind, &ev);
            }
        }
        let peeked = peek(line);
        let kind = match &peeked {
            Peeked::Event(Some(k)) => k.as_ref(),
            Peeked::Event(None) => return LineResult::keep(),
            _ => return not_an_event(line, &peeked),
        };
        if kind == "item.updated" {
            return LineResult::drop_line();
        }
        let kind = kind.to_owned();
        match from_line::<Event<'_>>(line) {
            Some(ev) => self.on_event(&kind, &ev),
            None => LineResult::keep(),
        }
    }

    fn set_pane_room(&mut self, room: bool) {
        self.pane_full = !room;
    }

    fn so_far(&self) -> SoFar {
        SoFar {
            usage: self.usage.clone(),
            cost_usd: None,
            turns: Some(self.turns),
            tool_calls: Some(self.tool_items.len() as u64),
        }
    }

    fn finish(&mut self, stderr_tail: &[u8]) -> AgentReport {
        let mut out = std::mem::take(&mut self.out);
        out.usage = self.usage.clone();
        out.turns = Some(self.turns);
        out.tool_calls = Some(self.tool_items.len() as u64);
        finish_common(&mut out, stderr_tail, self.terminal.is_some());
        AgentReport {
            output: out,
            terminal_event: self.terminal.clone(),
            model_error: self.turn_failed || self.pending_error,
        }
    }
}

impl CodexParser {
    fn on_event(&mut self, kind: &str, ev: &Event<'_>) -> LineResult {
        let mut r = LineResult::keep();
        match kind {
            "thread.started" => {
                if let Some(id) = ev.thread_id.get() {
                    self.out.session_id = Some(id.to_owned());
                    r.pane.push(PaneItem::Info(format!("codex thread {id}")));
                }
            }
            "item.started" | "item.completed" => {
                if let Some(item) = &ev.item.0 {
                    self.on_item(item, kind == "item.completed", &mut r);
                }
            }
            "turn.completed" => {
                self.turns += 1;
                self.turn_failed = false;
                self.pending_error = false;
                if let Some(u) = &ev.usage.0 {
                    self.add_usage(u);
                }
                self.mark_terminal(kind, &mut r);
            }
            "turn.failed" => {
                self.turns += 1;
                self.turn_failed = true;
                let msg = ev.error.message.get().unwrap_or("turn failed");
                self.error(msg, &mut r);
                self.mark_terminal(kind, &mut r);
            }
            "error" => {
                self.pending_error = true;
                let msg = ev.message.get().unwrap_or("error");
                // turn.failed usually repeats this message; show it once.
                if mentions_context_overflow(msg) {
                    self.out.context_length_exceeded = true;
                }
                r.pane.push(PaneItem::Error(one_line(msg, 500)));
            }
            _ => {}
        }
        r
    }

    fn error(&mut self, msg: &str, r: &mut LineResult) {
        if mentions_context_overflow(msg) {
            self.out.context_length_exceeded = true;
        }
        if !self.out.errors.iter().any(|e| e == msg) {
            self.out.push_error(msg);
        }
        if !r.pane.iter().any(|p| matches!(p, PaneItem::Error(_))) {
            r.pane.push(PaneItem::Error(one_line(msg, 500)));
        }
    }

    fn on_item(&mut self, item: &Item<'_>, completed: bool, r: &mut LineResult) {
        let str_of = |s: &Str<'_>| s.get().unwrap_or("").to_owned();
        let kind = item.kind.get().unwrap_or("");
        let id = item.id.get().unwrap_or("");
        let is_tool = matches!(
            kind,
            "command_execution" | "file_change" | "mcp_tool_call" | "web_search"
        );
        let first_sight = is_tool && !self.tool_items.contains(id);
        if first_sight && self.pane_full {
            self.tool_items.insert(id.to_owned());
            r.unshown += 1;
        } else if first_sight {
            self.tool_items.insert(id.to_owned());
            let (name, summary) = match kind {
                "command_execution" => ("shell".to_owned(), one_line(&str_of(&item.command), 120)),
                "file_change" => ("apply_patch".to_owned(), changed_paths(item)),
                "mcp_tool_call" => (
                    format!("{}.{}", str_of(&item.server), str_of(&item.tool)),
                    summarize_args(item.arguments.0.as_ref().unwrap_or(&Value::Null)),
                ),
                _ => ("web_search".to_owned(), one_line(&str_of(&item.query), 120)),
            };
            r.pane.push(PaneItem::ToolCall { name, summary });
        }
        if !completed {
            return;
        }
        match kind {
            "agent_message" => {
                let text = item.text.get().unwrap_or("");
                self.out.final_text = Some(text.to_owned());
                if self.pane_full {
                    r.unshown += 1;
                    return;
                }
                r.pane.push(PaneItem::Text(text.to_owned()));
                r.pane.push(PaneItem::TextEnd);
            }
            "command_execution" | "file_change" | "mcp_tool_call" if self.pane_full => {
                r.unshown += 1;
            }
            "command_execution" => {
                let exit = item.exit_code.as_i64();
                let mut summary = abbreviate(item.aggregated_output.get().unwrap_or(""));
                if let Some(code) = exit.filter(|c| *c != 0) {
                    summary = format!("exit {code}: {summary}");
                }
                let is_error = exit.is_some_and(|c| c != 0) || item.status.get() == Some("failed");
                r.pane.push(PaneItem::ToolResult { summary, is_error });
            }
            "file_change" | "mcp_tool_call" => {
                let status = item.status.get().unwrap_or("");
                let is_error = status == "failed";
                let summary = match item.error.message.get() {
                    Some(m) => one_line(m, 160),
                    None => status.to_owned(),
                };
                r.pane.push(PaneItem::ToolResult { summary, is_error });
            }
            // A non-fatal warning from codex.
            "error" => r.pane.push(PaneItem::Error(one_line(
                item.message.get().unwrap_or(""),
                500,
            ))),
            _ => {}
        }
    }

    fn add_usage(&mut self, u: &TurnUsage<'_>) {
        let input = u.input_tokens.tolerant_u64();
        let cached = u.cached_input_tokens.tolerant_u64();
        let output = u.output_tokens.tolerant_u64();
        let turn = Usage {
            input_tokens: input.map(|i| i.saturating_sub(cached.unwrap_or(0))),
            output_tokens: output,
            cache_read_tokens: cached,
            cache_write_tokens: u.cache_write_input_tokens.tolerant_u64(),
            total_tokens: match (input, output) {
                (None, None) => None,
                (i, o) => Some(i.unwrap_or(0) + o.unwrap_or(0)),
            },
        };
        let sum = self.usage.get_or_insert_with(Usage::default);
        super::common::add_usage(sum, &turn);
    }

    fn mark_terminal(&mut self, kind: &str, r: &mut LineResult) {
        if self.terminal.is_some() {
            return;
        }
        self.terminal = Some(kind.to_owned());
        r.terminal = true;
        let mut shown = self.out.clone();
        shown.usage = self.usage.clone();
        shown.turns = Some(self.turns);
        shown.tool_calls = Some(self.tool_items.len() as u64);
        r.pane.push(usage_info(&shown));
    }
}

fn changed_paths(item: &Item<'_>) -> String {
    let paths: Vec<&str> = item.changes.0.iter().filter_map(|c| c.path.get()).collect();
    one_line(&paths.join(", "), 120)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::adapter::common::replay::{Replay, first_line_field, usage};
    use crate::adapter::{LineAction, MAX_INLINE_PROMPT, Stdin};

    macro_rules! transcript {
        ($name:literal) => {
            include_str!(concat!(
                "../../tests/fixtures/transcripts/codex/",
                $name,
                ".jsonl"
            ))
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
        assert_eq!(r.pane_text(), "Hello from the mock model.");
        let rep = &r.report;
        assert_eq!(rep.terminal_event.as_deref(), Some("turn.completed"));
        assert!(!rep.model_error);
        assert_eq!(
            rep.output.final_text.as_deref(),
            Some("Hello from the mock model.")
        );
        assert_eq!(rep.output.session_id, Some(thread_of(t)));
        assert_eq!(rep.output.model, None);
        // codex says input 140 of which 20 cached.
        assert_eq!(rep.output.usage, usage(120, 8, 20, 148));
        assert_eq!(rep.output.cost_usd, None);
        assert_eq!(rep.output.turns, Some(1));
        assert_eq!(rep.output.tool_calls, Some(0));
        // The unknown-model warning is shown, not counted as an error.
        assert!(rep.output.errors.is_empty());
        assert!(
            r.pane()
                .iter()
                .any(|p| matches!(p, PaneItem::Error(e) if e.starts_with("Model metadata")))
        );
        assert!(!rep.output.context_length_exceeded);
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
        assert!(r.pane().contains(&PaneItem::ToolCall {
            name: "shell".into(),
            summary: "/bin/bash -lc 'echo hi > made_by_agent.txt'".into()
        }));
        assert!(r.pane().contains(&PaneItem::ToolResult {
            summary: "(no output)".into(),
            is_error: false
        }));
        let rep = &r.report;
        assert_eq!(
            rep.output.final_text.as_deref(),
            Some("I wrote made_by_agent.txt.")
        );
        assert_eq!(rep.output.tool_calls, Some(1));
        assert_eq!(rep.output.turns, Some(1));
        assert_eq!(rep.output.usage, usage(240, 16, 40, 296));
        assert!(!rep.model_error);
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
        let stdout =
            r#"{"type":"thread.started","thread_id":"01a22a90-4955-7210-b4cc-6e44af3441cd"}"#;
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
        let run = PathBuf::from("/h/runs/r1");
        let attempt = run.join("attempts/1");
        let prompt = attempt.join("prompt.txt");
        let c = ArgvContext {
            run_dir: &run,
            sessions_dir: &run,
            attempt_dir: &attempt,
            prompt_file: &prompt,
        };
        CodexAdapter.launch("/bin/codex", task, &c)
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
        for n in [3 * 1024 * 1024, MAX_INLINE_PROMPT + 1] {
            let l = launch(&TaskSpec {
                prompt: "x".repeat(n),
                ..Default::default()
            });
            assert_eq!(l.stdin, Stdin::PromptFile);
            assert_eq!(
                l.argv,
                ["/bin/codex", "exec", "--json", "--skip-git-repo-check", "-"]
            );
        }
        let resume = TaskSpec {
            prompt: "x".repeat(MAX_INLINE_PROMPT + 1),
            resume_session: Some("t1".into()),
            ..Default::default()
        };
        assert_eq!(launch(&resume).argv[4..], ["resume", "t1", "-"]);
    }
}
