//! The live line of `run` and `wait` on a terminal: one line per attempt while it runs
//! (its clock, state and last event), replaced by the summary; none when stdout is not a
//! terminal or with `--json`.

use crate::harness::{TestEnv, start_waiting, touch};
use crate::terminal::Terminal;

/// A program that says something, then waits for `flag`.
fn says_then_waits(flag: &std::path::Path) -> String {
    format!(
        "echo step one; while [ ! -e {} ]; do sleep 0.02; done",
        flag.display()
    )
}

#[test]
fn run_on_a_terminal_shows_a_live_line_then_the_summary_in_its_place() {
    let env = TestEnv::new();
    let flag = env.root.path().join("go");
    let script = says_then_waits(&flag);
    let t = Terminal::subpane(
        &env,
        "live-run",
        (100, 20),
        &[],
        &["run", "--run-id", "lr", "--", "sh", "-c", &script],
    );
    let s = t.wait_until("the live line with the last output", |s| {
        s.lines()
            .any(|l| l.starts_with("● lr") && l.contains("running") && l.contains("step one"))
    });
    assert!(!s.contains("status "), "no summary yet:\n{s}");
    touch(&flag);
    assert_eq!(t.wait_exit(), 0);
    let s = t.screen();
    assert!(s.contains("status    completed (exit 0)"), "{s}");
    assert!(
        !s.contains("● lr"),
        "the live line is replaced by the summary:\n{s}"
    );
    env.assert_no_leftovers();
}

#[test]
fn no_live_line_when_piped_or_with_json() {
    let env = TestEnv::new();
    let r = env.sp(["run", "--", "sh", "-c", "echo hi; sleep 1.2"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        !r.stdout.contains('●') && !r.stdout.contains('\x1b'),
        "{:?}",
        r.stdout
    );
    assert!(r.stdout.starts_with("run       "), "{:?}", r.stdout);
    let t = Terminal::subpane(
        &env,
        "live-json",
        (100, 20),
        &[],
        &[
            "run",
            "--json",
            "--run-id",
            "lj",
            "--",
            "sh",
            "-c",
            "echo hi; sleep 1.2",
        ],
    );
    assert_eq!(t.wait_exit(), 0);
    let s = t.history();
    assert!(!s.contains('●'), "{s}");
    assert!(s.trim_start().starts_with('{'), "{s}");
    env.assert_no_leftovers();
}

#[test]
fn wait_on_a_terminal_shows_a_line_per_attempt() {
    let env = TestEnv::new();
    let fa = start_waiting(&env, "wa", 0);
    let fb = start_waiting(&env, "wb", 3);
    let t = Terminal::subpane(&env, "live-wait", (100, 20), &[], &["wait", "wa", "wb"]);
    t.wait_until("a line per attempt", |s| {
        let running = |id: &str| {
            s.lines()
                .any(|l| l.starts_with(&format!("● {id}")) && l.contains("waiting for"))
        };
        running("wa") && running("wb")
    });
    touch(&fb);
    t.wait_until("wb's end on its line", |s| {
        s.lines()
            .any(|l| l.starts_with("✘ wb") && l.contains("failed (exit 3)"))
            && s.lines().any(|l| l.starts_with("● wa"))
    });
    touch(&fa);
    assert_eq!(t.wait_exit(), 1);
    let s = t.screen();
    assert!(!s.contains("● wa") && !s.contains("✘ wb"), "{s}");
    assert!(
        s.contains("run       wa (attempt 1)") && s.contains("status    failed (exit 3)"),
        "{s}"
    );
    env.assert_no_leftovers();
}
