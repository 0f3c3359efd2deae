//! The git binary: one command at a time, argv only (never a shell), with git's own message
//! kept for the error.
//!
//! ```text
//!  caller ─► git::repo / git::worktree (what to ask) ─► Cmd (argv + a clean environment)
//!                                                          │ stdin /dev/null, a deadline
//!                                                          │ (crate::command: killed with its group)
//!                                                          ├─► stdout: a String, or straight into a file
//!                                                          └─► stderr: kept for GitError::Failed
//! ```
//!
//! Two kinds of call, and the difference matters:
//! * **Trusted places** (the user's repository, before anything ran): `git -C DIR …`, letting
//!   git find the repository as it always does.
//! * **The attempt's worktree, after the program ran**: the program may have rewritten the
//!   worktree's `.git` file (or a gitdir's `commondir` file) to point git at a config of its
//!   own, whose `core.fsmonitor` would then run outside any sandbox. So git is told every
//!   location (`GIT_DIR`, `GIT_COMMON_DIR`, `GIT_WORK_TREE`) from the spec and discovers
//!   nothing there.
//!
//! Common pitfalls:
//! * Variables inherited from a caller that runs inside git (a hook sets `GIT_DIR`, `GIT_INDEX_FILE`,
//!   …) would point every command at the wrong repository: [`REPO_VARS`] are removed first.
//! * A diff can be large and binary: it goes straight from git's stdout into its file, never
//!   through memory or a `String`.
//! * git may wait for a password on a terminal: `GIT_TERMINAL_PROMPT=0` and stdin `/dev/null`.
//! * A repository's config may run programs for git (`core.fsmonitor`, hooks, filters named
//!   by `.gitattributes`): every command runs with fsmonitor and hooks off, and those that
//!   read the work tree take their attributes from the empty tree ([`Cmd::no_attributes`]).
//! * A submodule is another repository, whose config and `info/attributes` none of that
//!   reaches: `git status`, `git diff` and `git add` run `git status` inside every populated
//!   submodule of the index, and a program can make any directory one. Recursion is off for
//!   every command, status and diff ignore submodules on their command line
//!   (`--ignore-submodules=all`: `diff.ignoreSubmodules` alone yields to a `.gitmodules`
//!   entry's `ignore`), and `add` is kept off gitlinks by pathspec (it has no such option).
//! * git may wait for something else (a clean filter, a hook): every command runs under
//!   [`crate::command`]'s deadline, [`set_time_limit`] (default [`DEFAULT_TIME_LIMIT`]), and is
//!   killed with what it started after it, so the end of an attempt is always recorded.

mod admit;
pub mod carry;
mod repo;
pub mod worktree;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::command;

pub use repo::{RepoDirs, branch_tip, discover, head_commit};

/// Variables that choose the repository, the work tree or the index: removed from every git
/// command (and from the program of a `--worktree` attempt), so git looks where it is told.
pub const REPO_VARS: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
];

/// Variables that change how git reads a pathspec: the exclusions subpane passes
/// (`:(exclude,literal)PATH`) must mean what they say.
const PATHSPEC_VARS: &[&str] = &[
    "GIT_LITERAL_PATHSPECS",
    "GIT_GLOB_PATHSPECS",
    "GIT_NOGLOB_PATHSPECS",
    "GIT_ICASE_PATHSPECS",
];

/// Why a git command did not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("cannot run git: {0}; install git (2.31 or newer) or put it on PATH")]
    Spawn(std::io::Error),
    #[error("`git {args}` failed: {message}")]
    Failed { args: String, message: String },
    #[error("{0} (a filter or hook that waits?); set SUBPANE_GIT_TIMEOUT to give it longer")]
    TimedOut(#[source] command::TimedOut),
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The program deleted (in its view) what a carry reads: `.git`, or a part of it.
    #[error(
        "the program removed {0} (in its own view of the repository), so nothing of its git comes back; the repository's own git directory is as it was"
    )]
    ProgramRemoved(String),
}

/// How long one git command may take by default: a filter or hook that waits for input
/// must not keep an attempt from ever being recorded.
pub const DEFAULT_TIME_LIMIT: Duration = Duration::from_secs(120);

static TIME_LIMIT: command::Limit = command::Limit::new(DEFAULT_TIME_LIMIT);

/// Sets how long each git command of this process may take before it is killed (with the
/// processes it started).
pub fn set_time_limit(limit: Duration) {
    TIME_LIMIT.set(limit);
}

/// One git command being built.
pub(crate) struct Cmd {
    cmd: Command,
    args: Vec<String>,
}

impl Cmd {
    /// `git -C dir …`: git finds the repository from `dir` (trusted places only).
    pub(crate) fn in_dir(dir: &Path) -> Self {
        let mut c = Self::bare();
        c.cmd.current_dir(dir);
        c
    }

    /// A command on the repository's own git directory, with no work tree.
    pub(crate) fn on_git_dir(common_dir: &Path) -> Self {
        let mut c = Self::bare();
        c.cmd.current_dir(common_dir).env("GIT_DIR", common_dir);
        c
    }

    /// A command in a worktree whose every location is given (see the module doc).
    pub(crate) fn in_worktree(work_tree: &Path, git_dir: &Path, common_dir: &Path) -> Self {
        let mut c = Self::bare();
        c.cmd
            .current_dir(work_tree)
            .env("GIT_DIR", git_dir)
            .env("GIT_COMMON_DIR", common_dir)
            .env("GIT_WORK_TREE", work_tree);
        c
    }

    fn bare() -> Self {
        let mut cmd = Command::new("git");
        for v in REPO_VARS {
            cmd.env_remove(v);
        }
        for v in PATHSPEC_VARS {
            cmd.env_remove(v);
        }
        cmd.env("GIT_TERMINAL_PROMPT", "0").stdin(Stdio::null());
        // Nothing of the repository's runs for subpane: no fsmonitor, no hook (`/dev/null`
        // holds none), and git never goes into a submodule, where neither holds (a
        // submodule's own config and `info/attributes` are its own).
        cmd.args([
            "-c",
            "core.fsmonitor=false",
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "submodule.recurse=false",
            "-c",
            "diff.ignoreSubmodules=all",
            "-c",
            "status.submoduleSummary=false",
        ]);
        Self {
            cmd,
            args: Vec::new(),
        }
    }

    /// No attributes from the work tree (nor `$GIT_DIR/info`): they come from git's empty
    /// tree, so no filter, textconv or diff driver a `.gitattributes` names runs. `any_id`
    /// is an object id of the repository: its length says the object format. Call before
    /// the subcommand's arguments.
    pub(crate) fn no_attributes(mut self, any_id: &str) -> Self {
        self.cmd
            .arg(format!("--attr-source={}", empty_tree(any_id)));
        self
    }

    /// Reads stdin from `file`.
    pub(crate) fn stdin_from(mut self, file: std::fs::File) -> Self {
        self.cmd.stdin(file);
        self
    }

    pub(crate) fn env(mut self, k: &str, v: impl AsRef<OsStr>) -> Self {
        self.cmd.env(k, v);
        self
    }

    pub(crate) fn arg(mut self, a: impl AsRef<OsStr>) -> Self {
        self.args.push(a.as_ref().to_string_lossy().into_owned());
        self.cmd.arg(a);
        self
    }

    pub(crate) fn args<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(mut self, v: I) -> Self {
        for a in v {
            self = self.arg(a);
        }
        self
    }

    /// Runs it; its stdout, trimmed. A non-zero exit is [`GitError::Failed`].
    pub(crate) fn read(self) -> Result<String, GitError> {
        self.read_bytes()
            .map(|out| String::from_utf8_lossy(&out).trim().to_owned())
    }

    /// Runs it; its stdout as it is (paths git prints with `-z`).
    pub(crate) fn read_bytes(mut self) -> Result<Vec<u8>, GitError> {
        self.cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let out = self.output()?;
        if out.status.success() {
            Ok(out.stdout)
        } else {
            Err(self.failed(&out.stderr, out.status))
        }
    }

    /// Runs it; whether it exited 0 (stderr dropped). For questions git answers with its
    /// exit code (`rev-parse --verify --quiet`).
    pub(crate) fn read_if_ok(mut self) -> Result<Option<String>, GitError> {
        self.cmd.stdout(Stdio::piped()).stderr(Stdio::null());
        let out = self.output()?;
        Ok(out
            .status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned()))
    }

    /// Runs it with stdout going straight into a new file at `path`: whatever is under that
    /// name is removed first (a link is removed, never written through).
    pub(crate) fn write_to(mut self, path: &Path) -> Result<(), GitError> {
        use std::os::unix::fs::OpenOptionsExt;
        let _ = std::fs::remove_file(path);
        let file = std::fs::File::options()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
            .map_err(|source| GitError::Write {
                path: path.to_path_buf(),
                source,
            })?;
        self.cmd.stdout(file).stderr(Stdio::piped());
        let out = self.output()?;
        if out.status.success() {
            Ok(())
        } else {
            Err(self.failed(&out.stderr, out.status))
        }
    }

    /// Runs it to the end, or kills it with what it started once the time limit passes (see
    /// [`crate::command`]).
    fn output(&mut self) -> Result<std::process::Output, GitError> {
        let name = format!("git {}", self.args.join(" "));
        command::output(&mut self.cmd, &name, TIME_LIMIT.get()).map_err(|e| match e {
            command::Error::Io(e) => GitError::Spawn(e),
            command::Error::TimedOut(t) => GitError::TimedOut(t),
        })
    }

    fn failed(&self, stderr: &[u8], status: std::process::ExitStatus) -> GitError {
        GitError::Failed {
            args: self.args.join(" "),
            message: message(stderr, status),
        }
    }
}

/// git's empty tree in the object format whose ids are as long as `any_id` (SHA-256: 64 hex
/// digits; SHA-1: 40). git knows it without it being stored.
pub(crate) fn empty_tree(any_id: &str) -> &'static str {
    if any_id.len() == 64 {
        "6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321"
    } else {
        "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
    }
}

/// The paths of the gitlinks (submodules) in a `-z` listing of `ls-files --stage` or
/// `ls-tree -r`: `<mode> <two fields>\t<path>\0` per entry, gitlinks of mode 160000.
pub(crate) fn gitlinks_of_listing(listing: &[u8]) -> impl Iterator<Item = &[u8]> {
    listing.split(|b| *b == 0).filter_map(|e| {
        let tab = e.iter().position(|b| *b == b'\t')?;
        e.starts_with(b"160000 ").then(|| &e[tab + 1..])
    })
}

/// git's own words from its stderr: its hints and progress lines dropped, bounded.
fn message(stderr: &[u8], status: std::process::ExitStatus) -> String {
    let text = String::from_utf8_lossy(stderr);
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("hint:") && !l.starts_with("Preparing "))
        .collect();
    if lines.is_empty() {
        return format!("git exited with {status}");
    }
    let mut m = lines.join("; ");
    crate::term::cut(&mut m, 2000);
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn gitlinks_are_read_from_listings() {
        let a = "a".repeat(40);
        let listing =
            format!("100644 blob {a}\ta.txt\0160000 commit {a}\tlib\0160000 {a} 0\tsub/x y\0");
        let found: Vec<&[u8]> = gitlinks_of_listing(listing.as_bytes()).collect();
        assert_eq!(found, [b"lib".as_slice(), b"sub/x y"]);
        assert_eq!(gitlinks_of_listing(b"").count(), 0);
    }

    #[test]
    fn messages_keep_what_git_said_and_drop_its_hints() {
        let st = std::process::ExitStatus::from_raw(128 << 8);
        let m = message(
            b"Preparing worktree (new branch 'x')\nfatal: 'x' is not a valid branch name\nhint: See `man git check-ref-format`\n",
            st,
        );
        assert_eq!(m, "fatal: 'x' is not a valid branch name");
        assert!(message(b"", st).contains("128"));
        assert!(message("é".repeat(3000).as_bytes(), st).len() <= 2004);
    }
}
