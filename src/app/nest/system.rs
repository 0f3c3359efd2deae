//! The machine as a nested run's planner sees it: the caller's directory and variables, the
//! parent's tmux server and lineage, and of the file system only what the parent sees.
//!
//! ```text
//!  plan(request, home, &NestSystem)
//!    current_dir, vars ─► the request's (vars: only those the run needs, no SUBPANE_*)
//!                         + the parent's SUBPANE_* lineage (its depth and limit hold)
//!    canonicalize, is_dir, which, executable ─► the real machine, then refused unless the
//!                         parent's program sees the result (fit::reads)
//!    tmux_socket ─► the parent's server      read_to_string ─► refused (@FILE is read
//!    git_repo ─► none (no --worktree)                                  by the client)
//! ```
//!
//! Common pitfalls:
//! * A relative path is the caller's, not the server's: it is joined to the request's cwd.
//! * A path the sandbox resolves differently (its private `/tmp`, a hidden directory) must
//!   not resolve here either: such a result is "not found", never the host's file.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::fit;
use crate::app::{RealSystem, System};
use crate::git::RepoDirs;
use crate::spec::{RunId, SandboxSpec};
use crate::store::{Found, Home};

/// See the module docs.
pub(super) struct NestSystem<'a> {
    real: RealSystem,
    /// The parent's policy: what its program sees.
    parent: &'a SandboxSpec,
    /// The caller's directory (absolute).
    cwd: PathBuf,
    vars: Vec<(OsString, OsString)>,
    tmux_socket: PathBuf,
}

impl<'a> NestSystem<'a> {
    pub(super) fn new(
        parent: &'a SandboxSpec,
        cwd: PathBuf,
        vars: Vec<(OsString, OsString)>,
        tmux_socket: PathBuf,
    ) -> Self {
        Self {
            real: RealSystem,
            parent,
            cwd,
            vars,
            tmux_socket,
        }
    }

    fn in_sight(&self, p: &Path) -> bool {
        self.real
            .canonicalize(p)
            .is_ok_and(|r| fit::reads(self.parent, &r))
    }
}

impl System for NestSystem<'_> {
    fn current_dir(&self) -> std::io::Result<PathBuf> {
        Ok(self.cwd.clone())
    }
    fn canonicalize(&self, p: &Path) -> std::io::Result<PathBuf> {
        let abs = self.cwd.join(p);
        let real = self.real.canonicalize(&abs)?;
        if fit::reads(self.parent, &real) {
            Ok(real)
        } else {
            Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "the sandbox it was asked from cannot see it (a hidden path, or the sandbox's private /tmp)",
            ))
        }
    }
    fn is_dir(&self, p: &Path) -> bool {
        self.canonicalize(p).is_ok_and(|r| r.is_dir())
    }
    fn read_to_string(&self, p: &Path) -> std::io::Result<String> {
        Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "a run from a sandbox carries its text: `subpane run` inside reads {} itself",
                p.display()
            ),
        ))
    }
    fn read_record(&self, _p: &Path) -> std::io::Result<Vec<u8>> {
        Err(std::io::ErrorKind::PermissionDenied.into())
    }
    fn look_in_tree(&self, _tree: &Path, _rel: &str, _limit: u64) -> std::io::Result<Found> {
        // The child's repository view is its parent's or none (`fit`): a `.git` in the
        // parent's trees is the parent's program's files, read by nothing outside.
        Err(std::io::ErrorKind::PermissionDenied.into())
    }
    fn vars(&self) -> Vec<(OsString, OsString)> {
        self.vars.clone()
    }
    fn which(&self, program: &str, path: Option<&OsStr>, cwd: &Path) -> Option<PathBuf> {
        self.real
            .which(program, path, cwd)
            .filter(|p| self.in_sight(p))
    }
    fn executable(&self, p: &Path) -> Option<bool> {
        if self.in_sight(p) {
            self.real.executable(p)
        } else {
            None
        }
    }
    fn tmux_socket(&self) -> PathBuf {
        self.tmux_socket.clone()
    }
    fn now(&self) -> SystemTime {
        self.real.now()
    }
    fn new_run_id(&self) -> RunId {
        self.real.new_run_id()
    }
    fn arg_max(&self) -> usize {
        self.real.arg_max()
    }
    fn git_repo(&self, _dir: &Path) -> Option<RepoDirs> {
        None
    }
    fn attempt_ancestor_vars(&self) -> Vec<(OsString, OsString)> {
        // The parent's lineage is in `vars` already.
        Vec::new()
    }
    fn subpane_exe(&self) -> Option<PathBuf> {
        self.real.subpane_exe()
    }
    fn pi_session_dir(&self, home: &Home, id: &str) -> Option<PathBuf> {
        // A session of another run is refused by `fit` (its directory is the parent's
        // home); one of the parent's own sessions is in a tree the parent writes.
        self.real.pi_session_dir(home, id)
    }
}
