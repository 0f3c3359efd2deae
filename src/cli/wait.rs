//! `subpane wait RUN…`: wait for runs to finish, event-driven.

use clap::Args;

use super::CliError;
use super::common::{print, print_json};
use super::human;
use super::interrupt;
use super::live_line::{self, LiveLines};
use super::output::{human_envelope, human_running, worst_code};
use crate::app::{self, AttemptStatus, RunAnswer, WaitMode};
use crate::envelope::{FanoutReport, FanoutTask, TaskStatus};
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
--json it always prints an array, however many runs the group has.

One run prints its summary; several (or --group) a table: one line per run, then the totals.
Ctrl-C stops waiting and prints where the runs are (they go on).")]
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
    /// Stop waiting (exit 3) once stdin is closed: how a host's wait ends with the
    /// connection of the machine that asked for it (internal)
    #[arg(long, hide = true)]
    pub until_stdin_closes: bool,
}

pub fn wait(home: &crate::store::Home, a: WaitArgs) -> Result<i32, CliError> {
    if a.until_stdin_closes {
        // Nothing is written to it: its end is the asker's (or the connection's).
        std::thread::spawn(|| {
            let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
            std::process::exit(exit_code::STILL_RUNNING);
        });
    }
    let timeout = a
        .timeout
        .as_deref()
        .map(|t| parse_positive_duration("--timeout", t))
        .transpose()?;
    // Runs on hosts are waited for there (cli/remote.rs), beside the ones here.
    let mut far = Vec::new();
    let mut near = Vec::new();
    for (i, r) in a.runs.iter().enumerate() {
        match super::remote::of(home, r)? {
            Some(remote) => far.push((i, remote)),
            None => near.push(r.clone()),
        }
    }
    if let ([(_, remote)], true, None) = (far.as_slice(), near.is_empty(), &a.group) {
        return super::remote::wait(home, remote, a.attempt, timeout, a.json);
    }
    let group = a.group.as_deref().map(|g| app::resolve_group(home, g));
    let a = WaitArgs {
        group: group.transpose()?,
        ..a
    };
    // A group's runs on hosts, after the runs named (a detached group's driver may send
    // more: those it ended with are found when the wait ends).
    let far_tasks = a.group.as_deref().is_some_and(|g| {
        app::fanout::group_record(home, g).is_some_and(|r| r.tasks.iter().any(|t| t.remote))
    });
    if let Some(g) = &a.group {
        for r in app::group_far(home, g) {
            if !far.iter().any(|(_, f)| f.run_id == r.run_id) {
                far.push((a.runs.len() + far.len(), r));
            }
        }
    }
    if !far.is_empty() || far_tasks {
        let mode = if a.any { WaitMode::Any } else { WaitMode::All };
        let answers = super::remote::wait_many(home, &a, far, &near, mode, timeout)?;
        return report(home, &a, mode, answers);
    }
    let targets = app::wait_targets(home, &a.runs, a.group.as_deref(), a.attempt)?;
    let mode = if a.any { WaitMode::Any } else { WaitMode::All };
    use std::io::IsTerminal;
    if std::io::stderr().is_terminal() {
        // A group driven on its own is waited for through its driver: name its tasks.
        let what = match a.group.as_deref().filter(|_| a.runs.is_empty()) {
            Some(g) => app::fanout::group_record(home, g).map(|r| {
                format!(
                    "waiting for the {} of group {g}",
                    human::counted(r.tasks.len() as u64, "task")
                )
            }),
            None => None,
        };
        eprintln!(
            "subpane: {} (Ctrl-C stops waiting; the runs go on)",
            what.unwrap_or_else(|| app::waiting_for(&targets))
        );
    }
    // On a terminal, a live line per attempt until the summary (see live_line.rs).
    let mut lines = LiveLines::shown(a.json, live_rows(home, &targets, a.group.as_deref()));
    let mut wl = app::WaitLoop::new()?;
    wl.report_records(lines.is_some());
    // Ctrl-C stops waiting, said at once; what the runs are at is printed as at the end.
    interrupt::block();
    interrupt::stop_waiting_on_interrupt(
        wl.interrupter(),
        lines.as_ref().map(LiveLines::announcer).unwrap_or_default(),
    );
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
    report(home, &a, mode, answers)
}

/// Prints what a wait found (the run that finished with --any, else every run in the
/// order given) and returns its exit code.
pub(super) fn report(
    home: &crate::store::Home,
    a: &WaitArgs,
    mode: WaitMode,
    answers: app::WaitAnswers,
) -> Result<i32, CliError> {
    // --any prints the run that finished; otherwise every run, in the order given.
    let shown: Vec<&RunAnswer> = match answers.first_finished {
        Some(i) if mode == WaitMode::Any && !answers.timed_out => vec![&answers.runs[i]],
        _ => answers.runs.iter().collect(),
    };
    let mut codes: Vec<i32> = shown
        .iter()
        .map(|r| match &r.status {
            AttemptStatus::Finished(env) => env.exit_code(),
            AttemptStatus::Live(_) => exit_code::STILL_RUNNING,
        })
        .collect();
    // Several runs (or a group) read as a table, one run as its summary.
    let human = if shown.len() > 1 || a.group.is_some() {
        runs_table(&shown, a.group.as_deref())
    } else {
        let mut human = String::new();
        for r in &shown {
            match &r.status {
                AttemptStatus::Finished(env) => human.push_str(&human_envelope(env, &r.paths)),
                AttemptStatus::Live(doc) => {
                    human.push_str(&human_running(doc, app::progress(&r.paths).as_ref()))
                }
            }
        }
        human
    };
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
        let skipped = report
            .tasks
            .iter()
            .filter(|t| t.run_id.is_none() && t.status == crate::envelope::TaskStatus::Skipped);
        let mut never = Vec::new();
        for t in skipped {
            match t.error.as_deref() {
                // Skipped by the queue's rule: said as the driver said it.
                Some(why) if !why.starts_with(crate::app::fanout::NEVER_STARTED) => {
                    eprintln!(
                        "subpane: line {} of group {} was skipped: {why}",
                        t.line, report.group
                    );
                    codes.push(exit_code::CANCELLED);
                }
                _ => never.push(format!("line {}", t.line)),
            }
        }
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

/// One line per run and a line of totals, the shape of `fanout`'s table.
fn runs_table(shown: &[&RunAnswer], group: Option<&str>) -> String {
    let tasks: Vec<FanoutTask> = shown
        .iter()
        .map(|r| {
            let mut t = FanoutTask {
                line: 0,
                id: None,
                run_id: Some(r.run_id.clone()),
                status: TaskStatus::Running,
                failure_kind: None,
                exit_code: None,
                duration_ms: None,
                attempt_dir: Some(r.paths.dir().to_path_buf()),
                what: r.what.clone(),
                error: None,
                waiting: None,
            };
            if let AttemptStatus::Finished(env) = &r.status {
                t.status = env.status.into();
                t.failure_kind = env.failure_kind;
                t.exit_code = env.exit_code;
                t.duration_ms = env.duration_ms;
            }
            t
        })
        .collect();
    let report = FanoutReport::new(group.unwrap_or_default().to_owned(), tasks, 0, 0);
    let s = &report.summary;
    let runs = human::counted(s.total as u64, "run");
    let of = group.map(|g| format!("group {g}: ")).unwrap_or_default();
    format!(
        "{}\n{of}{runs}: {}\n(`subpane status RUN` shows one run's summary)\n",
        super::table::rows(&report.tasks, false),
        super::table::totals(s)
    )
}

/// The live lines' attempts: every target, but of a group driven on its own its tasks (in
/// the order of its file, those not started yet too) and not its driver, which is waited for
/// only to know when the group is done.
fn live_rows(
    home: &crate::store::Home,
    targets: &[(crate::store::AttemptPaths, crate::spec::AttemptSpec)],
    group: Option<&str>,
) -> Vec<(String, crate::store::AttemptPaths, Option<usize>)> {
    let target = |id: &str| targets.iter().position(|(_, s)| s.run_id.as_str() == id);
    let mut rows = Vec::new();
    let record = group.and_then(|g| app::fanout::group_record(home, g).map(|r| (g, r)));
    if let Some((_, record)) = &record {
        for t in &record.tasks {
            let i = target(&t.run_id);
            let paths = match (i, crate::spec::RunId::parse(&t.run_id)) {
                (Some(i), _) => targets[i].0.clone(),
                (None, Ok(id)) => home.attempt(&id, 1),
                (None, Err(_)) => continue,
            };
            rows.push((t.run_id.clone(), paths, i));
        }
    }
    for (i, (paths, spec)) in targets.iter().enumerate() {
        let id = spec.run_id.as_str();
        let driver = record.as_ref().is_some_and(|(g, _)| *g == id);
        if !driver && !rows.iter().any(|(r, _, _)| r == id) {
            rows.push((id.to_owned(), paths.clone(), Some(i)));
        }
    }
    rows
}
