//! A detached group outlives its driver: a driver that died (killed, its pane gone) with
//! work left is started again, as the next attempt of its run, by the next subpane command
//! that sees it dead, or by `fanout --resume-group G`. The new driver carries on from the
//! records (see [`super::adopt`]): nothing started twice, nothing lost.
//!
//! ```text
//!  groups/.open/<G> present ─ the group is open: its driver owes work (one small
//!      directory, so a command looks at the open groups only, however many ended)
//!      driver (run G) live ──────────► nothing to do
//!      driver ended ─► lock groups/<G>/lock ─► still open, still ended? ─► retry run G
//!  the driver ends by itself (all ended, stopped, cancelled, an error) ─► close: removes
//!      .open/<G> and requests.jsonl (the values of `env` it holds) before its run ends
//! ```
//!
//! Common pitfalls:
//! * Only a death leaves the group open: a driver that returns, even with an error, closes
//!   it first, so a driver that cannot plan is not started again and again.
//! * A driver that keeps dying is started at most [`MAX_DRIVER_ATTEMPTS`] times in all;
//!   then its group stays as it is, and `wait --group` reports its queued tasks skipped.
//! * Two commands may see the same death at once: the lock and a second look under it
//!   start one driver.

use super::super::{
    AttemptStatus, Error, RealSystem, RetryOptions, attempt_status, find_run, prepare_retry, start,
};
use crate::spec::RunId;
use crate::store::{self, Home};

/// A group's driver is started at most this often (its first start included).
pub const MAX_DRIVER_ATTEMPTS: u32 = 5;

/// Whether `group` still has a driver that owes work (it has not ended by itself).
pub fn is_open(home: &Home, group: &RunId) -> bool {
    home.open_groups_dir().join(group.as_str()).exists()
}

/// `group` has work left from now on (before its first driver starts).
pub(super) fn open(home: &Home, group: &RunId) -> Result<(), Error> {
    let dir = home.open_groups_dir();
    let write_err = |source| store::StoreError::Write {
        path: dir.clone(),
        source,
    };
    std::fs::create_dir_all(&dir).map_err(write_err)?;
    std::fs::File::create(dir.join(group.as_str())).map_err(write_err)?;
    Ok(())
}

/// The driver of the group recorded in `dir` (`groups/<G>`) ends by itself, or the group is
/// removed: closed (never started again), the values of `env` in its requests gone.
pub fn close(dir: &std::path::Path) {
    let _ = std::fs::remove_file(dir.join("requests.jsonl"));
    if let (Some(groups), Some(name)) = (dir.parent(), dir.file_name()) {
        let _ = std::fs::remove_file(groups.join(".open").join(name));
    }
}

/// The groups that have work left (their driver live or dead).
pub fn open_groups(home: &Home) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(home.open_groups_dir()) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| RunId::parse(&e.file_name().to_string_lossy()).ok())
        .map(|id| id.to_string())
        .collect()
}

/// What [`revive`] did to one group.
#[derive(Debug)]
pub struct Revived {
    pub group: String,
    /// The attempt of the driver's run now driving it, or why none could start.
    pub outcome: Result<u32, Error>,
}

impl Revived {
    /// What was done, for stderr: `group G: its driver had died; driving it again (…)`.
    pub fn words(&self) -> String {
        let g = &self.group;
        match &self.outcome {
            Ok(n) => {
                format!("group {g}: its driver had died; driving it again (run {g}, attempt {n})")
            }
            Err(e) => {
                format!("warning: group {g}: its driver had died and cannot be started again: {e}")
            }
        }
    }
}

/// What a command (or MCP call) that may see a dead driver does first: [`revive`], but not
/// the group whose driver `cancelled` names (a cancel of a dead driver stops its group:
/// [`stop_if_dead`]). What it did, for stderr.
pub fn revive_seen(home: &Home, cancelled: Option<&str>) -> Vec<Revived> {
    let except: Vec<String> = cancelled
        .and_then(|r| find_run(home, r, None).ok())
        .map(|f| vec![f.spec.run_id.to_string()])
        .unwrap_or_default();
    revive(home, &except)
}

/// Starts again the driver of every open group whose driver has ended (but those in
/// `except`): what it did to each.
pub fn revive(home: &Home, except: &[String]) -> Vec<Revived> {
    open_groups(home)
        .into_iter()
        .filter(|g| !except.contains(g) && driver_ended(home, g))
        .filter_map(|g| revive_one(home, &RunId::parse(&g).ok()?))
        .collect()
}

/// Starts the driver of `group` again if it has ended and the group is open (`None`: it
/// had not, or another command just did).
pub fn revive_one(home: &Home, id: &RunId) -> Option<Revived> {
    let group = id.to_string();
    let dir = home.group_dir(id);
    let _lock = store::Exclusive::acquire(&dir.join("lock")).ok()?;
    // Under the lock: another command may have started it meanwhile.
    if !is_open(home, id) || !driver_ended(home, &group) {
        return None;
    }
    let outcome = (|| {
        let found = find_run(home, &group, None)?;
        if found.spec.attempt >= MAX_DRIVER_ATTEMPTS {
            close(&dir);
            return Err(Error::invalid(format!(
                "its driver (run {group}) has died {} times; not starting it again",
                found.spec.attempt
            )));
        }
        let planned = prepare_retry(home, &group, &RetryOptions::default(), &RealSystem)?;
        let started = start(home, planned.plan)?;
        Ok(started.spec.attempt)
    })();
    Some(Revived { group, outcome })
}

/// Whether the latest attempt of the group's driver has ended: a run with the group's id
/// that is its driver (a record under `groups/` never makes another run start again).
fn driver_ended(home: &Home, group: &str) -> bool {
    match find_run(home, group, None) {
        Ok(f) if f.record.labels.get(super::DRIVER_LABEL).map(String::as_str) != Some(group) => {
            false
        }
        Ok(f) => matches!(
            attempt_status(&f.paths, &f.spec),
            Ok(AttemptStatus::Finished(_))
        ),
        Err(_) => false,
    }
}

/// `cancel` of run `f` that had already ended: when it is the driver of a group with work
/// left, the group is stopped as its driver would have ([`stop_dead`]); how many running
/// tasks were cancelled, `None` for any other run.
pub fn stop_if_dead(home: &Home, f: &crate::app::Found) -> Result<Option<usize>, Error> {
    if !f.record.labels.contains_key(super::DRIVER_LABEL) || !is_open(home, &f.spec.run_id) {
        return Ok(None);
    }
    stop_dead(home, f.spec.run_id.as_str()).map(Some)
}

/// The words for stderr of [`stop_if_dead`]'s `n`.
pub fn stopped_words(group: &str, n: usize) -> String {
    format!(
        "group {group}: its driver had died; its queued tasks will not start, {n} running task{} cancelled",
        if n == 1 { "" } else { "s" }
    )
}

/// `cancel G` of a group whose driver had died: the group is closed (its queued tasks never
/// start) and its running tasks here are cancelled, as its driver would have. How many were.
pub fn stop_dead(home: &Home, group: &str) -> Result<usize, Error> {
    let id = RunId::parse(group)?;
    let dir = home.group_dir(&id);
    {
        let _lock = store::Exclusive::acquire(&dir.join("lock"))?;
        if !is_open(home, &id) || !driver_ended(home, group) {
            return Ok(0);
        }
        close(&dir);
    }
    let mut n = 0;
    for row in super::super::list_group(home, None, Some(group))? {
        if super::is_driver(&row) || row.host.is_some() || !row.status.is_live() {
            continue;
        }
        // One that cannot be cancelled runs on (`ls` shows it); the others are still asked.
        let cancelled = find_run(home, &row.run_id, None)
            .and_then(|f| super::super::cancel_by(&f, None, crate::envelope::CancelOrigin::Fanout));
        n += usize::from(cancelled.is_ok());
    }
    Ok(n)
}
