//! The one way to wait on attempts: a [`Waiter`] that holds any number of them.
//!
//! ```text
//!  add(paths, spec) ─► Token             next(deadline) ─► Finished { token, envelope }
//!  watch_records(paths, spec) ─► Token                  ─► Changed(token)   (not for add)
//!  follow(paths, spec) ─► Token                         ─► TimedOut | Woken
//!  watch_dir(dir) ─► Token      (entries made, renamed in or removed: `top`'s runs)
//!  watch_fd(fd) ─► Token        (readable: `top`'s terminal and signals)
//!  remove(token)
//!  waker() ─► Waker (Send + Clone): wake() from any thread ends the current next()
//! ```
//!
//! Nothing here polls or prints. Four kernel objects wake the waiting thread, all in one
//! `poll(2)`:
//!
//! * the attempt's `done.fifo`: the worker opens it for writing and closes it right after
//!   `result.json` is in place, so every reader sees a hang-up at once;
//! * a pidfd per worker: readable the moment the worker dies (a worker that dies without a
//!   result is `lost`, and the waiter writes that envelope);
//! * one inotify instance for the whole waiter, with a watch on the directory of attempts
//!   that have no worker yet (to see `launch.json`/`worker.json` appear) or no FIFO, of
//!   attempts whose records are watched (`progress.json` renamed into place) or that are
//!   followed (appends to their logs), and of directories watched for their entries;
//! * an eventfd, written by [`Waker::wake`];
//! * descriptors of the caller's ([`Waiter::watch_fd`]), reported when readable.
//!
//! The timeout of that poll is the caller's deadline or the end of an attempt's starting
//! grace, never a timer that grows with the attempts.
//!
//! Common pitfalls:
//! * An attempt directory removed under a held attempt has nothing left to look at: the
//!   waiter waits for the worker it knew (its pidfd), then reports [`WaitEvent::Vanished`]
//!   (what the caller does with it is its own: `run` and `wait` end with the error, `top`
//!   takes it as the attempt's end); records removed from a directory that is still there make
//!   the attempt `lost` once that worker has ended (no look could tell it had run).
//! * Watch before you look: open the FIFO (or add the inotify watch), then read the files, or
//!   a result written in between is missed.
//! * Closing an inotify fd costs 10-20 ms in the kernel (an RCU grace period), and a user has
//!   only 128 instances: one per waiter, created only when needed, closed off the caller's
//!   path.
//! * Two watches on one directory share a watch descriptor: add them with `IN_MASK_ADD`, and
//!   remove the watch only when no attempt of that directory is left.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::eventfd::{EfdFlags, EventFd};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};

use super::SuperviseError;
use super::lost::write_lost;
use super::observe::{AttemptState, STARTING_GRACE, observe};
use crate::envelope::Envelope;
use crate::procs;
use crate::spec::AttemptSpec;
use crate::store::AttemptPaths;

mod watches;

use watches::{open_done_fifo, release};

/// Names one attempt held by a [`Waiter`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Token(usize);

/// What [`Waiter::next`] found.
#[derive(Debug)]
pub enum WaitEvent {
    /// The attempt has its envelope (written by its worker, or `lost` by this waiter). It is
    /// no longer held.
    Finished {
        token: Token,
        envelope: Box<Envelope>,
    },
    /// A file of a followed attempt changed (its logs grew). A followed attempt always has
    /// one more of these just before its `Finished`: its files are complete then.
    Changed(Token),
    /// The attempt's directory was removed under it, and the worker this waiter knew (if
    /// any) has ended: no envelope will ever come ([`SuperviseError::Vanished`] says it).
    /// It is no longer held.
    Vanished { token: Token, error: SuperviseError },
    /// The deadline passed first.
    TimedOut,
    /// [`Waker::wake`] was called.
    Woken,
}

/// What a held attempt is reported for besides its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Interest {
    /// Only its end ([`Waiter::add`]).
    End,
    /// Its records renamed into place: `progress.json`, `worker.json`, … ([`Waiter::watch_records`]).
    Records,
    /// Any change of its files: logs growing ([`Waiter::follow`]).
    Files,
}

/// The records whose renaming reports [`Interest::Records`].
const RECORDS: [&str; 4] = ["progress.json", "worker.json", "launch.json", "cancel.json"];

/// Wakes a [`Waiter`] from another thread.
#[derive(Clone, Debug)]
pub struct Waker(Arc<EventFd>);

impl Waker {
    /// Ends the waiter's current (or next) `next` call with [`WaitEvent::Woken`].
    pub fn wake(&self) {
        let _ = self.0.write(1);
    }
}

struct Slot {
    paths: AttemptPaths,
    spec: AttemptSpec,
    fifo: Option<File>,
    pidfd: Option<OwnedFd>,
    /// The worker the pidfd is of, once known.
    worker: Option<crate::envelope::ProcRef>,
    starting_since: Option<SystemTime>,
    watch: Option<WatchDescriptor>,
    interest: Interest,
}

impl Slot {
    /// Whether only a directory watch can tell what happens next.
    fn needs_watch(&self) -> bool {
        self.watch.is_none()
            && (self.interest != Interest::End || self.pidfd.is_none() || self.fifo.is_none())
    }
}

/// Holds attempts and returns them as they finish. See the module docs.
pub struct Waiter {
    slots: HashMap<Token, Slot>,
    next_token: usize,
    ready: VecDeque<(Token, Box<Envelope>)>,
    /// Attempts whose directory vanished ([`WaitEvent::Vanished`]).
    vanished: VecDeque<(Token, SuperviseError)>,
    changed: Vec<Token>,
    woken: bool,
    inotify: Option<Inotify>,
    by_wd: HashMap<WatchDescriptor, Vec<Token>>,
    /// Directories watched for their entries ([`Waiter::watch_dir`]).
    dirs: HashMap<Token, WatchDescriptor>,
    /// Descriptors of the caller's, reported when readable ([`Waiter::watch_fd`]).
    fds: Vec<(Token, std::os::fd::RawFd)>,
    /// No inotify instance or watch could be had (the per-user limits): attempts with no
    /// worker yet are looked at on a short timer; everything else still wakes the waiter.
    degraded: bool,
    wake: Arc<EventFd>,
}

/// How often an attempt with no worker is looked at when no inotify watch can be had.
const DEGRADED_LOOK: Duration = Duration::from_millis(100);

impl Waiter {
    pub fn new() -> Result<Self, SuperviseError> {
        let wake = EventFd::from_value_and_flags(0, EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)
            .map_err(|e| SuperviseError::Watch {
                what: "a wake-up eventfd".into(),
                source: e,
            })?;
        Ok(Self {
            slots: HashMap::new(),
            next_token: 0,
            ready: VecDeque::new(),
            vanished: VecDeque::new(),
            changed: Vec::new(),
            woken: false,
            inotify: None,
            by_wd: HashMap::new(),
            dirs: HashMap::new(),
            fds: Vec::new(),
            degraded: false,
            wake: Arc::new(wake),
        })
    }

    /// A handle that wakes this waiter from another thread.
    pub fn waker(&self) -> Waker {
        Waker(self.wake.clone())
    }

    /// Holds an attempt until it finishes. An attempt that has finished already is returned
    /// by the next call of [`Waiter::next`].
    pub fn add(&mut self, paths: AttemptPaths, spec: AttemptSpec) -> Result<Token, SuperviseError> {
        self.insert(paths, spec, Interest::End)
    }

    /// Like [`Waiter::add`], and also reports [`WaitEvent::Changed`] when one of the attempt's
    /// records is renamed into place (`progress.json` as it runs, `worker.json`): for live
    /// views. Appends to its logs are not reported.
    pub fn watch_records(
        &mut self,
        paths: AttemptPaths,
        spec: AttemptSpec,
    ) -> Result<Token, SuperviseError> {
        self.insert(paths, spec, Interest::Records)
    }

    /// Like [`Waiter::add`], and also reports [`WaitEvent::Changed`] when the attempt's files
    /// grow (for following its logs).
    pub fn follow(
        &mut self,
        paths: AttemptPaths,
        spec: AttemptSpec,
    ) -> Result<Token, SuperviseError> {
        self.insert(paths, spec, Interest::Files)
    }

    /// Reports [`WaitEvent::Changed`] when an entry of `dir` is made, renamed in, removed or
    /// renamed away (a new run in `runs/`, a new attempt in a run's directory). An error when
    /// no inotify watch can be had.
    pub fn watch_dir(&mut self, dir: &std::path::Path) -> Result<Token, SuperviseError> {
        if self.inotify.is_none() {
            self.inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC).ok();
        }
        let err = |e| SuperviseError::Watch {
            what: dir.display().to_string(),
            source: e,
        };
        let n = self
            .inotify
            .as_ref()
            .ok_or(err(nix::errno::Errno::EMFILE))?;
        let flags = AddWatchFlags::IN_CREATE
            | AddWatchFlags::IN_MOVED_TO
            | AddWatchFlags::IN_DELETE
            | AddWatchFlags::IN_MOVED_FROM
            | AddWatchFlags::from_bits_retain(libc::IN_MASK_ADD);
        let wd = n.add_watch(dir, flags).map_err(err)?;
        let token = self.new_token();
        self.dirs.insert(token, wd);
        self.by_wd.entry(wd).or_default().push(token);
        Ok(token)
    }

    /// Reports [`WaitEvent::Changed`] whenever `fd` is readable (level-triggered: read it
    /// before the next `next`). The caller keeps `fd` open until it removes the token.
    pub fn watch_fd(&mut self, fd: std::os::fd::RawFd) -> Token {
        let token = self.new_token();
        self.fds.push((token, fd));
        token
    }

    fn new_token(&mut self) -> Token {
        let token = Token(self.next_token);
        self.next_token += 1;
        token
    }

    fn insert(
        &mut self,
        paths: AttemptPaths,
        spec: AttemptSpec,
        interest: Interest,
    ) -> Result<Token, SuperviseError> {
        let token = self.new_token();
        // Open before looking: a result written after the look hangs this FIFO up.
        let fifo = open_done_fifo(&paths);
        self.slots.insert(
            token,
            Slot {
                paths,
                spec,
                fifo,
                pidfd: None,
                worker: None,
                starting_since: None,
                watch: None,
                interest,
            },
        );
        if interest != Interest::End {
            // Followers need the watch in place before the caller's first read.
            self.watch(token);
        }
        self.refresh(token)?;
        Ok(token)
    }

    /// Stops holding an attempt (whether or not it finished).
    pub fn remove(&mut self, token: Token) {
        self.ready.retain(|(t, _)| *t != token);
        self.vanished.retain(|(t, _)| *t != token);
        self.changed.retain(|t| *t != token);
        if let Some(slot) = self.slots.remove(&token) {
            self.unwatch(token, slot.watch);
        }
        if let Some(wd) = self.dirs.remove(&token) {
            self.unwatch(token, Some(wd));
        }
        self.fds.retain(|(t, _)| *t != token);
    }

    /// How many attempts are held and not yet returned as finished (directories and
    /// descriptors are not counted).
    pub fn pending(&self) -> usize {
        self.slots.len() + self.ready.len() + self.vanished.len()
    }

    /// Waits for the next event: an attempt that finished, a followed attempt whose files
    /// changed, the deadline, or a wake-up. Finished attempts come first.
    pub fn next(&mut self, deadline: Option<Instant>) -> Result<WaitEvent, SuperviseError> {
        loop {
            if let Some((token, _)) = self.ready.front() {
                // A followed attempt's last change comes before its end, whichever of the two
                // the kernel told first.
                if let Some(i) = self.changed.iter().position(|t| t == token) {
                    return Ok(WaitEvent::Changed(self.changed.remove(i)));
                }
            }
            if let Some((token, envelope)) = self.ready.pop_front() {
                return Ok(WaitEvent::Finished { token, envelope });
            }
            if let Some((token, error)) = self.vanished.pop_front() {
                return Ok(WaitEvent::Vanished { token, error });
            }
            if !self.changed.is_empty() {
                return Ok(WaitEvent::Changed(self.changed.remove(0)));
            }
            if std::mem::take(&mut self.woken) {
                return Ok(WaitEvent::Woken);
            }
            // Watch what only a watch can tell about, then look again (watch before looking).
            let unwatched: Vec<Token> = self
                .slots
                .iter()
                .filter(|(_, s)| s.needs_watch())
                .map(|(t, _)| *t)
                .collect();
            if !unwatched.is_empty() && !self.degraded {
                for t in unwatched {
                    if self.watch(t) {
                        self.refresh(t)?;
                    }
                }
                continue;
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return Ok(WaitEvent::TimedOut);
            }
            self.poll_once(deadline, now)?;
        }
    }

    /// One `poll(2)` over every source; what it finds is queued for `next`.
    fn poll_once(&mut self, deadline: Option<Instant>, now: Instant) -> Result<(), SuperviseError> {
        // Besides the caller's deadline: the end of an attempt's starting grace (it may be
        // lost), and, only when degraded, a short re-look at attempts with no worker yet.
        let mut until = deadline;
        for s in self.slots.values() {
            let mut d = s.starting_since.map(|since| {
                now + STARTING_GRACE.saturating_sub(since.elapsed().unwrap_or_default())
                    + Duration::from_millis(10)
            });
            if self.degraded && s.pidfd.is_none() {
                d = Some(now + DEGRADED_LOOK);
            }
            if let Some(d) = d {
                until = Some(until.map_or(d, |u: Instant| u.min(d)));
            }
        }
        let timeout = match until {
            None => PollTimeout::NONE,
            Some(d) => {
                // Round up so the wake-up is not a hair early.
                let ms = d.saturating_duration_since(now).as_millis() + 1;
                PollTimeout::try_from(ms.min(i32::MAX as u128) as i32).unwrap_or(PollTimeout::MAX)
            }
        };
        enum Source {
            Wake,
            Inotify,
            Fifo(Token),
            Pidfd(Token),
            Fd(Token),
        }
        let mut fds: Vec<PollFd<'_>> =
            Vec::with_capacity(2 + 2 * self.slots.len() + self.fds.len());
        let mut sources: Vec<Source> = Vec::with_capacity(fds.capacity());
        fds.push(PollFd::new(self.wake.as_fd(), PollFlags::POLLIN));
        sources.push(Source::Wake);
        if let Some(n) = &self.inotify {
            fds.push(PollFd::new(n.as_fd(), PollFlags::POLLIN));
            sources.push(Source::Inotify);
        }
        for (t, fd) in &self.fds {
            // SAFETY: the caller keeps the descriptor open while it is watched.
            let b = unsafe { std::os::fd::BorrowedFd::borrow_raw(*fd) };
            fds.push(PollFd::new(b, PollFlags::POLLIN));
            sources.push(Source::Fd(*t));
        }
        for (t, s) in &self.slots {
            if let Some(f) = &s.fifo {
                fds.push(PollFd::new(f.as_fd(), PollFlags::POLLIN));
                sources.push(Source::Fifo(*t));
            }
            if let Some(p) = &s.pidfd {
                fds.push(PollFd::new(p.as_fd(), PollFlags::POLLIN));
                sources.push(Source::Pidfd(*t));
            }
        }
        match poll(&mut fds, timeout) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => {
                return Err(SuperviseError::Watch {
                    what: "attempts (poll)".into(),
                    source: e,
                });
            }
        }
        let fired: Vec<bool> = fds
            .iter()
            .map(|f| f.revents().is_some_and(|r| !r.is_empty()))
            .collect();
        drop(fds);
        let mut touched: Vec<Token> = Vec::new();
        for (src, fired) in sources.into_iter().zip(fired) {
            if !fired {
                continue;
            }
            match src {
                Source::Wake => {
                    let _ = self.wake.read();
                    self.woken = true;
                }
                Source::Fifo(t) => {
                    // A hang-up stays readable: drop the FIFO; the pidfd covers the rest.
                    if let Some(s) = self.slots.get_mut(&t) {
                        s.fifo = None;
                    }
                    touched.push(t);
                }
                Source::Pidfd(t) => touched.push(t),
                Source::Fd(t) => {
                    if !self.changed.contains(&t) {
                        self.changed.push(t);
                    }
                }
                Source::Inotify => self.read_inotify(&mut touched),
            }
        }
        // Attempts in their starting grace, or unwatched ones, are looked at again.
        for (t, s) in &self.slots {
            if s.starting_since.is_some() || (self.degraded && s.pidfd.is_none()) {
                touched.push(*t);
            }
        }
        touched.sort_unstable();
        touched.dedup();
        for t in touched {
            self.refresh(t)?;
        }
        Ok(())
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        if let Some(n) = self.inotify.take() {
            release(n);
        }
    }
}
