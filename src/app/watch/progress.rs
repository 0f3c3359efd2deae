//! What a running attempt has done so far, for the live views: since when it runs (its
//! `worker.json`) and its `progress.json` (usage, the last event).

use std::time::SystemTime;

use crate::envelope::{Progress, WorkerFacts};
use crate::store::{self, AttemptPaths};

/// The attempt's `progress.json`; `None` when it has none yet (or it cannot be read: it is
/// only a hint, and the envelope has the final figures).
pub fn progress(paths: &AttemptPaths) -> Option<Progress> {
    store::read_json(&paths.progress()).ok().flatten()
}

/// What a live view knows of one running attempt. Looked at again when its records change
/// (the waiter's `watch_records`), never on a timer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Live {
    /// When the program started (from `worker.json`), once known.
    pub started_at: Option<SystemTime>,
    pub progress: Option<Progress>,
    /// Before its program starts: the time it waits for (`spec.json`'s `start_at`).
    pub waiting: Option<crate::spec::StartAt>,
}

impl Live {
    /// Reads the attempt's records again (the start time only until it is known).
    pub fn look(&mut self, paths: &AttemptPaths) {
        if self.started_at.is_none() {
            self.started_at = store::read_json::<WorkerFacts>(&paths.worker())
                .ok()
                .flatten()
                .and_then(|f| f.started_at)
                .and_then(|t| humantime::parse_rfc3339(&t).ok());
        }
        self.waiting = match self.started_at {
            Some(_) => None,
            None => store::read_json::<crate::spec::AttemptSpec>(&paths.spec())
                .ok()
                .flatten()
                .and_then(|s| s.start_at)
                .filter(|s| s.instant().is_some_and(|t| t > SystemTime::now())),
        };
        self.progress = progress(paths);
    }
}
