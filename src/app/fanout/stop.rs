//! Stopping a fan-out: a first interrupt starts nothing more (and cancels what runs), a
//! second kills now; a failure with `fail_fast` or the group's budget stops it the same way.
//!
//! ```text
//!  take_interrupts ─ first ─► stop(Interrupted) ─► skip_queued, cancel_running(Fanout)
//!                  └ again ─► Stopping(KillNow), cancel_running(grace 0)
//!  stop(Failed | Budget)   ─► skip_queued (each "not started: …"), cancel_running(origin)
//! ```

use super::{Event, Phase, Progress, State, StopReason, skipped};
use crate::app::{Found, cancel_asking};
use crate::envelope::CancelOrigin;

impl State<'_> {
    /// Acts on interrupts that came since the last look.
    pub(super) fn take_interrupts(
        &mut self,
        hits: u32,
        on_event: &mut dyn FnMut(&Event<'_>, &Progress),
    ) {
        if hits == self.interrupts_seen {
            return;
        }
        let first = self.interrupts_seen == 0;
        self.interrupts_seen = hits;
        if first && hits == 1 {
            self.stop(StopReason::Interrupted, on_event);
        } else {
            if !self.stopping {
                self.stop(StopReason::Interrupted, on_event);
            }
            self.emit(&Event::Stopping(StopReason::KillNow), on_event);
            self.cancel_running(Some(0), CancelOrigin::Fanout, on_event);
        }
    }

    /// Starts nothing more; cancels what runs if the reason asks for it.
    pub(super) fn stop(
        &mut self,
        why: StopReason,
        on_event: &mut dyn FnMut(&Event<'_>, &Progress),
    ) {
        self.stopping = true;
        self.emit(&Event::Stopping(why), on_event);
        self.skip_queued(on_event);
        let cancel = match why {
            StopReason::Failed {
                cancel_siblings, ..
            } => cancel_siblings.then_some(CancelOrigin::Sibling),
            StopReason::Interrupted | StopReason::KillNow => Some(CancelOrigin::Fanout),
            StopReason::Budget => Some(CancelOrigin::Budget),
        };
        if let Some(origin) = cancel {
            self.cancel_running(None, origin, on_event);
        }
    }

    pub(super) fn skip_queued(&mut self, on_event: &mut dyn FnMut(&Event<'_>, &Progress)) {
        while let Some(i) = self.queue.pop_front() {
            self.progress.queued -= 1;
            self.progress.skipped += 1;
            let (line, run_id, what) = self.ids(i);
            let mut t = skipped(line, run_id, what);
            t.error = self
                .over_budget
                .as_ref()
                .map(|hit| format!("not started: {}", hit.words()));
            self.emit(
                &Event::Skipped {
                    task: i,
                    outcome: &t,
                },
                on_event,
            );
            self.slots[i].state = Phase::Done(t);
        }
    }

    /// Asks every running task to stop (`grace_ms`: `None` for the run's own grace), as
    /// asked by `origin`.
    pub(super) fn cancel_running(
        &mut self,
        grace_ms: Option<u64>,
        origin: CancelOrigin,
        on_event: &mut dyn FnMut(&Event<'_>, &Progress),
    ) {
        let mut warnings = Vec::new();
        for &i in self.running.values() {
            let Phase::Running { record, started } = &self.slots[i].state else {
                continue;
            };
            let found = Found {
                record: (**record).clone(),
                paths: started.paths.clone(),
                spec: started.spec.clone(),
            };
            let hit = self
                .over_budget
                .as_ref()
                .filter(|_| origin == CancelOrigin::Budget);
            if let Err(e) = cancel_asking(&found, grace_ms, origin, hit) {
                warnings.push(format!("cannot cancel {}: {e}", started.spec.run_id));
            }
        }
        for w in warnings {
            self.emit(&Event::Warning(w), on_event);
        }
        let there: Vec<_> = self
            .slots
            .iter()
            .filter_map(|s| match &s.state {
                Phase::There { run, .. } => Some(run.as_deref()),
                _ => None,
            })
            .collect();
        self.far.cancel(there, grace_ms, origin);
    }
}
