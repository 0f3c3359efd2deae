//! Asking a worker for something: a request file in the attempt directory, then a signal to
//! the worker, only once it is proven to be the worker. Cancel (`cancel.json`, SIGUSR1) and
//! stop (`stop.json`, SIGUSR2) both go this way; each request's own rules are in its file
//! (`cancel.rs`, `stop.rs`).
//!
//! ```text
//!  REQUEST.json (renamed into place) ─► worker.json names no one yet ─► Pending (the worker
//!                                      │                               reads it as it starts)
//!                                      └► it names pid P ─► P is the process of the run's own
//!                                           tmux pane, alive, ours, `… __worker DIR`
//!                                           ├─ yes ─► SIGNAL through a pidfd ─► Signalled
//!                                           └─ no ──► REQUEST.json removed ─► NotDelivered(why)
//! ```
//!
//! Common pitfalls:
//! * `worker.json` is in the attempt directory, which an unsandboxed program can write: the
//!   pid it names is believed only when tmux's `#{pane_pid}` for the run's session is the same
//!   process. A pane's process is the worker itself (tmux execs its command, no shell).
//! * A refused request must not be reported as delivered, nor left in its file for the worker
//!   (or the envelope) to find later.
//! * The file is written before the signal: a worker that had not started yet reads it as it
//!   starts, and one that was signalled reads the file the signal is about.

use nix::sys::signal::Signal;
use serde::Serialize;

use super::SuperviseError;
use crate::envelope::WorkerFacts;
use crate::procs;
use crate::store::{self, AttemptPaths};

/// What became of a request to a worker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// The worker was signalled.
    Signalled,
    /// No worker runs the program yet: it finds the request as it starts.
    Pending,
    /// Nothing was signalled, and the request file is gone again: why.
    NotDelivered(String),
}

/// Writes `request` to `file` (renamed into place whole), then signals the worker with
/// `signal` if it has started; a refused request's file is removed again.
pub(super) fn ask(
    paths: &AttemptPaths,
    file: &std::path::Path,
    request: &impl Serialize,
    signal: Signal,
    pane_pid: impl FnOnce() -> Option<i32>,
) -> Result<Delivery, SuperviseError> {
    store::write_json_atomic(file, request)?;
    let delivery = deliver(paths, signal, pane_pid);
    if let Delivery::NotDelivered(_) = &delivery {
        let _ = std::fs::remove_file(file);
    }
    Ok(delivery)
}

/// Signals the worker `worker.json` names with `signal`, if it is the process of the attempt's
/// own tmux pane (`pane_pid`: the caller asks tmux), alive, the user's, and this attempt's
/// worker ([`procs::is_worker_of`]). Nothing else is ever signalled.
fn deliver(
    paths: &AttemptPaths,
    signal: Signal,
    pane_pid: impl FnOnce() -> Option<i32>,
) -> Delivery {
    let refuse = |why: String| Delivery::NotDelivered(why);
    let facts: WorkerFacts = match store::read_json(&paths.worker()) {
        Ok(Some(f)) => f,
        Ok(None) => return Delivery::Pending,
        Err(e) => return refuse(format!("worker.json cannot be read ({e})")),
    };
    let Some(w) = facts.worker else {
        return refuse("worker.json names no worker process".into());
    };
    let Some(pane) = pane_pid() else {
        return refuse(format!(
            "tmux shows no pane for the run's session, so the process worker.json names (pid {}) cannot be checked",
            w.pid
        ));
    };
    if pane != w.pid {
        return refuse(format!(
            "worker.json names pid {}, but the process of the run's tmux pane is pid {pane}",
            w.pid
        ));
    }
    if !procs::is_ours(w.pid) {
        return refuse(format!(
            "pid {} (the run's tmux pane) is another user's process",
            w.pid
        ));
    }
    if !procs::is_worker_of(&w, paths.dir()) {
        return refuse(format!(
            "pid {} (the run's tmux pane) is not this attempt's worker, or no longer runs",
            w.pid
        ));
    }
    // The pidfd is checked against the start time after it is opened: it is this process.
    let Some(fd) = procs::pidfd_for(&w) else {
        return refuse(format!("the worker (pid {}) has exited", w.pid));
    };
    match procs::pidfd_send_signal(&fd, signal) {
        Ok(()) => Delivery::Signalled,
        Err(e) => refuse(format!(
            "{} to the worker (pid {}) failed: {e}",
            signal.as_str(),
            w.pid
        )),
    }
}
