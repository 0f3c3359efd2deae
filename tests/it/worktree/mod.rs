//! `run --worktree` end to end: each test makes its own repository in its work directory, runs
//! attempts in worktrees of it, and checks what was stored, what was removed or kept, and
//! that the repository's own working tree and HEAD were never touched.
//!
//! `ends` (completed, committed, failed, cancelled, lost, side by side), `refused` (nothing
//! is made), `sandbox` (git inside the sandbox, hooks and config out of reach).

mod ends;
mod refused;
mod sandbox;
mod summary;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::harness::{Ran, TestEnv, assert_valid_envelope};

/// Long enough for a loaded 2-core machine; a run that takes longer has hung.
const LIMIT: Duration = Duration::from_secs(60);
const HANG: &str = "a --worktree run did not end";

/// Bytes that no text diff could carry: NULs, a lone CR, invalid UTF-8.
const BINARY: &[u8] = b"\x00\x01\x02\r\xff\xfe bin\x00";

/// `git ARGS` in `dir`, which must succeed; its stdout.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .stdin(Stdio::null())
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?} in {} failed: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A new repository at `repo` on branch `main`, with a committer and no signing.
pub(crate) fn init_repo(repo: &Path) {
    std::fs::create_dir_all(repo).unwrap();
    git(repo, &["init", "-q", "-b", "main"]);
    for (k, v) in [
        ("user.name", "Test"),
        ("user.email", "test@example.com"),
        ("commit.gpgsign", "false"),
    ] {
        git(repo, &["config", k, v]);
    }
}

/// A repository at `work/repo` with one commit: `a.txt`, `sub/b.txt` and a binary file.
fn make_repo(env: &TestEnv) -> PathBuf {
    let repo = env.work.join("repo");
    std::fs::create_dir_all(repo.join("sub")).unwrap();
    init_repo(&repo);
    std::fs::write(repo.join("a.txt"), "one\n").unwrap();
    std::fs::write(repo.join("sub/b.txt"), "bee\n").unwrap();
    std::fs::write(repo.join("data.bin"), BINARY).unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "base"]);
    repo
}

/// What must not change in the repository: HEAD, its working tree's status, its files.
#[derive(Debug, PartialEq)]
struct RepoState {
    head: String,
    status: String,
    a: String,
}

fn state(repo: &Path) -> RepoState {
    RepoState {
        head: git(repo, &["rev-parse", "HEAD"]).trim().to_owned(),
        status: git(repo, &["status", "--porcelain=v1", "--untracked-files=all"]),
        a: std::fs::read_to_string(repo.join("a.txt")).unwrap(),
    }
}

fn branches(repo: &Path) -> Vec<String> {
    git(repo, &["branch", "--format=%(refname:short)"])
        .lines()
        .map(str::to_owned)
        .collect()
}

fn worktree_count(repo: &Path) -> usize {
    git(repo, &["worktree", "list", "--porcelain"])
        .lines()
        .filter(|l| l.starts_with("worktree "))
        .count()
}

fn run_json(env: &TestEnv, args: &[&str]) -> (Ran, Value) {
    let r = env.sp_within(LIMIT, HANG, args);
    let v = r.json();
    assert_valid_envelope(&v);
    (r, v)
}

fn artifact<'a>(v: &'a Value, kind: &str) -> &'a Value {
    v["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} artifact in {}", v["artifacts"]))
}

/// Applies `patch` to a fresh clone of `repo` checked out at `base`; the clone's directory.
fn apply_to_fresh_checkout(env: &TestEnv, repo: &Path, base: &str, patch: &Path) -> PathBuf {
    let fresh = env.root.path().join(format!("fresh-{}", &base[..8]));
    let out = Command::new("git")
        .args(["clone", "-q", "--no-checkout"])
        .arg(repo)
        .arg(&fresh)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    git(&fresh, &["checkout", "-q", "--detach", base]);
    let applied = Command::new("git")
        .arg("-C")
        .arg(&fresh)
        .args(["apply", "--binary", "--whitespace=nowarn"])
        .arg(patch)
        .output()
        .unwrap();
    assert!(
        applied.status.success(),
        "the stored patch does not apply to a checkout of base: {}",
        String::from_utf8_lossy(&applied.stderr)
    );
    fresh
}
