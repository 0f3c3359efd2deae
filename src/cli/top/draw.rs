//! `top`'s screens, drawn from the board and the state of the screen. Pure: the same board,
//! state and time draw the same screen (the snapshot tests rely on it).
//!
//! ```text
//!  ┌ header: counts, the filter ───────────────────────────────────────┐
//!  │ table of runs (or of groups)         the selected row reversed     │
//!  │ detail of the selected run (Mode::Detail): figures, events, stderr │
//!  └ status line: a question, what was done, or the keys ──────────────┘
//! ```
//!
//! Common pitfalls:
//! * 80 columns must hold the essentials: the agent, group and labels columns come only
//!   when there is room, TOKENS and COST only when a run shown has them, generated ids show
//!   their random part under 120 columns (groups always in the run table: a day's groups
//!   share the rest), and the last event takes what is left. The status line keeps the hints
//!   that fit, attach, cancel, retry and help first; `?` shows every key.
//! * Text from programs holds no escape but plain SGR (the detail's, drawn as styles by
//!   `sgr::line`): nothing from a program is written to the terminal as it is.
//! * `NO_COLOR`: no colour at all; the selection is shown reversed, which is not a colour.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table, TableState};

use super::ui::{BINDINGS, Editing, Mode, Ui, hints, keys_width};
use crate::app;
use crate::app::board::{Board, BoardRun, Detail, GroupSummary, groups};
use crate::cli::human;
use crate::envelope::{FailureKind, RunState, SoFar};

/// Draws the whole screen.
pub fn draw(f: &mut Frame, board: &Board, ui: &mut Ui, detail: Option<&Detail>, now: SystemTime) {
    let area = f.area();
    let detail_h = if ui.mode == Mode::Detail {
        (area.height.saturating_sub(2) / 2).max(6)
    } else {
        0
    };
    let [head, body, det, foot] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(detail_h),
        Constraint::Length(1),
    ])
    .areas(area);
    header(f, head, board, ui);
    if ui.mode == Mode::Groups {
        group_table(f, body, board, ui, now);
    } else {
        run_table(f, body, board, ui, now);
    }
    if ui.mode == Mode::Detail {
        super::detail::pane(f, det, board, ui, detail, now);
    }
    status_line(f, foot, ui);
    if ui.help {
        help(f, area);
    }
}

/// Every key, in a box over the screen (`?`; any key closes it).
fn help(f: &mut Frame, area: Rect) {
    use ratatui::widgets::{Block, Borders, Clear};
    let keys_w = keys_width();
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let mut lines: Vec<Line> = BINDINGS
        .iter()
        .map(|b| {
            Line::from(vec![
                Span::styled(format!("{:keys_w$}  ", b.keys), bold),
                Span::raw(b.does),
            ])
        })
        .collect();
    lines.push(Line::raw(""));
    lines.push(Line::styled(
        "Every action says what it did on the last line. NO_COLOR: no colour.",
        Style::default().add_modifier(Modifier::DIM),
    ));
    let want_w = lines.iter().map(Line::width).max().unwrap_or(0) as u16 + 4;
    // A box a column short of the screen would leave that column of the table beside it.
    let w = if want_w + 2 >= area.width {
        area.width
    } else {
        want_w
    };
    let h = (lines.len() as u16 + 2).min(area.height);
    let boxed = Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    };
    f.render_widget(Clear, boxed);
    let block = Block::default()
        .borders(Borders::ALL)
        .title(" subpane top · keys (any key closes this) ");
    f.render_widget(
        Paragraph::new(lines)
            .block(block)
            .wrap(ratatui::widgets::Wrap { trim: false }),
        boxed,
    );
}

/// A style, or none without colour.
pub(super) fn fg(ui: &Ui, c: Color) -> Style {
    if ui.color {
        Style::default().fg(c)
    } else {
        Style::default()
    }
}

fn header(f: &mut Frame, area: Rect, board: &Board, ui: &Ui) {
    // A fan-out's driver is its group's row, not one more run.
    let runs: Vec<&BoardRun> = board
        .runs()
        .iter()
        .filter(|r| !app::fanout::is_driver(&r.row))
        .collect();
    let count = |s: RunState| runs.iter().filter(|r| r.row.status == s).count();
    let live = count(RunState::Running) + count(RunState::Starting);
    let mut text = format!(
        "subpane top · {} · {live} running · {} failed",
        human::counted(runs.len() as u64, "run"),
        count(RunState::Failed)
    );
    if !ui.filter.is_empty() {
        text.push_str(&format!(
            " · {} shown: {}",
            ui.visible(board).len(),
            ui.filter.describe()
        ));
    }
    if ui.mode == Mode::Groups {
        text.push_str(" · groups");
    }
    let style = Style::default().add_modifier(Modifier::BOLD);
    f.render_widget(Paragraph::new(Line::styled(text, style)), area);
}

/// The status column: the state, and a failure's kind.
pub fn status_text(r: &BoardRun) -> String {
    let row = &r.row;
    match row.status {
        _ if app::fanout::is_driver(row) => match row.status {
            RunState::Queued | RunState::Starting | RunState::Running => "▣ group".into(),
            _ => "▣ group ended".into(),
        },
        RunState::Queued if row.waiting.is_some() => "◌ waiting".into(),
        RunState::Queued => "◌ queued".into(),
        RunState::Starting => "◌ starting".into(),
        RunState::Running => "● running".into(),
        RunState::Completed => "✔ completed".into(),
        RunState::Cancelled => "■ cancelled".into(),
        RunState::Damaged => "? damaged".into(),
        RunState::Failed => match (row.failure_kind, row.exit_code) {
            (Some(FailureKind::Exit) | None, Some(c)) => format!("✘ exit {c}"),
            (Some(k), _) => format!("✘ {}", k.as_str()),
            (None, None) => "✘ failed".into(),
        },
    }
}

/// A run's colour; a fan-out's driver, its group's row, never reads as a failure.
pub(super) fn row_color(row: &crate::envelope::RunRow) -> Color {
    if app::fanout::is_driver(row) {
        Color::Cyan
    } else {
        status_color(row.status)
    }
}

fn status_color(s: RunState) -> Color {
    match s {
        RunState::Queued | RunState::Starting | RunState::Running => Color::Cyan,
        RunState::Completed => Color::Green,
        RunState::Failed => Color::Red,
        RunState::Cancelled => Color::Yellow,
        RunState::Damaged => Color::Magenta,
    }
}

/// How long it ran, or has run so far.
pub(super) fn elapsed(r: &BoardRun, now: SystemTime) -> String {
    if let Some(ms) = r.row.duration_ms {
        return human::clock(Duration::from_millis(ms));
    }
    match (r.is_live(), r.live.started_at) {
        (true, Some(t)) => human::clock(now.duration_since(t).unwrap_or_default()),
        _ => "-".into(),
    }
}

/// The last thing it did: its last event (for a run that ended, what it ended on), else,
/// before it said anything, its task or command.
/// A fan-out's driver says how its group's tasks stand.
fn last(r: &BoardRun, groups: &[GroupSummary]) -> String {
    if let Some(p) = &r.row.problem {
        return p.clone();
    }
    if let (RunState::Queued, Some(w)) = (r.row.status, &r.row.waiting) {
        return crate::fresh::waiting_words(w);
    }
    if let (RunState::Queued, Some(j)) = (r.row.status, &r.row.slurm) {
        let why = j.reason.as_deref().unwrap_or("?");
        return format!("Slurm job {} waits: {why}", j.job_id);
    }
    let group = r.row.labels.get(app::fanout::DRIVER_LABEL);
    if let Some(g) = group.and_then(|id| groups.iter().find(|g| &g.group == id)) {
        let counts = [
            (g.running, "running"),
            (g.completed, "completed"),
            (g.failed, "failed"),
            (g.cancelled, "cancelled"),
        ];
        let said: Vec<String> = counts
            .iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, w)| format!("{n} {w}"))
            .collect();
        return format!(
            "{}: {}",
            human::counted(g.total as u64, "task"),
            said.join(" · ")
        );
    }
    match r.last_event() {
        Some(e) => human::last_event(e),
        None if r.has_ended() => "(no output)".into(),
        None => r.row.what.clone(),
    }
}

/// Which optional columns fit a table `width` wide. TOKENS and COST only when a run shown
/// has them: empty, they give their room to LAST EVENT.
struct Columns {
    /// Only when a run shown lives on a host.
    host: bool,
    agent: bool,
    group: bool,
    labels: bool,
    tokens: bool,
    cost: bool,
    /// Generated ids are shown by their random part (a short name that works wherever an
    /// id is taken).
    short_ids: bool,
}

fn columns(width: u16, rows: &[&BoardRun]) -> Columns {
    let figures = |f: fn(&SoFar) -> bool| rows.iter().any(|r| r.so_far().is_some_and(f));
    Columns {
        host: rows.iter().any(|r| r.row.host.is_some()),
        agent: width >= 100,
        group: width >= 120,
        labels: width >= 150,
        tokens: figures(|s| s.total_tokens().is_some()),
        cost: figures(|s| s.cost_usd.is_some()),
        short_ids: width < 120,
    }
}

/// How an id is shown: whole, or (`short`) by its random part when no other id shown
/// has the same one.
struct Ids<'a> {
    short: bool,
    /// How many of the ids shown have each random part.
    parts: HashMap<&'a str, usize>,
}

impl<'a> Ids<'a> {
    /// `ids` may name one id many times (a group's runs): each counts once.
    fn new(short: bool, ids: impl Iterator<Item = &'a str>) -> Self {
        let mut parts = HashMap::new();
        if short {
            let distinct: std::collections::HashSet<&str> = ids.collect();
            for p in distinct.into_iter().filter_map(app::random_part) {
                *parts.entry(p).or_insert(0) += 1;
            }
        }
        Self { short, parts }
    }

    fn show<'b>(&self, id: &'b str) -> &'b str {
        match app::random_part(id) {
            Some(p) if self.short && self.parts.get(p) == Some(&1) => p,
            _ => id,
        }
    }
}

fn run_table(f: &mut Frame, area: Rect, board: &Board, ui: &mut Ui, now: SystemTime) {
    let rows = ui.visible(board);
    if rows.is_empty() {
        let text = if board.runs().is_empty() {
            format!(
                "no runs in {} yet: they show here as they start (`subpane run …`)",
                board.home().runs_dir().display()
            )
        } else {
            format!(
                "no run matches {} (x clears the filter)",
                ui.filter.describe()
            )
        };
        f.render_widget(Paragraph::new(text), area);
        return;
    }
    let cols = columns(area.width, &rows);
    // The groups' counts, for their drivers' rows.
    let (summaries, queues) = if rows.iter().any(|r| app::fanout::is_driver(&r.row)) {
        let s = groups(board.runs());
        let q = s
            .iter()
            .filter_map(|g| Some((g.group.clone(), super::queue::words(board, &g.group)?)))
            .collect();
        (s, q)
    } else {
        (Vec::new(), Vec::new())
    };
    let ids = Ids::new(cols.short_ids, rows.iter().map(|r| r.row.run_id.as_str()));
    // Groups are told apart by their random part (a day's groups share the rest).
    let group_ids = Ids::new(true, rows.iter().filter_map(|r| r.row.group.as_deref()));
    let widest = |w: &dyn Fn(&BoardRun) -> usize, min: usize, max: usize| {
        rows.iter()
            .map(|r| w(r))
            .max()
            .unwrap_or(min)
            .clamp(min, max) as u16
    };
    let id_w = widest(&|r| ids.show(&r.row.run_id).chars().count(), 3, 24);
    let mut widths = vec![Constraint::Length(14), Constraint::Length(id_w)];
    let mut head = vec!["STATUS", "RUN"];
    if cols.host {
        let w = widest(
            &|r| r.row.host_shown().map_or(0, |h| h.chars().count()),
            4,
            24,
        );
        widths.push(Constraint::Length(w));
        head.push("HOST");
    }
    if cols.agent {
        widths.push(Constraint::Length(7));
        head.push("AGENT");
    }
    if cols.group {
        let w = widest(
            &|r| {
                r.row
                    .group
                    .as_deref()
                    .map_or(0, |g| group_ids.show(g).chars().count())
            },
            5,
            24,
        );
        widths.push(Constraint::Length(w));
        head.push("GROUP");
    }
    if cols.labels {
        widths.push(Constraint::Length(18));
        head.push("LABELS");
    }
    widths.extend([Constraint::Length(4), Constraint::Length(7)]);
    head.extend(["AGE", "ELAPSED"]);
    if cols.tokens {
        widths.push(Constraint::Length(6));
        head.push("TOKENS");
    }
    if cols.cost {
        widths.push(Constraint::Length(7));
        head.push("COST");
    }
    widths.push(Constraint::Fill(1));
    head.push("LAST EVENT");
    let selected = ui.selected_index(&rows);
    // Keep the selection in view: the table shows `area.height - 1` rows under its header.
    let room = area.height.saturating_sub(1).max(1) as usize;
    if let Some(i) = selected {
        if i < ui.offset {
            ui.offset = i;
        } else if i >= ui.offset + room {
            ui.offset = i + 1 - room;
        }
    }
    ui.offset = ui.offset.min(rows.len().saturating_sub(1));
    // Only the rows in view are made: a board of hundreds of runs costs what a screen does.
    let table_rows: Vec<Row> = rows[ui.offset..(ui.offset + room).min(rows.len())]
        .iter()
        .map(|r| {
            let mut cells = vec![
                Cell::from(status_text(r)).style(fg(ui, row_color(&r.row))),
                Cell::from(ids.show(&r.row.run_id).to_owned()),
            ];
            if cols.host {
                cells.push(Cell::from(r.row.host_shown().unwrap_or_default()));
            }
            if cols.agent {
                cells.push(Cell::from(r.row.agent.as_str()));
            }
            if cols.group {
                let g = r.row.group.as_deref().map(|g| group_ids.show(g));
                cells.push(Cell::from(g.unwrap_or_default().to_owned()));
            }
            if cols.labels {
                let l: Vec<String> = r
                    .row
                    .labels
                    .iter()
                    // A driver's own mark says nothing its status does not.
                    .filter(|(k, _)| k.as_str() != app::fanout::DRIVER_LABEL)
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                cells.push(Cell::from(l.join(",")));
            }
            let so_far = r.so_far();
            cells.extend([
                Cell::from(
                    r.created
                        .map(|c| human::age(now.duration_since(c).unwrap_or_default()))
                        .unwrap_or_default(),
                ),
                Cell::from(elapsed(r, now)),
            ]);
            if cols.tokens {
                cells.push(Cell::from(
                    so_far
                        .and_then(|s| s.total_tokens())
                        .map(human::tokens)
                        .unwrap_or_default(),
                ));
            }
            if cols.cost {
                cells.push(Cell::from(
                    so_far
                        .and_then(|s| s.cost_usd)
                        .map(human::cost)
                        .unwrap_or_default(),
                ));
            }
            let mut said = last(r, &summaries);
            if let Some((_, q)) = r
                .row
                .labels
                .get(app::fanout::DRIVER_LABEL)
                .and_then(|g| queues.iter().find(|(id, _)| id == g))
            {
                said = format!("{q} · {said}");
            }
            cells.push(Cell::from(said));
            Row::new(cells)
        })
        .collect();
    let mut state = TableState::default().with_selected(selected.map(|i| i - ui.offset));
    let table = Table::new(table_rows, widths)
        .header(Row::new(head).style(Style::default().add_modifier(Modifier::BOLD)))
        .column_spacing(1)
        .row_highlight_style(Style::default().add_modifier(Modifier::REVERSED));
    f.render_stateful_widget(table, area, &mut state);
}

/// `████░░░░ 12/20`: a group's progress as text (drawn alike with and without colour).
fn progress_bar(g: &GroupSummary, width: usize) -> String {
    let done = g.done();
    let filled = (done * width).checked_div(g.total).unwrap_or(0);
    format!(
        "{}{} {done}/{}",
        "█".repeat(filled),
        "░".repeat(width - filled),
        g.total
    )
}

fn group_table(f: &mut Frame, area: Rect, board: &Board, ui: &mut Ui, now: SystemTime) {
    let gs = groups(board.runs());
    if gs.is_empty() {
        f.render_widget(
            Paragraph::new("no fan-out groups: runs of one `subpane fanout` share a group (g or Esc goes back)"),
            area,
        );
        return;
    }
    ui.group_at = ui.group_at.min(gs.len() - 1);
    // Whole ids when they fit, else their random parts (a day's groups share the rest).
    let ids = Ids::new(area.width < 100, gs.iter().map(|g| g.group.as_str()));
    let rows: Vec<Row> = gs
        .iter()
        .map(|g| {
            Row::new(vec![
                Cell::from(ids.show(&g.group).to_owned()),
                Cell::from(progress_bar(g, 10)),
                Cell::from(g.running.to_string()).style(fg(ui, Color::Cyan)),
                Cell::from(g.completed.to_string()).style(fg(ui, Color::Green)),
                Cell::from(g.failed.to_string()).style(fg(ui, Color::Red)),
                Cell::from(g.cancelled.to_string()).style(fg(ui, Color::Yellow)),
                Cell::from(
                    g.since
                        .map(|s| human::age(now.duration_since(s).unwrap_or_default()))
                        .unwrap_or_default(),
                ),
            ])
        })
        .collect();
    let widths = [
        Constraint::Min(16),
        Constraint::Length(18),
        Constraint::Length(7),
        Constraint::Length(9),
        Constraint::Length(6),
        Constraint::Length(9),
        Constraint::Length(4),
    ];
    let head = Row::new([
        "GROUP",
        "PROGRESS",
        "RUNNING",
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "AGE",
    ])
    .style(Style::default().add_modifier(Modifier::BOLD));
    let mut state = TableState::default().with_selected(Some(ui.group_at));
    let table = Table::new(rows, widths)
        .header(head)
        .column_spacing(1)
        .row_highlight_style(Style::default().add_modifier(Modifier::REVERSED));
    f.render_stateful_widget(table, area, &mut state);
}

fn status_line(f: &mut Frame, area: Rect, ui: &Ui) {
    let (text, style) = if let Some((what, t)) = &ui.editing {
        let name = match what {
            Editing::Text => "find",
            Editing::Label => "label (K=V or K)",
        };
        (
            format!("{name}: {t}▏ (⏎ apply · Esc keep)"),
            Style::default(),
        )
    } else if let Some(p) = &ui.pending {
        (
            p.question.clone(),
            fg(ui, Color::Yellow).add_modifier(Modifier::BOLD),
        )
    } else if let Some(s) = &ui.said {
        let style = if s.error {
            fg(ui, Color::Red)
        } else {
            Style::default()
        };
        (s.text.clone(), style)
    } else {
        (
            hints(area.width as usize),
            Style::default().add_modifier(Modifier::DIM),
        )
    };
    f.render_widget(Paragraph::new(Line::styled(text, style)), area);
}
