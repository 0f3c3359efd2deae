//! What a running attempt has done so far (`progress.json`), for the live views.

use crate::envelope::Progress;
use crate::store::{self, AttemptPaths};

/// The attempt's `progress.json`; `None` when it has none yet (or it cannot be read: it is
/// only a hint, and the envelope has the final figures).
pub fn progress(paths: &AttemptPaths) -> Option<Progress> {
    store::read_json(&paths.progress()).ok().flatten()
}
