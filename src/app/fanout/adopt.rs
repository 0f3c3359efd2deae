//! A driver started again (revive.rs) carries on from the records: a task whose run exists
//! already is adopted, never started twice, and keeps its true outcome.
//!
//! ```text
//!  driver's lines ─► existing(): the run id is on disk ─ here  ─► Existing::Here(Found)
//!                                                     └ there ─► Existing::There(RemoteRun)
//!                               └ not: planned again as usual (a new run)
//!  the loop's start ─► adopt(): ended ─► its outcome (budget, fail-fast, dependants as ever)
//!                               live here ─► held by the loop, like a run it started
//!                               live there ─► a thread waits for it there (far.rs)
//!  take_control(): control.json ─► paused, concurrency, running tasks stopped or continued
//! ```
//!
//! Common pitfalls:
//! * Existence is the run id's directory: the ids are fixed in the requests before the first
//!   driver starts anything, so a run made a moment before a driver died is found too.
//! * An adopted run may have been stopped by a pause of the driver that died: whether it is
//!   stopped is not known, so the first control sets it either way.

use super::*;
use crate::app::runs::{Found, find_run};
use crate::hosts::remote::RemoteRun;
use crate::spec::RunId;

/// A task whose run exists already.
#[derive(Debug)]
pub enum Existing {
    Here(Box<Found>),
    There(Box<RemoteRun>),
    /// Its run's records cannot be read (why).
    Unreadable(String),
}

/// The run of a task with `run_id` (`remote`: it was sent to a host), if it exists.
pub fn existing(home: &Home, run_id: &str, remote: bool) -> Option<Existing> {
    let id = RunId::parse(run_id).ok()?;
    if !home.run_dir(&id).exists() {
        return None;
    }
    if remote {
        match crate::hosts::remote::find(home, &id) {
            Ok(Some(r)) => return Some(Existing::There(Box::new(r))),
            Ok(None) => {}
            Err(e) => return Some(Existing::Unreadable(e.to_string())),
        }
    }
    Some(match find_run(home, run_id, None) {
        Ok(f) => Existing::Here(Box::new(f)),
        Err(e) => Existing::Unreadable(e.to_string()),
    })
}

impl State<'_> {
    /// Whether `token` is the watch of the group's directory.
    pub(super) fn is_records(&self, token: Token) -> bool {
        self.records.as_ref().is_some_and(|r| r.token == token)
    }

    /// Takes over the tasks whose runs an earlier driver started.
    pub(super) fn adopt(
        &mut self,
        wl: &mut WaitLoop,
        on_event: &mut dyn FnMut(&Event<'_>, &Progress),
    ) {
        for i in 0..self.slots.len() {
            if !matches!(self.slots[i].state, Phase::Adopt(_)) {
                continue;
            }
            let Phase::Adopt(e) = std::mem::replace(&mut self.slots[i].state, Phase::Starting)
            else {
                continue;
            };
            self.slots[i].stopped = None;
            match e {
                Existing::Here(f) => self.adopt_here(wl, i, *f, on_event),
                Existing::There(run) => {
                    self.progress.running += 1;
                    self.far.reserve(i, &run.host.name);
                    self.far.watch(i, (*run).clone());
                    let run_id = run.run_id.clone();
                    self.slots[i].state = Phase::There { run: Some(run) };
                    self.emit(
                        &Event::Started {
                            task: i,
                            run_id: &run_id,
                        },
                        on_event,
                    );
                }
                Existing::Unreadable(why) => {
                    let t = self.unheard(i, None, why);
                    self.finish(i, t, on_event);
                }
            }
        }
    }

    fn adopt_here(
        &mut self,
        wl: &mut WaitLoop,
        i: usize,
        f: Found,
        on_event: &mut dyn FnMut(&Event<'_>, &Progress),
    ) {
        let dir = f.paths.dir().to_path_buf();
        match crate::app::attempt_status(&f.paths, &f.spec) {
            Ok(crate::app::AttemptStatus::Finished(env)) => {
                let price = f.spec.limits.price;
                self.spend(i, env.attempt, budget::used(&env, price.as_ref()), on_event);
                let t = self.outcome(i, &env, Some(dir));
                self.finish(i, t, on_event);
            }
            Ok(crate::app::AttemptStatus::Live(_)) => {
                let started = Started {
                    paths: f.paths,
                    spec: f.spec,
                    spawn_failed: None,
                    warnings: Vec::new(),
                };
                self.started(wl, i, f.record, started, on_event);
            }
            Err(e) => {
                let t = self.unheard(i, Some(dir), e.to_string());
                self.finish(i, t, on_event);
            }
        }
    }

    /// Reads the group's controls and acts on a change: paused (start nothing), its
    /// concurrency, its running tasks stopped or continued; then tells the commands that
    /// asked (applied.json).
    pub(super) fn take_control(&mut self, on_event: &mut dyn FnMut(&Event<'_>, &Progress)) {
        let Some(r) = &self.records else {
            return;
        };
        let (id, dir) = (r.id.clone(), r.dir.clone());
        let c = control::read(self.home, &id);
        // An older control, or this one again (the directory changed for another file, as
        // the driver's own applied.json) with every task's state known: nothing to do.
        let again =
            c.serial == self.control.serial && self.slots.iter().all(|s| s.stopped.is_some());
        if c.serial < self.control.serial || again {
            return;
        }
        let was = std::mem::replace(&mut self.control, c.clone());
        if was.paused != c.paused {
            let words = if c.paused {
                "paused: starting no new task"
            } else {
                "resumed"
            };
            self.emit(
                &Event::Waiting(format!("group {}: {words}", self.group)),
                on_event,
            );
        }
        if let Some(n) = c.concurrency {
            self.opts.concurrency = n;
        }
        self.stop_or_continue(c.paused && c.stop_running, on_event);
        if control::applied(self.home, &id) < c.serial
            && let Err(e) = control::mark_applied(self.home, &id, c.serial)
        {
            let w = format!("cannot record the change taken in {}: {e}", dir.display());
            self.emit(&Event::Warning(w), on_event);
        }
    }

    /// Stops (SIGSTOP) or continues each running task as `stop` says, once each: here
    /// through its worker, on a host through the host's subpane.
    fn stop_or_continue(&mut self, stop: bool, on_event: &mut dyn FnMut(&Event<'_>, &Progress)) {
        let mut warnings = Vec::new();
        for &i in self.running.values() {
            let s = &mut self.slots[i];
            if s.stopped == Some(stop) {
                continue;
            }
            let Phase::Running { record, started } = &s.state else {
                continue;
            };
            let found = Found {
                record: (**record).clone(),
                paths: started.paths.clone(),
                spec: started.spec.clone(),
            };
            match crate::app::stop_attempt(&found, stop) {
                Ok(_) => s.stopped = Some(stop),
                Err(e) => warnings.push(format!(
                    "cannot {} {}: {e}",
                    if stop { "stop" } else { "continue" },
                    started.spec.run_id
                )),
            }
        }
        for w in warnings {
            self.emit(&Event::Warning(w), on_event);
        }
        // Those on hosts: asked there.
        for s in &mut self.slots {
            if let Phase::There { run: Some(run) } = &s.state
                && s.stopped != Some(stop)
            {
                self.far.hold(run, stop);
                s.stopped = Some(stop);
            }
        }
    }
}
