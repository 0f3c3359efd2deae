//! Asking a worker to cancel.

use nix::sys::signal::Signal;

use super::SuperviseError;
use crate::envelope::{CancelRequest, WorkerFacts};
use crate::procs;
use crate::spec::now_rfc3339;
use crate::store::{self, AttemptPaths};

/// Writes `cancel.json`, then signals the worker (SIGUSR1) if it has started. A worker that
/// has not started yet finds `cancel.json` on its own. Returns whether a signal was sent.
pub fn request_cancel(paths: &AttemptPaths, grace_ms: u64) -> Result<bool, SuperviseError> {
    store::write_json_atomic(
        &paths.cancel(),
        &CancelRequest {
            requested_at: now_rfc3339(),
            grace_ms,
        },
    )?;
    let facts: Option<WorkerFacts> = store::read_json(&paths.worker()).ok().flatten();
    let Some(w) = facts.and_then(|f| f.worker) else {
        return Ok(false);
    };
    match procs::pidfd_for(&w) {
        Some(fd) => Ok(procs::pidfd_send_signal(&fd, Signal::SIGUSR1).is_ok()),
        None => Ok(false),
    }
}
