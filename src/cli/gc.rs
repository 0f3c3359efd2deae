//! `subpane gc`: close the sessions of finished runs and remove old run directories.

use clap::Args;

use super::CliError;
use super::common::{print, print_json};
use crate::app;
use crate::spec::parse_duration;
use crate::store::Home;

#[derive(Debug, Args)]
pub struct GcArgs {
    /// Remove runs that finished longer ago than this (e.g. 12h, 7d), with the git
    /// worktrees they kept (`run --worktree`)
    #[arg(long, value_name = "DUR", default_value = "7d")]
    pub older_than: String,
    /// Say what would be removed, remove nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Print a JSON summary: dry_run, removed_runs, closed_sessions, running, server_stopped,
    /// removed_worktrees, damaged (runs left alone because a record cannot be read, each with
    /// its problem)
    #[arg(long)]
    pub json: bool,
}

pub fn gc(home: &Home, a: GcArgs) -> Result<i32, CliError> {
    let age = parse_duration("--older-than", &a.older_than)?;
    let report = app::gc(home, age, a.dry_run)?;
    if a.json {
        print_json(&report);
    } else {
        let verb = if a.dry_run { "would remove" } else { "removed" };
        let worktrees = match report.removed_worktrees.len() {
            0 => String::new(),
            n => format!(" and {n} kept worktree(s)"),
        };
        print(&format!(
            "{verb} {} run(s){worktrees}, closed {} session(s){}; {} run(s) still running were kept\n",
            report.removed_runs.len(),
            report.closed_sessions.len(),
            if report.server_stopped {
                ", stopped the idle tmux server"
            } else {
                ""
            },
            report.running.len()
        ));
        // Left alone, each named with its problem (on stderr: a diagnostic, not the summary).
        for d in &report.damaged {
            eprintln!(
                "subpane: left run `{}` alone: {}",
                d.run_id,
                crate::term::sanitize(d.problem.as_bytes(), 500)
            );
        }
    }
    Ok(0)
}
