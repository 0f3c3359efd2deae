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
use crate::app::RunRequest;
use crate::envelope::{Envelope, StatusDoc};
use crate::exit_code;
use crate::hosts::remote::{self, Answer, AskError, RemoteRun, StartAnswer};
use crate::spec::RunId;
use crate::store::Home;

/// The run `name` stands for, when it lives on a host.
pub(super) fn of(home: &Home, name: &str) -> Result<Option<RemoteRun>, CliError> {
    let Ok(id) = crate::app::names::resolve_run(home, name) else {
        // Not found (or ambiguous): the verb's own lookup says so in its words.
        return Ok(None);
    };
    let Ok(id) = RunId::parse(&id) else {
        return Ok(None);
    };
    remote::find(home, &id).map_err(CliError::Hosts)
}

/// `run --host`: starts `req` there; unless `detach`, waits for its end there.
pub(super) fn run(home: &Home, req: RunRequest, detach: bool, json: bool) -> Result<i32, CliError> {
    let (run, answer) = remote::start(home, req).map_err(CliError::Hosts)?;
    let started = match answer {
        StartAnswer::Finished(env) => {
            eprintln!("subpane: error: {}", env.output.errors.join("; "));
            return Ok(show(home, &env, json));
        }
        StartAnswer::Started(s) => s,
    };
    if detach {
        if json {
            print_json(&started);
        } else {
            print(&format!("{}\n", started.run_id));
        }
        return Ok(exit_code::COMPLETED);
    }
    use std::io::IsTerminal;
    if !json && std::io::stderr().is_terminal() {
        eprintln!(
            "subpane: run {id} started on host {h}; watch it with `subpane attach {id}`",
            id = run.run_id,
            h = run.host.name
        );
    }
    // Ctrl-C cancels the run there (the first with its grace, then at once); a third stops
    // waiting here and leaves it to the host.
    interrupt::block();
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
            if n == 1 { " — Ctrl-C again to kill" } else { "" }
        );
        let mut words = vec!["cancel", r.run_id.as_str(), "--no-wait", "--json"];
        if n > 1 {
            words.extend(["--grace", "0s"]);
        }
        let out = remote::command(&h, &r, &words, false)
            .stdin(std::process::Stdio::null())
            .output();
        match out {
            Ok(o) if o.status.success() => {}
            Ok(o) => eprintln!(
                "subpane: error: the cancel did not reach host {}: {}",
                r.host.name,
                crate::hosts::ssh::said(&o)
            ),
            Err(e) => eprintln!("subpane: error: cannot run ssh to cancel: {e}"),
        }
    });
    let id = run.run_id.clone();
    match watch(home, &run, &["wait", &id, "--json"], None, true)? {
        Answer::Finished(env) => Ok(show(home, &env, json)),
        Answer::Live(v, code) => {
            print_json(&v);
            Ok(code)
        }
    }
}

/// `status` of a run on a host: asked there; when the host cannot be reached, the envelope
/// recorded here if the attempt has ended, else the error.
pub(super) fn status(
    home: &Home,
    run: &RemoteRun,
    attempt: Option<u32>,
    json: bool,
) -> Result<i32, CliError> {
    let n = attempt.map(|n| n.to_string());
    let mut words = vec!["status", run.run_id.as_str(), "--json"];
    if let Some(n) = &n {
        words.extend(["--attempt", n.as_str()]);
    }
    match remote::ask(home, run, &words, false) {
        Ok(a) => Ok(answer(home, a, json)),
        Err(AskError::Unreachable(why)) => match recorded(home, run, attempt) {
            Some(env) => {
                eprintln!(
                    "subpane: warning: host {} cannot be reached ({why}); this is the envelope recorded here",
                    run.host.name
                );
                Ok(show(home, &env, json))
            }
            None => Err(CliError::Hosts(crate::hosts::HostsError::Check {
                name: run.host.name.clone(),
                why: format!("cannot reach {}: {why}", run.host.url),
            })),
        },
        Err(AskError::Failed(e)) => Err(CliError::Hosts(e)),
    }
}

/// `wait` for one run on a host (`timeout`: the wait's own limit, kept across reconnects).
pub(super) fn wait(
    home: &Home,
    run: &RemoteRun,
    attempt: Option<u32>,
    timeout: Option<Duration>,
    json: bool,
) -> Result<i32, CliError> {
    let n = attempt.map(|n| n.to_string());
    let mut words = vec!["wait", run.run_id.as_str(), "--json"];
    if let Some(n) = &n {
        words.extend(["--attempt", n.as_str()]);
    }
    let deadline = timeout.map(|t| Instant::now() + t);
    let a = watch(home, run, &words, deadline, false)?;
    Ok(answer(home, a, json))
}

/// `cancel` of a run on a host: asked there, its envelope (or request) answered here.
pub(super) fn cancel(
    home: &Home,
    run: &RemoteRun,
    grace: Option<&str>,
    no_wait: bool,
    json: bool,
) -> Result<i32, CliError> {
    let mut words = vec!["cancel", run.run_id.as_str(), "--json"];
    if let Some(g) = grace {
        words.extend(["--grace", g]);
    }
    if no_wait {
        words.push("--no-wait");
    }
    match remote::ask(home, run, &words, false) {
        Ok(Answer::Finished(env)) => {
            show(home, &env, json);
            Ok(exit_code::COMPLETED)
        }
        Ok(Answer::Live(v, code)) => {
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
        Err(AskError::Unreachable(why)) => Err(CliError::Hosts(crate::hosts::HostsError::Check {
            name: run.host.name.clone(),
            why: format!("cannot reach {} to cancel: {why}", run.host.url),
        })),
        Err(AskError::Failed(e)) => Err(CliError::Hosts(e)),
    }
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
            why: format!("the connection to {} failed (ssh's words are above)", run.host.url),
        })),
        Some(c) => Ok(c),
        None => Ok(exit_code::CANCELLED),
    }
}

/// Asks until the host answers: a lost connection is made again, with a pause growing to
/// 5 s, said once on stderr. `deadline`: the wait's own `--timeout` (exit 3 when it passes).
fn watch(
    home: &Home,
    run: &RemoteRun,
    words: &[&str],
    deadline: Option<Instant>,
    own_group: bool,
) -> Result<Answer, CliError> {
    let mut pause = Duration::from_millis(200);
    let mut said = false;
    loop {
        let mut words: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        if let Some(d) = deadline {
            let left = d.saturating_duration_since(Instant::now()).as_millis().max(1);
            words.extend(["--timeout".into(), format!("{left}ms")]);
        }
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        match remote::ask(home, run, &words, own_group) {
            Ok(a) => return Ok(a),
            Err(AskError::Failed(e)) => return Err(CliError::Hosts(e)),
            Err(AskError::Unreachable(why)) => {
                if !said {
                    eprintln!(
                        "subpane: lost the connection to host {} ({why}); run {} goes on there, reconnecting",
                        run.host.name, run.run_id
                    );
                    said = true;
                }
                if deadline.is_some_and(|d| Instant::now() + pause >= d) {
                    eprintln!(
                        "subpane: the wait's --timeout passed before host {} could be reached",
                        run.host.name
                    );
                    return Ok(Answer::Live(
                        serde_json::json!({"run_id": run.run_id, "status": "unknown", "host": run.host.name}),
                        exit_code::STILL_RUNNING,
                    ));
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_secs(5));
            }
        }
    }
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

/// The envelope recorded here for `attempt` (else the latest recorded) of `run`.
fn recorded(home: &Home, run: &RemoteRun, attempt: Option<u32>) -> Option<Envelope> {
    let id = RunId::parse(&run.run_id).ok()?;
    let n = match attempt {
        Some(n) => n,
        None => std::fs::read_dir(home.run_dir(&id).join("attempts"))
            .ok()?
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .max()?,
    };
    crate::store::read_json(&home.attempt(&id, n).result()).ok().flatten()
}
