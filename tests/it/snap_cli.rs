//! Snapshots of the command line's main answers and errors: exit code, stdout and stderr as a
//! user sees them (filtered by `snap`). A change of wording or layout shows up here as a diff
//! to review; see the README's *Development* section for how to accept one.

use crate::harness::{Ran, TestEnv, wait_until};
use crate::snap::{Snap, sp_snapshot};

/// Runs `subpane run --run-id ID -- PROGRAM…` to its end and checks it exited `code`.
fn ran(env: &TestEnv, id: &str, program: &[&str], code: i32) {
    let mut args = vec!["run", "--run-id", id, "--"];
    args.extend_from_slice(program);
    let r: Ran = env.sp(&args);
    assert_eq!(r.code, code, "{args:?}: {r:?}");
}

/// Two finished runs, `one` (`echo one`, completed) and then `two` (`sh -c 'exit 3'`,
/// failed): created in the order of their ids, so lists newest first are the same whatever
/// the clock's resolution. Their panes are gone too (a pane closes a moment after its run
/// ended), so what `gc` finds does not depend on how fast tmux was.
fn two_runs(env: &TestEnv) {
    ran(env, "one", &["echo", "one"], 0);
    ran(env, "two", &["sh", "-c", "exit 3"], 1);
    wait_until("the sessions of runs one and two to close", || {
        (!env.has_session("one-1") && !env.has_session("two-1")).then_some(())
    });
}

// ---- answers ----

#[test]
fn snap_run_human() {
    let env = TestEnv::new();
    sp_snapshot!("run_human", env, ["run", "--", "echo", "hello"]);
}

#[test]
fn snap_run_json() {
    let env = TestEnv::new();
    let snap = Snap::new(&env).program("echo");
    sp_snapshot!("run_json", snap => ["run", "--json", "--", "echo", "hello"]);
}

#[test]
fn snap_run_fails() {
    let env = TestEnv::new();
    sp_snapshot!(
        "run_fails",
        env,
        [
            "run",
            "--run-id",
            "fails",
            "--",
            "sh",
            "-c",
            "echo out; echo err >&2; exit 1"
        ]
    );
}

#[test]
fn snap_status() {
    let env = TestEnv::new();
    two_runs(&env);
    sp_snapshot!("status", env, ["status", "two"]);
}

#[test]
fn snap_ls() {
    let env = TestEnv::new();
    two_runs(&env);
    sp_snapshot!("ls", env, ["ls"]);
}

#[test]
fn snap_wait_two_runs() {
    let env = TestEnv::new();
    let programs: [(&str, &[&str]); 2] =
        [("a1", &["echo", "one"]), ("b2", &["sh", "-c", "exit 3"])];
    for (id, program) in programs {
        let mut args = vec!["run", "--detach", "--run-id", id, "--"];
        args.extend_from_slice(program);
        let r = env.sp(&args);
        assert_eq!(r.code, 0, "{args:?}: {r:?}");
    }
    sp_snapshot!("wait_two_runs", env, ["wait", "a1", "b2"]);
}

#[test]
fn snap_logs() {
    let env = TestEnv::new();
    two_runs(&env);
    sp_snapshot!("logs", env, ["logs", "one"]);
}

#[test]
fn snap_cancel_finished() {
    let env = TestEnv::new();
    two_runs(&env);
    sp_snapshot!("cancel_finished", env, ["cancel", "one"]);
}

#[test]
fn snap_retry_detach() {
    let env = TestEnv::new();
    two_runs(&env);
    sp_snapshot!("retry_detach", env, ["retry", "--detach", "two"]);
    // Attempt 2 ends as attempt 1 did, before the test's home goes.
    let r = env.sp(["wait", "two"]);
    assert_eq!(r.code, 1, "{r:?}");
}

#[test]
fn snap_fanout() {
    let env = TestEnv::new();
    std::fs::write(
        env.work.join("tasks.jsonl"),
        "{\"argv\": [\"echo\", \"x\"], \"run_id\": \"f1\"}\n\
         # a comment line\n\
         {\"argv\": [\"sh\", \"-c\", \"exit 2\"], \"run_id\": \"f2\"}\n",
    )
    .unwrap();
    sp_snapshot!("fanout", env, ["fanout", "tasks.jsonl"]);
}

#[test]
fn snap_gc_dry_run() {
    let env = TestEnv::new();
    two_runs(&env);
    sp_snapshot!("gc_dry_run", env, ["gc", "--dry-run"]);
    sp_snapshot!(
        "gc_dry_run_older_than_0s",
        env,
        ["gc", "--dry-run", "--older-than", "0s"]
    );
}

#[test]
fn snap_help_run() {
    let env = TestEnv::new();
    sp_snapshot!("help_run", env, ["run", "--help"]);
}

// ---- errors (exit 2, nothing started) ----

/// A test that `subpane ARGS` in a fresh home answers as the snapshot `name` says.
macro_rules! snap_error {
    ($name:ident, $args:expr) => {
        #[test]
        fn $name() {
            let env = TestEnv::new();
            sp_snapshot!(stringify!($name), env, $args);
        }
    };
}

snap_error!(error_unknown_flag, ["run", "--bogus", "--", "true"]);
snap_error!(
    error_timeout_word,
    ["run", "--timeout", "soon", "--", "true"]
);
snap_error!(
    error_timeout_no_unit,
    ["run", "--timeout", "5", "--", "true"]
);
snap_error!(error_nothing_to_run, ["run"]);
snap_error!(error_program_not_found, ["run", "--", "no-such-program-sp"]);
snap_error!(
    error_run_id_escapes,
    ["run", "--run-id", "../x", "--", "true"]
);
snap_error!(error_unknown_run, ["status", "nosuch"]);
snap_error!(error_unknown_group, ["wait", "--group", "g-nosuch"]);
snap_error!(
    error_sandbox_setting_without_sandbox,
    ["run", "--max-procs", "500", "--", "true"]
);
snap_error!(
    error_writable_proc,
    ["run", "--writable", "/proc", "--sandbox", "--", "true"]
);

#[test]
fn error_ambiguous_prefix() {
    let env = TestEnv::new();
    ran(&env, "ab-1", &["true"], 0);
    ran(&env, "ab-2", &["true"], 0);
    sp_snapshot!("error_ambiguous_prefix", env, ["status", "ab"]);
}

#[test]
fn error_no_such_attempt() {
    let env = TestEnv::new();
    two_runs(&env);
    sp_snapshot!(
        "error_no_such_attempt",
        env,
        ["status", "one", "--attempt", "9"]
    );
}

#[test]
fn error_logs_output_of_command() {
    let env = TestEnv::new();
    two_runs(&env);
    sp_snapshot!(
        "error_logs_output_of_command",
        env,
        ["logs", "one", "--output"]
    );
}

#[test]
fn error_fanout_unknown_field() {
    let env = TestEnv::new();
    std::fs::write(
        env.work.join("tasks.jsonl"),
        "{\"argv\": [\"true\"], \"bogus\": 1}\n",
    )
    .unwrap();
    sp_snapshot!("error_fanout_unknown_field", env, ["fanout", "tasks.jsonl"]);
}

#[test]
fn error_fanout_bad_json() {
    let env = TestEnv::new();
    std::fs::write(
        env.work.join("tasks.jsonl"),
        "{\"argv\": [\"true\"]}\n{not json\n[1, 2]\n",
    )
    .unwrap();
    sp_snapshot!("error_fanout_bad_json", env, ["fanout", "tasks.jsonl"]);
}
