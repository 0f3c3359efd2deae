//! Hostile request heads, one table: what the proxy makes of each head a sandboxed program
//! could send, from the first byte read to the head the origin would get.
//!
//! ```text
//!  bytes ─► Incoming::read_head ─► request::parse_request ─► Ok: the decision's host and
//!           (bounds, "\r\n\r\n")     (line, fields, target,     port, and for a forward the
//!                                     framing)                  head the origin gets
//!                                                               Err: the 400's reason
//! ```
//!
//! Each row was first run against the hand-written parser and keeps its result: a parser
//! that replaces it must answer every row the same way.
//!
//! Common pitfalls:
//! * A row that only says "refused" proves little: each names the reason it expects, so a
//!   head refused for the wrong reason (a line too long instead of a bare LF) shows.
//! * Short heads run the byte-at-a-time paths of a parser; a bad byte placed after 40 good
//!   ones reaches the vectored paths too.

use super::forward::origin_head;
use super::head::Incoming;
use super::request::{Form, parse_request};

/// What a head must come to.
enum Expect {
    /// Accepted: `tunnel HOST PORT VERSION` for CONNECT, or the body's framing and the
    /// head the origin gets (escaped) for a forward.
    Ok(&'static str),
    /// Accepted, and the summary starts with this (for heads too long to spell out).
    OkStarts(&'static str),
    /// Refused with a reason that contains this.
    Refused(&'static str),
}
use Expect::{Ok, OkStarts, Refused};

/// Reads and parses `bytes` as the proxy does, and sums up the result.
fn outcome(bytes: &[u8]) -> Result<String, String> {
    let mut incoming = Incoming::new(bytes);
    let len = incoming.read_head().map_err(|e| e.to_string())?;
    let req = parse_request(&incoming.buffered()[..len]).map_err(|e| e.why)?;
    Result::Ok(match &req.form {
        Form::Connect => format!(
            "tunnel {} {} {}",
            req.target.host, req.target.port, req.version
        ),
        Form::Forward { path } => format!(
            "{:?} | {}",
            req.body,
            origin_head(&req, path).escape_ascii()
        ),
    })
}

/// `GET http://a.com/ HTTP/1.1`, the given field lines, and the empty line.
fn get(fields: &str) -> Vec<u8> {
    format!("GET http://a.com/ HTTP/1.1\r\n{fields}\r\n").into_bytes()
}

/// A POST to a.com with the given field lines.
fn post(fields: &str) -> Vec<u8> {
    format!("POST http://a.com/ HTTP/1.1\r\n{fields}\r\n").into_bytes()
}

/// A request line alone, then the empty line.
fn line(l: &str) -> Vec<u8> {
    format!("{l}\r\n\r\n").into_bytes()
}

const PLAIN_GET: &str = r"None | GET / HTTP/1.1\r\nHost: a.com\r\nConnection: close\r\n\r\n";

fn rows() -> Vec<(&'static str, Vec<u8>, Expect)> {
    let long = "x".repeat(40);
    vec![
        // Line endings.
        ("plain", get("Host: a.com\r\n"), Ok(PLAIN_GET)),
        (
            "bare LF after the request line",
            b"GET http://a.com/ HTTP/1.1\nHost: a.com\r\n\r\n".to_vec(),
            Refused("bare CR or LF"),
        ),
        (
            "bare LF after a field",
            get("Host: a.com\nX: y\r\n"),
            Refused("bare CR or LF"),
        ),
        (
            "bare LF ends the head early, a second request follows",
            b"GET http://a.com/ HTTP/1.1\r\nX: a\n\nGET http://evil.com/ HTTP/1.1\r\n\r\n"
                .to_vec(),
            Refused("bare CR or LF"),
        ),
        (
            "LF only, never a CRLF CRLF",
            b"GET http://a.com/ HTTP/1.1\nHost: a.com\n\n".to_vec(),
            Refused("closed in the middle of the head"),
        ),
        (
            "LF before the request line",
            b"\nGET http://a.com/ HTTP/1.1\r\n\r\n".to_vec(),
            Refused("bare CR or LF"),
        ),
        (
            "bare CR inside a value",
            get("X: a\rb\r\n"),
            Refused("bare CR or LF"),
        ),
        (
            "bare CR after the request line",
            b"GET http://a.com/ HTTP/1.1\rX: a\r\n\r\n".to_vec(),
            Refused("bare CR or LF"),
        ),
        (
            "CR CR LF",
            b"GET http://a.com/ HTTP/1.1\r\r\n\r\n".to_vec(),
            Refused("bare CR or LF"),
        ),
        (
            "an empty line before the request line",
            b"\r\nGET http://a.com/ HTTP/1.1\r\n\r\n".to_vec(),
            // The hand-written parser said "the header name `GET http` is not a token".
            Refused("METHOD TARGET"),
        ),
        (
            "the empty head",
            b"\r\n\r\nGET http://a.com/ HTTP/1.1\r\n\r\n".to_vec(),
            Refused("METHOD TARGET"),
        ),
        // Field lines.
        (
            "obs-fold",
            get("X: a\r\n b\r\n"),
            Refused("folded"),
        ),
        (
            "obs-fold with a tab",
            get("X: a\r\n\tb\r\n"),
            Refused("folded"),
        ),
        (
            "a folded first field",
            get(" Host: evil.com\r\n"),
            Refused("folded"),
        ),
        (
            "space before the colon",
            post("Content-Length : 5\r\n"),
            Refused("token"),
        ),
        (
            "tab before the colon",
            post("Transfer-Encoding\t: chunked\r\n"),
            Refused("token"),
        ),
        (
            "a space inside a name",
            post("Content Length: 5\r\n"),
            Refused("token"),
        ),
        (
            "an empty name",
            get(": a\r\n"),
            Refused("token"),
        ),
        (
            "a line without a colon",
            get("Just a line\r\n"),
            Refused("header line"),
        ),
        (
            "NUL in a value",
            get("X: a\0b\r\n"),
            Refused("control byte"),
        ),
        (
            "NUL in a name",
            get("X\0: a\r\n"),
            Refused("token"),
        ),
        (
            "NUL in the Host field of a CONNECT",
            b"CONNECT a.com:443 HTTP/1.1\r\nHost: a.com\0.evil.com\r\n\r\n".to_vec(),
            Refused("control byte"),
        ),
        (
            "vertical tab in a value",
            post("Transfer-Encoding: chunked\x0b\r\n"),
            Refused("control byte"),
        ),
        (
            "DEL after 40 bytes of a value",
            get(&format!("X: {long}\x7f\r\n")),
            Refused("control byte"),
        ),
        (
            "a bad byte after 40 bytes of a name",
            get(&format!("X{long}(: a\r\n")),
            Refused("token"),
        ),
        (
            "a non-ASCII name",
            get("H\u{e9}st: a\r\n"),
            Refused("token"),
        ),
        (
            "bytes past ASCII in a value are passed on as they are",
            get("X: caf\u{e9}\r\n"),
            Ok(r"None | GET / HTTP/1.1\r\nHost: a.com\r\nX: caf\xc3\xa9\r\nConnection: close\r\n\r\n"),
        ),
        (
            "an empty value, and spaces around one",
            get("X:\r\nY: \t b c \t\r\n"),
            Ok(r"None | GET / HTTP/1.1\r\nHost: a.com\r\nX: \r\nY: b c\r\nConnection: close\r\n\r\n"),
        ),
        (
            "an underscore is a token byte: an unknown field, passed on",
            get("Transfer_Encoding: chunked\r\n"),
            Ok(r"None | GET / HTTP/1.1\r\nHost: a.com\r\nTransfer_Encoding: chunked\r\nConnection: close\r\n\r\n"),
        ),
        // Framing.
        (
            "Content-Length and Transfer-Encoding",
            post("Content-Length: 3\r\nTransfer-Encoding: chunked\r\n"),
            Refused("both Content-Length and Transfer-Encoding"),
        ),
        (
            "Transfer-Encoding and Content-Length",
            post("Transfer-Encoding: chunked\r\nContent-Length: 3\r\n"),
            Refused("both Content-Length and Transfer-Encoding"),
        ),
        (
            "two equal lengths are one length",
            post("Content-Length: 3\r\ncontent-length: 3\r\n"),
            Ok(r"Length(3) | POST / HTTP/1.1\r\nHost: a.com\r\nContent-Length: 3\r\ncontent-length: 3\r\nConnection: close\r\n\r\n"),
        ),
        (
            "two different lengths",
            post("Content-Length: 3\r\nContent-Length: 4\r\n"),
            Refused("two different Content-Lengths"),
        ),
        (
            "a length list",
            post("Content-Length: 3, 3\r\n"),
            Refused("is not a length"),
        ),
        ("a signed length", post("Content-Length: +3\r\n"), Refused("is not a length")),
        ("a negative length", post("Content-Length: -1\r\n"), Refused("is not a length")),
        ("a hexadecimal length", post("Content-Length: 0x10\r\n"), Refused("is not a length")),
        ("an empty length", post("Content-Length:\r\n"), Refused("is not a length")),
        (
            "a length past 19 digits",
            post("Content-Length: 18446744073709551615\r\n"),
            Refused("is not a length"),
        ),
        (
            "a length of 19 digits",
            post("Content-Length: 9999999999999999999\r\n"),
            Ok(r"Length(9999999999999999999) | POST / HTTP/1.1\r\nHost: a.com\r\nContent-Length: 9999999999999999999\r\nConnection: close\r\n\r\n"),
        ),
        (
            "a length with a leading zero and spaces",
            post("Content-Length:  03 \r\n"),
            Ok(r"Length(3) | POST / HTTP/1.1\r\nHost: a.com\r\nContent-Length: 03\r\nConnection: close\r\n\r\n"),
        ),
        (
            "chunked in any case, with spaces",
            post("Transfer-Encoding: \tCHUNKED \r\n"),
            Ok(r"Chunked | POST / HTTP/1.1\r\nHost: a.com\r\nTransfer-Encoding: CHUNKED\r\nConnection: close\r\n\r\n"),
        ),
        (
            "gzip, chunked",
            post("Transfer-Encoding: gzip, chunked\r\n"),
            Refused("only `Transfer-Encoding: chunked`"),
        ),
        (
            "chunked, chunked",
            post("Transfer-Encoding: chunked, chunked\r\n"),
            Refused("only `Transfer-Encoding: chunked`"),
        ),
        (
            "two chunked lines",
            post("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n"),
            Refused("only `Transfer-Encoding: chunked`"),
        ),
        (
            "identity",
            post("Transfer-Encoding: identity\r\n"),
            Refused("only `Transfer-Encoding: chunked`"),
        ),
        (
            "chunked with a parameter",
            post("Transfer-Encoding: chunked;q=1\r\n"),
            Refused("only `Transfer-Encoding: chunked`"),
        ),
        (
            "an empty Transfer-Encoding",
            post("Transfer-Encoding:\r\n"),
            Refused("only `Transfer-Encoding: chunked`"),
        ),
        (
            "chunked in an HTTP/1.0 request, which has no chunked framing",
            b"POST http://a.com/ HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec(),
            Refused("HTTP/1.0"),
        ),
        (
            "a CONNECT's fields do not frame anything: the tunnel carries bytes",
            b"CONNECT a.com:443 HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
                .to_vec(),
            Ok("tunnel a.com 443 HTTP/1.1"),
        ),
        // Host fields: the URL's host is the one decided, and the only one the origin sees.
        (
            "a Host field naming another host",
            get("Host: evil.com\r\n"),
            Ok(PLAIN_GET),
        ),
        (
            "two Host fields",
            get("Host: evil.com\r\nHost: a.com\r\n"),
            Ok(PLAIN_GET),
        ),
        (
            "no Host field",
            get(""),
            Ok(PLAIN_GET),
        ),
        // Absolute URLs.
        (
            "user info",
            line("GET http://allowed.com@evil.com/ HTTP/1.1"),
            Refused("user info"),
        ),
        (
            "user info behind a backslash",
            line("GET http://evil.com\\@allowed.com/ HTTP/1.1"),
            Refused("user info"),
        ),
        (
            "user info with a port",
            line("GET http://allowed.com:80@evil.com/ HTTP/1.1"),
            Refused("user info"),
        ),
        (
            "empty user info",
            line("GET http://@evil.com/ HTTP/1.1"),
            Refused("user info"),
        ),
        (
            "a fragment before an @",
            line("GET http://allowed.com#@evil.com/ HTTP/1.1"),
            Refused("fragment"),
        ),
        (
            "an @ in the query belongs to the query",
            line("GET http://allowed.com?@evil.com/ HTTP/1.1"),
            Ok(r"None | GET /?@evil.com/ HTTP/1.1\r\nHost: allowed.com\r\nConnection: close\r\n\r\n"),
        ),
        (
            "a backslash in the host",
            line("GET http://allowed.com\\.evil.com/ HTTP/1.1"),
            Refused("holds `\\\\`"),
        ),
        (
            "an upper-case scheme and host",
            line("GET HTTP://A.COM/ HTTP/1.1"),
            Ok(PLAIN_GET),
        ),
        (
            "one slash",
            line("GET http:/a.com/ HTTP/1.1"),
            Refused("not an http:// URL"),
        ),
        (
            "backslashes for slashes",
            line("GET http:\\\\a.com/ HTTP/1.1"),
            Refused("not an http:// URL"),
        ),
        ("origin form", line("GET /x HTTP/1.1"), Refused("is a path")),
        ("asterisk form", line("OPTIONS * HTTP/1.1"), Refused("not an http:// URL")),
        (
            "authority form on a GET",
            line("GET a.com:80 HTTP/1.1"),
            Refused("not an http:// URL"),
        ),
        ("https", line("GET https://a.com/ HTTP/1.1"), Refused("through CONNECT")),
        (
            "percent-encoded host",
            line("GET http://a%2Ecom/ HTTP/1.1"),
            Refused("percent-encoded"),
        ),
        (
            "percent-encoding in the path is the path's",
            line("GET http://a.com/%2e%2e/x HTTP/1.1"),
            Ok(r"None | GET /%2e%2e/x HTTP/1.1\r\nHost: a.com\r\nConnection: close\r\n\r\n"),
        ),
        (
            "IPv6 literal with the default port",
            line("GET http://[::1]/ HTTP/1.1"),
            Ok(r"None | GET / HTTP/1.1\r\nHost: [::1]\r\nConnection: close\r\n\r\n"),
        ),
        (
            "IPv6 literal with a port",
            line("GET http://[::1]:8080/x HTTP/1.1"),
            Ok(r"None | GET /x HTTP/1.1\r\nHost: [::1]:8080\r\nConnection: close\r\n\r\n"),
        ),
        (
            "IPv6 without brackets",
            line("GET http://::1/ HTTP/1.1"),
            Refused("brackets"),
        ),
        (
            "NUL in the path",
            line("GET http://a.com/\0 HTTP/1.1"),
            Refused("NUL byte"),
        ),
        (
            "bytes past ASCII in the path",
            line("GET http://a.com/caf\u{e9} HTTP/1.1"),
            Refused("0xc3"),
        ),
        // CONNECT targets.
        (
            "CONNECT",
            line("CONNECT a.com:443 HTTP/1.1"),
            Ok("tunnel a.com 443 HTTP/1.1"),
        ),
        (
            "CONNECT over HTTP/1.0",
            line("CONNECT a.com:443 HTTP/1.0"),
            Ok("tunnel a.com 443 HTTP/1.0"),
        ),
        (
            "CONNECT to a URL",
            line("CONNECT http://a.com:443/ HTTP/1.1"),
            Refused("brackets"),
        ),
        (
            "CONNECT with a path",
            line("CONNECT a.com:443/x HTTP/1.1"),
            Refused("not a port"),
        ),
        ("CONNECT without a port", line("CONNECT a.com HTTP/1.1"), Refused("no port")),
        (
            "CONNECT with two ports",
            line("CONNECT a.com:443:80 HTTP/1.1"),
            Refused("brackets"),
        ),
        (
            "a lower-case connect is a method like another",
            line("connect a.com:443 HTTP/1.1"),
            Refused("not an http:// URL"),
        ),
        (
            "CONNECT to IPv6",
            line("CONNECT [::1]:443 HTTP/1.1"),
            Ok("tunnel ::1 443 HTTP/1.1"),
        ),
        (
            "CONNECT to IPv4-mapped IPv6",
            line("CONNECT [::ffff:127.0.0.1]:443 HTTP/1.1"),
            Ok("tunnel 127.0.0.1 443 HTTP/1.1"),
        ),
        (
            "CONNECT to IPv6 without a port",
            line("CONNECT [::1] HTTP/1.1"),
            Refused("no port"),
        ),
        (
            "an IPv6 zone",
            line("CONNECT [fe80::1%eth0]:443 HTTP/1.1"),
            Refused("percent-encoded"),
        ),
        (
            "a second bracket",
            line("CONNECT [::1]]:443 HTTP/1.1"),
            Refused("after `]`"),
        ),
        (
            "IPv4 in brackets",
            line("CONNECT [1.2.3.4]:443 HTTP/1.1"),
            Refused("not an IPv6 address"),
        ),
        (
            "percent-encoded CONNECT host",
            line("CONNECT %61.com:443 HTTP/1.1"),
            Refused("percent-encoded"),
        ),
        (
            "NUL in a CONNECT host",
            line("CONNECT allowed.com\0.evil.com:443 HTTP/1.1"),
            Refused("NUL byte"),
        ),
        (
            "NUL after 40 bytes of a CONNECT host",
            line(&format!("CONNECT {long}.com\0.evil.com:443 HTTP/1.1")),
            Refused("NUL byte"),
        ),
        (
            "a non-ASCII host",
            line("CONNECT b\u{fc}cher.de:443 HTTP/1.1"),
            Refused("0xc3"),
        ),
        ("short IPv4", line("CONNECT 127.1:443 HTTP/1.1"), Refused("ends in a number")),
        (
            "hexadecimal IPv4",
            line("CONNECT 0x7f.0.0.1:443 HTTP/1.1"),
            Refused("ends in a number"),
        ),
        (
            "octal IPv4",
            line("CONNECT 017.0.0.1:443 HTTP/1.1"),
            Refused("ends in a number"),
        ),
        (
            "IPv4 with a trailing dot",
            line("CONNECT 1.2.3.4.:443 HTTP/1.1"),
            Ok("tunnel 1.2.3.4 443 HTTP/1.1"),
        ),
        (
            "a port with a leading zero",
            line("CONNECT a.com:0443 HTTP/1.1"),
            Refused("not a port"),
        ),
        // The request line.
        (
            "a tab for a space",
            line("GET\thttp://a.com/ HTTP/1.1"),
            Refused("0x09"),
        ),
        (
            "two spaces before the target",
            line("GET  http://a.com/ HTTP/1.1"),
            Refused("METHOD TARGET"),
        ),
        (
            "two spaces before the version",
            line("GET http://a.com/  HTTP/1.1"),
            Refused("METHOD TARGET"),
        ),
        (
            "a space after the version",
            line("GET http://a.com/ HTTP/1.1 "),
            Refused("METHOD TARGET"),
        ),
        (
            "a word after the version",
            line("GET http://a.com/ HTTP/1.1 x"),
            Refused("METHOD TARGET"),
        ),
        ("no version", line("GET http://a.com/"), Refused("METHOD TARGET")),
        (
            "HTTP/1.2",
            line("GET http://a.com/ HTTP/1.2"),
            Refused("not HTTP/1.1 or HTTP/1.0"),
        ),
        (
            "HTTP/1.10",
            line("GET http://a.com/ HTTP/1.10"),
            Refused("not HTTP/1.1 or HTTP/1.0"),
        ),
        (
            "a lower-case version",
            line("GET http://a.com/ http/1.1"),
            Refused("not HTTP/1.1 or HTTP/1.0"),
        ),
        (
            "HTTP/0.9",
            line("GET http://a.com/ HTTP/0.9"),
            Refused("not HTTP/1.1 or HTTP/1.0"),
        ),
        ("a method of no token", line("G(T http://a.com/ HTTP/1.1"), Refused("not a method")),
        (
            "a method of 33 bytes",
            line(&format!("{} http://a.com/ HTTP/1.1", "A".repeat(33))),
            Refused("not a method"),
        ),
        (
            "DEL in the method",
            line("GET\x7f http://a.com/ HTTP/1.1"),
            Refused("0x7f"),
        ),
        // Bounds.
        (
            "a request line past 8 KiB",
            line(&format!("GET http://a.com/{} HTTP/1.1", "a".repeat(9000))),
            Refused("first line is longer than 8192 bytes"),
        ),
        (
            "a head past 32 KiB",
            get(&"X-A: b\r\n".repeat(5000)),
            Refused("head is longer than 32768 bytes"),
        ),
        (
            "a field line past 8 KiB, within the head's bound",
            get(&format!("X: {}\r\n", "b".repeat(9000))),
            OkStarts(r"None | GET / HTTP/1.1\r\nHost: a.com\r\nX: bbbb"),
        ),
        (
            "100 fields",
            get(&"X-A: b\r\n".repeat(100)),
            OkStarts(r"None | GET / HTTP/1.1\r\nHost: a.com\r\nX-A: b\r\n"),
        ),
        (
            "101 fields",
            get(&"X-A: b\r\n".repeat(101)),
            Refused("more than 100 header fields"),
        ),
    ]
}

#[test]
fn every_hostile_head_gets_the_answer_in_its_row() {
    let mut wrong = Vec::new();
    for (name, bytes, expect) in rows() {
        let got = outcome(&bytes);
        let right = match (&expect, &got) {
            (Ok(want), Result::Ok(s)) => s == want,
            (OkStarts(want), Result::Ok(s)) => s.starts_with(want),
            (Refused(want), Err(why)) => why.contains(want),
            _ => false,
        };
        if !right {
            wrong.push(format!("{name}: got {got:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Every byte in a field name, a field value and a target's path, near the start of each
/// and past 40 bytes (the vectored paths), is taken or refused by the same rule as before:
/// names are tokens (RFC 9110 `tchar`), values hold tab, visible bytes, spaces and bytes past
/// ASCII, paths visible ASCII but `#`.
#[test]
fn every_byte_is_judged_as_the_hand_written_parser_judged_it() {
    let tchar = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    let mut wrong = Vec::new();
    for pad in [String::new(), "x".repeat(40)] {
        for b in 0..=u8::MAX {
            let cases = [
                // A `:` ends the name: the rest is the value.
                (
                    "name",
                    [b"X", pad.as_bytes(), &[b], b"Y: v\r\n\r\n"].concat(),
                    tchar(b) || b == b':',
                ),
                (
                    "value",
                    [b"X: a", pad.as_bytes(), &[b], b"c\r\n\r\n"].concat(),
                    b == b'\t' || (0x20..0x7f).contains(&b) || b >= 0x80,
                ),
            ];
            for (part, fields, taken) in cases {
                let head = [&b"GET http://a.com/ HTTP/1.1\r\n"[..], &fields].concat();
                if outcome(&head).is_ok() != taken {
                    wrong.push(format!("{part} 0x{b:02x} after {} bytes", pad.len()));
                }
            }
            let head = [
                b"GET http://a.com/",
                pad.as_bytes(),
                &[b],
                b" HTTP/1.1\r\n\r\n",
            ]
            .concat();
            let taken = (0x21..0x7f).contains(&b) && b != b'#';
            if outcome(&head).is_ok() != taken {
                wrong.push(format!("path 0x{b:02x} after {} bytes", pad.len()));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
