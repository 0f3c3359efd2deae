//! Reading `codex exec --json`: what is dropped, the pane's lines and the report (see the
//! module docs of `codex`).

use super::super::lenient::Str;
use super::events::*;
use super::*;

/// Reads `codex exec --json`.
#[derive(Default)]
pub struct CodexParser {
    c: Common,
    t: super::Tally,
    /// Ids of tool items already counted (an item can be started and completed); a set, as a
    /// long session has tens of thousands.
    tool_items: std::collections::HashSet<String>,
}

impl Grammar for CodexParser {
    fn common(&self) -> &Common {
        &self.c
    }
    fn common_mut(&mut self) -> &mut Common {
        &mut self.c
    }

    fn is_delta(kind: &str) -> bool {
        kind == "item.updated"
    }

    fn on_kept(&mut self, kind: &str, line: &[u8]) -> Option<LineResult> {
        let ev = from_line::<Event<'_>>(line)?;
        Some(self.on_event(kind, &ev))
    }

    fn figures(&self) -> Figures {
        self.t.figures()
    }

    fn model_error(&self) -> bool {
        self.t.model_error()
    }
}

impl CodexParser {
    fn on_event(&mut self, kind: &str, ev: &Event<'_>) -> LineResult {
        let mut r = LineResult::keep();
        match kind {
            "thread.started" => {
                if let Some(id) = ev.thread_id.get() {
                    self.c.out.session_id = Some(id.to_owned());
                    r.pane.push(PaneItem::Info(format!("codex thread {id}")));
                }
            }
            "item.started" | "item.completed" => {
                if let Some(item) = &ev.item.0 {
                    self.on_item(item, kind == "item.completed", &mut r);
                }
            }
            "turn.completed" => {
                self.t.turns += 1;
                self.t.turn_failed = false;
                self.t.pending_error = false;
                if let Some(u) = &ev.usage.0 {
                    self.add_usage(u);
                }
                self.mark_terminal(kind, &mut r);
            }
            "turn.failed" => {
                self.t.turns += 1;
                self.t.turn_failed = true;
                let msg = ev.error.message.get().unwrap_or("turn failed");
                self.error(msg, &mut r);
                self.mark_terminal(kind, &mut r);
            }
            "error" => {
                self.t.pending_error = true;
                let msg = ev.message.get().unwrap_or("error");
                // turn.failed usually repeats this message; show it once.
                if mentions_context_overflow(msg) {
                    self.c.out.context_length_exceeded = true;
                }
                r.pane.push(PaneItem::Error(one_line(msg, 500)));
            }
            _ => {}
        }
        r
    }

    fn error(&mut self, msg: &str, r: &mut LineResult) {
        if mentions_context_overflow(msg) {
            self.c.out.context_length_exceeded = true;
        }
        if let Some(limit) = usage_limit(msg) {
            self.c.out.usage_limit = Some(limit);
        }
        if !self.c.out.errors.iter().any(|e| e == msg) {
            self.c.out.push_error(msg);
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
        if first_sight {
            self.tool_items.insert(id.to_owned());
            self.c.tool_call(r, || {
                let (name, summary) = match kind {
                    "command_execution" => {
                        ("shell".to_owned(), one_line(&str_of(&item.command), 120))
                    }
                    "file_change" => ("apply_patch".to_owned(), changed_paths(item)),
                    "mcp_tool_call" => (
                        format!("{}.{}", str_of(&item.server), str_of(&item.tool)),
                        summarize_args(item.arguments.0.as_ref().unwrap_or(&Value::Null)),
                    ),
                    _ => ("web_search".to_owned(), one_line(&str_of(&item.query), 120)),
                };
                PaneItem::ToolCall { name, summary }
            });
        }
        if !completed {
            return;
        }
        match kind {
            "agent_message" => {
                let text = item.text.get().unwrap_or("");
                self.c.out.final_text = Some(text.to_owned());
                if self.c.pane_full {
                    r.unshown += 1;
                    return;
                }
                r.pane.push(PaneItem::Text(text.to_owned()));
                r.pane.push(PaneItem::TextEnd);
            }
            "command_execution" | "file_change" | "mcp_tool_call" if self.c.pane_full => {
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
        let turn = super::usage_of(
            u.input_tokens.tolerant_u64(),
            u.cached_input_tokens.tolerant_u64(),
            u.output_tokens.tolerant_u64(),
            u.cache_write_input_tokens.tolerant_u64(),
        );
        let sum = self.t.usage.get_or_insert_with(Usage::default);
        super::super::common::add_usage(sum, &turn);
    }

    fn mark_terminal(&mut self, kind: &str, r: &mut LineResult) {
        let figures = self.figures();
        self.c.mark_terminal(kind, r, figures);
    }
}

fn changed_paths(item: &Item<'_>) -> String {
    let paths: Vec<&str> = item.changes.0.iter().filter_map(|c| c.path.get()).collect();
    one_line(&paths.join(", "), 120)
}

/// Codex's words for an account's limit: "You've hit your usage limit. … Try again at 11:22
/// PM." (never retried; the time in its local time, to the minute), and a quota's.
pub(super) fn usage_limit(msg: &str) -> Option<crate::envelope::UsageLimit> {
    let lower = msg.to_lowercase().replace('\u{2019}', "'");
    let kind = if lower.contains("hit your usage limit") {
        None
    } else if lower.contains("quota exceeded") || lower.contains("insufficient_quota") {
        Some("quota".to_owned())
    } else {
        return None;
    };
    Some(crate::envelope::UsageLimit {
        retry_at: super::super::reset::retry_at_clock_time(msg),
        kind,
        message: format!("codex: {msg}"),
    })
}
