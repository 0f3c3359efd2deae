//! The supervisor side: observing, waiting, cancelling, holding stopped and continuing, and
//! recording lost attempts.
//!
//! Nothing here polls or prints. An attempt's state comes from its files and from whether its
//! worker process lives: [`observe`] reads them once; a [`Waiter`] holds any number of
//! attempts and sleeps in `poll(2)` on each attempt's `done.fifo` (hung up by the worker right
//! after `result.json` is in place), a pidfd per worker (readable the moment it dies), one
//! inotify instance for attempts whose worker is not known yet, and an eventfd that another
//! thread can write to wake it, with a timeout only for deadlines.
//!
//! Any observer re-adopts an attempt: if the worker is gone and no `result.json` exists, the
//! observer writes the `lost` envelope (with `O_EXCL`-like rename semantics, so exactly one
//! envelope ever exists).
//!
//! Common pitfalls:
//! * Watch before you look: open the FIFO (or add the inotify watch), then read the files, or
//!   a result written in between is missed.
//! * A dead worker may have just written `result.json`: re-check it before writing `lost`.
//! * Never signal a worker from `launch.json` alone: until `worker.json` exists it may not
//!   have blocked its signals yet. `cancel.json` (and `stop.json`) covers that window.
//! * Never signal a process because a record names it: a record may name any process. A
//!   worker is the process whose command line is `… __worker <its attempt dir>`
//!   ([`procs::is_worker_of`]); a program's process carries `SUBPANE_ATTEMPT_DIR`
//!   ([`procs::belongs_to_attempt`]).

mod cancel;
mod deliver;
mod lost;
mod observe;
mod stop;
mod waiter;

pub use cancel::request_cancel;
pub use deliver::Delivery;
pub use lost::{write_lost, write_unfinished};
pub use observe::{
    AttemptState, RunningInfo, STARTING_GRACE, WorkerSeen, observe, worker_identity,
};
pub use stop::request_stop;
pub use waiter::{Token, WaitEvent, Waiter, Waker};

/// Errors while supervising.
#[derive(Debug, thiserror::Error)]
pub enum SuperviseError {
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error("cannot watch {what}: {source}")]
    Watch {
        what: String,
        source: nix::errno::Errno,
    },
    /// The attempt's directory was removed under it: no record is left to read or write.
    #[error(
        "the attempt directory {} was removed while the attempt ran{}: its records are gone, and no envelope can be written",
        .dir.display(),
        .worker.map(|p| format!(" (its worker, pid {p}, has ended)")).unwrap_or_default()
    )]
    Vanished {
        dir: std::path::PathBuf,
        worker: Option<i32>,
    },
}
