//! `subpane top`: every run of the home, live, in one terminal screen (ratatui over
//! crossterm), with filters, a detail pane, a group view, and keys to attach, cancel and
//! retry.
//!
//! ```text
//!  app::board::Board (the runs, kept live)  ◄── WaitLoop ──┬─ runs/, runs/<id>/ (inotify)
//!        │                                      one poll(2) ├─ live attempts: records, ends
//!        ▼                                                  ├─ stdin (keys)      watch_fd
//!  ui::Ui (mode, filter, selection) ── draw::draw ──► screen └─ signalfd: INT TERM HUP WINCH
//!        │ keys ─► Action (attach, cancel, retry, quit) ─► carried out here, said in the
//!        ▼                                                  status line
//! ```
//!
//! The loop sleeps in the wait loop's `poll(2)` until something happens: a key, a signal, a
//! record or an end of a run. Its only timer is the clock of what is shown (the elapsed time
//! of a running attempt: a second; else when the first age on the screen changes), so it
//! takes no CPU while nothing changes, whatever the number of runs. Redraws are at most
//! every [`FRAME`]; a burst of changes makes one.
//!
//! Common pitfalls:
//! * The signals are blocked before anything else and taken from a signalfd: a SIGTERM ends
//!   the loop like `q` does, and the terminal is given back on the way out.
//! * While attached, nothing reads the terminal but tmux: the loop is not running then (its
//!   events wait in the kernel), and tmux gets a clean signal state. The client's stdout is
//!   not the terminal: its `[detached]` line would stay in the shell after `top`.
//! * A terminal that went away reads as end of file for ever, and crossterm would read it
//!   for ever (a process spinning at 100% long after its window closed): the terminal's
//!   hang-up is checked before crossterm reads.

mod detail;
mod draw;
mod queue;
mod screen;
mod sgr;
#[cfg(test)]
mod tests;
mod ui;

use std::ops::ControlFlow;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant, SystemTime};

use clap::Args;
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use ratatui::crossterm::event::{self, Event, KeyEventKind};

use super::CliError;
use super::ls::StatusFilter;
use crate::app::board::{Board, Detail, Filter, detail};
use crate::app::{self, Driver, RealSystem, RetryOptions, Seen, WaitLoop};
use crate::envelope::RunState;
use crate::hosts::remote;
use crate::store::Home;
use crate::supervisor::Token;

pub use ui::{Action, Mode, Ui};

/// The shortest time between two redraws.
pub const FRAME: Duration = Duration::from_millis(40);

#[derive(Debug, Args)]
#[command(after_help = after_help())]
pub struct TopArgs {
    /// Show only runs in this state (s changes it)
    #[arg(long, value_enum, value_name = "S")]
    pub status: Option<StatusFilter>,
    /// Show only the runs of this fan-out group
    #[arg(long, value_name = "G")]
    pub group: Option<String>,
    /// Show only runs with this label (K=V, or K for any value)
    #[arg(long, value_name = "K=V")]
    pub label: Option<String>,
    /// Show only runs whose id, task, group, labels or last event hold these words
    #[arg(long, value_name = "TEXT")]
    pub find: Option<String>,
}

/// `subpane top --help`'s end: every key (the list `?` shows), and how it follows the runs.
fn after_help() -> String {
    format!(
        "Keys:\n{}\n\nEvery action says what it did on the last line.\n\nThe screen follows the runs' own files and the kernel's notifications: it takes no CPU while\nnothing changes. Colours follow NO_COLOR.",
        ui::keys_text()
    )
}

/// The signals `top` takes itself.
fn signals() -> SigSet {
    let mut s = SigSet::empty();
    for sig in [
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGWINCH,
    ] {
        s.add(sig);
    }
    s
}

pub fn top(home: &Home, a: TopArgs) -> Result<i32, CliError> {
    use std::io::IsTerminal;
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        return Err(CliError::NoTerminal);
    }
    // Before any thread or child: the mask is inherited.
    let set = signals();
    set.thread_block().map_err(|e| CliError::Terminal {
        what: "block signals",
        source: e.into(),
    })?;
    let sfd = SignalFd::with_flags(&set, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC).map_err(
        |e| CliError::Terminal {
            what: "make a signalfd",
            source: e.into(),
        },
    )?;
    let filter = Filter {
        status: a.status.map(RunState::from),
        group: a.group,
        label: a.label,
        text: a.find.unwrap_or_default(),
    };
    let color = std::env::var_os("NO_COLOR").is_none();
    let mut wl = WaitLoop::new()?;
    let board = Board::load(home, &mut wl)?;
    let input = wl.watch_fd(0);
    let sig = wl.watch_fd(sfd.as_raw_fd());
    let screen = screen::Screen::enter().map_err(|source| CliError::Terminal {
        what: "take the terminal",
        source,
    })?;
    let mut top = Top {
        board,
        ui: Ui::new(filter, color),
        screen,
        detail: None,
        detail_stale: true,
        input,
        sig,
        sfd,
        dirty: true,
        last_draw: None,
        next_tick: None,
        action: None,
        until: None,
    };
    let r = top.run(&mut wl);
    drop(top);
    r.map(|()| 0)
}

/// `subpane __bench-top`: loads the home's board as `top` does (every run on disk, the live
/// ones watched), then draws it `redraws` times on ratatui's test backend at 200×50, the
/// selection in the middle of the list, and prints one JSON line: how many runs and how many
/// live, the load's time, and the median and p95 of a redraw. The figure of scripts/bench's
/// `top` row: performance is measured there, never asserted in tests.
pub fn bench(home: &Home, redraws: u32) -> Result<i32, CliError> {
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let mut wl = WaitLoop::new()?;
    let t0 = Instant::now();
    let board = Board::load(home, &mut wl)?;
    let load = t0.elapsed();
    let live = board.runs().iter().filter(|r| r.is_live()).count();
    let mut ui = Ui::new(Filter::default(), true);
    ui.selected = board
        .runs()
        .get(board.runs().len() / 2)
        .map(|r| r.row.run_id.clone());
    let mut terminal =
        Terminal::new(TestBackend::new(200, 50)).map_err(|source| CliError::Terminal {
            what: "make a test terminal",
            source,
        })?;
    let mut times = Vec::with_capacity(redraws as usize);
    // The first draw fills the buffers; the ones after are what a change costs.
    for i in 0..=redraws {
        let t = Instant::now();
        let _ = terminal.draw(|f| draw::draw(f, &board, &mut ui, None, SystemTime::now()));
        if i > 0 {
            times.push(t.elapsed());
        }
    }
    times.sort();
    let at = |q: f64| {
        times
            .get(((times.len().saturating_sub(1)) as f64 * q).round() as usize)
            .copied()
            .map_or(0.0, ms)
    };
    println!(
        "{}",
        serde_json::json!({
            "runs": board.runs().len(),
            "live": live,
            "load_ms": ms(load),
            "redraws": times.len(),
            "redraw_median_ms": at(0.5),
            "redraw_p95_ms": at(0.95),
        })
    );
    Ok(0)
}

/// Everything the loop holds. See the module docs.
struct Top {
    board: Board,
    ui: Ui,
    screen: screen::Screen,
    detail: Option<Detail>,
    /// The detail may no longer be what the files say.
    detail_stale: bool,
    input: Token,
    sig: Token,
    sfd: SignalFd,
    /// Something changed since the last draw.
    dirty: bool,
    last_draw: Option<Instant>,
    /// When the clock of the screen moves next.
    next_tick: Option<Instant>,
    /// What a key asked for, carried out outside the wait loop.
    action: Option<Action>,
    /// When the wait loop's current run wakes by itself.
    until: Option<Instant>,
}

impl Top {
    fn run(&mut self, wl: &mut WaitLoop) -> Result<(), CliError> {
        loop {
            self.until = self.wake_at();
            wl.run(self.until, None, self)?;
            if self.next_tick.is_some_and(|t| Instant::now() >= t) {
                // The clock moved: the times on the screen change.
                self.dirty = true;
            }
            match self.action.take() {
                Some(Action::Quit) => return Ok(()),
                Some(a) => self.perform(a, wl),
                None => {}
            }
        }
    }

    /// When the loop must wake without an event: the next frame of a pending redraw, or the
    /// clock.
    fn wake_at(&self) -> Option<Instant> {
        let frame = (self.dirty).then(|| self.last_draw.map_or_else(Instant::now, |t| t + FRAME));
        match (frame, self.next_tick) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn draw(&mut self) {
        let size = self.screen.terminal.size().unwrap_or_default();
        if self.ui.mode == Mode::Detail && self.detail_stale {
            let rows = self.ui.visible(&self.board);
            let lines = (size.height / 4).max(3) as usize;
            self.detail = self
                .ui
                .selected_index(&rows)
                .and_then(|i| rows.get(i))
                .map(|r| detail(r, lines));
            self.detail_stale = false;
        }
        let now = SystemTime::now();
        let (board, ui, det) = (&self.board, &mut self.ui, self.detail.as_ref());
        let _ = self
            .screen
            .terminal
            .draw(|f| draw::draw(f, board, ui, det, now));
        self.last_draw = Some(Instant::now());
        self.dirty = false;
        // Fault injection for the tests of the way out (debug builds only): a panic once the
        // screen is taken must still give the terminal back.
        #[cfg(debug_assertions)]
        if std::env::var_os("SUBPANE_TOP_FAULT").is_some_and(|v| v == "panic") {
            panic!("SUBPANE_TOP_FAULT=panic: a panic in top's loop");
        }
        self.next_tick = Some(Instant::now() + self.clock_moves_in(now, size.height));
    }

    /// How long until a time on the screen changes: a second while a shown run runs (each
    /// run's clock turns at its own moment; one redraw a second moves them all, never more
    /// than a second late), else when the first age shown changes.
    fn clock_moves_in(&self, now: SystemTime, height: u16) -> Duration {
        let rows = self.ui.visible(&self.board);
        let shown = rows.iter().skip(self.ui.offset).take(height as usize);
        let mut next = Duration::from_secs(3600);
        for r in shown {
            if r.is_live() {
                return Duration::from_secs(1);
            }
            if let Some(c) = r.created {
                next = next.min(super::human::age_changes_in(
                    now.duration_since(c).unwrap_or_default(),
                ));
            }
        }
        next.max(Duration::from_millis(50))
    }

    /// Every key and resize waiting on the terminal.
    fn read_input(&mut self) {
        // A terminal that went away (its other end closed) reads as end of file for ever,
        // and crossterm would read it for ever: that is the end of top.
        if hung_up() {
            self.action = Some(Action::Quit);
            return;
        }
        let page = self
            .screen
            .terminal
            .size()
            .map_or(10, |s| s.height.saturating_sub(4)) as usize;
        while event::poll(Duration::ZERO).unwrap_or(false) {
            match event::read() {
                Ok(Event::Key(k)) if k.kind != KeyEventKind::Release => {
                    let before = self.ui.selected.clone();
                    if let Some(a) = self.ui.key(k, &self.board, page.max(1)) {
                        self.action = Some(a);
                    }
                    if self.ui.selected != before || self.ui.mode == Mode::Detail {
                        self.detail_stale = true;
                    }
                    self.dirty = true;
                }
                Ok(Event::Resize(..)) => self.dirty = true,
                Ok(_) => {}
                Err(_) => {
                    // The terminal is gone (a hang-up): nothing more to show.
                    self.action = Some(Action::Quit);
                    return;
                }
            }
        }
    }

    fn read_signals(&mut self) {
        while let Ok(Some(info)) = self.sfd.read_signal() {
            match Signal::try_from(info.ssi_signo as i32) {
                Ok(Signal::SIGWINCH) => self.dirty = true,
                _ => self.action = Some(Action::Quit),
            }
        }
    }

    /// Carries out what a key asked for, and says what it did.
    fn perform(&mut self, a: Action, wl: &mut WaitLoop) {
        let home = self.board.home().clone();
        self.dirty = true;
        self.detail_stale = true;
        if let Some(far) =
            action_run(&a).and_then(|id| remote::find_named(&home, id).ok().flatten())
        {
            self.perform_far(a, &far);
            self.board.refresh(wl, &far.run_id);
            return;
        }
        let ui = &mut self.ui;
        match a {
            Action::Quit => {}
            Action::Attach(id) => {
                let found = match app::find_run(&home, &id, None) {
                    Ok(f) => f,
                    Err(e) => return ui.say_error(e.to_string()),
                };
                self.screen.leave();
                let attached = super::attach::attach_to(&home, &found, false, true);
                if let Err(e) = self.screen.resume() {
                    ui.say_error(format!("cannot take the terminal back: {e}"));
                }
                match attached.and_then(|_| super::attach::after_attach(&found)) {
                    Ok(said) => ui.say(said.trim_start_matches("subpane: ").to_owned()),
                    Err(e) => ui.say_error(e.to_string()),
                }
            }
            Action::Cancel(id) => {
                let r = app::find_run(&home, &id, None).and_then(|f| app::cancel(&f, None));
                match r {
                    Ok(app::CancelOutcome::Requested(_)) => ui.say(format!(
                        "cancel requested for {id}: SIGTERM to its processes, SIGKILL after its grace"
                    )),
                    Ok(app::CancelOutcome::AlreadyFinished(env)) => {
                        ui.say(format!("{id} had ended already ({})", env.outcome_words()))
                    }
                    Err(e) => ui.say_error(format!("cannot cancel {id}: {e}")),
                }
            }
            Action::Retry { run, resume } => {
                let opts = RetryOptions {
                    resume,
                    task: None,
                    task_file: None,
                    env: Default::default(),
                    at_reset: false,
                    after: None,
                };
                let started = app::prepare_retry(&home, &run, &opts, &RealSystem)
                    .and_then(|p| app::start(&home, p.plan).map(|s| (s, p.warnings)));
                match started {
                    Ok((s, _)) if s.spawn_failed.is_some() => ui.say_error(format!(
                        "retry of {run}: attempt {} could not start: {}",
                        s.spec.attempt,
                        s.spawn_failed
                            .map(|e| e.output.errors.join("; "))
                            .unwrap_or_default()
                    )),
                    Ok((s, warnings)) => {
                        let how = if resume {
                            "resuming its session"
                        } else {
                            "as a new attempt"
                        };
                        let mut text = format!(
                            "retried {run} {how}: attempt {} started (a attaches)",
                            s.spec.attempt
                        );
                        if let Some(w) = warnings.first() {
                            text.push_str(&format!("; warning: {}", app::Spell::Flag.text(w)));
                        }
                        ui.say(text);
                    }
                    Err(e) => ui.say_error(format!("cannot retry {run}: {e}")),
                }
            }
        }
        self.board.refresh(
            wl,
            match &self.ui.selected {
                Some(s) => s,
                None => return,
            },
        );
    }
}

/// The run an action is on.
fn action_run(a: &Action) -> Option<&str> {
    match a {
        Action::Quit => None,
        Action::Attach(id) | Action::Cancel(id) => Some(id),
        Action::Retry { run, .. } => Some(run),
    }
}

impl Top {
    /// An action on a run that lives on a host: the same verb there, over its connection.
    fn perform_far(&mut self, a: Action, far: &remote::RemoteRun) {
        let home = self.board.home().clone();
        let id = far.run_id.clone();
        match a {
            Action::Quit => {}
            Action::Attach(_) => {
                self.screen.leave();
                let attached = super::remote::pass_through(&home, far, &["attach", &id], true);
                if let Err(e) = self.screen.resume() {
                    self.ui
                        .say_error(format!("cannot take the terminal back: {e}"));
                }
                match attached {
                    Ok(_) => self
                        .ui
                        .say(format!("detached from {id} on host {}", far.host.name)),
                    Err(e) => self.ui.say_error(e.to_string()),
                }
            }
            Action::Cancel(_) => match remote::cancel(&home, far, None, true, None) {
                Ok(remote::Answer::Finished(env)) => self
                    .ui
                    .say(format!("{id} had ended already ({})", env.outcome_words())),
                Ok(remote::Answer::Live(..)) => self.ui.say(format!(
                    "cancel requested for {id} on host {}: SIGTERM there, SIGKILL after its grace",
                    far.host.name
                )),
                Err(e) => self.ui.say_error(format!("cannot cancel {id}: {e}")),
            },
            Action::Retry { resume, .. } => match remote::retry(&home, far, resume, None) {
                Ok(s) => self.ui.say(format!(
                    "retried {id} on host {}: attempt {} started (a attaches)",
                    far.host.name, s.attempt
                )),
                Err(e) => self.ui.say_error(format!("cannot retry {id}: {e}")),
            },
        }
    }
}

/// Whether the terminal (stdin) hung up.
fn hung_up() -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let stdin = std::io::stdin();
    let mut fds = [PollFd::new(
        std::os::fd::AsFd::as_fd(&stdin),
        PollFlags::POLLIN,
    )];
    poll(&mut fds, PollTimeout::ZERO).is_ok()
        && fds[0].revents().is_some_and(|r| {
            r.intersects(PollFlags::POLLHUP | PollFlags::POLLERR | PollFlags::POLLNVAL)
        })
}

impl Driver for Top {
    fn settled(&mut self, _wl: &mut WaitLoop) -> Result<ControlFlow<()>, crate::app::Error> {
        // What the hosts said (their threads wake the loop).
        if self.board.take_far() {
            self.dirty = true;
            self.detail_stale = true;
        }
        if self.action.is_some() {
            return Ok(ControlFlow::Break(()));
        }
        // Whether this run of the loop wakes by itself no later than `t`.
        let wakes_by = |until: Option<Instant>, t: Instant| until.is_some_and(|u| u <= t);
        if self.dirty {
            match self.last_draw.map(|t| t + FRAME) {
                Some(frame) if frame > Instant::now() => {
                    // Not yet: wake for the frame (the loop's deadline is made anew).
                    if !wakes_by(self.until, frame) {
                        return Ok(ControlFlow::Break(()));
                    }
                }
                _ => self.draw(),
            }
        }
        // The clock's next move, if it comes before the loop would wake.
        if self.next_tick.is_some_and(|t| !wakes_by(self.until, t)) {
            return Ok(ControlFlow::Break(()));
        }
        Ok(ControlFlow::Continue(()))
    }

    fn seen(
        &mut self,
        wl: &mut WaitLoop,
        seen: Seen,
    ) -> Result<ControlFlow<()>, crate::app::Error> {
        match seen {
            Seen::Changed(t) if t == self.input => {
                // A SIGTERM or SIGHUP that came with the keys goes first.
                self.read_signals();
                if self.action.is_none() {
                    self.read_input();
                }
            }
            Seen::Changed(t) if t == self.sig => self.read_signals(),
            Seen::Changed(t) => {
                if self.board.seen(wl, t, false) {
                    self.dirty = true;
                    self.detail_stale = true;
                }
            }
            // A removed attempt ends as one that finished: its row is read again.
            Seen::Finished { token, .. } | Seen::Vanished { token, .. } => {
                if self.board.seen(wl, token, true) {
                    self.dirty = true;
                    self.detail_stale = true;
                }
            }
            Seen::Beat => {}
        }
        Ok(if self.action.is_some() {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        })
    }
}
