//! Runs that exist: finding them, their state, cancelling, holding stopped (`stop.rs`),
//! listing, cleaning up (waiting for them is [`crate::app::wait`]).
//!
//! Every answer is a typed contract document ([`Envelope`], [`StatusDoc`], [`RunRow`],
//! [`GcReport`], [`CancelRequested`]); printing them is the caller's business.

pub mod group;
pub mod names;
mod send;
mod stop;

pub use send::{Sent, send, send_within};
pub use stop::{StopOutcome, stop_attempt};

use std::time::{Duration, SystemTime};

use crate::app::{Error, worktree};
use crate::envelope::{
    CancelOrigin, CancelRequested, DamagedRun, Envelope, GcReport, LiveStatus, RunRow, RunState,
    STATUS_SCHEMA, StatusDoc, TmuxInfo,
};
use crate::spec::{AttemptSpec, RunId, RunRecord};
use crate::store::{self, AttemptPaths, Home};
use crate::supervisor::{self, AttemptState, observe};
use crate::tmux::{Socket, Tmux};

/// A run with its latest (or chosen) attempt.
#[derive(Clone, Debug)]
pub struct Found {
    /// `run.json` (the attempt list).
    pub record: RunRecord,
    pub paths: AttemptPaths,
    pub spec: AttemptSpec,
}

/// A file of an attempt that `logs` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogFile {
    /// events.jsonl: the agent's filtered JSON events (default for agents).
    Events,
    /// stderr.log: the program's stderr.
    Stderr,
    /// output.txt: the agent's final text.
    Output,
    /// stdout.log: a command's whole stdout in order; an agent's lines that were not events.
    Stdout,
}

impl Found {
    /// The path of `file`, or of the default one: the events of an agent, the stdout of a
    /// command. `None` for the final text of a command, which has none (its words are its
    /// stdout): each front end says so in its own spelling.
    pub fn log_path(&self, file: Option<LogFile>) -> Option<std::path::PathBuf> {
        let command = self.spec.agent == crate::spec::AgentKind::Command;
        let default = if command {
            LogFile::Stdout
        } else {
            LogFile::Events
        };
        Some(match file.unwrap_or(default) {
            LogFile::Events => self.paths.events(),
            LogFile::Stderr => self.paths.stderr_log(),
            LogFile::Output if command => return None,
            LogFile::Output => self.paths.output(),
            LogFile::Stdout => self.paths.stdout_log(),
        })
    }
}

/// Finds a run by id or short name (see [`crate::app::names`]); `attempt` picks one, else the
/// latest.
pub fn find_run(home: &Home, raw_id: &str, attempt: Option<u32>) -> Result<Found, Error> {
    if raw_id != crate::app::names::NEWEST {
        RunId::parse(raw_id)?;
    }
    let id = RunId::parse(&crate::app::names::resolve_run(home, raw_id)?)?;
    let record = store::read_run(home, &id)?.ok_or_else(|| {
        Error::invalid(format!(
            "no run `{id}` in {}; {{@ls}} lists the runs there",
            home.runs_dir().display()
        ))
    })?;
    let n = match attempt {
        Some(n) => {
            if !record.attempts.iter().any(|a| a.attempt == n) {
                let last = record.attempts.iter().map(|a| a.attempt).max().unwrap_or(1);
                return Err(Error::invalid(format!(
                    "run `{id}` has no attempt {n}; it has attempts 1 to {last}"
                )));
            }
            n
        }
        None => record.attempts.iter().map(|a| a.attempt).max().unwrap_or(1),
    };
    let paths = home.attempt(&id, n);
    let spec: AttemptSpec = store::read_json(&paths.spec())?.ok_or_else(|| Error::Damaged {
        path: paths.spec(),
        problem: "is missing".into(),
    })?;
    Ok(Found {
        record,
        paths,
        spec,
    })
}

/// The tmux client for an attempt's recorded socket.
pub fn tmux_for(home: &Home, spec: &AttemptSpec) -> Tmux {
    Tmux::new(Socket::from_path(&spec.tmux.socket), home.tmux_conf())
}

/// An attempt's state as answered to callers: its envelope once finished. Serialised as the
/// document itself (the envelope, or the `subpane.status/v1` document).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(untagged)]
#[allow(clippy::large_enum_variant)] // one per answer: the copy costs nothing
pub enum AttemptStatus {
    Finished(Box<Envelope>),
    Live(StatusDoc),
}

/// Looks at an attempt once (writing `lost` if its worker is gone without a result).
pub fn attempt_status(paths: &AttemptPaths, spec: &AttemptSpec) -> Result<AttemptStatus, Error> {
    let (status, started_at, worker_pid, agent_pid, tmux) = match observe(paths, spec)? {
        AttemptState::Finished(env) => return Ok(AttemptStatus::Finished(env)),
        AttemptState::Running(r) => (
            LiveStatus::Running,
            r.started_at,
            Some(r.worker.pid),
            r.agent.map(|a| a.pid),
            r.tmux,
        ),
        AttemptState::Starting { .. } => (
            LiveStatus::Starting,
            None,
            None,
            None,
            TmuxInfo {
                socket: Some(spec.tmux.socket.display().to_string()),
                session: Some(spec.tmux.session.clone()),
                pane_id: None,
            },
        ),
    };
    // Before its program starts, an attempt that waits for its start time is queued.
    let waiting = spec
        .start_at
        .clone()
        .filter(|s| agent_pid.is_none() && s.instant().is_some_and(|t| t > SystemTime::now()));
    let status = match waiting {
        Some(_) => LiveStatus::Queued,
        None => status,
    };
    Ok(AttemptStatus::Live(StatusDoc {
        schema: STATUS_SCHEMA.to_owned(),
        run_id: spec.run_id.to_string(),
        attempt: spec.attempt,
        agent: spec.agent,
        status,
        started_at,
        worker_pid,
        agent_pid,
        attempt_dir: paths.dir().to_path_buf(),
        labels: spec.labels.clone(),
        correlation_id: spec.correlation_id.clone(),
        tmux,
        slurm: None,
        waiting,
    }))
}

/// What a cancel did.
#[derive(Clone, Debug, PartialEq)]
pub enum CancelOutcome {
    /// Nothing to do: the attempt had finished.
    AlreadyFinished(Box<Envelope>),
    /// `cancel.json` is written and the worker, if it runs, was signalled (one that does not
    /// run the program yet reads it as it starts).
    Requested(CancelRequested),
}

/// Asks an attempt to stop: SIGTERM to its process group, SIGKILL after `grace_ms` (default:
/// the run's own grace).
pub fn cancel(found: &Found, grace_ms: Option<u64>) -> Result<CancelOutcome, Error> {
    cancel_by(found, grace_ms, CancelOrigin::Cancel)
}

/// [`cancel`], recording who asked (`origin`): the envelope's `cancelled_by` says it.
pub fn cancel_by(
    found: &Found,
    grace_ms: Option<u64>,
    origin: CancelOrigin,
) -> Result<CancelOutcome, Error> {
    cancel_asking(found, grace_ms, origin, None)
}

/// [`cancel_by`], with the budget of its fan-out group that was crossed (origin `budget`):
/// the attempt ends as `budget`, and its envelope says which.
pub fn cancel_asking(
    found: &Found,
    grace_ms: Option<u64>,
    origin: CancelOrigin,
    budget: Option<&crate::envelope::BudgetHit>,
) -> Result<CancelOutcome, Error> {
    let grace_ms = grace_ms.unwrap_or(found.spec.limits.grace_ms);
    let asked = ask_live(found, |paths, pane| {
        supervisor::request_cancel(paths, grace_ms, origin, budget, pane)
    })?;
    match asked {
        Asked::Finished(env) => return Ok(CancelOutcome::AlreadyFinished(env)),
        Asked::NotDelivered(why) => {
            return Err(Error::CancelNotDelivered {
                run: found.spec.run_id.to_string(),
                attempt: found.spec.attempt,
                why,
                socket: found.spec.tmux.socket.display().to_string(),
                session: found.spec.tmux.session.clone(),
            });
        }
        Asked::Delivered => {}
    }
    Ok(CancelOutcome::Requested(CancelRequested {
        run_id: found.spec.run_id.to_string(),
        attempt: found.spec.attempt,
        cancel_requested: true,
    }))
}

/// What asking a live attempt's worker (a cancel, a hold) came to.
pub(super) enum Asked {
    /// The attempt had finished, or finished while the request could not be delivered.
    Finished(Box<crate::envelope::Envelope>),
    Delivered,
    /// Nothing was signalled (why), and the attempt still runs.
    NotDelivered(String),
}

/// Asks `found`'s worker by `request` (given its paths and the pane's process, what the
/// worker is proven by), unless the attempt has finished: the one way every request to a
/// worker goes.
pub(super) fn ask_live(
    found: &Found,
    request: impl FnOnce(
        &crate::store::AttemptPaths,
        &dyn Fn() -> Option<i32>,
    ) -> Result<supervisor::Delivery, supervisor::SuperviseError>,
) -> Result<Asked, Error> {
    if let AttemptState::Finished(env) = observe(&found.paths, &found.spec)? {
        return Ok(Asked::Finished(env));
    }
    let pane = || pane_pid(found);
    if let supervisor::Delivery::NotDelivered(why) = request(&found.paths, &pane)? {
        // It may have ended meanwhile: then that is the answer.
        if let AttemptState::Finished(env) = observe(&found.paths, &found.spec)? {
            return Ok(Asked::Finished(env));
        }
        return Ok(Asked::NotDelivered(why));
    }
    Ok(Asked::Delivered)
}

/// The process of the attempt's tmux pane, as tmux says: what a request to its worker is
/// checked against. A question only: it never starts a server, so the home's config is not
/// needed.
fn pane_pid(found: &Found) -> Option<i32> {
    Tmux::new(
        Socket::from_path(&found.spec.tmux.socket),
        "/dev/null".into(),
    )
    .pane_of(&found.spec.tmux.session)
    .ok()
    .map(|p| p.pane_pid)
}

/// The command line or the start of the task, as one line safe for a terminal.
pub fn what(spec: &AttemptSpec) -> String {
    what_of(spec.task.as_ref().map(|t| t.prompt.as_str()), &spec.argv)
}

/// [`what`] of a task's text (an agent's) or else a program's argv.
pub fn what_of(task: Option<&str>, argv: &[String]) -> String {
    let s = match task {
        Some(t) => t.to_owned(),
        None => argv
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let a = if i == 0 {
                    a.rsplit('/').next().unwrap_or(a)
                } else {
                    a
                };
                shell_escape::escape(a.into()).into_owned()
            })
            .collect::<Vec<_>>()
            .join(" "),
    };
    let one_line: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    crate::term::sanitize(one_line.as_bytes(), 60)
}

/// Every run with its latest attempt, newest first; `only` keeps runs in that state. A run
/// whose records cannot be read is a `damaged` row of its own (after the others when even
/// its `run.json` cannot be read): one damaged run never hides the rest.
pub fn list(home: &Home, only: Option<RunState>) -> Result<Vec<RunRow>, Error> {
    let (runs, unreadable) = store::list_runs(home);
    let mut rows = Vec::new();
    for run in runs {
        let row = run_row(home, &run)
            .unwrap_or_else(|problem| damaged_row(run.id.as_str(), Some(&run.record), problem));
        if shown(only, &row) {
            rows.push(row);
        }
    }
    for d in unreadable {
        let row = damaged_row(d.id.as_str(), None, d.error.to_string());
        if shown(only, &row) {
            rows.push(row);
        }
    }
    Ok(rows)
}

/// Whether `row` is listed when only runs in state `only` are asked for: a fan-out's driver
/// is its group's row, not a run in a state of its own.
pub(crate) fn shown(only: Option<RunState>, row: &RunRow) -> bool {
    only.is_none_or(|s| s == row.status && !crate::app::fanout::is_driver(row))
}

/// The row of one run, as [`list`] makes it (a `damaged` row when its records cannot be
/// read); `None` when it has no `run.json` (yet: a run's directory comes first).
pub fn list_one(home: &Home, id: &RunId) -> Option<RunRow> {
    match store::read_run(home, id) {
        Ok(Some(record)) => {
            let run = store::RunEntry {
                id: id.clone(),
                dir: home.run_dir(id),
                record,
            };
            Some(
                run_row(home, &run)
                    .unwrap_or_else(|p| damaged_row(id.as_str(), Some(&run.record), p)),
            )
        }
        Ok(None) => None,
        Err(e) => Some(damaged_row(id.as_str(), None, e.to_string())),
    }
}

/// The row of a run and its latest attempt, or why it cannot be made.
fn run_row(home: &Home, run: &store::RunEntry) -> Result<RunRow, String> {
    let n = run
        .record
        .attempts
        .iter()
        .map(|x| x.attempt)
        .max()
        .ok_or_else(|| format!("{} lists no attempt", home.run_json(&run.id).display()))?;
    let paths = home.attempt(&run.id, n);
    let spec = read_spec(&paths)?;
    let mut row = RunRow {
        run_id: run.id.to_string(),
        attempt: n,
        agent: spec.agent,
        status: RunState::Starting,
        failure_kind: None,
        exit_code: None,
        created_at: run.record.created_at.clone(),
        started_at: None,
        finished_at: None,
        duration_ms: None,
        labels: run.record.labels.clone(),
        correlation_id: run.record.correlation_id.clone(),
        group: run.record.group.clone(),
        parent_run: run.record.lineage.as_ref().map(|l| l.parent_run.clone()),
        depth: run.record.lineage.as_ref().map_or(0, |l| l.depth),
        // A fan-out's driver stands for its group, not for its own command line.
        what: if run
            .record
            .labels
            .contains_key(crate::app::fanout::DRIVER_LABEL)
        {
            format!("fan-out group {}", run.id)
        } else {
            what(&spec)
        },
        problem: None,
        host: None,
        slurm: None,
        waiting: None,
        queue: None,
    };
    match attempt_status(&paths, &spec).map_err(|e| e.to_string())? {
        AttemptStatus::Finished(env) => row.ended(&env),
        AttemptStatus::Live(doc) => {
            row.status = doc.status.into();
            row.started_at = doc.started_at;
            row.waiting = doc.waiting;
        }
    }
    Ok(row)
}

/// An attempt's `spec.json`, or why it cannot be had.
fn read_spec(paths: &AttemptPaths) -> Result<AttemptSpec, String> {
    match store::read_json::<AttemptSpec>(&paths.spec()) {
        Ok(Some(spec)) => Ok(spec),
        Ok(None) => Err(format!("{} is missing", paths.spec().display())),
        Err(e) => Err(e.to_string()),
    }
}

fn damaged_row(id: &str, record: Option<&RunRecord>, problem: String) -> RunRow {
    RunRow {
        run_id: id.to_owned(),
        attempt: record
            .and_then(|r| r.attempts.iter().map(|a| a.attempt).max())
            .unwrap_or(1),
        agent: record.map_or(crate::spec::AgentKind::Command, |r| r.agent),
        status: RunState::Damaged,
        failure_kind: None,
        exit_code: None,
        created_at: record.map(|r| r.created_at.clone()).unwrap_or_default(),
        started_at: None,
        finished_at: None,
        duration_ms: None,
        labels: record.map(|r| r.labels.clone()).unwrap_or_default(),
        correlation_id: record.and_then(|r| r.correlation_id.clone()),
        group: record.and_then(|r| r.group.clone()),
        parent_run: record.and_then(|r| r.lineage.as_ref().map(|l| l.parent_run.clone())),
        depth: record
            .and_then(|r| r.lineage.as_ref())
            .map_or(0, |l| l.depth),
        what: String::new(),
        problem: Some(problem),
        host: None,
        slurm: None,
        waiting: None,
        queue: None,
    }
}

/// How long ago a run must have ended for `gc` to remove it (with a worktree it kept), unless
/// `--older-than` says otherwise: a literal, so that texts built with `concat!` (the FILES of
/// the help) say the same as `gc`'s default.
#[macro_export]
macro_rules! gc_older_than {
    () => {
        "7d"
    };
}

/// [`gc_older_than!`] as a value: `gc`'s default age, and the words of every message that says
/// when a kept worktree goes.
pub const GC_OLDER_THAN: &str = gc_older_than!();

/// Closes the kept sessions of finished attempts, removes runs whose attempts all finished
/// longer than `older_than` ago (with their kept `--worktree` worktrees), and stops the
/// private tmux server when no session is left. Unfinished runs are never touched; nor are
/// runs whose records cannot be read or name what subpane did not make for them (a worktree
/// elsewhere than its own place, a session of another name): those are reported as
/// `damaged`, and the rest goes on. `dry_run` only reports.
pub fn gc(home: &Home, older_than: Duration, dry_run: bool) -> Result<GcReport, Error> {
    let cutoff = SystemTime::now()
        .checked_sub(older_than)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let mut report = GcReport {
        dry_run,
        ..GcReport::default()
    };
    let mut repos = Vec::new();
    // Sockets of tmux servers that did not answer.
    let mut hung: Vec<std::path::PathBuf> = Vec::new();
    let (runs, unreadable) = store::list_runs(home);
    for d in unreadable {
        report.damaged.push(DamagedRun {
            run_id: d.id.to_string(),
            problem: d.error.to_string(),
        });
    }
    for run in runs {
        let look = match look_for_gc(home, &run) {
            Ok(l) => l,
            Err(problem) => {
                report.damaged.push(DamagedRun {
                    run_id: run.id.to_string(),
                    problem,
                });
                continue;
            }
        };
        for spec in &look.kept_sessions {
            // A server that did not answer is asked nothing more (each question would wait
            // out the limit again); it closes nothing and is not stopped below.
            if hung.contains(&spec.tmux.socket) {
                continue;
            }
            let t = tmux_for(home, spec);
            match t.has_session(&spec.tmux.session) {
                Ok(true) => {
                    if !dry_run {
                        let _ = t.kill_session(&spec.tmux.session);
                    }
                    report.closed_sessions.push(spec.tmux.session.clone());
                }
                Ok(false) => {}
                Err(e) => {
                    hung.push(spec.tmux.socket.clone());
                    report.unanswered.push(e.to_string());
                }
            }
        }
        if !look.all_done {
            report.running.push(run.id.to_string());
            continue;
        }
        if look.newest_end.unwrap_or(SystemTime::UNIX_EPOCH) <= cutoff || older_than.is_zero() {
            // Kept worktrees go with their runs, before the records that name them.
            for wt in &look.worktrees {
                if worktree::collect(home, wt, dry_run)? {
                    report.removed_worktrees.push(wt.path.display().to_string());
                    repos.push(wt.common_dir.clone());
                }
            }
            if !dry_run {
                std::fs::remove_dir_all(&run.dir).map_err(|source| Error::Remove {
                    path: run.dir.clone(),
                    source,
                })?;
                // A fan-out's driver goes with its group's record.
                if run
                    .record
                    .labels
                    .contains_key(crate::app::fanout::DRIVER_LABEL)
                {
                    crate::app::fanout::revive::close(&home.group_dir(&run.id));
                    let _ = std::fs::remove_dir_all(home.group_dir(&run.id));
                }
            }
            report.removed_runs.push(run.id.to_string());
        }
    }
    // Runs on hosts: their record here goes once its end came back longer ago than the
    // cutoff (by this machine's clock: when the envelope was written here); the host's own
    // records are its own `gc`'s.
    for far in crate::hosts::remote::list(home) {
        let Ok(id) = RunId::parse(&far.run_id) else {
            continue;
        };
        let ended = crate::hosts::remote::recorded(home, &far, None).and_then(|env| {
            std::fs::metadata(home.attempt(&id, env.attempt).result())
                .and_then(|m| m.modified())
                .ok()
        });
        match ended {
            None => report.running.push(far.run_id.clone()),
            Some(t) if t <= cutoff || older_than.is_zero() => {
                let dir = home.run_dir(&id);
                if !dry_run {
                    std::fs::remove_dir_all(&dir)
                        .map_err(|source| Error::Remove { path: dir, source })?;
                }
                report.removed_runs.push(far.run_id);
            }
            Some(_) => {}
        }
    }
    if !dry_run {
        worktree::prune_all(home, &repos);
    }
    // The private server stays up between attempts; with no session left it is stopped.
    let socket = Socket::from_env();
    if !hung.contains(&socket.path()) {
        let server = Tmux::new(socket, home.tmux_conf());
        match server.sessions() {
            Ok(Some(s)) if s.is_empty() => {
                if !dry_run {
                    let _ = server.kill_server();
                }
                report.server_stopped = true;
            }
            Ok(_) => {}
            Err(e) => report.unanswered.push(e.to_string()),
        }
    }
    Ok(report)
}

/// What `gc` may do with one run, decided from its records before anything is done.
struct GcLook {
    all_done: bool,
    newest_end: Option<SystemTime>,
    worktrees: Vec<crate::spec::WorktreeSpec>,
    /// Finished attempts whose sessions were kept.
    kept_sessions: Vec<AttemptSpec>,
}

/// Reads every attempt of `run` and checks that its records name only what subpane made for
/// that attempt: its own worktree and branch, its own session name. Any doubt: why.
fn look_for_gc(home: &Home, run: &store::RunEntry) -> Result<GcLook, String> {
    let mut look = GcLook {
        all_done: true,
        newest_end: None,
        worktrees: Vec::new(),
        kept_sessions: Vec::new(),
    };
    for at in &run.record.attempts {
        let paths = home.attempt(&run.id, at.attempt);
        let spec = read_spec(&paths)?;
        let session = crate::tmux::session_name(run.id.as_str(), at.attempt);
        if spec.run_id != run.id || spec.attempt != at.attempt || spec.tmux.session != session {
            return Err(format!(
                "{} is not the record of attempt {} of run `{}` (it names run `{}`, attempt {}, session `{}`)",
                paths.spec().display(),
                at.attempt,
                run.id,
                spec.run_id,
                spec.attempt,
                spec.tmux.session
            ));
        }
        if let Some(wt) = &spec.worktree {
            worktree::check_own(home, wt, &run.id, at.attempt)
                .map_err(|e| format!("{}: {e}; left alone", paths.spec().display()))?;
            look.worktrees.push(wt.clone());
        }
        match observe(&paths, &spec).map_err(|e| e.to_string())? {
            AttemptState::Finished(env) => {
                let end = env
                    .finished_at
                    .as_deref()
                    .and_then(|t| humantime::parse_rfc3339(t).ok());
                look.newest_end = look.newest_end.max(end);
                if spec.keep_session {
                    look.kept_sessions.push(spec);
                }
            }
            _ => look.all_done = false,
        }
    }
    Ok(look)
}
