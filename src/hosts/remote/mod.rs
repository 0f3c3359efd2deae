//! Runs on a host: reserved here, started, supervised and recorded there by the host's own
//! subpane, watched from here over the host's control connection.
//!
//! ```text
//!  run --host H ─► runs/ID/host.json here (mkdir: the id is new here)            start.rs
//!               ─► ssh H BIN __run-request, stdin {"version", "request", "wait"}
//!                    ├─ the host plans and starts it (its cwd, sandbox, worktree)
//!                    │   ─► the start's answer, one line [─► with wait: the envelope]
//!                    ├─ refused, or ssh never connected ─► runs/ID removed: nothing half-made
//!                    └─ lost after the request left ─► asked once: a run it has is kept
//!  fanout ─► ssh H BIN __check-requests, each host's lines planned there first    check.rs
//!  status|wait|cancel ─► ssh H BIN VERB ID --json (wait: through lost connections)  ask.rs
//!                    ─► an envelope ─► from_remote (schema, run, attempt) + host
//!                    ─► runs/ID/attempts/N/result.json here                      record.rs
//!  ls ─► one `ls --json` per host, the hosts at once                              rows.rs
//!  logs|attach|retry ─► ssh [-t] H BIN VERB ID … (the host's answer, as it is)
//! ```
//!
//! The host owns the attempt: a dropped connection stops only the watcher (`wait`
//! reconnects), never the run. Durations and outcomes come from the host's records alone, so
//! the clocks of the two machines never meet.
//!
//! Common pitfalls:
//! * ssh exits 255 for its own failures: any other code is the remote subpane's.
//! * The remote envelope is data from another machine: it is trusted only when it validates
//!   ([`crate::envelope::from_remote`]); otherwise the local record says it was not, and
//!   keeps the bytes beside it.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::ssh::{self, CONNECT_TIMEOUT};
use super::{Host, HostsError};
use crate::app::RunRequest;
use crate::envelope::{self, Envelope, FailureKind, HostRef, Status};
use crate::spec::RunId;
use crate::store::{self, Home, StoreError};

mod ask;
mod check;
mod record;
mod rows;
mod start;

pub use ask::{Answer, AskError, StatusAnswer, ask, cancel, read_out, retry, status, wait, watch};
pub use check::check;
pub use record::{local_end, record, recorded};
pub use rows::{pending_row, recorded_row, rows, rows_of};
pub use start::{OnStarted, StartAnswer, has_started, inline_files, start};

/// The schema tag of `runs/ID/host.json`.
pub const REMOTE_SCHEMA: &str = "subpane.remote-run/v1";

/// The file that makes a run directory here a run on a host.
pub const MARKER: &str = store::REMOTE_MARKER;

/// `runs/ID/host.json`: where a run lives, as it was when it started (a host removed or
/// changed later does not lose its runs).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct RemoteRun {
    pub schema: String,
    pub run_id: String,
    pub host: Host,
    /// The remote subpane that started it, and answers for it.
    pub bin: String,
    pub created_at: String,
    /// What was asked for: the agent (`command` for a program) and the program's argv (the
    /// agent's own is made there), for what is shown while the host cannot be asked.
    pub agent: crate::spec::AgentKind,
    pub argv: Vec<String>,
    /// The fan-out group it belongs to (also recorded there), for `ls`/`wait --group` here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// On a Slurm host: the batch job of its latest attempt, once `sbatch` took it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// On a Slurm host: the attempt `job_id` runs (1 until a retry).
    #[serde(default = "first", skip_serializing_if = "is_first")]
    pub attempt: u32,
}

fn first() -> u32 {
    1
}

fn is_first(n: &u32) -> bool {
    *n == 1
}

impl RemoteRun {
    /// The envelope's `host` for this run.
    pub fn host_ref(&self) -> HostRef {
        HostRef {
            name: self.host.name.clone(),
            kind: match self.host.url {
                super::HostUrl::Ssh(_) => "ssh",
                super::HostUrl::Slurm(_) => "slurm",
            }
            .into(),
            job_id: self.job_id.clone(),
            state: None,
        }
    }

    /// On a Slurm host.
    pub fn is_slurm(&self) -> bool {
        matches!(self.host.url, super::HostUrl::Slurm(_))
    }
}

/// What the remote `__run-request` reads on its stdin.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteRequest {
    /// The caller's subpane version: the host refuses a request from another version.
    pub version: String,
    pub request: RunRequest,
    /// Wait for the run's end and answer with its envelope too (after the start's line).
    #[serde(default)]
    pub wait: bool,
    /// The fan-out group the run is in, set on its records there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
}

/// What the remote `__check-requests` reads on its stdin: a fan-out's lines for the host,
/// planned there (its paths, its runs, its sandbox) and started by nobody.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteCheck {
    pub version: String,
    pub group: String,
    /// Each request with its line of the fan-out file.
    pub requests: Vec<(usize, RunRequest)>,
}

/// The remote `__check-requests`'s answer: one `line N: …` for each line it refuses.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct CheckAnswer {
    pub errors: Vec<String>,
}

/// The run `id` here is on a host: its record, or `None` for a run of this machine.
pub fn find(home: &Home, id: &RunId) -> Result<Option<RemoteRun>, HostsError> {
    let path = home.run_dir(id).join(MARKER);
    let Some(run) = store::read_json::<RemoteRun>(&path)? else {
        return Ok(None);
    };
    if run.schema != REMOTE_SCHEMA {
        return Err(HostsError::Schema {
            path,
            found: run.schema,
        });
    }
    Ok(Some(run))
}

/// The run a person or a model named (an id, a unique start of one, `@`), when it lives on
/// a host; `None` for a run of this machine, and for a name that fits no run or several (the
/// verb's own lookup says so in its words).
pub fn find_named(home: &Home, name: &str) -> Result<Option<RemoteRun>, HostsError> {
    let Some(id) = crate::app::names::resolve_run(home, name)
        .ok()
        .and_then(|id| RunId::parse(&id).ok())
    else {
        return Ok(None);
    };
    find(home, &id)
}

/// Every run here that lives on a host (unreadable markers are skipped).
pub fn list(home: &Home) -> Vec<RemoteRun> {
    let Ok(rd) = std::fs::read_dir(home.runs_dir()) else {
        return Vec::new();
    };
    let mut runs: Vec<RemoteRun> = rd
        .filter_map(Result::ok)
        .filter_map(|e| RunId::parse(e.file_name().to_str()?).ok())
        .filter_map(|id| find(home, &id).ok().flatten())
        .collect();
    runs.sort_by(|a, b| b.created_at.cmp(&a.created_at));
    runs
}

/// The ssh command that runs `words` (the remote subpane's arguments after its home) for
/// `run`; `tty`: with `-t`, for a terminal (`attach`).
pub fn command(home: &Home, run: &RemoteRun, words: &[&str], tty: bool) -> Command {
    if run.is_slurm() {
        return super::slurm::run::command(run, words, tty);
    }
    command_on(home, &run.host, &run.bin, words, tty)
}

fn command_on(home: &Home, host: &Host, bin: &str, words: &[&str], tty: bool) -> Command {
    // Where the control socket goes; if it cannot be made, ssh says so.
    let _ = ssh::make_private_dir(&ssh::control_dir(home));
    // A terminal's locale goes with it (sshd passes LANG only where it is configured to), so
    // the host's tmux draws the pane's header and borders as this terminal can show them.
    let locale = tty
        .then(|| {
            ["LC_ALL", "LC_CTYPE", "LANG"].iter().find_map(|k| {
                let v = std::env::var(k).ok().filter(|v| !v.is_empty())?;
                Some(format!("{k}={v}"))
            })
        })
        .flatten();
    let mut all = match &locale {
        Some(l) => vec!["env", l.as_str()],
        None => Vec::new(),
    };
    all.extend(ssh::remote_subpane(host, bin));
    all.extend_from_slice(words);
    let mut cmd = Command::new("ssh");
    // SAFETY: the hook makes only async-signal-safe calls (sigprocmask, signal, prctl).
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            crate::procs::reset_signals_in_child()?;
            // ssh ends with the thread that waits for it: a wait that returns (or a caller
            // killed) leaves no ssh behind watching a run nobody waits for.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    };
    if tty {
        cmd.arg("-t");
    }
    cmd.args(ssh::ssh_args(home, host, CONNECT_TIMEOUT))
        .arg("--")
        .arg(ssh::remote_command(&all));
    cmd
}

fn is_envelope(bytes: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(bytes)
        .is_ok_and(|v| v["schema"] == envelope::RESULT_SCHEMA)
}

/// The remote subpane's refusal (exit `code`), in its own words.
fn refusal(name: &str, code: i32, out: &std::process::Output) -> HostsError {
    refused(name, code, &ssh::said(out))
}

/// [`refusal`] of what was said on stderr.
fn refused(name: &str, code: i32, said: &str) -> HostsError {
    HostsError::Refused {
        name: name.to_owned(),
        code,
        why: said
            .strip_prefix("subpane: error: ")
            .unwrap_or(said)
            .to_owned(),
    }
}
