//! The external commands subpane runs for itself (tmux, git): each one ends by its deadline,
//! or is killed with what it started and named in a [`TimedOut`] error.
//!
//! ```text
//!  Command ─► spawn, leading a process group of its own
//!          ─► poll(pidfd, stdout, stderr) with what is left of the limit as the timeout
//!               ├─ exited, pipes closed ─────────────────────────► Output { status, stdout, stderr }
//!               ├─ exited, a pipe still held by something it started ─ LEAK_GRACE ─► the same
//!               └─ the limit passed ─► SIGTERM to the group ─► up to KILL_GRACE for the leader
//!                                   ─► SIGKILL to the group ─► reap ─► TimedOut { command, limit }
//! ```
//!
//! Nothing wakes on a timer: one `poll(2)` sleeps until the command exits or writes, or its
//! deadline comes. A command that ends in time costs a pidfd over what `Command::output`
//! costs, and no thread or process.
//!
//! Common pitfalls:
//! * Killing the command alone would leave what it started (a clean filter or hook of git's)
//!   running on: the command leads its own process group and the whole group is signalled.
//!   A process that left the group with `setsid` is not: for tmux that is the server, which
//!   holds every other attempt's pane and must not go with one slow client.
//! * The group is signalled before its leader is reaped: an unreaped leader keeps the group
//!   id from naming anything else.
//! * SIGTERM first: git removes its lock files (`index.lock`) on SIGTERM, never on SIGKILL.
//! * The pipes closing is not the command's end, nor the reverse: a process it started may
//!   hold a pipe long after it exited. After the exit the pipes get [`LEAK_GRACE`]; what was
//!   read by then is the output.
//! * Without a pidfd (no descriptor left) the pipes closing marks the end, within the same
//!   deadline, and the kill has no grace.

use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::Signal;

use crate::procs;

/// How long a command past its limit has to end after SIGTERM before its group gets SIGKILL.
pub const KILL_GRACE: Duration = Duration::from_secs(1);

/// How long the pipes may stay open after the command exited (held by something it started)
/// before they are closed on our side.
pub const LEAK_GRACE: Duration = Duration::from_millis(100);

/// A command that passed its time limit and was killed, with its process group.
#[derive(Debug, thiserror::Error)]
#[error(
    "`{command}` did not finish within {} and was killed with what it started",
    humantime::format_duration(*.limit)
)]
pub struct TimedOut {
    /// What ran, as people write it: `git worktree add …`, `tmux new-session`.
    pub command: String,
    pub limit: Duration,
}

/// Why a command gave no output.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// It could not be started (or, after starting, watched or waited for).
    #[error("cannot run it: {0}")]
    Io(#[source] std::io::Error),
    #[error(transparent)]
    TimedOut(#[from] TimedOut),
}

/// The time limit of one kind of command (every git command, every tmux command) in this
/// process: a default, which a front end or the worker may change once at start (from an
/// environment variable or the attempt's spec).
pub struct Limit(AtomicU64);

impl Limit {
    pub const fn new(default: Duration) -> Self {
        Self(AtomicU64::new(default.as_millis() as u64))
    }

    pub fn set(&self, limit: Duration) {
        self.0.store(crate::spec::millis(limit), Ordering::Relaxed);
    }

    pub fn get(&self) -> Duration {
        Duration::from_millis(self.0.load(Ordering::Relaxed))
    }
}

/// Runs `cmd` to its end and returns its status and what it wrote to the pipes the caller
/// asked for (`Stdio::piped()`; other outputs go where they were sent), or kills it with its
/// process group once `limit` has passed. `name` names it in the error.
pub fn output(cmd: &mut Command, name: &str, limit: Duration) -> Result<Output, Error> {
    let deadline = Instant::now().checked_add(limit);
    cmd.process_group(0);
    let mut child = cmd.spawn().map_err(Error::Io)?;
    let pid = child.id() as i32;
    let pidfd = procs::pidfd_open(pid).ok();
    let mut pipes = [
        child.stdout.take().map(|p| File::from(OwnedFd::from(p))),
        child.stderr.take().map(|p| File::from(OwnedFd::from(p))),
    ];
    let mut got = [Vec::new(), Vec::new()];
    let end = watch(pidfd.as_ref(), &mut pipes, &mut got, deadline);
    drop(pipes);
    if !matches!(end, End::Ended) {
        stop(pid, pidfd.as_ref());
    }
    let status = child.wait().map_err(Error::Io)?;
    match end {
        End::Ended => {
            let [stdout, stderr] = got;
            Ok(Output {
                status,
                stdout,
                stderr,
            })
        }
        End::Overran => Err(TimedOut {
            command: name.to_owned(),
            limit,
        }
        .into()),
        End::Failed(e) => Err(Error::Io(e)),
    }
}

/// How [`watch`] ended.
enum End {
    /// The command exited (and its pipes closed, or [`LEAK_GRACE`] passed).
    Ended,
    /// The deadline came first.
    Overran,
    /// It could not be watched (poll failed).
    Failed(std::io::Error),
}

/// Reads the pipes until the command has exited and they are closed (or [`LEAK_GRACE`] after
/// its exit), or until the deadline.
fn watch(
    pidfd: Option<&OwnedFd>,
    pipes: &mut [Option<File>; 2],
    got: &mut [Vec<u8>; 2],
    deadline: Option<Instant>,
) -> End {
    // Which source a poll entry is: the pidfd, or pipe 0 / 1.
    const EXIT: usize = 2;
    let mut exited_at: Option<Instant> = None;
    let mut buf = [0u8; 16 * 1024];
    loop {
        let watch_exit = pidfd.filter(|_| exited_at.is_none());
        if watch_exit.is_none() && pipes.iter().all(Option::is_none) {
            return End::Ended;
        }
        let until = match exited_at {
            Some(t) => Some(deadline.map_or(t + LEAK_GRACE, |d| d.min(t + LEAK_GRACE))),
            None => deadline,
        };
        let now = Instant::now();
        if until.is_some_and(|u| now >= u) {
            return if exited_at.is_some() {
                End::Ended
            } else {
                End::Overran
            };
        }
        let mut fds = Vec::with_capacity(3);
        let mut sources = Vec::with_capacity(3);
        if let Some(fd) = watch_exit {
            fds.push(PollFd::new(fd.as_fd(), PollFlags::POLLIN));
            sources.push(EXIT);
        }
        for (i, p) in pipes.iter().enumerate() {
            if let Some(p) = p {
                fds.push(PollFd::new(p.as_fd(), PollFlags::POLLIN));
                sources.push(i);
            }
        }
        match poll(&mut fds, poll_timeout(now, until)) {
            Ok(0) | Err(Errno::EINTR) => continue,
            Ok(_) => {}
            Err(e) => return End::Failed(e.into()),
        }
        let ready: Vec<usize> = fds
            .iter()
            .zip(sources)
            .filter(|(f, _)| f.revents().is_some_and(|r| !r.is_empty()))
            .map(|(_, s)| s)
            .collect();
        drop(fds);
        for s in ready {
            if s == EXIT {
                exited_at = Some(Instant::now());
                continue;
            }
            let Some(p) = pipes[s].as_mut() else { continue };
            match p.read(&mut buf) {
                Ok(0) => pipes[s] = None,
                Ok(n) => got[s].extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => pipes[s] = None,
            }
        }
    }
}

/// The termination ladder for a command past its limit: SIGTERM to its group, up to
/// [`KILL_GRACE`] for the leader to end, then SIGKILL to the group for whatever is left (what
/// ignored SIGTERM, or was still on its way out). The leader is not reaped yet, so `pid` still
/// names its group.
fn stop(pid: i32, pidfd: Option<&OwnedFd>) {
    procs::signal_group(pid, Signal::SIGTERM);
    if let Some(fd) = pidfd {
        procs::wait_pidfd_until(fd, Instant::now() + KILL_GRACE);
    }
    procs::signal_group(pid, Signal::SIGKILL);
}

/// A poll timeout from `now` to `until` (none: wait without one), rounded up so the wake-up
/// is not a hair early.
fn poll_timeout(now: Instant, until: Option<Instant>) -> PollTimeout {
    let Some(until) = until else {
        return PollTimeout::NONE;
    };
    let ms = until
        .saturating_duration_since(now)
        .as_micros()
        .div_ceil(1000);
    PollTimeout::try_from(ms.min(i32::MAX as u128) as i32).unwrap_or(PollTimeout::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Stdio;

    fn sh(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg(script)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    /// Waits (on a pidfd, up to 10 s) until `pid` has exited; whether it did.
    fn gone(pid: i32) -> bool {
        let Ok(fd) = procs::pidfd_open(pid) else {
            return true; // already reaped
        };
        let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
        matches!(poll(&mut fds, PollTimeout::from(10_000u16)), Ok(1))
    }

    /// Runs `script` under a limit it does not reach.
    fn ends(script: &str) -> Output {
        output(&mut sh(script), "sh", Duration::from_secs(30)).unwrap()
    }

    /// What a script past its limit left: the error, how long it all took, and what it wrote
    /// to the file `$NOTE`.
    struct Overran {
        err: Error,
        took: Duration,
        note: String,
    }

    /// Runs `script` (named `name`) under `limit`, which it passes.
    fn overruns(script: &str, name: &str, limit: Duration) -> Overran {
        let dir = tempfile::Builder::new()
            .prefix("sp-command-")
            .tempdir()
            .unwrap();
        let note = dir.path().join("note");
        let t0 = Instant::now();
        let err = output(sh(script).env("NOTE", &note), name, limit).unwrap_err();
        let took = t0.elapsed();
        let note = std::fs::read_to_string(&note).unwrap_or_default();
        Overran { err, took, note }
    }

    #[test]
    fn a_command_that_ends_gives_its_status_and_both_outputs() {
        let out = ends("echo out; echo err >&2; exit 3");
        assert_eq!(out.status.code(), Some(3));
        assert_eq!(out.stdout, b"out\n");
        assert_eq!(out.stderr, b"err\n");
    }

    #[test]
    fn output_larger_than_a_pipe_is_read_whole() {
        let out = ends("head -c 1000000 /dev/zero; head -c 300000 /dev/zero >&2");
        assert!(out.status.success());
        assert_eq!((out.stdout.len(), out.stderr.len()), (1_000_000, 300_000));
    }

    #[test]
    fn a_command_past_its_limit_is_killed_with_the_child_it_started() {
        // Both ignore SIGTERM (an ignored signal survives fork and exec): only SIGKILL ends them.
        let script = "trap '' TERM; sleep 600 & echo $! > \"$NOTE\"; wait";
        let limit = Duration::from_millis(300);
        let Overran { err, took, note } = overruns(script, "sh waits", limit);
        let Error::TimedOut(t) = &err else {
            panic!("{err}")
        };
        assert_eq!((t.command.as_str(), t.limit), ("sh waits", limit));
        assert_eq!(
            err.to_string(),
            "`sh waits` did not finish within 300ms and was killed with what it started"
        );
        assert!(took >= limit, "{took:?}");
        let most = limit + KILL_GRACE + Duration::from_secs(5);
        assert!(took < most, "{took:?}");
        let child: i32 = note.trim().parse().unwrap();
        let dead = gone(child);
        if !dead {
            procs::signal_pid(child, Signal::SIGKILL);
        }
        assert!(dead, "the child {child} it started is still alive");
    }

    #[test]
    fn a_command_past_its_limit_gets_sigterm_first() {
        let script = "trap 'echo TERM > \"$NOTE\"; exit 1' TERM; sleep 600 & wait";
        let limit = Duration::from_millis(200);
        let Overran { err, took, note } = overruns(script, "sh", limit);
        assert!(matches!(err, Error::TimedOut(_)), "{err}");
        // It ended at the SIGTERM: no need to wait for the SIGKILL.
        assert!(took < limit + KILL_GRACE, "{took:?}");
        assert_eq!(note, "TERM\n");
    }

    #[test]
    fn a_command_that_cannot_start_is_an_io_error() {
        let mut c = Command::new("/nonexistent/subpane-test-program");
        let err = output(&mut c, "nothing", Duration::from_secs(1)).unwrap_err();
        assert!(
            matches!(&err, Error::Io(e) if e.kind() == std::io::ErrorKind::NotFound),
            "{err}"
        );
    }

    #[test]
    fn a_pipe_held_by_a_leftover_does_not_hold_the_answer() {
        // The leftover keeps stdout open long after `sh` exited.
        let t0 = Instant::now();
        let out = ends("sleep 600 & echo $!");
        assert!(out.status.success());
        assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
        let leftover: i32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        procs::signal_pid(leftover, Signal::SIGKILL);
        assert!(gone(leftover));
    }

    #[test]
    fn limits_keep_what_was_set() {
        let l = Limit::new(Duration::from_secs(120));
        assert_eq!(l.get(), Duration::from_secs(120));
        l.set(Duration::from_millis(1500));
        assert_eq!(l.get(), Duration::from_millis(1500));
    }
}
