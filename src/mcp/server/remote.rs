//! The tools on a run that lives on a host ([`crate::hosts::remote`]): each asks the host's
//! own subpane over the host's control connection, records an envelope here once it is
//! trusted, and answers as for a run of this machine.
//!
//! ```text
//!  run {host}       ─► start there ─► wait: false ─► the start │ else wait there ≤ max_wait
//!  status, cancel   ─► the verb there with --json ─► finished (envelope here) │ live
//!  wait {run_ids: [one run on a host]} ─► wait there with --timeout ≤ max_wait
//!  logs             ─► logs there, the end of it (max_bytes)
//! ```

use std::time::{Duration, Instant};

use super::*;
use crate::envelope::StatusDoc;
use crate::hosts::remote::{self, Answer as HostAnswer, RemoteRun, StartAnswer};
use crate::spec::RunId;

/// The run `name` stands for, when it lives on a host.
pub(super) fn of(home: &Home, name: &str) -> Result<Option<RemoteRun>, ToolError> {
    Ok(remote::find_named(home, name)?)
}

/// The tool's answer for what the host said.
fn answer(home: &Home, a: HostAnswer, detail: bool) -> CallToolResult {
    match a {
        HostAnswer::Finished(env) => {
            let paths = RunId::parse(&env.run_id)
                .map(|id| home.attempt(&id, env.attempt))
                .unwrap_or_else(|_| AttemptPaths::new(home.runs_dir()));
            finished(&env, &paths, detail)
        }
        HostAnswer::Live(v, _) => match serde_json::from_value::<StatusDoc>(v.clone()) {
            Ok(doc) => live(&doc, detail),
            Err(_) => {
                let text = format!(
                    "run {} on host {}: not known to have ended (the host could not be reached)",
                    v["run_id"].as_str().unwrap_or_default(),
                    v["host"].as_str().unwrap_or_default()
                );
                result(text.clone(), answer::lead(&text, None, v))
            }
        },
    }
}

/// Says in the server's log that a host's connection was lost and is being made again.
fn say_lost(run: &RemoteRun, why: &str) {
    eprintln!(
        "subpane: lost the connection to host {} ({why}); run {} goes on there, reconnecting",
        run.host.name, run.run_id
    );
}

pub(super) fn status(home: &Home, run: &RemoteRun, attempt: Option<u32>, detail: bool) -> Answer {
    let s = remote::status(home, run, attempt)?;
    let mut r = answer(home, s.answer, detail);
    if let Some(why) = s.stale {
        prepend(
            &mut r,
            &format!(
                "host {} cannot be reached ({why}); this is the envelope recorded here\n",
                run.host.name
            ),
        );
    }
    Ok(r)
}

pub(super) fn cancel(home: &Home, run: &RemoteRun, grace: Option<&str>, detail: bool) -> Answer {
    match remote::cancel(home, run, grace, true, None)? {
        HostAnswer::Finished(env) => {
            let mut r = answer(home, HostAnswer::Finished(env), detail);
            prepend(&mut r, "already finished; nothing to cancel\n");
            Ok(r)
        }
        HostAnswer::Live(mut v, _) => {
            // Its state as the request left it, as the host tells it.
            let status = match remote::status(home, run, None)?.answer {
                HostAnswer::Finished(env) => env.status.as_str().to_owned(),
                HostAnswer::Live(s, _) => s["status"].as_str().unwrap_or("running").to_owned(),
            };
            if let Some(o) = v.as_object_mut() {
                o.insert("status".into(), status.into());
            }
            let text = format!(
                "cancel requested for run {} on host {}; `wait` shows it end",
                run.run_id, run.host.name
            );
            let next = answer::next_wait(&[run.run_id.as_str()], None);
            Ok(result(text.clone(), answer::lead(&text, Some(next), v)))
        }
    }
}

pub(super) fn wait(
    home: &Home,
    run: &RemoteRun,
    attempt: Option<u32>,
    limit: Duration,
    by_max_wait: bool,
    detail: bool,
) -> Answer {
    let a = remote::wait(
        home,
        run,
        attempt,
        Some(Instant::now() + limit),
        false,
        &mut say_lost,
    )?;
    let status = match a {
        HostAnswer::Finished(env) => AttemptStatus::Finished(env),
        HostAnswer::Live(v, _) => match serde_json::from_value::<StatusDoc>(v.clone()) {
            Ok(doc) => AttemptStatus::Live(doc),
            Err(_) => {
                return Err(ToolError::Invalid(format!(
                    "host `{}` could not be reached within the wait ({}); run {} goes on there: call `wait` again",
                    run.host.name,
                    v["unreachable"].as_str().unwrap_or_default(),
                    run.run_id
                )));
            }
        },
    };
    let timed_out = matches!(status, AttemptStatus::Live(_));
    let n = match &status {
        AttemptStatus::Finished(e) => e.attempt,
        AttemptStatus::Live(d) => d.attempt,
    };
    let paths = RunId::parse(&run.run_id)
        .map(|id| home.attempt(&id, n))
        .unwrap_or_else(|_| AttemptPaths::new(home.runs_dir()));
    let answers = app::WaitAnswers {
        runs: vec![app::RunAnswer {
            paths,
            run_id: run.run_id.clone(),
            what: run.argv.join(" "),
            status,
        }],
        timed_out,
        first_finished: (!timed_out).then_some(0),
        order: vec![0],
    };
    Ok(reply::wait_answer(
        &answers,
        None,
        timed_out && by_max_wait,
        limit,
        detail,
    ))
}

pub(super) fn logs(
    home: &Home,
    run: &RemoteRun,
    file: Option<app::LogFile>,
    attempt: Option<u32>,
    max: u64,
) -> Answer {
    let n = attempt.map(|n| n.to_string());
    let mut words = vec!["logs", run.run_id.as_str()];
    match file {
        Some(app::LogFile::Events) => words.push("--events"),
        Some(app::LogFile::Stderr) => words.push("--stderr"),
        Some(app::LogFile::Output) => words.push("--output"),
        Some(app::LogFile::Stdout) => words.push("--stdout"),
        None => {}
    }
    if let Some(n) = &n {
        words.extend(["--attempt", n.as_str()]);
    }
    // Which attempt, and where its file is there: from the host's status (one more round
    // trip on the warm connection).
    let (n, dir) = match remote::status(home, run, attempt)?.answer {
        // An envelope names its files relative to the attempt directory.
        HostAnswer::Finished(env) => (env.attempt, None),
        HostAnswer::Live(v, _) => (
            v["attempt"]
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .unwrap_or(1),
            v["attempt_dir"].as_str().map(str::to_owned),
        ),
    };
    let file = match file {
        Some(app::LogFile::Events) => "events.jsonl",
        Some(app::LogFile::Stderr) => "stderr.log",
        Some(app::LogFile::Output) => "output.txt",
        Some(app::LogFile::Stdout) => "stdout.log",
        None if run.agent == crate::spec::AgentKind::Command => "stdout.log",
        None => "events.jsonl",
    };
    let path = format!(
        "{}:{}/{file}",
        run.host.name,
        dir.unwrap_or_else(|| {
            let home = run
                .host
                .home
                .as_deref()
                .map(|h| format!("{}/", h.trim_end_matches('/')));
            format!(
                "{}runs/{}/attempts/{n}",
                home.unwrap_or_default(),
                run.run_id
            )
        })
    );
    let bytes = remote::read_out(home, run, &words)?;
    let size = bytes.len() as u64;
    let from = bytes
        .len()
        .saturating_sub(usize::try_from(max).unwrap_or(usize::MAX));
    let tail = String::from_utf8_lossy(&bytes[from..]).into_owned();
    let truncated = size > max;
    let header = if truncated {
        format!(
            "(the last {max} of {size} bytes of run {} on host {})",
            run.run_id, run.host.name
        )
    } else {
        format!(
            "({size} bytes of run {} on host {})",
            run.run_id, run.host.name
        )
    };
    let doc = json!({"summary": header, "run_id": run.run_id, "attempt": n, "path": path,
                     "exists": true, "size": size, "truncated": truncated,
                     "shown_bytes": bytes.len() - from});
    Ok(result(format!("{header}\n{tail}"), doc))
}

/// `run` with a `host`: started there; with `wait`, waited for there at most `max_wait`.
pub(super) fn run(
    home: &Home,
    req: RunRequest,
    wait: bool,
    max_wait: Duration,
    detail: bool,
) -> Answer {
    // Started, then waited for in a call of its own: that one is bounded by max_wait.
    let (run, started) = remote::start(home, req, None, None)?;
    match started {
        StartAnswer::Finished(env) => Ok(answer(home, HostAnswer::Finished(env), detail)),
        StartAnswer::Started(s) | StartAnswer::Dropped(s, _) => {
            started_answer(home, &run, s, wait, max_wait, detail)
        }
    }
}

/// `retry` of a run on a host: its next attempt started there, answered as `run` answers.
pub(super) fn retry(
    home: &Home,
    run: &RemoteRun,
    a: &super::tools::RetryArgs,
    max_wait: Duration,
    detail: bool,
) -> Answer {
    if !a.env.is_empty() {
        return Err(ToolError::Invalid(format!(
            "`env` cannot be given to a retry of run {} on host {} yet: its values would be on the host's command line; start a new `run` with `host` instead",
            run.run_id, run.host.name
        )));
    }
    let task = match (&a.task, &a.task_file) {
        (_, Some(f)) => Some(
            std::fs::read_to_string(f)
                .map_err(|e| ToolError::Invalid(format!("`task_file` {}: {e}", f.display())))?,
        ),
        (t, None) => t.clone(),
    };
    let s = remote::retry(home, run, a.resume, task.as_deref())?;
    started_answer(home, run, s, a.wait.unwrap_or(true), max_wait, detail)
}

/// The answer once an attempt runs on a host: with `wait`, its end there (at most
/// `max_wait`), else its start.
fn started_answer(
    home: &Home,
    run: &RemoteRun,
    s: crate::envelope::Started,
    wait: bool,
    max_wait: Duration,
    detail: bool,
) -> Answer {
    if !wait {
        let text = format!(
            "run {} (attempt {}) started on host {}",
            s.run_id, s.attempt, run.host.name
        );
        let next = answer::next_wait(&[s.run_id.as_str()], None);
        let mut doc = to_value(&s);
        if let Some(o) = doc.as_object_mut() {
            o.insert("host".into(), run.host.name.clone().into());
        }
        return Ok(result(text.clone(), answer::lead(&text, Some(next), doc)));
    }
    let a = remote::wait(
        home,
        run,
        Some(s.attempt),
        Some(Instant::now() + max_wait),
        false,
        &mut say_lost,
    )?;
    let still = matches!(a, HostAnswer::Live(..));
    let mut r = answer(home, a, detail);
    if still {
        prepend(
            &mut r,
            &format!(
                "max_wait ({}) passed; run {} goes on on host {}: call `wait` with its run_id\n",
                humantime::format_duration(max_wait),
                run.run_id,
                run.host.name
            ),
        );
    }
    Ok(r)
}
