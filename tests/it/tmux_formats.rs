//! No string a user or a program chose reaches tmux where tmux expands formats: a start
//! directory, a label, an environment value or a task with `#(…)`, `#{…}` or `#[…]` in it is
//! never a command the tmux server runs (as the user, outside every sandbox), and the program
//! still runs where it was told to.
//!
//! ```text
//!  run --cwd 'a #(touch M) #{…} #[…]'  ─► tmux new-session -c /  (never the cwd)
//!                                         └► worker: chdir(cwd) ─► the program (pwd = cwd)
//!  then: tmux run-shell 'touch SENTINEL'  ─► SENTINEL is there, M never is
//! ```
//!
//! Common pitfalls:
//! * tmux runs a `#(…)` job in the background, when it expands the format: the test has
//!   the same server run a sentinel `touch` of its own (`run-shell`, which waits for it)
//!   after the run has ended, and looks for the marker then.
//! * A path component cannot hold `/`: the marker's absolute path in `#(touch /…/marker)`
//!   makes the directory several components deep, which is what a program can make, too.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::harness::{BIN, Ran, TestEnv, shell_quote};

const LIMIT: Duration = Duration::from_secs(90);
const HANG: &str = "a run in a directory with tmux formats in its name did not end";

/// A directory under `base` whose name holds a `#(touch MARKER)` job, a `#{…}` format and a
/// `#[…]` style, and the marker.
fn hostile_dir(env: &TestEnv, base: &Path, tag: &str) -> (PathBuf, PathBuf) {
    let marker = env.root.path().join(format!("marker-{tag}"));
    let name = format!(
        "a #(touch {}) #{{session_name}} #[bg=red] #{{pane_pid}}",
        marker.display()
    );
    let dir = base.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    (dir, marker)
}

/// Fails if the tmux server ran the marker's job: a sentinel job run by the same server
/// after the run's end has come back first.
fn assert_no_job_ran(env: &TestEnv, marker: &Path) {
    let sentinel = env.root.path().join(format!(
        "sentinel-{}",
        marker.file_name().unwrap().to_string_lossy()
    ));
    // `run-shell` returns once its command has run.
    let st = env
        .tmux()
        .arg("run-shell")
        .arg(format!("touch {}", sentinel.display()))
        .status()
        .unwrap();
    assert!(st.success(), "the test's own run-shell failed");
    assert!(sentinel.exists(), "the sentinel job did not run");
    assert!(
        !marker.exists(),
        "the tmux server ran a job a directory name held: {} exists",
        marker.display()
    );
}

fn stdout_of(env: &TestEnv, run: &str, attempt: u32) -> String {
    std::fs::read_to_string(env.attempt_dir(run, attempt).join("stdout.log")).unwrap_or_default()
}

/// `pwd` as the program saw it: `pwd -P`, then the directory's own text.
fn assert_ran_in(out: &str, dir: &Path) {
    let real = std::fs::canonicalize(dir).unwrap();
    assert!(
        out.lines().any(|l| l == real.display().to_string()),
        "the program did not run in {}:\n{out}",
        real.display()
    );
}

fn run_pwd_in(env: &TestEnv, run: &str, dir: &Path, extra: &[&str]) -> Ran {
    let mut c = env.cmd();
    c.args(["run", "--json", "--run-id", run, "--cwd"]).arg(dir);
    c.args(extra).args(["--", "sh", "-c", "pwd -P"]);
    let child = c
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    crate::harness::wait_child_within(child, LIMIT, HANG)
}

#[test]
fn a_users_cwd_with_formats_is_never_expanded_by_tmux() {
    let env = TestEnv::new();
    let (dir, marker) = hostile_dir(&env, &env.work, "plain");
    let r = run_pwd_in(&env, "plain", &dir, &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_ran_in(&stdout_of(&env, "plain", 1), &dir);
    assert_no_job_ran(&env, &marker);
}

#[test]
fn a_users_sandboxed_cwd_with_formats_is_never_expanded_by_tmux() {
    let env = TestEnv::new();
    let (dir, marker) = hostile_dir(&env, &env.work, "sandbox");
    let r = run_pwd_in(&env, "boxed", &dir, &["--sandbox"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_ran_in(&stdout_of(&env, "boxed", 1), &dir);
    assert_no_job_ran(&env, &marker);
}

/// The directory a sandboxed program names for its nested run, and the user's retry of that
/// run, never reach tmux.
#[test]
fn a_nested_runs_cwd_and_its_retry_are_never_expanded_by_tmux() {
    let env = TestEnv::with_home_outside_tmp();
    let (dir, marker) = hostile_dir(&env, &env.work, "nested");
    // The program makes the directory itself and names it, as an attacker would.
    std::fs::remove_dir_all(env.work.join("a #(touch ")).unwrap();
    let script = format!(
        "SP={}; mkdir -p {d} && $SP run --json --run-id child --cwd {d} -- sh -c 'pwd -P' \
         >\"$SUBPANE_OUT_DIR/child.json\" 2>\"$SUBPANE_OUT_DIR/child.err\"; echo child_rc=$?",
        shell_quote(BIN),
        d = shell_quote(&dir.display().to_string()),
    );
    let r = env.sp_within(
        LIMIT,
        HANG,
        [
            "run",
            "--json",
            "--run-id",
            "parent",
            "--sandbox",
            "--",
            "bash",
            "-c",
            &script,
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let log = stdout_of(&env, "parent", 1);
    let err = std::fs::read_to_string(env.attempt_dir("parent", 1).join("out/child.err"))
        .unwrap_or_default();
    assert!(log.contains("child_rc=0"), "{log}\nchild's stderr:\n{err}");
    assert_ran_in(&stdout_of(&env, "child", 1), &dir);
    assert_no_job_ran(&env, &marker);

    // The user retries the child (`top`'s `r` is the same retry).
    let r = env.sp_within(LIMIT, HANG, ["retry", "--json", "child"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_ran_in(&stdout_of(&env, "child", 2), &dir);
    assert_no_job_ran(&env, &marker);
}

/// Labels, `--env` values and a fan-out's tasks and directories are the user's or a
/// program's text: none of it is a tmux format.
#[test]
fn labels_env_values_and_fanout_tasks_are_never_expanded_by_tmux() {
    let env = TestEnv::new();
    let job = |tag: &str| {
        let m = env.root.path().join(format!("marker-{tag}"));
        (
            format!("#(touch {}) #{{pane_pid}} #[bg=red]", m.display()),
            m,
        )
    };
    let (label, label_marker) = job("label");
    let (value, env_marker) = job("env");
    let r = env.sp_within(
        LIMIT,
        HANG,
        [
            "run",
            "--json",
            "--run-id",
            "labelled",
            "--label",
            &format!("k={label}"),
            "--env-plain",
            &format!("V={value}"),
            "--",
            "sh",
            "-c",
            "printf '%s\\n' \"$V\"",
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(stdout_of(&env, "labelled", 1).contains(&value));
    assert_no_job_ran(&env, &label_marker);
    assert_no_job_ran(&env, &env_marker);

    // A fan-out (panes made in one batch): its tasks' words, labels and directories.
    let (task, task_marker) = job("task");
    let (dir, dir_marker) = hostile_dir(&env, &env.work, "fanout");
    let lines: Vec<String> = (0..3)
        .map(|i| {
            serde_json::json!({
                "run_id": format!("fan-{i}"),
                "argv": ["sh", "-c", "pwd -P; printf '%s\\n' \"$1\"", "sh", task],
                "cwd": dir,
                "labels": {"k": label},
                "env": {"V": value},
            })
            .to_string()
        })
        .collect();
    let file = env.root.path().join("tasks.jsonl");
    std::fs::write(&file, lines.join("\n")).unwrap();
    let r = env.sp_within(LIMIT, HANG, ["fanout", "--json", file.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{r:?}");
    for i in 0..3 {
        let out = stdout_of(&env, &format!("fan-{i}"), 1);
        assert_ran_in(&out, &dir);
        assert!(out.contains(&task), "{out}");
    }
    assert_no_job_ran(&env, &task_marker);
    assert_no_job_ran(&env, &dir_marker);
}
