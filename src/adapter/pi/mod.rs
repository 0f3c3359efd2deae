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

use serde_json::{Map, Value};

use super::common::{abbreviate, add_usage, call_item, fits_argv, from_line, one_line, stdin_for};
use super::parse::{Common, Figures, Grammar};
use super::{
    Adapter, AgentLaunch, ArgvContext, LineAction, LineResult, PaneItem, SandboxNeeds, StateDir,
    StreamParser, mentions_context_overflow,
};
use crate::envelope::Usage;
use crate::spec::{AgentKind, TaskSpec};

mod events;
mod parser;
#[cfg(test)]
mod tests;

use parser::PiParser;

pub struct PiAdapter;

impl Adapter for PiAdapter {
    /// The `--session-dir` subpane gave it (under subpane's home, sandboxed or not).
    fn transcript_dirs(
        &self,
        argv: &[String],
        _state_dir: Option<&std::path::Path>,
    ) -> Vec<std::path::PathBuf> {
        argv.windows(2)
            .filter(|w| w[0] == "--session-dir")
            .map(|w| std::path::PathBuf::from(&w[1]))
            .collect()
    }

    /// `models.json`: each provider's `apiKey`, a variable's name (pi reads its value) or a
    /// literal (the planner keeps only the names the program's environment has).
    fn key_vars(&self, state_dir: &std::path::Path) -> Vec<String> {
        let Some(text) = super::common::read_config(&state_dir.join("models.json")) else {
            return Vec::new();
        };
        let Ok(v) = serde_json::from_slice::<Value>(&text) else {
            return Vec::new();
        };
        let Some(providers) = v.get("providers").and_then(Value::as_object) else {
            return Vec::new();
        };
        providers
            .values()
            .filter_map(|p| p.get("apiKey")?.as_str())
            .map(str::to_owned)
            .collect()
    }

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
            // RPC: the prompt and every message are commands on stdin, the events are
            // `--mode json`'s (without its session header: `get_state` says the session).
            if task.input { "rpc" } else { "json" }.into(),
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
        if task.input {
            return AgentLaunch {
                argv,
                stdin: crate::spec::Stdin::Input,
            };
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
    fn no_input(&self) -> Option<&'static str> {
        None
    }
    fn acknowledges(&self) -> bool {
        true
    }
    fn expects_terminal_event(&self) -> bool {
        true
    }
    /// Each `turn_end` counts a turn; each assistant message carries its usage and cost.
    fn not_live(&self, _limit: crate::envelope::BudgetLimit) -> Option<&'static str> {
        None
    }
    fn settings_defaults(&self) -> Option<(&'static str, &'static str)> {
        // pi's own retries (`auto_retry_start` events) stay; its provider client's are the
        // ones that sleep a whole `retry-after` without a word.
        Some((
            "settings.json",
            r#"{"retry": {"provider": {"maxRetries": 0}}}"#,
        ))
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

/// RPC commands: the prompt, then `get_state` (its answer names the session); a message
/// is a `prompt` that steers the run under way (taken at its next step) or, when pi is
/// idle, starts its next one; an interrupt is `abort`. Each is answered by a `response`.
pub(super) fn say(what: super::Say<'_>) -> Option<Vec<u8>> {
    let lines = match what {
        super::Say::Prompt(t) => vec![
            serde_json::json!({"id": "subpane-prompt", "type": "prompt", "message": t}),
            serde_json::json!({"id": "subpane-state", "type": "get_state"}),
        ],
        super::Say::Message(t) => vec![serde_json::json!({
            "id": "subpane-message", "type": "prompt", "message": t,
            "streamingBehavior": "steer",
        })],
        super::Say::Interrupt => {
            vec![serde_json::json!({"id": "subpane-interrupt", "type": "abort"})]
        }
    };
    let mut out = Vec::new();
    for l in lines {
        out.extend(serde_json::to_vec(&l).ok()?);
        out.push(b'\n');
    }
    Some(out)
}
