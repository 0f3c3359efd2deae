//! Starting a sandboxed program: the egress proxy (for `allow:`), the command through the
//! sandbox helper, and the helper's report.
//!
//! ```text
//!  [allow:] proxy::start(proxy.sock, patterns, network.jsonl)       (threads of the worker)
//!  pipes (report, end) ─► spawn `subpane __sandbox --policy spec.json --report-fd W
//!                                 --end-fd E -- argv…`
//!  read the report until EOF (the helper's exec closes it):
//!     Enforced ─► facts.sandbox        Failed(Exec) ─► spawn error
//!     Failed(…) ─► facts.sandbox_error (the program never ran)
//!  after the helper is reaped: the end pipe ─► Ended{limit_hit} ─► facts.sandbox_limit_hit
//! ```
//!
//! Common pitfalls:
//! * The report's write end must reach the helper without CLOEXEC and must be closed in the
//!   worker right after the spawn, or the read never sees EOF.
//! * No fixed fd number: the standard library may use low fds for its own exec-error pipe.
//! * A helper that never reports is a sandbox failure, never a program run unsandboxed.

use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use super::run::Worker;
use crate::envelope::{CarryResult, GitCarry, RefusalReason, bounded_paths};
use crate::git::carry::{Carry, Outcome, Reason};
use crate::sandbox::{self, Report, SandboxFailure};
use crate::spec::Network;

/// How long the helper may take to set the sandbox up before it counts as failed.
const REPORT_WAIT: Duration = Duration::from_secs(10);

/// The envelope's account of a carry; the bundle named relative to the attempt dir `dir`.
fn git_carry(c: &Carry, dir: &std::path::Path) -> GitCarry {
    let (result, refusal) = match &c.outcome {
        Outcome::Unchanged => (CarryResult::Unchanged, None),
        Outcome::Carried => (CarryResult::Carried, None),
        Outcome::Refused(r) => (CarryResult::Refused, Some(r)),
    };
    GitCarry {
        branch: Some(c.branch.clone()),
        result,
        from: c.from.clone(),
        to: c.to.clone(),
        commits: Some(c.ahead),
        behind: Some(c.behind),
        reason: refusal.map(|r| match r.reason {
            Reason::NotFastForward => RefusalReason::NotFastForward,
            Reason::Submodule => RefusalReason::Submodule,
        }),
        why: c.why(),
        submodules: refusal
            .map(|r| bounded_paths(&r.submodules))
            .unwrap_or_default(),
        kept: refusal
            .and_then(|r| r.kept.as_deref())
            .and_then(|k| k.strip_prefix(dir).ok())
            .map(|k| k.display().to_string()),
    }
}

/// The pane's line about what came back, when something did or was refused.
fn pane_line(g: &GitCarry) -> Option<String> {
    let branch = g.branch.as_deref().unwrap_or("HEAD");
    match g.result {
        CarryResult::Carried => Some(format!(
            "subpane: branch {branch} moved from {:.12} to {:.12}",
            g.from.as_deref().unwrap_or("nothing"),
            g.to.as_deref().unwrap_or("")
        )),
        // The why names paths of the program's commits: shown as text, never obeyed.
        CarryResult::Refused => Some(format!(
            "subpane: branch {branch} not carried back: {}",
            crate::term::sanitize(g.why.as_deref().unwrap_or("refused").as_bytes(), 600)
        )),
        CarryResult::Unchanged | CarryResult::Failed => None,
    }
}

/// The read end of the helper's report pipe.
pub(crate) struct ReportPipe(OwnedFd);

impl Worker {
    /// Starts the egress proxy when the policy has an allow list. An error means the
    /// program must not start.
    pub(crate) fn start_proxy(&mut self) -> Result<(), String> {
        let Network::Allow(patterns) = &self.spec.sandbox.network else {
            return Ok(());
        };
        let handle = sandbox::proxy::start(
            &self.paths.proxy_socket(),
            patterns.clone(),
            &self.paths.network_log(),
            self.masker.clone(),
        )
        .map_err(|e| {
            SandboxFailure::Network {
                why: format!("the egress proxy could not start: {e}"),
            }
            .to_string()
        })?;
        self.proxy = Some(handle);
        Ok(())
    }

    /// Reads the helper's last word, once it has exited: the limit the sandbox found
    /// reached (`facts.sandbox_limit_hit`). Never waits: the helper is gone, so the pipe is
    /// at end-of-file.
    pub(crate) fn read_sandbox_end(&mut self) {
        let Some(fd) = self.end_reader.take() else {
            return;
        };
        let f = std::fs::File::from(fd);
        if nix::fcntl::fcntl(
            &f,
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
        )
        .is_err()
        {
            return;
        }
        let mut buf = Vec::new();
        let _ = (&f).take(64 * 1024).read_to_end(&mut buf);
        let ended = buf
            .split(|b| *b == b'\n')
            .filter_map(|l| serde_json::from_slice::<Report>(l).ok())
            .find_map(|r| match r {
                Report::Ended(e) => Some(e),
                _ => None,
            });
        if let Some(e) = ended {
            self.facts.sandbox_limit_hit = e.limit_hit;
        }
    }

    /// Makes the directories the program's private view of the repository's git directory
    /// writes to (see [`crate::spec::GitRepo`]).
    pub(crate) fn prepare_git_view(&self) -> Result<(), String> {
        let Some(repo) = &self.spec.sandbox.git else {
            return Ok(());
        };
        for d in [&repo.upper, &repo.work] {
            std::fs::create_dir_all(d).map_err(|e| {
                SandboxFailure::Mount {
                    path: d.display().to_string(),
                    why: format!("cannot make the git directory's private view: {e}"),
                }
                .to_string()
            })?;
        }
        Ok(())
    }

    /// Carries the program's branch back from its view of the git directory (its commits,
    /// nothing else, and only a fast-forward) and records what came back in `facts.git`.
    /// What went wrong goes to `output.errors`: the program's result stands.
    pub(crate) fn carry_git(&mut self, output: &mut crate::envelope::Output) {
        let Some(repo) = self.spec.sandbox.git.clone() else {
            return;
        };
        if self.facts.sandbox.is_none() {
            return; // The program never ran in the view.
        }
        let keep_at = self.paths.git_refused();
        let info = match crate::git::carry::carry_branch(&repo, self.paths.dir(), &keep_at) {
            Ok(Some(c)) => {
                let info = git_carry(&c, self.paths.dir());
                if let Outcome::Refused(r) = &c.outcome
                    && let Some(e) = &r.keep_error
                {
                    output.push_error(format!("git: the refused commits could not be kept: {e}"));
                }
                if let Some(line) = pane_line(&info) {
                    self.pane.line(super::pane::Style::Dim, &line);
                }
                info
            }
            Ok(None) => GitCarry {
                why: Some("HEAD was detached: no branch comes back, only the work tree".into()),
                ..GitCarry::default()
            },
            Err(e) => {
                let info = GitCarry {
                    branch: repo.branch.clone(),
                    result: CarryResult::Failed,
                    why: Some(e.to_string()),
                    ..GitCarry::default()
                };
                output.push_error(format!(
                    "git: the program's commits on {} could not be carried back: {e}",
                    repo.branch.as_deref().unwrap_or("its branch")
                ));
                info
            }
        };
        self.facts.git = Some(info);
    }

    /// Removes the program's view of the git directory (what it changed there is carried
    /// back or meant to stay behind).
    pub(crate) fn drop_git_view(&self) {
        if let Some(repo) = &self.spec.sandbox.git
            && let Some(dir) = repo.upper.parent()
        {
            let _ = std::fs::remove_dir_all(dir);
        }
    }

    /// The command that runs `argv` through the sandbox helper, and the pipe it reports on.
    pub(crate) fn sandbox_command(
        &mut self,
        argv: &[String],
    ) -> Result<(Command, ReportPipe), String> {
        let exe = std::env::current_exe()
            .map_err(|e| format!("cannot find the subpane binary for the sandbox: {e}"))?;
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .map_err(|e| format!("cannot create the sandbox's report pipe: {e}"))?;
        let (end_r, end_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .map_err(|e| format!("cannot create the sandbox's end pipe: {e}"))?;
        let mut cmd = Command::new(exe);
        cmd.arg(crate::procs::SANDBOX_ARG)
            .arg("--policy")
            .arg(self.paths.spec())
            .arg("--report-fd")
            .arg(w.as_raw_fd().to_string())
            .arg("--end-fd")
            .arg(end_w.as_raw_fd().to_string());
        if matches!(self.spec.sandbox.network, Network::Allow(_)) {
            cmd.arg("--proxy-socket").arg(self.paths.proxy_socket());
        }
        cmd.arg("--").args(argv);
        let (raw, raw_end) = (w.as_raw_fd(), end_w.as_raw_fd());
        // SAFETY: fcntl on fds we own, in the child between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                for fd in [raw, raw_end] {
                    if libc::fcntl(fd, libc::F_SETFD, 0) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            })
        };
        // The write ends stay open until the spawn is done; the reader drops them.
        self.report_writer = Some(w);
        self.end_writer = Some(end_w);
        self.end_reader = Some(end_r);
        Ok((cmd, ReportPipe(r)))
    }

    /// Reads the helper's report until its exec closes the pipe, and records it.
    pub(crate) fn read_sandbox_report(&mut self, pipe: ReportPipe) {
        // Only the helper may hold the write ends now, or EOF never comes.
        self.report_writer = None;
        self.end_writer = None;
        let mut f = std::fs::File::from(pipe.0);
        let mut buf = Vec::new();
        let end = Instant::now() + REPORT_WAIT;
        let mut chunk = [0u8; 4096];
        let outcome = loop {
            let left = end.saturating_duration_since(Instant::now());
            let timeout = PollTimeout::try_from(left.as_millis().min(i32::MAX as u128) as i32)
                .unwrap_or(PollTimeout::MAX);
            let mut fds = [PollFd::new(f.as_fd(), PollFlags::POLLIN)];
            match poll(&mut fds, timeout) {
                Ok(0) => break Err("the sandbox helper did not report within 10s".to_owned()),
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(e) => break Err(format!("cannot read the sandbox's report: {e}")),
            }
            match f.read(&mut chunk) {
                Ok(0) => break Ok(()),
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => break Err(format!("cannot read the sandbox's report: {e}")),
            }
            if buf.len() > 64 * 1024 {
                break Err("the sandbox's report is too long".to_owned());
            }
        };
        let last = buf
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .filter_map(|l| serde_json::from_slice::<Report>(l).ok())
            .next_back();
        match (outcome, last) {
            (_, Some(Report::Failed(SandboxFailure::Exec { program, why }))) => {
                self.facts.spawn_error = Some(format!("cannot start {program}: {why}"));
            }
            (_, Some(Report::Failed(f))) => self.facts.sandbox_error = Some(f.to_string()),
            (Ok(()), Some(Report::Enforced(e))) => self.facts.sandbox = Some(e),
            (Err(why), _) => {
                // Stuck or broken: it must not go on to run the program.
                if let Some(pid) = self.agent {
                    crate::procs::signal_group(pid, nix::sys::signal::Signal::SIGKILL);
                }
                self.facts.sandbox_error = Some(why);
            }
            (Ok(()), None | Some(Report::Ended(_))) => {
                self.facts.sandbox_error =
                    Some("the sandbox helper ended without saying what it enforced".to_owned())
            }
        }
    }
}
