//! Waiting on attempts without polling.
//!
//! Three kernel objects wake a waiting supervisor:
//!
//! * the attempt's `done.fifo`: the worker opens it for writing and closes it right after
//!   `result.json` is in place, so every reader sees a hang-up at once;
//! * a pidfd per worker: readable the moment the worker dies (a worker that dies without a
//!   result is `lost`);
//! * inotify on the attempt directory, only for attempts that have no worker yet (to see
//!   `launch.json`/`worker.json` appear) or no FIFO.
//!
//! Each supervisor needs at most one inotify instance and usually none: closing an inotify
//! fd costs 10-20 ms in the kernel (an RCU grace period, paid again at process exit), and
//! a user has only 128 instances.

use std::collections::HashMap;
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::time::{Duration, Instant, SystemTime};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};

use super::SuperviseError;
use super::cancel::request_cancel;
use super::observe::{AttemptState, STARTING_GRACE, observe};
use crate::envelope::Envelope;
use crate::procs;
use crate::spec::AttemptSpec;
use crate::store::AttemptPaths;

/// Return when any attempt finishes, or when all have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitMode {
    Any,
    All,
}

/// How to wait.
#[derive(Clone, Debug)]
pub struct WaitOptions {
    pub mode: WaitMode,
    /// Give up after this long (the attempts run on).
    pub timeout: Option<Duration>,
    /// Ctrl-C or SIGTERM cancels the attempts (a second one kills at once). Used by `run`.
    pub cancel_on_interrupt: bool,
}

/// What the wait found: one slot per target, `None` for those still running.
#[derive(Debug)]
pub struct WaitOutcome {
    pub results: Vec<Option<Envelope>>,
    pub timed_out: bool,
}

/// Blocks SIGINT and SIGTERM so they queue for a signalfd. Call early in `run`, before the
/// attempt is launched, so a Ctrl-C during the launch still cancels it. Children get a clean
/// signal state (see `procs::reset_signals_in_child`).
pub fn block_interrupts() {
    let mut m = SigSet::empty();
    m.add(Signal::SIGINT);
    m.add(Signal::SIGTERM);
    let _ = m.thread_block();
}

/// Closes an inotify fd off the caller's path (the kernel makes the close wait for an RCU
/// grace period, often 10-20 ms).
pub fn release(inotify: Inotify) {
    let _ = std::thread::Builder::new()
        .name("inotify-close".into())
        .spawn(move || drop(inotify));
}

/// Opens the attempt's completion FIFO for reading, without blocking. `None` when the
/// attempt has none (e.g. created by an older subpane).
fn open_done_fifo(paths: &AttemptPaths) -> Option<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(paths.done_fifo())
        .ok()
}

struct Slot<'a> {
    paths: &'a AttemptPaths,
    spec: &'a AttemptSpec,
    done: Option<Envelope>,
    fifo: Option<File>,
    pidfd: Option<OwnedFd>,
    starting_since: Option<SystemTime>,
    watched: bool,
}

impl Slot<'_> {
    /// Re-reads the attempt; opens a pidfd on a running worker.
    fn refresh(&mut self) -> Result<(), SuperviseError> {
        for _ in 0..3 {
            match observe(self.paths, self.spec)? {
                AttemptState::Finished(env) => {
                    self.done = Some(*env);
                    self.pidfd = None;
                    self.fifo = None;
                    return Ok(());
                }
                AttemptState::Starting { since } => {
                    self.starting_since = Some(since);
                    return Ok(());
                }
                AttemptState::Running(info) => {
                    self.starting_since = None;
                    if self.pidfd.is_some() {
                        return Ok(());
                    }
                    if let Some(fd) = procs::pidfd_for(&info.worker) {
                        self.pidfd = Some(fd);
                        return Ok(());
                    }
                    // It died between the look and the pidfd: look again.
                }
            }
        }
        Ok(())
    }

    /// Whether only a directory watch can tell us what happens next.
    fn needs_watch(&self) -> bool {
        self.done.is_none() && !self.watched && (self.pidfd.is_none() || self.fifo.is_none())
    }
}

/// What one `poll(2)` is made of, and which slot each fd belongs to.
enum Source {
    Inotify,
    Signal,
    Fifo(usize),
    Pidfd(usize),
}

/// Waits for attempts. Event-driven: the process sleeps in `poll(2)` until an attempt's
/// FIFO hangs up, a worker dies, a record appears, a signal arrives, or a deadline passes.
pub fn wait(
    targets: &[(AttemptPaths, AttemptSpec)],
    opts: &WaitOptions,
) -> Result<WaitOutcome, SuperviseError> {
    let started = Instant::now();
    let mut slots: Vec<Slot<'_>> = targets
        .iter()
        .map(|(paths, spec)| Slot {
            paths,
            spec,
            done: None,
            // Open before looking: a result written after the look hangs this FIFO up.
            fifo: open_done_fifo(paths),
            pidfd: None,
            starting_since: None,
            watched: false,
        })
        .collect();
    let sfd = if opts.cancel_on_interrupt {
        let mut m = SigSet::empty();
        m.add(Signal::SIGINT);
        m.add(Signal::SIGTERM);
        let _ = m.thread_block();
        SignalFd::with_flags(&m, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC).ok()
    } else {
        None
    };
    let mut inotify: Option<Inotify> = None;
    let mut by_wd: HashMap<WatchDescriptor, usize> = HashMap::new();
    // Without any inotify instance left (the per-user limit), attempts with no worker yet are
    // looked at on a short timer; everything else still wakes us.
    let mut degraded = false;
    let mut interrupts = 0u32;
    for s in slots.iter_mut() {
        s.refresh()?;
    }
    let finish = |slots: Vec<Slot<'_>>, inotify: Option<Inotify>, timed_out: bool| {
        if let Some(n) = inotify {
            release(n);
        }
        Ok(WaitOutcome {
            results: slots.into_iter().map(|s| s.done).collect(),
            timed_out,
        })
    };
    loop {
        let n_done = slots.iter().filter(|s| s.done.is_some()).count();
        let finished = match opts.mode {
            WaitMode::Any => n_done > 0,
            WaitMode::All => n_done == slots.len(),
        };
        if finished {
            return finish(slots, inotify, false);
        }
        // Watch what only a watch can tell about, then look again (watch before looking).
        let unwatched: Vec<usize> = (0..slots.len())
            .filter(|&i| slots[i].needs_watch())
            .collect();
        if !unwatched.is_empty() && !degraded {
            if inotify.is_none() {
                inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC).ok();
            }
            match &inotify {
                None => degraded = true,
                Some(n) => {
                    for i in unwatched {
                        match n.add_watch(slots[i].paths.dir(), AddWatchFlags::IN_MOVED_TO) {
                            Ok(wd) => {
                                by_wd.insert(wd, i);
                                slots[i].watched = true;
                                slots[i].refresh()?;
                            }
                            Err(_) => degraded = true,
                        }
                    }
                }
            }
            continue;
        }
        // Deadlines: the caller's timeout, the end of any attempt's starting grace, and (only
        // when degraded) a short re-look at attempts with no worker yet.
        let now = Instant::now();
        if opts.timeout.is_some_and(|t| now >= started + t) {
            return finish(slots, inotify, true);
        }
        let mut deadline = opts.timeout.map(|t| started + t);
        for s in slots.iter().filter(|s| s.done.is_none()) {
            let mut d = None;
            if let Some(since) = s.starting_since {
                d = Some(
                    now + STARTING_GRACE.saturating_sub(since.elapsed().unwrap_or_default())
                        + Duration::from_millis(10),
                );
            }
            if degraded && s.pidfd.is_none() {
                d = Some(now + Duration::from_millis(100));
            }
            if let Some(d) = d {
                deadline = Some(deadline.map_or(d, |x: Instant| x.min(d)));
            }
        }
        let timeout = match deadline {
            None => PollTimeout::NONE,
            Some(d) => {
                let ms = d.saturating_duration_since(now).as_millis() + 1;
                PollTimeout::try_from(ms.min(i32::MAX as u128) as i32).unwrap_or(PollTimeout::MAX)
            }
        };
        let mut fds: Vec<PollFd<'_>> = Vec::new();
        let mut sources: Vec<Source> = Vec::new();
        if let Some(n) = &inotify {
            fds.push(PollFd::new(n.as_fd(), PollFlags::POLLIN));
            sources.push(Source::Inotify);
        }
        if let Some(s) = &sfd {
            fds.push(PollFd::new(s.as_fd(), PollFlags::POLLIN));
            sources.push(Source::Signal);
        }
        for (i, s) in slots.iter().enumerate().filter(|(_, s)| s.done.is_none()) {
            if let Some(f) = &s.fifo {
                fds.push(PollFd::new(f.as_fd(), PollFlags::POLLIN));
                sources.push(Source::Fifo(i));
            }
            if let Some(p) = &s.pidfd {
                fds.push(PollFd::new(p.as_fd(), PollFlags::POLLIN));
                sources.push(Source::Pidfd(i));
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
        let mut touched: Vec<usize> = Vec::new();
        for (src, fired) in sources.iter().zip(fired) {
            if !fired {
                continue;
            }
            match *src {
                Source::Fifo(i) => {
                    // A hang-up stays readable: drop the FIFO; the pidfd covers the rest.
                    slots[i].fifo = None;
                    touched.push(i);
                }
                Source::Pidfd(i) => touched.push(i),
                Source::Inotify => {
                    if let Some(n) = &inotify {
                        while let Ok(events) = n.read_events() {
                            if events.is_empty() {
                                break;
                            }
                            for ev in events {
                                let interesting = ev.name.as_ref().is_some_and(|n| {
                                    matches!(
                                        n.to_str(),
                                        Some("result.json" | "worker.json" | "launch.json")
                                    )
                                });
                                if let (true, Some(&i)) = (interesting, by_wd.get(&ev.wd)) {
                                    touched.push(i);
                                }
                            }
                        }
                    }
                }
                Source::Signal => {
                    if let Some(s) = &sfd {
                        while let Ok(Some(_)) = s.read_signal() {
                            interrupts += 1;
                            for slot in slots.iter().filter(|s| s.done.is_none()) {
                                let grace = if interrupts > 1 {
                                    0
                                } else {
                                    slot.spec.limits.grace_ms
                                };
                                if interrupts == 1 {
                                    eprintln!(
                                        "subpane: cancelling {} (Ctrl-C again to kill at once)",
                                        slot.spec.run_id
                                    );
                                }
                                let _ = request_cancel(slot.paths, grace);
                            }
                        }
                    }
                }
            }
        }
        // Attempts in their starting grace, or unwatched ones, are looked at again.
        for (i, s) in slots.iter().enumerate() {
            if s.done.is_none() && (s.starting_since.is_some() || (degraded && s.pidfd.is_none())) {
                touched.push(i);
            }
        }
        touched.sort_unstable();
        touched.dedup();
        for i in touched {
            if slots[i].done.is_none() {
                slots[i].refresh()?;
            }
        }
    }
}
