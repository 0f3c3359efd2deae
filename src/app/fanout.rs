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
//!  Options::tick ─► the loop's heartbeat ─► Event::Tick (a clock to redraw; no other timer)
//! ```
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

mod detached;
mod events;
mod tasks;

pub use detached::{
    DRIVER_LABEL, GROUP_SCHEMA, GroupRecord, GroupTask, detach, group_record, group_report,
    is_driver, read_driver_input,
};
pub use events::{Event, Progress, StopReason};
pub use tasks::{Task, new_group_id, plan_lines, plan_requests, plan_tasks};

use std::collections::{HashMap, VecDeque};
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use super::wait_loop::{Driver, Interrupter, Seen, WaitLoop, done_when};
use super::{Error, Found, Plan, Started, cancel_by, start_many};
use crate::envelope::{CancelOrigin, Envelope, FanoutReport, FanoutTask, TaskStatus};
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
}

enum Phase {
    Queued(Box<Plan>),
    /// Between the queue and `start_many`.
    Starting,
    Running {
        record: Box<RunRecord>,
        started: Box<Started>,
    },
    Done(FanoutTask),
}

struct Slot {
    line: usize,
    run_id: String,
    what: String,
    state: Phase,
}

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
    interrupts_seen: u32,
    stopping: bool,
    progress: Progress,
    t0: Instant,
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
        let slots: Vec<Slot> = tasks
            .into_iter()
            .map(|t| Slot {
                line: t.line,
                run_id: t.run_id().to_owned(),
                what: t.what(),
                state: Phase::Queued(Box::new(t.plan)),
            })
            .collect();
        Ok(Self {
            wl: WaitLoop::new()?,
            state: State {
                home,
                group,
                queue: (0..slots.len()).collect(),
                progress: Progress {
                    queued: slots.len(),
                    ..Progress::default()
                },
                slots,
                running: HashMap::new(),
                interrupts_seen: 0,
                stopping: false,
                t0: Instant::now(),
                opts,
            },
        })
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
            .map(|s| match s.state {
                Phase::Done(t) => t,
                // Unreachable by the loop's exit condition; reported rather than lost.
                _ => skipped(s.line, s.run_id, s.what),
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
        s.take_interrupts(wl.interrupts(), self.on_event);
        // Until something runs or nothing is left: a batch whose every start failed frees
        // its slots at once, and no end would come to refill them.
        while !s.stopping && !s.queue.is_empty() && s.running.len() < s.opts.concurrency {
            s.fill(wl, self.on_event);
        }
        // Nothing runs, and nothing will start.
        Ok(done_when(
            s.running.is_empty() && (s.stopping || s.queue.is_empty()),
        ))
    }

    fn seen(&mut self, _wl: &mut WaitLoop, seen: Seen) -> Result<ControlFlow<()>, Error> {
        match seen {
            Seen::Finished { token, envelope } => {
                self.state.handle(token, &envelope, self.on_event)
            }
            Seen::Beat => self.state.emit(&Event::Tick, self.on_event),
            Seen::Changed(_) => {}
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

    /// Starts queued tasks up to the concurrency, in one batch.
    fn fill(&mut self, wl: &mut WaitLoop, on_event: &mut dyn FnMut(&Event<'_>, &Progress)) {
        let free = self.opts.concurrency.saturating_sub(self.running.len());
        let take = free.min(self.queue.len());
        if take == 0 {
            return;
        }
        let batch: Vec<usize> = self.queue.drain(..take).collect();
        let mut plans = Vec::with_capacity(batch.len());
        let mut records = Vec::with_capacity(batch.len());
        for &i in &batch {
            if let Phase::Queued(p) = std::mem::replace(&mut self.slots[i].state, Phase::Starting) {
                records.push(p.record.clone());
                plans.push(*p);
            }
        }
        self.progress.queued -= batch.len();
        let results = start_many(self.home, plans);
        for ((i, record), res) in batch.into_iter().zip(records).zip(results) {
            match res {
                Ok(started) => self.started(wl, i, record, started, on_event),
                Err(e) => {
                    // The run was not created: the task never started.
                    let (line, _, what) = self.ids(i);
                    let t = FanoutTask {
                        line,
                        run_id: None,
                        status: TaskStatus::Failed,
                        failure_kind: Some(crate::envelope::FailureKind::Spawn),
                        exit_code: None,
                        duration_ms: None,
                        attempt_dir: None,
                        what,
                        error: Some(e.to_string()),
                    };
                    self.finish(i, t, on_event);
                }
            }
        }
    }

    fn started(
        &mut self,
        wl: &mut WaitLoop,
        i: usize,
        record: RunRecord,
        started: Started,
        on_event: &mut dyn FnMut(&Event<'_>, &Progress),
    ) {
        for w in &started.warnings {
            let (line, ..) = self.ids(i);
            self.emit(&Event::Warning(format!("line {line}: {w}")), on_event);
        }
        self.progress.running += 1;
        self.emit(
            &Event::Started {
                task: i,
                started: &started,
            },
            on_event,
        );
        if let Some(env) = &started.spawn_failed {
            self.progress.running -= 1;
            let t = self.outcome(i, env, &started);
            self.finish(i, t, on_event);
            return;
        }
        match wl.add(started.paths.clone(), started.spec.clone()) {
            Ok(token) => {
                self.running.insert(token, i);
                self.slots[i].state = Phase::Running {
                    record: Box::new(record),
                    started: Box::new(started),
                };
            }
            Err(e) => {
                // Not watched: it runs on, and `wait --group` still finds it.
                self.progress.running -= 1;
                let (line, run_id, what) = self.ids(i);
                let t = FanoutTask {
                    line,
                    run_id: Some(run_id),
                    status: TaskStatus::Failed,
                    failure_kind: None,
                    exit_code: None,
                    duration_ms: None,
                    attempt_dir: Some(started.paths.dir().to_path_buf()),
                    what,
                    error: Some(format!("cannot wait for it: {e}")),
                };
                self.finish(i, t, on_event);
            }
        }
    }

    fn handle(
        &mut self,
        token: Token,
        envelope: &Envelope,
        on_event: &mut dyn FnMut(&Event<'_>, &Progress),
    ) {
        let Some(i) = self.running.remove(&token) else {
            return;
        };
        self.progress.running -= 1;
        let t = match &self.slots[i].state {
            Phase::Running { started, .. } => self.outcome(i, envelope, started),
            _ => return,
        };
        self.finish(i, t, on_event);
    }

    /// Acts on interrupts that came since the last look.
    fn take_interrupts(&mut self, hits: u32, on_event: &mut dyn FnMut(&Event<'_>, &Progress)) {
        if hits == self.interrupts_seen {
            return;
        }
        let first = self.interrupts_seen == 0;
        self.interrupts_seen = hits;
        if first && hits == 1 {
            self.stop(StopReason::Interrupted, on_event);
        } else {
            if !self.stopping {
                self.stop(StopReason::Interrupted, on_event);
            }
            self.emit(&Event::Stopping(StopReason::KillNow), on_event);
            self.cancel_running(Some(0), CancelOrigin::Fanout, on_event);
        }
    }

    /// Starts nothing more; cancels what runs if the reason asks for it.
    fn stop(&mut self, why: StopReason, on_event: &mut dyn FnMut(&Event<'_>, &Progress)) {
        self.stopping = true;
        self.emit(&Event::Stopping(why), on_event);
        self.skip_queued(on_event);
        let cancel = match why {
            StopReason::Failed {
                cancel_siblings, ..
            } => cancel_siblings.then_some(CancelOrigin::Sibling),
            StopReason::Interrupted | StopReason::KillNow => Some(CancelOrigin::Fanout),
        };
        if let Some(origin) = cancel {
            self.cancel_running(None, origin, on_event);
        }
    }

    fn skip_queued(&mut self, on_event: &mut dyn FnMut(&Event<'_>, &Progress)) {
        while let Some(i) = self.queue.pop_front() {
            self.progress.queued -= 1;
            self.progress.skipped += 1;
            let (line, run_id, what) = self.ids(i);
            let t = skipped(line, run_id, what);
            self.emit(
                &Event::Skipped {
                    task: i,
                    outcome: &t,
                },
                on_event,
            );
            self.slots[i].state = Phase::Done(t);
        }
    }

    /// Asks every running task to stop (`grace_ms`: `None` for the run's own grace), as
    /// asked by `origin`.
    fn cancel_running(
        &mut self,
        grace_ms: Option<u64>,
        origin: CancelOrigin,
        on_event: &mut dyn FnMut(&Event<'_>, &Progress),
    ) {
        let mut warnings = Vec::new();
        for &i in self.running.values() {
            let Phase::Running { record, started } = &self.slots[i].state else {
                continue;
            };
            let found = Found {
                record: (**record).clone(),
                paths: started.paths.clone(),
                spec: started.spec.clone(),
            };
            if let Err(e) = cancel_by(&found, grace_ms, origin) {
                warnings.push(format!("cannot cancel {}: {e}", started.spec.run_id));
            }
        }
        for w in warnings {
            self.emit(&Event::Warning(w), on_event);
        }
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

    fn outcome(&self, i: usize, env: &Envelope, started: &Started) -> FanoutTask {
        let s = &self.slots[i];
        // Why it did not complete, in the envelope's words (for a program that failed, the
        // end of its stderr).
        let error = match env.status {
            crate::envelope::Status::Completed => None,
            _ => env.output.errors.first().cloned(),
        };
        FanoutTask {
            line: s.line,
            run_id: Some(env.run_id.clone()),
            status: env.status.into(),
            failure_kind: env.failure_kind,
            exit_code: env.exit_code,
            duration_ms: env.duration_ms,
            attempt_dir: Some(started.paths.dir().to_path_buf()),
            what: s.what.clone(),
            error,
        }
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
        run_id: None,
        status: TaskStatus::Skipped,
        failure_kind: None,
        exit_code: None,
        duration_ms: None,
        attempt_dir: None,
        what,
        error: None,
    }
}
