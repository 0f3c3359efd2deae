//! What a fan-out tells its reporter.

use std::time::Duration;

use crate::envelope::FanoutTask;

/// What happened, for a reporter.
#[derive(Debug)]
pub enum Event<'a> {
    /// Task `task` (an index into the tasks given) runs, as run `run_id` (here or there).
    Started { task: usize, run_id: &'a str },
    /// Task `task` ended (its run finished, or it could not start).
    Finished {
        task: usize,
        outcome: &'a FanoutTask,
    },
    /// Task `task` will not start.
    Skipped {
        task: usize,
        outcome: &'a FanoutTask,
    },
    /// A task's run hit its usage limit, and its next attempt waits for the reset
    /// (`--on-usage-limit wait`): in words.
    Waiting(String),
    /// The usage of the group's tasks crossed its budget (the fan-out then stops).
    OverBudget(&'a crate::envelope::BudgetHit),
    /// The fan-out stops starting tasks.
    Stopping(StopReason),
    /// Something went wrong that does not stop the fan-out (a record that could not be
    /// written, a cancel that could not be delivered).
    Warning(String),
    /// [`Options::tick`](super::Options::tick) passed (the wait loop's heartbeat).
    Tick,
}

/// Why a fan-out stops starting tasks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// `--fail-fast`: this task did not complete.
    Failed { task: usize, cancel_siblings: bool },
    /// The first interrupt: running tasks are cancelled (with their grace).
    Interrupted,
    /// A further interrupt: running tasks are killed at once.
    KillNow,
    /// The group's budget was crossed ([`Event::OverBudget`] says which limit): running
    /// tasks are cancelled, each to end as `budget`.
    Budget,
}

/// The counts at the time of an event.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    pub queued: usize,
    pub running: usize,
    pub completed: usize,
    pub failed: usize,
    pub cancelled: usize,
    pub skipped: usize,
    pub elapsed: Duration,
}

impl Progress {
    /// Tasks whose run has ended.
    pub fn done(&self) -> usize {
        self.completed + self.failed + self.cancelled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn done_counts_the_ended_runs_only() {
        let p = Progress {
            queued: 1,
            running: 2,
            completed: 3,
            failed: 4,
            cancelled: 5,
            skipped: 6,
            elapsed: Duration::ZERO,
        };
        assert_eq!(p.done(), 12);
    }
}
