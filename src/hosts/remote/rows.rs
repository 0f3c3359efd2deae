//! The rows of `ls` for the runs on hosts: each host asked once, at once.

use super::start::has_started;
use super::*;

/// The rows of `subpane ls` for the runs here that live on hosts: one `ls --json` per host
/// (the hosts asked at once), each row marked with its host. A host that cannot be asked
/// gives rows from what is recorded here: the envelope if the run's end was copied back,
/// else `damaged` with why.
pub fn rows(home: &Home) -> Vec<envelope::RunRow> {
    rows_of(home, &list(home))
}

/// [`rows`] of these runs only.
pub fn rows_of(home: &Home, runs: &[RemoteRun]) -> Vec<envelope::RunRow> {
    let mut by_host: std::collections::BTreeMap<String, Vec<&RemoteRun>> = Default::default();
    let (slurm, runs): (Vec<&RemoteRun>, Vec<&RemoteRun>) = runs.iter().partition(|r| r.is_slurm());
    for r in runs {
        by_host.entry(r.host.name.clone()).or_default().push(r);
    }
    /// A host's runs here, and its `ls` (or why it could not be asked).
    type Asked<'a> = (Vec<&'a RemoteRun>, Result<Vec<envelope::RunRow>, String>);
    let answers: Vec<Asked> = std::thread::scope(|s| {
        let asks: Vec<_> = by_host
            .into_values()
            .map(|runs| {
                let first = runs[0];
                (runs, s.spawn(move || host_rows(home, first)))
            })
            .collect();
        asks.into_iter()
            .map(|(runs, h)| {
                let got = h.join().unwrap_or_else(|_| Err("the ask failed".into()));
                (runs, got)
            })
            .collect()
    });
    let mut out = crate::hosts::slurm::run::rows(home, &slurm);
    for (runs, got) in answers {
        for run in runs {
            let row = match &got {
                Ok(rows) => rows
                    .iter()
                    .find(|r| r.run_id == run.run_id)
                    .cloned()
                    .map_or_else(
                        || match recorded_row(home, run) {
                            Some(row) => row,
                            // Its start has not reached the host yet.
                            None if !has_started(home, run) => pending_row(run),
                            None => unknown_row(home, run, "the host has no record of it".into()),
                        },
                        |mut r| {
                            r.host = Some(run.host.name.clone());
                            // Another machine's text, made safe for a terminal here too.
                            r.what = crate::term::sanitize(r.what.as_bytes(), 200);
                            r.problem = r.problem.map(|p| crate::term::sanitize(p.as_bytes(), 300));
                            // Ordered among the runs here by when it was started from here: the
                            // host's clock is never compared with this one.
                            r.created_at = run.created_at.clone();
                            r
                        },
                    ),
                Err(why) => unknown_row(home, run, why.clone()),
            };
            out.push(row);
        }
    }
    out
}

/// `ls --json` on the host of `run`.
fn host_rows(home: &Home, run: &RemoteRun) -> Result<Vec<envelope::RunRow>, String> {
    let mut cmd = command(home, run, &["ls", "--json"], false);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = crate::command::output(&mut cmd, "ssh", CONNECT_TIMEOUT + Duration::from_secs(20))
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "host `{}` cannot be asked: {}",
            run.host.name,
            ssh::said(&out)
        ));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| {
        format!(
            "host `{}` answered `ls` with what cannot be read ({e})",
            run.host.name
        )
    })
}

/// The row of a run from what is recorded here alone: its envelope once its end came back
/// (`None` until then).
pub fn recorded_row(home: &Home, run: &RemoteRun) -> Option<envelope::RunRow> {
    let row = unknown_row(home, run, String::new());
    (row.status != envelope::RunState::Damaged).then_some(row)
}

/// The row of a run whose host has not said yet: `starting`, as started from here.
pub fn pending_row(run: &RemoteRun) -> envelope::RunRow {
    let mut row = bare_row(run);
    row.status = envelope::RunState::Starting;
    row
}

fn bare_row(run: &RemoteRun) -> envelope::RunRow {
    envelope::RunRow {
        run_id: run.run_id.clone(),
        attempt: 1,
        agent: run.agent,
        status: envelope::RunState::Damaged,
        failure_kind: None,
        exit_code: None,
        created_at: run.created_at.clone(),
        started_at: None,
        finished_at: None,
        duration_ms: None,
        labels: Default::default(),
        correlation_id: None,
        group: run.group.clone(),
        parent_run: None,
        depth: 0,
        what: crate::term::sanitize(run.argv.join(" ").as_bytes(), 200),
        problem: None,
        host: Some(run.host.name.clone()),
        // A Slurm job's id, whatever Slurm says of it now.
        waiting: None,
        queue: None,
        slurm: run.job_id.clone().map(|job_id| envelope::SlurmJob {
            job_id,
            state: None,
            reason: None,
        }),
    }
}

/// The row of a run whose host did not say: its recorded envelope, else `damaged`.
fn unknown_row(home: &Home, run: &RemoteRun, why: String) -> envelope::RunRow {
    let recorded = recorded(home, run, None);
    let mut row = bare_row(run);
    row.problem = Some(why);
    if let Some(env) = recorded {
        row.ended(&env);
        row.attempt = env.attempt;
        row.labels = env.labels;
        row.correlation_id = env.correlation_id;
        row.problem = None;
    }
    row
}
