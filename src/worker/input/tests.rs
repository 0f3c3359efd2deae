//! When the input closes: the turn ends that come with something pending, an interrupt taken
//! after the end of the turn it stopped (pi answers `abort` after its `agent_end`), and the
//! wait for a next message.

use std::time::{Duration, Instant};

use super::*;
use crate::adapter::adapter_for;
use crate::spec::{AgentKind, TaskSpec};

/// The input of a pi attempt, its pipe's read end kept open, the prompt said and taken.
fn pi_input(
    keep_open: Option<Duration>,
) -> (
    Input,
    Box<dyn StreamParser>,
    std::os::fd::OwnedFd,
    tempfile::TempDir,
) {
    let dir = tempfile::tempdir().unwrap();
    let mut i = Input::bind(
        adapter_for(AgentKind::Pi),
        &dir.path().join("input.sock"),
        keep_open,
    )
    .unwrap();
    let task = TaskSpec {
        input: true,
        ..TaskSpec::default()
    };
    let mut parser = adapter_for(AgentKind::Pi).parser_for(Some(&task));
    let (read, write) = nix::unistd::pipe().unwrap();
    i.attach(Some(ChildStdin::from(write)), Some("go"), parser.as_mut());
    i.took(Took::Message);
    (i, parser, read, dir)
}

fn message(text: &str) -> InputRequest {
    InputRequest {
        from: InputFrom::Cli,
        text: Some(text.into()),
        interrupt: false,
    }
}

#[test]
fn a_turn_that_ends_with_nothing_pending_closes_the_input() {
    let (mut i, _p, _r, _d) = pi_input(None);
    assert!(i.turn_ended(Instant::now()), "the input stayed open");
    assert!(!i.open());
}

#[test]
fn a_message_taken_after_its_turn_ended_is_the_next_turn() {
    let (mut i, mut p, _r, _d) = pi_input(None);
    let now = Instant::now();
    i.say(message("more"), None, now, p.as_mut()).unwrap();
    // The turn ends before pi answers for the message: the input stays open for it.
    assert!(!i.turn_ended(now));
    assert!(!i.tick(now));
    i.took(Took::Message);
    assert!(!i.tick(now), "closed while the message's turn runs");
    assert!(i.open());
    assert!(i.turn_ended(now), "its turn's end closes it");
    assert_eq!((i.counts().messages, i.counts().taken), (1, 1));
}

#[test]
fn an_interrupt_answered_after_its_turn_ended_waits_for_a_next_message() {
    let (mut i, mut p, _r, _d) = pi_input(None);
    let now = Instant::now();
    let req = InputRequest {
        from: InputFrom::Mcp,
        text: None,
        interrupt: true,
    };
    i.say(req, None, now, p.as_mut()).unwrap();
    assert!(!i.turn_ended(now));
    assert!(!i.tick(now), "closed before pi answered the abort");
    i.took(Took::Interrupt);
    // The turn it stopped is over: the run waits for what comes next, not forever.
    assert!(!i.tick(now));
    assert_eq!(i.deadline(), Some(now + AFTER_INTERRUPT));
    assert!(i.open());
    assert!(i.tick(now + AFTER_INTERRUPT), "the wait did not end");
    assert!(!i.open());
}

#[test]
fn keep_open_waits_after_each_turn_and_a_message_meanwhile_cancels_the_wait() {
    let keep = Duration::from_secs(4);
    let (mut i, mut p, _r, _d) = pi_input(Some(keep));
    let now = Instant::now();
    assert!(!i.turn_ended(now));
    assert_eq!(i.deadline(), Some(now + keep));
    i.say(message("next"), None, now, p.as_mut()).unwrap();
    assert_eq!(i.deadline(), None, "a message cancels the wait");
    i.took(Took::Message);
    assert!(!i.tick(now + keep), "closed while a turn runs");
    let later = now + keep;
    assert!(!i.turn_ended(later));
    assert!(!i.tick(later + keep / 2));
    assert!(
        i.tick(later + keep),
        "the wait after the second turn did not end"
    );
    // Closed: nothing more is taken, and the refusal says why.
    assert!(
        i.say(message("late"), None, later + keep, p.as_mut())
            .is_none()
    );
}
