//! `subpane run`: flags → [`RunRequest`] → plan → [`app::run`] (start, and unless `--detach`
//! wait) → print.

use clap::{ArgMatches, Args, ValueEnum};

use super::CliError;
use super::common::{print, print_json};
use super::interrupt;
use super::live_line::{self, LiveLines};
use super::output::human_envelope;
use crate::app::{self, RealSystem, RunOutcome, RunRequest, Started};
use crate::envelope::Envelope;
use crate::spec::AgentKind;
use crate::store::{AttemptPaths, Home};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AgentArg {
    Pi,
    Claude,
    Codex,
}

impl AgentArg {
    pub(crate) fn kind(self) -> AgentKind {
        match self {
            AgentArg::Pi => AgentKind::Pi,
            AgentArg::Claude => AgentKind::Claude,
            AgentArg::Codex => AgentKind::Codex,
        }
    }
}

#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  subpane run -- make test
  subpane run --json --timeout 10m --cwd ~/src/app -- cargo build
  subpane run --detach --run-id review-1 --agent claude --task @task.md
  subpane run --agent pi --model openai/gpt-5 --tools read,bash --task 'fix the failing test'
  subpane run --sandbox --network allow:api.anthropic.com --agent claude --task @task.md")]
pub struct RunArgs {
    /// Every field of a run request, from [`app::field`]'s table.
    #[command(flatten)]
    pub request: RequestArgs,
    /// Return at once with the run id; the attempt runs on and its limits still hold
    #[arg(long)]
    pub detach: bool,
    /// Print exactly one JSON document: the envelope (or, with --detach, the run id)
    #[arg(long)]
    pub json: bool,
}

/// The arguments of every field of a run request ([`app::field::FIELDS`]): kept as clap
/// parsed them, and read into a [`RunRequest`] by [`RunArgs::to_request`].
#[derive(Clone, Debug)]
pub struct RequestArgs(ArgMatches);

impl clap::FromArgMatches for RequestArgs {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        Ok(Self(m.clone()))
    }
    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        self.0 = m.clone();
        Ok(())
    }
}

impl clap::Args for RequestArgs {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        app::field::args().fold(cmd, clap::Command::arg)
    }
    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

impl RunArgs {
    /// The request these flags make. Checks only what clap cannot: the shape of `K=V` and
    /// that the program's arguments are text.
    pub fn to_request(&self) -> Result<RunRequest, CliError> {
        let mut req = app::field::from_matches(&self.request.0)?;
        req.read_at_files();
        Ok(req)
    }
}

pub fn run(home: &Home, a: RunArgs) -> Result<i32, CliError> {
    let req = a.to_request()?;
    if req.host.is_some() {
        return super::remote::run(home, req, a.detach, a.json);
    }
    let plan = app::plan(&req, home, &RealSystem)?;
    start_and_report(home, plan, a.detach, a.json)
}

/// `__run-request`: what `run --host` runs on the host. Reads one request (with the
/// caller's version) from stdin, and plans and starts it detached, answering as
/// `run --detach --json` does.
pub(super) fn run_request(home: &Home) -> Result<i32, CliError> {
    let r: crate::hosts::remote::RemoteRequest = read_request("the run request")?;
    same_version(&r.version)?;
    let mut plan = app::plan(&r.request, home, &RealSystem)?;
    if let Some(g) = &r.group {
        plan.record.group = Some(g.clone());
        plan.spec.group = Some(g.clone());
    }
    if !r.wait {
        return start_and_report(home, plan, true, true);
    }

    // The start's answer as one line at once (the caller keeps its record by it), then the
    // envelope as another once the run ends. A lost connection ends this process (SIGHUP),
    // never the run: its worker is in its own pane.
    let line = |v: &dyn erased::Line| {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(v.line().as_bytes());
        let _ = out.flush();
    };
    let mut wl = app::WaitLoop::new()?;
    let mut on_started = |s: &Started| match &s.spawn_failed {
        Some(env) => line(&**env),
        None => {
            line(&s.answer());
            // Once it runs: the caller gone (its stdin closed), nobody waits for the
            // answer, and this ends; the run goes on.
            std::thread::spawn(|| {
                let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
                std::process::exit(crate::exit_code::STILL_RUNNING);
            });
        }
    };
    let opts = app::RunOptions {
        detach: false,
        on_interrupt: app::OnInterrupt::CancelAndWait,
        heartbeat: None,
        on_started: Some(&mut on_started),
        on_progress: None,
        max_wait: None,
        cancel_by: None,
    };
    match app::run(home, plan, &mut wl, opts)? {
        RunOutcome::Finished { started, envelope } => {
            if started.spawn_failed.is_none() {
                line(&*envelope);
            }
            Ok(envelope.exit_code())
        }
        _ => Ok(crate::exit_code::FAILED),
    }
}

/// `__check-requests`: plans a fan-out's lines for this host as they would start here,
/// starting nothing, and answers with the lines it refuses ([`crate::hosts::remote::check`]).
pub(super) fn check_requests(home: &Home) -> Result<i32, CliError> {
    let r: crate::hosts::remote::RemoteCheck = read_request("the fan-out's lines")?;
    same_version(&r.version)?;
    let errors = match app::fanout::plan_lines(
        r.requests.into_iter().map(|(n, r)| (n, r.into())).collect(),
        home,
        &RealSystem,
        &r.group,
        &[],
    ) {
        Ok(_) => Vec::new(),
        Err(e) if e.nothing_started() => e
            .to_string()
            .lines()
            .filter(|l| *l != "nothing was started")
            .map(str::to_owned)
            .collect(),
        Err(e) => return Err(e.into()),
    };
    super::common::print_json(&crate::hosts::remote::CheckAnswer { errors });
    Ok(crate::exit_code::COMPLETED)
}

/// The one JSON line on stdin a caller on another machine sent (`what` names it in errors);
/// the rest of stdin is the caller's connection, left unread.
fn read_request<T: serde::de::DeserializeOwned>(what: &str) -> Result<T, CliError> {
    use std::io::{BufRead, Read};
    let mut stdin = std::io::stdin().lock();
    let mut body = Vec::new();
    (&mut stdin)
        .take(crate::store::RECORD_LIMIT + 1)
        .read_until(b'\n', &mut body)
        .map_err(|source| CliError::ReadTasks {
            what: format!("{what} on stdin"),
            source,
        })?;
    serde_json::from_slice(&body)
        .map_err(|e| CliError::Flag(format!("{what} on stdin cannot be read: {e}")))
}

/// A request from a caller of another version is refused, naming both.
pub(super) fn same_version(theirs: &str) -> Result<(), CliError> {
    let mine = env!("CARGO_PKG_VERSION");
    if theirs == mine {
        return Ok(());
    }
    Err(CliError::Flag(format!(
        "this host runs subpane {mine} and the caller is subpane {theirs}: install the caller's version here, or give `hosts add` the --bin of one"
    )))
}

/// One JSON document as one line (what `__run-request` answers with).
mod erased {
    pub trait Line {
        fn line(&self) -> String;
    }
    impl<T: serde::Serialize> Line for T {
        fn line(&self) -> String {
            let mut s = serde_json::to_string(self).unwrap_or_else(|_| "null".into());
            s.push('\n');
            s
        }
    }
}

/// Starts a planned attempt (of `run` or `retry`) and, unless `detach`, waits for it like
/// `run` does ([`app::run`]): Ctrl-C cancels it, and its envelope (or a summary) is printed.
/// Returns the exit code.
pub(super) fn start_and_report(
    home: &Home,
    plan: app::Plan,
    detach: bool,
    json: bool,
) -> Result<i32, CliError> {
    let mut wl = app::WaitLoop::new()?;
    // On a terminal, a live line until the summary (see live_line.rs).
    let lines = if detach {
        None
    } else {
        let target = (
            plan.spec.run_id.to_string(),
            home.attempt(&plan.spec.run_id, plan.spec.attempt),
        );
        LiveLines::for_stdout(json, vec![target])
    };
    let live = lines.is_some();
    wl.report_records(live);
    // How to watch the attempt, said to a person once it has run a moment (see on_progress).
    let hint = {
        use std::io::IsTerminal;
        !detach && !json && std::io::stderr().is_terminal()
    };
    let attach_hint =
        std::cell::RefCell::new(None::<(crate::spec::AttemptSpec, crate::store::AttemptPaths)>);
    // Drawn once the attempt exists, then on each report of the wait.
    let lines = std::cell::RefCell::new(lines);
    if !detach {
        // Before the launch: a Ctrl-C during it must queue and then cancel, not kill us.
        interrupt::block();
        let say = lines.borrow().as_ref().map(LiveLines::announcer);
        interrupt::cancel_on_interrupt(
            plan.spec.run_id.to_string(),
            wl.interrupter(),
            say.unwrap_or_default(),
        );
    }
    let mut on_started = |started: &Started| {
        for w in &started.warnings {
            eprintln!("subpane: warning: {}", app::Spell::Flag.text(w));
        }
        if let Some(env) = &started.spawn_failed {
            // The pane never started: the `spawn` envelope is the answer, with or without
            // --detach.
            eprintln!("subpane: error: {}", env.output.errors.join("; "));
            return;
        }
        if hint {
            *attach_hint.borrow_mut() = Some((started.spec.clone(), started.paths.clone()));
        }
        if let Some(l) = lines.borrow_mut().as_mut() {
            l.draw();
        }
    };
    let mut on_progress = |p: &app::WaitProgress<'_>| {
        // The first beat, a second in, with the attempt still going: there is a pane to
        // attach to (a run that ended in 2 ms never hears of one).
        if attach_hint_due(p) {
            // Not once it is being cancelled: its pane is about to go.
            let hint = attach_hint.borrow_mut().take();
            if let Some((spec, _)) = hint.filter(|(_, paths)| !paths.cancel().exists()) {
                let which = if spec.attempt > 1 {
                    format!(" attempt {}", spec.attempt)
                } else {
                    String::new()
                };
                let say = lines.borrow().as_ref().map(LiveLines::announcer);
                say.unwrap_or_default().say(&format!(
                    "subpane: run {}{which} is running; watch it with `subpane attach {}`",
                    spec.run_id, spec.run_id
                ));
            }
        }
        if let Some(l) = lines.borrow_mut().as_mut() {
            l.seen(p);
        }
    };
    let opts = app::RunOptions {
        detach,
        on_interrupt: app::OnInterrupt::CancelAndWait,
        heartbeat: (live || hint).then_some(live_line::TICK),
        on_started: Some(&mut on_started),
        on_progress: if live || hint {
            Some(&mut on_progress)
        } else {
            None
        },
        max_wait: None,
        cancel_by: None,
    };
    let outcome = app::run(home, plan, &mut wl, opts);
    if let Some(l) = lines.borrow_mut().as_mut() {
        l.clear();
    }
    match outcome? {
        RunOutcome::Detached(started) => {
            if json {
                print_json(&started.answer());
            } else {
                // stdout stays the id alone (`subpane wait $(subpane retry R --detach)`);
                // which attempt began is news only from a retry, said beside it.
                let spec = &started.spec;
                if spec.attempt > 1 {
                    eprintln!(
                        "subpane: run {} attempt {} started; `subpane wait {}` waits for it",
                        spec.run_id, spec.attempt, spec.run_id
                    );
                }
                print(&format!("{}\n", spec.run_id));
            }
            Ok(crate::exit_code::COMPLETED)
        }
        RunOutcome::Finished { started, envelope } => Ok(report(&envelope, &started.paths, json)),
        // Not asked for: an interrupt cancels and waits, and no max_wait is given.
        RunOutcome::Cancelled(started) | RunOutcome::StillRunning(started) => {
            Err(CliError::StoppedWaiting(started.spec.run_id.to_string()))
        }
    }
}

/// Whether the hint to attach is due at `p`: a beat of the clock (the first comes a second
/// in) while the attempt is still going, never its end.
fn attach_hint_due(p: &app::WaitProgress<'_>) -> bool {
    p.finished.is_none() && p.changed.is_none() && p.done == 0
}

/// Prints a finished attempt's envelope (JSON or a summary) and returns its exit code.
fn report(env: &Envelope, paths: &AttemptPaths, json: bool) -> i32 {
    if json {
        print_json(env);
    } else {
        print(&human_envelope(env, paths));
    }
    env.exit_code()
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::super::{Cli, Command};
    use crate::app::fanout::DEFAULT_CONCURRENCY;
    use crate::spec::Limits;
    use clap::CommandFactory;

    /// The hint to attach comes on a beat while the attempt runs, never with its end nor
    /// after it.
    #[test]
    fn the_attach_hint_waits_for_a_beat_of_a_live_attempt() {
        let results = [None];
        let at = |finished, changed, done| crate::app::WaitProgress {
            finished,
            changed,
            done,
            total: 1,
            elapsed: std::time::Duration::from_secs(1),
            results: &results,
        };
        assert!(super::attach_hint_due(&at(None, None, 0)));
        assert!(!super::attach_hint_due(&at(Some(0), None, 1)));
        assert!(!super::attach_hint_due(&at(None, Some(0), 0)));
        assert!(!super::attach_hint_due(&at(None, None, 1)));
    }

    fn parse(args: &[&str]) -> Command {
        Cli::try_parse_from(args).unwrap().command
    }

    /// Every field of the table is a flag of `subpane run` (or filled by another's `@FILE`):
    /// a field the command line lacks fails here.
    #[test]
    fn run_has_a_flag_for_every_field() {
        use crate::app::field::{FIELDS, Flag};
        // Verbs are built when parsed (`defer`): build them all.
        let mut cmd = Cli::command();
        cmd.build();
        let run = cmd.find_subcommand("run").unwrap();
        for f in FIELDS {
            let arg = run.get_arguments().find(|a| a.get_id() == f.name);
            match f.flag {
                Flag::Long(l) => {
                    assert_eq!(arg.and_then(|a| a.get_long()), Some(l), "{}", f.name)
                }
                Flag::Trailing => assert!(arg.is_some_and(|a| a.is_last_set()), "{}", f.name),
                Flag::AtFileOf(of) => assert!(
                    arg.is_none() && run.get_arguments().any(|a| a.get_id() == of),
                    "{}",
                    f.name
                ),
            }
        }
    }

    /// The flags' defaults are the ones defined once for every front end.
    #[test]
    fn the_flags_default_to_the_limits_in_force() {
        let Command::Run(a) = parse(&["subpane", "run", "--", "true"]) else {
            panic!("not run");
        };
        let req = a.to_request().unwrap();
        // Left to the planner, which applies the defaults `--help` shows.
        assert_eq!((req.linger.as_deref(), req.grace.as_deref()), (None, None));
        let d = Limits::default();
        let shown = format!(
            "[default: {}]",
            crate::spec::duration_text(std::time::Duration::from_millis(d.linger_ms))
        );
        let run = Cli::command()
            .find_subcommand("run")
            .unwrap()
            .clone()
            .render_long_help()
            .to_string();
        assert!(run.contains(&shown), "{run}");
        assert_eq!(
            req.max_depth, None,
            "without the flag, an enclosing limit holds"
        );
        let Command::Fanout(f) = parse(&["subpane", "fanout", "-"]) else {
            panic!("not fanout");
        };
        assert_eq!(f.concurrency, DEFAULT_CONCURRENCY);
    }
}
