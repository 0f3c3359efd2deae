//! The verbs around a run: status, wait, logs, cancel, attach, ls, gc, and --help.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::{
    BIN, DEADLINE, Ran, TestEnv, assert_valid_envelope, fixture, start_waiting, touch,
    wait_child_within, wait_until,
};

#[test]
fn status_of_a_running_then_finished_run() {
    let env = TestEnv::new();
    let flag = start_waiting(&env, "st", 3);
    let r = env.sp(["status", "--json", "st"]);
    assert_eq!(r.code, 3, "{r:?}");
    let v = r.json();
    assert_eq!(v["status"], "running");
    assert_eq!(v["run_id"], "st");
    assert_eq!(v["schema"], "subpane.status/v1");
    assert!(
        v["worker_pid"].is_i64() && v["agent_pid"].is_i64() && v["started_at"].is_string(),
        "{v}"
    );
    assert_eq!(v["tmux"]["session"], "st-1");
    let h = env.sp(["status", "st"]);
    assert_eq!(h.code, 3, "{h:?}");
    assert!(
        h.stdout.contains("running") && h.stdout.contains("subpane attach st"),
        "{}",
        h.stdout
    );
    touch(&flag);
    assert_eq!(env.sp(["wait", "st"]).code, 1);
    let r = env.sp(["status", "--json", "st"]);
    assert_eq!(r.code, 1, "{r:?}");
    let v = r.json();
    assert_valid_envelope(&v);
    assert_eq!(
        (v["status"].as_str(), v["exit_code"].as_i64()),
        (Some("failed"), Some(3))
    );
    assert_eq!(v, env.result("st"));
    let h = env.sp(["status", "st"]);
    assert_eq!(h.code, 1);
    assert!(
        h.stdout.contains("failed") && h.stdout.contains("exit 3"),
        "{}",
        h.stdout
    );
    env.assert_no_leftovers();
}

#[test]
fn wait_for_one_and_for_many_runs() {
    let env = TestEnv::new();
    let a = start_waiting(&env, "wa", 0);
    let b = start_waiting(&env, "wb", 3);
    touch(&a);
    let one = env.sp(["wait", "--json", "wa"]);
    assert_eq!(one.code, 0, "{one:?}");
    let v = one.json();
    assert_valid_envelope(&v);
    assert_eq!(v["run_id"], "wa");
    assert_eq!(v["status"], "completed");
    touch(&b);
    // --all (the default): every run in the order given, exit code the worst.
    for extra in [&[][..], &["--all"][..]] {
        let all = env.sp([&["wait", "--json"][..], extra, &["wa", "wb"]].concat());
        assert_eq!(all.code, 1, "{all:?}");
        let arr = all.json();
        let arr = arr.as_array().unwrap();
        assert_eq!(arr.len(), 2);
        assert_eq!(
            (arr[0]["run_id"].as_str(), arr[1]["run_id"].as_str()),
            (Some("wa"), Some("wb"))
        );
        arr.iter().for_each(assert_valid_envelope);
        assert_eq!(arr[1]["exit_code"], 3);
    }
    // Human output: a line for each, in the order given, and the totals.
    let h = env.sp(["wait", "wb", "wa"]);
    assert_eq!(h.code, 1);
    assert!(
        h.stdout.find("\nwb ").unwrap() < h.stdout.find("\nwa ").unwrap(),
        "{}",
        h.stdout
    );
    assert!(
        h.stdout.contains("2 runs: 1 completed, 1 failed"),
        "{}",
        h.stdout
    );
    env.assert_no_leftovers();
}

#[test]
fn wait_any_returns_with_the_first_run_that_finishes() {
    let env = TestEnv::new();
    let a = start_waiting(&env, "slow", 0);
    let b = start_waiting(&env, "fast", 3);
    let child = env
        .cmd()
        .args(["wait", "--any", "--json", "slow", "fast"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    touch(&b);
    let r = wait_child_within(child, DEADLINE, "wait --any did not return");
    assert_eq!(r.code, 1, "the exit code of the run that finished: {r:?}");
    let v = r.json();
    assert_valid_envelope(&v);
    assert_eq!(v["run_id"], "fast");
    assert_eq!(v["exit_code"], 3);
    // The other run goes on.
    assert_eq!(env.sp(["status", "slow"]).code, 3);
    // Asked while `slow` still runs: a finished run answers at once (were both finished, the
    // first named would answer).
    assert_eq!(
        env.sp(["wait", "--any", "slow", "fast"]).code,
        1,
        "an already finished run answers --any at once"
    );
    touch(&a);
    assert_eq!(env.sp(["wait", "slow"]).code, 0);
    env.assert_no_leftovers();
}

#[test]
fn wait_timeout_exits_3_and_the_run_goes_on() {
    let env = TestEnv::new();
    let flag = start_waiting(&env, "long", 0);
    let t0 = Instant::now();
    let r = env.sp(["wait", "--timeout", "200ms", "--json", "long"]);
    let took = t0.elapsed();
    assert_eq!(r.code, 3, "{r:?}");
    assert!(
        took >= Duration::from_millis(200) && took < Duration::from_secs(10),
        "{took:?}"
    );
    assert_eq!(r.json()["status"], "running");
    assert!(!env.attempt_dir("long", 1).join("result.json").exists());
    assert_eq!(env.sp(["status", "long"]).code, 3, "the run goes on");
    touch(&flag);
    let r = env.sp(["wait", "--timeout", "20s", "--json", "long"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["status"], "completed");
    env.assert_no_leftovers();
}

/// A command's stdout reads as it was written: JSON-looking lines stay in `logs` and in the
/// summary, in their place between the others; `--events` still has them alone.
#[test]
fn json_lines_of_a_command_stay_in_its_output_in_order() {
    let env = TestEnv::new();
    let r = env.sp([
        "run",
        "--run-id",
        "inorder",
        "--",
        "printf",
        "one\\n{\"a\":1}\\ntwo\\n[2]\\n{\"a\":3}\\nthree\\n",
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let lines = ["one", "{\"a\":1}", "two", "[2]", "{\"a\":3}", "three"];
    let summary: Vec<&str> = r.stdout.lines().rev().take(6).collect();
    assert_eq!(
        summary.into_iter().rev().collect::<Vec<_>>(),
        lines,
        "the summary's output: {r:?}"
    );
    let l = env.sp(["logs", "inorder"]);
    assert_eq!(l.code, 0, "{l:?}");
    assert_eq!(l.stdout, lines.map(|l| format!("{l}\n")).concat());
    let e = env.sp(["logs", "inorder", "--events"]);
    assert_eq!(e.stdout, "{\"a\":1}\n[2]\n{\"a\":3}\n", "{e:?}");
    let v = env.sp(["status", "inorder", "--json"]).json();
    assert_eq!(
        (
            v["filter"]["kept_lines"].as_u64(),
            v["filter"]["plain_lines"].as_u64()
        ),
        (Some(3), Some(6))
    );
}

#[test]
fn logs_print_each_file() {
    let env = TestEnv::new();
    let r = env.sp([
        "run",
        "--run-id",
        "lg",
        "--",
        fixture("mixed_output.sh").to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let out = |args: &[&str]| {
        let r = env.sp([&["logs", "lg"][..], args].concat());
        assert_eq!(r.code, 0, "logs {args:?}: {r:?}");
        r
    };
    let whole = "{\"type\":\"start\",\"n\":1}\nhello from stdout\n[\"an\",\"array\"]\n\
                 second text line\n{\"type\":\"end\",\"n\":2}\n";
    assert_eq!(out(&[]).stdout, whole);
    assert_eq!(out(&["--stdout"]).stdout, whole);
    assert_eq!(
        out(&["--events"]).stdout,
        "{\"type\":\"start\",\"n\":1}\n[\"an\",\"array\"]\n{\"type\":\"end\",\"n\":2}\n"
    );
    assert_eq!(
        out(&["--stderr"]).stdout,
        "oops on stderr\nsecond stderr line\n"
    );
    // A command has no final text: refused (exit 2), naming the flag that has its words.
    let o = env.sp(["logs", "lg", "--output"]);
    assert_eq!(o.code, 2, "{o:?}");
    assert_eq!(o.stdout, "");
    assert!(
        o.stderr.contains("no final text") && o.stderr.contains("subpane logs lg --stdout"),
        "{}",
        o.stderr
    );
    // -f on a finished attempt prints everything and returns.
    assert_eq!(
        out(&["-f", "--stderr"]).stdout,
        "oops on stderr\nsecond stderr line\n"
    );
    // Only one file at a time.
    let both = env.sp(["logs", "lg", "--events", "--stderr"]);
    assert_eq!(both.code, 2, "{both:?}");
}

#[test]
fn logs_follow_streams_lines_as_they_come_and_ends_with_the_attempt() {
    let env = TestEnv::new();
    let gates = env.root.path().join("gates");
    std::fs::create_dir(&gates).unwrap();
    let r: Ran = env
        .cmd()
        .args(["run", "--detach", "--run-id", "fol", "--"])
        .arg(fixture("prints_on_flags.sh"))
        .arg(&gates)
        .arg("3")
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, 0, "{r:?}");
    let mut child = env
        .cmd()
        .args(["logs", "-f", "fol"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if tx.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    for i in 1..=3 {
        // Nothing arrives before the program prints it...
        assert!(
            rx.try_recv().is_err(),
            "a line arrived before gate {i} opened"
        );
        touch(&gates.join(format!("go{i}")));
        // ...and each line arrives while the attempt is still running.
        let line = rx
            .recv_timeout(DEADLINE)
            .unwrap_or_else(|_| panic!("line {i} did not stream"));
        assert_eq!(line, format!("line {i}"));
        if i < 3 {
            assert!(
                child.try_wait().unwrap().is_none(),
                "logs -f returned before the attempt ended"
            );
        }
    }
    // stdout belongs to the reader thread: wait for the exit status alone.
    let status = wait_until("logs -f to return", || child.try_wait().unwrap());
    assert_eq!(status.code(), Some(0), "{status:?}");
    reader.join().unwrap();
    assert!(rx.try_recv().is_err(), "nothing more than the three lines");
    assert!(
        env.attempt_dir("fol", 1).join("result.json").exists(),
        "logs -f returned after the attempt ended"
    );
    // It ends with one line saying how the run ended, on stderr.
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(err, "subpane: fol (attempt 1) ended: completed (exit 0)\n");
    // A run that had ended already, and failed: the same line, with its code.
    let r = env.sp([
        "run",
        "--run-id",
        "fol-bad",
        "--",
        "sh",
        "-c",
        "echo x; exit 3",
    ]);
    assert_eq!(r.code, 1, "{r:?}");
    let l = env.sp(["logs", "-f", "fol-bad"]);
    assert_eq!((l.code, l.stdout.as_str()), (0, "x\n"), "{l:?}");
    assert_eq!(
        l.stderr,
        "subpane: fol-bad (attempt 1) ended: failed (exit 3)\n"
    );
    env.assert_no_leftovers();
}

#[test]
fn cancel_stops_a_running_attempt() {
    let env = TestEnv::new();
    let _flag = start_waiting(&env, "cx", 0);
    let r = env.sp(["cancel", "--json", "cx"]);
    assert_eq!(r.code, 0, "{r:?}");
    let v = r.json();
    assert_valid_envelope(&v);
    assert_eq!(v["status"], "cancelled");
    assert_eq!(v["failure_kind"], "cancelled");
    assert_eq!(v["signals_sent"][0], "SIGTERM");
    assert_eq!(v, env.result("cx"));
    assert_eq!(env.sp(["status", "cx"]).code, 130);
    assert_eq!(env.sp(["wait", "cx"]).code, 130);
    // Cancelling a finished run changes nothing.
    let again = env.sp(["cancel", "cx"]);
    assert_eq!(again.code, 0, "{again:?}");
    assert!(
        again.stderr.contains("already finished"),
        "{}",
        again.stderr
    );
    assert_eq!(env.result("cx"), v);
    env.assert_no_leftovers();
}

#[test]
fn attach_to_a_finished_run_without_its_session_points_to_logs() {
    let env = TestEnv::new();
    assert_eq!(env.sp(["run", "--run-id", "gone", "--", "true"]).code, 0);
    // The worker shows its last lines in the pane after result.json, so the session may
    // outlive `run` by a few milliseconds: this is about a run whose session is gone.
    crate::harness::wait_until("the session to close", || {
        (!env.has_session("gone-1")).then_some(())
    });
    let r = env.sp(["attach", "gone"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("subpane logs gone"), "{}", r.stderr);
    assert!(r.stderr.contains("--keep-session"), "{}", r.stderr);
}

/// A tmux server of the test's own on another socket; killed on drop.
struct OuterTmux {
    socket: PathBuf,
}

impl OuterTmux {
    fn tmux(&self) -> std::process::Command {
        let mut c = std::process::Command::new("tmux");
        c.arg("-S")
            .arg(&self.socket)
            .env_remove("TMUX")
            .env_remove("TMUX_PANE")
            .stdin(Stdio::null());
        c
    }
}

impl Drop for OuterTmux {
    fn drop(&mut self) {
        let _ = self
            .tmux()
            .arg("kill-server")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

#[test]
fn attach_shows_the_runs_pane_in_a_terminal() {
    let env = TestEnv::new();
    let r = env.sp([
        "run",
        "--json",
        "--keep-session",
        "--run-id",
        "att",
        "--",
        fixture("mixed_output.sh").to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let session = r.json()["tmux"]["session"].as_str().unwrap().to_owned();
    assert!(env.has_session(&session));
    // The outer pane is larger than the inner window (200x50): shrinking it would push the
    // header into the inner pane's history. The attaching client draws UTF-8 (the header's
    // `▸`) only when its locale variables say UTF-8, else `_`: it gets one whatever this
    // machine's locale is.
    let outer = OuterTmux {
        socket: env.root.path().join("outer.sock"),
    };
    let st = outer
        .tmux()
        .args([
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "outer",
            "-x",
            "220",
            "-y",
            "60",
            "--",
            "env",
            "-u",
            "TMUX",
            "-u",
            "TMUX_PANE",
            "LC_ALL=C.UTF-8",
        ])
        .arg(format!("SUBPANE_HOME={}", env.home.display()))
        .arg(format!("SUBPANE_TMUX_SOCKET={}", env.socket.display()))
        .args([BIN, "attach", "att"])
        .status()
        .unwrap();
    assert!(st.success());
    let end = Instant::now() + DEADLINE;
    let screen = loop {
        let out = outer
            .tmux()
            .args(["capture-pane", "-p", "-J", "-t", "=outer:"])
            .output()
            .unwrap();
        let last = String::from_utf8_lossy(&out.stdout).into_owned();
        if last.contains("subpane ▸ run att")
            && last.contains("hello from stdout")
            && last.contains("completed")
        {
            break last;
        }
        assert!(
            Instant::now() < end,
            "the outer pane never showed the run's pane; it shows:\n{last}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(screen.contains("oops on stderr"), "{screen}");
    // The inner server sees one client attached to the run's session.
    let clients = env
        .tmux()
        .args(["list-clients", "-F", "#{client_session}"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&clients.stdout).trim(), session);
    drop(outer);
    assert_eq!(env.sp(["gc", "--older-than", "0s"]).code, 0);
    assert!(!env.has_session(&session));
    env.assert_no_leftovers();
}

#[test]
fn ls_lists_runs_newest_first_and_filters_by_status() {
    let env = TestEnv::new();
    assert_eq!(
        env.sp(["run", "--run-id", "l-ok", "--label", "k=v", "--", "true"])
            .code,
        0
    );
    assert_eq!(
        env.sp([
            "run",
            "--run-id",
            "l-bad",
            "--correlation-id",
            "c1",
            "--",
            "false"
        ])
        .code,
        1
    );
    let flag = start_waiting(&env, "l-run", 0);
    let r = env.sp(["ls", "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let rows = r.json();
    let rows = rows.as_array().unwrap();
    let ids: Vec<&str> = rows.iter().map(|x| x["run_id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["l-run", "l-bad", "l-ok"], "newest first");
    for key in [
        "run_id",
        "attempt",
        "agent",
        "status",
        "failure_kind",
        "exit_code",
        "created_at",
        "started_at",
        "finished_at",
        "duration_ms",
        "labels",
        "correlation_id",
        "group",
        "what",
    ] {
        assert!(
            rows.iter().all(|x| x.get(key).is_some()),
            "ls rows lack {key}: {rows:?}"
        );
    }
    let by = |id: &str| rows.iter().find(|x| x["run_id"] == id).unwrap();
    assert_eq!(by("l-ok")["status"], "completed");
    assert_eq!(by("l-ok")["labels"], serde_json::json!({"k": "v"}));
    assert_eq!(by("l-bad")["status"], "failed");
    assert_eq!(by("l-bad")["failure_kind"], "exit");
    assert_eq!(by("l-bad")["exit_code"], 1);
    assert_eq!(by("l-bad")["correlation_id"], "c1");
    assert_eq!(by("l-run")["status"], "running");
    assert_eq!(by("l-run")["finished_at"], Value::Null);
    assert_eq!(by("l-ok")["what"], "true");
    for (s, want) in [
        ("completed", vec!["l-ok"]),
        ("failed", vec!["l-bad"]),
        ("running", vec!["l-run"]),
        ("cancelled", vec![]),
    ] {
        let r = env.sp(["ls", "--json", "--status", s]);
        assert_eq!(r.code, 0, "{r:?}");
        let got: Vec<String> = r
            .json()
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["run_id"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(got, want, "--status {s}");
    }
    let h = env.sp(["ls"]);
    assert_eq!(h.code, 0);
    let lines: Vec<&str> = h.stdout.lines().collect();
    assert!(lines[0].starts_with("RUN"), "{}", h.stdout);
    assert_eq!(lines.len(), 4, "{}", h.stdout);
    assert!(
        lines[1].starts_with("l-run") && lines[3].starts_with("l-ok"),
        "{}",
        h.stdout
    );
    assert_eq!(env.sp(["ls", "--status", "nonsense"]).code, 2);
    touch(&flag);
    assert_eq!(env.sp(["wait", "l-run"]).code, 0);
    env.assert_no_leftovers();
}

#[test]
fn ls_of_an_empty_home_is_empty() {
    let env = TestEnv::new();
    let r = env.sp(["ls", "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json(), serde_json::json!([]));
}

#[test]
fn gc_removes_finished_runs_keeps_running_ones_and_closes_kept_sessions() {
    let env = TestEnv::new();
    assert_eq!(env.sp(["run", "--run-id", "g-done", "--", "true"]).code, 0);
    let kept = env.sp([
        "run",
        "--json",
        "--keep-session",
        "--run-id",
        "g-kept",
        "--",
        "true",
    ]);
    assert_eq!(kept.code, 0, "{kept:?}");
    let session = kept.json()["tmux"]["session"].as_str().unwrap().to_owned();
    assert!(
        env.has_session(&session),
        "--keep-session keeps the session"
    );
    let flag = start_waiting(&env, "g-run", 0);
    // The default (7d) removes nothing fresh, but closes the sessions of finished runs.
    let r = env.sp(["gc", "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let v = r.json();
    assert_eq!(v["removed_runs"], serde_json::json!([]));
    assert_eq!(v["closed_sessions"], serde_json::json!([session.clone()]));
    assert_eq!(v["running"], serde_json::json!(["g-run"]));
    for id in ["g-done", "g-kept", "g-run"] {
        assert!(env.run_dir(id).exists(), "{id}");
    }
    assert!(
        !env.has_session(&session),
        "gc closes the kept session of a finished run"
    );
    let kept2 = env.sp([
        "run",
        "--json",
        "--keep-session",
        "--run-id",
        "g-kept2",
        "--",
        "true",
    ]);
    assert_eq!(kept2.code, 0, "{kept2:?}");
    let session2 = kept2.json()["tmux"]["session"].as_str().unwrap().to_owned();
    assert!(env.has_session(&session2));
    // A dry run says what it would do and does nothing.
    let r = env.sp(["gc", "--older-than", "0s", "--dry-run", "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        r.json()["removed_runs"].as_array().unwrap().len(),
        3,
        "{}",
        r.stdout
    );
    assert!(env.run_dir("g-done").exists() && env.has_session(&session2));
    let r = env.sp(["gc", "--older-than", "0s", "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let v = r.json();
    let mut removed: Vec<&str> = v["removed_runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap())
        .collect();
    removed.sort();
    assert_eq!(removed, ["g-done", "g-kept", "g-kept2"]);
    assert_eq!(v["running"], serde_json::json!(["g-run"]));
    assert_eq!(v["closed_sessions"], serde_json::json!([session2.clone()]));
    assert!(!env.has_session(&session2), "the kept session is closed");
    assert!(!env.run_dir("g-done").exists() && !env.run_dir("g-kept").exists());
    assert!(
        env.attempt_dir("g-run", 1).join("spec.json").exists(),
        "the running run is kept"
    );
    assert_eq!(env.sp(["status", "g-run"]).code, 3, "and still running");
    touch(&flag);
    assert_eq!(env.sp(["wait", "g-run"]).code, 0);
    env.assert_no_leftovers();
}

#[test]
fn help_of_every_verb_mentions_every_flag() {
    let env = TestEnv::new();
    let verbs: &[(&str, &[&str])] = &[
        (
            "run",
            &[
                "--agent",
                "--task",
                "--run-id",
                "--cwd",
                "--detach",
                "--json",
                "--label",
                "--correlation-id",
                "--timeout",
                "--idle-timeout",
                "--linger",
                "--grace",
                "--model",
                "--system-prompt",
                "--tools",
                "--thinking",
                "--resume",
                "--env",
                "--keep-session",
                "--home",
            ],
        ),
        ("status", &["--json", "--attempt", "--home"]),
        ("wait", &["--any", "--all", "--timeout", "--json", "--home"]),
        (
            "logs",
            &[
                "--events",
                "--stderr",
                "--output",
                "--stdout",
                "--follow",
                "-f",
                "--attempt",
                "--home",
            ],
        ),
        ("cancel", &["--grace", "--json", "--no-wait", "--home"]),
        ("attach", &["--read-only", "--home"]),
        ("ls", &["--json", "--status", "--home"]),
        ("gc", &["--older-than", "--dry-run", "--json", "--home"]),
    ];
    for (verb, flags) in verbs {
        let r = env.sp([verb, &"--help"]);
        assert_eq!(r.code, 0, "{verb} --help: {r:?}");
        for f in *flags {
            assert!(
                r.stdout.contains(f),
                "`subpane {verb} --help` does not mention {f}:\n{}",
                r.stdout
            );
        }
        let h = env.sp(["help", verb]);
        assert_eq!(h.code, 0, "help {verb}");
    }
    let top = env.sp(["--help"]);
    assert_eq!(top.code, 0);
    for (verb, _) in verbs {
        assert!(
            top.stdout.contains(verb),
            "subpane --help does not list {verb}"
        );
    }
    assert!(
        !top.stdout.contains("__worker"),
        "the worker subcommand is hidden"
    );
    assert!(!env.home.exists(), "--help creates nothing");
}

/// Looking makes nothing: `ls`, `status`, `logs`, `wait` and `top` on a home that does not
/// exist leave it so (the first run makes it), and `top` still sees that first run.
#[test]
fn read_only_verbs_make_no_home() {
    let env = TestEnv::new();
    let above = env.root.path().join("fresh");
    let home = above.join("state/subpane");
    let h = home.to_str().unwrap();
    for verb in [
        &["ls"][..],
        &["ls", "--json"],
        &["ls", "--status", "failed"],
        &["ls", "--group", "g"],
        &["status", "r"],
        &["logs", "r"],
        &["wait", "r"],
        &["wait", "--group", "g"],
    ] {
        let r = env.sp([&["--home", h][..], verb].concat());
        assert!(r.code == 0 || r.code == 2, "{verb:?}: {r:?}");
        assert!(!above.exists(), "{verb:?} made {}", above.display());
    }
    std::fs::create_dir(&above).unwrap();
    let t = crate::terminal::Terminal::subpane(
        &env,
        "top-fresh",
        (100, 20),
        &[],
        &["--home", h, "top"],
    );
    t.wait_for("0 runs");
    assert!(
        std::fs::read_dir(&above).unwrap().next().is_none(),
        "top made {}",
        home.display()
    );
    // The first run makes the home; top, watching from above it, shows the run.
    let r = env.sp(["--home", h, "run", "--run-id", "first", "--", "true"]);
    assert_eq!(r.code, 0, "{r:?}");
    t.wait_until("top showing the first run", |s| {
        s.lines()
            .any(|l| l.contains("completed") && l.contains("first"))
    });
    t.keys(&["q"]);
    assert_eq!(t.wait_exit(), 0);
    env.assert_no_leftovers();
}
