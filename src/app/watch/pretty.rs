//! `logs --pretty`: an agent's `events.jsonl` read back through its adapter and shown by the
//! pane's own renderer, so the log reads as the pane did (streamed text, tool calls and
//! results, errors, usage).
//!
//! ```text
//!  events.jsonl bytes ─► LineSplitter ─► the run's adapter (on_line) ─► PaneItem
//!                         (whole lines;                                   │
//!                          a partial one waits)       worker::Render ◄────┘ ─► text
//! ```
//!
//! Common pitfalls:
//! * `events.jsonl` has no streaming deltas: an adapter shows a message's whole text when no
//!   delta of it came (tested over every recorded transcript in `adapter`).
//! * Following (`-f`) feeds the file as it grows: a line is parsed only once it is whole.

use crate::adapter::{StreamParser, adapter_for};
use crate::spec::AgentKind;
use crate::worker::{LineSplitter, MAX_LINE, Piece, Render, Style};

/// An agent's events as the pane shows them, chunk by chunk.
pub struct PrettyLog {
    splitter: LineSplitter,
    parser: Box<dyn StreamParser>,
    render: Render,
}

impl PrettyLog {
    /// For the events of `agent`; `color` for ANSI styles.
    pub fn new(agent: AgentKind, color: bool) -> Self {
        Self::for_task(agent, None, color)
    }

    /// For the events of an attempt of `agent` with `task` (its input mode may speak another
    /// protocol: Codex's app-server).
    pub fn for_task(agent: AgentKind, task: Option<&crate::spec::TaskSpec>, color: bool) -> Self {
        Self {
            splitter: LineSplitter::new(MAX_LINE),
            parser: adapter_for(agent).parser_for(task),
            render: Render::new(color, "\n"),
        }
    }

    /// The text of the whole lines `chunk` completes.
    pub fn push(&mut self, chunk: &[u8]) -> String {
        let mut out = String::new();
        let (parser, render) = (&mut self.parser, &mut self.render);
        self.splitter
            .feed(chunk, &mut |p| show(p, parser.as_mut(), render, &mut out));
        out
    }

    /// The text of a last line without its newline, and the end of open text.
    pub fn finish(&mut self) -> String {
        let mut out = String::new();
        let (parser, render) = (&mut self.parser, &mut self.render);
        self.splitter
            .finish(&mut |p| show(p, parser.as_mut(), render, &mut out));
        render.item(&crate::adapter::PaneItem::TextEnd, &mut out);
        out
    }
}

fn show(p: Piece<'_>, parser: &mut dyn StreamParser, render: &mut Render, out: &mut String) {
    match p {
        Piece::Line(l) => {
            // What was said to the agent: subpane's own event, shown as the pane showed it.
            if let Some(said) = said(l) {
                render.line(Style::Cyan, &said, out);
                return;
            }
            for item in parser.on_line(l).pane {
                render.item(&item, out);
            }
        }
        Piece::Oversized { bytes } => render.line(
            Style::Dim,
            &format!("… a line of {bytes} bytes is not shown (over the 64 MiB bound)"),
            out,
        ),
    }
}

/// A `subpane.input` event as its line in the pane.
fn said(line: &[u8]) -> Option<String> {
    if !crate::adapter::is_own_event(line) {
        return None;
    }
    let v: serde_json::Value = serde_json::from_slice(line).ok()?;
    let from = v.get("from")?.as_str()?;
    let interrupt = v.get("kind").and_then(|k| k.as_str()) == Some("interrupt");
    let text = v.get("text").and_then(|t| t.as_str()).unwrap_or("");
    let shown = crate::worker::said_line(from, interrupt, text);
    Some(crate::term::sanitize(shown.as_bytes(), 2000))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_read_in_any_chunks_show_the_same() {
        let events = concat!(
            r#"{"type":"item.completed","item":{"id":"i0","type":"agent_message","text":"Hello\u001b]0;x\u0007 there"}}"#,
            "\n",
            r#"{"type":"item.started","item":{"id":"i1","type":"command_execution","command":"ls -la"}}"#,
            "\n",
            "not json\n",
        );
        let whole = {
            let mut p = PrettyLog::new(AgentKind::Codex, false);
            let mut s = p.push(events.as_bytes());
            s.push_str(&p.finish());
            s
        };
        assert_eq!(whole, "Hello^[]0;x^G there\n▸ shell ls -la\nnot json\n");
        let mut p = PrettyLog::new(AgentKind::Codex, false);
        let mut bytewise = String::new();
        for b in events.as_bytes() {
            bytewise.push_str(&p.push(std::slice::from_ref(b)));
        }
        bytewise.push_str(&p.finish());
        assert_eq!(bytewise, whole);
    }
}
