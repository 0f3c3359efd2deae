//! The `codex` adapter: `codex app-server` for a run with input (the default; see
//! `app_server`), `codex exec --json` without (`--stdin null`), described here.
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

use super::common::{
    abbreviate, fits_argv, from_line, one_line, stdin_for, summarize_args, toml_string,
};
use super::parse::{Common, Figures, Grammar};
use super::{
    Adapter, AgentLaunch, ArgvContext, LineResult, PaneItem, SandboxNeeds, StateDir, StreamParser,
    mentions_context_overflow,
};
use crate::envelope::Usage;
use crate::spec::{AgentKind, TaskSpec};

mod app_server;
mod events;
mod parser;
#[cfg(test)]
mod tests;

use parser::CodexParser;

pub struct CodexAdapter;

/// What both of Codex's streams (exec's events, the app-server's notifications) count the
/// same way: the usage, the turns, and whether the agent failed (its last turn failed, or an
/// error came that no completed turn followed). Codex reports no cost.
#[derive(Default)]
struct Tally {
    usage: Option<Usage>,
    turns: u64,
    turn_failed: bool,
    pending_error: bool,
}

impl Tally {
    fn figures(&self) -> Figures {
        Figures {
            usage: self.usage.clone(),
            cost_usd: None,
            turns: Some(self.turns),
        }
    }
    fn model_error(&self) -> bool {
        self.turn_failed || self.pending_error
    }
}

/// Codex's token counts as the envelope's usage: its input count includes the cached part,
/// the envelope's does not (as pi and Claude report it); the total is input and output.
fn usage_of(
    input: Option<u64>,
    cached: Option<u64>,
    output: Option<u64>,
    cache_write: Option<u64>,
) -> Usage {
    Usage {
        input_tokens: input.map(|i| i.saturating_sub(cached.unwrap_or(0))),
        output_tokens: output,
        cache_read_tokens: cached,
        cache_write_tokens: cache_write,
        total_tokens: match (input, output) {
            (None, None) => None,
            (i, o) => Some(i.unwrap_or(0) + o.unwrap_or(0)),
        },
    }
}

/// The sandbox a task's tools pick: only read-only tools give `read-only`, any other
/// `workspace-write`; no tools leave codex's own config to say.
fn sandbox_mode(tools: &[String]) -> Option<&'static str> {
    if tools.is_empty() {
        return None;
    }
    let read_only = tools
        .iter()
        .all(|t| READ_ONLY_TOOLS.contains(&t.to_ascii_lowercase().as_str()));
    Some(if read_only {
        "read-only"
    } else {
        "workspace-write"
    })
}

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
    /// `config.toml`: each provider's `env_key = "NAME"`.
    fn key_vars(&self, state_dir: &std::path::Path) -> Vec<String> {
        let Some(text) = super::common::read_config(&state_dir.join("config.toml")) else {
            return Vec::new();
        };
        let text = String::from_utf8_lossy(&text);
        text.lines()
            .filter_map(|l| {
                let (k, v) = l.split_once('=')?;
                (k.trim() == "env_key").then(|| v.trim().trim_matches(['"', '\'']))
            })
            .map(str::to_owned)
            .collect()
    }

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
        if task.input {
            // The task's settings go to `thread/start` (`app_server`), the prompt to its first
            // turn: all on stdin.
            return AgentLaunch {
                argv: vec![program.to_owned(), "app-server".into()],
                stdin: crate::spec::Stdin::Input,
            };
        }
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
        if let Some(mode) = sandbox_mode(&task.tools) {
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
    /// Through its app-server protocol (`app_server`).
    fn no_input(&self) -> Option<&'static str> {
        None
    }
    fn acknowledges(&self) -> bool {
        true
    }
    fn input_parser(&self, task: &TaskSpec) -> Option<Box<dyn StreamParser>> {
        Some(Box::new(app_server::AppServerParser::new(task)))
    }
    fn parser(&self) -> Box<dyn StreamParser> {
        Box::new(CodexParser::default())
    }
    fn expects_terminal_event(&self) -> bool {
        true
    }
    /// `exec` runs one turn, whose usage comes with its end; no cost at all.
    fn not_live(&self, limit: crate::envelope::BudgetLimit) -> Option<&'static str> {
        Some(match limit {
            crate::envelope::BudgetLimit::MaxCost => "Codex reports no cost in its events",
            _ => "Codex reports its usage only when its one turn ends, too late to stop it",
        })
    }
    fn never_reports(&self, limit: crate::envelope::BudgetLimit) -> bool {
        limit == crate::envelope::BudgetLimit::MaxCost
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
