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
