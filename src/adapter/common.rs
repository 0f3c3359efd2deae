//! Helpers shared by the agent adapters: peeking at an event's type, summarising tool calls
//! and results for the pane, and the usage line shown at the end.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;

use super::{LineResult, MAX_INLINE_PROMPT, PaneItem, Stdin, command::is_json_event};
use crate::envelope::{Output, Usage};
use crate::term::counted;

/// The `type` of an event. Every other field is skipped without being materialised, so this
/// costs one scan of the line and no allocation (unless the type string holds escapes).
#[derive(Deserialize)]
pub(crate) struct Head<'a> {
    #[serde(rename = "type", borrow, default)]
    pub kind: Option<Cow<'a, str>>,
}

/// Reads one line as `T`: the one JSON reader of the adapters' hot path. The whole line is
/// checked as UTF-8 first, in one pass over it: serde_json's reader of bytes checks only the
/// strings it hands out, and events.jsonl holds JSON only (RFC 8259 text is UTF-8), so a
/// skipped field's string must be checked too; its reader of text then checks nothing twice.
pub(crate) fn from_line<'a, T: Deserialize<'a>>(line: &'a [u8]) -> Option<T> {
    serde_json::from_str(std::str::from_utf8(line).ok()?).ok()
}

/// What a line is, before any adapter-specific parsing.
pub(crate) enum Peeked<'a> {
    /// A JSON object, with its `type` when it has a string one.
    Event(Option<Cow<'a, str>>),
    /// JSON, but not an object (an array): kept as an event without a meaning.
    OtherJson,
    /// Not JSON (or invalid UTF-8): `stdout.log`.
    Plain,
}

pub(crate) fn peek(line: &[u8]) -> Peeked<'_> {
    let first = line.iter().find(|b| !b.is_ascii_whitespace());
    match first {
        Some(b'{') => match from_line::<Head<'_>>(line) {
            Some(h) => Peeked::Event(h.kind),
            None => Peeked::Plain,
        },
        Some(b'[') if is_json_event(line) => Peeked::OtherJson,
        _ => Peeked::Plain,
    }
}

/// The `type` of a line that starts exactly with `{"type":"…"` (no escapes in the name), read
/// from its first bytes without a pass over the rest. Agents put `type` first, so this is the
/// common case; the line is *not* validated here: the caller must parse it once anyway (and
/// treat a failure as [`Peeked::Plain`]), which saves the second full scan [`peek`] would add.
pub(crate) fn leading_type(line: &[u8]) -> Option<&str> {
    let rest = line.strip_prefix(br#"{"type":""#)?;
    let end = memchr::memchr2(b'"', b'\\', rest)?;
    if rest[end] != b'"' {
        return None;
    }
    std::str::from_utf8(&rest[..end]).ok()
}

/// The verdict for lines that are not events.
pub(crate) fn not_an_event(line: &[u8], peeked: &Peeked<'_>) -> LineResult {
    match peeked {
        Peeked::OtherJson => LineResult::keep(),
        _ => LineResult::plain(line),
    }
}

/// Whether a prompt can be one argv element: short enough, and not mistaken for an option.
pub(crate) fn fits_argv(prompt: &str) -> bool {
    prompt.len() <= MAX_INLINE_PROMPT
}

/// stdin for a prompt that does or does not go on the command line.
pub(crate) fn stdin_for(inline: bool) -> Stdin {
    if inline {
        Stdin::Null
    } else {
        Stdin::PromptFile
    }
}

/// A string as a TOML basic string (for `-c key=value` overrides, whose value is TOML).
pub(crate) fn toml_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\u{:04X}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A CLI's configuration file, read for the name of its key: at most 1 MiB, a regular file
/// and not through a link (a run from a sandbox names the directory in its own variables, so
/// what is there may be the program's: a FIFO, a link to a file of the user's, a huge file).
pub(crate) fn read_config(path: &std::path::Path) -> Option<Vec<u8>> {
    crate::store::read_bounded(path, 1 << 20).ok().flatten()
}

/// At most `max` chars of `s` on one line, with `…` when cut.
pub(crate) fn one_line(s: &str, max: usize) -> String {
    let mut out = String::new();
    let mut n = 0;
    let mut last_space = false;
    for c in s.trim().chars() {
        let c = if c.is_whitespace() { ' ' } else { c };
        if c == ' ' && last_space {
            continue;
        }
        last_space = c == ' ';
        if n == max {
            out.push('…');
            return out;
        }
        out.push(c);
        n += 1;
    }
    out
}

/// A tool result for the pane: its first two non-empty lines, bounded.
pub(crate) fn abbreviate(text: &str) -> String {
    let mut lines = text
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty());
    let mut out = match lines.next() {
        Some(l) => one_line(l, 160),
        None => return "(no output)".to_owned(),
    };
    if let Some(l) = lines.next() {
        out.push_str(" ⏎ ");
        out.push_str(&one_line(l, 160));
    }
    if lines.next().is_some() {
        out.push_str(" …");
    }
    out
}

/// A tool call's arguments in a few words: the command, the path, the pattern, or else the
/// arguments as compact JSON.
pub(crate) fn summarize_args(args: &Value) -> String {
    const KEYS: [&str; 10] = [
        "command",
        "cmd",
        "file_path",
        "path",
        "pattern",
        "url",
        "query",
        "prompt",
        "description",
        "notebook_path",
    ];
    if let Value::Object(map) = args {
        for key in KEYS {
            match map.get(key) {
                Some(Value::String(s)) => return one_line(s, 120),
                Some(Value::Array(parts)) => {
                    let words: Vec<&str> = parts.iter().filter_map(Value::as_str).collect();
                    if !words.is_empty() {
                        return one_line(&words.join(" "), 120);
                    }
                }
                _ => {}
            }
        }
    }
    match args {
        Value::Null => String::new(),
        Value::String(s) => one_line(s, 120),
        other => one_line(&other.to_string(), 120),
    }
}

/// The text of a content value: a string, or an array of `{type: "text", text}` blocks. The
/// adapters read it with `lenient::Content`; this is the `Value` reading it is checked against.
#[cfg(test)]
pub(crate) fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => {
            let mut out = String::new();
            for b in blocks {
                if b.get("type").and_then(Value::as_str) == Some("text")
                    && let Some(t) = b.get("text").and_then(Value::as_str)
                {
                    out.push_str(t);
                }
            }
            out
        }
        _ => String::new(),
    }
}

/// The pane's line for a tool call: its name (`tool` when none) and its arguments summed up.
pub(crate) fn call_item(name: Option<&str>, args: Option<&Value>) -> PaneItem {
    PaneItem::ToolCall {
        name: name.unwrap_or("tool").to_owned(),
        summary: summarize_args(args.unwrap_or(&Value::Null)),
    }
}

/// A `u64` field (tolerating floats and absent values): `lenient::Num::tolerant_u64` is
/// checked against it.
#[cfg(test)]
pub(crate) fn u64_at(v: &Value, key: &str) -> Option<u64> {
    let f = v.get(key)?;
    f.as_u64()
        .or_else(|| f.as_f64().filter(|x| *x >= 0.0).map(|x| x as u64))
}

/// Adds `b` into `a`, field by field; a field stays `None` only if both are.
pub(crate) fn add_usage(a: &mut Usage, b: &Usage) {
    fn add(x: &mut Option<u64>, y: Option<u64>) {
        if let Some(y) = y {
            *x = Some(x.unwrap_or(0).saturating_add(y));
        }
    }
    add(&mut a.input_tokens, b.input_tokens);
    add(&mut a.output_tokens, b.output_tokens);
    add(&mut a.cache_read_tokens, b.cache_read_tokens);
    add(&mut a.cache_write_tokens, b.cache_write_tokens);
    add(&mut a.total_tokens, b.total_tokens);
}

/// The closing pane line: tokens and cost.
pub(crate) fn usage_info(out: &Output) -> PaneItem {
    let mut s = String::from("done");
    if let Some(u) = &out.usage {
        let n = |x: Option<u64>| x.map_or_else(|| "?".to_owned(), |v| v.to_string());
        s.push_str(&format!(
            " · tokens in {} out {} cache r/w {}/{}",
            n(u.input_tokens),
            n(u.output_tokens),
            n(u.cache_read_tokens),
            n(u.cache_write_tokens)
        ));
    }
    if let Some(c) = out.cost_usd {
        s.push_str(&format!(" · ${c:.4}"));
    }
    if let Some(t) = out.turns {
        s.push_str(&format!(" · {}", counted(t, "turn")));
    }
    if let Some(t) = out.tool_calls {
        s.push_str(&format!(" · {}", counted(t, "tool call")));
    }
    PaneItem::Info(s)
}

/// The last line of a stderr tail that reads like a fatal error (`Error: …`), for agents that
/// die before reporting anything on stdout.
pub(crate) fn stderr_error(stderr_tail: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(stderr_tail);
    text.lines()
        .rev()
        .map(str::trim)
        .find(|l| {
            let lower = l.to_ascii_lowercase();
            lower.starts_with("error:") || lower.starts_with("fatal:")
        })
        .map(|l| one_line(l, 2000))
}

/// Scans the stderr tail for a context overflow and a fatal error when the stream said nothing.
pub(crate) fn finish_common(out: &mut Output, stderr_tail: &[u8], terminal_seen: bool) {
    if !out.context_length_exceeded
        && super::mentions_context_overflow(&String::from_utf8_lossy(stderr_tail))
    {
        out.context_length_exceeded = true;
    }
    if !terminal_seen && let Some(e) = stderr_error(stderr_tail) {
        if out.context_length_exceeded || super::mentions_context_overflow(&e) {
            out.context_length_exceeded = true;
        }
        out.push_error(e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn leading_type_reads_only_a_plain_leading_type() {
        assert_eq!(
            leading_type(br#"{"type":"message_update","x":1}"#),
            Some("message_update")
        );
        assert_eq!(leading_type(br#"{"type":"a\"b"}"#), None);
        assert_eq!(leading_type(br#"{ "type":"a"}"#), None);
        assert_eq!(leading_type(br#"{"type":"abc"#), None);
        assert_eq!(leading_type(br#"{"kind":"a"}"#), None);
    }

    #[test]
    fn peek_reads_the_type_and_survives_garbage() {
        assert!(
            matches!(peek(br#"{"a":{"b":[1]},"type":"x"}"#), Peeked::Event(Some(t)) if t == "x")
        );
        assert!(matches!(peek(br#"{"a":1}"#), Peeked::Event(None)));
        assert!(matches!(peek(br#"{"type":5}"#), Peeked::Plain));
        assert!(matches!(peek(b"[1,2]"), Peeked::OtherJson));
        assert!(matches!(peek(b"\xff{\"type\":1"), Peeked::Plain));
        assert!(matches!(peek(b"{\"type\":\"a\xff\"}"), Peeked::Plain));
        assert!(matches!(peek(b"WARNING: x"), Peeked::Plain));
        assert!(matches!(peek(b""), Peeked::Plain));
    }

    #[test]
    fn toml_strings_escape_everything_that_matters() {
        assert_eq!(toml_string("a \"b\"\n\\c\u{1}"), r#""a \"b\"\n\\c\u0001""#);
    }

    #[test]
    fn summaries_are_short_and_single_line() {
        assert_eq!(
            summarize_args(&json!({"command": "ls -la\n  /tmp"})),
            "ls -la /tmp"
        );
        assert_eq!(
            summarize_args(&json!({"cmd": ["bash", "-lc", "make"]})),
            "bash -lc make"
        );
        assert_eq!(summarize_args(&json!({"x": 1})), r#"{"x":1}"#);
        assert_eq!(
            one_line(&"a".repeat(200), 10),
            format!("{}…", "a".repeat(10))
        );
        assert_eq!(abbreviate("one\n\ntwo\nthree"), "one ⏎ two …");
        assert_eq!(abbreviate(""), "(no output)");
    }

    #[test]
    fn the_usage_line_counts_in_words() {
        let out = Output {
            turns: Some(1),
            tool_calls: Some(1),
            ..Output::default()
        };
        assert_eq!(
            usage_info(&out),
            PaneItem::Info("done · 1 turn · 1 tool call".into())
        );
        let out = Output {
            turns: Some(2),
            tool_calls: Some(0),
            ..Output::default()
        };
        assert_eq!(
            usage_info(&out),
            PaneItem::Info("done · 2 turns · 0 tool calls".into())
        );
    }

    #[test]
    fn stderr_errors_are_found() {
        let tail = b"WARNING: x\nError: turn/start failed: Input exceeds the maximum length\n\nStack backtrace:\n  0: <unknown>\n";
        assert_eq!(
            stderr_error(tail).as_deref(),
            Some("Error: turn/start failed: Input exceeds the maximum length")
        );
        assert_eq!(stderr_error(b"all good\n"), None);
    }
}
