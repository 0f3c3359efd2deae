//! Files: where things live under `$SUBPANE_HOME`, and how they are written.
//!
//! ```text
//! $SUBPANE_HOME/
//!   tmux.conf                         config of the private tmux server
//!   runs/<run-id>/run.json            request, labels, attempt list
//!   runs/<run-id>/attempts/<n>/       one attempt: spec.json, launch.json, worker.json,
//!                                     events.jsonl, stdout.log, stderr.log, output.txt,
//!                                     cancel.json, result.json; .env (emptied, then it
//!                                     becomes worker.json), .worker-running.json
//!                                     (--worktree: worktree.status.txt, worktree.diff.patch;
//!                                     --sandbox in a repository: git-refused.bundle)
//!                   attempts/<n>/out/ the program's own artifacts ($SUBPANE_OUT_DIR)
//!   runs/<run-id>/sessions/           pi's saved sessions of the run (--resume)
//!   worktrees/<run-id>-<n>/           the git worktree of a --worktree attempt
//! ```
//!
//! Every JSON file is written to a temporary file in the same directory, then renamed, so a
//! reader never sees a partial file. `result.json` is fsynced (the file, then its directory)
//! before any waiter is told; the worker fsyncs the other records after it, before it exits:
//! those written before the program started (`spec.json`, `run.json`, `prompt.txt`,
//! [`sync_launch_records`]; sooner when the program runs long) and its own last ones
//! (`worker.json`, `output.txt`, [`sync_end_records`]). `launch.json`, the running
//! `worker.json` and `progress.json` describe live processes and are never fsynced. Every file of an attempt directory is
//! opened without following links and read with a size limit (`nofollow.rs`): subpane's
//! records are its own, and what a program put under their names is never taken for them.
//! A tree a program wrote (`out/`, the git overlay, the workspace's git files) is another
//! type, [`ProgramTree`] (`tree.rs`): walked, read and linked only through it.

mod artifacts;
mod atomic;
mod layout;
mod lock;
mod nofollow;
mod records;
mod tree;

pub use artifacts::{OUT_MAX_DEPTH, OUT_MAX_FILES, Written, collect_artifacts, sha256_file};
pub use atomic::{
    Spare, read_json, replace_json_keeping, sync_written, write_atomic, write_atomic_unsynced,
    write_json_atomic, write_json_new, write_json_unsynced,
};
pub use layout::{AttemptPaths, Home};
pub use lock::Exclusive;
pub use nofollow::{RECORD_LIMIT, create_new, open_read, read_bounded};
pub use records::{
    CreateError, DamagedEntry, REMOTE_MARKER, RunEntry, add_attempt, create_run, list_runs,
    make_done_fifo, read_run, sync_end_records, sync_launch_records, take_env_file,
    write_attempt_files, write_env_file, write_result,
};
pub use tree::{Entry, Found, Kind, ProgramTree};

/// Errors of the file layer. Messages say what to do next.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "cannot write {path}: {source}; check that the subpane home is writable and has free space (set --home or SUBPANE_HOME to move it)"
    )]
    Write {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("cannot read {path}: {source}")]
    Read {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{path} is larger than {} MiB, more than subpane ever writes there: the record is damaged",
        .limit >> 20
    )]
    TooLarge {
        path: std::path::PathBuf,
        limit: u64,
    },
    #[error("{path} is not valid: {source}")]
    Corrupt {
        path: std::path::PathBuf,
        source: serde_json::Error,
    },
}

/// The spec of a plain attempt (`command`, no sandbox, no worktree), for tests.
#[cfg(test)]
pub(crate) fn plain_spec() -> crate::spec::AttemptSpec {
    serde_json::from_value(serde_json::json!({
        "schema": "subpane.spec/v1", "run_id": "r", "attempt": 1, "agent": "command",
        "argv": ["/bin/true"], "cwd": "/", "stdin": "null", "labels": {},
        "correlation_id": null,
        "limits": {"timeout_ms": null, "idle_timeout_ms": null, "linger_ms": 0, "grace_ms": 0},
        "env": {"inherit": true, "set": [], "removed": []}, "task": null,
        "keep_session": false, "tmux": {"socket": "/tmp/s", "session": "r-1"},
        "sandbox": {"enabled": false}, "created_at": "2026-12-01T00:00:00.000Z"
    }))
    .expect("a plain spec")
}
