//! The agent's input (`stdin: "input"`): what `subpane send`, MCP `send` and the pane's input
//! line say to the running agent, through its CLI's input mode (the adapter speaks it).
//!
//! ```text
//!  spawn: bind input.sock; the agent's stdin is a pipe; the prompt is its first message
//!  poll: input.sock ─► accept ─► one request line ─┐
//!        the pane's keys ─► the line editor ─ Enter ┤ ─► the parser's say ─► the pipe (non-blocking)
//!                                                   └─► a `subpane.input` event, the pane
//!        the agent's stdout: a line the parser says `taken` ─► the oldest waiting client's answer
//!                            a line the parser answers (`reply`: a protocol's next request) ─► the pipe
//!  a turn ended (the terminal event) and nothing waits:
//!        --keep-open DUR: wait that long for a next message; else (or then) close the pipe,
//!        the agent ends as without input, and the linger clock starts
//!  the agent exited: every waiting client is answered (not taken); input.sock is removed
//! ```
//!
//! Common pitfalls:
//! * Writes to the pipe never block the loop: an agent that does not read would stall every
//!   deadline. What the pipe does not take waits for POLLOUT.
//! * A message sent while the turn's end is on its way is still in flight when the terminal
//!   event comes: the input stays open until every message sent was taken and its turn
//!   ended, or a steered turn would be cut off before the agent read it.
//! * A client is answered at once (refused, or queued with its number), then once more when its
//!   message is taken or can no longer be (the agent ended); a client that hangs up first
//!   loses nothing but its answer.
//! * Only subpane writes `subpane.input` events: the parsers turn an agent's line of that
//!   type into a plain line (`adapter::is_own_event`).

mod clients;
mod editor;
mod serve;
#[cfg(test)]
mod tests;

use clients::{Conn, answer, refused};

pub(crate) use editor::{Edit, Editor};

use std::collections::VecDeque;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::process::ChildStdin;
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags};

use crate::adapter::{Adapter, Say, StreamParser, Took};
use crate::envelope::InputCounts;
use crate::sandbox::relay::SocketPath;
use crate::spec::{InputAnswer, InputFrom, InputRequest};

/// How long a client may take to send its request line.
const REQUEST_WAIT: Duration = Duration::from_secs(10);
/// After a turn that was interrupted, how long the agent waits for its next message when
/// `--keep-open` says nothing: an interrupt stops a turn, not the run.
const AFTER_INTERRUPT: Duration = Duration::from_secs(300);
/// Clients reading their request at once; more wait in the backlog.
const MAX_CONNS: usize = 16;

/// The attempt's input: the pipe, the socket, the clients, the pane's line.
pub(crate) struct Input {
    adapter: &'static dyn Adapter,
    pipe: Option<ChildStdin>,
    /// Bytes said but not yet taken by the pipe.
    out: Vec<u8>,
    /// Bytes queued and written so far (a message is written when `written` reaches its end).
    queued: u64,
    written: u64,
    listener: Option<UnixListener>,
    /// The socket's name while it is bound (a long path goes through its directory).
    socket: Option<(std::path::PathBuf, SocketPath)>,
    /// Clients still sending their request.
    conns: Vec<Conn>,
    /// Said to the agent, not yet taken, in order: messages (the prompt first, as seq 0,
    /// when the CLI acknowledges it) and interrupts apart.
    waiting: VecDeque<Waiting>,
    interrupts: VecDeque<Waiting>,
    /// Said to the agent and taken, whose turn has not ended yet.
    turn_open: bool,
    /// An interrupt was said since the last turn's end: that turn ended by it.
    interrupted: bool,
    /// A turn ended while something said was pending (see [`Input::turn_ended`]).
    ended_pending: bool,
    seq: u64,
    counts: InputCounts,
    /// Why the input takes nothing more (its last turn ended, the agent ended).
    closed: Option<&'static str>,
    keep_open: Option<Duration>,
    /// With `--keep-open`: when the input closes unless a message comes first.
    close_at: Option<Instant>,
    /// What the person at the pane is typing.
    pub(crate) editor: Editor,
}

struct Waiting {
    seq: u64,
    /// The client to answer (none for the pane's line).
    reply: Option<UnixStream>,
    /// `queued` after its bytes: written once `written` reaches it.
    end: u64,
}

/// What happened to a message, for the worker to record.
pub(crate) struct Said {
    pub(crate) seq: u64,
    pub(crate) from: InputFrom,
    pub(crate) interrupt: bool,
    pub(crate) text: String,
}

/// What the input's part of a poll found ready.
#[derive(Default)]
pub(crate) struct InputReady {
    listener: bool,
    pipe: bool,
    conns: Vec<usize>,
    pub(crate) keys: bool,
}

/// Where the input's descriptors sit in the poll set.
#[derive(Default)]
pub(crate) struct InputSlots {
    listener: Option<usize>,
    pipe: Option<usize>,
    conns: Vec<usize>,
    keys: Option<usize>,
}

impl Input {
    /// Binds the input socket at `path` (the attempt directory is new: anything under the
    /// name makes the bind fail, and nothing is followed).
    pub(crate) fn bind(
        adapter: &'static dyn Adapter,
        path: &std::path::Path,
        keep_open: Option<Duration>,
    ) -> Result<Self, String> {
        let why =
            |e: std::io::Error| format!("cannot make the input socket {}: {e}", path.display());
        let at = SocketPath::new(path).map_err(why)?;
        let listener = UnixListener::bind(at.usable()).map_err(why)?;
        // The user's alone: connecting takes write permission on the socket (and a client of
        // another uid is turned away on accept anyway, `same_user`).
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(at.usable(), std::fs::Permissions::from_mode(0o600))
            .map_err(why)?;
        listener.set_nonblocking(true).map_err(why)?;
        Ok(Self {
            adapter,
            pipe: None,
            out: Vec::new(),
            queued: 0,
            written: 0,
            listener: Some(listener),
            socket: Some((path.to_path_buf(), at)),
            conns: Vec::new(),
            waiting: VecDeque::new(),
            interrupts: VecDeque::new(),
            turn_open: false,
            interrupted: false,
            ended_pending: false,
            seq: 0,
            counts: InputCounts::default(),
            closed: None,
            keep_open,
            close_at: None,
            editor: Editor::default(),
        })
    }

    /// Takes the agent's stdin, made non-blocking, and says the prompt first (when the CLI
    /// takes it there).
    pub(crate) fn attach(
        &mut self,
        pipe: Option<ChildStdin>,
        prompt: Option<&str>,
        parser: &mut dyn StreamParser,
    ) {
        if let Some(p) = &pipe {
            super::stream::set_nonblocking(p.as_raw_fd());
        }
        self.pipe = pipe;
        if let Some(bytes) = prompt.and_then(|p| parser.say(Say::Prompt(p))) {
            self.queue(&bytes);
            self.turn_open = true;
            if self.adapter.acknowledges() {
                self.waiting.push_back(Waiting {
                    seq: 0,
                    reply: None,
                    end: self.queued,
                });
            }
            // At once: the CLI waits for it (what the pipe does not take waits for POLLOUT).
            self.write_out();
        }
    }

    /// The totals for the envelope.
    pub(crate) fn counts(&self) -> InputCounts {
        self.counts.clone()
    }

    /// Whether the input still takes messages.
    pub(crate) fn open(&self) -> bool {
        self.closed.is_none()
    }

    /// When the input closes by itself (`--keep-open`).
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.close_at
    }

    /// Whether the program works in turns that end (an agent CLI's terminal events); a
    /// command's input stays open until it exits.
    fn has_turns(&self) -> bool {
        self.adapter.expects_terminal_event()
    }

    /// Bytes the CLI's protocol answers with (a parser's `reply`), written in turn.
    pub(crate) fn reply(&mut self, bytes: &[u8]) {
        if self.pipe.is_some() {
            self.queue(bytes);
            self.write_out();
        }
    }

    fn queue(&mut self, bytes: &[u8]) {
        self.out.extend_from_slice(bytes);
        self.queued += bytes.len() as u64;
    }

    /// Adds the input's descriptors to the poll set.
    pub(crate) fn poll_fds<'a>(
        &'a self,
        fds: &mut Vec<PollFd<'a>>,
        keys: Option<BorrowedFd<'a>>,
    ) -> InputSlots {
        let at = |fds: &mut Vec<PollFd<'a>>, fd: BorrowedFd<'a>, f: PollFlags| {
            fds.push(PollFd::new(fd, f));
            fds.len() - 1
        };
        InputSlots {
            listener: self
                .listener
                .as_ref()
                .filter(|_| self.conns.len() < MAX_CONNS)
                .map(|l| at(fds, l.as_fd(), PollFlags::POLLIN)),
            pipe: self
                .pipe
                .as_ref()
                .filter(|_| !self.out.is_empty())
                .map(|p| at(fds, p.as_fd(), PollFlags::POLLOUT)),
            conns: self
                .conns
                .iter()
                .map(|c| at(fds, c.stream.as_fd(), PollFlags::POLLIN))
                .collect(),
            keys: keys
                .filter(|_| self.closed.is_none())
                .map(|k| at(fds, k, PollFlags::POLLIN)),
        }
    }

    /// The deadline of the clients still sending (a slow one is dropped).
    pub(crate) fn conn_deadline(&self) -> Option<Instant> {
        self.conns.iter().map(|c| c.since + REQUEST_WAIT).min()
    }

    /// Which of the input's descriptors a poll found ready.
    pub(crate) fn ready(slots: &InputSlots, fds: &[PollFd<'_>]) -> InputReady {
        let r = |i: &usize| fds[*i].revents().is_some_and(|r| !r.is_empty());
        InputReady {
            listener: slots.listener.as_ref().is_some_and(r),
            pipe: slots.pipe.as_ref().is_some_and(r),
            conns: slots
                .conns
                .iter()
                .enumerate()
                .filter(|(_, i)| r(i))
                .map(|(n, _)| n)
                .collect(),
            keys: slots.keys.as_ref().is_some_and(r),
        }
    }

    /// Serves what is ready: new clients, their requests, the pipe. Returns what was said.
    pub(crate) fn serve(
        &mut self,
        ready: &InputReady,
        now: Instant,
        parser: &mut dyn StreamParser,
    ) -> Vec<Said> {
        let mut said = Vec::new();
        // Most wake-ups are the agent's output: nothing of the input's to do.
        let quiet = !ready.pipe && !ready.listener && ready.conns.is_empty();
        if quiet && self.conns.is_empty() {
            return said;
        }
        if ready.pipe {
            self.write_out();
        }
        // Requests first (the ready indexes are of the clients as they were), then new ones.
        let mut done = Vec::new();
        for &n in &ready.conns {
            if let Some(req) = self.read_request(n) {
                done.push((n, req));
            }
        }
        // Slow clients are dropped unanswered.
        let stale: Vec<usize> = (0..self.conns.len())
            .filter(|n| now >= self.conns[*n].since + REQUEST_WAIT)
            .filter(|n| !done.iter().any(|(d, _)| d == n))
            .collect();
        let mut gone: Vec<usize> = done.iter().map(|(n, _)| *n).chain(stale).collect();
        gone.sort_unstable();
        let mut taken_conns: Vec<(usize, UnixStream)> = Vec::new();
        for n in gone.into_iter().rev() {
            let c = self.conns.remove(n);
            taken_conns.push((n, c.stream));
        }
        for (n, req) in done {
            let Some(pos) = taken_conns.iter().position(|(m, _)| *m == n) else {
                continue;
            };
            let (_, stream) = taken_conns.swap_remove(pos);
            match req {
                Ok(req) if req.from == InputFrom::Pane => {
                    answer(
                        &mut { stream },
                        &refused("only the pane's input line speaks as the pane".into()),
                    );
                }
                Ok(req) => {
                    if let Some(s) = self.say(req, Some(stream), now, parser) {
                        said.push(s);
                    }
                }
                Err(e) => answer(&mut { stream }, &refused(e)),
            }
        }
        if ready.listener {
            self.accept(now);
        }
        self.write_out();
        said
    }

    /// One request: said to the agent (its client answered once it is taken), or refused.
    pub(crate) fn say(
        &mut self,
        req: InputRequest,
        reply: Option<UnixStream>,
        now: Instant,
        parser: &mut dyn StreamParser,
    ) -> Option<Said> {
        let what = match (&req.text, req.interrupt) {
            (Some(_), true) => Err("give a message or an interrupt, not both".to_owned()),
            (None, false) => Err("the message is empty".to_owned()),
            (Some(t), false) if t.trim().is_empty() => Err("the message is empty".to_owned()),
            (Some(t), false) => Ok(Say::Message(t)),
            (None, true) => Ok(Say::Interrupt),
        };
        let said = what.and_then(|w| {
            if let Some(why) = self.closed {
                return Err(why.to_owned());
            }
            if w == Say::Interrupt && !self.has_turns() {
                return Err(
                    "a command has no turn to interrupt; send it a message, or cancel the run"
                        .to_owned(),
                );
            }
            if w == Say::Interrupt && !self.turn_open {
                return Err("no turn of the agent is under way to interrupt".to_owned());
            }
            parser.say(w).ok_or_else(|| {
                "this agent's CLI cannot interrupt a turn; send a message instead, or cancel the run"
                    .to_owned()
            })
        });
        let bytes = match said {
            Ok(b) => b,
            Err(e) => {
                if let Some(mut r) = reply {
                    answer(&mut r, &refused(e));
                }
                return None;
            }
        };
        self.queue(&bytes);
        self.seq += 1;
        let seq = self.seq;
        if req.interrupt {
            self.counts.interrupts += 1;
            self.interrupted = true;
        } else {
            self.counts.messages += 1;
        }
        *self
            .counts
            .from
            .entry(req.from.as_str().to_owned())
            .or_default() += 1;
        // A message comes before the input could close: it waits for its turn's end.
        self.close_at = None;
        if !req.interrupt && self.has_turns() {
            self.turn_open = true;
        }
        let mut reply = reply;
        if let Some(r) = reply.as_mut() {
            answer(
                r,
                &InputAnswer {
                    seq: Some(seq),
                    queued: true,
                    ..InputAnswer::default()
                },
            );
        }
        let w = Waiting {
            seq,
            reply,
            end: self.queued,
        };
        if req.interrupt {
            self.interrupts.push_back(w);
        } else {
            self.waiting.push_back(w);
        }
        let _ = now;
        self.write_out();
        Some(Said {
            seq,
            from: req.from,
            interrupt: req.interrupt,
            text: req.text.unwrap_or_default(),
        })
    }

    /// Writes what the pipe takes now; a CLI that does not acknowledge took what was written.
    fn write_out(&mut self) {
        let Some(p) = self.pipe.as_mut() else {
            return;
        };
        while !self.out.is_empty() {
            match p.write(&self.out) {
                Ok(0) => break,
                Ok(n) => {
                    self.out.drain(..n);
                    self.written += n as u64;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(_) => {
                    // The agent closed its stdin: nothing more reaches it.
                    self.pipe = None;
                    self.out.clear();
                    self.close("the agent no longer reads its input");
                    return;
                }
            }
        }
        if !self.adapter.acknowledges() {
            while self.waiting.front().is_some_and(|w| w.end <= self.written) {
                self.took(Took::Message);
            }
        }
    }

    /// The agent took the oldest message (or interrupt) waiting: its CLI said so.
    pub(crate) fn took(&mut self, what: Took) {
        let queue = match what {
            Took::Message => &mut self.waiting,
            Took::Interrupt => &mut self.interrupts,
        };
        let Some(w) = queue.pop_front() else {
            return;
        };
        if what == Took::Message && std::mem::take(&mut self.ended_pending) {
            // Taken after the turn it was sent into had ended: it is the next turn.
            self.turn_open = true;
        }
        if w.seq == 0 {
            // The prompt.
            return;
        }
        self.counts.taken += 1;
        if let Some(mut r) = w.reply {
            answer(
                &mut r,
                &InputAnswer {
                    seq: Some(w.seq),
                    taken: true,
                    ..InputAnswer::default()
                },
            );
        }
    }

    /// A turn of the agent ended (its terminal event). Returns `true` when the input closed
    /// now (the worker starts the linger clock); with `--keep-open` the input closes later,
    /// at [`Input::deadline`], unless a message comes first.
    pub(crate) fn turn_ended(&mut self, now: Instant) -> bool {
        self.turn_open = false;
        if self.closed.is_some() {
            return true;
        }
        if self.pending() {
            // Said while the turn ended: a message starts the next turn once taken; an
            // interrupt's word may come after the end of the turn it stopped.
            self.ended_pending = true;
            return false;
        }
        self.settle(now)
    }

    /// Something said is not yet written or taken.
    fn pending(&self) -> bool {
        !self.waiting.is_empty() || !self.interrupts.is_empty() || !self.out.is_empty()
    }

    /// The turn is over and nothing is pending: the input closes now (`true`), or after the
    /// wait for a next message (`--keep-open`, or after an interrupt).
    fn settle(&mut self, now: Instant) -> bool {
        let wait = match (std::mem::take(&mut self.interrupted), self.keep_open) {
            (true, k) => Some(k.unwrap_or(AFTER_INTERRUPT)),
            (false, k) => k,
        };
        match wait {
            Some(d) => {
                self.close_at = Some(now + d);
                false
            }
            None => {
                self.close("the agent finished its last turn and its input is closed");
                true
            }
        }
    }

    /// Once per wake-up: a turn's end that waited for what was pending, and the wait for a
    /// next message. Returns whether the input closed now.
    pub(crate) fn tick(&mut self, now: Instant) -> bool {
        if self.closed.is_some() {
            return false;
        }
        if self.ended_pending && !self.pending() {
            self.ended_pending = false;
            if self.settle(now) {
                return true;
            }
        }
        if self.close_at.is_some_and(|t| t <= now) && !self.turn_open && !self.pending() {
            self.close_at = None;
            self.close("the agent finished its last turn, waited for a next message, and its input is closed");
            return true;
        }
        false
    }

    /// Takes nothing more: the pipe is closed (EOF for the agent); clients still waiting
    /// for their message to be taken keep waiting for the agent's word or its end.
    fn close(&mut self, why: &'static str) {
        if self.closed.is_none() {
            self.closed = Some(why);
        }
        if self.out.is_empty() {
            self.pipe = None;
        }
        self.close_at = None;
    }

    /// The agent ended, or is being stopped: nothing more is said, every waiting client is
    /// answered, the socket goes.
    pub(crate) fn end(&mut self, why: &'static str) {
        self.close(why);
        self.pipe = None;
        self.out.clear();
        let waiting = std::mem::take(&mut self.waiting);
        let interrupts = std::mem::take(&mut self.interrupts);
        for w in waiting.into_iter().chain(interrupts) {
            if let Some(mut r) = w.reply {
                answer(
                    &mut r,
                    &InputAnswer {
                        seq: Some(w.seq),
                        error: Some(format!(
                            "the agent ended before it took the message ({why})"
                        )),
                        ..InputAnswer::default()
                    },
                );
            }
        }
        for mut c in std::mem::take(&mut self.conns) {
            answer(&mut c.stream, &refused(why.to_owned()));
        }
        self.listener = None;
        if let Some((path, _)) = self.socket.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}
