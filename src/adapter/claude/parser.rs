//! Reading `claude -p --output-format stream-json`: what is dropped, the pane's lines, the live
//! usage and the report (see the module docs of `claude`).

use super::events::*;
use super::*;
use crate::adapter::Took;

/// Reads `claude -p --output-format stream-json`.
#[derive(Default)]
pub struct ClaudeParser {
    /// `held_errors`: the API errors of `assistant` lines, reported only if no `result`
    /// arrives.
    c: Common,
    /// A text block is streaming (from `stream_event`s), so its `assistant` line adds nothing
    /// to the pane.
    pub(super) streaming_text: bool,
    is_error: bool,
    /// The `result` came (the terminal event may have come before it: a usage limit's
    /// `rate_limit_event`).
    result_seen: bool,
    /// Tokens of the messages so far, for the live views (the `result` has the final sum).
    live: LiveUsage,
    /// An interrupt was taken (its `control_response`): the next `result` ends the turn it
    /// stopped, and is no failure.
    interrupted: bool,
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
            super::super::common::add_usage(&mut self.done, &std::mem::take(&mut self.current));
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
        super::super::common::add_usage(&mut sum, &self.current);
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

impl Grammar for ClaudeParser {
    fn say(&mut self, what: crate::adapter::Say<'_>) -> Option<Vec<u8>> {
        super::say(what)
    }

    fn common(&self) -> &Common {
        &self.c
    }
    fn common_mut(&mut self) -> &mut Common {
        &mut self.c
    }

    fn is_delta(kind: &str) -> bool {
        kind == "stream_event"
    }

    /// Nobody can see the text now: a delta is dropped unread (its type read from its first
    /// bytes, for which block streams).
    fn drop_unread(&mut self, _kind: &str, line: &[u8]) -> Option<LineResult> {
        let delta = leading_delta(line)?;
        if delta == b"text_delta" {
            self.streaming_text = true;
        }
        Some(LineResult::drop_line())
    }

    fn on_delta(&mut self, _kind: &str, line: &[u8]) -> Option<LineResult> {
        self.on_stream(line)
    }

    fn on_kept(&mut self, kind: &str, line: &[u8]) -> Option<LineResult> {
        let ev = from_line::<Event<'_>>(line)?;
        Some(self.on_event(kind, &ev))
    }

    fn figures(&self) -> Figures {
        // Once the `result` came, its figures are the attempt's.
        if self.result_seen {
            return self.reported();
        }
        Figures {
            usage: self.live.total(),
            cost_usd: None,
            turns: None,
        }
    }

    /// The `result` set them (none without one).
    fn final_figures(&self) -> Option<Figures> {
        None
    }

    fn model_error(&self) -> bool {
        self.is_error
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
                    && k == "text_delta"
                {
                    self.streaming_text = true;
                    // Nobody can see the text now: it is not copied out.
                    if !self.c.pane_full {
                        r.pane.push(PaneItem::Text(t.into_owned()));
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
                self.c.out.session_id = id.map(str::to_owned);
                self.c.out.model = model.map(str::to_owned);
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
            // A subscription's window: `rejected` is its usage limit, with when it resets,
            // unless paid extra usage carries on. Claude Code says so when it gives up; should
            // it retry on, it would wait for minutes on a limit that lasts hours: the event of
            // a named window is terminal, so the worker stops it after the linger (the
            // `result` comes first when Claude gives up itself).
            ("rate_limit_event", _) => {
                let info = ev.rate_limit_info.0.as_ref();
                // Near the window's end: said, never a failure.
                if let Some(i) = info.filter(|i| i.status.get() == Some("allowed_warning")) {
                    let kind = i.rate_limit_type.get().unwrap_or("its window");
                    r.pane.push(PaneItem::Info(format!(
                        "usage window nearly spent ({})",
                        one_line(kind, 40)
                    )));
                }
                if let Some(info) = info.filter(|i| usage_limited(i)) {
                    let kind = info.rate_limit_type.get().map(str::to_owned);
                    let retry_at = info.resets_at.tolerant_u64().map(|s| {
                        humantime::format_rfc3339_seconds(
                            std::time::UNIX_EPOCH + std::time::Duration::from_secs(s),
                        )
                        .to_string()
                    });
                    let message = format!(
                        "claude: usage limit reached ({}){}",
                        kind.as_deref().unwrap_or("its window"),
                        retry_at
                            .as_deref()
                            .map(|t| format!(", resets at {t}"))
                            .unwrap_or_default()
                    );
                    r.pane.push(PaneItem::Error(message.clone()));
                    self.c.out.usage_limit = Some(crate::envelope::UsageLimit {
                        retry_at,
                        kind,
                        message,
                    });
                    if window_named(info) {
                        let figures = Figures {
                            usage: self.live.total(),
                            cost_usd: None,
                            turns: None,
                        };
                        self.c.mark_terminal("rate_limit_event", &mut r, figures);
                    }
                }
            }
            ("assistant", _) => self.on_assistant(ev, &mut r),
            // stream-json input: the message subpane gave, echoed as it is taken into the
            // conversation (the pane showed it when it was sent).
            ("user", _) if ev.is_replay.0 == Some(true) => r.taken = Some(Took::Message),
            ("user", _) => on_user(ev, self.c.pane_full, &mut r),
            ("control_response", _) => {
                let resp = ev.response.0.as_ref();
                if resp.is_some_and(|c| {
                    c.request_id.get() == Some(super::INTERRUPT_ID)
                        && c.subtype.get() == Some("success")
                }) {
                    r.taken = Some(Took::Interrupt);
                    self.interrupted = true;
                    r.pane.push(PaneItem::Info("turn interrupted".into()));
                }
            }
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
                        // Reported only if no `result` follows.
                        if !self.result_seen {
                            self.c.held_errors.push(text.to_owned());
                        }
                        r.pane.push(PaneItem::Error(one_line(text, 500)));
                    } else if !self.streaming_text && self.c.pane_full {
                        r.unshown += 1;
                    } else if !self.streaming_text {
                        r.pane.push(PaneItem::Text(text.to_owned()));
                        r.pane.push(PaneItem::TextEnd);
                    }
                }
                Some("tool_use") => self
                    .c
                    .tool_call(r, || call_item(b.name.get(), b.input.0.as_ref())),
                _ => {}
            }
        }
    }

    fn on_result(&mut self, ev: &Event<'_>, r: &mut LineResult) {
        let subtype = ev.subtype.get().unwrap_or("");
        // The end of a turn subpane interrupted: no answer, and no failure.
        let interrupted = std::mem::take(&mut self.interrupted);
        // `is_error` first: a failed call can say "success".
        let is_error = !interrupted
            && (ev.is_error.0.unwrap_or(subtype != "success")
                || (!subtype.is_empty() && subtype != "success"));
        let before = self.result_seen.then(|| self.reported());
        let text = ev.result.get();
        let out = &mut self.c.out;
        if let Some(id) = ev.session_id.get() {
            out.session_id = Some(id.to_owned());
        }
        if is_error {
            out.final_text = None;
            match text {
                Some(t) if !t.is_empty() => out.push_error(t),
                _ => out.push_error(format!("claude reported {subtype}")),
            }
        } else if interrupted {
            out.final_text = None;
        } else {
            out.final_text = text.map(str::to_owned);
        }
        for e in ev.errors.0.iter().filter(|_| !interrupted) {
            out.push_error(e.as_str().map_or_else(|| e.to_string(), str::to_owned));
        }
        // An API's 429 it gave up on (its retry-after beyond what it waits): the account's
        // limit, not a failure of the model. A `rate_limit_event` before it said when.
        if is_error && ev.api_error_status.tolerant_u64() == Some(429) {
            let said = text
                .filter(|t| !t.is_empty())
                .unwrap_or("rate limited (429)");
            let limit = out.usage_limit.get_or_insert_with(Default::default);
            limit.message = format!("claude: {said}");
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
        // With stream-json input each turn has its `result`: its usage and turns are that
        // turn's (the cost is the process's so far), so the run's are their sums.
        if let Some(b) = before {
            if let Some(mut sum) = b.usage {
                if let Some(u) = &out.usage {
                    super::super::common::add_usage(&mut sum, u);
                }
                out.usage = Some(sum);
            }
            out.turns = match (b.turns, out.turns) {
                (Some(a), Some(t)) => Some(a + t),
                (a, t) => a.or(t),
            };
        }
        out.tool_calls = Some(self.c.tool_calls);
        let reason = ev.terminal_reason.get().unwrap_or("");
        if reason == "prompt_too_long" || out.errors.iter().any(|e| mentions_context_overflow(e)) {
            out.context_length_exceeded = true;
        }
        self.is_error |= is_error;
        if is_error && let Some(e) = out.errors.last() {
            r.pane.push(PaneItem::Error(one_line(e, 500)));
        }
        if !self.result_seen {
            // The `result` reports the API errors before it its own way.
            self.c.held_errors.clear();
        }
        self.result_seen = true;
        let figures = self.reported();
        self.c.mark_terminal("result", r, figures);
    }

    /// The figures the `result` reported.
    fn reported(&self) -> Figures {
        Figures {
            usage: self.c.out.usage.clone(),
            cost_usd: self.c.out.cost_usd,
            turns: self.c.out.turns,
        }
    }
}

/// Whether a `rate_limit_event` says the account is out of its window now: `rejected`, and
/// no paid extra usage going on (Claude Code itself waits out a rejection only when its
/// overage status is absent or rejected too).
fn usage_limited(info: &RateLimitInfo<'_>) -> bool {
    info.status.get() == Some("rejected")
        && info.is_using_overage.0 != Some(true)
        && !matches!(
            info.overage_status.get(),
            Some("allowed" | "allowed_warning")
        )
}

/// Whether the rejection names the window (`rateLimitType`, from the API's
/// representative-claim header) or the overage: what Claude Code takes for the account's
/// usage limit, and never retries. A rejection without either it calls "temporarily
/// limiting requests (not your usage limit)", retries, and reports by its `result`.
fn window_named(info: &RateLimitInfo<'_>) -> bool {
    info.rate_limit_type.get().is_some() || info.overage_status.get().is_some()
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
