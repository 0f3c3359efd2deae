//! Asking a worker to cancel.

use nix::sys::signal::Signal;

use super::SuperviseError;
use crate::envelope::{CancelOrigin, CancelRequest, WorkerFacts};
use crate::fresh::now_rfc3339;
use crate::procs;
use crate::store::{self, AttemptPaths};

/// Writes `cancel.json` (with `origin`, who asked: the envelope's `cancelled_by`), then
/// signals the worker (SIGUSR1) if it has started. A worker that has not started yet finds
/// `cancel.json` on its own. Returns whether a signal was sent.
///
/// The worker is the process `worker.json` names only if it is this attempt's worker
/// ([`procs::is_worker_of`]); otherwise `pane_pid` is asked for the process of the attempt's
/// pane (the caller asks tmux), which must pass the same check. Nothing else is ever
/// signalled.
pub fn request_cancel(
    paths: &AttemptPaths,
    grace_ms: u64,
    origin: CancelOrigin,
    pane_pid: impl FnOnce() -> Option<i32>,
) -> Result<bool, SuperviseError> {
    store::write_json_atomic(
        &paths.cancel(),
        &CancelRequest::new(crate::fresh::request_id(), now_rfc3339(), grace_ms, origin),
    )?;
    let facts: Option<WorkerFacts> = store::read_json(&paths.worker()).ok().flatten();
    let recorded = facts.and_then(|f| f.worker);
    let worker = recorded
        .filter(|w| procs::is_worker_of(w, paths.dir()))
        .or_else(|| {
            // The record does not name the worker (it was not written yet, or not by the
            // worker): the pane knows its own process.
            recorded?;
            procs::proc_ref(pane_pid()?).filter(|w| procs::is_worker_of(w, paths.dir()))
        });
    let Some(w) = worker else {
        return Ok(false);
    };
    match procs::pidfd_for(&w) {
        // The pidfd is checked against the start time after it is opened: it is this process.
        Some(fd) => Ok(procs::pidfd_send_signal(&fd, Signal::SIGUSR1).is_ok()),
        None => Ok(false),
    }
}
