//! Reading an HTTP/1 message head within bounds, and parsing it strictly with `httparse`.
//!
//! ```text
//!  socket ──read 4 KiB──► Incoming.buf ──"\r\n\r\n" within 32 KiB?──► head │ rest (body,
//!                                       first line within 8 KiB?          tunnel bytes)
//!  head ──► crlf_only (ours) ──► first-line checks (ours) ──► httparse ──► RequestHead
//!                                                                      └─► ResponseHead
//! ```
//!
//! Which check is whose (httparse runs with its defaults: none of its `allow_*` or
//! `ignore_invalid_*` leniencies is on):
//! * ours, while reading: the first line within 8 KiB, the head within 32 KiB and ending in
//!   `\r\n\r\n`;
//! * ours, before httparse, where it is lenient: every line ends in CRLF (it takes a bare
//!   LF); no empty line before the first line (it skips them); a request line of visible
//!   ASCII only (it takes bytes past ASCII in a target), a NUL named as such;
//! * ours, after it: a method of at most 32 bytes (it takes a token of any length);
//! * httparse: the method a token, one space between the parts, `HTTP/1.0` or `HTTP/1.1`, a
//!   status code of 3 digits; field names tokens followed at once by `:`; no obs-fold;
//!   values without control bytes but tab (NUL, DEL, a bare CR refused), trimmed; at most
//!   [`MAX_FIELDS`] fields (its slots);
//! * ours, in `request.rs`: target forms, hosts, ports and body framing.
//!
//! Common pitfalls:
//! * The bytes read past the head belong to the body or the tunnel: they stay in
//!   [`Incoming`] and are sent on first, never dropped.
//! * Bound the first line and the head while reading, not after: a client that never sends
//!   a line end must not make the proxy buffer without end.
//! * httparse ends a head at `\n\n` and skips empty lines before the request line: the
//!   CRLF check runs first, or `X: a\n\nGET http://evil/…` would be two requests to an origin
//!   that reads bare LFs and one to the proxy. The proxy writes the head it forwards itself,
//!   so it never passes on something the origin could read differently.
//! * Turning on one of httparse's leniencies (spaces before `:`, obs-fold, several spaces,
//!   ignoring bad fields) reopens a way to read one head two ways: the table in
//!   `hostile.rs` fails when one is.
//! * After an error httparse keeps the method and target it had read but not the fields:
//!   the reason names the refused part from how far it got, and finds a refused field line
//!   by reading each line alone (only for a head already refused).

use std::io::{self, Read};

/// The longest request or status line.
pub const MAX_FIRST_LINE: usize = 8 * 1024;
/// The longest head (first line and fields).
pub const MAX_HEAD: usize = 32 * 1024;
/// The most header fields in one head.
pub const MAX_FIELDS: usize = 100;

const READ_SIZE: usize = 4 * 1024;

/// A socket read through a buffer that keeps what was read past the point of use.
pub struct Incoming<R> {
    inner: R,
    buf: Vec<u8>,
    pos: usize,
}

/// Why no head could be read.
#[derive(Debug, thiserror::Error)]
pub enum HeadError {
    #[error("the connection closed before a request")]
    Closed,
    #[error("the first line is longer than {MAX_FIRST_LINE} bytes")]
    LineTooLong,
    #[error("the head is longer than {MAX_HEAD} bytes")]
    TooLong,
    #[error("the connection closed in the middle of the head")]
    Truncated,
    #[error("reading the head: {0}")]
    Io(#[from] io::Error),
}

impl<R: Read> Incoming<R> {
    pub fn new(inner: R) -> Self {
        Incoming {
            inner,
            buf: Vec::new(),
            pos: 0,
        }
    }

    /// What was read and not yet consumed.
    pub fn buffered(&self) -> &[u8] {
        &self.buf[self.pos..]
    }

    pub fn consume(&mut self, n: usize) {
        self.pos = (self.pos + n).min(self.buf.len());
        if self.pos == self.buf.len() {
            // Give back a head-sized buffer once it is used up: connections live long.
            self.buf.clear();
            self.buf.shrink_to(READ_SIZE);
            self.pos = 0;
        }
    }

    /// Reads more into the buffer; `Ok(0)` at the end of the stream.
    pub fn fill(&mut self) -> io::Result<usize> {
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        let old = self.buf.len();
        self.buf.resize(old + READ_SIZE, 0);
        let r = loop {
            match self.inner.read(&mut self.buf[old..]) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => break r,
            }
        };
        self.buf.truncate(old + *r.as_ref().unwrap_or(&0));
        r
    }

    /// Reads until the buffer starts with a whole head (ending in an empty line) and returns
    /// its length, without consuming it.
    pub fn read_head(&mut self) -> Result<usize, HeadError> {
        let mut searched: usize = 0;
        loop {
            let have = self.buffered();
            let from = searched.saturating_sub(3);
            if let Some(i) = find(&have[from..], b"\r\n\r\n") {
                let end = from + i + 4;
                if first_line_len(have) > MAX_FIRST_LINE {
                    return Err(HeadError::LineTooLong);
                }
                return if end > MAX_HEAD {
                    Err(HeadError::TooLong)
                } else {
                    Ok(end)
                };
            }
            if first_line_len(have) > MAX_FIRST_LINE {
                return Err(HeadError::LineTooLong);
            }
            if have.len() > MAX_HEAD {
                return Err(HeadError::TooLong);
            }
            searched = have.len();
            if self.fill()? == 0 {
                return Err(if self.buffered().is_empty() {
                    HeadError::Closed
                } else {
                    HeadError::Truncated
                });
            }
        }
    }

    /// Reads one CRLF-terminated line of at most `max` bytes (with its CRLF), consumed.
    pub fn read_line(&mut self, max: usize) -> io::Result<Vec<u8>> {
        loop {
            if let Some(i) = find(self.buffered(), b"\r\n") {
                let line = self.buffered()[..i + 2].to_vec();
                self.consume(i + 2);
                return Ok(line);
            }
            if self.buffered().len() > max {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "a line is too long",
                ));
            }
            if self.fill()? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
    }
}

/// The length of the first line without its CRLF, or of all of `b` while it has no CRLF.
fn first_line_len(b: &[u8]) -> usize {
    find(b, b"\r\n").unwrap_or(b.len())
}

pub fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(hay, needle)
}

/// One header field: its name as sent, and its value without surrounding whitespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    pub value: Vec<u8>,
}

impl Field {
    pub fn is(&self, name: &str) -> bool {
        self.name.eq_ignore_ascii_case(name)
    }

    /// The value as text; fields the proxy reads are ASCII.
    pub fn text(&self) -> &str {
        std::str::from_utf8(&self.value).unwrap_or("")
    }
}

impl From<&httparse::Header<'_>> for Field {
    fn from(h: &httparse::Header<'_>) -> Self {
        Field {
            name: h.name.to_owned(),
            value: h.value.to_vec(),
        }
    }
}

/// A request head, read strictly: the parts of its request line, and its fields.
#[derive(Debug)]
pub struct RequestHead<'a> {
    pub method: &'a str,
    pub target: &'a str,
    /// `HTTP/1.1` or `HTTP/1.0`.
    pub version: &'static str,
    pub fields: Vec<Field>,
}

/// A response head, read strictly: its status line as sent (without CRLF), its code, and
/// its fields.
#[derive(Debug)]
pub struct ResponseHead<'a> {
    pub status_line: &'a [u8],
    pub code: u16,
    pub fields: Vec<Field>,
}

const NOT_A_REQUEST_LINE: &str = "the request line is not `METHOD TARGET HTTP/1.1`";
/// The longest method (httparse takes a token of any length).
const MAX_METHOD: usize = 32;

/// Reads a request head (as returned by [`Incoming::read_head`]).
pub fn request_head(head: &[u8]) -> Result<RequestHead<'_>, String> {
    let line = crlf_only(head)?;
    if line.is_empty() {
        // httparse would skip empty lines before the request line.
        return Err(NOT_A_REQUEST_LINE.into());
    }
    if line.contains(&0) {
        return Err("the request line holds a NUL byte".into());
    }
    // httparse takes bytes past ASCII in a target; a host is only ever ASCII here.
    if let Some(b) = line.iter().find(|&&b| !(0x20..0x7f).contains(&b)) {
        return Err(format!(
            "the request line holds the byte 0x{b:02x} (only visible ASCII is allowed)"
        ));
    }
    let mut slots = [httparse::EMPTY_HEADER; MAX_FIELDS];
    let mut req = httparse::Request::new(&mut slots);
    let parsed = req.parse(head);
    whole(head, parsed)
        .map_err(|fault| fault.unwrap_or_else(|| request_line_fault(line, req.method, req.path)))?;
    let (Some(method), Some(target), Some(minor)) = (req.method, req.path, req.version) else {
        return Err(NOT_A_REQUEST_LINE.into());
    };
    if method.len() > MAX_METHOD {
        return Err(format!("`{method}` is not a method"));
    }
    Ok(RequestHead {
        method,
        target,
        version: if minor == 1 { "HTTP/1.1" } else { "HTTP/1.0" },
        fields: req.headers.iter().map(Field::from).collect(),
    })
}

/// Reads a response head (as returned by [`Incoming::read_head`]).
pub fn response_head(head: &[u8]) -> Result<ResponseHead<'_>, String> {
    const NOT_A_STATUS_LINE: &str = "the status line is not `HTTP/1.1 NNN reason`";
    let line = crlf_only(head)?;
    if line.is_empty() {
        return Err(NOT_A_STATUS_LINE.into());
    }
    let mut slots = [httparse::EMPTY_HEADER; MAX_FIELDS];
    let mut res = httparse::Response::new(&mut slots);
    let parsed = res.parse(head);
    whole(head, parsed).map_err(|fault| fault.unwrap_or_else(|| NOT_A_STATUS_LINE.into()))?;
    let code = res.code.ok_or(NOT_A_STATUS_LINE)?;
    Ok(ResponseHead {
        status_line: line,
        code,
        fields: res.headers.iter().map(Field::from).collect(),
    })
}

/// The check httparse leaves to the proxy on every line: it ends in CRLF (httparse also
/// takes a bare LF). Returns the first line, without its CRLF.
fn crlf_only(head: &[u8]) -> Result<&[u8], String> {
    if !head.ends_with(b"\r\n\r\n") {
        return Err("the head does not end in an empty line".into());
    }
    // CRLF pairs never overlap: every CR and every LF is in one exactly when there are as
    // many pairs as CRs and as LFs.
    let pairs = memchr::memmem::find_iter(head, b"\r\n").count();
    if memchr::memchr_iter(b'\r', head).count() != pairs
        || memchr::memchr_iter(b'\n', head).count() != pairs
    {
        return Err("a line ends in a bare CR or LF, not CRLF".into());
    }
    Ok(&head[..find(head, b"\r\n").unwrap_or(0)])
}

/// Whether httparse read all of `head`; if not, the fault when it is in the fields, `None`
/// when it is in the first line.
fn whole(head: &[u8], parsed: httparse::Result<usize>) -> Result<(), Option<String>> {
    use httparse::Error as E;
    match parsed {
        Ok(httparse::Status::Complete(n)) if n == head.len() => Ok(()),
        Ok(httparse::Status::Complete(_)) => {
            Err(Some("the head has an empty line before its end".into()))
        }
        Ok(httparse::Status::Partial) => Err(Some("the head does not end in an empty line".into())),
        Err(E::TooManyHeaders) => Err(Some(format!("more than {MAX_FIELDS} header fields"))),
        Err(e @ (E::HeaderName | E::HeaderValue)) => Err(Some(field_fault(e, head))),
        Err(_) => Err(None),
    }
}

/// Says which field line httparse refused, and why. Each line is read alone by httparse
/// again (only for a head already refused) to find the one.
fn field_fault(e: httparse::Error, head: &[u8]) -> String {
    let lines = head
        .split(|&b| b == b'\n')
        .skip(1)
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    let culprit = lines.filter(|l| !l.is_empty()).find(|l| {
        let alone = [l, &b"\r\n\r\n"[..]].concat();
        httparse::parse_headers(&alone, &mut [httparse::EMPTY_HEADER; 1]).is_err()
    });
    let Some(line) = culprit else {
        return format!("a header line is refused: {e}");
    };
    let shown: String = String::from_utf8_lossy(line)
        .escape_debug()
        .take(256)
        .collect();
    if e == httparse::Error::HeaderValue {
        format!(
            "the header line `{shown}` holds a control byte (a value holds only tab, space \
             and visible bytes)"
        )
    } else {
        format!(
            "the header line `{shown}` is not `name: value`: a name is a token followed at \
             once by `:`, and a line is never folded (starts with a space)"
        )
    }
}

/// Says which part of a request line httparse refused, from how far it got.
fn request_line_fault(line: &[u8], method: Option<&str>, target: Option<&str>) -> String {
    // The line is visible ASCII by now.
    let line = String::from_utf8_lossy(line);
    let parts: Vec<&str> = line.split(' ').collect();
    match (&parts[..], method, target) {
        ([word, _, _], None, _) => format!("`{word}` is not a method"),
        ([_, _, version], Some(_), Some(_)) => {
            format!("`{version}` is not HTTP/1.1 or HTTP/1.0")
        }
        _ => NOT_A_REQUEST_LINE.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(bytes: &[u8]) -> (Result<usize, HeadError>, Vec<u8>) {
        let mut inc = Incoming::new(bytes);
        let r = inc.read_head();
        (r, inc.buffered().to_vec())
    }

    #[test]
    fn a_head_is_found_and_what_follows_is_kept() {
        let (r, rest) = read(b"CONNECT a.com:443 HTTP/1.1\r\nHost: a\r\n\r\n\x16\x03\x01");
        let n = r.unwrap();
        assert_eq!(&rest[n..], b"\x16\x03\x01");
    }

    #[test]
    fn over_long_lines_and_heads_are_refused_while_reading() {
        let line = format!("GET http://a.com/{} HTTP/1.1\r\n\r\n", "a".repeat(9000));
        assert!(matches!(
            read(line.as_bytes()).0,
            Err(HeadError::LineTooLong)
        ));
        // No line end at all: refused once the bound is passed, not at the end of input.
        let endless = vec![b'a'; 1 << 20];
        assert!(matches!(read(&endless).0, Err(HeadError::LineTooLong)));
        let fields = format!(
            "GET http://a.com/ HTTP/1.1\r\n{}\r\n",
            "X-A: b\r\n".repeat(5000)
        );
        assert!(matches!(read(fields.as_bytes()).0, Err(HeadError::TooLong)));
        assert!(matches!(read(b"").0, Err(HeadError::Closed)));
        assert!(matches!(
            read(b"GET http://a/").0,
            Err(HeadError::Truncated)
        ));
    }

    #[test]
    fn fields_are_read_strictly() {
        let h = request_head(b"GET / HTTP/1.1\r\nA:  b c \r\nEmpty:\r\n\r\n").unwrap();
        assert_eq!((h.method, h.target, h.version), ("GET", "/", "HTTP/1.1"));
        assert_eq!(h.fields[0].value, b"b c");
        assert!(h.fields[1].value.is_empty());
        let r = response_head(b"HTTP/1.0 404 Not Found\r\nA: b\r\n\r\n").unwrap();
        assert_eq!(
            (r.status_line, r.code),
            (&b"HTTP/1.0 404 Not Found"[..], 404)
        );
        assert_eq!(
            r.fields,
            [Field {
                name: "A".into(),
                value: b"b".to_vec()
            }]
        );
        for fields in [
            &b" folded\r\n"[..],
            b"A: b\r\n\tfolded\r\n",
            b"A b: c\r\n",
            b"A : c\r\n",
            b"A: b\0c\r\n",
            b"no colon\r\n",
            b"A: b\nB: c\r\n",
            b"A: b\rc\r\n",
        ] {
            for first in [&b"GET / HTTP/1.1\r\n"[..], b"HTTP/1.1 200 OK\r\n"] {
                let head = [first, fields, b"\r\n"].concat();
                let shown = String::from_utf8_lossy(&head).into_owned();
                assert!(request_head(&head).is_err(), "{shown:?}");
                assert!(response_head(&head).is_err(), "{shown:?}");
            }
        }
    }

    #[test]
    fn status_lines_give_their_code() {
        let code = |line: &str| response_head(format!("{line}\r\n\r\n").as_bytes()).map(|r| r.code);
        assert_eq!(code("HTTP/1.1 200 OK"), Ok(200));
        assert_eq!(code("HTTP/1.0 100"), Ok(100));
        for bad in [
            "HTTP/1.1 20 OK",
            "HTTP/1.1 200OK",
            "ICY 200 OK",
            "HTTP/1.1 200 O\0K",
            "",
        ] {
            assert!(code(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_refused_field_line_is_named() {
        let why = request_head(b"GET / HTTP/1.1\r\nA: b\r\nC d: e\r\n\r\n").unwrap_err();
        assert!(why.contains("`C d: e`"), "{why}");
        let why = request_head(b"GET / HTTP/1.1\r\nA: b\x01\r\n\r\n").unwrap_err();
        assert!(why.contains("`A: b\\u{1}` holds a control byte"), "{why}");
    }

    #[test]
    fn lines_are_read_within_a_bound() {
        let mut inc = Incoming::new(&b"5;x=y\r\nhello\r\n"[..]);
        assert_eq!(inc.read_line(64).unwrap(), b"5;x=y\r\n");
        assert_eq!(inc.buffered(), b"hello\r\n");
        let mut long = Incoming::new(&[b'a'; 100][..]);
        assert!(long.read_line(10).is_err());
    }
}
