//! A detached group's queue, for its driver's row and detail: paused or not, and why each
//! task that has not started waits (by the queue's one rule, [`app::fanout::why_waiting`]).

use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};

use crate::app;
use crate::app::board::Board;
use crate::envelope::{QueueWait, RunRow, RunState};

/// At most this many of a group's queued tasks are named in its driver's detail.
const QUEUED_SHOWN: usize = 8;

/// A live detached group's queue ([`app::fanout::queue_of`], from the board's runs):
/// whether it is paused, and each task that has not started (its run id) with why it waits.
pub fn queue(board: &Board, group: &str) -> Option<(bool, Vec<(String, QueueWait)>)> {
    let states: std::collections::HashMap<&str, RunState> = board
        .runs()
        .iter()
        .filter(|r| r.row.group.as_deref() == Some(group))
        .map(|r| (r.row.run_id.as_str(), r.row.status))
        .collect();
    let q = app::fanout::queue_of(board.home(), group, |run| states.get(run).copied())?;
    let queued = q
        .queued
        .into_iter()
        .map(|(i, w)| (q.record.tasks[i].run_id.clone(), w))
        .collect();
    Some((q.paused, queued))
}

/// The queue in a few words, for the group's row: `paused · 3 queued: 2 after others,
/// 1 concurrency 4` (the reasons by kind; the detail and `group G` name each).
pub fn words(board: &Board, group: &str) -> Option<String> {
    let (paused, queued) = queue(board, group)?;
    let mut counts: Vec<(String, usize)> = Vec::new();
    for (_, w) in &queued {
        let words = match w {
            QueueWait::Dependency { .. } => "after others".to_owned(),
            w => w.words(),
        };
        match counts.iter_mut().find(|(k, _)| *k == words) {
            Some((_, n)) => *n += 1,
            None => counts.push((words, 1)),
        }
    }
    let mut out = Vec::new();
    if paused {
        out.push("paused".to_owned());
    }
    if !queued.is_empty() {
        let why: Vec<String> = counts.iter().map(|(k, n)| format!("{n} {k}")).collect();
        out.push(format!("{} queued: {}", queued.len(), why.join(", ")));
    }
    (!out.is_empty()).then(|| out.join(" · "))
}

/// The lines of a detached group's driver's detail: paused or not, and each task that has not
/// started with why it waits (at most [`QUEUED_SHOWN`], then where the rest are). None for
/// any other run.
pub fn detail_lines(board: &Board, row: &RunRow) -> Vec<Line<'static>> {
    let dim = Style::default().add_modifier(Modifier::DIM);
    let Some((paused, queued)) = app::fanout::is_driver(row)
        .then(|| queue(board, &row.run_id))
        .flatten()
    else {
        return Vec::new();
    };
    let mut lines = Vec::new();
    if paused {
        lines.push(Line::from(vec![
            Span::styled("queue   ", dim),
            Span::raw("paused: no new task starts (subpane resume --group to carry on)"),
        ]));
    }
    for (run, why) in queued.iter().take(QUEUED_SHOWN) {
        lines.push(Line::from(vec![
            Span::styled("queued  ", dim),
            Span::raw(format!("{run}  {}", why.words())),
        ]));
    }
    if queued.len() > QUEUED_SHOWN {
        lines.push(Line::styled(
            format!(
                "        … {} more: subpane group {}",
                queued.len() - QUEUED_SHOWN,
                row.run_id
            ),
            dim,
        ));
    }
    lines
}
