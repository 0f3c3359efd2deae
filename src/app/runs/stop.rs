//! Holding a running attempt's agent stopped, and continuing it (`subpane pause`, `resume`;
//! the fan-out's `pause --stop-running` calls the same for each task).
//!
//! ```text
//!  stop_attempt(found, stopped) ─► finished? ─► AlreadyFinished(envelope)
//!                                └► supervisor::request_stop (stop.json, SIGUSR2 to the
//!                                   worker proven by its pane) ─► Requested
//!                                                              └► not delivered ─► finished
//!                                                                 meanwhile? else the error
//! ```
//!
//! Common pitfalls:
//! * Asking for the state the agent is in is no error and no change (the worker decides,
//!   from the file): a group's pause may reach a task twice.
//! * The answer comes once the worker is signalled, not once the agent is stopped: that takes
//!   the worker's next wake-up (milliseconds); `progress.json`'s `stopped_since` says it.

use crate::app::Error;
use crate::envelope::{Envelope, StopRequested};
use crate::supervisor;

use super::{Asked, Found};

/// What a request to hold an attempt's agent stopped (or continue it) did.
#[derive(Clone, Debug, PartialEq)]
pub enum StopOutcome {
    /// `stop.json` is written and the worker, if it runs, was signalled (one that does not
    /// run the program yet applies it once it does).
    Requested(StopRequested),
    /// Nothing to do: the attempt had finished.
    AlreadyFinished(Box<Envelope>),
}

/// Asks the attempt's worker to hold its agent stopped (`stopped`: SIGSTOP to its process
/// group; its timeout and idle timeout stand still meanwhile) or to continue it (SIGCONT).
/// Idempotent: stopping a stopped agent or continuing a running one is no error.
///
/// Errors: [`Error::StopNotDelivered`] when the worker could not be proven to be this
/// attempt's (nothing was signalled, and no request is left behind).
pub fn stop_attempt(found: &Found, stopped: bool) -> Result<StopOutcome, Error> {
    let asked = super::ask_live(found, |paths, pane| {
        supervisor::request_stop(paths, stopped, pane)
    })?;
    match asked {
        Asked::Finished(env) => Ok(StopOutcome::AlreadyFinished(env)),
        Asked::NotDelivered(why) => Err(Error::StopNotDelivered {
            run: found.spec.run_id.to_string(),
            attempt: found.spec.attempt,
            stopped,
            why,
        }),
        Asked::Delivered => Ok(StopOutcome::Requested(StopRequested {
            run_id: found.spec.run_id.to_string(),
            attempt: found.spec.attempt,
            stopped,
        })),
    }
}
