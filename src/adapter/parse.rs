//! The one skeleton under every agent's parser (pi, claude, codex): how a line is read, what
//! every agent's report holds the same way, and the end. An agent brings only its grammar
//! ([`Grammar`]): which types are deltas, how a kept event is read, its usage figures.
//!
//! ```text
//! line ─ starts {"type":"…"? ─ yes ─ a delta? ─ yes ─ pane full: drop_unread ─┐
//!   │                            │             └─── on_delta ─────────────────┼─ Some: verdict
//!   │                            └ no ─ on_kept ──────────────────────────────┘
//!   │  no, or None (the line did not parse) and not UNPARSED_IS_PLAIN (else plain)
//!   └─ peek ─ not an object ─ not_an_event (plain, or an array kept)
//!            ├ object without a type ─ kept
//!            └ {type} ─ a delta? on_delta, else dropped : on_kept, else kept
//! ```
//!
//! What the skeleton owns ([`Common`]): the envelope's `output` as the grammar fills it, the
//! tool calls counted and shown (`tool_call`), the terminal event (only the first one counts) with its closing usage
//! line, the pane's room, and the errors held back until the end (pi's of calls it retries,
//! Claude's API errors that no `result` followed). `finish` merges those, adds the figures and
//! the tool count, and reads the stderr tail (`finish_common`).
//!
//! Common pitfalls:
//! * The fast path reads the type from the first bytes and does not validate the line: the
//!   hook that parses it must parse it all, and return `None` when it does not parse, so the
//!   slow path decides whether it was JSON at all.
//! * A delta is most of a stream: `drop_unread` must not read past the bytes it needs, and
//!   nothing here allocates per line (the kind is a borrowed `&str` on both paths).
//! * A line the fast path could not parse is not always plain: serde skips a field's number
//!   beyond `f64` that a typed field refuses. pi's grammar calls it plain at once
//!   (`UNPARSED_IS_PLAIN`), the others let the slow path keep it; a test in `adapter` pins both.
//! * `drop_unread` is taken on the fast path only; a delta read by the slow path is read
//!   whole, as before any pane was full.

use serde::de::IgnoredAny;

use super::common::{
    Peeked, finish_common, from_line, leading_type, not_an_event, peek, usage_info,
};
use super::{AgentReport, LineResult, PaneItem, StreamParser};
use crate::envelope::{Output, SoFar, Usage};

/// What every agent's parser keeps the same way.
#[derive(Default)]
pub(crate) struct Common {
    /// The envelope's `output`, as the events fill it.
    pub out: Output,
    /// Tool calls started so far.
    pub tool_calls: u64,
    /// The type of the terminal event, once seen.
    pub terminal: Option<String>,
    /// The pane takes no more now: its lines need not be built (see
    /// `StreamParser::set_pane_room`).
    pub pane_full: bool,
    /// Errors reported only at the end, after those of `out`.
    pub held_errors: Vec<String>,
}

impl Common {
    /// A tool call started: counted, and shown unless the pane is full (then `call` is not
    /// even built).
    pub fn tool_call(&mut self, r: &mut LineResult, call: impl FnOnce() -> PaneItem) {
        self.tool_calls += 1;
        if self.pane_full {
            r.unshown += 1;
        } else {
            r.pane.push(call());
        }
    }

    /// A terminal event: the line ends a turn; the first one is also the terminal event
    /// (the linger clock starts), and closes the pane with the usage line of these figures.
    /// Later ones (the turns an input mode takes after the first) end their turns only.
    pub fn mark_terminal(&mut self, kind: &str, r: &mut LineResult, figures: Figures) {
        r.turn_end = true;
        if self.terminal.is_some() {
            return;
        }
        self.terminal = Some(kind.to_owned());
        r.terminal = true;
        let mut shown = self.out.clone();
        shown.usage = figures.usage;
        shown.cost_usd = figures.cost_usd;
        shown.turns = figures.turns;
        shown.tool_calls = Some(self.tool_calls);
        r.pane.push(usage_info(&shown));
    }
}

/// An agent's usage figures: live ones for `progress.json`, final ones for the envelope.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Figures {
    pub usage: Option<Usage>,
    pub cost_usd: Option<f64>,
    pub turns: Option<u64>,
}

/// One agent's event grammar: the hooks the skeleton calls. Every grammar is a
/// [`StreamParser`].
pub(crate) trait Grammar: Send {
    fn common(&self) -> &Common;
    fn common_mut(&mut self) -> &mut Common;
    /// What a line is whose leading type was read but that its hook could not parse: `true`,
    /// a plain line at once; `false`, what the slow path finds (JSON that only the typed parse
    /// refused, such as a number beyond `f64`, is then kept).
    const UNPARSED_IS_PLAIN: bool = false;
    /// Whether events of this type are streaming deltas: dropped, read for the pane only.
    fn is_delta(kind: &str) -> bool;
    /// A delta on the fast path while the pane is full, dropped from its first bytes without
    /// reading the line; `None` to read it after all ([`Grammar::on_delta`]).
    fn drop_unread(&mut self, _kind: &str, _line: &[u8]) -> Option<LineResult> {
        None
    }
    /// A delta, read for the pane; `None` when the line does not parse. By default it is only
    /// checked to be JSON.
    fn on_delta(&mut self, _kind: &str, line: &[u8]) -> Option<LineResult> {
        from_line::<IgnoredAny>(line).map(|_| LineResult::drop_line())
    }
    /// Any other event, read once; `None` when the line does not parse.
    fn on_kept(&mut self, kind: &str, line: &[u8]) -> Option<LineResult>;
    /// Usage, cost and turns so far.
    fn figures(&self) -> Figures;
    /// What `finish` sets as the envelope's figures; `None` leaves those the events set.
    fn final_figures(&self) -> Option<Figures> {
        Some(self.figures())
    }
    /// The agent reported a failure.
    fn model_error(&self) -> bool;
    /// A JSON object without a `type` (a JSON-RPC message, for a CLI that speaks one);
    /// `None` keeps it as it is.
    fn on_untyped(&mut self, _line: &[u8]) -> Option<LineResult> {
        None
    }
    /// See [`StreamParser::say`].
    fn say(&mut self, _what: crate::adapter::Say<'_>) -> Option<Vec<u8>> {
        None
    }
}

impl<G: Grammar> StreamParser for G {
    fn on_line(&mut self, line: &[u8]) -> LineResult {
        // Fast path (agents write `type` first): the type comes from the first bytes and the
        // line is parsed exactly once, by the hook that needs it; a line that fails that parse
        // takes the slow path, which says whether it was JSON at all.
        if let Some(kind) = leading_type(line) {
            if super::is_own_type(kind) {
                return LineResult::plain(line);
            }
            let r = if G::is_delta(kind) {
                if self.common().pane_full
                    && let Some(r) = self.drop_unread(kind, line)
                {
                    return r;
                }
                self.on_delta(kind, line)
            } else {
                self.on_kept(kind, line)
            };
            if let Some(r) = r {
                return r;
            }
            if G::UNPARSED_IS_PLAIN {
                return LineResult::plain(line);
            }
        }
        let peeked = peek(line);
        let kind = match &peeked {
            Peeked::Event(Some(k)) if super::is_own_type(k) => return LineResult::plain(line),
            Peeked::Event(Some(k)) => k.as_ref(),
            Peeked::Event(None) => return self.on_untyped(line).unwrap_or_else(LineResult::keep),
            _ => return not_an_event(line, &peeked),
        };
        if G::is_delta(kind) {
            self.on_delta(kind, line)
                .unwrap_or_else(LineResult::drop_line)
        } else {
            self.on_kept(kind, line).unwrap_or_else(LineResult::keep)
        }
    }

    fn set_pane_room(&mut self, room: bool) {
        self.common_mut().pane_full = !room;
    }

    fn say(&mut self, what: crate::adapter::Say<'_>) -> Option<Vec<u8>> {
        G::say(self, what)
    }

    fn so_far(&self) -> SoFar {
        let f = self.figures();
        SoFar {
            usage: f.usage,
            cost_usd: f.cost_usd,
            turns: f.turns,
            tool_calls: Some(self.common().tool_calls),
        }
    }

    fn finish(&mut self, stderr_tail: &[u8]) -> AgentReport {
        let figures = self.final_figures();
        let model_error = self.model_error();
        let c = self.common_mut();
        let mut out = std::mem::take(&mut c.out);
        for e in c.held_errors.drain(..) {
            out.push_error(e);
        }
        if let Some(f) = figures {
            out.usage = f.usage;
            out.cost_usd = f.cost_usd;
            out.turns = f.turns;
        }
        if out.tool_calls.is_none() {
            out.tool_calls = Some(c.tool_calls);
        }
        finish_common(&mut out, stderr_tail, c.terminal.is_some());
        AgentReport {
            output: out,
            terminal_event: c.terminal.clone(),
            model_error,
        }
    }
}
