//! The matcher: every secret value and its encodings as the patterns of one Aho-Corasick
//! automaton, leftmost-longest (an encoding that holds the raw value, as a JSON escape can,
//! is masked whole).
//!
//! ```text
//!  value ─┬─ itself, and each line of a multi-line value (lines under MIN_LEN are left)
//!         ├─ JSON-escaped (what a JSON string holds)
//!         ├─ URL-encoded (RFC 3986 unreserved kept; also with `/`, with `!'()*` kept, `+`
//!         │  for space, lower-case hex)
//!         └─ base64 at each of the three alignments (the characters that depend on the
//!            value's bytes only: `base64(user:password)` holds a value at offset 5)
//! ```
//!
//! Common pitfalls:
//! * A line with no match costs one scan and no copy: the worker's hot path.
//! * A masked JSON line must stay JSON: a value masked next to an escape (`\n` before it) can
//!   break the string; then the line is parsed and each string masked inside it, and the line
//!   written anew.
//! * A stream cut into reads can cut a value: [`StreamMask`] holds back the end of a read
//!   that could begin one, and nothing else.

use std::borrow::Cow;

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use base64::Engine;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::Value;

use super::{MASK, MIN_LEN};

/// What URL encoding keeps: RFC 3986's unreserved characters.
const UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');
/// `encodeURIComponent` keeps these too.
const URI_COMPONENT: &AsciiSet = &UNRESERVED
    .remove(b'!')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')')
    .remove(b'*');
/// Python's `quote` keeps `/`.
const PATH: &AsciiSet = &UNRESERVED.remove(b'/');

/// The most patterns the crate's SIMD prefilter (Teddy) takes in one automaton.
const TEDDY_MAX: usize = 64;

/// Every secret value of an attempt, and its encodings, as one matcher.
#[derive(Clone, Default)]
pub struct Masker {
    /// Every pattern, leftmost-longest: what masks.
    ac: Option<AhoCorasick>,
    /// An anchor of each pattern (see [`anchor`]) in groups of [`TEDDY_MAX`]: what finds
    /// whether a buffer may hold a pattern, at the speed of the SIMD prefilter (one automaton
    /// of more patterns has none). A buffer it finds nothing in holds none.
    detect: Vec<AhoCorasick>,
    /// Each pattern, for what a stream holds back.
    patterns: Vec<Vec<u8>>,
    /// Whether a pattern begins with the byte.
    first: Vec<bool>,
    longest: usize,
}

impl std::fmt::Debug for Masker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Patterns are secrets: only how many.
        f.debug_struct("Masker")
            .field("patterns", &self.patterns.len())
            .finish()
    }
}

impl Masker {
    /// A matcher of `values` (those under [`MIN_LEN`] bytes are left out: the caller warns).
    pub fn new<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> Self {
        let mut patterns: Vec<Vec<u8>> = Vec::new();
        for v in values {
            if v.len() >= MIN_LEN {
                encodings(v, &mut patterns);
            }
        }
        patterns.retain(|p| p.len() >= MIN_LEN);
        patterns.sort();
        patterns.dedup();
        if patterns.is_empty() {
            return Self::default();
        }
        // A contiguous NFA, not a DFA: built in microseconds at each attempt's start (a DFA
        // of a hundred patterns takes milliseconds), and the scans that matter are the
        // prefilter's.
        let ac = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .kind(Some(AhoCorasickKind::ContiguousNFA))
            .build(&patterns)
            .expect("a few short patterns always build");
        let mut anchors: Vec<&[u8]> = patterns.iter().map(|p| anchor(p)).collect();
        anchors.sort();
        anchors.dedup();
        let detect = anchors
            .chunks(TEDDY_MAX)
            .map(|group| {
                AhoCorasick::builder()
                    .match_kind(MatchKind::LeftmostFirst)
                    .kind(Some(AhoCorasickKind::ContiguousNFA))
                    .build(group)
                    .expect("a few short patterns always build")
            })
            .collect();
        let mut first = vec![false; 256];
        for p in &patterns {
            first[p[0] as usize] = true;
        }
        let longest = patterns.iter().map(Vec::len).max().unwrap_or(0);
        Self {
            ac: Some(ac),
            detect,
            patterns,
            first,
            longest,
        }
    }

    /// Nothing to mask.
    pub fn is_empty(&self) -> bool {
        self.ac.is_none()
    }

    /// Whether `hay` holds a value (or an encoding of one): the fast scan of a whole buffer.
    pub fn any(&self, hay: &[u8]) -> bool {
        self.detect.iter().any(|a| a.is_match(hay))
    }

    /// A line with each value masked; `None` when it holds none (one scan, no copy). A line
    /// that was JSON stays JSON.
    pub fn line(&self, line: &[u8]) -> Option<Vec<u8>> {
        let ac = self.ac.as_ref()?;
        if !self.any(line) {
            return None;
        }
        let first = ac.find(line)?;
        let mut out = Vec::with_capacity(line.len());
        self.replace_from(line, first.start(), &mut out);
        if looks_json(line)
            && serde_json::from_slice::<serde::de::IgnoredAny>(&out).is_err()
            && let Ok(mut v) = serde_json::from_slice::<Value>(line)
        {
            self.mask_value(&mut v);
            if let Ok(text) = serde_json::to_vec(&v) {
                return Some(text);
            }
        }
        Some(out)
    }

    /// Text with each value masked; text cut short (it ends with `…`) also loses what
    /// before the cut could be the start of a value.
    pub fn text<'a>(&self, s: &'a str) -> Cow<'a, str> {
        if self.ac.is_none() {
            return Cow::Borrowed(s);
        }
        let masked = match self.line(s.as_bytes()) {
            None => Cow::Borrowed(s),
            Some(b) => Cow::Owned(String::from_utf8_lossy(&b).into_owned()),
        };
        match self.cut_start(&masked) {
            None => masked,
            Some(c) => Cow::Owned(c),
        }
    }

    /// `s` ends with `…` after the start of a value (three bytes or more of it): that start
    /// masked. `None` when it does not.
    fn cut_start(&self, s: &str) -> Option<String> {
        let before = s.trim_end().strip_suffix('…')?.trim_end_matches(' ');
        let at = self.start_at_end(before)?;
        Some(format!("{}***…", &before[..at]))
    }

    /// Text that was cut at its end (a bound, not a `…`): what at its end could be the start
    /// of a value (three bytes or more) masked too.
    pub fn cut_end<'a>(&self, s: &'a str) -> Cow<'a, str> {
        match self.start_at_end(s) {
            Some(at) => Cow::Owned(format!("{}***", &s[..at])),
            None => Cow::Borrowed(s),
        }
    }

    /// Where the end of `s` begins a value (three bytes or more of it).
    fn start_at_end(&self, s: &str) -> Option<usize> {
        self.ac.as_ref()?;
        let at = self.held_from(s.as_bytes(), 0);
        (s.len() - at >= 3 && s.is_char_boundary(at)).then_some(at)
    }

    /// Masks every string of a JSON value in place (its keys too); a number that holds a value
    /// becomes the string `"***"`.
    pub fn mask_value(&self, v: &mut Value) {
        let Some(ac) = self.ac.as_ref() else { return };
        match v {
            Value::String(s) => {
                if ac.is_match(s.as_str()) || s.ends_with('…') {
                    *s = self.masked_str(s);
                }
            }
            Value::Number(n) => {
                if ac.is_match(n.to_string().as_str()) {
                    *v = Value::String(String::from_utf8_lossy(MASK).into_owned());
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|x| self.mask_value(x)),
            Value::Object(o) => {
                let masked_keys = o.keys().any(|k| ac.is_match(k.as_str()));
                if masked_keys {
                    let old = std::mem::take(o);
                    for (k, x) in old {
                        o.insert(self.masked_str(&k), x);
                    }
                }
                o.values_mut().for_each(|x| self.mask_value(x));
            }
            Value::Null | Value::Bool(_) => {}
        }
    }

    fn masked_str(&self, s: &str) -> String {
        let mut out = Vec::with_capacity(s.len());
        self.replace_from(s.as_bytes(), 0, &mut out);
        // Values are cut at match bounds, which are bounds of UTF-8 text (a pattern is whole
        // text, or base64 and URL encodings, which are ASCII).
        let text = String::from_utf8(out)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        self.cut_start(&text).unwrap_or(text)
    }

    /// `hay` with every match from `from` on replaced, appended to `out`.
    fn replace_from(&self, hay: &[u8], from: usize, out: &mut Vec<u8>) {
        let Some(ac) = self.ac.as_ref() else {
            out.extend_from_slice(hay);
            return;
        };
        out.extend_from_slice(&hay[..from]);
        let mut last = from;
        for m in ac.find_iter(&hay[from..]) {
            out.extend_from_slice(&hay[last..from + m.start()]);
            out.extend_from_slice(MASK);
            last = from + m.end();
        }
        out.extend_from_slice(&hay[last..]);
    }

    /// Where the end of `buf` (from `from` on) could begin a pattern that goes on past it: the
    /// first such offset, or `buf.len()`.
    fn held_from(&self, buf: &[u8], from: usize) -> usize {
        let start = from.max(buf.len().saturating_sub(self.longest.saturating_sub(1)));
        // The patterns are sorted: the first one not below a suffix is the one that would
        // begin with it.
        (start..buf.len())
            .find(|&i| {
                let rest = &buf[i..];
                self.first[rest[0] as usize] && {
                    // (A pattern equal to the suffix comes first; the one after it may go on.)
                    let at = self.patterns.partition_point(|p| p.as_slice() < rest);
                    self.patterns[at..]
                        .iter()
                        .take(2)
                        .any(|p| p.len() > rest.len() && p.starts_with(rest))
                }
            })
            .unwrap_or(buf.len())
    }
}

/// A byte stream masked as it is read (stderr): a read's end that could begin a value waits
/// for the next read; everything else goes on at once.
#[derive(Debug, Default)]
pub struct StreamMask {
    held: Vec<u8>,
    buf: Vec<u8>,
}

impl StreamMask {
    /// Masks `chunk` (after what was held back); `out` gets what can go on now.
    pub fn feed(&mut self, m: &Masker, chunk: &[u8], out: &mut dyn FnMut(&[u8])) {
        let Some(ac) = m.ac.as_ref() else {
            out(chunk);
            return;
        };
        if self.held.is_empty() && !m.any(chunk) && m.held_from(chunk, 0) == chunk.len() {
            out(chunk);
            return;
        }
        let hay: &[u8] = if self.held.is_empty() {
            chunk
        } else {
            self.held.extend_from_slice(chunk);
            &self.held
        };
        self.buf.clear();
        let mut last = 0;
        for mt in ac.find_iter(hay) {
            self.buf.extend_from_slice(&hay[last..mt.start()]);
            self.buf.extend_from_slice(MASK);
            last = mt.end();
        }
        let hold = m.held_from(hay, last);
        self.buf.extend_from_slice(&hay[last..hold]);
        let rest = hay[hold..].to_vec();
        self.held = rest;
        if !self.buf.is_empty() {
            out(&self.buf);
        }
    }

    /// The end of the stream: what was held back goes on (it began no value).
    pub fn finish(&mut self, out: &mut dyn FnMut(&[u8])) {
        if !self.held.is_empty() {
            out(&self.held);
            self.held.clear();
        }
    }
}

/// The part of a pattern the fast scan looks for: its 8 bytes whose first three are the
/// least like text (the prefilter's candidates are where those three occur; lowercase
/// letters and spaces are everywhere, digits, capitals and signs less so).
fn anchor(p: &[u8]) -> &[u8] {
    const LEN: usize = 8;
    if p.len() <= LEN {
        return p;
    }
    let rarity = |b: u8| -> u32 {
        match b {
            b'a'..=b'z' | b' ' => 0,
            b'0'..=b'9' => 2,
            b'A'..=b'Z' => 3,
            _ => 4,
        }
    };
    let at = (0..=p.len() - LEN)
        .max_by_key(|&i| {
            (
                rarity(p[i]) + rarity(p[i + 1]) + rarity(p[i + 2]),
                usize::MAX - i,
            )
        })
        .unwrap_or(0);
    &p[at..at + LEN]
}

/// A line that looks like a JSON document (an event).
fn looks_json(line: &[u8]) -> bool {
    matches!(
        line.iter().find(|b| !b.is_ascii_whitespace()),
        Some(b'{' | b'[' | b'"')
    )
}

/// `v` and its encodings, pushed onto `out`.
fn encodings(v: &[u8], out: &mut Vec<Vec<u8>>) {
    let mut pieces: Vec<&[u8]> = vec![v];
    if v.contains(&b'\n') {
        pieces.extend(
            v.split(|b| *b == b'\n')
                .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
                .filter(|l| l.len() >= MIN_LEN),
        );
    }
    for p in pieces {
        out.push(p.to_vec());
        let Ok(text) = std::str::from_utf8(p) else {
            continue;
        };
        if let Ok(json) = serde_json::to_string(text) {
            out.push(json.as_bytes()[1..json.len() - 1].to_vec());
        }
        for set in [UNRESERVED, URI_COMPONENT, PATH] {
            let url = utf8_percent_encode(text, set).to_string();
            if url.contains(' ') || url.contains("%20") {
                out.push(url.replace("%20", "+").into_bytes());
            }
            out.push(lower_hex(&url).into_bytes());
            out.push(url.into_bytes());
        }
    }
    base64_alignments(v, out);
}

/// `%2F` as `%2f`.
fn lower_hex(url: &str) -> String {
    let mut s = String::with_capacity(url.len());
    let mut after = 0;
    for c in url.chars() {
        if c == '%' {
            after = 2;
            s.push(c);
        } else if after > 0 {
            after -= 1;
            s.push(c.to_ascii_lowercase());
        } else {
            s.push(c);
        }
    }
    s
}

/// The base64 of `v` at each of the three offsets it can start at in an encoded stream: the
/// characters whose six bits are all `v`'s.
fn base64_alignments(v: &[u8], out: &mut Vec<Vec<u8>>) {
    let engine = base64::engine::general_purpose::STANDARD_NO_PAD;
    for k in 0..3usize {
        let mut data = vec![0u8; k];
        data.extend_from_slice(v);
        let enc = engine.encode(&data);
        let bits_from = 8 * k;
        let bits_to = 8 * (k + v.len());
        let from = bits_from.div_ceil(6);
        let to = bits_to / 6;
        if to > from {
            out.push(enc.as_bytes()[from..to].to_vec());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::engine::general_purpose::STANDARD;

    const SECRET: &str = "s3cr3t-Value/with+odd=chars";

    fn masked(m: &Masker, s: &str) -> String {
        String::from_utf8(
            m.line(s.as_bytes())
                .unwrap_or_else(|| s.as_bytes().to_vec()),
        )
        .unwrap()
    }

    #[test]
    fn each_encoding_is_masked() {
        let m = Masker::new([SECRET.as_bytes()]);
        let forms = [
            SECRET.to_owned(),
            STANDARD.encode(SECRET),
            STANDARD.encode(format!("u:{SECRET}")),
            STANDARD.encode(format!("us:{SECRET}")),
            STANDARD.encode(format!("{SECRET}\n")),
            utf8_percent_encode(SECRET, UNRESERVED).to_string(),
            lower_hex(&utf8_percent_encode(SECRET, UNRESERVED).to_string()),
            utf8_percent_encode(SECRET, PATH).to_string(),
        ];
        for f in forms {
            let out = masked(&m, &format!("before {f} after"));
            assert!(
                out.starts_with("before ") && out.ends_with(" after"),
                "{f}: {out}"
            );
            assert!(out.contains("***") && !out.contains(SECRET), "{f}: {out}");
        }
        assert_eq!(m.line(b"nothing here"), None, "a clean line is not copied");
    }

    #[test]
    fn a_masked_json_line_stays_json() {
        let tricky = "ab\"c\\d\nline-two-of-it";
        let m = Masker::new([tricky.as_bytes(), b"12345678".as_slice()]);
        // The JSON escape of the value is masked whole (not its raw lines inside it).
        let line = serde_json::json!({"text": format!("x{tricky}y")}).to_string();
        assert_eq!(masked(&m, &line), r#"{"text":"x***y"}"#);
        // A value masked where JSON has a number breaks the line: it is masked inside it.
        let line = serde_json::json!({"t": format!("a {tricky}"), "n": 12345678}).to_string();
        let out = masked(&m, &line);
        let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
        assert_eq!(v, serde_json::json!({"t": "a ***", "n": "***"}), "{out}");
        // An escape right before a value: the line stays JSON.
        let m = Masker::new([b"nvalue99".as_slice()]);
        let out = masked(&m, r#"{"k":"\nvalue99","nvalue99":1}"#);
        serde_json::from_str::<Value>(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
        assert!(out.contains(r#""***":1"#), "{out}");
    }

    #[test]
    fn each_line_of_a_multi_line_value() {
        let key = "-----BEGIN KEY-----\nAAAAfirstline\r\nBBBBsecondline\nend";
        let m = Masker::new([key.as_bytes()]);
        assert_eq!(masked(&m, "got BBBBsecondline!"), "got ***!");
        assert_eq!(masked(&m, "end"), "end", "a line under the minimum is left");
    }

    #[test]
    fn a_cut_text_loses_the_start_of_a_value() {
        let m = Masker::new([SECRET.as_bytes()]);
        assert_eq!(m.text("key s3cr3t-Va…"), "key ***…");
        assert_eq!(m.text("key s3…"), "key s3…", "two bytes say nothing");
        assert_eq!(
            m.text("key s3cr3t-Va"),
            "key s3cr3t-Va",
            "not cut: not a start"
        );
        let mut v = serde_json::json!({"e": format!("x {SECRET} y"), "c": "x s3cr3t…"});
        m.mask_value(&mut v);
        assert_eq!(v, serde_json::json!({"e": "x *** y", "c": "x ***…"}));
    }

    #[test]
    fn many_values_are_found_by_the_fast_scan() {
        let values: Vec<String> = (0..40).map(|i| format!("value-{i:02}-Qz8kT3")).collect();
        let m = Masker::new(values.iter().map(|v| v.as_bytes()));
        assert!(m.detect.len() > 1, "more patterns than one prefilter takes");
        for v in &values {
            let line = format!("a {} b", STANDARD.encode(format!("u:{v}")));
            assert!(m.any(line.as_bytes()), "{line}");
            assert_eq!(masked(&m, &format!("<{v}>")), "<***>");
        }
        assert!(!m.any(b"nothing of them"));
    }

    #[test]
    fn short_values_are_not_masked() {
        let m = Masker::new([b"12345".as_slice()]);
        assert!(m.is_empty());
        assert_eq!(m.line(b"12345"), None);
    }

    #[test]
    fn a_stream_cut_anywhere_is_masked_and_nothing_else_waits() {
        let m = Masker::new([SECRET.as_bytes()]);
        let text = format!("one {SECRET} two {} three\n", STANDARD.encode(SECRET));
        for cut in 0..text.len() {
            let mut s = StreamMask::default();
            let mut out = Vec::new();
            s.feed(&m, &text.as_bytes()[..cut], &mut |b| {
                out.extend_from_slice(b)
            });
            s.feed(&m, &text.as_bytes()[cut..], &mut |b| {
                out.extend_from_slice(b)
            });
            s.finish(&mut |b| out.extend_from_slice(b));
            let out = String::from_utf8(out).unwrap();
            assert_eq!(out, "one *** two *** three\n", "cut at {cut}");
        }
        // Output that begins no value is not held.
        let mut s = StreamMask::default();
        let mut out = Vec::new();
        s.feed(&m, b"plain text", &mut |b| out.extend_from_slice(b));
        assert_eq!(out, b"plain text");
        // A possible start is held until it is known.
        out.clear();
        s.feed(&m, b" and s3c", &mut |b| out.extend_from_slice(b));
        assert_eq!(out, b" and ");
        out.clear();
        s.feed(&m, b"ret but not it", &mut |b| out.extend_from_slice(b));
        assert_eq!(out, b"s3cret but not it");
    }
}
