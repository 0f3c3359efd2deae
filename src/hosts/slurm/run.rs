//! A run on a Slurm host: one batch job. Its records are kept by the host's own subpane in
//! the shared home (`--remote-home`, seen alike by this machine and the nodes); this side
//! submits, reads those records, and asks Slurm what its records cannot say.
//!
//! ```text
//!  start ─► SHARED/slurm/ID/request.json (0600; the job takes it) + job.sh
//!        ─► sbatch --parsable … job.sh ─► the job id, in runs/ID/host.json here
//!  the job, on a node: BIN --home SHARED __slurm-job ID ─► plans and starts the attempt in
//!        a tmux server of its own there, waits for its end, stops that server; a SIGTERM
//!        (scancel, the time limit) cancels it as Slurm's state says (cli/slurm_job.rs)
//!  status ─► SHARED's envelope │ squeue: queued (reason) │ running: `status` on its node
//!  wait   ─► the shared records watched (inotify) + the host's one squeue a QUEUE_EVERY
//!  cancel ─► queued: scancel │ running: `cancel` on its node (srun --overlap), scancel
//!            as the fallback
//!  ended without an envelope ─► recorded here with Slurm's state: TIMEOUT ─► timeout,
//!            CANCELLED ─► cancelled, anything else ─► lost
//! ```
//!
//! Common pitfalls:
//! * A worker's pid means nothing off its node: whether a running attempt lives is asked on
//!   its node (`srun --overlap --jobid J`), never judged here from the shared records.
//! * `proctrack/linuxproc` does not follow the job's tmux server (it daemonises): the job
//!   stops it itself, and a SIGTERM to the job cancels the attempt through its worker.

use std::time::{Duration, Instant};

use super::queue::{self, JobState};
use crate::envelope::{self, CancelOrigin, Envelope, FailureKind, LiveStatus, Status};
use crate::hosts::remote::{self, Answer, RemoteRun};
use crate::hosts::{Host, HostsError};
use crate::spec::RunId;
use crate::store::{self, Home, StoreError};

pub use super::submit::{
    SlurmRetry, bin, job_dir, job_files, plan_there, retry, shared_home, started, submit,
    time_limit,
};
pub use super::view::{command, rows};

fn job_of(run: &RemoteRun) -> Result<&str, HostsError> {
    run.job_id.as_deref().ok_or_else(|| HostsError::Check {
        name: run.host.name.clone(),
        why: format!("run {} has no Slurm job recorded", run.run_id),
    })
}

/// The envelope the job's attempt wrote in the shared home, if it has ended.
pub(super) fn shared_envelope(run: &RemoteRun, attempt: u32) -> Option<Vec<u8>> {
    let shared = shared_home(&run.host).ok()?;
    let id = RunId::parse(&run.run_id).ok()?;
    store::read_bounded(&shared.attempt(&id, attempt).result(), store::RECORD_LIMIT)
        .ok()
        .flatten()
}

/// How long an envelope a job that ended by itself wrote may stay unseen here (a write of
/// its node over NFS) before the run is taken as lost.
const ENVELOPE_PATIENCE: Duration = Duration::from_secs(30);

/// How long a job Slurm just signalled may read `COMPLETING` before its final state is
/// taken as unknown.
const ENDING: Duration = Duration::from_secs(10);

/// Records the shared envelope here. An attempt that a signal stopped (Slurm's: `scancel`,
/// the time limit, a preemption) gets Slurm's final state, and the outcome it means: a
/// preempted job's attempt was lost, not cancelled by anyone.
fn record_shared(home: &Home, run: &RemoteRun, bytes: &[u8]) -> Result<Envelope, HostsError> {
    let mut env = remote::record(home, run, bytes)?;
    let by_slurm = matches!(
        env.cancelled_by,
        Some(CancelOrigin::Signal | CancelOrigin::Timeout)
    );
    let Some(job) = run.job_id.as_deref().filter(|_| by_slurm) else {
        return Ok(env);
    };
    let Some(JobState::Ended { state, .. }) = queue::final_state(&run.host, job, ENDING) else {
        return Ok(env);
    };
    if !matches!(
        state.as_str(),
        "CANCELLED" | "TIMEOUT" | "DEADLINE" | "COMPLETED" | "FAILED"
    ) {
        env.status = Status::Failed;
        env.failure_kind = Some(FailureKind::Lost);
        env.cancelled_by = None;
        env.output.push_error(format!(
            "Slurm ended its job {job} ({state}): the attempt was lost"
        ));
    }
    if let Some(h) = env.host.as_mut() {
        h.state = Some(state);
    }
    rewrite(home, run, &env)?;
    Ok(env)
}

fn rewrite(home: &Home, run: &RemoteRun, env: &Envelope) -> Result<(), HostsError> {
    let id = RunId::parse(&run.run_id).map_err(|e| HostsError::Input(e.to_string()))?;
    let paths = home.attempt(&id, env.attempt);
    std::fs::create_dir_all(paths.dir()).map_err(|source| StoreError::Write {
        path: paths.dir().to_path_buf(),
        source,
    })?;
    store::write_json_atomic(&paths.result(), env)?;
    Ok(())
}

/// The envelope of an attempt whose job Slurm ended before it wrote one: Slurm's state says
/// how (`TIMEOUT`: timeout; `CANCELLED`: cancelled; else lost), recorded here.
fn ended_by_slurm(
    home: &Home,
    run: &RemoteRun,
    state: &str,
    reason: &str,
    origin: Option<CancelOrigin>,
) -> Result<Envelope, HostsError> {
    let (status, kind, cancelled_by) = match state {
        "TIMEOUT" | "DEADLINE" => (
            Status::Failed,
            FailureKind::Timeout,
            Some(CancelOrigin::Timeout),
        ),
        "CANCELLED" => (
            Status::Cancelled,
            FailureKind::Cancelled,
            Some(origin.unwrap_or(CancelOrigin::Signal)),
        ),
        _ => (Status::Failed, FailureKind::Lost, None),
    };
    let job = run.job_id.as_deref().unwrap_or("?");
    let why = match state {
        "" => format!(
            "its Slurm job {job} ended, and Slurm no longer knows how; no envelope was written"
        ),
        s => format!(
            "Slurm ended its job {job} ({s}{}) before its attempt wrote an envelope",
            if reason.is_empty() || reason == "None" {
                String::new()
            } else {
                format!(", {reason}")
            }
        ),
    };
    // What the job itself said (a request its node refused, say), when it said anything.
    let said = shared_home(&run.host)
        .ok()
        .and_then(|h| std::fs::read(&job_files(&job_dir(&h, &run.run_id), run.attempt)[2]).ok())
        .map(|b| {
            let tail = &b[b.len().saturating_sub(400)..];
            crate::term::sanitize(String::from_utf8_lossy(tail).trim().as_bytes(), 400)
        })
        .filter(|s| !s.is_empty());
    let why = match said {
        Some(s) => format!("{why}; the job's output ends: {s}"),
        None => why,
    };
    let mut env = remote::local_end(run, run.attempt, status, kind, &why);
    env.cancelled_by = cancelled_by;
    if let Some(h) = env.host.as_mut() {
        h.state = (!state.is_empty()).then(|| state.to_owned());
    }
    rewrite(home, run, &env)?;
    Ok(env)
}

/// A status document of a run whose job is queued.
fn queued_doc(run: &RemoteRun, reason: &str) -> serde_json::Value {
    job_doc(run, LiveStatus::Queued, "PENDING", Some(reason))
}

/// A status document made from what Slurm says of the run's job alone.
fn job_doc(
    run: &RemoteRun,
    status: LiveStatus,
    state: &str,
    reason: Option<&str>,
) -> serde_json::Value {
    let doc = envelope::StatusDoc {
        schema: envelope::STATUS_SCHEMA.to_owned(),
        run_id: run.run_id.clone(),
        attempt: run.attempt,
        agent: run.agent,
        status,
        started_at: None,
        worker_pid: None,
        agent_pid: None,
        attempt_dir: started(run).attempt_dir,
        labels: Default::default(),
        correlation_id: None,
        tmux: Default::default(),
        waiting: None,
        slurm: Some(envelope::SlurmJob {
            job_id: run.job_id.clone().unwrap_or_default(),
            state: Some(state.to_owned()),
            reason: reason.map(str::to_owned),
        }),
    };
    serde_json::to_value(doc).expect("a status serializes")
}

/// `run` as its record here says now: a retry since moved it to another attempt and job.
pub(super) fn latest(home: &Home, run: &RemoteRun) -> RemoteRun {
    RunId::parse(&run.run_id)
        .ok()
        .and_then(|id| remote::find(home, &id).ok().flatten())
        .unwrap_or_else(|| run.clone())
}

/// `status` of a run on a Slurm host (see the module docs).
pub fn status(home: &Home, run: &RemoteRun) -> Result<Answer, HostsError> {
    let run = &latest(home, run);
    if let Some(b) = shared_envelope(run, run.attempt) {
        return Ok(Answer::Finished(Box::new(record_shared(home, run, &b)?)));
    }
    let job = job_of(run)?;
    match queue::state(&run.host, job)? {
        JobState::Queued { reason } => Ok(Answer::Live(
            queued_doc(run, &reason),
            crate::exit_code::STILL_RUNNING,
        )),
        JobState::Running => {
            match remote::ask(home, run, &["status", &run.run_id, "--json"], false) {
                Ok(Answer::Live(mut v, code)) => {
                    v["slurm"] = serde_json::json!({"job_id": job, "state": "RUNNING"});
                    Ok(Answer::Live(v, code))
                }
                Ok(a) => Ok(a),
                // Its node could not be asked (a step not made yet, or the job ending): ended,
                // its records say how; else it runs, as Slurm says.
                Err(e) => match ended(home, run) {
                    Err(_) => Ok(Answer::Live(
                        job_doc(
                            run,
                            LiveStatus::Running,
                            "RUNNING",
                            Some(&format!(
                                "its node could not be asked: {}",
                                match e {
                                    remote::AskError::Unreachable(why) => why,
                                    remote::AskError::Failed(e) => e.to_string(),
                                }
                            )),
                        ),
                        crate::exit_code::STILL_RUNNING,
                    )),
                    other => other,
                },
            }
        }
        JobState::Ended { .. } | JobState::Gone => ended(home, run),
    }
}

/// A run whose job has ended: its envelope, or Slurm's word for it.
pub(super) fn ended(home: &Home, run: &RemoteRun) -> Result<Answer, HostsError> {
    if let Some(b) = shared_envelope(run, run.attempt) {
        return Ok(Answer::Finished(Box::new(record_shared(home, run, &b)?)));
    }
    let (state, reason) = match queue::state(&run.host, job_of(run)?)? {
        JobState::Ended { state, reason } => (state, reason),
        JobState::Gone => (String::new(), String::new()),
        // It runs again (requeued): not ended after all.
        JobState::Queued { reason } => {
            return Ok(Answer::Live(
                queued_doc(run, &reason),
                crate::exit_code::STILL_RUNNING,
            ));
        }
        JobState::Running => {
            return Err(HostsError::Check {
                name: run.host.name.clone(),
                why: format!(
                    "run {}'s job runs, and its node cannot be asked",
                    run.run_id
                ),
            });
        }
    };
    // The batch script ends after the envelope is written: a job that ended by itself with
    // none to be seen here, once its run was made, holds one this machine does not see yet
    // (a write of its node on NFS): looked for every 500 ms for ENVELOPE_PATIENCE.
    let made = shared_home(&run.host)?
        .run_dir(&RunId::parse(&run.run_id).map_err(|e| HostsError::Input(e.to_string()))?)
        .exists();
    let patience = match state.as_str() {
        "COMPLETED" | "FAILED" if made => ENVELOPE_PATIENCE,
        _ => Duration::ZERO,
    };
    let end = Instant::now() + patience;
    loop {
        if let Some(b) = shared_envelope(run, run.attempt) {
            return Ok(Answer::Finished(Box::new(record_shared(home, run, &b)?)));
        }
        if Instant::now() >= end {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    Ok(Answer::Finished(Box::new(ended_by_slurm(
        home, run, &state, &reason, None,
    )?)))
}

/// `wait` for a run on a Slurm host: its records in the shared home watched, the host's
/// queue looked at every [`queue::QUEUE_EVERY`] for what they cannot say.
pub fn wait(home: &Home, run: &RemoteRun, deadline: Option<Instant>) -> Result<Answer, HostsError> {
    let run = &latest(home, run);
    let job = job_of(run)?.to_owned();
    let shared = shared_home(&run.host)?;
    let id = RunId::parse(&run.run_id).map_err(|e| HostsError::Input(e.to_string()))?;
    let mut wl = crate::app::WaitLoop::new().map_err(|e| HostsError::Input(e.to_string()))?;
    let attempt = shared.attempt(&id, run.attempt);
    // Each directory on the way to the envelope, watched once it exists.
    let dirs = [
        shared.root().to_path_buf(),
        shared.runs_dir(),
        shared.run_dir(&id),
        shared.run_dir(&id).join("attempts"),
        attempt.dir().to_path_buf(),
    ];
    let mut watched = [false; 5];
    queue::watch(&run.host, &job, wl.waker());
    let _unwatch = Unwatch(run.host.clone(), job.clone());
    loop {
        for (k, d) in dirs.iter().enumerate() {
            if !watched[k] && wl.watch_dir(d).is_ok() {
                watched[k] = true;
            }
        }
        if let Some(b) = shared_envelope(run, run.attempt) {
            return Ok(Answer::Finished(Box::new(record_shared(home, run, &b)?)));
        }
        if let Some(JobState::Ended { .. } | JobState::Gone) = queue::known(&run.host, &job) {
            return ended(home, run);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return status(home, run);
        }
        let mut once = Once(0);
        wl.run(deadline, None, &mut once)
            .map_err(|e| HostsError::Input(e.to_string()))?;
    }
}

/// Ends the loop at the first event or wake-up.
struct Once(u32);

impl crate::app::Driver for Once {
    fn settled(
        &mut self,
        _wl: &mut crate::app::WaitLoop,
    ) -> Result<std::ops::ControlFlow<()>, crate::app::Error> {
        self.0 += 1;
        Ok(if self.0 > 1 {
            std::ops::ControlFlow::Break(())
        } else {
            std::ops::ControlFlow::Continue(())
        })
    }
    fn seen(
        &mut self,
        _wl: &mut crate::app::WaitLoop,
        _seen: crate::app::Seen,
    ) -> Result<std::ops::ControlFlow<()>, crate::app::Error> {
        Ok(std::ops::ControlFlow::Break(()))
    }
}

struct Unwatch(Host, String);

impl Drop for Unwatch {
    fn drop(&mut self) {
        queue::unwatch(&self.0, &self.1);
    }
}

/// `cancel` of a run on a Slurm host: a queued job leaves the queue (its envelope made
/// here); a running one is cancelled through its worker on its node, `scancel` the
/// fallback.
pub fn cancel(
    home: &Home,
    run: &RemoteRun,
    grace: Option<&str>,
    no_wait: bool,
    by: Option<CancelOrigin>,
) -> Result<Answer, HostsError> {
    let run = &latest(home, run);
    let job = job_of(run)?.to_owned();
    if let Some(b) = shared_envelope(run, run.attempt) {
        return Ok(Answer::Finished(Box::new(record_shared(home, run, &b)?)));
    }
    match queue::state(&run.host, &job)? {
        JobState::Queued { .. } => {
            queue::scancel(&run.host, &job, None)?;
            // It may have started meanwhile: its records then say how it ends.
            if let Some(b) = shared_envelope(run, run.attempt) {
                return Ok(Answer::Finished(Box::new(record_shared(home, run, &b)?)));
            }
            if shared_home(&run.host)?
                .run_dir(&RunId::parse(&run.run_id).map_err(|e| HostsError::Input(e.to_string()))?)
                .exists()
            {
                return wait(home, run, None);
            }
            let _ = std::fs::remove_dir_all(job_dir(&shared_home(&run.host)?, &run.run_id));
            Ok(Answer::Finished(Box::new(ended_by_slurm(
                home,
                run,
                "CANCELLED",
                "",
                Some(by.unwrap_or(CancelOrigin::Cancel)),
            )?)))
        }
        JobState::Running => {
            let mut words = vec!["cancel", run.run_id.as_str(), "--json"];
            if let Some(g) = grace {
                words.extend(["--grace", g]);
            }
            if no_wait {
                words.push("--no-wait");
            }
            if let Some(b) = by {
                words.extend(["--by", b.as_str()]);
            }
            match remote::ask(home, run, &words, false) {
                Ok(a) => Ok(a),
                Err(_) => {
                    // Its node cannot be asked: Slurm's signal reaches the job, which
                    // cancels its attempt through its worker.
                    queue::scancel(&run.host, &job, Some("TERM"))?;
                    if no_wait {
                        return Ok(Answer::Live(
                            serde_json::json!({"run_id": run.run_id, "attempt": run.attempt, "cancel_requested": true}),
                            0,
                        ));
                    }
                    wait(home, run, None)
                }
            }
        }
        JobState::Ended { .. } | JobState::Gone => ended(home, run),
    }
}
