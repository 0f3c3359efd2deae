//! The sandbox policy of an attempt, every path resolved.
//!
//! ```text
//!  request ─► sandbox_request (--writable/--hide resolved, recorded as `asked`)
//!                  │                 retry keeps `asked`, the network and `env_pass` ─┐
//!                  ▼                                                                 ▼
//!  sandbox_policy(request, the attempt's context) ─► SandboxSpec  (once per attempt, for both)
//!     writable: workspace, out/, agent state, asked
//!     read_only: a worktree's .git file, a program under /tmp, the proxy and nest sockets
//!     git: the workspace's repository, an overlay of its git directory (git_view.rs)
//!     hidden: asked, the tmux socket, the subpane home, escape sockets
//! ```

use super::git_view::workspace_repo;
use super::guard::{Guarded, check_policy, named_path};
use super::*;
use crate::app::Invalid;
use crate::spec::SandboxLimits;

/// What a run asked of the sandbox: kept for every attempt of the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(in crate::app) struct SandboxRequest {
    pub(in crate::app) network: Network,
    pub(in crate::app) asked: crate::spec::SandboxAsk,
    pub(in crate::app) env_pass: Vec<String>,
    /// The agent state directory of the attempt a retry follows (its seed source is kept).
    pub(in crate::app) agent_state: Option<crate::spec::AgentState>,
    /// Whether the attempt continues that directory (it resumes the session saved there).
    pub(in crate::app) continue_state: bool,
    pub(in crate::app) limits: crate::spec::SandboxLimits,
}

impl SandboxRequest {
    /// The request an attempt's recorded policy was made from (specs written before `asked`
    /// existed: their paths outside the home, which is where a user's could be).
    pub(in crate::app) fn of(spec: &SandboxSpec, home: &Home) -> Option<Self> {
        if !spec.enabled {
            return None;
        }
        let asked = spec
            .asked
            .clone()
            .unwrap_or_else(|| crate::spec::SandboxAsk {
                writable: outside(&spec.writable, home),
                hidden: outside(&spec.hidden, home),
            });
        Some(Self {
            network: spec.network.clone(),
            asked,
            env_pass: spec.env_pass.clone(),
            agent_state: spec.agent_state.clone(),
            continue_state: false,
            limits: spec.limits,
        })
    }
}

fn outside(paths: &[PathBuf], home: &Home) -> Vec<PathBuf> {
    paths
        .iter()
        .filter(|p| !p.starts_with(home.root()))
        .cloned()
        .collect()
}

/// The sandbox part of a request, its paths resolved against `caller_dir`; `None` without
/// `sandbox`. Without it, a sandbox setting at its default value is taken with a warning
/// (a client that fills in every default of the schema), any other is refused.
pub(in crate::app) fn sandbox_request(
    req: &RunRequest,
    sys: &dyn System,
    caller_dir: &Path,
    network: Network,
    warnings: &mut Vec<String>,
) -> Result<Option<SandboxRequest>, Error> {
    if !req.sandbox {
        let d = SandboxLimits::DEFAULT;
        let size_is = |v: &Option<String>, default: u64| {
            v.as_deref()
                .is_none_or(|s| crate::spec::parse_size("", s).is_ok_and(|b| b == default))
        };
        let given = [
            (
                "network",
                req.network.is_some(),
                req.network.as_deref() == Some(Network::NONE),
            ),
            ("writable", !req.writable.is_empty(), false),
            ("hide", !req.hide.is_empty(), false),
            ("env_pass", !req.env_pass.is_empty(), false),
            (
                "max_procs",
                req.max_procs.is_some(),
                req.max_procs.is_none_or(|n| n == d.processes),
            ),
            (
                "max_memory",
                req.max_memory.is_some(),
                size_is(&req.max_memory, d.memory_bytes),
            ),
            (
                "max_tmp",
                req.max_tmp.is_some(),
                size_is(&req.max_tmp, d.tmp_bytes),
            ),
            (
                "max_file_size",
                req.max_file_size.is_some(),
                size_is(&req.max_file_size, d.file_size_bytes),
            ),
        ];
        for (field, given, at_default) in given {
            if !given {
                continue;
            }
            if !at_default {
                return Err(Invalid::new(field, "is a sandbox setting")
                    .hint("add {sandbox} to run sandboxed, or leave it out")
                    .into());
            }
            warnings.push(format!(
                "{{{field}}} is a sandbox setting and is ignored without {{sandbox}} (it is at its default)"
            ));
        }
        return Ok(None);
    }
    let mut asked = crate::spec::SandboxAsk::default();
    for w in &req.writable {
        asked
            .writable
            .push(named_path(sys, "{writable}", caller_dir, w)?);
    }
    for h in &req.hide {
        asked.hidden.push(named_path(sys, "{hide}", caller_dir, h)?);
    }
    Ok(Some(SandboxRequest {
        network,
        asked,
        env_pass: req.env_pass.clone(),
        agent_state: None,
        continue_state: false,
        limits: sandbox_limits(req)?,
    }))
}

/// The limits a request asks for, the defaults for the rest.
fn sandbox_limits(req: &RunRequest) -> Result<SandboxLimits, Error> {
    use crate::spec::parse_size;
    let d = SandboxLimits::DEFAULT;
    let size = |field: &str, v: &Option<String>, default: u64| {
        v.as_deref().map_or(Ok(default), |s| {
            parse_size("", s).map_err(|e| {
                // The size's own words, after its "for FLAG:".
                let why = e.split_once(": ").map_or(e.as_str(), |(_, w)| w);
                Error::from(Invalid::new(field, format!("`{s}` is not a size: {why}")))
            })
        })
    };
    let processes = req.max_procs.unwrap_or(d.processes);
    let range = SandboxLimits::MIN_PROCESSES..=SandboxLimits::MAX_PROCESSES;
    if !range.contains(&processes) {
        return Err(Invalid::new("max_procs", format!("{processes} is out of range"))
            .hint(format!(
                "give {} to {} (processes and threads at once; the kernel's smallest limit per PID namespace is {})",
                range.start(),
                range.end(),
                range.start()
            ))
            .into());
    }
    Ok(SandboxLimits {
        processes,
        memory_bytes: size("max_memory", &req.max_memory, d.memory_bytes)?,
        tmp_bytes: size("max_tmp", &req.max_tmp, d.tmp_bytes)?,
        file_size_bytes: size("max_file_size", &req.max_file_size, d.file_size_bytes)?,
    })
}

/// The sandbox policy of one attempt: what the run asked, and what this attempt's places
/// need; refused when it would switch the sandbox off or a named path changed since (see
/// [`guard`](super::guard)). Pure but for the questions it asks `sys`.
pub(in crate::app) fn sandbox_policy(
    request: &SandboxRequest,
    sys: &dyn System,
    ctx: &PolicyContext<'_>,
) -> Result<SandboxSpec, Error> {
    let asked = &request.asked;
    let subpane_home = sys
        .canonicalize(ctx.home)
        .unwrap_or_else(|_| ctx.home.to_path_buf());
    check_policy(
        sys,
        asked,
        &Guarded {
            user_home: ctx
                .user_home
                .map(|h| sys.canonicalize(h).unwrap_or_else(|_| h.to_path_buf())),
            agent_dirs: ctx
                .protected_dirs
                .iter()
                .map(|d| sys.canonicalize(d).unwrap_or_else(|_| d.clone()))
                .collect(),
            subpane_home: &subpane_home,
            tmux_socket_dir: resolved(sys, ctx.tmux_socket)
                .parent()
                .map(Path::to_path_buf),
            workspace: ctx.cwd,
        },
    )?;
    // Paths of subpane's own are resolved like the user's: the helper refuses any link.
    let mut writable = vec![ctx.cwd.to_path_buf(), resolved(sys, ctx.out_dir)];
    writable.extend(ctx.agent_dirs.iter().cloned());
    writable.extend(asked.writable.iter().cloned());
    let mut hidden = asked.hidden.clone();
    // The tmux server would run anything asked of it, outside the sandbox.
    hidden.push(resolved(sys, ctx.tmux_socket));
    // Every other run's records, one-shot environment files and proxy sockets: only this
    // attempt's `out/` (and its proxy socket) is carried back in below it.
    hidden.push(subpane_home.clone());
    // A hook, a config or rebase state written in the workspace's repository would run
    // outside the sandbox on the user's next git command: its git directory is the
    // program's privately (an overlay), and only its branch comes back (see git_view.rs).
    let mut read_only = Vec::new();
    let git = workspace_repo(
        sys,
        ctx.cwd,
        resolved(sys, ctx.git_upper),
        resolved(sys, ctx.git_work),
        &mut read_only,
    );
    // Sockets that would act outside the sandbox for whoever connects (Landlock cannot refuse
    // connecting to a pathname Unix socket): see [`escape_sockets`].
    for p in ctx.escape_sockets {
        if let Ok(p) = sys.canonicalize(p)
            && !hidden.contains(&p)
        {
            hidden.push(p);
        }
    }
    // What names resolve with stays readable when it lives in a hidden runtime directory.
    for f in NAME_SERVICE_FILES {
        if let Ok(real) = sys.canonicalize(Path::new(f)) {
            let under = hidden.iter().any(|h| real.starts_with(h) && &real != h);
            if under && !read_only.contains(&real) {
                read_only.push(real);
            }
        }
    }
    // A program installed under /tmp would vanish behind the sandbox's private /tmp: its tree
    // is carried in, read-only (unless a writable tree has it anyway).
    // So is subpane itself: a program that starts nested runs (through its worker) runs it.
    let subpane = sys.subpane_exe();
    for program in [ctx.program, subpane.as_deref()].into_iter().flatten() {
        if let Some(tree) = program_tree(sys, program)
            && !writable.iter().any(|w| tree.starts_with(w))
            && !read_only.contains(&tree)
        {
            read_only.push(tree);
        }
    }
    // The relay inside the sandbox reaches the egress proxy through its socket, which lives
    // in the attempt directory under the hidden home.
    if matches!(request.network, Network::Allow(_)) {
        read_only.push(resolved(sys, ctx.proxy_socket));
    }
    // Nested runs: the program's `subpane run` asks the worker there (a connect needs no
    // write access).
    read_only.push(resolved(sys, ctx.nest_socket));
    writable.dedup();
    Ok(SandboxSpec {
        enabled: true,
        network: request.network.clone(),
        writable,
        read_only,
        hidden,
        env_pass: request.env_pass.clone(),
        asked: Some(asked.clone()),
        git,
        agent_state: None,
        limits: request.limits,
    })
}

/// `p` with the links of its longest existing part resolved (the rest may not exist yet: an
/// attempt's directory, `out/` and proxy socket are made after the plan).
pub(in crate::app) fn resolved(sys: &dyn System, p: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut at = p;
    loop {
        if let Ok(real) = sys.canonicalize(at) {
            return rest.iter().rev().fold(real, |acc, c| acc.join(c));
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name);
                at = parent;
            }
            _ => return p.to_path_buf(),
        }
    }
}

/// What the sandbox policy is made from, besides the request.
pub(in crate::app) struct PolicyContext<'a> {
    /// The workspace: `--cwd`, or the worktree.
    pub(in crate::app) cwd: &'a Path,
    pub(in crate::app) home: &'a Path,
    /// The attempt's artifact directory, the one place of the home the program may write.
    pub(in crate::app) out_dir: &'a Path,
    pub(in crate::app) proxy_socket: &'a Path,
    /// The attempt's overlay directories for the workspace's git directory.
    pub(in crate::app) git_upper: &'a Path,
    pub(in crate::app) git_work: &'a Path,
    pub(in crate::app) nest_socket: &'a Path,
    pub(in crate::app) tmux_socket: &'a Path,
    /// Directories of the agent CLI's that it writes (its own state directory, pi's
    /// sessions of the run).
    pub(in crate::app) agent_dirs: Vec<PathBuf>,
    /// Sockets to hide when they exist (see [`escape_sockets`]).
    pub(in crate::app) escape_sockets: &'a [PathBuf],
    /// The program that runs (`argv[0]`, resolved).
    pub(in crate::app) program: Option<&'a Path>,
    /// The user's home (`$HOME` of the caller).
    pub(in crate::app) user_home: Option<&'a Path>,
    /// Agent state directories the caller's variables name (`CLAUDE_CONFIG_DIR`, …): never
    /// writable, like the defaults under the home.
    pub(in crate::app) protected_dirs: Vec<PathBuf>,
}

/// The tree a program under `/tmp` needs to run: its directory, or for a program inside a
/// `node_modules` tree (an npm-installed CLI, whose dependencies sit beside it) the directory
/// holding the outermost `node_modules`. `None` for a program outside `/tmp`.
pub(in crate::app) fn program_tree(sys: &dyn System, program: &Path) -> Option<PathBuf> {
    let real = sys.canonicalize(program).ok()?;
    if !real.starts_with("/tmp") {
        return None;
    }
    let outermost = real
        .ancestors()
        .filter(|a| a.file_name().is_some_and(|n| n == "node_modules"))
        .last();
    match outermost {
        Some(nm) => nm.parent().map(Path::to_path_buf),
        None => real.parent().map(Path::to_path_buf),
    }
    .filter(|t| t != Path::new("/tmp"))
}

/// Sockets that act for whoever connects, and the directories that hold them: the machine's
/// runtime directories (`/run` holds the D-Bus buses, the Docker and container daemons'
/// sockets and every user's `XDG_RUNTIME_DIR`), and the caller's own tmux server, SSH agent
/// and runtime directory wherever their variables put them. `uid` names tmux's socket
/// directory under `$TMUX_TMPDIR`.
pub(in crate::app) fn escape_sockets(
    var: &dyn Fn(&str) -> Option<OsString>,
    uid: u32,
) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = ["/run", "/var/run"].iter().map(PathBuf::from).collect();
    for name in ["XDG_RUNTIME_DIR", "SSH_AUTH_SOCK"] {
        v.extend(var(name).map(PathBuf::from));
    }
    // `$TMUX` is `SOCKET,PID,SESSION`: the server of the terminal subpane was started from,
    // which would run `new-window` for the program, outside.
    if let Some(t) = var("TMUX") {
        let t = t.as_encoded_bytes();
        let socket = t.split(|b| *b == b',').next().unwrap_or_default();
        v.push(PathBuf::from(std::ffi::OsStr::from_bytes(socket)));
    }
    if let Some(dir) = var("TMUX_TMPDIR") {
        v.push(PathBuf::from(dir).join(format!("tmux-{uid}")));
    }
    v.retain(|p| p.is_absolute());
    v
}

/// Files below a hidden runtime directory that programs read to resolve names:
/// `/etc/resolv.conf` is often a link into `/run` (systemd-resolved, resolvconf).
const NAME_SERVICE_FILES: &[&str] = &["/etc/resolv.conf"];
