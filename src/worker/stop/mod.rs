//! When and how the attempt stops: a pure state machine, and the thin part that obeys it.
//!
//! ```text
//!  Starting ──Spawned──► Running { started, last_output, linger_at }
//!     │                     │ Tick past the timeout │ idle timeout │ linger (first in that order),
//!     │ CancelRequested     │ CancelRequested { grace }, PaneClosed, BudgetCrossed
//!     ▼                     ▼
//!  never starts        Stopping { stop, kill_at } ─ Tick past kill_at, or a 2nd cancel ─► Kill
//!  (no signal)              │                      (grace 0: Kill at once, no Term)
//!                           │ AgentExited
//!   Running ─AgentExited─►  ▼
//!                      Exited { exit, at, stop, pipes }
//!                        pipes: Open ─ at + LEAK_WAIT ─► Draining { until } ─ DRAIN_WAIT ─► Closed
//!                                  └───────────── PipesClosed ───────────────────────────┘
//!  Running ─ Hold { stopped } ─► held (SIGSTOP) / continued (SIGCONT): its clocks stand
//!            still while held (`hold.rs`)
//! ```
//!
//! [`Life::on`] takes one [`Event`] and the time, changes state, and returns the [`Action`]s
//! the worker must perform (signals, kills, giving up on the pipes); [`Life::next_deadline`]
//! is the poll timeout. No clock, syscall or IO inside, so every interleaving is a unit test
//! in microseconds (`tests.rs`). `act.rs` is the impure side: it turns actions into signals
//! and reaps, and feeds what it reaped back in as [`Event::AgentExited`].
//!
//! Common pitfalls:
//! * One stop at a time: a deadline that passes while stopping starts no second stop; only a
//!   second cancel escalates, to SIGKILL at once. The first stop's reason is the one reported.
//! * A stop never starts after the agent exited, and the grace ladder ends with the exit: no
//!   SIGKILL is sent to a group whose leader is gone. Leftovers are the leak wait's business.
//! * The agent's exit is not the end: the attempt is over when its pipes closed too (or were
//!   given up on after the drain wait), see [`Life::done`].
//! * A kill can reap the agent in passing: the shell must feed every reap of the agent back
//!   in, whichever code path made it, or the loop would wait for an exit already taken.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::envelope::KillReason;
use crate::spec::Limits;

mod act;
mod hold;
#[cfg(test)]
mod tests;

pub use hold::Hold;

/// After the agent exits, how long descendants may keep its output open before they are
/// killed.
pub const LEAK_WAIT: Duration = Duration::from_millis(100);
/// After that kill, how long to wait for the pipes to close before giving up on them.
pub const DRAIN_WAIT: Duration = Duration::from_secs(2);

/// How the agent ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(Signal),
}

/// A stop: why it began and which signals it sent. It outlives the stopping (the facts
/// report it), so `Exited` keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stop {
    pub reason: KillReason,
    pub sent_term: bool,
    pub sent_kill: bool,
}

impl Stop {
    /// `signals_sent` of `worker.json`, in the order they were sent.
    pub fn signals_sent(&self) -> Vec<String> {
        [(self.sent_term, "SIGTERM"), (self.sent_kill, "SIGKILL")]
            .into_iter()
            .filter(|(sent, _)| *sent)
            .map(|(_, name)| name.to_owned())
            .collect()
    }
}

/// After the agent exited: its stdout and stderr, which descendants may hold open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pipes {
    /// Still open; whatever holds them is killed at the exit + [`LEAK_WAIT`].
    Open,
    /// Leftovers held them and were killed; they are given up on at `until`.
    Draining { until: Instant },
    /// Closed or given up on: the attempt is over. `held_open`: leftovers had to be killed.
    Closed { held_open: bool },
}

/// Where the agent is in its life; each state carries what its deadlines are made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Not spawned yet. `cancelled`: a cancel came first, so it never will be.
    Starting { cancelled: bool },
    /// `linger_at` is set once, by the first terminal event.
    Running {
        started: Instant,
        last_output: Instant,
        linger_at: Option<Instant>,
    },
    /// SIGTERM was sent (unless the grace was 0); SIGKILL follows at `kill_at`.
    Stopping { stop: Stop, kill_at: Instant },
    /// The agent was reaped at `at`; `stop` is the stop in progress then, if any.
    Exited {
        exit: Exit,
        at: Instant,
        stop: Option<Stop>,
        pipes: Pipes,
    },
}

/// What happened, as the worker saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The program was started (the time is taken just before the spawn).
    Spawned,
    /// Bytes arrived on stdout or stderr.
    Output,
    /// The adapter saw the agent's final event.
    TerminalSeen,
    /// The agent was reaped.
    AgentExited(Exit),
    /// `cancel.json` or a signal to the worker; `grace` is the time from SIGTERM to SIGKILL.
    CancelRequested { grace: Duration },
    /// The pane hung up under the worker (its tmux session or server was killed).
    PaneClosed,
    /// The agent's usage crossed a limit of its budget (`worker::budget`).
    BudgetCrossed,
    /// Both stdout and stderr reached EOF.
    PipesClosed,
    /// A wake-up: act on every deadline that passed.
    Tick,
    /// `stop.json` asks for the agent to be held stopped (`true`) or to go on (`false`).
    Hold { stopped: bool },
}

/// What the worker must do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// A stop began for this reason: say so in the pane.
    Announce(KillReason),
    /// SIGTERM to the process group and to descendants outside it.
    Term,
    /// SIGKILL to the process group and every descendant.
    Kill,
    /// The agent is gone but its output is held open: SIGKILL every descendant, count them.
    KillLeftovers,
    /// Stop waiting for pipes that do not close.
    GiveUpOnPipes,
    /// SIGSTOP to the process group: the agent is held.
    SigStop,
    /// SIGCONT to the process group, after a hold of `held` (ended by a request, or because
    /// a stop began).
    SigCont { held: Duration },
}

/// The machine: the limits it enforces, the state, and whether the pipes are still open.
#[derive(Clone, Debug)]
pub struct Life {
    timeout: Option<Duration>,
    idle_timeout: Option<Duration>,
    linger: Duration,
    /// The run's grace, for every stop but a cancel (which brings its own).
    grace: Duration,
    state: State,
    /// Tracked in every state: the pipes may close before the agent exits.
    pipes_open: bool,
    /// The agent held stopped by request (`hold.rs`).
    hold: Hold,
}

impl Life {
    pub fn new(limits: &Limits) -> Self {
        Self {
            timeout: limits.timeout_ms.map(Duration::from_millis),
            idle_timeout: limits.idle_timeout_ms.map(Duration::from_millis),
            linger: Duration::from_millis(limits.linger_ms),
            grace: Duration::from_millis(limits.grace_ms),
            state: State::Starting { cancelled: false },
            pipes_open: true,
            hold: Hold::default(),
        }
    }

    /// Takes one event at `now`; returns what to do, in order. The hot events (`Output`)
    /// return an empty `Vec`, which does not allocate.
    pub fn on(&mut self, ev: Event, now: Instant) -> Vec<Action> {
        let mut acts = Vec::new();
        match (ev, &mut self.state) {
            (Event::Spawned, State::Starting { cancelled: false }) => {
                self.state = State::Running {
                    started: now,
                    last_output: now,
                    linger_at: None,
                };
            }
            (Event::Output, State::Running { last_output, .. }) => *last_output = now,
            // The linger clock starts once, at the first terminal event.
            (Event::TerminalSeen, State::Running { linger_at, .. }) if linger_at.is_none() => {
                *linger_at = Some(now + self.linger);
            }
            (Event::AgentExited(exit), _) => self.exited(exit, now),
            (Event::CancelRequested { .. }, State::Starting { cancelled }) => *cancelled = true,
            (Event::CancelRequested { grace }, State::Running { .. }) => {
                self.begin(KillReason::Cancel, grace, now, &mut acts);
            }
            // A second request kills at once (SIGKILL again if it was already sent: harmless).
            (Event::CancelRequested { .. }, State::Stopping { stop, .. }) => {
                stop.sent_kill = true;
                acts.push(Action::Kill);
            }
            (Event::PaneClosed, State::Running { .. }) => {
                self.begin(KillReason::PaneClosed, self.grace, now, &mut acts);
            }
            (Event::BudgetCrossed, State::Running { .. }) => {
                self.begin(KillReason::Budget, self.grace, now, &mut acts);
            }
            (Event::PipesClosed, _) => {
                self.pipes_open = false;
                if let State::Exited { pipes, .. } = &mut self.state
                    && let Pipes::Open | Pipes::Draining { .. } = *pipes
                {
                    let held_open = matches!(pipes, Pipes::Draining { .. });
                    *pipes = Pipes::Closed { held_open };
                }
            }
            (Event::Tick, _) => self.tick(now, &mut acts),
            (Event::Hold { stopped: true }, State::Running { .. }) => {
                // Already held: no second SIGSTOP.
                let new = self.hold.start(now);
                acts.extend(new.then_some(Action::SigStop));
            }
            // Every clock of a running agent moves later by the time it was held.
            (
                Event::Hold { stopped: false },
                State::Running {
                    started,
                    last_output,
                    linger_at,
                },
            ) => {
                if let Some(held) = self.hold.end(now) {
                    *started += held;
                    // A clock set while held (output of a descendant outside the group, the
                    // final event) counts from the continue, not past it.
                    *last_output = (*last_output + held).min(now);
                    if let Some(l) = linger_at {
                        *l = (*l + held).min(now + self.linger);
                    }
                    acts.push(Action::SigCont { held });
                }
            }
            // Everything else changes nothing: a stop never starts before the spawn nor after
            // the exit, and one stop at a time.
            _ => {}
        }
        acts
    }

    /// Acts on the deadlines that passed by `now`.
    fn tick(&mut self, now: Instant, acts: &mut Vec<Action>) {
        let passed = |at: Option<Instant>| at.is_some_and(|t| t <= now);
        match &mut self.state {
            State::Starting { .. } => {}
            // Held: its clocks stand still, no deadline passes.
            State::Running { .. } if self.hold.since.is_some() => {}
            State::Running {
                started,
                last_output,
                linger_at,
            } => {
                // One stop at a time: when several deadlines passed in the same wake-up, the
                // first in this order is the reason.
                let reason = if passed(self.timeout.map(|t| *started + t)) {
                    KillReason::Timeout
                } else if passed(self.idle_timeout.map(|t| *last_output + t)) {
                    KillReason::IdleTimeout
                } else if passed(*linger_at) {
                    KillReason::Linger
                } else {
                    return;
                };
                self.begin(reason, self.grace, now, acts);
            }
            State::Stopping { stop, kill_at } => {
                if !stop.sent_kill && *kill_at <= now {
                    stop.sent_kill = true;
                    acts.push(Action::Kill);
                }
            }
            State::Exited { at, pipes, .. } => match *pipes {
                // `Open` only while the pipes are open: `PipesClosed` moves it to `Closed`.
                Pipes::Open if *at + LEAK_WAIT <= now => {
                    acts.push(Action::KillLeftovers);
                    *pipes = Pipes::Draining {
                        until: now + DRAIN_WAIT,
                    };
                }
                Pipes::Draining { until } if until <= now => {
                    acts.push(Action::GiveUpOnPipes);
                    *pipes = Pipes::Closed { held_open: true };
                    self.pipes_open = false;
                }
                _ => {}
            },
        }
    }

    /// Starts the one stop, from `Running`: SIGTERM and SIGKILL after `grace`, or SIGKILL at
    /// once when the grace is 0.
    fn begin(&mut self, reason: KillReason, grace: Duration, now: Instant, acts: &mut Vec<Action>) {
        debug_assert!(matches!(self.state, State::Running { .. }));
        let zero = grace.is_zero();
        acts.push(Action::Announce(reason));
        acts.push(if zero { Action::Kill } else { Action::Term });
        // A held agent takes its SIGTERM only once continued: after it, so that it wakes to
        // the signal.
        if let Some(held) = self.hold.end(now) {
            acts.push(Action::SigCont { held });
        }
        self.state = State::Stopping {
            stop: Stop {
                reason,
                sent_term: !zero,
                sent_kill: zero,
            },
            kill_at: now + grace,
        };
    }

    /// The first status of the agent wins; the grace ladder ends with it.
    fn exited(&mut self, exit: Exit, now: Instant) {
        let stop = match self.state {
            State::Running { .. } => None,
            State::Stopping { stop, .. } => Some(stop),
            State::Starting { .. } | State::Exited { .. } => return,
        };
        // Killed while held (from outside): the hold ends with it. What is left of its group
        // is the leak wait's business, and SIGKILL reaches a stopped process.
        self.hold.end(now);
        let pipes = if self.pipes_open {
            Pipes::Open
        } else {
            Pipes::Closed { held_open: false }
        };
        self.state = State::Exited {
            exit,
            at: now,
            stop,
            pipes,
        };
    }

    /// The earliest pending deadline: the poll timeout. `None`: wait for an event.
    pub fn next_deadline(&self) -> Option<Instant> {
        match self.state {
            State::Starting { .. } => None,
            State::Running { .. } if self.hold.since.is_some() => None,
            State::Running {
                started,
                last_output,
                linger_at,
            } => [
                self.timeout.map(|t| started + t),
                self.idle_timeout.map(|t| last_output + t),
                linger_at,
            ]
            .into_iter()
            .flatten()
            .min(),
            State::Stopping { stop, kill_at } => (!stop.sent_kill).then_some(kill_at),
            State::Exited { at, pipes, .. } => match pipes {
                Pipes::Open => Some(at + LEAK_WAIT),
                Pipes::Draining { until } => Some(until),
                Pipes::Closed { .. } => None,
            },
        }
    }

    /// The agent exited and its pipes are closed (or given up on): nothing is left to wait for.
    pub fn done(&self) -> bool {
        matches!(
            self.state,
            State::Exited {
                pipes: Pipes::Closed { .. },
                ..
            }
        )
    }

    /// The stop, if one began; a cancel before the start is a stop that sent nothing.
    pub fn stop(&self) -> Option<Stop> {
        match self.state {
            State::Starting { cancelled: true } => Some(Stop {
                reason: KillReason::Cancel,
                sent_term: false,
                sent_kill: false,
            }),
            State::Starting { .. } | State::Running { .. } => None,
            State::Stopping { stop, .. } => Some(stop),
            State::Exited { stop, .. } => stop,
        }
    }

    /// The agent's holds: how many, and for how long so far.
    pub fn hold(&self) -> Hold {
        self.hold
    }

    /// How the agent ended, once it was reaped.
    pub fn exit(&self) -> Option<Exit> {
        match self.state {
            State::Exited { exit, .. } => Some(exit),
            _ => None,
        }
    }

    /// Whether descendants held the output open after the agent exited (and were killed).
    pub fn output_held_open(&self) -> bool {
        matches!(
            self.state,
            State::Exited {
                pipes: Pipes::Draining { .. } | Pipes::Closed { held_open: true },
                ..
            }
        )
    }
}
