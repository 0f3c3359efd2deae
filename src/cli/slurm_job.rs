//! `__slurm-job ID`: what the batch job of a run on a Slurm host runs on its node (see
//! `hosts::slurm::run`). It takes the run's request from the shared home, plans and starts
//! the attempt there in a tmux server of its own on this node, exactly as a run here, and
//! ends when the attempt has: the job lasts as long as its worker.
//!
//! ```text
//!  SHARED/slurm/ID/request.json (taken, removed) ─► plan (its cwd, sandbox, worktree)
//!   ─► start in tmux -S <node-local socket of this job> ─► wait for the envelope
//!   ─► kill that tmux server ─► exit with the envelope's code
//!  SIGTERM/SIGINT (scancel, the time limit; linuxproc signals this process only)
//!   ─► cancel through the worker: TIMEOUT ─► as a timeout, else by a signal; a second kills
//! ```

use super::CliError;
use super::interrupt;
use crate::app::{self, RealSystem};
use crate::envelope::CancelOrigin;
use crate::store::Home;
use crate::tmux::{Socket, Tmux};

pub(super) fn slurm_job(home: &Home, id: &str, retry: Option<u32>) -> Result<i32, CliError> {
    let dir = crate::hosts::slurm::run::job_dir(home, id);
    let [path, ..] = crate::hosts::slurm::run::job_files(&dir, retry.unwrap_or(1));
    let bytes = std::fs::read(&path).map_err(|source| CliError::ReadTasks {
        what: path.display().to_string(),
        source,
    })?;
    // One-shot, like an attempt's environment file: the values in it go no further.
    let _ = std::fs::remove_file(&path);
    let unreadable =
        |e: serde_json::Error| CliError::Flag(format!("{} cannot be read: {e}", path.display()));
    let job = std::env::var("SLURM_JOB_ID").unwrap_or_default();
    let socket = job_socket(&job)?;
    // SAFETY: no other thread runs yet (the interrupt thread starts below).
    unsafe { std::env::set_var("SUBPANE_TMUX_SOCKET", &socket) };
    let plan = match retry {
        None => {
            let r: crate::hosts::remote::RemoteRequest =
                serde_json::from_slice(&bytes).map_err(unreadable)?;
            super::run::same_version(&r.version)?;
            let mut plan = app::plan(&r.request, home, &RealSystem)?;
            if let Some(g) = &r.group {
                plan.record.group = Some(g.clone());
                plan.spec.group = Some(g.clone());
            }
            plan
        }
        Some(n) => {
            let r: crate::hosts::slurm::run::SlurmRetry =
                serde_json::from_slice(&bytes).map_err(unreadable)?;
            super::run::same_version(&r.version)?;
            let opts = app::RetryOptions {
                resume: r.resume,
                task: r.task,
                task_file: None,
                env: Default::default(),
                at_reset: false,
                after: None,
            };
            let plan = app::prepare_retry(home, id, &opts, &RealSystem)?.plan;
            if plan.spec.attempt != n || r.attempt != n {
                return Err(CliError::Flag(format!(
                    "run {id}'s next attempt is {}, not the {n} this job was submitted for",
                    plan.spec.attempt
                )));
            }
            plan
        }
    };
    interrupt::block();
    let started = app::start(home, plan)?;
    let server = Tmux::new(Socket::from_path(&socket), home.tmux_conf());
    if let Some(env) = &started.spawn_failed {
        let _ = server.kill_server();
        return Ok(env.exit_code());
    }
    let found = app::Found {
        record: crate::store::read_run(home, &started.spec.run_id)
            .ok()
            .flatten()
            .ok_or_else(|| CliError::Flag(format!("run {id} has no run.json after its start")))?,
        paths: started.paths.clone(),
        spec: started.spec.clone(),
    };
    interrupt::on_interrupt(move |n| {
        let origin = if crate::hosts::slurm::queue::own_timeout(&job) {
            CancelOrigin::Timeout
        } else {
            CancelOrigin::Signal
        };
        let grace = (n > 1).then_some(0);
        if let Err(e) = app::cancel_by(&found, grace, origin) {
            eprintln!(
                "subpane: error: cannot cancel run {}: {e}",
                found.spec.run_id
            );
        }
    });
    let env = app::wait_one(&started.paths, &started.spec);
    // Nothing of the job outlives it: its server (daemonised, so not Slurm's to follow).
    let _ = server.kill_server();
    Ok(env?.exit_code())
}

/// The tmux socket of this job on this node: beside `SUBPANE_TMUX_SOCKET`'s when that is
/// a path, else in a directory of this user's under the node's temporary directory.
fn job_socket(job: &str) -> Result<std::path::PathBuf, CliError> {
    let name = format!(
        "subpane-job-{}.sock",
        if job.is_empty() { "0" } else { job }
    );
    if let Some(p) = std::env::var_os("SUBPANE_TMUX_SOCKET")
        .map(std::path::PathBuf::from)
        .filter(|p| p.is_absolute())
        && let Some(dir) = p.parent()
    {
        return Ok(dir.join(name));
    }
    let dir = std::env::temp_dir().join(format!("subpane-{}", nix::unistd::getuid()));
    crate::hosts::ssh::make_private_dir(&dir).map_err(|source| CliError::ReadTasks {
        what: dir.display().to_string(),
        source,
    })?;
    Ok(dir.join(name))
}
