//! `subpane retry`: attempt n+1 of a finished run, and `--attempt N` on status, wait and logs.
//!
//! ```text
//! run (attempt 1 fails) ──► fix the cause ──► retry ──► attempt 2 completes
//!       │ every file of attempts/1 hashed before ……………… and after: byte for byte the same
//!       └── status/logs/wait --attempt 1 show attempt 1; without --attempt, attempt 2
//! ```
//!
//! Common pitfalls:
//! * `done.fifo` is a FIFO: reading it to hash it would block until a writer comes. Only its
//!   kind is compared.
//! * The retry's environment is the `subpane retry` command's own, not the test's: set or
//!   remove variables on that command.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::harness::{
    Ran, TestEnv, assert_valid_envelope, send_signal, start_waiting, touch, wait_child_within,
    wait_for_text,
};

const LIMIT: Duration = Duration::from_secs(60);
const HANG: &str = "a retried attempt did not end";

/// Shell code for `sh -c`: prints its attempt and `$GREETING`, then succeeds only when the
/// file `$1` exists.
const NEEDS_FLAG: &str = r#"echo "attempt=$SUBPANE_ATTEMPT greeting=${GREETING-unset}"
if [ -f "$1" ]; then echo found; else echo "missing $1" >&2; exit 1; fi"#;

/// Every entry under `dir`: its path relative to `dir`, and its kind with the SHA-256 of
/// its bytes (regular files) or its link target.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, String>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_path_buf();
            let t = std::fs::symlink_metadata(&p).unwrap().file_type();
            let what = if t.is_dir() {
                walk(root, &p, out);
                "dir".to_owned()
            } else if t.is_file() {
                let bytes = std::fs::read(&p).unwrap();
                format!("file {:x} ({} bytes)", Sha256::digest(&bytes), bytes.len())
            } else if t.is_symlink() {
                format!("link {}", std::fs::read_link(&p).unwrap().display())
            } else {
                // done.fifo: reading it would block.
                "special".to_owned()
            };
            out.insert(rel, what);
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn flag(env: &TestEnv) -> PathBuf {
    env.root.path().join("flag")
}

/// `run --json --run-id ID --env GREETING=hello -- sh -c NEEDS_FLAG sh FLAG`: fails, since
/// the flag is not there yet.
fn failed_first_attempt(env: &TestEnv, id: &str) -> Value {
    let r = env.sp_within(
        LIMIT,
        HANG,
        [
            "run",
            "--json",
            "--run-id",
            id,
            "--label",
            "team=core",
            "--timeout",
            "5m",
            "--env-plain",
            "GREETING=hello",
            "--",
            "sh",
            "-c",
            NEEDS_FLAG,
            "sh",
            flag(env).to_str().unwrap(),
        ],
    );
    assert_eq!(r.code, 1, "{r:?}");
    r.json()
}

#[test]
fn a_failed_command_is_retried_as_attempt_2_and_attempt_1_stays_byte_for_byte() {
    let env = TestEnv::new();
    let first = failed_first_attempt(&env, "fix");
    assert_eq!(first["attempt"], 1);
    let dir1 = env.attempt_dir("fix", 1);
    let before = snapshot(&dir1);
    assert!(before.contains_key(Path::new("result.json")), "{before:?}");

    touch(&flag(&env));
    let mut c = env.cmd();
    c.env("GREETING", "hello again")
        .args(["retry", "fix", "--json"]);
    let r: Ran = c.output().unwrap().into();
    assert_eq!(r.code, 0, "{r:?}");
    let second = r.json();
    assert_valid_envelope(&second);
    assert_eq!(second["attempt"], 2);
    assert_eq!(second["status"], "completed");
    assert!(second.get("resumed_from").is_none(), "{second:#}");
    assert_eq!(second["labels"], json!({"team": "core"}));
    assert_eq!(second["argv"], first["argv"]);
    assert_eq!(second["cwd"], first["cwd"]);
    let dir2 = env.attempt_dir("fix", 2);
    assert_eq!(env.read_json(&dir2.join("result.json")), second);
    let out2 = std::fs::read_to_string(dir2.join("stdout.log")).unwrap();
    assert!(
        out2.contains("attempt=2 greeting=hello again") && out2.contains("found"),
        "{out2}"
    );
    // The same limits; the value of GREETING is nowhere in the records.
    let spec1 = env.read_json(&dir1.join("spec.json"));
    let spec2 = env.read_json(&dir2.join("spec.json"));
    assert_eq!(spec2["limits"], spec1["limits"]);
    assert_eq!(spec2["env"]["set"], json!(["GREETING"]));
    for f in ["spec.json", "result.json"] {
        let text = std::fs::read_to_string(dir2.join(f)).unwrap();
        assert!(!text.contains("hello again"), "{f} holds a value: {text}");
    }

    assert_eq!(snapshot(&dir1), before, "attempt 1's directory changed");
    let run = env.read_json(&env.run_dir("fix").join("run.json"));
    let listed: Vec<u64> = run["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["attempt"].as_u64().unwrap())
        .collect();
    assert_eq!(listed, [1, 2]);

    // status, wait and logs: the latest attempt by default, any one with --attempt.
    for (args, attempt, code) in [
        (vec!["status", "--json", "fix"], 2, 0),
        (vec!["status", "--json", "--attempt", "1", "fix"], 1, 1),
        (vec!["wait", "--json", "fix"], 2, 0),
        (vec!["wait", "--json", "--attempt", "1", "fix"], 1, 1),
    ] {
        let r = env.sp(&args);
        assert_eq!(r.code, code, "{args:?}: {r:?}");
        let v = r.json();
        assert_eq!(v["attempt"], attempt, "{args:?}");
        let want = env.read_json(&env.attempt_dir("fix", attempt).join("result.json"));
        assert_eq!(v, want, "{args:?}");
    }
    let s = env.sp(["status", "--attempt", "1", "fix"]);
    assert!(s.stdout.contains("(attempt 1)"), "{s:?}");
    let logs = env.sp(["logs", "fix"]);
    assert!(logs.stdout.contains("attempt=2"), "{logs:?}");
    let logs = env.sp(["logs", "--attempt", "1", "fix"]);
    assert!(logs.stdout.contains("attempt=1 greeting=hello"), "{logs:?}");
    let logs = env.sp(["logs", "--stderr", "--attempt", "1", "fix"]);
    assert!(logs.stdout.contains("missing"), "{logs:?}");
    let none = env.sp(["wait", "--attempt", "3", "fix"]);
    assert_eq!(none.code, 2, "{none:?}");
    assert!(none.stderr.contains("has no attempt 3"), "{none:?}");
    env.assert_no_leftovers();
}

#[test]
fn variables_the_run_set_take_their_value_from_the_retrying_shell_or_are_named() {
    let env = TestEnv::new();
    failed_first_attempt(&env, "vars");
    // This shell lacks GREETING: the retry warns, names it, and runs without it.
    let mut c = env.cmd();
    c.env_remove("GREETING").args(["retry", "vars"]);
    let r: Ran = c.output().unwrap().into();
    assert_eq!(r.code, 1, "the flag is still missing: {r:?}");
    assert!(
        r.stderr.contains("warning") && r.stderr.contains("GREETING"),
        "{r:?}"
    );
    let out = std::fs::read_to_string(env.attempt_dir("vars", 2).join("stdout.log")).unwrap();
    assert!(out.contains("attempt=2 greeting=unset"), "{out}");
    // retry --env gives the value instead.
    let mut c = env.cmd();
    c.env_remove("GREETING")
        .args(["retry", "vars", "--env", "GREETING=from-flag"]);
    let r: Ran = c.output().unwrap().into();
    assert!(!r.stderr.contains("warning"), "{r:?}");
    let out = std::fs::read_to_string(env.attempt_dir("vars", 3).join("stdout.log")).unwrap();
    // A value given to retry is a secret unless the attempt retried had its name plain
    // (attempt 2 ran without GREETING): masked in the log.
    assert!(out.contains("attempt=3 greeting=***"), "{out}");
    env.assert_no_leftovers();
}

#[test]
fn a_run_whose_latest_attempt_runs_is_not_retried() {
    let env = TestEnv::new();
    let flag = start_waiting(&env, "busy", 0);
    let r = env.sp(["retry", "busy"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr
            .contains("attempt 1 of run `busy` has not finished")
            && r.stderr.contains("subpane wait busy"),
        "{r:?}"
    );
    assert!(
        !env.attempt_dir("busy", 2).exists(),
        "a refused retry created attempt 2"
    );
    touch(&flag);
    assert_eq!(env.sp_within(LIMIT, HANG, ["wait", "busy"]).code, 0);
    env.assert_no_leftovers();
}

#[test]
fn what_a_retry_cannot_do_is_refused_before_anything_starts() {
    let env = TestEnv::new();
    failed_first_attempt(&env, "cmd");
    for (args, says) in [
        (
            vec!["retry", "cmd", "--resume"],
            "is a command: retry it without --resume",
        ),
        (
            vec!["retry", "cmd", "--task", "again"],
            "--task is for agents",
        ),
        (vec!["retry", "nope"], "no run `nope`"),
        (vec!["retry", "cmd", "--env", "NOEQUALS"], "KEY=VALUE"),
    ] {
        let r = env.sp(&args);
        assert_eq!(r.code, 2, "{args:?}: {r:?}");
        assert!(r.stderr.contains(says), "{args:?}: {r:?}");
        assert!(r.stdout.is_empty(), "{args:?}: {r:?}");
    }
    assert!(!env.attempt_dir("cmd", 2).exists());
}

#[test]
fn retry_detach_answers_at_once_with_the_new_attempt() {
    let env = TestEnv::new();
    failed_first_attempt(&env, "bg");
    touch(&flag(&env));
    let r = env.sp(["retry", "bg", "--detach", "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let v = r.json();
    assert_eq!(v["run_id"], "bg");
    assert_eq!(v["attempt"], 2);
    assert_eq!(v["status"], "starting");
    assert_eq!(
        v["attempt_dir"].as_str().map(PathBuf::from),
        Some(env.attempt_dir("bg", 2))
    );
    let w = env.sp_within(LIMIT, HANG, ["wait", "--json", "bg"]);
    assert_eq!(w.code, 0, "{w:?}");
    assert_eq!(w.json()["attempt"], 2);
    // Without --json: the id alone on stdout (for `wait $(…)`), the attempt on stderr.
    let r = env.sp(["retry", "bg", "--detach"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.stdout, "bg\n", "{r:?}");
    assert!(
        r.stderr
            .contains("run bg attempt 3 started; `subpane wait bg` waits for it"),
        "{r:?}"
    );
    let w = env.sp_within(LIMIT, HANG, ["wait", "bg"]);
    assert_eq!(w.code, 0, "{w:?}");
    env.assert_no_leftovers();
}

#[test]
fn ctrl_c_to_a_waiting_retry_cancels_the_new_attempt() {
    let env = TestEnv::new();
    let flag = flag(&env);
    let script = r#"if [ -f "$1" ]; then echo started; exec sleep 600; else exit 1; fi"#;
    let r = env.sp_within(
        LIMIT,
        HANG,
        [
            "run",
            "--run-id",
            "long",
            "--",
            "sh",
            "-c",
            script,
            "sh",
            flag.to_str().unwrap(),
        ],
    );
    assert_eq!(r.code, 1, "{r:?}");
    touch(&flag);
    let child: Child = env
        .cmd()
        .args(["retry", "long", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_text(&env.attempt_dir("long", 2).join("stdout.log"), "started");
    send_signal(child.id() as i32, libc::SIGINT);
    let r = wait_child_within(child, LIMIT, "Ctrl-C did not end a waiting retry");
    assert_eq!(r.code, 130, "{r:?}");
    let v = r.json();
    assert_eq!(
        (v["attempt"].clone(), v["status"].clone()),
        (json!(2), json!("cancelled"))
    );
    assert_eq!(env.sp(["status", "--attempt", "1", "long"]).code, 1);
    env.assert_no_leftovers();
}

#[test]
fn help_explains_retry_and_the_attempt_flags() {
    let env = TestEnv::new();
    let r = env.sp(["retry", "--help"]);
    assert_eq!(r.code, 0, "{r:?}");
    for f in [
        "--resume", "--task", "--env", "--json", "--detach", "--home",
    ] {
        assert!(
            r.stdout.contains(f),
            "retry --help lacks {f}:\n{}",
            r.stdout
        );
    }
    assert!(
        r.stdout.contains("Continue where you stopped."),
        "{}",
        r.stdout
    );
    let top = env.sp(["--help"]);
    assert!(top.stdout.contains("retry"), "{}", top.stdout);
    let w = env.sp(["wait", "--help"]);
    assert!(w.stdout.contains("--attempt"), "{}", w.stdout);
    assert!(!env.home.exists(), "--help creates nothing");
}

/// What `run` refuses of the new attempt a retry refuses by the same rule, naming the run
/// and attempt the kept setting comes from (the retry's caller did not give `--cwd`).
#[test]
fn a_retry_whose_directory_is_gone_is_refused_in_runs_words_with_the_attempt_named() {
    let env = TestEnv::new();
    let dir = env.root.path().join("gone");
    std::fs::create_dir(&dir).unwrap();
    // As the run records it: resolved.
    let dir = dir.canonicalize().unwrap();
    let d = dir.to_str().unwrap();
    let r = env.sp_within(
        LIMIT,
        HANG,
        [
            "run", "--run-id", "away", "--cwd", d, "--", "sh", "-c", "exit 1",
        ],
    );
    assert_eq!(r.code, 1, "{r:?}");
    std::fs::remove_dir(&dir).unwrap();
    let run = env.sp(["run", "--cwd", d, "--", "true"]);
    let retry = env.sp(["retry", "away"]);
    assert_eq!((run.code, retry.code), (2, 2), "{run:?} {retry:?}");
    let said = format!("--cwd `{d}` cannot be used: No such file or directory (os error 2)");
    assert!(run.stderr.contains(&said), "{run:?}");
    assert!(
        retry.stderr.contains(&format!(
            "{said}; attempt 1 of run `away` ran there, and a retry keeps it: to change it, start a new run (`subpane run`)"
        )),
        "{retry:?}"
    );
    assert!(!env.attempt_dir("away", 2).exists());
    env.assert_no_leftovers();
}
