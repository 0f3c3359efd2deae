//! The one renderer of a program's output for people: pane items (an agent's streamed text,
//! tool calls and results, errors, usage; a command's lines) as styled terminal text.
//!
//! ```text
//!  adapter ─► PaneItem ─► Render::item ─► text ─► the pane (worker, through its bounded buffer)
//!                                             └─► stdout (`logs --pretty`, app::PrettyLog)
//! ```
//!
//! Everything that came from the program is made safe here ([`crate::term::sanitize`]):
//! control characters are shown as text, so the program cannot act on the viewer's terminal.
//! The pane's terminal needs `\r\n`; a file or a terminal in its usual mode takes `\n`.

use crate::adapter::PaneItem;
use crate::term::sanitize;

/// Longest line shown, in characters; the rest is summarised (a pane is ~200 columns wide;
/// the whole line is in the files).
pub const MAX_SHOWN: usize = 1000;

/// Styles of the rendered lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    Plain,
    Dim,
    Bold,
    Red,
    Green,
    Yellow,
    Cyan,
}

impl Style {
    fn code(self) -> &'static str {
        match self {
            Style::Plain => "",
            Style::Dim => "\x1b[2m",
            Style::Bold => "\x1b[1m",
            Style::Red => "\x1b[31m",
            Style::Green => "\x1b[32m",
            Style::Yellow => "\x1b[33m",
            Style::Cyan => "\x1b[36m",
        }
    }
}

/// Renders items one after the other; it remembers whether streamed text is mid-line.
#[derive(Debug)]
pub struct Render {
    color: bool,
    eol: &'static str,
    /// Assistant text is mid-line.
    text_open: bool,
    /// A command's lines and stderr keep plain SGR colour (the pane's live view only).
    keep_sgr: bool,
}

impl Render {
    /// `color`: ANSI styles; `eol`: `"\r\n"` for the pane, `"\n"` elsewhere.
    pub fn new(color: bool, eol: &'static str) -> Self {
        Self {
            color,
            eol,
            text_open: false,
            keep_sgr: false,
        }
    }

    /// Output lines and stderr keep plain SGR colour from the program (the pane: a
    /// terminal that shows colour); every other escape is still shown as text.
    pub fn keeping_sgr(mut self, keep: bool) -> Self {
        self.keep_sgr = keep;
        self
    }

    /// An output or stderr line of the program made safe, its colour kept if asked.
    fn program_line(&self, b: &[u8]) -> String {
        if self.keep_sgr {
            crate::term::sanitize_keep_sgr(b, MAX_SHOWN)
        } else {
            sanitize(b, MAX_SHOWN)
        }
    }

    /// The output may be mid-line (after a skip or a cut): the next line starts afresh.
    pub fn forget_open_text(&mut self) {
        self.text_open = false;
    }

    /// A whole line in a style. `text` must already be made safe (or be subpane's own).
    pub fn line(&mut self, style: Style, text: &str, out: &mut String) {
        if self.text_open {
            out.push_str(self.eol);
            self.text_open = false;
        }
        if self.color && style != Style::Plain {
            out.push_str(style.code());
            out.push_str(text);
            out.push_str("\x1b[0m");
        } else {
            out.push_str(text);
        }
        out.push_str(self.eol);
    }

    /// Streaming assistant text (made safe here; newlines kept).
    fn text(&mut self, t: &str, out: &mut String) {
        for (i, part) in t.split('\n').enumerate() {
            if i > 0 {
                out.push_str(self.eol);
            }
            out.push_str(&sanitize(part.as_bytes(), MAX_SHOWN));
        }
        self.text_open = !t.ends_with('\n');
    }

    /// One item of an adapter.
    pub fn item(&mut self, item: &PaneItem, out: &mut String) {
        match item {
            PaneItem::Raw(b) => {
                let t = self.program_line(b);
                self.line(Style::Plain, &t, out)
            }
            PaneItem::Text(t) => self.text(t, out),
            PaneItem::TextEnd => {
                if self.text_open {
                    out.push_str(self.eol);
                    self.text_open = false;
                }
            }
            PaneItem::ToolCall { name, summary } => {
                let t = format!(
                    "▸ {} {}",
                    sanitize(name.as_bytes(), 80),
                    sanitize(summary.as_bytes(), 300)
                );
                self.line(Style::Cyan, &t, out);
            }
            PaneItem::ToolResult { summary, is_error } => {
                let t = format!("  ↳ {}", sanitize(summary.as_bytes(), 300));
                let style = if *is_error { Style::Red } else { Style::Dim };
                self.line(style, &t, out);
            }
            PaneItem::Error(e) => self.line(
                Style::Red,
                &format!("✘ {}", sanitize(e.as_bytes(), MAX_SHOWN)),
                out,
            ),
            PaneItem::Info(i) => self.line(Style::Dim, &sanitize(i.as_bytes(), MAX_SHOWN), out),
        }
    }

    /// A line the program wrote to stderr.
    pub fn stderr_line(&mut self, b: &[u8], out: &mut String) {
        let t = self.program_line(b);
        self.line(Style::Yellow, &t, out);
    }
}

/// A message or interrupt given to the running agent, as the pane and `logs --pretty` show
/// it (a `subpane.input` event).
pub fn said_line(from: &str, interrupt: bool, text: &str) -> String {
    if interrupt {
        format!("» {from}: (interrupt)")
    } else {
        format!("» {from}: {text}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(color: bool, items: &[PaneItem]) -> String {
        let mut r = Render::new(color, "\n");
        let mut out = String::new();
        for i in items {
            r.item(i, &mut out);
        }
        out
    }

    #[test]
    fn items_become_lines_and_text_streams() {
        let items = [
            PaneItem::Text("Let me ".into()),
            PaneItem::Text("look.".into()),
            PaneItem::ToolCall {
                name: "bash".into(),
                summary: "ls\x1b[2J".into(),
            },
            PaneItem::ToolResult {
                summary: "a b".into(),
                is_error: false,
            },
            PaneItem::Text("Done.\n".into()),
            PaneItem::TextEnd,
            PaneItem::Info("done · 1 tool call".into()),
        ];
        assert_eq!(
            render(false, &items),
            "Let me look.\n▸ bash ls^[[2J\n  ↳ a b\nDone.\ndone · 1 tool call\n"
        );
        assert_eq!(
            render(true, &items[2..3]),
            "\x1b[36m▸ bash ls^[[2J\x1b[0m\n"
        );
    }

    /// The pane keeps a command's colour; a title change and a cursor move stay text; a
    /// renderer that was not asked to keep it (`logs --pretty`) shows the colour as text.
    #[test]
    fn the_pane_keeps_a_commands_colour_and_nothing_else() {
        let line = b"\x1b[32mok\x1b[0m \x1b]0;t\x07\x1b[2;1H".to_vec();
        let mut out = String::new();
        let mut pane = Render::new(true, "\r\n").keeping_sgr(true);
        pane.item(&PaneItem::Raw(line.clone()), &mut out);
        pane.stderr_line(b"\x1b[1mwarn", &mut out);
        assert_eq!(
            out,
            "\x1b[32mok\x1b[0m ^[]0;t^G^[[2;1H\x1b[0m\r\n\x1b[33m\x1b[1mwarn\x1b[0m\x1b[0m\r\n"
        );
        assert_eq!(
            render(true, &[PaneItem::Raw(line)]),
            "^[[32mok^[[0m ^[]0;t^G^[[2;1H\n"
        );
    }
}
