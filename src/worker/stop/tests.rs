//! The stop machine over a fake clock: every interleaving the integration tests met, in
//! microseconds. Times are offsets from one base instant.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::*;
use crate::envelope::KillReason::{self, *};

const GRACE: u64 = 3_000;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn us(n: u64) -> Duration {
    Duration::from_micros(n)
}

fn limits(timeout: Option<u64>, idle: Option<u64>) -> Limits {
    Limits {
        timeout_ms: timeout,
        idle_timeout_ms: idle,
        linger_ms: 5_000,
        grace_ms: GRACE,
        ..Limits::default()
    }
}

/// A machine whose program was spawned at the returned instant.
fn running(l: Limits) -> (Life, Instant) {
    let t0 = Instant::now();
    let mut life = Life::new(&l);
    assert_eq!(life.on(Event::Spawned, t0), []);
    (life, t0)
}

fn cancel(grace_ms: u64) -> Event {
    Event::CancelRequested {
        grace: ms(grace_ms),
    }
}

fn stopped(reason: KillReason, sent_term: bool, sent_kill: bool) -> Option<Stop> {
    Some(Stop {
        reason,
        sent_term,
        sent_kill,
    })
}

const SIGKILLED: Exit = Exit::Signal(Signal::SIGKILL);
const SIGTERMED: Exit = Exit::Signal(Signal::SIGTERM);

#[test]
fn cancel_before_spawn_never_starts_and_sends_nothing() {
    let t0 = Instant::now();
    let mut life = Life::new(&limits(Some(1_000), None));
    assert_eq!(life.on(cancel(GRACE), t0), []);
    assert_eq!(life.state, State::Starting { cancelled: true });
    // The shell does not spawn; a spawn reported anyway starts nothing.
    assert_eq!(life.on(Event::Spawned, t0), []);
    assert_eq!(life.on(Event::Tick, t0 + ms(10_000)), []);
    assert_eq!(life.next_deadline(), None);
    assert_eq!(life.stop(), stopped(Cancel, false, false));
    assert_eq!(life.stop().unwrap().signals_sent(), Vec::<String>::new());
}

#[test]
fn nothing_happens_before_the_spawn() {
    let t0 = Instant::now();
    let mut life = Life::new(&limits(Some(1), Some(1)));
    for ev in [
        Event::Output,
        Event::TerminalSeen,
        Event::PaneClosed,
        Event::Tick,
    ] {
        assert_eq!(life.on(ev, t0 + ms(5)), [], "{ev:?}");
    }
    assert_eq!(life.next_deadline(), None);
    assert_eq!(life.stop(), None);
}

#[test]
fn without_limits_the_loop_waits_for_events_alone() {
    let (mut life, t0) = running(limits(None, None));
    assert_eq!(life.next_deadline(), None);
    assert_eq!(life.on(Event::Tick, t0 + ms(3_600_000)), []);
}

#[test]
fn timeout_on_a_term_ignoring_group_kills_at_kill_at() {
    let (mut life, t0) = running(limits(Some(1_000), None));
    let due = t0 + ms(1_000);
    assert_eq!(life.next_deadline(), Some(due));
    assert_eq!(life.on(Event::Tick, due - us(1)), []);
    assert_eq!(
        life.on(Event::Tick, due),
        [Action::Announce(Timeout), Action::Term]
    );
    let kill_at = due + ms(GRACE);
    assert_eq!(life.next_deadline(), Some(kill_at));
    assert_eq!(life.on(Event::Tick, kill_at - us(1)), []);
    assert_eq!(life.on(Event::Tick, kill_at), [Action::Kill]);
    // Killed: nothing more to wait for until the reap.
    assert_eq!(life.next_deadline(), None);
    assert_eq!(life.on(Event::Tick, kill_at + ms(10)), []);
    life.on(Event::PipesClosed, kill_at + ms(1));
    life.on(Event::AgentExited(SIGKILLED), kill_at + ms(2));
    assert!(life.done());
    assert_eq!(life.exit(), Some(SIGKILLED));
    assert_eq!(life.stop(), stopped(Timeout, true, true));
    assert_eq!(life.stop().unwrap().signals_sent(), ["SIGTERM", "SIGKILL"]);
}

#[test]
fn exit_during_the_grace_period_sends_no_sigkill_afterwards() {
    let (mut life, t0) = running(limits(Some(1_000), None));
    life.on(Event::Tick, t0 + ms(1_000));
    assert_eq!(life.on(Event::AgentExited(SIGTERMED), t0 + ms(1_200)), []);
    // The pipes are still open: the next deadline is the leak wait, not the kill.
    assert_eq!(life.next_deadline(), Some(t0 + ms(1_200) + LEAK_WAIT));
    life.on(Event::PipesClosed, t0 + ms(1_210));
    assert!(life.done());
    assert_eq!(life.next_deadline(), None);
    assert_eq!(life.on(Event::Tick, t0 + ms(1_000 + GRACE)), []);
    assert_eq!(life.on(cancel(GRACE), t0 + ms(5_000)), []);
    assert_eq!(life.stop(), stopped(Timeout, true, false));
    assert_eq!(life.stop().unwrap().signals_sent(), ["SIGTERM"]);
    assert_eq!(life.exit(), Some(SIGTERMED));
}

#[test]
fn idle_timeout_counts_from_the_last_output() {
    let (mut life, t0) = running(limits(None, Some(500)));
    assert_eq!(life.next_deadline(), Some(t0 + ms(500)));
    life.on(Event::Output, t0 + ms(400));
    assert_eq!(life.next_deadline(), Some(t0 + ms(900)));
    assert_eq!(life.on(Event::Tick, t0 + ms(500)), []);
    assert_eq!(
        life.on(Event::Tick, t0 + ms(900)),
        [Action::Announce(IdleTimeout), Action::Term]
    );
    assert_eq!(life.stop(), stopped(IdleTimeout, true, false));
}

#[test]
fn deadlines_passing_in_the_same_wake_up_start_one_stop_first_timeout() {
    let (mut life, t0) = running(limits(Some(1_000), Some(200)));
    life.on(Event::TerminalSeen, t0 + ms(10));
    // A late wake-up, past the idle timeout, the linger and the timeout alike.
    let late = t0 + ms(10_000);
    assert_eq!(
        life.on(Event::Tick, late),
        [Action::Announce(Timeout), Action::Term]
    );
    assert_eq!(life.on(Event::Tick, late), []);
    assert_eq!(life.next_deadline(), Some(late + ms(GRACE)));
    assert!(!life.stop().is_some_and(|s| s.reason == Linger));
}

#[test]
fn idle_comes_before_linger_in_the_same_wake_up() {
    let (mut life, t0) = running(limits(None, Some(200)));
    life.on(Event::TerminalSeen, t0);
    assert_eq!(
        life.on(Event::Tick, t0 + ms(6_000)),
        [Action::Announce(IdleTimeout), Action::Term]
    );
}

#[test]
fn a_wake_up_long_after_kill_at_kills_once() {
    let (mut life, t0) = running(limits(Some(100), None));
    life.on(Event::Tick, t0 + ms(100));
    assert_eq!(life.on(Event::Tick, t0 + ms(60_000)), [Action::Kill]);
    assert_eq!(life.on(Event::Tick, t0 + ms(60_001)), []);
}

#[test]
fn a_deadline_passing_while_stopping_starts_no_second_stop() {
    let (mut life, t0) = running(limits(Some(1_000), Some(500)));
    life.on(cancel(GRACE), t0 + ms(100));
    // Timeout and idle timeout pass during the grace: only the kill is pending.
    assert_eq!(life.next_deadline(), Some(t0 + ms(100 + GRACE)));
    assert_eq!(life.on(Event::Tick, t0 + ms(2_000)), []);
    assert_eq!(life.on(Event::PaneClosed, t0 + ms(2_100)), []);
    assert_eq!(life.on(Event::TerminalSeen, t0 + ms(2_200)), []);
    assert_eq!(life.on(Event::Tick, t0 + ms(100 + GRACE)), [Action::Kill]);
    assert_eq!(life.stop(), stopped(Cancel, true, true));
}

#[test]
fn cancel_sends_term_and_kills_after_its_own_grace() {
    let (mut life, t0) = running(limits(None, None));
    assert_eq!(
        life.on(cancel(500), t0 + ms(10)),
        [Action::Announce(Cancel), Action::Term]
    );
    assert_eq!(life.next_deadline(), Some(t0 + ms(510)));
    assert_eq!(life.on(Event::Tick, t0 + ms(510)), [Action::Kill]);
}

#[test]
fn second_cancel_kills_at_once() {
    let (mut life, t0) = running(limits(None, None));
    life.on(cancel(60_000), t0);
    assert_eq!(life.on(cancel(60_000), t0 + ms(50)), [Action::Kill]);
    assert_eq!(life.next_deadline(), None);
    assert_eq!(life.stop(), stopped(Cancel, true, true));
    // A third kills again (harmless), and SIGKILL is still recorded once.
    assert_eq!(life.on(cancel(60_000), t0 + ms(60)), [Action::Kill]);
    assert_eq!(life.stop().unwrap().signals_sent(), ["SIGTERM", "SIGKILL"]);
}

#[test]
fn cancel_during_a_timeout_stop_kills_at_once_and_the_timeout_stays_the_reason() {
    let (mut life, t0) = running(limits(Some(100), None));
    life.on(Event::Tick, t0 + ms(100));
    assert_eq!(life.on(cancel(GRACE), t0 + ms(200)), [Action::Kill]);
    assert_eq!(life.stop(), stopped(Timeout, true, true));
}

#[test]
fn cancel_with_grace_zero_kills_at_once_without_sigterm() {
    let (mut life, t0) = running(limits(None, None));
    assert_eq!(
        life.on(cancel(0), t0 + ms(10)),
        [Action::Announce(Cancel), Action::Kill]
    );
    assert_eq!(life.next_deadline(), None);
    assert_eq!(life.on(Event::Tick, t0 + ms(10)), []);
    assert_eq!(life.stop().unwrap().signals_sent(), ["SIGKILL"]);
}

#[test]
fn run_grace_zero_makes_a_timeout_kill_at_once() {
    let mut l = limits(Some(100), None);
    l.grace_ms = 0;
    let (mut life, t0) = running(l);
    assert_eq!(
        life.on(Event::Tick, t0 + ms(100)),
        [Action::Announce(Timeout), Action::Kill]
    );
    assert_eq!(life.stop(), stopped(Timeout, false, true));
}

#[test]
fn linger_then_exit_is_a_linger_stop() {
    let (mut life, t0) = running(limits(Some(60_000), None));
    life.on(Event::TerminalSeen, t0 + ms(100));
    // The linger clock starts once: a second terminal event does not move it.
    life.on(Event::TerminalSeen, t0 + ms(4_000));
    assert_eq!(life.next_deadline(), Some(t0 + ms(5_100)));
    assert_eq!(life.on(Event::Tick, t0 + ms(5_100) - us(1)), []);
    assert_eq!(
        life.on(Event::Tick, t0 + ms(5_100)),
        [Action::Announce(Linger), Action::Term]
    );
    life.on(Event::AgentExited(SIGTERMED), t0 + ms(5_150));
    life.on(Event::PipesClosed, t0 + ms(5_150));
    assert!(life.done());
    assert_eq!(life.stop(), stopped(Linger, true, false));
}

#[test]
fn exit_after_the_terminal_event_ends_the_linger_with_no_stop() {
    let (mut life, t0) = running(limits(None, None));
    life.on(Event::TerminalSeen, t0 + ms(100));
    life.on(Event::PipesClosed, t0 + ms(200));
    life.on(Event::AgentExited(Exit::Code(0)), t0 + ms(300));
    assert!(life.done());
    assert_eq!(life.on(Event::Tick, t0 + ms(5_100)), []);
    assert_eq!(life.stop(), None);
    assert_eq!(life.exit(), Some(Exit::Code(0)));
}

#[test]
fn pane_closed_stops_with_the_runs_grace() {
    let (mut life, t0) = running(limits(None, None));
    assert_eq!(
        life.on(Event::PaneClosed, t0 + ms(10)),
        [Action::Announce(PaneClosed), Action::Term]
    );
    assert_eq!(life.next_deadline(), Some(t0 + ms(10 + GRACE)));
    // A cancel after it is a second request: SIGKILL now, the reason stays.
    assert_eq!(life.on(cancel(GRACE), t0 + ms(20)), [Action::Kill]);
    assert_eq!(life.stop(), stopped(PaneClosed, true, true));
}

#[test]
fn no_stop_starts_after_the_agent_exited() {
    let (mut life, t0) = running(limits(Some(1_000), Some(100)));
    life.on(Event::TerminalSeen, t0);
    life.on(Event::AgentExited(Exit::Code(3)), t0 + ms(50));
    for ev in [
        cancel(0),
        Event::PaneClosed,
        Event::Output,
        Event::TerminalSeen,
    ] {
        assert_eq!(life.on(ev, t0 + ms(60)), [], "{ev:?}");
    }
    // Only the leak wait is left, past every limit.
    assert_eq!(life.next_deadline(), Some(t0 + ms(50) + LEAK_WAIT));
    assert_eq!(life.stop(), None);
}

#[test]
fn the_first_status_of_the_agent_wins() {
    let (mut life, t0) = running(limits(None, None));
    life.on(Event::AgentExited(Exit::Code(0)), t0 + ms(1));
    life.on(Event::AgentExited(Exit::Code(1)), t0 + ms(2));
    assert_eq!(life.exit(), Some(Exit::Code(0)));
}

#[test]
fn leaked_output_is_killed_after_the_leak_wait_then_given_up_after_the_drain() {
    let (mut life, t0) = running(limits(None, None));
    let exit = t0 + ms(1_000);
    life.on(Event::AgentExited(Exit::Code(0)), exit);
    assert!(!life.done());
    assert_eq!(life.on(Event::Tick, exit + LEAK_WAIT - us(1)), []);
    let leak = exit + LEAK_WAIT;
    assert_eq!(life.on(Event::Tick, leak), [Action::KillLeftovers]);
    assert!(life.output_held_open());
    assert_eq!(life.next_deadline(), Some(leak + DRAIN_WAIT));
    assert_eq!(life.on(Event::Tick, leak + DRAIN_WAIT - us(1)), []);
    assert_eq!(
        life.on(Event::Tick, leak + DRAIN_WAIT),
        [Action::GiveUpOnPipes]
    );
    assert!(life.done());
    assert!(life.output_held_open());
    assert_eq!(life.next_deadline(), None);
    assert_eq!(life.stop(), None);
}

#[test]
fn leaked_output_that_closes_after_the_kill_ends_the_drain() {
    let (mut life, t0) = running(limits(None, None));
    life.on(Event::AgentExited(Exit::Code(0)), t0);
    life.on(Event::Tick, t0 + LEAK_WAIT);
    life.on(Event::PipesClosed, t0 + LEAK_WAIT + ms(3));
    assert!(life.done());
    assert!(life.output_held_open());
    assert_eq!(life.on(Event::Tick, t0 + LEAK_WAIT + DRAIN_WAIT), []);
}

#[test]
fn output_closing_within_the_leak_wait_kills_nothing() {
    let (mut life, t0) = running(limits(None, None));
    life.on(Event::AgentExited(Exit::Code(0)), t0);
    life.on(Event::PipesClosed, t0 + ms(50));
    assert!(life.done());
    assert!(!life.output_held_open());
    assert_eq!(life.on(Event::Tick, t0 + LEAK_WAIT), []);
}

#[test]
fn output_closed_before_the_exit_ends_the_attempt_at_the_exit() {
    let (mut life, t0) = running(limits(Some(60_000), None));
    life.on(Event::PipesClosed, t0 + ms(10));
    assert!(!life.done());
    assert_eq!(life.next_deadline(), Some(t0 + ms(60_000)));
    life.on(Event::AgentExited(Exit::Code(0)), t0 + ms(20));
    assert!(life.done());
    assert_eq!(life.next_deadline(), None);
}

#[test]
fn a_kill_that_reaps_in_passing_keeps_the_stop() {
    // The shell reaps inside the kill and feeds the exit at once, at the same instant.
    let (mut life, t0) = running(limits(None, None));
    assert_eq!(
        life.on(cancel(0), t0),
        [Action::Announce(Cancel), Action::Kill]
    );
    life.on(Event::AgentExited(SIGKILLED), t0);
    assert_eq!(life.exit(), Some(SIGKILLED));
    assert_eq!(life.stop(), stopped(Cancel, false, true));
    assert_eq!(life.next_deadline(), Some(t0 + LEAK_WAIT));
}

#[test]
fn next_deadline_is_the_earliest_of_the_running_limits() {
    let (mut life, t0) = running(limits(Some(10_000), Some(3_000)));
    assert_eq!(life.next_deadline(), Some(t0 + ms(3_000)));
    life.on(Event::Output, t0 + ms(2_000));
    life.on(Event::TerminalSeen, t0 + ms(1_000));
    // linger_at = 1 s + 5 s = 6 s; idle = 5 s; timeout = 10 s.
    assert_eq!(life.next_deadline(), Some(t0 + ms(5_000)));
    life.on(Event::Output, t0 + ms(4_000));
    assert_eq!(life.next_deadline(), Some(t0 + ms(6_000)));
}

/// A budget crossed stops a running agent through the grace ladder like a timeout, and is
/// the reason reported; it starts no second stop, and none before the spawn or after the exit.
#[test]
fn a_budget_crossed_stops_through_the_ladder_once() {
    let (mut life, t0) = running(limits(None, None));
    assert_eq!(
        life.on(Event::BudgetCrossed, t0 + ms(10)),
        [Action::Announce(Budget), Action::Term]
    );
    assert_eq!(life.stop().unwrap().reason, Budget);
    assert!(life.on(Event::BudgetCrossed, t0 + ms(20)).is_empty());
    assert_eq!(life.next_deadline(), Some(t0 + ms(10 + GRACE)));
    assert_eq!(life.on(Event::Tick, t0 + ms(10 + GRACE)), [Action::Kill]);

    let mut fresh = Life::new(&limits(None, None));
    assert!(fresh.on(Event::BudgetCrossed, t0).is_empty());
    assert_eq!(fresh.stop(), None);

    let (mut ended, t0) = running(limits(None, None));
    ended.on(Event::AgentExited(Exit::Code(0)), t0 + ms(5));
    assert!(ended.on(Event::BudgetCrossed, t0 + ms(6)).is_empty());
    assert_eq!(ended.stop(), None);
}
