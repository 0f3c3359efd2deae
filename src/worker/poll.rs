//! The worker's poll loop: one poll(2) over everything the attempt waits on, and what each
//! wake-up does, in order.
//!
//! ```text
//!  poll(2): signalfd, stdout, stderr, the pane (when it has something to write), the request
//!           socket of nested runs, the parent's worker (a run from a sandbox), the input
//!           (its socket and clients, the agent's stdin, the pane's keys)
//!           timeout = the earliest of the machine's deadline, progress.json's, the input's
//!    then: nested runs, the parent, the input ─► the agent's stdout and stderr (stream.rs)
//!          ─► the machine (Output, BudgetCrossed, a turn's end, PipesClosed) ─► signals
//!          ─► the input's wait ─► one pane write ─► Tick
//! ```
//!
//! Common pitfalls:
//! * One pane write per wake-up, not one per line (each costs the tmux server a parse).
//! * A turn's end goes to the input first (`Worker::turn_ended`): with input, the linger
//!   clock starts only when the input closes.

use std::os::fd::{AsFd, BorrowedFd};
use std::time::Instant;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::Signal;

use super::run::Worker;
use super::stop::Event;
use super::stream::Seen;

/// What one poll(2) found ready: the program's stdout and stderr, the signalfd, the request
/// socket of nested runs, the parent's worker (it has exited).
#[derive(Default)]
pub(super) struct Ready {
    out: bool,
    err: bool,
    signals: bool,
    nest: bool,
    parent: bool,
    input: super::input::InputReady,
}

impl Worker {
    /// The poll loop: runs until the machine says the agent exited and its pipes closed.
    pub(crate) fn stream(&mut self) {
        let mut buf = vec![0u8; 256 * 1024];
        while !self.life.done() {
            let input_due = self.input.as_ref().and_then(|i| {
                [i.deadline(), i.conn_deadline()]
                    .into_iter()
                    .flatten()
                    .min()
            });
            let next = [
                self.life.next_deadline(),
                self.stream.progress_due(),
                input_due,
            ]
            .into_iter()
            .flatten()
            .min();
            let timeout = match next {
                None => PollTimeout::NONE,
                Some(t) => {
                    let ms = t.saturating_duration_since(Instant::now()).as_millis();
                    // Round up so we do not wake a hair early and spin.
                    PollTimeout::try_from((ms + 1).min(i32::MAX as u128) as i32)
                        .unwrap_or(PollTimeout::MAX)
                }
            };
            let Some(ready) = self.wait(timeout) else {
                break;
            };
            if ready.nest {
                self.serve_nest();
            }
            if ready.parent {
                self.parent_ended();
            }
            self.serve_input(&ready.input, Instant::now());
            // A new window for the pane before what this wake-up reads, not after it: a line
            // read after a quiet spell must not be judged by the budget of a window long over.
            self.pane.tick(Instant::now());
            let mut seen = Seen::default();
            let s = &mut self.stream;
            if ready.out {
                s.read_stdout(&mut buf, &mut self.pane, &mut self.facts.filter, &mut seen);
            }
            if ready.err {
                s.read_stderr(&mut buf, &mut self.pane, &mut seen);
            }
            s.flush();
            let now = Instant::now();
            s.write_progress(now, &self.paths);
            if seen.output || s.closed() {
                if seen.output {
                    self.feed(Event::Output, now);
                }
                if seen.budget {
                    self.feed(Event::BudgetCrossed, now);
                }
                if let Some(i) = self.input.as_mut() {
                    for r in seen.replies.drain(..) {
                        i.reply(&r);
                    }
                    for t in seen.taken.drain(..) {
                        i.took(t);
                    }
                }
                if seen.terminal {
                    self.turn_ended(now);
                }
                if self.stream.closed() {
                    self.feed(Event::PipesClosed, now);
                }
            }
            if ready.signals {
                self.handle_signals();
            }
            // One write per wake-up, not one per line: under a flood each write to the pane
            // also costs the tmux server a wake-up and a parse.
            self.input_tick(Instant::now());
            self.pane.flush();
            self.feed(Event::Tick, Instant::now());
        }
        self.end_input("the agent ended");
    }

    /// One poll(2); what is ready. `None` on an error that would repeat (EINTR counts as a
    /// wake-up with nothing ready).
    fn wait(&self, timeout: PollTimeout) -> Option<Ready> {
        // SAFETY: fd 1 stays open for the life of the process.
        let pane_b = unsafe { BorrowedFd::borrow_raw(self.pane.fd()) };
        let mut fds: Vec<PollFd<'_>> = Vec::with_capacity(6);
        fds.push(PollFd::new(self.sfd.as_fd(), PollFlags::POLLIN));
        let (out, err) = self.stream.pipe_fds();
        let oi = out.map(|o| {
            fds.push(PollFd::new(o, PollFlags::POLLIN));
            fds.len() - 1
        });
        let ei = err.map(|e| {
            fds.push(PollFd::new(e, PollFlags::POLLIN));
            fds.len() - 1
        });
        let ni = self.nest_listener.as_ref().map(|l| {
            fds.push(PollFd::new(l.as_fd(), PollFlags::POLLIN));
            fds.len() - 1
        });
        let pi = self.parent.as_ref().map(|p| {
            fds.push(PollFd::new(p.as_fd(), PollFlags::POLLIN));
            fds.len() - 1
        });
        if self.pane.wants_write() {
            fds.push(PollFd::new(pane_b, PollFlags::POLLOUT));
        }
        // SAFETY: fd 0 (the pane's terminal) stays open for the life of the process.
        let keys = self
            .pane
            .takes_keys()
            .then(|| unsafe { BorrowedFd::borrow_raw(0) });
        let input_slots = self
            .input
            .as_ref()
            .map(|i| i.poll_fds(&mut fds, keys))
            .unwrap_or_default();
        match poll(&mut fds, timeout) {
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => return Some(Ready::default()),
            Err(_) => return None,
        }
        let ready =
            |i: Option<usize>| i.is_some_and(|i| fds[i].revents().is_some_and(|r| !r.is_empty()));
        Some(Ready {
            out: ready(oi),
            err: ready(ei),
            signals: ready(Some(0)),
            nest: ready(ni),
            parent: ready(pi),
            input: super::input::Input::ready(&input_slots, &fds),
        })
    }

    pub(crate) fn handle_signals(&mut self) {
        while let Ok(Some(info)) = self.sfd.read_signal() {
            match Signal::try_from(info.ssi_signo as i32) {
                // The only place that reaps while the agent may be alive.
                Ok(Signal::SIGCHLD) => {
                    self.reap_now();
                }
                Ok(Signal::SIGUSR1) => self.cancel_requested(true),
                Ok(Signal::SIGUSR2) => self.stop_asked(),
                Ok(Signal::SIGINT) => self.interrupt_from_pane(Instant::now()),
                Ok(sig @ (Signal::SIGTERM | Signal::SIGQUIT)) => {
                    if self.cancelled_by.is_none() {
                        let origin = crate::envelope::CancelOrigin::Signal;
                        self.cancelled_by =
                            Some((origin, format!("{} ({})", origin.words(), sig.as_str())));
                    }
                    self.cancel_requested(false)
                }
                Ok(Signal::SIGWINCH) => {
                    self.pane.resized();
                    self.draw_input_line();
                }
                Ok(Signal::SIGHUP) => {
                    self.pane.set_dead();
                    self.feed(Event::PaneClosed, Instant::now());
                }
                _ => {}
            }
        }
    }
}
