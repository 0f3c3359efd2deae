//! `--worktree` that cannot be honoured: refused with exit 2, and nothing made anywhere.

use super::*;

#[test]
fn outside_a_repository_or_without_a_commit_nothing_is_made() {
    let env = TestEnv::new();
    let plain = env.work.join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    let r = env.sp([
        "run",
        "--worktree",
        "--cwd",
        plain.to_str().unwrap(),
        "--",
        "true",
    ]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr
            .contains("--worktree needs --cwd inside a git work tree"),
        "{}",
        r.stderr
    );
    assert!(!env.home.join("runs").exists() && !env.home.join("worktrees").exists());
    // A repository without a commit has no HEAD to start from.
    let empty = env.work.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    git(&empty, &["init", "-q", "-b", "main"]);
    let r = env.sp([
        "run",
        "--worktree",
        "--run-id",
        "no-commit",
        "--cwd",
        empty.to_str().unwrap(),
        "--",
        "true",
    ]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("has no commit yet"), "{}", r.stderr);
    assert!(!env.run_dir("no-commit").exists());
    // --help says what the flag does.
    let h = env.sp(["run", "--help"]);
    assert!(h.stdout.contains("--worktree"), "{}", h.stdout);
}

#[test]
fn when_git_cannot_make_the_worktree_nothing_is_left_behind() {
    let env = TestEnv::new();
    let repo = make_repo(&env);
    let before = state(&repo);
    // A blob of HEAD gone from the object store makes `git worktree add` fail after it has
    // made the branch, in the checkout (subpane runs none of the repository's hooks, so a
    // failing hook cannot do it).
    let blob = git(&repo, &["rev-parse", "HEAD:sub/b.txt"]);
    let blob = blob.trim();
    let object = repo.join(".git/objects").join(&blob[..2]).join(&blob[2..]);
    let saved = std::fs::read(&object).unwrap();
    std::fs::remove_file(&object).unwrap();
    let r = env.sp([
        "run",
        "--worktree",
        "--run-id",
        "refused",
        "--cwd",
        repo.to_str().unwrap(),
        "--",
        "true",
    ]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains(blob) && r.stderr.contains("nothing was started"),
        "{}",
        r.stderr
    );
    assert!(!env.run_dir("refused").exists());
    assert!(!env.home.join("worktrees/refused-1").exists());
    assert_eq!(worktree_count(&repo), 1);
    assert_eq!(branches(&repo), ["main"]);
    assert_eq!(state(&repo), before);
    // A branch of that name already there: refused before anything is made.
    std::fs::write(&object, saved).unwrap();
    git(&repo, &["branch", "subpane/taken"]);
    let r = env.sp([
        "run",
        "--worktree",
        "--run-id",
        "taken",
        "--cwd",
        repo.to_str().unwrap(),
        "--",
        "true",
    ]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("`subpane/taken` already exists"),
        "{}",
        r.stderr
    );
    assert!(!env.run_dir("taken").exists());
    assert_eq!(worktree_count(&repo), 1);
}
