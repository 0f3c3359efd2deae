//! The trust boundary: nothing subpane reads back, follows or acts on after a program ran may
//! come from a place that program could write.
//!
//! ```text
//!  sandboxed program ──✗──► runs/<id>/attempts/<n>/{spec,run,launch,worker,cancel,result}.json,
//!        │                   logs, done.fifo            (subpane's records: out of its reach)
//!        └──────✓──────► $SUBPANE_OUT_DIR (out/)        (its artifacts: listed, hashed, never
//!                                                        interpreted)
//!  any program (sandboxed or not) ─► a link under a name subpane writes or reads:
//!        never followed by the worker, `logs`, `status`, `retry`, `gc`, `cancel`
//!  the home ─► another run's records, one-shot environment files and proxy sockets:
//!        invisible from a sandbox
//! ```
//!
//! Each test plays the attacker: the program (or the test, standing in for a program that
//! could write the home) forges or plants something, then a user's command runs, and the
//! test checks that the command acted on subpane's own records only.
//!
//! Common pitfalls:
//! * A home under `/tmp` is hidden by the sandbox's private `/tmp` anyway: tests about what a
//!   sandboxed program can reach of the home use [`TestEnv::with_home_outside_tmp`], as the
//!   default home (`~/.local/state/subpane`) is.
//! * Victims (files, branches, processes) live outside `/tmp` too, or the sandbox could not
//!   even name them and the test would prove nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{
    self, Ran, TestEnv, assert_valid_envelope, outside_the_sandbox, pid_alive, q, start_waiting,
    touch, wait_pid_gone, wait_until,
};

pub(crate) const LIMIT: Duration = Duration::from_secs(60);
pub(crate) const HANG: &str = "a command of the trust tests did not end";

/// `run --json --run-id RUN [extra] -- bash -c SCRIPT`, bounded in time.
pub(crate) fn run_bash(env: &TestEnv, run: &str, extra: &[&str], script: &str) -> Ran {
    let mut args = vec!["run", "--json", "--run-id", run];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", "bash", "-c", script]);
    env.sp_within(LIMIT, HANG, &args)
}

pub(crate) fn stdout_log(env: &TestEnv, run: &str, attempt: u32) -> String {
    std::fs::read_to_string(env.attempt_dir(run, attempt).join("stdout.log")).unwrap_or_default()
}

/// The envelope and spec of a completed run `model`, made by subpane itself in this home:
/// what the best forgeries are made from.
fn model_run(env: &TestEnv) -> (Value, Value) {
    let r = env.sp_within(
        LIMIT,
        HANG,
        ["run", "--json", "--run-id", "model", "--", "true"],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let spec = env.read_json(&env.attempt_dir("model", 1).join("spec.json"));
    (r.json(), spec)
}

/// An envelope of a completed run, rewritten to claim run `run`.
fn forged_envelope(env: &TestEnv, run: &str) -> Value {
    let (mut v, _) = model_run(env);
    v["run_id"] = json!(run);
    v["output"]["final_text"] = json!("FORGED");
    v
}

// ---- records belong to subpane ---------------------------------------------------------

/// Every name subpane keeps in an attempt directory.
const RECORDS: &[&str] = &[
    "spec.json",
    "run.json",
    "launch.json",
    "worker.json",
    "cancel.json",
    "result.json",
    "events.jsonl",
    "stdout.log",
    "stderr.log",
    "output.txt",
    "prompt.txt",
    "done.fifo",
];

#[test]
fn a_sandboxed_program_cannot_touch_subpanes_records_but_has_its_own_out_dir() {
    let env = TestEnv::with_home_outside_tmp();
    // Write, replace, delete, plant a link, for every record name, in the attempt dir and the
    // run dir; each line says what went through.
    let mut script = String::from("A=\"$SUBPANE_ATTEMPT_DIR\"; R=\"$A/../..\"\n");
    for name in RECORDS {
        for dir in ["$A", "$R"] {
            script.push_str(&format!(
                "for op in write replace delete link; do case $op in \
                   write) echo x >> \"{dir}/{name}\" ;; \
                   replace) echo '{{}}' > /tmp/t && mv -f /tmp/t \"{dir}/{name}\" ;; \
                   delete) [ -e \"{dir}/{name}\" ] && rm -f \"{dir}/{name}\" && [ ! -e \"{dir}/{name}\" ] ;; \
                   link) ln -sfn /etc/passwd \"{dir}/{name}\" ;; \
                 esac 2>/dev/null && echo \"BROKE $op {dir}/{name}\"; done\n"
            ));
        }
    }
    script.push_str(
        "mkdir -p \"$A/sub\" 2>/dev/null && echo 'BROKE mkdir in the attempt dir'\n\
         echo artifact > \"$SUBPANE_OUT_DIR/report.txt\" && echo out-writable\n\
         ln -s /etc/passwd \"$SUBPANE_OUT_DIR/passwd\" && echo out-link-made\n\
         exit 3\n",
    );
    let r = run_bash(&env, "rec", &["--sandbox"], &script);
    let v = r.json();
    assert_valid_envelope(&v);
    let out = stdout_log(&env, "rec", 1);
    assert!(
        !out.contains("BROKE"),
        "the program changed subpane's records:\n{out}"
    );
    assert!(out.contains("out-writable"), "{out}");
    // The program's own exit stands.
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(v["status"], "failed");
    assert_eq!(v["exit_code"], 3);
    // Its artifact is listed and hashed; its link is not followed.
    let arts = v["artifacts"].as_array().unwrap();
    let report = arts
        .iter()
        .find(|a| a["path"] == "out/report.txt")
        .unwrap_or_else(|| panic!("out/report.txt is not an artifact: {v}"));
    assert_eq!(report["kind"], "out");
    assert_eq!(report["bytes"], 9);
    use sha2::{Digest, Sha256};
    assert_eq!(
        report["sha256"],
        format!("{:x}", Sha256::digest(b"artifact\n")),
        "{report}"
    );
    if out.contains("out-link-made") {
        let link = arts.iter().find(|a| a["path"] == "out/passwd");
        assert!(link.is_none(), "a link in out/ was listed: {link:?}");
    }
    env.assert_no_leftovers();
}

#[test]
fn a_forged_envelope_is_never_the_outcome() {
    let env = TestEnv::with_home_outside_tmp();
    let outside = outside_the_sandbox("trust-forged-");
    let forged = outside.path().join("result.json");
    std::fs::write(&forged, forged_envelope(&env, "forger").to_string()).unwrap();
    // The program plants the envelope (a copy, then a link) and hangs up the FIFO, then fails.
    let script = format!(
        "cp {f} \"$SUBPANE_ATTEMPT_DIR/result.json\" 2>/dev/null && echo planted-copy; \
         ln -s {f} \"$SUBPANE_ATTEMPT_DIR/result.json\" 2>/dev/null && echo planted-link; \
         : 2>/dev/null > \"$SUBPANE_ATTEMPT_DIR/done.fifo\"; exit 1",
        f = q(&forged)
    );
    let r = run_bash(&env, "forger", &["--sandbox"], &script);
    let v = r.json();
    assert_valid_envelope(&v);
    assert_eq!(r.code, 1, "the forged envelope was taken: {r:?}");
    assert_eq!(v["status"], "failed", "{v}");
    assert_eq!(v["exit_code"], 1, "{v}");
    assert!(v["output"]["final_text"].is_null(), "{v}");
    // status and ls say the same.
    let s = env.sp(["status", "--json", "forger"]);
    assert_eq!(s.code, 1, "{s:?}");
    assert_eq!(s.json()["status"], "failed");
    let ls = env.sp(["ls", "--json"]).json();
    let row = ls
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["run_id"] == "forger")
        .unwrap_or_else(|| panic!("{ls}"));
    assert_eq!(row["status"], "failed", "{row}");
    env.assert_no_leftovers();
}

#[test]
fn a_forged_spec_never_reaches_retry() {
    let env = TestEnv::with_home_outside_tmp();
    let outside = outside_the_sandbox("trust-spec-");
    let marker = outside.path().join("PWNED");
    // The spec a program would like its retry to run: its own argv, no sandbox.
    let (_, mut spec) = model_run(&env);
    spec["run_id"] = json!("victim");
    spec["tmux"]["session"] = json!("victim-1");
    spec["argv"] = json!(["/usr/bin/touch", marker]);
    spec["sandbox"] = json!({"enabled": false});
    let forged = outside.path().join("spec.json");
    std::fs::write(&forged, spec.to_string()).unwrap();
    let script = format!(
        "cp {f} \"$SUBPANE_ATTEMPT_DIR/spec.json\" 2>/dev/null && echo planted; exit 1",
        f = q(&forged)
    );
    let r = run_bash(&env, "victim", &["--sandbox"], &script);
    assert_eq!(r.code, 1, "{r:?}");
    let r = env.sp_within(LIMIT, HANG, ["retry", "--json", "victim"]);
    let v = r.json();
    assert_valid_envelope(&v);
    assert!(
        !marker.exists(),
        "retry ran the argv a sandboxed program wrote, unsandboxed"
    );
    assert_eq!(v["attempt"], 2, "{v}");
    assert_eq!(v["sandbox"]["enabled"], true, "{v}");
    assert!(
        v["argv"][0].as_str().is_some_and(|p| p.ends_with("/bash")),
        "{v}"
    );
    env.assert_no_leftovers();
}

pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .stdin(Stdio::null())
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A user's repository outside `/tmp` with `main` and a second worktree holding uncommitted
/// work: what a forged record would have `gc` delete.
fn users_repo(outside: &Path) -> (PathBuf, PathBuf) {
    harness::require_tool("git", &["--version"], "git");
    let repo = outside.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("a.txt"), "a\n").unwrap();
    git(&repo, &["add", "a.txt"]);
    git(&repo, &["commit", "-q", "-m", "first"]);
    let wt = outside.join("users-worktree");
    git(
        &repo,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "feature",
            wt.to_str().unwrap(),
        ],
    );
    std::fs::write(wt.join("uncommitted.txt"), "work in progress\n").unwrap();
    (repo, wt)
}

/// A `spec.json` and `result.json` for `run` (attempt 1) that name the user's worktree and
/// branch `main`, and a session `victim` on another tmux server: made from a real run's.
fn forged_gc_records(
    env: &TestEnv,
    run: &str,
    repo: &Path,
    wt: &Path,
    other: &Path,
) -> (Value, Value) {
    let (mut result, mut spec) = model_run(env);
    spec["run_id"] = json!(run);
    spec["keep_session"] = json!(true);
    spec["tmux"] = json!({"socket": other, "session": "victim"});
    spec["worktree"] = json!({
        "repo": repo, "path": wt, "branch": "main", "base": "", "subdir": "",
        "common_dir": repo.join(".git"), "git_dir": repo.join(".git/worktrees/users-worktree"),
    });
    result["run_id"] = json!(run);
    result["finished_at"] = json!("2000-01-01T00:00:00.000Z");
    (spec, result)
}

/// A tmux server of the user's, apart from subpane's, with one session `victim`.
pub(crate) struct OtherServer(pub(crate) PathBuf);

impl OtherServer {
    pub(crate) fn start(at: PathBuf) -> Self {
        let ok = Command::new("tmux")
            .arg("-S")
            .arg(&at)
            .args([
                "-f",
                "/dev/null",
                "new-session",
                "-d",
                "-s",
                "victim",
                "sleep",
                "600",
            ])
            .env_remove("TMUX")
            .stdin(Stdio::null())
            .status()
            .unwrap()
            .success();
        assert!(ok, "cannot start a second tmux server");
        OtherServer(at)
    }
    pub(crate) fn has_victim(&self) -> bool {
        Command::new("tmux")
            .arg("-S")
            .arg(&self.0)
            .args(["has-session", "-t", "=victim"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }
}

impl Drop for OtherServer {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.0)
            .arg("kill-server")
            .stderr(Stdio::null())
            .status();
    }
}

fn assert_users_things_intact(repo: &Path, wt: &Path, other: &OtherServer) {
    assert!(
        wt.join("uncommitted.txt").exists(),
        "gc deleted a worktree it never made"
    );
    let branches = git(repo, &["branch", "--format=%(refname)"]);
    assert!(
        branches.contains("refs/heads/main"),
        "gc deleted main: {branches}"
    );
    assert!(
        other.has_victim(),
        "gc killed a session on another tmux server"
    );
}

#[test]
fn gc_never_acts_on_records_a_sandboxed_program_wrote() {
    let env = TestEnv::with_home_outside_tmp();
    let outside = outside_the_sandbox("trust-gc-");
    let (repo, wt) = users_repo(outside.path());
    let other = OtherServer::start(outside.path().join("other.sock"));
    let (spec, result) = forged_gc_records(&env, "gcvictim", &repo, &wt, &other.0);
    let fspec = outside.path().join("spec.json");
    let fresult = outside.path().join("result.json");
    std::fs::write(&fspec, spec.to_string()).unwrap();
    std::fs::write(&fresult, result.to_string()).unwrap();
    let script = format!(
        "cp {s} \"$SUBPANE_ATTEMPT_DIR/spec.json\" 2>/dev/null && echo spec-planted; \
         cp {r} \"$SUBPANE_ATTEMPT_DIR/result.json\" 2>/dev/null && echo result-planted; exit 0",
        s = q(&fspec),
        r = q(&fresult)
    );
    let r = run_bash(&env, "gcvictim", &["--sandbox"], &script);
    assert_eq!(r.code, 0, "{r:?}");
    let g = env.sp_within(LIMIT, HANG, ["gc", "--json", "--older-than", "0s"]);
    assert_eq!(g.code, 0, "{g:?}");
    assert_users_things_intact(&repo, &wt, &other);
    env.assert_no_leftovers();
}

#[test]
fn gc_removes_only_worktrees_and_sessions_it_made() {
    // Records forged by anyone who could write the home (the test stands in): gc still acts
    // only on worktrees under its own home on subpane's branches, and on the sessions it
    // names itself.
    let env = TestEnv::with_home_outside_tmp();
    let outside = outside_the_sandbox("trust-gc2-");
    let (repo, wt) = users_repo(outside.path());
    let other = OtherServer::start(outside.path().join("other.sock"));
    let r = env.sp_within(
        LIMIT,
        HANG,
        ["run", "--json", "--run-id", "gcv", "--", "true"],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let (spec, result) = forged_gc_records(&env, "gcv", &repo, &wt, &other.0);
    let dir = env.attempt_dir("gcv", 1);
    std::fs::write(dir.join("spec.json"), spec.to_string()).unwrap();
    std::fs::remove_file(dir.join("result.json")).unwrap();
    std::fs::write(dir.join("result.json"), result.to_string()).unwrap();
    let g = env.sp_within(LIMIT, HANG, ["gc", "--json", "--older-than", "0s"]);
    assert_users_things_intact(&repo, &wt, &other);
    assert!(
        g.stdout.contains("gcv") || g.stderr.contains("gcv"),
        "gc does not name the run whose records it would not act on: {g:?}"
    );
    env.assert_no_leftovers();
}

/// An unsandboxed program names another live process in its `worker.json`: `cancel`
/// signals nothing, says why (exit 1), never answers "requested"; tmux still ends the run.
#[test]
fn cancel_signals_only_the_attempts_own_worker() {
    let env = TestEnv::new();
    let _flag = start_waiting(&env, "cx", 0);
    // A process of the user's that a forged worker.json names.
    let mut victim = Command::new("sleep").arg("600").spawn().unwrap();
    let vpid = victim.id() as i32;
    let ticks: u64 = std::fs::read_to_string(format!("/proc/{vpid}/stat"))
        .unwrap()
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .nth(19)
        .unwrap()
        .parse()
        .unwrap();
    let dir = env.attempt_dir("cx", 1);
    let real_worker = env.worker_pid("cx");
    let mut facts = env.read_json(&dir.join("worker.json"));
    facts["worker"] = json!({"pid": vpid, "start_ticks": ticks});
    let tmp = dir.join("forged.tmp");
    std::fs::write(&tmp, facts.to_string()).unwrap();
    std::fs::rename(&tmp, dir.join("worker.json")).unwrap();

    for args in [
        &["cancel", "--no-wait", "cx"][..],
        &["cancel", "--no-wait", "--json", "cx"][..],
    ] {
        let c = env.sp_within(LIMIT, HANG, args);
        assert_eq!(c.code, 1, "a cancel it did not deliver was answered: {c:?}");
        assert!(
            c.stderr.contains("not delivered")
                && c.stderr.contains(&format!("pid {vpid}"))
                && c.stderr.contains("tmux"),
            "the refusal does not say why: {c:?}"
        );
        assert!(!c.stdout.contains("cancel_requested"), "{c:?}");
    }
    assert!(
        pid_alive(vpid) && victim.try_wait().unwrap().is_none(),
        "cancel signalled a process a forged record named"
    );
    assert!(pid_alive(real_worker), "the run was stopped after all");
    // tmux's own means still end it: the worker sees its pane close.
    let st = env
        .tmux()
        .args(["kill-session", "-t", "=cx-1"])
        .status()
        .unwrap();
    assert!(st.success());
    let w = env.sp_within(LIMIT, HANG, ["wait", "--json", "--timeout", "30s", "cx"]);
    let v = w.json();
    assert_eq!(v["failure_kind"], "lost", "{w:?}");
    assert!(
        v["output"]["errors"][0]
            .as_str()
            .is_some_and(|e| e.contains("the pane closed under the worker")),
        "{v}"
    );
    wait_pid_gone(real_worker);
    assert!(
        pid_alive(vpid),
        "the forged record's process was signalled at the end"
    );
    let _ = victim.kill();
    let _ = victim.wait();
    env.assert_no_leftovers();
}

// ---- links under the names subpane writes and reads -------------------------------------

#[test]
fn links_planted_under_the_worktree_files_are_never_written_through() {
    let env = TestEnv::new();
    let outside = outside_the_sandbox("trust-wt-");
    harness::require_tool("git", &["--version"], "git");
    let repo = env.work.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("a.txt"), "a\n").unwrap();
    git(&repo, &["add", "a.txt"]);
    git(&repo, &["commit", "-q", "-m", "first"]);
    let names = [
        "worktree.status.txt",
        "worktree.diff.patch",
        ".worktree.index",
    ];
    let mut script = String::from("echo changed >> a.txt; echo new > b.txt; ");
    for n in names {
        let victim = outside.path().join(n);
        std::fs::write(&victim, "the user's file\n").unwrap();
        script.push_str(&format!(
            "ln -sfn {v} \"$SUBPANE_ATTEMPT_DIR/{n}\"; ",
            v = q(&victim)
        ));
    }
    script.push_str("exit 1");
    let r = run_bash(
        &env,
        "wtlinks",
        &["--worktree", "--cwd", repo.to_str().unwrap()],
        &script,
    );
    let v = r.json();
    assert_valid_envelope(&v);
    assert_eq!(v["exit_code"], 1, "{v}");
    for n in names {
        let got = std::fs::read_to_string(outside.path().join(n)).unwrap();
        assert_eq!(
            got, "the user's file\n",
            "the worker wrote through a link at {n}"
        );
    }
    // The worker's own files are there, in place of the links.
    let dir = env.attempt_dir("wtlinks", 1);
    let diff = dir.join("worktree.diff.patch");
    assert!(
        std::fs::symlink_metadata(&diff).is_ok_and(|m| m.is_file()),
        "no diff of the worker's own"
    );
    assert!(std::fs::read_to_string(&diff).unwrap().contains("b.txt"));
    env.assert_no_leftovers();
}

#[test]
fn links_planted_under_the_logs_and_records_are_never_followed() {
    let env = TestEnv::new();
    let outside = outside_the_sandbox("trust-logs-");
    let secret = outside.path().join("secret");
    std::fs::write(&secret, "TOP-SECRET\n").unwrap();
    let forged = outside.path().join("result.json");
    std::fs::write(&forged, forged_envelope(&env, "links").to_string()).unwrap();
    let names = [
        "stdout.log",
        "stderr.log",
        "events.jsonl",
        "output.txt",
        "worker.json",
        "launch.json",
        "cancel.json",
    ];
    let mut script = String::from("echo hello; echo oops >&2; ");
    for n in names {
        script.push_str(&format!(
            "ln -sfn {s} \"$SUBPANE_ATTEMPT_DIR/{n}\"; ",
            s = q(&secret)
        ));
    }
    script.push_str(&format!(
        "ln -sfn {f} \"$SUBPANE_ATTEMPT_DIR/result.json\"; exit 1",
        f = q(&forged)
    ));
    let r = run_bash(&env, "links", &[], &script);
    let v = r.json();
    assert_valid_envelope(&v);
    assert_eq!(
        r.code, 1,
        "the envelope behind a planted link was taken: {r:?}"
    );
    assert_eq!(v["exit_code"], 1, "{v}");
    let s = env.sp(["status", "--json", "links"]);
    assert_eq!(s.json()["exit_code"], 1, "{s:?}");
    for flag in [None, Some("--stderr"), Some("--events"), Some("--output")] {
        let mut args = vec!["logs", "links"];
        args.extend(flag);
        let l = env.sp_within(LIMIT, HANG, &args);
        assert!(
            !l.stdout.contains("TOP-SECRET") && !l.stderr.contains("TOP-SECRET"),
            "logs {flag:?} printed the file behind a link: {l:?}"
        );
    }
    // No artifact is the file behind a link.
    for a in v["artifacts"].as_array().unwrap() {
        assert_ne!(a["bytes"], 11, "an artifact was hashed through a link: {a}");
    }
    env.assert_no_leftovers();
}

/// A link the program put at `result.json` while its worker still runs is not a result, nor
/// an error of the run: `status`, `wait` and a foreground `run` wait for the worker's own.
#[test]
fn a_result_link_planted_while_the_worker_runs_is_waited_past() {
    let env = TestEnv::new();
    let outside = outside_the_sandbox("trust-result-");
    let forged = outside.path().join("result.json");
    std::fs::write(&forged, forged_envelope(&env, "early").to_string()).unwrap();
    let flag = env.root.path().join("flag-early");
    let script = format!(
        "ln -sfn {f} \"$SUBPANE_ATTEMPT_DIR/result.json\"; while [ ! -e {g} ]; do sleep 0.05; done; exit 1",
        f = q(&forged),
        g = q(&flag)
    );
    let r = env.sp([
        "run", "--detach", "--run-id", "early", "--", "bash", "-c", &script,
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let link = env.attempt_dir("early", 1).join("result.json");
    wait_until("the planted link", || link.symlink_metadata().ok());
    let s = env.sp(["status", "--json", "early"]);
    assert_eq!(s.code, 3, "a planted result.json made status fail: {s:?}");
    assert_eq!(s.json()["status"], "running", "{s:?}");
    touch(&flag);
    let w = env.sp_within(LIMIT, HANG, ["wait", "--json", "early"]);
    assert_eq!(w.code, 1, "{w:?}");
    assert_eq!(w.json()["exit_code"], 1, "{w:?}");
    env.assert_no_leftovers();
}

/// A link under `cancel.json`, and the signal `cancel` sends after writing it: no request
/// that subpane wrote, so the run is not cancelled.
#[test]
fn a_planted_cancel_link_cancels_nothing() {
    let env = TestEnv::new();
    let script = "ln -s /etc/passwd \"$SUBPANE_ATTEMPT_DIR/cancel.json\"; kill -USR1 $PPID; \
                  sleep 0.3; exit 3";
    let r = run_bash(&env, "planted-cancel", &[], script);
    let v = r.json();
    assert_eq!(v["status"], "failed", "{v}");
    assert_eq!(v["exit_code"], 3, "{v}");
    assert_eq!(v["signals_sent"], json!([]), "{v}");
    env.assert_no_leftovers();
}

// ---- the home is out of a sandbox's reach ------------------------------------------------

#[test]
fn a_sandboxed_program_reaches_no_other_runs_files_or_sockets() {
    let env = TestEnv::with_home_outside_tmp();
    // Another run: still running, with an egress proxy socket, and a one-shot environment
    // file of a run being created (written by hand: the worker removes real ones at once).
    let flag = start_waiting(&env, "other", 0);
    let other = env.attempt_dir("other", 1);
    std::fs::write(other.join(".env"), "API_KEY=sk-secret-value\0").unwrap();
    let r = env.sp_within(
        LIMIT,
        HANG,
        [
            "run",
            "--detach",
            "--run-id",
            "proxied",
            "--sandbox",
            "--network",
            "allow:localhost",
            "--",
            "bash",
            "-c",
            "sleep 60",
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let proxy_sock = env.attempt_dir("proxied", 1).join("proxy.sock");
    wait_until("the other run's proxy socket", || {
        proxy_sock.exists().then_some(())
    });
    let home = env.home.clone();
    let script = format!(
        "H={h}; \
         cat \"$H/runs/other/attempts/1/.env\" 2>/dev/null && echo READ_ENV; \
         cat \"$H/runs/other/attempts/1/spec.json\" 2>/dev/null | head -c 1 | grep -q . && echo READ_SPEC; \
         ls \"$H/runs\" 2>/dev/null | grep -q other && echo LISTED_RUNS; \
         [ -S {p} ] && echo PROXY_VISIBLE; \
         python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print(\"CONNECTED\")' {p} 2>/dev/null; \
         ls \"$H/sessions\" 2>/dev/null | grep -q . && echo SESSIONS_VISIBLE; \
         echo probe-done",
        h = q(&home),
        p = q(&proxy_sock),
    );
    let r = run_bash(&env, "prober", &["--sandbox"], &script);
    assert_eq!(r.code, 0, "{r:?}");
    let out = stdout_log(&env, "prober", 1);
    assert!(out.contains("probe-done"), "{out}");
    for bad in [
        "READ_ENV",
        "READ_SPEC",
        "LISTED_RUNS",
        "PROXY_VISIBLE",
        "CONNECTED",
        "SESSIONS_VISIBLE",
    ] {
        assert!(
            !out.contains(bad),
            "{bad}: the home is in reach of a sandbox:\n{out}"
        );
    }
    touch(&flag);
    let _ = env.sp_within(LIMIT, HANG, ["cancel", "proxied"]);
    let _ = env.sp_within(LIMIT, HANG, ["wait", "other", "proxied"]);
    env.assert_no_leftovers();
}

// ---- records read defensively -------------------------------------------------------------

#[test]
fn one_damaged_record_is_reported_on_its_own_row() {
    let env = TestEnv::new();
    for id in ["good1", "bad", "good2"] {
        let r = env.sp_within(LIMIT, HANG, ["run", "--json", "--run-id", id, "--", "true"]);
        assert_eq!(r.code, 0, "{r:?}");
    }
    // Damaged once its worker has exited (it makes its records durable after result.json).
    let pid = env.worker_pid("bad");
    crate::harness::wait_until("the worker of run bad to exit", || {
        (!crate::harness::pid_alive(pid)).then_some(())
    });
    let result = env.attempt_dir("bad", 1).join("result.json");
    std::fs::remove_file(&result).unwrap();
    std::fs::write(&result, "{ this is not an envelope").unwrap();
    let ls = env.sp(["ls", "--json"]);
    assert_eq!(ls.code, 0, "{ls:?}");
    let rows = ls.json();
    let rows = rows.as_array().unwrap();
    for id in ["good1", "good2"] {
        let row = rows.iter().find(|r| r["run_id"] == id).unwrap();
        assert_eq!(row["status"], "completed", "{row}");
    }
    let bad = rows
        .iter()
        .find(|r| r["run_id"] == "bad")
        .unwrap_or_else(|| panic!("the damaged run has no row: {rows:?}"));
    assert_eq!(bad["status"], "damaged", "{bad}");
    assert!(
        bad["problem"]
            .as_str()
            .is_some_and(|p| p.contains("result.json")),
        "{bad}"
    );
    let human = env.sp(["ls"]);
    assert_eq!(human.code, 0, "{human:?}");
    assert!(
        human.stdout.contains("good1") && human.stdout.contains("bad"),
        "{human:?}"
    );
    // gc goes on with the rest and names the damaged run.
    let g = env.sp_within(LIMIT, HANG, ["gc", "--json", "--older-than", "0s"]);
    assert_eq!(g.code, 0, "{g:?}");
    let report = g.json();
    let removed = report["removed_runs"].as_array().unwrap();
    assert!(
        removed.iter().any(|r| r == "good1") && removed.iter().any(|r| r == "good2"),
        "{report}"
    );
    assert!(!removed.iter().any(|r| r == "bad"), "{report}");
    assert!(
        report["damaged"]
            .as_array()
            .is_some_and(|d| d.iter().any(|r| r["run_id"] == "bad")),
        "{report}"
    );
    env.assert_no_leftovers();
}

#[test]
fn huge_records_and_endless_files_are_refused_with_a_limit() {
    let env = TestEnv::new();
    let r = env.sp_within(
        LIMIT,
        HANG,
        ["run", "--json", "--run-id", "big", "--", "true"],
    );
    assert_eq!(r.code, 0, "{r:?}");
    // A sparse result.json of a terabyte: reading it whole would never end (or abort).
    let result = env.attempt_dir("big", 1).join("result.json");
    std::fs::remove_file(&result).unwrap();
    let f = std::fs::File::create(&result).unwrap();
    f.set_len(1 << 40).unwrap();
    drop(f);
    let s = env.sp_within(LIMIT, "a huge record was read whole", ["status", "big"]);
    assert_eq!(s.code, 1, "{s:?}");
    assert!(
        s.stderr.contains("result.json") && s.stderr.contains("larger than"),
        "{s:?}"
    );
    // A task from an endless file.
    let r = env.sp_within(
        LIMIT,
        "an @FILE read never ended",
        ["run", "--agent", "pi", "--task", "@/dev/zero"],
    );
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("/dev/zero") && r.stderr.contains("larger than"),
        "{r:?}"
    );
    env.assert_no_leftovers();
}
