//! Text from programs and agents, made safe for a terminal.
//!
//! Anything an attempt printed may hold escape sequences: a title change, a clipboard write
//! (OSC 52), a screen clear, a C1 control such as CSI (U+009B). Written raw to a person's
//! terminal they act on it. Every place that shows such text to a terminal — the pane, the
//! summaries of `run`/`status`/`wait`, `ls`, and `logs` when stdout is a terminal — goes
//! through this module, which shows control characters as visible text (`^[`, `^G`,
//! `<U+009B>`) instead.
//!
//! One exception, in two places only: the pane's live view and `top`'s detail keep plain
//! SGR colour (`ESC [` digits and `;` then `m`, what `grep --color` or a compiler prints)
//! through [`sanitize_keep_sgr`] and [`sanitize_lines_keep_sgr`]; any other sequence is
//! still shown as text there.
//!
//! Piped output is not touched: `subpane logs RUN | jq` gets the bytes as written, and
//! `--raw` keeps them on a terminal too ([`OutputMode`]).
//!
//! Common pitfalls:
//! * A chunk read from a file can end inside a UTF-8 sequence: [`TerminalFilter`] keeps the
//!   incomplete tail for the next chunk instead of showing it as invalid.
//! * `\r` moves the cursor back over what was shown: it is made visible (`^M`) like every
//!   other control, except that line-oriented text keeps `\n` and `\t`.

use std::fmt::Write as _;

/// How bytes from an attempt reach stdout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputMode {
    /// Byte for byte (a pipe or a file, or `--raw`).
    Raw,
    /// Control characters made visible (a terminal).
    Safe,
}

impl OutputMode {
    /// `Safe` when stdout is a terminal and `raw` was not asked for.
    pub fn for_stdout(raw: bool) -> Self {
        use std::io::IsTerminal;
        if !raw && std::io::stdout().is_terminal() {
            OutputMode::Safe
        } else {
            OutputMode::Raw
        }
    }
}

/// Pushes `c` to `out`, visible if it is a control character. `lines` keeps `\n` and `\t`.
fn push_visible(out: &mut String, c: char, lines: bool) {
    match c {
        '\n' | '\t' if lines => out.push(c),
        '\t' => out.push_str("    "),
        '\x00'..='\x1f' => {
            out.push('^');
            out.push((c as u8 + 0x40) as char);
        }
        '\x7f' => out.push_str("^?"),
        '\u{80}'..='\u{9f}' => {
            let _ = write!(out, "<U+{:04X}>", c as u32);
        }
        _ => out.push(c),
    }
}

/// Cuts `s` to at most `max` bytes (at a character), marking the cut with `…`: text a
/// record keeps of something without a bound of its own.
pub fn cut(s: &mut String, max: usize) {
    if s.len() > max {
        let mut at = max;
        while !s.is_char_boundary(at) {
            at -= 1;
        }
        s.truncate(at);
        s.push('…');
    }
}

/// A count of things in words: `1 tool call`, `2 tool calls` (for the pane's usage line, the
/// summaries and the live views).
pub fn counted(n: u64, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// One line of text for a terminal: every control character is shown as text (a newline
/// as `^J`), and the text is cut after `max_chars` characters with a note of what was left
/// (never a note longer than what it stands for: a short rest is shown instead).
pub fn sanitize(bytes: &[u8], max_chars: usize) -> String {
    // Fast path, most output: printable ASCII needs no change, and a byte is a character.
    let head = &bytes[..bytes.len().min(max_chars)];
    let rest = bytes.len() - head.len();
    // A rest of a few bytes may be shown whole: that is the slow path's to decide.
    if head.iter().all(|b| (0x20..0x7f).contains(b)) && (rest == 0 || rest > SHORT_REST) {
        let mut out = String::with_capacity(head.len() + 24);
        // Printable ASCII is valid UTF-8.
        out.push_str(std::str::from_utf8(head).unwrap_or_default());
        if rest > 0 {
            out.push_str(&cut_note(rest));
        }
        return out;
    }
    let text = String::from_utf8_lossy(bytes);
    let mut out = String::with_capacity(text.len().min(max_chars + 16));
    // Characters shown as they are go over in runs, not one push each.
    let mut run = 0;
    for (shown, (i, c)) in text.char_indices().enumerate() {
        if shown >= max_chars {
            out.push_str(&text[run..i]);
            out.push_str(&cut_rest(&text[i..]));
            return out;
        }
        if is_control(c) {
            out.push_str(&text[run..i]);
            push_visible(&mut out, c, false);
            run = i + c.len_utf8();
        }
    }
    out.push_str(&text[run..]);
    out
}

/// Past this many bytes, a rest is always longer than its note: a character is at most 4
/// bytes, and a note of up to 999 bytes is at most 20 characters.
const SHORT_REST: usize = 80;

/// ` … (12 more bytes)`: the note for `n` bytes cut off the end of a text.
fn cut_note(n: usize) -> String {
    format!(" … ({n} more bytes)")
}

/// What stands for `rest`, cut off the end of a text: its note, or `rest` itself (made
/// visible) when that is no longer than the note.
fn cut_rest(rest: &str) -> String {
    let note = cut_note(rest.len());
    if rest.len() <= SHORT_REST {
        let mut shown = String::new();
        rest.chars()
            .for_each(|c| push_visible(&mut shown, c, false));
        if shown.chars().count() <= note.chars().count() {
            return shown;
        }
    }
    note
}

/// The most parameter bytes of an SGR sequence kept (`38;2;255;255;255;48;2;…` fits).
const MAX_SGR: usize = 48;

/// The length in bytes of the SGR sequence `s` begins with: `ESC [`, only digits and `;`,
/// then `m`. Nothing else: every other escape still reaches a terminal as text.
pub fn sgr_len(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    if b.len() < 3 || b[0] != 0x1b || b[1] != b'[' {
        return None;
    }
    let params = b[2..]
        .iter()
        .take(MAX_SGR + 1)
        .position(|c| !(c.is_ascii_digit() || *c == b';'))?;
    (b[2 + params] == b'm').then_some(params + 3)
}

/// Shows `text` as [`push_visible`] does, but copies plain SGR colour as it is; at most
/// `max_chars` characters shown (the sequences do not count), the cut said as [`sanitize`]
/// says it. Whether an SGR sequence was kept.
fn visible_keeping_sgr(text: &str, lines: bool, max_chars: usize, out: &mut String) -> bool {
    let mut kept = false;
    let mut shown = 0;
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if let Some(n) = (c == '\x1b').then(|| sgr_len(rest)).flatten() {
            out.push_str(&rest[..n]);
            rest = &rest[n..];
            kept = true;
            continue;
        }
        if shown >= max_chars {
            if kept {
                out.push_str(SGR_RESET);
            }
            out.push_str(&cut_rest(rest));
            return false;
        }
        push_visible(out, c, lines);
        shown += 1;
        rest = &rest[c.len_utf8()..];
    }
    kept
}

/// `text` without its plain SGR sequences (colour, see [`sgr_len`]), for a one-line view that
/// shows no colour (`top`'s LAST EVENT): colour is dropped there, never shown as `^[[31m`;
/// every other escape stays for [`sanitize`] to show as text.
pub fn without_sgr(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains('\x1b') {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if let Some(n) = (c == '\x1b').then(|| sgr_len(rest)).flatten() {
            rest = &rest[n..];
            continue;
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    std::borrow::Cow::Owned(out)
}

/// The SGR sequence that ends every colour.
const SGR_RESET: &str = "\x1b[0m";

/// Like [`sanitize`], but plain SGR colour from ordinary tools (`ESC [` digits and `;` then
/// `m`) stays, and a line that kept some ends with a reset, so its colour stops with it.
/// Only for the pane's live view: every other escape is still shown as text.
pub fn sanitize_keep_sgr(bytes: &[u8], max_chars: usize) -> String {
    if !bytes.contains(&0x1b) {
        return sanitize(bytes, max_chars);
    }
    let text = String::from_utf8_lossy(bytes);
    let mut out = String::with_capacity(text.len() + 8);
    if visible_keeping_sgr(&text, false, max_chars, &mut out) {
        out.push_str(SGR_RESET);
    }
    out
}

/// Like [`sanitize_lines`], but plain SGR colour stays (for `top`'s detail, which draws it
/// as styles): every other escape is still shown as text.
pub fn sanitize_lines_keep_sgr(bytes: &[u8]) -> String {
    if !bytes.contains(&0x1b) {
        return sanitize_lines(bytes);
    }
    let text = String::from_utf8_lossy(bytes);
    let mut out = String::with_capacity(text.len());
    visible_keeping_sgr(&text, true, usize::MAX, &mut out);
    out
}

/// Whether [`push_visible`] shows `c` as something else.
fn is_control(c: char) -> bool {
    matches!(c, '\x00'..='\x1f' | '\x7f' | '\u{80}'..='\u{9f}')
}

/// Several lines of text for a terminal: like [`sanitize`], but `\n` and `\t` stay.
pub fn sanitize_lines(bytes: &[u8]) -> String {
    let mut f = TerminalFilter::default();
    let mut out = f.push(bytes);
    out.push_str(&f.finish());
    out
}

/// A stream of bytes made safe for a terminal, chunk by chunk (`logs -f` on a terminal).
#[derive(Debug, Default)]
pub struct TerminalFilter {
    /// The start of a UTF-8 sequence that the last chunk cut off.
    pending: Vec<u8>,
}

impl TerminalFilter {
    /// The text to show for `chunk`.
    pub fn push(&mut self, chunk: &[u8]) -> String {
        self.pending.extend_from_slice(chunk);
        let bytes = std::mem::take(&mut self.pending);
        let mut out = String::with_capacity(bytes.len());
        let mut rest: &[u8] = &bytes;
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    s.chars().for_each(|c| push_visible(&mut out, c, true));
                    break;
                }
                Err(e) => {
                    let (good, bad) = rest.split_at(e.valid_up_to());
                    // `valid_up_to` promises this prefix is UTF-8.
                    if let Ok(s) = std::str::from_utf8(good) {
                        s.chars().for_each(|c| push_visible(&mut out, c, true));
                    }
                    match e.error_len() {
                        Some(n) => {
                            out.push('\u{FFFD}');
                            rest = &bad[n..];
                        }
                        None => {
                            // Cut off at the end of the chunk: wait for the rest.
                            self.pending = bad.to_vec();
                            break;
                        }
                    }
                }
            }
        }
        out
    }

    /// What is left at the end of the stream (an incomplete sequence is shown as invalid).
    pub fn finish(&mut self) -> String {
        if self.pending.is_empty() {
            String::new()
        } else {
            self.pending.clear();
            "\u{FFFD}".to_owned()
        }
    }
}

/// JSON text for a terminal. serde_json escapes the C0 controls (ESC among them) but writes
/// C1 controls such as U+009B (CSI) as they are, and some terminals obey those. They can only
/// stand inside JSON strings, so `\u009b` there is the same JSON.
pub fn json_for_terminal(json: &str) -> std::borrow::Cow<'_, str> {
    if !json.chars().any(|c| ('\u{80}'..='\u{9f}').contains(&c)) {
        return std::borrow::Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if ('\u{80}'..='\u{9f}').contains(&c) {
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs of plain characters are copied whole: the result is what showing one character
    /// at a time gives.
    #[test]
    fn sanitize_is_the_char_by_char_rendering() {
        fn one_by_one(bytes: &[u8], max: usize) -> String {
            let text = String::from_utf8_lossy(bytes);
            let mut out = String::new();
            for (shown, (i, c)) in text.char_indices().enumerate() {
                if shown >= max {
                    out.push_str(&cut_rest(&text[i..]));
                    break;
                }
                push_visible(&mut out, c, false);
            }
            out
        }
        let cases: [&[u8]; 8] = [
            "née — \u{9b}x\tz".as_bytes(),
            "été\x1b[2J".as_bytes(),
            "\u{7f}\u{80}é".as_bytes(),
            b"\xff\xfeabc\x07",
            "☃☃☃☃☃".as_bytes(),
            "a\nb\rc é".as_bytes(),
            "".as_bytes(),
            "é".as_bytes(),
        ];
        for b in cases {
            for max in [1, 2, 3, 5, 100] {
                assert_eq!(sanitize(b, max), one_by_one(b, max), "{b:?} {max}");
            }
        }
    }

    #[test]
    fn escapes_cannot_reach_the_terminal() {
        let s = sanitize(b"\x1b]0;pwned\x07\x1b[2Jok\x9b\xc2\x9b", 100);
        assert!(!s.contains('\x1b') && !s.contains('\x07'), "{s:?}");
        assert!(s.contains("^[]0;pwned^G^[[2Jok"), "{s:?}");
        assert!(s.contains("<U+009B>"), "{s:?}");
        assert!(!s.chars().any(|c| c.is_control()), "{s:?}");
    }

    /// Adversarial: only SGR colour passes the SGR-keeping variant; a title-set OSC, a
    /// cursor move, a screen clear, a C1 CSI and an SGR with other bytes are still shown as
    /// text.
    #[test]
    fn the_sgr_variant_keeps_colour_and_nothing_else() {
        for hostile in [
            &b"\x1b]0;pwned\x07title"[..],
            b"\x1b]2;pwned\x1b\\title",
            b"\x1b[5;10Hmoved",
            b"\x1b[2Jcleared",
            b"\x1b[?1049hscreen",
            b"\x1b[31;>modd",
            b"\xc2\x9b31mc1",
        ] {
            let s = sanitize_keep_sgr(hostile, 100);
            assert!(
                !s.chars().any(|c| c.is_control()),
                "{hostile:?} reached the terminal as {s:?}"
            );
            assert_eq!(s, sanitize(hostile, 100), "{hostile:?}");
            assert_eq!(
                sanitize_lines_keep_sgr(hostile),
                sanitize_lines(hostile),
                "{hostile:?}"
            );
        }
        // Colour stays, and stops at the end of its line.
        assert_eq!(
            sanitize_keep_sgr(b"\x1b[1;31merror\x1b[0m: \x1b[38;5;208mx", 100),
            "\x1b[1;31merror\x1b[0m: \x1b[38;5;208mx\x1b[0m"
        );
        // Sequences do not count as shown characters; a cut ends the colour before its note
        // (a rest no longer than its note is shown instead, as `sanitize` does).
        assert_eq!(
            sanitize_keep_sgr(b"\x1b[32mabcdef", 3),
            "\x1b[32mabc\x1b[0mdef"
        );
        let long = format!("\x1b[32mabc{}", "d".repeat(40));
        assert_eq!(
            sanitize_keep_sgr(long.as_bytes(), 3),
            "\x1b[32mabc\x1b[0m … (40 more bytes)"
        );
        // An SGR next to a hostile sequence: the colour stays, the rest is text.
        assert_eq!(
            sanitize_keep_sgr(b"\x1b[31mred\x1b]0;t\x07\x1b[H", 100),
            "\x1b[31mred^[]0;t^G^[[H\x1b[0m"
        );
        // Lines: `\n` and `\t` stay, SGR stays, the rest is text.
        assert_eq!(
            sanitize_lines_keep_sgr(b"\x1b[33mwarn\x1b[0m\n\x1b]52;c;eA==\x07\x1b[1A\tx\r\n"),
            "\x1b[33mwarn\x1b[0m\n^[]52;c;eA==^G^[[1A\tx^M\n"
        );
        assert!(sgr_len(&format!("\x1b[{}m", "1;".repeat(40))).is_none());
    }

    #[test]
    fn plain_ascii_takes_the_fast_path_unchanged() {
        assert_eq!(
            sanitize(b"hello world {\"a\": 1}", 100),
            "hello world {\"a\": 1}"
        );
        let long = "x".repeat(100);
        assert_eq!(
            sanitize(format!("abc{long}").as_bytes(), 3),
            "abc … (100 more bytes)"
        );
        assert_eq!(sanitize(b"a\x1bc", 3), "a^[c");
    }

    /// A note never stands for less than itself: a rest no longer than its note is shown.
    #[test]
    fn a_cut_note_is_never_longer_than_what_it_hides() {
        assert_eq!(sanitize(b"abcdef", 3), "abcdef");
        assert_eq!(sanitize(b"abc\x1b", 3), "abc^[");
        let just = "y".repeat(" … (18 more bytes)".chars().count());
        assert_eq!(
            sanitize(format!("ab{just}").as_bytes(), 2),
            format!("ab{just}")
        );
        let over = format!("{just}y");
        assert_eq!(
            sanitize(format!("ab{over}").as_bytes(), 2),
            "ab … (19 more bytes)"
        );
        let chars = |s: &str| s.chars().count();
        for len in 0..200 {
            for text in ["z".repeat(len), "é".repeat(len), "\u{9b}".repeat(len)] {
                for max in [0, 1, 5, 40] {
                    let whole = sanitize(text.as_bytes(), 1_000_000);
                    let cut = sanitize(text.as_bytes(), max);
                    assert!(chars(&cut) <= chars(&whole), "{len} {max}: {cut:?}");
                }
            }
        }
    }

    #[test]
    fn long_lines_are_cut() {
        let s = sanitize(&[b'a'; 5000], 10);
        assert!(s.starts_with("aaaaaaaaaa …"), "{s}");
        assert!(s.contains("4990 more bytes"));
    }

    #[test]
    fn lines_keep_newlines_and_tabs_but_no_escapes() {
        // An OSC 52 clipboard write and a title change, between two lines.
        let s = sanitize_lines(b"one\n\x1b]52;c;cHduZWQ=\x07\x1b]2;title\x07\ttwo\r\n");
        assert_eq!(s, "one\n^[]52;c;cHduZWQ=^G^[]2;title^G\ttwo^M\n");
        // A literal "^J" in the text stays what it is.
        assert_eq!(sanitize_lines(b"a^Jb"), "a^Jb");
    }

    #[test]
    fn a_sequence_cut_between_chunks_is_joined() {
        let mut f = TerminalFilter::default();
        let bytes = "é→\u{9b}x".as_bytes();
        let mut out = String::new();
        for b in bytes {
            out.push_str(&f.push(std::slice::from_ref(b)));
        }
        out.push_str(&f.finish());
        assert_eq!(out, "é→<U+009B>x");
        // Invalid bytes become U+FFFD; an unfinished sequence at the end too.
        let mut f = TerminalFilter::default();
        assert_eq!(f.push(b"a\xffb\xe2\x86"), "a\u{FFFD}b");
        assert_eq!(f.finish(), "\u{FFFD}");
    }

    #[test]
    fn json_on_a_terminal_escapes_c1_controls_and_stays_the_same_json() {
        let v = serde_json::json!({"t": "a\u{1b}[2J\u{9b}31m b"});
        let text = serde_json::to_string(&v).unwrap();
        assert!(text.contains('\u{9b}'), "serde_json writes C1 raw: {text}");
        let safe = json_for_terminal(&text);
        assert!(!safe.chars().any(|c| c.is_control()), "{safe}");
        assert_eq!(serde_json::from_str::<serde_json::Value>(&safe).unwrap(), v);
        assert!(matches!(
            json_for_terminal("{}"),
            std::borrow::Cow::Borrowed(_)
        ));
    }
}
