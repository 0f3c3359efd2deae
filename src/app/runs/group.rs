//! The runs of a fan-out group (`ls --group`, `wait --group`), found by the `group` of each
//! `run.json`.
//!
//! A group exists only as that field: there is no group file to go stale, and a fan-out that
//! was killed leaves exactly the runs it started.

use crate::app::runs::shown;
use crate::app::{Error, Found, find_run, list};
use crate::envelope::{RunRow, RunState};
use crate::store::{self, Home};

/// The runs of `group` that exist now, oldest first (the order the fan-out started them, up to runs created
/// in the same millisecond, which go by id). An unknown group is an error.
pub fn group_runs(home: &Home, group: &str) -> Result<Vec<Found>, Error> {
    let mut runs: Vec<_> = store::list_runs(home)
        .0
        .into_iter()
        .filter(|r| r.record.group.as_deref() == Some(group))
        .collect();
    if runs.is_empty() {
        return Err(Error::invalid(format!(
            "no runs in group `{group}` in {}; {{@ls}} shows each run's group",
            home.runs_dir().display()
        )));
    }
    runs.sort_by(|a, b| {
        a.record
            .created_at
            .cmp(&b.record.created_at)
            .then_with(|| a.id.cmp(&b.id))
    });
    runs.iter()
        .map(|r| find_run(home, r.id.as_str(), None))
        .collect()
}

/// The runs of `group` that live on hosts, oldest first (their records here say the group).
pub fn group_far(home: &Home, group: &str) -> Vec<crate::hosts::remote::RemoteRun> {
    let mut far: Vec<_> = crate::hosts::remote::list(home)
        .into_iter()
        .filter(|r| r.group.as_deref() == Some(group))
        .collect();
    far.reverse();
    far
}

/// [`list`], keeping only the runs of `group` when one is given; without one, with the
/// runs on hosts too (each host asked once: `crate::hosts::remote::rows`).
pub fn list_group(
    home: &Home,
    only: Option<RunState>,
    group: Option<&str>,
) -> Result<Vec<RunRow>, Error> {
    let all = list(home, None)?;
    // The tasks of detached groups that have not started: rows of their own, with why they
    // wait, from the states just read (under their driver's row).
    let mut queued = Vec::new();
    if only.is_none_or(|s| s == RunState::Queued) {
        let states: std::collections::HashMap<&str, RunState> =
            all.iter().map(|r| (r.run_id.as_str(), r.status)).collect();
        let groups = match group {
            Some(g) => vec![g.to_owned()],
            None => crate::app::fanout::revive::open_groups(home),
        };
        for g in groups {
            queued.extend(crate::app::fanout::queued_rows(home, &g, |run| {
                states.get(run).copied()
            }));
        }
    }
    let mut rows: Vec<RunRow> = all.into_iter().filter(|r| shown(only, r)).collect();
    rows.extend(queued);
    if let Some(g) = group {
        rows.retain(|r| r.group.as_deref() == Some(g));
        if group_far(home, g).is_empty() {
            return Ok(rows);
        }
    }
    // Runs on hosts: asked there, newest first among the rest.
    let far: Vec<RunRow> = crate::hosts::remote::rows(home)
        .into_iter()
        .filter(|r| group.is_none_or(|g| r.group.as_deref() == Some(g)))
        .collect();
    if !far.is_empty() {
        rows.extend(
            far.into_iter()
                .filter(|r| only.is_none_or(|s| s == r.status)),
        );
        rows.sort_by(|a, b| b.created_at.cmp(&a.created_at));
    }
    Ok(rows)
}
