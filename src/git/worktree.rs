//! An attempt's git worktree: made from the user's repository, recorded at the end, removed.
//!
//! ```text
//!  add:     git -C REPO worktree add -q -b BRANCH PATH BASE ─► git_dir (rev-parse --absolute-git-dir)
//!           (failed: the branch git made anyway is deleted, the directory removed)
//!  record:  status --porcelain=v1 --untracked-files=all      ─► worktree.status.txt
//!           cp GIT_DIR/index TMP/index (TMP: a new private directory, removed after);
//!           GIT_INDEX_FILE=TMP/index add -A (gitlinks excluded);
//!           diff --cached --binary --ignore-submodules=all BASE ─► worktree.diff.patch
//!  dispose: worktree remove --force --force PATH; the branch deleted unless BASE..BRANCH has commits
//! ```
//!
//! Common pitfalls:
//! * The diff is taken through a temporary copy of the worktree's index: `git add -A` on the
//!   real one would change what the program (or its user, in a kept worktree) had staged, and
//!   a lock left by a killed git would make it fail. The copy keeps the stat data, so only
//!   changed files are hashed again.
//! * `git worktree add -b` creates the branch before it checks the path: a failed add can
//!   leave a branch behind.
//! * `git diff` obeys the user's config: colour, an external diff or a textconv filter would
//!   make a patch that does not apply. All three are turned off.
//! * Submodules are never entered (see [`crate::git`]): a program can make a repository of
//!   its own at a submodule's path, whose config would run for a `git status` inside it. They
//!   are left out of the status and the diff, and out of `add` by pathspec. A directory that
//!   holds a repository and is no submodule yet is added as one by `add -A` (git reads only
//!   its `HEAD` for that), then left out of the diff.
//! * A program may lock its worktree: removal forces twice, as `git worktree remove` asks.
//! * Branch deletion compares and deletes in one step (`update-ref -d REF OLD`), so a commit
//!   that lands between the count and the deletion is never lost.
//! * git does not make or remove a worktree atomically: `worktree add` reads every other
//!   worktree's record, and one being made or removed beside it makes it fail ("failed to
//!   read .git/worktrees/…/commondir"). Attempts started together do exactly that, so adding,
//!   removing and pruning hold [`Lock`], one lock file in the directory the worktrees are
//!   made in.

use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};

use super::{Cmd, GitError, branch_tip};
use crate::spec::WorktreeSpec;

/// Held while worktrees are made, removed or pruned (see the module doc); released on drop.
pub struct Lock {
    _file: Flock<std::fs::File>,
}

impl Lock {
    /// Waits for the lock of the worktrees made in `dir` (`$SUBPANE_HOME/worktrees`). The
    /// holders only run git's bookkeeping, so the wait is short.
    pub fn acquire(dir: &Path) -> Result<Self, GitError> {
        let path = dir.join(".lock");
        let write_err = |source| GitError::Write {
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(write_err)?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(write_err)?;
        let file = Flock::lock(file, FlockArg::LockExclusive)
            .map_err(|(_, e)| write_err(std::io::Error::from(e)))?;
        Ok(Self { _file: file })
    }

    /// The lock for the worktree at `path` (in its parent directory).
    pub fn for_worktree(path: &Path) -> Result<Self, GitError> {
        Self::acquire(path.parent().unwrap_or(Path::new("/")))
    }
}

/// Makes the worktree at `path` on the new branch `branch` from the commit `base`, and returns
/// its private git directory. The caller makes sure `path` does not exist, and holds [`Lock`].
/// On failure nothing of it is left.
pub fn add(
    toplevel: &Path,
    common_dir: &Path,
    path: &Path,
    branch: &str,
    base: &str,
) -> Result<PathBuf, GitError> {
    let made = Cmd::in_dir(toplevel)
        .no_attributes(base)
        .args(["worktree", "add", "--quiet", "-b", branch])
        .arg(path)
        .arg(base)
        .read()
        .and_then(|_| {
            Cmd::in_dir(path)
                .args(["rev-parse", "--absolute-git-dir"])
                .read()
        });
    match made {
        Ok(git_dir) => Ok(PathBuf::from(git_dir)),
        Err(e) => {
            undo_add(common_dir, path, branch, base);
            Err(e)
        }
    }
}

/// Takes back what a failed [`add`] may have made.
fn undo_add(common_dir: &Path, path: &Path, branch: &str, base: &str) {
    if path.exists() {
        let _ = remove(common_dir, path);
        let _ = std::fs::remove_dir_all(path);
    }
    let _ = delete_ref_if_at(common_dir, branch, base);
    let _ = prune(common_dir);
}

/// Removes the worktree at `path` (and its private git directory), whatever it holds.
pub fn remove(common_dir: &Path, path: &Path) -> Result<(), GitError> {
    Cmd::on_git_dir(common_dir)
        .args(["worktree", "remove", "--force", "--force"])
        .arg(path)
        .read()
        .map(|_| ())
}

/// Forgets worktrees whose directories are gone.
pub fn prune(common_dir: &Path) -> Result<(), GitError> {
    Cmd::on_git_dir(common_dir)
        .args(["worktree", "prune"])
        .read()
        .map(|_| ())
}

/// Deletes `refs/heads/BRANCH` only if it still points at `tip`.
fn delete_ref_if_at(common_dir: &Path, branch: &str, tip: &str) -> Result<(), GitError> {
    Cmd::on_git_dir(common_dir)
        .args(["update-ref", "-d"])
        .arg(format!("refs/heads/{branch}"))
        .arg(tip)
        .read()
        .map(|_| ())
}

/// Deletes the worktree's branch unless it has commits that `base` has not. Returns whether
/// the branch is still there. A branch the program deleted or renamed is simply gone.
pub fn delete_branch_unless_ahead(wt: &WorktreeSpec) -> Result<bool, GitError> {
    let Some(tip) = branch_tip(&wt.common_dir, &wt.branch)? else {
        return Ok(false);
    };
    let ahead = Cmd::on_git_dir(&wt.common_dir)
        .args(["rev-list", "--count"])
        .arg(format!("{}..{tip}", wt.base))
        .read()?;
    if ahead != "0" {
        return Ok(true);
    }
    delete_ref_if_at(&wt.common_dir, &wt.branch, &tip)?;
    Ok(false)
}

/// Removes the worktree, then its branch unless it has new commits. Returns whether the
/// branch is still there. The caller holds [`Lock`].
pub fn dispose(wt: &WorktreeSpec) -> Result<bool, GitError> {
    remove(&wt.common_dir, &wt.path)?;
    delete_branch_unless_ahead(wt)
}

/// A command on the worktree with every location from the spec, and no attributes from it.
fn in_worktree(wt: &WorktreeSpec) -> Cmd {
    Cmd::in_worktree(&wt.path, &wt.git_dir, &wt.common_dir).no_attributes(&wt.base)
}

/// `git status --porcelain=v1 --untracked-files=all` into `out`, without refreshing the
/// worktree's index (`--no-optional-locks`).
pub fn write_status(wt: &WorktreeSpec, out: &Path) -> Result<(), GitError> {
    in_worktree(wt)
        .args([
            "--no-optional-locks",
            "status",
            "--porcelain=v1",
            "--untracked-files=all",
            "--ignore-submodules=all",
        ])
        .write_to(out)
}

/// The worktree's whole change from `base` (commits, staged, unstaged and untracked files;
/// ignored files left out) as a binary patch into `out`, that `git apply --binary` applies
/// to a checkout of `base`. The scratch index lives in a new private directory made in
/// `scratch_in` (no name there can have been planted in advance), removed afterwards.
pub fn write_diff(wt: &WorktreeSpec, scratch_in: &Path, out: &Path) -> Result<(), GitError> {
    let scratch = tempfile::Builder::new()
        .prefix(".worktree-index-")
        .tempdir_in(scratch_in)
        .map_err(|source| GitError::Write {
            path: scratch_in.to_path_buf(),
            source,
        })?;
    diff_through(wt, scratch.path(), out)
}

fn diff_through(wt: &WorktreeSpec, scratch: &Path, out: &Path) -> Result<(), GitError> {
    let tmp_index = &scratch.join("index");
    use std::os::unix::fs::OpenOptionsExt;
    let write_err = |source| GitError::Write {
        path: tmp_index.to_path_buf(),
        source,
    };
    // The worktree's index is in the git directory the program could write: never read
    // through a link.
    let index = std::fs::File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(wt.git_dir.join("index"));
    match index {
        Ok(mut from) if from.metadata().is_ok_and(|m| m.is_file()) => {
            let mut to = std::fs::File::create_new(tmp_index).map_err(write_err)?;
            std::io::copy(&mut from, &mut to).map_err(write_err)?;
        }
        // No index yet (or something other than a file under its name): `add -A` builds one
        // from nothing (every file is hashed).
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {}
        Err(source) => return Err(write_err(source)),
    }
    // `add` looks into every populated submodule of the index (a `git status` there), and
    // has no option against it: the gitlinks are left out by pathspec.
    let pathspecs = scratch.join("pathspecs");
    let gitlinks = gitlinks_in(wt, tmp_index)?;
    let mut add = in_worktree(wt)
        .env("GIT_INDEX_FILE", tmp_index)
        .args(["add", "--all"]);
    if !gitlinks.is_empty() {
        let mut list = Vec::new();
        for g in &gitlinks {
            list.extend_from_slice(b":(exclude,literal)");
            list.extend_from_slice(g);
            list.push(0);
        }
        std::fs::write(&pathspecs, list).map_err(|source| GitError::Write {
            path: pathspecs.clone(),
            source,
        })?;
        let mut from = std::ffi::OsString::from("--pathspec-from-file=");
        from.push(&pathspecs);
        add = add.arg(from).arg("--pathspec-file-nul");
    }
    add.read()?;
    in_worktree(wt)
        .env("GIT_INDEX_FILE", tmp_index)
        .args([
            "diff",
            "--cached",
            "--binary",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--ignore-submodules=all",
            &wt.base,
            "--",
        ])
        .write_to(out)
}

/// The paths of the gitlinks (submodules) in `index`, as git names them.
fn gitlinks_in(wt: &WorktreeSpec, index: &Path) -> Result<Vec<Vec<u8>>, GitError> {
    let listed = in_worktree(wt)
        .env("GIT_INDEX_FILE", index)
        .args(["ls-files", "--stage", "-z"])
        .read_bytes()?;
    Ok(super::gitlinks_of_listing(&listed)
        .map(<[u8]>::to_vec)
        .collect())
}
