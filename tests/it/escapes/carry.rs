//! The carry: only a fast-forward of the branch comes back. A program that moved its branch
//! back, or off to commits of its own, leaves the user's branch where it was; the envelope
//! and the summary say why, and its commits are kept in the attempt for the user to fetch.

use serde_json::Value;

use super::git::{repo, tip};
use super::*;
use crate::harness::{assert_valid_envelope, wait_until};
use crate::trust::git;

/// `repo` with `n` more commits on `main`, named `c2`, `c3`, …
fn more_commits(repo: &Path, n: usize) {
    for i in 2..n + 2 {
        git(
            repo,
            &["commit", "-q", "--allow-empty", "-m", &format!("c{i}")],
        );
    }
}

/// `subpane status RUN` as a person reads it.
fn summary(env: &TestEnv, run: &str) -> String {
    sp(env, &["status", run]).stdout
}

#[test]
fn a_program_that_rewinds_its_branch_leaves_the_users_where_it_was() {
    let env = TestEnv::with_home_outside_tmp();
    let (_o, o) = outside("carry-back-");
    let repo = repo(&o);
    let first = tip(&repo, "main");
    more_commits(&repo, 3);
    let main = tip(&repo, "main");
    let r = run_bash(
        &env,
        "rewind",
        &["--sandbox", "--cwd", s(&repo)],
        "git reset -q --hard HEAD~3 && echo rewound",
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(stdout_log(&env, "rewind", 1).contains("rewound"));
    assert_eq!(tip(&repo, "main"), main, "the branch was moved back");
    let v = r.json();
    assert_valid_envelope(&v);
    let g = &v["git"];
    assert_eq!(g["result"], "refused", "{v}");
    assert_eq!(g["reason"], "not_fast_forward", "{v}");
    assert_eq!(g["branch"], "main", "{v}");
    assert_eq!(g["from"].as_str(), Some(main.as_str()), "{v}");
    assert_eq!(g["to"].as_str(), Some(first.as_str()), "{v}");
    assert_eq!((&g["behind"], &g["commits"]), (&json!(3), &json!(0)), "{v}");
    // Nothing to keep: the program's tip is in the branch's history already.
    assert_eq!(g["kept"], Value::Null, "{v}");
    let text = summary(&env, "rewind");
    assert!(
        text.contains("main") && text.contains("not carried back") && text.contains("3 commits"),
        "{text}"
    );
    env.assert_no_leftovers();
}

#[test]
fn commits_off_the_branch_are_kept_in_a_bundle_and_the_branch_stays() {
    let env = TestEnv::with_home_outside_tmp();
    let (_o, o) = outside("carry-side-");
    let repo = repo(&o);
    more_commits(&repo, 1);
    let main = tip(&repo, "main");
    let r = run_bash(
        &env,
        "side",
        &["--sandbox", "--cwd", s(&repo)],
        "git reset -q --hard HEAD~1 && echo s > s.txt && git add s.txt \
         && git commit -qm sideways && echo committed",
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(tip(&repo, "main"), main, "the branch was moved sideways");
    let v = r.json();
    assert_valid_envelope(&v);
    let g = &v["git"];
    assert_eq!(g["reason"], "not_fast_forward", "{v}");
    assert_eq!((&g["behind"], &g["commits"]), (&json!(1), &json!(1)), "{v}");
    // The schema names exactly the fields written.
    let schema: Value = serde_json::from_slice(
        &std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/result.v1.json"))
            .unwrap(),
    )
    .unwrap();
    let mut keys: Vec<&String> = g.as_object().unwrap().keys().collect();
    keys.sort();
    let mut required: Vec<&str> = schema["properties"]["git"]["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap())
        .collect();
    required.sort();
    assert_eq!(keys, required);
    // The user fetches what was kept.
    let kept = g["kept"].as_str().unwrap();
    assert!(
        v["artifacts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["path"] == kept),
        "{v}"
    );
    let bundle = env.attempt_dir("side", 1).join(kept);
    git(
        &repo,
        &[
            "fetch",
            "-q",
            "--no-recurse-submodules",
            s(&bundle),
            "main:rescued",
        ],
    );
    assert_eq!(g["to"].as_str(), Some(tip(&repo, "rescued").as_str()));
    let log = git(&repo, &["log", "--format=%s", "rescued"]);
    assert_eq!(log, "sideways\nfirst\n");
    let text = summary(&env, "side");
    assert!(text.contains(kept), "{text}");
    env.assert_no_leftovers();
}

#[test]
fn a_branch_the_user_moved_meanwhile_is_not_moved_back() {
    let env = TestEnv::with_home_outside_tmp();
    let (_o, o) = outside("carry-moved-");
    let repo = repo(&o);
    let go = o.join("GO");
    let script = format!(
        "echo p > p.txt && git add p.txt && git commit -qm program && echo committed; \
         for i in $(seq 600); do [ -e {go} ] && break; sleep 0.05; done",
        go = q(&go)
    );
    let r = sp(
        &env,
        &[
            "run",
            "--detach",
            "--run-id",
            "moved",
            "--sandbox",
            "--cwd",
            s(&repo),
            "--",
            "bash",
            "-c",
            &script,
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    wait_until("the program's commit", || {
        stdout_log(&env, "moved", 1)
            .contains("committed")
            .then_some(())
    });
    // The user commits on the branch while the program runs.
    git(&repo, &["commit", "-q", "--allow-empty", "-m", "users"]);
    let users = tip(&repo, "main");
    crate::harness::touch(&go);
    let v = sp(&env, &["wait", "--json", "moved"]).json();
    assert_eq!(v["status"], "completed", "{v}");
    assert_eq!(tip(&repo, "main"), users, "the user's commit was dropped");
    let g = &v["git"];
    assert_eq!(g["reason"], "not_fast_forward", "{v}");
    assert_eq!(g["from"].as_str(), Some(users.as_str()), "{v}");
    assert_eq!((&g["behind"], &g["commits"]), (&json!(1), &json!(1)), "{v}");
    env.assert_no_leftovers();
}

/// A program that commits and then deletes `.git`: its branch stays where it was, and the
/// envelope says what the program did, not what git said of the remains.
#[test]
fn a_program_that_removes_git_is_told_so() {
    let env = TestEnv::with_home_outside_tmp();
    let (_o, o) = outside("carry-rm-git-");
    let repo = repo(&o);
    let main = tip(&repo, "main");
    let r = run_bash(
        &env,
        "rmgit",
        &["--sandbox", "--cwd", s(&repo)],
        "git commit -q --allow-empty -m program && rm -rf .git; echo removed; ls -a .git",
    );
    assert!(stdout_log(&env, "rmgit", 1).contains("removed"), "{r:?}");
    let v = r.json();
    assert_valid_envelope(&v);
    assert_eq!(tip(&repo, "main"), main, "the branch moved");
    git(&repo, &["fsck", "--strict", "--no-progress"]);
    let errors = v["output"]["errors"].to_string();
    let why = v["git"]["why"].as_str().unwrap_or_default();
    for said in [why, &errors] {
        assert!(
            said.contains("the program removed .git"),
            "not an honest message: {said}\n{v}"
        );
    }
    let text = summary(&env, "rmgit");
    assert!(text.contains("the program removed .git"), "{text}");
    env.assert_no_leftovers();
}
