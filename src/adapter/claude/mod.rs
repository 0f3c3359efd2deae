//! The `claude` adapter (Claude Code, `claude -p --output-format stream-json --verbose`).
//!
//! ```text
//! system/init ─ [system/status|api_retry]* ─ (stream_event* ─ assistant ─ stream_event* ─ user)* ─ result
//! ```
//!
//! * Dropped: `stream_event` (raw API stream events, asked for with
//!   `--include-partial-messages` only so the pane shows text as it streams). The `assistant`
//!   lines carry the same content whole.
//! * Terminal: the first `result`, or before it a `rate_limit_event` that says the account's
//!   window is rejected (`status: "rejected"` with its `rateLimitType`, no paid overage):
//!   Claude Code gives up then, and should it retry on, subpane stops it after the linger
//!   instead of waiting out minutes of retries on a limit that lasts hours.
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

use serde_json::Value;

use super::common::{abbreviate, call_item, fits_argv, from_line, one_line, stdin_for};
use super::parse::{Common, Figures, Grammar};
use super::{
    Adapter, AgentLaunch, ArgvContext, LineResult, PaneItem, SandboxNeeds, StateDir, StreamParser,
    mentions_context_overflow,
};
use crate::envelope::Usage;
use crate::spec::{AgentKind, TaskSpec};

mod events;
mod parser;
#[cfg(test)]
mod tests;

use parser::ClaudeParser;

/// The `request_id` of subpane's interrupts: its `control_response` says the CLI took one.
const INTERRUPT_ID: &str = "subpane-interrupt";

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
        if task.input {
            // The prompt is the first message on stdin (with stream-json input an argv prompt
            // is ignored); each message taken is echoed back (`isReplay`).
            argv.push("--input-format=stream-json".into());
            argv.push("--replay-user-messages".into());
            return AgentLaunch {
                argv,
                stdin: crate::spec::Stdin::Input,
            };
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
    fn no_input(&self) -> Option<&'static str> {
        None
    }
    fn acknowledges(&self) -> bool {
        true
    }
    fn parser(&self) -> Box<dyn StreamParser> {
        Box::new(ClaudeParser::default())
    }
    fn expects_terminal_event(&self) -> bool {
        true
    }
    /// Each message carries its tokens; turns and cost come only with the `result`.
    fn not_live(&self, limit: crate::envelope::BudgetLimit) -> Option<&'static str> {
        use crate::envelope::BudgetLimit::*;
        match limit {
            MaxTokens => None,
            MaxTurns => {
                Some("Claude Code reports its turns only in its final result, too late to stop it")
            }
            MaxCost => {
                Some("Claude Code reports its cost only in its final result, too late to stop it")
            }
        }
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

/// stream-json input: a user message is one line; a message sent while a turn runs is
/// taken into that turn at its next tool boundary (Claude Code's "next" priority), else
/// it is the next turn. An interrupt is a control request.
pub(super) fn say(what: super::Say<'_>) -> Option<Vec<u8>> {
    let v = match what {
        super::Say::Prompt(t) | super::Say::Message(t) => serde_json::json!({
            "type": "user",
            "message": {"role": "user", "content": [{"type": "text", "text": t}]},
        }),
        super::Say::Interrupt => serde_json::json!({
            "type": "control_request",
            "request_id": INTERRUPT_ID,
            "request": {"subtype": "interrupt"},
        }),
    };
    let mut line = serde_json::to_vec(&v).ok()?;
    line.push(b'\n');
    Some(line)
}
