//! `subpane logs RUN`: print an attempt's output; `-f` follows until the attempt ends.
//!
//! Following is event-driven: inotify on the file (appends) and on the attempt directory
//! (`result.json` appearing), plus a pidfd on the worker in case it dies without one.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsFd;
use std::path::Path;

use clap::Args;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};

use super::common::{CliError, find_run};
use crate::procs;
use crate::spec::AgentKind;
use crate::supervisor::{AttemptState, STARTING_GRACE, observe, worker_identity};

#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("which").args(["events", "stderr", "output", "stdout"]))]
pub struct LogsArgs {
    /// The run id
    pub run: String,
    /// events.jsonl: the filtered agent events (default for agents)
    #[arg(long)]
    pub events: bool,
    /// stderr.log: the program's stderr
    #[arg(long)]
    pub stderr: bool,
    /// output.txt: the agent's final text
    #[arg(long)]
    pub output: bool,
    /// stdout.log: stdout lines that were not JSON events (default for commands)
    #[arg(long)]
    pub stdout: bool,
    /// Follow: keep printing as the file grows, until the attempt ends
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// Read this attempt instead of the latest
    #[arg(long, value_name = "N")]
    pub attempt: Option<u32>,
}

fn copy_from(path: &Path, offset: &mut u64, out: &mut impl Write) -> std::io::Result<()> {
    let Ok(mut f) = File::open(path) else {
        return Ok(());
    };
    f.seek(SeekFrom::Start(*offset))?;
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        out.write_all(&buf[..n])?;
        *offset += n as u64;
    }
    out.flush()
}

pub fn logs(home: &crate::store::Home, a: LogsArgs) -> Result<i32, CliError> {
    let f = find_run(home, &a.run, a.attempt)?;
    let path = if a.events {
        f.paths.events()
    } else if a.stderr {
        f.paths.stderr_log()
    } else if a.output {
        f.paths.output()
    } else if a.stdout || f.spec.agent == AgentKind::Command {
        f.paths.stdout_log()
    } else {
        f.paths.events()
    };
    let mut out = std::io::stdout().lock();
    let mut offset = 0u64;
    let broken = |e: std::io::Error| {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            None
        } else {
            Some(CliError::failed(format!(
                "cannot print {}: {e}",
                path.display()
            )))
        }
    };
    if !a.follow {
        if !path.exists()
            && !matches!(
                observe(&f.paths, &f.spec)?,
                AttemptState::Running(_) | AttemptState::Starting { .. }
            )
        {
            eprintln!(
                "subpane: {} does not exist for this attempt",
                path.file_name()
                    .and_then(|n| n.to_str())
                    .unwrap_or("the file")
            );
        }
        if let Err(e) = copy_from(&path, &mut offset, &mut out) {
            if let Some(err) = broken(e) {
                return Err(err);
            }
        }
        return Ok(0);
    }
    let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
        .map_err(|e| CliError::failed(format!("cannot watch {}: {e}", f.paths.dir().display())))?;
    inotify
        .add_watch(
            f.paths.dir(),
            AddWatchFlags::IN_MODIFY | AddWatchFlags::IN_MOVED_TO | AddWatchFlags::IN_CREATE,
        )
        .map_err(|e| CliError::failed(format!("cannot watch {}: {e}", f.paths.dir().display())))?;
    let mut pidfd = None;
    loop {
        // Look before copying: if the attempt is over, this copy is the last one.
        let state = observe(&f.paths, &f.spec)?;
        let over = matches!(state, AttemptState::Finished(_));
        if let Err(e) = copy_from(&path, &mut offset, &mut out) {
            return match broken(e) {
                Some(err) => Err(err),
                None => Ok(0),
            };
        }
        if over {
            crate::supervisor::release_inotify(inotify);
            return Ok(0);
        }
        if pidfd.is_none() {
            if let (Some(w), _, _) = worker_identity(&f.paths) {
                pidfd = procs::pidfd_for(&w);
            }
        }
        let mut fds = vec![PollFd::new(inotify.as_fd(), PollFlags::POLLIN)];
        if let Some(p) = &pidfd {
            fds.push(PollFd::new(p.as_fd(), PollFlags::POLLIN));
        }
        // Renames (worker.json, result.json) and appends wake us. The only timeout: an attempt
        // with no worker yet is looked at again when its starting grace ends (it may be lost).
        let timeout = match (&pidfd, &state) {
            (Some(_), _) => PollTimeout::NONE,
            (None, AttemptState::Starting { since }) => {
                let left = STARTING_GRACE.saturating_sub(since.elapsed().unwrap_or_default());
                PollTimeout::try_from((left.as_millis() + 10).min(i32::MAX as u128) as i32)
                    .unwrap_or(PollTimeout::MAX)
            }
            // The worker died between the look and the pidfd: look again at once.
            (None, _) => PollTimeout::ZERO,
        };
        match poll(&mut fds, timeout) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(CliError::failed(format!("poll failed: {e}"))),
        }
        while let Ok(ev) = inotify.read_events() {
            if ev.is_empty() {
                break;
            }
        }
    }
}
