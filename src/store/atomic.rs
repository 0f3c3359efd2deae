//! Atomic file writes: temp file in the same directory, fsync, rename, fsync the directory;
//! or, for records made durable later or never, the temp file and the rename alone.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::StoreError;
use super::nofollow::{RECORD_LIMIT, read_bounded};

fn write_err(path: &Path, source: std::io::Error) -> StoreError {
    StoreError::Write {
        path: path.to_path_buf(),
        source,
    }
}

fn temp_with(path: &Path, bytes: &[u8]) -> Result<tempfile::NamedTempFile, StoreError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".tmp-")
        .tempfile_in(dir)
        .map_err(|e| write_err(path, e))?;
    tmp.write_all(bytes).map_err(|e| write_err(path, e))?;
    tmp.as_file().sync_all().map_err(|e| write_err(path, e))?;
    Ok(tmp)
}

fn sync_dir(path: &Path) {
    // Durability of the rename; a failure here cannot make the file partial, so it is not
    // reported.
    if let Some(dir) = path.parent() {
        fsync_path(dir);
    }
}

/// Makes a record written with [`write_json_unsynced`] durable: the file, then the rename in
/// its directory. For a record whose flush can overlap other work (a request on its way).
pub fn sync_written(path: &Path) {
    fsync_path(path);
    sync_dir(path);
}

/// fsyncs the file or directory at `path` if it is there (never through a link at it), and
/// says nothing when it cannot: for records already renamed into place whole, whose
/// durability is all that is left to do.
pub(super) fn fsync_path(path: &Path) {
    use std::os::unix::fs::OpenOptionsExt;
    let f = File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path);
    if let Ok(f) = f {
        let _ = f.sync_all();
    }
}

/// Writes `bytes` to `path` atomically, replacing any existing file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let tmp = temp_with(path, bytes)?;
    tmp.persist(path).map_err(|e| write_err(path, e.error))?;
    sync_dir(path);
    Ok(())
}

/// Temp file and rename without any fsync: a reader still never sees a partial file, but a
/// crash may leave the file empty. Only for files worth nothing after a crash, which every
/// attempt's worker dies in: the one-shot environment file (read and emptied by the worker
/// moments later, and better never written back to disk at all: it holds the values) and
/// `launch.json` (pids of a live pane, superseded by `worker.json`); and for the records
/// the worker makes durable later, off the way from the launch to the envelope
/// (`records::sync_launch_records`, `records::sync_end_records`). Under `fanout` each fsync
/// here was a disk flush and a VM exit per attempt.
pub fn write_atomic_unsynced(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".tmp-")
        .tempfile_in(dir)
        .map_err(|e| write_err(path, e))?;
    tmp.write_all(bytes).map_err(|e| write_err(path, e))?;
    tmp.persist(path).map_err(|e| write_err(path, e.error))?;
    Ok(())
}

/// [`write_atomic_unsynced`] of `value` as JSON.
pub fn write_json_unsynced<T: Serialize>(path: &Path, value: &T) -> Result<(), StoreError> {
    write_atomic_unsynced(path, &to_json(value))
}

/// An empty file of subpane's own in an attempt directory (the environment file once read),
/// whose inode the next record written there takes instead of a new one
/// ([`Spare::write_json_as`]).
///
/// Why: on ext4 without a journal (this project's machines) every inode freed in the last
/// minute is stepped over, one by one, by each later file creation in its block group. An
/// unlinked environment file and a record replaced by rename are such inodes: a fan-out
/// of a thousand attempts freed two thousand, and every create after them slowed down.
#[derive(Debug)]
pub struct Spare {
    file: File,
    path: std::path::PathBuf,
}

impl Spare {
    /// `file`, open for writing at `path`, is emptied (what it held is gone from the disk).
    pub(super) fn emptied(file: File, path: &Path) -> std::io::Result<Self> {
        file.set_len(0)?;
        Ok(Self {
            file,
            path: path.to_path_buf(),
        })
    }

    /// Writes `value` into the spare and renames it to `path` (in the same directory), as
    /// [`write_json_unsynced`] would write it: a reader never sees it partial. When that
    /// cannot be done, [`write_json_unsynced`] writes it, and the spare is removed.
    pub fn write_json_as<T: Serialize>(self, path: &Path, value: &T) -> Result<(), StoreError> {
        use std::os::unix::fs::FileExt;
        let bytes = to_json(value);
        let done = self
            .file
            .write_all_at(&bytes, 0)
            .and_then(|()| std::fs::rename(&self.path, path));
        if done.is_ok() {
            return Ok(());
        }
        let _ = std::fs::remove_file(&self.path);
        write_atomic_unsynced(path, &bytes)
    }
}

/// [`write_json_unsynced`] over a record that exists already, whose inode stays under `keep`
/// (a second name, linked first) instead of being freed: see [`Spare`] for why.
pub fn replace_json_keeping<T: Serialize>(
    path: &Path,
    keep: &Path,
    value: &T,
) -> Result<(), StoreError> {
    // linkat without AT_SYMLINK_FOLLOW: a link at `path` would be linked, never followed.
    let _ = std::fs::hard_link(path, keep);
    write_json_unsynced(path, value)
}

fn to_json<T: Serialize>(value: &T) -> Vec<u8> {
    // Serialising our own types cannot fail (no maps with non-string keys).
    let mut v = serde_json::to_vec_pretty(value).unwrap_or_else(|_| b"null".to_vec());
    v.push(b'\n');
    v
}

/// Writes `value` as JSON to `path` atomically, replacing any existing file.
pub fn write_json_atomic<T: Serialize>(path: &Path, value: &T) -> Result<(), StoreError> {
    write_atomic(path, &to_json(value))
}

/// Writes `value` as JSON to `path` atomically unless `path` exists. Returns `false` when it
/// already existed (someone else wrote it first; theirs stands).
pub fn write_json_new<T: Serialize>(path: &Path, value: &T) -> Result<bool, StoreError> {
    let tmp = temp_with(path, &to_json(value))?;
    match tmp.persist_noclobber(path) {
        Ok(_) => {
            sync_dir(path);
            Ok(true)
        }
        Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(write_err(path, e.error)),
    }
}

/// Reads a JSON record (never through a link, at most [`RECORD_LIMIT`] bytes); `Ok(None)`
/// when it does not exist.
pub fn read_json<T: DeserializeOwned>(path: &Path) -> Result<Option<T>, StoreError> {
    let Some(bytes) = read_bounded(path, RECORD_LIMIT)? else {
        return Ok(None);
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| StoreError::Corrupt {
            path: path.to_path_buf(),
            source: e,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_does_not_replace() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.json");
        assert!(write_json_new(&p, &1).unwrap());
        assert!(!write_json_new(&p, &2).unwrap());
        assert_eq!(read_json::<i32>(&p).unwrap(), Some(1));
        write_json_atomic(&p, &3).unwrap();
        assert_eq!(read_json::<i32>(&p).unwrap(), Some(3));
        // No temp files are left behind.
        let names: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1);
    }

    #[test]
    fn missing_is_none() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(read_json::<i32>(&d.path().join("x")).unwrap(), None);
    }
}
