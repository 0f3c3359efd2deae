//! The impure side of stopping: feeds events to the machine and performs its actions —
//! signals, killing descendants, reaping, holding the agent stopped and continuing it.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};

use super::{Action, Event, Exit};
use crate::envelope::{CancelOrigin, CancelRequest, KillReason, STOP_REQUEST_LIMIT, StopRequest};
use crate::procs;
use crate::store;
use crate::worker::pane::Style;
use crate::worker::run::Worker;

/// How long after a first Ctrl-C in the pane a second one cancels the run.
pub(crate) const CONFIRM_INTERRUPT: Duration = Duration::from_secs(5);

impl Worker {
    /// Feeds one event to the machine and performs what it asks, in order.
    pub(crate) fn feed(&mut self, ev: Event, now: Instant) {
        for a in self.life.on(ev, now) {
            self.perform(a);
        }
    }

    fn perform(&mut self, a: Action) {
        match a {
            Action::Announce(reason) => {
                let note = match reason {
                    KillReason::Cancel => "subpane: cancel requested",
                    KillReason::Timeout => "subpane: timeout reached; stopping",
                    KillReason::IdleTimeout => "subpane: no output for the idle timeout; stopping",
                    KillReason::Linger => {
                        "subpane: the agent did not exit after its final event; stopping"
                    }
                    KillReason::Budget => "subpane: budget crossed; stopping",
                    // Nobody is left to read it.
                    KillReason::PaneClosed => return,
                };
                self.pane.line(Style::Yellow, note);
            }
            Action::Term => {
                // The group, and descendants that left it with setsid.
                let Some(pgid) = self.agent else { return };
                procs::signal_group(pgid, Signal::SIGTERM);
                for pid in procs::descendants(std::process::id() as i32) {
                    procs::signal_pid(pid, Signal::SIGTERM);
                }
            }
            Action::Kill => {
                if let Some(pgid) = self.agent {
                    procs::signal_group(pgid, Signal::SIGKILL);
                }
                // First the server of nested runs: it cancels the runs its clients wait for.
                self.stop_nest();
                self.kill_descendants();
            }
            Action::KillLeftovers => {
                self.stop_nest();
                let n = self.kill_descendants();
                self.facts.cleanup.killed_descendants += n;
                self.pane.line(
                    Style::Yellow,
                    &format!("subpane: {n} leftover process(es) held the output open; killed"),
                );
            }
            Action::GiveUpOnPipes => self.stream.close(),
            // The group only, as SIGTERM: a descendant that left it with setsid runs on
            // (the sandbox's processes are all in it).
            Action::SigStop => {
                let Some(pgid) = self.agent else { return };
                procs::signal_group(pgid, Signal::SIGSTOP);
                self.stream.held(Some(crate::fresh::now_rfc3339()));
                let run = self.spec.run_id.to_string();
                self.pane.line(
                    Style::Yellow,
                    &format!(
                        "⏸ stopped by subpane (its clocks stand still); `subpane resume {run}` continues it"
                    ),
                );
            }
            Action::SigCont { held } => {
                let Some(pgid) = self.agent else { return };
                procs::signal_group(pgid, Signal::SIGCONT);
                self.stream.held(None);
                let why = if self.life.stop().is_some() {
                    ", to take its stop"
                } else {
                    ""
                };
                self.pane.line(
                    Style::Yellow,
                    &format!(
                        "▶ continued by subpane after {:.1}s stopped{why}",
                        held.as_secs_f64()
                    ),
                );
            }
        }
    }

    /// `stop.json` asks for the agent to be held stopped or to go on (SIGUSR2, and once the
    /// program runs): the machine decides whether that changes anything.
    ///
    /// The file is untrusted bytes: a program outside a sandbox can write its attempt
    /// directory and signal its worker. It is read without following a link, at most
    /// [`STOP_REQUEST_LIMIT`] bytes, never blocking (a FIFO is no file); anything that is not
    /// a request as subpane writes it is none. A program that writes a real one stops itself,
    /// which it could do anyway.
    pub(crate) fn stop_asked(&mut self) {
        let asked = store::read_bounded(&self.paths.stop(), STOP_REQUEST_LIMIT)
            .ok()
            .flatten()
            .and_then(|b| serde_json::from_slice::<StopRequest>(&b).ok());
        if let Some(r) = asked {
            self.feed(Event::Hold { stopped: r.stopped }, Instant::now());
        }
    }

    /// A cancel: from `cancel.json` (`from_file`, which may carry its own grace) or a signal
    /// to the worker.
    ///
    /// One `cancel.json` is one request, however often it is seen: the worker looks for it
    /// after writing `worker.json`, and the canceller that read that `worker.json` also
    /// signals. Only a new request (another id) counts as a second cancel.
    pub(crate) fn cancel_requested(&mut self, from_file: bool) {
        let grace_ms = if from_file {
            match self.take_cancel_request() {
                Some(grace_ms) => grace_ms,
                None => return,
            }
        } else {
            self.spec.limits.grace_ms
        };
        let grace = Duration::from_millis(grace_ms);
        self.feed(Event::CancelRequested { grace }, Instant::now());
    }

    /// Ctrl-C in the pane. The terminal's SIGINT reaches only the worker (the program has a
    /// session of its own), and people press Ctrl-C by reflex to leave a viewer: the first
    /// one only says what a second would do, and how to detach; a second within
    /// [`CONFIRM_INTERRUPT`] cancels the run.
    pub(crate) fn interrupt_from_pane(&mut self, now: Instant) {
        match self.interrupted_at {
            Some(t) if now.duration_since(t) <= CONFIRM_INTERRUPT => {
                if self.cancelled_by.is_none() {
                    let origin = crate::envelope::CancelOrigin::Interrupt;
                    self.cancelled_by = Some((origin, "Ctrl-C, twice, in the run's pane".into()));
                }
                self.cancel_requested(false)
            }
            _ => {
                self.interrupted_at = Some(now);
                self.pane.line(
                    Style::Yellow,
                    &format!(
                        "Ctrl-C: press it again within {}s to cancel this run; {} leaves it running",
                        CONFIRM_INTERRUPT.as_secs(),
                        crate::tmux::DETACH_HINT
                    ),
                );
            }
        }
    }

    /// Reads a new request of `cancel.json`: who asked is kept for the envelope; its grace is
    /// returned. `None` when there is none, or only one already seen.
    pub(crate) fn take_cancel_request(&mut self) -> Option<u64> {
        // No request is one that cannot be read as subpane writes it (a link, garbage):
        // `cancel` renames a whole file into place before it signals.
        let r = store::read_json::<CancelRequest>(&self.paths.cancel())
            .ok()
            .flatten()?;
        if self.cancels_seen.iter().any(|k| k == r.key()) {
            return None;
        }
        self.cancels_seen.push(r.key().to_owned());
        if self.cancelled_by.is_none() {
            let origin = r.origin.unwrap_or(CancelOrigin::Cancel);
            let words = r.by.clone().unwrap_or_else(|| origin.words().to_owned());
            self.cancelled_by = Some((origin, words));
            if origin == CancelOrigin::Budget {
                self.group_budget = r.budget;
            }
        }
        Some(r.grace_ms)
    }

    /// Reaps the children that have exited, without waiting. Returns `false` when the worker
    /// has no child left at all (`ECHILD`).
    pub(crate) fn reap_now(&mut self) -> bool {
        loop {
            match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) => return true,
                Ok(st) => self.note_reaped(st),
                Err(_) => return false,
            }
        }
    }

    /// Every reap goes through here: whichever path reaps the agent (SIGCHLD, or the reaping
    /// after a kill), the machine must hear of it, or the loop would wait for it forever.
    fn note_reaped(&mut self, st: WaitStatus) {
        if st.pid().is_some_and(|p| Some(p.as_raw()) == self.nest) {
            self.nest = None;
        }
        let exit = match st {
            WaitStatus::Exited(pid, code) if Some(pid.as_raw()) == self.agent => Exit::Code(code),
            WaitStatus::Signaled(pid, sig, _) if Some(pid.as_raw()) == self.agent => {
                Exit::Signal(sig)
            }
            _ => return,
        };
        self.feed(Event::AgentExited(exit), Instant::now());
    }

    /// Reaps children until none are left or `bound` passes.
    pub(crate) fn reap_all(&mut self, bound: Duration) {
        let end = Instant::now() + bound;
        while self.reap_now() {
            if Instant::now() >= end {
                return;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// SIGKILL to every descendant of the worker; returns how many there were.
    pub(crate) fn kill_descendants(&mut self) -> u64 {
        let mut total = 0;
        // Killing a parent can re-parent its children to us between scans: repeat until quiet.
        for _ in 0..5 {
            // The worker is a subreaper, so every descendant is a child or below one: with no
            // child left there is none, and the scan of /proc (milliseconds) is skipped.
            if !self.reap_now() {
                break;
            }
            let d = procs::descendants(std::process::id() as i32);
            if d.is_empty() {
                break;
            }
            for pid in &d {
                procs::signal_pid(*pid, Signal::SIGKILL);
            }
            total += d.len() as u64;
            self.reap_all(Duration::from_millis(200));
        }
        total
    }
}
