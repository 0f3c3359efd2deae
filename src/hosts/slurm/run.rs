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

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use super::queue::{self, JobState};
use crate::app::RunRequest;
use crate::envelope::{self, CancelOrigin, Envelope, FailureKind, LiveStatus, Status};
use crate::hosts::remote::{self, Answer, RemoteRun};
use crate::hosts::{Host, HostUrl, HostsError};
use crate::spec::RunId;
use crate::store::{self, Home, StoreError};

/// The shared home of a Slurm host.
pub fn shared_home(host: &Host) -> Result<Home, HostsError> {
    match &host.home {
        Some(h) => Ok(Home::at(PathBuf::from(h))),
        None => Err(HostsError::Input(format!(
            "Slurm host `{}` has no --remote-home (the storage this machine and the nodes share)",
            host.name
        ))),
    }
}

/// The subpane a job's node runs: `--bin`, else this binary (on the shared storage the
/// nodes see: `hosts check` says whether they can run it).
pub fn bin(host: &Host) -> Result<String, HostsError> {
    match &host.bin {
        Some(b) => Ok(b.clone()),
        None => std::env::current_exe()
            .map(|p| p.display().to_string())
            .map_err(|e| HostsError::Check {
                name: host.name.clone(),
                why: format!("cannot find this binary for the nodes to run: {e}"),
            }),
    }
}

/// The files of attempt `attempt`'s job in [`job_dir`]: its request, script and output
/// (`request.json`, `job.sh`, `job.out` for the first; `retry-N.json`, `job-N.sh`,
/// `job-N.out` for a retry's).
pub fn job_files(dir: &std::path::Path, attempt: u32) -> [PathBuf; 3] {
    match attempt {
        1 => ["request.json", "job.sh", "job.out"].map(|f| dir.join(f)),
        n => [
            format!("retry-{n}.json"),
            format!("job-{n}.sh"),
            format!("job-{n}.out"),
        ]
        .map(|f| dir.join(f)),
    }
}

/// `SHARED/slurm/ID`: the job's request, script and output.
pub fn job_dir(shared: &Home, id: &str) -> PathBuf {
    shared.root().join("slurm").join(id)
}

/// Plans `req` in the shared home of `host` as the job's node will, starting nothing: what
/// it refuses is exit 2 now, not a job that fails later. Its run id must be new there too.
pub fn plan_there(host: &Host, req: &RunRequest, id: &RunId) -> Result<(), HostsError> {
    let shared = shared_home(host)?;
    if shared.run_dir(id).exists() {
        return Err(HostsError::RunIdInUse(id.to_string()));
    }
    match crate::app::plan(req, &shared, &crate::app::RealSystem) {
        Ok(_) => Ok(()),
        Err(e) => Err(HostsError::Refused {
            name: host.name.clone(),
            code: if e.nothing_started() { 2 } else { 1 },
            why: e.to_string(),
        }),
    }
}

/// The `--time` of a run's job: its timeout and grace with a minute to spare (a backstop:
/// the worker ends it at its timeout), else the host's `--time-limit`.
pub fn time_limit(req: &RunRequest, host: &Host) -> Result<Option<String>, HostsError> {
    let Some(t) = &req.timeout else {
        return Ok(host.slurm.as_ref().and_then(|s| s.time_limit.clone()));
    };
    let parse = |flag: &str, v: &str| {
        crate::spec::parse_duration(flag, v).map_err(|e| HostsError::Input(e.to_string()))
    };
    let timeout = parse("--timeout", t)?;
    let grace = match &req.grace {
        Some(g) => parse("--grace", g)?,
        None => crate::spec::DEFAULT_GRACE,
    };
    let secs = (timeout + grace).as_secs() + 60;
    Ok(Some(secs.div_ceil(60).to_string()))
}

/// Writes the job's request and script under the shared home, and submits it: the job id.
/// Nothing is left there when `sbatch` refuses it (its words are the error).
pub fn submit(
    host: &Host,
    run: &RemoteRun,
    request: &[u8],
    time: Option<&str>,
) -> Result<String, HostsError> {
    let HostUrl::Slurm(url) = &host.url else {
        return Err(HostsError::Input(format!(
            "host `{}` is not a Slurm host",
            host.name
        )));
    };
    let shared = shared_home(host)?;
    let dir = job_dir(&shared, &run.run_id);
    let write = |path: PathBuf| move |source| HostsError::Store(StoreError::Write { path, source });
    std::fs::create_dir_all(shared.root().join("slurm"))
        .map_err(write(shared.root().join("slurm")))?;
    crate::hosts::ssh::make_private_dir(&dir).map_err(write(dir.clone()))?;
    let [request_path, script_path, out_path] = job_files(&dir, run.attempt);
    let cleanup = Cleanup {
        files: vec![request_path.clone(), script_path.clone()],
        dir: (run.attempt == 1).then(|| dir.clone()),
    };
    // The request holds the run's environment values: readable by this user alone, and
    // removed by the job once read.
    store::write_atomic(&request_path, request)?;
    let home_arg = shared.root().display().to_string();
    let n = run.attempt.to_string();
    let mut words = vec![
        run.bin.as_str(),
        "--home",
        &home_arg,
        "__slurm-job",
        run.run_id.as_str(),
    ];
    if run.attempt > 1 {
        words.extend(["--retry", n.as_str()]);
    }
    let script = format!(
        "#!/bin/sh\n# subpane: the worker of run {} (host {})\nexec {}\n",
        run.run_id,
        host.name,
        crate::hosts::ssh::remote_command(&words)
    );
    store::write_atomic(&script_path, script.as_bytes())?;
    let mut cmd = Command::new("sbatch");
    cmd.arg("--parsable")
        .arg(format!("--job-name=subpane-{}", run.run_id))
        .arg(format!("--partition={}", url.partition))
        .arg(format!("--output={}", out_path.display()));
    if let Some(o) = &host.slurm {
        if let Some(a) = &o.account {
            cmd.arg(format!("--account={a}"));
        }
        if let Some(q) = &o.qos {
            cmd.arg(format!("--qos={q}"));
        }
        cmd.args(&o.sbatch_args);
    }
    if let Some(t) = time {
        cmd.arg(format!("--time={t}"));
    }
    cmd.arg(&script_path);
    let out = super::run(host, &mut cmd, Duration::from_secs(60))?;
    if !out.status.success() {
        return Err(HostsError::Refused {
            name: host.name.clone(),
            code: 2,
            why: format!("Slurm refused the job: {}", super::said(&out)),
        });
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let job = text.trim().split(';').next().unwrap_or("").to_owned();
    if job.is_empty() || !job.bytes().all(|b| b.is_ascii_digit() || b == b'_') {
        return Err(HostsError::Check {
            name: host.name.clone(),
            why: format!(
                "sbatch answered what is not a job id: {}",
                crate::term::sanitize(text.as_bytes(), 200)
            ),
        });
    }
    std::mem::forget(cleanup);
    Ok(job)
}

/// Removes what a submission that failed wrote, unless forgotten: the attempt's request and
/// script, and (for a first attempt) the job's directory.
struct Cleanup {
    files: Vec<PathBuf>,
    dir: Option<PathBuf>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for f in &self.files {
            let _ = std::fs::remove_file(f);
        }
        if let Some(d) = &self.dir {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// What `run --detach --json` answers for a job just submitted.
pub fn started(run: &RemoteRun) -> envelope::Started {
    envelope::Started {
        run_id: run.run_id.clone(),
        attempt: run.attempt,
        status: LiveStatus::Queued,
        attempt_dir: shared_home(&run.host)
            .ok()
            .and_then(|h| {
                RunId::parse(&run.run_id)
                    .ok()
                    .map(|id| h.attempt(&id, run.attempt))
            })
            .map(|p| p.dir().to_path_buf())
            .unwrap_or_default(),
        tmux: crate::spec::TmuxTarget {
            socket: PathBuf::new(),
            session: String::new(),
        },
    }
}

fn job_of(run: &RemoteRun) -> Result<&str, HostsError> {
    run.job_id.as_deref().ok_or_else(|| HostsError::Check {
        name: run.host.name.clone(),
        why: format!("run {} has no Slurm job recorded", run.run_id),
    })
}

/// The envelope the job's attempt wrote in the shared home, if it has ended.
fn shared_envelope(run: &RemoteRun, attempt: u32) -> Option<Vec<u8>> {
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
        slurm: Some(envelope::SlurmJob {
            job_id: run.job_id.clone().unwrap_or_default(),
            state: Some(state.to_owned()),
            reason: reason.map(str::to_owned),
        }),
    };
    serde_json::to_value(doc).expect("a status serializes")
}

/// `run` as its record here says now: a retry since moved it to another attempt and job.
fn latest(home: &Home, run: &RemoteRun) -> RemoteRun {
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
fn ended(home: &Home, run: &RemoteRun) -> Result<Answer, HostsError> {
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

/// What a retry's job reads (`SHARED/slurm/ID/retry-N.json`): the retry's options.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlurmRetry {
    pub version: String,
    pub attempt: u32,
    pub resume: bool,
    pub task: Option<String>,
}

/// `retry` of a run on a Slurm host: its next attempt is a batch job of its own, which
/// plans the retry on its node as `retry` does there (its latest attempt must have ended).
/// Recorded here (the run's job and attempt) once `sbatch` took it; the caller waits as for
/// any run there. Its time limit is the host's `--time-limit`.
pub fn retry(
    home: &Home,
    run: &RemoteRun,
    resume: bool,
    task: Option<&str>,
) -> Result<envelope::Started, HostsError> {
    let run = latest(home, run);
    if shared_envelope(&run, run.attempt).is_none() {
        return Err(HostsError::Input(format!(
            "run {} attempt {} has not ended; `subpane wait {}` waits for it, `subpane cancel {}` ends it",
            run.run_id, run.attempt, run.run_id, run.run_id
        )));
    }
    let mut next = run.clone();
    next.attempt += 1;
    let body = serde_json::to_vec(&SlurmRetry {
        version: env!("CARGO_PKG_VERSION").to_owned(),
        attempt: next.attempt,
        resume,
        task: task.map(str::to_owned),
    })
    .expect("a retry serializes");
    let time = run.host.slurm.as_ref().and_then(|s| s.time_limit.clone());
    next.job_id = Some(submit(&run.host, &next, &body, time.as_deref())?);
    let id = RunId::parse(&run.run_id).map_err(|e| HostsError::Input(e.to_string()))?;
    store::write_json_atomic(&home.run_dir(&id).join(remote::MARKER), &next)?;
    // Its directory here, empty until its envelope comes back (as a retry on a host's).
    let dir = home.attempt(&id, next.attempt).dir().to_path_buf();
    std::fs::create_dir_all(&dir).map_err(|source| StoreError::Write { path: dir, source })?;
    Ok(started(&next))
}

/// The rows of `ls` for runs on Slurm hosts: what is recorded here, else the shared home's
/// envelope, else the queue's word (one `squeue` a host).
pub fn rows(home: &Home, runs: &[&RemoteRun]) -> Vec<envelope::RunRow> {
    let mut by_host: std::collections::BTreeMap<&str, Vec<&RemoteRun>> = Default::default();
    for r in runs {
        by_host.entry(r.host.name.as_str()).or_default().push(r);
    }
    let mut out = Vec::new();
    for runs in by_host.into_values() {
        let jobs: Vec<String> = runs.iter().filter_map(|r| r.job_id.clone()).collect();
        let states = queue::states(&runs[0].host, &jobs);
        for run in runs {
            if let Some(row) = remote::recorded_row(home, run) {
                out.push(row);
                continue;
            }
            let state = match (&states, &run.job_id) {
                (Ok(s), Some(j)) => s.get(j).cloned(),
                _ => None,
            };
            let mut row = remote::pending_row(run);
            match state {
                Some(JobState::Queued { reason }) => {
                    row.status = envelope::RunState::Queued;
                    row.slurm = Some(envelope::SlurmJob {
                        job_id: run.job_id.clone().unwrap_or_default(),
                        state: Some("PENDING".into()),
                        reason: Some(reason),
                    });
                }
                Some(JobState::Running) => {
                    row.status = envelope::RunState::Running;
                    row.slurm = Some(envelope::SlurmJob {
                        job_id: run.job_id.clone().unwrap_or_default(),
                        state: Some("RUNNING".into()),
                        reason: None,
                    });
                }
                Some(JobState::Ended { .. } | JobState::Gone) => {
                    if ended(home, run).is_ok()
                        && let Some(r) = remote::recorded_row(home, run)
                    {
                        row = r;
                    }
                }
                None => {
                    row.status = envelope::RunState::Damaged;
                    row.problem = Some(match &states {
                        Err(e) => e.to_string(),
                        Ok(_) => format!("run {} has no Slurm job recorded", run.run_id),
                    });
                }
            }
            out.push(row);
        }
    }
    out
}

/// The command that runs `words` (the subpane arguments after its home) for `run`: on its
/// job's node (`srun --overlap --jobid J`, `tty`: with `--pty`) while the job runs, else
/// here (the shared home's records are read alike from here).
pub fn command(run: &RemoteRun, words: &[&str], tty: bool) -> Command {
    let shared = run.host.home.clone().unwrap_or_default();
    let on_node =
        words.first().is_some_and(|w| *w != "logs") || shared_envelope(run, run.attempt).is_none();
    let mut cmd = if on_node {
        let mut c = Command::new("srun");
        c.arg("--overlap")
            .arg(format!("--jobid={}", run.job_id.as_deref().unwrap_or("0")))
            .args(["--nodes=1", "--ntasks=1", "--quiet"]);
        if tty {
            // A terminal there is a new one: not inside this side's tmux (srun passes this
            // environment on), whatever this terminal is.
            c.args(["--pty", "--", "env", "-u", "TMUX", "-u", "TMUX_PANE"]);
        } else {
            c.arg("--");
        }
        c.arg(&run.bin);
        c
    } else {
        Command::new(&run.bin)
    };
    cmd.arg("--home").arg(shared).args(words);
    cmd
}
