//! The request socket of a sandboxed attempt: where its program's `subpane run` asks for a
//! nested run. The worker makes it and, when the first client connects, hands it to the
//! server process; it never serves it.
//!
//! ```text
//!  bind nest.sock (before the sandbox helper: the policy carries it in read-only)
//!  the worker's poll loop watches it; a first client connects (it waits in the backlog)
//!    ─► spawn `subpane __nest --listen-fd N ATTEMPT_DIR`   (own session, clean signals,
//!       │                                                    SIGTERM when the worker dies)
//!       └ close the worker's copy of the socket: only the server accepts
//!  the attempt stops (Term) ─► SIGTERM to every descendant, the server among them
//!  before any SIGKILL to descendants (Kill, KillLeftovers, the end): SIGTERM, and wait for
//!    it on a pidfd (it cancels the runs its clients still wait for) ─► kill what is left
//! ```
//!
//! Why a process and not a thread of the worker: the worker reaps with `waitpid(-1)` (it is
//! a subreaper), which would take the exit status of every tmux client a serving thread
//! starts; the server plans and starts runs, which is the application layer's work
//! (`app::nest`), above the worker's layer; and a fault in serving cannot end the attempt.
//! Why only on the first client: most programs never start a nested run, and a process
//! started for each attempt would cost every sandboxed start an exec.
//!
//! Common pitfalls:
//! * The socket must exist before the helper runs: a read-only path that does not exist
//!   fails the sandbox closed. A bind that fails is a sandbox failure, never a program run
//!   without it.
//! * Once the server has it, the worker keeps no copy of the listening socket: with one, a
//!   connect after the server ended would wait in the backlog forever instead of being
//!   refused. Before that the worker holds it (close-on-exec, so no helper inherits it) and
//!   closes it at the end.
//! * The server's pid is forgotten when it is reaped (`note_reaped`), so a later signal
//!   cannot reach a process that reused it.

use std::os::fd::AsRawFd;
use std::os::unix::net::UnixListener;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::sys::wait::waitpid;
use nix::unistd::Pid;

use super::run::Worker;
use crate::procs;
use crate::sandbox::relay::SocketPath;

/// How long the server may take to end once asked (it cancels the runs still waited for).
const STOP_WAIT: Duration = Duration::from_secs(5);

impl Worker {
    /// Makes the request socket and starts its server. An error means the program must not
    /// start (its policy names the socket).
    pub(crate) fn start_nest(&mut self) -> Result<(), String> {
        let path = self.paths.nest_socket();
        let why = |e: std::io::Error| {
            format!(
                "cannot make the request socket of nested runs {}: {e}",
                path.display()
            )
        };
        let at = SocketPath::new(&path).map_err(why)?;
        // The attempt directory is new and the program has not run yet: anything under the
        // name makes the bind fail, and nothing is followed.
        self.nest_listener = Some(UnixListener::bind(at.usable()).map_err(why)?);
        Ok(())
    }

    /// A first client waits on the request socket: starts its server, which takes the
    /// socket. A server that cannot start is said in the pane; its clients are refused.
    pub(crate) fn serve_nest(&mut self) {
        let Some(listener) = self.nest_listener.take() else {
            return;
        };
        if let Err(e) = self.spawn_nest_server(&listener) {
            self.pane
                .line(super::pane::Style::Red, &format!("subpane: {e}"));
        }
    }

    fn spawn_nest_server(&mut self, listener: &UnixListener) -> Result<(), String> {
        let exe = std::env::current_exe()
            .map_err(|e| format!("cannot find the subpane binary for nested runs: {e}"))?;
        let fd = listener.as_raw_fd();
        let mut cmd = Command::new(exe);
        cmd.arg(procs::NEST_ARG)
            .arg("--listen-fd")
            .arg(fd.to_string())
            .arg(self.paths.dir())
            // The marker of the attempt's processes: whoever finds the worker dead ends the
            // server with the rest.
            .env("SUBPANE_ATTEMPT_DIR", self.paths.dir())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                procs::reset_signals_in_child()?;
                // Keys typed in the pane reach the worker's group, never the server.
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // A worker killed outright must not leave the server serving.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM, 0, 0, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::fcntl(fd, libc::F_SETFD, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            })
        };
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot start the server of nested runs: {e}"))?;
        self.nest = Some(child.id() as i32);
        Ok(())
    }

    /// Asks the server to end and waits for it, up to [`STOP_WAIT`]; then kills it.
    pub(crate) fn stop_nest(&mut self) {
        let Some(pid) = self.nest.take() else { return };
        // Not reaped yet (that forgets the pid), so the pidfd is the server's, zombie or not.
        let fd = procs::pidfd_open(pid).ok();
        procs::signal_pid(pid, Signal::SIGTERM);
        let ended = fd
            .as_ref()
            .is_some_and(|fd| procs::wait_pidfd_until(fd, Instant::now() + STOP_WAIT));
        if !ended {
            procs::signal_pid(pid, Signal::SIGKILL);
        }
        let _ = waitpid(Pid::from_raw(pid), None);
    }
}
