//! What people read: each message a new user met that read oddly, hid something or said
//! nothing, as it reads now.

use std::net::TcpListener;

use crate::harness::{TestEnv, start_waiting, touch, wait_until};

#[test]
fn status_of_a_running_attempt_says_since_when_for_how_long_and_what_it_did_last() {
    let env = TestEnv::new();
    let flag = start_waiting(&env, "st", 0);
    // The worker records the program's last line as it runs.
    let progress = env.attempt_dir("st", 1).join("progress.json");
    wait_until("progress.json naming the last line", || {
        std::fs::read_to_string(&progress)
            .ok()
            .filter(|s| s.contains("waiting for"))
    });
    let r = env.sp(["status", "st"]);
    assert_eq!(r.code, 3, "{r:?}");
    let line = |key: &str| {
        r.stdout
            .lines()
            .find(|l| l.starts_with(key))
            .unwrap_or_else(|| panic!("no {key} line:\n{}", r.stdout))
            .to_owned()
    };
    assert!(line("started").ends_with(" UTC"), "{}", r.stdout);
    assert!(line("elapsed").len() > "elapsed   ".len(), "{}", r.stdout);
    assert!(line("last").contains("waiting for"), "{}", r.stdout);
    touch(&flag);
    assert_eq!(env.sp(["wait", "st"]).code, 0);
    env.assert_no_leftovers();
}

#[test]
fn outcomes_read_plainly() {
    let env = TestEnv::new();
    let r = env.sp(["run", "--run-id", "e7", "--", "sh", "-c", "exit 7"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stdout.contains("status    failed (exit 7)\n"),
        "{}",
        r.stdout
    );
    start_waiting(&env, "c", 0);
    let c = env.sp(["cancel", "c"]);
    assert!(
        c.stdout.contains("status    cancelled by cancel ("),
        "{}",
        c.stdout
    );
    assert!(!c.stdout.contains("cancelled, cancelled"), "{}", c.stdout);
    let i = env.sp(["run", "--idle-timeout", "200ms", "--", "sleep", "30"]);
    assert_eq!(i.code, 124, "{i:?}");
    assert!(
        i.stdout
            .contains("status    failed: idle_timeout (killed by SIG"),
        "{}",
        i.stdout
    );
    env.assert_no_leftovers();
}

/// A failed run's summary shows what it failed with: the end of its stderr (and of its
/// stdout), not only the one line its error quotes.
#[test]
fn a_failed_summary_shows_the_end_of_stderr_and_stdout() {
    let env = TestEnv::new();
    let script = "echo built; echo 'warning: one' >&2; echo 'error: two' >&2; \
                  echo 'fatal: cannot go on' >&2; exit 4";
    let r = env.sp(["run", "--run-id", "fs", "--", "sh", "-c", script]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stdout.contains("error     stderr: fatal: cannot go on\n"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("\nbuilt\n"), "{}", r.stdout);
    assert!(
        r.stdout
            .ends_with("\n(stderr)\nwarning: one\nerror: two\nfatal: cannot go on\n"),
        "{}",
        r.stdout
    );
    // `status` and `wait` print the same summary.
    assert_eq!(env.sp(["status", "fs"]).stdout, r.stdout);
    // A completed run shows no stderr section.
    let ok = env.sp(["run", "--", "sh", "-c", "echo fine; echo note >&2"]);
    assert_eq!(ok.code, 0, "{ok:?}");
    assert!(!ok.stdout.contains("(stderr)"), "{}", ok.stdout);
    env.assert_no_leftovers();
}

#[test]
fn ls_marks_its_times_as_utc_and_fits_every_status() {
    let env = TestEnv::new();
    assert_eq!(
        env.sp([
            "run",
            "--idle-timeout",
            "200ms",
            "--run-id",
            "quiet",
            "--",
            "sleep",
            "30"
        ])
        .code,
        124
    );
    assert_eq!(env.sp(["run", "--run-id", "ok", "--", "true"]).code, 0);
    let r = env.sp(["ls"]);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert!(lines[0].contains("STARTED (UTC)"), "{}", r.stdout);
    // Every row's AGENT column starts where the header's does.
    let at = lines[0].find("AGENT").unwrap();
    for l in &lines[1..] {
        assert_eq!(&l[at..at + 7], "command", "misaligned:\n{}", r.stdout);
    }
    assert!(
        lines.iter().any(|l| l.contains("idle_timeout ")),
        "{}",
        r.stdout
    );
    env.assert_no_leftovers();
}

/// `ls` on a terminal fits its lines to the width (`$COLUMNS`, else the terminal's), cutting
/// WHAT with `…`; piped, WHAT is whole. A failure shows its exit code, as every table does.
#[test]
fn ls_fits_the_terminal_and_says_the_exit_code() {
    let env = TestEnv::new();
    let long = format!("exit 3; {}", "x".repeat(50));
    assert_eq!(
        env.sp(["run", "--run-id", "bad", "--", "sh", "-c", &long])
            .code,
        1
    );
    let piped = env.sp(["ls"]);
    assert!(
        piped.stdout.contains("failed (exit 3)") && piped.stdout.contains(&"x".repeat(40)),
        "{}",
        piped.stdout
    );
    let widest = |s: &str| s.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    assert!(widest(&piped.stdout) > 80, "{}", piped.stdout);
    for (vars, cols) in [(&[][..], 80usize), (&[("COLUMNS", "70")][..], 70)] {
        let t = crate::terminal::Terminal::subpane(
            &env,
            &format!("ls-{cols}"),
            (80, 20),
            vars,
            &["ls"],
        );
        assert_eq!(t.wait_exit(), 0);
        let s = t.screen();
        assert!(s.contains("failed (exit 3)"), "{s}");
        let row = s
            .lines()
            .find(|l| l.starts_with("bad"))
            .expect("the run's row");
        assert!(row.ends_with('…'), "{s}");
        assert!(row.chars().count() < cols, "{cols} columns:\n{s}");
    }
    env.assert_no_leftovers();
}

#[test]
fn ls_of_a_status_no_run_has_names_the_status() {
    let env = TestEnv::new();
    assert_eq!(env.sp(["run", "--", "true"]).code, 0);
    let r = env.sp(["ls", "--status", "running"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.stdout, "");
    assert!(r.stderr.contains("no running runs in "), "{r:?}");
    env.assert_no_leftovers();
}

#[test]
fn gc_dry_run_names_what_it_would_remove_and_close() {
    let env = TestEnv::new();
    let r = env.sp(["run", "--keep-session", "--run-id", "kept", "--", "true"]);
    assert_eq!(r.code, 0, "{r:?}");
    wait_until("the kept session", || {
        env.has_session("kept-1").then_some(())
    });
    let g = env.sp(["gc", "--dry-run", "--older-than", "0s"]);
    assert_eq!(g.code, 0, "{g:?}");
    assert!(g.stdout.contains("would remove run kept\n"), "{}", g.stdout);
    assert!(
        g.stdout.contains("would close session kept-1\n"),
        "{}",
        g.stdout
    );
    assert!(g.stdout.contains("(nothing was changed)"), "{}", g.stdout);
    assert!(env.run_dir("kept").exists() && env.has_session("kept-1"));
    let g = env.sp(["gc", "--older-than", "0s"]);
    assert!(g.stdout.contains("removed run kept\n"), "{}", g.stdout);
    assert!(g.stdout.contains("closed session kept-1\n"), "{}", g.stdout);
    env.assert_no_leftovers();
}

#[test]
fn a_program_given_without_the_double_dash_gets_a_tip() {
    let env = TestEnv::new();
    let r = env.sp(["run", "echo", "hello"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr
            .contains("tip: a program and its arguments go after `--`: subpane run -- echo hello"),
        "{}",
        r.stderr
    );
    assert!(!env.home.exists(), "nothing was started");
}

#[test]
fn an_unknown_thinking_level_is_refused_before_anything_starts() {
    let env = TestEnv::new();
    let r = env.sp([
        "run",
        "--agent",
        "pi",
        "--task",
        "x",
        "--thinking",
        "extreme",
    ]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr
            .contains("--thinking extreme is not a thinking level of pi: use off, minimal"),
        "{}",
        r.stderr
    );
    assert!(!env.home.join("runs").exists());
}

#[test]
fn a_missing_interpreter_is_named_as_such() {
    let env = TestEnv::new();
    let script = env.work.join("script.sh");
    std::fs::write(&script, "#!/nonexistent/interp\necho hi\n").unwrap();
    let mut p = std::fs::metadata(&script).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut p, 0o755);
    std::fs::set_permissions(&script, p).unwrap();
    let r = env.sp(["run", "--json", "--", "./script.sh"]);
    assert_eq!(r.code, 1, "{r:?}");
    let v = r.json();
    assert_eq!(v["failure_kind"], "spawn");
    let e = v["output"]["errors"][0].as_str().unwrap();
    assert!(
        e.contains("its interpreter /nonexistent/interp (named on its first line"),
        "{e}"
    );
    env.assert_no_leftovers();
}

#[test]
fn the_summary_never_hides_stdout_silently() {
    let env = TestEnv::new();
    // A last line longer than the 64 KiB the summary reads: its end is shown, and said to be.
    let r = env.sp([
        "run",
        "--",
        "sh",
        "-c",
        "echo first; printf '%070000d\\n' 7",
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout
            .contains("(the end of the last line of stdout; `subpane logs "),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("0000007\n"), "{}", r.stdout);
    // Output with nothing to show at its end is named, not left out.
    let r = env.sp(["run", "--", "sh", "-c", "printf '%70000s\\n' ''"]);
    assert!(
        r.stdout
            .contains("stdout    70001 bytes with nothing to show at their end"),
        "{}",
        r.stdout
    );
    env.assert_no_leftovers();
}

#[test]
fn a_sandboxed_program_that_cannot_connect_is_told_the_network_policy() {
    let env = TestEnv::new();
    // A port that listens on the host: the sandbox's own loopback has nothing there.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let script =
        format!("import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5)");
    let r = env.sp(["run", "--json", "--sandbox", "--", "python3", "-c", &script]);
    assert_eq!(r.code, 1, "{r:?}");
    let v = r.json();
    let errors: Vec<&str> = v["output"]["errors"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e.as_str())
        .collect();
    assert!(
        errors
            .iter()
            .any(|e| e.contains("its sandbox has no network (--network none")
                && e.contains("--network allow:HOST")),
        "{errors:?}"
    );
    // The same program with the host's network connects: no hint where none is due.
    let r = env.sp([
        "run",
        "--json",
        "--sandbox",
        "--network",
        "full",
        "--",
        "python3",
        "-c",
        &script,
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    drop(l);
    env.assert_no_leftovers();
}
