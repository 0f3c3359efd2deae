//! One client connection of the proxy: read the head, decide, then refuse, tunnel or forward.
//!
//! ```text
//!  head (30 s to arrive) ─ unreadable ──► log deny, 400 │ none in time ──► log deny, 408
//!     │ parse_request
//!  decide(host, port, allow, resolve once) ─ Deny ──► log deny, 403 naming host and policy
//!     │ Allow(addresses)          └─ Unresolved ──► log allow + reason, 502
//!  connect to the first address that answers (10 s each) ─ none ──► log allow + reason, 502
//!     │ log allow + address
//!  CONNECT: 200, then bytes both ways        GET/POST/…: forward::forward
//! ```
//!
//! Common pitfalls:
//! * Log before answering: a test (or a user) that reads `network.jsonl` after seeing the
//!   answer must find the line.
//! * After a refusal, close gently: half-close, then read what the client still sends for a
//!   moment. Closing a socket with unread data makes the peer see a reset, which can destroy
//!   the answer it has not read yet.
//! * The connection threads serve the worker, whose memory is bounded: buffers are a few KiB
//!   and the head buffer is given back once the head is parsed.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use super::decide::{Decision, decide};
use super::forward::{ForwardError, forward};
use super::head::{HeadError, Incoming};
use super::log::{NetworkEntry, Verdict};
use super::request::{BadRequest, Form, Request, glimpse, parse_request};
use super::{Admitted, Shared};
use crate::fresh::now_rfc3339;
use crate::sandbox::relay::pipe;

/// How long, and how much, a refused client's further bytes are read before closing.
const LINGER: Duration = Duration::from_secs(1);
const LINGER_BYTES: u64 = 1 << 20;

/// Serves one client connection to its end.
pub(super) fn serve(client: UnixStream, admitted: &Admitted) {
    let shared = &*admitted.shared;
    let _ = client.set_read_timeout(Some(shared.timeouts.head));
    let mut incoming = Incoming::new(&client);
    let len = match incoming.read_head() {
        Ok(n) => n,
        // Nothing to answer: the client left without a byte, or the connection broke.
        Err(HeadError::Closed) => return,
        Err(HeadError::Io(e)) if !timed_out(&e) => return,
        Err(HeadError::Io(_)) => {
            let (method, host) = glimpse(incoming.buffered());
            let limit = shared.timeouts.head;
            let why = format!("no request within {}", humantime::format_duration(limit));
            shared.log.append(&NetworkEntry {
                at: now_rfc3339(),
                method,
                host,
                port: None,
                decision: Verdict::Deny,
                reason: Some(why.clone()),
                address: None,
            });
            return answer(&client, "408 Request Timeout", &format!("subpane: {why}"));
        }
        Err(e) => {
            let (method, host) = glimpse(incoming.buffered());
            let why = e.to_string();
            return refuse_bad(&client, shared, BadRequest { why, method, host });
        }
    };
    let req = match parse_request(&incoming.buffered()[..len]) {
        Ok(r) => r,
        Err(bad) => return refuse_bad(&client, shared, bad),
    };
    incoming.consume(len);
    let host = req.target.host.clone();
    let port = req.target.port;
    let log = |verdict, reason: Option<String>, address| {
        shared.log.append(&entry(&req, verdict, reason, address));
    };
    let addresses = match decide(&host, port, &shared.allow, resolve) {
        Decision::Allow(a) => a,
        Decision::Deny(refusal) => {
            log(Verdict::Deny, Some(refusal.reason()), None);
            return answer(
                &client,
                "403 Forbidden",
                &refusal.explain(&host, &shared.allow),
            );
        }
        Decision::Unresolved(why) => {
            let why = format!("cannot resolve {host}: {why}");
            log(Verdict::Allow, Some(why.clone()), None);
            return answer(&client, "502 Bad Gateway", &format!("subpane: {why}"));
        }
    };
    let (upstream, address) = match connect(&addresses, port, shared.timeouts.connect) {
        Ok(c) => c,
        Err(why) => {
            log(Verdict::Allow, Some(why.clone()), None);
            return answer(&client, "502 Bad Gateway", &format!("subpane: {why}"));
        }
    };
    if !admitted.track(&upstream) {
        return; // The proxy is stopping: nothing was served.
    }
    log(Verdict::Allow, None, Some(address));
    let _ = client.set_read_timeout(None);
    match &req.form {
        Form::Connect => {
            let established = b"HTTP/1.1 200 Connection established\r\n\r\n";
            if (&client).write_all(established).is_err() {
                return;
            }
            // Bytes the client sent right after its head (a TLS hello) go first.
            if (&upstream).write_all(incoming.buffered()).is_err() {
                return;
            }
            drop(incoming);
            let _ = pipe(&client, &upstream);
        }
        Form::Forward { path } => match forward(&req, path, incoming, &client, &upstream) {
            Ok(()) => {}
            Err(ForwardError::NoAnswer(why)) => {
                let why = format!("{host} did not answer: {why}");
                answer(&client, "502 Bad Gateway", &format!("subpane: {why}"));
            }
            Err(ForwardError::Broken(_)) => {}
        },
    }
}

/// Whether a read failed because its timeout passed (`SO_RCVTIMEO` reports `EAGAIN`).
fn timed_out(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// Looks a name up once, with the system's resolver.
fn resolve(name: &str, port: u16) -> io::Result<Vec<IpAddr>> {
    Ok((name, port).to_socket_addrs()?.map(|a| a.ip()).collect())
}

/// Connects to the first of `addresses` that accepts, and says which one it was.
fn connect(
    addresses: &[IpAddr],
    port: u16,
    limit: Duration,
) -> Result<(TcpStream, IpAddr), String> {
    let mut why = String::from("no address to connect to");
    for &ip in addresses {
        match TcpStream::connect_timeout(&SocketAddr::new(ip, port), limit) {
            Ok(s) => {
                // Small writes (a head, then a body) must not wait for a delayed ACK.
                let _ = s.set_nodelay(true);
                return Ok((s, ip));
            }
            Err(e) => why = format!("cannot connect to {}: {e}", SocketAddr::new(ip, port)),
        }
    }
    Err(why)
}

fn entry(
    req: &Request,
    verdict: Verdict,
    reason: Option<String>,
    address: Option<IpAddr>,
) -> NetworkEntry {
    NetworkEntry {
        at: now_rfc3339(),
        method: Some(req.method.clone()),
        host: Some(req.target.host.to_string()),
        port: Some(req.target.port),
        decision: verdict,
        reason,
        address,
    }
}

/// Logs and answers a request the proxy could not read.
fn refuse_bad(client: &UnixStream, shared: &Shared, bad: BadRequest) {
    shared.log.append(&NetworkEntry {
        at: now_rfc3339(),
        method: bad.method,
        host: bad.host,
        port: None,
        decision: Verdict::Deny,
        reason: Some(format!("bad request: {}", bad.why)),
        address: None,
    });
    answer(
        client,
        "400 Bad Request",
        &format!(
            "subpane: the sandbox's network proxy cannot read this request: {}",
            bad.why
        ),
    );
}

/// Sends a short text answer, then closes gently (see the pitfalls).
pub(super) fn answer(client: &UnixStream, status: &str, text: &str) {
    let msg = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{text}\n",
        text.len() + 1
    );
    if (&*client).write_all(msg.as_bytes()).is_err() {
        return;
    }
    let _ = client.shutdown(Shutdown::Write);
    let _ = client.set_read_timeout(Some(LINGER));
    let _ = io::copy(&mut client.take(LINGER_BYTES), &mut io::sink());
}
