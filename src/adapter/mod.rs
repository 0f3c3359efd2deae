//! Agent adapters: pure knowledge of one agent CLI.
//!
//! An adapter builds the CLI's argv from a [`TaskSpec`] and returns a [`StreamParser`] that
//! reads the CLI's stdout one line at a time. The parser decides what reaches
//! `events.jsonl` ([`LineAction`]), spots the terminal event, produces items for the human
//! pane ([`PaneItem`]) and, at the end, the envelope's `output` ([`AgentReport`]).
//! Nothing here does IO: the worker feeds lines in and writes files.
//!
//! ```text
//! adapter/
//!   mod.rs         the traits (Adapter, StreamParser) and what they exchange
//!   parse.rs       the one parser skeleton: the line flow, tool count, terminal, finish
//!   pi/ claude/ codex/   one room per agent CLI, each the same way:
//!     mod.rs       the adapter: argv, stdin, sandbox needs
//!     events.rs    the event shapes its parser reads (lenient)
//!     parser.rs    its grammar: deltas, kept events, usage figures (parse::Grammar)
//!     tests.rs     replays of its recorded transcripts, its argv
//!   command.rs     any program: a JSON line is an event, anything else plain
//!   common.rs      peek/from_line, pane summaries, the usage line, the stderr tail
//!   lenient.rs     the lenient field readers the event shapes are made of
//!   snapshots.rs   every parser against tests/fixtures/parsed (odd and real streams)
//!   test_support.rs  Replay, transcript!, launch_in: the agents' tests share them
//! ```
//!
//! An agent's parser is only its grammar: which types are streaming deltas, how a kept event
//! is read, its usage figures. `parse.rs` reads the line (a fast path on a leading `type`, the
//! slow path through `peek`), counts tool calls, marks the first terminal event, and
//! finishes the report the same way for all three.
//!
//! Common pitfalls:
//! * Exit codes lie: pi exits 0 after a failed model call, Claude Code can say
//!   `subtype: "success"` with `is_error: true`. Decide from events.
//! * Streaming deltas are most of the bytes; drop them, but keep the text for the pane.
//! * Lines may be invalid UTF-8 or not JSON at all; never panic on them.
//! * A new agent is a room with a `Grammar`, not a new `on_line`: the fast path, the slow
//!   path and `finish_common` stay in one place, and the snapshots pin what each decides.

mod claude;
mod codex;
mod command;
mod common;
mod lenient;
mod parse;
mod pi;
mod reset;
#[cfg(test)]
mod snapshots;
#[cfg(test)]
mod test_support;

use std::path::Path;

use crate::envelope::{BudgetLimit, Output, SoFar};
use crate::spec::{AgentKind, Stdin, TaskSpec};

pub use claude::ClaudeAdapter;
pub use codex::CodexAdapter;
pub use command::CommandAdapter;
pub use pi::PiAdapter;

/// Whether a line is JSON text (UTF-8, one value), as every adapter reads it.
pub fn is_json_line(line: &[u8]) -> bool {
    common::from_line::<serde::de::IgnoredAny>(line).is_some()
}

/// The type of subpane's own events in `events.jsonl` (what was said to the agent).
pub const OWN_EVENT: &str = "subpane.input";

/// Whether an event type is one of subpane's own (`subpane.`…): only subpane writes those.
pub fn is_own_type(kind: &str) -> bool {
    kind.starts_with("subpane.")
}

/// Whether a JSON line an agent wrote claims to be one of subpane's own events: such a line
/// is never an event (it goes to `stdout.log`), so `events.jsonl` holds only subpane's.
/// A fast look first: the bytes `subpane.` must be there at all.
pub fn is_own_event(line: &[u8]) -> bool {
    if memchr::memmem::find(line, b"subpane.").is_none() {
        return false;
    }
    #[derive(serde::Deserialize)]
    struct Typed<'a> {
        #[serde(borrow, rename = "type")]
        kind: Option<std::borrow::Cow<'a, str>>,
    }
    common::from_line::<Typed<'_>>(line)
        .and_then(|t| t.kind)
        .is_some_and(|k| is_own_type(&k))
}

/// What happens to one stdout line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LineAction {
    /// Write the line to `events.jsonl` unchanged.
    Keep,
    /// Write this instead (e.g. a transcript repeat reduced to its type).
    Replace(Vec<u8>),
    /// Drop it (a streaming delta); counted in `filter`.
    Drop,
    /// Not an event: write it to `stdout.log`.
    Plain,
    /// An event that is also output: write it to `events.jsonl` and to `stdout.log`, so the
    /// plain log keeps every line in order (the `command` adapter's JSON-looking lines).
    KeepAndPlain,
}

/// Something for the human watching the pane. The worker sanitises all text before showing it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PaneItem {
    /// A raw output line (the `command` adapter).
    Raw(Vec<u8>),
    /// Assistant text as it streams; may hold newlines.
    Text(String),
    /// The current assistant text block ended.
    TextEnd,
    /// A tool call: its name and a short summary of its arguments.
    ToolCall { name: String, summary: String },
    /// A tool result, abbreviated.
    ToolResult { summary: String, is_error: bool },
    /// An error the agent reported.
    Error(String),
    /// Anything else worth a line (session started, model, usage and cost at the end).
    Info(String),
}

/// The parser's verdict on one line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineResult {
    pub action: LineAction,
    /// This line is the agent's terminal event: the linger clock starts.
    pub terminal: bool,
    /// This line ends a turn of the agent: the terminal event, and in an input mode each
    /// later turn's end too (the worker then closes the input, or keeps it open).
    pub turn_end: bool,
    pub pane: Vec<PaneItem>,
    /// Pane lines the parser did not build because the pane had no room (see
    /// `StreamParser::set_pane_room`); they count as skipped, as if built and skipped.
    pub unshown: u64,
    /// In the CLI's input mode: this line says the CLI took the oldest message (or
    /// interrupt) subpane gave it that it had not yet said so of (see [`StreamParser::say`]).
    pub taken: Option<Took>,
    /// Bytes for the CLI's stdin in its input mode, this line's answer (a protocol's next
    /// request once the CLI answered the last one).
    pub reply: Option<Vec<u8>>,
}

/// What a CLI said it took (messages and interrupts are taken in their own orders).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Took {
    /// A user message (the prompt first).
    Message,
    Interrupt,
}

impl LineResult {
    pub fn keep() -> Self {
        Self {
            action: LineAction::Keep,
            terminal: false,
            turn_end: false,
            pane: Vec::new(),
            unshown: 0,
            taken: None,
            reply: None,
        }
    }
    pub fn drop_line() -> Self {
        Self {
            action: LineAction::Drop,
            terminal: false,
            turn_end: false,
            pane: Vec::new(),
            unshown: 0,
            taken: None,
            reply: None,
        }
    }
    pub fn plain(line: &[u8]) -> Self {
        Self {
            action: LineAction::Plain,
            terminal: false,
            turn_end: false,
            pane: vec![PaneItem::Raw(line.to_vec())],
            unshown: 0,
            taken: None,
            reply: None,
        }
    }
    /// A plain line with nothing for the pane.
    pub fn plain_unshown() -> Self {
        Self {
            action: LineAction::Plain,
            terminal: false,
            turn_end: false,
            pane: Vec::new(),
            unshown: 0,
            taken: None,
            reply: None,
        }
    }
}

/// What an adapter read from the whole stream.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AgentReport {
    /// `output` of the envelope; `final_text` also goes to `output.txt`.
    pub output: Output,
    /// The type of the terminal event, when one was seen.
    pub terminal_event: Option<String>,
    /// The agent reported a failure (model error, `is_error`, `turn.failed`).
    pub model_error: bool,
}

/// Reads one agent's stdout, line by line.
pub trait StreamParser: Send {
    /// One complete line, without its trailing `\n` (and `\r`), at most 64 MiB.
    fn on_line(&mut self, line: &[u8]) -> LineResult;
    /// Called once after the agent exited. `stderr_tail` is the last 64 KiB of its stderr.
    fn finish(&mut self, stderr_tail: &[u8]) -> AgentReport;
    /// Whether the pane can take more now. When it cannot, a parser may drop streaming
    /// deltas without reading them (their text is only for the pane, and reading them is most
    /// of the filter's work on a fast stream), and need not build the pane lines of the events
    /// it keeps (it counts them in [`LineResult::unshown`]).
    fn set_pane_room(&mut self, _room: bool) {}
    /// Usage and counts so far, for the live views (`progress.json`). Called at most a few
    /// times a second, never per line.
    fn so_far(&self) -> SoFar {
        SoFar::default()
    }
    /// The bytes that say `what` on the CLI's stdin in its input mode (whole lines); `None`
    /// when the CLI cannot be told that (an interrupt), or needs no prompt there. The
    /// parser speaks it: what it read may be needed (the turn to steer).
    fn say(&mut self, _what: Say<'_>) -> Option<Vec<u8>> {
        None
    }
}

/// What subpane says to an agent CLI on its stdin, in the CLI's input mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Say<'a> {
    /// The task, as the first user message.
    Prompt(&'a str),
    /// A user message while it runs: a steer of the turn under way where the CLI can,
    /// else its next turn.
    Message(&'a str),
    /// Stop the current turn, not the CLI.
    Interrupt,
}

/// Paths an adapter may use when building argv (e.g. where pi keeps its sessions).
#[derive(Clone, Debug)]
pub struct ArgvContext<'a> {
    pub run_dir: &'a Path,
    /// A directory shared by all runs, where an agent keeps the sessions it saves, so that
    /// any later run (`--resume ID`) finds them (`$SUBPANE_HOME/sessions/<agent>`).
    pub sessions_dir: &'a Path,
    pub attempt_dir: &'a Path,
    /// The task's prompt, already written to this file (`prompt.txt` in the attempt dir).
    /// One argv element is limited to 128 KiB by Linux, so large prompts go by file or stdin.
    pub prompt_file: &'a Path,
}

/// Prompts longer than this are not passed as one argv element (Linux caps one at 128 KiB).
pub const MAX_INLINE_PROMPT: usize = 96 * 1024;

/// How to start the agent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentLaunch {
    /// The full argv, program first.
    pub argv: Vec<String>,
    pub stdin: Stdin,
}

/// Knowledge of one agent CLI.
pub trait Adapter: Sync {
    fn kind(&self) -> AgentKind;
    /// The binary looked up on `PATH` (`None` for `command`).
    fn binary(&self) -> Option<&'static str>;
    /// How to install the binary, for the error when it is missing.
    fn install_hint(&self) -> &'static str;
    /// The full argv, `program` first, and where stdin comes from. Never goes through a shell.
    fn launch(&self, program: &str, task: &TaskSpec, ctx: &ArgvContext<'_>) -> AgentLaunch;
    fn parser(&self) -> Box<dyn StreamParser>;
    /// Whether a clean run must show a terminal event.
    fn expects_terminal_event(&self) -> bool;
    /// The levels `--thinking` may name for this CLI.
    fn thinking_levels(&self) -> &'static [&'static str] {
        THINKING_LEVELS
    }
    /// Why a limit of a budget cannot hold for this CLI: `None` when its events report that
    /// figure as they come, so the worker can stop it once the figure passes the limit.
    fn not_live(&self, _limit: BudgetLimit) -> Option<&'static str> {
        Some("it reports no usage")
    }
    /// Whether this CLI spends what `limit` counts without ever saying so, even at its end
    /// (Codex's cost): a group's budget of that limit cannot count its runs. A program that
    /// spends nothing (a command) does not.
    fn never_reports(&self, _limit: BudgetLimit) -> bool {
        false
    }
    /// Settings every attempt of this CLI gets where the user's own do not say otherwise:
    /// the file in its state directory, and a JSON object merged under the user's (pi's
    /// provider retries off: its client would sleep a usage limit's whole `retry-after`,
    /// silently). The attempt's state directory holds the merged file, and links to the
    /// rest of the user's (see `app::start::overlay`).
    fn settings_defaults(&self) -> Option<(&'static str, &'static str)> {
        None
    }
    /// What the CLI needs inside a sandbox besides [`BASE_ENV`].
    fn sandbox_needs(&self) -> SandboxNeeds {
        SandboxNeeds::default()
    }
    /// The directories where the CLI keeps its session transcripts inside subpane's home (a
    /// sandboxed agent's state directory `state_dir`; pi's `--session-dir`): what the agent
    /// saw, masked when the attempt ends (its key echoed by a tool is in them).
    fn transcript_dirs(
        &self,
        _argv: &[String],
        state_dir: Option<&std::path::Path>,
    ) -> Vec<std::path::PathBuf> {
        let Some(session) = self.sandbox_needs().state_dir.and_then(|s| s.session) else {
            return Vec::new();
        };
        let top = session.split('/').next().unwrap_or(session);
        state_dir.map(|d| vec![d.join(top)]).unwrap_or_default()
    }
    /// What the CLI's configuration in its state directory gives as its key: the planner masks
    /// the variables of those names the program has (a name like `*_API_KEY` is masked anyway).
    fn key_vars(&self, _state_dir: &std::path::Path) -> Vec<String> {
        Vec::new()
    }
    /// Why this CLI cannot take messages while it runs; `None` when it can: its argv for a
    /// task with `input` set starts its input mode (`Stdin::Input`), and its parser speaks it
    /// ([`StreamParser::say`]).
    fn no_input(&self) -> Option<&'static str> {
        Some("it has no input mode subpane can speak")
    }
    /// The parser of the CLI's input mode when it is not [`Adapter::parser`] (another
    /// protocol on stdout): built for the task, whose settings it may speak.
    fn input_parser(&self, _task: &TaskSpec) -> Option<Box<dyn StreamParser>> {
        None
    }
    /// The parser of an attempt's stdout: its input mode's, or the plain one.
    fn parser_for(&self, task: Option<&TaskSpec>) -> Box<dyn StreamParser> {
        task.filter(|t| t.input)
            .and_then(|t| self.input_parser(t))
            .unwrap_or_else(|| self.parser())
    }
    /// Whether the CLI says on stdout that it took a message ([`LineResult::taken`]); when it
    /// does not, a message is taken once written to its stdin.
    fn acknowledges(&self) -> bool {
        false
    }
}

/// subpane's thinking levels (pi's own; Claude Code and Codex get them as their effort).
pub const THINKING_LEVELS: &[&str] = &["off", "minimal", "low", "medium", "high", "xhigh"];

/// Variables every sandboxed program keeps (a trailing `*` is a prefix).
pub const BASE_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "COLORTERM",
    "LANG",
    "LC_*",
    "TZ",
    "NO_COLOR",
];

/// What an agent CLI needs inside a sandbox.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SandboxNeeds {
    /// Variables it reads: its API keys and configuration (a trailing `*` is a prefix).
    pub env: &'static [&'static str],
    /// Its own state directory, which it writes.
    pub state_dir: Option<StateDir>,
}

/// An agent CLI's state directory: where the user's is, and what a sandboxed attempt's own
/// one is seeded with from it. A hook written into the user's would run in the user's next
/// unsandboxed session, so a sandboxed attempt gets a directory of its own, set by `var`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StateDir {
    /// The variable that names it.
    pub var: &'static str,
    /// Where it is without the variable, under `$HOME`.
    pub default: &'static str,
    /// Files copied in: what the CLI reads and may write (its settings, its login, which it
    /// refreshes). Small; absent ones are skipped.
    pub copy: &'static [&'static str],
    /// Directories linked to the user's: what the CLI only reads (skills, commands, agents).
    /// Read-only through the link: the user's directory is outside the writable trees.
    pub link: &'static [&'static str],
    /// A file of the user's home that lives in the directory once `var` is set
    /// (`~/.claude.json` is `$CLAUDE_CONFIG_DIR/.claude.json`): copied in when `var` was
    /// not set.
    pub home_file: Option<&'static str>,
    /// Where the CLI keeps a saved session, below the directory: components with `*` and
    /// `{id}` (a new run that resumes a session gets that session's files copied in).
    pub session: Option<&'static str>,
}

/// Whether `name` is kept by a list of names and `PREFIX*` patterns.
pub fn env_allowed(list: &[&str], name: &str) -> bool {
    list.iter().any(|p| match p.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => *p == name,
    })
}

/// The state directories of every agent CLI (they all stay out of a sandbox's reach).
pub fn state_dirs() -> impl Iterator<Item = StateDir> {
    [AgentKind::Pi, AgentKind::Claude, AgentKind::Codex]
        .into_iter()
        .filter_map(|k| adapter_for(k).sandbox_needs().state_dir)
}

/// The adapter of a kind.
pub fn adapter_for(kind: AgentKind) -> &'static dyn Adapter {
    match kind {
        AgentKind::Command => &CommandAdapter,
        AgentKind::Pi => &PiAdapter,
        AgentKind::Claude => &ClaudeAdapter,
        AgentKind::Codex => &CodexAdapter,
    }
}

/// Whether a message speaks of a context overflow (shared by all adapters).
pub fn mentions_context_overflow(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    [
        "context length",
        "context window",
        "prompt is too long",
        "maximum context",
        "context_length_exceeded",
        "too many tokens",
    ]
    .iter()
    .any(|p| t.contains(p))
}

#[cfg(test)]
mod tests {
    use super::test_support::Replay;
    use super::*;

    /// `logs --pretty` reads `events.jsonl` back through the adapter: what it shows must be
    /// what the pane showed from the live stream (the same text, tool calls, results, errors
    /// and usage line), for every recorded transcript of every agent.
    #[test]
    fn events_read_back_show_what_the_pane_showed() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/transcripts");
        let mut checked = 0;
        for kind in [AgentKind::Pi, AgentKind::Claude, AgentKind::Codex] {
            let dir = root.join(kind.as_str());
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.extension().is_none_or(|e| e != "jsonl") {
                    continue;
                }
                let t = std::fs::read_to_string(&path).unwrap();
                let live = Replay::run(adapter_for(kind).parser(), &t, "");
                let back = Replay::run(adapter_for(kind).parser(), &live.events_jsonl(), "");
                let what = path.display();
                assert_eq!(back.pane_text(), live.pane_text(), "text of {what}");
                let others = |r: &Replay| -> Vec<PaneItem> {
                    r.pane()
                        .into_iter()
                        .filter(|p| !matches!(p, PaneItem::Text(_) | PaneItem::TextEnd))
                        .collect()
                };
                assert_eq!(others(&back), others(&live), "items of {what}");
                checked += 1;
            }
        }
        assert!(checked >= 18, "only {checked} transcripts found");
    }

    /// The live figures (`progress.json`) grow as the agent goes and end at what the envelope
    /// reports; before its last event an agent already shows tokens.
    #[test]
    fn usage_so_far_ends_at_the_reported_usage() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/transcripts");
        for kind in [AgentKind::Pi, AgentKind::Claude, AgentKind::Codex] {
            let t =
                std::fs::read_to_string(root.join(kind.as_str()).join("tool_write.jsonl")).unwrap();
            let mut p = adapter_for(kind).parser();
            let lines: Vec<&str> = t.lines().collect();
            let mut before_end = None;
            for l in &lines {
                if p.on_line(l.as_bytes()).terminal {
                    break;
                }
                before_end = Some(p.so_far());
            }
            let end = p.so_far();
            let rep = p.finish(b"");
            assert_eq!(end.usage, rep.output.usage, "{kind:?}");
            assert_eq!(end.tool_calls, rep.output.tool_calls, "{kind:?}");
            assert_eq!(end.tool_calls, Some(1), "{kind:?}");
            let before = before_end.unwrap();
            assert_eq!(before.tool_calls, Some(1), "{kind:?}");
            if kind != AgentKind::Codex {
                // Codex reports usage only with the turn's end.
                assert!(
                    before.usage.and_then(|u| u.input_tokens).unwrap_or(0) > 0,
                    "{kind:?} shows no tokens before its end"
                );
            }
        }
    }

    /// events.jsonl holds JSON only, and JSON text is UTF-8: a kept event with invalid UTF-8
    /// anywhere, in a field no adapter reads too, is not an event but a plain line
    /// (stdout.log), for every agent and with the pane full or not.
    #[test]
    fn a_kept_event_with_invalid_utf8_in_a_skipped_field_is_plain() {
        let lines: [(AgentKind, &[u8]); 6] = [
            (AgentKind::Pi, b"{\"type\":\"message_end\",\"junk\":\"\xff\"}"),
            (AgentKind::Pi, b"{\"junk\":\"\xff\",\"type\":\"turn_end\"}"),
            (AgentKind::Claude, b"{\"type\":\"assistant\",\"message\":{\"content\":[]},\"junk\":\"\xc3\"}"),
            (AgentKind::Claude, b"{\"junk\":[\"\xff\"],\"type\":\"user\"}"),
            (AgentKind::Codex, b"{\"type\":\"item.completed\",\"item\":{\"type\":\"reasoning\",\"junk\":\"\xed\xa0\x80\"}}"),
            (AgentKind::Codex, b"{\"junk\":\"\xff\",\"type\":\"turn.started\"}"),
        ];
        for (kind, line) in lines {
            for room in [true, false] {
                let mut p = adapter_for(kind).parser();
                p.set_pane_room(room);
                let what = String::from_utf8_lossy(line);
                assert_eq!(p.on_line(line).action, LineAction::Plain, "{kind:?} {what}");
                let valid = String::from_utf8_lossy(line).into_owned();
                assert_ne!(
                    p.on_line(valid.as_bytes()).action,
                    LineAction::Plain,
                    "{kind:?}: the same line made valid is an event"
                );
            }
        }
    }

    /// JSON that only the typed parse refuses (a number beyond `f64` in a field the parser
    /// reads; serde skips it elsewhere): pi calls the line plain, Claude Code's and Codex's
    /// parsers keep it as an event they cannot read (`parse::Grammar::UNPARSED_IS_PLAIN`).
    #[test]
    fn a_number_beyond_f64_where_the_parser_reads_is_plain_for_pi_only() {
        let lines: [(AgentKind, &[u8], LineAction); 3] = [
            (
                AgentKind::Pi,
                br#"{"type":"message_end","message":{"role":"assistant","usage":{"input":1e400}}}"#,
                LineAction::Plain,
            ),
            (
                AgentKind::Claude,
                br#"{"type":"result","total_cost_usd":1e400}"#,
                LineAction::Keep,
            ),
            (
                AgentKind::Codex,
                br#"{"type":"turn.completed","usage":{"input_tokens":1e400}}"#,
                LineAction::Keep,
            ),
        ];
        for (kind, line, want) in lines {
            let mut p = adapter_for(kind).parser();
            let r = p.on_line(line);
            assert_eq!(r.action, want, "{kind:?}");
            assert!(
                !r.terminal,
                "{kind:?}: an event it could not read ends nothing"
            );
        }
    }

    #[test]
    fn overflow_phrases() {
        assert!(mentions_context_overflow(
            "Error: prompt is too long: 250000 tokens"
        ));
        assert!(mentions_context_overflow(
            "This model's maximum context length is 8192"
        ));
        assert!(mentions_context_overflow("exceeds the Context Window"));
        assert!(!mentions_context_overflow("rate limited"));
    }
}
