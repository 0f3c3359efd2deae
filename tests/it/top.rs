//! `subpane top` in a real terminal (a tmux pane of the test's own server): it shows runs as
//! they come, change and end, acts on keys with a question and an answer on its last line,
//! attaches and comes back, and gives the terminal back on every way out.

use crate::harness::{TestEnv, send_signal, start_waiting, touch, wait_until};
use crate::terminal::Terminal;

/// `subpane top; stty -a` in a terminal: once top is gone, its exit status and the terminal's
/// mode. The shell then waits (a dead pane's screen is not kept as it was), until the test
/// closes the session.
fn top_then_stty<'a>(env: &'a TestEnv, session: &str, vars: &[(&str, &str)]) -> Terminal<'a> {
    let mut sets: Vec<String> = vars.iter().map(|(k, v)| format!("{k}={v}")).collect();
    sets.push(format!("SUBPANE_HOME={}", env.home.display()));
    sets.push(format!("SUBPANE_TMUX_SOCKET={}", env.socket.display()));
    let script = format!(
        "env {} {} top; echo \"top exited $?\"; echo \"modes: $(stty -a | tr ' ;' '\\n\\n' | grep -x -e -icanon -e icanon -e -echo -e echo | tr '\\n' ' ')end\"; sleep 60",
        sets.join(" "),
        crate::harness::BIN
    );
    Terminal::command(env, session, (100, 30), &["sh".into(), "-c".into(), script])
}

/// Whether the terminal shows its alternate screen (as a full-screen program does).
fn alternate_on(t: &Terminal) -> bool {
    t.format("#{alternate_on}") == "1"
}

/// The row of `run` on the screen.
fn row<'s>(screen: &'s str, run: &str) -> Option<&'s str> {
    screen
        .lines()
        .find(|l| l.split_whitespace().any(|w| w == run) && !l.starts_with('─'))
}

#[test]
fn top_follows_runs_and_acts_on_keys_in_a_real_terminal() {
    let env = TestEnv::new();
    assert_eq!(env.sp(["run", "--run-id", "done1", "--", "true"]).code, 0);
    let t = Terminal::subpane(&env, "top", (100, 30), &[], &["top"]);
    t.wait_until("the finished run", |s| {
        row(s, "done1").is_some_and(|l| l.contains("✔ completed"))
    });
    // A run started while top runs shows up, live, with its last line.
    let flag = start_waiting(&env, "live", 0);
    t.wait_until("the new run, running, with its last event", |s| {
        row(s, "live").is_some_and(|l| l.contains("● running") && l.contains("waiting for"))
    });
    // Newest first: `live` is the first row. c asks, y cancels, the row follows.
    t.keys(&["Home", "c"]);
    t.wait_for("cancel run live? y to confirm");
    t.keys(&["y"]);
    t.wait_for("cancel requested for live");
    t.wait_until("live cancelled", |s| {
        row(s, "live").is_some_and(|l| l.contains("■ cancelled"))
    });
    // r asks, y retries: attempt 2 runs.
    t.keys(&["r"]);
    t.wait_for("retry run live as a new attempt? y to confirm");
    t.keys(&["y"]);
    t.wait_for("retried live as a new attempt: attempt 2 started");
    t.wait_until("the retry running", |s| {
        row(s, "live").is_some_and(|l| l.contains("● running"))
    });
    // Enter shows the detail of the selected run, with its output.
    t.keys(&["Enter"]);
    t.wait_until("the detail of live", |s| {
        s.contains("─ live · attempt 2 · command") && s.contains("─ stdout")
    });
    // a attaches to the pane; a detach comes back to top, which says so.
    t.keys(&["a"]);
    t.wait_for("subpane ▸ run live · attempt 2");
    t.keys(&["C-]"]);
    t.wait_for("detached; run live goes on");
    // The run ends: the row says how.
    touch(&flag);
    t.wait_until("live completed", |s| {
        row(s, "live").is_some_and(|l| l.contains("✔ completed"))
    });
    // A filter: s steps to running, which none is now.
    t.keys(&["Escape", "s"]);
    t.wait_for("0 of 2 runs: status running");
    t.keys(&["q"]);
    assert_eq!(t.wait_exit(), 0);
    assert!(!alternate_on(&t), "the terminal is left on top's screen");
    // Nothing of the tmux client is left in the shell (its `[detached …]` line).
    let shell = t.history();
    assert!(
        !shell.contains("[detached") && !shell.contains("[exited"),
        "tmux's line is left in the shell:\n{shell}"
    );
    env.assert_no_leftovers();
}

#[test]
fn top_gives_the_terminal_back_on_q_ctrl_c_sigterm_and_a_panic() {
    let env = TestEnv::new();
    assert_eq!(env.sp(["run", "--run-id", "r1", "--", "true"]).code, 0);
    for (how, vars) in [
        ("q", &[][..]),
        ("C-c", &[][..]),
        ("SIGTERM", &[][..]),
        ("panic", &[("SUBPANE_TOP_FAULT", "panic")][..]),
    ] {
        let t = top_then_stty(&env, &format!("top-{how}"), vars);
        if how != "panic" {
            t.wait_until("top's screen", |s| s.contains("subpane top · 1 run"));
            assert!(alternate_on(&t), "{how}: top draws on the alternate screen");
            match how {
                "SIGTERM" => {
                    let pid = wait_until("top's pid", || top_pid(&t));
                    send_signal(pid, libc::SIGTERM);
                }
                keys => t.keys(&[keys]),
            }
        }
        let s = t.wait_until("top to exit and stty to print", |s| {
            s.lines().any(|l| l.starts_with("modes:"))
        });
        assert!(
            !alternate_on(&t),
            "{how}: left on the alternate screen:\n{s}"
        );
        let modes = s.lines().find(|l| l.starts_with("modes:")).unwrap();
        assert_eq!(
            modes, "modes: icanon echo end",
            "{how}: the terminal is not back in its mode:\n{s}"
        );
        let code = s
            .lines()
            .find(|l| l.starts_with("top exited"))
            .unwrap_or_else(|| panic!("{how}: no exit line:\n{s}\nhistory:\n{}", t.history()));
        match how {
            "panic" => {
                assert_ne!(code, "top exited 0", "{s}");
                assert!(
                    t.history().contains("SUBPANE_TOP_FAULT=panic"),
                    "the panic's message is shown"
                );
            }
            _ => assert_eq!(code, "top exited 0", "{how}:\n{s}"),
        }
    }
    env.assert_no_leftovers();
}

/// The pid of `subpane top` in the terminal (a child of its shell).
fn top_pid(t: &Terminal) -> Option<i32> {
    let shell = t.pid();
    let children = std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children")).ok()?;
    children.split_whitespace().next()?.parse().ok()
}

#[test]
fn top_at_80_by_24_without_colour_and_with_a_filter_from_the_command_line() {
    let env = TestEnv::new();
    assert_eq!(
        env.sp(["run", "--run-id", "ok", "--label", "team=a", "--", "true"])
            .code,
        0
    );
    assert_eq!(env.sp(["run", "--run-id", "bad", "--", "false"]).code, 1);
    let t = Terminal::subpane(
        &env,
        "top-small",
        (80, 24),
        &[("NO_COLOR", "1")],
        &["top", "--label", "team=a"],
    );
    let s = t.wait_until("the filtered board", |s| {
        s.contains("1 shown: label team=a")
    });
    assert!(row(&s, "ok").is_some() && row(&s, "bad").is_none(), "{s}");
    assert!(s.lines().all(|l| l.chars().count() <= 80), "{s}");
    t.keys(&["q"]);
    assert_eq!(t.wait_exit(), 0);
    // Not a terminal: refused, with where to look instead.
    let r = env.sp(["top"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("top needs a terminal"), "{r:?}");
}

/// A terminal that goes away under top (its pty's other end closed, as when a tmux server
/// or an ssh connection dies) reads as end of file for ever: top must end, not spin on it.
/// top is not the session leader here, so no SIGHUP comes to say so.
#[test]
fn top_ends_when_its_terminal_goes_away() {
    use std::io::Read;
    use std::os::fd::{FromRawFd, OwnedFd};
    let env = TestEnv::new();
    assert_eq!(env.sp(["run", "--run-id", "r1", "--", "true"]).code, 0);
    let (mut master, mut slave) = (0, 0);
    let size = libc::winsize {
        ws_row: 24,
        ws_col: 80,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty with valid out pointers and a winsize.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &size,
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // Only the test holds the terminal's other end: top must not inherit it.
    // SAFETY: fcntl on a descriptor just made.
    unsafe { libc::fcntl(master, libc::F_SETFD, libc::FD_CLOEXEC) };
    // SAFETY: both descriptors were just made and are owned here.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    let io = |fd: &OwnedFd| std::process::Stdio::from(fd.try_clone().unwrap());
    let mut top = env
        .cmd()
        .arg("top")
        .stdin(io(&slave))
        .stdout(io(&slave))
        .stderr(io(&slave))
        .spawn()
        .unwrap();
    drop(slave);
    let mut reader = std::fs::File::from(master);
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("subpane top · 1 run") {
        let n = reader.read(&mut buf).unwrap_or(0);
        assert!(
            n > 0,
            "top drew nothing: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&buf[..n]);
    }
    // The terminal goes away.
    drop(reader);
    let gone = crate::harness::wait_child_within_or_kill(&mut top, crate::harness::DEADLINE);
    assert!(
        gone,
        "top went on after its terminal went away (killed now)"
    );
}

/// The screen with what changes from one run of the test to the next made fixed: the
/// group's id (`g-…-xxxxxx`, shown by its random part when room is short), and the ages and
/// durations (`0s`, `0:00`: each digit a `#`).
fn fixed(screen: &str, group: &str) -> String {
    let part = &group[group.len() - 6..];
    let time = |w: &str| {
        let d = w.trim_end_matches(['s', 'm', 'h', 'd']);
        let clock = w.split_once(':').is_some_and(|(a, b)| {
            !a.is_empty() && b.len() == 2 && (a.to_owned() + b).bytes().all(|c| c.is_ascii_digit())
        });
        clock || (d.len() < w.len() && !d.is_empty() && d.bytes().all(|c| c.is_ascii_digit()))
    };
    screen
        .lines()
        .map(|l| {
            let l = l
                .replace(group, "g-YYYYMMDD-HHMMSS-GROUP1")
                .replace(part, "GROUP1");
            let words: Vec<String> = l
                .split(' ')
                .map(|w| {
                    if time(w) {
                        w.chars()
                            .map(|c| if c.is_ascii_digit() { '#' } else { c })
                            .collect()
                    } else {
                        w.to_owned()
                    }
                })
                .collect();
            words.join(" ").trim_end().to_owned()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// top's screens in a real terminal at 80×24 and 200×50, snapshotted: runs that ended on
/// an output line, a JSON line, an error and nothing, and a fan-out group's tasks; and the
/// help `?` shows over the 80×24 screen.
#[test]
fn top_screens_at_80_by_24_and_200_by_50() {
    let env = TestEnv::new();
    let tasks = env.root.path().join("tasks.jsonl");
    std::fs::write(
        &tasks,
        [
            r#"{"argv": ["echo", "task one done"], "run_id": "task-1"}"#,
            r#"{"argv": ["sh", "-c", "echo 'task two: disk full' >&2; exit 1"], "run_id": "task-2"}"#,
        ]
        .join("\n")
            + "\n",
    )
    .unwrap();
    let fan = env.sp([
        "fanout",
        tasks.to_str().unwrap(),
        "--concurrency",
        "1",
        "--json",
    ]);
    assert_eq!(fan.code, 1, "{fan:?}");
    let group = fan.json()["group"].as_str().unwrap().to_owned();
    let runs: [(&str, &str, i32); 4] = [
        ("ok", "echo compiling; echo 'test result: ok. 12 passed'", 0),
        (
            "bad",
            "echo starting; echo 'error: cannot open config.toml' >&2; exit 3",
            1,
        ),
        ("json", r#"echo '{"event": "done", "n": 3}'"#, 0),
        ("quiet", "true", 0),
    ];
    for (id, script, code) in runs {
        let r = env.sp(["run", "--run-id", id, "--", "sh", "-c", script]);
        assert_eq!(r.code, code, "{r:?}");
    }
    for (cols, rows) in [(80u16, 24u16), (200, 50)] {
        let t = Terminal::subpane(
            &env,
            &format!("top-{cols}"),
            (cols, rows),
            &[("NO_COLOR", "1")],
            &["top"],
        );
        // Every row drawn with what its run ended on (read when the run loads: a first
        // frame may come before the last of them).
        let s = t.wait_until("every run with its last event", |s| {
            s.contains("subpane top · 6 runs")
                && row(s, "task-1").is_some()
                && [
                    "task one done",
                    "disk full",
                    "12 passed",
                    "config.toml",
                    "(no output)",
                ]
                .iter()
                .all(|e| s.contains(e))
        });
        assert!(s.lines().all(|l| l.chars().count() <= cols as usize), "{s}");
        insta::assert_snapshot!(format!("top_{cols}x{rows}"), fixed(&s, &group));
        if cols == 80 {
            t.keys(&["?"]);
            // The whole box: a capture may come while a frame is still being written.
            let s = t.wait_until("the help, whole", |s| {
                s.contains("any key closes this")
                    && s.contains("NO_COLOR: no colour.")
                    && s.contains('└')
            });
            insta::assert_snapshot!("top_80x24_help", fixed(&s, &group));
            t.keys(&["x"]);
            t.wait_until("the help closed", |s| !s.contains("any key closes this"));
            // The group view: the group by its random part, with its progress.
            t.keys(&["g"]);
            let s = t.wait_for("PROGRESS");
            insta::assert_snapshot!("top_80x24_groups", fixed(&s, &group));
            t.keys(&["g"]);
            t.wait_until("the table again", |s| s.contains("LAST EVENT"));
        }
        t.keys(&["q"]);
        assert_eq!(t.wait_exit(), 0);
    }
    env.assert_no_leftovers();
}

/// A command's plain SGR colour is drawn as colour in top's detail; a title change and a
/// screen clear next to it are still text, and act on nothing.
#[test]
fn the_detail_shows_a_commands_colour_and_no_other_escape() {
    let env = TestEnv::new();
    let script = r"printf 'one \033[1;31mred\033[0m plain \033]0;pwned\007 \033[2J end\n'";
    let r = env.sp(["run", "--run-id", "colour", "--", "sh", "-c", script]);
    assert_eq!(r.code, 0, "{r:?}");
    let t = Terminal::subpane(&env, "top-colour", (100, 30), &[("NO_COLOR", "")], &["top"]);
    t.wait_until("the run", |s| row(s, "colour").is_some());
    t.keys(&["Enter"]);
    let s = t.wait_for("─ stdout");
    assert!(
        s.contains("one red plain ^[]0;pwned^G ^[[2J end"),
        "the colour is shown as text, or an escape is gone:\n{s}"
    );
    let raw = env
        .tmux()
        .args(["capture-pane", "-p", "-e", "-t", "=top-colour:"])
        .output()
        .unwrap();
    let raw = String::from_utf8_lossy(&raw.stdout);
    // The detail's line (the table's LAST EVENT shows the same text without colour).
    let line = raw
        .lines()
        .skip_while(|l| !l.contains("─ stdout"))
        .find(|l| l.contains("plain ^[]0;"))
        .unwrap();
    // Red (SGR 31, or tmux's indexed colour 1) just before the word.
    assert!(
        line.contains("31mred") || line.contains("38;5;1mred"),
        "red is not red: {line:?}"
    );
    assert!(!t.format("#{pane_title}").contains("pwned"));
    t.keys(&["q"]);
    assert_eq!(t.wait_exit(), 0);
}

/// A finished agent's LAST EVENT is its final text, never its task or its session line (a
/// stand-in `pi` printing a recorded transcript).
#[test]
fn a_finished_agent_shows_its_final_text() {
    let env = TestEnv::new();
    let bin = crate::logs_pretty::fake_pi(&env, None);
    let r: crate::harness::Ran = env
        .cmd()
        .env("PATH", crate::logs_pretty::with_path(&bin))
        .args([
            "run",
            "--run-id",
            "ask",
            "--agent",
            "pi",
            "--task",
            "write a file",
        ])
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, 0, "{r:?}");
    let t = Terminal::subpane(&env, "top-agent", (120, 30), &[("NO_COLOR", "1")], &["top"]);
    let s = t.wait_until("the finished agent", |s| row(s, "ask").is_some());
    let line = row(&s, "ask").unwrap();
    assert!(line.contains("I wrote made_by_agent.txt."), "{s}");
    assert!(
        !line.contains("write a file") && !line.contains("session"),
        "{s}"
    );
    t.keys(&["q"]);
    assert_eq!(t.wait_exit(), 0);
}

/// A paused detached group's row says so, with its queued tasks counted by why they wait.
#[test]
fn top_shows_a_paused_group_and_why_its_tasks_wait() {
    let env = TestEnv::new();
    let gate = env.root.path().join("gate");
    let script = format!("while [ ! -e '{}' ]; do sleep 0.05; done", gate.display());
    let lines = [
        serde_json::json!({"argv": ["sh", "-c", script], "run_id": "tq0", "id": "a"}),
        serde_json::json!({"argv": ["true"], "run_id": "tq1", "after": ["a"]}),
        serde_json::json!({"argv": ["true"], "run_id": "tq2"}),
    ];
    let group = crate::harness::detach_tasks(&env, &lines, &["--concurrency", "1"]);
    let first = env.attempt_dir("tq0", 1).join("launch.json");
    wait_until("the first task to start", || first.exists().then_some(()));
    let p = env.sp(["pause", "--group", &group]);
    assert_eq!(p.code, 0, "{p:?}");
    let t = Terminal::subpane(
        &env,
        "top-paused",
        (200, 30),
        &[("NO_COLOR", "1")],
        &["top"],
    );
    let s = t.wait_until("the paused group's row", |s| {
        s.contains("paused · 2 queued: 1 after others, 1 paused")
    });
    assert!(row(&s, "tq0").is_some(), "{s}");
    // The driver's detail (its row is below its task's) names each queued task with why
    // it waits.
    t.keys(&["Down", "Enter"]);
    let s = t.wait_until("the group's queue in the detail", |s| {
        s.contains("queued  tq1  after a")
    });
    assert!(
        s.contains("queued  tq2  paused") && s.contains("queue   paused"),
        "{s}"
    );
    t.keys(&["q"]);
    assert_eq!(t.wait_exit(), 0);
    touch(&gate);
    assert_eq!(env.sp(["resume", "--group", &group]).code, 0);
    let w = env.sp(["wait", "--group", &group]);
    assert_eq!(w.code, 0, "{w:?}");
    env.assert_no_leftovers();
}
