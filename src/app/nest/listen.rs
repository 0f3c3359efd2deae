//! The server of a sandboxed attempt's nested runs (`subpane __nest --listen-fd N DIR`, started
//! by the attempt's worker): one thread a client, each a request → plan → run.
//!
//! ```text
//!  main thread: poll(listening socket, signalfd)
//!    accept ─► over 64 clients, or 8 still sending: refused ─► else a thread:
//!      peer's uid = ours ─► one line ≤ 4 MiB within 10 s ─► NestRequest
//!      ─► admit, plan_child, bind (admit.rs: what may come from a sandbox, the plan, the
//!         parent's attempt and a grant of its limits, budget.rs)
//!      ─► app::run (started ─► reply; a waited run: the client's lines ─► interrupts,
//!         its end ─► one interrupt, a cancel) ─► Detached | Finished | Refused
//!      ─► the grant back when the run has ended (a detached one: watched to its end on a
//!         thread of its own)
//!    SIGTERM (the attempt ends) ─► stop accepting, interrupt every wait (cancel), wait for
//!      the clients' threads up to 3 s ─► exit (detached runs end with the parent's worker:
//!      `worker::within`)
//! ```
//!
//! Common pitfalls:
//! * Nothing a client sent is trusted: see the module docs of [`super`].
//! * A wait is registered before its run starts, so an ending attempt either refuses the
//!   request or cancels the run: never a waited run left behind without its client.
//! * The read timeout of the request must be lifted before the client's later lines are
//!   read: a run may wait for hours.
//! * A grant is given back when its run has ended, never when its client goes: a detached
//!   run holds its grant until its envelope exists.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};

use super::admit::{Held, Parent, admit, bind, plan_child};
use super::{ClientLine, NestError, NestRequest, REQUEST_LIMIT, Reply};
use crate::app::{
    EndSize, Error, Interrupter, OnInterrupt, RunOptions, RunOutcome, Started, WaitLoop, WaitMode,
    ends, run, wait_with,
};
use crate::spec::AttemptSpec;
use crate::store::AttemptPaths;

/// Clients served at once (each waited run holds one).
const MAX_CLIENTS: usize = 64;
/// Clients still sending their request at once: the bound on memory held for requests.
const MAX_SENDING: usize = 8;
/// How long a client may take to send its request.
const REQUEST_WAIT: Duration = Duration::from_secs(10);
/// How long an ending server waits for its clients' threads (their cancels take
/// milliseconds; the runs then stop on their own).
const END_WAIT: Duration = Duration::from_secs(3);
/// How long an answer may wait for the client to read it.
const REPLY_WAIT: Duration = Duration::from_secs(30);
/// The longest line a client sends after its request.
const LINE_LIMIT: u64 = 64;

/// Serves the request socket `listen_fd` of the attempt in `dir` until SIGTERM. Returns the
/// exit code.
pub fn serve(dir: &Path, listen_fd: RawFd) -> i32 {
    let mut mask = SigSet::empty();
    for s in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        mask.add(s);
    }
    if mask.thread_block().is_err() {
        return 1;
    }
    let Ok(sfd) = SignalFd::with_flags(&mask, SfdFlags::SFD_CLOEXEC) else {
        return 1;
    };
    let listener = match listener(listen_fd) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("subpane nest: {e}");
            return 1;
        }
    };
    let parent = match Parent::load(dir) {
        Ok(p) => Arc::new(p),
        Err(e) => {
            eprintln!("subpane nest: {e}");
            return 1;
        }
    };
    let live = Arc::new(Live::default());
    loop {
        let mut fds = [
            PollFd::new(listener.as_fd(), PollFlags::POLLIN),
            PollFd::new(sfd.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(_) => break,
        }
        if fds[1].revents().is_some_and(|r| !r.is_empty()) {
            break;
        }
        if let Ok((conn, _)) = listener.accept() {
            accept(conn, &parent, &live);
        }
    }
    drop(listener);
    live.end();
    0
}

/// The inherited listening socket.
fn listener(fd: RawFd) -> Result<UnixListener, String> {
    if fd < 3 {
        return Err(format!("--listen-fd {fd} is not an inherited socket"));
    }
    // SAFETY: the worker passed this fd to us for this purpose; we own it from here on.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let l = UnixListener::from(owned);
    l.set_nonblocking(true)
        .map_err(|e| format!("--listen-fd {fd} is not a socket: {e}"))?;
    // SAFETY: fcntl on an fd we own, integer argument.
    unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    Ok(l)
}

/// The clients being served, and the waits an ending server interrupts.
#[derive(Default)]
struct Live {
    state: Mutex<LiveState>,
    changed: Condvar,
}

#[derive(Default)]
struct LiveState {
    clients: usize,
    sending: usize,
    ending: bool,
    next: u64,
    waits: HashMap<u64, Interrupter>,
}

impl Live {
    fn lock(&self) -> std::sync::MutexGuard<'_, LiveState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Holds a wait's interrupter until its run ends; refused once the server ends.
    fn hold(&self, i: Interrupter) -> Result<u64, Error> {
        let mut s = self.lock();
        if s.ending {
            return Err(NestError::Ending.into());
        }
        s.next += 1;
        let id = s.next;
        s.waits.insert(id, i);
        Ok(id)
    }

    fn release(&self, id: u64) {
        self.lock().waits.remove(&id);
    }

    /// Interrupts every wait and waits for the clients' threads, up to [`END_WAIT`].
    fn end(&self) {
        let mut s = self.lock();
        s.ending = true;
        for i in s.waits.values() {
            i.interrupt();
        }
        let _ = self
            .changed
            .wait_timeout_while(s, END_WAIT, |s| s.clients > 0);
    }
}

/// A client's place among the live ones, given back when its thread ends (a panic too).
struct Seat(Arc<Live>);

impl Drop for Seat {
    fn drop(&mut self) {
        self.0.lock().clients -= 1;
        self.0.changed.notify_all();
    }
}

fn accept(conn: UnixStream, parent: &Arc<Parent>, live: &Arc<Live>) {
    let _ = conn.set_nonblocking(false);
    // A client that does not read its answer holds only its own thread, and not for long.
    let _ = conn.set_write_timeout(Some(REPLY_WAIT));
    {
        let mut s = live.lock();
        if s.clients >= MAX_CLIENTS || s.sending >= MAX_SENDING {
            drop(s);
            let e = Error::from(NestError::Busy {
                clients: MAX_CLIENTS,
                sending: MAX_SENDING,
            });
            send(&conn, &Reply::refused(&e));
            return;
        }
        s.clients += 1;
        s.sending += 1;
    }
    let seat = Seat(live.clone());
    let parent = parent.clone();
    let spawned = std::thread::Builder::new()
        .name("nest-client".into())
        .spawn(move || {
            let live = seat.0.clone();
            client(conn, &parent, &live);
            drop(seat);
        });
    if spawned.is_err() {
        // The closure, with the seat, was dropped.
        live.lock().sending -= 1;
    }
}

/// Serves one client to the end.
fn client(conn: UnixStream, parent: &Arc<Parent>, live: &Arc<Live>) {
    let request = read_request(&conn);
    live.lock().sending -= 1;
    let (mut reader, req) = match request {
        Ok(r) => r,
        Err(e) => return send(&conn, &Reply::refused(&e)),
    };
    let planned = admit(&req, &parent.spec).and_then(|r| {
        let mut plan = plan_child(&r, &req, parent)?;
        let held = bind(&mut plan, &r, parent)?;
        Ok((plan, held))
    });
    let (plan, held) = match planned {
        Ok(p) => p,
        Err(e) => return send(&conn, &Reply::refused(&e)),
    };
    let mut wl = match WaitLoop::new() {
        Ok(wl) => wl,
        Err(e) => return send(&conn, &Reply::refused(&e)),
    };
    let waiting = match live.hold(wl.interrupter()) {
        Ok(id) => id,
        Err(e) => return send(&conn, &Reply::refused(&e)),
    };
    let watcher = (!req.detach).then(|| {
        let stop = wl.interrupter();
        let _ = reader.get_ref().set_read_timeout(None);
        std::thread::Builder::new()
            .name("nest-watch".into())
            .spawn(move || watch(&mut reader, &stop))
    });
    let mut begun = None;
    let mut on_started = |s: &Started| {
        begun = Some((s.paths.clone(), s.spec.clone()));
        send(
            &conn,
            &Reply::Started {
                answer: s.answer(),
                warnings: s.warnings.clone(),
                spawn_error: s.spawn_failed.as_ref().map(|e| e.output.errors.join("; ")),
            },
        )
    };
    let outcome = run(
        &parent.home,
        plan,
        &mut wl,
        RunOptions {
            detach: req.detach,
            on_interrupt: OnInterrupt::CancelAndWait,
            heartbeat: None,
            on_started: Some(&mut on_started),
            on_progress: None,
            max_wait: None,
            cancel_by: None,
        },
    );
    live.release(waiting);
    // The grant goes back once the run has ended, before the answer (the parent's program
    // may look at its limits as soon as it has it); a run that goes on keeps it to its end.
    let reply = match outcome {
        Ok(RunOutcome::Detached(s)) => {
            until_end(held, (s.paths, s.spec), live);
            Reply::Detached
        }
        Ok(RunOutcome::Finished { started, envelope }) => {
            drop(held);
            let ends = ends(&envelope, &started.paths, EndSize::TERMINAL);
            Reply::Finished {
                stdout_end: ends.stdout,
                stderr_end: ends.stderr,
                envelope,
            }
        }
        Ok(RunOutcome::Cancelled(s) | RunOutcome::StillRunning(s)) => {
            let id = s.spec.run_id.to_string();
            until_end(held, (s.paths, s.spec), live);
            Reply::refused(&NestError::StoppedWaiting(id).into())
        }
        Err(e) => {
            match begun {
                Some(attempt) => until_end(held, attempt, live),
                None => drop(held),
            }
            Reply::refused(&e)
        }
    };
    send(&conn, &reply);
    // The watcher reads until the connection ends.
    let _ = conn.shutdown(std::net::Shutdown::Both);
    if let Some(Ok(t)) = watcher {
        let _ = t.join();
    }
}

/// Holds the grant of a run that goes on without its client (detached, or no longer waited
/// for) until that run has ended, on a thread of its own. An ending server interrupts the
/// wait: the grant then stays taken (the parent is ending, and the run with it).
fn until_end(held: Held, attempt: (AttemptPaths, AttemptSpec), live: &Arc<Live>) {
    let live = live.clone();
    // Handed over once the thread runs: a thread that cannot start must not drop it (that
    // would give the grant back early).
    let (give, take) = std::sync::mpsc::channel::<Held>();
    let spawned = std::thread::Builder::new()
        .name("nest-tenure".into())
        .spawn(move || {
            let Ok(held) = take.recv() else { return };
            let Ok(mut wl) = WaitLoop::new() else {
                return held.keep();
            };
            let Ok(waiting) = live.hold(wl.interrupter()) else {
                return held.keep();
            };
            let ended = wait_with(&mut wl, &[attempt], WaitMode::All, None, Default::default())
                .is_ok_and(|r| r.results.first().is_some_and(Option::is_some));
            live.release(waiting);
            if !ended {
                held.keep();
            }
        });
    match spawned {
        Ok(_) => {
            if let Err(back) = give.send(held) {
                back.0.keep();
            }
        }
        Err(_) => held.keep(),
    }
}

/// One request line, bounded in size and time.
fn read_request(conn: &UnixStream) -> Result<(BufReader<UnixStream>, NestRequest), Error> {
    if !same_user(conn) {
        return Err(Error::invalid(
            "the client is not the attempt's user: nothing was started",
        ));
    }
    let clone = conn.try_clone().map_err(|source| NestError::Io {
        what: "cannot read the request",
        source,
    })?;
    let mut reader = BufReader::new(clone);
    let line = read_line_within(&mut reader, REQUEST_LIMIT, REQUEST_WAIT)?;
    let req: NestRequest = serde_json::from_slice(&line)
        .map_err(|e| Error::invalid(format!("the request is not a run request: {e}")))?;
    Ok((reader, req))
}

/// One line of at most `limit` bytes, all of it within `within` (a deadline for the whole
/// line: a client sending a byte at a time gets no longer).
fn read_line_within(
    reader: &mut BufReader<UnixStream>,
    limit: usize,
    within: Duration,
) -> Result<Vec<u8>, Error> {
    let end = Instant::now() + within;
    let late = || {
        Error::invalid(format!(
            "the request did not arrive within {}s",
            within.as_secs()
        ))
    };
    let mut line = Vec::new();
    loop {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(late());
        }
        let _ = reader.get_ref().set_read_timeout(Some(left));
        let buf = match reader.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(late());
            }
            Err(e) => return Err(Error::invalid(format!("cannot read the request: {e}"))),
        };
        let (taken, done) = match memchr::memchr(b'\n', buf) {
            Some(i) => (i + 1, true),
            None => (buf.len(), buf.is_empty()),
        };
        line.extend_from_slice(&buf[..taken]);
        reader.consume(taken);
        if line.len() > limit {
            return Err(Error::invalid(format!(
                "the request is larger than {} MiB, the most a run from a sandbox may send (its task and variables included)",
                limit >> 20
            )));
        }
        if done {
            return Ok(line);
        }
    }
}

/// Whether the peer runs as our user (the only one who may ask: the home is ours).
fn same_user(conn: &UnixStream) -> bool {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred {
        pid: 0,
        uid: u32::MAX,
        gid: u32::MAX,
    };
    let size = std::mem::size_of::<libc::ucred>();
    let mut len = size as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `cred`, which outlives the call.
    let rc = unsafe {
        libc::getsockopt(
            conn.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&raw mut cred).cast(),
            &mut len,
        )
    };
    // SAFETY: geteuid has no preconditions.
    rc == 0 && len as usize == size && cred.uid == unsafe { libc::geteuid() }
}

/// The client's lines after its request: interrupts; its end (or anything else) gives up the
/// run, with one more interrupt.
fn watch(reader: &mut BufReader<UnixStream>, stop: &Interrupter) {
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = reader.take(LINE_LIMIT).read_until(b'\n', &mut line);
        let interrupt = n.is_ok_and(|n| n > 0)
            && serde_json::from_slice::<ClientLine>(&line)
                .is_ok_and(|l| l == ClientLine::Interrupt);
        stop.interrupt();
        if !interrupt {
            return;
        }
    }
}

fn send(conn: &UnixStream, reply: &Reply) {
    if let Ok(mut line) = serde_json::to_vec(reply) {
        line.push(b'\n');
        // A client that is gone is the watcher's business.
        let _ = (&*conn).write_all(&line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (UnixStream, BufReader<UnixStream>) {
        let (a, b) = UnixStream::pair().unwrap();
        (a, BufReader::new(b))
    }

    #[test]
    fn a_request_line_is_bounded_in_size_and_in_time() {
        let (mut w, mut r) = pair();
        assert!(same_user(&w), "a peer of our own is our user");
        w.write_all(b"{\"a\":1}\n\"interrupt\"\n").unwrap();
        let line = read_line_within(&mut r, 64, Duration::from_secs(5)).unwrap();
        assert_eq!(line, b"{\"a\":1}\n");
        // What follows stays for the watcher.
        let mut rest = String::new();
        r.read_line(&mut rest).unwrap();
        assert_eq!(rest, "\"interrupt\"\n");

        let (mut w, mut r) = pair();
        let writer = std::thread::spawn(move || {
            let _ = w.write_all(&[b'x'; 4096]);
        });
        let e = read_line_within(&mut r, 1000, Duration::from_secs(5)).unwrap_err();
        assert!(e.to_string().contains("larger than"), "{e}");
        drop(r);
        writer.join().unwrap();

        // A byte at a time gets no more than the whole deadline.
        let (w, mut r) = pair();
        let start = Instant::now();
        let writer = std::thread::spawn(move || {
            for _ in 0..40 {
                if (&w).write_all(b"x").is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        let e = read_line_within(&mut r, 1000, Duration::from_millis(200)).unwrap_err();
        assert!(e.to_string().contains("did not arrive"), "{e}");
        assert!(start.elapsed() < Duration::from_millis(700));
        drop(r);
        writer.join().unwrap();
    }
}
