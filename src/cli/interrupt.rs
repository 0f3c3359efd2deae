//! Ctrl-C while `run` waits: the first SIGINT or SIGTERM cancels the attempt (SIGTERM to its
//! group, SIGKILL after its grace), a second one kills at once.
//!
//! This is the command line's policy, not the waiter's: the signals are blocked before the
//! attempt is launched (so one that arrives during the launch queues instead of killing
//! `run` half-way), and a thread takes them with `sigwait` and asks the worker to cancel.
//! The waiter just sees the attempt end. `fanout` takes the same signals through
//! [`on_interrupt`] and hands them to its loop (stop and cancel, then kill).

use nix::sys::signal::{SigSet, Signal};

use crate::store::AttemptPaths;
use crate::supervisor::request_cancel;

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

/// Starts the thread that turns interrupts into cancels of this attempt. Call [`block`] first.
pub fn cancel_on_interrupt(run_id: String, paths: AttemptPaths, grace_ms: u64) {
    on_interrupt(move |seen| {
        let grace = if seen == 1 {
            eprintln!("subpane: cancelling {run_id} (Ctrl-C again to kill at once)");
            grace_ms
        } else {
            0
        };
        let _ = request_cancel(&paths, grace, || None);
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
