//! An exclusive lock on a file of the home, for a record rewritten from what was read
//! (read, change, write): two writers at once would lose one's change.

use std::path::Path;

use nix::fcntl::{Flock, FlockArg};

use super::StoreError;

/// Held while the record is read, changed and written; released on drop.
pub struct Exclusive {
    _file: Flock<std::fs::File>,
}

impl Exclusive {
    /// Waits for the lock at `path` (made if missing, never truncated).
    pub fn acquire(path: &Path) -> Result<Self, StoreError> {
        let write_err = |source| StoreError::Write {
            path: path.to_path_buf(),
            source,
        };
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(write_err)?;
        let file = Flock::lock(file, FlockArg::LockExclusive)
            .map_err(|(_, e)| write_err(std::io::Error::from(e)))?;
        Ok(Self { _file: file })
    }
}
