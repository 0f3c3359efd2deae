//! The board: every run of a home, kept live from the same files and kernel notifications
//! the supervisor waits on. What `top` shows; it prints nothing and knows no terminal.
//!
//! ```text
//!  load: watch runs/ ─► list (each run's row) ─► per run: watch runs/<id>/ (run.json: a
//!        new attempt); per live attempt: watch_records (progress.json, worker.json) + its end
//!
//!  WaitLoop ─► Board::seen(token)
//!    runs/ changed ─────► rescan the names: new runs loaded and watched, gone ones dropped
//!    runs/<id>/ changed ► that run's row again (a retry's attempt is watched)
//!    records changed ───► that attempt's Live (progress.json), its row if it was starting
//!    finished ──────────► that run's row again, with the envelope's figures
//! ```
//!
//! Runs on hosts are asked of their hosts, in threads (far.rs); their answers come back
//! through the loop's waker ([`Board::take_far`]).
//!
//! Nothing is looked at on a timer: the cost of a change is the files of the one run it
//! touched, and a board of many runs costs nothing while nothing changes.
//!
//! Common pitfalls:
//! * Watch before looking: the runs directory is watched before it is listed, a run's
//!   directory before its `run.json` is read, an attempt before its records are.
//! * A new run's directory appears before its `run.json`: it is watched at once and loaded
//!   when `run.json` is renamed into it.

mod detail;
mod ended;
mod far;
mod filter;
mod groups;

use std::collections::HashMap;
use std::time::SystemTime;

pub use detail::{Detail, detail};
pub use filter::Filter;
pub use groups::{GroupSummary, groups};

use crate::app::{Error, Live, WaitLoop, list, list_one};
use crate::envelope::{Envelope, LastEvent, RunRow, RunState, SoFar};
use crate::spec::{AttemptSpec, RunId};
use crate::store::{self, AttemptPaths, Home};
use crate::supervisor::Token;

/// One run as the board shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct BoardRun {
    /// What `ls` says of it.
    pub row: RunRow,
    pub paths: AttemptPaths,
    /// When it was created (for its age).
    pub created: Option<SystemTime>,
    /// Its latest attempt while it runs (and its last `progress.json` once it ended).
    pub live: Live,
    /// The envelope's figures once it ended.
    pub done: Option<SoFar>,
    /// What it ended on, once it ended: its last output line, final text or error (from its
    /// files: `progress.json` may be from well before the end).
    pub ended: Option<LastEvent>,
}

impl BoardRun {
    fn new(home: &Home, row: RunRow) -> Self {
        let paths = RunId::parse(&row.run_id)
            .map(|id| home.attempt(&id, row.attempt))
            .unwrap_or_else(|_| AttemptPaths::new(home.runs_dir().join(&row.run_id)));
        let created = humantime::parse_rfc3339(&row.created_at).ok();
        let mut run = Self {
            row,
            paths,
            created,
            live: Live::default(),
            done: None,
            ended: None,
        };
        if run.row.status != RunState::Damaged {
            run.live.look(&run.paths);
        }
        if is_ended(run.row.status)
            && let Ok(Some(e)) = store::read_json::<Envelope>(&run.paths.result())
        {
            run.ended = ended::final_event(&e, &run.paths);
            run.done = Some(SoFar {
                usage: e.output.usage,
                cost_usd: e.output.cost_usd,
                turns: e.output.turns,
                tool_calls: e.output.tool_calls,
            });
        }
        run
    }

    /// Usage so far: the envelope's once it ended, else the last `progress.json`'s.
    pub fn so_far(&self) -> Option<&SoFar> {
        self.done
            .as_ref()
            .or(self.live.progress.as_ref().map(|p| &p.so_far))
    }

    /// The last event: what it ended on once it ended (none if it said nothing), else the
    /// last one its `progress.json` recorded.
    pub fn last_event(&self) -> Option<&LastEvent> {
        if self.has_ended() {
            return self.ended.as_ref();
        }
        self.live.progress.as_ref()?.last_event.as_ref()
    }

    /// Its envelope was read: it ended, and [`BoardRun::ended`] is what it ended on.
    pub fn has_ended(&self) -> bool {
        self.done.is_some()
    }

    /// Starting or running.
    pub fn is_live(&self) -> bool {
        matches!(
            self.row.status,
            RunState::Queued | RunState::Starting | RunState::Running
        )
    }
}

fn is_ended(s: RunState) -> bool {
    matches!(
        s,
        RunState::Completed | RunState::Failed | RunState::Cancelled
    )
}

/// What a token of the board's wait loop stands for.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Watched {
    RunsDir,
    /// The nearest directory above the runs directory while that does not exist: looking
    /// makes nothing (the first run makes the home), and its making is seen from there.
    Above,
    RunDir(String),
    Attempt(String),
}

/// Every run of a home, newest first, kept live. See the module docs.
pub struct Board {
    home: Home,
    runs: Vec<BoardRun>,
    watched: HashMap<Token, Watched>,
    /// Run id ─► the token of its directory's watch and of its live attempt's.
    run_dirs: HashMap<String, Token>,
    attempts: HashMap<String, Token>,
    /// Runs on hosts; `None` for a board that watches nothing.
    far: Option<far::Far>,
}

impl Board {
    /// Loads every run of `home` and watches them on `wl`. A home with no runs directory yet
    /// is left as it is: the nearest directory above it is watched, so the first run is seen.
    pub fn load(home: &Home, wl: &mut WaitLoop) -> Result<Self, Error> {
        let mut b = Self::from_runs(home.clone(), Vec::new());
        b.far = Some(far::Far::new(home, wl));
        b.watch_runs_dir(wl)?;
        for row in list(home, None)? {
            let id = row.run_id.clone();
            b.watch_run_dir(wl, &id);
            let run = BoardRun::new(home, row);
            b.watch_attempt(wl, &run);
            b.runs.push(run);
        }
        let far = crate::hosts::remote::list(home);
        for r in &far {
            b.watch_run_dir(wl, &r.run_id);
        }
        b.add_far(far);
        b.runs
            .sort_by(|a, b| b.row.created_at.cmp(&a.row.created_at));
        Ok(b)
    }

    /// Runs on hosts, new to the board: shown from their record here when their end came
    /// back, else as starting until their hosts say (asked once for all of them).
    fn add_far(&mut self, runs: Vec<crate::hosts::remote::RemoteRun>) {
        let mut ask = Vec::new();
        for r in runs {
            let row = match crate::hosts::remote::recorded_row(&self.home, &r) {
                Some(row) => row,
                None => {
                    let row = crate::hosts::remote::pending_row(&r);
                    ask.push(r);
                    row
                }
            };
            self.put(BoardRun::new(&self.home, row));
        }
        if let Some(f) = &self.far {
            f.ask(ask);
        }
    }

    /// What the hosts said since the last look; `true` when a run changed.
    pub fn take_far(&mut self) -> bool {
        let mut changed = false;
        while let Some(news) = self.far.as_ref().and_then(far::Far::next) {
            let id = match &news {
                far::News::Row(row) => row.run_id.clone(),
                far::News::Ended(id) => id.clone(),
            };
            let Some(run) = RunId::parse(&id)
                .ok()
                .and_then(|rid| crate::hosts::remote::find(&self.home, &rid).ok().flatten())
            else {
                continue;
            };
            let row = match news {
                far::News::Row(row) => row,
                far::News::Ended(_) => {
                    if let Some(f) = self.far.as_mut() {
                        f.ended(&id);
                    }
                    match crate::hosts::remote::recorded_row(&self.home, &run) {
                        Some(row) => row,
                        None => continue,
                    }
                }
            };
            let b = BoardRun::new(&self.home, row);
            // A run whose start has not reached its host has nothing to wait for there yet:
            // its host's answer (`host.started`, seen in its directory) asks again.
            if b.is_live()
                && crate::hosts::remote::has_started(&self.home, &run)
                && let Some(f) = self.far.as_mut()
            {
                f.wait(run);
            }
            changed |= self.put(b);
        }
        changed
    }

    /// Puts `run` in its place (newest first), replacing its old row; `true` if it changed.
    fn put(&mut self, run: BoardRun) -> bool {
        match self.index_of(&run.row.run_id) {
            Some(i) if self.runs[i] == run => false,
            Some(i) => {
                self.runs[i] = run;
                true
            }
            None => {
                // Newest first (RFC 3339 times in UTC sort as text).
                let at = self
                    .runs
                    .iter()
                    .position(|r| r.row.created_at < run.row.created_at)
                    .unwrap_or(self.runs.len());
                self.runs.insert(at, run);
                true
            }
        }
    }

    /// Watches the runs directory, or, while it does not exist, the nearest directory above
    /// it that does.
    fn watch_runs_dir(&mut self, wl: &mut WaitLoop) -> Result<(), Error> {
        let dir = self.home.runs_dir();
        let mut at = dir.as_path();
        loop {
            match wl.watch_dir(at) {
                Ok(t) => {
                    let w = if at == dir {
                        Watched::RunsDir
                    } else {
                        Watched::Above
                    };
                    self.watched.insert(t, w);
                    return Ok(());
                }
                Err(e) => match at.parent() {
                    Some(up) if !at.exists() => at = up,
                    _ => return Err(e),
                },
            }
        }
    }

    /// A board of `runs` (newest first) that watches nothing: for tests and snapshots.
    pub fn from_runs(home: Home, runs: Vec<BoardRun>) -> Self {
        Self {
            home,
            runs,
            watched: HashMap::new(),
            run_dirs: HashMap::new(),
            attempts: HashMap::new(),
            far: None,
        }
    }

    /// Every run, newest first.
    pub fn runs(&self) -> &[BoardRun] {
        &self.runs
    }

    pub fn home(&self) -> &Home {
        &self.home
    }

    /// Whether `token` is one of the board's.
    pub fn owns(&self, token: Token) -> bool {
        self.watched.contains_key(&token)
    }

    /// What the wait loop reported for one of the board's tokens; `true` when a run changed.
    pub fn seen(&mut self, wl: &mut WaitLoop, token: Token, finished: bool) -> bool {
        let Some(w) = self.watched.get(&token).cloned() else {
            return false;
        };
        match w {
            Watched::RunsDir => self.rescan(wl),
            Watched::Above => {
                // Something was made up there: watch from nearer (the runs directory, once it
                // exists), then look.
                wl.remove(token);
                self.watched.remove(&token);
                if self.watch_runs_dir(wl).is_err() {
                    return false;
                }
                self.rescan(wl)
            }
            Watched::RunDir(id) => self.reload(wl, &id),
            Watched::Attempt(id) if finished => {
                self.watched.remove(&token);
                self.attempts.remove(&id);
                self.reload(wl, &id)
            }
            Watched::Attempt(id) => {
                let Some(i) = self.index_of(&id) else {
                    return false;
                };
                if self.runs[i].row.status == RunState::Starting {
                    // Its worker may have started: its state is in its records.
                    return self.reload(wl, &id);
                }
                let run = &mut self.runs[i];
                let before = run.live.clone();
                run.live.look(&run.paths);
                run.live != before
            }
        }
    }

    /// Looks at a run again now (after an action on it: a cancel, a retry).
    pub fn refresh(&mut self, wl: &mut WaitLoop, id: &str) -> bool {
        self.reload(wl, id)
    }

    fn index_of(&self, id: &str) -> Option<usize> {
        self.runs.iter().position(|r| r.row.run_id == id)
    }

    /// The run directory names now: new runs are watched and loaded, gone ones dropped.
    fn rescan(&mut self, wl: &mut WaitLoop) -> bool {
        let Ok(rd) = std::fs::read_dir(self.home.runs_dir()) else {
            return false;
        };
        let names: Vec<String> = rd
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|e| e.file_name().to_str().map(str::to_owned))
            .filter(|n| RunId::parse(n).is_ok())
            .collect();
        let mut changed = false;
        for n in &names {
            if !self.run_dirs.contains_key(n) {
                // Watched before its run.json is read: its arrival is reported.
                self.watch_run_dir(wl, n);
                changed |= self.reload(wl, n);
            }
        }
        let gone: Vec<String> = self
            .run_dirs
            .keys()
            .filter(|k| !names.contains(k))
            .cloned()
            .collect();
        for id in gone {
            for map in [&mut self.run_dirs, &mut self.attempts] {
                if let Some(t) = map.remove(&id) {
                    wl.remove(t);
                    self.watched.remove(&t);
                }
            }
            if let Some(i) = self.index_of(&id) {
                self.runs.remove(i);
                changed = true;
            }
        }
        changed
    }

    /// One run's row again; a new live attempt is watched.
    fn reload(&mut self, wl: &mut WaitLoop, id: &str) -> bool {
        let Ok(rid) = RunId::parse(id) else {
            return false;
        };
        if let Ok(Some(far)) = crate::hosts::remote::find(&self.home, &rid) {
            // Asked of its host again (a retry there, a cancel): its answer comes later.
            let known = self.index_of(id).is_some();
            if !known {
                self.add_far(vec![far]);
                return true;
            }
            if let Some(row) = crate::hosts::remote::recorded_row(&self.home, &far) {
                return self.put(BoardRun::new(&self.home, row));
            }
            if let Some(f) = &self.far {
                f.ask(vec![far]);
            }
            return false;
        }
        let Some(row) = list_one(&self.home, &rid) else {
            return false;
        };
        let run = BoardRun::new(&self.home, row);
        let i = self.index_of(id);
        if i.is_some_and(|i| self.runs[i] == run) {
            return false;
        }
        // Another attempt than the one watched: the old watch goes.
        if let Some(t) = self.attempts.get(id).copied() {
            let same = i.is_some_and(|i| self.runs[i].row.attempt == run.row.attempt);
            if !same || !run.is_live() {
                wl.remove(t);
                self.watched.remove(&t);
                self.attempts.remove(id);
            }
        }
        self.watch_attempt(wl, &run);
        self.put(run)
    }

    fn watch_run_dir(&mut self, wl: &mut WaitLoop, id: &str) {
        if self.run_dirs.contains_key(id) {
            return;
        }
        let Ok(rid) = RunId::parse(id) else { return };
        // Without a watch (the kernel's limits) the run is still shown; only a retry made
        // elsewhere is not seen until top starts again.
        if let Ok(t) = wl.watch_dir(&self.home.run_dir(&rid)) {
            self.watched.insert(t, Watched::RunDir(id.to_owned()));
            self.run_dirs.insert(id.to_owned(), t);
        }
    }

    /// Watches a live attempt's records and end (once).
    fn watch_attempt(&mut self, wl: &mut WaitLoop, run: &BoardRun) {
        if !run.is_live() || self.attempts.contains_key(&run.row.run_id) {
            return;
        }
        let Ok(Some(spec)) = store::read_json::<AttemptSpec>(&run.paths.spec()) else {
            return;
        };
        if let Ok(t) = wl.watch_records(run.paths.clone(), spec) {
            self.watched
                .insert(t, Watched::Attempt(run.row.run_id.clone()));
            self.attempts.insert(run.row.run_id.clone(), t);
        }
    }
}
