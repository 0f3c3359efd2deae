//! One look at an attempt: finished, running, or starting. Writes `lost` when it must.

use std::time::{Duration, SystemTime};

use super::SuperviseError;
use super::lost::write_lost;
use crate::envelope::{Envelope, TmuxInfo};
use crate::envelope::{LaunchRecord, ProcRef, WorkerFacts};
use crate::procs;
use crate::spec::AttemptSpec;
use crate::store::{self, AttemptPaths};

/// How long an attempt may show no worker at all before it counts as lost.
pub const STARTING_GRACE: Duration = Duration::from_secs(30);

/// What is known of a running attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunningInfo {
    pub worker: ProcRef,
    pub agent: Option<ProcRef>,
    pub started_at: Option<String>,
    pub tmux: TmuxInfo,
}

/// The state of an attempt.
#[derive(Clone, Debug, PartialEq)]
pub enum AttemptState {
    Finished(Box<Envelope>),
    Running(RunningInfo),
    /// Created, but no worker is known yet; `since` is when the spec was written.
    Starting {
        since: SystemTime,
    },
}

/// What the records say of the worker, checked against the process table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkerSeen {
    /// A recorded process is alive: this attempt's worker when one passes
    /// [`procs::is_worker_of`], else the first one alive (a pane's process that has not
    /// exec'd the worker yet looks like that for a moment). Enough to wait on; before a
    /// signal, [`procs::is_worker_of`] is asked again.
    Alive(ProcRef),
    /// A worker was recorded, and every recorded process is gone.
    Gone(ProcRef),
    /// No worker recorded yet.
    Unknown,
}

/// The worker's identity: from `worker.json` and `launch.json`, the one that is this
/// attempt's worker first (a record may name any process; see [`WorkerSeen`]).
pub fn worker_identity(
    paths: &AttemptPaths,
) -> (WorkerSeen, Option<WorkerFacts>, Option<LaunchRecord>) {
    let facts: Option<WorkerFacts> = store::read_json(&paths.worker()).ok().flatten();
    let launch: Option<LaunchRecord> = store::read_json(&paths.launch()).ok().flatten();
    let recorded: Vec<ProcRef> = [
        facts.as_ref().and_then(|f| f.worker),
        launch.as_ref().and_then(|l| l.worker),
    ]
    .into_iter()
    .flatten()
    .collect();
    let seen = recorded
        .iter()
        .find(|w| procs::is_worker_of(w, paths.dir()))
        .or_else(|| recorded.iter().find(|w| procs::is_alive(w)))
        .map(|w| WorkerSeen::Alive(*w))
        .or_else(|| recorded.first().map(|w| WorkerSeen::Gone(*w)))
        .unwrap_or(WorkerSeen::Unknown);
    (seen, facts, launch)
}

fn finished(paths: &AttemptPaths) -> Result<Option<Envelope>, SuperviseError> {
    Ok(store::read_json::<Envelope>(&paths.result())?)
}

/// Looks at an attempt once. If its worker is gone without a result, writes the `lost`
/// envelope and returns it.
pub fn observe(paths: &AttemptPaths, spec: &AttemptSpec) -> Result<AttemptState, SuperviseError> {
    // A result.json that cannot be read while the worker lives is not the worker's (a
    // program may plant a link there): the worker's own, renamed into place, replaces it.
    let unreadable = match finished(paths) {
        Ok(Some(env)) => return Ok(AttemptState::Finished(Box::new(env))),
        Ok(None) => None,
        Err(e) => Some(e),
    };
    let (seen, facts, launch) = worker_identity(paths);
    if let (Some(e), false) = (unreadable, matches!(seen, WorkerSeen::Alive(_))) {
        return Err(e);
    }
    let why = match seen {
        WorkerSeen::Alive(w) => {
            let tmux = facts
                .as_ref()
                .map(|f| f.tmux.clone())
                .unwrap_or_else(|| TmuxInfo {
                    socket: launch.as_ref().map(|l| l.socket.clone()),
                    session: launch.as_ref().map(|l| l.session.clone()),
                    pane_id: launch.as_ref().map(|l| l.pane_id.clone()),
                });
            return Ok(AttemptState::Running(RunningInfo {
                worker: w,
                agent: facts.as_ref().and_then(|f| f.agent),
                started_at: facts.as_ref().and_then(|f| f.started_at.clone()),
                tmux,
            }));
        }
        WorkerSeen::Gone(w) => format!(
            "the worker (pid {}) ended without writing a result: it was killed (or its pane or tmux server was), or it could not write to the subpane home (full disk?)",
            w.pid
        ),
        WorkerSeen::Unknown if launch.is_some() => {
            "the pane's process had exited before the worker could start".to_owned()
        }
        WorkerSeen::Unknown => {
            let since = std::fs::metadata(paths.spec())
                .and_then(|m| m.modified())
                .unwrap_or_else(|_| SystemTime::now());
            if since.elapsed().unwrap_or_default() < STARTING_GRACE {
                return Ok(AttemptState::Starting { since });
            }
            format!(
                "no worker was recorded within {}s of the launch; the launcher was probably killed",
                STARTING_GRACE.as_secs()
            )
        }
    };
    // The worker writes its result before it exits: look again before declaring it lost.
    if let Some(env) = finished(paths)? {
        return Ok(AttemptState::Finished(Box::new(env)));
    }
    Ok(AttemptState::Finished(Box::new(write_lost(
        paths, spec, &why,
    )?)))
}
