//! `subpane top` of runs on a host (the test's own sshd): they are shown with their host
//! beside the runs here, their ends come as they happen there, and its keys act on them
//! there.

use crate::hosts_run::{Host, waits_for};
use crate::terminal::Terminal;

/// The row of `run` on the screen.
fn row<'s>(screen: &'s str, run: &str) -> Option<&'s str> {
    screen
        .lines()
        .find(|l| l.split_whitespace().any(|w| w == run) && !l.starts_with('─'))
}

fn detached(h: &Host, id: &str, script: &str) {
    let r = h.sp([
        "run", "--host", "loop", "--detach", "--run-id", id, "--", "sh", "-c", script,
    ]);
    assert_eq!(r.code, 0, "{r:?}");
}

#[test]
fn top_shows_runs_on_a_host_and_follows_their_ends() {
    let h = Host::new();
    let flag = h.env.root.path().join("go");
    assert_eq!(h.sp(["run", "--run-id", "here-1", "--", "true"]).code, 0);
    let done = h.sp([
        "run", "--host", "loop", "--run-id", "far-done", "--", "true",
    ]);
    assert_eq!(done.code, 0, "{done:?}");
    detached(&h, "far-live", &waits_for(&flag));
    let path = h.sshd.path_env();
    let t = Terminal::subpane(
        &h.env,
        "top",
        (130, 30),
        &[("PATH", path.to_str().unwrap())],
        &["top"],
    );
    let s = t.wait_until("the runs here and on the host", |s| {
        row(s, "far-done").is_some_and(|l| l.contains("✔ completed") && l.contains("loop"))
            && row(s, "far-live").is_some_and(|l| l.contains("● running") && l.contains("loop"))
            && row(s, "here-1").is_some_and(|l| l.contains("✔ completed"))
    });
    assert!(s.contains("HOST"), "{s}");
    // A run started there while top runs shows up, and its end with it.
    detached(&h, "far-new", "exit 3");
    t.wait_until("the new run's end", |s| {
        row(s, "far-new").is_some_and(|l| l.contains("✘ exit 3") && l.contains("loop"))
    });
    std::fs::write(&flag, "").unwrap();
    t.wait_until("far-live completed", |s| {
        row(s, "far-live").is_some_and(|l| l.contains("✔ completed"))
    });
    // c on a run there cancels it there.
    let never = h.env.root.path().join("never");
    detached(&h, "far-c", &waits_for(&never));
    t.wait_until("far-c running", |s| {
        row(s, "far-c").is_some_and(|l| l.contains("● running"))
    });
    t.keys(&["Home", "c"]);
    t.wait_for("cancel run far-c? y to confirm");
    t.keys(&["y"]);
    t.wait_for("cancel requested for far-c on host loop");
    t.wait_until("far-c cancelled", |s| {
        row(s, "far-c").is_some_and(|l| l.contains("■ cancelled"))
    });
    t.keys(&["q"]);
    let w = h.sp(["wait", "far-c", "--json"]);
    let env = crate::hosts_run::json(&w);
    assert_eq!(env["status"], "cancelled", "{env}");
}

/// A run whose start is on its way (recorded here, not yet answered there) is `starting`,
/// never `damaged` for a host that has no record of it yet; once its host answered, a
/// missing record there is damage.
#[test]
fn a_run_whose_start_has_not_reached_its_host_is_starting() {
    let h = Host::new();
    let r = h.sp(["run", "--host", "loop", "--run-id", "far-x", "--", "true"]);
    assert_eq!(r.code, 0, "{r:?}");
    let runs = h.env.home.join("runs");
    let marker = std::fs::read_to_string(runs.join("far-x/host.json")).unwrap();
    std::fs::create_dir(runs.join("far-y")).unwrap();
    std::fs::write(
        runs.join("far-y/host.json"),
        marker.replace("\"far-x\"", "\"far-y\""),
    )
    .unwrap();
    let status_of = |h: &Host| {
        let ls = h.sp(["ls", "--json"]);
        assert_eq!(ls.code, 0, "{ls:?}");
        let rows = crate::hosts_run::json(&ls);
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r["run_id"] == "far-y")
            .cloned()
            .unwrap_or_else(|| panic!("no far-y: {rows}"))
    };
    let row = status_of(&h);
    assert_eq!(row["status"], "starting", "{row}");
    assert_eq!(row["host"], "loop", "{row}");
    std::fs::write(runs.join("far-y/host.started"), "").unwrap();
    let row = status_of(&h);
    assert_eq!(row["status"], "damaged", "{row}");
    assert!(
        row["problem"].as_str().unwrap().contains("no record"),
        "{row}"
    );
}
