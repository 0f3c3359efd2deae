//! `top`'s screens drawn on ratatui's test backend (empty, busy, filtered, detail, groups,
//! at 80×24 and wider, without colour) and its keys, over a board made in memory.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::draw::draw;
use super::ui::{Action, Mode, Ui};
use crate::app::Live;
use crate::app::board::{Board, BoardRun, Detail, Filter};
use crate::envelope::{
    EventKind, FailureKind, LastEvent, PROGRESS_SCHEMA, Progress, RunRow, RunState, SoFar, Usage,
};
use crate::spec::AgentKind;
use crate::store::{AttemptPaths, Home};

mod day;

/// The time of every snapshot.
fn now() -> SystemTime {
    humantime::parse_rfc3339("2026-11-30T12:00:00Z").unwrap()
}

fn ago(secs: u64) -> SystemTime {
    now() - Duration::from_secs(secs)
}

fn rfc(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

/// A run made `age` seconds ago.
fn run(id: &str, agent: AgentKind, status: RunState, age: u64) -> BoardRun {
    BoardRun {
        row: RunRow {
            run_id: id.into(),
            attempt: 1,
            agent,
            status,
            failure_kind: None,
            exit_code: None,
            created_at: rfc(ago(age)),
            started_at: None,
            finished_at: None,
            duration_ms: None,
            labels: BTreeMap::new(),
            correlation_id: None,
            group: None,
            parent_run: None,
            depth: 0,
            what: format!("the task of {id}"),
            problem: None,
            host: None,
            slurm: None,
            waiting: None,
            queue: None,
        },
        paths: AttemptPaths::new(format!("/h/runs/{id}/attempts/1").into()),
        created: Some(ago(age)),
        live: Live::default(),
        done: None,
        ended: None,
    }
}

fn progress(tokens: u64, cost: Option<f64>, kind: EventKind, text: &str) -> Progress {
    Progress {
        schema: PROGRESS_SCHEMA.into(),
        updated_at: String::new(),
        so_far: SoFar {
            usage: Some(Usage {
                total_tokens: Some(tokens),
                ..Usage::default()
            }),
            cost_usd: cost,
            turns: None,
            tool_calls: Some(2),
        },
        last_event: Some(LastEvent {
            kind,
            text: text.into(),
        }),
        stopped_since: None,
    }
}

/// A board with a run in each state, two of them in a fan-out group, one labelled.
fn busy() -> Board {
    let mut fix = run("fix-tests", AgentKind::Claude, RunState::Running, 300);
    fix.live = Live {
        started_at: Some(ago(272)),
        waiting: None,
        progress: Some(progress(
            12_345,
            None,
            EventKind::ToolCall,
            "Bash cargo test --lib",
        )),
    };
    fix.row.labels.insert("pr".into(), "42".into());
    let mut review = run("review-1", AgentKind::Pi, RunState::Completed, 3 * 3600);
    review.row.duration_ms = Some(95_000);
    review.done = Some(SoFar {
        usage: Some(Usage {
            total_tokens: Some(48_000),
            ..Usage::default()
        }),
        cost_usd: Some(0.0412),
        turns: Some(3),
        tool_calls: Some(5),
    });
    // Its progress.json was last written early on (its session line); it ended on its
    // final text.
    review.live.progress = Some(progress(40_000, Some(0.03), EventKind::Info, "session s-1"));
    review.ended = Some(LastEvent {
        kind: EventKind::Text,
        text: "All done: 3 files changed.".into(),
    });
    let mut build = run("build", AgentKind::Command, RunState::Failed, 90);
    build.row.failure_kind = Some(FailureKind::Exit);
    build.row.exit_code = Some(2);
    build.row.duration_ms = Some(4_200);
    build.row.what = "make test".into();
    build.row.group = Some("g-1".into());
    build.done = Some(SoFar::default());
    build.ended = Some(LastEvent {
        kind: EventKind::Stderr,
        text: "make: *** [test] Error 2".into(),
    });
    let mut slow = run("slow", AgentKind::Command, RunState::Failed, 60);
    slow.row.failure_kind = Some(FailureKind::IdleTimeout);
    slow.row.duration_ms = Some(30_000);
    slow.row.group = Some("g-1".into());
    let mut gone = run("stopped", AgentKind::Codex, RunState::Cancelled, 50 * 3600);
    gone.row.duration_ms = Some(1_000);
    // It ended without a word: never its task or argv.
    gone.done = Some(SoFar::default());
    let mut starting = run("next", AgentKind::Command, RunState::Starting, 1);
    starting.row.group = Some("g-1".into());
    Board::from_runs(
        Home::at("/h".into()),
        vec![starting, slow, build, fix, review, gone],
    )
}

/// What the screen shows, one line per row, trailing spaces cut.
fn screen(board: &Board, ui: &mut Ui, detail: Option<&Detail>, (w, h): (u16, u16)) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| draw(f, board, ui, detail, now())).unwrap();
    let buf = t.backend().buffer();
    let mut out = String::new();
    for y in 0..h {
        let mut line = String::new();
        for x in 0..w {
            line.push_str(buf[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn plain() -> Ui {
    Ui::new(Filter::default(), false)
}

fn key(c: KeyCode) -> KeyEvent {
    KeyEvent::new(c, KeyModifiers::NONE)
}

#[test]
fn an_empty_home_says_where_runs_will_show() {
    let b = Board::from_runs(Home::at("/h".into()), Vec::new());
    let s = screen(&b, &mut plain(), None, (80, 24));
    let lines: Vec<&str> = s.lines().collect();
    assert_eq!(lines[0], "subpane top · 0 runs · 0 running · 0 failed");
    assert_eq!(
        lines[1],
        "no runs in /h/runs yet: they show here as they start (`subpane run …`)"
    );
    assert_eq!(
        lines[23], "a attach · c cancel · r retry · ? help · ⏎ detail · / find · q quit · g groups",
        "{s}"
    );
}

#[test]
fn a_busy_board_at_80_by_24() {
    let s = screen(&busy(), &mut plain(), None, (80, 24));
    let want = "\
subpane top · 6 runs · 2 running · 2 failed
STATUS         RUN       AGE  ELAPSED TOKENS COST    LAST EVENT
◌ starting     next      1s   -                      the task of next
✘ idle_timeout slow      1m   0:30                   the task of slow
✘ exit 2       build     1m   0:04                   stderr: make: *** [test] Er
● running      fix-tests 5m   4:32    12.3k          ▸ Bash cargo test --lib
✔ completed    review-1  3h   1:35    48.0k  $0.0412 All done: 3 files changed.
■ cancelled    stopped   2d   0:01                   (no output)
";
    assert_eq!(&s[..want.len()], want, "\n{s}");
    assert!(
        s.lines()
            .nth(23)
            .unwrap()
            .starts_with("a attach · c cancel · r retry · ? help"),
        "{s}"
    );
}

/// A detached fan-out's driver (failed, as it does when a task failed) is its group's row:
/// not counted as a run, nor as a failed one.
#[test]
fn a_fanout_driver_is_a_group_row_and_no_failed_run() {
    let mut driver = run("g-20261130-1", AgentKind::Command, RunState::Failed, 30);
    driver.row.exit_code = Some(1);
    driver.row.failure_kind = Some(FailureKind::Exit);
    driver.row.labels.insert(
        crate::app::fanout::DRIVER_LABEL.into(),
        "g-20261130-1".into(),
    );
    let mut bad = run("t1", AgentKind::Command, RunState::Failed, 20);
    bad.row.exit_code = Some(3);
    bad.row.failure_kind = Some(FailureKind::Exit);
    bad.row.group = Some("g-20261130-1".into());
    let mut good = run("t0", AgentKind::Command, RunState::Completed, 20);
    good.row.group = Some("g-20261130-1".into());
    let b = Board::from_runs(Home::at("/h".into()), vec![good, bad, driver]);
    let s = screen(&b, &mut plain(), None, (80, 24));
    assert_eq!(
        s.lines().next().unwrap(),
        "subpane top · 2 runs · 0 running · 1 failed",
        "{s}"
    );
    let row = s.lines().find(|l| l.contains("g-20261130-1")).unwrap();
    assert!(row.starts_with("▣ group ended"), "{row}");
}

#[test]
fn a_wide_screen_shows_agent_group_and_labels() {
    let s = screen(&busy(), &mut plain(), None, (160, 12));
    let head = s.lines().nth(1).unwrap();
    assert!(
        head.starts_with("STATUS         RUN       AGENT   GROUP LABELS             AGE"),
        "{s}"
    );
    let fix = s.lines().find(|l| l.contains("fix-tests")).unwrap();
    assert!(fix.contains("claude") && fix.contains("pr=42"), "{fix}");
    let build = s.lines().find(|l| l.contains(" build ")).unwrap();
    assert!(build.contains("g-1"), "{build}");
}

#[test]
fn a_filtered_board_says_its_filter_and_shows_only_what_passes() {
    let b = busy();
    let mut ui = Ui::new(
        Filter {
            status: Some(RunState::Failed),
            group: Some("g-1".into()),
            ..Filter::default()
        },
        false,
    );
    let s = screen(&b, &mut ui, None, (80, 24));
    let lines: Vec<&str> = s.lines().collect();
    assert_eq!(
        lines[0],
        "subpane top · 6 runs · 2 running · 2 failed · 2 shown: status failed · group g-1"
    );
    assert!(
        lines[2].contains("slow") && lines[3].contains("build"),
        "{s}"
    );
    assert_eq!(lines[4], "");
    // Text finds in the last event too; a filter nothing passes says how to clear it.
    let mut ui = Ui::new(
        Filter {
            text: "CARGO".into(),
            ..Filter::default()
        },
        false,
    );
    let s = screen(&b, &mut ui, None, (80, 24));
    assert_eq!(
        s.lines().filter(|l| l.contains("fix-tests")).count(),
        1,
        "{s}"
    );
    assert!(!s.contains("review-1"), "{s}");
    let mut ui = Ui::new(
        Filter {
            label: Some("pr=7".into()),
            ..Filter::default()
        },
        false,
    );
    let s = screen(&b, &mut ui, None, (80, 24));
    assert!(
        s.contains("no run matches label pr=7 (x clears the filter)"),
        "{s}"
    );
}

#[test]
fn the_detail_pane_shows_the_selected_runs_figures_events_and_stderr() {
    let b = busy();
    let mut ui = plain();
    ui.mode = Mode::Detail;
    ui.selected = Some("fix-tests".into());
    let d = Detail {
        run_id: "fix-tests".into(),
        attempt: 1,
        envelope: None,
        events: vec![
            "Let me run the tests.".into(),
            "▸ Bash cargo test --lib".into(),
        ],
        stderr: vec!["warning: unused variable".into()],
    };
    let s = screen(&b, &mut ui, Some(&d), (80, 24));
    let lines: Vec<&str> = s.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("─ fix-tests · attempt 1 · claude · pr=42"))
        .unwrap_or_else(|| panic!("no detail:\n{s}"));
    assert_eq!(
        &lines[at + 1..at + 9],
        [
            "status  running · 4:32 · 12.3k tokens · 2 tool calls",
            "what    the task of fix-tests",
            "files   /h/runs/fix-tests/attempts/1",
            "─ events",
            "Let me run the tests.",
            "▸ Bash cargo test --lib",
            "─ stderr",
            "warning: unused variable",
        ],
        "\n{s}"
    );
    // The selected row stays in view above it.
    assert!(lines[..at].iter().any(|l| l.contains("fix-tests")), "{s}");
}

#[test]
fn the_group_view_shows_each_groups_progress() {
    let b = busy();
    let mut ui = plain();
    ui.mode = Mode::Groups;
    let s = screen(&b, &mut ui, None, (80, 24));
    let lines: Vec<&str> = s.lines().collect();
    assert_eq!(
        lines[0],
        "subpane top · 6 runs · 2 running · 2 failed · groups"
    );
    assert!(lines[1].starts_with("GROUP"), "{s}");
    assert!(
        lines[2].starts_with("g-1") && lines[2].contains("██████░░░░ 2/3"),
        "{s}"
    );
}

#[test]
fn colour_only_without_no_color_and_the_selection_either_way() {
    let b = busy();
    let cells = |color: bool| {
        let mut ui = Ui::new(Filter::default(), color);
        ui.selected = Some("build".into());
        let mut t = Terminal::new(TestBackend::new(80, 24)).unwrap();
        t.draw(|f| draw(f, &b, &mut ui, None, now())).unwrap();
        t.backend().buffer().clone()
    };
    use ratatui::style::{Color, Modifier};
    let (colored, plain) = (cells(true), cells(false));
    // Row 4 is `build`: red status with colour, none without; reversed in both.
    assert_eq!(colored[(0, 4)].fg, Color::Red);
    assert_eq!(plain[(0, 4)].fg, Color::Reset);
    for buf in [&colored, &plain] {
        assert!(buf[(20, 4)].modifier.contains(Modifier::REVERSED));
        assert!(!buf[(20, 5)].modifier.contains(Modifier::REVERSED));
    }
    let any_color = (0..80)
        .flat_map(|x| (0..24).map(move |y| (x, y)))
        .any(|p| plain[p].fg != Color::Reset || plain[p].bg != Color::Reset);
    assert!(!any_color, "NO_COLOR draws no colour");
}

#[test]
fn keys_move_filter_and_ask_before_acting() {
    let b = busy();
    let mut ui = plain();
    assert_eq!(ui.key(key(KeyCode::Down), &b, 10), None);
    assert_eq!(ui.selected.as_deref(), Some("slow"));
    ui.key(key(KeyCode::End), &b, 10);
    assert_eq!(ui.selected.as_deref(), Some("stopped"));
    ui.key(key(KeyCode::PageUp), &b, 3);
    assert_eq!(ui.selected.as_deref(), Some("build"));
    // Cancel a run that ended: nothing to ask.
    ui.key(key(KeyCode::Char('c')), &b, 10);
    assert!(ui.pending.is_none());
    assert!(ui.said.as_ref().unwrap().text.contains("nothing to cancel"));
    // Retry asks, and y does it; any other key keeps it.
    assert_eq!(ui.key(key(KeyCode::Char('r')), &b, 10), None);
    assert!(
        ui.pending
            .as_ref()
            .unwrap()
            .question
            .starts_with("retry run build")
    );
    assert_eq!(ui.key(key(KeyCode::Char('n')), &b, 10), None);
    assert_eq!(ui.said.as_ref().unwrap().text, "nothing done");
    ui.key(key(KeyCode::Char('r')), &b, 10);
    assert_eq!(
        ui.key(key(KeyCode::Char('y')), &b, 10),
        Some(Action::Retry {
            run: "build".into(),
            resume: false
        })
    );
    // A command has no session to resume.
    ui.key(key(KeyCode::Char('R')), &b, 10);
    assert!(ui.pending.is_none() && ui.said.as_ref().unwrap().text.contains("no session"));
    // Cancel a running one.
    ui.selected = Some("fix-tests".into());
    ui.key(key(KeyCode::Char('c')), &b, 10);
    assert_eq!(
        ui.key(key(KeyCode::Char('y')), &b, 10),
        Some(Action::Cancel("fix-tests".into()))
    );
    assert_eq!(
        ui.key(key(KeyCode::Char('a')), &b, 10),
        Some(Action::Attach("fix-tests".into()))
    );
    // Typing a filter: the keys go to the text until Enter.
    ui.key(key(KeyCode::Char('/')), &b, 10);
    for c in "mak q".chars() {
        assert_eq!(
            ui.key(key(KeyCode::Char(c)), &b, 10),
            None,
            "{c} is text here"
        );
    }
    ui.key(key(KeyCode::Backspace), &b, 10);
    ui.key(key(KeyCode::Backspace), &b, 10);
    ui.key(key(KeyCode::Enter), &b, 10);
    assert_eq!(ui.filter.text, "mak");
    assert_eq!(ui.said.as_ref().unwrap().text, "1 of 6 runs: \"mak\"");
    // s steps through the states; x clears.
    ui.key(key(KeyCode::Char('s')), &b, 10);
    assert_eq!(ui.filter.status, Some(RunState::Running));
    ui.key(key(KeyCode::Char('x')), &b, 10);
    assert!(ui.filter.is_empty());
    // Enter opens the detail, Esc closes it, Esc again quits; so do q and Ctrl-C.
    ui.key(key(KeyCode::Enter), &b, 10);
    assert_eq!(ui.mode, Mode::Detail);
    assert_eq!(ui.key(key(KeyCode::Esc), &b, 10), None);
    assert_eq!(ui.mode, Mode::Table);
    assert_eq!(ui.key(key(KeyCode::Esc), &b, 10), Some(Action::Quit));
    assert_eq!(ui.key(key(KeyCode::Char('q')), &b, 10), Some(Action::Quit));
    assert_eq!(
        ui.key(
            KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL),
            &b,
            10
        ),
        Some(Action::Quit)
    );
    // g shows the groups; Enter picks one as the filter.
    ui.key(key(KeyCode::Char('g')), &b, 10);
    assert_eq!(ui.mode, Mode::Groups);
    ui.key(key(KeyCode::Enter), &b, 10);
    assert_eq!(
        (ui.mode, ui.filter.group.as_deref()),
        (Mode::Table, Some("g-1"))
    );
}

/// A board of 500 runs, every fifth running. How long its redraw takes is a figure of
/// scripts/bench (`subpane __bench-top`), never a limit here: tests do not time.
#[test]
fn a_board_of_500_runs_shows_the_rows_around_the_selection() {
    let mut runs = Vec::new();
    for i in 0..500u64 {
        let live = i % 5 == 0;
        let status = if live {
            RunState::Running
        } else {
            RunState::Completed
        };
        let mut r = run(&format!("run-{i:03}"), AgentKind::Pi, status, 10 + i);
        r.live.started_at = Some(ago(i));
        r.live.progress = Some(progress(
            i * 100,
            Some(0.001 * i as f64),
            EventKind::Text,
            "thinking about it",
        ));
        runs.push(r);
    }
    let b = Board::from_runs(Home::at("/h".into()), runs);
    let mut ui = plain();
    ui.selected = Some("run-250".into());
    let s = screen(&b, &mut ui, None, (200, 50));
    let lines: Vec<&str> = s.lines().collect();
    assert!(
        lines[0].starts_with("subpane top · 500 runs · 100 running"),
        "{s}"
    );
    // The rows in view are consecutive runs, the selected one among them, each once.
    let shown: Vec<u64> = lines
        .iter()
        .filter_map(|l| l.split_whitespace().find_map(|w| w.strip_prefix("run-")))
        .map(|n| n.parse().unwrap())
        .collect();
    assert!(shown.len() >= 40, "{s}");
    assert!(shown.contains(&250), "{s}");
    assert!(shown.windows(2).all(|w| w[1] == w[0] + 1), "{s}");
    // A running row and a completed one say so, with their figures.
    let row = |n: u64| {
        *lines
            .iter()
            .find(|l| l.contains(&format!("run-{n:03} ")))
            .unwrap()
    };
    let running = shown.iter().copied().find(|n| n % 5 == 0).unwrap();
    assert!(row(running).contains("● running"), "{s}");
    let done = shown.iter().copied().find(|n| n % 5 != 0).unwrap();
    assert!(row(done).contains("✔ completed"), "{s}");
    assert!(row(done).contains("thinking about it"), "{s}");
    // The same board drawn again looks the same.
    assert_eq!(screen(&b, &mut ui, None, (200, 50)), s);
}
