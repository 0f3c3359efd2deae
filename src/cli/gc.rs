//! `subpane gc`: close the sessions of finished runs and remove old run directories.

use clap::Args;

use super::CliError;
use super::common::{print, print_json};
use super::human::counted;
use crate::app;
use crate::envelope::GcReport;
use crate::spec::parse_duration;
use crate::store::Home;

#[derive(Debug, Args)]
pub struct GcArgs {
    /// Remove runs that finished longer ago than this (e.g. 12h, 7d), with the git
    /// worktrees they kept (`run --worktree`)
    #[arg(long, value_name = "DUR", default_value = app::GC_OLDER_THAN)]
    pub older_than: String,
    /// Say what would be removed, remove nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Print a JSON summary: dry_run, removed_runs, closed_sessions, running, server_stopped,
    /// removed_worktrees, damaged (runs left alone because a record cannot be read, each with
    /// its problem), unanswered (tmux servers that did not answer, each with its socket)
    #[arg(long)]
    pub json: bool,
}

pub fn gc(home: &Home, a: GcArgs) -> Result<i32, CliError> {
    let age = parse_duration("--older-than", &a.older_than)?;
    let report = app::gc(home, age, a.dry_run)?;
    if a.json {
        print_json(&report);
    } else {
        print(&gc_text(&report));
        // Left alone, each named with its problem (on stderr: a diagnostic, not the summary).
        for d in &report.damaged {
            eprintln!(
                "subpane: left run `{}` alone: {}",
                d.run_id,
                crate::term::sanitize(d.problem.as_bytes(), 500)
            );
        }
        for u in &report.unanswered {
            eprintln!("subpane: closed nothing there: {u}");
        }
    }
    Ok(0)
}

/// What `gc` did (or, with `--dry-run`, would do), naming each run, session and worktree,
/// then the counts.
fn gc_text(r: &GcReport) -> String {
    let (remove, close, stop) = if r.dry_run {
        ("would remove", "would close", "would stop")
    } else {
        ("removed", "closed", "stopped")
    };
    let mut s = String::new();
    for id in &r.removed_runs {
        s.push_str(&format!("{remove} run {id}\n"));
    }
    for wt in &r.removed_worktrees {
        s.push_str(&format!("{remove} worktree {wt}\n"));
    }
    for name in &r.closed_sessions {
        s.push_str(&format!("{close} session {name}\n"));
    }
    if r.server_stopped {
        s.push_str(&format!("{stop} the tmux server: no session was left\n"));
    }
    if !r.running.is_empty() {
        s.push_str(&format!(
            "left {} still running: {}\n",
            counted(r.running.len() as u64, "run"),
            r.running.join(", ")
        ));
    }
    s.push_str(&format!(
        "{}: {}, {}, {}{}\n",
        if r.dry_run { "would do" } else { "done" },
        counted(r.removed_runs.len() as u64, "run") + " removed",
        counted(r.removed_worktrees.len() as u64, "worktree") + " removed",
        counted(r.closed_sessions.len() as u64, "session") + " closed",
        if r.dry_run {
            " (nothing was changed)"
        } else {
            ""
        }
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dry_run_names_what_it_would_do() {
        let r = GcReport {
            dry_run: true,
            removed_runs: vec!["old-1".into()],
            closed_sessions: vec!["keep-1-1".into()],
            running: vec!["live-1".into()],
            server_stopped: true,
            ..GcReport::default()
        };
        assert_eq!(
            gc_text(&r),
            "would remove run old-1\n\
             would close session keep-1-1\n\
             would stop the tmux server: no session was left\n\
             left 1 run still running: live-1\n\
             would do: 1 run removed, 0 worktrees removed, 1 session closed (nothing was changed)\n"
        );
        let done = GcReport {
            dry_run: false,
            ..r
        };
        assert!(gc_text(&done).starts_with("removed run old-1\nclosed session keep-1-1\n"));
    }
}
