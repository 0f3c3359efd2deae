//! Git: the program changes the work tree, adds objects and moves its own branch; nothing
//! else of the git directory changes, in a plain repository and in a `--worktree` run alike,
//! and subpane's own git commands run none of the repository's hooks, fsmonitor or filters.

use std::process::{Command, Stdio};

use super::*;
use crate::trust::git;

/// A user's repository outside `/tmp`: `main` with one commit, a branch `other`.
pub(super) fn repo(o: &Path) -> PathBuf {
    crate::harness::require_tool("git", &["--version"], "git");
    let repo = o.join("repo");
    crate::worktree::init_repo(&repo);
    std::fs::write(repo.join("a.txt"), "a\n").unwrap();
    git(&repo, &["add", "a.txt"]);
    git(&repo, &["commit", "-q", "-m", "first"]);
    git(&repo, &["branch", "other"]);
    repo
}

/// What ran outside: the markers the planted hooks and configs make in `o`.
pub(super) fn planted(o: &Path) -> Vec<String> {
    std::fs::read_dir(o)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("PWNED"))
        .collect()
}

pub(super) fn tip(repo: &Path, r: &str) -> String {
    git(repo, &["rev-parse", r]).trim().to_owned()
}

/// `git status` as the user runs it afterwards, outside any sandbox.
pub(super) fn users_status(dir: &Path) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .arg("status")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// What a program does to a git directory `$G` (and `$C`, its common directory) to run
/// something at the user's next git command, or to move what is not its own.
fn attacks(pwned: &Path) -> String {
    format!(
        r#"P={p}
        git update-ref refs/heads/other HEAD && echo moved-other
        git tag evil && echo tagged
        printf '[core]\n\tfsmonitor = "touch %s-config"\n' "$P" >> "$C/config"
        mkdir -p "$C/hooks"; printf '#!/bin/sh\ntouch %s-hook\n' "$P" > "$C/hooks/post-commit"
        chmod +x "$C/hooks/post-commit"
        mkdir "$G/rebase-merge" && printf 'exec touch %s-rebase\n' "$P" > "$G/rebase-merge/git-rebase-todo"
        printf '[core]\n\tfsmonitor = "touch %s-worktree-config"\n' "$P" > "$G/config.worktree"
        git init -q --bare "$PWD/../evil.git"
        git --git-dir="$PWD/../evil.git" config core.fsmonitor "touch $P-planted"
        echo "$PWD/../evil.git" > "$G/commondir"
        true"#,
        p = q(pwned)
    )
}

#[test]
fn a_program_in_a_repository_moves_its_branch_and_nothing_else() {
    let env = TestEnv::with_home_outside_tmp();
    let (_o, o) = outside("escape-git-");
    let repo = repo(&o);
    let pwned = o.join("PWNED");
    let (first, other) = (tip(&repo, "main"), tip(&repo, "other"));
    let script = format!(
        r#"echo new > new.txt && git add new.txt && git commit -qm program && echo committed
        G=.git; C=.git
        {attacks}
        mv .git .git-old && git init -q && git config core.fsmonitor "touch {p}-renamed" \
            && echo RENAMED_GIT
        true"#,
        attacks = attacks(&pwned),
        p = pwned.display()
    );
    let r = run_bash(&env, "repo", &["--sandbox", "--cwd", s(&repo)], &script);
    assert_eq!(r.code, 0, "{r:?}");
    let out = stdout_log(&env, "repo", 1);
    assert!(out.contains("committed"), "{out}");
    // The envelope and the summary say what came back.
    let v = r.json();
    let g = &v["git"];
    assert_eq!(g["result"], "carried", "{v}");
    assert_eq!(g["from"].as_str(), Some(first.as_str()), "{v}");
    assert_eq!(g["to"].as_str(), Some(tip(&repo, "main").as_str()), "{v}");
    assert_eq!((&g["commits"], &g["behind"]), (&json!(1), &json!(0)), "{v}");
    let text = sp(&env, &["status", "repo"]).stdout;
    assert!(text.contains("1 commit carried back"), "{text}");
    // The user's next git commands run nothing the program planted.
    let status = users_status(&repo);
    git(
        &repo,
        &["commit", "-q", "--allow-empty", "-m", "users-next"],
    );
    let ran = planted(&o);
    assert!(ran.is_empty(), "ran outside: {ran:?}\n{out}");
    assert!(!repo.join(".git-old").exists(), "{out}");
    assert!(!status.contains("rebase"), "{status}");
    // Its own branch moved, with the objects it needs; nothing else did.
    let log = git(&repo, &["log", "--format=%s", "main"]);
    assert_eq!(log, "users-next\nprogram\nfirst\n");
    assert_eq!(tip(&repo, "other"), other);
    assert!(git(&repo, &["tag"]).is_empty());
    assert!(!git(&repo, &["config", "--list"]).contains("fsmonitor"));
    assert!(!repo.join(".git/rebase-merge").exists());
    assert!(!repo.join(".git/commondir").exists());
    git(&repo, &["fsck", "--strict", "--no-progress"]);
    // The user's index follows the branch: the program's commit is not a staged change.
    assert!(
        git(&repo, &["status", "--porcelain"]).is_empty(),
        "{status}"
    );
    env.assert_no_leftovers();
}

#[test]
fn a_worktree_program_moves_its_branch_and_plants_nothing() {
    let env = TestEnv::with_home_outside_tmp();
    let (_o, o) = outside("escape-wt-");
    let repo = repo(&o);
    // Per-worktree config files are read: one the program writes would be too.
    git(&repo, &["config", "core.repositoryformatversion", "1"]);
    git(&repo, &["config", "extensions.worktreeConfig", "true"]);
    let pwned = o.join("PWNED");
    let (main, other) = (tip(&repo, "main"), tip(&repo, "other"));
    let script = format!(
        r#"echo w > w.txt && git add w.txt && git commit -qm wt-commit && echo committed
        git update-ref refs/heads/main HEAD && echo moved-main
        G=$(git rev-parse --absolute-git-dir); C=$(git rev-parse --path-format=absolute --git-common-dir)
        echo "G=$G"
        {attacks}
        echo "gitdir: $PWD/../evil.git" > .git
        exit 1"#,
        attacks = attacks(&pwned),
    );
    let args = ["--sandbox", "--worktree", "--cwd", s(&repo)];
    let r = run_bash(&env, "wt", &args, &script);
    assert_eq!(r.code, 1, "{r:?}");
    let v = r.json();
    assert_eq!(v["worktree"]["kept"], true, "{v}");
    let wt = PathBuf::from(v["worktree"]["path"].as_str().unwrap());
    let branch = v["worktree"]["branch"].as_str().unwrap().to_owned();
    assert_eq!(v["git"]["result"], "carried", "{v}");
    assert_eq!(v["git"]["branch"].as_str(), Some(branch.as_str()), "{v}");
    let out = stdout_log(&env, "wt", 1);
    assert!(out.contains("committed"), "{out}");
    // The user looks at the kept worktree and the repository: nothing runs.
    let status = users_status(&wt) + &users_status(&repo);
    git(&wt, &["commit", "-q", "--allow-empty", "-m", "users-next"]);
    let ran = planted(&o);
    assert!(ran.is_empty(), "ran outside: {ran:?}\n{out}");
    assert!(!status.contains("rebase"), "{status}");
    let git_file = std::fs::read_to_string(wt.join(".git")).unwrap();
    assert!(!git_file.contains("evil"), "{git_file}");
    let gd = repo.join(".git/worktrees").join(wt.file_name().unwrap());
    assert!(
        !std::fs::read_to_string(gd.join("commondir"))
            .unwrap()
            .contains("evil")
    );
    assert!(!gd.join("rebase-merge").exists());
    assert!(
        !gd.join("config.worktree").exists()
            || std::fs::read(gd.join("config.worktree"))
                .unwrap()
                .is_empty()
    );
    // Only its own branch moved, and its objects came with it.
    assert_eq!((tip(&repo, "main"), tip(&repo, "other")), (main, other));
    let log = git(&repo, &["log", "--format=%s", &branch]);
    assert_eq!(log, "users-next\nwt-commit\nfirst\n");
    assert!(git(&repo, &["tag"]).is_empty());
    assert!(!git(&repo, &["config", "--list"]).contains("fsmonitor"));
    git(&repo, &["fsck", "--strict", "--no-progress"]);
    env.assert_no_leftovers();
}

#[test]
fn subpanes_own_git_runs_no_hook_fsmonitor_or_filter_of_the_repository() {
    let env = TestEnv::with_home_outside_tmp();
    let (_o, o) = outside("escape-own-git-");
    let repo = repo(&o);
    let mark = |what: &str| o.join(format!("RAN-{what}"));
    let hook = repo.join(".git/hooks/post-checkout");
    std::fs::write(&hook, format!("#!/bin/sh\ntouch {}\n", q(&mark("hook")))).unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    git(
        &repo,
        &[
            "config",
            "core.fsmonitor",
            &format!("touch {}; false", q(&mark("fsmonitor"))),
        ],
    );
    let filter = format!("touch {}; cat", q(&mark("filter")));
    git(&repo, &["config", "filter.x.clean", &filter]);
    git(&repo, &["config", "filter.x.smudge", &filter]);
    std::fs::write(repo.join(".gitattributes"), "*.txt filter=x\n").unwrap();
    git(
        &repo,
        &["-c", "core.hooksPath=/dev/null", "add", ".gitattributes"],
    );
    git(
        &repo,
        &[
            "-c",
            "core.hooksPath=/dev/null",
            "commit",
            "-q",
            "-m",
            "attrs",
        ],
    );
    for m in ["hook", "fsmonitor", "filter"] {
        let _ = std::fs::remove_file(mark(m));
    }
    let r = run_bash(
        &env,
        "own",
        &["--worktree", "--cwd", s(&repo)],
        "echo changed >> a.txt; echo new > b.txt",
    );
    assert_eq!(r.code, 0, "{r:?}");
    let diff =
        std::fs::read_to_string(env.attempt_dir("own", 1).join("worktree.diff.patch")).unwrap();
    assert!(
        diff.contains("+changed") && diff.contains("b.txt"),
        "{diff}"
    );
    for m in ["hook", "fsmonitor", "filter"] {
        assert!(!mark(m).exists(), "subpane's git ran the repository's {m}");
    }
    // Control: the user's own git runs them.
    git(&repo, &["status"]);
    assert!(mark("fsmonitor").exists() || mark("filter").exists());
    env.assert_no_leftovers();
}
