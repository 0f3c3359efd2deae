//! Fan-out: many runs from one file of requests, at most N at a time, driven by one
//! [`Waiter`]. It reports through [`Event`]s and prints nothing.
//!
//! ```text
//!  tasks (planned) ─► queue ──start_many (≤ N - running)──► running ──Waiter::next──► done
//!                       │                                      │  Finished: refill, in one
//!                       │ stop (fail-fast, interrupt)           │  batch with every other end
//!                       ▼                                      ▼  already known
//!                    skipped                        cancel (--cancel-siblings, interrupt)
//!
//!  Interrupter::interrupt (any thread) ─► Waker ─► the loop: 1st stops and cancels, 2nd kills
//!  Options::tick ─► the waiter's deadline ─► Event::Tick (a clock to redraw; no other timer)
//! ```
//!
//! Every run carries the fan-out's group id (`run.json`, `spec.json`, the envelope), so a
//! fan-out that is killed loses nothing: the started runs go on, and `wait --group` finds them.
//!
//! Common pitfalls:
//! * Refill after draining every end the waiter already knows (`next` with a past deadline
//!   never sleeps): ends come in bursts, and one batch of starts costs what one start does.
//! * A pane that cannot start is a finished task (`failed`, `spawn`), not a running one: it
//!   must not hold a slot of the concurrency.
//! * A skipped task never had a run: its `attempt_dir` is `null`, and nothing on disk knows
//!   it. Only this report does.

mod events;
mod tasks;

pub use events::{Event, Interrupter, Progress, StopReason};
pub use tasks::{Task, new_group_id, plan_tasks, plan_values};

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use super::{Error, Found, Plan, Started, cancel, start_many};
use crate::envelope::{Envelope, FanoutReport, FanoutTask, TaskStatus};
use crate::spec::RunRecord;
use crate::store::Home;
use crate::supervisor::{Token, WaitEvent, Waiter};

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

enum State {
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
    state: State,
}

/// One fan-out: build it, hand [`Fanout::interrupter`] to whoever takes signals, then
/// [`Fanout::run`].
pub struct Fanout<'h> {
    home: &'h Home,
    group: String,
    opts: Options,
    slots: Vec<Slot>,
    queue: VecDeque<usize>,
    running: HashMap<Token, usize>,
    waiter: Waiter,
    hits: Arc<AtomicU32>,
    hits_seen: u32,
    stopping: bool,
    progress: Progress,
    t0: Instant,
    next_tick: Option<Instant>,
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
            return Err(Error::invalid("--concurrency must be at least 1"));
        }
        opts.fail_fast |= opts.cancel_siblings;
        let slots: Vec<Slot> = tasks
            .into_iter()
            .map(|t| Slot {
                line: t.line,
                run_id: t.run_id().to_owned(),
                what: t.what(),
                state: State::Queued(Box::new(t.plan)),
            })
            .collect();
        let now = Instant::now();
        Ok(Self {
            home,
            group,
            queue: (0..slots.len()).collect(),
            progress: Progress {
                queued: slots.len(),
                ..Progress::default()
            },
            slots,
            running: HashMap::new(),
            waiter: Waiter::new()?,
            hits: Arc::new(AtomicU32::new(0)),
            hits_seen: 0,
            stopping: false,
            t0: now,
            next_tick: opts.tick.map(|t| now + t),
            opts,
        })
    }

    pub fn interrupter(&self) -> Interrupter {
        Interrupter::new(self.hits.clone(), self.waiter.waker())
    }

    /// Runs every task (or stops, as the options and interrupts say) and reports each event
    /// with the counts after it. Returns when no task runs and none will start.
    pub fn run(
        mut self,
        on_event: &mut dyn FnMut(&Event<'_>, &Progress),
    ) -> Result<FanoutReport, Error> {
        self.t0 = Instant::now();
        self.next_tick = self.opts.tick.map(|t| self.t0 + t);
        loop {
            self.take_interrupts(on_event);
            if !self.stopping {
                self.fill(on_event);
            }
            if self.running.is_empty() && (self.stopping || self.queue.is_empty()) {
                break;
            }
            let ev = self.waiter.next(self.next_tick)?;
            if let WaitEvent::TimedOut = ev {
                self.tick(on_event);
                continue;
            }
            self.handle(ev, on_event);
            // Every end the waiter already knows, before refilling: one batch for a burst.
            loop {
                match self.waiter.next(Some(Instant::now()))? {
                    WaitEvent::TimedOut => break,
                    ev => self.handle(ev, on_event),
                }
            }
        }
        self.skip_queued(on_event);
        let duration_ms = u64::try_from(self.t0.elapsed().as_millis()).unwrap_or(u64::MAX);
        let tasks = self
            .slots
            .into_iter()
            .map(|s| match s.state {
                State::Done(t) => t,
                // Unreachable by the loop's exit condition; reported rather than lost.
                _ => skipped(s.line, s.run_id, s.what),
            })
            .collect();
        Ok(FanoutReport::new(
            self.group,
            tasks,
            self.opts.concurrency,
            duration_ms,
        ))
    }

    fn emit(&mut self, ev: &Event<'_>, on_event: &mut dyn FnMut(&Event<'_>, &Progress)) {
        self.progress.elapsed = self.t0.elapsed();
        on_event(ev, &self.progress);
    }

    /// Starts queued tasks up to the concurrency, in one batch.
    fn fill(&mut self, on_event: &mut dyn FnMut(&Event<'_>, &Progress)) {
        let free = self.opts.concurrency.saturating_sub(self.running.len());
        let take = free.min(self.queue.len());
        if take == 0 {
            return;
        }
        let batch: Vec<usize> = self.queue.drain(..take).collect();
        let mut plans = Vec::with_capacity(batch.len());
        let mut records = Vec::with_capacity(batch.len());
        for &i in &batch {
            if let State::Queued(p) = std::mem::replace(&mut self.slots[i].state, State::Starting) {
                records.push(p.record.clone());
                plans.push(*p);
            }
        }
        self.progress.queued -= batch.len();
        let results = start_many(self.home, plans);
        for ((i, record), res) in batch.into_iter().zip(records).zip(results) {
            match res {
                Ok(started) => self.started(i, record, started, on_event),
                Err(e) => {
                    let (line, run_id, what) = self.ids(i);
                    let t = FanoutTask {
                        line,
                        run_id,
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
        match self.waiter.add(started.paths.clone(), started.spec.clone()) {
            Ok(token) => {
                self.running.insert(token, i);
                self.slots[i].state = State::Running {
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
                    run_id,
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

    fn handle(&mut self, ev: WaitEvent, on_event: &mut dyn FnMut(&Event<'_>, &Progress)) {
        let WaitEvent::Finished { token, envelope } = ev else {
            return; // Woken: interrupts are taken at the top of the loop.
        };
        let Some(i) = self.running.remove(&token) else {
            return;
        };
        self.progress.running -= 1;
        let t = match &self.slots[i].state {
            State::Running { started, .. } => self.outcome(i, &envelope, started),
            _ => return,
        };
        let failed = t.status != TaskStatus::Completed;
        self.finish(i, t, on_event);
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

    fn tick(&mut self, on_event: &mut dyn FnMut(&Event<'_>, &Progress)) {
        let (Some(every), Some(next)) = (self.opts.tick, self.next_tick) else {
            return;
        };
        let now = Instant::now();
        if now < next {
            return;
        }
        // Ticks missed while busy are not made up for.
        let mut n = next + every;
        while n <= now {
            n += every;
        }
        self.next_tick = Some(n);
        self.emit(&Event::Tick, on_event);
    }

    /// Acts on interrupts that came since the last look.
    fn take_interrupts(&mut self, on_event: &mut dyn FnMut(&Event<'_>, &Progress)) {
        let hits = self.hits.load(Ordering::SeqCst);
        if hits == self.hits_seen {
            return;
        }
        let first = self.hits_seen == 0;
        self.hits_seen = hits;
        if first && hits == 1 {
            self.stop(StopReason::Interrupted, on_event);
        } else {
            if !self.stopping {
                self.stop(StopReason::Interrupted, on_event);
            }
            self.emit(&Event::Stopping(StopReason::KillNow), on_event);
            self.cancel_running(Some(0), on_event);
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
            } => cancel_siblings,
            StopReason::Interrupted | StopReason::KillNow => true,
        };
        if cancel {
            self.cancel_running(None, on_event);
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
            self.slots[i].state = State::Done(t);
        }
    }

    /// Asks every running task to stop (`grace_ms`: `None` for the run's own grace).
    fn cancel_running(
        &mut self,
        grace_ms: Option<u64>,
        on_event: &mut dyn FnMut(&Event<'_>, &Progress),
    ) {
        let mut warnings = Vec::new();
        for &i in self.running.values() {
            let State::Running { record, started } = &self.slots[i].state else {
                continue;
            };
            let found = Found {
                record: (**record).clone(),
                paths: started.paths.clone(),
                spec: started.spec.clone(),
            };
            if let Err(e) = cancel(&found, grace_ms) {
                warnings.push(format!("cannot cancel {}: {e}", started.spec.run_id));
            }
        }
        for w in warnings {
            self.emit(&Event::Warning(w), on_event);
        }
    }

    fn finish(&mut self, i: usize, t: FanoutTask, on_event: &mut dyn FnMut(&Event<'_>, &Progress)) {
        match t.status {
            TaskStatus::Completed => self.progress.completed += 1,
            TaskStatus::Failed => self.progress.failed += 1,
            TaskStatus::Cancelled => self.progress.cancelled += 1,
            TaskStatus::Skipped => self.progress.skipped += 1,
        }
        self.emit(
            &Event::Finished {
                task: i,
                outcome: &t,
            },
            on_event,
        );
        self.slots[i].state = State::Done(t);
    }

    fn outcome(&self, i: usize, env: &Envelope, started: &Started) -> FanoutTask {
        let s = &self.slots[i];
        let error = match env.failure_kind {
            Some(crate::envelope::FailureKind::Spawn | crate::envelope::FailureKind::Sandbox) => {
                env.output.errors.first().cloned()
            }
            _ => None,
        };
        FanoutTask {
            line: s.line,
            run_id: env.run_id.clone(),
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

fn skipped(line: usize, run_id: String, what: String) -> FanoutTask {
    FanoutTask {
        line,
        run_id,
        status: TaskStatus::Skipped,
        failure_kind: None,
        exit_code: None,
        duration_ms: None,
        attempt_dir: None,
        what,
        error: None,
    }
}
