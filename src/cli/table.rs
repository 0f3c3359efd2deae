//! Many runs as a table: one line per run, then a line of totals. What the foreground
//! `fanout` prints at its end and `wait` prints for several runs (or a group), in one shape.
//!
//! ```text
//!  LINE  RUN     STATUS        DURATION  WHAT
//!     1  lint-1  completed         1.2s  make lint
//!     2  test-1  failed (exit 2)   3.4s  make test
//!
//!  group g-…: 2 tasks: 1 completed, 1 failed in 3.4s
//! ```

use super::common::color_stdout;
use crate::envelope::{FailureKind, FanoutSummary, FanoutTask, TaskStatus};

/// The rows of `tasks` under a header; the LINE column only when `lines` (a fan-out's file).
pub fn rows(tasks: &[FanoutTask], lines: bool) -> String {
    let color = color_stdout();
    let id_w = tasks
        .iter()
        .map(|t| t.run_id.as_deref().map_or(1, str::len))
        .max()
        .unwrap_or(3)
        .max(3);
    let status: Vec<String> = tasks.iter().map(status_words).collect();
    let st_w = status
        .iter()
        .map(|s| s.chars().count())
        .max()
        .unwrap_or(6)
        .max(6);
    let line_col = |l: &str| {
        if lines {
            format!("{l:>5}  ")
        } else {
            String::new()
        }
    };
    let mut out = format!(
        "{}{:id_w$}  {:st_w$}  {:>9}  {}\n",
        line_col("LINE"),
        "RUN",
        "STATUS",
        "DURATION",
        "WHAT"
    );
    for (t, status) in tasks.iter().zip(status) {
        let pad = st_w - status.chars().count();
        let painted = if color {
            let c = match t.status {
                TaskStatus::Completed => "32",
                TaskStatus::Failed => "31",
                TaskStatus::Cancelled | TaskStatus::Skipped => "33",
                TaskStatus::Running | TaskStatus::Queued => "36",
            };
            format!("\x1b[{c}m{status}\x1b[0m{}", " ".repeat(pad))
        } else {
            format!("{status}{}", " ".repeat(pad))
        };
        let dur = t
            .duration_ms
            .map(|d| format!("{:.1}s", d as f64 / 1000.0))
            .unwrap_or_else(|| "-".into());
        out.push_str(&format!(
            "{}{:id_w$}  {painted}  {dur:>9}  {}\n",
            line_col(&t.line.to_string()),
            t.run_id.as_deref().unwrap_or("-"),
            t.what
        ));
    }
    out
}

/// How a task ended, in a few words: a failure says its kind (unless it is the plain one,
/// the program failed) or its exit code.
fn status_words(t: &FanoutTask) -> String {
    match t.status {
        TaskStatus::Failed => failure_words(t.failure_kind, t.exit_code),
        TaskStatus::Queued if t.waiting.is_some() => t
            .waiting
            .as_ref()
            .map(|w| format!("queued ({})", w.words()))
            .unwrap_or_default(),
        s => s.as_str().to_owned(),
    }
}

/// A failure in a few words, for every table of runs (`ls` too): its kind (`timeout`), or,
/// when the program failed, its exit code (`failed (exit 2)`).
pub fn failure_words(kind: Option<FailureKind>, exit_code: Option<i32>) -> String {
    match (kind, exit_code) {
        (Some(k), _) if k != FailureKind::Exit => k.as_str().to_owned(),
        (_, Some(c)) => format!("failed (exit {c})"),
        _ => "failed".to_owned(),
    }
}

/// `s` in at most `width` characters: cut at its end with `…` (what a table's last column
/// does on a terminal too narrow for it).
pub fn fit(s: &str, width: usize) -> std::borrow::Cow<'_, str> {
    if s.chars().count() <= width {
        return s.into();
    }
    let mut out: String = s.chars().take(width.saturating_sub(1)).collect();
    out.push('…');
    out.into()
}

/// How wide stdout's terminal is: `$COLUMNS` when it is a number, else the terminal's own
/// size; `None` when stdout is not a terminal (piped output is never cut).
pub fn stdout_width() -> Option<usize> {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() {
        return None;
    }
    let columns = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse().ok());
    columns.filter(|c: &usize| *c > 0).or_else(|| {
        ratatui::crossterm::terminal::size()
            .ok()
            .map(|(c, _)| c as usize)
    })
}

/// `30 completed, 2 failed, 1 running`: the counts, completed always, the others when not 0.
pub fn totals(s: &FanoutSummary) -> String {
    let mut counts = vec![format!("{} completed", s.completed)];
    for (n, what) in [
        (s.failed, "failed"),
        (s.cancelled, "cancelled"),
        (s.skipped, "skipped"),
        (s.running, "running"),
        (s.queued, "queued"),
    ] {
        if n > 0 {
            counts.push(format!("{n} {what}"));
        }
    }
    counts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::FanoutReport;

    fn task(line: usize, id: &str, status: TaskStatus, code: Option<i32>) -> FanoutTask {
        FanoutTask {
            line,
            id: None,
            run_id: Some(id.into()),
            status,
            failure_kind: (status == TaskStatus::Failed).then_some(FailureKind::Exit),
            exit_code: code,
            duration_ms: code.map(|_| 1500),
            attempt_dir: None,
            what: format!("job {id}"),
            error: None,
            waiting: None,
        }
    }

    #[test]
    fn one_line_per_run_and_the_counts() {
        let tasks = vec![
            task(1, "a", TaskStatus::Completed, Some(0)),
            task(3, "bb", TaskStatus::Failed, Some(7)),
            task(4, "c", TaskStatus::Running, None),
        ];
        assert_eq!(
            rows(&tasks, false),
            "RUN  STATUS            DURATION  WHAT\n\
             a    completed             1.5s  job a\n\
             bb   failed (exit 7)       1.5s  job bb\n\
             c    running                  -  job c\n"
        );
        assert!(rows(&tasks, true).starts_with(" LINE  RUN"));
        assert!(rows(&tasks, true).contains("\n    3  bb "));
        let r = FanoutReport::new("g".into(), tasks, 4, 0);
        assert_eq!(totals(&r.summary), "1 completed, 1 failed, 1 running");
    }
}
