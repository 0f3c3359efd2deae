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
    // Still going a second in: how to watch it is said, above the live line.
    t.wait_for("run lr is running; watch it with `subpane attach lr`");
    touch(&flag);
    assert_eq!(t.wait_exit(), 0);
    let s = t.screen();
    assert!(s.contains("status    completed (exit 0)"), "{s}");
    assert!(
        !s.contains("● lr"),
        "the live line is replaced by the summary:\n{s}"
    );
    // Nor is a copy left in the terminal's history: a redraw from the top row never clears
    // the whole screen (which tmux answers by pushing it into its history).
    let h = t.history();
    assert!(!h.contains("● lr"), "{h}");
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
    // Two runs read as a table, not as two summaries.
    let row = |id: &str, status: &str| {
        s.lines()
            .any(|l| l.starts_with(&format!("{id}  ")) && l.contains(status))
    };
    assert!(
        row("wa", "completed") && row("wb", "failed (exit 3)"),
        "{s}"
    );
    assert!(s.contains("2 runs: 1 completed, 1 failed"), "{s}");
    assert!(!s.contains("status    "), "{s}");
    env.assert_no_leftovers();
}

/// `wait --group` of a fan-out driven on its own: while waiting, a line per task (those not
/// started yet too) and none for the driver; at the end one line per task and the totals,
/// on a terminal and piped; the driver is the group's row in `ls`, never a failed run.
#[test]
fn wait_group_shows_the_tasks_live_then_a_table_and_the_driver_is_no_failed_run() {
    let env = TestEnv::new();
    let gate = env.root.path().join("gate");
    let lines: Vec<String> = (0..10)
        .map(|i| {
            let code = if i % 4 == 1 { 3 } else { 0 };
            let script = format!(
                "while [ ! -e '{}' ]; do sleep 0.05; done; echo t{i}; exit {code}",
                gate.display()
            );
            serde_json::json!({"argv": ["sh", "-c", script], "run_id": format!("t{i}")}).to_string()
        })
        .collect();
    let file = env.root.path().join("tasks.jsonl");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let r = env.sp([
        "fanout",
        "--detach",
        "--concurrency",
        "3",
        file.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let group = r.stdout.trim().to_owned();
    let t = Terminal::subpane(
        &env,
        "live-group",
        (120, 30),
        &[],
        &["wait", "--group", &group],
    );
    t.wait_for(&format!("waiting for the 10 tasks of group {group}"));
    let s = t.wait_until("a line per task", |s| {
        (0..10).all(|i| s.lines().any(|l| l.starts_with(&format!("● t{i} "))))
    });
    assert!(
        !s.lines().any(|l| l.starts_with(&format!("● {group}"))),
        "the driver has no line:\n{s}"
    );
    touch(&gate);
    assert_eq!(t.wait_exit(), 1);
    let s = t.history();
    let table: Vec<&str> = s.lines().filter(|l| l.starts_with('t')).collect();
    assert_eq!(table.len(), 10, "one line per task:\n{s}");
    assert_eq!(
        table
            .iter()
            .filter(|l| l.contains("failed (exit 3)"))
            .count(),
        3,
        "{s}"
    );
    assert!(
        s.contains(&format!("group {group}: 10 runs: 7 completed, 3 failed")),
        "{s}"
    );
    assert!(!s.contains("status    ") && !s.contains("● t"), "{s}");
    // Piped: the same table.
    let w = env.sp(["wait", "--group", &group]);
    assert_eq!(w.code, 1, "{w:?}");
    assert_eq!(
        w.stdout.lines().filter(|l| l.starts_with('t')).count(),
        10,
        "{}",
        w.stdout
    );
    assert!(w.stdout.starts_with("RUN "), "{}", w.stdout);
    assert!(
        w.stdout.contains("10 runs: 7 completed, 3 failed"),
        "{}",
        w.stdout
    );
    // The driver (failed: a task failed) is the group's row, never one more failed run.
    let failed = env.sp(["ls", "--status", "failed", "--json"]).json();
    let mut ids: Vec<&str> = failed
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["run_id"].as_str().unwrap())
        .collect();
    ids.sort();
    assert_eq!(ids, ["t1", "t5", "t9"]);
    let ls = env.sp(["ls"]);
    let driver = ls
        .stdout
        .lines()
        .find(|l| l.starts_with(&group))
        .unwrap_or_else(|| panic!("{}", ls.stdout));
    assert!(
        driver.contains(" group ") && !driver.contains("failed"),
        "{driver}"
    );
    let human_failed = env.sp(["ls", "--status", "failed"]);
    assert!(
        !human_failed.stdout.contains(&group),
        "{}",
        human_failed.stdout
    );
    env.assert_no_leftovers();
}

/// A run that is over before the first beat of the clock (a second in) is never said to be
/// watchable: its pane is gone.
#[test]
fn a_run_over_at_once_is_not_said_to_be_watchable() {
    let env = TestEnv::new();
    let t0 = std::time::Instant::now();
    let t = Terminal::subpane(
        &env,
        "quick-run",
        (100, 20),
        &[],
        &["run", "--run-id", "qr", "--", "true"],
    );
    assert_eq!(t.wait_exit(), 0);
    let s = t.history();
    assert!(s.contains("status    completed (exit 0)"), "{s}");
    // Over within the second from the start of the terminal: the beat cannot have come.
    if t0.elapsed() < std::time::Duration::from_millis(900) {
        assert!(!s.contains("subpane attach"), "{s}");
    }
    env.assert_no_leftovers();
}

/// A line longer than the terminal keeps its start, and its end is cut with `…`: the live
/// line never wraps and never shows the middle of a line.
#[test]
fn a_long_line_keeps_its_start_and_is_cut_at_its_end() {
    let env = TestEnv::new();
    let flag = env.root.path().join("go");
    let script = format!(
        "echo START-$(printf '%0300d' 0)-END; while [ ! -e {} ]; do sleep 0.02; done",
        flag.display()
    );
    let t = Terminal::subpane(
        &env,
        "live-long",
        (80, 20),
        &[],
        &["run", "--run-id", "ll", "--", "sh", "-c", &script],
    );
    let s = t.wait_until("the live line with the long line's start", |s| {
        s.lines()
            .any(|l| l.starts_with("● ll") && l.contains("START-000"))
    });
    let line = s.lines().find(|l| l.starts_with("● ll")).unwrap();
    assert!(line.ends_with('…') && !line.contains("-END"), "{s}");
    assert!(line.chars().count() < 80, "{s}");
    touch(&flag);
    assert_eq!(t.wait_exit(), 0);
    env.assert_no_leftovers();
}
