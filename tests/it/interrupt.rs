//! What an interrupt of a waited-for run does (Ctrl-C during `run`, an MCP client that gives
//! up on a `run` call): a cancel through `app::cancel`, so an attempt that has finished is
//! left alone.

use subpane::app::{self, CancelOutcome};
use subpane::store::Home;

use crate::harness::{TestEnv, start_waiting, touch, wait_until};
use crate::terminal::Terminal;

#[test]
fn an_interrupt_leaves_a_finished_attempt_alone_and_a_second_one_kills_at_once() {
    let env = TestEnv::new();
    let home = Home::at(env.home.clone());
    // An attempt that ended as the interrupt came: its directory is not written to.
    touch(&start_waiting(&env, "done", 0));
    let result = env.attempt_dir("done", 1).join("result.json");
    wait_until("the run's result", || result.exists().then_some(()));
    let f = app::find_run(&home, "done", None).unwrap();
    let out = app::cancel_on_interrupt(&f, 1).unwrap();
    assert!(matches!(out, CancelOutcome::AlreadyFinished(_)), "{out:?}");
    assert!(!env.attempt_dir("done", 1).join("cancel.json").exists());
    // A running one: the second interrupt asks for no grace.
    start_waiting(&env, "live", 0);
    let f = app::find_run(&home, "live", None).unwrap();
    let out = app::cancel_on_interrupt(&f, 2).unwrap();
    assert!(matches!(out, CancelOutcome::Requested(_)), "{out:?}");
    let req = env.read_json(&env.attempt_dir("live", 1).join("cancel.json"));
    assert_eq!(req["grace_ms"], 0, "{req}");
    assert_eq!(req["origin"], "interrupt", "{req}");
    let env_doc = app::wait_one(&f.paths, &f.spec).unwrap();
    assert_eq!(env_doc.status.as_str(), "cancelled");
    // The envelope names the interrupt as what stopped it.
    assert_eq!(
        env_doc.cancelled_by,
        Some(subpane::envelope::CancelOrigin::Interrupt)
    );
    assert!(
        env_doc
            .outcome_words()
            .starts_with("cancelled by interrupt")
    );
    env.assert_no_leftovers();
}

/// The lines of `screen` that are `run`'s live line of `id`.
fn live_lines<'s>(screen: &'s str, id: &str) -> Vec<&'s str> {
    let head = format!("● {id} ");
    screen.lines().filter(|l| l.starts_with(&head)).collect()
}

/// The first Ctrl-C of a foreground `run` says at once that it cancels and how to kill, above
/// the live line, which goes on below it with no copy of it left above; the summary then
/// takes the live line's place.
#[test]
fn the_first_ctrl_c_of_run_says_it_cancels_and_leaves_no_stale_live_line() {
    let env = TestEnv::new();
    let flag = env.root.path().join("let-go");
    // On SIGTERM it holds on (its grace) until the flag exists.
    let script = format!(
        "trap 'while [ ! -e {f} ]; do sleep 0.02; done; exit 0' TERM; echo started; \
         while :; do sleep 0.05; done",
        f = crate::harness::q(&flag)
    );
    let t = Terminal::subpane(
        &env,
        "ctrl-c-run",
        (100, 20),
        &[],
        &[
            "run", "--grace", "60s", "--run-id", "ir", "--", "sh", "-c", &script,
        ],
    );
    t.wait_until("the live line", |s| {
        live_lines(s, "ir").iter().any(|l| l.contains("started"))
    });
    t.keys(&["C-c"]);
    let said = "subpane: cancelling ir — Ctrl-C again to kill";
    let s = t.wait_for(said);
    // Redrawn since (its clock moves once a second): still one live line, below the words.
    let before: Vec<String> = live_lines(&s, "ir").iter().map(|l| l.to_string()).collect();
    let s = t.wait_until("the live line redrawn", |s| {
        let now = live_lines(s, "ir");
        !now.is_empty() && now.iter().map(|l| l.to_string()).collect::<Vec<_>>() != before
    });
    assert_eq!(
        live_lines(&s, "ir").len(),
        1,
        "a stale copy of the live line:\n{s}"
    );
    let rows: Vec<&str> = s.lines().collect();
    let at = |f: &dyn Fn(&str) -> bool| rows.iter().position(|l| f(l)).unwrap();
    assert!(
        at(&|l| l.contains(said)) < at(&|l| l.starts_with("● ir ")),
        "the words stand above the live line:\n{s}"
    );
    touch(&flag);
    assert_eq!(t.wait_exit(), 130);
    let s = t.screen();
    assert!(live_lines(&s, "ir").is_empty(), "{s}");
    // Said once, above the summary: in the history, where the line tmux writes when the pane
    // dies (it scrolls the screen up) may have pushed it.
    let h = t.history();
    assert_eq!(h.matches(said).count(), 1, "{h}");
    assert!(h.find(said) < h.find("status    cancelled"), "{h}");
    assert!(s.contains("status    cancelled"), "{s}");
    env.assert_no_leftovers();
}

/// Ctrl-C in `wait` stops waiting at once, says so, and shows where the run is; the run goes
/// on (exit 3, still running), and no live line is left on the screen.
#[test]
fn ctrl_c_in_wait_stops_waiting_and_says_the_run_goes_on() {
    let env = TestEnv::new();
    let flag = start_waiting(&env, "wr", 0);
    let t = Terminal::subpane(&env, "ctrl-c-wait", (100, 20), &[], &["wait", "wr"]);
    t.wait_until("the live line", |s| !live_lines(s, "wr").is_empty());
    t.keys(&["C-c"]);
    assert_eq!(t.wait_exit(), 3);
    let s = t.screen();
    assert!(
        s.contains("subpane: stopped waiting; the runs go on"),
        "{s}"
    );
    assert!(live_lines(&s, "wr").is_empty(), "a live line is left:\n{s}");
    assert!(s.contains("status    running"), "{s}");
    assert_eq!(env.sp(["status", "wr"]).code, 3, "the run goes on");
    touch(&flag);
    assert_eq!(env.sp(["wait", "wr"]).code, 0);
    env.assert_no_leftovers();
}
