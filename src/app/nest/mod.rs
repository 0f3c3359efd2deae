//! Nested runs from a sandbox: a sandboxed program's `subpane run` asks its attempt's worker,
//! which plans the child as a run of the real home, within the parent's policy.
//!
//! ```text
//!  inside the sandbox                           outside (a process the worker starts)
//!  subpane run … ─ client.rs ─ NestRequest ─► nest.sock ─► listen.rs: one thread a client
//!    (@FILE read here; the vars the run         │  bounded: 4 MiB, 10 s, 64 clients
//!     needs; its cwd)                           │  admit: sandboxed; no --worktree, no
//!                                               │    loader variables, no task file
//!                                               │  plan(request, the parent's home,
//!                                               │       NestSystem)          system.rs
//!                                               │    (the caller's cwd and vars, the parent's
//!                                               │     tmux server and lineage; only paths
//!                                               │     the parent sees)
//!                                               │  fit(parent's policy, child's)  fit.rs
//!                                               │  bind: at most 16 live; processes and
//!                                               │    /tmp a grant out of the parent's own
//!                                               │    (budget.rs, sandbox::resize); the child
//!                                               │    lives within the parent's attempt
//!                                               │  app::run: start, wait; a client gone
//!    ◄── Started, then Detached | Finished ─────┘    or interrupting ─► cancel
//!        | Refused {exit_code, message}             the child's end ─► its grant back
//!
//!  the parent's worker exits (however its attempt ended) ─► the child's worker cancels
//!  its attempt (worker::within: a pidfd on the parent's worker)
//! ```
//!
//! The sandboxed program controls every byte it sends. It never names a home, a tmux server
//! or a policy: the home is the parent's, the server the parent's, the policy the planner's
//! from the request, then checked and tightened against the parent's by [`fit`]. Every path it
//! names is resolved outside and taken only if the parent sees it ([`system`]).
//!
//! Common pitfalls:
//! * The worker's own environment is not the caller's: the plan's `System` is
//!   [`system::NestSystem`], never `RealSystem`.
//! * A path the parent may write can be swapped for a link before the child's sandbox is set
//!   up: the child's policy names only paths the parent cannot change (see `fit.rs`).
//! * The sandbox helper starts outside the sandbox with the program's environment: variables
//!   the dynamic loader or the C library act on ([`LOADER_VARS`]) are refused.
//! * A client that closes its write side is gone: its waited run is cancelled.
//! * A nested run is bounded by its parent: it ends with the parent's attempt, and its
//!   processes and `/tmp` come out of the parent's (the parent's sandbox has that much less
//!   while it lives), so neither detaching nor starting many outgrows the parent.

mod admit;
mod budget;
mod client;
mod fit;
mod listen;
mod system;

/// Why a nested run could not be asked for or served (over the attempt's socket).
#[derive(Debug, thiserror::Error)]
pub enum NestError {
    #[error(
        "cannot reach the worker of this sandbox at {} ({source}): runs from a sandbox are started by it; is the attempt ending?",
        .socket.display()
    )]
    Unreachable {
        socket: std::path::PathBuf,
        source: std::io::Error,
    },
    /// Talking over the socket failed (`what`: what was being done).
    #[error("{what}: {source}")]
    Io {
        what: &'static str,
        source: std::io::Error,
    },
    /// A message could not be written or read as JSON.
    #[error("{what}: {source}")]
    Json {
        what: &'static str,
        source: serde_json::Error,
    },
    #[error(
        "the worker of this sandbox ended the request without an answer (is the attempt ending?)"
    )]
    NoAnswer,
    #[error("the sandboxed attempt is ending: it starts no more runs")]
    Ending,
    #[error(
        "too many runs asked for at once from this sandbox (at most {clients} served, {sending} sending): try again when some have ended"
    )]
    Busy { clients: usize, sending: usize },
    #[error("stopped waiting for run {0}")]
    StoppedWaiting(String),
}

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{Error, OutputEnd, RunRequest};
use crate::envelope::{self, Envelope};

pub use client::{Client, Interrupts, socket_of_caller};
pub(super) use fit::reads as sees;
pub use listen::serve;

/// The most a request may take on the wire, its task and variables included.
pub const REQUEST_LIMIT: usize = 4 << 20;

/// Variables the dynamic loader or the C library act on when a process starts (glibc's list
/// of unsafe variables for set-user-id programs, and every `LD_` one). The sandbox helper
/// starts outside the sandbox with the program's environment, so a nested run may not set
/// or pass them (a trailing `*` is a prefix).
pub const LOADER_VARS: &[&str] = &[
    "LD_*",
    "GCONV_PATH",
    "GETCONF_DIR",
    "GLIBC_TUNABLES",
    "HOSTALIASES",
    "LOCALDOMAIN",
    "LOCPATH",
    "MALLOC_*",
    "NIS_PATH",
    "NLSPATH",
    "RESOLV_HOST_CONF",
    "RES_OPTIONS",
    "TZDIR",
];

/// What `subpane run` inside a sandbox sends its worker: one JSON line, at most
/// [`REQUEST_LIMIT`] bytes. After it, the client may send `"interrupt"` lines (Ctrl-C);
/// closing the connection, or its write side, gives up the run (a waited one is cancelled).
///
/// ```json
/// {"request": {"argv": ["make", "test"], "run_id": "t1"}, "cwd": "/src/app",
///  "vars": {"PATH": "/usr/bin:/bin", "HOME": "/home/u"}, "detach": false}
/// ```
///
/// `request` is the [`RunRequest`] the command line makes, with `@FILE` already read;
/// `cwd` the caller's directory; `vars` the caller's variables the run needs (values: only
/// ever in the child's one-shot environment file; `Debug` shows names).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NestRequest {
    pub request: RunRequest,
    pub cwd: PathBuf,
    #[serde(default)]
    pub vars: BTreeMap<String, String>,
    #[serde(default)]
    pub detach: bool,
}

impl std::fmt::Debug for NestRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NestRequest")
            .field("request", &self.request)
            .field("cwd", &self.cwd)
            .field("vars", &self.vars.keys().collect::<Vec<_>>())
            .field("detach", &self.detach)
            .finish()
    }
}

/// A line from the client after its request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientLine {
    /// Ctrl-C: the first cancels the run with its grace, a later one at once.
    Interrupt,
}

/// What the worker answers, one JSON line each: `started` once the run exists, then one of
/// the others (or `refused` alone, when nothing was started).
///
/// ```json
/// {"started": {"answer": {"run_id": "t1", "attempt": 1, "status": "running", "attempt_dir": "…",
///  "tmux": {"socket": "…", "session": "t1-1"}}, "warnings": [], "spawn_error": null}}
/// ```
/// ```json
/// {"refused": {"exit_code": 2, "message": "--network full: the parent sandbox's network is none, …"}}
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[allow(clippy::large_enum_variant)] // one per answer
pub enum Reply {
    /// The run exists; `spawn_error` when its pane could not start.
    Started {
        answer: envelope::Started,
        warnings: Vec<String>,
        spawn_error: Option<String>,
    },
    /// `detach`: the run goes on.
    Detached,
    /// The run ended: its envelope, and the ends of its output for the human summary (a
    /// command's stdout; stderr when it did not complete).
    Finished {
        envelope: Box<Envelope>,
        stdout_end: Option<OutputEnd>,
        #[serde(default)]
        stderr_end: Option<OutputEnd>,
    },
    /// Nothing was started, or the wait failed: the exit code `run` exits with, and why.
    Refused { exit_code: i32, message: String },
}

impl Reply {
    fn refused(e: &Error) -> Self {
        Reply::Refused {
            exit_code: if e.nothing_started() {
                crate::exit_code::INVALID
            } else {
                crate::exit_code::FAILED
            },
            message: e.to_string(),
        }
    }
}
