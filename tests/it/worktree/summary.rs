//! What `run` says of a worktree attempt at its end: removed or kept, where, on which
//! branch, and where its changes are.

use super::*;

#[test]
fn the_summary_says_what_became_of_the_worktree_and_where_its_changes_are() {
    let env = TestEnv::new();
    let repo = make_repo(&env);
    let cwd = repo.to_str().unwrap();
    let done = env.sp_within(
        LIMIT,
        HANG,
        [
            "run",
            "--worktree",
            "--run-id",
            "sum-ok",
            "--cwd",
            cwd,
            "--",
            "sh",
            "-c",
            "echo x >> a.txt",
        ],
    );
    assert_eq!(done.code, 0, "{done:?}");
    let patch = env.attempt_dir("sum-ok", 1).join("worktree.diff.patch");
    assert!(
        done.stdout
            .contains("worktree  removed, with its branch subpane/sum-ok (no commits)\n"),
        "{}",
        done.stdout
    );
    assert!(
        done.stdout
            .contains(&format!("changes   {}", patch.display())),
        "{}",
        done.stdout
    );
    let failed = env.sp_within(
        LIMIT,
        HANG,
        [
            "run",
            "--worktree",
            "--run-id",
            "sum-bad",
            "--cwd",
            cwd,
            "--",
            "false",
        ],
    );
    assert_eq!(failed.code, 1, "{failed:?}");
    let path = env.home.join("worktrees/sum-bad-1");
    assert!(
        failed.stdout.contains(&format!(
            "worktree  kept at {} on branch subpane/sum-bad (`subpane gc` removes it with its \
             run, once the run ended more than 7d ago)\n",
            path.display()
        )),
        "{}",
        failed.stdout
    );
    // What the summary says is what gc does: its default keeps a run that just ended.
    assert_eq!(env.sp(["gc"]).code, 0);
    assert!(
        path.exists(),
        "gc kept the worktree of a run that just ended"
    );
    assert_eq!(env.sp(["gc", "--older-than", "0s"]).code, 0);
    assert_eq!(worktree_count(&repo), 1);
    env.assert_no_leftovers();
}
