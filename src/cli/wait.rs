//! `subpane wait RUN…`: wait for runs to finish, event-driven.

use clap::Args;

use super::CliError;
use super::common::{print, print_json};
use super::live_line::{self, LiveLines};
use super::output::{human_envelope, human_running, worst_code};
use crate::app::{self, AttemptStatus, RunAnswer, WaitMode};
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
    /// Run ids (or unique starts of them, or `@` for the newest run)
    #[arg(required_unless_present = "group", value_name = "RUN", add = super::docs::run_candidates())]
    pub runs: Vec<String>,
    /// Also every run of this fan-out group (its id, printed by `fanout`, or a unique start
    /// of it)
    #[arg(long, value_name = "G", add = super::docs::group_candidates())]
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
        .transpose()?;
    let group = a.group.as_deref().map(|g| app::resolve_group(home, g));
    let a = WaitArgs {
        group: group.transpose()?,
        ..a
    };
    let targets = app::wait_targets(home, &a.runs, a.group.as_deref(), a.attempt)?;
    let mode = if a.any { WaitMode::Any } else { WaitMode::All };
    use std::io::IsTerminal;
    if std::io::stderr().is_terminal() {
        eprintln!(
            "subpane: {} (Ctrl-C stops waiting; the runs go on)",
            app::waiting_for(&targets)
        );
    }
    // On a terminal, a live line per attempt until the summary (see live_line.rs).
    let mut lines = LiveLines::for_stdout(
        a.json,
        targets
            .iter()
            .map(|(paths, spec)| (spec.run_id.to_string(), paths.clone()))
            .collect(),
    );
    let mut wl = app::WaitLoop::new()?;
    wl.report_records(lines.is_some());
    if let Some(l) = lines.as_mut() {
        l.draw();
    }
    let live = lines.is_some();
    let mut on_progress = |p: &app::WaitProgress<'_>| {
        if let Some(l) = lines.as_mut() {
            l.seen(p);
        }
    };
    let opts = app::WaitOptions {
        heartbeat: live.then_some(live_line::TICK),
        on_progress: if live { Some(&mut on_progress) } else { None },
        on_interrupt: None,
    };
    let out = app::wait_with(&mut wl, &targets, mode, timeout, opts);
    if let Some(l) = lines.as_mut() {
        l.clear();
    }
    let mut out = out?;
    let mut targets = targets;
    app::regroup(home, a.group.as_deref(), &mut targets, &mut out)?;
    let answers = app::wait_answers(targets, out)?;
    // --any prints the run that finished; otherwise every run, in the order given.
    let shown: Vec<&RunAnswer> = match answers.first_finished {
        Some(i) if mode == WaitMode::Any && !answers.timed_out => vec![&answers.runs[i]],
        _ => answers.runs.iter().collect(),
    };
    let mut human = String::new();
    let mut codes = Vec::new();
    for r in &shown {
        match &r.status {
            AttemptStatus::Finished(env) => {
                human.push_str(&human_envelope(env, &r.paths));
                codes.push(env.exit_code());
            }
            AttemptStatus::Live(doc) => {
                human.push_str(&human_running(doc, app::progress(&r.paths).as_ref()));
                codes.push(exit_code::STILL_RUNNING);
            }
        }
        human.push('\n');
    }
    if a.json {
        if shown.len() == 1 && a.group.is_none() {
            print_json(&shown[0].status);
        } else {
            print_json(&shown.iter().map(|r| &r.status).collect::<Vec<_>>());
        }
    } else {
        print(human.trim_end_matches('\n'));
        print("\n");
    }
    // A group whose driver ended before it started every task: those are named, never lost.
    if let Some(report) = a
        .group
        .as_deref()
        .map(|g| crate::app::fanout::group_report(home, g))
        .transpose()?
        .flatten()
    {
        let never: Vec<String> = report
            .tasks
            .iter()
            .filter(|t| t.run_id.is_none() && t.status == crate::envelope::TaskStatus::Skipped)
            .map(|t| format!("line {}", t.line))
            .collect();
        if !never.is_empty() {
            eprintln!(
                "subpane: {} task{} of group {} never started (its driver ended first): {}",
                never.len(),
                if never.len() == 1 { "" } else { "s" },
                report.group,
                never.join(", ")
            );
            codes.push(exit_code::CANCELLED);
        }
    }
    if answers.timed_out {
        return Ok(exit_code::STILL_RUNNING);
    }
    Ok(worst_code(codes))
}
