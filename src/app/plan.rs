//! From a [`RunRequest`] to a [`Plan`]: every rule of valid input, in one function.
//!
//! The plan looks at the world only through [`System`] (the current directory, files named
//! with `@FILE` or `--cwd`, `PATH` lookups, the clock), so each rule has a unit test with a
//! fake system and no tmux server. Nothing is created here.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::{Error, RunRequest, worktree};
use crate::adapter::{ArgvContext, BASE_ENV, adapter_for, env_allowed};
use crate::git::{REPO_VARS, RepoDirs};
use crate::spec::{
    AgentKind, AttemptRef, AttemptSpec, DEFAULT_MAX_DEPTH, EnvSpec, Limits, Lineage, Network,
    RUN_SCHEMA, RunId, RunRecord, SPEC_SCHEMA, SandboxSpec, Stdin, TaskSpec, TmuxTarget, millis,
    parse_duration, parse_positive_duration,
};
use crate::store::Home;
use crate::tmux;

/// Variables removed from the program's environment: it must not talk to the user's tmux.
const REMOVED_VARS: [&str; 2] = ["TMUX", "TMUX_PANE"];

/// Linux refuses one argument of 128 KiB or more (`MAX_ARG_STRLEN`, with its NUL).
pub const MAX_ARG_BYTES: usize = 128 * 1024 - 1;

/// What the plan may ask of the world.
pub trait System {
    /// The caller's current directory (the default `--cwd`).
    fn current_dir(&self) -> std::io::Result<PathBuf>;
    /// An absolute path with links resolved; an error when it does not exist.
    fn canonicalize(&self, p: &Path) -> std::io::Result<PathBuf>;
    fn is_dir(&self, p: &Path) -> bool;
    /// Reads a file named with `@FILE`.
    fn read_to_string(&self, p: &Path) -> std::io::Result<String>;
    /// The caller's environment.
    fn vars(&self) -> Vec<(OsString, OsString)>;
    /// Finds `program` on `path`, as a shell in `cwd` would.
    fn which(&self, program: &str, path: Option<&OsStr>, cwd: &Path) -> Option<PathBuf>;
    /// `None` when nothing is at `p`; else whether it is an executable file.
    fn executable(&self, p: &Path) -> Option<bool>;
    /// The private tmux server's socket path.
    fn tmux_socket(&self) -> PathBuf;
    fn now(&self) -> SystemTime;
    fn new_run_id(&self) -> RunId;
    /// The kernel's limit on argv and environment together (`ARG_MAX`).
    fn arg_max(&self) -> usize;
    /// The git work tree `dir` is in (its top and the repository's git directory), or
    /// `None` outside one.
    fn git_repo(&self, dir: &Path) -> Option<RepoDirs>;
}

/// The real machine.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealSystem;

impl System for RealSystem {
    fn current_dir(&self) -> std::io::Result<PathBuf> {
        std::env::current_dir()
    }
    fn canonicalize(&self, p: &Path) -> std::io::Result<PathBuf> {
        std::fs::canonicalize(p)
    }
    fn is_dir(&self, p: &Path) -> bool {
        p.is_dir()
    }
    fn read_to_string(&self, p: &Path) -> std::io::Result<String> {
        std::fs::read_to_string(p)
    }
    fn vars(&self) -> Vec<(OsString, OsString)> {
        std::env::vars_os().collect()
    }
    fn which(&self, program: &str, path: Option<&OsStr>, cwd: &Path) -> Option<PathBuf> {
        which::which_in(program, path, cwd).ok()
    }
    fn executable(&self, p: &Path) -> Option<bool> {
        let m = std::fs::metadata(p).ok()?;
        Some(m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    fn tmux_socket(&self) -> PathBuf {
        tmux::Socket::from_env().path()
    }
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
    fn new_run_id(&self) -> RunId {
        RunId::generate()
    }
    fn arg_max(&self) -> usize {
        // SAFETY: sysconf with a constant name has no preconditions.
        let n = unsafe { libc::sysconf(libc::_SC_ARG_MAX) };
        usize::try_from(n)
            .ok()
            .filter(|n| *n > 0)
            .unwrap_or(128 * 1024)
    }
    fn git_repo(&self, dir: &Path) -> Option<RepoDirs> {
        crate::git::discover(dir).ok().flatten()
    }
}

/// A request made valid and complete: the launcher needs nothing else.
#[derive(Clone, PartialEq, Eq)]
pub struct Plan {
    /// `run.json` of a new run.
    pub record: RunRecord,
    /// `spec.json` of the attempt.
    pub spec: AttemptSpec,
    /// The program's environment. Values: only ever written to the one-shot environment file.
    pub env: Vec<(OsString, OsString)>,
    /// The task, written to `prompt.txt`.
    pub prompt: Option<String>,
}

impl std::fmt::Debug for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plan")
            .field("record", &self.record)
            .field("spec", &self.spec)
            .field("env", &self.env.iter().map(|(k, _)| k).collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

fn invalid(e: impl std::fmt::Display) -> Error {
    Error::invalid(e.to_string())
}

/// Reads `@FILE` or returns the text itself.
pub(super) fn text_or_file(sys: &dyn System, flag: &str, v: &str) -> Result<String, Error> {
    match v.strip_prefix('@') {
        Some(path) => sys
            .read_to_string(Path::new(path))
            .map_err(|e| Error::invalid(format!("cannot read {flag} file `{path}`: {e}"))),
        None => Ok(v.to_owned()),
    }
}

fn valid_env_name(k: &str) -> bool {
    let mut b = k.bytes();
    b.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// Finds `program` the way a shell in `cwd` with `path` would.
fn resolve_program(
    sys: &dyn System,
    program: &str,
    cwd: &Path,
    path: Option<&OsStr>,
) -> Result<PathBuf, Error> {
    if program.contains('/') {
        let p = cwd.join(program);
        return match sys.executable(&p) {
            Some(true) => Ok(p),
            Some(false) => Err(Error::invalid(format!(
                "`{program}` is not an executable file"
            ))),
            None => Err(Error::invalid(format!(
                "`{program}` does not exist (looked in {})",
                cwd.display()
            ))),
        };
    }
    sys.which(program, path, cwd)
        .ok_or_else(|| Error::invalid(format!("program `{program}` was not found on PATH")))
}

fn limits(req: &RunRequest) -> Result<Limits, Error> {
    let positive = |flag: &str, v: &Option<String>| -> Result<Option<u64>, Error> {
        v.as_deref()
            .map(|t| {
                parse_positive_duration(flag, t)
                    .map(millis)
                    .map_err(invalid)
            })
            .transpose()
    };
    let any = |flag: &str, v: &Option<String>, default: u64| -> Result<u64, Error> {
        v.as_deref()
            .map(|t| parse_duration(flag, t).map(millis).map_err(invalid))
            .transpose()
            .map(|v| v.unwrap_or(default))
    };
    let d = Limits::default();
    Ok(Limits {
        timeout_ms: positive("--timeout", &req.timeout)?,
        idle_timeout_ms: positive("--idle-timeout", &req.idle_timeout)?,
        linger_ms: any("--linger", &req.linger, d.linger_ms)?,
        grace_ms: any("--grace", &req.grace, d.grace_ms)?,
    })
}

/// The proxy as the sandboxed program reaches it (the relay in its network namespace).
fn proxy_url() -> String {
    format!("http://127.0.0.1:{}", crate::sandbox::PROXY_PORT)
}

/// The program's environment: the caller's minus tmux's variables (in a sandbox: only what
/// the adapter needs and `env_pass`), plus `env`, plus what the sandbox sets.
pub(super) fn environment(
    req: &RunRequest,
    sys: &dyn System,
    agent: AgentKind,
    network: &Network,
) -> Result<(Vec<(OsString, OsString)>, EnvSpec), Error> {
    for name in &req.env_pass {
        if !valid_env_name(name) {
            return Err(Error::invalid(format!(
                "--env-pass name `{name}` is not a valid variable name"
            )));
        }
    }
    let needs = adapter_for(agent).sandbox_needs();
    let keep = |k: &OsStr| -> bool {
        let Some(k) = k.to_str() else { return false };
        // A `--worktree` program's git must find the worktree, not a caller's GIT_DIR.
        if REMOVED_VARS.contains(&k) || (req.worktree && REPO_VARS.contains(&k)) {
            return false;
        }
        !req.sandbox
            || env_allowed(BASE_ENV, k)
            || env_allowed(needs.env, k)
            || req.env_pass.iter().any(|p| p == k)
    };
    let mut env: Vec<(OsString, OsString)> =
        sys.vars().into_iter().filter(|(k, _)| keep(k)).collect();
    let mut passed: Vec<String> = Vec::new();
    if req.sandbox {
        passed = env
            .iter()
            .filter_map(|(k, _)| k.to_str().map(str::to_owned))
            .collect();
        passed.sort();
    }
    let mut set = Vec::new();
    let mut put = |env: &mut Vec<(OsString, OsString)>, k: &str, v: &str| {
        env.retain(|(ek, _)| ek.as_bytes() != k.as_bytes());
        env.push((k.into(), v.into()));
        if !set.iter().any(|s| s == k) {
            set.push(k.to_owned());
        }
    };
    if req.sandbox {
        // The private /tmp of the sandbox.
        put(&mut env, "TMPDIR", "/tmp");
        if matches!(network, Network::Allow(_)) {
            let url = proxy_url();
            for k in [
                "HTTP_PROXY",
                "HTTPS_PROXY",
                "ALL_PROXY",
                "http_proxy",
                "https_proxy",
                "all_proxy",
            ] {
                put(&mut env, k, &url);
            }
            // Node honours the variables only when asked to.
            put(&mut env, "NODE_USE_ENV_PROXY", "1");
        }
    }
    for (k, v) in &req.env {
        if !valid_env_name(k) {
            return Err(Error::invalid(format!(
                "--env name `{k}` is not a valid variable name"
            )));
        }
        put(&mut env, k, v);
    }
    let spec = EnvSpec {
        inherit: !req.sandbox,
        set,
        removed: REMOVED_VARS
            .iter()
            .chain(if req.worktree { REPO_VARS } else { &[] })
            .map(|s| (*s).to_owned())
            .collect(),
        passed,
    };
    Ok((env, spec))
}

/// The sandbox policy, every path resolved. Sandbox flags without `--sandbox` are refused.
fn sandbox_policy(
    req: &RunRequest,
    sys: &dyn System,
    ctx: &PolicyContext<'_>,
    network: Network,
) -> Result<SandboxSpec, Error> {
    if !req.sandbox {
        let given = [
            ("--network", req.network.is_some()),
            ("--writable", !req.writable.is_empty()),
            ("--hide", !req.hide.is_empty()),
            ("--env-pass", !req.env_pass.is_empty()),
        ];
        if let Some((flag, _)) = given.iter().find(|(_, g)| *g) {
            return Err(Error::invalid(format!(
                "{flag} is a sandbox setting: add --sandbox to run sandboxed"
            )));
        }
        return Ok(SandboxSpec::default());
    }
    let resolve = |flag: &str, p: &Path| -> Result<PathBuf, Error> {
        let abs = if p.is_absolute() {
            p.to_path_buf()
        } else {
            ctx.caller_dir.join(p)
        };
        sys.canonicalize(&abs)
            .map_err(|e| Error::invalid(format!("{flag} `{}` cannot be used: {e}", p.display())))
    };
    let mut writable = vec![ctx.cwd.to_path_buf(), ctx.attempt_dir.to_path_buf()];
    writable.extend(ctx.agent_dirs.iter().cloned());
    for w in &req.writable {
        writable.push(resolve("--writable", w)?);
    }
    let mut hidden = Vec::new();
    for h in &req.hide {
        hidden.push(resolve("--hide", h)?);
    }
    // The tmux server would run anything asked of it, outside the sandbox.
    hidden.push(ctx.tmux_socket.to_path_buf());
    // A hook or a config written in the workspace's repository would run outside the
    // sandbox on the user's next git command.
    let mut read_only = Vec::new();
    let git = ctx.cwd.join(".git");
    if sys.is_dir(&git) {
        // hooks: the launcher creates it when missing, so that it can be made read-only.
        let config = git.join("config");
        let config_exists = sys.canonicalize(&config).is_ok();
        for p in [git.join("hooks"), config] {
            let named = req
                .writable
                .iter()
                .any(|w| resolve("--writable", w).ok().as_ref() == Some(&p));
            let exists = p.ends_with("hooks") || config_exists;
            if !named && exists {
                read_only.push(p);
            }
        }
    }
    // Sockets that would act outside the sandbox for whoever connects (Landlock cannot refuse
    // connecting to a pathname Unix socket): the Docker daemon, the D-Bus buses, the user's
    // runtime directory (session bus, keyrings) and the SSH agent.
    for p in ctx.escape_sockets {
        if let Ok(p) = sys.canonicalize(p) {
            if !hidden.contains(&p) {
                hidden.push(p);
            }
        }
    }
    writable.dedup();
    Ok(SandboxSpec {
        enabled: true,
        network,
        writable,
        read_only,
        hidden,
        env_pass: req.env_pass.clone(),
    })
}

/// What the sandbox policy is made from, besides the request.
struct PolicyContext<'a> {
    caller_dir: &'a Path,
    cwd: &'a Path,
    attempt_dir: &'a Path,
    tmux_socket: &'a Path,
    /// State directories of the agent CLI (it writes them).
    agent_dirs: Vec<PathBuf>,
    /// Sockets to hide when they exist (see [`escape_sockets`]).
    escape_sockets: &'a [PathBuf],
}

/// Well-known sockets that act for whoever connects, and the caller's own ones.
pub(super) fn escape_sockets(var: &dyn Fn(&str) -> Option<OsString>) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = [
        "/var/run/docker.sock",
        "/run/docker.sock",
        "/run/dbus",
        "/var/run/dbus",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    for name in ["XDG_RUNTIME_DIR", "SSH_AUTH_SOCK"] {
        if let Some(p) = var(name).filter(|p| Path::new(p).is_absolute()) {
            v.push(PathBuf::from(p));
        }
    }
    v
}

/// Where this run sits below the attempt that starts it (from the `SUBPANE_*` variables
/// every attempt's program gets), and the nesting limit in force: the lower of `max_depth`
/// and the one inherited. A run deeper than the limit is refused, naming the chain.
fn lineage(
    req: &RunRequest,
    var: &dyn Fn(&str) -> Option<OsString>,
    run_id: &RunId,
) -> Result<(Option<Lineage>, u32), Error> {
    let num =
        |name: &str| var(name).and_then(|v| v.to_str().and_then(|s| s.trim().parse::<u32>().ok()));
    let max = match (req.max_depth, num("SUBPANE_MAX_DEPTH")) {
        (Some(asked), Some(inherited)) => asked.min(inherited),
        (asked, inherited) => asked.or(inherited).unwrap_or(DEFAULT_MAX_DEPTH),
    };
    let Some(parent) = var("SUBPANE_RUN_ID").and_then(|v| v.into_string().ok()) else {
        return Ok((None, max));
    };
    let mut chain: Vec<String> = var("SUBPANE_CHAIN")
        .and_then(|v| v.into_string().ok())
        .map(|c| {
            c.split('/')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    if chain.last() != Some(&parent) {
        chain.push(parent.clone());
    }
    let depth = num("SUBPANE_DEPTH").unwrap_or(0) + 1;
    if depth > max {
        return Err(Error::invalid(format!(
            "runs may nest at most {max} deep (--max-depth, inherited through SUBPANE_MAX_DEPTH), and this one would be {depth} deep: {} > {run_id}; finish the work in this run instead of starting another",
            chain.join(" > ")
        )));
    }
    Ok((
        Some(Lineage {
            parent_run: parent,
            parent_attempt: num("SUBPANE_ATTEMPT").unwrap_or(1),
            depth,
            chain,
        }),
        max,
    ))
}

/// What runs: the adapter, the argv, the task.
struct Program {
    agent: AgentKind,
    argv: Vec<String>,
    task: Option<TaskSpec>,
}

fn program(
    req: &RunRequest,
    sys: &dyn System,
    cwd: &Path,
    path: Option<&OsStr>,
) -> Result<Program, Error> {
    let agent = req.agent.filter(|a| *a != AgentKind::Command);
    let agent_only = [
        ("--model", req.model.is_some()),
        ("--system-prompt", req.system_prompt.is_some()),
        ("--tools", !req.tools.is_empty()),
        ("--thinking", req.thinking.is_some()),
        ("--resume", req.resume.is_some()),
    ];
    match (agent, req.argv.is_empty()) {
        (Some(_), false) => Err(Error::invalid(
            "give either --agent with --task, or a program after `--`, not both",
        )),
        (None, true) => Err(Error::invalid(
            "nothing to run: give a program after `--` (e.g. `subpane run -- make test`) or --agent with --task",
        )),
        (None, false) => {
            if req.task.is_some() {
                return Err(Error::invalid(
                    "--task needs --agent; a program after `--` takes its own arguments",
                ));
            }
            if let Some((flag, _)) = agent_only.iter().find(|(_, given)| *given) {
                return Err(Error::invalid(format!(
                    "{flag} is for agents: it needs --agent pi|claude|codex"
                )));
            }
            let mut argv = req.argv.clone();
            let program = resolve_program(sys, &argv[0], cwd, path)?;
            argv[0] = program.display().to_string();
            Ok(Program {
                agent: AgentKind::Command,
                argv,
                task: None,
            })
        }
        (Some(kind), true) => {
            let adapter = adapter_for(kind);
            let Some(task_raw) = req.task.as_deref() else {
                return Err(Error::invalid(format!(
                    "--agent {} needs --task: say what the agent should do",
                    kind.as_str()
                )));
            };
            let prompt = text_or_file(sys, "--task", task_raw)?;
            if prompt.trim().is_empty() {
                return Err(Error::invalid(
                    "--task is empty; say what the agent should do",
                ));
            }
            let system_prompt = req
                .system_prompt
                .as_deref()
                .map(|s| text_or_file(sys, "--system-prompt", s))
                .transpose()?;
            if let Some(s) = &system_prompt {
                if s.len() > MAX_ARG_BYTES {
                    return Err(Error::invalid(format!(
                        "--system-prompt is {} KiB; it is passed as one argument, and Linux allows at most 128 KiB in one: shorten it, or move the long part into --task",
                        s.len() / 1024
                    )));
                }
            }
            let binary = adapter.binary().unwrap_or("?");
            let program = sys.which(binary, path, cwd).ok_or_else(|| {
                Error::invalid(format!(
                    "the {} CLI `{binary}` was not found on PATH; install it with `{}`",
                    kind.as_str(),
                    adapter.install_hint()
                ))
            })?;
            Ok(Program {
                agent: kind,
                argv: vec![program.display().to_string()],
                task: Some(TaskSpec {
                    prompt,
                    model: req.model.clone(),
                    system_prompt,
                    tools: req
                        .tools
                        .iter()
                        .map(|t| t.trim().to_owned())
                        .filter(|t| !t.is_empty())
                        .collect(),
                    thinking: req.thinking.clone(),
                    resume_session: req.resume.clone(),
                }),
            })
        }
    }
}

/// Refuses an argv that the kernel would refuse at exec (E2BIG): better now, with a message,
/// than as a spawn failure.
pub(super) fn check_exec_size(
    argv: &[String],
    env: &[(OsString, OsString)],
    arg_max: usize,
) -> Result<(), Error> {
    if let Some((i, a)) = argv
        .iter()
        .enumerate()
        .find(|(_, a)| a.len() > MAX_ARG_BYTES)
    {
        return Err(Error::invalid(format!(
            "argument {i} of the program is {} KiB; Linux allows at most 128 KiB in one argument",
            a.len() / 1024
        )));
    }
    let ptr = std::mem::size_of::<usize>();
    let total: usize = argv.iter().map(|a| a.len() + 1 + ptr).sum::<usize>()
        + env
            .iter()
            .map(|(k, v)| k.len() + v.len() + 2 + ptr)
            .sum::<usize>();
    if total > arg_max {
        return Err(Error::invalid(format!(
            "the program's arguments and environment take {} KiB; the system allows {} KiB: pass less on the command line (a long task goes to the agent by file)",
            total / 1024,
            arg_max / 1024
        )));
    }
    Ok(())
}

/// Checks and completes a request for attempt 1 of a new run. Creates nothing.
pub fn plan(req: &RunRequest, home: &Home, sys: &dyn System) -> Result<Plan, Error> {
    let run_id = match &req.run_id {
        Some(r) => RunId::parse(r).map_err(invalid)?,
        None => sys.new_run_id(),
    };
    let limits = limits(req)?;
    let cwd_raw = match &req.cwd {
        Some(c) => c.clone(),
        None => sys.current_dir().map_err(|e| {
            Error::invalid(format!(
                "cannot read the current directory: {e}; pass --cwd"
            ))
        })?,
    };
    let cwd = sys.canonicalize(&cwd_raw).map_err(|e| {
        Error::invalid(format!("--cwd `{}` cannot be used: {e}", cwd_raw.display()))
    })?;
    if !sys.is_dir(&cwd) {
        return Err(Error::invalid(format!(
            "--cwd `{}` is not a directory",
            cwd.display()
        )));
    }
    for k in req.labels.keys() {
        if k.is_empty() {
            return Err(Error::invalid("--label needs a name: KEY=VALUE"));
        }
    }
    let caller_vars = sys.vars();
    let caller_var = |name: &str| {
        caller_vars
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let caller_path = caller_var("PATH");
    let worktree = req
        .worktree
        .then(|| worktree::plan(sys, home, &run_id, 1, &cwd, caller_path.as_deref()))
        .transpose()?;
    let network = match &req.network {
        Some(n) if req.sandbox => Network::parse(n).map_err(Error::invalid)?,
        _ => Network::None,
    };
    let (lineage, max_depth) = lineage(req, &caller_var, &run_id)?;
    let agent_kind = req.agent.unwrap_or(AgentKind::Command);
    let (env, env_spec) = environment(req, sys, agent_kind, &network)?;
    let path_var = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone());
    let Program {
        agent,
        mut argv,
        task,
    } = program(req, sys, &cwd, path_var.as_deref())?;
    if let (Some(wt), Some(given)) = (&worktree, req.argv.first()) {
        argv[0] = worktree::rebase_program(given, &argv[0], wt);
    }
    if sys.which("tmux", caller_path.as_deref(), &cwd).is_none() {
        return Err(Error::invalid(
            "tmux was not found on PATH; install tmux 3.2 or newer",
        ));
    }
    let attempt = 1;
    let paths = home.attempt(&run_id, attempt);
    // Agents: the adapter builds the argv now that the attempt's paths are known.
    let (argv, stdin) = match &task {
        Some(t) => {
            let ctx = ArgvContext {
                run_dir: &home.run_dir(&run_id),
                sessions_dir: &home.sessions_dir(agent.as_str()),
                attempt_dir: paths.dir(),
                prompt_file: &paths.prompt(),
            };
            let launch = adapter_for(agent).launch(&argv[0], t, &ctx);
            (launch.argv, launch.stdin)
        }
        None => (argv, Stdin::Null),
    };
    check_exec_size(&argv, &env, sys.arg_max())?;
    let socket = sys.tmux_socket();
    let mut agent_dirs = Vec::new();
    if req.sandbox && task.is_some() {
        if agent == AgentKind::Pi {
            agent_dirs.push(home.sessions_dir(agent.as_str()));
        }
        if let Some((var, default)) = adapter_for(agent).sandbox_needs().state_dir {
            let dir = env
                .iter()
                .find(|(k, _)| k == var)
                .map(|(_, v)| PathBuf::from(v))
                .or_else(|| caller_var("HOME").map(|h| PathBuf::from(h).join(default)));
            agent_dirs.extend(dir);
        }
    }
    let caller_dir = sys.current_dir().unwrap_or_else(|_| cwd.clone());
    // With --worktree, the worktree is the workspace.
    let workspace = worktree.as_ref().map_or(&cwd, |wt| &wt.path);
    let mut sandbox = sandbox_policy(
        req,
        sys,
        &PolicyContext {
            caller_dir: &caller_dir,
            cwd: workspace,
            attempt_dir: paths.dir(),
            tmux_socket: &socket,
            agent_dirs,
            escape_sockets: &escape_sockets(&caller_var),
        },
        network,
    )?;
    if let (Some(wt), true) = (&worktree, req.sandbox) {
        worktree::sandbox_git(sys, wt, &mut sandbox);
    }
    let created_at = humantime::format_rfc3339_millis(sys.now()).to_string();
    let spec = AttemptSpec {
        schema: SPEC_SCHEMA.to_owned(),
        run_id: run_id.clone(),
        attempt,
        agent,
        argv,
        cwd: worktree.as_ref().map_or(cwd, worktree::program_dir),
        stdin,
        labels: req.labels.clone(),
        correlation_id: req.correlation_id.clone(),
        limits,
        env: env_spec,
        task: task.clone(),
        keep_session: req.keep_session,
        tmux: TmuxTarget {
            socket,
            session: tmux::session_name(run_id.as_str(), attempt),
        },
        sandbox,
        created_at: created_at.clone(),
        group: None,
        lineage: lineage.clone(),
        resumed_from: None,
        worktree,
        max_depth,
    };
    let record = RunRecord {
        schema: RUN_SCHEMA.to_owned(),
        run_id,
        agent,
        labels: req.labels.clone(),
        correlation_id: req.correlation_id.clone(),
        group: None,
        created_at: created_at.clone(),
        attempts: vec![AttemptRef {
            attempt,
            created_at,
        }],
        lineage,
    };
    Ok(Plan {
        record,
        spec,
        env,
        prompt: task.map(|t| t.prompt),
    })
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A machine in memory: directories, files, executables, what `which` finds, and git
    /// repositories. (Also used by the tests of `worktree.rs`.)
    pub(crate) struct Fake {
        pub(crate) cwd: PathBuf,
        pub(crate) dirs: Vec<PathBuf>,
        pub(crate) files: HashMap<PathBuf, String>,
        /// path → executable?
        pub(crate) programs: HashMap<PathBuf, bool>,
        pub(crate) on_path: HashMap<String, PathBuf>,
        pub(crate) vars: Vec<(OsString, OsString)>,
        pub(crate) arg_max: usize,
        pub(crate) repos: Vec<RepoDirs>,
    }

    impl Fake {
        pub(crate) fn new() -> Self {
            let mut on_path = HashMap::new();
            on_path.insert("tmux".into(), PathBuf::from("/usr/bin/tmux"));
            on_path.insert("make".into(), PathBuf::from("/usr/bin/make"));
            Self {
                cwd: "/work".into(),
                dirs: vec!["/work".into(), "/src".into()],
                files: HashMap::new(),
                programs: HashMap::new(),
                on_path,
                vars: vec![
                    ("PATH".into(), "/usr/bin".into()),
                    ("HOME".into(), "/root".into()),
                    ("TMUX".into(), "/tmp/tmux-0/default,1,0".into()),
                ],
                arg_max: 2 * 1024 * 1024,
                repos: Vec::new(),
            }
        }
    }

    impl System for Fake {
        fn current_dir(&self) -> std::io::Result<PathBuf> {
            Ok(self.cwd.clone())
        }
        fn canonicalize(&self, p: &Path) -> std::io::Result<PathBuf> {
            let p = if p.is_absolute() {
                p.to_path_buf()
            } else {
                self.cwd.join(p)
            };
            if self.dirs.contains(&p) || self.files.contains_key(&p) {
                Ok(p)
            } else {
                Err(std::io::Error::from(std::io::ErrorKind::NotFound))
            }
        }
        fn is_dir(&self, p: &Path) -> bool {
            self.dirs.iter().any(|d| d == p)
        }
        fn read_to_string(&self, p: &Path) -> std::io::Result<String> {
            self.files
                .get(&self.cwd.join(p))
                .cloned()
                .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
        }
        fn vars(&self) -> Vec<(OsString, OsString)> {
            self.vars.clone()
        }
        fn which(&self, program: &str, path: Option<&OsStr>, _cwd: &Path) -> Option<PathBuf> {
            path?;
            self.on_path.get(program).cloned()
        }
        fn executable(&self, p: &Path) -> Option<bool> {
            self.programs.get(p).copied()
        }
        fn tmux_socket(&self) -> PathBuf {
            "/tmp/tmux-0/subpane".into()
        }
        fn now(&self) -> SystemTime {
            SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_800_000_000)
        }
        fn new_run_id(&self) -> RunId {
            RunId::parse("generated-1").unwrap()
        }
        fn arg_max(&self) -> usize {
            self.arg_max
        }
        fn git_repo(&self, dir: &Path) -> Option<RepoDirs> {
            self.repos
                .iter()
                .find(|r| dir.starts_with(&r.toplevel))
                .cloned()
        }
    }

    pub(crate) fn home() -> Home {
        Home::at("/h".into())
    }

    pub(crate) fn cmd(argv: &[&str]) -> RunRequest {
        RunRequest {
            argv: argv.iter().map(|s| (*s).to_owned()).collect(),
            ..RunRequest::default()
        }
    }

    pub(crate) fn refused(req: &RunRequest, sys: &Fake) -> String {
        match plan(req, &home(), sys) {
            Err(Error::Invalid(m)) => m,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn a_command_is_resolved_and_recorded_without_values() {
        let sys = Fake::new();
        let mut req = cmd(&["make", "test"]);
        req.env.insert("SECRET".into(), "hunter2".into());
        req.labels.insert("team".into(), "core".into());
        let p = plan(&req, &home(), &sys).unwrap();
        assert_eq!(p.spec.argv, ["/usr/bin/make", "test"]);
        assert_eq!(p.spec.run_id.as_str(), "generated-1");
        assert_eq!(p.spec.cwd, Path::new("/work"));
        assert_eq!(p.spec.attempt, 1);
        assert_eq!(p.spec.tmux.session, "generated-1-1");
        assert_eq!(p.spec.created_at, "2027-01-15T08:00:00.000Z");
        assert_eq!(p.record.labels["team"], "core");
        // tmux's variables are gone, --env is set, and no record holds a value.
        assert!(!p.env.iter().any(|(k, _)| k == "TMUX"));
        assert!(p.env.contains(&("SECRET".into(), "hunter2".into())));
        assert_eq!(p.spec.env.set, ["SECRET"]);
        let records = serde_json::to_string(&(&p.spec, &p.record)).unwrap();
        assert!(!records.contains("hunter2"), "{records}");
        assert!(!format!("{p:?}").contains("hunter2"));
    }

    #[test]
    fn bad_run_ids_are_refused() {
        let sys = Fake::new();
        for bad in ["", "..", "a/b", "-x", &"x".repeat(129)] {
            let mut req = cmd(&["make"]);
            req.run_id = Some(bad.to_owned());
            let m = refused(&req, &sys);
            assert!(m.contains("run id"), "{bad}: {m}");
        }
    }

    #[test]
    fn durations_need_a_unit_and_timeouts_a_length() {
        let sys = Fake::new();
        for (field, value, says) in [
            ("timeout", "10", "invalid duration"),
            ("timeout", "0s", "greater than zero"),
            ("idle_timeout", "soon", "invalid duration"),
            ("grace", "", "it is empty"),
        ] {
            let mut req = cmd(&["make"]);
            let v = Some(value.to_owned());
            match field {
                "timeout" => req.timeout = v,
                "idle_timeout" => req.idle_timeout = v,
                _ => req.grace = v,
            }
            let m = refused(&req, &sys);
            assert!(m.contains(says), "{field}={value}: {m}");
        }
        let mut req = cmd(&["make"]);
        req.grace = Some("0s".into());
        req.timeout = Some("1m30s".into());
        let p = plan(&req, &home(), &sys).unwrap();
        assert_eq!(p.spec.limits.grace_ms, 0);
        assert_eq!(p.spec.limits.timeout_ms, Some(90_000));
        assert_eq!(p.spec.limits.linger_ms, 5000);
    }

    #[test]
    fn at_file_tasks_are_read_and_missing_ones_refused() {
        let mut sys = Fake::new();
        sys.on_path.insert("pi".into(), "/usr/bin/pi".into());
        sys.files
            .insert("/work/task.md".into(), "fix the test".into());
        let req = RunRequest {
            agent: Some(AgentKind::Pi),
            task: Some("@task.md".into()),
            ..RunRequest::default()
        };
        let p = plan(&req, &home(), &sys).unwrap();
        assert_eq!(p.prompt.as_deref(), Some("fix the test"));
        assert_eq!(p.spec.argv[0], "/usr/bin/pi");
        assert!(p.spec.argv.contains(&"fix the test".to_owned()));
        let req = RunRequest {
            task: Some("@nope.md".into()),
            ..req
        };
        let m = refused(&req, &sys);
        assert!(m.contains("cannot read --task file `nope.md`"), "{m}");
        let req = RunRequest {
            task: Some("  \n".into()),
            ..req
        };
        assert!(refused(&req, &sys).contains("--task is empty"));
    }

    #[test]
    fn a_missing_agent_cli_says_how_to_install_it() {
        let sys = Fake::new();
        let req = RunRequest {
            agent: Some(AgentKind::Claude),
            task: Some("hi".into()),
            ..RunRequest::default()
        };
        let m = refused(&req, &sys);
        assert!(m.contains("`claude` was not found on PATH"), "{m}");
        assert!(m.contains("npm"), "{m}");
    }

    #[test]
    fn programs_are_found_like_a_shell_would() {
        let mut sys = Fake::new();
        assert!(refused(&cmd(&["nope"]), &sys).contains("`nope` was not found on PATH"));
        assert!(refused(&cmd(&["./gone.sh"]), &sys).contains("does not exist"));
        sys.programs.insert("/work/./data.txt".into(), false);
        assert!(refused(&cmd(&["./data.txt"]), &sys).contains("not an executable file"));
        sys.programs.insert("/work/./ok.sh".into(), true);
        let p = plan(&cmd(&["./ok.sh"]), &home(), &sys).unwrap();
        assert_eq!(p.spec.argv[0], "/work/./ok.sh");
        // --env PATH=… is the PATH the program is looked up on.
        let mut req = cmd(&["make"]);
        req.env.insert("PATH".into(), "".into());
        sys.on_path.remove("make");
        assert!(refused(&req, &sys).contains("not found"));
    }

    #[test]
    fn what_to_run_must_be_one_thing() {
        let mut sys = Fake::new();
        sys.on_path.insert("pi".into(), "/usr/bin/pi".into());
        let both = RunRequest {
            agent: Some(AgentKind::Pi),
            task: Some("hi".into()),
            argv: vec!["make".into()],
            ..RunRequest::default()
        };
        assert!(refused(&both, &sys).contains("not both"));
        assert!(refused(&RunRequest::default(), &sys).contains("nothing to run"));
        let mut task_for_command = cmd(&["make"]);
        task_for_command.task = Some("hi".into());
        assert!(refused(&task_for_command, &sys).contains("--task needs --agent"));
        let mut model_for_command = cmd(&["make"]);
        model_for_command.model = Some("m".into());
        assert!(refused(&model_for_command, &sys).contains("--model is for agents"));
        let no_task = RunRequest {
            agent: Some(AgentKind::Pi),
            ..RunRequest::default()
        };
        assert!(refused(&no_task, &sys).contains("needs --task"));
    }

    #[test]
    fn cwd_must_be_an_existing_directory() {
        let mut sys = Fake::new();
        let mut req = cmd(&["make"]);
        req.cwd = Some("/missing".into());
        assert!(refused(&req, &sys).contains("--cwd `/missing` cannot be used"));
        sys.files.insert("/work/f".into(), String::new());
        req.cwd = Some("f".into());
        assert!(refused(&req, &sys).contains("is not a directory"));
        req.cwd = Some("/src".into());
        assert_eq!(
            plan(&req, &home(), &sys).unwrap().spec.cwd,
            Path::new("/src")
        );
    }

    #[test]
    fn env_names_must_be_variable_names() {
        let sys = Fake::new();
        for bad in ["1X", "A-B", "A B", ""] {
            let mut req = cmd(&["make"]);
            req.env.insert(bad.into(), "v".into());
            assert!(
                refused(&req, &sys).contains("not a valid variable name"),
                "{bad}"
            );
        }
    }

    #[test]
    fn tmux_must_be_installed() {
        let mut sys = Fake::new();
        sys.on_path.remove("tmux");
        assert!(refused(&cmd(&["make"]), &sys).contains("tmux was not found"));
    }

    #[test]
    fn arguments_the_kernel_would_refuse_are_refused_first() {
        let mut sys = Fake::new();
        let big = "x".repeat(MAX_ARG_BYTES + 1);
        assert!(refused(&cmd(&["make", &big]), &sys).contains("at most 128 KiB in one argument"));
        sys.on_path
            .insert("claude".into(), "/usr/bin/claude".into());
        let req = RunRequest {
            agent: Some(AgentKind::Claude),
            task: Some("hi".into()),
            system_prompt: Some(big.clone()),
            ..RunRequest::default()
        };
        assert!(refused(&req, &sys).contains("--system-prompt is 128 KiB"));
        // Many arguments, each small, past ARG_MAX.
        sys.arg_max = 64 * 1024;
        let many: Vec<String> = (0..100).map(|_| "y".repeat(1000)).collect();
        let mut argv = vec!["make"];
        argv.extend(many.iter().map(String::as_str));
        assert!(refused(&cmd(&argv), &sys).contains("the system allows 64 KiB"));
        // A long task is no problem: it goes to the agent by file.
        sys.arg_max = 2 * 1024 * 1024;
        let req = RunRequest {
            agent: Some(AgentKind::Claude),
            task: Some("z".repeat(3 * 1024 * 1024)),
            ..RunRequest::default()
        };
        assert!(plan(&req, &home(), &sys).is_ok());
    }

    fn sandboxed(argv: &[&str]) -> RunRequest {
        RunRequest {
            sandbox: true,
            ..cmd(argv)
        }
    }

    #[test]
    fn sandbox_settings_need_the_sandbox() {
        let sys = Fake::new();
        for (req, flag) in [
            (
                RunRequest {
                    network: Some("none".into()),
                    ..cmd(&["make"])
                },
                "--network",
            ),
            (
                RunRequest {
                    writable: vec!["/src".into()],
                    ..cmd(&["make"])
                },
                "--writable",
            ),
            (
                RunRequest {
                    hide: vec!["/src".into()],
                    ..cmd(&["make"])
                },
                "--hide",
            ),
            (
                RunRequest {
                    env_pass: vec!["X".into()],
                    ..cmd(&["make"])
                },
                "--env-pass",
            ),
        ] {
            let m = refused(&req, &sys);
            assert!(m.contains(flag) && m.contains("add --sandbox"), "{m}");
        }
    }

    #[test]
    fn network_patterns_are_checked_before_anything_starts() {
        let sys = Fake::new();
        for (policy, says) in [
            ("allow:*", "every host"),
            ("allow:*.com", "public suffix"),
            ("allow:https://x.example.com", "is a URL"),
            ("allow:x.example.com:443", "has a port"),
            ("allow:", "is empty"),
            ("everything", "not a policy"),
        ] {
            let req = RunRequest {
                network: Some(policy.into()),
                ..sandboxed(&["make"])
            };
            let m = refused(&req, &sys);
            assert!(m.contains(says), "{policy}: {m}");
        }
    }

    #[test]
    fn a_sandboxed_program_gets_only_the_variables_it_needs() {
        let mut sys = Fake::new();
        sys.vars.push(("SECRET".into(), "s3".into()));
        sys.vars.push(("GITHUB_TOKEN".into(), "gh".into()));
        sys.vars.push(("LC_ALL".into(), "C.UTF-8".into()));
        let mut req = sandboxed(&["make"]);
        req.env_pass = vec!["GITHUB_TOKEN".into()];
        req.env.insert("MODE".into(), "ci".into());
        let p = plan(&req, &home(), &sys).unwrap();
        let names: Vec<&str> = p.env.iter().filter_map(|(k, _)| k.to_str()).collect();
        for want in ["PATH", "HOME", "LC_ALL", "GITHUB_TOKEN", "MODE", "TMPDIR"] {
            assert!(names.contains(&want), "{want} missing from {names:?}");
        }
        for gone in ["SECRET", "TMUX", "HTTP_PROXY"] {
            assert!(!names.contains(&gone), "{gone} passed: {names:?}");
        }
        assert!(!p.spec.env.inherit);
        assert_eq!(
            p.spec.env.passed,
            ["GITHUB_TOKEN", "HOME", "LC_ALL", "PATH"]
        );
        assert_eq!(p.spec.env.set, ["TMPDIR", "MODE"]);
        // With an allow list the proxy is announced the usual ways.
        req.network = Some("allow:api.example.com,127.0.0.1".into());
        let p = plan(&req, &home(), &sys).unwrap();
        let url = format!("http://127.0.0.1:{}", crate::sandbox::PROXY_PORT);
        for k in ["HTTP_PROXY", "https_proxy", "ALL_PROXY"] {
            assert!(p.env.contains(&(k.into(), url.clone().into())), "{k}");
        }
        assert!(p.env.contains(&("NODE_USE_ENV_PROXY".into(), "1".into())));
        let records = serde_json::to_string(&p.spec).unwrap();
        assert!(!records.contains("\"gh\""), "{records}");
        assert!(!records.contains("s3"), "{records}");
        // An agent keeps its own keys and configuration.
        sys.on_path
            .insert("claude".into(), "/usr/bin/claude".into());
        sys.vars.push(("ANTHROPIC_API_KEY".into(), "k".into()));
        sys.vars.push(("OPENAI_API_KEY".into(), "o".into()));
        let req = RunRequest {
            agent: Some(AgentKind::Claude),
            task: Some("hi".into()),
            sandbox: true,
            ..RunRequest::default()
        };
        let p = plan(&req, &home(), &sys).unwrap();
        let names: Vec<&str> = p.env.iter().filter_map(|(k, _)| k.to_str()).collect();
        assert!(names.contains(&"ANTHROPIC_API_KEY") && !names.contains(&"OPENAI_API_KEY"));
        // Claude's state directory (default under HOME) is writable.
        assert!(
            p.spec
                .sandbox
                .writable
                .contains(&PathBuf::from("/root/.claude"))
        );
        let bad = RunRequest {
            env_pass: vec!["A-B".into()],
            ..sandboxed(&["make"])
        };
        assert!(refused(&bad, &sys).contains("--env-pass name `A-B`"));
    }

    #[test]
    fn the_policy_names_every_path_resolved() {
        let mut sys = Fake::new();
        sys.dirs.push("/work/.git".into());
        sys.files.insert("/work/.git/config".into(), String::new());
        sys.dirs.push("/data".into());
        sys.dirs.push("/run/dbus".into());
        sys.vars
            .push(("SSH_AUTH_SOCK".into(), "/tmp/ssh-x/agent.1".into()));
        sys.files.insert("/work/secret.txt".into(), String::new());
        let req = RunRequest {
            writable: vec!["/data".into()],
            hide: vec!["secret.txt".into()],
            ..sandboxed(&["make"])
        };
        let p = plan(&req, &home(), &sys).unwrap();
        let sb = &p.spec.sandbox;
        assert!(sb.enabled);
        assert_eq!(sb.network, Network::None);
        assert_eq!(
            sb.writable,
            [
                PathBuf::from("/work"),
                PathBuf::from("/h/runs/generated-1/attempts/1"),
                PathBuf::from("/data")
            ]
        );
        // --hide, the tmux socket, and the escape sockets that exist (not the SSH agent's,
        // which this machine lacks).
        assert_eq!(
            sb.hidden,
            [
                PathBuf::from("/work/secret.txt"),
                PathBuf::from("/tmp/tmux-0/subpane"),
                PathBuf::from("/run/dbus")
            ]
        );
        assert_eq!(
            sb.read_only,
            [
                PathBuf::from("/work/.git/hooks"),
                PathBuf::from("/work/.git/config")
            ]
        );
        // Paths that do not exist are refused, not ignored.
        let req = RunRequest {
            hide: vec!["/nope".into()],
            ..sandboxed(&["make"])
        };
        assert!(refused(&req, &sys).contains("--hide `/nope` cannot be used"));
        // Without --sandbox the policy is off and the environment inherited.
        let p = plan(&cmd(&["make"]), &home(), &sys).unwrap();
        assert_eq!(p.spec.sandbox, SandboxSpec::default());
        assert!(p.spec.env.inherit && p.spec.env.passed.is_empty());
    }

    #[test]
    fn a_run_started_inside_an_attempt_records_its_lineage_and_respects_the_depth_limit() {
        let mut sys = Fake::new();
        // Top level: no lineage, the default limit.
        let p = plan(&cmd(&["make"]), &home(), &sys).unwrap();
        assert_eq!(p.spec.lineage, None);
        assert_eq!(p.spec.max_depth, 3);
        // Inside attempt 2 of `b`, itself started by `a`.
        sys.vars.push(("SUBPANE_RUN_ID".into(), "b".into()));
        sys.vars.push(("SUBPANE_ATTEMPT".into(), "2".into()));
        sys.vars.push(("SUBPANE_DEPTH".into(), "1".into()));
        sys.vars.push(("SUBPANE_MAX_DEPTH".into(), "2".into()));
        sys.vars.push(("SUBPANE_CHAIN".into(), "a/b".into()));
        let mut req = cmd(&["make"]);
        req.run_id = Some("c".into());
        let p = plan(&req, &home(), &sys).unwrap();
        let l = p.spec.lineage.clone().unwrap();
        assert_eq!(
            (l.parent_run.as_str(), l.parent_attempt, l.depth),
            ("b", 2, 2)
        );
        assert_eq!(l.chain, ["a", "b"]);
        assert_eq!(p.record.lineage, Some(l));
        // A child cannot raise the limit it inherited, only lower it.
        req.max_depth = Some(10);
        assert_eq!(plan(&req, &home(), &sys).unwrap().spec.max_depth, 2);
        req.max_depth = Some(1);
        let m = refused(&req, &sys);
        assert!(
            m.contains("at most 1 deep") && m.contains("a > b > c"),
            "{m}"
        );
        // One more level below the inherited limit is refused too.
        sys.vars.retain(|(k, _)| k != "SUBPANE_DEPTH");
        sys.vars.push(("SUBPANE_DEPTH".into(), "2".into()));
        req.max_depth = None;
        assert!(refused(&req, &sys).contains("would be 3 deep"));
    }
}
