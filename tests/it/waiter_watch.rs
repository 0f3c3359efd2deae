//! What the live views wait on besides ends: an attempt's records renamed into place, a
//! directory's entries, a descriptor of the caller's (a terminal, a signalfd).

use std::io::Write;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use subpane::app;
use subpane::store::Home;
use subpane::supervisor::{Token, WaitEvent, Waiter};

use crate::harness::{DEADLINE, TestEnv, touch, wait_until};

fn next(w: &mut Waiter) -> WaitEvent {
    w.next(Some(Instant::now() + DEADLINE)).unwrap()
}

fn quiet(w: &mut Waiter) -> bool {
    matches!(
        w.next(Some(Instant::now() + Duration::from_millis(150)))
            .unwrap(),
        WaitEvent::TimedOut
    )
}

#[test]
fn watched_records_report_progress_and_a_plain_add_does_not() {
    let env = TestEnv::new();
    let (f1, f2) = (env.root.path().join("f1"), env.root.path().join("f2"));
    let script = format!(
        "echo one; while [ ! -e {0} ]; do sleep 0.02; done; echo two; while [ ! -e {1} ]; do sleep 0.02; done",
        f1.display(),
        f2.display()
    );
    let r = env.sp([
        "run", "--detach", "--run-id", "rec", "--", "sh", "-c", &script,
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let progress = env.attempt_dir("rec", 1).join("progress.json");
    wait_until("the first progress", || progress.exists().then_some(()));
    let f = app::find_run(&Home::at(env.home.clone()), "rec", None).unwrap();
    let mut w = Waiter::new().unwrap();
    let plain: Token = w.add(f.paths.clone(), f.spec.clone()).unwrap();
    let live: Token = w.watch_records(f.paths, f.spec).unwrap();
    assert!(quiet(&mut w), "nothing changed yet");
    touch(&f1);
    match next(&mut w) {
        WaitEvent::Changed(t) => assert_eq!(t, live),
        other => panic!("expected the progress to be reported, got {other:?}"),
    }
    let p = std::fs::read_to_string(&progress).unwrap();
    assert!(p.contains("\"two\""), "{p}");
    touch(&f2);
    let mut ended = Vec::new();
    while ended.len() < 2 {
        match next(&mut w) {
            WaitEvent::Finished { token, .. } => ended.push(token),
            WaitEvent::Changed(t) => assert_eq!(t, live, "only the watched one reports changes"),
            other => panic!("{other:?}"),
        }
    }
    ended.sort();
    assert_eq!(ended, [plain, live]);
    env.assert_no_leftovers();
}

#[test]
fn a_watched_directory_reports_entries_made_and_removed() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = Waiter::new().unwrap();
    let t = w.watch_dir(dir.path()).unwrap();
    assert!(quiet(&mut w));
    std::fs::create_dir(dir.path().join("run-1")).unwrap();
    assert!(matches!(next(&mut w), WaitEvent::Changed(x) if x == t));
    // Changes inside an entry are not the directory's.
    std::fs::write(dir.path().join("run-1/x"), "").unwrap();
    assert!(quiet(&mut w));
    std::fs::remove_file(dir.path().join("run-1/x")).unwrap();
    std::fs::remove_dir(dir.path().join("run-1")).unwrap();
    assert!(matches!(next(&mut w), WaitEvent::Changed(x) if x == t));
    w.remove(t);
    std::fs::create_dir(dir.path().join("run-2")).unwrap();
    assert!(quiet(&mut w), "a removed watch reports nothing");
}

#[test]
fn a_watched_descriptor_reports_while_it_is_readable() {
    let (r, mut wr) = std::io::pipe().unwrap();
    let mut w = Waiter::new().unwrap();
    let t = w.watch_fd(r.as_raw_fd());
    assert!(quiet(&mut w));
    wr.write_all(b"k").unwrap();
    assert!(matches!(next(&mut w), WaitEvent::Changed(x) if x == t));
    let mut buf = [0u8; 1];
    std::io::Read::read(&mut &r, &mut buf).unwrap();
    assert!(quiet(&mut w), "read: nothing more to report");
    w.remove(t);
    wr.write_all(b"k").unwrap();
    assert!(quiet(&mut w));
}
