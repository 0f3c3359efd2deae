//! Ctrl-C while `run` waits: the first SIGINT or SIGTERM cancels the attempt (SIGTERM to its
//! group, SIGKILL after its grace), a second one kills at once.
//!
//! The signals are blocked before the attempt is launched (so one that arrives during the
//! launch queues instead of killing `run` half-way), and a thread takes them with `sigwait`
//! and hands each to the wait loop's [`Interrupter`]. What an interrupt does is the
//! application layer's: `run` cancels through [`crate::app::cancel`] (an attempt that has
//! finished is left alone), `fanout` stops and cancels, then kills.
//!
//! ```text
//!  SIGINT/SIGTERM (blocked) ─► sigwait thread ─► Interrupter::interrupt ─► the wait loop
//! ```

use nix::sys::signal::{SigSet, Signal};

use super::live_line::Announcer;
use crate::app::Interrupter;

fn interrupts() -> SigSet {
    let mut m = SigSet::empty();
    m.add(Signal::SIGINT);
    m.add(Signal::SIGTERM);
    m
}

/// Blocks SIGINT and SIGTERM in this thread and every thread it starts later. Children get a
/// clean signal state (see `procs::reset_signals_in_child`).
pub fn block() {
    let _ = interrupts().thread_block();
}

/// Starts the thread that hands interrupts to `run`'s wait loop, saying at once (above the
/// live line, if any) what they do to `run_id`. Call [`block`] first.
pub fn cancel_on_interrupt(run_id: String, stop: Interrupter, say: Announcer) {
    on_interrupt(move |seen| {
        match seen {
            1 => say.say(&format!(
                "subpane: cancelling {run_id} — Ctrl-C again to kill"
            )),
            2 => say.say(&format!("subpane: killing {run_id}")),
            _ => {}
        }
        stop.interrupt();
    });
}

/// Starts the thread that ends `wait` on an interrupt: it says so at once (above the live
/// lines, if any) and stops the wait loop; the runs go on. Call [`block`] first.
pub fn stop_waiting_on_interrupt(stop: Interrupter, say: Announcer) {
    on_interrupt(move |seen| {
        if seen == 1 {
            say.say("subpane: stopped waiting; the runs go on (`subpane cancel RUN` stops one)");
        }
        stop.interrupt();
    });
}

/// Starts the thread that calls `on_signal(n)` for the n-th interrupt (1, 2, …): the policy
/// for anything beyond one attempt (`fanout` stops, cancels, then kills). Call [`block`] first.
pub fn on_interrupt(mut on_signal: impl FnMut(u32) + Send + 'static) {
    let _ = std::thread::Builder::new()
        .name("interrupts".into())
        .spawn(move || {
            let set = interrupts();
            let mut seen = 0u32;
            while set.wait().is_ok() {
                seen += 1;
                on_signal(seen);
            }
        });
}
