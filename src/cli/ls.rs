//! `subpane ls`: all runs, newest first.

use clap::{Args, ValueEnum};

use super::CliError;
use super::common::{color_stdout, print, print_json};
use super::table::{failure_words, fit, stdout_width};
use crate::app;
use crate::envelope::{RunRow, RunState};
use crate::store::Home;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum StatusFilter {
    /// Waiting in a scheduler's queue (a Slurm job pending)
    Queued,
    Starting,
    Running,
    Completed,
    Failed,
    Cancelled,
    /// Runs whose records cannot be read
    Damaged,
}

#[derive(Debug, Args)]
#[command(after_help = "\
On a terminal each line fits its width ($COLUMNS, else the terminal's): WHAT is cut with …;
piped, it is whole. A failure shows its kind (timeout, …) or its exit code (failed (exit 3)).")]
pub struct LsArgs {
    /// Print a JSON array of rows: run_id, attempt, agent, status, failure_kind, exit_code,
    /// created_at, started_at, finished_at, duration_ms, labels, correlation_id, group,
    /// parent_run, depth, what, problem (why a `damaged` run's records cannot be read), host
    /// (null for a run of this machine)
    #[arg(long)]
    pub json: bool,
    /// Only runs in this state
    #[arg(long, value_enum, value_name = "S")]
    pub status: Option<StatusFilter>,
    /// Only the runs of this fan-out group (its id or a unique start of it)
    #[arg(long, value_name = "G", add = super::docs::group_candidates())]
    pub group: Option<String>,
}

impl From<StatusFilter> for RunState {
    fn from(f: StatusFilter) -> Self {
        match f {
            StatusFilter::Queued => RunState::Queued,
            StatusFilter::Starting => RunState::Starting,
            StatusFilter::Running => RunState::Running,
            StatusFilter::Completed => RunState::Completed,
            StatusFilter::Failed => RunState::Failed,
            StatusFilter::Cancelled => RunState::Cancelled,
            StatusFilter::Damaged => RunState::Damaged,
        }
    }
}

pub fn ls(home: &Home, a: LsArgs) -> Result<i32, CliError> {
    let group = a.group.as_deref().map(|g| app::resolve_group(home, g));
    let a = LsArgs {
        group: group.transpose()?,
        ..a
    };
    let rows = app::list_group(home, a.status.map(RunState::from), a.group.as_deref())?;
    if a.json {
        print_json(&rows);
        return Ok(0);
    }
    if rows.is_empty() {
        let state = a
            .status
            .map(|s| format!("{} ", RunState::from(s).as_str()))
            .unwrap_or_default();
        let group = a
            .group
            .as_ref()
            .map(|g| format!(" of group {g}"))
            .unwrap_or_default();
        eprintln!(
            "subpane: no {state}runs{group} in {}",
            home.runs_dir().display()
        );
        return Ok(0);
    }
    let rows = as_tree(rows);
    let color = color_stdout();
    let id_w = rows
        .iter()
        .map(|r| r.run_id.len() + 2 * r.depth.min(8) as usize)
        .max()
        .unwrap_or(6)
        .max(6);
    // A failure says its kind, or its exit code when the program failed (as every table).
    let status_of = |r: &RunRow| match r.status {
        _ if app::fanout::is_driver(r) => group_words(home, r),
        RunState::Failed => failure_words(r.failure_kind, r.exit_code),
        // A fan-out task that has not started: why (`queued (after plan)`).
        RunState::Queued if r.queue.is_some() => r
            .queue
            .as_ref()
            .map(|w| format!("queued ({})", w.words()))
            .unwrap_or_default(),
        // Its start time (`retry --at-reset`), or Slurm's reason for the wait (`Priority`).
        RunState::Queued if r.waiting.is_some() => r
            .waiting
            .as_ref()
            .map(crate::fresh::waiting_words)
            .unwrap_or_default(),
        RunState::Queued => match &r.slurm {
            Some(crate::envelope::SlurmJob {
                reason: Some(r), ..
            }) => format!("queued ({})", crate::term::sanitize(r.as_bytes(), 40)),
            _ => "queued".to_owned(),
        },
        s => s.as_str().to_owned(),
    };
    let st_w = rows
        .iter()
        .map(|r| status_of(r).chars().count())
        .max()
        .unwrap_or(6)
        .max(6);
    // On a terminal, WHAT gets what is left of its width (cut with `…`), so that no line
    // wraps; piped, all of it.
    let what_w = stdout_width().map(|cols| {
        let before = id_w + 2 + st_w + 2 + 7 + 2 + 19 + 2 + 9 + 2;
        cols.saturating_sub(before + 1).max(1)
    });
    // A HOST column only when a run lives on one.
    let host_w = rows
        .iter()
        .filter_map(|r| r.host_shown().map(|h| h.len()))
        .max()
        .map(|w| w.max(4));
    let host_cell = |h: Option<&str>| match host_w {
        Some(w) => format!("{:w$}  ", h.unwrap_or("-")),
        None => String::new(),
    };
    let what_w = what_w.map(|w| w.saturating_sub(host_w.map_or(0, |h| h + 2)).max(1));
    let mut out = format!(
        "{:id_w$}  {:st_w$}  {:7}  {:19}  {:>9}  {}{}\n",
        "RUN",
        "STATUS",
        "AGENT",
        "STARTED (UTC)",
        "DURATION",
        host_cell(Some("HOST")),
        "WHAT"
    );
    for r in &rows {
        let status = status_of(r);
        let status = status.as_str();
        let painted = if color {
            let c = match r.status {
                _ if app::fanout::is_driver(r) => "36",
                RunState::Completed => "32",
                RunState::Failed => "31",
                RunState::Cancelled => "33",
                RunState::Queued | RunState::Starting | RunState::Running => "36",
                RunState::Damaged => "35",
            };
            format!("\x1b[{c}m{status:st_w$}\x1b[0m")
        } else {
            format!("{status:st_w$}")
        };
        let started = r
            .started_at
            .as_deref()
            .unwrap_or(&r.created_at)
            .get(..19)
            .unwrap_or("")
            .replace('T', " ");
        let dur = r
            .duration_ms
            .map(|d| format!("{:.1}s", d as f64 / 1000.0))
            .unwrap_or_else(|| "-".into());
        out.push_str(&format!(
            "{:id_w$}  {painted}  {:7}  {:19}  {:>9}  {}{}\n",
            format!("{}{}", "  ".repeat(r.depth.min(8) as usize), r.run_id),
            r.agent.as_str(),
            started,
            dur,
            host_cell(r.host_shown().as_deref()),
            {
                let what = match &r.problem {
                    Some(p) => crate::term::sanitize(p.as_bytes(), 200),
                    None if app::fanout::is_driver(r) => driver_what(r),
                    None => r.what.clone(),
                };
                match what_w {
                    Some(w) => fit(&what, w).into_owned(),
                    None => what,
                }
            }
        ));
    }
    print(&out);
    Ok(0)
}

/// A fan-out driver's status: `group`, or `group (paused)` while its group is paused.
pub fn group_words(home: &Home, r: &RunRow) -> String {
    let paused = crate::spec::RunId::parse(&r.run_id)
        .is_ok_and(|id| r.status.is_live() && app::fanout::control::read(home, &id).paused);
    if paused { "group (paused)" } else { "group" }.to_owned()
}

/// What a fan-out's driver stands for: its group, and where its tasks are.
pub fn driver_what(r: &RunRow) -> String {
    format!("fan-out group: subpane ls --group {}", r.run_id)
}

/// Rows in tree order: each run's children (runs its program started) right below it,
/// newest first at every level; a child whose parent is not listed stands at the top.
fn as_tree(rows: Vec<RunRow>) -> Vec<RunRow> {
    use std::collections::HashMap;
    let listed: std::collections::HashSet<String> = rows.iter().map(|r| r.run_id.clone()).collect();
    let mut children: HashMap<String, Vec<RunRow>> = HashMap::new();
    let mut roots = Vec::new();
    for r in rows {
        match r.parent_run.clone().filter(|p| listed.contains(p)) {
            Some(p) => children.entry(p).or_default().push(r),
            None => roots.push(r),
        }
    }
    fn walk(r: RunRow, children: &mut HashMap<String, Vec<RunRow>>, out: &mut Vec<RunRow>) {
        let kids = children.remove(&r.run_id).unwrap_or_default();
        out.push(r);
        for k in kids {
            walk(k, children, out);
        }
    }
    let mut out = Vec::new();
    for r in roots {
        walk(r, &mut children, &mut out);
    }
    out
}
