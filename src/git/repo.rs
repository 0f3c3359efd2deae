//! Questions about the user's repository, asked where git can be trusted to find it.

use std::path::{Path, PathBuf};

use super::{Cmd, GitError};

/// Where a directory sits in git: the top of its work tree and the repository's own git
/// directory (shared by all its worktrees; `.git` of the main one).
///
/// ```json
/// {"toplevel": "/src/app", "common_dir": "/src/app/.git"}
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepoDirs {
    pub toplevel: PathBuf,
    pub common_dir: PathBuf,
}

/// The work tree `dir` is in, or `None` when it is in none (outside a repository, in a bare
/// one, or inside a `.git` directory). Needs git 2.31 for `--path-format`.
pub fn discover(dir: &Path) -> Result<Option<RepoDirs>, GitError> {
    let out = Cmd::in_dir(dir)
        .args([
            "rev-parse",
            "--path-format=absolute",
            "--show-toplevel",
            "--git-common-dir",
        ])
        .read_if_ok()?;
    Ok(out.and_then(|o| {
        let mut lines = o.lines();
        let toplevel = lines.next().filter(|l| !l.is_empty())?;
        let common = lines.next().filter(|l| !l.is_empty())?;
        Some(RepoDirs {
            toplevel: toplevel.into(),
            common_dir: common.into(),
        })
    }))
}

/// The commit checked out in `toplevel`, or `None` when there is none yet (an unborn branch).
pub fn head_commit(toplevel: &Path) -> Result<Option<String>, GitError> {
    Cmd::in_dir(toplevel)
        .args(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"])
        .read_if_ok()
}

/// The commit `branch` points to, or `None` when there is no such branch.
pub fn branch_tip(common_dir: &Path, branch: &str) -> Result<Option<String>, GitError> {
    Cmd::on_git_dir(common_dir)
        .args(["rev-parse", "--verify", "--quiet"])
        .arg(format!("refs/heads/{branch}^{{commit}}"))
        .read_if_ok()
}
