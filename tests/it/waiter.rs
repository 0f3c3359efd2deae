//! The application layer's persistent waiter, used from this process as a server would:
//! attempts added and removed while it waits, woken from another thread, following logs.

use std::time::{Duration, Instant};

use subpane::app;
use subpane::store::Home;
use subpane::supervisor::{Token, WaitEvent, Waiter};

use crate::harness::{TestEnv, start_waiting, touch, wait_until};

fn add(w: &mut Waiter, env: &TestEnv, run: &str) -> Token {
    let f = app::find_run(&Home::at(env.home.clone()), run, None).unwrap();
    w.add(f.paths, f.spec).unwrap()
}

/// The next finished attempt (anything else is a failure), within the suite's deadline.
fn next_finished(w: &mut Waiter) -> (Token, String, Option<i32>) {
    match w
        .next(Some(Instant::now() + crate::harness::DEADLINE))
        .unwrap()
    {
        WaitEvent::Finished { token, envelope } => {
            (token, envelope.run_id.clone(), envelope.exit_code)
        }
        other => panic!("expected a finished attempt, got {other:?}"),
    }
}

#[test]
fn attempts_are_returned_as_they_finish_and_can_be_added_and_removed_while_waiting() {
    let env = TestEnv::new();
    let fa = start_waiting(&env, "a", 0);
    let fb = start_waiting(&env, "b", 3);
    let fc = start_waiting(&env, "c", 0);
    let mut w = Waiter::new().unwrap();
    let ta = add(&mut w, &env, "a");
    let tb = add(&mut w, &env, "b");
    assert_eq!(w.pending(), 2);
    // Nothing has finished: a deadline that has passed returns at once.
    assert!(matches!(
        w.next(Some(Instant::now())).unwrap(),
        WaitEvent::TimedOut
    ));
    // b finishes first, with its own exit code.
    touch(&fb);
    assert_eq!(next_finished(&mut w), (tb, "b".into(), Some(3)));
    assert_eq!(w.pending(), 1);
    // c is added while a still runs, and a is removed: only c is reported.
    let tc = add(&mut w, &env, "c");
    w.remove(ta);
    touch(&fa);
    touch(&fc);
    assert_eq!(next_finished(&mut w), (tc, "c".into(), Some(0)));
    let a_result = env.attempt_dir("a", 1).join("result.json");
    wait_until("a's result", || a_result.exists().then_some(()));
    assert!(matches!(
        w.next(Some(Instant::now())).unwrap(),
        WaitEvent::TimedOut
    ));
    assert_eq!(w.pending(), 0);
    // An attempt that finished before it was added is returned at once.
    let ta2 = add(&mut w, &env, "a");
    assert_eq!(next_finished(&mut w), (ta2, "a".into(), Some(0)));
    env.assert_no_leftovers();
}

#[test]
fn another_thread_can_wake_a_waiter_blocked_on_running_attempts() {
    let env = TestEnv::new();
    let flag = start_waiting(&env, "long", 0);
    let mut w = Waiter::new().unwrap();
    add(&mut w, &env, "long");
    let waker = w.waker();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let t = std::thread::spawn(move || {
        // Wake once the main thread is about to block (or already is: either way the wake
        // is kept until the waiter looks).
        rx.recv().unwrap();
        waker.wake();
    });
    tx.send(()).unwrap();
    let started = Instant::now();
    // No deadline: only the wake-up can end this call while the attempt runs.
    assert!(matches!(w.next(None).unwrap(), WaitEvent::Woken));
    assert!(started.elapsed() < crate::harness::DEADLINE);
    t.join().unwrap();
    // The wake-up is used up; the attempt is still held and finishes normally.
    touch(&flag);
    let (_, run, code) = next_finished(&mut w);
    assert_eq!((run.as_str(), code), ("long", Some(0)));
    env.assert_no_leftovers();
}

#[test]
fn a_followed_attempt_reports_its_logs_growing_then_its_end() {
    let env = TestEnv::new();
    let flag = start_waiting(&env, "f", 0);
    let f = app::find_run(&Home::at(env.home.clone()), "f", None).unwrap();
    let out = f.paths.stdout_log();
    let mut w = Waiter::new().unwrap();
    let t = w.follow(f.paths.clone(), f.spec.clone()).unwrap();
    touch(&flag);
    // The second line is announced by a change, and the end comes after it; changes seen
    // before the last line landed are fine.
    let deadline = Instant::now() + crate::harness::DEADLINE;
    let mut changes = 0;
    loop {
        match w.next(Some(deadline)).unwrap() {
            WaitEvent::Changed(x) => {
                assert_eq!(x, t);
                changes += 1;
            }
            WaitEvent::Finished { token, envelope } => {
                assert_eq!(token, t);
                assert_eq!(envelope.status.as_str(), "completed");
                break;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(changes >= 1, "the log grew without a change event");
    assert!(std::fs::read_to_string(&out).unwrap().contains("flag seen"));
    env.assert_no_leftovers();
}

#[test]
fn a_waiter_with_nothing_to_wait_for_sleeps_until_its_deadline() {
    let mut w = Waiter::new().unwrap();
    let deadline = Instant::now() + Duration::from_millis(30);
    assert!(matches!(
        w.next(Some(deadline)).unwrap(),
        WaitEvent::TimedOut
    ));
    assert!(Instant::now() >= deadline);
}
