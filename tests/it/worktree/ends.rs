//! How a worktree attempt ends: what is stored, what is removed and what is kept until
//! `gc` (completed, committed, failed, cancelled, lost), and attempts side by side.

use std::process::Stdio;

use super::*;
use crate::harness::{fixture, send_signal, wait_child_within, wait_for_text, wait_pid_gone};

#[test]
fn a_completed_run_stores_status_and_a_patch_that_reproduces_its_files_then_goes() {
    let env = TestEnv::new();
    let repo = make_repo(&env);
    let before = state(&repo);
    // Runs in sub/ of the worktree: changes a tracked file above it, adds an untracked binary
    // file, and changes the committed binary file.
    let script = r#"echo "where=$PWD" && echo two >> ../a.txt && printf '\000\001new\377' > new.bin && printf 'x\000y' > ../data.bin"#;
    let cwd = repo.join("sub");
    let (r, v) = run_json(
        &env,
        &[
            "run",
            "--json",
            "--worktree",
            "--run-id",
            "wt-done",
            "--cwd",
            cwd.to_str().unwrap(),
            "--",
            "bash",
            "-c",
            script,
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(v["status"], "completed");
    let path = env.home.join("worktrees/wt-done-1");
    let wt = &v["worktree"];
    assert_eq!(wt["path"], path.display().to_string(), "{wt}");
    assert_eq!(wt["branch"], "subpane/wt-done");
    assert_eq!(wt["base"], before.head.as_str());
    assert_eq!(
        (&wt["kept"], &wt["branch_kept"]),
        (&false.into(), &false.into())
    );
    // It ran at the same place in the worktree as --cwd is in the repository.
    assert_eq!(v["cwd"], path.join("sub").display().to_string());
    let dir = env.attempt_dir("wt-done", 1);
    let stdout = std::fs::read_to_string(dir.join("stdout.log")).unwrap();
    assert!(
        stdout.contains(&format!("where={}", path.join("sub").display())),
        "{stdout}"
    );
    // Status and diff are stored and listed.
    let status = std::fs::read_to_string(dir.join("worktree.status.txt")).unwrap();
    let mut lines: Vec<&str> = status.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        [" M a.txt", " M data.bin", "?? sub/new.bin"],
        "{status}"
    );
    for (kind, file) in [
        ("worktree_status", "worktree.status.txt"),
        ("worktree_diff", "worktree.diff.patch"),
    ] {
        let a = artifact(&v, kind);
        assert_eq!(a["path"], file);
        let bytes = std::fs::read(dir.join(file)).unwrap();
        assert_eq!(a["bytes"], bytes.len() as u64, "{kind}");
    }
    assert!(
        !dir.join(".worktree.index").exists(),
        "the scratch index is removed"
    );
    // The patch reproduces the files on a fresh checkout of base.
    let patch = dir.join("worktree.diff.patch");
    let fresh = apply_to_fresh_checkout(&env, &repo, &before.head, &patch);
    assert_eq!(
        std::fs::read_to_string(fresh.join("a.txt")).unwrap(),
        "one\ntwo\n"
    );
    assert_eq!(
        std::fs::read(fresh.join("sub/new.bin")).unwrap(),
        b"\x00\x01new\xff"
    );
    assert_eq!(std::fs::read(fresh.join("data.bin")).unwrap(), b"x\x00y");
    // The worktree and its branch are gone; the repository is as it was.
    assert!(!path.exists(), "a completed attempt's worktree is removed");
    assert_eq!(worktree_count(&repo), 1);
    assert_eq!(branches(&repo), ["main"]);
    assert_eq!(state(&repo), before);
    assert_eq!(std::fs::read(repo.join("data.bin")).unwrap(), BINARY);
    assert!(!repo.join("sub/new.bin").exists());
    env.assert_no_leftovers();
}

#[test]
fn a_branch_with_commits_is_kept_when_the_worktree_goes() {
    let env = TestEnv::new();
    let repo = make_repo(&env);
    let before = state(&repo);
    let (r, v) = run_json(
        &env,
        &[
            "run",
            "--json",
            "--worktree",
            "--run-id",
            "wt-commit",
            "--cwd",
            repo.to_str().unwrap(),
            "--",
            "bash",
            "-c",
            "echo cee > c.txt && git add c.txt && git commit -q -m 'add c' && echo dirty >> a.txt",
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let wt = &v["worktree"];
    assert_eq!(
        (&wt["kept"], &wt["branch_kept"]),
        (&false.into(), &true.into()),
        "{wt}"
    );
    assert!(!env.home.join("worktrees/wt-commit-1").exists());
    assert_eq!(branches(&repo), ["main", "subpane/wt-commit"]);
    // The branch holds the program's commit on top of base.
    let parent = git(&repo, &["rev-parse", "subpane/wt-commit^"]);
    assert_eq!(parent.trim(), before.head);
    let msg = git(&repo, &["log", "-1", "--format=%s", "subpane/wt-commit"]);
    assert_eq!(msg.trim(), "add c");
    // The diff is everything since base: the commit and the uncommitted change.
    let patch = env.attempt_dir("wt-commit", 1).join("worktree.diff.patch");
    let text = std::fs::read_to_string(&patch).unwrap();
    assert!(text.contains("+cee") && text.contains("+dirty"), "{text}");
    assert_eq!(worktree_count(&repo), 1);
    assert_eq!(state(&repo), before);
    env.assert_no_leftovers();
}

#[test]
fn failed_and_cancelled_worktrees_are_kept_until_gc() {
    let env = TestEnv::new();
    let repo = make_repo(&env);
    let before = state(&repo);
    let (r, v) = run_json(
        &env,
        &[
            "run",
            "--json",
            "--worktree",
            "--run-id",
            "wt-fail",
            "--cwd",
            repo.to_str().unwrap(),
            "--",
            "bash",
            "-c",
            "echo half > half.txt; exit 3",
        ],
    );
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(v["status"], "failed");
    let failed = env.home.join("worktrees/wt-fail-1");
    let wt = &v["worktree"];
    assert_eq!(wt["path"], failed.display().to_string());
    assert_eq!(
        (&wt["kept"], &wt["branch_kept"]),
        (&true.into(), &true.into()),
        "{wt}"
    );
    assert_eq!(
        std::fs::read_to_string(failed.join("half.txt")).unwrap(),
        "half\n",
        "the kept worktree holds what the program left"
    );
    artifact(&v, "worktree_diff");
    let status =
        std::fs::read_to_string(env.attempt_dir("wt-fail", 1).join("worktree.status.txt")).unwrap();
    assert_eq!(status, "?? half.txt\n");
    // A cancelled attempt's worktree is kept too.
    let started = env.sp_within(
        LIMIT,
        HANG,
        [
            "run",
            "--detach",
            "--worktree",
            "--run-id",
            "wt-cancel",
            "--cwd",
            repo.to_str().unwrap(),
            "--",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([fixture("never_exits.sh").display().to_string()]),
    );
    assert_eq!(started.code, 0, "{started:?}");
    let c = env.sp_within(LIMIT, HANG, ["cancel", "wt-cancel", "--json"]);
    assert_eq!(c.code, 0, "{c:?}");
    let cv = c.json();
    assert_eq!(cv["status"], "cancelled");
    assert_eq!(cv["worktree"]["kept"], true, "{}", cv["worktree"]);
    let cancelled = env.home.join("worktrees/wt-cancel-1");
    assert!(cancelled.is_dir());
    assert_eq!(worktree_count(&repo), 3);
    assert_eq!(state(&repo), before);
    // gc: a dry run names them and removes nothing; then they go with their runs.
    let dry = env.sp(["gc", "--older-than", "0s", "--dry-run", "--json"]);
    assert_eq!(dry.code, 0, "{dry:?}");
    assert_eq!(dry.json()["removed_worktrees"].as_array().unwrap().len(), 2);
    assert!(failed.is_dir() && cancelled.is_dir());
    let gc = env.sp(["gc", "--older-than", "0s", "--json"]);
    assert_eq!(gc.code, 0, "{gc:?}");
    let mut removed: Vec<String> = gc.json()["removed_worktrees"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_owned())
        .collect();
    removed.sort();
    assert_eq!(
        removed,
        [
            cancelled.display().to_string(),
            failed.display().to_string()
        ]
    );
    assert!(!failed.exists() && !cancelled.exists());
    assert!(!env.run_dir("wt-fail").exists());
    assert_eq!(worktree_count(&repo), 1, "gc prunes the repository's list");
    assert_eq!(branches(&repo), ["main"], "branches without commits go too");
    assert_eq!(state(&repo), before);
    env.assert_no_leftovers();
}

#[test]
fn a_lost_attempts_worktree_is_kept_and_named_until_gc() {
    let env = TestEnv::new();
    let repo = make_repo(&env);
    let before = state(&repo);
    let r = env.sp_within(
        LIMIT,
        HANG,
        [
            "run",
            "--detach",
            "--worktree",
            "--run-id",
            "wt-lost",
            "--cwd",
            repo.to_str().unwrap(),
            "--",
            "bash",
            "-c",
            "echo started; echo left > left.txt; exec sleep 600",
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    wait_for_text(&env.attempt_dir("wt-lost", 1).join("stdout.log"), "started");
    let worker = env.worker_pid("wt-lost");
    send_signal(worker, libc::SIGKILL);
    wait_pid_gone(worker);
    // The observer that writes `lost` names the worktree the worker never got to remove.
    let s = env.sp_within(LIMIT, HANG, ["status", "wt-lost", "--json"]);
    assert_eq!(s.code, 1, "{s:?}");
    let v = s.json();
    assert_valid_envelope(&v);
    assert_eq!(v["failure_kind"], "lost");
    let path = env.home.join("worktrees/wt-lost-1");
    assert_eq!(v["worktree"]["path"], path.display().to_string());
    assert_eq!(v["worktree"]["kept"], true);
    assert!(path.join("left.txt").exists());
    let gc = env.sp(["gc", "--older-than", "0s", "--json"]);
    assert_eq!(gc.code, 0, "{gc:?}");
    assert_eq!(
        gc.json()["removed_worktrees"],
        serde_json::json!([path.display().to_string()])
    );
    assert!(!path.exists());
    assert_eq!(worktree_count(&repo), 1);
    assert_eq!(branches(&repo), ["main"]);
    assert_eq!(state(&repo), before);
    env.assert_no_leftovers();
}

#[test]
fn parallel_writers_of_one_file_each_get_their_own_worktree() {
    let env = TestEnv::new();
    let repo = make_repo(&env);
    let before = state(&repo);
    // Each writes a.txt, waits for the other to have written too, and reads its own back.
    let script = "echo \"$SUBPANE_RUN_ID\" > a.txt && sleep 1 && echo \"read=$(cat a.txt)\"";
    let children: Vec<_> = ["par-1", "par-2"]
        .iter()
        .map(|id| {
            env.cmd()
                .args(["run", "--detach", "--worktree", "--run-id", id, "--cwd"])
                .arg(&repo)
                .args(["--", "bash", "-c", script])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let r = wait_child_within(c, LIMIT, HANG);
        assert_eq!(r.code, 0, "{r:?}");
    }
    let w = env.sp_within(
        LIMIT,
        HANG,
        ["wait", "par-1", "par-2", "--json", "--timeout", "60s"],
    );
    assert_eq!(w.code, 0, "{w:?}");
    let both = w.json();
    let mut patches = Vec::new();
    for (i, id) in ["par-1", "par-2"].iter().enumerate() {
        let v = &both[i];
        assert_valid_envelope(v);
        assert_eq!(v["status"], "completed", "{v}");
        let dir = env.attempt_dir(id, 1);
        let out = std::fs::read_to_string(dir.join("stdout.log")).unwrap();
        assert!(out.contains(&format!("read={id}")), "{id} saw: {out}");
        let patch = std::fs::read_to_string(dir.join("worktree.diff.patch")).unwrap();
        assert!(
            patch.contains(&format!("+{id}")) && patch.contains("-one"),
            "{patch}"
        );
        patches.push(patch);
    }
    assert_ne!(patches[0], patches[1]);
    assert_eq!(worktree_count(&repo), 1);
    assert_eq!(branches(&repo), ["main"]);
    assert_eq!(state(&repo), before);
    env.assert_no_leftovers();
}

/// A retried --worktree run gets a worktree of its own from the repository's HEAD; attempt
/// 1's kept worktree is left as it is. Sandboxed too, where the policy follows the new one.
#[test]
fn a_retry_gets_its_own_worktree_and_leaves_the_kept_one() {
    for sandboxed in [false, true] {
        let env = TestEnv::new();
        let repo = make_repo(&env);
        let before = state(&repo);
        // A directory of its own: the test's directory holds the home and the tmux socket,
        // which a sandbox may not write.
        let flags = env.root.path().join("flags");
        std::fs::create_dir(&flags).unwrap();
        let flag = flags.join("second-time");
        let script = format!(
            "echo try >> a.txt; if [ -e {} ]; then exit 0; else exit 3; fi",
            flag.display()
        );
        let mut args = vec!["run", "--json", "--worktree", "--run-id", "wt-again"];
        let root = flags.display().to_string();
        if sandboxed {
            // The flag lives outside the workspace: visible to the program.
            args.extend(["--sandbox", "--writable", &root]);
        }
        args.extend(["--cwd", repo.to_str().unwrap(), "--", "bash", "-c", &script]);
        let (r, v) = run_json(&env, &args);
        assert_eq!(r.code, 1, "{r:?}");
        assert_eq!(v["worktree"]["kept"], true, "{v}");
        std::fs::write(&flag, "").unwrap();
        let (r, v2) = run_json(&env, &["retry", "--json", "wt-again"]);
        assert_eq!(r.code, 0, "sandboxed={sandboxed}: {r:?}");
        assert_eq!(v2["attempt"], 2);
        let second = env.home.join("worktrees/wt-again-2");
        assert_eq!(v2["worktree"]["path"], second.display().to_string());
        assert_eq!(v2["worktree"]["kept"], false, "{v2}");
        assert_eq!(v2["cwd"], second.display().to_string());
        // Attempt 2 started from HEAD, not from attempt 1's leftovers: one "try" line.
        let patch =
            std::fs::read_to_string(env.attempt_dir("wt-again", 2).join("worktree.diff.patch"))
                .unwrap();
        assert_eq!(patch.matches("+try").count(), 1, "{patch}");
        // Attempt 1's worktree is still there, as it was left.
        let first = env.home.join("worktrees/wt-again-1");
        assert_eq!(
            std::fs::read_to_string(first.join("a.txt")).unwrap(),
            "one\ntry\n"
        );
        assert_eq!(state(&repo), before);
        let gc = env.sp(["gc", "--older-than", "0s"]);
        assert_eq!(gc.code, 0, "{gc:?}");
        assert!(!first.exists());
        env.assert_no_leftovers();
    }
}

/// A git command that never ends at the end of an attempt (here a clean filter that waits)
/// is killed after `SUBPANE_GIT_TIMEOUT`, with what it started: the attempt is still
/// recorded, its program's outcome stands, and the worktree is kept since its diff could not
/// be stored.
#[test]
fn a_git_command_that_hangs_is_killed_and_the_attempt_still_ends() {
    let env = TestEnv::new();
    let repo = make_repo(&env);
    // A FIFO where git reads a `.gitignore` (the program made it): `git status` at the
    // attempt's end waits for a writer that never comes. (A filter or fsmonitor that waits
    // would do the same, but subpane's git runs none of the repository's.)
    let mut c = env.cmd();
    c.env("SUBPANE_GIT_TIMEOUT", "1s").args([
        "run",
        "--json",
        "--worktree",
        "--run-id",
        "wt-hang",
        "--cwd",
        repo.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "echo changed > a.txt && mkfifo sub/.gitignore",
    ]);
    let child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let r = crate::harness::wait_child_within(child, LIMIT, HANG);
    let v = r.json();
    assert_valid_envelope(&v);
    assert_eq!(
        v["status"], "completed",
        "the program's outcome stands: {v}"
    );
    assert_eq!(r.code, 0, "{r:?}");
    let errors = v["output"]["errors"].to_string();
    assert!(
        errors.contains("did not finish within 1s and was killed"),
        "{errors}"
    );
    assert_eq!(v["worktree"]["kept"], true, "{v}");
    // No git is left waiting in the worktree.
    let wt = PathBuf::from(v["worktree"]["path"].as_str().unwrap());
    crate::harness::wait_until("the git commands to be gone", || {
        let left = std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .any(|e| std::fs::read_link(e.path().join("cwd")).is_ok_and(|c| c.starts_with(&wt)));
        (!left).then_some(())
    });
    env.assert_no_leftovers();
}
