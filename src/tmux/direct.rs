//! A command for a running tmux server without a tmux client process: the client's side of
//! tmux's own protocol, spoken on the server's socket.
//!
//! ```text
//!  connect ─► identify: flags, TERM, cwd, pid, environment, done   (no terminal, no fds)
//!          ─► the command: argc, then its arguments, one message (≤ 16 KiB)
//!          ◄─ its output: WRITE_OPEN ─► WRITE_READY; WRITE …; WRITE_CLOSE   (stdout, stderr)
//!          ◄─ EXIT: its status
//!  ◄─ VERSION: the server speaks another protocol and ran nothing ─► Answer::Unsupported
//! ```
//!
//! Why: a `tmux` client is an exec, six shared libraries and a start of its own before it
//! connects, about 2 ms here on the way from `run` to the program's start, more than the
//! server needs to make the pane. The protocol is tmux's (version 8, tmux 3.2 to 3.5): a
//! server of another version answers VERSION to the first message and runs nothing, and the
//! caller asks the `tmux` binary instead.
//!
//! Common pitfalls:
//! * Every message carries the protocol version in its peer id; the server checks each one.
//! * Without a terminal the client sends no descriptors: the server makes no tty of it (it
//!   would not make one of `/dev/null` either), and its output comes back as messages.
//! * A connection lost after the command was sent does not mean nothing ran: it is
//!   [`Error::Lost`], which the caller reports as tmux does ("lost server") and looks for
//!   the session before it tries again.
//! * A hung server still accepts connections (the kernel does): the answer is waited for
//!   until the deadline only.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Instant;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

/// tmux's `PROTOCOL_VERSION`.
const PROTOCOL_VERSION: u32 = 8;
/// tmux's `MAX_IMSGSIZE`: a message and its 16-byte header.
const MAX_MESSAGE: usize = 16384;
const HEADER: usize = 16;

// tmux's `enum msgtype` (tmux-protocol.h), the ones spoken here.
const MSG_VERSION: u32 = 12;
const MSG_IDENTIFY_FLAGS: u32 = 100;
const MSG_IDENTIFY_TERM: u32 = 101;
const MSG_IDENTIFY_TTYNAME: u32 = 102;
const MSG_IDENTIFY_ENVIRON: u32 = 105;
const MSG_IDENTIFY_DONE: u32 = 106;
const MSG_IDENTIFY_CLIENTPID: u32 = 107;
const MSG_IDENTIFY_CWD: u32 = 108;
const MSG_IDENTIFY_FEATURES: u32 = 109;
const MSG_IDENTIFY_LONGFLAGS: u32 = 111;
const MSG_COMMAND: u32 = 200;
const MSG_EXIT: u32 = 203;
const MSG_SHUTDOWN: u32 = 210;
const MSG_WRITE_OPEN: u32 = 303;
const MSG_WRITE: u32 = 304;
const MSG_WRITE_READY: u32 = 305;

/// What the server said.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    /// The command ran: its exit status and what it printed.
    Ran {
        status: i32,
        stdout: Vec<u8>,
        stderr: Vec<u8>,
    },
    /// Nothing ran: the server speaks another protocol, or the command does not fit one
    /// message. The `tmux` binary can be asked.
    Unsupported,
}

/// Why there is no answer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No server took the connection: nothing ran.
    #[error("cannot connect to the tmux server: {0}")]
    Connect(std::io::Error),
    /// The connection ended (or failed) after the command was sent: it may have run.
    #[error("lost server")]
    Lost,
    /// The deadline passed first: the command may have run.
    #[error("no answer in time")]
    TimedOut,
}

/// Runs the tmux command `args` on the server at `socket`, as a client whose environment is
/// `env`, waiting for its answer until `deadline`.
pub fn run(
    socket: &Path,
    args: &[OsString],
    env: &[(OsString, OsString)],
    deadline: Option<Instant>,
) -> Result<Answer, Error> {
    let Some(command) = command_message(args) else {
        return Ok(Answer::Unsupported);
    };
    let mut conn = UnixStream::connect(socket).map_err(Error::Connect)?;
    conn.set_nonblocking(true).map_err(|_| Error::Lost)?;
    let mut out = identify(env);
    out.extend_from_slice(&command);
    send(&mut conn, &out, deadline)?;
    let mut answer = Reader::default();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        wait(&conn, PollFlags::POLLIN, deadline)?;
        let n = match conn.read(&mut buf) {
            Ok(0) => return Err(Error::Lost),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return Err(Error::Lost),
        };
        answer.pending.extend_from_slice(&buf[..n]);
        while let Some(step) = answer.next_message() {
            match step {
                Step::Reply(reply) => send(&mut conn, &reply, deadline)?,
                Step::Done(a) => return Ok(a),
                Step::Lost => return Err(Error::Lost),
            }
        }
    }
}

/// One message: the header (type, length, flags, peer id, pid), then `data`.
fn message(kind: u32, data: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(HEADER + data.len());
    m.extend_from_slice(&kind.to_ne_bytes());
    m.extend_from_slice(&((HEADER + data.len()) as u16).to_ne_bytes());
    m.extend_from_slice(&0u16.to_ne_bytes());
    m.extend_from_slice(&PROTOCOL_VERSION.to_ne_bytes());
    m.extend_from_slice(&std::process::id().to_ne_bytes());
    m.extend_from_slice(data);
    m
}

/// A NUL-terminated string as tmux reads one.
fn c_string(s: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(s.len() + 1);
    v.extend_from_slice(s);
    v.push(0);
    v
}

/// The identify messages of a client with no terminal (what `tmux` sends from a pipe, less
/// the descriptors of `/dev/null`, of which the server makes nothing).
fn identify(env: &[(OsString, OsString)]) -> Vec<u8> {
    let term = env
        .iter()
        .find(|(k, _)| k == "TERM")
        .map(|(_, v)| v.as_bytes().to_vec())
        .unwrap_or_default();
    // As the `tmux` binary is run (`Tmux::command`): from the panes' own directory.
    let cwd = super::PANE_DIR.as_bytes();
    let mut out = Vec::with_capacity(4096);
    out.extend(message(MSG_IDENTIFY_LONGFLAGS, &0u64.to_ne_bytes()));
    out.extend(message(MSG_IDENTIFY_FLAGS, &0i32.to_ne_bytes()));
    out.extend(message(MSG_IDENTIFY_TERM, &c_string(&term)));
    out.extend(message(MSG_IDENTIFY_FEATURES, &0i32.to_ne_bytes()));
    out.extend(message(MSG_IDENTIFY_TTYNAME, &c_string(b"")));
    out.extend(message(MSG_IDENTIFY_CWD, &c_string(cwd)));
    out.extend(message(
        MSG_IDENTIFY_CLIENTPID,
        &(std::process::id() as i32).to_ne_bytes(),
    ));
    for (k, v) in env {
        let mut kv = k.as_bytes().to_vec();
        kv.push(b'=');
        kv.extend_from_slice(v.as_bytes());
        // tmux's own client skips what does not fit a message, too.
        if HEADER + kv.len() < MAX_MESSAGE && !kv.contains(&0) {
            out.extend(message(MSG_IDENTIFY_ENVIRON, &c_string(&kv)));
        }
    }
    out.extend(message(MSG_IDENTIFY_DONE, &[]));
    out
}

/// The command message (`argc`, then each argument NUL-terminated), or `None` when it does
/// not fit one message (`tmux` itself says "command too long" then).
fn command_message(args: &[OsString]) -> Option<Vec<u8>> {
    let mut data = (args.len() as i32).to_ne_bytes().to_vec();
    for a in args {
        if a.as_bytes().contains(&0) {
            return None;
        }
        data.extend(c_string(a.as_bytes()));
    }
    (HEADER + data.len() <= MAX_MESSAGE).then(|| message(MSG_COMMAND, &data))
}

/// Writes all of `bytes` by the deadline.
fn send(conn: &mut UnixStream, mut bytes: &[u8], deadline: Option<Instant>) -> Result<(), Error> {
    while !bytes.is_empty() {
        match conn.write(bytes) {
            Ok(0) => return Err(Error::Lost),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                wait(conn, PollFlags::POLLOUT, deadline)?
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return Err(Error::Lost),
        }
    }
    Ok(())
}

/// Waits until `conn` is ready for `what`, or the deadline has passed.
fn wait(conn: &UnixStream, what: PollFlags, deadline: Option<Instant>) -> Result<(), Error> {
    loop {
        let timeout = match deadline {
            None => PollTimeout::NONE,
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(Error::TimedOut);
                }
                // Rounded up: a wake-up a hair early would only poll again.
                let ms = left.as_millis().saturating_add(1).min(i32::MAX as u128) as i32;
                PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX)
            }
        };
        let mut fds = [PollFd::new(conn.as_fd(), what)];
        match poll(&mut fds, timeout) {
            Ok(0) | Err(nix::errno::Errno::EINTR) => continue,
            Ok(_) => return Ok(()),
            Err(_) => return Err(Error::Lost),
        }
    }
}

/// The server's messages as they come.
#[derive(Default)]
struct Reader {
    pending: Vec<u8>,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

/// What one message of the server asks for.
enum Step {
    /// Send this back (the client's side of opening an output stream).
    Reply(Vec<u8>),
    Done(Answer),
    Lost,
}

impl Reader {
    /// The next whole message's step; `None` when it has not all come yet. Messages this
    /// client has no part in are skipped.
    fn next_message(&mut self) -> Option<Step> {
        loop {
            if self.pending.len() < HEADER {
                return None;
            }
            let kind = u32::from_ne_bytes(self.pending[0..4].try_into().ok()?);
            let len = u16::from_ne_bytes(self.pending[4..6].try_into().ok()?) as usize;
            if len < HEADER {
                return Some(Step::Lost);
            }
            if self.pending.len() < len {
                return None;
            }
            let data: Vec<u8> = self.pending[HEADER..len].to_vec();
            self.pending.drain(..len);
            let int = |at: usize| {
                data.get(at..at + 4)
                    .map(|b| i32::from_ne_bytes(b.try_into().unwrap_or_default()))
            };
            match kind {
                MSG_VERSION => return Some(Step::Done(Answer::Unsupported)),
                MSG_WRITE_OPEN => {
                    // stream, fd, flags, then a path: the stream is all that is answered.
                    let stream = int(0).unwrap_or(-1);
                    let mut ready = stream.to_ne_bytes().to_vec();
                    ready.extend_from_slice(&0i32.to_ne_bytes());
                    return Some(Step::Reply(message(MSG_WRITE_READY, &ready)));
                }
                MSG_WRITE => match int(0) {
                    Some(1) => self.stdout.extend_from_slice(&data[4..]),
                    Some(_) => self.stderr.extend_from_slice(&data[4..]),
                    None => {}
                },
                MSG_EXIT => {
                    let status = int(0).unwrap_or(0);
                    // An exit message, when there is one, is what the client would print.
                    if let Some(text) = data.get(4..).filter(|t| !t.is_empty()) {
                        let text = text.strip_suffix(b"\0").unwrap_or(text);
                        self.stderr.extend_from_slice(text);
                    }
                    return Some(Step::Done(Answer::Ran {
                        status,
                        stdout: std::mem::take(&mut self.stdout),
                        stderr: std::mem::take(&mut self.stderr),
                    }));
                }
                MSG_SHUTDOWN => return Some(Step::Lost),
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;
    use std::time::Duration;

    fn header(m: &[u8]) -> (u32, usize, u32) {
        (
            u32::from_ne_bytes(m[0..4].try_into().unwrap()),
            u16::from_ne_bytes(m[4..6].try_into().unwrap()) as usize,
            u32::from_ne_bytes(m[8..12].try_into().unwrap()),
        )
    }

    #[test]
    fn a_command_is_one_message_of_its_arguments_or_none_when_too_long() {
        let m = command_message(&["has-session".into(), "-t".into(), "=a".into()]).unwrap();
        let (kind, len, peer) = header(&m);
        assert_eq!((kind, len, peer), (MSG_COMMAND, m.len(), PROTOCOL_VERSION));
        assert_eq!(&m[HEADER..HEADER + 4], &3i32.to_ne_bytes());
        assert_eq!(&m[HEADER + 4..], b"has-session\0-t\0=a\0");
        assert!(command_message(&[OsString::from("x".repeat(MAX_MESSAGE))]).is_none());
        assert!(command_message(&[OsString::from("a\0b")]).is_none());
    }

    #[test]
    fn the_identity_ends_with_done_and_carries_the_environment_but_no_descriptor() {
        let env = vec![("TERM".into(), "screen".into()), ("A".into(), "b".into())];
        let mut rest = &identify(&env)[..];
        let (mut kinds, mut vars, mut term) = (Vec::new(), Vec::new(), Vec::new());
        while !rest.is_empty() {
            let (kind, len, _) = header(rest);
            match kind {
                MSG_IDENTIFY_ENVIRON => vars.push(rest[HEADER..len].to_vec()),
                MSG_IDENTIFY_TERM => term = rest[HEADER..len].to_vec(),
                _ => {}
            }
            kinds.push(kind);
            rest = &rest[len..];
        }
        assert_eq!(kinds.last(), Some(&MSG_IDENTIFY_DONE));
        assert_eq!(vars, [b"TERM=screen\0".to_vec(), b"A=b\0".to_vec()]);
        assert_eq!(term, b"screen\0");
        assert!(kinds.contains(&MSG_IDENTIFY_CLIENTPID) && kinds.contains(&MSG_IDENTIFY_CWD));
    }

    /// A server that reads the client's messages, then answers with `answer`.
    fn fake_server(answer: Vec<u8>) -> (tempfile::TempDir, std::path::PathBuf) {
        fake_server_then(answer, false)
    }

    /// `fake_server`, which hangs up right after its answer when `hang_up`.
    fn fake_server_then(answer: Vec<u8>, hang_up: bool) -> (tempfile::TempDir, std::path::PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("s");
        let l = UnixListener::bind(&path).unwrap();
        std::thread::spawn(move || {
            let (mut c, _) = l.accept().unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            // Until the command has come: it is the last message.
            while !got.windows(4).any(|w| w == MSG_COMMAND.to_ne_bytes()) {
                let n = c.read(&mut buf).unwrap();
                got.extend_from_slice(&buf[..n]);
            }
            c.write_all(&answer).unwrap();
            if !hang_up {
                let _ = c.read(&mut buf);
            }
        });
        (d, path)
    }

    #[test]
    fn output_and_status_come_back_and_another_protocol_runs_nothing() {
        let mut answer = message(MSG_WRITE_OPEN, &[1i32, 1, 0].map(i32::to_ne_bytes).concat());
        answer.extend(message(
            MSG_WRITE,
            &[&1i32.to_ne_bytes()[..], b"%3 42\n"].concat(),
        ));
        answer.extend(message(
            MSG_WRITE,
            &[&2i32.to_ne_bytes()[..], b"warn\n"].concat(),
        ));
        answer.extend(message(MSG_EXIT, &0i32.to_ne_bytes()));
        let (_d, path) = fake_server(answer);
        let a = run(&path, &["new-session".into()], &[], None).unwrap();
        assert_eq!(
            a,
            Answer::Ran {
                status: 0,
                stdout: b"%3 42\n".to_vec(),
                stderr: b"warn\n".to_vec(),
            }
        );
        let (_d, path) = fake_server(message(MSG_VERSION, &[]));
        assert_eq!(
            run(&path, &["new-session".into()], &[], None).unwrap(),
            Answer::Unsupported
        );
    }

    /// A server that goes away after the command came, with or without saying so, or that
    /// sends a message shorter than its header: the command may have run, and that is what
    /// the answer says (the caller looks for the session before it tries again).
    #[test]
    fn a_server_lost_after_the_command_is_lost_not_unsupported() {
        let open = message(MSG_WRITE_OPEN, &[1i32, 1, 0].map(i32::to_ne_bytes).concat());
        let mut short = message(MSG_EXIT, &0i32.to_ne_bytes());
        short[4..6].copy_from_slice(&4u16.to_ne_bytes());
        for (answer, what) in [
            (Vec::new(), "hung up at once"),
            (open, "hung up with output open"),
            (message(MSG_SHUTDOWN, &[]), "shut down"),
            (short, "a message shorter than its header"),
        ] {
            let (_d, path) = fake_server_then(answer, true);
            let r = run(&path, &["new-session".into()], &[], None);
            assert!(matches!(r, Err(Error::Lost)), "{what}: {r:?}");
        }
    }

    #[test]
    fn a_server_that_never_answers_is_given_up_on_and_a_missing_one_is_not_connected() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("s");
        let _hung = UnixListener::bind(&path).unwrap();
        let deadline = Instant::now() + Duration::from_millis(100);
        let r = run(&path, &["new-session".into()], &[], Some(deadline));
        assert!(matches!(r, Err(Error::TimedOut)), "{r:?}");
        let r = run(&d.path().join("none"), &["ls".into()], &[], None);
        assert!(matches!(r, Err(Error::Connect(_))), "{r:?}");
    }
}
