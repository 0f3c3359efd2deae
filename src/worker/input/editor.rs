//! The pane's input line: keys in, a line out on Enter (the worker draws it, `Pane::draw_input`).

/// The pane's input line: what a person typed, until Enter.
#[derive(Default)]
pub(crate) struct Editor {
    line: String,
    /// Bytes of an escape sequence (arrow keys and the like) being skipped, or of a UTF-8
    /// character not yet whole.
    pending: Vec<u8>,
    in_escape: bool,
}

/// What keys did to the line.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Edit {
    /// The line changed: redraw it.
    Changed,
    /// Enter on a line with text: send it.
    Send(String),
}

impl Editor {
    /// The line as typed so far.
    pub(crate) fn text(&self) -> &str {
        &self.line
    }

    /// Takes the bytes a read of the pane's input gave.
    pub(crate) fn keys(&mut self, bytes: &[u8]) -> Vec<Edit> {
        let mut edits = Vec::new();
        for &b in bytes {
            if self.in_escape {
                // CSI and SS3 sequences end at a final byte in 0x40..=0x7e.
                self.pending.push(b);
                let len = self.pending.len();
                let done = match self.pending.first() {
                    Some(b'[') | Some(b'O') => len > 1 && (0x40..=0x7e).contains(&b),
                    _ => true,
                };
                if done {
                    self.in_escape = false;
                    self.pending.clear();
                }
                continue;
            }
            match b {
                0x1b => {
                    self.in_escape = true;
                    self.pending.clear();
                }
                b'\r' | b'\n' => {
                    let text = std::mem::take(&mut self.line);
                    if text.trim().is_empty() {
                        edits.push(Edit::Changed);
                    } else {
                        edits.push(Edit::Send(text));
                    }
                }
                0x7f | 0x08 => {
                    self.line.pop();
                    edits.push(Edit::Changed);
                }
                // Ctrl-U: the whole line.
                0x15 => {
                    self.line.clear();
                    edits.push(Edit::Changed);
                }
                b if b < 0x20 => {}
                b => {
                    self.pending.push(b);
                    match std::str::from_utf8(&self.pending) {
                        Ok(s) => {
                            if self.line.len() < 64 * 1024 {
                                self.line.push_str(s);
                            }
                            self.pending.clear();
                            edits.push(Edit::Changed);
                        }
                        Err(e) if e.error_len().is_some() || self.pending.len() >= 4 => {
                            self.pending.clear();
                        }
                        Err(_) => {}
                    }
                }
            }
        }
        edits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_editor_sends_a_line_on_enter_and_skips_escapes() {
        let mut e = Editor::default();
        let edits = e.keys(b"hex\x7flo \x1b[Dw\xc3\xa9\r");
        assert_eq!(edits.last(), Some(&Edit::Send("helo wé".into())));
        assert_eq!(e.text(), "");
        assert_eq!(
            e.keys(b"  \r"),
            vec![Edit::Changed, Edit::Changed, Edit::Changed]
        );
        e.keys(b"abc\x15d");
        assert_eq!(e.text(), "d");
        // A character split across reads.
        e.keys(b"\xc3");
        e.keys(b"\xa9");
        assert_eq!(e.text(), "dé");
    }
}
