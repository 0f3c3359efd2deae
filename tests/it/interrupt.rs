//! What an interrupt of a waited-for run does (Ctrl-C during `run`, an MCP client that gives
//! up on a `run` call): a cancel through `app::cancel`, so an attempt that has finished is
//! left alone.

use subpane::app::{self, CancelOutcome};
use subpane::store::Home;

use crate::harness::{TestEnv, start_waiting, touch, wait_until};

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
