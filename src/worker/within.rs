//! A run from inside a sandbox lives within its parent's attempt: its worker watches the
//! parent's worker and cancels its own attempt when that one is gone.
//!
//! ```text
//!  spec.within {run_id, attempt, worker: ProcRef}      (set by the parent's server, app::nest)
//!  start: pidfd on the parent's worker, checked against its start time
//!     gone already ─► cancelled before the start (the program never runs)
//!  poll(2): the pidfd is readable once the parent's worker has exited, however it ended
//!     (its attempt completed, timed out or was cancelled; the worker killed, even SIGKILL)
//!     ─► cancel with the run's grace, "cancelled by the end of its parent attempt …"
//! ```
//!
//! Why the parent's worker and not its server or its program: the worker is the last of the
//! parent's attempt to end (after its envelope), and a pidfd on it needs no polling and no
//! help from it: the kernel reports the exit of a process killed outright. The parent's
//! server cancels the runs its clients wait for earlier, when the parent's program ends.
//!
//! Common pitfalls:
//! * A pid alone is not the parent's worker: the pidfd is taken first, then the start time
//!   checked (`procs::pidfd_for`), so it never watches a process that reused the pid.
//! * A stop already under way is left alone: a second cancel would kill at once, cutting
//!   the grace short.
//! * The pidfd stays readable once the parent has exited: it is dropped when acted on, or
//!   the poll loop would spin.

use super::run::Worker;
use crate::procs;

impl Worker {
    /// Starts watching the parent's worker, when the attempt lives within one; whether the
    /// parent still runs (always, for an attempt of its own).
    pub(crate) fn watch_parent(&mut self) -> bool {
        let Some(w) = &self.spec.within else {
            return true;
        };
        self.parent = procs::pidfd_for(&w.worker);
        self.parent.is_some()
    }

    /// The parent's attempt has ended: this one is cancelled with its grace, saying why.
    pub(crate) fn parent_ended(&mut self) {
        self.parent = None;
        if self.life.stop().is_some() {
            return;
        }
        if self.cancelled_by.is_none() {
            self.cancelled_by = self.spec.within.as_ref().map(|w| {
                let origin = crate::envelope::CancelOrigin::Parent;
                let words = format!("{} ({} attempt {})", origin.words(), w.run_id, w.attempt);
                (origin, words)
            });
        }
        self.cancel_requested(false);
    }
}
