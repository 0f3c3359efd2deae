//! The live lines of `run` and `wait` on a terminal: one line per attempt (its state, how
//! long it has run, tokens and cost so far, its last event), redrawn in place as the
//! attempts' records change and once a second for the clock, and cleared before the summary.
//!
//! ```text
//!  wait loop (report_records) ─► WaitProgress ─► LiveLines::seen ─► Live::look (that attempt)
//!        finished / changed / heartbeat (1 s)                       redraw (at most every 100 ms,
//!                                                                   an end at once)
//!  the end ─► LiveLines::clear ─► the summary prints where the lines were
//! ```
//!
//! Only on a terminal, and never with `--json`: piped output gets the summary alone.
//!
//! A message from another thread (what a Ctrl-C does, said at once) goes through the
//! [`Announcer`]: the lines are taken away, the message printed, the lines drawn again below
//! it, all under the lock every redraw takes, so no copy of a line is left above the message.
//!
//! Common pitfalls:
//! * A line that wraps breaks the cursor-up count of the next redraw: every line is cut to
//!   the terminal's width (read again at each redraw, so a resize is taken), keeping its
//!   start: the end goes, marked `…`.
//! * No "clear to the end of the screen" (`ESC [ J`): lines are cleared one by one. From the
//!   top row that sequence clears the whole screen, and tmux then pushes the screen into its
//!   history (its `scroll-on-clear`): a copy of the lines above every redraw.
//! * Text from the program reached `progress.json` made safe by the worker; it is cut here
//!   by characters, never inside one.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use super::human;
use crate::app::{Live, WaitProgress};
use crate::envelope::Envelope;
use crate::store::AttemptPaths;

/// How often the clock of the lines moves.
pub const TICK: Duration = Duration::from_secs(1);
/// The shortest time between two redraws caused by records changing.
const FRAME: Duration = Duration::from_millis(100);

/// What one line shows.
#[derive(Clone, Debug, PartialEq)]
pub enum LineState {
    /// Running (or starting: no start time yet).
    Live(Live),
    /// Ended: how, and after how long.
    Ended {
        ok: bool,
        words: String,
        duration: Option<Duration>,
    },
}

/// One attempt of the lines.
#[derive(Clone, Debug)]
pub struct LineRow {
    pub run_id: String,
    pub paths: AttemptPaths,
    pub state: LineState,
    /// The wait target it is (whose ends and changes the wait loop reports), or none: a
    /// group's task that had no run when the wait began, looked at with the clock.
    pub target: Option<usize>,
}

/// What is on the screen now: the lines drawn, the cursor below them.
#[derive(Default)]
struct Screen {
    drawn: Vec<String>,
}

impl Screen {
    /// Replaces the lines drawn by `text` (none: takes them away).
    fn draw(&mut self, text: Vec<String>) {
        let mut s = String::new();
        if !self.drawn.is_empty() {
            s.push_str(&format!("\r\x1b[{}A", self.drawn.len()));
        }
        for l in &text {
            s.push_str("\x1b[2K");
            s.push_str(l);
            s.push('\n');
        }
        // Fewer lines than before: clear what is left of them, line by line, and the line
        // below them (a `^C` the terminal echoed there), then come back up. Never "clear to
        // the end of the screen": from the top row that is a clear of the whole screen, which
        // tmux (scroll-on-clear) answers by pushing the screen into its history.
        let extra = self.drawn.len().saturating_sub(text.len());
        for _ in 0..extra {
            s.push_str("\x1b[2K\n");
        }
        s.push_str("\r\x1b[2K");
        if extra > 0 {
            s.push_str(&format!("\x1b[{extra}A"));
        }
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(s.as_bytes());
        let _ = out.flush();
        self.drawn = text;
    }
}

/// Says a message above the live lines from any thread; without lines, on stderr alone.
#[derive(Clone, Default)]
pub struct Announcer(Option<Arc<Mutex<Screen>>>);

impl Announcer {
    pub fn say(&self, message: &str) {
        let Some(screen) = &self.0 else {
            eprintln!("{message}");
            return;
        };
        let mut screen = screen.lock().unwrap_or_else(PoisonError::into_inner);
        let text = screen.drawn.clone();
        screen.draw(Vec::new());
        eprintln!("{message}");
        screen.draw(text);
    }
}

/// The live lines on stdout.
pub struct LiveLines {
    rows: Vec<LineRow>,
    /// The lines on the screen, shared with the [`Announcer`].
    screen: Arc<Mutex<Screen>>,
    last_draw: Option<Instant>,
    /// A change not drawn yet (it came within a frame of the last redraw).
    dirty: bool,
}

impl LiveLines {
    /// Lines for `targets` (run id and attempt files), when stdout is a terminal and the
    /// answer is not `--json`.
    pub fn for_stdout(json: bool, targets: Vec<(String, AttemptPaths)>) -> Option<Self> {
        let rows = targets
            .into_iter()
            .enumerate()
            .map(|(i, (run_id, paths))| (run_id, paths, Some(i)))
            .collect();
        Self::shown(json, rows)
    }

    /// Lines for the attempts `rows` (run id, files, the wait target it is), which need not
    /// be the wait's targets: a group's tasks, and not the driver the wait is for.
    pub fn shown(json: bool, rows: Vec<(String, AttemptPaths, Option<usize>)>) -> Option<Self> {
        if json || !std::io::stdout().is_terminal() {
            return None;
        }
        let rows = rows
            .into_iter()
            .map(|(run_id, paths, target)| {
                let mut live = Live::default();
                live.look(&paths);
                let mut row = LineRow {
                    run_id,
                    paths,
                    state: LineState::Live(live),
                    target,
                };
                if target.is_none() {
                    row.look_for_end();
                }
                row
            })
            .collect();
        Some(Self {
            rows,
            screen: Arc::default(),
            last_draw: None,
            dirty: true,
        })
    }

    /// Says messages above these lines.
    pub fn announcer(&self) -> Announcer {
        Announcer(Some(self.screen.clone()))
    }

    /// What the wait loop reported: an end, a change of records, or the clock.
    pub fn seen(&mut self, p: &WaitProgress<'_>) {
        let mut urgent = false;
        let row_of = |rows: &[LineRow], i: usize| rows.iter().position(|r| r.target == Some(i));
        if let Some(i) = p.finished
            && let (Some(r), Some(Some(env))) = (row_of(&self.rows, i), p.results.get(i))
        {
            self.rows[r].state = ended(env);
            urgent = true;
        }
        if let Some(r) = p.changed.and_then(|i| row_of(&self.rows, i)) {
            let row = &mut self.rows[r];
            if let LineState::Live(l) = &mut row.state {
                l.look(&row.paths);
            }
        }
        if p.finished.is_none() && p.changed.is_none() {
            // The clock. An attempt that said nothing yet is looked at again: what it wrote
            // before its records were watched was not reported; one the loop does not
            // watch, every time.
            for row in &mut self.rows {
                if row.target.is_none() {
                    row.look_for_end();
                }
                if let LineState::Live(l) = &mut row.state
                    && (row.target.is_none() || l.started_at.is_none() || l.progress.is_none())
                {
                    l.look(&row.paths);
                }
            }
            urgent = true;
        }
        self.dirty = true;
        let due = self.last_draw.is_none_or(|t| t.elapsed() >= FRAME);
        if urgent || due {
            self.draw();
        }
    }

    /// Draws the lines in place of the last ones.
    pub fn draw(&mut self) {
        if !self.dirty {
            return;
        }
        let (cols, rows) = ratatui::crossterm::terminal::size().unwrap_or((80, 24));
        let text = lines(&self.rows, SystemTime::now(), cols as usize, rows as usize);
        self.screen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .draw(text);
        self.last_draw = Some(Instant::now());
        self.dirty = false;
    }

    /// Removes the lines: what is printed next takes their place.
    pub fn clear(&mut self) {
        let mut screen = self.screen.lock().unwrap_or_else(PoisonError::into_inner);
        if !screen.drawn.is_empty() {
            screen.draw(Vec::new());
        }
    }
}

impl Drop for LiveLines {
    fn drop(&mut self) {
        self.clear();
    }
}

impl LineRow {
    /// An attempt the wait loop does not watch: its end, once it has one.
    fn look_for_end(&mut self) {
        if matches!(self.state, LineState::Live(_))
            && let Ok(Some(env)) = crate::store::read_json::<Envelope>(&self.paths.result())
        {
            self.state = ended(&env);
        }
    }
}

fn ended(env: &Envelope) -> LineState {
    LineState::Ended {
        ok: env.status == crate::envelope::Status::Completed,
        words: env.outcome_words(),
        duration: env.duration_ms.map(Duration::from_millis),
    }
}

/// The lines for `rows` at `now` on a terminal `cols` wide and `height` high: one per
/// attempt, at most the screen's height less two (the rest counted on a last line).
pub fn lines(rows: &[LineRow], now: SystemTime, cols: usize, height: usize) -> Vec<String> {
    let room = height.saturating_sub(2).max(1);
    let width = cols.saturating_sub(1).max(10);
    let id_w = rows
        .iter()
        .map(|r| r.run_id.chars().count())
        .max()
        .unwrap_or(0)
        .min(32);
    let shown = if rows.len() > room {
        room - 1
    } else {
        rows.len()
    };
    // Running ones first when not all fit.
    let mut order: Vec<&LineRow> = rows.iter().collect();
    if shown < rows.len() {
        order.sort_by_key(|r| matches!(r.state, LineState::Ended { .. }));
    }
    let mut out: Vec<String> = order[..shown]
        .iter()
        .map(|r| cut(&line(r, now, id_w), width))
        .collect();
    if shown < rows.len() {
        let done = rows
            .iter()
            .filter(|r| matches!(r.state, LineState::Ended { .. }))
            .count();
        out.push(cut(
            &format!(
                "… and {} more ({done} of {} done)",
                rows.len() - shown,
                rows.len()
            ),
            width,
        ));
    }
    out
}

/// One attempt's line.
fn line(r: &LineRow, now: SystemTime, id_w: usize) -> String {
    let id: String = r.run_id.chars().take(id_w).collect();
    match &r.state {
        LineState::Ended {
            ok,
            words,
            duration,
        } => {
            let mark = if *ok { "✔" } else { "✘" };
            let d = duration.map(human::clock).unwrap_or_default();
            format!("{mark} {id:id_w$}  {d:>5}  {words}")
        }
        LineState::Live(l) => {
            let stopped = l
                .progress
                .as_ref()
                .is_some_and(|p| p.stopped_since.is_some());
            let (state, clock) = match (l.started_at, &l.waiting) {
                (Some(t), _) => (
                    if stopped { "⏸ stopped" } else { "running" }.to_owned(),
                    human::clock(now.duration_since(t).unwrap_or_default()),
                ),
                (None, Some(w)) => (crate::fresh::waiting_words(w), "-".to_owned()),
                (None, None) => ("starting".to_owned(), "-".to_owned()),
            };
            let mut s = format!("● {id:id_w$}  {clock:>5}  {state}");
            if let Some(p) = &l.progress {
                let so_far = human::so_far(&p.so_far);
                if !so_far.is_empty() {
                    s.push_str("  ");
                    s.push_str(&so_far);
                }
                if let Some(e) = &p.last_event {
                    s.push_str("  ");
                    s.push_str(&human::last_event(e));
                }
            }
            s
        }
    }
}

/// At most `width` characters of `s`, with `…` when cut.
fn cut(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(width.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::{EventKind, LastEvent, PROGRESS_SCHEMA, Progress, SoFar, Usage};

    fn row(id: &str, state: LineState) -> LineRow {
        LineRow {
            run_id: id.into(),
            paths: AttemptPaths::new("/nowhere".into()),
            state,
            target: None,
        }
    }

    fn running(since: SystemTime, progress: Option<Progress>) -> LineState {
        LineState::Live(Live {
            started_at: Some(since),
            progress,
            waiting: None,
        })
    }

    #[test]
    fn a_line_says_state_clock_usage_and_last_event() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let now = t0 + Duration::from_secs(83);
        let p = Progress {
            schema: PROGRESS_SCHEMA.into(),
            updated_at: String::new(),
            so_far: SoFar {
                usage: Some(Usage {
                    total_tokens: Some(12_345),
                    ..Usage::default()
                }),
                cost_usd: Some(0.0123),
                turns: None,
                tool_calls: Some(3),
            },
            last_event: Some(LastEvent {
                kind: EventKind::ToolCall,
                text: "bash cargo test".into(),
            }),
            stopped_since: None,
        };
        let rows = [
            row("fix-1", running(t0, Some(p))),
            row("b", LineState::Live(Live::default())),
            row(
                "done",
                LineState::Ended {
                    ok: false,
                    words: "failed (exit 7)".into(),
                    duration: Some(Duration::from_secs(4)),
                },
            ),
        ];
        assert_eq!(
            lines(&rows, now, 200, 24),
            [
                "● fix-1   1:23  running  12.3k tokens · $0.0123 · 3 tool calls  ▸ bash cargo test",
                "● b          -  starting",
                "✘ done    0:04  failed (exit 7)",
            ]
        );
        // Cut to the width, never wrapped.
        let narrow = lines(&rows, now, 30, 24);
        assert!(narrow.iter().all(|l| l.chars().count() <= 29), "{narrow:?}");
        assert!(narrow[0].ends_with('…'));
    }

    #[test]
    fn more_attempts_than_rows_show_the_running_ones_and_a_count() {
        let t0 = SystemTime::now();
        let mut rows: Vec<LineRow> = (0..10)
            .map(|i| {
                row(
                    &format!("r{i}"),
                    LineState::Ended {
                        ok: true,
                        words: "completed (exit 0)".into(),
                        duration: None,
                    },
                )
            })
            .collect();
        rows.push(row("live", running(t0, None)));
        let l = lines(&rows, t0, 80, 6);
        assert_eq!(l.len(), 4, "{l:?}");
        assert!(l[0].starts_with("● live"), "{l:?}");
        assert_eq!(l[3], "… and 8 more (10 of 11 done)");
    }
}
