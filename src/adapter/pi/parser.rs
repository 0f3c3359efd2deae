//! Reading `pi --mode json`: what is kept, dropped or reduced, the pane's lines, and the
//! report (see the module docs of `pi`).

use super::events::*;
use super::*;

/// Reads `pi --mode json`.
#[derive(Default)]
pub struct PiParser {
    /// `held_errors`: the errors of calls pi retries, dropped when a retry succeeds.
    c: Common,
    usage: Usage,
    cost: Option<f64>,
    turns: u64,
    /// The last assistant message: its stop reason and error.
    last_stop: Option<String>,
    last_error: Option<String>,
    /// The current message came with deltas (shown as they came, or dropped unread). Without
    /// any, as when `events.jsonl` is read back (`logs --pretty`), its `message_end` shows
    /// the whole text.
    streamed: bool,
}

impl Grammar for PiParser {
    fn say(&mut self, what: crate::adapter::Say<'_>) -> Option<Vec<u8>> {
        super::say(what)
    }

    const UNPARSED_IS_PLAIN: bool = true;

    fn common(&self) -> &Common {
        &self.c
    }
    fn common_mut(&mut self) -> &mut Common {
        &mut self.c
    }

    fn is_delta(kind: &str) -> bool {
        matches!(kind, "message_update" | "tool_execution_update")
    }

    fn drop_unread(&mut self, kind: &str, _line: &[u8]) -> Option<LineResult> {
        // Nobody can see the text now: a delta is dropped unread.
        (kind == "message_update").then(|| {
            self.streamed = true;
            LineResult::drop_line()
        })
    }

    fn on_delta(&mut self, kind: &str, line: &[u8]) -> Option<LineResult> {
        match kind {
            "message_update" => self.on_update(line),
            _ => from_line::<serde::de::IgnoredAny>(line).map(|_| LineResult::drop_line()),
        }
    }

    /// A kept event, read once: typed and borrowed for what the report and the pane use, a
    /// map only for the transcript repeats that are written back reduced.
    fn on_kept(&mut self, kind: &str, line: &[u8]) -> Option<LineResult> {
        match kind {
            "turn_end" | "agent_end" => {
                let ev = from_line::<Map<String, Value>>(line)?;
                Some(self.on_repeat(kind, ev))
            }
            "session"
            | "response"
            | "message_end"
            | "tool_execution_start"
            | "tool_execution_end"
            | "auto_retry_start"
            | "auto_retry_end"
            | "compaction_start" => {
                let ev = from_line::<Event<'_>>(line)?;
                Some(self.on_event(kind, &ev))
            }
            _ => {
                from_line::<serde::de::IgnoredAny>(line)?;
                Some(self.on_event(kind, &Event::default()))
            }
        }
    }

    fn figures(&self) -> Figures {
        Figures {
            usage: (self.usage != Usage::default()).then(|| self.usage.clone()),
            cost_usd: self.cost,
            turns: Some(self.turns),
        }
    }

    fn model_error(&self) -> bool {
        self.last_stop.as_deref() == Some("error")
    }
}

impl PiParser {
    /// A delta: dropped, shown in the pane. `None` when the line is not valid JSON.
    fn on_update(&mut self, line: &[u8]) -> Option<LineResult> {
        self.streamed = true;
        let mut r = LineResult::drop_line();
        let update = match from_line::<Update<'_>>(line) {
            Some(u) => u,
            // Valid JSON of an unexpected shape is still a delta to drop.
            None => {
                from_line::<serde::de::IgnoredAny>(line)?;
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
                    self.c.out.session_id = Some(id.to_owned());
                    r.pane.push(PaneItem::Info(format!("pi session {id}")));
                }
            }
            // RPC mode: pi's answer to a command subpane gave it (see `PiAdapter::say`).
            "response" => {
                match ev.command.get() {
                    Some("prompt") => r.taken = Some(crate::adapter::Took::Message),
                    Some("abort") => {
                        r.taken = Some(crate::adapter::Took::Interrupt);
                        r.pane.push(PaneItem::Info("turn interrupted".into()));
                    }
                    Some("get_state") => {
                        let state = ev.data.0.as_ref();
                        if let Some(id) = state.and_then(|d| d.session_id.get()) {
                            self.c.out.session_id = Some(id.to_owned());
                            r.pane.push(PaneItem::Info(format!("pi session {id}")));
                        }
                    }
                    _ => {}
                }
                if ev.success.0 == Some(false) {
                    let e = ev.error.get().unwrap_or("refused");
                    r.pane.push(PaneItem::Error(one_line(
                        &format!(
                            "pi refused {}: {e}",
                            ev.command.get().unwrap_or("a command")
                        ),
                        500,
                    )));
                }
            }
            "message_end" if ev.message.role.get() == Some("assistant") => {
                self.on_assistant(&ev.message, &mut r);
            }
            "tool_execution_start" => self
                .c
                .tool_call(&mut r, || call_item(ev.tool_name.get(), ev.args.0.as_ref())),
            "tool_execution_end" if self.c.pane_full => r.unshown += 1,
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
                    self.c.held_errors.clear();
                } else {
                    self.mark_terminal("auto_retry_end", &mut r);
                }
            }
            "compaction_start" => {
                let reason = ev.reason.get().unwrap_or("");
                if reason == "overflow" {
                    self.c.out.context_length_exceeded = true;
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
            self.c.out.model = Some(m.to_owned());
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
            if self.c.pane_full {
                r.unshown += 1;
            } else {
                r.pane.push(PaneItem::Text(text.clone()));
                r.pane.push(PaneItem::TextEnd);
            }
        }
        self.c.out.final_text = (!text.is_empty()).then_some(text);
        // Its last message decides: a limit pi's retries got past is none.
        self.c.out.usage_limit = None;
        if stop.as_deref() == Some("error") {
            let e = error
                .clone()
                .unwrap_or_else(|| "model call failed".to_owned());
            if mentions_context_overflow(&e) {
                self.c.out.context_length_exceeded = true;
            }
            r.pane.push(PaneItem::Error(one_line(&e, 500)));
            self.c.out.usage_limit = usage_limit(&e);
            if pi_retries(&e) {
                self.c.held_errors.push(e);
            } else {
                self.c.out.push_error(e);
            }
        }
        self.last_stop = stop;
        self.last_error = error;
    }

    fn mark_terminal(&mut self, kind: &str, r: &mut LineResult) {
        let figures = Figures {
            usage: Some(self.usage.clone()),
            cost_usd: self.cost,
            turns: Some(self.turns),
        };
        self.c.mark_terminal(kind, r, figures);
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
pub(super) fn pi_retries(error: &str) -> bool {
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

/// pi's final error naming a 429 or a rate, usage or quota limit: the account's limit (pi
/// says nothing of when it resets).
pub(super) fn usage_limit(error: &str) -> Option<crate::envelope::UsageLimit> {
    let e = error.to_ascii_lowercase();
    let limit = e.split(|c: char| !c.is_ascii_digit()).any(|w| w == "429")
        || ["rate limit", "rate_limit", "usage limit", "quota"]
            .iter()
            .any(|w| e.contains(w));
    limit.then(|| crate::envelope::UsageLimit {
        retry_at: None,
        kind: e.contains("quota").then(|| "quota".to_owned()),
        message: format!("pi: {error}"),
    })
}
