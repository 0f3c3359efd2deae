//! The egress proxy in this process: a temp Unix socket, a tiny origin server on loopback in
//! a thread, clients that speak to the proxy directly or through `relay::serve`.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use subpane::sandbox::proxy::{self, NetworkEntry, ProxyHandle, Verdict};
use subpane::sandbox::relay;
use subpane::spec::HostPattern;

use crate::harness::{DEADLINE, wait_until};

/// A proxy on a temp socket, logging to a temp `network.jsonl`.
struct Proxy {
    _dir: tempfile::TempDir,
    sock: PathBuf,
    log: PathBuf,
    handle: Option<ProxyHandle>,
}

impl Proxy {
    fn start(allow: &[&str]) -> Proxy {
        Self::start_with(allow, proxy::Timeouts::default())
    }

    fn start_with(allow: &[&str], timeouts: proxy::Timeouts) -> Proxy {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("proxy.sock");
        let log = dir.path().join("network.jsonl");
        let allow = allow
            .iter()
            .map(|p| HostPattern::parse(p).unwrap())
            .collect();
        let handle = proxy::start_with(&sock, allow, &log, Default::default(), timeouts).unwrap();
        Proxy {
            _dir: dir,
            sock,
            log,
            handle: Some(handle),
        }
    }

    fn connect(&self) -> UnixStream {
        let s = UnixStream::connect(&self.sock).unwrap();
        s.set_read_timeout(Some(DEADLINE)).unwrap();
        s
    }

    /// Sends `request` on a new connection and reads the whole answer.
    fn ask(&self, request: &[u8]) -> Answer {
        let mut s = self.connect();
        s.write_all(request).unwrap();
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).unwrap();
        Answer::parse(&raw)
    }

    fn entries(&self) -> Vec<NetworkEntry> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines()
            .map(|l| {
                // Every line is valid JSON with every field present, not just decodable.
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                for key in [
                    "at", "method", "host", "port", "decision", "reason", "address",
                ] {
                    assert!(v.get(key).is_some(), "{key} missing in {l}");
                }
                serde_json::from_value(v).unwrap()
            })
            .collect()
    }

    fn stop(&mut self) {
        drop(self.handle.take());
    }
}

/// An answer split into status, head and body.
#[derive(Debug)]
struct Answer {
    status: u16,
    head: String,
    body: String,
}

impl Answer {
    fn parse(raw: &[u8]) -> Answer {
        let text = String::from_utf8_lossy(raw).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head
            .get(9..12)
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("no status in {text:?}"));
        Answer {
            status,
            head: head.to_owned(),
            body: body.to_owned(),
        }
    }
}

/// A loopback server that hands each connection to `handler`, one after the other.
struct Origin {
    port: u16,
    listener: TcpListener,
    thread: Option<JoinHandle<()>>,
    /// Each request head (and body) the origin received, as bytes.
    seen: Arc<Mutex<Vec<String>>>,
}

impl Origin {
    fn start(handler: impl Fn(TcpStream, &Mutex<Vec<String>>) + Send + 'static) -> Origin {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (l, s) = (listener.try_clone().unwrap(), Arc::clone(&seen));
        let thread = std::thread::spawn(move || {
            while let Ok((c, _)) = l.accept() {
                c.set_read_timeout(Some(DEADLINE)).unwrap();
                handler(c, &s);
            }
        });
        Origin {
            port,
            listener,
            thread: Some(thread),
            seen,
        }
    }

    /// An HTTP origin: records the request and answers `hello`.
    fn http() -> Origin {
        Origin::start(|mut c, seen| {
            let req = read_request(&mut c);
            seen.lock().unwrap().push(req);
            let _ = c.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\nhello",
            );
        })
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for Origin {
    fn drop(&mut self) {
        // accept() on a listener that was shut down returns EINVAL: the thread ends.
        unsafe { libc::shutdown(self.listener.as_raw_fd(), libc::SHUT_RDWR) };
        if let Some(t) = self.thread.take() {
            // A failed assertion in the origin fails the test, unless it is failing already.
            if let Err(e) = t.join()
                && !std::thread::panicking()
            {
                std::panic::resume_unwind(e);
            }
        }
    }
}

/// Reads a request head and its body (Content-Length or chunked) as text.
fn read_request(c: &mut TcpStream) -> String {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        if c.read(&mut byte).unwrap() == 0 {
            break;
        }
        buf.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&buf).to_lowercase();
    if let Some(n) = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .and_then(|n| n.trim().parse::<usize>().ok())
    {
        let mut body = vec![0u8; n];
        c.read_exact(&mut body).unwrap();
        buf.extend(body);
    } else if head.contains("transfer-encoding: chunked") {
        while !buf.ends_with(b"0\r\n\r\n") {
            if c.read(&mut byte).unwrap() == 0 {
                break;
            }
            buf.push(byte[0]);
        }
    }
    String::from_utf8_lossy(&buf).into_owned()
}

/// A loopback port with nothing listening.
fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn forwarded_get_reaches_the_origin_in_origin_form_without_proxy_fields() {
    let origin = Origin::http();
    let p = Proxy::start(&["127.0.0.1"]);
    let port = origin.port;
    let a = p.ask(
        format!(
            "GET http://127.0.0.1:{port}/v1/models?x=1 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\
             Proxy-Authorization: Basic dTpw\r\nProxy-Connection: keep-alive\r\n\
             Connection: keep-alive\r\nUser-Agent: test\r\n\r\n"
        )
        .as_bytes(),
    );
    assert_eq!(a.status, 200, "{a:?}");
    assert_eq!(a.body, "hello");
    assert!(a.head.contains("Connection: close"), "{}", a.head);
    assert!(!a.head.contains("keep-alive"), "{}", a.head);
    let seen = origin.seen();
    assert_eq!(seen.len(), 1);
    assert!(
        seen[0].starts_with("GET /v1/models?x=1 HTTP/1.1\r\n"),
        "{:?}",
        seen[0]
    );
    let lower = seen[0].to_lowercase();
    assert!(
        lower.contains(&format!("host: 127.0.0.1:{port}\r\n")),
        "{lower}"
    );
    assert!(lower.contains("user-agent: test"), "{lower}");
    assert!(!lower.contains("proxy-"), "{lower}");
    assert!(lower.contains("connection: close"), "{lower}");
}

#[test]
fn forwarded_bodies_arrive_whole_with_either_framing() {
    let origin = Origin::http();
    let p = Proxy::start(&["127.0.0.1"]);
    let port = origin.port;
    let a = p.ask(
        format!(
            "POST http://127.0.0.1:{port}/v1/messages HTTP/1.1\r\nContent-Length: 10\r\n\r\n\
             {{\"a\":\"b\"}}\n"
        )
        .as_bytes(),
    );
    assert_eq!(a.status, 200);
    let a = p.ask(
        format!(
            "POST http://127.0.0.1:{port}/c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n\
             3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n"
        )
        .as_bytes(),
    );
    assert_eq!(a.status, 200);
    let seen = origin.seen();
    assert!(
        seen[0].ends_with("\r\n\r\n{\"a\":\"b\"}\n"),
        "{:?}",
        seen[0]
    );
    assert!(
        seen[1].ends_with("\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n"),
        "{:?}",
        seen[1]
    );
}

#[test]
fn connect_tunnels_bytes_both_ways_with_half_close() {
    let origin = Origin::start(|mut c, _| {
        let mut ping = [0u8; 4];
        c.read_exact(&mut ping).unwrap();
        assert_eq!(&ping, b"ping");
        c.write_all(b"pong").unwrap();
        // Read until the client's half-close reaches us through the tunnel, then answer.
        let mut rest = Vec::new();
        c.read_to_end(&mut rest).unwrap();
        c.write_all(format!("bye after {} bytes", rest.len()).as_bytes())
            .unwrap();
    });
    let p = Proxy::start(&["127.0.0.1"]);
    let mut s = p.connect();
    // The first bytes ride along with the head, as a TLS client's hello may.
    write!(
        s,
        "CONNECT 127.0.0.1:{} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nping",
        origin.port
    )
    .unwrap();
    let mut head = [0u8; 39];
    s.read_exact(&mut head).unwrap();
    assert_eq!(&head[..], b"HTTP/1.1 200 Connection established\r\n\r\n");
    let mut pong = [0u8; 4];
    s.read_exact(&mut pong).unwrap();
    assert_eq!(&pong, b"pong");
    s.write_all(b"more").unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    let mut bye = String::new();
    s.read_to_string(&mut bye).unwrap();
    assert_eq!(bye, "bye after 4 bytes");
}

#[test]
fn unlisted_hosts_get_403_naming_the_host_and_the_policy() {
    let origin = Origin::http();
    let p = Proxy::start(&["api.example.com", "127.0.0.1"]);
    let policy = "(allow: api.example.com, 127.0.0.1)";
    // What Codex does on its own: it must be refused, and nothing else harmed.
    let a = p.ask(b"CONNECT github.com:443 HTTP/1.1\r\nHost: github.com:443\r\n\r\n");
    assert_eq!(a.status, 403);
    assert_eq!(
        a.body,
        format!("subpane: github.com is not allowed by this sandbox's network policy {policy}\n")
    );
    let a = p.ask(b"GET http://GitHub.com./x HTTP/1.1\r\n\r\n");
    assert_eq!(a.status, 403);
    assert!(a.body.contains("github.com is not allowed") && a.body.contains(policy));
    let a = p.ask(format!("CONNECT 127.0.0.2:{} HTTP/1.1\r\n\r\n", origin.port).as_bytes());
    assert_eq!(a.status, 403);
    assert!(a.body.contains("127.0.0.2 is not allowed"), "{}", a.body);
    // The allowed host still works after the refusals.
    let a = p.ask(format!("GET http://127.0.0.1:{}/ HTTP/1.1\r\n\r\n", origin.port).as_bytes());
    assert_eq!(a.status, 200);
    assert_eq!(
        origin.seen().len(),
        1,
        "refused requests never reach the origin"
    );
}

#[test]
fn a_nul_byte_in_a_connect_host_gets_400() {
    let p = Proxy::start(&["127.0.0.1", "allowed.example.com"]);
    let a = p.ask(b"CONNECT allowed.example.com\0.evil.com:443 HTTP/1.1\r\n\r\n");
    assert_eq!(a.status, 400);
    assert!(a.body.contains("NUL byte"), "{}", a.body);
    let e = p.entries();
    assert_eq!(e.len(), 1);
    assert_eq!(e[0].decision, Verdict::Deny);
    assert_eq!(
        e[0].host.as_deref(),
        Some("allowed.example.com\0.evil.com:443")
    );
    assert!(e[0].reason.as_deref().unwrap().starts_with("bad request:"));
}

#[test]
fn localhost_is_refused_unless_listed() {
    let origin = Origin::http();
    let refused = Proxy::start(&["127.0.0.1"]);
    let get = format!("GET http://localhost:{}/ HTTP/1.1\r\n\r\n", origin.port);
    let a = refused.ask(get.as_bytes());
    assert_eq!(a.status, 403, "{a:?}");
    assert!(a.body.contains("localhost is not allowed"), "{}", a.body);
    let listed = Proxy::start(&["localhost"]);
    let a = listed.ask(get.as_bytes());
    assert_eq!(a.status, 200, "{a:?}");
    let allowed = &listed.entries()[0];
    assert_eq!(allowed.decision, Verdict::Allow);
    assert!(
        allowed.address.is_some_and(|a| a.is_loopback()),
        "{allowed:?}"
    );
}

#[test]
fn oversize_request_lines_and_heads_get_400() {
    let p = Proxy::start(&["127.0.0.1"]);
    let long_url = format!("GET http://127.0.0.1/{} HTTP/1.1\r\n\r\n", "a".repeat(9000));
    let a = p.ask(long_url.as_bytes());
    assert_eq!(a.status, 400);
    assert!(a.body.contains("first line is longer"), "{}", a.body);
    let fields = "X-Filler: 0123456789abcdef0123456789abcdef\r\n".repeat(1000);
    let a = p.ask(format!("GET http://127.0.0.1/ HTTP/1.1\r\n{fields}\r\n").as_bytes());
    assert_eq!(a.status, 400);
    assert!(a.body.contains("head is longer"), "{}", a.body);
    for e in p.entries() {
        assert_eq!(e.decision, Verdict::Deny);
        assert_eq!(e.method.as_deref(), Some("GET"));
    }
}

#[test]
fn an_unreachable_origin_gets_502_and_the_log_says_why() {
    let p = Proxy::start(&["127.0.0.1"]);
    let port = closed_port();
    let a = p.ask(format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n").as_bytes());
    assert_eq!(a.status, 502, "{a:?}");
    let e = &p.entries()[0];
    assert_eq!(e.decision, Verdict::Allow);
    assert_eq!(e.address, None);
    assert!(
        e.reason
            .as_deref()
            .unwrap()
            .contains("cannot connect to 127.0.0.1"),
        "{e:?}"
    );
}

#[test]
fn every_decision_is_one_json_line() {
    let origin = Origin::http();
    let p = Proxy::start(&["127.0.0.1"]);
    let port = origin.port;
    p.ask(format!("GET http://127.0.0.1:{port}/ HTTP/1.1\r\n\r\n").as_bytes());
    p.ask(b"CONNECT github.com:443 HTTP/1.1\r\n\r\n");
    p.ask(b"CONNECT [::1]:99999 HTTP/1.1\r\n\r\n");
    let e = p.entries();
    assert_eq!(e.len(), 3, "{e:?}");
    let (get, gh, bad) = (&e[0], &e[1], &e[2]);
    assert_eq!(
        (get.method.as_deref(), get.host.as_deref(), get.port),
        (Some("GET"), Some("127.0.0.1"), Some(port))
    );
    assert_eq!(
        (get.decision, get.reason.as_deref()),
        (Verdict::Allow, None)
    );
    assert_eq!(get.address, Some("127.0.0.1".parse().unwrap()));
    assert_eq!(
        (gh.method.as_deref(), gh.host.as_deref(), gh.port),
        (Some("CONNECT"), Some("github.com"), Some(443))
    );
    assert_eq!(
        (gh.decision, gh.reason.as_deref(), gh.address),
        (Verdict::Deny, Some("not listed"), None)
    );
    assert_eq!(bad.decision, Verdict::Deny);
    assert!(bad.reason.as_deref().unwrap().contains("not a port"));
    for x in &e {
        assert!(humantime::parse_rfc3339(&x.at).is_ok(), "{}", x.at);
        assert!(x.at.ends_with('Z') && x.at.len() == "2026-01-01T00:00:00.000Z".len());
    }
}

#[test]
fn a_client_on_loopback_reaches_the_origin_through_the_relay() {
    let origin = Origin::http();
    let p = Proxy::start(&["127.0.0.1"]);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let relay_port = listener.local_addr().unwrap().port();
    let stop = listener.try_clone().unwrap();
    let sock = p.sock.clone();
    let relay = std::thread::spawn(move || relay::serve(listener, &sock));

    let mut c = TcpStream::connect(("127.0.0.1", relay_port)).unwrap();
    c.set_read_timeout(Some(DEADLINE)).unwrap();
    write!(
        c,
        "GET http://127.0.0.1:{}/through-relay HTTP/1.1\r\n\r\n",
        origin.port
    )
    .unwrap();
    let mut raw = Vec::new();
    c.read_to_end(&mut raw).unwrap();
    let a = Answer::parse(&raw);
    assert_eq!((a.status, a.body.as_str()), (200, "hello"));
    assert!(origin.seen()[0].starts_with("GET /through-relay HTTP/1.1\r\n"));

    // A refusal comes back through the relay too.
    let mut c = TcpStream::connect(("127.0.0.1", relay_port)).unwrap();
    c.set_read_timeout(Some(DEADLINE)).unwrap();
    c.write_all(b"CONNECT github.com:443 HTTP/1.1\r\n\r\n")
        .unwrap();
    let mut raw = Vec::new();
    c.read_to_end(&mut raw).unwrap();
    assert_eq!(Answer::parse(&raw).status, 403);

    unsafe { libc::shutdown(stop.as_raw_fd(), libc::SHUT_RDWR) };
    relay.join().unwrap().unwrap();
}

#[test]
fn dropping_the_handle_ends_open_tunnels_and_removes_the_socket() {
    let origin = Origin::start(|mut c, _| {
        // Hold the tunnel open until the proxy ends it.
        let mut sink = Vec::new();
        let _ = c.read_to_end(&mut sink);
    });
    let mut p = Proxy::start(&["127.0.0.1"]);
    let mut s = p.connect();
    write!(s, "CONNECT 127.0.0.1:{} HTTP/1.1\r\n\r\n", origin.port).unwrap();
    let mut head = [0u8; 39];
    s.read_exact(&mut head).unwrap();
    assert!(head.starts_with(b"HTTP/1.1 200"));
    assert_eq!(p.handle.as_ref().unwrap().open_connections(), 1);
    p.stop();
    assert!(!p.sock.exists(), "the socket file is removed");
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "the tunnel ends with EOF");
    assert!(UnixStream::connect(&p.sock).is_err());
}

#[test]
fn connections_past_the_bound_get_503_and_places_are_given_back() {
    let mut p = Proxy::start(&["127.0.0.1"]);
    let idle: Vec<UnixStream> = (0..proxy::MAX_CONNECTIONS).map(|_| p.connect()).collect();
    let handle = p.handle.as_ref().unwrap();
    wait_until("every idle connection to be admitted", || {
        (handle.open_connections() == proxy::MAX_CONNECTIONS).then_some(())
    });
    // The answer may come before the request is written: neither side may fail on that.
    let mut s = p.connect();
    let _ = s.write_all(b"CONNECT 127.0.0.1:1 HTTP/1.1\r\n\r\n");
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let a = Answer::parse(&raw);
    assert_eq!(a.status, 503);
    assert!(a.body.contains("connections open"), "{}", a.body);
    // The refusal is a decision like any other: a line of network.jsonl, written before the
    // answer (the request itself was never read, so it names no host).
    let e = p.entries();
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0].decision, Verdict::Deny);
    assert_eq!((e[0].host.as_deref(), e[0].port), (None, None));
    let why = e[0].reason.as_deref().unwrap();
    assert!(
        why.contains("overload") && why.contains("connections open"),
        "{why}"
    );
    drop(idle);
    wait_until("the idle connections to be given back", || {
        (handle.open_connections() == 0).then_some(())
    });
    p.stop();
}

#[test]
fn a_socket_path_past_the_address_limit_works() {
    let origin = Origin::http();
    let dir = tempfile::tempdir().unwrap();
    let deep = dir.path().join("r".repeat(128)).join("attempts").join("1");
    std::fs::create_dir_all(&deep).unwrap();
    let sock = deep.join("proxy.sock");
    let allow = vec![HostPattern::parse("127.0.0.1").unwrap()];
    let handle = proxy::start(
        &sock,
        allow,
        &deep.join("network.jsonl"),
        Default::default(),
    )
    .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let relay_port = listener.local_addr().unwrap().port();
    let stop = listener.try_clone().unwrap();
    let relay = {
        let sock = sock.clone();
        std::thread::spawn(move || relay::serve(listener, &sock))
    };
    let mut c = TcpStream::connect(("127.0.0.1", relay_port)).unwrap();
    c.set_read_timeout(Some(DEADLINE)).unwrap();
    write!(c, "GET http://127.0.0.1:{}/ HTTP/1.1\r\n\r\n", origin.port).unwrap();
    let mut raw = Vec::new();
    c.read_to_end(&mut raw).unwrap();
    assert_eq!(Answer::parse(&raw).status, 200);
    unsafe { libc::shutdown(stop.as_raw_fd(), libc::SHUT_RDWR) };
    relay.join().unwrap().unwrap();
    drop(handle);
    assert!(!sock.exists());
}

#[test]
fn a_client_that_sends_no_request_in_time_is_refused_and_logged() {
    let p = Proxy::start_with(
        &["127.0.0.1"],
        proxy::Timeouts {
            head: std::time::Duration::from_millis(200),
            ..proxy::Timeouts::default()
        },
    );
    // Half a request line, then nothing: the proxy gives up on it after the head timeout.
    let mut s = p.connect();
    s.write_all(b"CONNECT 127.0.0.1:1").unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let a = Answer::parse(&raw);
    assert_eq!(a.status, 408, "{a:?}");
    let e = p.entries();
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0].decision, Verdict::Deny);
    assert_eq!(e[0].method.as_deref(), Some("CONNECT"));
    assert!(
        e[0].reason
            .as_deref()
            .unwrap()
            .contains("no request within"),
        "{e:?}"
    );
}
