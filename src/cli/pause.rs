//! `subpane pause RUN…` and `subpane resume RUN…`: hold the latest attempts' agents stopped
//! (SIGSTOP to each process group) and continue them (SIGCONT), through `stop.json` and the
//! worker ([`crate::app::stop_attempt`]).
//!
//! ```text
//!  RUN… ─► each: a run here? (a host's: refused) ─► app::find_run ─► app::stop_attempt
//!            ─► Requested: one answer ─┐
//!            ─► AlreadyFinished / an error: said on stderr, its code ─► the worst code
//!  answers ─► text, or --json (one document for one run, an array for several)
//! ```
//!
//! The two verbs share one body and their flags; each has its own `Args` so that flags of
//! one only (a group's `--stop-running`) have their place.

use clap::Args;

use super::CliError;
use super::common::{print, print_json};
use crate::app::fanout::control::Change;
use crate::app::{self, StopOutcome};
use crate::envelope::StopRequested;
use crate::exit_code;

const PAUSE_AFTER: &str = "\
The agent's whole process group is stopped with SIGSTOP (its descendants that left the group \
with setsid run on). While it is stopped its --timeout, --idle-timeout and linger stand still: \
a run paused for an hour is not timed out when it is resumed. `cancel` still ends a stopped run \
as usual (it is continued after its SIGTERM). The envelope's stopped_ms says how long the agent \
was stopped in all (its duration_ms is the wall time and includes it), stops how many times.

Pausing a paused run, or resuming a running one, is no error and no change. A run whose \
program has not started yet (it waits to start) is stopped as soon as it starts.

With --group G, the group's driver starts no new task until `resume --group G` (and with \
--stop-running stops its running tasks as above); exit 2 for a group whose fan-out was not \
detached, or that has ended.

Exit code: 0 when every run was asked (the answer comes once its worker is signalled; the \
agent is stopped within milliseconds, and progress.json's stopped_since says since when); 2 \
when a RUN is unknown or has finished (the message names its status), or a run on a host is \
given with others (its host answers for it: give it alone); 1 when the request could not be \
delivered to a run's worker.";

const RESUME_AFTER: &str = "\
The agent's process group is continued with SIGCONT, and its --timeout, --idle-timeout and \
linger go on from where they stood when it was paused.

Resuming a running run is no error and no change.

Exit code: 0 when every run was asked; 2 when a RUN is unknown or has finished (the message \
names its status), or a run on a host is given with others; 1 when the request could not be \
delivered to a run's worker.";

// `subpane pause` (the about line is the verb's doc in `Command`).
#[derive(Debug, Args)]
#[command(after_help = PAUSE_AFTER)]
pub struct PauseArgs {
    /// The runs whose latest attempts to stop: run ids, unique starts of them, or `@` for the
    /// newest run
    #[arg(value_name = "RUN", add = super::docs::run_candidates(),
          required_unless_present = "group", conflicts_with = "group")]
    pub runs: Vec<String>,
    /// Pause a detached fan-out group instead (fanout --detach, the MCP fanout tool; its id
    /// or a unique start of it): its driver starts no new task, the running ones go on;
    /// `subpane resume --group G` carries on. Returns once the driver took it
    #[arg(long, value_name = "G", add = super::docs::group_candidates())]
    pub group: Option<String>,
    /// With --group: also stop the group's running tasks (here and on hosts), as `pause RUN`
    /// does, until `resume --group G`
    #[arg(long, requires = "group")]
    pub stop_running: bool,
    /// Print {"run_id", "attempt", "stopped": true} as JSON (an array of them for several
    /// runs); with --group {"group", "paused", "stop_running", "concurrency", "taken"}
    #[arg(long)]
    pub json: bool,
}

// `subpane resume`.
#[derive(Debug, Args)]
#[command(after_help = RESUME_AFTER)]
pub struct ResumeArgs {
    /// The runs whose latest attempts to continue: run ids, unique starts of them, or `@` for
    /// the newest run
    #[arg(value_name = "RUN", add = super::docs::run_candidates(),
          required_unless_present = "group", conflicts_with = "group")]
    pub runs: Vec<String>,
    /// Resume a paused detached fan-out group instead: its driver starts tasks again and
    /// continues those a --stop-running pause stopped. Returns once the driver took it
    #[arg(long, value_name = "G", add = super::docs::group_candidates())]
    pub group: Option<String>,
    /// Print {"run_id", "attempt", "stopped": false} as JSON (an array of them for several
    /// runs); with --group {"group", "paused", "stop_running", "concurrency", "taken"}
    #[arg(long)]
    pub json: bool,
}

pub fn pause(home: &crate::store::Home, a: PauseArgs) -> Result<i32, CliError> {
    if let Some(g) = &a.group {
        let g = app::resolve_group(home, g)?;
        let change = Change::Pause {
            stop_running: a.stop_running,
        };
        return super::group::change(home, &g, &[change], a.json);
    }
    hold(home, &a.runs, true, a.json)
}

pub fn resume(home: &crate::store::Home, a: ResumeArgs) -> Result<i32, CliError> {
    if let Some(g) = &a.group {
        let g = app::resolve_group(home, g)?;
        return super::group::change(home, &g, &[Change::Resume], a.json);
    }
    hold(home, &a.runs, false, a.json)
}

/// The verb's word for `stopped`.
fn verb(stopped: bool) -> &'static str {
    if stopped { "pause" } else { "resume" }
}

/// Asks every run of `names` for `stopped`. Every name is resolved first: an unknown one asks
/// nothing of any. A run on a host is asked there (given alone).
fn hold(
    home: &crate::store::Home,
    names: &[String],
    stopped: bool,
    json: bool,
) -> Result<i32, CliError> {
    let verb = verb(stopped);
    let mut found = Vec::with_capacity(names.len());
    for name in names {
        if let Some(r) = super::remote::of(home, name)? {
            // Its worker is there: the host's subpane asks it, and answers as it would here.
            if names.len() > 1 {
                return Err(app::Error::invalid(format!(
                    "run {} runs on host `{}`: give a run on a host to {verb} alone (its host answers for it)",
                    r.run_id, r.host.name
                ))
                .into());
            }
            let mut words = vec![verb, r.run_id.as_str()];
            if json {
                words.push("--json");
            }
            return super::remote::pass_through(home, &r, &words, false);
        }
        found.push(app::find_run(home, name, None)?);
    }
    let mut answers: Vec<StopRequested> = Vec::new();
    let mut code = exit_code::COMPLETED;
    for f in &found {
        match app::stop_attempt(f, stopped) {
            Ok(StopOutcome::Requested(r)) => answers.push(r),
            Ok(StopOutcome::AlreadyFinished(env)) => {
                // `resume` is not `retry --resume`, which people may mean.
                let instead = if stopped {
                    String::new()
                } else {
                    format!(
                        "; `subpane retry {} --resume` continues its agent's session in a new attempt",
                        env.run_id
                    )
                };
                eprintln!(
                    "subpane: error: run {} (attempt {}) has finished ({}): there is nothing to {verb}{instead}",
                    env.run_id,
                    env.attempt,
                    env.status.as_str()
                );
                code = code.max(exit_code::INVALID);
            }
            Err(e) => {
                let e = CliError::from(e);
                eprintln!("subpane: error: {e}");
                code = code.max(e.exit_code());
            }
        }
    }
    if json {
        if names.len() > 1 {
            print_json(&answers);
        } else if let Some(one) = answers.first() {
            print_json(one);
        }
    } else {
        for r in &answers {
            print(&said(r));
        }
    }
    Ok(code)
}

/// The answer for people: what was asked, and what undoes it.
fn said(r: &StopRequested) -> String {
    if r.stopped {
        format!(
            "run {} (attempt {}): stopped (SIGSTOP to its process group); `subpane resume {}` continues it\n",
            r.run_id, r.attempt, r.run_id
        )
    } else {
        format!(
            "run {} (attempt {}): continued (SIGCONT to its process group)\n",
            r.run_id, r.attempt
        )
    }
}
