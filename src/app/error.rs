//! [`Error`]: why a call of the application layer did not do what was asked, with the error
//! of the layer below as its source.
//!
//! ```text
//!  spec (DurationError, RunIdError) ─┐
//!  store (StoreError, CreateError) ──┤
//!  supervisor (SuperviseError) ──────┼─► app::Error ─► cli::CliError ─► exit code + message
//!  git (GitError) ───────────────────┤                  (one place: cli/error.rs)
//!  the request itself (Invalid) ─────┘              ─► mcp::ToolError ─► tool error
//!                                                       (one place: mcp/error.rs)
//! ```
//!
//! The application layer says what went wrong; each front end decides what that means for it
//! (an exit code, a tool error), in one place. [`Error::nothing_started`] is the one fact both
//! need: whether the input was refused before anything was made.
//!
//! Common pitfalls:
//! * Messages are lowercase and say what to do next; the source's own message is part of the
//!   text (front ends print `Display` only, never walk the chain), so a variant that wraps
//!   a source says only what was being done.

use std::path::PathBuf;
use std::sync::Arc;

use crate::git::GitError;
use crate::spec::{DurationError, RunIdError};
use crate::store::{CreateError, StoreError};
use crate::supervisor::SuperviseError;

/// Why a call of the application layer did not do what was asked. Messages say what to do.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request was not valid: nothing was started.
    #[error("{0}")]
    Invalid(#[from] super::Invalid),
    /// A duration in the request was not valid: nothing was started.
    #[error(transparent)]
    Duration(#[from] DurationError),
    /// A run id in the request was not valid: nothing was started.
    #[error(transparent)]
    RunId(#[from] RunIdError),
    /// The records of a new attempt could not be made: nothing was started.
    #[error("{}", not_created(.0))]
    NotCreated(#[source] CreateError),
    /// The subpane home could not be made ready for a start: nothing was started.
    #[error(
        "cannot create the subpane home {path}: {source}; set --home or SUBPANE_HOME to a writable directory"
    )]
    HomeDir {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A file of the home could not be written before a start: nothing was started.
    #[error(transparent)]
    HomeFile(StoreError),
    /// `worktree`: git refused to make the attempt's worktree: nothing was started.
    #[error("the worktree: {what}: {source}; nothing was started")]
    WorktreeNotMade { what: String, source: GitError },
    /// A record could not be read or written.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Waiting, observing or cancelling failed.
    #[error(transparent)]
    Supervise(#[from] SuperviseError),
    /// A record that must exist is missing or names the impossible.
    #[error("{path} {problem}; the run's record is damaged")]
    Damaged { path: PathBuf, problem: String },
    /// The running binary cannot be found to start a worker.
    #[error("cannot find the subpane binary: {0}")]
    CurrentExe(#[source] std::io::Error),
    /// A directory could not be removed (`gc`).
    #[error("cannot remove {path}: {source}")]
    Remove {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A kept worktree could not be removed (`gc`).
    #[error("cannot remove the worktree {path}: {source}")]
    WorktreeNotRemoved { path: PathBuf, source: GitError },
    /// A kept worktree could not be removed by git nor as a directory (`gc`).
    #[error("cannot remove the worktree {path}: {git}; nor its directory: {source}")]
    WorktreeDirNotRemoved {
        path: PathBuf,
        git: GitError,
        source: std::io::Error,
    },
    /// The worktree lock could not be taken (`gc`).
    #[error("cannot take the worktree lock: {0}")]
    WorktreeLock(#[source] GitError),
    /// A cancel that could not be delivered: nothing was signalled.
    #[error(
        "the cancel of run {run} (attempt {attempt}) was not delivered: {why}; nothing was signalled. To end the run anyway, close its pane: `tmux -S {socket} kill-session -t ={session}`"
    )]
    CancelNotDelivered {
        run: String,
        attempt: u32,
        why: String,
        socket: String,
        session: String,
    },
    /// A request to hold an agent stopped (or continue it) that could not be delivered:
    /// nothing was signalled.
    #[error(
        "the {} of run {run} (attempt {attempt}) was not delivered: {why}; nothing was signalled",
        if *.stopped { "pause" } else { "resume" }
    )]
    StopNotDelivered {
        run: String,
        attempt: u32,
        stopped: bool,
        why: String,
    },
    /// An attempt the caller waited for ended, but no envelope could be read.
    #[error("the attempt ended without an envelope")]
    NoEnvelope,
    /// A message for a running agent was not taken (the agent ended first, the worker
    /// could not be reached).
    #[error("{0}")]
    NotSent(String),
    /// A batch start ended without a word about this plan.
    #[error("the attempt was not started")]
    NotStarted,
    /// A nested run from a sandbox could not be asked for or served.
    #[error(transparent)]
    Nest(#[from] super::nest::NestError),
    /// The same error, for each plan of a batch it stopped.
    #[error(transparent)]
    Shared(Arc<Error>),
}

impl Error {
    /// The request as a whole was not valid (`{field}` in `m` names a field).
    pub fn invalid(m: impl Into<String>) -> Self {
        Error::Invalid(super::Invalid::whole(m))
    }

    /// [`Invalid::about`](super::Invalid::about) as an error.
    pub fn about(subject: &str, problem: impl Into<String>) -> Self {
        Error::Invalid(super::Invalid::about(subject, problem))
    }

    /// The message in an edge's words: fields as `spell` writes them.
    pub fn render(&self, spell: super::Spell) -> String {
        match self {
            Error::Invalid(i) => i.render(spell),
            Error::Shared(e) => e.render(spell),
            Error::Duration(e) if super::field::field(&e.flag).is_some() => {
                super::Invalid::new(&e.flag, e.problem())
                    .hint(e.hint())
                    .render(spell)
            }
            other => match spell {
                super::Spell::Line(n) => format!("line {n}: {}", spell.text(&other.to_string())),
                super::Spell::Task(n) => format!("task {n}: {}", spell.text(&other.to_string())),
                _ => spell.text(&other.to_string()),
            },
        }
    }

    /// Whether the request was refused before anything was made (the CLI's exit 2).
    pub fn nothing_started(&self) -> bool {
        match self {
            Error::Invalid(_)
            | Error::Duration(_)
            | Error::RunId(_)
            | Error::NotCreated(_)
            | Error::HomeDir { .. }
            | Error::HomeFile(_)
            | Error::WorktreeNotMade { .. } => true,
            Error::Shared(e) => e.nothing_started(),
            Error::Store(_)
            | Error::Supervise(_)
            | Error::Damaged { .. }
            | Error::CurrentExe(_)
            | Error::Remove { .. }
            | Error::WorktreeNotRemoved { .. }
            | Error::WorktreeDirNotRemoved { .. }
            | Error::WorktreeLock(_)
            | Error::NoEnvelope
            | Error::CancelNotDelivered { .. }
            | Error::StopNotDelivered { .. }
            | Error::NotStarted
            | Error::NotSent(_)
            | Error::Nest(_) => false,
        }
    }
}

impl From<CreateError> for Error {
    fn from(e: CreateError) -> Self {
        Error::NotCreated(e)
    }
}

fn not_created(e: &CreateError) -> String {
    match e {
        CreateError::Exists(_) | CreateError::NoRun(_) => e.to_string(),
        CreateError::Store(s) => format!("nothing was started: {s}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn the_source_is_kept_and_the_message_says_it_once() {
        let io = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let e = Error::from(StoreError::Write {
            path: "/h/runs".into(),
            source: io,
        });
        assert!(!e.nothing_started());
        let src = e.source().expect("a source");
        assert!(src.to_string().contains("denied"), "{src}");
        let e = Error::from(CreateError::Store(StoreError::Read {
            path: "/h/x".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        }));
        assert!(e.nothing_started());
        assert!(
            e.to_string()
                .starts_with("nothing was started: cannot read /h/x")
        );
        assert!(e.source().is_some());
    }

    #[test]
    fn a_shared_error_is_the_one_it_shares() {
        let e = Error::Shared(Arc::new(Error::invalid("bad")));
        assert!(e.nothing_started());
        assert_eq!(e.to_string(), "bad");
    }
}
