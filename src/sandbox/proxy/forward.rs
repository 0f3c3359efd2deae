//! Forwarding one `METHOD http://…` request to its origin, and the origin's answer back.
//!
//! ```text
//!  client ── head ──► origin_head(): origin-form, Host from the URL, no hop-by-hop or
//!                     Proxy-* fields, `Connection: close` ──► origin
//!  client ── body ──► exactly Content-Length bytes, or chunks up to the last one ──► origin
//!                     (a scoped thread: the origin may answer 100 Continue first)
//!  client ◄── answer: 1xx heads as they are; the final head without hop-by-hop fields and
//!                     with `Connection: close`; then every byte until the origin closes
//! ```
//!
//! One request per client connection: the answer says `Connection: close`, so a client
//! opens a new connection (through the relay) for its next request, which gets its own
//! decision.
//!
//! Common pitfalls:
//! * `Connection: Content-Length` must not strip the framing: the proxy frames the body by
//!   it, and an origin that no longer sees it would read the body as a second request.
//! * Bytes a client sends after its body (a pipelined request) are never forwarded: they
//!   would reach the origin without a decision.
//! * When the answer ends, the body thread may still be blocked reading the client: shut
//!   the sockets down so it returns, before joining it.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::unix::net::UnixStream;

use super::head::{Field, Incoming, MAX_FIRST_LINE, ResponseHead, response_head};
use super::request::{Body, Request};
use crate::sandbox::relay::PIPE_STACK;

/// How forwarding failed.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    /// Nothing was sent to the client yet: it can still get a 502 with this reason.
    #[error("{0}")]
    NoAnswer(String),
    /// The exchange broke after the client got part of the answer.
    #[error("the exchange broke: {0}")]
    Broken(#[from] io::Error),
}

/// Forwards `req` (its head already read from `incoming`) to `upstream` and copies the
/// answer to `client`. Leaves the client's write side open for a 502 on `NoAnswer`.
pub fn forward(
    req: &Request,
    path: &str,
    mut incoming: Incoming<&UnixStream>,
    client: &UnixStream,
    upstream: &TcpStream,
) -> Result<(), ForwardError> {
    (&*upstream)
        .write_all(&origin_head(req, path))
        .map_err(|e| ForwardError::NoAnswer(format!("cannot send the request: {e}")))?;
    std::thread::scope(|s| {
        let body = req.body;
        let pump = match body {
            Body::None => None,
            _ => Some(
                std::thread::Builder::new()
                    .name("subpane-proxy-body".into())
                    .stack_size(PIPE_STACK)
                    .spawn_scoped(s, move || {
                        if send_body(&mut incoming, body, upstream).is_err() {
                            // A broken or malformed body: the origin cannot answer it well.
                            let _ = upstream.shutdown(Shutdown::Write);
                        }
                    })
                    .map_err(|e| ForwardError::NoAnswer(format!("cannot start a thread: {e}")))?,
            ),
        };
        let answer = relay_answer(upstream, client);
        let _ = upstream.shutdown(Shutdown::Both);
        let _ = client.shutdown(Shutdown::Read);
        if let Some(p) = pump {
            let _ = p.join();
        }
        answer
    })
}

/// The request head the origin gets.
pub fn origin_head(req: &Request, path: &str) -> Vec<u8> {
    let mut out = format!(
        "{} {path} {}\r\nHost: {}\r\n",
        req.method,
        req.version,
        req.target.authority()
    )
    .into_bytes();
    put_fields(&mut out, &req.fields);
    out
}

/// Appends the end-to-end fields of `fields`, then `Connection: close` and the empty line.
fn put_fields(out: &mut Vec<u8>, fields: &[Field]) {
    let listed: Vec<String> = fields
        .iter()
        .filter(|f| f.is("connection"))
        .flat_map(|f| f.text().split(',').map(|n| n.trim().to_ascii_lowercase()))
        .collect();
    for f in fields {
        let name = f.name.to_ascii_lowercase();
        let framing = name == "content-length" || name == "transfer-encoding";
        let hop = matches!(
            name.as_str(),
            "connection" | "keep-alive" | "te" | "upgrade" | "host"
        ) || name.starts_with("proxy-")
            || listed.contains(&name);
        if framing || !hop {
            out.extend_from_slice(f.name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(&f.value);
            out.extend_from_slice(b"\r\n");
        }
    }
    out.extend_from_slice(b"Connection: close\r\n\r\n");
}

/// Copies the request body, as its framing delimits it, from the client to the origin.
fn send_body(incoming: &mut Incoming<&UnixStream>, body: Body, to: &TcpStream) -> io::Result<()> {
    match body {
        Body::None => Ok(()),
        Body::Length(n) => copy_exact(incoming, n, to),
        Body::Chunked => loop {
            let line = incoming.read_line(MAX_FIRST_LINE)?;
            let size = chunk_size(&line)?;
            (&*to).write_all(&line)?;
            if size == 0 {
                // Trailer fields, up to the empty line.
                loop {
                    let l = incoming.read_line(MAX_FIRST_LINE)?;
                    (&*to).write_all(&l)?;
                    if l == b"\r\n" {
                        return Ok(());
                    }
                }
            }
            copy_exact(incoming, size, to)?;
            let end = incoming.read_line(2)?;
            if end != b"\r\n" {
                return Err(bad_data("a chunk does not end in CRLF"));
            }
            (&*to).write_all(&end)?;
        },
    }
}

fn copy_exact(incoming: &mut Incoming<&UnixStream>, mut n: u64, to: &TcpStream) -> io::Result<()> {
    while n > 0 {
        if incoming.buffered().is_empty() && incoming.fill()? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let have = incoming.buffered();
        let take = have.len().min(usize::try_from(n).unwrap_or(usize::MAX));
        (&*to).write_all(&have[..take])?;
        incoming.consume(take);
        n -= take as u64;
    }
    Ok(())
}

/// The size on a chunk's first line (`1a;ext=x\r\n` → 26).
fn chunk_size(line: &[u8]) -> io::Result<u64> {
    let line = line.strip_suffix(b"\r\n").unwrap_or(line);
    let digits = line.split(|&b| b == b';').next().unwrap_or_default();
    let ok = !digits.is_empty() && digits.len() <= 15 && digits.iter().all(u8::is_ascii_hexdigit);
    let text = std::str::from_utf8(digits).ok().filter(|_| ok);
    text.and_then(|t| u64::from_str_radix(t, 16).ok())
        .ok_or_else(|| bad_data("a chunk size is not hexadecimal"))
}

fn bad_data(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why.to_owned())
}

/// Copies the origin's answer to the client: interim heads, the final head rewritten, then
/// every byte until the origin closes.
fn relay_answer(upstream: &TcpStream, client: &UnixStream) -> Result<(), ForwardError> {
    let mut from = Incoming::new(upstream);
    let mut sent = false;
    let no_answer = |sent: bool, why: String| {
        if sent {
            ForwardError::Broken(io::Error::new(io::ErrorKind::InvalidData, why))
        } else {
            ForwardError::NoAnswer(why)
        }
    };
    loop {
        let len = from
            .read_head()
            .map_err(|e| no_answer(sent, format!("the origin's answer: {e}")))?;
        let head = &from.buffered()[..len];
        let ResponseHead {
            status_line,
            code,
            fields,
        } = response_head(head)
            .map_err(|e| no_answer(sent, format!("the origin's answer: {e}")))?;
        if (100..200).contains(&code) && code != 101 {
            (&*client).write_all(head)?;
            sent = true;
            from.consume(len);
            continue;
        }
        let mut out = status_line.to_vec();
        out.extend_from_slice(b"\r\n");
        put_fields(&mut out, &fields);
        (&*client).write_all(&out)?;
        from.consume(len);
        break;
    }
    (&*client).write_all(from.buffered())?;
    let mut buf = [0u8; 8 * 1024];
    loop {
        match (&*upstream).read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => (&*client).write_all(&buf[..n])?,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::proxy::request::parse_request;

    #[test]
    fn the_origin_gets_origin_form_without_hop_by_hop_or_proxy_fields() {
        let req = parse_request(
            b"POST http://127.0.0.1:8080/v1/messages?beta=1 HTTP/1.1\r\n\
              Host: evil.com\r\nProxy-Authorization: Basic eA==\r\nProxy-Connection: keep-alive\r\n\
              Connection: keep-alive, X-Secret, Content-Length\r\nX-Secret: 1\r\nKeep-Alive: 5\r\n\
              TE: trailers\r\nUpgrade: websocket\r\nContent-Length: 2\r\nX-Api-Key: k\r\n\r\n",
        )
        .unwrap();
        let path = "/v1/messages?beta=1";
        let head = String::from_utf8(origin_head(&req, path)).unwrap();
        assert_eq!(
            head,
            "POST /v1/messages?beta=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\
             Content-Length: 2\r\nX-Api-Key: k\r\nConnection: close\r\n\r\n"
        );
    }

    #[test]
    fn chunk_sizes_are_plain_hexadecimal() {
        assert_eq!(chunk_size(b"1a\r\n").unwrap(), 26);
        assert_eq!(chunk_size(b"0;name=x\r\n").unwrap(), 0);
        for bad in [
            &b"\r\n"[..],
            b"-1\r\n",
            b" 1\r\n",
            b"1 ;x\r\n",
            b"1234567890abcdef0\r\n",
        ] {
            assert!(
                chunk_size(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
