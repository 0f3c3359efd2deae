//! The application layer: everything a front end does with attempts, with no front end in it.
//!
//! ```text
//!  CLI flags ─┐
//!  fan-out line ─┼─► RunRequest ──plan(req, home, &dyn System)──► Plan ──start(home, plan)──► Started
//!  MCP call ──┘     (serde)        (pure: files and PATH          (resolved,      (attempt n: files,
//!                                   through a trait)               immutable)      pane, launch.json)
//!
//!  find_run ─► Found ─► status / cancel / logs paths        Waiter (supervisor) ─► wait, run, logs -f
//!  list ─► RunRow…      gc ─► GcReport
//! ```
//!
//! The command line, a fan-out file and an MCP server all turn their input into a
//! [`RunRequest`], hand it to [`plan`] (every rule of valid input lives there, tested without
//! a tmux server), and start the result with [`start`]. Answers come back as the typed
//! contract documents of [`crate::envelope`]; nothing here prints or knows about clap.
//!
//! Common pitfalls:
//! * A spawn failure is an outcome, not an error: [`start`] returns the `spawn` envelope in
//!   [`Started::spawn_failed`] once the attempt exists on disk.
//! * Environment values reach only the one-shot environment file: never a record, never a
//!   `Debug` string (see [`RunRequest`]'s and [`Plan`]'s `Debug`).

pub mod fanout;
mod group;
mod launch;
mod plan;
mod request;
mod retry;
mod runs;
mod seed;
mod start_many;
pub mod worktree;

pub use group::{group_runs, list_group};
pub use launch::{Started, start};
pub use plan::{Plan, RealSystem, System, plan};
pub use request::{RunRequest, parse_kv};
pub use retry::{DEFAULT_FOLLOW_UP, RetryOptions, RetryPlan, plan_retry, prepare_retry};
pub use runs::{
    AttemptStatus, CancelOutcome, Found, LogFile, WaitMode, WaitOptions, WaitProgress, WaitResult,
    attempt_status, cancel, find_run, gc, list, tmux_for, wait, wait_one, wait_targets, wait_with,
};
pub use start_many::start_many;

use crate::exit_code;

/// Why a call of the application layer did not do what was asked. Messages say what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The input was not valid: nothing was started (exit 2).
    #[error("{0}")]
    Invalid(String),
    /// Something went wrong on the way (exit 1).
    #[error("{0}")]
    Failed(String),
}

impl Error {
    pub fn invalid(m: impl Into<String>) -> Self {
        Error::Invalid(m.into())
    }
    pub fn failed(m: impl Into<String>) -> Self {
        Error::Failed(m.into())
    }
    /// The documented exit code.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Invalid(_) => exit_code::INVALID,
            Error::Failed(_) => exit_code::FAILED,
        }
    }
}

impl From<crate::store::StoreError> for Error {
    fn from(e: crate::store::StoreError) -> Self {
        Error::Failed(e.to_string())
    }
}

impl From<crate::supervisor::SuperviseError> for Error {
    fn from(e: crate::supervisor::SuperviseError) -> Self {
        Error::Failed(e.to_string())
    }
}
