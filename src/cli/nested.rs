//! `subpane run` inside a sandbox: the same flags, answered by the attempt's worker
//! ([`app::nest`]) instead of planned here, and printed as `run` prints.
//!
//! ```text
//!  flags ─► RunRequest ─► NestRequest::from_caller ─► Client ─► Started (warnings, note)
//!     Ctrl-C ─► interrupt line (cancel, then kill)       ─► Detached: the run id / answer
//!                                                        ─► Finished: envelope / summary
//!                                                        ─► Refused: exit 2 or 1 and why
//! ```
//!
//! Every other verb is refused inside a sandbox (the home is hidden there): runs started
//! from it are watched from outside.

use std::path::Path;

use super::CliError;
use super::common::{print, print_json};
use super::interrupt;
use super::output::human_summary;
use super::run::RunArgs;
use crate::app::nest::{Client, NestRequest, Reply};
use crate::exit_code;

/// Why a verb other than `run` is refused inside a sandbox.
pub(super) fn not_served() -> CliError {
    CliError::Flag(
        "only `subpane run` works inside a sandbox: the subpane home is hidden here, so runs started from a sandbox are watched from outside it (`subpane ls`, `status`, `wait`, `logs`, `cancel` there)".into(),
    )
}

/// `run` with the request socket `socket`. `home_given`: `--home` was on the command line.
pub(super) fn run(a: RunArgs, socket: &Path, home_given: bool) -> Result<i32, CliError> {
    if home_given {
        return Err(CliError::Flag(
            "--home cannot be given to a run from inside a sandbox: it runs in its parent's home, started by the parent's worker".into(),
        ));
    }
    let (detach, json) = (a.detach, a.json);
    let req = NestRequest::from_caller(a.to_request()?, detach)?;
    let mut client = Client::connect(socket)?;
    if !detach {
        // Before the request: a Ctrl-C while it is planned must queue, then cancel.
        interrupt::block();
        let stop = client.interrupts()?;
        interrupt::on_interrupt(move |n| {
            if n == 1 {
                eprintln!("subpane: cancelling the run — Ctrl-C again to kill");
            }
            stop.interrupt();
        });
    }
    client.send(&req)?;
    let mut started = None;
    loop {
        match client.answer()? {
            Reply::Started {
                answer,
                warnings,
                spawn_error,
            } => {
                for w in &warnings {
                    eprintln!("subpane: warning: {w}");
                }
                if let Some(e) = spawn_error {
                    eprintln!("subpane: error: {e}");
                } else {
                    use std::io::IsTerminal;
                    if !detach && !json && std::io::stderr().is_terminal() {
                        eprintln!(
                            "subpane: run {} started; watch it from outside the sandbox with `subpane attach {}`",
                            answer.run_id, answer.run_id
                        );
                    }
                }
                started = Some(answer);
            }
            Reply::Detached => {
                let answer = started.ok_or_else(|| CliError::Refused {
                    exit_code: exit_code::FAILED,
                    message: "the worker answered out of order: no run was started".into(),
                })?;
                if json {
                    print_json(&answer);
                } else {
                    print(&format!("{}\n", answer.run_id));
                }
                return Ok(exit_code::COMPLETED);
            }
            Reply::Finished {
                envelope,
                stdout_end,
                stderr_end,
            } => {
                if json {
                    print_json(&envelope);
                } else {
                    let dir = started.as_ref().map(|s| s.attempt_dir.clone());
                    print(&human_summary(
                        &envelope,
                        &dir.unwrap_or_default(),
                        crate::app::Ends {
                            stdout: stdout_end,
                            stderr: stderr_end,
                        },
                    ));
                }
                return Ok(envelope.exit_code());
            }
            Reply::Refused { exit_code, message } => {
                return Err(CliError::Refused { exit_code, message });
            }
        }
    }
}
