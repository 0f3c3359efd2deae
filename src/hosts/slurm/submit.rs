//! Submitting a run's attempt on a Slurm host as a batch job: where its files go in the
//! shared home, the request planned there first, `sbatch`, and a retry's next job (see
//! run.rs for the whole picture).

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use super::run::{latest, shared_envelope};
use crate::app::RunRequest;
use crate::envelope::{self, LiveStatus};
use crate::hosts::remote::{self, RemoteRun};
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
