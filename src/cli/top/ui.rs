//! What the person at `top` has asked for: the mode, the filter, the selected run, the
//! status line and an action waiting for its confirmation; and what each key does. Pure:
//! a key turns into a change of this state and, for what acts on runs, an [`Action`] for
//! the loop to carry out.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::app::board::{Board, BoardRun, Filter, groups};
use crate::envelope::RunState;

/// Which screen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The runs, one per row.
    Table,
    /// The runs, and the selected one's detail below them.
    Detail,
    /// The fan-out groups, each with its progress.
    Groups,
}

/// What a key asks the loop to do to the runs (or to `top` itself).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    Quit,
    Attach(String),
    Cancel(String),
    Retry { run: String, resume: bool },
}

/// An action asked for, waiting for `y`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    pub action: Action,
    pub question: String,
}

/// What the status line says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Said {
    pub text: String,
    pub error: bool,
}

/// A filter being typed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Editing {
    Text,
    Label,
}

/// The state of the screen. See the module docs.
#[derive(Clone, Debug)]
pub struct Ui {
    pub mode: Mode,
    pub filter: Filter,
    /// The filter being typed, and its text so far.
    pub editing: Option<(Editing, String)>,
    /// The selected run (kept by id: rows move as runs come and go).
    pub selected: Option<String>,
    /// The selected group in the group view.
    pub group_at: usize,
    /// The first row shown (the table scrolls to keep the selection in view).
    pub offset: usize,
    pub said: Option<Said>,
    pub pending: Option<Pending>,
    /// The help (every key) is shown over the screen.
    pub help: bool,
    pub color: bool,
}

/// One key of `top`: what it is called, what it does, and its hint on the status line.
#[derive(Clone, Copy, Debug)]
pub struct Binding {
    pub keys: &'static str,
    pub does: &'static str,
    /// Its hint when nothing else is said (empty: only in the help).
    pub hint: &'static str,
    /// The hints that fit are the first by this rank (0 first).
    pub rank: u8,
}

const fn key(keys: &'static str, does: &'static str, hint: &'static str, rank: u8) -> Binding {
    Binding {
        keys,
        does,
        hint,
        rank,
    }
}

/// Every key, in the order the help lists them: the one list behind the help overlay (`?`),
/// the status line's hints and `subpane top --help`.
pub const BINDINGS: &[Binding] = &[
    key("↑ ↓  j k", "move the selection", "↑↓ move", 12),
    key(
        "PgUp PgDn Home End",
        "move a page, to the first run, to the last",
        "",
        99,
    ),
    key(
        "Enter  d",
        "show or hide the selected run's detail",
        "⏎ detail",
        4,
    ),
    key(
        "a",
        "attach to the run's pane (Ctrl-] comes back here)",
        "a attach",
        0,
    ),
    key("c", "cancel the run (asks y first)", "c cancel", 1),
    key(
        "r",
        "retry the run as a new attempt (asks y first)",
        "r retry",
        2,
    ),
    key(
        "R",
        "retry an agent, resuming its session (asks y first)",
        "R resume",
        11,
    ),
    key(
        "/",
        "find text in ids, tasks, groups, labels and last events",
        "/ find",
        5,
    ),
    key(
        "s",
        "step the state filter (running, failed, …, every run)",
        "s state",
        8,
    ),
    key(
        "l",
        "filter by label (K=V, or K for any value)",
        "l label",
        9,
    ),
    key(
        "g",
        "show the fan-out groups (Enter picks one as the filter)",
        "g groups",
        7,
    ),
    key("x", "clear the filters", "x clear", 10),
    key("?", "show every key (any key closes it)", "? help", 3),
    key(
        "q  Esc  Ctrl-C",
        "quit (Esc first closes the detail or the groups)",
        "q quit",
        6,
    ),
];

/// The keys' hints that fit in `width` columns, the most needed first: attach, cancel,
/// retry and help come before the rest.
pub fn hints(width: usize) -> String {
    let mut ranked: Vec<&Binding> = BINDINGS.iter().filter(|b| !b.hint.is_empty()).collect();
    ranked.sort_by_key(|b| b.rank);
    let mut out = String::new();
    for b in ranked {
        let sep = if out.is_empty() { "" } else { " · " };
        if out.chars().count() + sep.chars().count() + b.hint.chars().count() <= width {
            out.push_str(sep);
            out.push_str(b.hint);
        }
    }
    out
}

/// The width of the widest key names: the column of what each does, in the help and in
/// `--help`.
pub fn keys_width() -> usize {
    BINDINGS
        .iter()
        .map(|b| b.keys.chars().count())
        .max()
        .unwrap_or(0)
}

/// Every key as text, one a line (`subpane top --help`).
pub fn keys_text() -> String {
    let w = keys_width();
    BINDINGS
        .iter()
        .map(|b| format!("  {:w$}  {}", b.keys, b.does))
        .collect::<Vec<_>>()
        .join("\n")
}

impl Ui {
    pub fn new(filter: Filter, color: bool) -> Self {
        Self {
            mode: Mode::Table,
            filter,
            editing: None,
            selected: None,
            group_at: 0,
            offset: 0,
            said: None,
            pending: None,
            help: false,
            color,
        }
    }

    /// Says something in the status line.
    pub fn say(&mut self, text: impl Into<String>) {
        self.said = Some(Said {
            text: text.into(),
            error: false,
        });
    }

    /// Says what went wrong in the status line.
    pub fn say_error(&mut self, text: impl Into<String>) {
        self.said = Some(Said {
            text: text.into(),
            error: true,
        });
    }

    /// The runs the filter lets through, newest first.
    pub fn visible<'a>(&self, board: &'a Board) -> Vec<&'a BoardRun> {
        board
            .runs()
            .iter()
            .filter(|r| self.filter.matches(r))
            .collect()
    }

    /// The index of the selected run among `rows` (the first when it is not there).
    pub fn selected_index(&self, rows: &[&BoardRun]) -> Option<usize> {
        if rows.is_empty() {
            return None;
        }
        Some(
            self.selected
                .as_ref()
                .and_then(|s| rows.iter().position(|r| &r.row.run_id == s))
                .unwrap_or(0),
        )
    }

    fn select(&mut self, rows: &[&BoardRun], i: usize) {
        self.selected = rows.get(i).map(|r| r.row.run_id.clone());
    }

    /// What `key` does, given the runs on `board`. `page` is the number of rows a page
    /// moves. Returns the action to carry out, if any.
    pub fn key(&mut self, key: KeyEvent, board: &Board, page: usize) -> Option<Action> {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if ctrl && matches!(key.code, KeyCode::Char('c')) {
            return Some(Action::Quit);
        }
        if self.help {
            // Any key closes the help, and does nothing else.
            self.help = false;
            return None;
        }
        // What was said was for the last key: the hints come back.
        if self.editing.is_none() && self.pending.is_none() {
            self.said = None;
        }
        if let Some((what, mut text)) = self.editing.take() {
            match key.code {
                KeyCode::Enter => {
                    let t = text.trim().to_owned();
                    match what {
                        Editing::Text => self.filter.text = t,
                        Editing::Label => self.filter.label = (!t.is_empty()).then_some(t),
                    }
                    self.said_filter(board);
                }
                KeyCode::Esc => self.say("filter unchanged"),
                KeyCode::Backspace => {
                    text.pop();
                    self.editing = Some((what, text));
                }
                KeyCode::Char(c) if !ctrl => {
                    text.push(c);
                    self.editing = Some((what, text));
                }
                _ => self.editing = Some((what, text)),
            }
            return None;
        }
        if let Some(p) = self.pending.take() {
            if matches!(key.code, KeyCode::Char('y') | KeyCode::Char('Y')) {
                return Some(p.action);
            }
            self.say("nothing done");
            return None;
        }
        if self.mode == Mode::Groups {
            return self.group_key(key, board);
        }
        let rows = self.visible(board);
        let at = self.selected_index(&rows);
        let last = rows.len().saturating_sub(1);
        match key.code {
            KeyCode::Char('q') => return Some(Action::Quit),
            KeyCode::Esc if self.mode == Mode::Detail => self.mode = Mode::Table,
            KeyCode::Esc => return Some(Action::Quit),
            KeyCode::Down | KeyCode::Char('j') => {
                self.select(&rows, at.map_or(0, |i| (i + 1).min(last)))
            }
            KeyCode::Up | KeyCode::Char('k') => {
                self.select(&rows, at.map_or(0, |i| i.saturating_sub(1)))
            }
            KeyCode::PageDown => self.select(&rows, at.map_or(0, |i| (i + page).min(last))),
            KeyCode::PageUp => self.select(&rows, at.map_or(0, |i| i.saturating_sub(page))),
            KeyCode::Home => self.select(&rows, 0),
            KeyCode::End => self.select(&rows, last),
            KeyCode::Enter | KeyCode::Char('d') => {
                self.mode = if self.mode == Mode::Detail {
                    Mode::Table
                } else {
                    Mode::Detail
                };
            }
            KeyCode::Char('g') => {
                self.mode = Mode::Groups;
                if groups(board.runs()).is_empty() {
                    self.say("no fan-out groups here: runs of one `subpane fanout` share a group");
                }
            }
            KeyCode::Char('/') => self.editing = Some((Editing::Text, self.filter.text.clone())),
            KeyCode::Char('l') => {
                self.editing = Some((
                    Editing::Label,
                    self.filter.label.clone().unwrap_or_default(),
                ))
            }
            KeyCode::Char('s') => {
                self.filter.status = next_state(self.filter.status);
                self.said_filter(board);
            }
            KeyCode::Char('x') => {
                self.filter = Filter::default();
                self.say("showing every run");
            }
            KeyCode::Char('?') => self.help = true,
            KeyCode::Char(c @ ('a' | 'c' | 'r' | 'R')) => {
                let Some(run) = at.and_then(|i| rows.get(i)) else {
                    self.say("no run selected");
                    return None;
                };
                return self.on_run(c, run);
            }
            _ => {}
        }
        None
    }

    /// `a`, `c`, `r`, `R` on the selected run: attach at once, the others after `y`.
    fn on_run(&mut self, c: char, run: &BoardRun) -> Option<Action> {
        let id = run.row.run_id.clone();
        match c {
            'a' => return Some(Action::Attach(id)),
            'c' if !run.is_live() => self.say(format!(
                "run {id} has ended ({}): nothing to cancel",
                run.row.status.as_str()
            )),
            'c' => self.ask(
                Action::Cancel(id.clone()),
                format!("cancel run {id}? y to confirm, any other key to keep it running"),
            ),
            _ if run.is_live() => self.say(format!(
                "run {id} is still running: cancel it or wait before a retry"
            )),
            'R' if run.row.agent == crate::spec::AgentKind::Command => self.say(format!(
                "run {id} is a command: it has no session to resume (r retries it)"
            )),
            'R' => self.ask(
                Action::Retry {
                    run: id.clone(),
                    resume: true,
                },
                format!("retry run {id}, resuming its session? y to confirm"),
            ),
            _ => self.ask(
                Action::Retry {
                    run: id.clone(),
                    resume: false,
                },
                format!("retry run {id} as a new attempt? y to confirm"),
            ),
        }
        None
    }

    fn ask(&mut self, action: Action, question: String) {
        self.said = None;
        self.pending = Some(Pending { action, question });
    }

    fn group_key(&mut self, key: KeyEvent, board: &Board) -> Option<Action> {
        let gs = groups(board.runs());
        let last = gs.len().saturating_sub(1);
        match key.code {
            KeyCode::Char('q') => return Some(Action::Quit),
            KeyCode::Char('?') => self.help = true,
            KeyCode::Esc | KeyCode::Char('g') => self.mode = Mode::Table,
            KeyCode::Down | KeyCode::Char('j') => self.group_at = (self.group_at + 1).min(last),
            KeyCode::Up | KeyCode::Char('k') => self.group_at = self.group_at.saturating_sub(1),
            KeyCode::Enter => {
                if let Some(g) = gs.get(self.group_at.min(last)) {
                    self.filter.group = Some(g.group.clone());
                    self.mode = Mode::Table;
                    self.said_filter(board);
                }
            }
            _ => {}
        }
        None
    }

    fn said_filter(&mut self, board: &Board) {
        let n = self.visible(board).len();
        if self.filter.is_empty() {
            self.say(format!("showing every run ({n})"));
        } else {
            self.say(format!(
                "{n} of {} runs: {}",
                board.runs().len(),
                self.filter.describe()
            ));
        }
    }
}

/// The state filter after `s`: every run, then each state in turn.
fn next_state(s: Option<RunState>) -> Option<RunState> {
    use RunState as S;
    match s {
        None => Some(S::Running),
        Some(S::Running) => Some(S::Failed),
        Some(S::Failed) => Some(S::Completed),
        Some(S::Completed) => Some(S::Cancelled),
        Some(S::Cancelled) => Some(S::Starting),
        Some(S::Starting) => Some(S::Queued),
        Some(S::Queued) | Some(S::Damaged) => None,
    }
}
