//! The relay inside the sandbox's network namespace: TCP on loopback → the egress proxy's
//! Unix socket outside.
//!
//! ```text
//!  the sandbox's init (netns, lo up, Landlock)   relay child (same namespaces and domain)
//!  ──────────────────────────────────────────   ─────────────────────────────────────────
//!  start(port, target, filter):
//!    bind 127.0.0.1:port ─────────── fork ────► PDEATHSIG=SIGKILL, getppid() check
//!    drop its copy of the listener              fds: 0-2 → /dev/null, 3 = listener, no other
//!    return; then forks the program             chdir(target's directory), seccomp (Relay)
//!                                               serve(listener, target's name):
//!             │                                   accept ─► thread (64 KiB stack)
//!          PROGRAM ── HTTP(S)_PROXY=127.0.0.1:port ──►   connect target ─► pipe both ways
//!          exits ─► init exits ─► the kernel kills the rest of the PID namespace, relay too
//! ```
//!
//! The relay knows nothing of HTTP: it moves bytes, and the proxy at the other end decides.
//!
//! Common pitfalls:
//! * Bind before forking: the program may connect the moment it starts, and an error to bind
//!   must reach the helper (to fail closed), not die in a child.
//! * `start` forks: call it while the process has one thread (the helper does, as
//!   `unshare(CLONE_NEWUSER)` already requires).
//! * The child must not keep the helper's descriptors: the program's stdout and stderr (the
//!   worker would wait for them to close) and the report fd 3 (its closing on exec is how the
//!   worker learns the program started).
//! * `PR_SET_PDEATHSIG` fires when init ends; a parent that died before the `prctl` is caught
//!   by comparing `getppid()` with the pid noted before the fork. (Init's end ends the PID
//!   namespace anyway; the signal also covers a relay started outside one, as the tests do.)
//! * The relay's seccomp filter allows threads, Unix sockets and the calls that move bytes:
//!   it is installed after the listener exists and the working directory is set.

mod pipe;
mod socket_path;

pub(crate) use pipe::{PIPE_STACK, pipe};
pub(crate) use socket_path::SocketPath;

use std::io;
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::fd::{FromRawFd, IntoRawFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use seccompiler::BpfProgram;

/// Connections relayed at once; more are closed at once (the proxy has its own bound).
pub const MAX_CONNECTIONS: usize = 256;

/// Starts the relay in a child process of the caller: listens on `127.0.0.1:port` in the
/// caller's (new) network namespace and forwards each connection to the Unix socket
/// `target`. Returns once the listener is bound, so the program can connect at once. The
/// relay dies with the caller's program (parent-death signal).
pub fn start(port: u16, target: &Path, filter: &[BpfProgram]) -> io::Result<()> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, port))?;
    // Owned before the fork, so the child allocates little.
    let target = target.to_path_buf();
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the caller has a single thread (see the pitfalls), so the child may run
    // ordinary Rust code; it never returns into the caller (it ends with _exit).
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => become_relay(listener, &target, parent, filter),
        _child => Ok(()),
    }
}

/// The relay child: detach from everything of the helper's but the listener, then serve.
fn become_relay(
    listener: TcpListener,
    target: &Path,
    parent: libc::pid_t,
    filter: &[BpfProgram],
) -> ! {
    // SAFETY: plain syscalls on values we own; the listener's fd is moved out of Rust's
    // ownership before the descriptor table is rewritten, and re-owned after.
    let listener = unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        );
        if libc::getppid() != parent {
            libc::_exit(0);
        }
        libc::prctl(
            libc::PR_SET_NAME,
            c"subpane-relay".as_ptr() as libc::c_ulong,
            0,
            0,
            0,
        );
        // The helper reset signal dispositions for the program; a peer that vanishes is an
        // error to handle, not a reason for the relay to die.
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        let fd = listener.into_raw_fd();
        if fd != 3 && libc::dup3(fd, 3, libc::O_CLOEXEC) < 0 {
            libc::_exit(1);
        }
        close_from(4);
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        for std in 0..3 {
            if null >= 0 {
                libc::dup2(null, std);
            } else {
                libc::close(std);
            }
        }
        if null > 2 {
            libc::close(null);
        }
        TcpListener::from_raw_fd(3)
    };
    // A target past the 107-byte address limit is reached from its directory: the relay is
    // a process of its own, so its working directory is free to use.
    let target = match (target.parent(), target.file_name()) {
        (Some(dir), Some(name)) if std::env::set_current_dir(dir).is_ok() => Path::new(name),
        _ => target,
    };
    // Its own filter, before it reads a byte of the program's: no program, no process, no
    // socket but the proxy's.
    if crate::sandbox::seccomp::install(filter).is_err() {
        // SAFETY: ends the child at once; the program's connections find no relay.
        unsafe { libc::_exit(1) }
    }
    let code = match serve(listener, target) {
        Ok(()) => 0,
        Err(_) => 1,
    };
    // SAFETY: ends the child without running the helper's destructors or atexit handlers.
    unsafe { libc::_exit(code) }
}

/// Closes every descriptor from `low` up.
///
/// # Safety
/// No Rust object may own a descriptor in that range afterwards.
unsafe fn close_from(low: u32) {
    // SAFETY: close_range only closes descriptors; the caller vouches for ownership.
    let r = unsafe { libc::syscall(libc::SYS_close_range, low, u32::MAX, 0) };
    if r != 0 {
        // Kernels before 5.9: close one by one, up to the limit of open files.
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: lim is a valid rlimit to fill; close on unowned numbers is harmless here.
        unsafe {
            let max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
                lim.rlim_cur.min(1 << 16) as i32
            } else {
                1024
            };
            for fd in low as i32..max {
                libc::close(fd);
            }
        }
    }
}

/// Serves the relay on an already-bound listener: each connection is forwarded to the Unix
/// socket `target` and copied both ways until both sides close. Returns `Ok` when the
/// listener is shut down (`shutdown(2)` on it), or the error that stopped accepting.
pub fn serve(listener: TcpListener, target: &Path) -> io::Result<()> {
    let target = Arc::new(SocketPath::new(target)?);
    let live = Arc::new(AtomicUsize::new(0));
    loop {
        let tcp = match listener.accept() {
            Ok((tcp, _)) => tcp,
            Err(e) => match e.raw_os_error() {
                Some(libc::EINTR | libc::ECONNABORTED) => continue,
                // Out of descriptors or memory: the connection waits in the backlog.
                Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM) => {
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
                // accept on a listener that was shut down.
                Some(libc::EINVAL) => return Ok(()),
                _ => return Err(e),
            },
        };
        if live.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
            live.fetch_sub(1, Ordering::AcqRel);
            continue;
        }
        let (target, done) = (Arc::clone(&target), Arc::clone(&live));
        let spawned = std::thread::Builder::new()
            .name("subpane-relay".into())
            .stack_size(PIPE_STACK)
            .spawn(move || {
                relay_one(tcp, target.usable());
                done.fetch_sub(1, Ordering::AcqRel);
            });
        if spawned.is_err() {
            live.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Forwards one connection; a proxy that cannot be reached closes the client's connection.
fn relay_one(tcp: TcpStream, target: &Path) {
    let Ok(unix) = UnixStream::connect(target) else {
        return;
    };
    // Small writes (a request head, then its body) must not wait for the peer's delayed ACK.
    let _ = tcp.set_nodelay(true);
    let _ = pipe(&tcp, &unix);
}
