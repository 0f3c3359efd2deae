//! Codex's app-server protocol (`codex app-server`, JSON-RPC on stdio): a run with input
//! (`stdin: "input"`). The parser reads the server's lines and speaks to it.
//!
//! ```text
//!  say(Prompt) ─► initialize ─ result ─► initialized, thread/start (or thread/resume)
//!                 thread result (the session id) ─► turn/start {the prompt, clientUserMessageId}
//!  notifications: turn/started (the turn to steer) · item/started|completed (userMessage with
//!                 our clientUserMessageId: taken; agentMessage: the final text; commands) ·
//!                 thread/tokenUsage/updated (the thread's total) · error · turn/completed (end)
//!  say(Message) ─► turn/steer {expectedTurnId} while a turn runs (else turn/start); a steer
//!                 that finds the turn over ("no active turn") is sent again as turn/start
//!  say(Interrupt) ─► turn/interrupt ─ result: taken; turn/completed {status: interrupted}
//!  a request of the server's (an approval) ─► declined: nobody is there to approve
//! ```
//!
//! Common pitfalls:
//! * Every line is a JSON-RPC message without a `type`: the skeleton's untyped hook reads
//!   them (`Grammar::on_untyped`).
//! * The thread's usage is its total (a resumed thread's counts its earlier sessions, as
//!   `codex exec resume` reports it); the input count includes the cached tokens.
//! * An interrupted command's item gets no `item/completed`; its turn's `turn/completed`
//!   closes it.

use std::collections::{HashMap, HashSet};

use serde_json::{Value, json};

use super::super::common::{abbreviate, one_line};
use super::super::parse::{Common, Figures, Grammar};
use super::super::{LineResult, PaneItem, Say, Took, mentions_context_overflow};
use super::parser::usage_limit;
use crate::envelope::Usage;
use crate::spec::TaskSpec;

#[cfg(test)]
mod tests;

/// The `clientUserMessageId` prefix of subpane's messages (the prompt is `subpane-0`).
const CLIENT_ID: &str = "subpane-";

/// Notifications that are only streaming deltas (asked off at `initialize`, dropped anyway).
const DELTAS: [&str; 4] = [
    "item/agentMessage/delta",
    "item/commandExecution/outputDelta",
    "item/reasoning/textDelta",
    "item/reasoning/summaryTextDelta",
];

/// What a request of ours was, by its id.
enum Asked {
    Initialize,
    Thread,
    /// A turn started with this message.
    TurnStart,
    /// A steer of this message (sent again as a turn when the turn was over).
    Steer(Value),
    Interrupt,
}

/// Reads `codex app-server` and speaks to it.
pub struct AppServerParser {
    c: Common,
    /// What `thread/start` (or `thread/resume`) is given.
    thread: Value,
    resume: Option<String>,
    /// The prompt, until the thread exists.
    prompt: Option<String>,
    thread_id: Option<String>,
    /// The turn under way.
    turn: Option<String>,
    next_id: u64,
    asked: HashMap<u64, Asked>,
    /// Messages given before the first turn could take them (sent once it runs).
    early: Vec<Value>,
    messages: u64,
    t: super::Tally,
    tool_items: HashSet<String>,
}

impl AppServerParser {
    /// For a task: its model, system prompt, thinking and tools as the thread's settings,
    /// and the session it resumes.
    pub fn new(task: &TaskSpec) -> Self {
        let mut thread = json!({"approvalPolicy": "never"});
        if let Some(m) = &task.model {
            thread["model"] = json!(m);
        }
        if let Some(s) = &task.system_prompt {
            thread["developerInstructions"] = json!(s);
        }
        if let Some(t) = &task.thinking {
            let effort = if t == "off" { "none" } else { t.as_str() };
            thread["config"] = json!({"model_reasoning_effort": effort});
        }
        if let Some(mode) = super::sandbox_mode(&task.tools) {
            thread["sandbox"] = json!(mode);
        }
        Self {
            c: Common::default(),
            thread,
            resume: task.resume_session.clone(),
            prompt: None,
            thread_id: None,
            turn: None,
            next_id: 0,
            asked: HashMap::new(),
            early: Vec::new(),
            messages: 0,
            t: super::Tally::default(),
            tool_items: HashSet::new(),
        }
    }

    /// A request line, remembered by its id.
    fn request(&mut self, method: &str, params: Value, asked: Asked) -> Vec<u8> {
        let id = self.next_id;
        self.next_id += 1;
        self.asked.insert(id, asked);
        line(&json!({"id": id, "method": method, "params": params}))
    }

    fn input(text: &str) -> Value {
        json!([{"type": "text", "text": text, "text_elements": []}])
    }

    /// A message as a new turn.
    fn turn_start(&mut self, input: Value, client: &str) -> Option<Vec<u8>> {
        let thread = self.thread_id.clone()?;
        let params = json!({"threadId": thread, "input": input, "clientUserMessageId": client});
        Some(self.request("turn/start", params, Asked::TurnStart))
    }

    /// A message into the turn under way.
    fn steer(&mut self, input: Value, client: &str) -> Option<Vec<u8>> {
        let (thread, turn) = (self.thread_id.clone()?, self.turn.clone()?);
        let params = json!({"threadId": thread, "input": input.clone(),
                            "expectedTurnId": turn, "clientUserMessageId": client});
        let again = json!({"input": input, "client": client});
        Some(self.request("turn/steer", params, Asked::Steer(again)))
    }

    fn on_response(&mut self, id: u64, v: &Value, r: &mut LineResult) {
        let Some(asked) = self.asked.remove(&id) else {
            return;
        };
        let error = v.get("error");
        let result = v.get("result");
        match asked {
            Asked::Initialize => {
                let mut out = line(&json!({"method": "initialized"}));
                let (method, mut params) = match &self.resume {
                    Some(t) => ("thread/resume", json!({"threadId": t})),
                    None => ("thread/start", json!({})),
                };
                if let (Some(p), Some(t)) = (params.as_object_mut(), self.thread.as_object()) {
                    p.extend(t.clone());
                }
                out.extend(self.request(method, params, Asked::Thread));
                r.reply = Some(out);
            }
            Asked::Thread => {
                let id = result
                    .and_then(|x| x.pointer("/thread/id"))
                    .and_then(Value::as_str);
                let Some(id) = id else {
                    self.fail(&rpc_error(error, "codex could not start a thread"), r);
                    // Nothing will run: the turn that never came is the end.
                    self.end_turn("thread", r);
                    return;
                };
                self.thread_id = Some(id.to_owned());
                self.c.out.session_id = Some(id.to_owned());
                r.pane.push(PaneItem::Info(format!("codex thread {id}")));
                let prompt = self.prompt.take().unwrap_or_default();
                r.reply = self.turn_start(Self::input(&prompt), &format!("{CLIENT_ID}0"));
            }
            Asked::TurnStart => match result.and_then(|x| x.pointer("/turn/id")) {
                Some(t) => {
                    self.turn = t.as_str().map(str::to_owned);
                    self.send_early(r);
                }
                None => {
                    // Refused (an input over the limit): no turn comes.
                    self.fail(&rpc_error(error, "codex refused the turn"), r);
                    if self.turn.is_none() {
                        self.end_turn("turn/start", r);
                    }
                }
            },
            Asked::Steer(again) => {
                if error.is_some() {
                    // The turn ended first: the message is the next turn.
                    let client = again["client"].as_str().unwrap_or(CLIENT_ID).to_owned();
                    r.reply = self.turn_start(again["input"].clone(), &client);
                }
            }
            Asked::Interrupt => r.taken = Some(Took::Interrupt),
        }
    }

    /// Messages given before a turn ran, now that one does.
    fn send_early(&mut self, r: &mut LineResult) {
        let mut out = r.reply.take().unwrap_or_default();
        for m in std::mem::take(&mut self.early) {
            let client = m["client"].as_str().unwrap_or(CLIENT_ID).to_owned();
            if let Some(b) = self.steer(m["input"].clone(), &client) {
                out.extend(b);
            }
        }
        r.reply = (!out.is_empty()).then_some(out);
    }

    /// A request of the server's: nobody approves anything here.
    fn on_server_request(&mut self, id: &Value, method: &str, r: &mut LineResult) {
        let answer = if method.ends_with("requestApproval") {
            json!({"id": id, "result": {"decision": "decline"}})
        } else if method == "execCommandApproval" || method == "applyPatchApproval" {
            json!({"id": id, "result": {"decision": "denied"}})
        } else {
            json!({"id": id, "error": {"code": -32601,
                   "message": format!("subpane does not answer {method}: nobody is there to")}})
        };
        r.pane
            .push(PaneItem::Info(format!("declined {}", one_line(method, 80))));
        r.reply = Some(line(&answer));
    }

    fn on_notification(&mut self, method: &str, p: &Value, r: &mut LineResult) {
        match method {
            "turn/started" => {
                if let Some(t) = p.pointer("/turn/id").and_then(Value::as_str) {
                    self.turn = Some(t.to_owned());
                }
                self.send_early(r);
            }
            "item/started" | "item/completed" => {
                if let Some(item) = p.get("item") {
                    self.on_item(item, method == "item/completed", r);
                }
            }
            "thread/tokenUsage/updated" => {
                if let Some(t) = p.pointer("/tokenUsage/total") {
                    self.t.usage = Some(usage_of(t));
                }
            }
            "error" => {
                let e = p.get("error").unwrap_or(&Value::Null);
                let msg = e.get("message").and_then(Value::as_str).unwrap_or("error");
                let info = e.get("codexErrorInfo");
                if info.and_then(Value::as_str) == Some("contextWindowExceeded")
                    || mentions_context_overflow(msg)
                {
                    self.c.out.context_length_exceeded = true;
                }
                if p.get("willRetry").and_then(Value::as_bool) == Some(true) {
                    r.pane.push(PaneItem::Info(format!(
                        "retrying after: {}",
                        one_line(msg, 200)
                    )));
                    return;
                }
                self.t.pending_error = true;
                self.fail(msg, r);
            }
            "turn/completed" => {
                let turn = p.get("turn").unwrap_or(&Value::Null);
                match turn.get("status").and_then(Value::as_str) {
                    Some("failed") => {
                        self.t.turn_failed = true;
                        let msg = turn
                            .pointer("/error/message")
                            .and_then(Value::as_str)
                            .unwrap_or("turn failed")
                            .to_owned();
                        self.fail(&msg, r);
                    }
                    Some("interrupted") => {
                        // Stopped by subpane's interrupt: no answer, no failure.
                        self.c.out.final_text = None;
                    }
                    _ => {
                        self.t.turn_failed = false;
                        self.t.pending_error = false;
                    }
                }
                self.t.turns += 1;
                self.turn = None;
                self.end_turn("turn/completed", r);
            }
            _ => {}
        }
    }

    fn on_item(&mut self, item: &Value, completed: bool, r: &mut LineResult) {
        let s = |k: &str| item.get(k).and_then(Value::as_str).unwrap_or("");
        let kind = s("type");
        if kind == "userMessage" && !completed {
            if item
                .get("clientId")
                .and_then(Value::as_str)
                .is_some_and(|c| c.starts_with(CLIENT_ID))
            {
                r.taken = Some(Took::Message);
            }
            return;
        }
        let tool = matches!(
            kind,
            "commandExecution" | "fileChange" | "mcpToolCall" | "webSearch"
        );
        let id = s("id");
        if tool && !self.tool_items.contains(id) {
            self.tool_items.insert(id.to_owned());
            self.c.tool_call(r, || {
                let (name, summary) = match kind {
                    "commandExecution" => ("shell".to_owned(), one_line(s("command"), 120)),
                    "fileChange" => ("apply_patch".to_owned(), String::new()),
                    "mcpToolCall" => (format!("{}.{}", s("server"), s("tool")), String::new()),
                    _ => ("web_search".to_owned(), one_line(s("query"), 120)),
                };
                PaneItem::ToolCall { name, summary }
            });
        }
        if !completed {
            return;
        }
        match kind {
            "agentMessage" => {
                let text = s("text");
                self.c.out.final_text = Some(text.to_owned());
                if self.c.pane_full {
                    r.unshown += 1;
                } else {
                    r.pane.push(PaneItem::Text(text.to_owned()));
                    r.pane.push(PaneItem::TextEnd);
                }
            }
            _ if tool && self.c.pane_full => r.unshown += 1,
            "commandExecution" => {
                let exit = item.get("exitCode").and_then(Value::as_i64);
                let mut summary = abbreviate(s("aggregatedOutput"));
                if let Some(code) = exit.filter(|c| *c != 0) {
                    summary = format!("exit {code}: {summary}");
                }
                let is_error = exit.is_some_and(|c| c != 0) || s("status") == "failed";
                r.pane.push(PaneItem::ToolResult { summary, is_error });
            }
            "fileChange" | "mcpToolCall" | "webSearch" => r.pane.push(PaneItem::ToolResult {
                summary: s("status").to_owned(),
                is_error: s("status") == "failed",
            }),
            _ => {}
        }
    }

    fn fail(&mut self, msg: &str, r: &mut LineResult) {
        if let Some(limit) = usage_limit(msg) {
            self.c.out.usage_limit = Some(limit);
        }
        if !self.c.out.errors.iter().any(|e| e == msg) {
            self.c.out.push_error(msg);
            r.pane.push(PaneItem::Error(one_line(msg, 500)));
        }
    }

    fn end_turn(&mut self, kind: &str, r: &mut LineResult) {
        let figures = self.figures();
        self.c.mark_terminal(kind, r, figures);
    }
}

impl Grammar for AppServerParser {
    fn common(&self) -> &Common {
        &self.c
    }
    fn common_mut(&mut self) -> &mut Common {
        &mut self.c
    }
    fn is_delta(_kind: &str) -> bool {
        false
    }
    /// A line with a `type` is none of the protocol's: kept as it is.
    fn on_kept(&mut self, _kind: &str, line: &[u8]) -> Option<LineResult> {
        super::super::common::from_line::<serde::de::IgnoredAny>(line)?;
        Some(LineResult::keep())
    }
    fn on_untyped(&mut self, line: &[u8]) -> Option<LineResult> {
        let v: Value = super::super::common::from_line(line)?;
        let mut r = LineResult::keep();
        let method = v.get("method").and_then(Value::as_str);
        match (method, v.get("id")) {
            (Some(m), _) if DELTAS.contains(&m) => return Some(LineResult::drop_line()),
            (Some(m), Some(id)) => self.on_server_request(id, m, &mut r),
            (Some(m), None) => {
                let params = v.get("params").unwrap_or(&Value::Null);
                self.on_notification(m, params, &mut r);
            }
            (None, Some(id)) => {
                if let Some(id) = id.as_u64() {
                    self.on_response(id, &v, &mut r);
                }
            }
            (None, None) => {}
        }
        Some(r)
    }
    fn figures(&self) -> Figures {
        self.t.figures()
    }
    fn model_error(&self) -> bool {
        self.t.model_error()
    }
    fn say(&mut self, what: Say<'_>) -> Option<Vec<u8>> {
        match what {
            Say::Prompt(p) => {
                self.prompt = Some(p.to_owned());
                let params = json!({
                    "clientInfo": {"name": "subpane", "title": null,
                                   "version": env!("CARGO_PKG_VERSION")},
                    "capabilities": {"experimentalApi": false, "requestAttestation": false,
                                     "optOutNotificationMethods": DELTAS},
                });
                Some(self.request("initialize", params, Asked::Initialize))
            }
            Say::Message(t) => {
                self.messages += 1;
                let client = format!("{CLIENT_ID}{}", self.messages);
                let input = Self::input(t);
                if self.turn.is_some() {
                    self.steer(input, &client)
                } else if self.thread_id.is_some() && self.prompt.is_none() && self.t.turns > 0 {
                    self.turn_start(input, &client)
                } else {
                    // The first turn is on its way: it takes the message once it runs.
                    self.early.push(json!({"input": input, "client": client}));
                    Some(Vec::new())
                }
            }
            Say::Interrupt => {
                let (thread, turn) = (self.thread_id.clone()?, self.turn.clone()?);
                let params = json!({"threadId": thread, "turnId": turn});
                Some(self.request("turn/interrupt", params, Asked::Interrupt))
            }
        }
    }
}

/// The thread's total usage (`tokenUsage.total`), as the envelope counts it.
fn usage_of(t: &Value) -> Usage {
    let n = |k: &str| t.get(k).and_then(Value::as_u64);
    super::usage_of(
        n("inputTokens"),
        n("cachedInputTokens"),
        n("outputTokens"),
        n("cacheWriteInputTokens"),
    )
}

fn rpc_error(error: Option<&Value>, what: &str) -> String {
    match error.and_then(|e| e.get("message")).and_then(Value::as_str) {
        Some(m) => format!("{what}: {m}"),
        None => what.to_owned(),
    }
}

fn line(v: &Value) -> Vec<u8> {
    let mut l = serde_json::to_vec(v).unwrap_or_default();
    l.push(b'\n');
    l
}
