//! A typed client for subpane's private tmux server.
//!
//! argv builders are pure; [`Tmux::run`] runs the tmux binary and keeps its stderr for
//! errors. tmux is asked only to create, kill, attach or check on demand, never on a timer.
//! `new-session`, on the way from `run` to every program's start, is asked of the running
//! server without a client process (`direct.rs`), through the binary when that cannot be.
//!
//! ```text
//!  Tmux::run(args) ─► tmux -L/-S SOCKET -f CONFIG args…   (stdin /dev/null, no TMUX)
//!                       │ crate::command: a deadline (set_time_limit, SUBPANE_TMUX_TIMEOUT)
//!                       ├─ exit 0 ─────────► stdout
//!                       ├─ exit ≠ 0 ───────► TmuxError::Failed { verb, stderr }
//!                       └─ past the limit ─► killed ─► TmuxError::TimedOut (names the command,
//!                                                      the limit and the server's socket)
//!  new-session ─► direct: the server's socket, tmux's protocol, the same deadline
//!                   ├─ ran ──────────────► as the binary's exit 0 / exit ≠ 0 above
//!                   ├─ lost after sending ► TmuxError::Failed "lost server" (retried)
//!                   ├─ no answer in time ─► TmuxError::NoAnswer (nothing to kill)
//!                   └─ no server, another protocol (nothing ran) ─► the binary, as above
//! ```
//!
//! What reaches tmux. tmux expands formats (`#{…}`, `#[…]`, and `#(…)`, a shell command the
//! server runs as the user, outside every sandbox) in several arguments: only `/`, names
//! derived from run ids (`[A-Za-z0-9._-]`, no `#`) and subpane's own constants ever reach
//! it. A run's directory, labels, tasks, `--env` values and everything a program chose never
//! do: the pane starts in [`PANE_DIR`] and the worker enters the attempt's directory itself.
//!
//! ```text
//!  argument                          expanded by tmux   what subpane gives
//!  -L NAME / -S PATH, -f CONFIG      no                 the socket (env, spec.json); tmux.conf
//!  client cwd (process / identify)   no                 PANE_DIR
//!  client environment                no                 ours, less withheld(); no pane reads it
//!  new-session -s NAME               yes                session_name(run id, attempt)
//!  new-session -c DIR                yes                PANE_DIR, always
//!  new-session -x 200 -y 50 -d -P    no                 constants
//!  new-session -F / display -p FMT   yes                constants: pane_id, pane_pid, session_name
//!  new-session -- COMMAND…           no (≥ 2 words:     the subpane binary, `__worker`, the
//!                                    exec'd, no shell)  attempt dir (home/runs/ID/attempts/N)
//!  -e, -n, titles                    yes                never given (no -e, no -n; titles off)
//!  -t =NAME, -t =NAME:               no                 session_name(…), from the run id
//!  set-option -w remain-on-exit on   no                 constants
//!  list-sessions -F FMT              yes                the constant #{session_name}
//!  start-server ; run-shell …        yes                KILL_IF_IDLE (idle.rs), a constant
//!  the config (tmux.conf)            yes, in its hooks  idle::config: constants and the idle delay
//! ```
//!
//! Common pitfalls:
//! * A hung server (one stopped with SIGSTOP, say) would hang every client, and with it
//!   `run`, `fanout`, `attach`, `gc` and the MCP server: every command but `attach-session`
//!   (interactive, exec'd) runs under a deadline, [`DEFAULT_TIME_LIMIT`] unless
//!   `SUBPANE_TMUX_TIMEOUT` says otherwise. Only the client is killed: the server left its group and holds every other
//!   attempt's pane.
//! * A batched `new-session` of many panes is one client doing many commands: its limit grows
//!   with the batch ([`batch_limit`]), so a healthy server is never cut off mid-batch.
//! * tmux exits when its last session closes (ours only after `SUBPANE_TMUX_IDLE` with no
//!   session, see `idle.rs`); a `new-session` racing that exit fails with "server exited
//!   unexpectedly" (or "lost server"). Nothing was created then, so the start is retried
//!   (see [`Tmux::new_session`]).
//! * The server's environment is the first client's, not ours: the worker gets the agent's
//!   environment from a file, never from the pane.
//! * `TMUX` in our own environment would make tmux think it is nested: it is removed.

mod batch;
mod direct;
mod idle;

pub use batch::{BatchResult, SessionReq, batchable, chunks};
pub use idle::{
    DEFAULT_IDLE, DETACH_HINT, DETACH_KEY, config, current_config, idle_from_env, set_idle,
};

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::command;

/// Which server: `-L NAME` (in tmux's own socket directory) or `-S PATH`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Socket {
    Name(String),
    Path(PathBuf),
}

impl Socket {
    /// `SUBPANE_TMUX_SOCKET` if set (a path when it holds a `/`, else a name), else `subpane`.
    pub fn from_env() -> Self {
        match std::env::var_os("SUBPANE_TMUX_SOCKET").filter(|v| !v.is_empty()) {
            Some(v) if v.to_string_lossy().contains('/') => {
                // Recorded in spec.json and used from other directories: make it absolute.
                let p = PathBuf::from(v);
                let p = if p.is_absolute() {
                    p
                } else {
                    std::env::current_dir().map(|d| d.join(&p)).unwrap_or(p)
                };
                Socket::Path(p)
            }
            Some(v) => Socket::Name(v.to_string_lossy().into_owned()),
            None => Socket::Name("subpane".into()),
        }
    }

    /// The socket file's path (as tmux computes it for `-L`).
    pub fn path(&self) -> PathBuf {
        match self {
            Socket::Path(p) => p.clone(),
            Socket::Name(n) => {
                let base = std::env::var_os("TMUX_TMPDIR")
                    .filter(|v| !v.is_empty())
                    .map(PathBuf::from)
                    .unwrap_or_else(|| PathBuf::from("/tmp"));
                base.join(format!("tmux-{}", nix::unistd::getuid())).join(n)
            }
        }
    }

    /// Re-creates a socket from a recorded path (always usable with `-S`).
    pub fn from_path(p: &Path) -> Self {
        Socket::Path(p.to_path_buf())
    }

    fn args(&self) -> [OsString; 2] {
        match self {
            Socket::Name(n) => ["-L".into(), n.into()],
            Socket::Path(p) => ["-S".into(), p.into()],
        }
    }
}

/// What tmux said when it failed.
#[derive(Debug, thiserror::Error)]
pub enum TmuxError {
    #[error("cannot run tmux: {0}; install tmux (3.2 or newer) and make sure it is on PATH")]
    Spawn(std::io::Error),
    #[error("tmux {verb} failed: {stderr}")]
    Failed { verb: String, stderr: String },
    #[error("{source}: {}", hung(.socket))]
    TimedOut {
        source: command::TimedOut,
        socket: PathBuf,
    },
    /// A command asked without a client process ([`direct`]) whose answer did not come.
    #[error(
        "`tmux {verb}` did not finish within {}: {}",
        humantime::format_duration(*.limit), hung(.socket)
    )]
    NoAnswer {
        verb: String,
        limit: Duration,
        socket: PathBuf,
    },
}

/// What to do about a server that does not answer.
fn hung(socket: &Path) -> String {
    let s = socket.display();
    format!(
        "the tmux server (socket {s}) may be hung; set SUBPANE_TMUX_TIMEOUT to give it longer, or stop it with `tmux -S {s} kill-server` (its attempts end as lost)"
    )
}

/// How long one tmux command may take by default: far beyond what a healthy server needs
/// (milliseconds), so only a hung one is given up on.
pub const DEFAULT_TIME_LIMIT: Duration = Duration::from_secs(30);

/// What a batched `new-session` may take per pane at least: a healthy server forks a pane in
/// about a millisecond.
pub const PER_SESSION: Duration = Duration::from_millis(100);

static TIME_LIMIT: command::Limit = command::Limit::new(DEFAULT_TIME_LIMIT);

/// Sets how long each tmux command of this process may take before its client is killed.
pub fn set_time_limit(limit: Duration) {
    TIME_LIMIT.set(limit);
}

/// `SUBPANE_TMUX_TIMEOUT` (a duration: `30s`, `2m`), or [`DEFAULT_TIME_LIMIT`] when it is
/// unset or empty.
pub fn time_limit_from_env() -> Result<Duration, crate::spec::DurationError> {
    match std::env::var_os("SUBPANE_TMUX_TIMEOUT").filter(|v| !v.is_empty()) {
        Some(v) => {
            crate::spec::parse_positive_duration("SUBPANE_TMUX_TIMEOUT", &v.to_string_lossy())
        }
        None => Ok(DEFAULT_TIME_LIMIT),
    }
}

/// The limit of one client that creates `sessions` panes: the limit, or [`PER_SESSION`] for
/// each pane when that is longer.
pub fn batch_limit(limit: Duration, sessions: usize) -> Duration {
    let per_pane = PER_SESSION.saturating_mul(u32::try_from(sessions).unwrap_or(u32::MAX));
    limit.max(per_pane)
}

/// The pane tmux created.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pane {
    pub pane_id: String,
    pub pane_pid: i32,
}

/// A client for one server.
#[derive(Clone, Debug)]
pub struct Tmux {
    pub socket: Socket,
    pub config: PathBuf,
}

/// A session name tmux accepts for this run and attempt: tmux turns `.` and `:` into `_`, so
/// when the id holds a `.` a short hash keeps names unique.
pub fn session_name(run_id: &str, attempt: u32) -> String {
    if run_id.contains('.') {
        let h = run_id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        format!("{}-{attempt}-{:08x}", run_id.replace('.', "_"), h as u32)
    } else {
        format!("{run_id}-{attempt}")
    }
}

/// Exact-match target for a session (`=name`), so `a` never matches `ab`.
pub fn target(session: &str) -> String {
    format!("={session}")
}

/// The directory every pane starts in. tmux expands `-c` as a format (`#(…)` runs a shell
/// command in the server): no directory a user or a program chose is ever given to it. The
/// worker enters the attempt's directory itself.
pub const PANE_DIR: &str = "/";

/// argv (after `tmux -L/-S … -f …`) of a detached session running `command` directly (no
/// shell: tmux execs several arguments as they are), in [`PANE_DIR`].
pub fn new_session_args(session: &str, command: &[OsString], keep: bool) -> Vec<OsString> {
    let mut a: Vec<OsString> = vec![
        "new-session".into(),
        "-d".into(),
        "-s".into(),
        session.into(),
        "-c".into(),
        PANE_DIR.into(),
        "-x".into(),
        "200".into(),
        "-y".into(),
        "50".into(),
        "-P".into(),
        "-F".into(),
        "#{pane_id} #{pane_pid}".into(),
        "--".into(),
    ];
    a.extend(command.iter().cloned());
    if keep {
        // Same command sequence: applied before the server can notice the pane's exit.
        let window = format!("{}:", target(session));
        a.extend(
            [
                ";",
                "set-option",
                "-w",
                "-t",
                &window,
                "remain-on-exit",
                "on",
            ]
            .map(OsString::from),
        );
    }
    a
}

/// The messages of a `new-session` that reached a server as it exited. Other connection
/// errors (a socket path that cannot exist, a permission) are final and not retried.
fn is_server_race(stderr: &str) -> bool {
    ["server exited unexpectedly", "lost server"]
        .iter()
        .any(|p| stderr.contains(p))
}

/// The variables of ours a tmux client does not get: tmux's own (it would think itself
/// nested), and an attempt's identity (a server started from inside an attempt would hand it
/// to every pane it makes later).
fn withheld() -> impl Iterator<Item = &'static str> {
    ["TMUX", "TMUX_PANE"]
        .into_iter()
        .chain(crate::spec::ATTEMPT_VARS.iter().copied())
}

impl Tmux {
    pub fn new(socket: Socket, config: PathBuf) -> Self {
        Self { socket, config }
    }

    fn command(&self) -> Command {
        let mut c = Command::new("tmux");
        // The tmux server may be forked from this client: it must not inherit our blocked
        // signals. SAFETY: only async-signal-safe calls.
        unsafe { c.pre_exec(crate::procs::reset_signals_in_child) };
        c.args(self.socket.args());
        c.arg("-f").arg(&self.config);
        // The client's directory is the server's default for new panes: ours, not the user's.
        c.current_dir(PANE_DIR);
        for v in withheld() {
            c.env_remove(v);
        }
        c.stdin(Stdio::null());
        c
    }

    /// Runs one tmux command and returns its stdout.
    pub fn run(&self, args: &[OsString]) -> Result<String, TmuxError> {
        let verb = args
            .first()
            .map(|a| a.to_string_lossy().into_owned())
            .unwrap_or_default();
        let out = self.output(&verb, args, TIME_LIMIT.get())?;
        answer(&verb, out)
    }

    /// Runs a tmux command that needs a running server, without a client process when the
    /// server speaks [`direct`]'s protocol (the `tmux` binary otherwise, or when no server
    /// took the connection: it starts one for a `new-session`). Like [`Tmux::output`].
    fn output_on_server(
        &self,
        verb: &str,
        args: &[OsString],
        limit: Duration,
    ) -> Result<std::process::Output, TmuxError> {
        use std::os::unix::process::ExitStatusExt;
        let env: Vec<(OsString, OsString)> = std::env::vars_os()
            .filter(|(k, _)| !withheld().any(|w| k == w))
            .collect();
        let deadline = std::time::Instant::now().checked_add(limit);
        match direct::run(&self.socket.path(), args, &env, deadline) {
            Ok(direct::Answer::Ran {
                status,
                stdout,
                stderr,
            }) => Ok(std::process::Output {
                // A wait status: the exit code in its second byte.
                status: std::process::ExitStatus::from_raw((status & 0xff) << 8),
                stdout,
                stderr,
            }),
            Ok(direct::Answer::Unsupported) | Err(direct::Error::Connect(_)) => {
                self.output(verb, args, limit)
            }
            Err(e @ direct::Error::Lost) => Err(TmuxError::Failed {
                verb: verb.to_owned(),
                stderr: e.to_string(),
            }),
            Err(direct::Error::TimedOut) => Err(TmuxError::NoAnswer {
                verb: verb.to_owned(),
                limit,
                socket: self.socket.path(),
            }),
        }
    }

    /// Runs a tmux client (`verb` names it in errors) with `args`, under `limit`.
    fn output(
        &self,
        verb: &str,
        args: &[OsString],
        limit: Duration,
    ) -> Result<std::process::Output, TmuxError> {
        let mut c = self.command();
        c.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
        command::output(&mut c, &format!("tmux {verb}"), limit).map_err(|e| match e {
            command::Error::Io(e) => TmuxError::Spawn(e),
            command::Error::TimedOut(source) => TmuxError::TimedOut {
                source,
                socket: self.socket.path(),
            },
        })
    }

    /// Creates a detached session running `command`. A start that races the server's exit is
    /// retried: in that race the server never ran the command, so nothing is duplicated.
    pub fn new_session(
        &self,
        session: &str,
        command: &[OsString],
        keep: bool,
    ) -> Result<Pane, TmuxError> {
        let args = new_session_args(session, command, keep);
        let mut tries = 0u32;
        loop {
            self.ensure_server()?;
            let out = self.output_on_server("new-session", &args, TIME_LIMIT.get());
            match out.and_then(|o| answer("new-session", o)) {
                Ok(out) => {
                    return parse_pane(&out).ok_or_else(|| TmuxError::Failed {
                        verb: "new-session".into(),
                        stderr: format!("unexpected output {out:?}"),
                    });
                }
                Err(TmuxError::Failed { stderr, .. }) if is_server_race(&stderr) && tries < 20 => {
                    tries += 1;
                    // If the session exists after all, the command did run: use it.
                    if let Ok(p) = self.pane_of(session) {
                        return Ok(p);
                    }
                    std::thread::sleep(Duration::from_millis(5 * u64::from(tries)));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The first pane of a session.
    pub fn pane_of(&self, session: &str) -> Result<Pane, TmuxError> {
        let out = self.run(&[
            "display-message".into(),
            "-p".into(),
            "-t".into(),
            // `=NAME` alone names a session, and display-message then has no pane to format
            // (it prints blanks): `=NAME:` is the session's current pane.
            format!("{}:", target(session)).into(),
            "#{pane_id} #{pane_pid}".into(),
        ])?;
        parse_pane(&out).ok_or_else(|| TmuxError::Failed {
            verb: "display-message".into(),
            stderr: format!("unexpected output {out:?}"),
        })
    }

    /// Whether the session exists (no server: it does not). Only a tmux that cannot be run
    /// or does not answer is an error.
    pub fn has_session(&self, session: &str) -> Result<bool, TmuxError> {
        match self.run(&["has-session".into(), "-t".into(), target(session).into()]) {
            Ok(_) => Ok(true),
            Err(TmuxError::Failed { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Names of the server's sessions; `Ok(None)` when no server is there, an error when
    /// one did not answer in time (or tmux cannot run).
    pub fn sessions(&self) -> Result<Option<Vec<String>>, TmuxError> {
        match self.run(&[
            "list-sessions".into(),
            "-F".into(),
            "#{session_name}".into(),
        ]) {
            Ok(out) => Ok(Some(out.lines().map(str::to_owned).collect())),
            Err(TmuxError::Failed { stderr, .. }) if stderr.contains("no sessions") => {
                Ok(Some(Vec::new()))
            }
            Err(TmuxError::Failed { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Stops the server.
    pub fn kill_server(&self) -> Result<(), TmuxError> {
        self.run(&["kill-server".into()]).map(|_| ())
    }

    pub fn kill_session(&self, session: &str) -> Result<(), TmuxError> {
        self.run(&["kill-session".into(), "-t".into(), target(session).into()])
            .map(|_| ())
    }

    /// The command that attaches the terminal to a session (to be exec'd).
    /// The client that attaches to `session`; `note`, when given, is shown on its status
    /// line for a few seconds once attached (a constant of subpane's: tmux expands it).
    pub fn attach_command(&self, session: &str, read_only: bool, note: Option<&str>) -> Command {
        let mut c = Command::new("tmux");
        // The caller may block signals (`top` takes them on a signalfd): the client must
        // get them. SAFETY: only async-signal-safe calls.
        unsafe { c.pre_exec(crate::procs::reset_signals_in_child) };
        c.args(self.socket.args());
        c.arg("-f").arg(&self.config);
        c.env_remove("TMUX").env_remove("TMUX_PANE");
        c.arg("attach-session");
        if read_only {
            c.arg("-r");
        }
        c.arg("-t").arg(target(session));
        if let Some(n) = note {
            c.args([";", "display-message", "-d", "6000", n]);
        }
        c
    }
}

/// What a client printed when it succeeded, else its error.
fn answer(verb: &str, out: std::process::Output) -> Result<String, TmuxError> {
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(failed(verb.to_owned(), &out))
    }
}

/// The error of a client that exited non-zero: what it said, or its exit status.
fn failed(verb: String, out: &std::process::Output) -> TmuxError {
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
    let stderr = if stderr.is_empty() {
        format!("exit status {}", out.status)
    } else {
        stderr
    };
    TmuxError::Failed { verb, stderr }
}

fn parse_pane(out: &str) -> Option<Pane> {
    let mut it = out.split_whitespace();
    let pane_id = it.next()?.to_owned();
    let pane_pid = it.next()?.parse().ok()?;
    Some(Pane { pane_id, pane_pid })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_names_are_unique_and_tmux_safe() {
        assert_eq!(session_name("build-42", 1), "build-42-1");
        let a = session_name("a.b", 1);
        let b = session_name("a_b", 1);
        assert_ne!(a, b);
        assert!(!a.contains('.') && !a.contains(':'));
    }

    #[test]
    fn new_session_runs_argv_without_shell() {
        let args = new_session_args(
            "s-1",
            &["/bin/subpane".into(), "__worker".into(), "/h/a".into()],
            true,
        );
        let s: Vec<String> = args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let dd = s.iter().position(|a| a == "--").unwrap();
        assert_eq!(&s[dd + 1..dd + 4], ["/bin/subpane", "__worker", "/h/a"]);
        // The start directory is ours: tmux expands it as a format.
        let c = s.iter().position(|a| a == "-c").unwrap();
        assert_eq!(s[c + 1], "/");
        assert!(s.contains(&"remain-on-exit".to_string()));
        assert!(s.contains(&"=s-1:".to_string()));
    }

    #[test]
    fn a_batch_may_take_longer_than_one_command_but_never_less() {
        let limit = Duration::from_secs(30);
        assert_eq!(batch_limit(limit, 1), limit);
        assert_eq!(batch_limit(limit, 100), limit);
        assert_eq!(
            batch_limit(Duration::from_secs(1), 100),
            Duration::from_secs(10)
        );
        assert_eq!(
            batch_limit(Duration::from_secs(1), 0),
            Duration::from_secs(1)
        );
    }

    #[test]
    fn a_timeout_names_the_command_the_limit_and_the_server() {
        let e = TmuxError::TimedOut {
            source: command::TimedOut {
                command: "tmux new-session".into(),
                limit: Duration::from_secs(30),
            },
            socket: "/run/s.sock".into(),
        };
        let m = e.to_string();
        assert!(
            m.starts_with("`tmux new-session` did not finish within 30s and was killed"),
            "{m}"
        );
        assert!(m.contains("SUBPANE_TMUX_TIMEOUT"), "{m}");
        assert!(m.contains("tmux -S /run/s.sock kill-server"), "{m}");
        // Asked without a client process, nothing was killed: the rest is the same.
        let e = TmuxError::NoAnswer {
            verb: "new-session".into(),
            limit: Duration::from_secs(30),
            socket: "/run/s.sock".into(),
        };
        let n = e.to_string();
        assert!(
            n.starts_with("`tmux new-session` did not finish within 30s: the tmux server"),
            "{n}"
        );
        assert_eq!(n.split_once(": ").unwrap().1, m.split_once(": ").unwrap().1);
    }

    #[test]
    fn pane_output_parses() {
        assert_eq!(
            parse_pane("%3 4242\n"),
            Some(Pane {
                pane_id: "%3".into(),
                pane_pid: 4242
            })
        );
        assert_eq!(parse_pane("junk"), None);
    }
}
