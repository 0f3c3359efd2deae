//! `subpane run`: validate, create the attempt, start its pane, and (unless `--detach`) wait.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};

use super::common::{CliError, print, print_json, tmux_for};
use super::output::human_envelope;
use crate::adapter::{ArgvContext, adapter_for};
use crate::envelope::{Envelope, Facts, LaunchRecord};
use crate::spec::{
    AgentKind, AttemptRef, AttemptSpec, EnvSpec, Limits, RUN_SCHEMA, RunId, RunRecord, SPEC_SCHEMA,
    SandboxSpec, Stdin, TaskSpec, TmuxTarget, millis, now_rfc3339, parse_duration,
    parse_positive_duration,
};
use crate::store::{self, AttemptPaths, CreateError, Home};
use crate::supervisor::{self, WaitMode, WaitOptions};
use crate::tmux::{self, Socket};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AgentArg {
    Pi,
    Claude,
    Codex,
}

#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  subpane run -- make test
  subpane run --json --timeout 10m --cwd ~/src/app -- cargo build
  subpane run --detach --run-id review-1 --agent claude --task @task.md
  subpane run --agent pi --model openai/gpt-5 --tools read,bash --task 'fix the failing test'")]
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
    #[arg(long, value_name = "DUR", default_value = "5s")]
    pub linger: String,
    /// Time between SIGTERM and SIGKILL when stopping the process group
    #[arg(long, value_name = "DUR", default_value = "3s")]
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
    /// The program and its arguments (after `--`)
    #[arg(last = true, value_name = "PROGRAM [ARGS]...")]
    pub command: Vec<OsString>,
}

/// A validated run request: everything resolved, nothing created yet.
struct Plan {
    run_id: RunId,
    agent: AgentKind,
    argv: Vec<String>,
    cwd: PathBuf,
    stdin: Stdin,
    labels: BTreeMap<String, String>,
    correlation_id: Option<String>,
    limits: Limits,
    env: Vec<(OsString, OsString)>,
    env_spec: EnvSpec,
    task: Option<TaskSpec>,
    keep_session: bool,
    detach: bool,
    json: bool,
    socket: Socket,
}

/// Reads `@FILE` or returns the text itself.
fn text_or_file(flag: &str, v: &str) -> Result<String, CliError> {
    match v.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| CliError::invalid(format!("cannot read {flag} file `{path}`: {e}"))),
        None => Ok(v.to_owned()),
    }
}

fn parse_kv(flag: &str, raw: &str) -> Result<(String, String), CliError> {
    match raw.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(CliError::invalid(format!(
            "{flag} `{raw}` must look like KEY=VALUE"
        ))),
    }
}

fn valid_env_name(k: &str) -> bool {
    let mut b = k.bytes();
    b.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

fn is_executable(p: &Path) -> bool {
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Finds `program` the way a shell in `cwd` with `path` would.
fn resolve_program(program: &str, cwd: &Path, path: Option<&OsString>) -> Result<PathBuf, String> {
    if program.contains('/') {
        let p = cwd.join(program);
        if is_executable(&p) {
            return Ok(p);
        }
        return Err(if p.exists() {
            format!("`{program}` is not an executable file")
        } else {
            format!("`{program}` does not exist (looked in {})", cwd.display())
        });
    }
    which::which_in(program, path, cwd)
        .map_err(|_| format!("program `{program}` was not found on PATH"))
}

fn plan(a: RunArgs) -> Result<Plan, CliError> {
    let run_id = match &a.run_id {
        Some(r) => RunId::parse(r).map_err(|e| CliError::invalid(e.to_string()))?,
        None => RunId::generate(),
    };
    let limits = Limits {
        timeout_ms: a
            .timeout
            .as_deref()
            .map(|t| parse_positive_duration("--timeout", t))
            .transpose()
            .map_err(|e| CliError::invalid(e.to_string()))?
            .map(millis),
        idle_timeout_ms: a
            .idle_timeout
            .as_deref()
            .map(|t| parse_positive_duration("--idle-timeout", t))
            .transpose()
            .map_err(|e| CliError::invalid(e.to_string()))?
            .map(millis),
        linger_ms: millis(
            parse_duration("--linger", &a.linger).map_err(|e| CliError::invalid(e.to_string()))?,
        ),
        grace_ms: millis(
            parse_duration("--grace", &a.grace).map_err(|e| CliError::invalid(e.to_string()))?,
        ),
    };
    let cwd_raw = match &a.cwd {
        Some(c) => c.clone(),
        None => std::env::current_dir().map_err(|e| {
            CliError::invalid(format!(
                "cannot read the current directory: {e}; pass --cwd"
            ))
        })?,
    };
    let cwd = std::fs::canonicalize(&cwd_raw).map_err(|e| {
        CliError::invalid(format!("--cwd `{}` cannot be used: {e}", cwd_raw.display()))
    })?;
    if !cwd.is_dir() {
        return Err(CliError::invalid(format!(
            "--cwd `{}` is not a directory",
            cwd.display()
        )));
    }
    let mut labels = BTreeMap::new();
    for l in &a.labels {
        let (k, v) = parse_kv("--label", l)?;
        labels.insert(k, v);
    }
    // The environment: ours, minus tmux's variables, plus --env.
    let removed = ["TMUX", "TMUX_PANE"];
    let mut env: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter(|(k, _)| !removed.iter().any(|r| k.as_bytes() == r.as_bytes()))
        .collect();
    let mut set = Vec::new();
    for e in &a.envs {
        let (k, v) = parse_kv("--env", e)?;
        if !valid_env_name(&k) {
            return Err(CliError::invalid(format!(
                "--env name `{k}` is not a valid variable name"
            )));
        }
        env.retain(|(ek, _)| ek.as_bytes() != k.as_bytes());
        env.push((k.clone().into(), v.into()));
        if !set.contains(&k) {
            set.push(k);
        }
    }
    let path_var = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone());
    let (agent, argv, task, stdin) = match (a.agent, a.command.is_empty()) {
        (Some(_), false) => {
            return Err(CliError::invalid(
                "give either --agent with --task, or a program after `--`, not both",
            ));
        }
        (None, true) => {
            return Err(CliError::invalid(
                "nothing to run: give a program after `--` (e.g. `subpane run -- make test`) or --agent with --task",
            ));
        }
        (None, false) => {
            if a.task.is_some() {
                return Err(CliError::invalid(
                    "--task needs --agent; a program after `--` takes its own arguments",
                ));
            }
            let mut argv: Vec<String> = Vec::with_capacity(a.command.len());
            for arg in &a.command {
                argv.push(arg.to_str().map(str::to_owned).ok_or_else(|| {
                    CliError::invalid(format!("argument {arg:?} is not valid UTF-8"))
                })?);
            }
            let program =
                resolve_program(&argv[0], &cwd, path_var.as_ref()).map_err(CliError::invalid)?;
            argv[0] = program.display().to_string();
            (AgentKind::Command, argv, None, Stdin::Null)
        }
        (Some(kind), true) => {
            let kind = match kind {
                AgentArg::Pi => AgentKind::Pi,
                AgentArg::Claude => AgentKind::Claude,
                AgentArg::Codex => AgentKind::Codex,
            };
            let adapter = adapter_for(kind);
            let task_raw = a.task.as_deref().unwrap_or_default();
            let prompt = text_or_file("--task", task_raw)?;
            if prompt.trim().is_empty() {
                return Err(CliError::invalid(
                    "--task is empty; say what the agent should do",
                ));
            }
            let system_prompt = a
                .system_prompt
                .as_deref()
                .map(|s| text_or_file("--system-prompt", s))
                .transpose()?;
            let binary = adapter.binary().unwrap_or("?");
            let program = which::which_in(binary, path_var.as_ref(), &cwd).map_err(|_| {
                CliError::invalid(format!(
                    "the {} CLI `{binary}` was not found on PATH; install it with `{}`",
                    kind.as_str(),
                    adapter.install_hint()
                ))
            })?;
            let task = TaskSpec {
                prompt,
                model: a.model.clone(),
                system_prompt,
                tools: a
                    .tools
                    .iter()
                    .map(|t| t.trim().to_owned())
                    .filter(|t| !t.is_empty())
                    .collect(),
                thinking: a.thinking.clone(),
                resume_session: a.resume.clone(),
            };
            (
                kind,
                vec![program.display().to_string()],
                Some(task),
                Stdin::Null,
            )
        }
    };
    Ok(Plan {
        run_id,
        agent,
        argv,
        cwd,
        stdin,
        labels,
        correlation_id: a.correlation_id,
        limits,
        env,
        env_spec: EnvSpec {
            inherit: true,
            set,
            removed: removed.iter().map(|s| (*s).to_owned()).collect(),
        },
        task,
        keep_session: a.keep_session,
        detach: a.detach,
        json: a.json,
        socket: Socket::from_env(),
    })
}

/// Writes the private server's config if it is missing or different.
fn ensure_tmux_conf(home: &Home) -> Result<(), CliError> {
    let p = home.tmux_conf();
    if std::fs::read(&p).ok().as_deref() != Some(tmux::CONFIG.as_bytes()) {
        std::fs::create_dir_all(home.root()).map_err(|e| {
            CliError::invalid(format!("cannot create the subpane home {}: {e}; set --home or SUBPANE_HOME to a writable directory", home.root().display()))
        })?;
        store::write_atomic(&p, tmux::CONFIG.as_bytes())
            .map_err(|e| CliError::invalid(e.to_string()))?;
    }
    Ok(())
}

pub fn run(home: &Home, a: RunArgs) -> Result<i32, CliError> {
    let mut p = plan(a)?;
    which::which("tmux")
        .map_err(|_| CliError::invalid("tmux was not found on PATH; install tmux 3.2 or newer"))?;
    if !p.detach {
        supervisor::block_interrupts();
    }
    ensure_tmux_conf(home)?;
    let session = tmux::session_name(p.run_id.as_str(), 1);
    let paths = home.attempt(&p.run_id, 1);
    // Agents: the adapter builds the argv now that the paths are known.
    if let Some(task) = &p.task {
        let run_dir = home.run_dir(&p.run_id);
        let sessions_dir = home.sessions_dir(p.agent.as_str());
        let ctx = ArgvContext {
            run_dir: &run_dir,
            sessions_dir: &sessions_dir,
            attempt_dir: paths.dir(),
            prompt_file: &paths.prompt(),
        };
        let launch = adapter_for(p.agent).launch(&p.argv[0], task, &ctx);
        p.argv = launch.argv;
        p.stdin = launch.stdin;
    }
    let created_at = now_rfc3339();
    let spec = AttemptSpec {
        schema: SPEC_SCHEMA.to_owned(),
        run_id: p.run_id.clone(),
        attempt: 1,
        agent: p.agent,
        argv: p.argv.clone(),
        cwd: p.cwd.clone(),
        stdin: p.stdin,
        labels: p.labels.clone(),
        correlation_id: p.correlation_id.clone(),
        limits: p.limits.clone(),
        env: p.env_spec.clone(),
        task: p.task.clone(),
        keep_session: p.keep_session,
        tmux: TmuxTarget {
            socket: p.socket.path(),
            session: session.clone(),
        },
        sandbox: SandboxSpec::default(),
        created_at: created_at.clone(),
    };
    let record = RunRecord {
        schema: RUN_SCHEMA.to_owned(),
        run_id: p.run_id.clone(),
        agent: p.agent,
        labels: p.labels.clone(),
        correlation_id: p.correlation_id.clone(),
        group: None,
        created_at: created_at.clone(),
        attempts: vec![AttemptRef {
            attempt: 1,
            created_at,
        }],
    };
    let prompt = p.task.as_ref().map(|t| t.prompt.as_str());
    let paths = store::create_run(home, &record, &spec, &p.env, prompt).map_err(|e| match e {
        CreateError::Exists(_) => CliError::invalid(e.to_string()),
        CreateError::Store(s) => CliError::invalid(format!("nothing was started: {s}")),
    })?;
    if let Some(env) = launch(home, &paths, &spec)? {
        // The pane never started: the `spawn` envelope is the answer, with or without --detach.
        eprintln!("subpane: error: {}", env.output.errors.join("; "));
        return Ok(report(&env, &paths, p.json));
    }
    if p.detach {
        if p.json {
            print_json(&serde_json::json!({
                "run_id": spec.run_id,
                "attempt": spec.attempt,
                "status": "running",
                "attempt_dir": paths.dir(),
                "tmux": {"socket": spec.tmux.socket, "session": spec.tmux.session},
            }));
        } else {
            print(&format!("{}\n", spec.run_id));
        }
        return Ok(crate::exit_code::COMPLETED);
    }
    use std::io::IsTerminal;
    if !p.json && std::io::stderr().is_terminal() {
        eprintln!(
            "subpane: run {} started; watch it with `subpane attach {}`",
            spec.run_id, spec.run_id
        );
    }
    let targets = vec![(paths.clone(), spec.clone())];
    let out = supervisor::wait(
        &targets,
        &WaitOptions {
            mode: WaitMode::All,
            timeout: None,
            cancel_on_interrupt: true,
        },
    )?;
    let env = out
        .results
        .into_iter()
        .next()
        .flatten()
        .ok_or_else(|| CliError::failed("the attempt ended without an envelope"))?;
    Ok(report(&env, &paths, p.json))
}

/// Prints a finished attempt's envelope (JSON or a summary) and returns its exit code.
fn report(env: &Envelope, paths: &AttemptPaths, json: bool) -> i32 {
    if json {
        print_json(env);
    } else {
        print(&human_envelope(env, paths.dir()));
    }
    env.exit_code()
}

/// Starts the attempt's pane and records where it is. A failure to start is an outcome: the
/// attempt gets a `spawn` envelope, which is returned.
pub fn launch(
    home: &Home,
    paths: &AttemptPaths,
    spec: &AttemptSpec,
) -> Result<Option<Envelope>, CliError> {
    let exe = std::env::current_exe()
        .map_err(|e| CliError::failed(format!("cannot find the subpane binary: {e}")))?;
    // tmux creates the directory of a `-L` socket but not of a `-S` one; we always use `-S`.
    if let Some(dir) = spec.tmux.socket.parent() {
        if !dir.exists() {
            use std::os::unix::fs::DirBuilderExt;
            let _ = std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir);
        }
    }
    let t = tmux_for(home, spec);
    let cmd: Vec<OsString> = vec![exe.into(), "__worker".into(), paths.dir().into()];
    match t.new_session(&spec.tmux.session, &spec.cwd, &cmd, spec.keep_session) {
        Ok(pane) => {
            let rec = LaunchRecord {
                socket: spec.tmux.socket.display().to_string(),
                session: spec.tmux.session.clone(),
                pane_id: pane.pane_id,
                worker: crate::procs::proc_ref(pane.pane_pid),
                launched_at: now_rfc3339(),
            };
            // Best effort, and its directory is synced by the worker's later writes: the pane
            // runs now and the worker names itself in worker.json, so an attempt that started
            // is never given up on for want of this file.
            if let Err(e) = store::write_json_dir_synced_later(&paths.launch(), &rec) {
                eprintln!("subpane: warning: {e}");
            }
            Ok(None)
        }
        Err(e) => {
            // If a pane was made after all, it must not run on beside a `spawn` envelope.
            let _ = t.kill_session(&spec.tmux.session);
            let spawn_failed = Facts {
                spawn_failed: true,
                ..Facts::default()
            };
            let why = format!("the tmux pane could not be started: {e}");
            Ok(Some(supervisor::write_unfinished(
                paths,
                spec,
                spawn_failed,
                &why,
            )?))
        }
    }
}
