//! How runs on Slurm hosts are seen from here: their rows of `ls` (one `squeue` a host),
//! and the command that reaches a run's node (`srun --overlap`) or its records here.

use std::process::Command;

use super::queue::{self, JobState};
use super::run::{ended, shared_envelope};
use crate::envelope;
use crate::hosts::remote::{self, RemoteRun};
use crate::store::Home;

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
