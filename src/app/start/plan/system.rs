//! What the plan may ask of the machine, and the real machine.

use super::*;
use crate::store::{Found, Kind, ProgramTree};

/// The most a file named with `@FILE` (`--task`, `--system-prompt`) may hold: far more than
/// any prompt, and a bound on what `@/dev/zero` costs.
pub const FILE_ARG_LIMIT: u64 = 16 << 20;

/// What the plan may ask of the world.
pub trait System {
    /// The caller's current directory (the default `--cwd`).
    fn current_dir(&self) -> std::io::Result<PathBuf>;
    /// An absolute path with links resolved; an error when it does not exist.
    fn canonicalize(&self, p: &Path) -> std::io::Result<PathBuf>;
    fn is_dir(&self, p: &Path) -> bool;
    /// Reads a file named with `@FILE` (at most [`FILE_ARG_LIMIT`] bytes).
    fn read_to_string(&self, p: &Path) -> std::io::Result<String>;
    /// Reads a record of subpane's (never through a link, at most
    /// [`crate::store::RECORD_LIMIT`] bytes).
    fn read_record(&self, p: &Path) -> std::io::Result<Vec<u8>>;
    /// What is at `rel` below `tree`, a directory a program may have written (the
    /// workspace's git files): a directory, or a regular file's bytes (at most `limit`). Read
    /// as a [`crate::store::ProgramTree`]: no link followed, a FIFO or a device an error,
    /// never opened.
    fn look_in_tree(&self, tree: &Path, rel: &str, limit: u64) -> std::io::Result<Found>;
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
    /// The environment of the nearest ancestor process that runs inside an attempt (has
    /// `SUBPANE_RUN_ID`), for a caller whose own environment lost it: an MCP client that
    /// starts its servers with a few variables only, or `env -i`. Empty when there is none.
    fn attempt_ancestor_vars(&self) -> Vec<(OsString, OsString)>;
    /// The subpane binary that runs (what a sandboxed program that starts nested runs needs
    /// to see).
    fn subpane_exe(&self) -> Option<PathBuf>;
    /// The directory holding pi's saved session `id` (a run's `sessions/`, or the shared
    /// directory of older versions), for a new run that resumes it.
    fn pi_session_dir(&self, home: &Home, id: &str) -> Option<PathBuf>;
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
        use std::io::Read;
        let mut text = String::new();
        std::fs::File::open(p)?
            .take(FILE_ARG_LIMIT + 1)
            .read_to_string(&mut text)?;
        if text.len() as u64 > FILE_ARG_LIMIT {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "it is larger than {} MiB, the most a task or prompt file may hold",
                    FILE_ARG_LIMIT >> 20
                ),
            ));
        }
        Ok(text)
    }
    fn read_record(&self, p: &Path) -> std::io::Result<Vec<u8>> {
        match crate::store::read_bounded(p, crate::store::RECORD_LIMIT) {
            Ok(Some(b)) => Ok(b),
            Ok(None) => Err(std::io::ErrorKind::NotFound.into()),
            Err(e) => Err(std::io::Error::other(e.to_string())),
        }
    }
    fn look_in_tree(&self, tree: &Path, rel: &str, limit: u64) -> std::io::Result<Found> {
        ProgramTree::open(tree)?.look(Path::new(rel), limit)
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
        crate::fresh::run_id()
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

    fn subpane_exe(&self) -> Option<PathBuf> {
        std::env::current_exe().ok()
    }
    fn pi_session_dir(&self, home: &Home, id: &str) -> Option<PathBuf> {
        if id.is_empty() || id.contains('/') {
            return None;
        }
        let runs = std::fs::read_dir(home.runs_dir()).ok()?;
        let mut dirs: Vec<PathBuf> = runs
            .filter_map(Result::ok)
            .map(|e| e.path().join("sessions"))
            .collect();
        dirs.push(home.legacy_sessions_dir("pi"));
        dirs.into_iter().find(|d| holds_pi_session(d, id))
    }

    fn attempt_ancestor_vars(&self) -> Vec<(OsString, OsString)> {
        // One walk serves every plan of this process (a fan-out plans hundreds): its
        // ancestors change only when its parent dies, and then the attempt it ran under
        // still is the one it belongs to.
        static FOUND: std::sync::OnceLock<Vec<(OsString, OsString)>> = std::sync::OnceLock::new();
        FOUND.get_or_init(walk_to_attempt_ancestor).clone()
    }
}

/// When `pid` is a worker (`… __worker DIR`), the variables it gives its program.
fn worker_program_vars(pid: i32) -> Option<Vec<(OsString, OsString)>> {
    let cmdline = crate::procs::read_proc(format!("/proc/{pid}/cmdline")).ok()?;
    let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    if args.get(1) != Some(&crate::procs::WORKER_ARG.as_bytes()) {
        return None;
    }
    let paths = crate::store::AttemptPaths::new(PathBuf::from(OsStr::from_bytes(args.get(2)?)));
    let Some(spec) = crate::store::read_json::<AttemptSpec>(&paths.spec())
        .ok()
        .flatten()
    else {
        // Inside the attempt's sandbox the spec is hidden, but its request socket is carried
        // in: the run goes there, and the worker knows the lineage.
        return nest_socket_vars(&paths);
    };
    let vars = spec.program_vars(paths.dir(), &paths.out_dir());
    Some(vars.into_iter().map(|(k, v)| (k.into(), v)).collect())
}

/// When pid 1 is a sandbox's (`… __sandbox --policy ATTEMPT/spec.json …`), the request socket
/// its attempt carries in (the spec itself is hidden there).
fn sandbox_init_vars() -> Option<Vec<(OsString, OsString)>> {
    let cmdline = crate::procs::read_proc("/proc/1/cmdline").ok()?;
    let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    if args.get(1) != Some(&crate::procs::SANDBOX_ARG.as_bytes())
        || args.get(2) != Some(&&b"--policy"[..])
    {
        return None;
    }
    let spec = Path::new(OsStr::from_bytes(args.get(3)?));
    nest_socket_vars(&crate::store::AttemptPaths::new(
        spec.parent()?.to_path_buf(),
    ))
}

/// The variable naming the attempt's request socket for nested runs, when it is there.
fn nest_socket_vars(paths: &crate::store::AttemptPaths) -> Option<Vec<(OsString, OsString)>> {
    let socket = paths.nest_socket();
    socket
        .exists()
        .then(|| vec![(crate::spec::NEST_SOCKET_VAR.into(), socket.into_os_string())])
}

/// The most names of a run's `sessions/` looked at for a saved session.
const SESSION_NAMES_LIMIT: usize = 100_000;

/// pi names a saved session `<time>_<id>.jsonl` in its `--session-dir`; `--session` takes a
/// prefix of the id. The directory is what a sandboxed pi wrote: a tree of the program's.
fn holds_pi_session(dir: &Path, id: &str) -> bool {
    let Ok((names, _)) = ProgramTree::open(dir).and_then(|t| t.entries(SESSION_NAMES_LIMIT)) else {
        return false;
    };
    names.iter().any(|e| {
        let name = e.name.to_string_lossy();
        name.ends_with(".jsonl")
            && name
                .split_once('_')
                .is_some_and(|(_, rest)| rest.starts_with(id))
            && e.kind == Kind::File
    })
}

/// The environment of the nearest ancestor with `SUBPANE_RUN_ID` (see
/// [`System::attempt_ancestor_vars`]).
fn walk_to_attempt_ancestor() -> Vec<(OsString, OsString)> {
    let mut pid = crate::procs::stat(std::process::id() as i32).map_or(0, |s| s.ppid);
    // A process tree is shallow; the bound only guards against a loop of reused pids.
    for _ in 0..64 {
        if pid == 1 {
            // In a sandbox, pid 1 of its PID namespace is subpane's own (the program cannot
            // replace it) and the worker is outside: its command line names the attempt.
            return sandbox_init_vars().unwrap_or_default();
        }
        if pid < 1 {
            break;
        }
        if let Some(vars) = crate::procs::environ(pid)
            && vars.iter().any(|(k, _)| k == "SUBPANE_RUN_ID")
        {
            return vars;
        }
        // The worker itself (`env -i subpane run …` as the attempt's program has it for its
        // parent): what it gives its program, from the attempt's spec.
        if let Some(vars) = worker_program_vars(pid) {
            return vars;
        }
        pid = crate::procs::stat(pid).map_or(0, |s| s.ppid);
    }
    Vec::new()
}
