//! Envelopes the worker did not write: `lost` (written by whichever observer first finds a
//! dead worker) and a pane that never started (`spawn`, written by the launcher).

use std::ffi::OsStr;

use nix::sys::signal::Signal;

use super::SuperviseError;
use crate::envelope::{self, Envelope, Facts, Output};
use crate::envelope::{WorkerFacts, WorktreeInfo};
use crate::fresh::now_rfc3339;
use crate::procs;
use crate::spec::AttemptSpec;
use crate::store::{self, AttemptPaths};

/// Kills what is left of the attempt and writes `failure_kind: "lost"`. If another observer
/// wrote the envelope first, theirs is returned.
pub fn write_lost(
    paths: &AttemptPaths,
    spec: &AttemptSpec,
    why: &str,
) -> Result<Envelope, SuperviseError> {
    write_unfinished(
        paths,
        spec,
        Facts {
            start: envelope::Start::Lost,
            ..Facts::default()
        },
        why,
    )
}

/// The envelope of an attempt whose worker wrote none: what `decided` says, with `why` as its
/// error. Kills what is left of the attempt first. If an envelope exists already, it stands.
pub fn write_unfinished(
    paths: &AttemptPaths,
    spec: &AttemptSpec,
    decided: Facts,
    why: &str,
) -> Result<Envelope, SuperviseError> {
    // The worker never read the environment file: its values must not stay on disk.
    let _ = std::fs::remove_file(paths.env_file());
    let mut facts: WorkerFacts = store::read_json(&paths.worker())
        .ok()
        .flatten()
        .unwrap_or_default();
    let mut killed = 0u64;
    if let Some(agent) = facts.agent {
        // Only the attempt's own program: a record may name any process.
        if procs::is_alive(&agent) && procs::belongs_to_attempt(agent.pid, paths.dir()) {
            procs::signal_group(agent.pid, Signal::SIGKILL);
            killed += 1;
        }
    }
    // Descendants that left the group still carry the attempt's marker in their environment.
    for pid in procs::with_env("SUBPANE_ATTEMPT_DIR", OsStr::new(paths.dir().as_os_str())) {
        procs::signal_pid(pid, Signal::SIGKILL);
        killed += 1;
    }
    facts.cleanup.killed_descendants += killed;
    facts.finished_at = Some(now_rfc3339());
    if killed > 0 {
        facts.signals_sent.push("SIGKILL".into());
    }
    let mut output = Output::default();
    output.push_error(why);
    let outcome = envelope::decide(&decided);
    let (artifacts, note) = store::collect_artifacts(paths, spec, &[]);
    if let Some(n) = note {
        output.push_error(n);
    }
    if let Some(wt) = &spec.worktree {
        // The worker did not get to its end: the worktree stays for `subpane gc`.
        if facts.worktree.is_none() {
            let kept = wt.path.exists();
            facts.worktree = Some(WorktreeInfo {
                path: wt.path.display().to_string(),
                branch: wt.branch.clone(),
                base: wt.base.clone(),
                kept,
                branch_kept: kept,
            });
        }
    }
    let env = envelope::build(spec, &facts, output, outcome, artifacts);
    // The worker may not have made the launch records durable: the envelope must never be
    // on disk without them.
    store::sync_launch_records(paths);
    let written = store::write_result(paths, &env)?;
    if written {
        Ok(env)
    } else {
        Ok(store::read_json(&paths.result())?.unwrap_or(env))
    }
}
