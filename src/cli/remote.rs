//! The verbs on a run that lives on a host ([`crate::hosts::remote`]): each asks the host's
//! own subpane over the host's control connection and answers as it does for a run here.
//!
//! ```text
//!  run --host ─► start there ─► --detach: the answer │ else wait there (Ctrl-C: cancel there)
//!  status, wait, cancel ─► the same verb there with --json ─► envelope recorded here ─► print
//!  logs, attach (ssh -t), retry ─► the same verb there, its output and exit code as they are
//! ```
//!
//! A connection that drops while waiting is made again (with a growing pause, said once on
//! stderr): the run goes on there, and only its true end is answered.

use std::time::{Duration, Instant};

use super::CliError;
use super::common::{print, print_json};
use super::interrupt;
use super::output::{human_envelope, human_running};
use crate::app::{self, RunRequest};
use crate::envelope::{Envelope, StatusDoc};
use crate::exit_code;
use crate::hosts::remote::{self, Answer, RemoteRun, StartAnswer};
use crate::spec::RunId;
use crate::store::Home;

/// The run `name` stands for, when it lives on a host.
pub(super) fn of(home: &Home, name: &str) -> Result<Option<RemoteRun>, CliError> {
    remote::find_named(home, name).map_err(CliError::Hosts)
}

/// `run --host`: starts `req` there; unless `detach`, waits for its end there in the same
/// call, Ctrl-C cancelling it there.
pub(super) fn run(home: &Home, req: RunRequest, detach: bool, json: bool) -> Result<i32, CliError> {
    if detach {
        return match remote::start(home, req, None, None)
            .map_err(CliError::Hosts)?
            .1
        {
            StartAnswer::Finished(env) => {
                eprintln!("subpane: error: {}", env.output.errors.join("; "));
                Ok(show(home, &env, json))
            }
            StartAnswer::Started(s) | StartAnswer::Dropped(s, _) => {
                if json {
                    print_json(&s);
                } else {
                    print(&format!("{}\n", s.run_id));
                }
                Ok(exit_code::COMPLETED)
            }
        };
    }
    use std::io::IsTerminal;
    let hint = !json && std::io::stderr().is_terminal();
    let home2 = home.clone();
    let mut on_started = move |run: &RemoteRun, _: &crate::envelope::Started| {
        if hint {
            eprintln!(
                "subpane: run {id} started on host {h}; watch it with `subpane attach {id}`",
                id = run.run_id,
                h = run.host.name
            );
        }
        cancel_on_interrupt(&home2, run);
    };
    // Before the start: a Ctrl-C while the request is on its way is counted, not fatal.
    interrupt::block();
    let (run, answer) =
        remote::start(home, req, None, Some(&mut on_started)).map_err(CliError::Hosts)?;
    let answer = match answer {
        StartAnswer::Finished(env) => Answer::Finished(env),
        StartAnswer::Started(_) | StartAnswer::Dropped(..) => {
            if let StartAnswer::Dropped(_, why) = &answer {
                say_lost(&run, why);
            }
            remote::wait(home, &run, None, None, true, &mut |_, _| {}).map_err(CliError::Hosts)?
        }
    };
    match answer {
        Answer::Finished(env) => {
            if env.failure_kind == Some(crate::envelope::FailureKind::Spawn) {
                eprintln!("subpane: error: {}", env.output.errors.join("; "));
            }
            Ok(show(home, &env, json))
        }
        Answer::Live(v, code) => {
            print_json(&v);
            Ok(code)
        }
    }
}

/// Ctrl-C of a waited-for run on a host cancels it there: the first with its grace, the
/// second at once; a third stops waiting here and leaves it to the host.
fn cancel_on_interrupt(home: &Home, run: &RemoteRun) {
    let (h, r) = (home.clone(), run.clone());
    interrupt::on_interrupt(move |n| {
        if n >= 3 {
            eprintln!(
                "subpane: stopped waiting; run {} goes on on host {} (`subpane status {}`)",
                r.run_id, r.host.name, r.run_id
            );
            std::process::exit(exit_code::CANCELLED);
        }
        eprintln!(
            "subpane: cancelling run {} on host {}{}",
            r.run_id,
            r.host.name,
            if n == 1 {
                " — Ctrl-C again to kill"
            } else {
                ""
            }
        );
        let grace = (n > 1).then_some("0s");
        if let Err(e) = remote::cancel(
            &h,
            &r,
            grace,
            true,
            Some(crate::envelope::CancelOrigin::Interrupt),
        ) {
            eprintln!(
                "subpane: error: the cancel did not reach host {}: {e}",
                r.host.name
            );
        }
    });
}

/// `status` of a run on a host ([`remote::status`]).
pub(super) fn status(
    home: &Home,
    run: &RemoteRun,
    attempt: Option<u32>,
    json: bool,
) -> Result<i32, CliError> {
    let s = remote::status(home, run, attempt).map_err(CliError::Hosts)?;
    if let Some(why) = &s.stale {
        eprintln!(
            "subpane: warning: host {} cannot be reached ({why}); this is the envelope recorded here",
            run.host.name
        );
    }
    Ok(answer(home, s.answer, json))
}

/// `wait` for one run on a host (`timeout`: the wait's own limit, kept across reconnects).
pub(super) fn wait(
    home: &Home,
    run: &RemoteRun,
    attempt: Option<u32>,
    timeout: Option<Duration>,
    json: bool,
) -> Result<i32, CliError> {
    let deadline = timeout.map(|t| Instant::now() + t);
    let a = remote::wait(home, run, attempt, deadline, false, &mut say_lost)
        .map_err(CliError::Hosts)?;
    Ok(answer(home, a, json))
}

/// `cancel` of a run on a host: asked there, its envelope (or request) answered here.
pub(super) fn cancel(
    home: &Home,
    run: &RemoteRun,
    grace: Option<&str>,
    no_wait: bool,
    by: Option<crate::envelope::CancelOrigin>,
    json: bool,
) -> Result<i32, CliError> {
    match remote::cancel(home, run, grace, no_wait, by).map_err(CliError::Hosts)? {
        Answer::Finished(env) => {
            show(home, &env, json);
            Ok(exit_code::COMPLETED)
        }
        Answer::Live(v, code) => {
            if json {
                print_json(&v);
            } else {
                print(&format!(
                    "cancel requested for run {} on host {}\n",
                    run.run_id, run.host.name
                ));
            }
            Ok(code)
        }
    }
}

/// `retry` of a run on a host: the next attempt starts there; unless `detach`, it is waited
/// for here as `wait` does (its envelope recorded here).
pub(super) fn retry(
    home: &Home,
    run: &RemoteRun,
    resume: bool,
    task: Option<&str>,
    detach: bool,
    json: bool,
) -> Result<i32, CliError> {
    let started = remote::retry(home, run, resume, task).map_err(CliError::Hosts)?;
    if detach {
        if json {
            print_json(&started);
        } else {
            eprintln!(
                "subpane: run {} attempt {} started on host {}; `subpane wait {}` waits for it",
                started.run_id, started.attempt, run.host.name, started.run_id
            );
            print(&format!("{}\n", started.run_id));
        }
        return Ok(exit_code::COMPLETED);
    }
    let a = remote::wait(home, run, Some(started.attempt), None, false, &mut say_lost)
        .map_err(CliError::Hosts)?;
    Ok(answer(home, a, json))
}

/// A verb whose answer is the host's as it is (`logs`, `attach`, `retry`): run there with
/// this terminal's stdin, stdout and stderr (`tty`: ssh -t, for `attach`).
pub(super) fn pass_through(
    home: &Home,
    run: &RemoteRun,
    words: &[&str],
    tty: bool,
) -> Result<i32, CliError> {
    let status = remote::command(home, run, words, tty)
        .status()
        .map_err(|e| {
            CliError::Hosts(crate::hosts::ssh::run_error(
                &run.host,
                crate::command::Error::Io(e),
            ))
        })?;
    match status.code() {
        Some(255) => Err(CliError::Hosts(crate::hosts::HostsError::Check {
            name: run.host.name.clone(),
            why: format!(
                "the connection to {} failed (ssh's words are above)",
                run.host.url
            ),
        })),
        Some(c) => Ok(c),
        None => Ok(exit_code::CANCELLED),
    }
}

/// Says on stderr that the connection to `run`'s host was lost and is being made again.
fn say_lost(run: &RemoteRun, why: &str) {
    eprintln!(
        "subpane: lost the connection to host {} ({why}); run {} goes on there, reconnecting",
        run.host.name, run.run_id
    );
}

/// Prints an answer of the host's; returns its exit code.
fn answer(home: &Home, a: Answer, json: bool) -> i32 {
    match a {
        Answer::Finished(env) => show(home, &env, json),
        Answer::Live(v, code) => {
            if json {
                print_json(&v);
            } else {
                match serde_json::from_value::<StatusDoc>(v.clone()) {
                    Ok(doc) => print(&human_running(&doc, None)),
                    Err(_) => print_json(&v),
                }
            }
            code
        }
    }
}

/// Prints an envelope recorded here; returns its exit code.
fn show(home: &Home, env: &Envelope, json: bool) -> i32 {
    if json {
        print_json(env);
    } else if let Ok(id) = RunId::parse(&env.run_id) {
        print(&human_envelope(env, &home.attempt(&id, env.attempt)));
    }
    env.exit_code()
}

/// What the threads of a wait across hosts tell the one that answers.
enum Seen {
    /// A run on a host ended, or the wait for it did (index into the far runs).
    Far(usize, Result<Answer, crate::hosts::HostsError>),
    /// The runs here: the wait for them returned.
    Near(Result<app::WaitResult, crate::app::Error>),
    /// Ctrl-C: stop waiting; the runs go on.
    Stop,
}

/// `wait` for runs of which some are on hosts (`far`, with their places among the names
/// given) and some here (`near`, and `a.group`'s): one thread waits there per run, one
/// here for the rest; `--any` returns with the first end, wherever it is.
pub(super) fn wait_many(
    home: &Home,
    a: &super::wait::WaitArgs,
    far: Vec<(usize, RemoteRun)>,
    near: &[String],
    mode: app::WaitMode,
    timeout: Option<Duration>,
) -> Result<app::WaitAnswers, CliError> {
    let targets = if near.is_empty() && a.group.is_none() {
        Vec::new()
    } else {
        app::wait_targets(home, near, a.group.as_deref(), a.attempt)?
    };
    use std::io::IsTerminal;
    if std::io::stderr().is_terminal() {
        eprintln!(
            "subpane: waiting for {} run{} ({} on hosts) (Ctrl-C stops waiting; the runs go on)",
            targets.len() + far.len(),
            if targets.len() + far.len() == 1 {
                ""
            } else {
                "s"
            },
            far.len()
        );
    }
    let deadline = timeout.map(|t| Instant::now() + t);
    let (tx, rx) = std::sync::mpsc::channel();
    for (k, (_, run)) in far.iter().enumerate() {
        let (tx, home, run, attempt) = (tx.clone(), home.clone(), run.clone(), a.attempt);
        std::thread::spawn(move || {
            let got = remote::wait(&home, &run, attempt, deadline, false, &mut say_lost);
            let _ = tx.send(Seen::Far(k, got));
        });
    }
    let mut wl = app::WaitLoop::new()?;
    let stop_near = wl.interrupter();
    interrupt::block();
    {
        let (tx, stop) = (tx.clone(), stop_near.clone());
        interrupt::on_interrupt(move |_| {
            stop.interrupt();
            let _ = tx.send(Seen::Stop);
        });
    }
    let near_running = !targets.is_empty();
    if near_running {
        let (tx, targets) = (tx.clone(), targets.clone());
        std::thread::spawn(move || {
            let opts = app::WaitOptions {
                heartbeat: None,
                on_progress: None,
                on_interrupt: None,
            };
            let _ = tx.send(Seen::Near(app::wait_with(
                &mut wl, &targets, mode, timeout, opts,
            )));
        });
    }
    drop(tx);
    let mut far_answers: Vec<Option<Answer>> = far.iter().map(|_| None).collect();
    let mut ended_far = Vec::new();
    let mut near_result = None;
    let (mut far_left, mut near_left) = (far.len(), near_running);
    while far_left > 0 || near_left {
        match rx.recv() {
            Ok(Seen::Far(k, got)) => {
                far_left -= 1;
                let got = got.map_err(CliError::Hosts)?;
                if matches!(got, Answer::Finished(_)) {
                    ended_far.push(k);
                }
                let ended = matches!(got, Answer::Finished(_));
                far_answers[k] = Some(got);
                if mode == app::WaitMode::Any && ended {
                    stop_near.interrupt();
                    break;
                }
            }
            Ok(Seen::Near(res)) => {
                near_left = false;
                let res = res?;
                let any_ended = res.first_finished.is_some();
                near_result = Some(res);
                if mode == app::WaitMode::Any && any_ended {
                    break;
                }
            }
            Ok(Seen::Stop) | Err(_) => break,
        }
    }
    // The runs here as the wait left them (a fresh look at the ones it did not see end).
    let near_answers = match near_result {
        Some(mut res) => {
            let mut targets = targets;
            app::regroup(home, a.group.as_deref(), &mut targets, &mut res)?;
            app::wait_answers(targets, res)?
        }
        None => app::wait_answers(
            targets.clone(),
            app::WaitResult {
                results: targets.iter().map(|_| None).collect(),
                timed_out: false,
                stopped: true,
                first_finished: None,
            },
        )?,
    };
    // The runs on hosts not heard from: where they are now, from the records here.
    let mut runs: Vec<Option<app::RunAnswer>> = Vec::new();
    let total = near_answers.runs.len() + far.len();
    runs.resize_with(total, || None);
    let far_at: Vec<usize> = far.iter().map(|(i, _)| *i).collect();
    let mut near_iter = near_answers.runs.into_iter();
    let mut near_index = Vec::new();
    for (slot, place) in runs.iter_mut().enumerate() {
        if let Some(k) = far_at.iter().position(|i| *i == slot) {
            let (_, run) = &far[k];
            *place = Some(far_answer(home, run, far_answers[k].take())?);
        } else if let Some(r) = near_iter.next() {
            near_index.push(slot);
            *place = Some(r);
        }
    }
    let mut runs: Vec<app::RunAnswer> = runs.into_iter().flatten().collect();
    // A group's runs on hosts sent since the wait began (by its driver): as recorded here.
    if let Some(g) = &a.group {
        for r in app::group_far(home, g) {
            if !far.iter().any(|(_, f)| f.run_id == r.run_id) {
                runs.push(far_answer(home, &r, None)?);
            }
        }
    }
    let mut order: Vec<usize> = near_answers
        .order
        .iter()
        .filter_map(|i| near_index.get(*i).copied())
        .filter(|i| matches!(runs[*i].status, app::AttemptStatus::Finished(_)))
        .collect();
    order.extend(ended_far.iter().map(|k| far_at[*k]));
    let rest: Vec<usize> = (0..runs.len()).filter(|i| !order.contains(i)).collect();
    order.extend(rest);
    let first_finished = order
        .first()
        .copied()
        .filter(|i| matches!(runs[*i].status, app::AttemptStatus::Finished(_)));
    let timed_out = deadline.is_some_and(|d| Instant::now() >= d)
        && runs
            .iter()
            .any(|r| matches!(r.status, app::AttemptStatus::Live(_)));
    Ok(app::WaitAnswers {
        runs,
        timed_out,
        first_finished,
        order,
    })
}

/// A run on a host as a wait's answer: its envelope, or (not heard from) where it is now.
fn far_answer(
    home: &Home,
    run: &RemoteRun,
    got: Option<Answer>,
) -> Result<app::RunAnswer, CliError> {
    let got = match got {
        Some(g) => g,
        None => match remote::recorded(home, run, None) {
            Some(env) => Answer::Finished(Box::new(env)),
            None => {
                remote::status(home, run, None)
                    .map_err(CliError::Hosts)?
                    .answer
            }
        },
    };
    let status = match got {
        Answer::Finished(env) => app::AttemptStatus::Finished(env),
        Answer::Live(v, _) => match serde_json::from_value::<StatusDoc>(v) {
            Ok(doc) => app::AttemptStatus::Live(doc),
            Err(_) => {
                return Err(CliError::Hosts(crate::hosts::HostsError::Check {
                    name: run.host.name.clone(),
                    why: format!(
                        "run {} could not be asked about: its host is not reachable",
                        run.run_id
                    ),
                }));
            }
        },
    };
    let n = match &status {
        app::AttemptStatus::Finished(e) => e.attempt,
        app::AttemptStatus::Live(d) => d.attempt,
    };
    let paths = RunId::parse(&run.run_id)
        .map(|id| home.attempt(&id, n))
        .map_err(|e| CliError::Flag(e.to_string()))?;
    Ok(app::RunAnswer {
        paths,
        run_id: run.run_id.clone(),
        what: run.argv.join(" "),
        status,
    })
}
