//! The egress proxy outside the sandbox (`--network allow:…`): HTTP/1.1 forward proxying
//! and `CONNECT` tunnels, on a Unix socket in the attempt directory, served by threads of the
//! worker.
//!
//! ```text
//!  program ─► relay 127.0.0.1:3128 (netns) ─► <attempt>/proxy.sock
//!                                               │ acceptor thread: poll(listener, wake)
//!                                               ▼ one thread per connection (256 KiB stack)
//!                  head ─► head::request_head (httparse + the proxy's own checks; 400)
//!                       ─► request::parse_request (target, host, framing; 400)
//!                       ─► decide::decide(host, port, allow, resolve once) ─► network.jsonl
//!  more than MAX_CONNECTIONS open ─► 503 (logged too); no head within 30 s ─► 408 (logged)
//!                       ─► 403 naming host and policy │ 502 │ connect to a checked address
//!                       ─► CONNECT: relay::pipe both ways │ other methods: forward::forward
//!  ProxyHandle dropped ─► shut every open socket, wake and join the acceptor, wait for the
//!                         connection threads (≤ 2 s), close the log, unlink the socket
//! ```
//!
//! Memory: the worker must stay small, so there is no thread while idle besides the
//! acceptor, at most [`MAX_CONNECTIONS`] connections (more get a 503), and a connection
//! holds a few KiB of buffers (its head buffer, up to 32 KiB, only while reading the head).
//! A thread's stack is reserved, not resident: only the pages it touches count.
//!
//! Common pitfalls:
//! * `getaddrinfo` runs on the connection threads and NSS modules use the stack freely: 64
//!   KiB is not enough for every resolver, hence 256 KiB (reserved; a few pages touched).
//! * A thread blocked in `accept` cannot be woken by dropping the listener: the acceptor
//!   polls the listener and a wake-up socket instead.
//! * Stopping must end the connection threads too, or an open tunnel would keep reading
//!   after the attempt ended: every open socket is registered and shut down on drop.
//! * A Unix socket path is limited to 107 bytes and attempt directories can be longer: the
//!   socket is bound through its directory (`relay::SocketPath`).

mod connection;
pub mod decide;
mod forward;
mod head;
#[cfg(test)]
mod hostile;
pub mod log;
pub mod request;

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use self::log::DecisionLog;
use crate::sandbox::relay::SocketPath;
use crate::spec::HostPattern;

pub use self::log::{NetworkEntry, Verdict};

/// Connections served at once; more are answered 503 at once.
pub const MAX_CONNECTIONS: usize = 64;

/// Stack of a connection thread (see the pitfalls).
const CONNECTION_STACK: usize = 256 * 1024;
/// Stack of the acceptor: it polls, accepts and spawns.
const ACCEPTOR_STACK: usize = 64 * 1024;
/// How long dropping the handle waits for connection threads to end. Shut-down sockets end
/// them at once; only a name lookup or a connect in progress can take longer.
const STOP_WAIT: Duration = Duration::from_secs(2);

/// How long the proxy waits on each side of a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// For a client to send its request head.
    pub head: Duration,
    /// For one address of an allowed host to accept a connection.
    pub connect: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            head: Duration::from_secs(30),
            connect: Duration::from_secs(10),
        }
    }
}

/// A running proxy; dropping it stops accepting, shuts down open connections, waits for
/// their threads (up to 2 s), closes the log and removes its socket.
#[derive(Debug)]
pub struct ProxyHandle {
    socket: PathBuf,
    shared: Arc<Shared>,
    /// Closing it wakes the acceptor.
    wake: Option<UnixStream>,
    acceptor: Option<JoinHandle<()>>,
}

impl ProxyHandle {
    /// How many decisions could not be written to the log.
    pub fn log_failures(&self) -> u64 {
        self.shared.log.failures()
    }

    /// How many connections are open now.
    pub fn open_connections(&self) -> usize {
        self.shared.conns().live
    }
}

/// Starts the proxy on the Unix socket `socket` (threads of the calling process). It lets
/// through only hosts that `allow` matches and appends every decision to `log`
/// (`network.jsonl`).
pub fn start(
    socket: &Path,
    allow: Vec<HostPattern>,
    log: &Path,
    masker: Arc<crate::secrets::Masker>,
) -> io::Result<ProxyHandle> {
    start_with(socket, allow, log, masker, Timeouts::default())
}

/// [`start`] with other [`Timeouts`] than the defaults.
pub fn start_with(
    socket: &Path,
    allow: Vec<HostPattern>,
    log: &Path,
    masker: Arc<crate::secrets::Masker>,
    timeouts: Timeouts,
) -> io::Result<ProxyHandle> {
    let log = DecisionLog::open(log, masker)?;
    let listener = UnixListener::bind(SocketPath::new(socket)?.usable())?;
    // From here on the socket file is ours to remove, also when starting fails.
    let unlink = Unlink(socket);
    // Only this user: another local user must not borrow the sandbox's way out.
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))?;
    listener.set_nonblocking(true)?;
    let (wake, woken) = UnixStream::pair()?;
    let shared = Arc::new(Shared {
        allow,
        log,
        timeouts,
        conns: Mutex::new(Conns::default()),
        ended: Condvar::new(),
    });
    let for_acceptor = Arc::clone(&shared);
    let acceptor = std::thread::Builder::new()
        .name("subpane-proxy".into())
        .stack_size(ACCEPTOR_STACK)
        .spawn(move || accept_loop(listener, woken, for_acceptor))?;
    std::mem::forget(unlink);
    Ok(ProxyHandle {
        socket: socket.to_path_buf(),
        shared,
        wake: Some(wake),
        acceptor: Some(acceptor),
    })
}

impl Drop for ProxyHandle {
    fn drop(&mut self) {
        self.shared.stop();
        drop(self.wake.take());
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
        self.shared.wait_idle(Instant::now() + STOP_WAIT);
        self.shared.log.close();
        drop(Unlink(&self.socket));
    }
}

/// Removes a socket file when dropped.
struct Unlink<'a>(&'a Path);

impl Drop for Unlink<'_> {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.0);
    }
}

/// What the acceptor and the connection threads share.
#[derive(Debug)]
struct Shared {
    allow: Vec<HostPattern>,
    log: DecisionLog,
    timeouts: Timeouts,
    conns: Mutex<Conns>,
    /// Notified whenever a connection ends.
    ended: Condvar,
}

/// The open connections, and a copy of each of their sockets to shut down on stop.
#[derive(Debug, Default)]
struct Conns {
    next_id: u64,
    live: usize,
    sockets: Vec<(u64, Socket)>,
    stopping: bool,
}

#[derive(Debug)]
enum Socket {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Socket {
    fn shut(&self) {
        let _ = match self {
            Socket::Unix(s) => s.shutdown(Shutdown::Both),
            Socket::Tcp(s) => s.shutdown(Shutdown::Both),
        };
    }
}

impl Shared {
    fn conns(&self) -> MutexGuard<'_, Conns> {
        // A panic while holding this lock cannot leave it inconsistent (plain pushes and
        // removals), so a poisoned lock is used as it is.
        self.conns.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Admits one more connection, unless the proxy is full or stopping.
    fn admit(self: &Arc<Self>) -> Option<Admitted> {
        let mut c = self.conns();
        if c.stopping || c.live >= MAX_CONNECTIONS {
            return None;
        }
        c.live += 1;
        c.next_id += 1;
        Some(Admitted {
            shared: Arc::clone(self),
            id: c.next_id,
        })
    }

    fn stop(&self) {
        let mut c = self.conns();
        c.stopping = true;
        for (_, s) in &c.sockets {
            s.shut();
        }
    }

    /// Waits until no connection is open, or `deadline`.
    fn wait_idle(&self, deadline: Instant) {
        let mut c = self.conns();
        while c.live > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            c = match self.ended.wait_timeout(c, left) {
                Ok((c, _)) => c,
                Err(p) => p.into_inner().0,
            };
        }
    }
}

/// A connection counted against [`MAX_CONNECTIONS`]; dropping it frees its place.
struct Admitted {
    shared: Arc<Shared>,
    id: u64,
}

trait Track {
    fn copy(&self) -> io::Result<Socket>;
}
impl Track for UnixStream {
    fn copy(&self) -> io::Result<Socket> {
        self.try_clone().map(Socket::Unix)
    }
}
impl Track for TcpStream {
    fn copy(&self) -> io::Result<Socket> {
        self.try_clone().map(Socket::Tcp)
    }
}

impl Admitted {
    /// Registers a socket to shut down when the proxy stops. `false` when it is stopping
    /// already (or the socket cannot be copied): the caller ends the connection.
    fn track(&self, socket: &impl Track) -> bool {
        let Ok(copy) = socket.copy() else {
            return false;
        };
        let mut c = self.shared.conns();
        if c.stopping {
            return false;
        }
        c.sockets.push((self.id, copy));
        true
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut c = self.shared.conns();
        c.live -= 1;
        c.sockets.retain(|(id, _)| *id != self.id);
        self.shared.ended.notify_all();
    }
}

/// Accepts until woken (the wake socket is closed), a connection thread each.
fn accept_loop(listener: UnixListener, woken: UnixStream, shared: Arc<Shared>) {
    loop {
        let mut fds = [
            PollFd::new(listener.as_fd(), PollFlags::POLLIN),
            PollFd::new(woken.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, PollTimeout::NONE) {
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return,
            Ok(_) => {}
        }
        if fds[1].any().unwrap_or(true) {
            return;
        }
        loop {
            match listener.accept() {
                Ok((client, _)) => dispatch(client, &shared),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => match e.raw_os_error() {
                    Some(libc::EINTR | libc::ECONNABORTED) => continue,
                    // Out of descriptors: the client waits in the backlog; poll would only
                    // report it again at once.
                    _ => {
                        std::thread::sleep(Duration::from_millis(50));
                        break;
                    }
                },
            }
        }
    }
}

/// Hands one accepted client to a thread of its own, or answers 503.
fn dispatch(client: UnixStream, shared: &Arc<Shared>) {
    // The listener is non-blocking for the acceptor's sake; the connection blocks.
    if client.set_nonblocking(false).is_err() {
        return;
    }
    let Some(admitted) = shared.admit() else {
        return too_busy(client, shared);
    };
    if !admitted.track(&client) {
        return;
    }
    let _ = std::thread::Builder::new()
        .name("subpane-proxy-conn".into())
        .stack_size(CONNECTION_STACK)
        .spawn(move || connection::serve(client, &admitted));
}

/// Logs the refusal and answers 503 on the acceptor's thread, without ever blocking it. The
/// request is not read, so the line names no host.
fn too_busy(client: UnixStream, shared: &Shared) {
    shared.log.append(&NetworkEntry {
        at: crate::fresh::now_rfc3339(),
        method: None,
        host: None,
        port: None,
        decision: Verdict::Deny,
        reason: Some(format!(
            "overload: {MAX_CONNECTIONS} connections open, refused with 503"
        )),
        address: None,
    });
    if client.set_nonblocking(true).is_err() {
        return;
    }
    let text = format!(
        "subpane: the sandbox's network proxy has {MAX_CONNECTIONS} connections open; retry later\n"
    );
    let msg = format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{text}",
        text.len()
    );
    // A short answer fits in the empty socket buffer.
    let _ = (&client).write_all(msg.as_bytes());
    let _ = client.shutdown(Shutdown::Write);
    // Closing with the request unread would make the client see a reset instead of the
    // answer: read what has arrived (without waiting for more).
    let mut sink = [0u8; 4096];
    for _ in 0..16 {
        match (&client).read(&mut sink) {
            Ok(n) if n > 0 => {}
            _ => break,
        }
    }
}
