//! The board by fan-out group: each group's runs counted by state, for a group view with its
//! progress. Pure.

use std::time::SystemTime;

use super::BoardRun;
use crate::envelope::RunState;

/// One fan-out group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupSummary {
    pub group: String,
    pub total: usize,
    pub running: usize,
    pub completed: usize,
    pub failed: usize,
    pub cancelled: usize,
    /// When its first run was made.
    pub since: Option<SystemTime>,
}

impl GroupSummary {
    /// Runs that ended, whatever their end.
    pub fn done(&self) -> usize {
        self.completed + self.failed + self.cancelled
    }
}

/// The groups of `runs`, newest first (by their newest run), counted.
pub fn groups<'a>(runs: impl IntoIterator<Item = &'a BoardRun>) -> Vec<GroupSummary> {
    let mut out: Vec<GroupSummary> = Vec::new();
    for r in runs {
        let Some(g) = &r.row.group else { continue };
        let i = match out.iter().position(|s| &s.group == g) {
            Some(i) => i,
            None => {
                out.push(GroupSummary {
                    group: g.clone(),
                    ..GroupSummary::default()
                });
                out.len() - 1
            }
        };
        let s = &mut out[i];
        s.total += 1;
        match r.row.status {
            RunState::Queued | RunState::Starting | RunState::Running => s.running += 1,
            RunState::Completed => s.completed += 1,
            RunState::Failed | RunState::Damaged => s.failed += 1,
            RunState::Cancelled => s.cancelled += 1,
        }
        s.since = match (s.since, r.created) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    out
}
