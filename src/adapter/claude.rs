//! The `claude` adapter (Claude Code, `claude -p --output-format stream-json --verbose`).
//!
//! ```text
//! system/init ─ [system/status|api_retry]* ─ (stream_event* ─ assistant ─ stream_event* ─ user)* ─ result
//! ```
//!
//! * Dropped: `stream_event` (raw API stream events, asked for with
//!   `--include-partial-messages` only so the pane shows text as it streams). The `assistant`
//!   lines carry the same content whole.
//! * Terminal: the first `result`.
//! * The report comes from `result`: `result` (final text), `session_id`, `usage`,
//!   `total_cost_usd`, `num_turns`; the model from `system/init`.
//!
//! Common pitfalls:
//! * `subtype: "success"` with `is_error: true` is a failure (an API error, a prompt too long):
//!   `is_error` decides, and `result` then holds the error text, not an answer.
//! * `--allowedTools` takes a variable number of values and would swallow the prompt: every
//!   option is passed as `--name=value` and the prompt comes after `--`.
//! * `total_cost_usd` of a resumed session counts the whole session, `usage` only this call.
//! * In `-p` mode nobody approves tools: the task's tools become `--allowedTools`.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;

use super::lenient::{Flag, LazyContent, LazyStr, List, Num, Present, Str, lenient};

use super::common::{
    Peeked, abbreviate, finish_common, fits_argv, from_line, leading_type, not_an_event, one_line,
    peek, stdin_for, summarize_args, usage_info,
};
use super::{
    Adapter, AgentLaunch, AgentReport, ArgvContext, LineResult, PaneItem, SandboxNeeds, StateDir,
    StreamParser, mentions_context_overflow,
};
use crate::envelope::{Output, SoFar, Usage};
use crate::spec::{AgentKind, TaskSpec};

pub struct ClaudeAdapter;

impl Adapter for ClaudeAdapter {
    fn kind(&self) -> AgentKind {
        AgentKind::Claude
    }
    fn binary(&self) -> Option<&'static str> {
        Some("claude")
    }
    fn install_hint(&self) -> &'static str {
        "install Claude Code with `npm install -g @anthropic-ai/claude-code`"
    }
    fn launch(&self, program: &str, task: &TaskSpec, _ctx: &ArgvContext<'_>) -> AgentLaunch {
        let mut argv: Vec<String> = vec![
            program.to_owned(),
            "-p".into(),
            "--output-format=stream-json".into(),
            "--verbose".into(),
            "--include-partial-messages".into(),
        ];
        if let Some(id) = &task.resume_session {
            argv.push(format!("--resume={id}"));
        }
        if let Some(m) = &task.model {
            argv.push(format!("--model={m}"));
        }
        if let Some(s) = &task.system_prompt {
            argv.push(format!("--system-prompt={s}"));
        }
        if !task.tools.is_empty() {
            argv.push(format!("--allowedTools={}", task.tools.join(",")));
        }
        if let Some(effort) = task.thinking.as_deref().and_then(effort_for) {
            argv.push(format!("--effort={effort}"));
        }
        let inline = fits_argv(&task.prompt) && !task.prompt.is_empty();
        if inline {
            argv.push("--".into());
            argv.push(task.prompt.clone());
        }
        AgentLaunch {
            argv,
            stdin: stdin_for(inline),
        }
    }
    fn parser(&self) -> Box<dyn StreamParser> {
        Box::new(ClaudeParser::default())
    }
    fn expects_terminal_event(&self) -> bool {
        true
    }
    fn thinking_levels(&self) -> &'static [&'static str] {
        // Claude Code's own top effort too.
        &["off", "minimal", "low", "medium", "high", "xhigh", "max"]
    }
    fn sandbox_needs(&self) -> SandboxNeeds {
        SandboxNeeds {
            env: &["ANTHROPIC_*", "CLAUDE_*", "DISABLE_*"],
            state_dir: Some(StateDir {
                var: "CLAUDE_CONFIG_DIR",
                default: ".claude",
                copy: &[
                    ".claude.json",
                    ".credentials.json",
                    "settings.json",
                    "CLAUDE.md",
                    "keybindings.json",
                ],
                link: &[
                    "agents",
                    "commands",
                    "skills",
                    "output-styles",
                    "hooks",
                    "plugins",
                ],
                home_file: Some(".claude.json"),
                session: Some("projects/*/{id}.jsonl"),
            }),
        }
    }
}

/// subpane's thinking levels (pi's: off, minimal, low, medium, high, xhigh) as Claude Code's
/// `--effort` (low, medium, high, xhigh, max). `off` leaves Claude's default; the levels were
/// checked when the run was planned (`Adapter::thinking_levels`).
fn effort_for(level: &str) -> Option<&str> {
    match level {
        "off" | "none" => None,
        "minimal" => Some("low"),
        other => Some(other),
    }
}

/// Reads `claude -p --output-format stream-json`.
#[derive(Default)]
pub struct ClaudeParser {
    out: Output,
    tool_calls: u64,
    /// A text block is streaming (from `stream_event`s), so its `assistant` line adds nothing
    /// to the pane.
    streaming_text: bool,
    /// API errors seen on `assistant` lines, used only if no `result` arrives.
    api_errors: Vec<String>,
    terminal: Option<String>,
    is_error: bool,
    /// Tokens of the messages so far, for the live views (the `result` has the final sum).
    live: LiveUsage,
    /// The pane takes no more now: its lines are not built (see `StreamParser::set_pane_room`).
    pane_full: bool,
}

/// Tokens of the assistant messages so far. A message is reported several times (once per
/// content block, and its output count again in `message_delta`), so each message counts
/// once, with the largest figures seen for it.
#[derive(Default)]
struct LiveUsage {
    /// The messages before the current one.
    done: Usage,
    current_id: Option<String>,
    current: Usage,
}

impl LiveUsage {
    fn message(&mut self, id: Option<&str>, u: &TokenUsage<'_>) {
        let seen = Usage {
            input_tokens: u.input_tokens.tolerant_u64(),
            output_tokens: u.output_tokens.tolerant_u64(),
            cache_read_tokens: u.cache_read_input_tokens.tolerant_u64(),
            cache_write_tokens: u.cache_creation_input_tokens.tolerant_u64(),
            total_tokens: None,
        };
        if id.is_none() || id != self.current_id.as_deref() {
            super::common::add_usage(&mut self.done, &std::mem::take(&mut self.current));
            self.current_id = id.map(str::to_owned);
        }
        max_into(&mut self.current, &seen);
    }

    fn output(&mut self, tokens: u64) {
        let o = &mut self.current.output_tokens;
        *o = Some(o.unwrap_or(0).max(tokens));
    }

    fn total(&self) -> Option<Usage> {
        let mut sum = self.done.clone();
        super::common::add_usage(&mut sum, &self.current);
        if sum == Usage::default() {
            return None;
        }
        sum.total_tokens = Some(
            [
                sum.input_tokens,
                sum.output_tokens,
                sum.cache_read_tokens,
                sum.cache_write_tokens,
            ]
            .iter()
            .flatten()
            .sum(),
        );
        Some(sum)
    }
}

/// Each field of `a` becomes the larger of itself and `b`'s.
fn max_into(a: &mut Usage, b: &Usage) {
    for (x, y) in [
        (&mut a.input_tokens, b.input_tokens),
        (&mut a.output_tokens, b.output_tokens),
        (&mut a.cache_read_tokens, b.cache_read_tokens),
        (&mut a.cache_write_tokens, b.cache_write_tokens),
    ] {
        if let Some(y) = y {
            *x = Some(x.unwrap_or(0).max(y));
        }
    }
}

lenient! {
    /// The fields of a kept event that the report and the pane use (see lenient.rs).
    struct Event<'a> {
        subtype: Str<'a> = "subtype",
        session_id: Str<'a> = "session_id",
        model: Str<'a> = "model",
        attempt: Num = "attempt",
        max_retries: Num = "max_retries",
        error_status: Present<Value> = "error_status",
        error: Present<Value> = "error",
        message: Message<'a> = "message",
        is_api_error_message: Flag = "is_api_error_message",
        is_error: Flag = "is_error",
        result: Str<'a> = "result",
        errors: List<Value> = "errors",
        usage: Present<TokenUsage<'a>> = "usage",
        total_cost_usd: Num = "total_cost_usd",
        num_turns: Num = "num_turns",
        terminal_reason: Str<'a> = "terminal_reason",
    }
}

lenient! {
    struct Message<'a> {
        id: Str<'a> = "id",
        usage: Present<TokenUsage<'a>> = "usage",
        content: List<Block<'a>> = "content",
    }
}

lenient! {
    /// A content block of an `assistant` (text, tool_use) or `user` (tool_result) message.
    struct Block<'a> {
        kind: Str<'a> = "type",
        text: LazyStr<'a> = "text",
        name: Str<'a> = "name",
        input: Present<Value> = "input",
        content: LazyContent<'a> = "content",
        is_error: Flag = "is_error",
    }
}

lenient! {
    struct TokenUsage<'a> {
        input_tokens: Num = "input_tokens",
        output_tokens: Num = "output_tokens",
        cache_read_input_tokens: Num = "cache_read_input_tokens",
        cache_creation_input_tokens: Num = "cache_creation_input_tokens",
    }
}

/// `stream_event`, read only as far as the pane needs.
#[derive(Deserialize)]
struct StreamLine<'a> {
    #[serde(borrow)]
    event: Option<StreamEvent<'a>>,
}

#[derive(Deserialize)]
struct StreamEvent<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    delta: Option<Delta<'a>>,
    /// `message_delta`: the message's output tokens so far.
    #[serde(default)]
    usage: Option<DeltaUsage>,
}

#[derive(Deserialize)]
struct DeltaUsage {
    #[serde(default)]
    output_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
}

impl StreamParser for ClaudeParser {
    fn on_line(&mut self, line: &[u8]) -> LineResult {
        // Fast path (claude writes `type` first, except on `result`): one pass reads the line,
        // and only a line that fails it takes the slow path, which says whether it was JSON.
        if let Some(kind) = leading_type(line) {
            match kind {
                // Nobody can see the text now: a delta is dropped unread (its type read
                // from its first bytes, for which block streams).
                "stream_event"
                    if self.pane_full
                        && let Some(delta) = leading_delta(line) =>
                {
                    if delta == b"text_delta" {
                        self.streaming_text = true;
                    }
                    return LineResult::drop_line();
                }
                "stream_event" => {
                    if let Some(r) = self.on_stream(line) {
                        return r;
                    }
                }
                _ => {
                    if let Some(ev) = from_line::<Event<'_>>(line) {
                        return self.on_event(kind, &ev);
                    }
                }
            }
        }
        let peeked = peek(line);
        let kind = match &peeked {
            Peeked::Event(Some(k)) => k.as_ref(),
            Peeked::Event(None) => return LineResult::keep(),
            _ => return not_an_event(line, &peeked),
        };
        if kind == "stream_event" {
            return self.on_stream(line).unwrap_or_else(LineResult::drop_line);
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
        // Once the `result` came, its figures are the attempt's.
        if self.terminal.is_some() {
            return SoFar {
                usage: self.out.usage.clone(),
                cost_usd: self.out.cost_usd,
                turns: self.out.turns,
                tool_calls: Some(self.tool_calls),
            };
        }
        SoFar {
            usage: self.live.total(),
            cost_usd: None,
            turns: None,
            tool_calls: Some(self.tool_calls),
        }
    }

    fn finish(&mut self, stderr_tail: &[u8]) -> AgentReport {
        let mut out = std::mem::take(&mut self.out);
        if self.terminal.is_none() {
            for e in self.api_errors.drain(..) {
                out.push_error(e);
            }
        }
        if out.tool_calls.is_none() {
            out.tool_calls = Some(self.tool_calls);
        }
        finish_common(&mut out, stderr_tail, self.terminal.is_some());
        AgentReport {
            output: out,
            terminal_event: self.terminal.clone(),
            model_error: self.is_error,
        }
    }
}

/// The delta's type of a line that starts exactly as Claude Code writes a streamed delta,
/// `{"type":"stream_event","event":{"type":"content_block_delta","index":N,"delta":{"type":"…"`,
/// read from those bytes only (the line is not validated: it is dropped either way).
fn leading_delta(line: &[u8]) -> Option<&[u8]> {
    let rest = line.strip_prefix(
        br#"{"type":"stream_event","event":{"type":"content_block_delta","index":"#.as_slice(),
    )?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    let rest = rest[digits..].strip_prefix(br#","delta":{"type":""#.as_slice())?;
    let end = memchr::memchr2(b'"', b'\\', rest)?;
    (digits > 0 && rest[end] == b'"').then(|| &rest[..end])
}

impl ClaudeParser {
    /// A stream event: dropped, its text shown. `None` when the line is not JSON.
    fn on_stream(&mut self, line: &[u8]) -> Option<LineResult> {
        let mut r = LineResult::drop_line();
        let ev = match from_line::<StreamLine<'_>>(line) {
            Some(StreamLine { event: Some(ev) }) => ev,
            Some(_) => return Some(r),
            // Valid JSON of an unexpected shape is still a stream event to drop.
            None => {
                from_line::<serde::de::IgnoredAny>(line)?;
                return Some(r);
            }
        };
        match ev.kind.as_ref() {
            "content_block_delta" => {
                if let Some(Delta {
                    kind: Some(k),
                    text: Some(t),
                }) = ev.delta
                {
                    if k == "text_delta" {
                        self.streaming_text = true;
                        // Nobody can see the text now: it is not copied out.
                        if !self.pane_full {
                            r.pane.push(PaneItem::Text(t.into_owned()));
                        }
                    }
                }
            }
            "message_delta" => {
                if let Some(n) = ev.usage.and_then(|u| u.output_tokens) {
                    self.live.output(n);
                }
            }
            "content_block_stop" if self.streaming_text => {
                self.streaming_text = false;
                r.pane.push(PaneItem::TextEnd);
            }
            _ => {}
        }
        Some(r)
    }

    fn on_event(&mut self, kind: &str, ev: &Event<'_>) -> LineResult {
        let mut r = LineResult::keep();
        let subtype = ev.subtype.get().unwrap_or("");
        match (kind, subtype) {
            ("system", "init") => {
                let id = ev.session_id.get();
                let model = ev.model.get();
                self.out.session_id = id.map(str::to_owned);
                self.out.model = model.map(str::to_owned);
                r.pane.push(PaneItem::Info(format!(
                    "claude session {} · model {}",
                    id.unwrap_or("?"),
                    model.unwrap_or("?")
                )));
            }
            ("system", "api_retry") => {
                let attempt = ev.attempt.tolerant_u64().unwrap_or(0);
                let max = ev.max_retries.tolerant_u64().unwrap_or(0);
                let status = ev
                    .error_status
                    .0
                    .as_ref()
                    .map(Value::to_string)
                    .unwrap_or_default();
                let err = ev.error.0.as_ref().and_then(Value::as_str).unwrap_or("");
                r.pane.push(PaneItem::Info(format!(
                    "retry {attempt}/{max} after: {status} {err}"
                )));
            }
            ("assistant", _) => self.on_assistant(ev, &mut r),
            ("user", _) => on_user(ev, self.pane_full, &mut r),
            ("result", _) => self.on_result(ev, &mut r),
            _ => {}
        }
        r
    }

    fn on_assistant(&mut self, ev: &Event<'_>, r: &mut LineResult) {
        let msg = &ev.message;
        if let Some(u) = &msg.usage.0 {
            self.live.message(msg.id.get(), u);
        }
        let api_error = ev.is_api_error_message.0 == Some(true)
            || ev.error.0.as_ref().is_some_and(|e| !e.is_null());
        for b in &msg.content.0 {
            match b.kind.get() {
                Some("text") => {
                    let text = b.text.get().unwrap_or("");
                    if api_error {
                        self.api_errors.push(text.to_owned());
                        r.pane.push(PaneItem::Error(one_line(text, 500)));
                    } else if !self.streaming_text && self.pane_full {
                        r.unshown += 1;
                    } else if !self.streaming_text {
                        r.pane.push(PaneItem::Text(text.to_owned()));
                        r.pane.push(PaneItem::TextEnd);
                    }
                }
                Some("tool_use") if self.pane_full => {
                    self.tool_calls += 1;
                    r.unshown += 1;
                }
                Some("tool_use") => {
                    self.tool_calls += 1;
                    let name = b.name.get().unwrap_or("tool");
                    let summary = summarize_args(b.input.0.as_ref().unwrap_or(&Value::Null));
                    r.pane.push(PaneItem::ToolCall {
                        name: name.to_owned(),
                        summary,
                    });
                }
                _ => {}
            }
        }
    }

    fn on_result(&mut self, ev: &Event<'_>, r: &mut LineResult) {
        let subtype = ev.subtype.get().unwrap_or("");
        // `is_error` first: a failed call can say "success".
        let is_error = ev.is_error.0.unwrap_or(subtype != "success")
            || (!subtype.is_empty() && subtype != "success");
        let text = ev.result.get();
        let out = &mut self.out;
        if let Some(id) = ev.session_id.get() {
            out.session_id = Some(id.to_owned());
        }
        if is_error {
            out.final_text = None;
            match text {
                Some(t) if !t.is_empty() => out.push_error(t),
                _ => out.push_error(format!("claude reported {subtype}")),
            }
        } else {
            out.final_text = text.map(str::to_owned);
        }
        for e in &ev.errors.0 {
            out.push_error(e.as_str().map_or_else(|| e.to_string(), str::to_owned));
        }
        if let Some(u) = &ev.usage.0 {
            let input = u.input_tokens.tolerant_u64();
            let output = u.output_tokens.tolerant_u64();
            let read = u.cache_read_input_tokens.tolerant_u64();
            let write = u.cache_creation_input_tokens.tolerant_u64();
            let total = [input, output, read, write].iter().flatten().sum();
            out.usage = Some(Usage {
                input_tokens: input,
                output_tokens: output,
                cache_read_tokens: read,
                cache_write_tokens: write,
                total_tokens: Some(total),
            });
        }
        out.cost_usd = ev.total_cost_usd.as_f64();
        out.turns = ev.num_turns.tolerant_u64();
        out.tool_calls = Some(self.tool_calls);
        let reason = ev.terminal_reason.get().unwrap_or("");
        if reason == "prompt_too_long" || out.errors.iter().any(|e| mentions_context_overflow(e)) {
            out.context_length_exceeded = true;
        }
        self.is_error |= is_error;
        if is_error {
            if let Some(e) = out.errors.last() {
                r.pane.push(PaneItem::Error(one_line(e, 500)));
            }
        }
        if self.terminal.is_none() {
            self.terminal = Some("result".to_owned());
            r.terminal = true;
            r.pane.push(usage_info(&self.out));
        }
    }
}

fn on_user(ev: &Event<'_>, pane_full: bool, r: &mut LineResult) {
    for b in &ev.message.content.0 {
        if b.kind.get() == Some("tool_result") && pane_full {
            r.unshown += 1;
        } else if b.kind.get() == Some("tool_result") {
            r.pane.push(PaneItem::ToolResult {
                summary: abbreviate(b.content.get()),
                is_error: b.is_error.0.unwrap_or(false),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::adapter::common::replay::Replay;
    use crate::adapter::{LineAction, MAX_INLINE_PROMPT, Stdin};

    macro_rules! transcript {
        ($name:literal) => {
            include_str!(concat!(
                "../../tests/fixtures/transcripts/claude/",
                $name,
                ".jsonl"
            ))
        };
    }

    fn replay(t: &str) -> Replay {
        Replay::run(ClaudeAdapter.parser(), t, "")
    }

    fn session_of(t: &str) -> String {
        let first: Value = serde_json::from_str(t.lines().next().unwrap()).unwrap();
        first["session_id"].as_str().unwrap().to_owned()
    }

    fn assert_cost(got: Option<f64>, want: f64) {
        let got = got.expect("a cost");
        assert!((got - want).abs() < 1e-9, "cost {got} != {want}");
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
        assert_eq!(r.pane_text(), "Hello from the mock model.");
        assert_eq!(
            r.pane().iter().filter(|p| **p == PaneItem::TextEnd).count(),
            1
        );
        let rep = &r.report;
        assert_eq!(rep.terminal_event.as_deref(), Some("result"));
        assert!(!rep.model_error);
        assert_eq!(
            rep.output.final_text.as_deref(),
            Some("Hello from the mock model.")
        );
        assert_eq!(rep.output.session_id, Some(session_of(t)));
        assert_eq!(rep.output.model.as_deref(), Some("mock-model"));
        assert_eq!(
            rep.output.usage,
            Some(Usage {
                input_tokens: Some(120),
                output_tokens: Some(8),
                cache_read_tokens: Some(20),
                cache_write_tokens: Some(0),
                total_tokens: Some(148),
            })
        );
        assert_cost(rep.output.cost_usd, 0.000644);
        assert_eq!(rep.output.turns, Some(1));
        assert_eq!(rep.output.tool_calls, Some(0));
        assert!(rep.output.errors.is_empty());
        assert!(!rep.output.context_length_exceeded);
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
        assert!(r.pane().contains(&PaneItem::ToolCall {
            name: "Bash".into(),
            summary: "echo hi > made_by_agent.txt".into()
        }));
        assert!(r.pane().contains(&PaneItem::ToolResult {
            summary: "(Bash completed with no output)".into(),
            is_error: false
        }));
        let rep = &r.report;
        assert_eq!(
            rep.output.final_text.as_deref(),
            Some("I wrote made_by_agent.txt.")
        );
        assert_eq!(rep.output.turns, Some(2));
        assert_eq!(rep.output.tool_calls, Some(1));
        assert_eq!(rep.output.usage.as_ref().unwrap().total_tokens, Some(296));
        assert_cost(rep.output.cost_usd, 0.001288);
        assert!(!rep.model_error);
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
        assert!(
            r.pane()
                .iter()
                .any(|p| matches!(p, PaneItem::Info(i) if i.starts_with("retry 1/1")))
        );
        assert!(
            r.pane()
                .iter()
                .any(|p| matches!(p, PaneItem::Error(e) if e.starts_with("API Error: 500")))
        );
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
        let assistant =
            br#"{"type":"assistant","message":{"content":[{"type":"text","text":"hi"}]}}"#;
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
        let run = PathBuf::from("/h/runs/r1");
        let attempt = run.join("attempts/1");
        let prompt = attempt.join("prompt.txt");
        let c = ArgvContext {
            run_dir: &run,
            sessions_dir: &run,
            attempt_dir: &attempt,
            prompt_file: &prompt,
        };
        ClaudeAdapter.launch("/bin/claude", task, &c)
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
        for n in [3 * 1024 * 1024, MAX_INLINE_PROMPT + 1] {
            let l = launch(&TaskSpec {
                prompt: "x".repeat(n),
                ..Default::default()
            });
            assert_eq!(l.stdin, Stdin::PromptFile);
            assert_eq!(l.argv, BASE);
        }
    }
}
