//! One attempt from plan to answer: start it and, unless detached, wait for its envelope,
//! with interrupts turned into cancels. What `subpane run` and `retry` do, and the MCP
//! `run` tool.
//!
//! ```text
//!  Plan ─► start ─► on_started(&Started)          warnings, "started"
//!            ├ spawn_failed ─────────────────────► Finished (the `spawn` envelope)
//!            ├ detach ───────────────────────────► Detached
//!            ▼
//!          wait_with(loop, [the attempt], heartbeat, on_progress) ─► Finished (its envelope)
//!            ├ max_wait passed ─────────────────► StillRunning (it goes on)
//!            ▲ interrupt n (the loop's Interrupter, any thread, even during the start)
//!            └─ cancel: n = 1 with the run's grace, later at once (app::cancel: an attempt
//!               that finished is left alone); then CancelAndWait waits on,
//!               CancelAndReturn ─► Cancelled
//! ```
//!
//! Common pitfalls:
//! * Hand out the loop's [`Interrupter`](crate::app::Interrupter) before the start: an interrupt
//!   that comes while the pane starts is counted, and cancels the attempt once it exists.
//! * A pane that cannot start is an outcome ([`RunOutcome::Finished`] with the `spawn`
//!   envelope), detached or not.

use std::ops::ControlFlow;
use std::time::Duration;

use crate::app::wait_loop::WaitLoop;
use crate::app::{
    CancelOutcome, Error, Found, Plan, Started, WaitMode, WaitOptions, WaitProgress, cancel_by,
    start, wait_with,
};
use crate::envelope::{CancelOrigin, Envelope};
use crate::store::Home;

/// What an interrupt of the wait does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnInterrupt {
    /// Cancel the attempt (the first time with its grace, then at once) and wait for its
    /// end: Ctrl-C at a terminal.
    CancelAndWait,
    /// Cancel the attempt with its grace and return: a client that gave up on the call.
    CancelAndReturn,
}

/// How [`run`] runs the attempt.
pub struct RunOptions<'a> {
    /// Return once the attempt runs; its limits still hold.
    pub detach: bool,
    pub on_interrupt: OnInterrupt,
    /// Report [`WaitProgress`] this often while the attempt runs.
    pub heartbeat: Option<Duration>,
    /// Told once the attempt exists (its pane started or not, detached or not).
    pub on_started: Option<&'a mut dyn FnMut(&Started)>,
    /// Told when the attempt ends and on each heartbeat.
    pub on_progress: Option<&'a mut dyn FnMut(&WaitProgress<'_>)>,
    /// Stop waiting after this long ([`RunOutcome::StillRunning`]); the attempt goes on.
    pub max_wait: Option<Duration>,
    /// Who an interrupt's cancel is recorded as coming from (the envelope's `cancelled_by`;
    /// `None`: an interrupt, the user's Ctrl-C).
    pub cancel_by: Option<CancelOrigin>,
}

/// How [`run`] ended.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // one per call: the copy costs nothing
pub enum RunOutcome {
    /// `detach`: the attempt runs on.
    Detached(Started),
    /// The attempt ended, or its pane could not start (the `spawn` envelope).
    Finished {
        started: Started,
        envelope: Box<Envelope>,
    },
    /// [`OnInterrupt::CancelAndReturn`]: the attempt was asked to stop, and not waited for.
    Cancelled(Started),
    /// `max_wait` passed first: the attempt goes on.
    StillRunning(Started),
}

/// Starts the attempt of `plan` and, unless `detach`, waits on `wl` for its envelope (see
/// the module docs).
pub fn run(
    home: &Home,
    plan: Plan,
    wl: &mut WaitLoop,
    opts: RunOptions<'_>,
) -> Result<RunOutcome, Error> {
    let record = plan.record.clone();
    let started = start(home, plan)?;
    if let Some(f) = opts.on_started {
        f(&started);
    }
    if let Some(envelope) = started.spawn_failed.clone() {
        return Ok(RunOutcome::Finished { started, envelope });
    }
    if opts.detach {
        return Ok(RunOutcome::Detached(started));
    }
    let found = Found {
        record,
        paths: started.paths.clone(),
        spec: started.spec.clone(),
    };
    let (then, mut on_progress, by) = (opts.on_interrupt, opts.on_progress, opts.cancel_by);
    let mut failed = None;
    let mut on_interrupt = |n: u32| {
        if let Err(e) = cancel(&found, (n > 1).then_some(0), by) {
            failed = Some(e);
            return ControlFlow::Break(());
        }
        match then {
            OnInterrupt::CancelAndWait => ControlFlow::Continue(()),
            OnInterrupt::CancelAndReturn => ControlFlow::Break(()),
        }
    };
    let res = wait_with(
        wl,
        &[(found.paths.clone(), found.spec.clone())],
        WaitMode::All,
        opts.max_wait,
        WaitOptions {
            heartbeat: opts.heartbeat,
            on_progress: match &mut on_progress {
                Some(f) => Some(&mut **f),
                None => None,
            },
            on_interrupt: Some(&mut on_interrupt),
        },
    )?;
    if let Some(e) = failed {
        return Err(e);
    }
    if res.stopped {
        return Ok(RunOutcome::Cancelled(started));
    }
    if res.timed_out {
        return Ok(RunOutcome::StillRunning(started));
    }
    match res.results.into_iter().next().flatten() {
        Some(envelope) => Ok(RunOutcome::Finished { started, envelope }),
        None => Err(Error::NoEnvelope),
    }
}

/// The n-th interrupt (n = 1, 2, …) of a waited-for attempt as a cancel: the first with the
/// run's grace, a later one at once. An attempt that has finished is left alone.
pub fn cancel_on_interrupt(found: &Found, n: u32) -> Result<CancelOutcome, Error> {
    cancel(found, (n > 1).then_some(0), None)
}

fn cancel(
    found: &Found,
    grace_ms: Option<u64>,
    by: Option<CancelOrigin>,
) -> Result<CancelOutcome, Error> {
    cancel_by(found, grace_ms, by.unwrap_or(CancelOrigin::Interrupt))
}
