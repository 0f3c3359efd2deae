//! Waiting on attempts without polling: inotify on their directories, a pidfd per worker,
//! a signalfd for Ctrl-C, and a timeout only for real deadlines.

use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
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
/// attempt is launched, so a Ctrl-C during the launch still cancels it. Child processes get
/// a clean signal mask (the standard library resets it), so tmux is not affected.
pub fn block_interrupts() {
    let mut m = SigSet::empty();
    m.add(Signal::SIGINT);
    m.add(Signal::SIGTERM);
    let _ = m.thread_block();
}

/// Closes an inotify fd off the caller's path: closing one with watches waits for an RCU
/// grace period in the kernel (often 10-20 ms), which would otherwise delay every answer.
pub fn release(inotify: Inotify) {
    let _ = std::thread::Builder::new().name("inotify-close".into()).spawn(move || drop(inotify));
}

struct Slot<'a> {
    paths: &'a AttemptPaths,
    spec: &'a AttemptSpec,
    done: Option<Envelope>,
    pidfd: Option<OwnedFd>,
    starting_since: Option<SystemTime>,
}

impl Slot<'_> {
    /// Re-reads the attempt; opens a pidfd on a running worker.
    fn refresh(&mut self) -> Result<(), SuperviseError> {
        for _ in 0..3 {
            match observe(self.paths, self.spec)? {
                AttemptState::Finished(env) => {
                    self.done = Some(*env);
                    self.pidfd = None;
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
}

/// Waits for attempts. Event-driven: the process sleeps in `poll(2)` until a file appears in
/// an attempt directory, a worker dies, a signal arrives, or a deadline passes.
pub fn wait(targets: &[(AttemptPaths, AttemptSpec)], opts: &WaitOptions) -> Result<WaitOutcome, SuperviseError> {
    let started = Instant::now();
    // inotify makes the answer immediate (the rename of result.json). Without it (the per-user
    // limit of 128 instances is easy to reach with many waiting supervisors) the pidfds still
    // answer, since the worker writes result.json before it exits; only attempts with no
    // worker yet are then looked at on a short timer.
    let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC).ok();
    let mut by_wd: HashMap<WatchDescriptor, Vec<usize>> = HashMap::new();
    let mut slots: Vec<Slot<'_>> = Vec::with_capacity(targets.len());
    let mut unwatched = false;
    for (i, (paths, spec)) in targets.iter().enumerate() {
        // Watch before looking, so nothing written in between is missed. Every record appears
        // by rename, so renames are all we need to hear about.
        match inotify.as_ref().map(|n| n.add_watch(paths.dir(), AddWatchFlags::IN_MOVED_TO)) {
            Some(Ok(wd)) => by_wd.entry(wd).or_default().push(i),
            Some(Err(nix::errno::Errno::ENOENT)) => {
                return Err(SuperviseError::Watch { what: paths.dir().display().to_string(), source: nix::errno::Errno::ENOENT });
            }
            _ => unwatched = true,
        }
        slots.push(Slot { paths, spec, done: None, pidfd: None, starting_since: None });
    }
    let sfd = if opts.cancel_on_interrupt {
        let mut m = SigSet::empty();
        m.add(Signal::SIGINT);
        m.add(Signal::SIGTERM);
        let _ = m.thread_block();
        SignalFd::with_flags(&m, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC).ok()
    } else {
        None
    };
    let mut interrupts = 0u32;
    for s in slots.iter_mut() {
        s.refresh()?;
    }
    loop {
        let n_done = slots.iter().filter(|s| s.done.is_some()).count();
        let finished = match opts.mode {
            WaitMode::Any => n_done > 0,
            WaitMode::All => n_done == slots.len(),
        };
        if finished {
            if let Some(n) = inotify {
                release(n);
            }
            return Ok(WaitOutcome { results: slots.into_iter().map(|s| s.done).collect(), timed_out: false });
        }
        // Deadlines: the caller's timeout, and the end of any attempt's starting grace.
        let now = Instant::now();
        let mut deadline = opts.timeout.map(|t| started + t);
        for s in &slots {
            if let (None, Some(since)) = (&s.done, s.starting_since) {
                let left = STARTING_GRACE.saturating_sub(since.elapsed().unwrap_or_default());
                let d = now + left + Duration::from_millis(10);
                deadline = Some(deadline.map_or(d, |x| x.min(d)));
            }
        }
        if let Some(d) = deadline {
            if opts.timeout.is_some_and(|t| now >= started + t) {
                if let Some(n) = inotify {
                    release(n);
                }
                return Ok(WaitOutcome { results: slots.into_iter().map(|s| s.done).collect(), timed_out: true });
            }
            let _ = d;
        }
        let timeout = match deadline {
            None => PollTimeout::NONE,
            Some(d) => {
                let ms = d.saturating_duration_since(now).as_millis() + 1;
                PollTimeout::try_from(ms.min(i32::MAX as u128) as i32).unwrap_or(PollTimeout::MAX)
            }
        };
        // Degraded (no watch): a slot with no worker yet is looked at again every 100 ms.
        let timeout = if unwatched && slots.iter().any(|s| s.done.is_none() && s.pidfd.is_none()) {
            let cap = PollTimeout::from(100u16);
            if timeout == PollTimeout::NONE || timeout > cap { cap } else { timeout }
        } else {
            timeout
        };
        let mut fds: Vec<PollFd<'_>> = Vec::new();
        if let Some(n) = &inotify {
            fds.push(PollFd::new(n.as_fd(), PollFlags::POLLIN));
        }
        let sig_ix = sfd.as_ref().map(|s| {
            fds.push(PollFd::new(s.as_fd(), PollFlags::POLLIN));
            fds.len() - 1
        });
        let base = fds.len();
        let mut which: Vec<usize> = Vec::new();
        for (i, s) in slots.iter().enumerate() {
            if let (None, Some(fd)) = (&s.done, &s.pidfd) {
                fds.push(PollFd::new(fd.as_fd(), PollFlags::POLLIN));
                which.push(i);
            }
        }
        match poll(&mut fds, timeout) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(SuperviseError::Watch { what: "attempts (poll)".into(), source: e }),
        }
        let fired = |k: usize| fds[k].revents().is_some_and(|r| !r.is_empty());
        let inotify_fired = inotify.is_some() && fired(0);
        let sig_fired = sig_ix.is_some_and(fired);
        let dead: Vec<usize> = (0..which.len()).filter(|&k| fired(base + k)).map(|k| which[k]).collect();
        drop(fds);
        let mut touched: Vec<usize> = dead;
        if let (true, Some(inotify)) = (inotify_fired, &inotify) {
            while let Ok(events) = inotify.read_events() {
                if events.is_empty() {
                    break;
                }
                for ev in events {
                    // Temp files of atomic writes are not interesting; renames into place are.
                    let interesting = ev.name.as_ref().is_some_and(|n| {
                        matches!(n.to_str(), Some("result.json" | "worker.json" | "launch.json"))
                    });
                    if interesting {
                        if let Some(ix) = by_wd.get(&ev.wd) {
                            touched.extend(ix.iter().copied());
                        }
                    }
                }
            }
        }
        if sig_fired {
            if let Some(s) = &sfd {
                while let Ok(Some(_)) = s.read_signal() {
                    interrupts += 1;
                    for slot in slots.iter().filter(|s| s.done.is_none()) {
                        let grace = if interrupts > 1 { 0 } else { slot.spec.limits.grace_ms };
                        if interrupts == 1 {
                            eprintln!("subpane: cancelling {} (Ctrl-C again to kill at once)", slot.spec.run_id);
                        }
                        let _ = request_cancel(slot.paths, grace);
                    }
                }
            }
        }
        // Attempts past their starting grace are looked at again (they may be lost now), and
        // without a watch so is every attempt with no worker yet.
        for (i, s) in slots.iter().enumerate() {
            if s.done.is_none() && (s.starting_since.is_some() || (unwatched && s.pidfd.is_none())) {
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
