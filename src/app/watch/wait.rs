//! Waiting on attempts, as drivers of the one [`WaitLoop`]: until one or all finish
//! ([`wait_with`]), or following one's logs to its end ([`follow`]); and the answers a wait
//! turns into ([`wait_answers`], [`waiting_for`]).
//!
//! ```text
//!  wait_targets(runs, group) ─► targets ─► wait_with(loop, targets, mode, timeout)
//!                                            Collect: Finished ─► results[i], on_progress
//!                                                     Beat ─► on_progress (heartbeat)
//!                                                     interrupt ─► on_interrupt (stop)
//!                                         ─► WaitResult ─► wait_answers ─► RunAnswer per run
//!  follow(found, on) ─► Follow: settled ─► on(Grew) … Finished ─► on(Ended)
//! ```
//!
//! Common pitfalls:
//! * A wait that ends early (a timeout, an interrupt) leaves runs unfinished: their answer
//!   is a fresh look at them ([`attempt_status`]), which may find that one finished since.
//! * `first_finished` is the order of the ends the wait saw, not the order of the targets.

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use crate::app::wait_loop::{Driver, Ended, Seen, WaitLoop, done_when};
use crate::app::{AttemptStatus, Error, Found, attempt_status, find_run, group_runs};
use crate::envelope::Envelope;
use crate::spec::AttemptSpec;
use crate::store::{AttemptPaths, Home};
use crate::supervisor::Token;

/// Return when any attempt finishes, or when all have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitMode {
    Any,
    All,
}

/// What [`wait`] found: one slot per target, in the order given (`None`: not finished).
#[derive(Debug)]
pub struct WaitResult {
    pub results: Vec<Option<Box<Envelope>>>,
    pub timed_out: bool,
    /// An interrupt ended the wait ([`WaitOptions::on_interrupt`]).
    pub stopped: bool,
    /// Index of the target whose end the wait saw first.
    pub first_finished: Option<usize>,
}

/// How far a wait is, for a reporter: after each end and on each heartbeat.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WaitProgress<'a> {
    /// Index (into the targets) of the attempt that just finished; `None` on a heartbeat.
    pub finished: Option<usize>,
    /// Index of an attempt whose records changed (its `progress.json`): only with
    /// [`WaitLoop::report_records`].
    pub changed: Option<usize>,
    /// Attempts finished so far, and in all.
    pub done: usize,
    pub total: usize,
    pub elapsed: Duration,
    /// The targets' finished envelopes so far.
    pub results: &'a [Option<Box<Envelope>>],
}

/// The knobs of [`wait_with`] beyond what [`wait`] takes.
#[derive(Default)]
pub struct WaitOptions<'a> {
    /// Also report [`WaitProgress`] this often while nothing finishes (the loop's heartbeat;
    /// the attempts still wake the loop themselves).
    pub heartbeat: Option<Duration>,
    /// Told after each end and on each heartbeat.
    pub on_progress: Option<&'a mut dyn FnMut(&WaitProgress<'_>)>,
    /// What the n-th interrupt of the loop (n = 1, 2, …) does: `Break` stops the wait
    /// (`stopped`). Without it, the first interrupt stops the wait.
    pub on_interrupt: Option<&'a mut dyn FnMut(u32) -> ControlFlow<()>>,
}

/// The attempts a wait is for: attempt `attempt` (else the latest) of each of `runs`, in the
/// order given, then every run of `group` not named already.
pub fn wait_targets(
    home: &Home,
    runs: &[String],
    group: Option<&str>,
    attempt: Option<u32>,
) -> Result<Vec<(AttemptPaths, AttemptSpec)>, Error> {
    let mut targets: Vec<(AttemptPaths, AttemptSpec)> = Vec::new();
    for r in runs {
        let f = find_run(home, r, attempt)?;
        targets.push((f.paths, f.spec));
    }
    if let Some(g) = group {
        // A group whose driver runs on its own: its driver (a run named as the group) is
        // waited for too, and its tasks may not have runs yet.
        let driver = crate::app::fanout::group_record(home, g)
            .map(|_| find_run(home, g, None))
            .transpose()?;
        let runs = match group_runs(home, g) {
            // Its runs may all be on hosts (waited for there), or not started yet.
            Err(_) if driver.is_some() || !crate::app::group_far(home, g).is_empty() => Vec::new(),
            other => other?,
        };
        for f in runs.into_iter().chain(driver) {
            if !targets.iter().any(|(p, _)| *p == f.paths) {
                targets.push((f.paths, f.spec));
            }
        }
    }
    Ok(targets)
}

/// After a wait on a `group` whose driver runs on its own: the group's runs that started
/// since the targets were taken join them (looked at afresh by [`wait_answers`]), and the
/// driver, waited for only to know when the group is done, leaves them: an answer names
/// every run of the group, and only those.
pub fn regroup(
    home: &Home,
    group: Option<&str>,
    targets: &mut Vec<(AttemptPaths, AttemptSpec)>,
    res: &mut WaitResult,
) -> Result<(), Error> {
    let Some(g) = group.filter(|g| crate::app::fanout::group_record(home, g).is_some()) else {
        return Ok(());
    };
    for f in group_runs(home, g).unwrap_or_default() {
        if !targets.iter().any(|(p, _)| *p == f.paths) {
            targets.push((f.paths, f.spec));
            res.results.push(None);
        }
    }
    let driver = targets.iter().position(|(_, s)| {
        s.run_id.as_str() == g && s.labels.contains_key(crate::app::fanout::DRIVER_LABEL)
    });
    if let Some(i) = driver {
        targets.remove(i);
        res.results.remove(i);
        res.first_finished = match res.first_finished {
            Some(f) if f == i => None,
            Some(f) if f > i => Some(f - 1),
            other => other,
        };
    }
    Ok(())
}

/// Waits for attempts (without polling) until one or all finished, or `timeout` passed.
pub fn wait(
    targets: &[(AttemptPaths, AttemptSpec)],
    mode: WaitMode,
    timeout: Option<Duration>,
) -> Result<WaitResult, Error> {
    let mut wl = WaitLoop::new()?;
    wait_with(&mut wl, targets, mode, timeout, WaitOptions::default())
}

/// [`wait`] on a loop of the caller's (whose [`WaitLoop::interrupter`] another thread may
/// hold), with a heartbeat, a reporter and what interrupts do.
pub fn wait_with(
    wl: &mut WaitLoop,
    targets: &[(AttemptPaths, AttemptSpec)],
    mode: WaitMode,
    timeout: Option<Duration>,
    opts: WaitOptions<'_>,
) -> Result<WaitResult, Error> {
    let t0 = Instant::now();
    let mut tokens = Vec::with_capacity(targets.len());
    for (paths, spec) in targets {
        tokens.push(wl.add(paths.clone(), spec.clone())?);
    }
    let mut c = Collect {
        tokens,
        results: vec![None; targets.len()],
        done: 0,
        first_finished: None,
        mode,
        t0,
        interrupts_seen: 0,
        stopped: false,
        opts,
    };
    let ended = wl.run(timeout.map(|t| t0 + t), c.opts.heartbeat, &mut c)?;
    Ok(WaitResult {
        results: c.results,
        timed_out: ended == Ended::DeadlinePassed,
        stopped: c.stopped,
        first_finished: c.first_finished,
    })
}

/// The driver of [`wait_with`]: each end in its slot.
struct Collect<'a> {
    tokens: Vec<Token>,
    results: Vec<Option<Box<Envelope>>>,
    done: usize,
    first_finished: Option<usize>,
    mode: WaitMode,
    t0: Instant,
    interrupts_seen: u32,
    stopped: bool,
    opts: WaitOptions<'a>,
}

impl Collect<'_> {
    fn report(&mut self, finished: Option<usize>, changed: Option<usize>) {
        if let Some(f) = self.opts.on_progress.as_mut() {
            f(&WaitProgress {
                finished,
                changed,
                done: self.done,
                total: self.tokens.len(),
                elapsed: self.t0.elapsed(),
                results: &self.results,
            });
        }
    }
}

impl Driver for Collect<'_> {
    fn settled(&mut self, wl: &mut WaitLoop) -> Result<ControlFlow<()>, Error> {
        let hits = wl.interrupts();
        while self.interrupts_seen < hits {
            self.interrupts_seen += 1;
            let flow = match self.opts.on_interrupt.as_mut() {
                Some(f) => f(self.interrupts_seen),
                None => ControlFlow::Break(()),
            };
            if flow.is_break() {
                self.stopped = true;
                return Ok(flow);
            }
        }
        Ok(done_when(self.done == self.tokens.len()))
    }

    fn seen(&mut self, _wl: &mut WaitLoop, seen: Seen) -> Result<ControlFlow<()>, Error> {
        match seen {
            Seen::Finished { token, envelope } => {
                let Some(i) = self.tokens.iter().position(|t| *t == token) else {
                    return Ok(ControlFlow::Continue(()));
                };
                self.results[i] = Some(envelope);
                self.done += 1;
                self.first_finished.get_or_insert(i);
                self.report(Some(i), None);
                return Ok(done_when(
                    self.mode == WaitMode::Any || self.done == self.tokens.len(),
                ));
            }
            Seen::Vanished { token, error } => {
                if self.tokens.contains(&token) {
                    return Err(error.into());
                }
            }
            Seen::Beat => self.report(None, None),
            Seen::Changed(token) => {
                if let Some(i) = self.tokens.iter().position(|t| *t == token) {
                    self.report(None, Some(i));
                }
            }
        }
        Ok(ControlFlow::Continue(()))
    }
}

/// Waits for one attempt's envelope.
pub fn wait_one(paths: &AttemptPaths, spec: &AttemptSpec) -> Result<Box<Envelope>, Error> {
    let out = wait(&[(paths.clone(), spec.clone())], WaitMode::All, None)?;
    out.results
        .into_iter()
        .next()
        .flatten()
        .ok_or(Error::NoEnvelope)
}

/// What [`follow`] tells its caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Followed {
    /// The attempt's files may have grown (and once at the start, for what is there).
    Grew,
    /// The attempt ended: everything it wrote is in place.
    Ended,
}

/// Follows an attempt to its end (`logs -f`): `on` is told [`Followed::Grew`] once for each
/// burst of appends (and first for what is there), then [`Followed::Ended`]. `Break` from
/// `on` stops following.
pub fn follow(
    found: &Found,
    on: &mut dyn FnMut(Followed) -> Result<ControlFlow<()>, Error>,
) -> Result<(), Error> {
    let mut wl = WaitLoop::new()?;
    // The watch is in place before the first look: no append falls between the two.
    wl.follow(found.paths.clone(), found.spec.clone())?;
    wl.run(None, None, &mut Follow { on })?;
    Ok(())
}

/// The driver of [`follow`]: one look per burst of changes.
struct Follow<'a> {
    on: &'a mut dyn FnMut(Followed) -> Result<ControlFlow<()>, Error>,
}

impl Driver for Follow<'_> {
    fn settled(&mut self, _wl: &mut WaitLoop) -> Result<ControlFlow<()>, Error> {
        (self.on)(Followed::Grew)
    }

    fn seen(&mut self, _wl: &mut WaitLoop, seen: Seen) -> Result<ControlFlow<()>, Error> {
        match seen {
            // Nothing follows the end, whatever the caller says.
            Seen::Finished { .. } => (self.on)(Followed::Ended).map(|_| ControlFlow::Break(())),
            Seen::Vanished { error, .. } => Err(error.into()),
            Seen::Changed(_) | Seen::Beat => Ok(ControlFlow::Continue(())),
        }
    }
}

/// One run's part of an answer: its attempt and its state now.
#[derive(Clone, Debug)]
pub struct RunAnswer {
    pub paths: AttemptPaths,
    pub run_id: String,
    /// What it runs, one line ([`crate::app::what`]).
    pub what: String,
    pub status: AttemptStatus,
}

/// A wait turned into answers, one per target in the order given.
#[derive(Clone, Debug)]
pub struct WaitAnswers {
    pub runs: Vec<RunAnswer>,
    pub timed_out: bool,
    /// Index (into `runs`) of the run that finished first (by its envelope's
    /// `finished_at`; the wait's own order among equals).
    pub first_finished: Option<usize>,
    /// Indices into `runs`: the finished ones in the order they finished, then the others
    /// in the order given.
    pub order: Vec<usize>,
}

/// The answers of a wait: a target's envelope if the wait saw it end, else a fresh look at
/// it (it may have finished since, or be found lost).
pub fn wait_answers(
    targets: Vec<(AttemptPaths, AttemptSpec)>,
    res: WaitResult,
) -> Result<WaitAnswers, Error> {
    let mut runs = Vec::with_capacity(targets.len());
    // The wait's own order of ends first, so equal times keep it.
    let mut seen: Vec<usize> = res.first_finished.into_iter().collect();
    seen.extend(
        (0..res.results.len())
            .filter(|i| res.results[*i].is_some() && Some(*i) != res.first_finished),
    );
    for ((paths, spec), env) in targets.into_iter().zip(res.results) {
        let status = match env {
            Some(e) => AttemptStatus::Finished(e),
            None => attempt_status(&paths, &spec)?,
        };
        runs.push(RunAnswer {
            paths,
            run_id: spec.run_id.to_string(),
            what: crate::app::what(&spec),
            status,
        });
    }
    let finished_at = |i: usize| match &runs[i].status {
        AttemptStatus::Finished(e) => e.finished_at.clone(),
        AttemptStatus::Live(_) => None,
    };
    let mut order: Vec<usize> = seen;
    let more: Vec<usize> = (0..runs.len())
        .filter(|i| !order.contains(i) && matches!(runs[*i].status, AttemptStatus::Finished(_)))
        .collect();
    order.extend(more);
    // RFC 3339 UTC with milliseconds: the text sorts as the time does.
    order.sort_by_key(|i| {
        let at = finished_at(*i);
        (at.is_none(), at)
    });
    let first_finished = order.first().copied();
    let rest: Vec<usize> = (0..runs.len()).filter(|i| !order.contains(i)).collect();
    order.extend(rest);
    Ok(WaitAnswers {
        runs,
        timed_out: res.timed_out,
        first_finished,
        order,
    })
}

/// The most run ids a "waiting for …" message names; the rest are counted.
const NAMED: usize = 5;

/// `waiting for a, b, c, d, e and 3 more`: what a wait says it waits for.
pub fn waiting_for(targets: &[(AttemptPaths, AttemptSpec)]) -> String {
    named(
        targets.iter().map(|(_, s)| s.run_id.as_str()),
        targets.len(),
    )
}

/// The first [`NAMED`] of `ids` (of `total`), and how many more.
fn named<'a>(ids: impl Iterator<Item = &'a str>, total: usize) -> String {
    let names: Vec<&str> = ids.take(NAMED).collect();
    let mut s = format!("waiting for {}", names.join(", "));
    if total > names.len() {
        s.push_str(&format!(" and {} more", total - names.len()));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_names_five_runs_and_counts_the_rest() {
        let ids = ["a", "b", "c", "d", "e", "f", "g"];
        assert_eq!(named(ids[..1].iter().copied(), 1), "waiting for a");
        assert_eq!(
            named(ids[..5].iter().copied(), 5),
            "waiting for a, b, c, d, e"
        );
        assert_eq!(
            named(ids.iter().copied(), 7),
            "waiting for a, b, c, d, e and 2 more"
        );
    }
}
