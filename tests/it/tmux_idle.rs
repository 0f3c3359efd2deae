//! The private tmux server exits by itself after `SUBPANE_TMUX_IDLE` with no session, and
//! its command line names no run; a malformed value is refused like any bad input.

use crate::harness::{TestEnv, wait_until};

/// The server's pid and command line (NULs as spaces).
fn server(env: &TestEnv) -> (i32, String) {
    let out = env
        .tmux()
        .args(["display-message", "-p", "#{pid}"])
        .output()
        .unwrap();
    let pid: i32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
    (pid, cmdline)
}

#[test]
fn an_idle_server_exits_by_itself_and_names_no_run() {
    let env = TestEnv::new();
    let idle = [("SUBPANE_TMUX_IDLE", "1s")];
    // A run that goes on (a tick every 100 ms for 3 s) keeps the server, whatever its idle
    // time.
    let r: crate::harness::Ran = env
        .cmd()
        .envs(idle)
        .args(["run", "--detach", "--run-id", "long", "--"])
        .arg(crate::harness::fixture("slow_counter.sh"))
        .args(["0.1", "30"])
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, 0, "{r:?}");
    let (pid, cmdline) = server(&env);
    assert!(
        cmdline.contains("start-server") && !cmdline.contains("__worker"),
        "the server's command line names a run: {cmdline}"
    );
    let r: crate::harness::Ran = env
        .cmd()
        .envs(idle)
        .args(["run", "--run-id", "quick", "--", "true"])
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, 0, "{r:?}");
    // Well past the quick run's idle second (15 ticks of the long one, 1.5 s at least), the
    // long run still runs on the same server.
    let out = env.attempt_dir("long", 1).join("stdout.log");
    let ticks = |s: &str| s.lines().filter(|l| l.starts_with("tick")).count();
    let at_quick_end = ticks(&std::fs::read_to_string(&out).unwrap_or_default());
    wait_until("15 more ticks of the long run", || {
        std::fs::read_to_string(&out)
            .ok()
            .filter(|s| ticks(s) >= at_quick_end + 15)
    });
    assert_eq!(server(&env).0, pid);
    let w = env.sp(["wait", "long", "--json"]);
    assert_eq!(
        w.code, 0,
        "the long run was not lost with its server: {w:?}"
    );
    // No session left: the server goes by itself.
    wait_until("the idle server to exit", || {
        (!env.server_alive()).then_some(())
    });
    crate::harness::wait_pid_gone(pid);
    env.assert_no_leftovers();
}

#[test]
fn gc_still_stops_an_idle_server_at_once() {
    let env = TestEnv::new();
    assert_eq!(env.sp(["run", "--", "true"]).code, 0);
    wait_until("the session to close", || {
        env.sp(["gc", "--dry-run"])
            .stdout
            .contains("would stop the tmux server")
            .then_some(())
    });
    assert!(env.server_alive(), "the default idle time is minutes");
    let g = env.sp(["gc"]);
    assert!(g.stdout.contains("stopped the tmux server"), "{g:?}");
    assert!(!env.server_alive());
}

#[test]
fn a_malformed_idle_time_is_refused() {
    let env = TestEnv::new();
    for bad in ["10", "0s", "soon"] {
        let r: crate::harness::Ran = env
            .cmd()
            .env("SUBPANE_TMUX_IDLE", bad)
            .args(["run", "--", "true"])
            .output()
            .unwrap()
            .into();
        assert_eq!(r.code, 2, "{bad}: {r:?}");
        assert!(r.stderr.contains("SUBPANE_TMUX_IDLE"), "{r:?}");
    }
    assert!(!env.socket.exists() && !env.home.exists());
}
