//! The `pi` adapter (`@mariozechner/pi-coding-agent`, `pi --mode json -p`).
//!
//! ```text
//! session ─ agent_start ─ turn_start ─ message_start/update…/end ─ tool_execution_* ─ turn_end
//!          … ─ agent_end ─ [auto_retry_start ─ agent_start … agent_end]* ─ [auto_retry_end]
//! ```
//!
//! * Dropped: `message_update` (token deltas, each repeating the whole partial message) and
//!   `tool_execution_update` (partial tool output; `tool_execution_end` has all of it).
//! * Reduced: `turn_end` and `agent_end` lose `message`/`toolResults`/`messages`, which repeat
//!   what the `message_end` lines already recorded.
//! * Terminal: the `agent_end` after which pi does not retry. Builds that say so carry
//!   `willRetry`; older ones (0.73) do not, so a failed `agent_end` whose error pi would retry
//!   is not terminal, and `auto_retry_end {success: false}` (retries exhausted) is. A later
//!   `agent_settled` is terminal when nothing before it was.
//!
//! Common pitfalls:
//! * pi exits 0 after a failed model call: `stopReason: "error"` on the last assistant
//!   `message_end` is the failure.
//! * pi takes an argument starting with `@` as a file to attach and one starting with `-` as
//!   an option, and has no `--`: such prompts go through stdin (pi reads piped stdin as the
//!   prompt, trimmed).
//! * On a context overflow pi starts compacting (`compaction_start`) and exits before it ends.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::lenient::{Content, Flag, Num, Present, Str, lenient};

use super::common::{
    Peeked, abbreviate, add_usage, finish_common, fits_argv, leading_type, not_an_event, one_line,
    peek, stdin_for, summarize_args, usage_info,
};
use super::{
    Adapter, AgentLaunch, AgentReport, ArgvContext, LineAction, LineResult, PaneItem, SandboxNeeds,
    StateDir, StreamParser, mentions_context_overflow,
};
use crate::envelope::{Output, SoFar, Usage};
use crate::spec::{AgentKind, TaskSpec};

pub struct PiAdapter;

impl Adapter for PiAdapter {
    fn kind(&self) -> AgentKind {
        AgentKind::Pi
    }
    fn binary(&self) -> Option<&'static str> {
        Some("pi")
    }
    fn install_hint(&self) -> &'static str {
        "install pi with `npm install -g @mariozechner/pi-coding-agent`"
    }
    fn launch(&self, program: &str, task: &TaskSpec, ctx: &ArgvContext<'_>) -> AgentLaunch {
        let sessions = ctx.sessions_dir;
        let mut argv: Vec<String> = vec![
            program.to_owned(),
            "--mode".into(),
            "json".into(),
            "-p".into(),
            // Kept (not --no-session) in a directory shared by all runs, so any later run can
            // resume the session with --session ID.
            "--session-dir".into(),
            sessions.to_string_lossy().into_owned(),
        ];
        // pi takes the word after each of these options as its value, whatever it looks like.
        if let Some(id) = &task.resume_session {
            argv.extend(["--session".into(), id.clone()]);
        }
        if let Some(m) = &task.model {
            argv.extend(["--model".into(), m.clone()]);
        }
        if let Some(s) = &task.system_prompt {
            argv.extend(["--system-prompt".into(), s.clone()]);
        }
        if !task.tools.is_empty() {
            argv.extend(["--tools".into(), task.tools.join(",")]);
        }
        if let Some(t) = &task.thinking {
            argv.extend(["--thinking".into(), t.clone()]);
        }
        let p = &task.prompt;
        let inline = fits_argv(p) && !p.is_empty() && !p.starts_with('-') && !p.starts_with('@');
        if inline {
            argv.push(p.clone());
        }
        AgentLaunch {
            argv,
            stdin: stdin_for(inline),
        }
    }
    fn parser(&self) -> Box<dyn StreamParser> {
        Box::new(PiParser::default())
    }
    fn expects_terminal_event(&self) -> bool {
        true
    }
    fn sandbox_needs(&self) -> SandboxNeeds {
        SandboxNeeds {
            // pi talks to many providers; their keys and base URLs.
            env: &[
                "PI_*",
                "OPENAI_*",
                "ANTHROPIC_*",
                "GEMINI_*",
                "GOOGLE_*",
                "GROQ_*",
                "MISTRAL_*",
                "XAI_*",
                "OPENROUTER_*",
                "CEREBRAS_*",
                "DEEPSEEK_*",
            ],
            state_dir: Some(StateDir {
                var: "PI_CODING_AGENT_DIR",
                default: ".pi/agent",
                copy: &[
                    "settings.json",
                    "models.json",
                    "auth.json",
                    "oauth.json",
                    "keybindings.json",
                    "AGENTS.md",
                    "CLAUDE.md",
                    "SYSTEM.md",
                    "APPEND_SYSTEM.md",
                ],
                link: &["extensions", "skills", "prompts", "themes", "tools", "bin"],
                home_file: None,
                // pi's sessions are kept by subpane (`--session-dir`), not here.
                session: None,
            }),
        }
    }
}

/// Reads `pi --mode json`.
#[derive(Default)]
pub struct PiParser {
    out: Output,
    usage: Usage,
    cost: Option<f64>,
    turns: u64,
    tool_calls: u64,
    /// The last assistant message: its stop reason and error.
    last_stop: Option<String>,
    last_error: Option<String>,
    /// Errors of attempts pi is retrying; dropped if a retry succeeds.
    retried_errors: Vec<String>,
    terminal: Option<String>,
    /// The pane takes more text (see `StreamParser::set_pane_room`).
    pane_full: bool,
    /// The current message came with deltas (shown as they came, or dropped unread). Without
    /// any, as when `events.jsonl` is read back (`logs --pretty`), its `message_end` shows
    /// the whole text.
    streamed: bool,
}

lenient! {
    /// The fields of a kept event that the report and the pane use (see lenient.rs).
    #[allow(non_snake_case)]
    struct Event<'a> {
        id: Str<'a> = "id",
        message: Message<'a> = "message",
        tool_name: Str<'a> = "toolName",
        args: Present<Value> = "args",
        result: ToolOutput<'a> = "result",
        is_error: Flag = "isError",
        attempt: Num = "attempt",
        max_attempts: Num = "maxAttempts",
        error_message: Str<'a> = "errorMessage",
        success: Flag = "success",
        reason: Str<'a> = "reason",
    }
}

lenient! {
    struct Message<'a> {
        role: Str<'a> = "role",
        stop_reason: Str<'a> = "stopReason",
        error_message: Str<'a> = "errorMessage",
        model: Str<'a> = "model",
        usage: Present<MessageUsage<'a>> = "usage",
        content: Content<'a> = "content",
    }
}

lenient! {
    struct MessageUsage<'a> {
        input: Num = "input",
        output: Num = "output",
        cache_read: Num = "cacheRead",
        cache_write: Num = "cacheWrite",
        total_tokens: Num = "totalTokens",
        cost: Cost<'a> = "cost",
    }
}

lenient! {
    struct Cost<'a> {
        total: Num = "total",
    }
}

/// `tool_execution_end`'s `result`: the text of its `content`, or of itself when it has none
/// (a string or an array of text blocks).
#[derive(Default)]
struct ToolOutput<'a>(Content<'a>);

impl<'de: 'a, 'a> Deserialize<'de> for ToolOutput<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{IgnoredAny, MapAccess};
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for V<'a> {
            type Value = ToolOutput<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<ToolOutput<'a>, A::Error> {
                let mut out = Content::default();
                while let Some(k) = a.next_key::<super::lenient::Key<'de>>()? {
                    if k.0 == "content" {
                        out = a.next_value()?;
                    } else {
                        a.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(ToolOutput(out))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                a: A,
            ) -> Result<ToolOutput<'a>, A::Error> {
                Content::deserialize(serde::de::value::SeqAccessDeserializer::new(a))
                    .map(ToolOutput)
            }
            fn visit_borrowed_str<E: serde::de::Error>(
                self,
                s: &'de str,
            ) -> Result<ToolOutput<'a>, E> {
                Ok(ToolOutput(Content(std::borrow::Cow::Borrowed(s))))
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<ToolOutput<'a>, E> {
                Ok(ToolOutput(Content(std::borrow::Cow::Owned(s.to_owned()))))
            }
            fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<ToolOutput<'a>, E> {
                Ok(ToolOutput::default())
            }
            fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<ToolOutput<'a>, E> {
                Ok(ToolOutput::default())
            }
            fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<ToolOutput<'a>, E> {
                Ok(ToolOutput::default())
            }
            fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<ToolOutput<'a>, E> {
                Ok(ToolOutput::default())
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<ToolOutput<'a>, E> {
                Ok(ToolOutput::default())
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// `message_update`, read only as far as the pane needs.
#[derive(Deserialize)]
struct Update<'a> {
    #[serde(rename = "assistantMessageEvent", borrow)]
    event: Option<UpdateEvent<'a>>,
}

#[derive(Deserialize)]
struct UpdateEvent<'a> {
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    delta: Option<std::borrow::Cow<'a, str>>,
}

impl StreamParser for PiParser {
    fn on_line(&mut self, line: &[u8]) -> LineResult {
        // Fast path (most of a pi stream): the type is read from the first bytes and the line
        // is parsed exactly once, by the parse that needs it; a line that fails that parse is
        // not JSON and goes where `peek` would have sent it.
        if let Some(kind) = leading_type(line) {
            return match kind {
                // Nobody can see the text now: a delta is dropped unread.
                "message_update" if self.pane_full => {
                    self.streamed = true;
                    LineResult::drop_line()
                }
                "message_update" => self
                    .on_update(line)
                    .unwrap_or_else(|| LineResult::plain(line)),
                "tool_execution_update" => {
                    match serde_json::from_slice::<serde::de::IgnoredAny>(line) {
                        Ok(_) => LineResult::drop_line(),
                        Err(_) => LineResult::plain(line),
                    }
                }
                _ => self
                    .on_kept(kind, line)
                    .unwrap_or_else(|| LineResult::plain(line)),
            };
        }
        let peeked = peek(line);
        let kind = match &peeked {
            Peeked::Event(Some(k)) => k.as_ref(),
            Peeked::Event(None) => return LineResult::keep(),
            _ => return not_an_event(line, &peeked),
        };
        match kind {
            "message_update" => self.on_update(line).unwrap_or_else(LineResult::drop_line),
            "tool_execution_update" => LineResult::drop_line(),
            _ => {
                let kind = kind.to_owned();
                self.on_kept(&kind, line).unwrap_or_else(LineResult::keep)
            }
        }
    }

    fn set_pane_room(&mut self, room: bool) {
        self.pane_full = !room;
    }

    fn so_far(&self) -> SoFar {
        SoFar {
            usage: (self.usage != Usage::default()).then(|| self.usage.clone()),
            cost_usd: self.cost,
            turns: Some(self.turns),
            tool_calls: Some(self.tool_calls),
        }
    }

    fn finish(&mut self, stderr_tail: &[u8]) -> AgentReport {
        let mut out = std::mem::take(&mut self.out);
        for e in self.retried_errors.drain(..) {
            out.push_error(e);
        }
        if self.usage != Usage::default() {
            out.usage = Some(self.usage.clone());
        }
        out.cost_usd = self.cost;
        out.turns = Some(self.turns);
        out.tool_calls = Some(self.tool_calls);
        finish_common(&mut out, stderr_tail, self.terminal.is_some());
        AgentReport {
            output: out,
            terminal_event: self.terminal.clone(),
            model_error: self.last_stop.as_deref() == Some("error"),
        }
    }
}

impl PiParser {
    /// A kept event, read once: typed and borrowed for what the report and the pane use, a
    /// map only for the transcript repeats that are written back reduced. `None` when the
    /// line does not parse.
    fn on_kept(&mut self, kind: &str, line: &[u8]) -> Option<LineResult> {
        match kind {
            "turn_end" | "agent_end" => {
                let ev = serde_json::from_slice::<Map<String, Value>>(line).ok()?;
                Some(self.on_repeat(kind, ev))
            }
            "session"
            | "message_end"
            | "tool_execution_start"
            | "tool_execution_end"
            | "auto_retry_start"
            | "auto_retry_end"
            | "compaction_start" => {
                let ev = serde_json::from_slice::<Event<'_>>(line).ok()?;
                Some(self.on_event(kind, &ev))
            }
            _ => {
                serde_json::from_slice::<serde::de::IgnoredAny>(line).ok()?;
                Some(self.on_event(kind, &Event::default()))
            }
        }
    }

    /// A delta: dropped, shown in the pane. `None` when the line is not valid JSON.
    fn on_update(&mut self, line: &[u8]) -> Option<LineResult> {
        self.streamed = true;
        let mut r = LineResult::drop_line();
        let update = match serde_json::from_slice::<Update<'_>>(line) {
            Ok(u) => u,
            // Valid JSON of an unexpected shape is still a delta to drop.
            Err(_) => {
                serde_json::from_slice::<serde::de::IgnoredAny>(line).ok()?;
                return Some(r);
            }
        };
        if let Update { event: Some(ev) } = update {
            match ev.kind.as_ref() {
                "text_delta" => {
                    if let Some(d) = ev.delta {
                        r.pane.push(PaneItem::Text(d.into_owned()));
                    }
                }
                "text_end" => r.pane.push(PaneItem::TextEnd),
                _ => {}
            }
        }
        Some(r)
    }

    fn on_event(&mut self, kind: &str, ev: &Event<'_>) -> LineResult {
        let mut r = LineResult::keep();
        match kind {
            "session" => {
                if let Some(id) = ev.id.get() {
                    self.out.session_id = Some(id.to_owned());
                    r.pane.push(PaneItem::Info(format!("pi session {id}")));
                }
            }
            "message_end" if ev.message.role.get() == Some("assistant") => {
                self.on_assistant(&ev.message, &mut r);
            }
            "tool_execution_start" | "tool_execution_end" if self.pane_full => {
                if kind == "tool_execution_start" {
                    self.tool_calls += 1;
                }
                r.unshown += 1;
            }
            "tool_execution_start" => {
                self.tool_calls += 1;
                let name = ev.tool_name.get().unwrap_or("tool");
                let summary = summarize_args(ev.args.0.as_ref().unwrap_or(&Value::Null));
                r.pane.push(PaneItem::ToolCall {
                    name: name.to_owned(),
                    summary,
                });
            }
            "tool_execution_end" => {
                r.pane.push(PaneItem::ToolResult {
                    summary: abbreviate(&ev.result.0.0),
                    is_error: ev.is_error.0.unwrap_or(false),
                });
            }
            "agent_settled" => self.mark_terminal("agent_settled", &mut r),
            "auto_retry_start" => {
                let attempt = ev.attempt.as_u64().unwrap_or(0);
                let max = ev.max_attempts.as_u64().unwrap_or(0);
                let err = ev.error_message.get().unwrap_or("");
                r.pane.push(PaneItem::Info(format!(
                    "retry {attempt}/{max} after: {}",
                    one_line(err, 200)
                )));
            }
            "auto_retry_end" => {
                if ev.success.0 == Some(true) {
                    self.retried_errors.clear();
                } else {
                    self.mark_terminal("auto_retry_end", &mut r);
                }
            }
            "compaction_start" => {
                let reason = ev.reason.get().unwrap_or("");
                if reason == "overflow" {
                    self.out.context_length_exceeded = true;
                }
                r.pane
                    .push(PaneItem::Info(format!("compacting the context ({reason})")));
            }
            _ => {}
        }
        r
    }

    /// `turn_end` and `agent_end`, written back without the transcript they repeat.
    fn on_repeat(&mut self, kind: &str, mut ev: Map<String, Value>) -> LineResult {
        let mut r = LineResult::keep();
        if kind == "turn_end" {
            self.turns += 1;
            ev.remove("message");
            ev.remove("toolResults");
            r.action = reduced(&ev);
            return r;
        }
        let will_retry = ev.get("willRetry").and_then(Value::as_bool);
        ev.remove("messages");
        r.action = reduced(&ev);
        let last_will_be_retried = self.last_stop.as_deref() == Some("error")
            && self.last_error.as_deref().is_some_and(pi_retries);
        let terminal = match will_retry {
            Some(w) => !w,
            None => !last_will_be_retried,
        };
        if terminal {
            self.mark_terminal("agent_end", &mut r);
        }
        r
    }

    fn on_assistant(&mut self, msg: &Message<'_>, r: &mut LineResult) {
        let stop = msg.stop_reason.get().map(str::to_owned);
        let error = msg.error_message.get().map(str::to_owned);
        if let Some(m) = msg.model.get() {
            self.out.model = Some(m.to_owned());
        }
        if let Some(u) = &msg.usage.0 {
            let usage = Usage {
                input_tokens: u.input.tolerant_u64(),
                output_tokens: u.output.tolerant_u64(),
                cache_read_tokens: u.cache_read.tolerant_u64(),
                cache_write_tokens: u.cache_write.tolerant_u64(),
                total_tokens: u.total_tokens.tolerant_u64(),
            };
            add_usage(&mut self.usage, &usage);
            if let Some(c) = u.cost.total.as_f64() {
                self.cost = Some(self.cost.unwrap_or(0.0) + c);
            }
        }
        let text = msg.content.0.to_string();
        if !std::mem::take(&mut self.streamed) && !text.is_empty() {
            if self.pane_full {
                r.unshown += 1;
            } else {
                r.pane.push(PaneItem::Text(text.clone()));
                r.pane.push(PaneItem::TextEnd);
            }
        }
        self.out.final_text = (!text.is_empty()).then_some(text);
        if stop.as_deref() == Some("error") {
            let e = error
                .clone()
                .unwrap_or_else(|| "model call failed".to_owned());
            if mentions_context_overflow(&e) {
                self.out.context_length_exceeded = true;
            }
            r.pane.push(PaneItem::Error(one_line(&e, 500)));
            if pi_retries(&e) {
                self.retried_errors.push(e);
            } else {
                self.out.push_error(e);
            }
        }
        self.last_stop = stop;
        self.last_error = error;
    }

    fn mark_terminal(&mut self, kind: &str, r: &mut LineResult) {
        if self.terminal.is_some() {
            return;
        }
        self.terminal = Some(kind.to_owned());
        r.terminal = true;
        let mut shown = self.out.clone();
        shown.usage = Some(self.usage.clone());
        shown.cost_usd = self.cost;
        shown.turns = Some(self.turns);
        shown.tool_calls = Some(self.tool_calls);
        r.pane.push(usage_info(&shown));
    }
}

/// The line without its transcript repeat, when that changed anything.
fn reduced(ev: &Map<String, Value>) -> LineAction {
    match serde_json::to_vec(ev) {
        Ok(v) => LineAction::Replace(v),
        Err(_) => LineAction::Keep,
    }
}

/// Whether pi (0.73) retries a failed call with this error message, as its own
/// `_isRetryableError` decides: overload, rate limits, 5xx, network trouble; never a context
/// overflow.
fn pi_retries(error: &str) -> bool {
    if mentions_context_overflow(error) {
        return false;
    }
    let e = error.to_ascii_lowercase();
    const PLAIN: [&str; 19] = [
        "overloaded",
        "too many requests",
        "429",
        "500",
        "502",
        "503",
        "504",
        "fetch failed",
        "other side closed",
        "reset before headers",
        "socket hang up",
        "ended without",
        "http2 request did not get a response",
        "timeout",
        "timed out",
        "time out",
        "terminated",
        "upstream connect",
        "upstream-connect",
    ];
    // pi's pattern allows one character between the words ("rate.?limit").
    const SPLIT: [(&str, &str); 12] = [
        ("provider", "returned"),
        ("rate", "limit"),
        ("service", "unavailable"),
        ("server", "error"),
        ("internal", "error"),
        ("network", "error"),
        ("connection", "error"),
        ("connection", "refused"),
        ("connection", "lost"),
        ("websocket", "closed"),
        ("websocket", "error"),
        ("retry", "delay"),
    ];
    PLAIN.iter().any(|p| e.contains(p))
        || SPLIT.iter().any(|(a, b)| {
            e.match_indices(a).any(|(i, _)| {
                let rest = &e[i + a.len()..];
                rest.starts_with(b)
                    || rest
                        .char_indices()
                        .nth(1)
                        .is_some_and(|(j, _)| rest[j..].starts_with(b))
            })
        })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::adapter::MAX_INLINE_PROMPT;
    use crate::adapter::Stdin;
    use crate::adapter::common::replay::{Replay, first_line_field, usage};

    macro_rules! transcript {
        ($name:literal) => {
            include_str!(concat!(
                "../../tests/fixtures/transcripts/pi/",
                $name,
                ".jsonl"
            ))
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
        assert_eq!(r.pane_text(), "Hello from the mock model.");
        assert!(r.pane().contains(&PaneItem::TextEnd));
        let rep = &r.report;
        assert_eq!(rep.terminal_event.as_deref(), Some("agent_end"));
        assert!(!rep.model_error);
        assert_eq!(
            rep.output.final_text.as_deref(),
            Some("Hello from the mock model.")
        );
        assert_eq!(rep.output.session_id, Some(session_of(t)));
        assert_eq!(rep.output.model.as_deref(), Some("mock-model"));
        assert_eq!(rep.output.usage, usage(120, 8, 20, 148));
        assert!((rep.output.cost_usd.unwrap() - 0.000146).abs() < 1e-12);
        assert_eq!(rep.output.turns, Some(1));
        assert_eq!(rep.output.tool_calls, Some(0));
        assert!(rep.output.errors.is_empty());
        assert!(!rep.output.context_length_exceeded);
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
        assert!(r.pane().contains(&PaneItem::ToolCall {
            name: "bash".into(),
            summary: "echo hi > made_by_agent.txt".into()
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
        assert_eq!(rep.output.turns, Some(2));
        assert_eq!(rep.output.tool_calls, Some(1));
        assert_eq!(rep.output.usage, usage(240, 16, 40, 296));
        assert!((rep.output.cost_usd.unwrap() - 0.000292).abs() < 1e-12);
        assert!(!rep.model_error);
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
        assert!(
            r.pane()
                .iter()
                .any(|p| matches!(p, PaneItem::Error(e) if e.starts_with("500")))
        );
        assert!(
            r.pane()
                .iter()
                .any(|p| matches!(p, PaneItem::Info(i) if i.starts_with("retry 1/2")))
        );
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
        let end =
            p.on_line(br#"{"type":"agent_end","messages":[{"role":"user"}],"willRetry":false}"#);
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

    fn ctx() -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
        (
            "/h/runs/r1".into(),
            "/h/runs/r1/attempts/2".into(),
            "/h/runs/r1/attempts/2/prompt.txt".into(),
        )
    }

    fn launch(task: &TaskSpec) -> AgentLaunch {
        let (run, attempt, prompt) = ctx();
        let sessions = std::path::PathBuf::from("/h/sessions/pi");
        let c = ArgvContext {
            run_dir: &run,
            sessions_dir: &sessions,
            attempt_dir: &attempt,
            prompt_file: &prompt,
        };
        PiAdapter.launch("/bin/pi", task, &c)
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
}
