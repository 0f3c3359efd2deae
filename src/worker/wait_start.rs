//! An attempt that starts later (`spec.start_at`: `retry --at-reset`, `--after`): its worker
//! sleeps in the pane until then, on the signalfd alone, with the time left as the poll's
//! timeout: nothing polls, and a cancel, Ctrl-C twice or the parent's end wakes it.
//!
//! ```text
//!  start_at in the future ─► worker.json (state starting: a cancel signals this worker)
//!    ─► poll(signalfd, parent pidfd; timeout = what is left) ─► cancel? ─► never starts
//!                                                     └─ time's up ─► spawn, as any attempt
//! ```
//!
//! Common pitfalls:
//! * The clock is the wall clock (a reset is a moment, not a duration): each wake-up measures
//!   what is left again, so a suspended machine starts at the moment, not a span later.
//! * A cancel before the start is the stop machine's `Starting { cancelled }`: nothing is
//!   signalled, and the envelope says who asked.

use std::os::fd::AsFd;
use std::time::{Duration, SystemTime};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use super::pane::Style;
use super::run::Worker;
use crate::envelope::{CancelOrigin, WorkerState};

/// The longest single sleep: poll(2)'s timeout is an `i32` of milliseconds.
const LONGEST: Duration = Duration::from_millis(i32::MAX as u64);

impl Worker {
    /// Waits until `spec.start_at`, if it is still ahead. `false` when the attempt was
    /// cancelled meanwhile (or its pane or parent went away): its program must not start.
    pub(crate) fn wait_for_start(&mut self) -> bool {
        let Some(start) = self.spec.start_at.clone() else {
            return true;
        };
        let Some(at) = start.instant().filter(|t| *t > SystemTime::now()) else {
            return true;
        };
        let run = self.spec.run_id.to_string();
        self.pane.line(
            Style::Yellow,
            &format!(
                "subpane: {}; `subpane cancel {run}` (or Ctrl-C twice here) cancels it",
                crate::fresh::waiting_words(&start)
            ),
        );
        self.pane.flush();
        // From here a cancel signals this worker (it is named in worker.json).
        self.facts.state = Some(WorkerState::Starting);
        self.save_facts();
        if self.cancel_pending() {
            self.cancel_requested(true);
        }
        while self.life.stop().is_none() {
            let Ok(left) = at.duration_since(SystemTime::now()) else {
                break;
            };
            let ms = left.min(LONGEST).as_millis().max(1);
            let timeout = PollTimeout::try_from(ms as i32).unwrap_or(PollTimeout::MAX);
            let (signals, parent) = {
                let mut fds = vec![PollFd::new(self.sfd.as_fd(), PollFlags::POLLIN)];
                if let Some(p) = &self.parent {
                    fds.push(PollFd::new(p.as_fd(), PollFlags::POLLIN));
                }
                match poll(&mut fds, timeout) {
                    Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                    // Nothing to wait on: start now rather than never.
                    Err(_) => break,
                }
                let ready = |f: &PollFd<'_>| f.revents().is_some_and(|r| !r.is_empty());
                (ready(&fds[0]), fds.get(1).is_some_and(ready))
            };
            if signals {
                self.handle_signals();
            }
            if parent {
                self.parent_ended();
            }
            if self.pane.is_dead() && self.life.stop().is_none() {
                if self.cancelled_by.is_none() {
                    let words = "its pane closing (SIGHUP) while it waited to start";
                    self.cancelled_by = Some((CancelOrigin::Signal, words.into()));
                }
                self.cancel_requested(false);
            }
            self.pane.flush();
        }
        if self.life.stop().is_some() {
            return false;
        }
        self.pane
            .line(Style::Dim, "subpane: the wait is over; starting");
        true
    }
}
