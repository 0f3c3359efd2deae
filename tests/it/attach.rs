//! `attach` from a terminal: the run's pane, then, when the run ends under it (tmux itself
//! only says `[exited]`), how it ended; after a detach, that it goes on.

use crate::harness::{TestEnv, start_waiting, touch};
use crate::terminal::Terminal;

#[test]
fn an_attached_client_is_told_how_the_run_ended() {
    let env = TestEnv::new();
    let flag = start_waiting(&env, "at", 4);
    let t = Terminal::subpane(&env, "attach-end", (120, 30), &[], &["attach", "at"]);
    // The run's own pane, through the client.
    t.wait_for("subpane ▸ run at · attempt 1");
    touch(&flag);
    t.wait_exit();
    // The pane can be marked dead before the terminal has read the last bytes its command
    // wrote: wait for them, not for one look.
    t.wait_until("how the run ended", |s| {
        s.contains("subpane: run at failed (exit 4) after ")
            && s.contains("`subpane status at` has the summary")
    });
    env.assert_no_leftovers();
}

#[test]
fn a_detached_client_is_told_the_run_goes_on() {
    let env = TestEnv::new();
    let flag = start_waiting(&env, "ad", 0);
    let t = Terminal::subpane(&env, "attach-detach", (120, 30), &[], &["attach", "ad"]);
    t.wait_for("subpane ▸ run ad · attempt 1");
    // The client's prefix is C-b: detach.
    t.keys(&["C-b", "d"]);
    assert_eq!(t.wait_exit(), 0);
    t.wait_until("that the run goes on", |s| {
        s.contains("subpane: detached; run ad goes on")
    });
    touch(&flag);
    assert_eq!(env.sp(["wait", "ad"]).code, 0);
    env.assert_no_leftovers();
}

#[test]
fn ctrl_c_in_an_attached_pane_asks_first_and_ctrl_bracket_detaches_inside_tmux() {
    let env = TestEnv::new();
    let flag = start_waiting(&env, "ac", 0);
    // The terminal is a tmux pane: `$TMUX` is set, as in a person's own tmux.
    let t = Terminal::subpane(&env, "attach-ctrl-c", (120, 30), &[], &["attach", "ac"]);
    // The pane's header names the way out, and the client, started inside tmux, says which
    // key detaches it there.
    t.wait_for("Ctrl-] detaches (or Ctrl-b d outside tmux)");
    t.wait_for("inside tmux, Ctrl-] detaches from this run");
    // One Ctrl-C (a reflex, to leave) only asks.
    t.keys(&["C-c"]);
    t.wait_for("press it again within 5s to cancel this run");
    assert_eq!(
        env.sp(["status", "ac"]).code,
        3,
        "one Ctrl-C cancelled the run"
    );
    // Ctrl-] is bound by no default tmux (so a person's own tmux passes it on), and detaches
    // subpane's client.
    let defaults = std::process::Command::new("tmux")
        .arg("-S")
        .arg(env.root.path().join("defaults.sock"))
        .args(["-f", "/dev/null"])
        .args(["start-server", ";", "list-keys", ";", "kill-server"])
        .output()
        .unwrap();
    let keys = String::from_utf8_lossy(&defaults.stdout);
    assert!(keys.contains("detach-client"), "{keys}");
    assert!(!keys.contains(" C-] "), "a default tmux binds C-]: {keys}");
    t.keys(&["C-]"]);
    assert_eq!(t.wait_exit(), 0);
    t.wait_for("subpane: detached; run ac goes on");
    assert_eq!(
        env.sp(["status", "ac"]).code,
        3,
        "the run ended on a detach"
    );
    touch(&flag);
    assert_eq!(env.sp(["wait", "ac"]).code, 0);
    // Two Ctrl-C in a row cancel a run.
    let flag2 = start_waiting(&env, "ac2", 0);
    let t2 = Terminal::subpane(&env, "attach-ctrl-c2", (120, 30), &[], &["attach", "ac2"]);
    t2.wait_for("Ctrl-] detaches");
    t2.keys(&["C-c"]);
    t2.wait_for("press it again");
    t2.keys(&["C-c"]);
    t2.wait_exit();
    t2.wait_for("subpane: run ac2 cancelled");
    assert_eq!(env.sp(["wait", "ac2"]).code, 130);
    assert_eq!(env.result("ac2")["cancelled_by"], "interrupt");
    drop(flag2);
    env.assert_no_leftovers();
}
