//! Faults around an attempt: a supervisor or worker killed with SIGKILL, the tmux server
//! killed, many attempts racing the private server's start and exit, an unwritable home and
//! a full disk. The attempt's record must stay consistent and nothing may leak.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::harness::{
    self, BIN, TestEnv, agent_pid, assert_valid_envelope, fixture, pid_alive, send_signal,
    shell_quote, wait_for_text, wait_pid_gone,
};

fn fx(name: &str) -> String {
    fixture(name).display().to_string()
}

fn spawn_run(env: &TestEnv, args: &[&str]) -> Child {
    env.cmd()
        .arg("run")
        .arg("--json")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn subpane run")
}

/// How long any one `subpane` command here may take before the test fails instead of hanging.
const LIMIT: Duration = Duration::from_secs(20);

fn finish(child: Child) -> harness::Ran {
    harness::wait_child_within(child, LIMIT, "subpane did not return")
}

/// A program that waits until `gate` exists in its working directory, then exits 7.
const EXIT_7_AT_GATE: &str =
    "echo waiting; while [ ! -e gate ]; do sleep 0.05; done; echo through; exit 7";

// ---- a supervisor or worker killed ----------------------------------------------------

#[test]
fn run_killed_with_sigkill_leaves_the_attempt_running_and_wait_readopts_it() {
    let env = TestEnv::new();
    let mut run = spawn_run(&env, &["--run-id", "k", "--", "bash", "-c", EXIT_7_AT_GATE]);
    wait_for_text(&env.attempt_dir("k", 1).join("stdout.log"), "waiting");
    let worker = env.worker_pid("k");
    let agent = agent_pid(&env, "k");
    run.kill().unwrap(); // SIGKILL
    let _ = run.wait();
    // Nothing noticed: the attempt runs on.
    assert!(
        pid_alive(worker) && pid_alive(agent),
        "the attempt died with its supervisor"
    );
    let s = env.sp(["status", "k", "--json"]);
    assert_eq!(s.code, 3, "status of a running attempt: {s:?}");
    assert_eq!(s.json()["status"], "running");
    assert!(!env.attempt_dir("k", 1).join("result.json").exists());
    // A later waiter adopts it and reports how it really ended.
    let wait = env
        .cmd()
        .args(["wait", "k", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::fs::write(env.work.join("gate"), b"").unwrap();
    let w = finish(wait);
    assert_eq!(w.code, 1, "{w:?}");
    let v = w.json();
    assert_valid_envelope(&v);
    assert_eq!(v["status"], "failed");
    assert_eq!(v["failure_kind"], "exit");
    assert_eq!(v["exit_code"], 7);
    assert_eq!(env.result("k"), v);
    env.assert_no_leftovers();
}

#[test]
fn worker_killed_while_run_waits_gives_lost() {
    let env = TestEnv::new();
    let run = spawn_run(&env, &["--run-id", "w", "--", &fx("never_exits.sh")]);
    wait_for_text(&env.attempt_dir("w", 1).join("stdout.log"), "started");
    let worker = env.worker_pid("w");
    let agent = agent_pid(&env, "w");
    send_signal(worker, libc::SIGKILL);
    let r = finish(run);
    assert_eq!(r.code, 1, "{r:?}");
    let v = r.json();
    assert_valid_envelope(&v);
    assert_eq!(v["status"], "failed");
    assert_eq!(v["failure_kind"], "lost");
    assert!(
        !v["output"]["errors"].as_array().unwrap().is_empty(),
        "a lost envelope says why: {v}"
    );
    assert_eq!(env.result("w"), v);
    wait_pid_gone(agent);
    env.assert_no_leftovers();
}

/// Starts a detached never-ending run, SIGKILLs its worker, and waits for the worker to die.
fn detached_run_with_dead_worker(env: &TestEnv, id: &str) -> i32 {
    let r = env.sp([
        "run",
        "--detach",
        "--run-id",
        id,
        "--",
        &fx("never_exits.sh"),
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    wait_for_text(&env.attempt_dir(id, 1).join("stdout.log"), "started");
    let worker = env.worker_pid(id);
    let agent = agent_pid(env, id);
    send_signal(worker, libc::SIGKILL);
    wait_pid_gone(worker);
    assert!(
        !env.attempt_dir(id, 1).join("result.json").exists(),
        "a SIGKILLed worker wrote a result"
    );
    agent
}

#[test]
fn worker_killed_while_nobody_waits_is_lost_at_next_status() {
    let env = TestEnv::new();
    let agent = detached_run_with_dead_worker(&env, "w");
    let s = env.sp(["status", "w", "--json"]);
    assert_eq!(s.code, 1, "{s:?}");
    let v = s.json();
    assert_valid_envelope(&v);
    assert_eq!(v["status"], "failed");
    assert_eq!(v["failure_kind"], "lost");
    // The observer wrote it down, once: the next look reads the same envelope.
    assert_eq!(env.result("w"), v);
    assert_eq!(env.sp(["status", "w", "--json"]).json(), v);
    wait_pid_gone(agent);
    env.assert_no_leftovers();
}

#[test]
fn worker_killed_while_nobody_waits_is_lost_at_next_ls() {
    let env = TestEnv::new();
    let agent = detached_run_with_dead_worker(&env, "w");
    let l = env.sp(["ls", "--json"]);
    assert_eq!(l.code, 0, "{l:?}");
    let rows = l.json();
    let row = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["run_id"] == "w")
        .unwrap_or_else(|| panic!("{rows}"));
    assert_eq!(row["status"], "failed");
    assert_eq!(row["failure_kind"], "lost");
    let v = env.result("w");
    assert_valid_envelope(&v);
    assert_eq!(v["failure_kind"], "lost");
    wait_pid_gone(agent);
    env.assert_no_leftovers();
}

#[test]
fn tmux_server_killed_under_a_detached_run_gives_lost() {
    let env = TestEnv::new();
    let r = env.sp([
        "run",
        "--detach",
        "--run-id",
        "t",
        "--",
        &fx("never_exits.sh"),
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    wait_for_text(&env.attempt_dir("t", 1).join("stdout.log"), "started");
    let worker = env.worker_pid("t");
    let agent = agent_pid(&env, "t");
    let k = env.tmux().arg("kill-server").output().unwrap();
    assert!(k.status.success(), "{k:?}");
    wait_pid_gone(worker);
    let s = env.sp(["status", "t", "--json"]);
    assert_eq!(s.code, 1, "{s:?}");
    let v = s.json();
    assert_valid_envelope(&v);
    assert_eq!(v["status"], "failed");
    assert_eq!(v["failure_kind"], "lost");
    assert_eq!(env.result("t"), v);
    assert!(!pid_alive(agent));
    env.assert_no_leftovers();
}

/// No `subpane` command runs after the kill: the envelope must come from the worker itself,
/// which sees its pane hang up (SIGHUP), stops the program and records `lost`.
#[test]
fn session_killed_under_a_detached_run_makes_the_worker_write_lost() {
    let env = TestEnv::new();
    let r = env.sp([
        "run", "--detach", "--json", "--run-id", "pk", "--", "sleep", "30",
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let session = r.json()["tmux"]["session"].as_str().unwrap().to_owned();
    let worker = env.worker_pid("pk");
    let agent = agent_pid(&env, "pk");
    let k = env
        .tmux()
        .args(["kill-session", "-t", &format!("={session}")])
        .output()
        .unwrap();
    assert!(k.status.success(), "{k:?}");
    let result = env.attempt_dir("pk", 1).join("result.json");
    let v = harness::wait_until(
        "the worker's result.json after its session was killed",
        || {
            std::fs::read(&result)
                .ok()
                .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        },
    );
    assert_valid_envelope(&v);
    assert_eq!(v["status"], "failed", "{v}");
    assert_eq!(v["failure_kind"], "lost", "{v}");
    let errors = v["output"]["errors"].as_array().unwrap();
    assert!(
        errors.iter().any(|e| e
            .as_str()
            .is_some_and(|e| e.starts_with("the pane closed under the worker"))),
        "the worker's own message is missing (an observer wrote this envelope?): {v}"
    );
    assert_eq!(v["signals_sent"][0], "SIGTERM", "{v}");
    let facts = env.read_json(&env.attempt_dir("pk", 1).join("worker.json"));
    assert_eq!(facts["state"], "finished", "{facts}");
    assert_eq!(facts["kill_reason"], "pane_closed", "{facts}");
    // The worker reaps the program before it writes the envelope.
    assert!(!pid_alive(agent), "the program outlived its envelope");
    wait_pid_gone(worker);
    assert!(!env.has_session(&session));
    env.assert_no_leftovers();
}

// ---- many attempts at once ------------------------------------------------------------

fn run_true(env: &TestEnv, id: &str) -> harness::Ran {
    env.sp(["run", "--json", "--run-id", id, "--", "true"])
}

fn assert_all_completed(results: Vec<(String, harness::Ran)>) {
    let bad: Vec<String> = results
        .iter()
        .filter(|(_, r)| r.code != 0 || r.json()["status"] != "completed")
        .map(|(id, r)| {
            format!(
                "{id}: exit {} stdout {} stderr {}",
                r.code, r.stdout, r.stderr
            )
        })
        .collect();
    assert!(
        bad.is_empty(),
        "{} of {} attempts failed:\n{}",
        bad.len(),
        results.len(),
        bad.join("\n")
    );
}

#[test]
fn fifty_attempts_started_at_once_all_complete() {
    let env = TestEnv::new();
    let barrier = std::sync::Barrier::new(50);
    let results: Vec<(String, harness::Ran)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..50)
            .map(|i| {
                let (env, barrier) = (&env, &barrier);
                s.spawn(move || {
                    let id = format!("p{i}");
                    barrier.wait();
                    let r = run_true(env, &id);
                    (id, r)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_all_completed(results);
    assert_eq!(
        std::fs::read_dir(env.home.join("runs")).unwrap().count(),
        50
    );
    env.assert_no_leftovers();
}

#[test]
fn attempts_starting_as_others_end_race_the_servers_exit() {
    let env = TestEnv::new();
    // Four chains of short attempts, each started the moment the one before it ended: the
    // server keeps losing its last session just as a new one is asked for.
    let results: Vec<(String, harness::Ran)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let env = &env;
                s.spawn(move || {
                    (0..12)
                        .map(|i| format!("c{t}-{i}"))
                        .map(|id| (id.clone(), run_true(env, &id)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    assert_all_completed(results);
    env.assert_no_leftovers();
}

// ---- the home cannot be written -------------------------------------------------------

/// Every path under `dir`, sorted.
fn tree(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(p.clone());
            }
            out.push(p);
        }
    }
    out.sort();
    out
}

#[test]
fn home_under_a_regular_file_is_refused_and_nothing_is_created() {
    let env = TestEnv::new();
    let file = env.root.path().join("not-a-dir");
    std::fs::write(&file, b"x").unwrap();
    let before = tree(env.root.path());
    let home = file.join("home");
    let r = env.sp([
        OsArg::from("--home"),
        home.as_os_str().into(),
        "run".into(),
        "--".into(),
        "echo".into(),
        "hi".into(),
    ]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stdout.is_empty(), "{r:?}");
    assert!(
        r.stderr.contains("subpane: error:") && r.stderr.contains(&home.display().to_string()),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("--home") || r.stderr.contains("SUBPANE_HOME"),
        "the message says what to do: {}",
        r.stderr
    );
    assert_eq!(tree(env.root.path()), before, "something was created");
    assert!(
        !env.server_alive(),
        "a tmux server was started for a run that could not be recorded"
    );
    env.assert_no_leftovers();
}

type OsArg = std::ffi::OsString;

// ---- a full disk ----------------------------------------------------------------------

/// Runs `script` with bash in a private mount namespace where `$H` is a 256 KiB tmpfs, with
/// `subpane` as `$SP` and this test's socket. Returns what the script printed. Fails the test
/// when no tmpfs could be mounted (whatever the script's output would then say proves
/// nothing) or when the script does not exit 0 (its last command must succeed).
fn in_tiny_home(env: &TestEnv, script: &str) -> harness::Ran {
    harness::require_tool("unshare", &["--version"], "util-linux");
    let mount = env.root.path().join("tiny");
    std::fs::create_dir_all(&mount).unwrap();
    // Written outside the tmpfs, and only once it is mounted.
    let mounted = env.root.path().join("tiny.mounted");
    let full = format!(
        "set -u\nmount -t tmpfs -o size=256k,mode=0700 tmpfs \"$H\" || exit 99\n: >\"$H.mounted\"\n{script}"
    );
    let out = Command::new("unshare")
        .args([
            "--mount",
            "--propagation",
            "private",
            "--",
            "bash",
            "-c",
            &full,
        ])
        .env("H", &mount)
        .env("SP", BIN)
        .env("SUBPANE_TMUX_SOCKET", &env.socket)
        .env_remove("SUBPANE_HOME")
        .env("NO_COLOR", "1")
        .env_remove("TMUX")
        .env_remove("TMUX_PANE")
        .current_dir(&env.work)
        .stdin(Stdio::null())
        .output()
        .expect("run unshare");
    let r: harness::Ran = out.into();
    assert!(
        mounted.exists(),
        "cannot mount a tmpfs in a private mount namespace (unshare --mount, then mount -t \
         tmpfs; both need CAP_SYS_ADMIN): exit {}, stderr:\n{}",
        r.code,
        r.stderr
    );
    assert_eq!(r.code, 0, "the script in the tiny home failed: {r:?}");
    r
}

/// A shell function `fill` that writes until the file system of `$H` is full.
const FILL: &str = "fill() { dd if=/dev/zero of=\"$H/fill\" bs=4k >/dev/null 2>&1; true; }\n";

#[test]
fn full_disk_before_the_run_is_refused_and_leaves_no_half_written_run() {
    let env = TestEnv::new();
    // A first run makes the home (tmux.conf, runs/); then the disk fills up.
    let r = in_tiny_home(
        &env,
        &format!(
            "{FILL}\"$SP\" --home \"$H\" run --run-id first -- true >/dev/null || echo first_rc=$?\nfill\n\
             \"$SP\" --home \"$H\" run --run-id second -- echo hi\necho \"run_rc=$?\"\n\
             echo '--- status'; \"$SP\" --home \"$H\" status second; echo \"status_rc=$?\"\n\
             echo '--- tree'; find \"$H/runs\" | sort\n"
        ),
    );
    assert!(
        !r.stdout.contains("first_rc"),
        "the first run failed on an empty disk: {r:?}"
    );
    // Nothing could be recorded, so nothing was started: exit 2 with a message about space.
    assert!(r.stdout.contains("run_rc=2\n"), "{r:?}");
    assert!(r.stderr.contains("No space left on device"), "{}", r.stderr);
    assert!(r.stderr.contains("nothing was started"), "{}", r.stderr);
    // The half-made run directory was removed: `second` does not exist at all.
    let tree = r.stdout.split("--- tree").nth(1).unwrap();
    assert!(
        !tree.contains("/runs/second"),
        "a half-written run was left:\n{tree}"
    );
    assert!(
        tree.contains("/runs/first/attempts/1/result.json"),
        "{tree}"
    );
    assert!(
        r.stdout.contains("status_rc=2"),
        "status of the refused run: {r:?}"
    );
    env.assert_no_leftovers();
}

#[test]
fn full_home_before_anything_exists_is_refused() {
    let env = TestEnv::new();
    let r = in_tiny_home(
        &env,
        &format!(
            "{FILL}fill\n\"$SP\" --home \"$H\" run -- echo hi\necho \"rc=$?\"\nrm \"$H/fill\"\nfind \"$H\" | sort\n"
        ),
    );
    assert!(r.stdout.contains("rc=2\n"), "{r:?}");
    assert!(r.stderr.contains("No space left on device"), "{}", r.stderr);
    // Nothing but the mount point itself remains once the filler is gone.
    let listed: Vec<&str> = r.stdout.lines().filter(|l| l.starts_with('/')).collect();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert!(!env.server_alive());
    env.assert_no_leftovers();
}

/// Shell code that waits until `run` has written the attempt's `launch.json`.
const WAIT_LAUNCH: &str =
    "while [ ! -e \"$SUBPANE_ATTEMPT_DIR/launch.json\" ]; do sleep 0.01; done; ";

/// Shell code that waits until the worker has named itself in `worker.json` (it does so right
/// after starting the program), so that filling the disk cannot race that write.
const WAIT_WORKER_JSON: &str =
    "while [ ! -e \"$SUBPANE_ATTEMPT_DIR/worker.json\" ]; do sleep 0.01; done; ";

/// Shell code that fills the disk of `$H`, then appends what it saw to `$H.seen` (outside the
/// tmpfs, where the full disk cannot refuse it):
/// `SEEN <run> avail=<free blocks> probe=refused|written launch_json=yes|no`.
const FILL_AND_REPORT: &str = "dd if=/dev/zero of=\"$H/fill\" bs=4k >/dev/null 2>&1; \
     if printf x >\"$H/probe\" 2>/dev/null; then p=written; else p=refused; fi; rm -f \"$H/probe\"; \
     if [ -e \"$SUBPANE_ATTEMPT_DIR/launch.json\" ]; then l=yes; else l=no; fi; \
     echo \"SEEN $SUBPANE_RUN_ID avail=$(stat -f -c %a \"$H\") probe=$p launch_json=$l\" >>\"$H.seen\"; ";

#[test]
fn disk_filling_during_the_run_leaves_a_consistent_record() {
    let env = TestEnv::new();
    // The program fills the disk once `run` and the worker have recorded the launch, then
    // exits 0. Nothing frees space before the worker writes its result, so that write fails.
    let r = in_tiny_home(
        &env,
        &format!(
            "\"$SP\" --home \"$H\" run --json --run-id full -- bash -c {prog}\necho \"run_rc=$?\" >&2\n\
             D=\"$H/runs/full/attempts/1\"\n\
             if [ -e \"$D/result.json\" ]; then echo result_after_run=yes >&2; else echo result_after_run=no >&2; fi\n\
             ls -a \"$D\" | grep '^\\.tmp-' && echo TEMP_LEFT >&2\n\
             echo \"fill_bytes=$(stat -c %s \"$H/fill\")\" >&2\n\
             cat \"$H.seen\" >&2\n\
             rm -f \"$H/fill\"\n\
             echo '--- status'\n\"$SP\" --home \"$H\" status --json full\necho \"status_rc=$?\" >&2\n",
            prog = shell_quote(&format!(
                "{WAIT_LAUNCH}{WAIT_WORKER_JSON}{FILL_AND_REPORT}exit 0"
            )),
        ),
    );
    let err = &r.stderr;
    // The race happened: the disk was full when the program exited, before the worker's end.
    assert!(
        err.contains("SEEN full avail=0 probe=refused launch_json=yes"),
        "the program did not leave the disk full: {r:?}"
    );
    let fill: u64 = err
        .split("fill_bytes=")
        .nth(1)
        .and_then(|s| s.lines().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no fill file: {r:?}"));
    assert!(fill > 0, "{r:?}");
    assert!(
        !err.contains("launch.json"),
        "`run` could not record the launch: {r:?}"
    );
    assert!(
        !err.contains("TEMP_LEFT"),
        "temp files were left in the attempt dir: {r:?}"
    );
    // What this build does: the worker's write of result.json fails (its end on the pane says
    // so, nowhere else), `run` finds the worker gone and cannot write `lost` either (exit 1,
    // a message about space), and the first look after space is freed writes `lost`.
    assert!(err.contains("run_rc=1\n"), "{r:?}");
    assert!(err.contains("result_after_run=no"), "{r:?}");
    assert!(
        err.contains("result.json: No space left on device"),
        "`run` does not say why it has no envelope: {err}"
    );
    assert!(err.contains("status_rc=1\n"), "{r:?}");
    let status_doc = r.stdout.split("--- status").nth(1).unwrap();
    let v: Value =
        serde_json::from_str(status_doc).unwrap_or_else(|e| panic!("status --json: {e}\n{r:?}"));
    assert_valid_envelope(&v);
    assert_eq!(v["status"], "failed", "{v}");
    assert_eq!(v["failure_kind"], "lost", "{v}");
    assert!(
        v["output"]["errors"][0]
            .as_str()
            .unwrap()
            .contains("ended without writing a result"),
        "{v}"
    );
    env.assert_no_leftovers();
}

/// The disk fills between the pane's start and `run`'s write of `launch.json`. A tmux hook on
/// the private server holds every `new-session` (and so `run`, which writes launch.json right
/// after it) until the program has filled the disk, so that write fails every time. `run`
/// must not give up on the attempt it started: the worker named itself in worker.json, so
/// `run` waits for it and never returns while the program runs on.
#[test]
fn run_keeps_waiting_for_an_attempt_whose_launch_json_cannot_be_written() {
    let env = TestEnv::new();
    // The program records its pid, fills the disk once worker.json exists, lets the hook go
    // on, and lingers so that an abandoned attempt is visible.
    let prog = shell_quote(&format!(
        "echo $$ >\"$H.pid\"; {WAIT_WORKER_JSON}{FILL_AND_REPORT}: >\"$H.filled\"; sleep 2; exit 0"
    ));
    let r = in_tiny_home(
        &env,
        &format!(
            r#""$SP" --home "$H" run --run-id warm -- true >/dev/null || echo "WARM_FAILED rc=$?"
tmux -S "$SUBPANE_TMUX_SOCKET" set-hook -g after-new-session \
  "run-shell 'for i in \$(seq 1000); do [ -e $H.filled ] && break; sleep 0.01; done'" || echo HOOK_FAILED
for i in 1 2 3; do
  rm -f "$H.filled" "$H.pid"
  "$SP" --home "$H" run --json --run-id r$i -- bash -c {prog} >/dev/null 2>"$H.err"
  rc=$?
  if grep -q 'launch.json: No space left on device' "$H.err"; then echo "LAUNCH_JSON_REFUSED r$i rc=$rc"; fi
  pid=$(cat "$H.pid" 2>/dev/null || echo none)
  if [ "$pid" = none ]; then echo "NO_PROGRAM r$i rc=$rc: $(cat "$H.err")"
  elif kill -0 "$pid" 2>/dev/null; then echo "ABANDONED r$i rc=$rc: $(cat "$H.err")"; fi
  rm -f "$H/fill"; "$SP" --home "$H" cancel r$i >/dev/null 2>&1; rm -f "$H/fill"
done
cat "$H.seen"
"#
        ),
    );
    let out = &r.stdout;
    for bad in ["WARM_FAILED", "HOOK_FAILED", "NO_PROGRAM"] {
        assert!(!out.contains(bad), "{r:?}");
    }
    assert!(
        !out.contains("ABANDONED"),
        "`run` returned while its attempt ran on:\n{out}"
    );
    // The race was tested in every round: the disk was full before launch.json existed, and
    // `run`'s write of it failed. (`run` then has no space for an envelope either: exit 1.)
    let raced = (1..=3)
        .filter(|i| out.contains(&format!("SEEN r{i} avail=0 probe=refused launch_json=no")))
        .count();
    let refused = (1..=3)
        .filter(|i| out.contains(&format!("LAUNCH_JSON_REFUSED r{i} rc=1\n")))
        .count();
    assert_eq!(
        (raced, refused),
        (3, 3),
        "rounds where the disk filled before launch.json, and where writing it failed (of 3):\n{r:?}"
    );
    env.assert_no_leftovers();
}

// ---- attempts whose pane never started ----------------------------------------------

#[test]
fn a_pane_that_cannot_start_gives_a_spawn_envelope() {
    let env = TestEnv::new();
    // tmux cannot make its socket under a regular file.
    let blocker = env.root.path().join("not-a-dir");
    std::fs::write(&blocker, "").unwrap();
    let r: harness::Ran = env
        .cmd()
        .env("SUBPANE_TMUX_SOCKET", blocker.join("tmux.sock"))
        .args(["run", "--json", "--run-id", "nopane", "--", "true"])
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, 1, "{r:?}");
    let v = r.json();
    assert_valid_envelope(&v);
    assert_eq!(v["status"], "failed");
    assert_eq!(v["failure_kind"], "spawn");
    assert_eq!(v["exit_code"], Value::Null);
    let err = v["output"]["errors"][0].as_str().unwrap();
    assert!(err.contains("tmux pane could not be started"), "{err}");
    assert!(
        r.stderr.contains("tmux pane could not be started"),
        "{}",
        r.stderr
    );
    assert_eq!(
        env.result("nopane"),
        v,
        "result.json and the printed envelope differ"
    );
    let dir = env.attempt_dir("nopane", 1);
    assert!(
        !dir.join(".env").exists(),
        "the environment file stayed on disk"
    );
    // --detach gets the same answer instead of a run id.
    let r: harness::Ran = env
        .cmd()
        .env("SUBPANE_TMUX_SOCKET", blocker.join("tmux.sock"))
        .args([
            "run", "--detach", "--json", "--run-id", "nopane2", "--", "true",
        ])
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(r.json()["failure_kind"], "spawn");
    env.assert_no_leftovers();
}

/// A run directory as a launcher leaves it when it dies between writing the spec and starting
/// the pane: spec.json and run.json, no launch.json, no worker.json.
fn orphan_run(env: &TestEnv, id: &str, spec_age: Duration) {
    let model = format!("model-{id}");
    let done = env.sp(["run", "--json", "--run-id", &model, "--", "true"]);
    assert_eq!(done.code, 0, "{done:?}");
    let dir = env.attempt_dir(id, 1);
    std::fs::create_dir_all(&dir).unwrap();
    let mut spec = env.read_json(&env.attempt_dir(&model, 1).join("spec.json"));
    spec["run_id"] = id.into();
    let spec_path = dir.join("spec.json");
    std::fs::write(&spec_path, serde_json::to_vec(&spec).unwrap()).unwrap();
    let mut run = env.read_json(&env.run_dir(&model).join("run.json"));
    run["run_id"] = id.into();
    std::fs::write(
        env.run_dir(id).join("run.json"),
        serde_json::to_vec(&run).unwrap(),
    )
    .unwrap();
    let then = std::time::SystemTime::now() - spec_age;
    std::fs::File::options()
        .write(true)
        .open(&spec_path)
        .unwrap()
        .set_modified(then)
        .unwrap();
}

#[test]
fn an_attempt_that_never_got_a_worker_is_starting_then_lost() {
    let env = TestEnv::new();
    orphan_run(&env, "fresh", Duration::ZERO);
    let r = env.sp(["status", "--json", "fresh"]);
    assert_eq!(r.code, 3, "{r:?}");
    assert_eq!(r.json()["status"], "starting");
    assert!(!env.attempt_dir("fresh", 1).join("result.json").exists());
    // Past the starting grace (30 s) with still no worker: lost, recorded once.
    orphan_run(&env, "stale", Duration::from_secs(60));
    let r = env.sp(["status", "--json", "stale"]);
    assert_eq!(r.code, 1, "{r:?}");
    let v = r.json();
    assert_valid_envelope(&v);
    assert_eq!(v["failure_kind"], "lost");
    assert!(
        v["output"]["errors"][0]
            .as_str()
            .unwrap()
            .contains("no worker was recorded"),
        "{v}"
    );
    assert_eq!(env.result("stale"), v);
    // `wait` on it answers at once with the same envelope.
    let w = env.sp(["wait", "--json", "stale"]);
    assert_eq!(w.code, 1);
    assert_eq!(w.json(), v);
}

#[test]
fn logs_follow_ends_when_the_worker_is_killed() {
    let env = TestEnv::new();
    let id = env
        .sp([
            "run",
            "--detach",
            "--run-id",
            "lf",
            "--",
            &fx("never_exits.sh"),
        ])
        .stdout
        .trim()
        .to_owned();
    let worker = env.worker_pid(&id);
    let follower = env
        .cmd()
        .args(["logs", "-f", &id])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    send_signal(worker, libc::SIGKILL);
    let r = harness::wait_child_within(
        follower,
        harness::DEADLINE,
        "logs -f did not notice the lost worker",
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(env.result(&id)["failure_kind"], "lost");
    env.assert_no_leftovers();
}

/// The disk fills while the program writes: the lines the logs could not take are counted as
/// lost (never as kept), the envelope says so, and the lines before and after are kept.
#[test]
fn log_lines_lost_to_a_full_disk_are_counted_and_reported() {
    let env = TestEnv::new();
    let prog = shell_quote(&format!(
        "echo before; {WAIT_WORKER_JSON}\
         dd if=/dev/zero of=\"$H/fill\" bs=4k >/dev/null 2>&1; \
         for i in $(seq 1000); do echo \"lost line $i\"; done; \
         for i in $(seq 200); do echo \"lost stderr line $i\" >&2; done; \
         sleep 0.5; rm -f \"$H/fill\"; sleep 0.2; echo after; exit 0"
    ));
    let r = in_tiny_home(
        &env,
        &format!(
            "\"$SP\" --home \"$H\" run --json --run-id lossy -- bash -c {prog}\necho \"rc=$?\" >&2\n"
        ),
    );
    assert!(r.stderr.contains("rc=0"), "{r:?}");
    let v: Value = serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {r:?}"));
    assert_valid_envelope(&v);
    let f = &v["filter"];
    let lost = f["lost_lines"].as_u64().unwrap();
    let plain = f["plain_lines"].as_u64().unwrap();
    assert!(
        lost > 0,
        "no line was lost, so the disk was never full: {v}"
    );
    // Every line is counted once: written, or lost.
    assert_eq!(plain + lost, 1002, "{f}");
    assert!(f["lost_stderr_bytes"].as_u64().unwrap() > 0, "{f}");
    let errors = v["output"]["errors"].to_string();
    assert!(
        errors.contains("stdout.log") && errors.contains("could not be written"),
        "{errors}"
    );
    assert!(errors.contains("stderr.log"), "{errors}");
    env.assert_no_leftovers();
}

/// A worker started for an attempt that already has its envelope (a pane a slow tmux server
/// made after subpane gave up on it and wrote `spawn`) runs nothing and changes nothing.
#[test]
fn a_worker_started_after_its_attempt_ended_runs_nothing() {
    let env = TestEnv::new();
    let r = env.sp(["run", "--json", "--run-id", "ended", "--", "true"]);
    assert_eq!(r.code, 0, "{r:?}");
    let dir = env.attempt_dir("ended", 1);
    let flag = env.root.path().join("ran");
    let spec_path = dir.join("spec.json");
    let mut spec = env.read_json(&spec_path);
    spec["argv"] = serde_json::json!(["touch", flag.display().to_string()]);
    std::fs::write(&spec_path, spec.to_string()).unwrap();
    let before = std::fs::read(dir.join("result.json")).unwrap();
    let out = env
        .cmd()
        .arg("__worker")
        .arg(&dir)
        .output()
        .expect("run the worker");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("has ended"),
        "{out:?}"
    );
    assert!(!flag.exists(), "the program ran again");
    assert_eq!(std::fs::read(dir.join("result.json")).unwrap(), before);
    env.assert_no_leftovers();
}

// ---- a worker that finds its attempt already in some state ------------------------------

/// Runs a worker on a second attempt directory of run `model` (a `true` that completed),
/// which no launcher started: attempt 1's spec and the `files` given. Its envelope.
fn worker_on_attempt_with(env: &TestEnv, files: &[(&str, &str)]) -> (PathBuf, Value) {
    let r = env.sp(["run", "--json", "--run-id", "model", "--", "true"]);
    assert_eq!(r.code, 0, "{r:?}");
    let dir = env.run_dir("model").join("attempts").join("2");
    std::fs::create_dir(&dir).unwrap();
    std::fs::copy(
        env.attempt_dir("model", 1).join("spec.json"),
        dir.join("spec.json"),
    )
    .unwrap();
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    let out = env
        .cmd()
        .arg("__worker")
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(out.success(), "{out:?}");
    let result = env.read_json(&dir.join("result.json"));
    (dir, result)
}

/// The worker reads the environment file just before it starts the program. A start that
/// fails before that (here: its log's name is taken) must still leave no value on disk.
#[test]
fn a_start_that_fails_before_the_environment_was_read_leaves_no_value_on_disk() {
    let env = TestEnv::new();
    let secret = "s3cr3t-9d0e7a";
    let (dir, result) = worker_on_attempt_with(
        &env,
        &[
            (".env", &format!("SECRET_Z={secret}\0")),
            ("events.jsonl", ""),
        ],
    );
    assert_eq!(result["status"], "failed", "{result}");
    assert_eq!(result["failure_kind"], "spawn", "{result}");
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_file() {
            let text = String::from_utf8_lossy(&std::fs::read(&p).unwrap()).into_owned();
            assert!(!text.contains(secret), "{} holds the value", p.display());
        }
    }
    env.assert_no_leftovers();
}

/// A cancel written before the worker started its program: nothing runs, and the envelope
/// still says who asked (as for a cancel that came later).
#[test]
fn a_cancel_before_the_start_says_who_asked() {
    let env = TestEnv::new();
    let (_, result) = worker_on_attempt_with(
        &env,
        &[
            (".env", "A=b\0"),
            (
                "cancel.json",
                r#"{"id":"1f","requested_at":"2026-12-01T00:00:00.000Z","grace_ms":1000,"by":"the test"}"#,
            ),
        ],
    );
    assert_eq!(result["status"], "cancelled", "{result}");
    let errors = result["output"]["errors"].to_string();
    assert!(errors.contains("cancelled by the test"), "{errors}");
    env.assert_no_leftovers();
}

// ---- an attempt directory removed under a waiting run -------------------------------------

/// How soon after its worker's end a wait on a vanished attempt must have ended.
const SOON: Duration = Duration::from_secs(10);

/// Starts a foreground `run` of `waits_for_flag.sh` as `id` and waits until the program
/// runs; the child, the flag and the worker's pid.
fn foreground_waiting(env: &TestEnv, id: &str) -> (Child, PathBuf, i32) {
    let flag = env.root.path().join(format!("flag-{id}"));
    let child = spawn_run(
        env,
        &[
            "--run-id",
            id,
            "--",
            &fx("waits_for_flag.sh"),
            flag.to_str().unwrap(),
        ],
    );
    wait_for_text(&env.attempt_dir(id, 1).join("stdout.log"), "waiting for");
    let worker = env.worker_pid(id);
    (child, flag, worker)
}

fn assert_vanished(r: &harness::Ran, dir: &Path) {
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr.contains(&format!(
            "the attempt directory {} was removed while the attempt ran",
            dir.display()
        )),
        "no clear error: {r:?}"
    );
}

/// Removes an attempt's directory at once, as `rm -rf` would in the end: moved away in one
/// step (the worker may be writing in it), then removed.
fn vanish(env: &TestEnv, dir: &Path) {
    let away = env.root.path().join("removed");
    std::fs::rename(dir, &away).unwrap();
    let _ = std::fs::remove_dir_all(&away);
}

/// Whether `pid` holds a pidfd (a waiter that has its attempt's worker in hand).
fn holds_a_pidfd(pid: u32) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| std::fs::read_link(e.path()).is_ok_and(|l| l.as_os_str() == "anon_inode:[pidfd]"))
}

#[test]
fn a_run_whose_attempt_directory_vanished_ends_with_its_worker() {
    let env = TestEnv::new();
    let (child, flag, worker) = foreground_waiting(&env, "gone");
    let dir = env.attempt_dir("gone", 1);
    vanish(&env, &dir);
    harness::touch(&flag);
    wait_pid_gone(worker);
    let r = harness::wait_child_within(child, SOON, "run waited on a vanished attempt");
    assert_vanished(&r, &dir);
    env.assert_no_leftovers();
}

#[test]
fn a_wait_whose_attempt_directory_vanished_ends_with_its_worker() {
    let env = TestEnv::new();
    let flag = harness::start_waiting(&env, "gonew", 0);
    let worker = env.worker_pid("gonew");
    let waiting = env
        .cmd()
        .args(["wait", "--json", "gonew"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = waiting.id();
    harness::wait_until("wait to hold the worker", || {
        holds_a_pidfd(pid).then_some(())
    });
    let dir = env.attempt_dir("gonew", 1);
    vanish(&env, &dir);
    harness::touch(&flag);
    wait_pid_gone(worker);
    let r = harness::wait_child_within(waiting, SOON, "wait waited on a vanished attempt");
    assert_vanished(&r, &dir);
    env.assert_no_leftovers();
}

/// Ctrl-C of a run whose attempt directory vanished: no `cancel.json` can be written, the
/// pane's worker is stopped all the same, and the run ends with the truth.
#[test]
fn ctrl_c_of_a_run_whose_attempt_directory_vanished_stops_it() {
    let env = TestEnv::new();
    let (child, _flag, worker) = foreground_waiting(&env, "gonec");
    let agent = agent_pid(&env, "gonec");
    let dir = env.attempt_dir("gonec", 1);
    vanish(&env, &dir);
    send_signal(child.id() as i32, libc::SIGINT);
    let r = harness::wait_child_within(child, LIMIT, "Ctrl-C did not end the run");
    assert_vanished(&r, &dir);
    assert!(!r.stderr.contains("cancel.json"), "{r:?}");
    // Stopped, and reaped by the pane's tmux a moment after the run saw its worker end.
    wait_pid_gone(agent);
    wait_pid_gone(worker);
    env.assert_no_leftovers();
}

/// The worker's records removed (the directory stays), then the worker killed: the waiter
/// saw it end, and writes `lost` at once, saying so.
#[test]
fn a_worker_whose_records_were_removed_is_lost_when_it_ends() {
    let env = TestEnv::new();
    let (child, _flag, worker) = foreground_waiting(&env, "norec");
    let dir = env.attempt_dir("norec", 1);
    // Stopped first, so that it writes no record again before it is killed.
    send_signal(worker, libc::SIGSTOP);
    for f in ["worker.json", "launch.json"] {
        match std::fs::remove_file(dir.join(f)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => panic!("{f}: {e}"),
            _ => {}
        }
    }
    send_signal(worker, libc::SIGKILL);
    wait_pid_gone(worker);
    let r = harness::wait_child_within(child, SOON, "run waited on a worker with no records");
    assert_eq!(r.code, 1, "{r:?}");
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_valid_envelope(&v);
    assert_eq!(v["failure_kind"], "lost", "{v}");
    let why = v["output"]["errors"][0].as_str().unwrap_or_default();
    assert!(
        why.contains(&format!("the worker (pid {worker}) ended"))
            && why.contains("had been removed"),
        "{v}"
    );
    env.assert_no_leftovers();
}
