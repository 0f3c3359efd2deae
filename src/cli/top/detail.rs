//! `top`'s detail of the selected run (Mode::Detail): its state and figures, what it runs,
//! its errors and answer, a group's queue for a driver, and the ends of its events and
//! stderr (plain SGR colour drawn as styles, nothing else from a program).

use std::time::SystemTime;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::draw::{elapsed, fg, row_color};
use super::sgr;
use super::ui::Ui;
use crate::app::board::{Board, Detail};
use crate::cli::human;

pub(super) fn pane(
    f: &mut Frame,
    area: Rect,
    board: &Board,
    ui: &Ui,
    detail: Option<&Detail>,
    now: SystemTime,
) {
    let rows = ui.visible(board);
    let Some(r) = ui.selected_index(&rows).and_then(|i| rows.get(i)) else {
        return;
    };
    let dim = Style::default().add_modifier(Modifier::DIM);
    let title = Style::default().add_modifier(Modifier::BOLD);
    let mut lines: Vec<Line> = Vec::new();
    let row = &r.row;
    let mut head = format!(
        "{} · attempt {} · {}",
        row.run_id,
        row.attempt,
        row.agent.as_str()
    );
    if let Some(g) = &row.group {
        head.push_str(&format!(" · group {g}"));
    }
    for (k, v) in &row.labels {
        head.push_str(&format!(" · {k}={v}"));
    }
    lines.push(Line::styled(format!("─ {head} "), title));
    let mut state = match detail.and_then(|d| d.envelope.as_deref()) {
        Some(env) => env.outcome_words(),
        None => row.status.as_str().to_owned(),
    };
    state.push_str(&format!(" · {}", elapsed(r, now)));
    if let Some(s) = r.so_far() {
        let words = human::so_far(s);
        if !words.is_empty() {
            state.push_str(&format!(" · {words}"));
        }
    }
    lines.push(Line::from(vec![
        Span::styled("status  ", dim),
        Span::styled(state, fg(ui, row_color(row))),
    ]));
    lines.push(Line::from(vec![
        Span::styled("what    ", dim),
        Span::raw(row.what.clone()),
    ]));
    lines.extend(super::queue::detail_lines(board, row));
    if let Some(env) = detail.and_then(|d| d.envelope.as_deref()) {
        for e in env.output.errors.iter().take(3) {
            lines.push(Line::from(vec![
                Span::styled("error   ", dim),
                Span::styled(crate::term::sanitize(e.as_bytes(), 300), fg(ui, Color::Red)),
            ]));
        }
        if let Some(t) = &env.output.final_text {
            let first = t.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            lines.push(Line::from(vec![
                Span::styled("answer  ", dim),
                Span::raw(crate::term::sanitize(first.as_bytes(), 300)),
            ]));
        }
    }
    lines.push(Line::from(vec![
        Span::styled("files   ", dim),
        Span::raw(r.paths.dir().display().to_string()),
    ]));
    if let Some(d) = detail.filter(|d| d.run_id == row.run_id && d.attempt == row.attempt) {
        let events = if row.agent == crate::spec::AgentKind::Command {
            "stdout"
        } else {
            "events"
        };
        lines.push(Line::styled(format!("─ {events} "), title));
        lines.extend(
            d.events
                .iter()
                .map(|l| sgr::line(l, ui.color, Style::default())),
        );
        if !d.stderr.is_empty() {
            lines.push(Line::styled("─ stderr ", title));
            lines.extend(
                d.stderr
                    .iter()
                    .map(|l| sgr::line(l, ui.color, fg(ui, Color::Yellow))),
            );
        }
    }
    f.render_widget(Paragraph::new(lines), area);
}
