//! The proxy's requests, parsed strictly: `CONNECT host:port` and absolute-form
//! `METHOD http://host[:port]/path`.
//!
//! ```text
//!  CONNECT api.example.com:443 HTTP/1.1          GET http://127.0.0.1:8080/v1?x HTTP/1.1
//!          └─ authority ─────┘                        └─ authority ──┘└ path ┘
//!  host: a DNS name (letters, digits, `-`, `.`), a dotted IPv4 address, or [IPv6]
//! ```
//!
//! The head's syntax is `head::request_head`'s (httparse and the checks it leaves to the
//! proxy); this module gives the parts their meaning. Anything else is a 400: the proxy's
//! decision is only as good as its idea of the host, and every lenient reading is a way to
//! make the proxy check one host and reach another.
//!
//! Common pitfalls:
//! * A NUL byte in a CONNECT host (`allowed.com\0.evil.com`) once made Claude Code's proxy
//!   check one name while the resolver saw another: any byte outside the host alphabet is
//!   refused, not stripped.
//! * Percent-encoding, `user@host`, IPv6 zone ids (`%25eth0`) and ports with signs or leading
//!   zeros are refused rather than decoded.
//! * `127.1`, `0x7f.1` and `2130706433` are 127.0.0.1 to `inet_aton`: a name whose last label
//!   is a number is refused, so only dotted quads are addresses.
//! * Both `Content-Length` and `Transfer-Encoding`, or two different lengths, are refused: the
//!   proxy frames the body one way and the origin must not read it another. So is
//!   `Transfer-Encoding` in an HTTP/1.0 request, which has no chunked framing.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::decide::Host;
use super::head::{Field, RequestHead, request_head};
use crate::spec::valid_host_name;

/// A request the proxy understood.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    pub target: Target,
    pub form: Form,
    /// `HTTP/1.1` or `HTTP/1.0`.
    pub version: &'static str,
    pub fields: Vec<Field>,
    pub body: Body,
}

/// Where a request goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub host: Host,
    pub port: u16,
}

impl Target {
    /// `host[:port]` as a `Host` field says it (IPv6 in brackets, port 80 left out).
    pub fn authority(&self) -> String {
        let host = match &self.host {
            Host::Ip(IpAddr::V6(v6)) => format!("[{v6}]"),
            h => h.to_string(),
        };
        if self.port == 80 {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Form {
    /// `CONNECT host:port`: a tunnel.
    Connect,
    /// An absolute `http://` URL: forwarded with this origin-form path (`/…`).
    Forward { path: String },
}

/// How the request's body is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body {
    None,
    Length(u64),
    Chunked,
}

/// A request the proxy refuses to read (400), with what could be made out of it for the log.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{why}")]
pub struct BadRequest {
    pub why: String,
    pub method: Option<String>,
    pub host: Option<String>,
}

/// Parses a request head (ending in its empty line).
pub fn parse_request(head: &[u8]) -> Result<Request, BadRequest> {
    parse(head).map_err(|why| {
        let (method, host) = glimpse(head);
        BadRequest { why, method, host }
    })
}

fn parse(head: &[u8]) -> Result<Request, String> {
    let RequestHead {
        method,
        target,
        version,
        fields,
    } = request_head(head)?;
    if method == "CONNECT" {
        let target = parse_authority(target, None)?;
        return Ok(Request {
            method: method.to_owned(),
            target,
            form: Form::Connect,
            version,
            fields,
            body: Body::None,
        });
    }
    let (target, path) = parse_absolute(target)?;
    let body = framing(&fields, version)?;
    Ok(Request {
        method: method.to_owned(),
        target,
        form: Form::Forward { path },
        version,
        fields,
        body,
    })
}

/// `http://authority[/path][?query]` → the target and the origin-form path.
fn parse_absolute(url: &str) -> Result<(Target, String), String> {
    let scheme_len = "http://".len();
    let scheme = url.get(..scheme_len).unwrap_or("");
    if !scheme.eq_ignore_ascii_case("http://") {
        return Err(if url.starts_with('/') {
            "the target is a path: a proxy is asked for an absolute http:// URL".into()
        } else if url
            .get(..8)
            .is_some_and(|s| s.eq_ignore_ascii_case("https://"))
        {
            "an https:// URL must go through CONNECT".into()
        } else {
            format!("`{url}` is not an http:// URL")
        });
    }
    let rest = &url[scheme_len..];
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    if path.contains('#') {
        return Err("the URL has a fragment (`#`)".into());
    }
    let target = parse_authority(authority, Some(80))?;
    let path = match path.chars().next() {
        None => "/".to_owned(),
        Some('?') => format!("/{path}"),
        Some(_) => path.to_owned(),
    };
    Ok((target, path))
}

/// `host:port`, `[v6]:port`, or a host alone when `default_port` is given.
pub fn parse_authority(s: &str, default_port: Option<u16>) -> Result<Target, String> {
    if s.is_empty() {
        return Err("the request has no host".into());
    }
    if s.contains('@') {
        return Err(format!("`{}` has user info (`@`)", s.escape_debug()));
    }
    if s.contains('%') {
        return Err(format!("`{}` is percent-encoded", s.escape_debug()));
    }
    let need_port = || default_port.ok_or_else(|| format!("`{s}` has no port (host:port)"));
    if let Some(inner) = s.strip_prefix('[') {
        let (v6, rest) = inner
            .split_once(']')
            .ok_or_else(|| format!("`{s}` has an unclosed `[`"))?;
        let ip: Ipv6Addr = v6
            .parse()
            .map_err(|_| format!("`[{}]` is not an IPv6 address", v6.escape_debug()))?;
        let port = match rest {
            "" => need_port()?,
            r => parse_port(
                r.strip_prefix(':')
                    .ok_or_else(|| format!("`{s}` has bytes after `]`"))?,
            )?,
        };
        let host = Host::Ip(IpAddr::V6(ip).to_canonical());
        return Ok(Target { host, port });
    }
    if s.matches(':').count() > 1 {
        return Err(format!("`{s}`: an IPv6 address must be in brackets"));
    }
    let (host, port) = match s.split_once(':') {
        Some((h, p)) => (h, parse_port(p)?),
        None => (s, need_port()?),
    };
    Ok(Target {
        host: parse_host(host)?,
        port,
    })
}

/// 1-65535 in plain decimal.
fn parse_port(p: &str) -> Result<u16, String> {
    let plain = !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit());
    match p.parse::<u16>() {
        Ok(n) if plain && n > 0 && !p.starts_with('0') => Ok(n),
        _ => Err(format!("`{}` is not a port (1-65535)", p.escape_debug())),
    }
}

/// A host name or dotted IPv4 address (not bracketed), lower-cased, one trailing dot
/// removed.
pub fn parse_host(h: &str) -> Result<Host, String> {
    if h.is_empty() {
        return Err("the request has no host".into());
    }
    if h.contains('\0') {
        return Err(format!("the host `{}` holds a NUL byte", h.escape_debug()));
    }
    if let Some(c) = h
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '.'))
    {
        return Err(format!(
            "the host `{}` holds `{}`: only letters, digits, `-` and `.` are allowed",
            h.escape_debug(),
            c.escape_debug()
        ));
    }
    let lower = h.to_ascii_lowercase();
    let name = lower.strip_suffix('.').unwrap_or(&lower);
    if let Ok(v4) = name.parse::<Ipv4Addr>() {
        return Ok(Host::Ip(IpAddr::V4(v4)));
    }
    if !valid_host_name(name) {
        return Err(format!("`{h}` is not a host name"));
    }
    let last = name.rsplit('.').next().unwrap_or(name);
    let hex = last
        .strip_prefix("0x")
        .is_some_and(|d| d.bytes().all(|b| b.is_ascii_hexdigit()));
    if hex || last.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "`{h}` ends in a number but is not a dotted IPv4 address (a.b.c.d)"
        ));
    }
    Ok(Host::Name(name.to_owned()))
}

/// How the body of a forwarded request is delimited.
fn framing(fields: &[Field], version: &str) -> Result<Body, String> {
    let te: Vec<&Field> = fields
        .iter()
        .filter(|f| f.is("transfer-encoding"))
        .collect();
    let cl: Vec<&Field> = fields.iter().filter(|f| f.is("content-length")).collect();
    match (&te[..], &cl[..]) {
        ([], []) => Ok(Body::None),
        // HTTP/1.0 has no chunked framing: an origin may read such a body as a request.
        ([_, ..], _) if version == "HTTP/1.0" => Err(
            "an HTTP/1.0 request cannot have Transfer-Encoding: send Content-Length or HTTP/1.1"
                .into(),
        ),
        ([_, ..], [_, ..]) => {
            Err("the request has both Content-Length and Transfer-Encoding".into())
        }
        ([one], []) if one.text().eq_ignore_ascii_case("chunked") => Ok(Body::Chunked),
        (_, []) => Err("only `Transfer-Encoding: chunked` is supported".into()),
        ([], [first, ..]) => {
            let v = first.text();
            let n = v
                .parse::<u64>()
                .ok()
                .filter(|_| !v.is_empty() && v.len() <= 19 && v.bytes().all(|b| b.is_ascii_digit()))
                .ok_or_else(|| format!("`Content-Length: {v}` is not a length"))?;
            if cl.iter().any(|f| f.value != first.value) {
                return Err("the request has two different Content-Lengths".into());
            }
            Ok(Body::Length(n))
        }
    }
}

/// The method and host of an unreadable request, as far as they can be made out, for the
/// log.
pub fn glimpse(head: &[u8]) -> (Option<String>, Option<String>) {
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line.strip_suffix(b"\r").unwrap_or(line));
    let mut parts = line.splitn(3, ' ');
    let cut = |s: &str| s.chars().take(256).collect::<String>();
    let method = parts.next().filter(|m| !m.is_empty()).map(cut);
    let host = parts.next().map(|t| {
        let t = t
            .get(..7)
            .filter(|s| s.eq_ignore_ascii_case("http://"))
            .map_or(t, |_| &t[7..]);
        let t = t.split(['/', '?']).next().unwrap_or(t);
        cut(t)
    });
    (method, host.filter(|h| !h.is_empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(s: &str) -> Result<Request, BadRequest> {
        parse_request(s.as_bytes())
    }
    fn target(host: Host, port: u16) -> Target {
        Target { host, port }
    }
    fn name(n: &str) -> Host {
        Host::Name(n.into())
    }

    #[test]
    fn connect_takes_host_and_port() {
        let r = req("CONNECT API.Example.com.:443 HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        assert_eq!(r.target, target(name("api.example.com"), 443));
        assert_eq!(r.form, Form::Connect);
        let r = req("CONNECT [::1]:8080 HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!(r.target, target(Host::Ip("::1".parse().unwrap()), 8080));
        let r = req("CONNECT [::ffff:127.0.0.1]:80 HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!(r.target, target(Host::Ip("127.0.0.1".parse().unwrap()), 80));
    }

    #[test]
    fn absolute_urls_become_origin_form() {
        for (url, host, port, path) in [
            (
                "http://127.0.0.1:8080/v1/x?y=1",
                "127.0.0.1",
                8080,
                "/v1/x?y=1",
            ),
            ("HTTP://Example.com", "example.com", 80, "/"),
            ("http://example.com?q", "example.com", 80, "/?q"),
            ("http://example.com:80/%2F", "example.com", 80, "/%2F"),
        ] {
            let r = req(&format!("POST {url} HTTP/1.1\r\n\r\n")).unwrap();
            assert_eq!(r.target.port, port, "{url}");
            assert_eq!(r.target.host.to_string(), host, "{url}");
            assert_eq!(r.form, Form::Forward { path: path.into() }, "{url}");
        }
    }

    #[test]
    fn odd_hosts_and_targets_are_refused_with_the_reason() {
        for (line, says) in [
            ("CONNECT allowed.com\0.evil.com:443 HTTP/1.1", "NUL byte"),
            (
                "CONNECT allowed.com%00.evil.com:443 HTTP/1.1",
                "percent-encoded",
            ),
            ("CONNECT user@allowed.com:443 HTTP/1.1", "user info"),
            ("GET http://allowed.com@evil.com/ HTTP/1.1", "user info"),
            ("GET http://a%2ecom/ HTTP/1.1", "percent-encoded"),
            ("CONNECT allowed.com:443  HTTP/1.1", "METHOD TARGET"),
            ("CONNECT allowed.com HTTP/1.1", "no port"),
            ("CONNECT allowed.com:0 HTTP/1.1", "not a port"),
            ("CONNECT allowed.com:65536 HTTP/1.1", "not a port"),
            ("CONNECT allowed.com:+443 HTTP/1.1", "not a port"),
            ("CONNECT allowed.com:0443 HTTP/1.1", "not a port"),
            ("CONNECT allowed.com: HTTP/1.1", "not a port"),
            ("CONNECT ::1:443 HTTP/1.1", "brackets"),
            ("CONNECT [fe80::1%25eth0]:443 HTTP/1.1", "percent-encoded"),
            ("CONNECT [::1]x:443 HTTP/1.1", "after `]`"),
            ("CONNECT [nope]:443 HTTP/1.1", "not an IPv6"),
            ("CONNECT a_b.com:443 HTTP/1.1", "holds `_`"),
            ("CONNECT a..com:443 HTTP/1.1", "not a host name"),
            ("CONNECT 127.1:443 HTTP/1.1", "ends in a number"),
            ("CONNECT 0x7f.1:443 HTTP/1.1", "ends in a number"),
            ("CONNECT 2130706433:443 HTTP/1.1", "ends in a number"),
            ("CONNECT 127.000.0.1:443 HTTP/1.1", "ends in a number"),
            ("CONNECT :443 HTTP/1.1", "no host"),
            ("GET /v1 HTTP/1.1", "is a path"),
            ("GET https://a.com/ HTTP/1.1", "CONNECT"),
            ("GET ftp://a.com/ HTTP/1.1", "not an http:// URL"),
            ("GET http://a.com/#x HTTP/1.1", "fragment"),
            ("GET http:///x HTTP/1.1", "no host"),
            ("GET http://a.com/ HTTP/2.0", "not HTTP/1.1"),
            ("G(T http://a.com/ HTTP/1.1", "not a method"),
            ("GET http://a.com/\u{7f} HTTP/1.1", "0x7f"),
            ("GET http://a.com/é HTTP/1.1", "0xc3"),
        ] {
            let e = req(&format!("{line}\r\n\r\n")).unwrap_err();
            assert!(e.why.contains(says), "{line:?}: {}", e.why);
        }
    }

    #[test]
    fn a_refused_request_still_names_what_it_asked_for() {
        let e = req("CONNECT allowed.com\0.evil.com:443 HTTP/1.1\r\n\r\n").unwrap_err();
        assert_eq!(e.method.as_deref(), Some("CONNECT"));
        assert_eq!(e.host.as_deref(), Some("allowed.com\0.evil.com:443"));
        let e = req("GET http://a@b.com/x HTTP/1.1\r\n\r\n").unwrap_err();
        assert_eq!(e.host.as_deref(), Some("a@b.com"));
    }

    #[test]
    fn bodies_are_framed_one_way_only() {
        let body = |fields: &str| {
            req(&format!("POST http://a.com/ HTTP/1.1\r\n{fields}\r\n")).map(|r| r.body)
        };
        assert_eq!(body(""), Ok(Body::None));
        assert_eq!(body("Content-Length: 12\r\n"), Ok(Body::Length(12)));
        assert_eq!(
            body("content-length: 3\r\nContent-Length: 3\r\n"),
            Ok(Body::Length(3))
        );
        assert_eq!(body("Transfer-Encoding: Chunked\r\n"), Ok(Body::Chunked));
        for bad in [
            "Content-Length: 3\r\nContent-Length: 4\r\n",
            "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n",
            "Transfer-Encoding: gzip, chunked\r\n",
            "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
            "Content-Length: -1\r\n",
            "Content-Length: 1 2\r\n",
            "Content-Length: +1\r\n",
        ] {
            assert!(body(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn authorities_say_what_a_host_field_says() {
        let t = parse_authority("[::1]:8080", None).unwrap();
        assert_eq!(t.authority(), "[::1]:8080");
        assert_eq!(
            parse_authority("a.com", Some(80)).unwrap().authority(),
            "a.com"
        );
    }
}
