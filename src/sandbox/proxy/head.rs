//! Reading an HTTP/1 message head within bounds, and its header fields.
//!
//! ```text
//!  socket ──read 4 KiB──► Incoming.buf ──"\r\n\r\n" within 32 KiB?──► head │ rest (body,
//!                                       first line within 8 KiB?          tunnel bytes)
//! ```
//!
//! Common pitfalls:
//! * The bytes read past the head belong to the body or the tunnel: they stay in
//!   [`Incoming`] and are sent on first, never dropped.
//! * Bound the first line and the head while reading, not after: a client that never sends
//!   a line end must not make the proxy buffer without end.
//! * Lines end in CRLF only; a bare LF or CR, obs-fold (a line starting with a space), and
//!   control bytes in a field are refused. The proxy writes the head it forwards itself, so
//!   it never passes on something the origin could read differently.

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

/// Splits a head (as returned by [`Incoming::read_head`]) into its first line and fields.
pub fn split_head(head: &[u8]) -> Result<(&[u8], Vec<Field>), String> {
    let body = head
        .strip_suffix(b"\r\n\r\n")
        .ok_or("the head does not end in an empty line")?;
    if body
        .split_crlf()
        .any(|l| l.contains(&b'\r') || l.contains(&b'\n'))
    {
        return Err("a line ends in a bare CR or LF, not CRLF".into());
    }
    let mut lines = body.split_crlf();
    let first = lines.next().unwrap_or_default();
    let mut fields = Vec::new();
    for line in lines {
        if fields.len() == MAX_FIELDS {
            return Err(format!("more than {MAX_FIELDS} header fields"));
        }
        fields.push(parse_field(line)?);
    }
    Ok((first, fields))
}

/// Splitting a head at its CRLFs.
trait SplitCrlf {
    fn split_crlf(&self) -> impl Iterator<Item = &[u8]>;
}

impl SplitCrlf for [u8] {
    fn split_crlf(&self) -> impl Iterator<Item = &[u8]> {
        let mut rest = Some(self);
        std::iter::from_fn(move || {
            let r = rest?;
            match find(r, b"\r\n") {
                Some(i) => {
                    rest = Some(&r[i + 2..]);
                    Some(&r[..i])
                }
                None => rest.take(),
            }
        })
    }
}

fn parse_field(line: &[u8]) -> Result<Field, String> {
    if line.first().is_some_and(|b| *b == b' ' || *b == b'\t') {
        return Err("a header line is folded (starts with a space)".into());
    }
    let colon = line
        .iter()
        .position(|&b| b == b':')
        .ok_or("a header line has no `:`")?;
    let (name, value) = (&line[..colon], &line[colon + 1..]);
    if name.is_empty() || !name.iter().all(|&b| is_tchar(b)) {
        return Err(format!(
            "the header name `{}` is not a token",
            String::from_utf8_lossy(name).escape_debug()
        ));
    }
    if let Some(b) = value
        .iter()
        .find(|&&b| b != b'\t' && (b < 0x20 || b == 0x7f))
    {
        return Err(format!(
            "the header `{}` holds the control byte 0x{b:02x}",
            String::from_utf8_lossy(name)
        ));
    }
    let trim = |b: &u8| *b != b' ' && *b != b'\t';
    let start = value.iter().position(trim).unwrap_or(value.len());
    let end = value.iter().rposition(trim).map_or(start, |i| i + 1);
    Ok(Field {
        name: String::from_utf8_lossy(name).into_owned(),
        value: value[start..end].to_vec(),
    })
}

/// A character of an HTTP token (RFC 9110 `tchar`).
pub fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
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
    fn fields_are_split_strictly() {
        let (first, f) = split_head(b"GET / HTTP/1.1\r\nA:  b c \r\nEmpty:\r\n\r\n").unwrap();
        assert_eq!(first, b"GET / HTTP/1.1");
        assert_eq!(f[0].value, b"b c");
        assert!(f[1].value.is_empty());
        for bad in [
            &b"GET / HTTP/1.1\r\n folded\r\n\r\n"[..],
            b"GET / HTTP/1.1\r\nA b: c\r\n\r\n",
            b"GET / HTTP/1.1\r\nA: b\0c\r\n\r\n",
            b"GET / HTTP/1.1\r\nno colon\r\n\r\n",
            b"GET / HTTP/1.1\nA: b\r\n\r\n",
            b"GET / HTTP/1.1\r\nA: b\rc\r\n\r\n",
        ] {
            assert!(split_head(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
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
