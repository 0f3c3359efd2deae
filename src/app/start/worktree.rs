//! `--worktree`: the attempt runs in a new git worktree of the `--cwd` repository.
//!
//! ```text
//!  plan:   --cwd ─► System::git_repo ─► toplevel, common dir ─► WorktreeSpec {repo, path, branch,
//!          (none: exit 2)                  subdir = cwd − toplevel       subdir, base: "" }
//!          spec.cwd = $SUBPANE_HOME/worktrees/<run-id>-<n>/<subdir>
//!  start:  HEAD ─► base; git worktree add -b subpane/<run-id>[-<n>] PATH BASE ─► git_dir
//!          (before any file of the attempt; a failure starts nothing and leaves nothing)
//!  end:    the worker stores status and diff, then removes a completed attempt's worktree
//!          (src/worker/worktree.rs)
//!  gc:     kept worktrees go with their runs; git worktree prune
//! ```
//!
//! The worktree lives outside the repository, so the repository's own status never shows it,
//! and attempts side by side each write their own copy of the files.
//!
//! Common pitfalls:
//! * Git names branches more strictly than subpane names runs: `a..b`, `x.` and `x.lock`
//!   are good run ids but not branch names; such a run is refused before anything is made.
//! * The worktree is a checkout of HEAD: uncommitted changes in `--cwd` are not in it. A
//!   `--cwd` directory that HEAD does not have is created empty in the worktree.
//! * A sandboxed program commits into the repository's git directory (objects, refs, logs,
//!   `worktrees/<name>`), so git must work there; but a hook, a config, another branch or a
//!   rebase state written there would act outside the sandbox at the user's next git
//!   command. It works on a private overlay of the git directory, and the worker carries
//!   back its branch and the objects of its commits, nothing else.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use crate::app::{Error, System};
use crate::git::{self, GitError, RepoDirs};
use crate::spec::{AttemptSpec, RunId, SandboxSpec, WorktreeSpec};
use crate::store::Home;

/// The branch made for attempt `attempt`: `subpane/<run-id>`, and `subpane/<run-id>-<n>`
/// for later attempts (the first one's branch may have been kept with its commits).
pub fn branch_name(run_id: &RunId, attempt: u32) -> Result<String, Error> {
    let id = run_id.as_str();
    // Run ids are [A-Za-z0-9][A-Za-z0-9._-]*: of git's rules for ref names
    // (git-check-ref-format) only these three can be broken by one.
    if id.contains("..") || id.ends_with('.') || id.ends_with(".lock") {
        return Err(Error::invalid(format!(
            "{{worktree}}: run id `{id}` cannot name a git branch (no `..`, and no `.` or `.lock` at the end); choose another {{run_id}}"
        )));
    }
    Ok(if attempt == 1 {
        format!("subpane/{id}")
    } else {
        format!("subpane/{id}-{attempt}")
    })
}

/// The plan's rules for `--worktree`: git is installed, `cwd` is inside a git work tree, the
/// run id makes a branch name, and the worktree's directory is free and outside the
/// repository. Creates nothing; `base` and `git_dir` are filled in by [`create`]. A later
/// attempt (a retry) passes the same rules with its own directory and branch, in the same
/// place of the same repository, made from the repository's HEAD of its own start.
pub(in crate::app) fn plan(
    sys: &dyn System,
    home: &Home,
    run_id: &RunId,
    attempt: u32,
    cwd: &Path,
    path_var: Option<&OsStr>,
) -> Result<WorktreeSpec, Error> {
    let branch = branch_name(run_id, attempt)?;
    if sys.which("git", path_var, cwd).is_none() {
        return Err(Error::invalid(
            "{worktree} needs git, which was not found on PATH; install git 2.31 or newer",
        ));
    }
    let Some(RepoDirs {
        toplevel,
        common_dir,
    }) = sys.git_repo(cwd)
    else {
        return Err(Error::invalid(format!(
            "{{worktree}} needs {{cwd}} inside a git work tree, and `{}` is in none; run without {{worktree}}, or point {{cwd}} at a repository",
            cwd.display()
        )));
    };
    let toplevel = sys.canonicalize(&toplevel).unwrap_or(toplevel);
    let subdir = cwd
        .strip_prefix(&toplevel)
        .map_err(|_| {
            Error::invalid(format!(
                "{{worktree}}: {{cwd}} `{}` is not below its repository's top `{}` (a symbolic link?); pass {{cwd}} inside the repository itself",
                cwd.display(),
                toplevel.display()
            ))
        })?
        .to_path_buf();
    let path = home.worktree(run_id, attempt);
    let home_root = sys
        .canonicalize(home.root())
        .unwrap_or_else(|_| home.root().to_path_buf());
    if home_root.starts_with(&toplevel) {
        return Err(Error::invalid(format!(
            "{{worktree}}: the subpane home `{}` is inside the repository `{}`, and worktrees are made outside it; set --home or SUBPANE_HOME elsewhere",
            home.root().display(),
            toplevel.display()
        )));
    }
    if sys.canonicalize(&path).is_ok() {
        return Err(Error::invalid(format!(
            "{{worktree}}: `{}` already exists (a worktree kept from an earlier run with this id?); {}, or choose another {{run_id}}",
            path.display(),
            gc_removes_it()
        )));
    }
    Ok(WorktreeSpec {
        repo: toplevel,
        path,
        branch,
        base: String::new(),
        subdir,
        common_dir,
        git_dir: PathBuf::new(),
        git_time_limit_ms: None,
    })
}

/// Where the program runs: the same place in the worktree as `--cwd` was in the repository.
pub fn program_dir(wt: &WorktreeSpec) -> PathBuf {
    if wt.subdir.as_os_str().is_empty() {
        wt.path.clone()
    } else {
        wt.path.join(&wt.subdir)
    }
}

/// A program named by a relative path (`./build.sh`) was found in `--cwd`; it runs from the
/// same place in the worktree, like every other file of the attempt.
pub(in crate::app) fn rebase_program(given: &str, resolved: &str, wt: &WorktreeSpec) -> String {
    if !given.contains('/') || Path::new(given).is_absolute() {
        return resolved.to_owned();
    }
    program_dir(wt).join(given).display().to_string()
}

/// The sandbox of a worktree attempt: the worktree is the workspace (the caller put it in
/// `writable`), and the repository's git directory is the program's privately (an overlay,
/// writable through it: see `plan::git_view`), so that git works inside while nothing of it
/// changes outside but the worktree's branch, carried back at the end. The worktree's
/// `.git` file is read-only (the program could point it at a git directory of its own).
/// `git_dir` is known once the worktree exists: [`create`] fills it in.
pub(in crate::app) fn sandbox_git(
    sys: &dyn System,
    wt: &WorktreeSpec,
    sandbox: &mut SandboxSpec,
    upper: PathBuf,
    work: PathBuf,
) {
    let common = sys
        .canonicalize(&wt.common_dir)
        .unwrap_or_else(|_| wt.common_dir.clone());
    if !sandbox.writable.contains(&common) {
        sandbox.writable.push(common.clone());
    }
    let dot_git = wt.path.join(".git");
    if !sandbox.read_only.contains(&dot_git) {
        sandbox.read_only.push(dot_git);
    }
    sandbox.git = Some(crate::spec::GitRepo {
        git_dir: common.clone(),
        common_dir: common,
        work_tree: wt.path.clone(),
        branch: Some(wt.branch.clone()),
        upper,
        work,
    });
}

/// When `gc` removes a kept worktree: with its run, past gc's default age (or `--older-than`).
fn gc_removes_it() -> String {
    format!(
        "`subpane gc` removes a kept worktree with its run once the run ended more than {} ago \
         (`--older-than` sooner)",
        crate::app::GC_OLDER_THAN
    )
}

fn git_failed(what: &str, e: GitError) -> Error {
    Error::WorktreeNotMade {
        what: what.to_owned(),
        source: e,
    }
}

/// Makes the worktree of `spec` from the repository's current HEAD and fills in its `base`
/// and `git_dir` (and the sandbox's view of the repository's). Runs before any file of the
/// attempt exists; on failure nothing was made.
pub(in crate::app) fn create(spec: &mut AttemptSpec) -> Result<(), Error> {
    let Some(wt) = spec.worktree.take() else {
        return Ok(());
    };
    if let Some(ms) = wt.git_time_limit_ms {
        git::set_time_limit(std::time::Duration::from_millis(ms));
    }
    let made = make(spec, wt)?;
    if let Some(repo) = spec.sandbox.git.as_mut() {
        repo.git_dir = made.git_dir.clone();
    }
    spec.worktree = Some(made);
    Ok(())
}

fn make(spec: &AttemptSpec, wt: WorktreeSpec) -> Result<WorktreeSpec, Error> {
    let base = git::head_commit(&wt.repo)
        .map_err(|e| git_failed("cannot read the repository's HEAD", e))?
        .ok_or_else(|| {
            Error::invalid(format!(
                "{{worktree}}: the repository `{}` has no commit yet, and a worktree starts from HEAD; commit something first",
                wt.repo.display()
            ))
        })?;
    if git::branch_tip(&wt.common_dir, &wt.branch)
        .map_err(|e| git_failed("cannot look for the branch", e))?
        .is_some()
    {
        return Err(Error::invalid(format!(
            "{{worktree}}: the branch `{b}` already exists in `{}` (kept from an earlier run `{}`?); delete it (`git branch -D {b}`) or choose another {{run_id}}",
            wt.repo.display(),
            spec.run_id,
            b = wt.branch,
        )));
    }
    if wt.path.symlink_metadata().is_ok() {
        return Err(Error::invalid(format!(
            "{{worktree}}: `{}` already exists; {}",
            wt.path.display(),
            gc_removes_it()
        )));
    }
    if let Some(parent) = wt.path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| {
            Error::invalid(format!(
                "cannot create {}: {e}; set --home or SUBPANE_HOME to a writable directory",
                parent.display()
            ))
        })?;
    }
    let lock = git::worktree::Lock::for_worktree(&wt.path)
        .map_err(|e| git_failed("cannot take the worktree lock", e))?;
    let git_dir = git::worktree::add(&wt.repo, &wt.common_dir, &wt.path, &wt.branch, &base)
        .map_err(|e| git_failed(&format!("cannot create `{}`", wt.path.display()), e))?;
    drop(lock);
    let made = WorktreeSpec {
        base,
        git_dir,
        ..wt
    };
    let dir = program_dir(&made);
    if let Err(e) = std::fs::create_dir_all(&dir) {
        discard(&made);
        return Err(Error::invalid(format!(
            "{{worktree}}: cannot create {} in the worktree: {e}; nothing was started",
            dir.display()
        )));
    }
    Ok(made)
}

/// Takes back a worktree made by [`create`] for an attempt that did not start after all.
pub(in crate::app) fn discard(wt: &WorktreeSpec) {
    let _lock = git::worktree::Lock::for_worktree(&wt.path);
    let _ = git::worktree::dispose(wt);
    if wt.path.symlink_metadata().is_ok() {
        let _ = std::fs::remove_dir_all(&wt.path);
        let _ = git::worktree::prune(&wt.common_dir);
    }
}

/// Whether `wt` is what subpane makes for attempt `attempt` of run `id`: the worktree at its
/// own place under the home, on its own branch. `gc` removes nothing else, whatever a record
/// says.
pub(in crate::app) fn check_own(
    home: &Home,
    wt: &WorktreeSpec,
    id: &RunId,
    attempt: u32,
) -> Result<(), String> {
    let path = home.worktree(id, attempt);
    let branch = branch_name(id, attempt).map_err(|e| e.to_string())?;
    if wt.path != path {
        return Err(format!(
            "it names the worktree {}, and subpane made this attempt's at {}",
            wt.path.display(),
            path.display()
        ));
    }
    if wt.branch != branch {
        return Err(format!(
            "it names the branch `{}`, and subpane made this attempt's as `{branch}`",
            wt.branch
        ));
    }
    Ok(())
}

/// `gc`: removes a finished attempt's kept worktree, and its branch unless that has commits
/// of its own. Returns whether there was one (with `dry_run`: would be one). If git cannot
/// remove it (the repository is gone, say), the directory is removed all the same when it is
/// where subpane makes worktrees, and the repository's record of it is pruned.
pub(in crate::app) fn collect(
    home: &Home,
    wt: &WorktreeSpec,
    dry_run: bool,
) -> Result<bool, Error> {
    if wt.path.symlink_metadata().is_err() {
        return Ok(false);
    }
    if dry_run {
        return Ok(true);
    }
    let _lock = git::worktree::Lock::for_worktree(&wt.path).map_err(Error::WorktreeLock)?;
    match git::worktree::remove(&wt.common_dir, &wt.path) {
        Ok(()) => {
            let _ = git::worktree::delete_branch_unless_ahead(wt);
        }
        Err(e) => {
            if !wt.path.starts_with(home.worktrees_dir()) {
                return Err(Error::WorktreeNotRemoved {
                    path: wt.path.clone(),
                    source: e,
                });
            }
            std::fs::remove_dir_all(&wt.path).map_err(|source| Error::WorktreeDirNotRemoved {
                path: wt.path.clone(),
                git: e,
                source,
            })?;
        }
    }
    Ok(true)
}

/// `gc`: forgets worktrees whose directories are gone, in each repository once.
pub(in crate::app) fn prune_all(home: &Home, common_dirs: &[PathBuf]) {
    if common_dirs.is_empty() {
        return;
    }
    let _lock = git::worktree::Lock::acquire(&home.worktrees_dir());
    let mut seen: Vec<&PathBuf> = Vec::new();
    for d in common_dirs {
        if !seen.contains(&d) && d.is_dir() {
            let _ = git::worktree::prune(d);
            seen.push(d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::plan::fake::{Fake, cmd, home, refused};
    use crate::app::{RunRequest, plan as plan_run};

    /// A repository at /src (git dir /src/.git, with a config) and the caller in /src/app/sub.
    fn in_repo() -> Fake {
        let mut sys = Fake::new();
        sys.on_path.insert("git".into(), "/usr/bin/git".into());
        for d in ["/src/app", "/src/app/sub", "/src/.git"] {
            sys.dirs.push(d.into());
        }
        sys.files.insert("/src/.git/config".into(), String::new());
        sys.repos.push(RepoDirs {
            toplevel: "/src".into(),
            common_dir: "/src/.git".into(),
        });
        sys.cwd = "/src/app/sub".into();
        sys
    }

    fn worktree(argv: &[&str]) -> RunRequest {
        RunRequest {
            worktree: true,
            ..cmd(argv)
        }
    }

    #[test]
    fn outside_a_work_tree_it_is_refused_never_downgraded() {
        let sys = Fake::new();
        let m = refused(&worktree(&["make"]), &sys);
        assert!(m.contains("needs git"), "{m}");
        let mut sys = Fake::new();
        sys.on_path.insert("git".into(), "/usr/bin/git".into());
        let m = refused(&worktree(&["make"]), &sys);
        assert!(
            m.contains("--worktree needs --cwd inside a git work tree") && m.contains("`/work`"),
            "{m}"
        );
        // Without --worktree nothing about git is asked.
        let p = plan_run(&cmd(&["make"]), &home(), &sys).unwrap();
        assert_eq!(p.spec.worktree, None);
        assert_eq!(p.spec.cwd, Path::new("/work"));
    }

    #[test]
    fn the_program_runs_at_the_same_place_in_the_worktree() {
        let sys = in_repo();
        let p = plan_run(&worktree(&["make"]), &home(), &sys).unwrap();
        let wt = p.spec.worktree.clone().unwrap();
        assert_eq!(wt.repo, Path::new("/src"));
        assert_eq!(wt.common_dir, Path::new("/src/.git"));
        assert_eq!(wt.path, Path::new("/h/worktrees/generated-1-1"));
        assert_eq!(wt.branch, "subpane/generated-1");
        assert_eq!(wt.subdir, Path::new("app/sub"));
        assert_eq!(
            (wt.base.as_str(), wt.git_dir.as_os_str()),
            ("", OsStr::new(""))
        );
        assert_eq!(p.spec.cwd, Path::new("/h/worktrees/generated-1-1/app/sub"));
        // At the top of the repository, the top of the worktree.
        let mut req = worktree(&["make"]);
        req.cwd = Some("/src".into());
        let p = plan_run(&req, &home(), &sys).unwrap();
        assert_eq!(p.spec.cwd, Path::new("/h/worktrees/generated-1-1"));
    }

    #[test]
    fn git_commands_get_the_time_limit_the_caller_names() {
        let mut sys = in_repo();
        let wt = |sys: &Fake| {
            plan_run(&worktree(&["make"]), &home(), sys)
                .unwrap()
                .spec
                .worktree
                .unwrap()
        };
        assert_eq!(wt(&sys).git_time_limit_ms, None, "the default");
        sys.vars.push(("SUBPANE_GIT_TIMEOUT".into(), "90s".into()));
        assert_eq!(wt(&sys).git_time_limit_ms, Some(90_000));
        sys.vars.retain(|(k, _)| k != "SUBPANE_GIT_TIMEOUT");
        sys.vars.push(("SUBPANE_GIT_TIMEOUT".into(), "90".into()));
        let m = refused(&worktree(&["make"]), &sys);
        assert!(m.contains("SUBPANE_GIT_TIMEOUT"), "{m}");
    }

    #[test]
    fn a_program_given_by_a_relative_path_runs_from_the_worktree() {
        let mut sys = in_repo();
        sys.programs.insert("/src/app/sub/./build.sh".into(), true);
        let p = plan_run(&worktree(&["./build.sh", "x"]), &home(), &sys).unwrap();
        assert_eq!(
            p.spec.argv,
            ["/h/worktrees/generated-1-1/app/sub/./build.sh", "x"]
        );
        // Found on PATH or absolute: as it is.
        let p = plan_run(&worktree(&["make"]), &home(), &sys).unwrap();
        assert_eq!(p.spec.argv[0], "/usr/bin/make");
    }

    #[test]
    fn branches_are_named_after_the_run_and_must_be_valid_git_names() {
        let id = |s: &str| RunId::parse(s).unwrap();
        assert_eq!(branch_name(&id("fix-1"), 1).unwrap(), "subpane/fix-1");
        assert_eq!(branch_name(&id("fix-1"), 3).unwrap(), "subpane/fix-1-3");
        assert_eq!(branch_name(&id("v1.2_x"), 1).unwrap(), "subpane/v1.2_x");
        let sys = in_repo();
        for bad in ["a..b", "x.", "x.lock"] {
            let mut req = worktree(&["make"]);
            req.run_id = Some(bad.into());
            let m = refused(&req, &sys);
            assert!(
                m.contains(&format!("run id `{bad}` cannot name a git branch")),
                "{m}"
            );
            // The same id is fine without --worktree.
            req.worktree = false;
            assert!(plan_run(&req, &home(), &sys).is_ok(), "{bad}");
        }
    }

    #[test]
    fn a_later_attempt_gets_its_own_directory_and_branch_in_the_same_place() {
        let sys = in_repo();
        let first = plan_run(&worktree(&["make"]), &home(), &sys)
            .unwrap()
            .spec
            .worktree
            .unwrap();
        let id = RunId::parse("generated-1").unwrap();
        let path = Some(OsStr::new("/usr/bin"));
        let second = plan(&sys, &home(), &id, 2, &first.repo.join(&first.subdir), path).unwrap();
        assert_eq!(second.path, Path::new("/h/worktrees/generated-1-2"));
        assert_eq!(second.branch, "subpane/generated-1-2");
        assert_eq!(
            (second.base.as_str(), second.git_dir.as_os_str()),
            ("", OsStr::new(""))
        );
        assert_eq!((&second.repo, &second.subdir), (&first.repo, &first.subdir));
        assert_eq!(
            program_dir(&second),
            Path::new("/h/worktrees/generated-1-2/app/sub")
        );
    }

    #[test]
    fn the_worktree_directory_must_be_free_and_outside_the_repository() {
        let mut sys = in_repo();
        sys.dirs.push("/h/worktrees/generated-1-1".into());
        let m = refused(&worktree(&["make"]), &sys);
        assert!(
            m.contains("already exists") && m.contains("subpane gc"),
            "{m}"
        );
        let sys = in_repo();
        let inside = Home::at("/src/.state".into());
        match plan_run(&worktree(&["make"]), &inside, &sys) {
            Err(Error::Invalid(m)) => {
                assert!(m.to_string().contains("is inside the repository"), "{m}")
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn a_worktree_program_does_not_inherit_a_callers_git_location() {
        let mut sys = in_repo();
        sys.vars.push(("GIT_DIR".into(), "/elsewhere/.git".into()));
        sys.vars.push(("GIT_AUTHOR_NAME".into(), "me".into()));
        let p = plan_run(&worktree(&["make"]), &home(), &sys).unwrap();
        assert!(!p.env.iter().any(|(k, _)| k == "GIT_DIR"));
        assert!(p.env.iter().any(|(k, _)| k == "GIT_AUTHOR_NAME"));
        assert!(p.spec.env.removed.contains(&"GIT_DIR".to_owned()));
        let p = plan_run(&cmd(&["make"]), &home(), &sys).unwrap();
        assert!(p.env.iter().any(|(k, _)| k == "GIT_DIR"));
    }

    #[test]
    fn sandboxed_the_worktree_is_the_workspace_and_the_git_directory_a_private_view() {
        let sys = in_repo();
        let req = RunRequest {
            sandbox: true,
            ..worktree(&["make"])
        };
        let p = plan_run(&req, &home(), &sys).unwrap();
        let sb = &p.spec.sandbox;
        assert_eq!(
            sb.writable,
            [
                PathBuf::from("/h/worktrees/generated-1-1"),
                PathBuf::from("/h/runs/generated-1/attempts/1/out"),
                PathBuf::from("/src/.git"),
            ]
        );
        // The worktree's `.git` file names its git directory: read-only.
        assert_eq!(
            sb.read_only,
            [
                PathBuf::from("/h/runs/generated-1/attempts/1/nest.sock"),
                PathBuf::from("/h/worktrees/generated-1-1/.git"),
            ]
        );
        let git = sb.git.as_ref().unwrap();
        assert_eq!(git.common_dir, PathBuf::from("/src/.git"));
        assert_eq!(git.branch.as_deref(), Some("subpane/generated-1"));
        assert_eq!(git.work_tree, PathBuf::from("/h/worktrees/generated-1-1"));
        assert_eq!(
            git.upper,
            PathBuf::from("/h/runs/generated-1/attempts/1/git/upper")
        );
    }
}
