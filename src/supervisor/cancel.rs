//! Asking a worker to cancel: `cancel.json`, then SIGUSR1 (the way of every request to a
//! worker: `deliver.rs`).
//!
//! ```text
//!  attempt directory there ─► cancel.json ─► deliver (SIGUSR1) ─► Signalled | Pending
//!                                                               | NotDelivered(why)
//!  no attempt directory (removed under the run) ─► the pane's process, if it is the worker:
//!                                                   SIGTERM (the run's grace)
//! ```
//!
//! Common pitfalls:
//! * A refused cancel must not be reported as requested, nor left in `cancel.json` for the
//!   envelope to claim later (`deliver::ask` removes it).

use nix::sys::signal::Signal;

use super::SuperviseError;
use super::deliver::{Delivery, ask};
use crate::envelope::{CancelOrigin, CancelRequest};
use crate::fresh::now_rfc3339;
use crate::procs;
use crate::store::AttemptPaths;

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
    let request = CancelRequest::new(
        crate::fresh::request_id(),
        now_rfc3339(),
        grace_ms,
        origin,
        budget.cloned(),
    );
    ask(paths, &paths.cancel(), &request, Signal::SIGUSR1, pane_pid)
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
