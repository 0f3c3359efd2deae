//! `subpane fanout`: many runs from a JSON Lines file, the group they share (`ls --group`,
//! `wait --group`), concurrency, --fail-fast, --cancel-siblings, Ctrl-C, and a fan-out
//! killed half-way.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{
    BIN, DEADLINE, Ran, TestEnv, assert_valid_envelope, fixture, pid_alive, require_tool,
    send_signal, touch, wait_for_text, wait_until,
};

/// How long a fan-out here may take before the test fails instead of hanging.
const LIMIT: Duration = Duration::from_secs(60);

/// One task line: `argv`, and a run id when given.
fn task(argv: &[&str], run_id: Option<&str>) -> String {
    let mut v = json!({ "argv": argv });
    if let Some(id) = run_id {
        v["run_id"] = json!(id);
    }
    v.to_string()
}

fn write_tasks(env: &TestEnv, lines: &[String]) -> PathBuf {
    let p = env.root.path().join("tasks.jsonl");
    std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    p
}

/// A running `subpane fanout` whose stderr is read line by line as it comes.
struct Fan {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
    stdout: std::thread::JoinHandle<String>,
}

impl Fan {
    fn spawn(env: &TestEnv, args: &[&str]) -> Fan {
        let mut child = env
            .cmd()
            .arg("fanout")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run subpane fanout");
        let err = child.stderr.take().unwrap();
        let mut out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(err).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let stdout = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = out.read_to_string(&mut s);
            s
        });
        Fan {
            child,
            lines,
            seen: Vec::new(),
            stdout,
        }
    }

    /// Waits for a stderr line containing `needle`; returns it.
    fn line_with(&mut self, needle: &str) -> String {
        if let Some(l) = self.seen.iter().find(|l| l.contains(needle)) {
            return l.clone();
        }
        let end = Instant::now() + DEADLINE;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => {
                    self.seen.push(l.clone());
                    if l.contains(needle) {
                        return l;
                    }
                }
                Err(_) => panic!("no stderr line with {needle:?}; seen: {:?}", self.seen),
            }
        }
    }

    /// The group id from the line fanout prints when it starts.
    fn group(&mut self) -> String {
        let l = self.line_with("subpane: group g-");
        l.trim_start_matches("subpane: group ")
            .split(':')
            .next()
            .unwrap()
            .to_owned()
    }

    fn finish(mut self) -> Ran {
        let end = Instant::now() + LIMIT;
        let status = loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                break st;
            }
            if Instant::now() >= end {
                let _ = self.child.kill();
                panic!(
                    "fanout did not end within {LIMIT:?}; stderr: {:?}",
                    self.seen
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        self.seen.extend(self.lines.try_iter());
        // The reader thread may still be draining: take what is left.
        while let Ok(l) = self.lines.recv_timeout(Duration::from_millis(200)) {
            self.seen.push(l);
        }
        Ran {
            code: status.code().unwrap_or(-1),
            stdout: self.stdout.join().unwrap(),
            stderr: self.seen.join("\n"),
        }
    }
}

/// The tasks of a `--json` document, by line.
fn statuses(doc: &Value) -> Vec<(u64, String)> {
    doc["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["line"].as_u64().unwrap(),
                t["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn read(p: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .unwrap()
}

#[test]
fn every_line_runs_in_one_group_that_ls_and_wait_find() {
    let env = TestEnv::new();
    let other = env.sp(["run", "--run-id", "other", "--", "true"]);
    assert_eq!(other.code, 0, "{other:?}");
    let text = [
        "# tasks, with a blank line".to_owned(),
        r#"{"argv": ["true"], "run_id": "j1", "labels": {"k": "v"}}"#.to_owned(),
        String::new(),
        task(&["sh", "-c", "exit 3"], Some("j2")),
        task(&["sh", "-c", "echo hi"], None),
    ]
    .join("\n");
    let mut child = env
        .cmd()
        .args(["fanout", "-", "--json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let r = crate::harness::wait_child_within(child, LIMIT, "fanout did not end");
    assert_eq!(r.code, 1, "the worst of the tasks: {r:?}");
    let doc = r.json();
    let g = doc["group"].as_str().unwrap().to_owned();
    assert!(g.starts_with("g-"), "{doc}");
    assert!(r.stderr.contains(&g), "the group id is on stderr: {r:?}");
    assert_eq!(
        statuses(&doc),
        [
            (2, "completed".to_owned()),
            (4, "failed".to_owned()),
            (5, "completed".to_owned())
        ]
    );
    let t = &doc["tasks"][1];
    assert_eq!(
        (
            t["run_id"].as_str(),
            t["failure_kind"].as_str(),
            t["exit_code"].as_i64()
        ),
        (Some("j2"), Some("exit"), Some(3))
    );
    assert_eq!(t["what"], "sh -c 'exit 3'");
    let keys: Vec<&str> = t.as_object().unwrap().keys().map(String::as_str).collect();
    for k in [
        "line",
        "run_id",
        "status",
        "failure_kind",
        "exit_code",
        "duration_ms",
        "attempt_dir",
        "what",
        "error",
    ] {
        assert!(keys.contains(&k), "{k} missing from {t}");
    }
    assert_eq!(
        doc["summary"],
        json!({"total": 3, "completed": 2, "failed": 1, "cancelled": 0, "skipped": 0,
               "concurrency": 4, "duration_ms": doc["summary"]["duration_ms"], "exit_code": 1})
    );
    // The group is in every record of every run.
    let generated = doc["tasks"][2]["run_id"].as_str().unwrap().to_owned();
    for t in doc["tasks"].as_array().unwrap() {
        let dir = PathBuf::from(t["attempt_dir"].as_str().unwrap());
        assert_eq!(read(&dir.join("spec.json"))["group"], g.as_str());
        let env = read(&dir.join("result.json"));
        assert_valid_envelope(&env);
        assert_eq!(env["group"], g.as_str());
        assert_eq!(read(&dir.join("../../run.json"))["group"], g.as_str());
    }
    assert_eq!(env.result("j1")["labels"], json!({"k": "v"}));
    // ls --group: only the group's runs.
    let ls = env.sp(["ls", "--json", "--group", &g]);
    assert_eq!(ls.code, 0, "{ls:?}");
    let mut ids: Vec<String> = ls
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["run_id"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    let mut want = vec!["j1".to_owned(), "j2".to_owned(), generated];
    want.sort();
    assert_eq!(ids, want);
    let text = env.sp(["ls", "--group", &g]).stdout;
    assert!(text.contains("j2") && !text.contains("other"), "{text}");
    // wait --group: every run of the group, always an array; RUN arguments add to it.
    let w = env.sp(["wait", "--json", "--group", &g]);
    assert_eq!(w.code, 1, "{w:?}");
    assert_eq!(w.json().as_array().unwrap().len(), 3);
    let w = env.sp(["wait", "--json", "--group", &g, "other", "j1"]);
    let ids: Vec<String> = w
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["run_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids.len(), 4, "j1 once, plus other: {ids:?}");
    assert_eq!(&ids[..2], ["other", "j1"]);
    let none = env.sp(["wait", "--group", "g-nothing"]);
    assert_eq!(none.code, 2, "{none:?}");
    assert!(none.stderr.contains("no group `g-nothing`"), "{none:?}");
    env.assert_no_leftovers();
}

#[test]
fn concurrency_is_never_exceeded_by_the_tasks_own_count() {
    let env = TestEnv::new();
    let dir = env.root.path().join("count");
    std::fs::create_dir_all(&dir).unwrap();
    let counter = fixture("counts_overlap.sh");
    let (c, d) = (counter.to_str().unwrap(), dir.to_str().unwrap());
    let lines: Vec<String> = (0..24).map(|_| task(&[c, d, "0.3"], None)).collect();
    let file = write_tasks(&env, &lines);
    let r = env.sp_within(
        LIMIT,
        "fanout did not end",
        ["fanout", file.to_str().unwrap(), "--concurrency", "3"],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let n = |name: &str| -> u32 {
        std::fs::read_to_string(dir.join(name))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    assert_eq!(n("running"), 0, "every task counted itself out");
    // Never more than 3, and 3 at some point: the limit is used, not just kept.
    assert_eq!(n("max"), 3, "the most tasks that ran at once");
    // The table: one row per task and the counts.
    assert_eq!(
        r.stdout.lines().filter(|l| l.contains("completed")).count(),
        25
    );
    assert!(
        r.stdout.contains(": 24 tasks: 24 completed in "),
        "{}",
        r.stdout
    );
    env.assert_no_leftovers();
}

/// 20 tasks for four slots: 1-8 end at once, 9-11 wait for `gate`, 12 fails at once (so it
/// starts only once 9-11 run, and fails while they still do), 13-20 end at once.
fn failing_in_the_middle(env: &TestEnv) -> (PathBuf, PathBuf) {
    let gate = env.root.path().join("gate");
    let waits = fixture("waits_for_flag.sh");
    let (w, g) = (waits.to_str().unwrap(), gate.to_str().unwrap());
    let lines: Vec<String> = (1..=20)
        .map(|i| {
            let id = format!("t{i}");
            match i {
                9..=11 => task(&[w, g], Some(&id)),
                12 => task(&["sh", "-c", "exit 3"], Some(&id)),
                _ => task(&["true"], Some(&id)),
            }
        })
        .collect();
    (write_tasks(env, &lines), gate)
}

#[test]
fn a_failure_in_the_middle_does_not_stop_the_others_by_default() {
    let env = TestEnv::new();
    let (file, gate) = failing_in_the_middle(&env);
    let fan = Fan::spawn(
        &env,
        &[file.to_str().unwrap(), "--json", "--concurrency", "4"],
    );
    wait_until("t20's result", || {
        env.attempt_dir("t20", 1)
            .join("result.json")
            .exists()
            .then_some(())
    });
    touch(&gate);
    let r = fan.finish();
    assert_eq!(r.code, 1, "{r:?}");
    let doc = r.json();
    for (line, status) in statuses(&doc) {
        let want = if line == 12 { "failed" } else { "completed" };
        assert_eq!(status, want, "line {line}");
    }
    assert_eq!(doc["summary"]["completed"], 19);
    env.assert_no_leftovers();
}

#[test]
fn fail_fast_lets_the_running_finish_and_skips_the_rest() {
    let env = TestEnv::new();
    let (file, gate) = failing_in_the_middle(&env);
    let mut fan = Fan::spawn(
        &env,
        &[
            file.to_str().unwrap(),
            "--json",
            "--concurrency",
            "4",
            "--fail-fast",
        ],
    );
    fan.line_with("starting no more");
    // 9-11 still wait: they finish normally once let through.
    for id in ["t9", "t10", "t11"] {
        assert!(!env.attempt_dir(id, 1).join("result.json").exists(), "{id}");
    }
    touch(&gate);
    let r = fan.finish();
    assert_eq!(r.code, 1, "failed beats skipped: {r:?}");
    let doc = r.json();
    for (line, status) in statuses(&doc) {
        let want = match line {
            12 => "failed",
            13.. => "skipped",
            _ => "completed",
        };
        assert_eq!(status, want, "line {line}: {doc}");
    }
    // A task that never started has no run, and so no run id.
    for t in &doc["tasks"].as_array().unwrap()[12..] {
        assert_eq!(t["attempt_dir"], Value::Null);
        assert_eq!(t["run_id"], Value::Null, "{t}");
    }
    let runs = std::fs::read_dir(env.home.join("runs")).unwrap().count();
    assert_eq!(runs, 12, "a skipped task has a run");
    assert_eq!(doc["summary"]["skipped"], 8);
    env.assert_no_leftovers();
}

#[test]
fn cancel_siblings_cancels_the_running_and_skips_the_rest() {
    let env = TestEnv::new();
    let (file, _gate) = failing_in_the_middle(&env);
    let r = env.sp_within(
        LIMIT,
        "the siblings were not cancelled",
        [
            "fanout",
            file.to_str().unwrap(),
            "--json",
            "--concurrency",
            "4",
            "--cancel-siblings",
        ],
    );
    assert_eq!(r.code, 1, "{r:?}");
    let doc = r.json();
    for (line, status) in statuses(&doc) {
        let want = match line {
            9..=11 => "cancelled",
            12 => "failed",
            13.. => "skipped",
            _ => "completed",
        };
        assert_eq!(status, want, "line {line}: {doc}");
    }
    assert_eq!(env.result("t10")["failure_kind"], "cancelled");
    assert_eq!(env.result("t10")["cancelled_by"], "sibling");
    assert_eq!(
        (
            doc["summary"]["cancelled"].as_u64(),
            doc["summary"]["skipped"].as_u64()
        ),
        (Some(3), Some(8))
    );
    env.assert_no_leftovers();
}

#[test]
fn ctrl_c_cancels_the_running_tasks_and_skips_the_queued_ones() {
    let env = TestEnv::new();
    let gate = env.root.path().join("never");
    let waits = fixture("waits_for_flag.sh");
    let lines: Vec<String> = (1..=8)
        .map(|i| {
            task(
                &[waits.to_str().unwrap(), gate.to_str().unwrap()],
                Some(&format!("c{i}")),
            )
        })
        .collect();
    let file = write_tasks(&env, &lines);
    let mut fan = Fan::spawn(
        &env,
        &[file.to_str().unwrap(), "--json", "--concurrency", "3"],
    );
    for id in ["c1", "c2", "c3"] {
        wait_for_text(&env.attempt_dir(id, 1).join("stdout.log"), "waiting for");
    }
    send_signal(fan.child.id() as i32, libc::SIGINT);
    fan.line_with("cancelling the running tasks");
    let r = fan.finish();
    assert_eq!(r.code, 130, "{r:?}");
    let doc = r.json();
    for (line, status) in statuses(&doc) {
        let want = if line <= 3 { "cancelled" } else { "skipped" };
        assert_eq!(status, want, "line {line}: {doc}");
    }
    for id in ["c1", "c2", "c3"] {
        assert_eq!(env.result(id)["cancelled_by"], "fanout", "{id}");
    }
    assert!(!env.run_dir("c4").exists());
    env.assert_no_leftovers();
}

#[test]
fn a_bad_line_is_named_and_nothing_starts() {
    let env = TestEnv::new();
    let lines = [
        task(&["true"], Some("b1")),
        "# fine".to_owned(),
        r#"{"argv": ["true"], "timeuot": "1s"}"#.to_owned(),
        task(&["true"], Some("b1")),
        "{not json".to_owned(),
        task(&["no-such-program-here"], None),
    ];
    let file = write_tasks(&env, &lines);
    let r = env.sp(["fanout", file.to_str().unwrap()]);
    assert_eq!(r.code, 2, "{r:?}");
    for want in [
        "line 3: unknown field `timeuot`; did you mean `timeout`?\n",
        "line 4: run id `b1` is also on line 1",
        "line 5: ",
        "line 6: program `no-such-program-here` was not found",
        "nothing was started",
    ] {
        assert!(r.stderr.contains(want), "{want:?} in {}", r.stderr);
    }
    // The near name is enough: not the 31 others, nor a column.
    assert!(!r.stderr.contains("max_depth"), "{}", r.stderr);
    assert!(!env.run_dir("b1").exists());
    let runs = std::fs::read_dir(env.home.join("runs")).map_or(0, |d| d.count());
    assert_eq!(runs, 0, "a run was created");
    assert!(!env.server_alive(), "tmux was started");
    // A run id that exists already, and a concurrency of 0.
    assert_eq!(env.sp(["run", "--run-id", "b1", "--", "true"]).code, 0);
    let file = write_tasks(&env, &[task(&["true"], Some("b1"))]);
    let r = env.sp(["fanout", file.to_str().unwrap()]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("line 1: run id `b1` already exists"),
        "{r:?}"
    );
    let r = env.sp(["fanout", file.to_str().unwrap(), "--concurrency", "0"]);
    assert_eq!(r.code, 2, "{r:?}");
    env.assert_no_leftovers();
}

#[test]
fn a_killed_fanout_loses_nothing_and_wait_group_finds_every_started_run() {
    let env = TestEnv::new();
    let gate = env.root.path().join("gate");
    let waits = fixture("waits_for_flag.sh");
    let lines: Vec<String> = (1..=10)
        .map(|i| {
            task(
                &[waits.to_str().unwrap(), gate.to_str().unwrap()],
                Some(&format!("k{i}")),
            )
        })
        .collect();
    let file = write_tasks(&env, &lines);
    let mut fan = Fan::spawn(&env, &[file.to_str().unwrap(), "--concurrency", "4"]);
    let g = fan.group();
    for id in ["k1", "k2", "k3", "k4"] {
        wait_for_text(&env.attempt_dir(id, 1).join("stdout.log"), "waiting for");
    }
    fan.child.kill().unwrap(); // SIGKILL
    let _ = fan.child.wait();
    let workers: Vec<i32> = ["k1", "k2", "k3", "k4"]
        .iter()
        .map(|id| env.worker_pid(id))
        .collect();
    assert!(
        workers.iter().all(|p| pid_alive(*p)),
        "a run died with fanout"
    );
    let ls = env.sp(["ls", "--json", "--group", &g]).json();
    assert_eq!(ls.as_array().unwrap().len(), 4, "{ls}");
    let ids: Vec<String> = wait_group_past(&env, &g, &gate)
        .iter()
        .map(|e| {
            assert_eq!(e["status"], "completed");
            e["run_id"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(ids, ["k1", "k2", "k3", "k4"]);
    assert!(
        !env.run_dir("k5").exists(),
        "a queued task started after the kill"
    );
    env.assert_no_leftovers();
}

#[test]
fn on_a_terminal_a_progress_line_then_a_table() {
    // script(1) gives fanout a terminal on stderr.
    require_tool("script", &["--version"], "bsdutils");
    let env = TestEnv::new();
    let lines = [
        task(&["sleep", "1.3"], Some("p1")),
        task(&["sh", "-c", "exit 4"], Some("p2")),
    ];
    let file = write_tasks(&env, &lines);
    let cmd = format!("{BIN} fanout {}", file.display());
    let r: Ran = env
        .cmd_raw(Path::new("script"))
        .args(["-qec", &cmd, "/dev/null"])
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, 1, "{r:?}");
    let out = r.stdout.replace('\r', "");
    // Redrawn in place on each event, and on the clock once a second.
    assert!(
        out.contains("\x1b[2K1 running, 1/2 done, 1 failed"),
        "{out:?}"
    );
    // No event comes between 1 s and 1.3 s: only the clock draws this.
    assert!(
        out.contains("\x1b[2K1 running, 1/2 done, 1 failed, 0 queued  0:01"),
        "the clock ticked: {out:?}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("    2  p2") && l.contains("failed")),
        "{out:?}"
    );
    assert!(
        out.contains(": 2 tasks: 1 completed, 1 failed in "),
        "{out:?}"
    );
    env.assert_no_leftovers();
}

/// An attempt started by a fan-out gets what one started by `run` gets: the same files and
/// the same record of its pane (one launcher; a copy of it would drift).
#[test]
fn a_fanout_attempt_gets_the_files_a_run_attempt_gets() {
    let env = TestEnv::new();
    let listing = |run: &str| -> (Vec<String>, Vec<String>) {
        let dir = env.attempt_dir(run, 1);
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let launch = env.read_json(&dir.join("launch.json"));
        let mut keys: Vec<String> = launch.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        // `worker` is null when the pane's process had exited by the time it was looked at
        // (a fan-out records its panes a moment after making them; `true` is quick).
        assert!(
            launch["worker"]["pid"].is_i64() || launch["worker"].is_null(),
            "{launch}"
        );
        (names, keys)
    };
    let r = env.sp(["run", "--json", "--run-id", "single", "--", "true"]);
    assert_eq!(r.code, 0, "{r:?}");
    let tasks = write_tasks(&env, &[task(&["true"], Some("fanned"))]);
    let f = env.sp_within(
        LIMIT,
        "fanout hung",
        ["fanout", "--json", tasks.to_str().unwrap()],
    );
    assert_eq!(f.code, 0, "{f:?}");
    assert_eq!(listing("single"), listing("fanned"));
    env.assert_no_leftovers();
}

/// `wait --json --group G`, started before `gate` lets the group's tasks end: its envelopes
/// (it exits 0).
fn wait_group_past(env: &TestEnv, group: &str, gate: &Path) -> Vec<Value> {
    let waiter = env
        .cmd()
        .args(["wait", "--json", "--group", group])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    touch(gate);
    let w = crate::harness::wait_child_within(waiter, LIMIT, "wait --group did not end");
    assert_eq!(w.code, 0, "{w:?}");
    w.json().as_array().unwrap().clone()
}

/// `fanout --json --concurrency 1 [extra] FILE` of `n` tasks named `prefix0…`, on a socket tmux
/// cannot make (under a regular file): every pane fails to start.
fn fanout_where_no_pane_starts(env: &TestEnv, prefix: &str, n: usize, extra: &[&str]) -> Ran {
    let lines: Vec<String> = (0..n)
        .map(|i| task(&["true"], Some(&format!("{prefix}{i}"))))
        .collect();
    let file = write_tasks(env, &lines);
    let blocker = env.root.path().join("not-a-dir");
    std::fs::write(&blocker, "").unwrap();
    let child = env
        .cmd()
        .env("SUBPANE_TMUX_SOCKET", blocker.join("tmux.sock"))
        .args(["fanout", "--json", "--concurrency", "1"])
        .args(extra)
        .arg(file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    crate::harness::wait_child_within(
        child,
        DEADLINE,
        "a fan-out whose every start fails waited for an end that cannot come",
    )
}

/// Every start of every batch fails and stderr is not a terminal: the fan-out still ends,
/// with each task failed (spawn), instead of waiting for an end that cannot come.
#[test]
fn when_every_start_fails_the_fanout_ends() {
    let env = TestEnv::new();
    let ran = fanout_where_no_pane_starts(&env, "nostart", 3, &[]);
    assert_eq!(ran.code, 1, "{ran:?}");
    let doc = ran.json();
    for t in doc["tasks"].as_array().unwrap() {
        assert_eq!(t["status"], "failed", "{t}");
        assert_eq!(t["failure_kind"], "spawn", "{t}");
    }
    env.assert_no_leftovers();
}

/// `--fail-fast` treats a task that could not start as a failure: the rest are skipped, and
/// a task that never started has no run id.
#[test]
fn fail_fast_counts_a_failed_start() {
    let env = TestEnv::new();
    let ran = fanout_where_no_pane_starts(&env, "ff", 4, &["--fail-fast"]);
    assert_eq!(ran.code, 1, "{ran:?}");
    let doc = ran.json();
    let tasks = doc["tasks"].as_array().unwrap();
    assert_eq!(tasks[0]["status"], "failed", "{doc}");
    for t in &tasks[1..] {
        assert_eq!(t["status"], "skipped", "{doc}");
        assert_eq!(t["run_id"], Value::Null, "{t}");
        assert_eq!(t["attempt_dir"], Value::Null, "{t}");
    }
    for i in 1..4 {
        assert!(!env.run_dir(&format!("ff{i}")).exists());
    }
    env.assert_no_leftovers();
}

/// A task that waits for `gate` to exist, then prints its name.
fn gated(gate: &Path, name: &str) -> String {
    let script = format!(
        "while [ ! -e '{}' ]; do sleep 0.05; done; echo {name}",
        gate.display()
    );
    task(&["sh", "-c", &script], Some(name))
}

/// `fanout --detach --concurrency 1` of three tasks `prefix0…2` held by the file `gate`, once
/// the first has started; the group id and the gate.
fn detached_three(env: &TestEnv, prefix: &str) -> (String, PathBuf) {
    let gate = env.root.path().join("gate");
    let lines: Vec<String> = (0..3)
        .map(|i| gated(&gate, &format!("{prefix}{i}")))
        .collect();
    let file = write_tasks(env, &lines);
    let r = env.sp_within(
        LIMIT,
        "fanout --detach waited",
        [
            "fanout",
            "--detach",
            "--json",
            "--concurrency",
            "1",
            file.to_str().unwrap(),
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let group = r.json()["group"].as_str().unwrap().to_owned();
    let first = env
        .attempt_dir(&format!("{prefix}0"), 1)
        .join("launch.json");
    wait_until("the first task to start", || first.exists().then_some(()));
    (group, gate)
}

/// `fanout --detach` hands the group to a driver of its own and returns at once; `wait
/// --group` waits for every task, the ones the driver starts later too, and `ls --group`
/// lists them.
#[test]
fn a_detached_fanout_outlives_its_caller() {
    let env = TestEnv::new();
    let (group, gate) = detached_three(&env, "d");
    // The driver is a run named as the group, in its own pane.
    assert_eq!(env.sp(["status", &group]).code, 3, "the driver runs");
    assert!(!env.run_dir("d2").exists(), "one at a time");
    let ids: Vec<String> = wait_group_past(&env, &group, &gate)
        .iter()
        .map(|e| e["run_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids.len(), 3, "every task, and not the driver: {ids:?}");
    for id in ["d0", "d1", "d2"] {
        assert!(ids.contains(&id.to_owned()), "{ids:?}");
    }
    let ls = env.sp(["ls", "--json", "--group", &group]);
    assert_eq!(ls.json().as_array().unwrap().len(), 3, "{}", ls.stdout);
    wait_until("the driver to end", || {
        (env.sp(["status", &group]).code == 0).then_some(())
    });
    env.assert_no_leftovers();
}

/// A killed driver is driven again by the next subpane command that sees it dead (here
/// `ls`): the new driver adopts the running task (never started twice) and
/// starts the rest; the driver's run has a second attempt.
#[test]
fn a_killed_driver_is_driven_again_by_the_next_command_and_starts_nothing_twice() {
    let env = TestEnv::new();
    let (group, gate) = detached_three(&env, "k");
    crate::harness::kill_driver(&env, &group, 1);
    assert_eq!(
        env.read_json(&env.attempt_dir(&group, 1).join("result.json"))["status"],
        "failed",
        "the killed driver's attempt"
    );
    // The task it started goes on; this command sees the dead driver and starts it again.
    let s = env.sp(["ls"]);
    assert_eq!(s.code, 0, "{s:?}");
    assert!(
        s.stderr.contains(&format!(
            "group {group}: its driver had died; driving it again (run {group}, attempt 2)"
        )),
        "{}",
        s.stderr
    );
    touch(&gate);
    let w = env.sp_within(LIMIT, "wait --group hung", ["wait", "--group", &group]);
    assert_eq!(w.code, 0, "every task ran: {w:?}");
    for t in ["k0", "k1", "k2"] {
        assert_eq!(env.result(t)["status"], "completed", "{t}");
        assert_eq!(env.result(t)["attempt"], 1, "{t} started once");
        assert!(!env.attempt_dir(t, 2).exists(), "{t} started twice");
    }
    wait_until("the second driver to end", || {
        env.attempt_dir(&group, 2)
            .join("result.json")
            .exists()
            .then_some(())
    });
    // It ended by itself: the group is closed, and nothing drives it again.
    assert!(
        !env.home
            .join("groups")
            .join(&group)
            .join("requests.jsonl")
            .exists()
    );
    assert!(!env.home.join("groups/.open").join(&group).exists());
    let l = env.sp(["ls"]);
    assert!(!l.stderr.contains("driving it again"), "{}", l.stderr);
    assert!(!env.attempt_dir(&group, 3).exists());
    env.assert_no_leftovers();
}

/// `fanout --resume-group G` drives a group whose driver died again (here before any other
/// command saw it); a task that failed meanwhile keeps its outcome and skips its dependant,
/// the rest run; a group that has ended is refused.
#[test]
fn resume_group_drives_a_dead_driver_again_and_keeps_what_ended_meanwhile() {
    let env = TestEnv::new();
    let gate = env.root.path().join("gate");
    let fail = format!(
        "while [ ! -e '{}' ]; do sleep 0.05; done; exit 3",
        gate.display()
    );
    let lines = [
        json!({"argv": ["sh", "-c", fail], "run_id": "r0", "id": "first"}),
        json!({"argv": ["true"], "run_id": "r1", "after": ["first"]}),
        json!({"argv": ["true"], "run_id": "r2"}),
    ];
    let group = crate::harness::detach_tasks(&env, &lines, &["--concurrency", "1"]);
    let first = env.attempt_dir("r0", 1).join("launch.json");
    wait_until("the first task to start", || first.exists().then_some(()));
    crate::harness::kill_driver(&env, &group, 1);
    // It fails with no driver to see it.
    touch(&gate);
    let r0 = env.attempt_dir("r0", 1).join("result.json");
    wait_until("the first task to end", || r0.exists().then_some(()));
    let g = env.sp(["fanout", "--resume-group", &group, "--json"]);
    assert_eq!(g.code, 0, "{g:?}");
    assert_eq!(g.json()["driver_attempt"], 2, "{g:?}");
    let w = env.sp_within(
        LIMIT,
        "wait --group hung",
        ["wait", "--group", &group, "--json"],
    );
    assert_eq!(w.code, 1, "{w:?}");
    assert!(
        w.stderr.contains(&format!(
            "line 2 of group {group} was skipped: its dependency \"first\" failed"
        )),
        "{}",
        w.stderr
    );
    assert_eq!(env.result("r0")["exit_code"], 3);
    assert!(!env.attempt_dir("r0", 2).exists(), "r0 started twice");
    assert!(
        !env.run_dir("r1").exists(),
        "the dependant of a failed task started"
    );
    assert_eq!(env.result("r2")["status"], "completed");
    wait_until("the second driver to end", || {
        env.attempt_dir(&group, 2)
            .join("result.json")
            .exists()
            .then_some(())
    });
    let report = env.sp(["group", &group, "--json"]);
    let doc = report.json();
    let r1 = doc["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["line"] == 2)
        .cloned()
        .unwrap();
    assert_eq!(r1["status"], "skipped", "{doc}");
    assert_eq!(r1["error"], "its dependency \"first\" failed", "{doc}");
    let again = env.sp(["fanout", "--resume-group", &group]);
    assert_eq!(again.code, 2, "{again:?}");
    assert!(again.stderr.contains("has ended"), "{}", again.stderr);
    env.assert_no_leftovers();
}

/// `cancel G` of a group whose driver was killed stops the group instead of driving it
/// again: its running task is cancelled, the queued ones never start.
#[test]
fn cancelling_a_group_whose_driver_died_stops_it() {
    let env = TestEnv::new();
    let (group, _gate) = detached_three(&env, "d");
    crate::harness::kill_driver(&env, &group, 1);
    let c = env.sp(["cancel", &group]);
    assert_eq!(c.code, 0, "{c:?}");
    assert!(
        c.stderr
            .contains("its queued tasks will not start, 1 running task cancelled"),
        "{}",
        c.stderr
    );
    let w = env.sp_within(LIMIT, "wait --group hung", ["wait", "--group", &group]);
    assert_eq!(w.code, 130, "{w:?}");
    assert!(
        w.stderr
            .contains("never started (its driver ended first): line 2, line 3"),
        "{}",
        w.stderr
    );
    assert_eq!(env.result("d0")["status"], "cancelled");
    assert!(!env.run_dir("d1").exists() && !env.run_dir("d2").exists());
    assert!(!env.attempt_dir(&group, 2).exists(), "driven again");
    env.assert_no_leftovers();
}

/// Cancelling the group's id stops the group: the running task is cancelled and the
/// queued ones never start.
#[test]
fn cancelling_the_group_stops_its_tasks() {
    let env = TestEnv::new();
    let (group, _gate) = detached_three(&env, "c");
    let c = env.sp(["cancel", &group]);
    assert_eq!(c.code, 0, "{c:?}");
    let w = env.sp_within(LIMIT, "wait --group hung", ["wait", "--group", &group]);
    assert_eq!(w.code, 130, "{w:?}");
    assert_eq!(env.result("c0")["status"], "cancelled");
    assert!(!env.run_dir("c1").exists() && !env.run_dir("c2").exists());
    env.assert_no_leftovers();
}

/// `gc` removes a detached group's record with its driver's run.
#[test]
fn gc_removes_a_detached_groups_record_with_its_driver() {
    let env = TestEnv::new();
    let (group, gate) = detached_three(&env, "g");
    let _ = wait_group_past(&env, &group, &gate);
    wait_until("the driver to end", || {
        (env.sp(["status", &group]).code == 0).then_some(())
    });
    assert!(env.home.join("groups").join(&group).exists());
    let r = env.sp(["gc", "--older-than", "0s"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!env.run_dir(&group).exists());
    assert!(!env.home.join("groups").join(&group).exists());
    env.assert_no_leftovers();
}

/// A group's budget (`--max-tokens`) over pi tasks that work on for many turns (each tool
/// call 0.1 s; the mock's 148 tokens a call): once the tasks' usage, summed as their
/// progress.json changes, passes it, the queued task is skipped and the running ones are
/// stopped, each ending as `budget` with the group's limit and usage.
#[test]
fn a_group_budget_stops_the_running_tasks_and_skips_the_rest() {
    let env = TestEnv::new();
    let mock = crate::mock::Mock::start(&env);
    let work = env.work.to_str().unwrap();
    let line = |id: &str| {
        json!({"agent": "pi", "run_id": id, "cwd": work, "tools": ["bash"], "timeout": "2m",
               "task": "SCENARIO:many_turns PAUSE:0.1 Keep going."})
        .to_string()
    };
    let file = write_tasks(&env, &[line("b1"), line("b2"), line("b3")]);
    let mut c = mock.subpane(&env, None);
    c.args([
        "fanout",
        file.to_str().unwrap(),
        "--json",
        "--concurrency",
        "2",
    ])
    .args(["--max-tokens", "1000"]);
    let ran = crate::harness::ran_within(c, LIMIT, "a fan-out under a budget");
    let v = ran.json();
    assert_eq!(ran.code, 1, "{v:#}\n{}", ran.stderr);
    assert!(
        ran.stderr.contains("budget max_tokens 1000 crossed at")
            && ran.stderr.contains("starting no more"),
        "{}",
        ran.stderr
    );
    let group = v["group"].as_str().unwrap().to_owned();
    let tasks = v["tasks"].as_array().unwrap();
    assert_eq!(tasks[2]["status"], "skipped", "{v:#}");
    let skipped_why = tasks[2]["error"].as_str().unwrap_or_default();
    assert!(
        skipped_why.starts_with(&format!(
            "not started: group {group}'s budget max_tokens 1000"
        )),
        "{v:#}"
    );
    for (t, id) in tasks[..2].iter().zip(["b1", "b2"]) {
        assert_eq!(t["status"], "failed", "{v:#}");
        assert_eq!(t["failure_kind"], "budget", "{v:#}");
        let e = env.result(id);
        assert_valid_envelope(&e);
        assert_eq!(e["status"], "failed", "{e:#}");
        let b = &e["budget"];
        assert_eq!(b["limit"], "max_tokens", "{e:#}");
        assert_eq!(b["value"], 1000, "{e:#}");
        assert_eq!(b["group"], group.as_str(), "{e:#}");
        // The group's usage at the stop: past the limit, by less than the two tasks' turns
        // in the time between two writes of their progress.
        let reached = b["reached"].as_u64().unwrap();
        assert!(reached > 1000 && reached < 1000 + 148 * 20, "{e:#}");
        assert_eq!(e["signals_sent"][0], "SIGTERM", "{e:#}");
        let errors = e["output"]["errors"].to_string();
        assert!(errors.contains("stopped: group "), "{errors}");
    }
    // Far from the scenario's 30 calls a task.
    let asked = mock
        .log_text()
        .lines()
        .filter(|l| l.contains("scenario=many_turns"))
        .count();
    assert!(asked < 40, "{asked} model requests:\n{}", mock.log_text());
    env.assert_no_leftovers();
}

/// A group's cost cannot be counted over a CLI that never reports one: refused, exit 2,
/// naming the line, before anything starts.
#[test]
fn a_group_cost_budget_over_codex_is_refused() {
    let env = TestEnv::new();
    let file = write_tasks(
        &env,
        &[
            task(&["true"], Some("ok-1")),
            json!({"agent": "codex", "task": "hi", "run_id": "cx"}).to_string(),
        ],
    );
    let mut c = env.cmd();
    c.env("PATH", crate::mock::path_with_clis(None)).args([
        "fanout",
        file.to_str().unwrap(),
        "--max-cost",
        "1",
    ]);
    let ran = crate::harness::ran_within(c, LIMIT, "a refused fan-out");
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert!(
        ran.stderr
            .contains("line 2 runs codex, which reports no cost"),
        "{}",
        ran.stderr
    );
    assert!(!env.home.join("runs").join("ok-1").exists());
    env.assert_no_leftovers();
}

/// A fan-out with `--on-usage-limit wait` of two tasks: a stand-in `claude` (run `w1`) that
/// hits its usage limit, saying (`says_reset`), as a subscription's does, that its window
/// resets in 3 s, and completes once resumed; and a command.
fn fan_at_a_usage_limit(env: &TestEnv, says_reset: bool) -> Ran {
    let bin = env.root.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let claude = bin.join("claude");
    std::fs::write(
        &claude,
        r#"#!/bin/sh
init='{"type":"system","subtype":"init","session_id":"s-42","model":"m"}'
echo "$init"
case "$*" in
*--resume=s-42*)
  echo '{"type":"result","subtype":"success","is_error":false,"result":"resumed","session_id":"s-42","num_turns":1}' ;;
*)
  at=$(( $(date +%s) + 3 ))
  [ -n "$SAYS_RESET" ] && echo '{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":'$at',"rateLimitType":"five_hour"},"session_id":"s-42"}'
  echo '{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"Claude usage limit reached","session_id":"s-42","num_turns":1}' ;;
esac
"#,
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&claude, std::fs::Permissions::from_mode(0o755)).unwrap();
    let file = write_tasks(
        env,
        &[
            json!({"agent": "claude", "run_id": "w1", "task": "hi"}).to_string(),
            task(&["true"], Some("t2")),
        ],
    );
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let mut c = env.cmd();
    if says_reset {
        c.env("SAYS_RESET", "1");
    }
    c.env("PATH", path).args([
        "fanout",
        file.to_str().unwrap(),
        "--json",
        "--on-usage-limit",
        "wait",
    ]);
    crate::harness::ran_within(c, LIMIT, "a fan-out waiting for a reset")
}

/// `--on-usage-limit wait`: the task at its usage limit goes on as its run's next attempt,
/// which waits for the reset and resumes the session; the fan-out ends when that attempt
/// does.
#[test]
fn a_task_at_its_usage_limit_waits_for_the_reset_and_resumes() {
    let env = TestEnv::new();
    let ran = fan_at_a_usage_limit(&env, true);
    let v = ran.json();
    assert_eq!(ran.code, 0, "{v:#}\n{}", ran.stderr);
    assert!(
        ran.stderr.contains("line 1: waiting until ")
            && ran.stderr.contains("(usage limit), then resuming run w1"),
        "{}",
        ran.stderr
    );
    assert_eq!(v["tasks"][0]["status"], "completed", "{v:#}");
    let first = env.read_json(&env.attempt_dir("w1", 1).join("result.json"));
    assert_eq!(first["failure_kind"], "usage_limit", "{first:#}");
    let second = env.read_json(&env.attempt_dir("w1", 2).join("result.json"));
    assert_eq!(second["attempt"], 2, "{second:#}");
    assert_eq!(second["resumed_from"], 1, "{second:#}");
    assert_eq!(second["output"]["final_text"], "resumed", "{second:#}");
    let spec = env.read_json(&env.attempt_dir("w1", 2).join("spec.json"));
    let reset = first["output"]["usage_limit"]["retry_at"].as_str().unwrap();
    assert_eq!(spec["start_at"]["at"], reset, "{spec:#}");
    let began = humantime::parse_rfc3339_weak(second["started_at"].as_str().unwrap()).unwrap();
    assert!(
        began >= humantime::parse_rfc3339_weak(reset).unwrap(),
        "{second:#}"
    );
    env.assert_no_leftovers();
}

/// A usage limit whose CLI said no reset time cannot be waited for: the fan-out says so, and
/// the task ends as it is (`usage_limit`, the fan-out's exit 75); no second attempt.
#[test]
fn a_usage_limit_without_a_reset_time_is_not_waited_for() {
    let env = TestEnv::new();
    let ran = fan_at_a_usage_limit(&env, false);
    let v = ran.json();
    assert_eq!(ran.code, 75, "{v:#}\n{}", ran.stderr);
    assert!(
        ran.stderr
            .contains("line 1: its usage limit cannot be waited for"),
        "{}",
        ran.stderr
    );
    assert_eq!(v["tasks"][0]["status"], "failed", "{v:#}");
    assert_eq!(v["tasks"][0]["failure_kind"], "usage_limit", "{v:#}");
    assert_eq!(v["tasks"][1]["status"], "completed", "{v:#}");
    assert!(!env.attempt_dir("w1", 2).exists());
    env.assert_no_leftovers();
}
