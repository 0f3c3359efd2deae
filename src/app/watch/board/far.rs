//! The board's runs on hosts. Nothing of theirs is on disk here while they run, so their
//! rows come from their hosts, asked in threads: one `ls` a host on load (a run whose end
//! came back is shown from its record, asking nothing), then, for each live one, a wait
//! there (the host's own, event-driven) whose end is recorded here. Each answer reaches
//! the board's loop through a channel and the loop's waker ([`Board::take_far`]).
//!
//! ```text
//!  load / a new runs/ID with host.json / refresh ─► ask(runs) thread: rows_of ─► Row
//!                                                   each live one ─► wait thread ─► Ended
//!  Board::take_far ─► the row replaced (Ended: from the envelope recorded here)
//! ```
//!
//! Their progress (tokens, last event) is the host's: the board shows their state, host
//! and end, not their live figures.

use std::collections::HashSet;

use crate::app::{Inbox, WaitLoop};
use crate::envelope::RunRow;
use crate::hosts::remote::{self, RemoteRun};
use crate::store::Home;

pub(super) enum News {
    /// A run's row, as its host says.
    Row(RunRow),
    /// A run ended there; its envelope is recorded here.
    Ended(String),
}

pub(super) struct Far {
    home: Home,
    inbox: Inbox<News>,
    /// The runs a wait there is on.
    waiting: HashSet<String>,
}

impl Far {
    pub(super) fn new(home: &Home, wl: &WaitLoop) -> Self {
        Self {
            home: home.clone(),
            inbox: Inbox::new(wl),
            waiting: HashSet::new(),
        }
    }

    /// Asks the hosts of `runs` for their rows (one `ls` a host), in a thread.
    pub(super) fn ask(&self, runs: Vec<RemoteRun>) {
        if runs.is_empty() {
            return;
        }
        let (post, home) = (self.inbox.poster(), self.home.clone());
        std::thread::spawn(move || {
            for row in remote::rows_of(&home, &runs) {
                post.post(News::Row(row));
            }
        });
    }

    /// Waits there for `run`'s end (once per run), in a thread.
    pub(super) fn wait(&mut self, run: RemoteRun) {
        if !self.waiting.insert(run.run_id.clone()) {
            return;
        }
        let (post, home) = (self.inbox.poster(), self.home.clone());
        std::thread::spawn(move || {
            let _ = remote::wait(&home, &run, None, None, true, &mut |_, _| {});
            post.post(News::Ended(run.run_id.clone()));
        });
    }

    pub(super) fn ended(&mut self, id: &str) {
        self.waiting.remove(id);
    }

    pub(super) fn next(&self) -> Option<News> {
        self.inbox.next()
    }
}
