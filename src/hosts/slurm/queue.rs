//! A job as Slurm sees it (`squeue --states=all`, which also knows a job for a while after
//! it ended), and the one watch of the queue a process keeps for each host: every run
//! waited for on a Slurm host is covered by one `squeue` of that host every
//! [`QUEUE_EVERY`], never one query per run.
//!
//! ```text
//!  watch(host, job, waker) ─► the host's watcher thread (started with its first job)
//!       every QUEUE_EVERY: squeue -h --states=all -j J1,J2,… -o %i|%T|%r   (one call)
//!       ─► each job's state kept ─► every waker woken ─► state(job)
//!  the last job unwatched ─► the thread ends
//! ```

use std::collections::HashMap;
use std::process::Command;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use super::super::{Host, HostsError};
use crate::supervisor::Waker;

/// How often a process asks Slurm about the jobs it waits for, for each host: the modest
/// rate that covers what the records on a shared home cannot say (a job Slurm ended before
/// its worker could write, a node that failed), and writes a node made that this machine
/// does not see promptly (NFS).
pub const QUEUE_EVERY: Duration = Duration::from_secs(10);

/// Where a job stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobState {
    /// In the queue (`PENDING`, `CONFIGURING`, `REQUEUED`), with Slurm's reason
    /// (`Priority`, `Resources`, `None`).
    Queued { reason: String },
    /// Its batch script runs (`RUNNING`, `COMPLETING`, `SUSPENDED`).
    Running,
    /// Slurm ended it, or it ended: Slurm's state (`COMPLETED`, `CANCELLED`, `TIMEOUT`,
    /// `NODE_FAIL`, `PREEMPTED`, `FAILED`, `OUT_OF_MEMORY`, …) and reason.
    Ended { state: String, reason: String },
    /// Slurm no longer knows it (it ended long enough ago).
    Gone,
}

impl JobState {
    fn from_squeue(state: &str, reason: &str) -> Self {
        match state {
            "PENDING" | "CONFIGURING" | "REQUEUED" | "REQUEUE_HOLD" | "REQUEUE_FED"
            | "RESV_DEL_HOLD" => JobState::Queued {
                reason: reason.to_owned(),
            },
            "RUNNING" | "COMPLETING" | "SUSPENDED" | "STAGE_OUT" | "SIGNALING" | "RESIZING" => {
                JobState::Running
            }
            s => JobState::Ended {
                state: s.to_owned(),
                reason: reason.to_owned(),
            },
        }
    }
}

/// The states of `jobs`, asked in one `squeue`; a job it does not list is [`JobState::Gone`].
pub fn states(host: &Host, jobs: &[String]) -> Result<HashMap<String, JobState>, HostsError> {
    let mut out: HashMap<String, JobState> =
        jobs.iter().map(|j| (j.clone(), JobState::Gone)).collect();
    if jobs.is_empty() {
        return Ok(out);
    }
    let mut cmd = Command::new("squeue");
    cmd.args(["--noheader", "--states=all", "--format=%i|%T|%r"])
        .arg(format!("--jobs={}", jobs.join(",")));
    let got = super::run(host, &mut cmd, Duration::from_secs(30))?;
    let text = String::from_utf8_lossy(&got.stdout);
    if !got.status.success() {
        let said = super::said(&got);
        // Every job asked for has left Slurm's memory.
        if said.contains("Invalid job id") {
            return Ok(out);
        }
        return Err(HostsError::Check {
            name: host.name.clone(),
            why: format!("squeue failed ({}): {said}", got.status),
        });
    }
    for line in text.lines() {
        let mut f = line.trim().splitn(3, '|');
        let (Some(id), Some(state), reason) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        if let Some(s) = out.get_mut(id) {
            *s = JobState::from_squeue(state, reason.unwrap_or(""));
        }
    }
    Ok(out)
}

/// Whether Slurm's signal to this process's own job (`SLURM_JOB_ID`) is its time limit,
/// for the job itself. While it is signalled the job reads `COMPLETING`, so its run time is
/// compared with its limit too (`scontrol show job`).
pub fn own_timeout(job: &str) -> bool {
    if job.is_empty() {
        return false;
    }
    let Ok(out) = crate::command::output(
        Command::new("scontrol")
            .args(["show", "job", "--oneliner", job])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null()),
        "scontrol",
        Duration::from_secs(10),
    ) else {
        return false;
    };
    past_its_limit(&String::from_utf8_lossy(&out.stdout))
}

/// Whether a `scontrol show job --oneliner` line says the job ended by its time limit.
fn past_its_limit(line: &str) -> bool {
    let field = |k: &str| {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(k)?.strip_prefix('='))
    };
    match field("JobState") {
        Some("TIMEOUT" | "DEADLINE") => true,
        Some("COMPLETING") => match (
            field("RunTime").and_then(slurm_secs),
            field("TimeLimit").and_then(slurm_secs),
        ) {
            (Some(run), Some(limit)) => run >= limit,
            _ => false,
        },
        _ => false,
    }
}

/// Seconds of a Slurm duration (`[D-]HH:MM:SS`, `MM:SS`); `None` for `UNLIMITED` and the
/// like.
fn slurm_secs(s: &str) -> Option<u64> {
    let (days, rest) = match s.split_once('-') {
        Some((d, r)) => (d.parse::<u64>().ok()?, r),
        None => (0, s),
    };
    let parts: Vec<u64> = rest
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let (h, m, sec) = match parts.as_slice() {
        [h, m, s] => (*h, *m, *s),
        [m, s] => (0, *m, *s),
        [m] => (0, *m, 0),
        _ => return None,
    };
    Some(days * 86_400 + h * 3600 + m * 60 + sec)
}

/// The state `job` ends in, once Slurm has finished ending it (a job that was just
/// signalled reads `COMPLETING` for a moment): looked at every 250 ms, for at most `limit`.
pub fn final_state(host: &Host, job: &str, limit: Duration) -> Option<JobState> {
    let end = std::time::Instant::now() + limit;
    loop {
        match state(host, job).ok()? {
            JobState::Running if std::time::Instant::now() < end => {
                std::thread::sleep(Duration::from_millis(250));
            }
            JobState::Running => return None,
            s => return Some(s),
        }
    }
}

/// The state of one job ([`states`]).
pub fn state(host: &Host, job: &str) -> Result<JobState, HostsError> {
    Ok(states(host, &[job.to_owned()])?
        .remove(job)
        .unwrap_or(JobState::Gone))
}

/// `scancel` of `job` (with `signal`, only that signal to its batch step's processes).
pub fn scancel(host: &Host, job: &str, signal: Option<&str>) -> Result<(), HostsError> {
    let mut cmd = Command::new("scancel");
    if let Some(s) = signal {
        cmd.arg(format!("--signal={s}")).arg("--batch");
    }
    cmd.arg(job);
    let out = super::run(host, &mut cmd, Duration::from_secs(30))?;
    if out.status.success() {
        return Ok(());
    }
    Err(HostsError::Check {
        name: host.name.clone(),
        why: format!(
            "scancel {job} failed ({}): {}",
            out.status,
            super::said(&out)
        ),
    })
}

/// One host's watch of the queue.
struct Watch {
    host: Host,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Each job watched, and who to wake when its state is asked again.
    wakers: HashMap<String, Vec<Waker>>,
    known: HashMap<String, JobState>,
    running: bool,
}

static WATCHES: LazyLock<Mutex<HashMap<String, Arc<Watch>>>> = LazyLock::new(Default::default);

/// Watches `job` on `host` until [`unwatch`]: `waker` is woken after each look at the queue
/// (the first at once), and [`known`] says what it found.
pub fn watch(host: &Host, job: &str, waker: Waker) {
    let w = {
        let mut all = WATCHES.lock().unwrap_or_else(|e| e.into_inner());
        all.entry(host.name.clone())
            .or_insert_with(|| {
                Arc::new(Watch {
                    host: host.clone(),
                    inner: Mutex::default(),
                })
            })
            .clone()
    };
    let start = {
        let mut i = w.inner.lock().unwrap_or_else(|e| e.into_inner());
        i.wakers.entry(job.to_owned()).or_default().push(waker);
        !std::mem::replace(&mut i.running, true)
    };
    if start {
        std::thread::spawn(move || w.run());
    }
}

/// Stops watching `job` on `host` (for one of its watchers).
pub fn unwatch(host: &Host, job: &str) {
    let all = WATCHES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(w) = all.get(&host.name) {
        let mut i = w.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(v) = i.wakers.get_mut(job) {
            v.pop();
            if v.is_empty() {
                i.wakers.remove(job);
            }
        }
    }
}

/// What the last look at the queue found of `job` (`None` before the first).
pub fn known(host: &Host, job: &str) -> Option<JobState> {
    let all = WATCHES.lock().unwrap_or_else(|e| e.into_inner());
    let w = all.get(&host.name)?;
    let i = w.inner.lock().unwrap_or_else(|e| e.into_inner());
    i.known.get(job).cloned()
}

impl Watch {
    fn run(&self) {
        loop {
            let jobs: Vec<String> = {
                let mut i = self.inner.lock().unwrap_or_else(|e| e.into_inner());
                if i.wakers.is_empty() {
                    i.running = false;
                    return;
                }
                i.wakers.keys().cloned().collect()
            };
            // A query that fails is tried again at the next look; the records still speak.
            if let Ok(found) = states(&self.host, &jobs) {
                let mut i = self.inner.lock().unwrap_or_else(|e| e.into_inner());
                i.known.extend(found);
                for w in i.wakers.values().flatten() {
                    w.wake();
                }
            }
            std::thread::sleep(QUEUE_EVERY);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_past_its_limit_is_told_from_scontrol() {
        assert!(past_its_limit("JobId=7 JobState=TIMEOUT Reason=TimeLimit"));
        assert!(past_its_limit(
            "JobId=7 JobState=COMPLETING Reason=None RunTime=00:01:02 TimeLimit=00:01:00"
        ));
        assert!(!past_its_limit(
            "JobId=7 JobState=COMPLETING Reason=None RunTime=00:00:02 TimeLimit=00:01:00"
        ));
        assert!(!past_its_limit(
            "JobId=7 JobState=COMPLETING RunTime=1-00:00:02 TimeLimit=UNLIMITED"
        ));
        assert_eq!(slurm_secs("1-02:03:04"), Some(93_784));
        assert_eq!(slurm_secs("05:06"), Some(306));
    }

    #[test]
    fn slurm_states_are_queued_running_or_ended() {
        assert_eq!(
            JobState::from_squeue("PENDING", "Priority"),
            JobState::Queued {
                reason: "Priority".into()
            }
        );
        assert_eq!(
            JobState::from_squeue("COMPLETING", "None"),
            JobState::Running
        );
        assert_eq!(
            JobState::from_squeue("TIMEOUT", "TimeLimit"),
            JobState::Ended {
                state: "TIMEOUT".into(),
                reason: "TimeLimit".into()
            }
        );
    }
}
