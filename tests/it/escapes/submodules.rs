//! Submodules: a repository the program makes in its workspace is its own, config and
//! attributes too. Nothing of it runs outside the sandbox: a carried commit never brings it in
//! as a submodule (a gitlink where the branch has none is refused), and subpane's own git
//! never enters a nested repository, in a plain repository and in a `--worktree` run alike.
//!
//! Common pitfalls:
//! * A clean filter runs only for a file git must hash again: the nested repository's file is
//!   given a new mtime after its commit, so any `git status` inside would run the filter.
//! * The markers are written outside the sandbox's reach: a planted command that runs inside
//!   (the program's own git) cannot make them, so a marker is always something that ran
//!   outside.

use super::git::{planted, repo, tip, users_status};
use super::*;
use crate::harness::assert_valid_envelope;
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

#[test]
fn a_submodule_the_program_made_never_comes_back_into_a_repository() {
    let env = TestEnv::with_home_outside_tmp();
    let (_o, o) = outside("escape-sub-");
    let repo = repo(&o);
    let main = tip(&repo, "main");
    let pwned = o.join("PWNED");
    let body = format!(
        "{} && git add nested 2>/dev/null && git commit -qm gitlink && echo committed",
        nested_repo("nested")
    );
    let r = run_bash(
        &env,
        "sub",
        &["--sandbox", "--cwd", s(&repo)],
        &script(&pwned, &body),
    );
    assert_eq!(r.code, 0, "{r:?}");
    let out = stdout_log(&env, "sub", 1);
    assert!(out.contains("committed"), "{out}");
    assert!(planted(&o).is_empty(), "ran at the end: {:?}", planted(&o));
    // The user's next git command does not enter it either.
    let status = users_status(&repo);
    let ran = planted(&o);
    assert!(
        ran.is_empty(),
        "the user's git status ran {ran:?}\n{status}"
    );
    assert_eq!(tip(&repo, "main"), main, "the gitlink came back");
    // The envelope says which submodule, and why.
    let v = r.json();
    assert_valid_envelope(&v);
    let g = &v["git"];
    assert_eq!(
        (&g["result"], &g["reason"]),
        (&json!("refused"), &json!("submodule")),
        "{v}"
    );
    assert_eq!(g["submodules"], json!(["nested"]), "{v}");
    assert!(g["why"].as_str().unwrap().contains("nested"), "{v}");
    assert_eq!(g["from"].as_str(), Some(main.as_str()), "{v}");
    // Control: a git that enters the nested repository runs what the program planted.
    users_status(&repo.join("nested"));
    assert!(
        !planted(&o).is_empty(),
        "the planted config would not run anyway"
    );
    env.assert_no_leftovers();
}

#[test]
fn a_worktree_programs_submodule_runs_nothing_at_the_end_nor_for_the_user() {
    let env = TestEnv::with_home_outside_tmp();
    let (_o, o) = outside("escape-wt-sub-");
    let repo = repo(&o);
    let main = tip(&repo, "main");
    let pwned = o.join("PWNED");
    let body = format!(
        "{} && git add nested 2>/dev/null && git commit -qm gitlink && echo committed; exit 1",
        nested_repo("nested")
    );
    let args = ["--sandbox", "--worktree", "--cwd", s(&repo)];
    let r = run_bash(&env, "wtsub", &args, &script(&pwned, &body));
    assert_eq!(r.code, 1, "{r:?}");
    let out = stdout_log(&env, "wtsub", 1);
    assert!(out.contains("committed"), "{out}");
    // The worker's status and diff ran outside the sandbox: they did not enter it.
    assert!(planted(&o).is_empty(), "ran at the end: {:?}", planted(&o));
    let v = r.json();
    let wt = PathBuf::from(v["worktree"]["path"].as_str().unwrap());
    let branch = v["worktree"]["branch"].as_str().unwrap().to_owned();
    let status = users_status(&wt) + &users_status(&repo);
    let ran = planted(&o);
    assert!(
        ran.is_empty(),
        "the user's git status ran {ran:?}\n{status}"
    );
    assert_eq!(tip(&repo, &branch), main, "the gitlink came back");
    assert_valid_envelope(&v);
    assert_eq!(v["git"]["reason"], "submodule", "{v}");
    assert_eq!(v["git"]["submodules"], json!(["nested"]), "{v}");
    // The record still holds the program's other work: its commit is kept for the user.
    let kept = env
        .attempt_dir("wtsub", 1)
        .join(v["git"]["kept"].as_str().unwrap());
    assert!(kept.is_file(), "{v}");
    // Control: a git that enters the nested repository runs what the program planted.
    users_status(&wt.join("nested"));
    assert!(
        !planted(&o).is_empty(),
        "the planted config would not run anyway"
    );
    env.assert_no_leftovers();
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

#[test]
fn a_submodule_the_repository_has_may_move() {
    let env = TestEnv::with_home_outside_tmp();
    let (_o, o) = outside("escape-lib-");
    let repo = repo(&o);
    with_submodule(&repo);
    let before = tip(&repo, "main");
    let script = format!(
        "git update-index --cacheinfo 160000,{before},lib && git commit -qm bump && echo bumped"
    );
    let r = run_bash(&env, "bump", &["--sandbox", "--cwd", s(&repo)], &script);
    assert_eq!(r.code, 0, "{r:?}");
    let v = r.json();
    assert_eq!(v["git"]["result"], "carried", "{v}");
    assert_eq!(v["git"]["submodules"], json!([]), "{v}");
    let lib = git(&repo, &["rev-parse", "main:lib"]);
    assert_eq!(lib.trim(), before);
    env.assert_no_leftovers();
}
