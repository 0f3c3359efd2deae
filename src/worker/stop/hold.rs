//! Holding the agent stopped (`subpane pause`, `stop.json`): the time it was held, and what
//! the rest of the machine does meanwhile. Not to be mixed up with a stop ([`super::Stop`]),
//! which ends the agent; a hold only suspends it.
//!
//! ```text
//!  Running ─ Hold { stopped: true } ─► SigStop (the group)     since = now, times += 1
//!     ▲        every deadline of Running stands still: none fires, next_deadline is None
//!     └──── Hold { stopped: false } ─► SigCont (the group)     total += now - since;
//!                                       started, last_output, linger_at move later by it
//!  held, a stop begins (cancel, the pane closed) ─► Term (or Kill), then SigCont: a stopped
//!                                       process takes its SIGTERM only once continued
//!  held, the agent exits (killed from outside) ─► the hold ends at the exit
//! ```
//!
//! The decision: while the agent is held stopped, its clocks stand still. `--timeout`
//! (`started`), `--idle-timeout` (`last_output`) and the linger after the final event count
//! the time the agent could run, not the time it was held: a group paused for an hour does
//! not time its tasks out the moment it is resumed. The envelope's `duration_ms` stays the
//! wall time; `stopped_ms` says how much of it the agent was held.
//!
//! Common pitfalls:
//! * Requests are states, not toggles: holding a held agent, or continuing one that runs, is
//!   no change (two requests in a row must not stop it twice, nor count twice).
//! * A request before the spawn changes nothing here: the worker reads `stop.json` again once
//!   the program runs (the file holds the latest state asked for).
//! * No hold starts once a stop began: the grace ladder must reach a running process.
//! * SIGCONT goes after SIGTERM, not before: the agent wakes to its SIGTERM, with nothing of
//!   its own run in between.

use std::time::{Duration, Instant};

/// The agent held stopped, and for how long it was so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Hold {
    /// Since when the agent is held stopped; `None` while it runs.
    pub since: Option<Instant>,
    /// The time of the holds that ended.
    pub total: Duration,
    /// How many times it was stopped.
    pub times: u32,
}

impl Hold {
    /// Starts a hold at `now`; `false` when one is already on (no change).
    pub(super) fn start(&mut self, now: Instant) -> bool {
        if self.since.is_some() {
            return false;
        }
        self.since = Some(now);
        self.times += 1;
        true
    }

    /// Ends the hold at `now`: how long it lasted, `None` when none was on.
    pub(super) fn end(&mut self, now: Instant) -> Option<Duration> {
        let d = now.saturating_duration_since(self.since.take()?);
        self.total += d;
        Some(d)
    }

    /// The time held in all, counting a hold still on up to `now` (the end of an attempt
    /// that ends held).
    pub fn total_at(&self, now: Instant) -> Duration {
        self.total
            + self
                .since
                .map_or(Duration::ZERO, |s| now.saturating_duration_since(s))
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use nix::sys::signal::Signal;

    use super::super::{Action, Event, Exit, Life, State};
    use crate::envelope::KillReason;
    use crate::spec::Limits;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    const HOLD: Event = Event::Hold { stopped: true };
    const GO_ON: Event = Event::Hold { stopped: false };

    fn running(timeout: Option<u64>, idle: Option<u64>) -> (Life, Instant) {
        let t0 = Instant::now();
        let mut life = Life::new(&Limits {
            timeout_ms: timeout,
            idle_timeout_ms: idle,
            linger_ms: 1_000,
            grace_ms: 3_000,
            ..Limits::default()
        });
        assert_eq!(life.on(Event::Spawned, t0), []);
        (life, t0)
    }

    #[test]
    fn a_hold_stops_the_group_once_and_a_continue_counts_it_once() {
        let (mut life, t0) = running(None, None);
        assert_eq!(life.on(HOLD, t0 + ms(10)), [Action::SigStop]);
        // A second request to hold is no change: no second SIGSTOP, no second count.
        assert_eq!(life.on(HOLD, t0 + ms(20)), []);
        assert_eq!(life.hold().times, 1);
        assert_eq!(life.hold().total_at(t0 + ms(60)), ms(50));
        assert_eq!(
            life.on(GO_ON, t0 + ms(110)),
            [Action::SigCont { held: ms(100) }]
        );
        // Continuing a running agent is no change either.
        assert_eq!(life.on(GO_ON, t0 + ms(120)), []);
        assert_eq!(life.on(HOLD, t0 + ms(200)), [Action::SigStop]);
        assert_eq!(
            life.on(GO_ON, t0 + ms(250)),
            [Action::SigCont { held: ms(50) }]
        );
        let h = life.hold();
        assert_eq!((h.times, h.total, h.since), (2, ms(150), None));
    }

    #[test]
    fn output_while_held_counts_its_idle_time_from_the_continue() {
        let (mut life, t0) = running(None, Some(500));
        assert_eq!(life.on(HOLD, t0 + ms(400)), [Action::SigStop]);
        // Output of a process outside the held group, and the final event, while held.
        assert_eq!(life.on(Event::Output, t0 + ms(5_000)), []);
        assert_eq!(life.on(Event::TerminalSeen, t0 + ms(6_000)), []);
        assert_eq!(
            life.on(GO_ON, t0 + ms(10_400)),
            [Action::SigCont { held: ms(10_000) }]
        );
        // Idle 500 ms and the 1 s linger both from the continue, not pushed past it.
        assert_eq!(life.next_deadline(), Some(t0 + ms(10_900)));
    }

    #[test]
    fn the_timeout_and_idle_timeout_stand_still_while_held() {
        let (mut life, t0) = running(Some(1_000), Some(500));
        assert_eq!(life.on(HOLD, t0 + ms(400)), [Action::SigStop]);
        // Held: no deadline, and a wake-up long past both fires nothing.
        assert_eq!(life.next_deadline(), None);
        assert_eq!(life.on(Event::Tick, t0 + ms(3_600_000)), []);
        assert_eq!(
            life.on(GO_ON, t0 + ms(10_400)),
            [Action::SigCont { held: ms(10_000) }]
        );
        // 400 ms ran before the hold: the idle timeout (500 ms since the output at 0) is
        // 100 ms away, the timeout 600 ms.
        assert_eq!(life.next_deadline(), Some(t0 + ms(10_500)));
        assert_eq!(life.on(Event::Output, t0 + ms(10_450)), []);
        assert_eq!(life.next_deadline(), Some(t0 + ms(10_950)));
        let acts = life.on(Event::Tick, t0 + ms(11_000));
        assert_eq!(
            acts,
            [Action::Announce(KillReason::Timeout), Action::Term],
            "the timeout counts 1 s of running, not of the wall"
        );
    }

    #[test]
    fn the_linger_stands_still_while_held() {
        let (mut life, t0) = running(None, None);
        assert_eq!(life.on(Event::TerminalSeen, t0 + ms(100)), []);
        assert_eq!(life.on(HOLD, t0 + ms(600)), [Action::SigStop]);
        assert_eq!(life.on(Event::Tick, t0 + ms(5_000)), []);
        life.on(GO_ON, t0 + ms(5_600));
        // 500 ms of the 1 s linger were left.
        assert_eq!(life.next_deadline(), Some(t0 + ms(6_100)));
    }

    #[test]
    fn a_cancel_of_a_held_agent_terms_then_continues_it_and_ends_the_hold() {
        let (mut life, t0) = running(None, None);
        life.on(HOLD, t0 + ms(100));
        let acts = life.on(Event::CancelRequested { grace: ms(3_000) }, t0 + ms(400));
        assert_eq!(
            acts,
            [
                Action::Announce(KillReason::Cancel),
                Action::Term,
                Action::SigCont { held: ms(300) }
            ]
        );
        // The grace ladder runs as usual; no hold starts while stopping.
        assert_eq!(life.next_deadline(), Some(t0 + ms(3_400)));
        assert_eq!(life.on(HOLD, t0 + ms(500)), []);
        assert_eq!(life.on(GO_ON, t0 + ms(600)), []);
        assert_eq!(life.on(Event::Tick, t0 + ms(3_400)), [Action::Kill]);
        let h = life.hold();
        assert_eq!((h.times, h.total_at(t0 + ms(9_000))), (1, ms(300)));
    }

    #[test]
    fn a_cancel_with_no_grace_kills_a_held_agent_and_continues_the_rest() {
        let (mut life, t0) = running(None, None);
        life.on(HOLD, t0);
        let acts = life.on(Event::CancelRequested { grace: ms(0) }, t0 + ms(50));
        assert_eq!(
            acts,
            [
                Action::Announce(KillReason::Cancel),
                Action::Kill,
                Action::SigCont { held: ms(50) }
            ]
        );
    }

    #[test]
    fn an_agent_killed_while_held_ends_its_hold_at_the_exit() {
        let (mut life, t0) = running(None, None);
        life.on(HOLD, t0 + ms(100));
        life.on(
            Event::AgentExited(Exit::Signal(Signal::SIGKILL)),
            t0 + ms(700),
        );
        assert!(matches!(life.state, State::Exited { .. }));
        assert_eq!(life.hold().since, None);
        assert_eq!(life.hold().total_at(t0 + ms(5_000)), ms(600));
        // Nothing to hold once it has exited.
        assert_eq!(life.on(HOLD, t0 + ms(800)), []);
    }

    #[test]
    fn a_request_before_the_spawn_changes_nothing() {
        let t0 = Instant::now();
        let mut life = Life::new(&Limits::default());
        assert_eq!(life.on(HOLD, t0), []);
        assert_eq!(life.on(Event::Spawned, t0 + ms(5)), []);
        assert_eq!(life.hold().times, 0);
    }

    #[test]
    fn a_hold_still_on_counts_up_to_the_end() {
        let (mut life, t0) = running(None, None);
        life.on(HOLD, t0 + ms(100));
        assert_eq!(life.hold().total_at(t0 + ms(2_100)), ms(2_000));
    }
}
