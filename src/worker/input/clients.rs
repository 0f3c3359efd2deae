//! The clients of the input socket: accepted (this user's only), their one request line
//! read without blocking the loop, and answered.

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use super::{Input, MAX_CONNS};
use crate::spec::{INPUT_REQUEST_LIMIT, InputAnswer, InputRequest};

/// A client still sending its request.
pub(super) struct Conn {
    pub(super) stream: UnixStream,
    buf: Vec<u8>,
    pub(super) since: Instant,
}

impl Input {
    pub(super) fn accept(&mut self, now: Instant) {
        let Some(l) = &self.listener else { return };
        while self.conns.len() < MAX_CONNS {
            match l.accept() {
                Ok((stream, _)) => {
                    // Only this user says anything to the agent.
                    if !same_user(&stream) || stream.set_nonblocking(true).is_err() {
                        continue;
                    }
                    self.conns.push(Conn {
                        stream,
                        buf: Vec::new(),
                        since: now,
                    });
                }
                Err(_) => return,
            }
        }
    }

    /// Reads what client `n` sent; its request once its line is whole (or an error).
    pub(super) fn read_request(&mut self, n: usize) -> Option<Result<InputRequest, String>> {
        let c = &mut self.conns[n];
        let mut buf = [0u8; 64 * 1024];
        loop {
            match c.stream.read(&mut buf) {
                Ok(0) => return Some(Err("the request ended before its line did".into())),
                Ok(k) => {
                    c.buf.extend_from_slice(&buf[..k]);
                    if let Some(end) = memchr::memchr(b'\n', &c.buf) {
                        return Some(
                            serde_json::from_slice::<InputRequest>(&c.buf[..end])
                                .map_err(|e| format!("the request is not one subpane reads: {e}")),
                        );
                    }
                    if c.buf.len() > INPUT_REQUEST_LIMIT + 1024 {
                        return Some(Err(format!(
                            "the message is over {} KiB",
                            INPUT_REQUEST_LIMIT / 1024
                        )));
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return None,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Some(Err(format!("cannot read the request: {e}"))),
            }
        }
    }
}

/// Whether the peer of `stream` runs as this process's user (SO_PEERCRED).
fn same_user(stream: &UnixStream) -> bool {
    // SAFETY: getsockopt fills a ucred of the size given, on a socket we own.
    unsafe {
        let mut cred: libc::ucred = std::mem::zeroed();
        let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
        let r = libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        );
        r == 0 && cred.uid == libc::geteuid()
    }
}

pub(super) fn refused(error: String) -> InputAnswer {
    InputAnswer {
        error: Some(error),
        refused: true,
        ..InputAnswer::default()
    }
}

/// One answer line; a client that went away misses it.
pub(super) fn answer(stream: &mut UnixStream, a: &InputAnswer) {
    let mut line = serde_json::to_vec(a).unwrap_or_default();
    line.push(b'\n');
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
    let _ = stream.write_all(&line);
}
