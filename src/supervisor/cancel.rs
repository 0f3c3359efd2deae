//! Asking a worker to cancel.
//!
//! ```text
//!  cancel.json (renamed into place) ─► worker.json names no one yet ─► Pending (the worker
//!                                      │                               reads it as it starts)
//!                                      └► it names pid P ─► P is the process of the run's own
//!                                           tmux pane, alive, ours, `… __worker DIR`
//!                                           ├─ yes ─► SIGUSR1 through a pidfd ─► Signalled
//!                                           └─ no ──► cancel.json removed ─► NotDelivered(why)
//!  no attempt directory (removed under the run) ─► the pane's process, if it is the worker:
//!                                                   SIGTERM (the run's grace)
//! ```
//!
//! Common pitfalls:
//! * `worker.json` is in the attempt directory, which an unsandboxed program can write: the
//!   pid it names is believed only when tmux's `#{pane_pid}` for the run's session is the same
//!   process. A pane's process is the worker itself (tmux execs its command, no shell).
//! * A refused cancel must not be reported as requested, nor left in `cancel.json` for the
//!   envelope to claim later.

use nix::sys::signal::Signal;

use super::SuperviseError;
use crate::envelope::{CancelOrigin, CancelRequest, WorkerFacts};
use crate::fresh::now_rfc3339;
use crate::procs;
use crate::store::{self, AttemptPaths};

/// What became of a cancel request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// The worker was signalled.
    Signalled,
    /// No worker runs the program yet: it finds `cancel.json` as it starts.
    Pending,
    /// Nothing was signalled, and `cancel.json` is gone again: why.
    NotDelivered(String),
}

/// Writes `cancel.json` (with `origin`, who asked: the envelope's `cancelled_by`), then signals the
/// worker (SIGUSR1) if it has started. A worker that has not started yet finds `cancel.json`
/// on its own. `budget`: with origin `budget`, the group's budget that was crossed.
///
/// The worker is the process `worker.json` names only if it is the process of the attempt's
/// own tmux pane (`pane_pid`: the caller asks tmux), alive, the user's, and this attempt's
/// worker ([`procs::is_worker_of`]). Nothing else is ever signalled.
pub fn request_cancel(
    paths: &AttemptPaths,
    grace_ms: u64,
    origin: CancelOrigin,
    budget: Option<&crate::envelope::BudgetHit>,
    pane_pid: impl FnOnce() -> Option<i32>,
) -> Result<Delivery, SuperviseError> {
    if std::fs::symlink_metadata(paths.dir())
        .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
    {
        return Ok(without_records(paths, pane_pid));
    }
    store::write_json_atomic(
        &paths.cancel(),
        &CancelRequest::new(
            crate::fresh::request_id(),
            now_rfc3339(),
            grace_ms,
            origin,
            budget.cloned(),
        ),
    )?;
    let delivery = deliver(paths, pane_pid);
    if let Delivery::NotDelivered(_) = &delivery {
        let _ = std::fs::remove_file(paths.cancel());
    }
    Ok(delivery)
}

/// The attempt's directory was removed under it: no request can be written, and no record
/// names the worker. tmux's pane process is asked to stop (SIGTERM: the run's grace) if it
/// is this attempt's worker, alive and ours.
fn without_records(paths: &AttemptPaths, pane_pid: impl FnOnce() -> Option<i32>) -> Delivery {
    let gone = format!(
        "the attempt directory {} was removed",
        paths.dir().display()
    );
    let Some(w) = pane_pid().and_then(procs::proc_ref) else {
        return Delivery::NotDelivered(format!("{gone}, and tmux shows no pane for the run"));
    };
    if !procs::is_ours(w.pid) || !procs::is_worker_of(&w, paths.dir()) {
        return Delivery::NotDelivered(format!(
            "{gone}, and the process of the run's tmux pane (pid {}) is not its worker",
            w.pid
        ));
    }
    match procs::pidfd_for(&w).map(|fd| procs::pidfd_send_signal(&fd, Signal::SIGTERM)) {
        Some(Ok(())) => Delivery::Signalled,
        _ => Delivery::NotDelivered(format!("{gone}, and its worker (pid {}) has exited", w.pid)),
    }
}

fn deliver(paths: &AttemptPaths, pane_pid: impl FnOnce() -> Option<i32>) -> Delivery {
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
    match procs::pidfd_send_signal(&fd, Signal::SIGUSR1) {
        Ok(()) => Delivery::Signalled,
        Err(e) => refuse(format!("SIGUSR1 to the worker (pid {}) failed: {e}", w.pid)),
    }
}
