//! A tmux server that never answers: every tmux command subpane runs is killed, with what it
//! started, after `SUBPANE_TMUX_TIMEOUT`, and the subpane command ends and says which tmux
//! command it gave up on, after how long, and what to do.
//!
//! The hung server is a fake `tmux` first on `PATH`: each call records its pid and the pid of
//! a child it starts, then waits forever.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use crate::harness::{self, Ran, TestEnv, assert_valid_envelope, wait_pid_gone};

/// How long one `subpane` command may take here: with a 1 s limit each tmux command ends
/// within about 2 s (the limit, then at most the grace before SIGKILL).
const LIMIT: Duration = Duration::from_secs(20);
const HANG: &str = "a tmux command that never answers was not given up on";

/// Writes the fake `tmux` into a directory of its own; returns that directory.
fn hung_tmux(env: &TestEnv) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = env.root.path().join("hung-bin");
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("tmux");
    std::fs::write(
        &script,
        "#!/bin/sh\n\
         # A tmux client whose server never answers; it also starts a process of its own.\n\
         sleep 600 &\n\
         echo \"$$ $!\" >> \"$(dirname \"$0\")/started\"\n\
         wait\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// `subpane ARGS` with the fake tmux first on `PATH` and a 1 s tmux limit, waited for up to
/// [`LIMIT`].
fn sp_hung(env: &TestEnv, bin: &Path, args: &[&str]) -> Ran {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![bin.to_path_buf()];
    paths.extend(std::env::split_paths(&path));
    let child: Child = env
        .cmd()
        .env("PATH", std::env::join_paths(paths).unwrap())
        .env("SUBPANE_TMUX_TIMEOUT", "1s")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run subpane");
    harness::wait_child_within(child, LIMIT, HANG)
}

/// Every process the fake tmux calls started (the clients and their children).
fn started_pids(bin: &Path) -> Vec<i32> {
    std::fs::read_to_string(bin.join("started"))
        .unwrap_or_default()
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect()
}

/// Checks that `r` gave up on `tmux VERB` after the 1 s limit, said how to give it longer,
/// and that every tmux client called was killed with the process it started.
fn assert_gave_up_on(verb: &str, text: &str, bin: &Path) {
    let said = format!("`tmux {verb}` did not finish within 1s");
    assert!(text.contains(&said), "{said:?} not in:\n{text}");
    assert!(text.contains("SUBPANE_TMUX_TIMEOUT"), "{text}");
    let pids = started_pids(bin);
    assert!(!pids.is_empty(), "the fake tmux never ran");
    for pid in pids {
        wait_pid_gone(pid);
    }
}

#[test]
fn a_run_whose_tmux_server_hangs_ends_as_a_spawn_failure_naming_the_tmux_command() {
    let env = TestEnv::new();
    let bin = hung_tmux(&env);
    // A hung server still accepts connections on its socket (the kernel does): subpane
    // then takes it for running and goes on to `new-session`.
    let _server = std::os::unix::net::UnixListener::bind(&env.socket).unwrap();
    let r = sp_hung(
        &env,
        &bin,
        &["run", "--json", "--run-id", "hung", "--", "true"],
    );
    assert_eq!(r.code, 1, "{r:?}");
    let v = r.json();
    assert_valid_envelope(&v);
    assert_eq!(v["status"], "failed", "{v}");
    assert_eq!(v["failure_kind"], "spawn", "{v}");
    assert_eq!(env.result("hung"), v);
    assert_gave_up_on("new-session", &v["output"]["errors"].to_string(), &bin);
    assert_gave_up_on("new-session", &r.stderr, &bin);
    env.assert_no_leftovers();
}

/// With no server on the socket, the first command is the one that starts it.
#[test]
fn a_run_whose_tmux_never_starts_a_server_ends_as_a_spawn_failure() {
    let env = TestEnv::new();
    let bin = hung_tmux(&env);
    let r = sp_hung(
        &env,
        &bin,
        &["run", "--json", "--run-id", "hung", "--", "true"],
    );
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(r.json()["failure_kind"], "spawn", "{r:?}");
    assert_gave_up_on("start-server", &r.stderr, &bin);
    env.assert_no_leftovers();
}

#[test]
fn gc_with_a_hung_tmux_server_still_ends() {
    let env = TestEnv::new();
    let bin = hung_tmux(&env);
    let r = sp_hung(&env, &bin, &["gc", "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let v = r.json();
    assert_eq!(v["server_stopped"], false, "{r:?}");
    // It names the server that did not answer, and its client was killed.
    let said = v["unanswered"].to_string();
    assert!(
        said.contains("`tmux list-sessions` did not finish within 1s"),
        "{said}"
    );
    assert!(said.contains(&env.socket.display().to_string()), "{said}");
    assert!(!started_pids(&bin).is_empty(), "gc never asked tmux");
    for pid in started_pids(&bin) {
        wait_pid_gone(pid);
    }
    // On a terminal or not, the words say it too.
    let r = sp_hung(&env, &bin, &["gc"]);
    assert!(r.stderr.contains("closed nothing there"), "{r:?}");
    assert!(r.stderr.contains("may be hung"), "{r:?}");
}

/// The batched start gives up too, and each task ends with its `spawn` envelope.
#[test]
fn a_fanout_whose_tmux_server_hangs_ends_with_every_task_a_spawn_failure() {
    let env = TestEnv::new();
    let bin = hung_tmux(&env);
    let _server = std::os::unix::net::UnixListener::bind(&env.socket).unwrap();
    let tasks = env.root.path().join("tasks.jsonl");
    std::fs::write(&tasks, "{\"argv\": [\"true\"]}\n{\"argv\": [\"true\"]}\n").unwrap();
    let r = sp_hung(&env, &bin, &["fanout", tasks.to_str().unwrap(), "--json"]);
    assert_eq!(r.code, 1, "{r:?}");
    let doc = r.json();
    let tasks = doc["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 2, "{doc}");
    for t in tasks {
        assert_eq!(t["failure_kind"], "spawn", "{doc}");
    }
    assert_gave_up_on("new-session", &r.stderr, &bin);
    env.assert_no_leftovers();
}

/// `attach` asks tmux whether the session exists before it execs `tmux attach`: a server that
/// does not answer is said so, not reported as a missing session.
#[test]
fn attach_with_a_hung_tmux_server_says_the_server_did_not_answer() {
    let env = TestEnv::new();
    let r = env.sp(["run", "--run-id", "kept", "--keep-session", "--", "true"]);
    assert_eq!(r.code, 0, "{r:?}");
    let bin = hung_tmux(&env);
    let r = sp_hung(&env, &bin, &["attach", "kept"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert_gave_up_on("has-session", &r.stderr, &bin);
}
