//! A fan-out whose driver outlives its caller (`fanout --detach`, the MCP `fanout` tool):
//! the driver is a run of its own, supervised like any other.
//!
//! ```text
//!  caller: plan every task (refused: nothing starts)
//!        ─► groups/<G>/group.json      the tasks: line, run id, what, queue fields (`id`,
//!                                      `after`, `priority`, …: what the driver honours)
//!        ─► groups/<G>/requests.jsonl  the requests, as planned (ids fixed)
//!        ─► run G: `subpane fanout --driver groups/<G>` in its own pane  ─► Started
//!  driver (in the pane): plans the requests again, starts them as `fanout` does, shows the
//!        table; it is a run: `attach G`, `cancel G` (stops the group), `wait --group G`
//!  anyone: group_report(G) ─► every task: its run's state, `queued`, or, once the driver
//!        has ended without starting it, `skipped` with why (never silently dropped)
//! ```
//!
//! Common pitfalls:
//! * The driver plans again in its pane with the caller's environment and directory (a run
//!   inherits both), so it plans what the caller checked; the run ids are fixed in the
//!   requests, so the record names the runs before they exist.
//! * Its tasks are started by a run, so they are nested runs of it (`parent_run` is G),
//!   one level deeper than the caller.
//! * A driver killed before it started a task leaves no trace of that task on disk but the
//!   group record: every report reads the record, never the driver's output.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::super::{
    AttemptStatus, Error, RealSystem, RunRequest, Started, attempt_status, find_run, plan, start,
};
use super::{Options, Task};
use crate::envelope::{FanoutReport, FanoutTask, QueueWait, TaskStatus};
use crate::fresh::now_rfc3339;
use crate::spec::RunId;
use crate::store::{self, Home, StoreError};

/// Schema tag of `group.json`.
pub const GROUP_SCHEMA: &str = "subpane.group/v1";

/// The label that marks a run as a fan-out's driver (its value: the group id).
pub const DRIVER_LABEL: &str = "subpane.fanout_driver";

/// Whether `row` is the driver of a detached fan-out: it stands for its group (shown as the
/// group's row), and is never counted as one more run that failed or ran.
pub fn is_driver(row: &crate::envelope::RunRow) -> bool {
    row.labels.contains_key(DRIVER_LABEL)
}

/// `groups/<G>/group.json`: a fan-out whose driver runs on its own, and its tasks.
///
/// ```json
/// {"schema": "subpane.group/v1", "group": "g-20261130-033943-a1b2c3",
///  "created_at": "2026-11-30T03:39:43.123Z", "concurrency": 4, "fail_fast": false,
///  "cancel_siblings": false,
///  "tasks": [{"line": 1, "run_id": "lint-1", "what": "make lint"}]}
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupRecord {
    pub schema: String,
    pub group: String,
    pub created_at: String,
    pub concurrency: usize,
    pub fail_fast: bool,
    pub cancel_siblings: bool,
    /// `--hosts`: where its tasks without a host of their own go.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// `--max-tokens`, `--max-cost`: the group's budget.
    #[serde(default, skip_serializing_if = "super::GroupBudget::is_empty")]
    pub budget: super::GroupBudget,
    /// `--on-usage-limit`.
    #[serde(default, skip_serializing_if = "super::OnUsageLimit::is_fail")]
    pub on_usage_limit: super::OnUsageLimit,
    pub tasks: Vec<GroupTask>,
}

/// One task of a [`GroupRecord`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupTask {
    pub line: usize,
    pub run_id: String,
    pub what: String,
    /// It runs on a host (the line's own, or one of the group's `hosts`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub remote: bool,
    /// Its agent (`command` for a program), for `ls --group` before its run exists.
    #[serde(default = "command")]
    pub agent: crate::spec::AgentKind,
    /// Its queue fields (`id`, `after`, `after_any`, `priority`, `start_after`, `start_at`).
    #[serde(flatten)]
    pub queue: super::Queue,
}

fn command() -> crate::spec::AgentKind {
    crate::spec::AgentKind::Command
}

/// One line of `requests.jsonl`.
#[derive(Debug, Serialize, Deserialize)]
pub struct NumberedRequest {
    pub line: usize,
    pub request: RunRequest,
}

fn write_err(path: std::path::PathBuf) -> impl FnOnce(std::io::Error) -> Error {
    move |source| StoreError::Write { path, source }.into()
}

/// Records the group of `tasks` and starts its driver, run `group`, in a pane of its own.
/// The tasks were planned for `group`; nothing of them starts here.
pub fn detach(home: &Home, group: &str, tasks: &[Task], opts: &Options) -> Result<Started, Error> {
    opts.check_budget(tasks)?;
    let id = RunId::parse(group)?;
    let dir = home.group_dir(&id);
    std::fs::create_dir_all(home.groups_dir()).map_err(write_err(home.groups_dir()))?;
    std::fs::create_dir(&dir).map_err(write_err(dir.clone()))?;
    let record = GroupRecord {
        schema: GROUP_SCHEMA.into(),
        group: group.into(),
        created_at: now_rfc3339(),
        concurrency: opts.concurrency,
        fail_fast: opts.fail_fast,
        cancel_siblings: opts.cancel_siblings,
        hosts: opts.hosts.clone(),
        budget: opts.budget,
        on_usage_limit: opts.on_usage_limit,
        tasks: tasks
            .iter()
            .map(|t| GroupTask {
                line: t.line,
                run_id: t.run_id().to_owned(),
                what: t.what(),
                remote: !matches!(t.place, super::Place::Here(_)),
                agent: t.request.agent.unwrap_or(crate::spec::AgentKind::Command),
                queue: t.queue.clone(),
            })
            .collect(),
    };
    let mut lines = String::new();
    for t in tasks {
        let n = NumberedRequest {
            line: t.line,
            request: t.request.clone(),
        };
        lines.push_str(
            &serde_json::to_string(&n)
                .map_err(std::io::Error::other)
                .map_err(write_err(dir.clone()))?,
        );
        lines.push('\n');
    }
    // Environment values of the requests stay in this one file, like an attempt's env file.
    store::write_atomic(&dir.join("requests.jsonl"), lines.as_bytes())?;
    store::write_json_atomic(&dir.join("group.json"), &record)?;
    super::revive::open(home, &id)?;
    let exe = std::env::current_exe().map_err(Error::CurrentExe)?;
    let req = RunRequest {
        argv: vec![
            exe.display().to_string(),
            "fanout".into(),
            "--driver".into(),
            dir.display().to_string(),
        ],
        run_id: Some(group.to_owned()),
        // Time for the driver, once cancelled, to cancel its tasks and see them end.
        grace: Some("30s".into()),
        labels: BTreeMap::from([(DRIVER_LABEL.to_owned(), group.to_owned())]),
        ..RunRequest::default()
    };
    let p = plan(&req, home, &RealSystem)?;
    start(home, p)
}

/// What a driver reads: the group record and the lines (each request with its task's queue
/// fields from the record), by line.
pub fn read_driver_input(
    dir: &std::path::Path,
) -> Result<(GroupRecord, Vec<(usize, super::Line)>), Error> {
    let record: GroupRecord =
        store::read_json(&dir.join("group.json"))?.ok_or_else(|| Error::Damaged {
            path: dir.join("group.json"),
            problem: "is missing".into(),
        })?;
    let path = dir.join("requests.jsonl");
    let text = std::fs::read_to_string(&path).map_err(|source| StoreError::Read {
        path: path.clone(),
        source,
    })?;
    // Kept while the group is open (a driver started again reads it); removed as the
    // driver ends by itself (revive.rs), with the values of `env` in it.
    let mut requests = Vec::new();
    for l in text.lines().filter(|l| !l.trim().is_empty()) {
        let n: NumberedRequest = serde_json::from_str(l).map_err(|e| Error::Damaged {
            path: path.clone(),
            problem: format!("has a line that is not a request ({e})"),
        })?;
        let queue = record
            .tasks
            .iter()
            .find(|t| t.line == n.line)
            .map(|t| t.queue.clone())
            .unwrap_or_default();
        requests.push((
            n.line,
            super::Line {
                queue,
                request: n.request,
            },
        ));
    }
    Ok((record, requests))
}

impl GroupRecord {
    /// The fan-out's options, as given.
    pub fn options(&self) -> Options {
        Options {
            concurrency: self.concurrency,
            fail_fast: self.fail_fast,
            cancel_siblings: self.cancel_siblings,
            tick: None,
            hosts: self.hosts.clone(),
            budget: self.budget,
            on_usage_limit: self.on_usage_limit,
        }
    }

    /// When the fan-out was given: what `start_after` counts from.
    pub fn anchor(&self) -> std::time::SystemTime {
        humantime::parse_rfc3339_weak(&self.created_at)
            .unwrap_or_else(|_| std::time::SystemTime::now())
    }
}

/// What a driver drives: the group's tasks, each planned, or adopted when its run exists
/// already (a driver started again: adopt.rs), and its record.
pub fn driver_tasks(home: &Home, dir: &std::path::Path) -> Result<(GroupRecord, Vec<Task>), Error> {
    let (record, lines) = read_driver_input(dir)?;
    let mut adopted = Vec::new();
    let mut fresh = Vec::new();
    let mut queues = std::collections::HashMap::new();
    for (n, l) in lines {
        let t = record.tasks.iter().find(|t| t.line == n);
        let run_id = l.request.run_id.clone().unwrap_or_default();
        match super::adopt::existing(home, &run_id, t.is_some_and(|t| t.remote)) {
            Some(e) => adopted.push(Task {
                line: n,
                place: super::Place::Started(e),
                request: l.request,
                queue: l.queue,
            }),
            // Its queue fields are checked with every task's, adopted ones too (Fanout::new).
            None => {
                queues.insert(n, l.queue);
                fresh.push((n, l.request.into()));
            }
        }
    }
    let mut tasks = super::plan_lines(fresh, home, &RealSystem, &record.group, &record.hosts)?;
    for t in &mut tasks {
        t.queue = queues.remove(&t.line).unwrap_or_default();
    }
    tasks.extend(adopted);
    tasks.sort_by_key(|t| t.line);
    Ok((record, tasks))
}

/// The group record of `group`, if its driver runs on its own.
pub fn group_record(home: &Home, group: &str) -> Option<GroupRecord> {
    let id = RunId::parse(group).ok()?;
    store::read_json(&home.group_dir(&id).join("group.json"))
        .ok()
        .flatten()
}

/// The report of a group whose driver runs on its own, as it stands: each task's run, or
/// `queued`, or `skipped` (with why) once the driver has ended without starting it.
/// `None` when the group has no record (its fan-out ran in its caller).
pub fn group_report(home: &Home, group: &str) -> Result<Option<FanoutReport>, Error> {
    let Some(record) = group_record(home, group) else {
        return Ok(None);
    };
    let driver = find_run(home, group, None)?;
    let driver_end = match attempt_status(&driver.paths, &driver.spec)? {
        AttemptStatus::Finished(env) => Some(env),
        AttemptStatus::Live(_) => None,
    };
    let mut tasks = Vec::with_capacity(record.tasks.len());
    for t in &record.tasks {
        let exists = RunId::parse(&t.run_id)
            .map(|id| home.run_json(&id).exists())
            .unwrap_or(false);
        let mut task = FanoutTask {
            line: t.line,
            id: t.queue.id.clone(),
            run_id: None,
            status: TaskStatus::Queued,
            failure_kind: None,
            exit_code: None,
            duration_ms: None,
            attempt_dir: None,
            what: t.what.clone(),
            error: None,
            waiting: None,
        };
        let far = match RunId::parse(&t.run_id) {
            Ok(id) if t.remote => crate::hosts::remote::find(home, &id).ok().flatten(),
            _ => None,
        };
        if let Some(far) = far {
            // Its end as recorded here; until then it runs there (the driver waits for it).
            task.run_id = Some(t.run_id.clone());
            match crate::hosts::remote::recorded(home, &far, None) {
                Some(env) => {
                    task.attempt_dir = RunId::parse(&t.run_id)
                        .ok()
                        .map(|id| home.attempt(&id, env.attempt).dir().to_path_buf());
                    task.ended(&env);
                }
                None => task.status = TaskStatus::Running,
            }
        } else if exists {
            let f = find_run(home, &t.run_id, None)?;
            task.run_id = Some(t.run_id.clone());
            task.attempt_dir = Some(f.paths.dir().to_path_buf());
            match attempt_status(&f.paths, &f.spec)? {
                AttemptStatus::Finished(env) => task.ended(&env),
                AttemptStatus::Live(_) => task.status = TaskStatus::Running,
            }
        } else if let Some(env) = &driver_end {
            task.status = TaskStatus::Skipped;
            task.error = Some(format!(
                "{NEVER_STARTED} (run {group}) ended first ({}{})",
                env.status.as_str(),
                env.failure_kind
                    .map(|k| format!(", {}", k.as_str()))
                    .unwrap_or_default()
            ));
        }
        tasks.push(task);
    }
    if driver_end.is_none() {
        say_why_waiting(home, &record, &mut tasks);
    } else {
        say_why_skipped(&record, &mut tasks);
    }
    let duration_ms = driver_end.and_then(|e| e.duration_ms).unwrap_or(0);
    Ok(Some(FanoutReport::new(
        group.to_owned(),
        tasks,
        record.concurrency,
        duration_ms,
    )))
}

/// Each task of a group whose driver ended that never started because a dependency did not
/// complete: that is why (the driver's own words), not its driver's end.
fn say_why_skipped(record: &GroupRecord, tasks: &mut [FanoutTask]) {
    let queues: Vec<_> = record.tasks.iter().map(|t| (t.line, &t.queue)).collect();
    let Ok(order) = super::queue::order(&queues, "line") else {
        return;
    };
    // In rounds: a task skipped for its dependency skips its own dependants in turn.
    loop {
        let status: Vec<TaskStatus> = tasks.iter().map(|t| t.status).collect();
        let next = tasks.iter().enumerate().find_map(|(i, t)| {
            let by_driver = t.run_id.is_none()
                && t.error
                    .as_deref()
                    .is_some_and(|e| e.starts_with(NEVER_STARTED));
            by_driver
                .then(|| order.blocked(i, |j| Some(status[j])))
                .flatten()
                .map(|why| (i, why))
        });
        let Some((i, why)) = next else { return };
        tasks[i].error = Some(why);
    }
}

/// The start of why a task never started because its driver ended first.
pub const NEVER_STARTED: &str = "never started: the fan-out's driver";

/// Each queued task of a group whose driver runs: why it waits, by the queue's own rule.
fn say_why_waiting(home: &Home, record: &GroupRecord, tasks: &mut [FanoutTask]) {
    let ended: Vec<bool> = tasks
        .iter()
        .map(|t| !matches!(t.status, TaskStatus::Queued | TaskStatus::Running))
        .collect();
    let waits = why_waiting(home, record, |i| ended[i]);
    for (t, w) in tasks.iter_mut().zip(waits) {
        if t.status == TaskStatus::Queued {
            t.waiting = w;
        }
    }
}

/// Why each task of `record` would wait if it has not started (`ended`: whether task `i`,
/// by index, has ended), by the queue's one rule ([`super::queue::waiting`]); `None` where
/// the group's queue fields cannot be read.
pub fn why_waiting(
    home: &Home,
    record: &GroupRecord,
    ended: impl Fn(usize) -> bool,
) -> Vec<Option<QueueWait>> {
    let queues: Vec<_> = record.tasks.iter().map(|t| (t.line, &t.queue)).collect();
    let Ok(order) = super::queue::order(&queues, "line") else {
        return vec![None; record.tasks.len()];
    };
    let control = RunId::parse(&record.group)
        .map(|id| super::control::read(home, &id))
        .unwrap_or_default();
    let anchor = record.anchor();
    (0..record.tasks.len())
        .map(|i| {
            Some(super::queue::waiting(
                &order,
                i,
                &ended,
                anchor,
                &control,
                record.concurrency,
            ))
        })
        .collect()
}

/// A detached group's queue as the runs here stand: whether it is paused, and each of its
/// tasks that has not started (by index into `record.tasks`) with why it waits.
pub struct GroupQueue {
    pub record: GroupRecord,
    pub paused: bool,
    pub queued: Vec<(usize, QueueWait)>,
}

/// The queue of `group` while it has work left (`None`: not detached, or ended), from the
/// state of each run the caller already read (`state_of` a run id; `None`: no row for it).
/// A task whose run exists here without a row (a run on a host not asked) has started.
pub fn queue_of(
    home: &Home,
    group: &str,
    state_of: impl Fn(&str) -> Option<crate::envelope::RunState>,
) -> Option<GroupQueue> {
    let id = RunId::parse(group).ok()?;
    if !super::revive::is_open(home, &id) {
        return None;
    }
    let record = group_record(home, group)?;
    let started = |run: &str| {
        state_of(run).is_some() || RunId::parse(run).is_ok_and(|r| home.run_dir(&r).exists())
    };
    let ended = |i: usize| state_of(&record.tasks[i].run_id).is_some_and(|s| !s.is_live());
    let waits = why_waiting(home, &record, ended);
    let queued = waits
        .into_iter()
        .enumerate()
        .filter(|(i, _)| !started(&record.tasks[*i].run_id))
        .filter_map(|(i, w)| Some((i, w?)))
        .collect();
    let paused = super::control::read(home, &id).paused;
    Some(GroupQueue {
        record,
        paused,
        queued,
    })
}

/// The tasks of a detached group that have not started, as rows of `ls` (their runs do not
/// exist yet: `attempt` 0, under their driver), each with why it waits ([`queue_of`]).
pub fn queued_rows(
    home: &Home,
    group: &str,
    state_of: impl Fn(&str) -> Option<crate::envelope::RunState>,
) -> Vec<crate::envelope::RunRow> {
    let Some(q) = queue_of(home, group, state_of) else {
        return Vec::new();
    };
    q.queued
        .into_iter()
        .map(|(i, why)| {
            let t = &q.record.tasks[i];
            crate::envelope::RunRow {
                run_id: t.run_id.clone(),
                attempt: 0,
                agent: t.agent,
                status: crate::envelope::RunState::Queued,
                failure_kind: None,
                exit_code: None,
                created_at: q.record.created_at.clone(),
                started_at: None,
                finished_at: None,
                duration_ms: None,
                labels: BTreeMap::new(),
                correlation_id: None,
                group: Some(group.to_owned()),
                parent_run: Some(group.to_owned()),
                depth: 1,
                what: t.what.clone(),
                problem: None,
                host: None,
                slurm: None,
                waiting: None,
                queue: Some(why),
            }
        })
        .collect()
}
