//! The human view in the tmux pane: header, output, final status; escapes from the program
//! neutralised; the session's life; a pane that falls behind loses pane lines, never events.

use std::process::Stdio;

use serde_json::Value;

use crate::harness::{
    DEADLINE, Ran, TestEnv, assert_valid_envelope, fixture, wait_child_within, wait_until,
};

/// Waits until the pane shows `needle` (the worker writes its last lines after result.json).
fn capture_until(env: &TestEnv, session: &str, needle: &str) -> String {
    env.capture_pane_until(session, needle)
}

/// With `--keep-session` the tmux server stays up (and its command line names the worker):
/// check that the worker itself is gone, then close the kept sessions with `gc` before
/// looking for leftovers.
fn close_kept_and_assert_no_leftovers(env: &TestEnv, runs: &[&str]) {
    for run in runs {
        let w = env.read_json(&env.attempt_dir(run, 1).join("worker.json"));
        let pid = w["worker"]["pid"].as_i64().unwrap() as i32;
        wait_until("the worker to exit", || {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            (stat.is_empty()
                || stat
                    .rsplit(')')
                    .next()
                    .is_some_and(|r| r.trim_start().starts_with('Z')))
            .then_some(())
        });
    }
    let gc = env.sp(["gc", "--older-than", "0s"]);
    assert_eq!(gc.code, 0, "{gc:?}");
    env.assert_no_leftovers();
}

fn session_of(v: &Value) -> String {
    v["tmux"]["session"].as_str().unwrap().to_owned()
}

#[test]
fn the_pane_shows_header_output_stderr_and_the_final_status() {
    let env = TestEnv::new();
    let prog = fixture("mixed_output.sh");
    let r = env.sp([
        "run",
        "--json",
        "--keep-session",
        "--run-id",
        "pv",
        "--",
        prog.to_str().unwrap(),
        "3",
    ]);
    assert_eq!(r.code, 1, "{r:?}");
    let v = r.json();
    assert_valid_envelope(&v);
    let s = capture_until(&env, &session_of(&v), "session kept");
    let cwd = std::fs::canonicalize(&env.work).unwrap();
    for want in [
        "subpane ▸ run pv · attempt 1 · command".to_owned(),
        format!("$ {} 3", prog.display()),
        format!("cwd: {}", cwd.display()),
        "{\"type\":\"start\",\"n\":1}".into(),
        "hello from stdout".into(),
        "[\"an\",\"array\"]".into(),
        "second text line".into(),
        "oops on stderr".into(),
        "second stderr line".into(),
        "✘ failed (exit 3) · ".into(),
    ] {
        assert!(s.contains(&want), "the pane lacks {want:?}:\n{s}");
    }
    // Order: header, then output, then the status line.
    let at = |n: &str| s.find(n).unwrap();
    assert!(
        at("subpane ▸ run pv") < at("hello from stdout") && at("second text line") < at("✘ failed"),
        "{s}"
    );
    let ok = env.sp([
        "run",
        "--json",
        "--keep-session",
        "--run-id",
        "pv-ok",
        "--",
        "true",
    ]);
    assert_eq!(ok.code, 0, "{ok:?}");
    let s = capture_until(&env, &session_of(&ok.json()), "session kept");
    assert!(s.contains("✔ completed (exit 0) · "), "{s}");
    close_kept_and_assert_no_leftovers(&env, &["pv", "pv-ok"]);
}

#[test]
fn escapes_from_the_program_are_shown_as_text_and_do_nothing() {
    let env = TestEnv::new();
    let r = env.sp([
        "run",
        "--json",
        "--keep-session",
        "--run-id",
        "esc",
        "--",
        fixture("prints_escapes.sh").to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let session = session_of(&r.json());
    let s = capture_until(&env, &session, "session kept");
    // The clear screen and the reset did not clear: what came before is still there.
    assert!(s.contains("visible before the escapes"), "{s}");
    assert!(s.contains("subpane ▸ run esc"), "{s}");
    assert!(s.contains("visible after the escapes"), "{s}");
    // The escapes are visible text.
    for want in [
        "title ^[]0;pwned^G set",
        "clear ^[[2J^[[H done",
        "reset ^[c done",
        "utf8 c1 <U+009B>2J done",
        "stderr title ^[]0;pwned^G done",
    ] {
        assert!(s.contains(want), "the pane lacks {want:?}:\n{s}");
    }
    // A lone 0x9b byte is not UTF-8: shown as a replacement character, never as a CSI.
    assert!(s.contains("raw c1 \u{fffd}2J done"), "{s}");
    let title = env.pane_title(&session);
    assert!(
        !title.contains("pwned"),
        "the program retitled the pane: {title:?}"
    );
    // With escapes kept in the capture, no OSC or clear from the program reached the pane.
    let raw = env
        .tmux()
        .args([
            "capture-pane",
            "-p",
            "-e",
            "-S",
            "-",
            "-t",
            &format!("={session}:"),
        ])
        .output()
        .unwrap();
    let raw = String::from_utf8_lossy(&raw.stdout);
    assert!(
        !raw.contains("\x1b]0;") && !raw.contains("\x1b[2J") && !raw.contains("\x1bc"),
        "{raw:?}"
    );
    close_kept_and_assert_no_leftovers(&env, &["esc"]);
}

#[test]
fn without_keep_session_the_session_ends_with_the_attempt() {
    let env = TestEnv::new();
    let flag = env.root.path().join("flag");
    let r: Ran = env
        .cmd()
        .args(["run", "--detach", "--json", "--run-id", "eph", "--"])
        .arg(fixture("waits_for_flag.sh"))
        .arg(&flag)
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, 0, "{r:?}");
    let session = session_of(&r.json());
    assert!(
        env.has_session(&session),
        "the session exists while the attempt runs"
    );
    std::fs::write(&flag, "").unwrap();
    let w = env.sp(["wait", "eph"]);
    assert_eq!(w.code, 0, "{w:?}");
    wait_until("the session to close", || {
        (!env.has_session(&session)).then_some(())
    });
    env.assert_no_leftovers();
}

/// Resumes a stopped tmux server however the test ends (a stopped server would hang the
/// harness's `kill-server`).
struct Stopped(i32);

impl Stopped {
    fn stop(pid: i32) -> Self {
        // SAFETY: plain kill(2) on the test's own tmux server.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        // SAFETY: plain kill(2).
        unsafe { libc::kill(self.0, libc::SIGCONT) };
    }
}

fn tmux_server_pid(env: &TestEnv) -> i32 {
    let out = env
        .tmux()
        .args(["display-message", "-p", "#{pid}"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("the tmux server's pid")
}

const FLOOD: usize = 200_000;

/// Bytes `floods_output.sh` prints for `n` lines.
fn flood_bytes(n: usize) -> u64 {
    (1..=n)
        .map(|i| {
            format!("{{\"type\":\"flood\",\"n\":{i},\"pad\":\"abcdefghijklmnopqrstuvwxyz\"}}\n")
                .len() as u64
        })
        .sum()
}

fn count_lines(p: &std::path::Path) -> usize {
    std::fs::read(p)
        .unwrap()
        .iter()
        .filter(|b| **b == b'\n')
        .count()
}

#[test]
fn a_stopped_pane_loses_pane_lines_never_events() {
    let env = TestEnv::new();
    let go = env.root.path().join("go");
    let r: Ran = env
        .cmd()
        .args([
            "run",
            "--detach",
            "--keep-session",
            "--run-id",
            "flood",
            "--",
        ])
        .arg(fixture("floods_output.sh"))
        .arg(&go)
        .arg(FLOOD.to_string())
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, 0, "{r:?}");
    env.worker_pid("flood");
    let stopped = Stopped::stop(tmux_server_pid(&env));
    std::fs::write(&go, "").unwrap();
    // `subpane wait` needs nothing from tmux.
    let child = env
        .cmd()
        .args(["wait", "--json", "flood"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let w = wait_child_within(
        child,
        DEADLINE,
        "subpane wait did not return while tmux was stopped",
    );
    drop(stopped);
    assert_eq!(w.code, 0, "{w:?}");
    let v = w.json();
    assert_valid_envelope(&v);
    let dir = env.attempt_dir("flood", 1);
    assert_eq!(
        count_lines(&dir.join("events.jsonl")),
        FLOOD,
        "events.jsonl lost lines"
    );
    assert_eq!(
        std::fs::metadata(dir.join("events.jsonl")).unwrap().len(),
        flood_bytes(FLOOD)
    );
    assert_eq!(v["filter"]["kept_lines"], FLOOD as u64);
    let worker = env.read_json(&dir.join("worker.json"));
    let skipped = worker["pane_lines_skipped"].as_u64().unwrap();
    assert!(skipped > 0, "the stopped pane skipped no lines: {worker}");
    assert!(skipped < FLOOD as u64 + 10, "{skipped}");
    close_kept_and_assert_no_leftovers(&env, &["flood"]);
}

#[test]
fn a_pane_that_catches_up_says_how_many_lines_it_skipped() {
    let env = TestEnv::new();
    let go = env.root.path().join("go");
    let stop = env.root.path().join("stop");
    let r: Ran = env
        .cmd()
        .args([
            "run",
            "--detach",
            "--json",
            "--keep-session",
            "--run-id",
            "behind",
            "--",
        ])
        .arg(fixture("floods_output.sh"))
        .arg(&go)
        .arg(FLOOD.to_string())
        .arg(&stop)
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, 0, "{r:?}");
    let session = session_of(&r.json());
    env.worker_pid("behind");
    let events = env.attempt_dir("behind", 1).join("events.jsonl");
    let stopped = Stopped::stop(tmux_server_pid(&env));
    std::fs::write(&go, "").unwrap();
    // The whole flood reaches events.jsonl while tmux is stopped.
    let want = flood_bytes(FLOOD);
    wait_until("the flood in events.jsonl", || {
        (std::fs::metadata(&events).map(|m| m.len()).unwrap_or(0) >= want).then_some(())
    });
    drop(stopped);
    // Once the pane catches up, the next line it shows comes after a note.
    let s = capture_until(&env, &session, "lines skipped");
    assert!(
        s.contains("(the pane fell behind; events.jsonl has everything)"),
        "{s}"
    );
    // The lines after the flood show again once the pane has room (the flood may have used
    // up its window: the program keeps printing one every 50 ms until it is told to stop).
    capture_until(&env, &session, "after the flood");
    std::fs::write(&stop, "").unwrap();
    let w = env.sp(["wait", "--json", "behind"]);
    assert_eq!(w.code, 0, "{w:?}");
    assert_eq!(
        std::fs::metadata(&events).unwrap().len(),
        want,
        "events.jsonl holds the flood and only it"
    );
    assert_eq!(count_lines(&events), FLOOD);
    let s = capture_until(&env, &session, "session kept");
    assert!(
        s.contains("after the flood") && s.contains("✔ completed"),
        "{s}"
    );
    let worker = env.read_json(&env.attempt_dir("behind", 1).join("worker.json"));
    let skipped = worker["pane_lines_skipped"].as_u64().unwrap();
    assert!(skipped > 0, "{worker}");
    // The note counts lines: the numbers it gives add up to what worker.json says.
    let noted: u64 = s
        .lines()
        .filter_map(|l| {
            l.trim_start()
                .strip_prefix("… ")?
                .split(' ')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum();
    assert!(
        noted > 0 && noted <= skipped,
        "notes say {noted}, worker.json {skipped}:\n{s}"
    );
    close_kept_and_assert_no_leftovers(&env, &["behind"]);
}

#[test]
fn a_pane_behind_at_the_end_still_gets_the_note_and_the_status_line() {
    let env = TestEnv::new();
    let go = env.root.path().join("go");
    let r: Ran = env
        .cmd()
        .args([
            "run",
            "--detach",
            "--json",
            "--keep-session",
            "--run-id",
            "late",
            "--",
        ])
        .arg(fixture("floods_output.sh"))
        .arg(&go)
        .arg(FLOOD.to_string())
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, 0, "{r:?}");
    let session = session_of(&r.json());
    env.worker_pid("late");
    let stopped = Stopped::stop(tmux_server_pid(&env));
    std::fs::write(&go, "").unwrap();
    let child = env
        .cmd()
        .args(["wait", "--json", "late"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let w = wait_child_within(
        child,
        DEADLINE,
        "subpane wait did not return while tmux was stopped",
    );
    assert_eq!(w.code, 0, "{w:?}");
    // tmux comes back after the attempt ended: the kept pane should still end with the note
    // and the status line (today it ends mid-flood with "Pane is dead").
    drop(stopped);
    let s = capture_until(&env, &session, "✔ completed");
    assert!(s.contains("lines skipped"), "{s}");
    close_kept_and_assert_no_leftovers(&env, &["late"]);
}

/// Runs `subpane ARGS` in a new tmux session (a real terminal) on this test's server and
/// returns the screen and the pane's title once it printed everything.
fn in_a_terminal(env: &TestEnv, session: &str, args: &[&str]) -> (String, String) {
    let t = crate::terminal::Terminal::subpane(env, session, (150, 40), &[], args);
    let screen = capture_until(env, &t.session, "visible after the escapes");
    (screen, env.pane_title(&t.session))
}

#[test]
fn logs_on_a_terminal_shows_escapes_as_text_and_piped_keeps_the_bytes() {
    let env = TestEnv::new();
    let r = env.sp([
        "run",
        "--run-id",
        "esc",
        "--",
        fixture("prints_escapes.sh").to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    // Piped: byte for byte what the program wrote.
    let piped = env.cmd().args(["logs", "esc"]).output().unwrap();
    let file = std::fs::read(env.attempt_dir("esc", 1).join("stdout.log")).unwrap();
    assert_eq!(piped.stdout, file);
    assert!(piped.stdout.windows(4).any(|w| w == b"\x1b]0;"));
    // On a terminal: the escapes are text, the title is not changed.
    let (screen, title) = in_a_terminal(&env, "view-safe", &["logs", "esc"]);
    assert!(screen.contains("title ^[]0;pwned^G set"), "{screen}");
    assert!(screen.contains("utf8 c1 <U+009B>2J done"), "{screen}");
    assert!(screen.contains("visible before the escapes"), "{screen}");
    assert_ne!(title, "pwned");
    // --raw on a terminal writes the bytes: the program retitles the pane (which shows that
    // the check above can fail).
    // (The title is waited for, not the screen: the raw bytes reset and clear the screen.)
    let t = crate::terminal::Terminal::subpane(
        &env,
        "view-raw",
        (150, 40),
        &[],
        &["logs", "--raw", "esc"],
    );
    wait_until("the raw bytes to retitle the pane", || {
        (env.pane_title(&t.session) == "pwned").then_some(())
    });
    env.assert_no_leftovers();
}

/// Plain SGR colour from an ordinary tool stays colour in the pane (when colour is on);
/// a title change and a cursor move next to it are still shown as text.
#[test]
fn colour_from_the_program_stays_colour_in_the_pane_and_nothing_else_does() {
    let env = TestEnv::new();
    let script = r"printf 'colour \033[1;31mred\033[0m done\n'; printf 'move \033[5;1H title \033]0;pwned\007 done\n'; printf 'err \033[33myellow\n' >&2";
    let r: Ran = env
        .cmd()
        .env_remove("NO_COLOR")
        .args([
            "run",
            "--json",
            "--keep-session",
            "--run-id",
            "colour",
            "--",
            "sh",
            "-c",
            script,
        ])
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, 0, "{r:?}");
    let session = session_of(&r.json());
    let s = capture_until(&env, &session, "session kept");
    assert!(
        s.contains("colour red done"),
        "the colour is not kept:\n{s}"
    );
    assert!(s.contains("move ^[[5;1H title ^[]0;pwned^G done"), "{s}");
    assert!(s.contains("err yellow"), "{s}");
    let raw = env
        .tmux()
        .args(["capture-pane", "-p", "-e", "-t", &format!("={session}:")])
        .output()
        .unwrap();
    let raw = String::from_utf8_lossy(&raw.stdout);
    let line = raw.lines().find(|l| l.contains("red")).unwrap();
    assert!(line.contains("31m"), "red is not red: {line:?}");
    assert!(!env.pane_title(&session).contains("pwned"));
    close_kept_and_assert_no_leftovers(&env, &["colour"]);
}
