//! What an answer shows of an attempt's output files: their ends, by one policy with one
//! parameter, the [`EndSize`] (a person's terminal and an MCP answer have different room).
//!
//! ```text
//!  stdout.log ─► the last `bytes` ─► the line the window cut, left out ─► the last `lines`
//!                (and the byte before,   (unless it is all there is:      lines
//!                 to see where lines      then from its next character)     │
//!                 begin)                                                    ▼
//!                                         sanitize_lines ─► OutputEnd { text, cut }
//!
//!  ends(envelope, paths, size): a command's stdout (an agent's answer is its final text),
//!                               and stderr when the attempt did not complete
//! ```
//!
//! Common pitfalls:
//! * A window can begin inside a line, or inside a character: a part of a line is shown
//!   only when it is the only line there is, and never from half a character.
//! * The files are the program's: a log may be a link it planted (opened with
//!   [`crate::store::open_read`], never followed), and anything can be in the text (it reaches
//!   an answer only through [`crate::term::sanitize_lines`]).

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use crate::app::Error;
use crate::envelope::{Envelope, Status};
use crate::spec::AgentKind;
use crate::store::AttemptPaths;

/// How much of a file's end an answer shows: at most `lines` lines (at least one) of its
/// last `bytes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndSize {
    pub lines: usize,
    pub bytes: u64,
}

impl EndSize {
    /// A person's terminal (`run`, `wait`, `status`, `cancel`): a screenful of lines.
    pub const TERMINAL: EndSize = EndSize {
        lines: 20,
        bytes: 64 * 1024,
    };
    /// An MCP answer: a model reads it next to the rest of a bounded answer (and the whole
    /// file is one `logs` call away), so it is bounded in bytes.
    pub const ANSWER: EndSize = EndSize {
        lines: usize::MAX,
        bytes: 2 * 1024,
    };
}

/// The end of an output file, made safe to show.
///
/// ```json
/// {"text": "ok 12 tests\n", "cut": false}
/// ```
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OutputEnd {
    /// Whole lines, control characters shown as text; `\n` and `\t` kept, the file's final
    /// newline too.
    pub text: String,
    /// Something before `text` is not shown.
    pub cut: bool,
}

/// The ends of a finished attempt's output that its answer shows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ends {
    /// A command's stdout (an agent's answer is its final text instead).
    pub stdout: Option<OutputEnd>,
    /// stderr, when the attempt did not complete.
    pub stderr: Option<OutputEnd>,
}

/// What the answer for the finished attempt `env` shows of its output, under `size`.
pub fn ends(env: &Envelope, paths: &AttemptPaths, size: EndSize) -> Ends {
    Ends {
        stdout: (env.agent == AgentKind::Command)
            .then(|| output_end(&paths.stdout_log(), size))
            .flatten(),
        stderr: (env.status != Status::Completed)
            .then(|| output_end(&paths.stderr_log(), size))
            .flatten(),
    }
}

/// The end of `path` under `size`; `None` when it is missing, unreadable or blank.
pub fn output_end(path: &Path, size: EndSize) -> Option<OutputEnd> {
    end_shown(path, size, crate::term::sanitize_lines)
}

/// Like [`output_end`], but plain SGR colour stays in the text (`top`'s detail draws it).
pub fn output_end_keep_sgr(path: &Path, size: EndSize) -> Option<OutputEnd> {
    end_shown(path, size, crate::term::sanitize_lines_keep_sgr)
}

/// The end of `path` under `size`, made safe by `show`.
fn end_shown(path: &Path, size: EndSize, show: fn(&[u8]) -> String) -> Option<OutputEnd> {
    let w = read_window(path, size.bytes).ok().flatten()?;
    let mut b: &[u8] = &w.bytes;
    // Plain scans, not the memchr crate: a window is at most 64 KiB, and memchr's first call
    // detects the CPU's features (a dozen `cpuid`s, each a VM exit: ~0.1 ms) after the
    // attempt has ended, on the way to the answer.
    if w.mid_line {
        b = match b.iter().position(|c| *c == b'\n') {
            Some(i) if i + 1 < b.len() => &b[i + 1..],
            _ => from_a_character(b),
        };
    }
    let mut cut = w.start > 0;
    // The last `lines` lines: a final newline ends the last line, it does not begin one.
    let body = b.strip_suffix(b"\n").unwrap_or(b);
    let mut newlines = body.iter().enumerate().rev().filter(|(_, c)| **c == b'\n');
    if let Some((i, _)) = newlines.nth(size.lines.max(1) - 1) {
        b = &b[i + 1..];
        cut = true;
    }
    let text = show(b);
    (!text.trim().is_empty()).then_some(OutputEnd { text, cut })
}

/// The last `max` bytes of `path` as text safe to show (from a character on), and the
/// file's size; `None` when it does not exist. What the MCP `logs` tool answers.
pub fn log_end(path: &Path, max: u64) -> Result<Option<(String, u64)>, Error> {
    let w = read_window(path, max).map_err(|source| crate::store::StoreError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(w.map(|w| {
        let b = if w.start > 0 {
            from_a_character(&w.bytes)
        } else {
            &w.bytes[..]
        };
        (crate::term::sanitize_lines(b), w.size)
    }))
}

/// The last bytes of a file.
struct Window {
    bytes: Vec<u8>,
    /// Where they begin in the file, and its size.
    start: u64,
    size: u64,
    /// The byte before them is not a newline: they begin inside a line.
    mid_line: bool,
}

/// Reads the last `max` bytes of `path` (and the byte before them); `None` when it does not
/// exist.
fn read_window(path: &Path, max: u64) -> std::io::Result<Option<Window>> {
    // Never through a link: the program may have put one under the log's name.
    let mut f = match crate::store::open_read(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let size = f.metadata()?.len();
    let start = size.saturating_sub(max);
    let before = start.min(1);
    f.seek(SeekFrom::Start(start - before))?;
    let want = size - start + before;
    let mut bytes = Vec::with_capacity(usize::try_from(want).unwrap_or(0));
    f.take(want).read_to_end(&mut bytes)?;
    let mid_line = before == 1 && bytes.first().is_some_and(|b| *b != b'\n');
    bytes.drain(..(before as usize).min(bytes.len()));
    Ok(Some(Window {
        bytes,
        start,
        size,
        mid_line,
    }))
}

/// `b` from its first whole character: the continuation bytes of one cut in half skipped.
fn from_a_character(b: &[u8]) -> &[u8] {
    let skip = b
        .iter()
        .take(3)
        .take_while(|x| (**x & 0xC0) == 0x80)
        .count();
    &b[skip..]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end_of(content: &[u8], lines: usize, bytes: u64) -> Option<OutputEnd> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("stdout.log");
        std::fs::write(&p, content).unwrap();
        output_end(&p, EndSize { lines, bytes })
    }

    fn shown(text: &str, cut: bool) -> Option<OutputEnd> {
        Some(OutputEnd {
            text: text.into(),
            cut,
        })
    }

    #[test]
    fn a_small_file_is_shown_whole() {
        assert_eq!(end_of(b"a\nb\n", 20, 1024), shown("a\nb\n", false));
        assert_eq!(end_of(b"a\nb", 20, 1024), shown("a\nb", false));
    }

    #[test]
    fn the_line_the_window_cuts_is_left_out() {
        // The window is "ne\nlast\n": "ne" is the end of a cut line.
        assert_eq!(end_of(b"first line\nlast\n", 20, 8), shown("last\n", true));
        // A window that begins where a line does keeps that line.
        assert_eq!(end_of(b"first\nlast\n", 20, 5), shown("last\n", true));
    }

    #[test]
    fn one_long_line_is_shown_from_a_character_on() {
        let long = "é".repeat(10);
        // 5 bytes from the end: half an é, then two whole ones.
        assert_eq!(end_of(long.as_bytes(), 20, 5), shown("éé", true));
    }

    #[test]
    fn at_most_the_last_lines() {
        assert_eq!(end_of(b"1\n2\n3\n4\n", 2, 1024), shown("3\n4\n", true));
        assert_eq!(end_of(b"1\n2\n3\n4", 2, 1024), shown("3\n4", true));
        assert_eq!(end_of(b"1\n2\n", 2, 1024), shown("1\n2\n", false));
    }

    #[test]
    fn control_characters_are_shown_as_text() {
        assert_eq!(
            end_of(b"\x1b[31mred\x07\n", 20, 1024),
            shown("^[[31mred^G\n", false)
        );
    }

    #[test]
    fn nothing_to_show_is_none() {
        assert_eq!(end_of(b"", 20, 1024), None);
        assert_eq!(end_of(b" \n\n", 20, 1024), None);
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            output_end(&dir.path().join("none"), EndSize::TERMINAL),
            None
        );
    }

    #[test]
    fn a_log_end_is_bytes_from_a_character_on() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("stderr.log");
        std::fs::write(&p, "oops\né").unwrap();
        assert_eq!(log_end(&p, 3).unwrap(), Some(("\né".into(), 7)));
        assert_eq!(log_end(&p, 1).unwrap(), Some(("".into(), 7)));
        assert_eq!(log_end(&dir.path().join("none"), 3).unwrap(), None);
    }
}
