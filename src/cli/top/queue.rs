//! A detached group's queue, for its driver's row: paused or not, and why each task that
//! has not started waits, counted by reason.

use crate::app;
use crate::app::board::Board;
use crate::envelope::RunState;

/// A live detached group's queue in a few words: `paused · 3 queued: 2 after plan,
/// 1 concurrency 4` (why each task that has not started waits, by the queue's one rule).
pub fn words(board: &Board, group: &str) -> Option<String> {
    let home = board.home();
    let record = app::fanout::group_record(home, group)?;
    let id = crate::spec::RunId::parse(group).ok()?;
    if !app::fanout::revive::is_open(home, &id) {
        return None;
    }
    let states: std::collections::HashMap<&str, RunState> = board
        .runs()
        .iter()
        .filter(|r| r.row.group.as_deref() == Some(group))
        .map(|r| (r.row.run_id.as_str(), r.row.status))
        .collect();
    let state = |run: &str| states.get(run).copied();
    let ended = |i: usize| state(&record.tasks[i].run_id).is_some_and(|s| !s.is_live());
    let waits = app::fanout::why_waiting(home, &record, ended);
    let mut counts: Vec<(String, usize)> = Vec::new();
    for (t, w) in record.tasks.iter().zip(waits) {
        let (None, Some(w)) = (state(&t.run_id), w) else {
            continue;
        };
        // `after a, b` and `until 14:05` by kind; the reasons themselves in `group G`.
        let words = match w {
            crate::envelope::QueueWait::Dependency { .. } => "after others".to_owned(),
            w => w.words(),
        };
        match counts.iter_mut().find(|(k, _)| *k == words) {
            Some((_, n)) => *n += 1,
            None => counts.push((words, 1)),
        }
    }
    let paused = app::fanout::control::read(home, &id).paused;
    let queued: usize = counts.iter().map(|(_, n)| n).sum();
    let mut out = Vec::new();
    if paused {
        out.push("paused".to_owned());
    }
    if queued > 0 {
        let why: Vec<String> = counts.iter().map(|(k, n)| format!("{n} {k}")).collect();
        out.push(format!("{queued} queued: {}", why.join(", ")));
    }
    (!out.is_empty()).then(|| out.join(" · "))
}
