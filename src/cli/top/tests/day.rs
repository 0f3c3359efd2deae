//! A day of runs as `top` draws it: snapshots at 80×24 and 200×50, the keys and the
//! columns at 80, colour in the detail.

use super::*;

/// A day of runs as `top` sees them: generated ids of the same day, two fan-out groups of
/// that day (one with its detached driver), agents with tokens and cost, a command running.
fn day() -> Board {
    const G1: &str = "g-20261130-113000-77aa01";
    const G2: &str = "g-20261130-104500-e4f5a6";
    let ended = |r: &mut BoardRun, kind: EventKind, text: &str, ms: u64| {
        r.row.duration_ms = Some(ms);
        r.done.get_or_insert_with(SoFar::default);
        r.ended = Some(LastEvent {
            kind,
            text: text.into(),
        });
    };
    let mut driver = run(G1, AgentKind::Command, RunState::Running, 1800);
    driver
        .row
        .labels
        .insert(crate::app::fanout::DRIVER_LABEL.into(), G1.into());
    driver.live.started_at = Some(ago(1800));
    let mut t1 = run(
        "20261130-113001-0b7e21",
        AgentKind::Claude,
        RunState::Running,
        1799,
    );
    t1.row.group = Some(G1.into());
    t1.live = Live {
        started_at: Some(ago(1799)),
        waiting: None,
        progress: Some(progress(
            81_234,
            Some(0.4123),
            EventKind::ToolCall,
            "Edit src/lib.rs",
        )),
    };
    let mut t2 = run(
        "20261130-113001-5f3a9c",
        AgentKind::Claude,
        RunState::Failed,
        1799,
    );
    t2.row.group = Some(G1.into());
    t2.row.failure_kind = Some(FailureKind::Model);
    t2.done = Some(SoFar {
        usage: Some(Usage {
            total_tokens: Some(2_100),
            ..Usage::default()
        }),
        cost_usd: Some(0.0021),
        ..SoFar::default()
    });
    ended(
        &mut t2,
        EventKind::Error,
        "rate limited: try again in 20s",
        4_000,
    );
    let mut b1 = run(
        "20261130-104501-9d8c7b",
        AgentKind::Command,
        RunState::Completed,
        4500,
    );
    b1.row.group = Some(G2.into());
    ended(
        &mut b1,
        EventKind::Output,
        "test result: ok. 214 passed; 0 failed",
        95_000,
    );
    let mut b2 = run(
        "20261130-104501-a1b2c3",
        AgentKind::Command,
        RunState::Failed,
        4500,
    );
    b2.row.group = Some(G2.into());
    b2.row.failure_kind = Some(FailureKind::Exit);
    b2.row.exit_code = Some(101);
    ended(
        &mut b2,
        EventKind::Stderr,
        "error[E0425]: cannot find value `x` in this scope",
        61_000,
    );
    let mut live = run(
        "20261130-115900-3c1d2e",
        AgentKind::Command,
        RunState::Running,
        60,
    );
    live.live = Live {
        started_at: Some(ago(59)),
        waiting: None,
        progress: Some(progress(
            0,
            None,
            EventKind::Output,
            "Compiling serde v1.0.228",
        )),
    };
    live.live.progress.as_mut().unwrap().so_far = SoFar::default();
    let mut ask = run(
        "20261130-090000-c0ffee",
        AgentKind::Pi,
        RunState::Completed,
        3 * 3600,
    );
    ask.done = Some(SoFar {
        usage: Some(Usage {
            total_tokens: Some(12_000),
            ..Usage::default()
        }),
        cost_usd: Some(0.0123),
        turns: Some(2),
        tool_calls: Some(1),
    });
    // Its progress.json last said the session line; it ended on its answer.
    ask.live.progress = Some(progress(9_000, None, EventKind::Info, "session 0199-abcd"));
    ended(
        &mut ask,
        EventKind::Text,
        "The flaky test waits on a timer; fixed in tests/it/x.rs.",
        200_000,
    );
    Board::from_runs(
        Home::at("/h".into()),
        vec![live, t1, t2, driver, b1, b2, ask],
    )
}

#[test]
fn snapshots_of_a_day_at_80_by_24_and_200_by_50() {
    let b = day();
    insta::assert_snapshot!("day_80x24", screen(&b, &mut plain(), None, (80, 24)));
    insta::assert_snapshot!("day_200x50", screen(&b, &mut plain(), None, (200, 50)));
    let mut ui = plain();
    ui.mode = Mode::Groups;
    insta::assert_snapshot!("day_groups_80x24", screen(&b, &mut ui, None, (80, 24)));
    let mut ui = plain();
    ui.help = true;
    insta::assert_snapshot!("day_help_80x24", screen(&b, &mut ui, None, (80, 24)));
}

/// At 80×24, with tokens and cost shown and whole generated ids 22 characters long, LAST
/// EVENT keeps room; the ids are told apart by their random parts, groups too.
#[test]
fn at_80_columns_last_event_has_room_and_ids_are_told_apart() {
    let s = screen(&day(), &mut plain(), None, (80, 24));
    let ask = s.lines().find(|l| l.contains("c0ffee")).unwrap();
    let last = &ask[ask.find("The flaky").unwrap()..];
    assert!(last.chars().count() >= 30, "{ask}");
    assert!(!s.contains("20261130-"), "whole ids at 80 columns:\n{s}");
    let mut ui = plain();
    ui.mode = Mode::Groups;
    let g = screen(&day(), &mut ui, None, (80, 24));
    assert!(g.contains("77aa01") && g.contains("e4f5a6"), "{g}");
    // Wide enough, the whole group ids.
    let g = screen(&day(), &mut ui, None, (120, 24));
    assert!(g.contains("g-20261130-113000-77aa01"), "{g}");
}

/// The hints keep attach, cancel, retry and help, whole, down to 40 columns; `?` shows every
/// key and any key closes it without acting.
#[test]
fn the_keys_can_be_found_at_80_columns_and_the_help_lists_every_one() {
    for w in [40, 60, 80] {
        let h = super::super::ui::hints(w);
        assert!(
            h.starts_with("a attach · c cancel · r retry · ? help"),
            "{w}: {h}"
        );
        assert!(h.chars().count() <= w, "{w}: {h}");
    }
    let b = busy();
    let mut ui = plain();
    assert_eq!(ui.key(key(KeyCode::Char('?')), &b, 10), None);
    assert!(ui.help);
    let s = screen(&b, &mut ui, None, (80, 24));
    for k in super::super::ui::BINDINGS {
        assert!(s.contains(k.does), "the help lacks {:?}:\n{s}", k.keys);
    }
    // Any key closes it and does nothing else (q does not quit here).
    assert_eq!(ui.key(key(KeyCode::Char('q')), &b, 10), None);
    assert!(!ui.help);
    // A message lasts until the next key; then the hints are back.
    ui.key(key(KeyCode::Char('x')), &b, 10);
    assert!(ui.said.is_some());
    ui.key(key(KeyCode::Down), &b, 10);
    assert!(ui.said.is_none());
}

/// Plain SGR colour in a command's output is drawn as colour in the detail, never as its
/// bytes; without colour it is left out.
#[test]
fn the_detail_draws_a_commands_colour() {
    let b = busy();
    let d = Detail {
        run_id: "build".into(),
        attempt: 1,
        envelope: None,
        events: vec!["\x1b[1;31merror\x1b[0m: no rule".into()],
        stderr: vec![],
    };
    for color in [true, false] {
        let mut ui = Ui::new(Filter::default(), color);
        ui.mode = Mode::Detail;
        ui.selected = Some("build".into());
        let mut t = Terminal::new(TestBackend::new(80, 24)).unwrap();
        t.draw(|f| draw(f, &b, &mut ui, Some(&d), now())).unwrap();
        let buf = t.backend().buffer();
        let y = (0..24)
            .find(|&y| {
                (0..13)
                    .map(|x| buf[(x, y)].symbol())
                    .collect::<String>()
                    .starts_with("error: no")
            })
            .unwrap_or_else(|| panic!("no output line (colour {color})"));
        let want = if color {
            ratatui::style::Color::Red
        } else {
            ratatui::style::Color::Reset
        };
        assert_eq!(buf[(0, y)].fg, want);
        assert_eq!(buf[(6, y)].fg, ratatui::style::Color::Reset);
    }
}
