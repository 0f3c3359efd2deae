//! `subpane run`: flags → [`RunRequest`] → plan → [`app::run`] (start, and unless `--detach`
//! wait) → print.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::LazyLock;

use clap::{Args, ValueEnum};

use super::CliError;
use super::common::{print, print_json};
use super::interrupt;
use super::live_line::{self, LiveLines};
use super::output::human_envelope;
use crate::app::{self, RealSystem, RunOutcome, RunRequest, Started, parse_kv};
use crate::envelope::Envelope;
use crate::spec::{AgentKind, DEFAULT_GRACE, DEFAULT_LINGER, DEFAULT_MAX_DEPTH, duration_text};
use crate::store::{AttemptPaths, Home};

/// The defaults of the limits as `--help` shows them: [`crate::spec::Limits::default`]'s.
static DEFAULT_LINGER_TEXT: LazyLock<String> = LazyLock::new(|| duration_text(DEFAULT_LINGER));
static DEFAULT_GRACE_TEXT: LazyLock<String> = LazyLock::new(|| duration_text(DEFAULT_GRACE));
static MAX_DEPTH_HELP: LazyLock<String> = LazyLock::new(|| {
    format!(
        "How deep runs started by this run's program may nest (it can only lower the limit an \
         enclosing attempt gave) [default: {DEFAULT_MAX_DEPTH}]"
    )
});

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
    /// The agent CLI to run (or give a program after `--`)
    #[arg(long, value_enum, requires = "task")]
    pub agent: Option<AgentArg>,
    /// The task for the agent: text, or @FILE to read it from a file
    #[arg(long, value_name = "TEXT|@FILE")]
    pub task: Option<String>,
    /// The run id [default: generated, e.g. 20261130-033943-a1b2c3]
    #[arg(long, value_name = "ID")]
    pub run_id: Option<String>,
    /// Directory the program runs in [default: the current directory]
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Return at once with the run id; the attempt runs on and its limits still hold
    #[arg(long)]
    pub detach: bool,
    /// Print exactly one JSON document: the envelope (or, with --detach, the run id)
    #[arg(long)]
    pub json: bool,
    /// A label K=V recorded in run.json and the envelope (repeatable)
    #[arg(long = "label", value_name = "K=V")]
    pub labels: Vec<String>,
    /// An id of the caller's, recorded as is
    #[arg(long, value_name = "ID")]
    pub correlation_id: Option<String>,
    /// Stop the attempt after this long (e.g. 30s, 10m, 2h)
    #[arg(long, value_name = "DUR")]
    pub timeout: Option<String>,
    /// Stop the attempt after this long without output on stdout or stderr
    #[arg(long, value_name = "DUR")]
    pub idle_timeout: Option<String>,
    /// How long an agent may stay alive after its final event
    #[arg(long, value_name = "DUR", default_value = DEFAULT_LINGER_TEXT.as_str())]
    pub linger: String,
    /// Time between SIGTERM and SIGKILL when stopping the process group
    #[arg(long, value_name = "DUR", default_value = DEFAULT_GRACE_TEXT.as_str())]
    pub grace: String,
    /// Model for the agent
    #[arg(long, value_name = "M", requires = "agent")]
    pub model: Option<String>,
    /// System prompt for the agent: text, or @FILE
    #[arg(long, value_name = "TEXT|@FILE", requires = "agent")]
    pub system_prompt: Option<String>,
    /// Tools the agent may use, comma-separated (claude: pre-approved with --allowedTools)
    #[arg(long, value_name = "a,b", value_delimiter = ',', requires = "agent")]
    pub tools: Vec<String>,
    /// Thinking level for the agent
    #[arg(long, value_name = "LEVEL", requires = "agent")]
    pub thinking: Option<String>,
    /// Continue this agent session (its id from an earlier envelope's output.session_id)
    #[arg(long, value_name = "SESSION_ID", requires = "agent")]
    pub resume: Option<String>,
    /// Set K=V in the program's environment (repeatable); records keep the name only
    #[arg(long = "env", value_name = "K=V")]
    pub envs: Vec<String>,
    /// Keep the tmux session after the attempt ends, to read the pane (`subpane gc` removes it)
    #[arg(long)]
    pub keep_session: bool,
    /// Run in a new git worktree of the --cwd repository: made from HEAD under
    /// $SUBPANE_HOME/worktrees/RUN-N on branch subpane/RUN, at --cwd's place in the repository.
    /// At the end its status and diff go to the attempt directory; a completed attempt's
    /// worktree is removed (its branch too unless it has commits), a failed or cancelled one
    /// is kept until `subpane gc`. Outside a git work tree: refused (exit 2)
    #[arg(long)]
    pub worktree: bool,
    // How deep runs may nest; not a clap default: without the flag the limit an enclosing
    // attempt gave holds.
    #[arg(long, value_name = "N", help = MAX_DEPTH_HELP.as_str())]
    pub max_depth: Option<u32>,
    /// Run the program in a kernel sandbox: it writes only its workspace (--cwd, or the
    /// worktree; the repository's git directory is its own private copy, and only its branch
    /// comes back), its artifact directory, a private /tmp and --writable paths; no network
    /// unless --network says so
    #[arg(long, help_heading = "Sandbox")]
    pub sandbox: bool,
    /// Network of a sandboxed program: none (its own loopback only), full, or
    /// allow:HOST,… (host names, IP literals or *.example.com, through subpane's egress proxy)
    #[arg(long, value_name = "POLICY", help_heading = "Sandbox")]
    pub network: Option<String>,
    /// Also let the sandboxed program write this file or tree (repeatable)
    #[arg(long, value_name = "PATH", help_heading = "Sandbox")]
    pub writable: Vec<PathBuf>,
    /// Hide this file or tree from the sandboxed program (repeatable)
    #[arg(long, value_name = "PATH", help_heading = "Sandbox")]
    pub hide: Vec<PathBuf>,
    /// Pass this variable from your environment into the sandbox (repeatable); a sandboxed
    /// program gets only what its agent needs (PATH, HOME, TERM, LANG, its API keys) plus these
    /// and --env
    #[arg(long, value_name = "NAME", help_heading = "Sandbox")]
    pub env_pass: Vec<String>,
    /// Processes and threads the sandboxed program may have at once, at least 300
    /// [default: 4096]
    #[arg(long, value_name = "N", help_heading = "Sandbox")]
    pub max_procs: Option<u32>,
    /// What one sandboxed process may allocate (its heap and writable mappings), like 4G
    /// [default: 8G]
    #[arg(long, value_name = "SIZE", help_heading = "Sandbox")]
    pub max_memory: Option<String>,
    /// The size of the sandbox's private /tmp (its files take memory) [default: 2G]
    #[arg(long, value_name = "SIZE", help_heading = "Sandbox")]
    pub max_tmp: Option<String>,
    /// The largest file a sandboxed process may write [default: 8G]
    #[arg(long, value_name = "SIZE", help_heading = "Sandbox")]
    pub max_file_size: Option<String>,
    /// The program and its arguments (after `--`)
    #[arg(last = true, value_name = "PROGRAM [ARGS]...")]
    pub command: Vec<OsString>,
}

impl RunArgs {
    /// The request these flags make. Checks only what clap cannot: the shape of `K=V` and
    /// that the program's arguments are text.
    pub fn to_request(&self) -> Result<RunRequest, CliError> {
        let mut argv: Vec<String> = Vec::with_capacity(self.command.len());
        for arg in &self.command {
            argv.push(
                arg.to_str().map(str::to_owned).ok_or_else(|| {
                    CliError::Flag(format!("argument {arg:?} is not valid UTF-8"))
                })?,
            );
        }
        let mut labels = std::collections::BTreeMap::new();
        for l in &self.labels {
            let (k, v) = parse_kv("--label", l)?;
            labels.insert(k, v);
        }
        let mut env = std::collections::BTreeMap::new();
        for e in &self.envs {
            let (k, v) = parse_kv("--env", e)?;
            env.insert(k, v);
        }
        let mut req = RunRequest {
            agent: self.agent.map(AgentArg::kind),
            task: self.task.clone(),
            task_file: None,
            argv,
            run_id: self.run_id.clone(),
            cwd: self.cwd.clone(),
            model: self.model.clone(),
            system_prompt: self.system_prompt.clone(),
            system_prompt_file: None,
            tools: self.tools.clone(),
            thinking: self.thinking.clone(),
            resume: self.resume.clone(),
            labels,
            correlation_id: self.correlation_id.clone(),
            timeout: self.timeout.clone(),
            idle_timeout: self.idle_timeout.clone(),
            linger: Some(self.linger.clone()),
            grace: Some(self.grace.clone()),
            env,
            keep_session: self.keep_session,
            sandbox: self.sandbox,
            network: self.network.clone(),
            writable: self.writable.clone(),
            hide: self.hide.clone(),
            env_pass: self.env_pass.clone(),
            max_procs: self.max_procs,
            max_memory: self.max_memory.clone(),
            max_tmp: self.max_tmp.clone(),
            max_file_size: self.max_file_size.clone(),
            worktree: self.worktree,
            max_depth: self.max_depth,
        };
        req.read_at_files();
        Ok(req)
    }
}

pub fn run(home: &Home, a: RunArgs) -> Result<i32, CliError> {
    let plan = app::plan(&a.to_request()?, home, &RealSystem)?;
    start_and_report(home, plan, a.detach, a.json)
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
            eprintln!("subpane: warning: {w}");
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
    use crate::spec::{Limits, millis, parse_duration};

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

    /// The flags' defaults are the ones defined once for every front end.
    #[test]
    fn the_flags_default_to_the_limits_in_force() {
        let Command::Run(a) = parse(&["subpane", "run", "--", "true"]) else {
            panic!("not run");
        };
        let req = a.to_request().unwrap();
        let ms = |v: Option<String>| millis(parse_duration("", &v.unwrap()).unwrap());
        let d = Limits::default();
        assert_eq!(ms(req.linger), d.linger_ms);
        assert_eq!(ms(req.grace), d.grace_ms);
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
