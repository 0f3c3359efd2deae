//! `subpane gc`: close the sessions of finished runs and remove old run directories.

use std::time::{Duration, SystemTime};

use clap::Args;

use super::common::{CliError, print, print_json, tmux_for};
use crate::spec::{AttemptSpec, parse_duration};
use crate::store::{self, Home};
use crate::supervisor::{AttemptState, observe};

#[derive(Debug, Args)]
pub struct GcArgs {
    /// Remove runs that finished longer ago than this (e.g. 12h, 7d)
    #[arg(long, value_name = "DUR", default_value = "7d")]
    pub older_than: String,
    /// Say what would be removed, remove nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Print a JSON summary
    #[arg(long)]
    pub json: bool,
}

pub fn gc(home: &Home, a: GcArgs) -> Result<i32, CliError> {
    let age = parse_duration("--older-than", &a.older_than)
        .map_err(|e| CliError::invalid(e.to_string()))?;
    let cutoff = SystemTime::now()
        .checked_sub(age)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let mut removed_runs = Vec::new();
    let mut closed_sessions = Vec::new();
    let mut kept_running = Vec::new();
    for run in store::list_runs(home) {
        let mut all_done = true;
        let mut newest_end: Option<SystemTime> = None;
        for at in &run.record.attempts {
            let paths = home.attempt(&run.id, at.attempt);
            let Ok(Some(spec)) = store::read_json::<AttemptSpec>(&paths.spec()) else {
                continue;
            };
            match observe(&paths, &spec)? {
                AttemptState::Finished(env) => {
                    let end = env
                        .finished_at
                        .as_deref()
                        .and_then(|t| humantime::parse_rfc3339(t).ok());
                    newest_end = newest_end.max(end);
                    let t = tmux_for(home, &spec);
                    if spec.keep_session && t.has_session(&spec.tmux.session) {
                        if !a.dry_run {
                            let _ = t.kill_session(&spec.tmux.session);
                        }
                        closed_sessions.push(spec.tmux.session.clone());
                    }
                }
                _ => all_done = false,
            }
        }
        if !all_done {
            kept_running.push(run.id.to_string());
            continue;
        }
        if newest_end.unwrap_or(SystemTime::UNIX_EPOCH) <= cutoff || age == Duration::ZERO {
            if !a.dry_run {
                std::fs::remove_dir_all(&run.dir).map_err(|e| {
                    CliError::failed(format!("cannot remove {}: {e}", run.dir.display()))
                })?;
            }
            removed_runs.push(run.id.to_string());
        }
    }
    // The private server stays up between attempts; with no session left it is stopped.
    let server = crate::tmux::Tmux::new(crate::tmux::Socket::from_env(), home.tmux_conf());
    let mut server_stopped = false;
    if server.sessions().is_some_and(|s| s.is_empty()) {
        if !a.dry_run {
            let _ = server.kill_server();
        }
        server_stopped = true;
    }
    if a.json {
        print_json(&serde_json::json!({
            "dry_run": a.dry_run,
            "removed_runs": removed_runs,
            "closed_sessions": closed_sessions,
            "running": kept_running,
            "server_stopped": server_stopped,
        }));
    } else {
        let verb = if a.dry_run { "would remove" } else { "removed" };
        print(&format!(
            "{verb} {} run(s), closed {} session(s){}; {} run(s) still running were kept\n",
            removed_runs.len(),
            closed_sessions.len(),
            if server_stopped {
                ", stopped the idle tmux server"
            } else {
                ""
            },
            kept_running.len()
        ));
    }
    Ok(0)
}
