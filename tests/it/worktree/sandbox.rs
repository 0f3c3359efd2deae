//! `--worktree --sandbox`: git works inside, on the program's own view of the repository's git
//! directory; its commits come back on its branch, and nothing else it wrote there does.

use super::*;

#[test]
fn a_sandboxed_program_commits_in_its_worktree_and_only_its_branch_comes_back() {
    let env = TestEnv::new();
    let repo = make_repo(&env);
    // Per-worktree config files are read (a program's own would be read by the worker's git).
    git(&repo, &["config", "core.repositoryformatversion", "1"]);
    git(&repo, &["config", "extensions.worktreeConfig", "true"]);
    let before = state(&repo);
    let pwned = env.root.path().join("pwned");
    let script = format!(
        "echo sand > s.txt && git add s.txt && git commit -q -m sandboxed && echo committed; \
                  (echo evil > \"$(git rev-parse --git-common-dir)/hooks/pre-commit\") 2>/dev/null || echo hook-refused; \
                  (printf '[core]\\n\\tfsmonitor = \\\"touch {}\\\"\\n' >> \"$(git rev-parse --git-dir)/config.worktree\") 2>/dev/null || echo worktree-config-refused; \
                  echo probe > \"$(git rev-parse --git-dir)/probe\" && echo gitdir-writable; \
                  (echo '[core]' >> \"$(git rev-parse --git-common-dir)/config\") 2>/dev/null || echo config-refused; \
                  echo x > \"$(git rev-parse --git-common-dir)/../outside.txt\" 2>/dev/null; true",
        pwned.display()
    );
    let (r, v) = run_json(
        &env,
        &[
            "run",
            "--json",
            "--sandbox",
            "--worktree",
            "--run-id",
            "wt-sand",
            "--cwd",
            repo.to_str().unwrap(),
            "--",
            "bash",
            "-c",
            &script,
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        !pwned.exists(),
        "a config written by the program ran outside the sandbox"
    );
    let out = std::fs::read_to_string(env.attempt_dir("wt-sand", 1).join("stdout.log")).unwrap();
    // git works inside on the program's own view of the git directory: every write is taken
    // there, and none of them but the branch reaches the repository.
    for want in ["committed", "gitdir-writable"] {
        assert!(out.contains(want), "{want} missing:\n{out}");
    }
    assert_eq!(v["worktree"]["branch_kept"], true, "{}", v["worktree"]);
    let policy = &v["sandbox"]["policy"];
    let git_dir = repo.join(".git").canonicalize().unwrap();
    assert_eq!(
        policy["git"]["common_dir"],
        git_dir.to_str().unwrap(),
        "{policy}"
    );
    assert_eq!(policy["git"]["branch"], "subpane/wt-sand", "{policy}");
    let wt_git_dir = git_dir.join("worktrees/wt-sand-1");
    assert!(!wt_git_dir.join("probe").exists());
    assert!(!wt_git_dir.join("config.worktree").exists());
    let config = std::fs::read_to_string(git_dir.join("config")).unwrap();
    assert!(!config.contains("fsmonitor"), "{config}");
    let msg = git(&repo, &["log", "-1", "--format=%s", "subpane/wt-sand"]);
    assert_eq!(msg.trim(), "sandboxed");
    assert!(!repo.join(".git/hooks/pre-commit").exists());
    // The repository's own working tree is not the workspace: a write there stays in the
    // sandbox's private view (under its private /tmp here) and never reaches it.
    assert!(!repo.join("outside.txt").exists());
    assert_eq!(worktree_count(&repo), 1);
    assert_eq!(state(&repo), before);
    env.assert_no_leftovers();
}
