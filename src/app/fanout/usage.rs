//! What a fan-out does with its tasks' usage: a group's budget (budget.rs) counted as each
//! task's progress and end come, and a task at its account's usage limit that waits for
//! the reset (`--on-usage-limit wait`).

use super::*;

impl State<'_> {
    /// With `--on-usage-limit wait`, task `i`'s run ended at its usage limit: its next
    /// attempt starts now and waits in its pane for the reset (`retry --at-reset`), and the
    /// task goes on as that attempt. `false` when it ends as it is (another outcome, the
    /// fan-out stops, or the retry cannot be made: a warning says why).
    pub(super) fn waits_for_reset(
        &mut self,
        i: usize,
        env: &Envelope,
        wl: &mut WaitLoop,
        on_event: &mut dyn FnMut(&Event<'_>, &Progress),
    ) -> bool {
        if self.opts.on_usage_limit.is_fail()
            || self.stopping
            || env.failure_kind != Some(crate::envelope::FailureKind::UsageLimit)
        {
            return false;
        }
        let line = self.slots[i].line;
        if self.slots[i].waited >= USAGE_WAITS {
            let why = format!(
                "line {line}: its usage limit was still there after {USAGE_WAITS} waits for it to reset; it ends as it is"
            );
            self.emit(&Event::Warning(why), on_event);
            return false;
        }
        let Phase::Running { record, .. } = &self.slots[i].state else {
            return false;
        };
        let record = (**record).clone();
        let opts = crate::app::RetryOptions {
            at_reset: true,
            ..crate::app::RetryOptions::default()
        };
        let next =
            crate::app::prepare_retry(self.home, &env.run_id, &opts, &crate::app::RealSystem)
                .and_then(|p| crate::app::start(self.home, p.plan));
        match next {
            Ok(started) => {
                self.slots[i].waited += 1;
                if let Some(at) = &started.spec.start_at {
                    let words = crate::fresh::waiting_words(at);
                    let msg = format!("line {line}: {words}, then resuming run {}", env.run_id);
                    self.emit(&Event::Waiting(msg), on_event);
                }
                self.started(wl, i, record, started, on_event);
                true
            }
            Err(e) => {
                let why = format!("line {line}: its usage limit cannot be waited for: {e}");
                self.emit(&Event::Warning(why), on_event);
                false
            }
        }
    }

    /// A running task's `progress.json` changed: with a budget, what it used so far counts.
    pub(super) fn progressed(
        &mut self,
        token: Token,
        on_event: &mut dyn FnMut(&Event<'_>, &Progress),
    ) {
        let (Some(_), Some(&i)) = (&self.spent, self.running.get(&token)) else {
            return;
        };
        let Phase::Running { started, .. } = &self.slots[i].state else {
            return;
        };
        if let Some(p) = crate::app::progress(&started.paths) {
            let (attempt, price) = (started.spec.attempt, started.spec.limits.price);
            let mut so_far = p.so_far;
            so_far.cost_usd = crate::envelope::costed(&so_far, price.as_ref());
            self.spend(i, attempt, so_far, on_event);
        }
    }

    /// Task `i` has used `so_far` in all: the first time the group's budget is crossed, the
    /// fan-out stops and what runs is cancelled, as `budget`.
    pub(super) fn spend(
        &mut self,
        i: usize,
        attempt: u32,
        so_far: SoFar,
        on_event: &mut dyn FnMut(&Event<'_>, &Progress),
    ) {
        let Some(spent) = &mut self.spent else { return };
        let Some(hit) = spent.set((i, attempt), so_far) else {
            return;
        };
        if self.over_budget.is_some() {
            return;
        }
        self.emit(&Event::OverBudget(&hit), on_event);
        self.over_budget = Some(hit);
        self.stop(StopReason::Budget, on_event);
    }
}
