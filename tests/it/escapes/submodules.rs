//! Submodules: a repository the program makes in its workspace is its own, config and
//! attributes too. Nothing of it runs outside the sandbox: subpane's own git never enters a
//! nested repository.
//!
//! Common pitfalls:
//! * A clean filter runs only for a file git must hash again: the nested repository's file is
//!   given a new mtime after its commit, so any `git status` inside would run the filter.
//! * The markers are written outside the sandbox's reach: a planted command that runs inside
//!   (the program's own git) cannot make them, so a marker is always something that ran
//!   outside.

use super::git::{planted, repo, tip, users_status};
use super::*;
use crate::trust::git;

/// Shell lines that make `dir` a repository of the program's: its config runs
/// `touch $P-fsmonitor` as the fsmonitor and `touch $P-clean` as the clean filter its
/// `info/attributes` names for every file, and its one file must be hashed again.
fn nested_repo(dir: &str) -> String {
    format!(
        r#"git init -q {dir} && (cd {dir} && echo x > f.txt && git add f.txt \
            && git -c user.name=p -c user.email=p@example.com commit -qm inner \
            && git config core.fsmonitor "touch $P-fsmonitor; false" \
            && git config filter.evil.clean "touch $P-clean; cat" \
            && echo '* filter=evil' > .git/info/attributes \
            && touch -d 2030-01-01 f.txt) && echo nested-made"#
    )
}

/// The program's script: `P` set to the marker prefix, then `body`.
fn script(pwned: &Path, body: &str) -> String {
    format!("P={}\n{body}", q(pwned))
}

/// `repo` with a submodule at `lib` (a gitlink to `main`'s first commit; never checked out,
/// so a worktree has an empty directory there).
fn with_submodule(repo: &Path) -> String {
    let first = tip(repo, "main");
    git(
        repo,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("160000,{first},lib"),
        ],
    );
    git(repo, &["commit", "-q", "-m", "lib"]);
    first
}

#[test]
fn subpanes_git_does_not_enter_a_submodule_the_program_made_a_repository() {
    let env = TestEnv::with_home_outside_tmp();
    let (_o, o) = outside("escape-wt-lib-");
    let repo = repo(&o);
    with_submodule(&repo);
    let pwned = o.join("PWNED");
    // The repository's own submodule path, made a repository of the program's.
    let body = format!(
        "rmdir lib; {} && echo changed >> a.txt && echo new > b.txt; exit 1",
        nested_repo("lib")
    );
    let args = ["--sandbox", "--worktree", "--cwd", s(&repo)];
    let r = run_bash(&env, "wtlib", &args, &script(&pwned, &body));
    assert_eq!(r.code, 1, "{r:?}");
    let out = stdout_log(&env, "wtlib", 1);
    assert!(out.contains("nested-made"), "{out}");
    assert!(planted(&o).is_empty(), "ran at the end: {:?}", planted(&o));
    // The record holds the rest of the program's work.
    let dir = env.attempt_dir("wtlib", 1);
    let diff = std::fs::read_to_string(dir.join("worktree.diff.patch")).unwrap();
    assert!(
        diff.contains("+changed") && diff.contains("b.txt"),
        "{diff}"
    );
    let status = std::fs::read_to_string(dir.join("worktree.status.txt")).unwrap();
    assert!(
        status.contains("a.txt") && status.contains("b.txt"),
        "{status}"
    );
    // Control, and the limit the README names: the user's own git enters a submodule the
    // repository has, whoever made its repository.
    let v = r.json();
    users_status(Path::new(v["worktree"]["path"].as_str().unwrap()));
    assert!(
        !planted(&o).is_empty(),
        "the planted config would not run anyway"
    );
    env.assert_no_leftovers();
}
