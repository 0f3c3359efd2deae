//! The application layer's persistent waiter, used from this process as a server would:
//! attempts added and removed while it waits, woken from another thread, following logs.

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use subpane::app;
use subpane::store::Home;
use subpane::supervisor::{Token, WaitEvent, Waiter};

use crate::harness::{TestEnv, start_waiting, touch, wait_until};

fn find(env: &TestEnv, run: &str) -> app::Found {
    app::find_run(&Home::at(env.home.clone()), run, None).unwrap()
}

fn add(w: &mut Waiter, env: &TestEnv, run: &str) -> Token {
    let f = find(env, run);
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
    let f = find(&env, "f");
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

/// `app::wait_with` with a heartbeat: beats come every period from the start, and a reporter
/// that is busy for several periods gets one beat for them, not a burst made up afterwards.
/// Fan-out ticks, MCP progress and `wait` all come from this one loop's heartbeat.
#[test]
fn the_heartbeat_skips_beats_missed_while_the_reporter_was_busy() {
    const EVERY: Duration = Duration::from_millis(200);
    let env = TestEnv::new();
    let flag = start_waiting(&env, "hb", 0);
    let f = find(&env, "hb");
    let t0 = Instant::now();
    let mut beats: Vec<Instant> = Vec::new();
    let mut report = |p: &app::WaitProgress<'_>| {
        if p.finished.is_some() {
            return;
        }
        beats.push(Instant::now());
        match beats.len() {
            // A slow reporter: busy for five periods.
            1 => std::thread::sleep(5 * EVERY),
            4 => touch(&flag),
            _ => {}
        }
    };
    let mut wl = app::WaitLoop::new().unwrap();
    let res = app::wait_with(
        &mut wl,
        &[(f.paths, f.spec)],
        app::WaitMode::All,
        Some(crate::harness::DEADLINE),
        app::WaitOptions {
            heartbeat: Some(EVERY),
            on_progress: Some(&mut report),
            on_interrupt: None,
        },
    )
    .unwrap();
    assert!(!res.timed_out && res.results[0].is_some(), "{res:?}");
    assert!(beats.len() >= 4, "{} beats", beats.len());
    assert!(beats[0] >= t0 + EVERY, "a beat before the first period");
    // After the busy one, beats keep their period: none made up in a burst.
    for w in beats[1..].windows(2) {
        assert!(
            w[1] - w[0] >= EVERY / 10,
            "beats made up for: {:?}",
            beats.iter().map(|b| *b - t0).collect::<Vec<_>>()
        );
    }
    env.assert_no_leftovers();
}

/// The one loop hands a driver every end it already knows before the driver settles (where a
/// fan-out refills), and an interrupt that came before the loop ran is seen at the first
/// settle (a Ctrl-C during a launch).
#[test]
fn ends_that_come_together_are_seen_before_the_driver_settles() {
    struct Counts {
        ends: usize,
        at_settle: Vec<(usize, u32)>,
    }
    impl app::Driver for Counts {
        fn settled(&mut self, wl: &mut app::WaitLoop) -> Result<ControlFlow<()>, app::Error> {
            self.at_settle.push((self.ends, wl.interrupts()));
            Ok(if self.ends == 3 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            })
        }
        fn seen(
            &mut self,
            _wl: &mut app::WaitLoop,
            seen: app::Seen,
        ) -> Result<ControlFlow<()>, app::Error> {
            if let app::Seen::Finished { .. } = seen {
                self.ends += 1;
            }
            Ok(ControlFlow::Continue(()))
        }
    }
    let env = TestEnv::new();
    for id in ["e1", "e2", "e3"] {
        touch(&start_waiting(&env, id, 0));
        let done = env.attempt_dir(id, 1).join("result.json");
        wait_until("the run's result", || done.exists().then_some(()));
    }
    let mut wl = app::WaitLoop::new().unwrap();
    wl.interrupter().interrupt();
    for id in ["e1", "e2", "e3"] {
        let f = find(&env, id);
        wl.add(f.paths, f.spec).unwrap();
    }
    let mut c = Counts {
        ends: 0,
        at_settle: Vec::new(),
    };
    let ended = wl
        .run(
            Some(Instant::now() + crate::harness::DEADLINE),
            None,
            &mut c,
        )
        .unwrap();
    assert_eq!(ended, app::Ended::Done);
    assert_eq!(c.at_settle, [(0, 1), (3, 1)], "one settle for the burst");
    env.assert_no_leftovers();
}

/// `app::follow` (what `logs -f` copies with): a look at what is there first, one per burst
/// of appends, and the end last, when everything the attempt wrote is in place.
#[test]
fn follow_looks_first_then_on_changes_and_ends_with_everything_written() {
    let env = TestEnv::new();
    let flag = start_waiting(&env, "fo", 0);
    let f = find(&env, "fo");
    let out = f.log_path(None).expect("a command has a stdout");
    let mut seen: Vec<(app::Followed, String)> = Vec::new();
    app::follow(&f, &mut |what| {
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        if seen.is_empty() {
            assert!(text.contains("waiting for"), "{text:?}");
            touch(&flag);
        }
        seen.push((what, text));
        Ok(ControlFlow::Continue(()))
    })
    .unwrap();
    let (first, last) = (&seen[0], &seen[seen.len() - 1]);
    assert_eq!(first.0, app::Followed::Grew);
    assert_eq!(last.0, app::Followed::Ended);
    assert!(last.1.ends_with("flag seen\n"), "{:?}", last.1);
    assert!(
        seen[..seen.len() - 1]
            .iter()
            .all(|(w, _)| *w == app::Followed::Grew)
    );
    env.assert_no_leftovers();
}

/// An interrupt stops a wait (the runs go on) unless `on_interrupt` says to keep waiting.
#[test]
fn an_interrupt_stops_a_wait_and_the_run_goes_on() {
    let env = TestEnv::new();
    let flag = start_waiting(&env, "st", 0);
    let f = find(&env, "st");
    let targets = [(f.paths.clone(), f.spec.clone())];
    let mut wl = app::WaitLoop::new().unwrap();
    let stop = wl.interrupter();
    let t = std::thread::spawn(move || stop.interrupt());
    let res = app::wait_with(
        &mut wl,
        &targets,
        app::WaitMode::All,
        None,
        app::WaitOptions::default(),
    )
    .unwrap();
    t.join().unwrap();
    assert!(res.stopped && !res.timed_out && res.results[0].is_none());
    // Told to go on, the same interrupt count is not acted on again: the wait ends with the run.
    let mut asked = Vec::new();
    let mut go_on = |n: u32| {
        asked.push(n);
        ControlFlow::Continue(())
    };
    let mut wl = app::WaitLoop::new().unwrap();
    wl.interrupter().interrupt();
    touch(&flag);
    let res = app::wait_with(
        &mut wl,
        &targets,
        app::WaitMode::All,
        None,
        app::WaitOptions {
            on_interrupt: Some(&mut go_on),
            ..app::WaitOptions::default()
        },
    )
    .unwrap();
    assert!(!res.stopped && res.results[0].is_some(), "{res:?}");
    assert_eq!(asked, [1]);
    env.assert_no_leftovers();
}
