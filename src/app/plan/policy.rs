//! The sandbox policy of an attempt, every path resolved.

use super::*;

/// The sandbox policy, every path resolved. Sandbox flags without `--sandbox` are refused.
pub(in crate::app) fn sandbox_policy(
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
    // A program installed under /tmp would vanish behind the sandbox's private /tmp: its tree
    // is carried in, read-only (unless a writable tree has it anyway).
    if let Some(tree) = ctx.program.and_then(|p| program_tree(sys, p)) {
        if !writable.iter().any(|w| tree.starts_with(w)) && !read_only.contains(&tree) {
            read_only.push(tree);
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
pub(in crate::app) struct PolicyContext<'a> {
    pub(in crate::app) caller_dir: &'a Path,
    pub(in crate::app) cwd: &'a Path,
    pub(in crate::app) attempt_dir: &'a Path,
    pub(in crate::app) tmux_socket: &'a Path,
    /// State directories of the agent CLI (it writes them).
    pub(in crate::app) agent_dirs: Vec<PathBuf>,
    /// Sockets to hide when they exist (see [`escape_sockets`]).
    pub(in crate::app) escape_sockets: &'a [PathBuf],
    /// The program that runs (`argv[0]`, resolved).
    pub(in crate::app) program: Option<&'a Path>,
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

/// Well-known sockets that act for whoever connects, and the caller's own ones.
pub(in crate::app) fn escape_sockets(var: &dyn Fn(&str) -> Option<OsString>) -> Vec<PathBuf> {
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
