//! Path math only: no IO beyond reading the environment for defaults.

use std::path::{Path, PathBuf};

use crate::spec::RunId;

/// The subpane home directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Home {
    root: PathBuf,
}

impl Home {
    /// `--home`, else `$SUBPANE_HOME`, else `${XDG_STATE_HOME:-~/.local/state}/subpane`.
    /// Relative paths are made absolute against the current directory, because the worker
    /// runs elsewhere.
    pub fn resolve(flag: Option<&Path>) -> Result<Self, String> {
        let chosen = if let Some(p) = flag {
            p.to_path_buf()
        } else if let Some(p) = std::env::var_os("SUBPANE_HOME").filter(|v| !v.is_empty()) {
            PathBuf::from(p)
        } else if let Some(p) = std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
            PathBuf::from(p).join("subpane")
        } else if let Some(h) = std::env::var_os("HOME").filter(|v| !v.is_empty()) {
            PathBuf::from(h).join(".local/state/subpane")
        } else {
            return Err("cannot find a home for subpane's records: set SUBPANE_HOME or HOME, or pass --home DIR".into());
        };
        let root = if chosen.is_absolute() {
            chosen
        } else {
            std::env::current_dir()
                .map_err(|e| format!("cannot resolve the home {}: {e}", chosen.display()))?
                .join(chosen)
        };
        Ok(Self { root })
    }

    pub fn at(root: PathBuf) -> Self {
        Self { root }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
    pub fn runs_dir(&self) -> PathBuf {
        self.root.join("runs")
    }
    pub fn run_dir(&self, id: &RunId) -> PathBuf {
        self.runs_dir().join(id.as_str())
    }
    pub fn run_json(&self, id: &RunId) -> PathBuf {
        self.run_dir(id).join(RUN_JSON)
    }
    pub fn attempt(&self, id: &RunId, n: u32) -> AttemptPaths {
        AttemptPaths::new(self.run_dir(id).join("attempts").join(n.to_string()))
    }
    /// Where an agent keeps the sessions of one run's attempts, so that `retry --resume`
    /// finds them (see `adapter::ArgvContext`). Never shared between runs: a sandboxed agent
    /// writes there.
    pub fn sessions_dir(&self, id: &RunId) -> PathBuf {
        self.run_dir(id).join("sessions")
    }
    /// Where pi kept the sessions of every run before they moved into each run's directory
    /// (read for `--resume` of such a session, never written).
    pub fn legacy_sessions_dir(&self, agent: &str) -> PathBuf {
        self.root.join("sessions").join(agent)
    }
    pub fn tmux_conf(&self) -> PathBuf {
        self.root.join("tmux.conf")
    }
    /// Where `--worktree` attempts get their git worktrees (outside every repository).
    /// `groups/`: the records of fan-outs whose driver runs on its own (`fanout --detach`).
    pub fn groups_dir(&self) -> PathBuf {
        self.root.join("groups")
    }

    /// `groups/<group>/`: `group.json` (the tasks) and `requests.jsonl` (for the driver).
    pub fn group_dir(&self, group: &RunId) -> PathBuf {
        self.groups_dir().join(group.as_str())
    }

    /// `groups/.open/`: an empty file named for each detached group with work left (what
    /// every command looks at for a driver that died, without reading every group).
    pub fn open_groups_dir(&self) -> PathBuf {
        self.groups_dir().join(".open")
    }

    pub fn worktrees_dir(&self) -> PathBuf {
        self.root.join("worktrees")
    }
    /// The git worktree of attempt `n` of a `--worktree` run.
    pub fn worktree(&self, id: &RunId, n: u32) -> PathBuf {
        self.worktrees_dir().join(format!("{id}-{n}"))
    }
}

/// The run's record, in its run directory.
const RUN_JSON: &str = "run.json";

/// The files of one attempt directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttemptPaths {
    dir: PathBuf,
}

macro_rules! file {
    ($name:ident, $file:literal) => {
        pub fn $name(&self) -> PathBuf {
            self.dir.join($file)
        }
    };
}

impl AttemptPaths {
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    /// The run directory (`runs/<id>`), two levels up.
    pub fn run_dir(&self) -> PathBuf {
        self.dir
            .parent()
            .and_then(Path::parent)
            .map(Path::to_path_buf)
            .unwrap_or_default()
    }
    /// The run's `run.json`, two levels up.
    pub fn run_json(&self) -> PathBuf {
        self.run_dir().join(RUN_JSON)
    }
    file!(spec, "spec.json");
    file!(launch, "launch.json");
    file!(worker, "worker.json");
    // worker.json as it was while the program ran, kept under a second name when the end's
    // replaces it (`Spare`: no inode is freed).
    file!(worker_running, ".worker-running.json");
    // What the attempt has done so far (usage, the last event), rewritten as it runs.
    file!(progress, "progress.json");
    file!(result, "result.json");
    file!(cancel, "cancel.json");
    // The state asked for the agent, held stopped or running (`subpane pause`, `resume`).
    file!(stop, "stop.json");
    // The socket of an attempt with input (`stdin: "input"`): `subpane send`, MCP `send` ask
    // the worker there to give the running agent a message. Out of a sandbox's reach (the
    // home is hidden in it).
    file!(input_socket, "input.sock");
    file!(events, "events.jsonl");
    file!(stdout_log, "stdout.log");
    file!(stderr_log, "stderr.log");
    file!(output, "output.txt");
    file!(prompt, "prompt.txt");
    // The egress proxy's decisions (sandboxed attempts with `--network allow:…`).
    file!(network_log, "network.jsonl");
    // The egress proxy's socket, relayed into the sandbox's network namespace.
    file!(proxy_socket, "proxy.sock");
    // The request socket of a sandboxed attempt's nested runs, served outside the sandbox
    // (`app::nest`) and carried into it read-only.
    pub fn nest_socket(&self) -> PathBuf {
        self.dir.join(crate::spec::NEST_SOCKET)
    }
    // A FIFO the worker opens and closes right after writing result.json: waiting
    // supervisors hold it open for reading and see the hang-up at once.
    file!(done_fifo, "done.fifo");
    // The one-shot environment file: read and emptied by the worker before the agent starts,
    // then renamed to worker.json with the worker's first facts in it (`Spare`).
    file!(env_file, ".env");
    // The program's own artifact directory (`$SUBPANE_OUT_DIR`): the one place of the home a
    // sandboxed program may write. Its files are listed and hashed, never interpreted.
    file!(out_dir, "out");
    // A sandboxed agent's own state directory (seeded from the user's; it writes there).
    file!(agent_state, "agent");
    // A sandboxed workspace's repository: what the program changed in its git directory
    // (an overlay's upper and work directories), read for its branch, then removed.
    file!(git_upper, "git/upper");
    file!(git_work, "git/work");
    // `--worktree`: the worktree's `git status` and its diff from the base commit.
    file!(worktree_status, "worktree.status.txt");
    file!(worktree_diff, "worktree.diff.patch");
    // A sandboxed repository's refused commits, as a bundle the user can fetch.
    file!(git_refused, "git-refused.bundle");
}

/// Names of the files listed as artifacts, with their kinds.
pub const ARTIFACT_FILES: &[(&str, &str)] = &[
    ("spec", "spec.json"),
    ("prompt", "prompt.txt"),
    ("events", "events.jsonl"),
    ("stdout", "stdout.log"),
    ("stderr", "stderr.log"),
    ("output", "output.txt"),
    ("worker", "worker.json"),
    ("network", "network.jsonl"),
];

/// The artifacts of a `--worktree` attempt, listed after [`ARTIFACT_FILES`] (only for such
/// attempts, so that other attempts look for no more files at their end).
pub const WORKTREE_ARTIFACT_FILES: &[(&str, &str)] = &[
    ("worktree_status", "worktree.status.txt"),
    ("worktree_diff", "worktree.diff.patch"),
];

/// The artifact of an attempt whose program worked on a repository's private view (only
/// such attempts look for it).
pub const GIT_ARTIFACT_FILES: &[(&str, &str)] = &[("git_refused", "git-refused.bundle")];
