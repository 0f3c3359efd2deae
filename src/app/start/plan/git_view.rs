//! The workspace's repository as a sandbox sees it: its git directory becomes a private
//! overlay, and the branch the program may move is the one checked out.
//!
//! ```text
//!  WORKSPACE/.git  a directory ─► common_dir = git_dir = it (or its `commondir`)
//!                  a file      ─► git_dir from `gitdir: …`, common_dir from its `commondir`;
//!                                 the file itself read-only (a program could point it at a
//!                                 git directory of its own)
//!  git_dir/HEAD    `ref: refs/heads/B` ─► branch B       detached ─► no branch
//!  (--worktree: common_dir and branch come from the worktree's spec, see worktree.rs)
//! ```
//!
//! Read before anything runs, and the program's view of them is an overlay, so what is read
//! here stays true for the attempt. But the workspace is writable to programs, earlier ones
//! too: `.git`, `commondir` and `HEAD` are read as a program's tree
//! ([`System::look_in_tree`]), never through a link and never opened unless regular files.
//!
//! Common pitfalls:
//! * `gitdir:` and `commondir` may be relative: to the `.git` file's directory and to the
//!   git directory.
//! * A `.git` that is a FIFO would block a plain read forever; one that is a link could name
//!   any repository. Either gets no repository view (as a workspace that is not a
//!   repository's top).
//! * A work tree's git directory outside its common directory is not covered by the overlay:
//!   it is made read-only instead (the program cannot commit there, nor plant anything).

use super::*;
use crate::spec::GitRepo;
use crate::store::Found;

/// The most a `.git` file, `commondir` or `HEAD` may hold (a path, a ref name).
const GIT_FILE_LIMIT: u64 = 64 << 10;

/// The repository of `workspace` when its top is the workspace (`workspace/.git` exists),
/// with the attempt's overlay directories; `None` otherwise. A `.git` file joins
/// `read_only`.
pub(in crate::app) fn workspace_repo(
    sys: &dyn System,
    workspace: &Path,
    upper: PathBuf,
    work: PathBuf,
    read_only: &mut Vec<PathBuf>,
) -> Option<GitRepo> {
    let text = |tree: &Path, name: &str| match sys.look_in_tree(tree, name, GIT_FILE_LIMIT) {
        Ok(Found::File(bytes)) => String::from_utf8(bytes).ok(),
        _ => None,
    };
    let dot_git = workspace.join(".git");
    let git_dir = match sys.look_in_tree(workspace, ".git", GIT_FILE_LIMIT).ok()? {
        Found::Dir => dot_git.clone(),
        Found::File(bytes) => {
            let text = String::from_utf8(bytes).ok()?;
            let target = text.strip_prefix("gitdir:")?.trim();
            read_only.push(dot_git.clone());
            sys.canonicalize(&workspace.join(target)).ok()?
        }
    };
    let common_dir = match text(&git_dir, "commondir") {
        Some(c) => sys.canonicalize(&git_dir.join(c.trim())).ok()?,
        None => git_dir.clone(),
    };
    if !git_dir.starts_with(&common_dir) {
        read_only.push(git_dir.clone());
    }
    let branch = text(&git_dir, "HEAD").and_then(|h| branch_of_head(&h));
    Some(GitRepo {
        common_dir,
        git_dir,
        work_tree: workspace.to_path_buf(),
        branch,
        upper,
        work,
    })
}

/// `B` of a HEAD file saying `ref: refs/heads/B`.
fn branch_of_head(head: &str) -> Option<String> {
    head.trim()
        .strip_prefix("ref:")?
        .trim()
        .strip_prefix("refs/heads/")
        .filter(|b| !b.is_empty())
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::plan::fake::Fake;

    #[test]
    fn a_repository_directory_gives_its_checked_out_branch() {
        let mut sys = Fake::new();
        sys.dirs.push("/work/.git".into());
        sys.files
            .insert("/work/.git/HEAD".into(), "ref: refs/heads/feat/x\n".into());
        let mut ro = Vec::new();
        let r =
            workspace_repo(&sys, Path::new("/work"), "/u".into(), "/w".into(), &mut ro).unwrap();
        assert_eq!(r.common_dir, PathBuf::from("/work/.git"));
        assert_eq!(r.git_dir, r.common_dir);
        assert_eq!(r.branch.as_deref(), Some("feat/x"));
        assert!(ro.is_empty());
    }

    #[test]
    fn a_git_file_is_followed_once_and_made_read_only() {
        let mut sys = Fake::new();
        sys.dirs.push("/repo/.git".into());
        sys.dirs.push("/repo/.git/worktrees/w".into());
        sys.files.insert(
            "/work/.git".into(),
            "gitdir: /repo/.git/worktrees/w\n".into(),
        );
        sys.files
            .insert("/repo/.git/worktrees/w/commondir".into(), "../..\n".into());
        sys.files.insert(
            "/repo/.git/worktrees/w/HEAD".into(),
            "4b825dc642cb6eb9a060e54bf8d69288fbee4904\n".into(),
        );
        let mut ro = Vec::new();
        // The fake resolves `..` lexically when the result exists.
        sys.links
            .insert("/repo/.git/worktrees/w/../..".into(), "/repo/.git".into());
        let r =
            workspace_repo(&sys, Path::new("/work"), "/u".into(), "/w".into(), &mut ro).unwrap();
        assert_eq!(r.common_dir, PathBuf::from("/repo/.git"));
        assert_eq!(r.git_dir, PathBuf::from("/repo/.git/worktrees/w"));
        assert_eq!(r.branch, None);
        assert_eq!(ro, [PathBuf::from("/work/.git")]);
    }

    #[test]
    fn a_git_that_is_a_link_or_a_fifo_gives_no_view_and_is_never_opened() {
        let d = tempfile::tempdir().unwrap();
        let repo = d.path().join("repo");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::write(repo.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        let view =
            |ws: &Path| workspace_repo(&RealSystem, ws, "/u".into(), "/w".into(), &mut Vec::new());
        assert_eq!(view(&repo).unwrap().branch.as_deref(), Some("main"));
        let ws = d.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        std::os::unix::fs::symlink(repo.join(".git"), ws.join(".git")).unwrap();
        assert!(view(&ws).is_none(), "a link could name any repository");
        std::fs::remove_file(ws.join(".git")).unwrap();
        // A plain read of it would wait for a writer for ever.
        nix::unistd::mkfifo(
            &ws.join(".git"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        assert!(view(&ws).is_none());
    }

    #[test]
    fn no_repository_at_the_workspace_top_gives_none() {
        let sys = Fake::new();
        let mut ro = Vec::new();
        assert!(
            workspace_repo(&sys, Path::new("/work"), "/u".into(), "/w".into(), &mut ro).is_none()
        );
    }
}
