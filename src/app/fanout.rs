//! Fan-out: many runs from one file of requests, at most N at a time, as one driver of the
//! [`WaitLoop`]. It reports through [`Event`]s and prints nothing.
//!
//! ```text
//!  tasks (planned) ─► queue ──start_many (≤ N - running)──► running ──Seen::Finished──► done
//!                       │        (Driver::settled: after     │  one refill for every end
//!                       │         each burst of ends)        │  the loop already knew
//!                       │ stop (fail-fast, interrupt)         ▼
//!                       ▼                          cancel (--cancel-siblings, interrupt)
//!                    skipped
//!
//!  Interrupter::interrupt (any thread) ─► the loop: 1st stops and cancels, 2nd kills
//!  Options::tick ─► the loop's heartbeat ─► Event::Tick (a clock to redraw)
//!  queue fields (queue.rs): a task is ready once its `after` completed, its `after_any`
//!      ended and its `start_after`/`start_at` passed; the ready ones start by `priority`
//!      (then file order); the next start time is the loop's wake_at (no polling); a task
//!      whose `after` did not complete is skipped ("its dependency \"plan\" failed")
//!  Options::budget ─► each task's usage (progress.json, its end) summed ─► crossed: stop,
//!                     cancel what runs as `budget` (usage.rs, budget.rs)
//!
//!  a task for a host ─► a thread: start there and wait there, one ssh session (far.rs)
//!                        ─► News (started, ended) ─► waker ─► Driver::settled takes it
//!
//!  refill.rs: what starts (ready, by priority, ≤ N per place) · stop.rs: what stops it
//! ```
//!
//! The concurrency holds for each place: here, and each host (a task of `--hosts` goes to
//! the one of them with the most room, so a slow host gets fewer).
//!
//! Every run carries the fan-out's group id (`run.json`, `spec.json`, the envelope), so a
//! fan-out that is killed loses nothing: the started runs go on, and `wait --group` finds them.
//!
//! Common pitfalls:
//! * Refill in [`Driver::settled`], never on each end: ends come in bursts, and one batch of
//!   starts costs what one start does.
//! * A pane that cannot start is a finished task (`failed`, `spawn`), not a running one: it
//!   must not hold a slot of the concurrency.
//! * A skipped task never had a run: its `attempt_dir` is `null`, and nothing on disk knows
//!   it. Only this report does.

mod adopt;
mod budget;
pub mod control;
mod detached;
mod events;
mod far;
pub mod queue;
mod refill;
pub mod revive;
mod stop;
mod tasks;
mod usage;

pub use budget::GroupBudget;
pub use detached::{
    DRIVER_LABEL, GROUP_SCHEMA, GroupQueue, GroupRecord, GroupTask, NEVER_STARTED, detach,
    driver_tasks, group_record, group_report, is_driver, queue_of, queued_rows, read_driver_input,
    why_waiting,
};
pub use events::{Event, Progress, StopReason};
pub use queue::{Line, QUEUE_FIELDS, Queue};
pub use tasks::{Place, Task, new_group_id, plan_lines, plan_requests, plan_tasks};

use std::collections::{HashMap, VecDeque};
use std::ops::ControlFlow;
use std::time::{Duration, Instant, SystemTime};

use super::wait_loop::{Driver, Interrupter, Seen, WaitLoop, done_when};
use super::{Error, Plan, RunRequest, Started, start_many};
use crate::envelope::{BudgetHit, Envelope, FanoutReport, FanoutTask, SoFar, TaskStatus};
use crate::spec::RunRecord;
use crate::store::Home;
use crate::supervisor::Token;

/// At most this many runs at once unless asked otherwise (agents mostly wait on their model).
pub const DEFAULT_CONCURRENCY: u32 = 4;

/// How a fan-out runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// At most this many runs at once (≥ 1).
    pub concurrency: usize,
    /// Start nothing new after the first task that does not complete.
    pub fail_fast: bool,
    /// With the first failure, also cancel the running tasks (implies `fail_fast`).
    pub cancel_siblings: bool,
    /// Report [`Event::Tick`] this often (for a clock); `None`: only real events.
    pub tick: Option<Duration>,
    /// The hosts a task of [`Place::AnyHost`] may go to (`--hosts`).
    pub hosts: Vec<String>,
    /// The group's budget, over all its tasks (`--max-tokens`, `--max-cost`).
    pub budget: GroupBudget,
    /// What a task that ends at its account's usage limit does (`--on-usage-limit`).
    pub on_usage_limit: OnUsageLimit,
}

/// What a fan-out does with a task that ended at its account's usage limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnUsageLimit {
    /// It ends as it is: `failed`, `usage_limit`.
    #[default]
    Fail,
    /// Its run's next attempt waits for the reset in its pane (as `retry --at-reset`), keeps
    /// the task's slot, and resumes the session; the task ends as that attempt does.
    Wait,
}

impl OnUsageLimit {
    pub fn is_fail(&self) -> bool {
        *self == OnUsageLimit::Fail
    }
}

impl Options {
    /// Refuses a budget the group's tasks cannot be held to (see [`GroupBudget::check`]):
    /// before the group starts, here or in a driver of its own.
    pub fn check_budget(&self, tasks: &[Task]) -> Result<(), Error> {
        let agents: Vec<_> = tasks
            .iter()
            .map(|t| match &t.place {
                Place::Here(p) => (t.line, Some(p.spec.agent), p.spec.limits.price.is_some()),
                Place::Host(_) | Place::AnyHost | Place::Started(_) => {
                    (t.line, t.request.agent, t.request.price.is_some())
                }
            })
            .collect();
        self.budget.check(&agents)
    }
}

enum Phase {
    Queued(Box<Plan>),
    /// For a host: the line's own (`Some`), or any of [`Options::hosts`].
    QueuedThere(Box<RunRequest>, Option<String>),
    /// Between the queue and `start_many`.
    Starting,
    Running {
        record: Box<RunRecord>,
        started: Box<Started>,
    },
    /// Sent to a host ([`far::Far`] knows which); `run` once it runs there.
    There {
        run: Option<Box<crate::hosts::remote::RemoteRun>>,
    },
    Done(FanoutTask),
    /// Its run exists already (a driver started again): adopted as the loop starts.
    Adopt(adopt::Existing),
}

struct Slot {
    line: usize,
    /// Its queue `id`, if it has one.
    id: Option<String>,
    run_id: String,
    what: String,
    state: Phase,
    /// How often its run waited for a usage limit to reset (`--on-usage-limit wait`).
    waited: u32,
    /// Whether its run was asked to stop (SIGSTOP) by the group's pause; `None`: not known
    /// (adopted), so the first control sets it either way.
    stopped: Option<bool>,
}

/// A task waits for its usage limit to reset at most this often; then it ends as the limit
/// (a limit that is still there after its reset is not one a wait ends).
const USAGE_WAITS: u32 = 3;

/// One fan-out: build it, hand [`Fanout::interrupter`] to whoever takes signals, then
/// [`Fanout::run`].
pub struct Fanout<'h> {
    wl: WaitLoop,
    state: State<'h>,
}

/// Everything but the loop: the driver.
struct State<'h> {
    home: &'h Home,
    group: String,
    opts: Options,
    slots: Vec<Slot>,
    queue: VecDeque<usize>,
    running: HashMap<Token, usize>,
    /// The tasks sent to hosts and not ended, by slot.
    far: far::Far,
    interrupts_seen: u32,
    stopping: bool,
    /// What the tasks used, with a budget; the budget's limit once crossed.
    spent: Option<budget::Spent>,
    over_budget: Option<BudgetHit>,
    progress: Progress,
    t0: Instant,
    /// Each task's dependencies and priority (queue.rs).
    order: queue::Order,
    /// When the fan-out started: `start_after` counts from it (a detached group's record,
    /// so a driver started again keeps it).
    anchor: SystemTime,
    /// The group's controls (control.rs); with `records`, read from the group's directory.
    control: control::Control,
    records: Option<Records>,
}

/// A detached group's directory, watched by its driver.
struct Records {
    id: crate::spec::RunId,
    dir: std::path::PathBuf,
    token: Token,
}

impl<'h> Fanout<'h> {
    /// A fan-out of `tasks` (planned with [`plan_tasks`] for `group`).
    pub fn new(
        home: &'h Home,
        group: String,
        tasks: Vec<Task>,
        mut opts: Options,
    ) -> Result<Self, Error> {
        if opts.concurrency == 0 {
            return Err(Error::invalid("the concurrency must be at least 1"));
        }
        opts.fail_fast |= opts.cancel_siblings;
        opts.check_budget(&tasks)?;
        let queues: Vec<_> = tasks.iter().map(|t| (t.line, &t.queue)).collect();
        let order = queue::order(&queues, "line").map_err(|bad| {
            let lines: Vec<String> = bad.iter().map(|(n, e)| format!("line {n}: {e}")).collect();
            Error::invalid(format!("{}\nnothing was started", lines.join("\n")))
        })?;
        let slots: Vec<Slot> = tasks
            .into_iter()
            .map(|t| Slot {
                line: t.line,
                id: t.queue.id.clone(),
                run_id: t.run_id().to_owned(),
                what: t.what(),
                waited: 0,
                stopped: Some(false),
                state: match t.place {
                    Place::Here(p) => Phase::Queued(p),
                    Place::Host(h) => Phase::QueuedThere(Box::new(t.request), Some(h)),
                    Place::AnyHost => Phase::QueuedThere(Box::new(t.request), None),
                    Place::Started(e) => Phase::Adopt(e),
                },
            })
            .collect();
        let queue: VecDeque<usize> = (0..slots.len())
            .filter(|&i| !matches!(slots[i].state, Phase::Adopt(_)))
            .collect();
        let mut wl = WaitLoop::new()?;
        let spent = budget::Spent::new(&group, opts.budget);
        // A budget counts the tasks' usage as their progress.json changes.
        wl.report_records(spent.is_some());
        Ok(Self {
            state: State {
                far: far::Far::new(home, &wl),
                home,
                group,
                progress: Progress {
                    queued: queue.len(),
                    ..Progress::default()
                },
                queue,
                slots,
                running: HashMap::new(),
                interrupts_seen: 0,
                stopping: false,
                spent,
                over_budget: None,
                t0: Instant::now(),
                anchor: SystemTime::now(),
                control: control::Control::default(),
                records: None,
                order,
                opts,
            },
            wl,
        })
    }

    /// The fan-out of a detached group, recorded in `dir` (`groups/<G>`), which was given
    /// at `anchor` (its record's `created_at`): its controls are read from there as they
    /// change, and its driver closes the group as it ends by itself.
    pub fn recorded(mut self, dir: &std::path::Path, anchor: SystemTime) -> Result<Self, Error> {
        let id = crate::spec::RunId::parse(&self.state.group)?;
        let token = self.wl.watch_dir(dir)?;
        let s = &mut self.state;
        s.anchor = anchor;
        s.records = Some(Records {
            id,
            dir: dir.to_path_buf(),
            token,
        });
        Ok(self)
    }

    /// The first interrupt stops the fan-out and cancels what runs; later ones kill what runs.
    pub fn interrupter(&self) -> Interrupter {
        self.wl.interrupter()
    }

    /// Runs every task (or stops, as the options and interrupts say) and reports each event
    /// with the counts after it. Returns when no task runs and none will start.
    pub fn run(
        self,
        on_event: &mut dyn FnMut(&Event<'_>, &Progress),
    ) -> Result<FanoutReport, Error> {
        let Fanout { mut wl, mut state } = self;
        state.t0 = Instant::now();
        if state.records.is_none() {
            state.anchor = SystemTime::now();
        }
        // The runs an earlier driver started (a driver started again), then the group's
        // controls before anything starts (a group paused before its driver ran): they
        // stop or continue the adopted runs too.
        state.adopt(&mut wl, on_event);
        state.take_control(on_event);
        let tick = state.opts.tick;
        wl.run(
            None,
            tick,
            &mut Drive {
                state: &mut state,
                on_event,
            },
        )?;
        state.skip_queued(on_event);
        let duration_ms = u64::try_from(state.t0.elapsed().as_millis()).unwrap_or(u64::MAX);
        let tasks = state
            .slots
            .into_iter()
            .map(|s| {
                let mut t = match s.state {
                    Phase::Done(t) => t,
                    // Unreachable by the loop's exit condition; reported rather than lost.
                    _ => skipped(s.line, s.run_id, s.what),
                };
                t.id = s.id;
                t
            })
            .collect();
        Ok(FanoutReport::new(
            state.group,
            tasks,
            state.opts.concurrency,
            duration_ms,
        ))
    }
}

/// The fan-out as a driver of the loop, with its reporter.
struct Drive<'a, 'h> {
    state: &'a mut State<'h>,
    on_event: &'a mut dyn FnMut(&Event<'_>, &Progress),
}

impl Driver for Drive<'_, '_> {
    fn settled(&mut self, wl: &mut WaitLoop) -> Result<ControlFlow<()>, Error> {
        let s = &mut *self.state;
        s.take_far_news(self.on_event);
        s.take_interrupts(wl.interrupts(), self.on_event);
        // Until nothing more can start: a batch whose every start failed frees its slots at
        // once, and no end would come to refill them (and its dependants are due now).
        loop {
            s.skip_blocked(self.on_event);
            if s.stopping
                || s.control.paused
                || s.queue.is_empty()
                || s.fill(wl, self.on_event) == 0
            {
                break;
            }
        }
        if s.running.is_empty() && s.far.is_empty() && !s.queue.is_empty() && !s.control.paused {
            // Nothing runs to end and free a task: only a time can (or nothing, never).
            if s.next_start().is_none() {
                s.skip_queued(self.on_event);
            }
        }
        // Nothing runs, and nothing will start.
        Ok(done_when(
            s.running.is_empty() && s.far.is_empty() && (s.stopping || s.queue.is_empty()),
        ))
    }

    fn wake_at(&self) -> Option<Instant> {
        self.state.next_start()
    }

    fn seen(&mut self, wl: &mut WaitLoop, seen: Seen) -> Result<ControlFlow<()>, Error> {
        match seen {
            Seen::Finished { token, envelope } => {
                self.state.handle(token, &envelope, wl, self.on_event)
            }
            Seen::Beat => self.state.emit(&Event::Tick, self.on_event),
            Seen::Changed(token) if self.state.is_records(token) => {
                self.state.take_control(self.on_event)
            }
            Seen::Changed(token) => self.state.progressed(token, self.on_event),
            // No envelope will come: the fan-out ends with the error (its other tasks go on,
            // and `wait --group` finds them).
            Seen::Vanished { error, .. } => return Err(error.into()),
        }
        Ok(ControlFlow::Continue(()))
    }
}

impl State<'_> {
    fn emit(&mut self, ev: &Event<'_>, on_event: &mut dyn FnMut(&Event<'_>, &Progress)) {
        self.progress.elapsed = self.t0.elapsed();
        on_event(ev, &self.progress);
    }

    /// What the hosts' threads said since the last look.
    fn take_far_news(&mut self, on_event: &mut dyn FnMut(&Event<'_>, &Progress)) {
        while let Some(news) = self.far.next() {
            match news {
                far::News::Started(i, run) => {
                    let run_id = run.run_id.clone();
                    if let Phase::There { run: r, .. } = &mut self.slots[i].state {
                        *r = Some(run.clone());
                    }
                    self.emit(
                        &Event::Started {
                            task: i,
                            run_id: &run_id,
                        },
                        on_event,
                    );
                    self.far.cancel_if_asked(&run);
                    // Sent before a pause that stops the running ones: it is one of them.
                    if self.control.paused && self.control.stop_running {
                        self.far.hold(&run, true);
                        self.slots[i].stopped = Some(true);
                    }
                }
                far::News::Ended(i, end) => {
                    self.far.ended(i);
                    self.progress.running -= 1;
                    let t = match end {
                        far::End::NotStarted(why) => self.not_started(i, why),
                        far::End::Finished(env) => {
                            let dir = crate::spec::RunId::parse(&env.run_id)
                                .map(|id| self.home.attempt(&id, env.attempt).dir().to_path_buf())
                                .ok();
                            let t = self.outcome(i, &env, dir);
                            self.finish(i, t, on_event);
                            self.spend(i, env.attempt, budget::used(&env, None), on_event);
                            continue;
                        }
                        far::End::Unknown(why) => self.unheard(i, None, why),
                    };
                    self.finish(i, t, on_event);
                }
            }
        }
    }

    fn handle(
        &mut self,
        token: Token,
        envelope: &Envelope,
        wl: &mut WaitLoop,
        on_event: &mut dyn FnMut(&Event<'_>, &Progress),
    ) {
        let Some(i) = self.running.remove(&token) else {
            return;
        };
        self.progress.running -= 1;
        let price = match &self.slots[i].state {
            Phase::Running { started, .. } => started.spec.limits.price,
            _ => None,
        };
        self.spend(
            i,
            envelope.attempt,
            budget::used(envelope, price.as_ref()),
            on_event,
        );
        if self.waits_for_reset(i, envelope, wl, on_event) {
            return;
        }
        let t = match &self.slots[i].state {
            Phase::Running { started, .. } => {
                self.outcome(i, envelope, Some(started.paths.dir().to_path_buf()))
            }
            _ => return,
        };
        self.finish(i, t, on_event);
    }

    /// Task `i` ended (its run ended, or it could not start); with `fail_fast`, the first
    /// one that did not complete stops the fan-out.
    fn finish(&mut self, i: usize, t: FanoutTask, on_event: &mut dyn FnMut(&Event<'_>, &Progress)) {
        let failed = t.status != TaskStatus::Completed;
        match t.status {
            TaskStatus::Completed => self.progress.completed += 1,
            TaskStatus::Failed => self.progress.failed += 1,
            TaskStatus::Cancelled => self.progress.cancelled += 1,
            TaskStatus::Skipped => self.progress.skipped += 1,
            TaskStatus::Running | TaskStatus::Queued => {}
        }
        self.emit(
            &Event::Finished {
                task: i,
                outcome: &t,
            },
            on_event,
        );
        self.slots[i].state = Phase::Done(t);
        if failed && self.opts.fail_fast && !self.stopping {
            self.stop(
                StopReason::Failed {
                    task: i,
                    cancel_siblings: self.opts.cancel_siblings,
                },
                on_event,
            );
        }
    }

    fn outcome(
        &self,
        i: usize,
        env: &Envelope,
        attempt_dir: Option<std::path::PathBuf>,
    ) -> FanoutTask {
        let s = &self.slots[i];
        let mut t = skipped(s.line, String::new(), s.what.clone());
        t.run_id = Some(env.run_id.clone());
        t.attempt_dir = attempt_dir;
        t.ended(env);
        t
    }

    fn ids(&self, i: usize) -> (usize, String, String) {
        let s = &self.slots[i];
        (s.line, s.run_id.clone(), s.what.clone())
    }
}

/// A task that never started: no run, so no run id.
fn skipped(line: usize, _planned_id: String, what: String) -> FanoutTask {
    FanoutTask {
        line,
        id: None,
        run_id: None,
        status: TaskStatus::Skipped,
        failure_kind: None,
        exit_code: None,
        duration_ms: None,
        attempt_dir: None,
        what,
        error: None,
        waiting: None,
    }
}
