//! The one wait loop. Every wait of the application layer is a [`Driver`] of
//! [`WaitLoop::run`]: the answers of `wait` and `run` ([`crate::app::wait_with`]), a fan-out's
//! refills ([`crate::app::fanout`]) and the copies of `logs -f` ([`crate::app::follow`]).
//!
//! ```text
//!  Interrupter::interrupt (any thread) ─► hits += 1, Waker::wake
//!
//!  ┌─► driver.settled(loop)  refill, copy, act on new interrupts ─── Break ─► Ended::Done
//!  │        │
//!  │   Waiter::next(earliest of deadline, heartbeat,     one poll(2) over every attempt
//!  │                driver.wake_at)
//!  │        ├ Finished / Changed ─► driver.seen(…) ─────────────────── Break ─► Ended::Done
//!  │        │   then each event the waiter already knows (a past deadline: no sleep)
//!  │        └ TimedOut: the deadline passed ─────────────────────────────► Ended::DeadlinePassed
//!  │                    a beat is due ─► driver.seen(Beat); the driver's wake_at: settled
//!  └────────┘
//! ```
//!
//! The loop sleeps only in the waiter's `poll(2)`: its timeout is the caller's deadline or the
//! next heartbeat, never a timer that grows with the attempts.
//!
//! Common pitfalls:
//! * Act after the burst: ends come together (a fan-out's tasks finish in waves), and one
//!   refill (one batch of starts) for all of them costs what one start does. That is why
//!   [`Driver::settled`] comes after every event the waiter already knows.
//! * Beats missed while a driver was busy are not made up for ([`Heartbeat`]): a slow
//!   reporter gets one beat, not a burst of them.
//! * Interrupts are read in [`Driver::settled`] from the count, not from the waiter's
//!   `Woken`: a wake that came before the wait began (a Ctrl-C during a launch) has no
//!   event of its own left to see, but the count keeps it.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::app::Error;
use crate::envelope::Envelope;
use crate::spec::AttemptSpec;
use crate::store::AttemptPaths;
use crate::supervisor::{Token, WaitEvent, Waiter, Waker};

/// What the loop hands a [`Driver`].
#[derive(Debug)]
pub enum Seen {
    /// The attempt has its envelope; the loop no longer holds it.
    Finished {
        token: Token,
        envelope: Box<Envelope>,
    },
    /// A followed attempt's files changed (its logs grew).
    Changed(Token),
    /// The attempt's directory was removed under it and its worker has ended: no envelope
    /// will come. The loop no longer holds it.
    Vanished {
        token: Token,
        error: crate::supervisor::SuperviseError,
    },
    /// The heartbeat: nothing else has to happen for it.
    Beat,
}

/// One consumer of the loop: what it does with each event, and between bursts of them.
pub trait Driver {
    /// Before each sleep (the first one included), once every event the waiter already knew
    /// has been seen: refill, copy, act on interrupts. `Break` ends the loop.
    fn settled(&mut self, _wl: &mut WaitLoop) -> Result<ControlFlow<()>, Error> {
        Ok(ControlFlow::Continue(()))
    }
    /// When the loop must wake without an event (asked before each sleep): a driver's own
    /// timer, e.g. a task that may start at a time. `settled` runs once it passed.
    fn wake_at(&self) -> Option<Instant> {
        None
    }
    /// One event. `Break` ends the loop.
    fn seen(&mut self, wl: &mut WaitLoop, seen: Seen) -> Result<ControlFlow<()>, Error>;
}

/// `Break` when `done`: what a driver answers once it has what it waits for.
pub fn done_when(done: bool) -> ControlFlow<()> {
    if done {
        ControlFlow::Break(())
    } else {
        ControlFlow::Continue(())
    }
}

/// How [`WaitLoop::run`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// The driver said so.
    Done,
    /// The deadline passed first.
    DeadlinePassed,
}

/// Interrupts a wait from another thread (a signal handler's thread, an MCP client's
/// cancel). What an interrupt means is the driver's business: stop waiting, cancel, kill.
#[derive(Clone, Debug)]
pub struct Interrupter {
    hits: Arc<AtomicU32>,
    waker: Waker,
}

impl Interrupter {
    /// Counts one interrupt and wakes the loop.
    pub fn interrupt(&self) {
        self.hits.fetch_add(1, Ordering::SeqCst);
        self.waker.wake();
    }
}

/// What other threads tell a loop's driver: each [`Poster::post`] wakes the loop, and the
/// driver takes what came in [`Driver::settled`] ([`Inbox::next`]). For a driver fed by
/// threads (a fan-out's tasks on hosts, the board's runs on hosts).
pub struct Inbox<T> {
    rx: std::sync::mpsc::Receiver<T>,
    poster: Poster<T>,
}

/// Posts to an [`Inbox`] from any thread.
pub struct Poster<T> {
    tx: std::sync::mpsc::Sender<T>,
    waker: Waker,
}

impl<T> Clone for Poster<T> {
    fn clone(&self) -> Self {
        Self {
            tx: self.tx.clone(),
            waker: self.waker.clone(),
        }
    }
}

impl<T> Poster<T> {
    /// Sends `news` and wakes the loop (a loop gone: nothing to tell).
    pub fn post(&self, news: T) {
        let _ = self.tx.send(news);
        self.waker.wake();
    }
}

impl<T> Inbox<T> {
    /// An inbox whose posts wake `wl`.
    pub fn new(wl: &WaitLoop) -> Self {
        let (tx, rx) = std::sync::mpsc::channel();
        Self {
            rx,
            poster: Poster {
                tx,
                waker: wl.waker(),
            },
        }
    }

    pub fn poster(&self) -> Poster<T> {
        self.poster.clone()
    }

    /// The next news, if any came.
    pub fn next(&self) -> Option<T> {
        self.rx.try_recv().ok()
    }
}

/// The waiter, the interrupts, and the loop that drives them. See the module docs.
pub struct WaitLoop {
    waiter: Waiter,
    hits: Arc<AtomicU32>,
    /// Attempts added also report their records ([`WaitLoop::report_records`]).
    records: bool,
}

impl WaitLoop {
    pub fn new() -> Result<Self, Error> {
        Ok(Self {
            waiter: Waiter::new()?,
            hits: Arc::new(AtomicU32::new(0)),
            records: false,
        })
    }

    /// From now on, attempts added with [`WaitLoop::add`] also report [`Seen::Changed`] when
    /// one of their records is renamed into place (`progress.json`): for a front end that
    /// shows a live view of what it waits for (the live line of `run` and `wait`).
    pub fn report_records(&mut self, on: bool) {
        self.records = on;
    }

    /// A handle that interrupts this loop from another thread, before or while it runs.
    pub fn interrupter(&self) -> Interrupter {
        Interrupter {
            hits: self.hits.clone(),
            waker: self.waiter.waker(),
        }
    }

    /// Wakes the loop from another thread without an interrupt: the driver's
    /// [`Driver::settled`] runs again (for a driver that other threads feed).
    pub fn waker(&self) -> Waker {
        self.waiter.waker()
    }

    /// How many interrupts came so far.
    pub fn interrupts(&self) -> u32 {
        self.hits.load(Ordering::SeqCst)
    }

    /// Holds an attempt until it finishes ([`Seen::Finished`]; at once if it has).
    pub fn add(&mut self, paths: AttemptPaths, spec: AttemptSpec) -> Result<Token, Error> {
        if self.records {
            return self.watch_records(paths, spec);
        }
        Ok(self.waiter.add(paths, spec)?)
    }

    /// Like [`WaitLoop::add`], and also reports [`Seen::Changed`] when its files grow. The
    /// watch is in place when this returns: read the files after it, and no append is lost.
    pub fn follow(&mut self, paths: AttemptPaths, spec: AttemptSpec) -> Result<Token, Error> {
        Ok(self.waiter.follow(paths, spec)?)
    }

    /// Like [`WaitLoop::add`], and also reports [`Seen::Changed`] when one of its records
    /// (`progress.json`, `worker.json`) is renamed into place: for live views.
    pub fn watch_records(
        &mut self,
        paths: AttemptPaths,
        spec: AttemptSpec,
    ) -> Result<Token, Error> {
        Ok(self.waiter.watch_records(paths, spec)?)
    }

    /// Reports [`Seen::Changed`] when an entry of `dir` is made, renamed or removed.
    pub fn watch_dir(&mut self, dir: &std::path::Path) -> Result<Token, Error> {
        Ok(self.waiter.watch_dir(dir)?)
    }

    /// Reports [`Seen::Changed`] whenever `fd` is readable; the caller keeps it open.
    pub fn watch_fd(&mut self, fd: std::os::fd::RawFd) -> Token {
        self.waiter.watch_fd(fd)
    }

    /// Stops holding an attempt, a directory or a descriptor.
    pub fn remove(&mut self, token: Token) {
        self.waiter.remove(token);
    }

    /// Runs `driver` until it says `Break` or `deadline` passes, with a [`Seen::Beat`] every
    /// `heartbeat` from now.
    pub fn run(
        &mut self,
        deadline: Option<Instant>,
        heartbeat: Option<Duration>,
        driver: &mut dyn Driver,
    ) -> Result<Ended, Error> {
        let mut beat = heartbeat.map(|every| Heartbeat::new(Instant::now(), every));
        loop {
            if driver.settled(self)?.is_break() {
                return Ok(Ended::Done);
            }
            let wake_at = [deadline, beat.map(|b| b.due), driver.wake_at()]
                .into_iter()
                .flatten()
                .min();
            let mut event = self.waiter.next(wake_at)?;
            loop {
                let seen = match event {
                    WaitEvent::Finished { token, envelope } => Seen::Finished { token, envelope },
                    WaitEvent::Changed(token) => Seen::Changed(token),
                    WaitEvent::Vanished { token, error } => Seen::Vanished { token, error },
                    // The count says what it was for; the driver reads it when settled.
                    WaitEvent::Woken => {
                        event = self.waiter.next(Some(Instant::now()))?;
                        continue;
                    }
                    WaitEvent::TimedOut => {
                        let now = Instant::now();
                        if deadline.is_some_and(|d| now >= d) {
                            return Ok(Ended::DeadlinePassed);
                        }
                        if beat.as_mut().is_some_and(|b| b.take(now))
                            && driver.seen(self, Seen::Beat)?.is_break()
                        {
                            return Ok(Ended::Done);
                        }
                        break;
                    }
                };
                if driver.seen(self, seen)?.is_break() {
                    return Ok(Ended::Done);
                }
                // Every event the waiter already knows, before the driver settles.
                event = self.waiter.next(Some(Instant::now()))?;
            }
        }
    }
}

/// The shortest heartbeat: a zero one would spin.
const MIN_BEAT: Duration = Duration::from_millis(1);

/// When the next beat is due: every `every` from the start, with beats missed while busy
/// skipped rather than made up for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Heartbeat {
    every: Duration,
    due: Instant,
}

impl Heartbeat {
    fn new(start: Instant, every: Duration) -> Self {
        let every = every.max(MIN_BEAT);
        Self {
            every,
            due: start + every,
        }
    }

    /// Whether a beat is due at `now`. If it is, the next one is the first of the schedule
    /// after `now`.
    fn take(&mut self, now: Instant) -> bool {
        if now < self.due {
            return false;
        }
        let late = now.duration_since(self.due).as_nanos();
        let skipped = late / self.every.as_nanos() + 1;
        let step = u32::try_from(skipped).unwrap_or(u32::MAX);
        self.due += self.every.saturating_mul(step);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn a_beat_is_due_every_period_from_the_start() {
        let t0 = Instant::now();
        let mut h = Heartbeat::new(t0, S);
        assert!(!h.take(t0));
        assert!(!h.take(t0 + S / 2));
        assert!(h.take(t0 + S));
        assert_eq!(h.due, t0 + 2 * S);
        assert!(!h.take(t0 + S), "one beat for one moment");
        assert!(h.take(t0 + 2 * S + S / 10));
        assert_eq!(h.due, t0 + 3 * S, "the schedule does not drift");
    }

    #[test]
    fn beats_missed_while_busy_are_not_made_up_for() {
        let t0 = Instant::now();
        let mut h = Heartbeat::new(t0, S);
        // Busy for 4.5 periods: one beat, and the next on the schedule after now.
        assert!(h.take(t0 + 4 * S + S / 2));
        assert_eq!(h.due, t0 + 5 * S);
        assert!(!h.take(t0 + 4 * S + S / 2));
        // Exactly on a beat: that one is taken, the next is a period later.
        assert!(h.take(t0 + 7 * S));
        assert_eq!(h.due, t0 + 8 * S);
    }

    #[test]
    fn a_zero_heartbeat_does_not_spin() {
        let t0 = Instant::now();
        let mut h = Heartbeat::new(t0, Duration::ZERO);
        assert!(h.take(t0 + MIN_BEAT));
        assert!(h.due > t0 + MIN_BEAT);
    }
}
