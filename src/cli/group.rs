//! `subpane group G`: a detached group's controls and its tasks, each queued one with why it
//! waits; `--concurrency N` changes how many run at once. `pause --group` and
//! `resume --group` go through [`change`] too.

use clap::Args;

use super::CliError;
use super::common::{print, print_json};
use crate::app;
use crate::app::fanout::control::{self, Change, ControlAnswer};
use crate::store::Home;

#[derive(Debug, Args)]
#[command(after_help = "\
Without --concurrency: the group's controls (paused, concurrency) and every task, each queued
one with why it waits: after its dependencies (after, after_any), until its start time
(start_after, start_at), paused (subpane pause --group G), or for a free slot (concurrency).

Only a group whose driver runs on its own (fanout --detach, the MCP fanout tool) can be
changed; exit 2 for any other group, and for one that has ended.")]
pub struct GroupArgs {
    /// The group id, or a unique start of it (or of its random part)
    #[arg(add = super::docs::group_candidates())]
    pub group: String,
    /// Run at most N of its tasks at once from now on (each place: here, and each host);
    /// running tasks over a lowered limit go on, and no new one starts until they are under it
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub concurrency: Option<u32>,
    /// Print JSON: with --concurrency {"group", "paused", "stop_running", "concurrency",
    /// "taken"}; else the group's report (as `wait --group G --json`), each queued task with
    /// "waiting": {"reason": "dependency"|"delayed"|"paused"|"concurrency", …}
    #[arg(long)]
    pub json: bool,
}

pub fn group(home: &Home, a: GroupArgs) -> Result<i32, CliError> {
    let g = app::resolve_group(home, &a.group)?;
    if let Some(n) = a.concurrency {
        return change(home, &g, &[Change::Concurrency(n as usize)], a.json);
    }
    let Some(report) = app::fanout::group_report(home, &g)? else {
        return Err(app::Error::invalid(format!(
            "group {g} is driven by the fan-out that started it: {{@ls}} --group {g} shows its runs"
        ))
        .into());
    };
    if a.json {
        print_json(&report);
        return Ok(0);
    }
    let id = crate::spec::RunId::parse(&g).map_err(app::Error::from)?;
    let c = control::read(home, &id);
    let open = app::fanout::revive::is_open(home, &id);
    let state = match (open, c.paused, c.stop_running) {
        (false, ..) => "ended",
        (true, true, true) => "paused, its running tasks stopped",
        (true, true, false) => "paused",
        (true, false, _) => "running",
    };
    print(&format!(
        "group {g}: {state}, at most {} at once\n{}",
        c.concurrency.unwrap_or(report.summary.concurrency),
        super::table::rows(&report.tasks, true)
    ));
    Ok(0)
}

/// Makes `change` to group `g` and says what its controls are now.
pub fn change(home: &Home, g: &str, changes: &[Change], json: bool) -> Result<i32, CliError> {
    let answer = control::change(home, g, changes)?;
    if json {
        print_json(&answer);
    } else {
        eprintln!("subpane: {}", words(&answer));
    }
    Ok(0)
}

fn words(a: &ControlAnswer) -> String {
    let state = match (a.paused, a.stop_running) {
        (true, true) => "paused, its running tasks stopped",
        (true, false) => "paused: no new task starts, the running ones go on",
        (false, _) => "running",
    };
    let taken = if a.taken {
        ""
    } else {
        " (its driver has not taken it yet; it will as it runs again)"
    };
    format!(
        "group {}: {state}, at most {} at once{taken}",
        a.group, a.concurrency
    )
}
