//! Runs on a host (`run --host`) against the test's own sshd, where the remote subpane is
//! this build's binary with a home of its own: the same contract as a run here, faults of
//! the connection and of the remote worker, and an envelope the host altered.

use std::path::PathBuf;
use std::process::Stdio;

use serde_json::Value;

use crate::harness::{BIN, Ran, TestEnv, assert_valid_envelope, wait_until};
use crate::harness_ssh::{ALIAS, SshServer};

/// A test with its sshd and the host `loop` recorded, whose home is `remote_home`.
/// Dropped in this order: the sshd (its sessions and control masters) before the test's
/// directory they live in.
pub struct Host {
    pub sshd: SshServer,
    pub env: TestEnv,
    pub remote_home: PathBuf,
}

impl Host {
    pub fn new() -> Self {
        let env = TestEnv::new();
        let sshd = SshServer::start(env.root.path());
        sshd.forget_masters_in(env.home.join("ssh"));
        let remote_home = env.root.path().join("remote-home");
        let add = env.sp([
            "hosts",
            "add",
            "loop",
            &format!("ssh://{ALIAS}"),
            "--remote-home",
            remote_home.to_str().unwrap(),
            "--bin",
            BIN,
        ]);
        assert_eq!(add.code, 0, "{add:?}");
        Host {
            env,
            sshd,
            remote_home,
        }
    }

    /// `subpane ARGS` here, with the ssh wrapper first on PATH.
    pub fn sp<const N: usize>(&self, args: [&str; N]) -> Ran {
        self.cmd().args(args).output().unwrap().into()
    }

    pub fn cmd(&self) -> std::process::Command {
        let mut c = self.env.cmd();
        c.env("PATH", self.sshd.path_env());
        c
    }

    /// The attempt directory of `run` on the host.
    pub fn remote_attempt(&self, run: &str) -> PathBuf {
        self.remote_home.join("runs").join(run).join("attempts/1")
    }

    pub fn local_runs(&self) -> Vec<String> {
        std::fs::read_dir(self.env.home.join("runs"))
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// A shell line that says `went` once `flag` exists: a run that ends when the test says.
pub fn waits_for(flag: &std::path::Path) -> String {
    format!(
        "while [ ! -e {} ]; do sleep 0.05; done; echo went",
        flag.display()
    )
}

pub fn json(r: &Ran) -> Value {
    serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {r:?}"))
}

#[test]
fn a_run_on_a_host_answers_and_is_recorded_as_a_run_here() {
    let h = Host::new();
    let r = h.sp([
        "run",
        "--host",
        "loop",
        "--run-id",
        "far-1",
        "--json",
        "--",
        "sh",
        "-c",
        "echo hello from $(pwd); exit 3",
    ]);
    assert_eq!(
        r.code, 1,
        "a failed command is exit 1 there and here: {r:?}"
    );
    let env = json(&r);
    assert_valid_envelope(&env);
    assert_eq!(env["run_id"], "far-1");
    assert_eq!(env["status"], "failed");
    assert_eq!(env["failure_kind"], "exit");
    assert_eq!(env["exit_code"], 3);
    assert_eq!(
        env["host"],
        serde_json::json!({"name": "loop", "kind": "ssh", "job_id": null})
    );
    // The host's own record, and the copy here (with the host) that validates.
    assert!(h.remote_attempt("far-1").join("result.json").is_file());
    let here = h.env.result("far-1");
    assert_valid_envelope(&here);
    assert_eq!(here, env);
    // The verbs work on it by its id, as on a run here.
    let st = h.sp(["status", "far-1", "--json"]);
    assert_eq!(st.code, 1, "{st:?}");
    assert_eq!(json(&st), env);
    let logs = h.sp(["logs", "far-1"]);
    assert_eq!(logs.code, 0, "{logs:?}");
    assert!(logs.stdout.starts_with("hello from /"), "{logs:?}");
    let w = h.sp(["wait", "far-1"]);
    assert_eq!(w.code, 1, "{w:?}");
    assert!(w.stdout.contains("host      loop"), "{w:?}");
    // `ls` shows it among the runs here, with its host.
    let here_run = h.sp(["run", "--run-id", "near-1", "--", "true"]);
    assert_eq!(here_run.code, 0, "{here_run:?}");
    let ls = json(&h.sp(["ls", "--json"]));
    let rows = ls.as_array().unwrap();
    let row = |id: &str| rows.iter().find(|r| r["run_id"] == id).unwrap().clone();
    assert_eq!(row("far-1")["host"], "loop", "{ls}");
    assert_eq!(row("far-1")["status"], "failed", "{ls}");
    assert_eq!(row("far-1")["exit_code"], 3, "{ls}");
    assert_eq!(row("near-1")["host"], Value::Null, "{ls}");
    assert_eq!(rows[0]["run_id"], "near-1", "newest first: {ls}");
    let text = h.sp(["ls"]);
    assert!(
        text.stdout.lines().next().unwrap().contains("HOST"),
        "{text:?}"
    );
    assert!(
        text.stdout
            .lines()
            .any(|l| l.starts_with("far-1") && l.contains(" loop ")),
        "{text:?}"
    );
    // A task that starts with `-` reaches the host as the value it is (so the host's own
    // rule answers: a command takes no task).
    let dash = h.sp(["retry", "far-1", "--task=-n"]);
    assert_eq!(dash.code, 2, "{dash:?}");
    assert!(dash.stderr.contains("--task is for agents"), "{dash:?}");
    // A retry is the host's next attempt, waited for and recorded here.
    let re = h.sp(["retry", "far-1", "--json"]);
    assert_eq!(re.code, 1, "{re:?}");
    assert_eq!(json(&re)["attempt"], 2, "{re:?}");
    let second = h
        .env
        .read_json(&h.env.attempt_dir("far-1", 2).join("result.json"));
    assert_valid_envelope(&second);
    assert_eq!(second["host"]["name"], "loop");
    let st = h.sp(["status", "far-1", "--json"]);
    assert_eq!(json(&st)["attempt"], 2, "the latest attempt: {st:?}");
    // Run ids stay unique: the id is in use here now.
    let again = h.sp(["run", "--host", "loop", "--run-id", "far-1", "--", "true"]);
    assert_eq!(again.code, 2, "{again:?}");
    assert!(again.stderr.contains("in use here"), "{again:?}");
}

#[test]
fn a_detached_run_is_waited_for_cancelled_and_its_status_is_live_meanwhile() {
    let h = Host::new();
    let r = h.sp(["run", "--host", "loop", "--detach", "--", "sleep", "60"]);
    assert_eq!(r.code, 0, "{r:?}");
    let id = r.stdout.trim().to_owned();
    assert!(h.env.run_dir(&id).join("host.json").is_file(), "{id}");
    let st = h.sp(["status", "@", "--json"]);
    assert_eq!(st.code, 3, "still running: {st:?}");
    assert_eq!(
        json(&st)["run_id"],
        id.as_str(),
        "`@` is the newest run, here or on a host"
    );
    assert!(
        ["starting", "running"].contains(&json(&st)["status"].as_str().unwrap()),
        "{st:?}"
    );
    let w = h.sp(["wait", &id, "--timeout", "200ms"]);
    assert_eq!(w.code, 3, "the wait's timeout passes first: {w:?}");
    let c = h.sp(["cancel", &id, "--json"]);
    assert_eq!(c.code, 0, "{c:?}");
    let env = json(&c);
    assert_eq!(env["status"], "cancelled", "{env}");
    assert_eq!(env["host"]["name"], "loop");
    let w = h.sp(["wait", &id, "--json"]);
    assert_eq!(w.code, 130, "{w:?}");
    assert_valid_envelope(&json(&w));
}

#[test]
fn a_host_that_refuses_or_cannot_be_reached_leaves_nothing_behind() {
    let h = Host::new();
    // Refused there: a --cwd the host lacks (the host plans it; bad input is exit 2).
    let r = h.sp([
        "run",
        "--host",
        "loop",
        "--cwd",
        "/no/such/dir",
        "--run-id",
        "nope-1",
        "--",
        "true",
    ]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("host `loop`"), "{r:?}");
    assert!(r.stderr.contains("/no/such/dir"), "{r:?}");
    assert!(
        h.local_runs().is_empty(),
        "nothing here: {:?}",
        h.local_runs()
    );
    assert!(!h.remote_home.join("runs/nope-1").exists(), "nothing there");
    // Unreachable: a port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let add = h.sp([
        "hosts",
        "add",
        "gone",
        &format!("ssh://root@127.0.0.1:{port}"),
    ]);
    assert_eq!(add.code, 0, "{add:?}");
    let r = h.sp(["run", "--host", "gone", "--", "true"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("cannot reach"), "{r:?}");
    assert!(
        h.local_runs().is_empty(),
        "nothing here: {:?}",
        h.local_runs()
    );
    // An unknown host is bad input.
    let r = h.sp(["run", "--host", "nosuch", "--", "true"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("no host named `nosuch`"), "{r:?}");
}

/// The processes whose command line holds every one of `words`.
pub fn processes_with(words: &[&str]) -> Vec<i32> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if words.iter().all(|w| args.iter().any(|a| a == w)) {
            found.push(pid);
        }
    }
    found
}

#[test]
fn a_dropped_connection_is_made_again_and_the_true_outcome_answered() {
    let h = Host::new();
    let go = h.env.root.path().join("go");
    let script = waits_for(&go);
    let r = h.sp([
        "run", "--host", "loop", "--detach", "--", "sh", "-c", &script,
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let id = r.stdout.trim().to_owned();
    let waiter = h
        .cmd()
        .args(["wait", &id, "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The host's `wait` runs (over the control connection); then the connection dies.
    wait_until("the remote wait", || {
        (!processes_with(&["wait", &id, "--json", "--home"]).is_empty()).then_some(())
    });
    let master = h
        .sshd
        .master_pid(&h.env.home.join("ssh"))
        .expect("a control master");
    // SAFETY: plain kill(2) of the test's own ssh master.
    unsafe { libc::kill(master, libc::SIGKILL) };
    wait_until("the connection to be made again", || {
        h.sshd
            .master_pid(&h.env.home.join("ssh"))
            .filter(|p| *p != master)
    });
    std::fs::write(&go, "").unwrap();
    let out: Ran = waiter.wait_with_output().unwrap().into();
    assert_eq!(out.code, 0, "the run completed: {out:?}");
    assert!(out.stderr.contains("reconnecting"), "{out:?}");
    let env = json(&out);
    assert_eq!(env["status"], "completed", "{env}");
    assert_valid_envelope(&env);
}

#[test]
fn a_remote_worker_killed_is_lost_from_the_hosts_records() {
    let h = Host::new();
    let r = h.sp(["run", "--host", "loop", "--detach", "--", "sleep", "60"]);
    assert_eq!(r.code, 0, "{r:?}");
    let id = r.stdout.trim().to_owned();
    let worker = h.remote_attempt(&id).join("worker.json");
    let pid = wait_until("the remote worker", || {
        let v: Value = serde_json::from_slice(&std::fs::read(&worker).ok()?).ok()?;
        v["agent"]["pid"].as_i64()?;
        v["worker"]["pid"].as_i64()
    });
    // SAFETY: plain kill(2) of the host's worker, a process of this test.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    let w = h.sp(["wait", &id, "--json"]);
    assert_eq!(w.code, 1, "{w:?}");
    let env = json(&w);
    assert_eq!(env["failure_kind"], "lost", "{env}");
    assert_eq!(env["host"]["name"], "loop");
}

#[test]
fn an_envelope_the_host_altered_is_not_trusted() {
    let h = Host::new();
    let r = h.sp(["run", "--host", "loop", "--run-id", "alt-1", "--", "true"]);
    assert_eq!(r.code, 0, "{r:?}");
    // The host's record is altered in a way its own reader lets through but the schema does
    // not: a pane id tmux never gives.
    let remote = h.remote_attempt("alt-1").join("result.json");
    let mut v: Value = serde_json::from_slice(&std::fs::read(&remote).unwrap()).unwrap();
    v["tmux"]["pane_id"] = "not-a-pane".into();
    std::fs::write(&remote, serde_json::to_vec(&v).unwrap()).unwrap();
    let st = h.sp(["status", "alt-1", "--json"]);
    assert_eq!(st.code, 1, "{st:?}");
    let env = json(&st);
    assert_valid_envelope(&env);
    assert_eq!(env["status"], "failed", "{env}");
    assert_eq!(env["failure_kind"], "lost", "{env}");
    let errors = env["output"]["errors"].to_string();
    assert!(errors.contains("not trusted"), "{errors}");
    let kept = h.env.attempt_dir("alt-1", 1).join("result.untrusted.json");
    assert!(
        std::fs::read_to_string(&kept)
            .unwrap()
            .contains("not-a-pane"),
        "the bytes are kept beside the record"
    );
    assert_eq!(h.env.result("alt-1"), env);
}

#[test]
fn sandbox_and_worktree_are_the_hosts_to_enforce() {
    let h = Host::new();
    // A worktree of a directory that is no repository there: refused there, nothing made.
    let plain = h.env.root.path().join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    let r = h.sp([
        "run",
        "--host",
        "loop",
        "--worktree",
        "--cwd",
        plain.to_str().unwrap(),
        "--",
        "true",
    ]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("git"), "{r:?}");
    assert!(h.local_runs().is_empty(), "{:?}", h.local_runs());
    // A sandboxed run there cannot write outside its workspace.
    let ws = h.env.root.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    // Outside /tmp: the sandbox's own /tmp is private anyway.
    let elsewhere = crate::harness::outside_the_sandbox("sp-it-far-");
    let outside = elsewhere.path().join("outside");
    let script = format!("echo in > inside && echo out > {}", outside.display());
    let r = h.sp([
        "run",
        "--host",
        "loop",
        "--sandbox",
        "--json",
        "--cwd",
        ws.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &script,
    ]);
    assert_eq!(r.code, 1, "{r:?}");
    let env = json(&r);
    assert_eq!(env["sandbox"]["enabled"], true, "{env}");
    assert_eq!(env["host"]["name"], "loop");
    assert!(
        ws.join("inside").is_file(),
        "the workspace is writable there"
    );
    assert!(!outside.exists(), "nothing outside it was written");
}

#[test]
fn attach_opens_the_hosts_pane_over_ssh_with_a_terminal() {
    let h = Host::new();
    let go = h.env.root.path().join("go");
    let script = format!("echo waiting; {}", waits_for(&go));
    let r = h.sp([
        "run", "--host", "loop", "--detach", "--", "sh", "-c", &script,
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let id = r.stdout.trim().to_owned();
    let path = h.sshd.path_env();
    let t = crate::terminal::Terminal::subpane(
        &h.env,
        "attach-far",
        (120, 30),
        &[("PATH", path.to_str().unwrap())],
        &["attach", &id],
    );
    t.wait_for(&format!("subpane ▸ run {id} · attempt 1"));
    t.wait_for("waiting");
    t.keys(&["C-b", "d"]);
    assert_eq!(t.wait_exit(), 0);
    t.wait_until("that the run goes on", |s| s.contains("detached; run"));
    std::fs::write(&go, "").unwrap();
    let w = h.sp(["wait", &id]);
    assert_eq!(w.code, 0, "{w:?}");
}

#[test]
fn ctrl_c_of_an_attached_run_on_a_host_cancels_it_there() {
    let h = Host::new();
    let path = h.sshd.path_env();
    let t = crate::terminal::Terminal::subpane(
        &h.env,
        "run-far",
        (120, 30),
        &[("PATH", path.to_str().unwrap())],
        &[
            "run", "--host", "loop", "--run-id", "far-c", "--", "sleep", "60",
        ],
    );
    t.wait_for("run far-c started on host loop");
    wait_until("the remote worker", || {
        let w = h.remote_attempt("far-c").join("worker.json");
        let v: Value = serde_json::from_slice(&std::fs::read(w).ok()?).ok()?;
        v["agent"]["pid"].as_i64()
    });
    t.keys(&["C-c"]);
    assert_eq!(t.wait_exit(), 130);
    t.wait_until("the summary", |s| s.contains("cancelled"));
    assert_eq!(h.env.result("far-c")["status"], "cancelled");
    assert_eq!(h.env.result("far-c")["host"]["name"], "loop");
}

/// An attached `run --host` whose connection drops after the start, and one killed
/// outright: the run goes on there, and its true end is answered.
#[test]
fn an_attached_run_outlives_its_connection_and_its_caller() {
    let h = Host::new();
    let go = h.env.root.path().join("go");
    let script = waits_for(&go);
    let spawn = |id: &str| {
        h.cmd()
            .args([
                "run", "--host", "loop", "--run-id", id, "--json", "--", "sh", "-c", &script,
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    // The control connection first, so both calls share it.
    let check = h.sp(["hosts", "check", "loop"]);
    assert_eq!(check.code, 0, "{check:?}");
    let dropped = spawn("far-d");
    let killed = spawn("far-k");
    for id in ["far-d", "far-k"] {
        wait_until("the host's side of the start", || {
            let w = h.remote_attempt(id).join("worker.json");
            let v: Value = serde_json::from_slice(&std::fs::read(w).ok()?).ok()?;
            v["agent"]["pid"].as_i64()
        });
    }
    // The caller of far-k is killed; the connection of both dies.
    // SAFETY: plain kill(2) of this test's own child.
    unsafe { libc::kill(killed.id() as i32, libc::SIGKILL) };
    let master = h
        .sshd
        .master_pid(&h.env.home.join("ssh"))
        .expect("a control master");
    // SAFETY: plain kill(2) of the test's own ssh master.
    unsafe { libc::kill(master, libc::SIGKILL) };
    // The host's side of both starts ends with its connection; the runs go on.
    let rh = h.remote_home.to_str().unwrap().to_owned();
    wait_until(
        "the host's __run-request to end with its connection",
        || {
            processes_with(&["__run-request", &rh])
                .is_empty()
                .then_some(())
        },
    );
    std::fs::write(&go, "").unwrap();
    let out: Ran = dropped.wait_with_output().unwrap().into();
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stderr.contains("reconnecting"), "{out:?}");
    assert_eq!(json(&out)["status"], "completed");
    let _ = killed.wait_with_output();
    // Any later command finds the killed caller's run and its end.
    let w = h.sp(["wait", "far-k", "--json"]);
    assert_eq!(w.code, 0, "{w:?}");
    assert_eq!(json(&w)["status"], "completed");
    assert_eq!(h.env.result("far-k")["host"]["name"], "loop");
}

/// The connection is lost after the host started the run and before its answer came: the
/// run is asked for once, found, and kept, not forgotten here.
#[test]
fn a_start_whose_answer_is_lost_keeps_the_run_the_host_started() {
    let h = Host::new();
    // A remote subpane that starts the run, says nothing, and kills its ssh session.
    let bin = h.env.root.path().join("drops-its-answer");
    std::fs::write(
        &bin,
        format!(
            "#!/bin/sh\ncase \" $* \" in\n  *\" __run-request \"*) {BIN} \"$@\" > /dev/null; kill -9 $PPID ;;\n  *) exec {BIN} \"$@\" ;;\nesac\n"
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let add = h.sp([
        "hosts",
        "add",
        "lossy",
        &format!("ssh://{ALIAS}"),
        "--remote-home",
        h.remote_home.to_str().unwrap(),
        "--bin",
        bin.to_str().unwrap(),
    ]);
    assert_eq!(add.code, 0, "{add:?}");
    let r = h.sp([
        "run", "--host", "lossy", "--detach", "--run-id", "lost-1", "--", "true",
    ]);
    assert_eq!(r.code, 0, "the host has it: {r:?}");
    assert_eq!(r.stdout.trim(), "lost-1");
    assert!(h.env.run_dir("lost-1").join("host.json").is_file());
    let w = h.sp(["wait", "lost-1", "--json"]);
    assert_eq!(w.code, 0, "{w:?}");
    assert_eq!(json(&w)["status"], "completed");
}

/// One `wait` for runs here and on a host: every one's end (--all), or the first (--any)
/// wherever it is.
#[test]
fn a_wait_covers_runs_here_and_on_a_host_together() {
    let h = Host::new();
    let go = h.env.root.path().join("go");
    for (id, host) in [("mix-far", Some("loop")), ("mix-here", None)] {
        let mut args = vec!["run", "--detach", "--run-id", id];
        if let Some(host) = host {
            args.extend(["--host", host]);
        }
        let script = waits_for(&go);
        args.extend(["--", "sh", "-c", &script]);
        let r: Ran = h.cmd().args(&args).output().unwrap().into();
        assert_eq!(r.code, 0, "{r:?}");
    }
    let quick = h.sp([
        "run",
        "--host",
        "loop",
        "--detach",
        "--run-id",
        "mix-quick",
        "--",
        "sh",
        "-c",
        "exit 4",
    ]);
    assert_eq!(quick.code, 0, "{quick:?}");
    // --any: the run on the host that ends first, while the others wait for the flag.
    let any = h.sp([
        "wait",
        "--any",
        "mix-far",
        "mix-here",
        "mix-quick",
        "--json",
    ]);
    assert_eq!(any.code, 1, "{any:?}");
    assert_eq!(json(&any)["run_id"], "mix-quick", "{any:?}");
    // Its watch of the others there ended with it.
    wait_until("the host's waits to end with the wait here", || {
        processes_with(&["wait", "mix-far", "--json"])
            .is_empty()
            .then_some(())
    });
    // --timeout holds for all of them.
    let t = h.sp([
        "wait",
        "mix-far",
        "mix-here",
        "--timeout",
        "300ms",
        "--json",
    ]);
    assert_eq!(t.code, 3, "{t:?}");
    std::fs::write(&go, "").unwrap();
    let all = h.sp(["wait", "mix-here", "mix-far", "mix-quick", "--json"]);
    assert_eq!(all.code, 1, "the worst of them: {all:?}");
    let v = json(&all);
    let ids: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["run_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["mix-here", "mix-far", "mix-quick"],
        "in the order given: {v}"
    );
    assert_eq!(v[1]["status"], "completed");
    assert_eq!(v[1]["host"]["name"], "loop");
    assert_eq!(v[0]["status"], "completed");
    let text = h.sp(["wait", "mix-here", "mix-far"]);
    assert_eq!(text.code, 0, "{text:?}");
    assert!(
        text.stdout.contains("mix-far") && text.stdout.contains("mix-here"),
        "{text:?}"
    );
}

/// A host without subpane: the first run copies this binary there (as `hosts check` does)
/// and the host's record remembers where, for the next runs to start it at once.
#[test]
fn a_run_on_a_host_without_subpane_copies_this_binary_and_remembers_it() {
    let h = Host::new();
    let rh = h.env.root.path().join("bare-home");
    let add = h.sp([
        "hosts",
        "add",
        "bare",
        &h.sshd.url(),
        "--remote-home",
        rh.to_str().unwrap(),
    ]);
    assert_eq!(add.code, 0, "{add:?}");
    let r = h.sp(["run", "--host", "bare", "--json", "--", "true"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(json(&r)["host"]["name"], "bare");
    let hosts = json(&h.sp(["hosts", "ls", "--json"]));
    let bare = hosts
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == "bare")
        .unwrap()
        .clone();
    let copied = bare["copied"]
        .as_str()
        .expect("the copy is remembered")
        .to_owned();
    assert!(
        copied.starts_with(rh.join("bin/subpane-").to_str().unwrap()),
        "{bare}"
    );
    assert!(std::path::Path::new(&copied).is_file(), "{copied}");
    // The next run starts that copy; one whose copy went is copied again.
    let r = h.sp(["run", "--host", "bare", "--", "true"]);
    assert_eq!(r.code, 0, "{r:?}");
    std::fs::remove_file(&copied).unwrap();
    let r = h.sp(["run", "--host", "bare", "--", "true"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(std::path::Path::new(&copied).is_file(), "copied again");
}

/// `gc` removes the record here of a run on a host once its end came back, and leaves one
/// whose end has not (its latest attempt, a retry's too, may still run there).
#[test]
fn gc_removes_the_record_of_an_ended_run_on_a_host_and_keeps_a_running_one() {
    let h = Host::new();
    let done = h.sp(["run", "--host", "loop", "--run-id", "gc-done", "--", "true"]);
    assert_eq!(done.code, 0, "{done:?}");
    let live = h.sp([
        "run", "--host", "loop", "--detach", "--run-id", "gc-live", "--", "sleep", "60",
    ]);
    assert_eq!(live.code, 0, "{live:?}");
    let retried = h.sp([
        "run",
        "--host",
        "loop",
        "--run-id",
        "gc-retried",
        "--",
        "true",
    ]);
    assert_eq!(retried.code, 0, "{retried:?}");
    let r = h.sp(["retry", "gc-retried", "--detach"]);
    assert_eq!(r.code, 0, "{r:?}");
    let dry = json(&h.sp(["gc", "--older-than", "0s", "--dry-run", "--json"]));
    assert!(
        dry["removed_runs"]
            .as_array()
            .unwrap()
            .contains(&"gc-done".into()),
        "{dry}"
    );
    assert!(
        h.env.run_dir("gc-done").exists(),
        "a dry run removes nothing"
    );
    let gc = json(&h.sp(["gc", "--older-than", "0s", "--json"]));
    let running: Vec<&str> = gc["running"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert!(
        running.contains(&"gc-live") && running.contains(&"gc-retried"),
        "{gc}"
    );
    assert!(!h.env.run_dir("gc-done").exists(), "{gc}");
    assert!(h.env.run_dir("gc-live").join("host.json").is_file());
    assert!(
        h.remote_home.join("runs/gc-done").exists(),
        "the host's records are its own"
    );
    let c = h.sp(["cancel", "gc-live"]);
    assert_eq!(c.code, 0, "{c:?}");
}

/// What a host's `ls` answers is another machine's text: made safe for this terminal too.
#[test]
fn a_hosts_ls_rows_are_made_safe_for_the_terminal_here() {
    let h = Host::new();
    let r = h.sp(["run", "--host", "loop", "--run-id", "esc-1", "--", "true"]);
    assert_eq!(r.code, 0, "{r:?}");
    // A host whose `ls` puts terminal escapes in a row's text.
    let bin = h.env.root.path().join("escaping-ls");
    let row = r#"[{"run_id":"esc-1","attempt":1,"agent":"command","status":"completed","failure_kind":null,"exit_code":0,"created_at":"2026-01-01T00:00:00.000Z","started_at":null,"finished_at":null,"duration_ms":1,"labels":{},"correlation_id":null,"group":null,"parent_run":null,"depth":0,"what":"\u001b]0;owned\u0007\u001b[2J","problem":null}]"#;
    std::fs::write(
        &bin,
        format!("#!/bin/sh\ncase \" $* \" in\n  *\" ls \"*) printf '%s' '{row}' ;;\n  *) exec {BIN} \"$@\" ;;\nesac\n"),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let marker = h.env.run_dir("esc-1").join("host.json");
    let mut v: Value = serde_json::from_slice(&std::fs::read(&marker).unwrap()).unwrap();
    v["bin"] = bin.to_str().unwrap().into();
    std::fs::write(&marker, serde_json::to_vec(&v).unwrap()).unwrap();
    let ls = h.sp(["ls"]);
    assert_eq!(ls.code, 0, "{ls:?}");
    assert!(ls.stdout.contains("esc-1"), "{ls:?}");
    assert!(
        !ls.stdout.contains('\u{1b}') && !ls.stdout.contains('\u{7}'),
        "{ls:?}"
    );
}

/// Issue 29 on a host: the value of `--env` goes to the host's worker, which masks it; the
/// envelope copied here, `logs` and `status` from here, and every file on either side hold
/// `***`, and a value given with `--env-plain` shows.
#[test]
fn a_secret_given_to_a_run_on_a_host_is_masked_there_and_here() {
    let h = Host::new();
    let secret = "far-Secret-Zq8Lw2Nx5";
    let r = h.sp([
        "run",
        "--host",
        "loop",
        "--run-id",
        "far-sec",
        "--json",
        "--env",
        &format!("FAR_TOKEN={secret}"),
        "--env-plain",
        "SHOWN=plain-far-value",
        "--",
        "sh",
        "-c",
        "echo \"said $FAR_TOKEN $SHOWN\"; echo \"err $FAR_TOKEN\" >&2; exit 3",
    ]);
    assert_eq!(r.code, 1, "{r:?}");
    let env = json(&r);
    assert_valid_envelope(&env);
    assert_eq!(
        env["secrets"],
        serde_json::json!({"masked": ["FAR_TOKEN"], "too_short": []})
    );
    let logs = h.sp(["logs", "far-sec"]);
    assert_eq!(logs.stdout, "said *** plain-far-value\n", "{logs:?}");
    let st = h.sp(["status", "far-sec", "--json"]);
    for (what, text) in [
        ("run", &r.stdout),
        ("logs", &logs.stdout),
        ("status", &st.stdout),
    ] {
        assert!(!text.contains(secret), "{what} holds the value: {text}");
    }
    // The host's worker renames its last records after result.json: walk once it is gone.
    let w = h
        .env
        .read_json(&h.remote_attempt("far-sec").join("worker.json"));
    crate::harness::wait_pid_gone(w["worker"]["pid"].as_i64().unwrap() as i32);
    let mut files = Vec::new();
    crate::harness::files_under(&h.env.home, &mut files);
    crate::harness::files_under(&h.remote_home, &mut files);
    for (path, bytes) in &files {
        assert!(
            !crate::harness::holds(bytes, secret.as_bytes()),
            "{path} holds the value"
        );
    }
}

/// `send` to a run on a host goes there over ssh: each text as it was typed (one that starts
/// with `-`, quotes, spaces), the host's answer and exit code as they are.
#[test]
fn send_gives_a_run_on_a_host_its_messages_there() {
    let h = Host::new();
    let limit = std::time::Duration::from_secs(90);
    let send = |args: &[&str]| {
        let mut c = h.cmd();
        c.arg("send").args(args);
        crate::harness::ran_within(c, limit, "send waits for the host's worker")
    };
    let script = "read a; echo \"got:$a\"; read b; echo \"got:$b\"";
    let r = h.sp([
        "run", "--host", "loop", "--run-id", "far-in", "--stdin", "pipe", "--detach", "--", "sh",
        "-c", script,
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let s = send(&["far-in", "--json", "first"]);
    assert_eq!(s.code, 0, "{s:?}");
    let sent = json(&s);
    assert_eq!(sent["run_id"], "far-in", "{sent}");
    assert_eq!(sent["seq"], 1, "{sent}");
    assert_eq!(sent["taken"], true, "{sent}");
    // A command cannot be interrupted: refused there, exit 2 here (the run goes on).
    let i = send(&["far-in", "--interrupt"]);
    assert_eq!(i.code, 2, "{i:?}");
    assert!(i.stderr.contains("no turn to interrupt"), "{i:?}");
    // A text that starts with `-`, with spaces, quotes and what a shell would expand: one
    // word there, intact (data, never a command of the host's shell).
    let second = "-dash text, it's \"quoted\" $(echo EXPANDED) `echo TICK` ; exit 7";
    let s = send(&["far-in", "--", second]);
    assert_eq!(s.code, 0, "{s:?}");
    assert!(s.stdout.contains("took message #2"), "{s:?}");
    let w = h.sp(["wait", "far-in", "--json"]);
    assert_eq!(w.code, 0, "{w:?}");
    let env = json(&w);
    assert_valid_envelope(&env);
    assert_eq!(env["host"]["name"], "loop", "{env}");
    assert_eq!(env["input"]["messages"], 2, "{env}");
    assert_eq!(env["input"]["from"]["cli"], 2, "{env}");
    let logs = h.sp(["logs", "far-in"]);
    assert_eq!(logs.code, 0, "{logs:?}");
    assert_eq!(
        logs.stdout,
        format!("got:first\ngot:{second}\n"),
        "{logs:?}"
    );
    // A finished run takes nothing: exit 2, saying why.
    let late = send(&["far-in", "more"]);
    assert_eq!(late.code, 2, "{late:?}");
    assert!(late.stderr.contains("has finished"), "{late:?}");
    // @FILE is read here; its text goes as it is, even one that itself starts with `@`
    // (never a file's name there).
    let r = h.sp([
        "run",
        "--host",
        "loop",
        "--run-id",
        "far-at",
        "--stdin",
        "pipe",
        "--detach",
        "--",
        "sh",
        "-c",
        "read a; echo \"got:$a\"",
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let text = "@notes.md says: go on";
    std::fs::write(h.env.work.join("msg.txt"), text).unwrap();
    let s = send(&["far-at", "@msg.txt"]);
    assert_eq!(s.code, 0, "{s:?}");
    assert_eq!(h.sp(["wait", "far-at"]).code, 0);
    let logs = h.sp(["logs", "far-at"]);
    assert_eq!(logs.stdout, format!("got:{text}\n"), "{logs:?}");
}

/// `pause RUN` and `resume RUN` of a run on a host act there: its agent is stopped (state
/// T), continued, and the envelope copied back says how long it was stopped.
#[test]
fn a_run_on_a_host_is_paused_and_resumed_there() {
    let h = Host::new();
    let go = h.env.root.path().join("go");
    let script = waits_for(&go);
    let r = h.sp([
        "run", "--host", "loop", "--detach", "--run-id", "hp-1", "--", "sh", "-c", &script,
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let agent = crate::harness::agent_pid_in(&h.remote_home.join("runs/hp-1/attempts/1"));
    let state = || crate::harness::process_state(agent);
    let p = h.sp(["pause", "hp-1", "--json"]);
    assert_eq!(p.code, 0, "{p:?}");
    assert_eq!(json(&p)["stopped"], true, "{p:?}");
    crate::harness::wait_until("the agent stopped there", || {
        (state() == Some('T')).then_some(())
    });
    // Several runs with one on a host: refused, nothing asked.
    let both = h.sp(["resume", "hp-1", "@"]);
    assert_eq!(both.code, 2, "{both:?}");
    assert!(
        both.stderr.contains("give a run on a host to resume alone"),
        "{}",
        both.stderr
    );
    assert_eq!(state(), Some('T'));
    std::fs::write(&go, "").unwrap();
    let c = h.sp(["resume", "hp-1"]);
    assert_eq!(c.code, 0, "{c:?}");
    let w = h.sp(["wait", "hp-1", "--json"]);
    assert_eq!(w.code, 0, "{w:?}");
    let env = json(&w);
    assert_eq!(env["stops"], 1, "{env}");
    assert!(env["stopped_ms"].as_u64().unwrap() > 0, "{env}");
    assert_valid_envelope(&env);
}
