//! `subpane wait RUN…`: wait for runs to finish, event-driven.

use clap::Args;

use super::CliError;
use super::common::{print, print_json};
use super::output::{human_envelope, human_running, worst_code};
use crate::app::{self, AttemptStatus, WaitMode};
use crate::exit_code;
use crate::spec::parse_positive_duration;

#[derive(Debug, Args)]
#[command(after_help = "\
Exit code: with one run, its code (0 completed, 1 failed, 124 timed out, 130 cancelled);
with --all, the worst of them (1 > 124 > 130 > 0); with --any, the code of the run that
finished first. 3 when --timeout passed first (the runs go on).

Each RUN's latest attempt is waited for; --attempt N waits for attempt N of every RUN given
(a RUN without attempt N is refused, exit 2).
--group G waits for every run of a fan-out group (with RUN arguments too, if given); with
--json it always prints an array, however many runs the group has.")]
pub struct WaitArgs {
    /// Run ids
    #[arg(required_unless_present = "group", value_name = "RUN")]
    pub runs: Vec<String>,
    /// Also every run of this fan-out group (its id is printed by `fanout`)
    #[arg(long, value_name = "G")]
    pub group: Option<String>,
    /// Return as soon as one run finishes (printing that one)
    #[arg(long, conflicts_with = "all")]
    pub any: bool,
    /// Wait for every run (the default)
    #[arg(long)]
    pub all: bool,
    /// Stop waiting after this long; the runs go on (exit 3)
    #[arg(long, value_name = "DUR")]
    pub timeout: Option<String>,
    /// Print JSON: the envelope of one run, or an array for several (always an array with
    /// --group)
    #[arg(long)]
    pub json: bool,
    /// Wait for attempt N of each run instead of its latest
    #[arg(long, value_name = "N")]
    pub attempt: Option<u32>,
}

pub fn wait(home: &crate::store::Home, a: WaitArgs) -> Result<i32, CliError> {
    let timeout = a
        .timeout
        .as_deref()
        .map(|t| parse_positive_duration("--timeout", t))
        .transpose()
        .map_err(|e| CliError::invalid(e.to_string()))?;
    let targets = app::wait_targets(home, &a.runs, a.group.as_deref(), a.attempt)?;
    let names: Vec<String> = targets.iter().map(|(_, s)| s.run_id.to_string()).collect();
    let mode = if a.any { WaitMode::Any } else { WaitMode::All };
    use std::io::IsTerminal;
    if std::io::stderr().is_terminal() {
        let shown: Vec<&str> = names.iter().map(String::as_str).take(5).collect();
        let more = if names.len() > 5 {
            format!(" and {} more", names.len() - 5)
        } else {
            String::new()
        };
        eprintln!(
            "subpane: waiting for {}{more} (Ctrl-C stops waiting; the runs go on)",
            shown.join(", ")
        );
    }
    let out = app::wait(&targets, mode, timeout)?;
    // --any prints the finished run; otherwise every run, in the order given.
    let mut docs: Vec<AttemptStatus> = Vec::new();
    let mut human = String::new();
    let mut codes = Vec::new();
    let pick_first = mode == WaitMode::Any && !out.timed_out;
    for ((paths, spec), res) in targets.iter().zip(out.results.iter()) {
        let status = match res {
            Some(env) => AttemptStatus::Finished(env.clone()),
            None if pick_first => continue,
            None => app::attempt_status(paths, spec)?,
        };
        match &status {
            AttemptStatus::Finished(env) => {
                human.push_str(&human_envelope(env, paths.dir()));
                codes.push(env.exit_code());
            }
            AttemptStatus::Live(doc) => {
                human.push_str(&human_running(doc));
                codes.push(exit_code::STILL_RUNNING);
            }
        }
        docs.push(status);
        human.push('\n');
        if pick_first {
            break;
        }
    }
    if a.json {
        if docs.len() == 1 && a.group.is_none() {
            print_json(&docs[0]);
        } else {
            print_json(&docs);
        }
    } else {
        print(human.trim_end_matches('\n'));
        print("\n");
    }
    if out.timed_out {
        return Ok(exit_code::STILL_RUNNING);
    }
    Ok(worst_code(codes))
}
