//! Creating a run (all or nothing), the one-shot environment file, and listing runs.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use super::StoreError;
use super::atomic::{
    Spare, fsync_path, read_json, write_atomic_unsynced, write_json_atomic, write_json_new,
    write_json_unsynced,
};
use super::layout::{AttemptPaths, Home};
use crate::envelope::Envelope;
use crate::spec::{AttemptSpec, RunId, RunRecord};

/// Why a run could not be created. Nothing is left behind in either case.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    #[error(
        "run id `{0}` already exists; choose another {{run_id}}, or leave it out to get a fresh one"
    )]
    Exists(RunId),
    #[error("run `{0}` has no run.json to add an attempt to; {{@ls}} lists the runs")]
    NoRun(RunId),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Creates `runs/<id>/` with `run.json` and attempt 1 (`spec.json`, optional `prompt.txt`,
/// the environment file). All or nothing: on any failure the run directory is removed.
///
/// The records are renamed into place whole but not fsynced: the attempt's worker makes them
/// durable once its program runs ([`sync_launch_records`]), off the way from the launch to
/// the program's start. A killed process or tmux server cannot lose them (they are in the
/// page cache); only a crash of the machine before the worker's sync can.
pub fn create_run(
    home: &Home,
    record: &RunRecord,
    spec: &AttemptSpec,
    env: &[(OsString, OsString)],
    prompt: Option<&str>,
) -> Result<AttemptPaths, CreateError> {
    let runs = home.runs_dir();
    std::fs::create_dir_all(&runs).map_err(|e| StoreError::Write {
        path: runs.clone(),
        source: e,
    })?;
    let run_dir = home.run_dir(&record.run_id);
    match std::fs::create_dir(&run_dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(CreateError::Exists(record.run_id.clone()));
        }
        Err(e) => {
            return Err(StoreError::Write {
                path: run_dir,
                source: e,
            }
            .into());
        }
    }
    let attempt = home.attempt(&record.run_id, spec.attempt);
    let result = (|| {
        std::fs::create_dir_all(attempt.dir()).map_err(|e| StoreError::Write {
            path: attempt.dir().to_path_buf(),
            source: e,
        })?;
        write_attempt_files(&attempt, spec, env, prompt)?;
        write_json_unsynced(&home.run_json(&record.run_id), record)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_dir_all(&run_dir);
        return Err(e.into());
    }
    Ok(attempt)
}

/// Adds attempt `spec.attempt` to an existing run: creates its directory (exclusively, so two
/// callers cannot make the same attempt), writes its launch files, then appends it to
/// `run.json`. All or nothing: on failure the attempt directory is removed.
///
/// The attempt's own files are made durable by its worker, as with [`create_run`]; `run.json`
/// is rewritten durably here: what it replaces lists the earlier attempts, which a crash must
/// never take with it.
pub fn add_attempt(
    home: &Home,
    spec: &AttemptSpec,
    env: &[(OsString, OsString)],
    prompt: Option<&str>,
) -> Result<AttemptPaths, CreateError> {
    let id = &spec.run_id;
    let mut record: RunRecord =
        read_json(&home.run_json(id))?.ok_or_else(|| CreateError::NoRun(id.clone()))?;
    let attempt = home.attempt(id, spec.attempt);
    if let Some(parent) = attempt.dir().parent() {
        std::fs::create_dir_all(parent).map_err(|e| StoreError::Write {
            path: parent.to_path_buf(),
            source: e,
        })?;
    }
    // Exclusive: an existing attempt directory (a concurrent retry) is an error.
    std::fs::create_dir(attempt.dir()).map_err(|e| StoreError::Write {
        path: attempt.dir().to_path_buf(),
        source: e,
    })?;
    let result = (|| {
        write_attempt_files(&attempt, spec, env, prompt)?;
        record.attempts.push(crate::spec::AttemptRef {
            attempt: spec.attempt,
            created_at: spec.created_at.clone(),
        });
        write_json_atomic(&home.run_json(id), &record)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_dir_all(attempt.dir());
        return Err(e.into());
    }
    Ok(attempt)
}

/// Writes an attempt's launch files into an existing attempt directory, renamed into place
/// unsynced (see [`sync_launch_records`]).
pub fn write_attempt_files(
    attempt: &AttemptPaths,
    spec: &AttemptSpec,
    env: &[(OsString, OsString)],
    prompt: Option<&str>,
) -> Result<(), StoreError> {
    if let Some(p) = prompt {
        write_atomic_unsynced(&attempt.prompt(), p.as_bytes())?;
    }
    write_env_file(&attempt.env_file(), env)?;
    write_json_unsynced(&attempt.spec(), spec)
}

/// Makes the records the worker writes at its end (`worker.json`, `output.txt`) durable,
/// after the envelope: its write fsynced the directory after they were renamed in, so their
/// names are durable already. Best effort, as [`sync_launch_records`].
pub fn sync_end_records(attempt: &AttemptPaths) {
    for path in [attempt.worker(), attempt.output()] {
        fsync_path(&path);
    }
}

/// Makes the attempt's `done.fifo`, which [`write_result`] hangs up. Made once the pane runs
/// (off the way to the program's start; the worker needs it only at its end): a waiter that
/// comes before it, or finds something else there, watches the directory instead.
pub fn make_done_fifo(attempt: &AttemptPaths) -> std::io::Result<()> {
    let mode = nix::sys::stat::Mode::from_bits_truncate(0o600);
    match nix::unistd::mkfifo(&attempt.done_fifo(), mode) {
        Ok(()) | Err(nix::errno::Errno::EEXIST) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Makes the records written before the program started durable: `spec.json`, `prompt.txt`,
/// `run.json` and the directories that name them, as [`create_run`] and [`add_attempt`] left
/// them. By the worker (a while into the attempt, or after its envelope when it ends sooner,
/// and before it exits), or by whoever writes the envelope of an attempt whose worker did
/// not (`spawn`, `lost`), before that envelope. Best effort: a failure here cannot make a
/// record partial (each was renamed into place whole), only leave it to the kernel's own
/// writeback.
pub fn sync_launch_records(attempt: &AttemptPaths) {
    let run_dir = attempt.run_dir();
    for path in [
        attempt.spec(),
        attempt.prompt(),
        attempt.dir().to_path_buf(),
        attempt.run_json(),
        run_dir,
    ] {
        fsync_path(&path);
    }
}

/// Writes `K=V\0` pairs, mode 0600 (temp files are created 0600 and keep it on rename).
pub fn write_env_file(
    path: &std::path::Path,
    env: &[(OsString, OsString)],
) -> Result<(), StoreError> {
    let mut buf = Vec::new();
    for (k, v) in env {
        buf.extend_from_slice(k.as_bytes());
        buf.push(b'=');
        buf.extend_from_slice(v.as_bytes());
        buf.push(0);
    }
    // Read and emptied by the worker moments later, and useless after a crash: no fsync, so
    // the values most likely never reach the disk at all.
    write_atomic_unsynced(path, &buf)
}

/// Writes the attempt's envelope (once: an existing `result.json` stands, and `false` is
/// returned), then tells waiting supervisors: opening the attempt's FIFO for writing and
/// closing it hangs up every reader. No reader (ENXIO) means nobody waits.
///
/// Only a regular file stands: an envelope another observer wrote first (`lost`). A link or
/// anything else under the name was put there by someone other than subpane and is replaced.
pub fn write_result(attempt: &AttemptPaths, envelope: &Envelope) -> Result<bool, StoreError> {
    let path = attempt.result();
    let written = match write_json_new(&path, envelope) {
        Ok(false) if !std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) => {
            write_json_atomic(&path, envelope).map(|()| true)
        }
        other => other,
    };
    use std::os::unix::fs::OpenOptionsExt;
    let _ = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(attempt.done_fifo());
    written
}

/// Reads the environment file (never through a link, bounded like a record) and empties
/// it: its values are gone from the disk once read, and its inode is the worker's
/// [`Spare`] for `worker.json`.
pub fn take_env_file(
    path: &std::path::Path,
) -> std::io::Result<(Vec<(OsString, OsString)>, Spare)> {
    let file = super::nofollow::open_write_existing(path)?;
    let bytes = super::nofollow::read_bounded_from(&file, path, super::RECORD_LIMIT)
        .map_err(std::io::Error::other)?;
    let spare = Spare::emptied(file, path)?;
    Ok((crate::spec::parse_env_block(&bytes), spare))
}

/// Reads `run.json`.
pub fn read_run(home: &Home, id: &RunId) -> Result<Option<RunRecord>, StoreError> {
    read_json(&home.run_json(id))
}

/// A run found on disk.
#[derive(Debug)]
pub struct RunEntry {
    pub id: RunId,
    pub dir: PathBuf,
    pub record: RunRecord,
}

/// A run directory whose `run.json` cannot be read.
#[derive(Debug)]
pub struct DamagedEntry {
    pub id: RunId,
    pub dir: PathBuf,
    pub error: StoreError,
}

/// All runs, newest first, and the run directories whose `run.json` cannot be read (by id).
/// Names that are not run ids are not runs (temp files, a stray directory).
/// The file that makes a run directory a run on a host (`crate::hosts::remote`): it has
/// no `run.json` here, and the runs of this machine are listed without it.
pub const REMOTE_MARKER: &str = "host.json";

pub fn list_runs(home: &Home) -> (Vec<RunEntry>, Vec<DamagedEntry>) {
    let Ok(rd) = std::fs::read_dir(home.runs_dir()) else {
        return (Vec::new(), Vec::new());
    };
    let mut good = Vec::new();
    let mut damaged = Vec::new();
    for e in rd.filter_map(Result::ok) {
        let Some(id) = e.file_name().to_str().and_then(|n| RunId::parse(n).ok()) else {
            continue;
        };
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        // A run on a host: its records are there (crate::hosts::remote).
        if e.path().join(REMOTE_MARKER).exists() {
            continue;
        }
        let path = home.run_json(&id);
        let error = match read_json::<RunRecord>(&path) {
            Ok(Some(record)) => {
                good.push(RunEntry {
                    id,
                    dir: e.path(),
                    record,
                });
                continue;
            }
            // A run being created: its directory comes first, its run.json a moment later.
            Ok(None) if recently_made(&e.path()) => continue,
            Ok(None) => StoreError::Read {
                path,
                source: std::io::ErrorKind::NotFound.into(),
            },
            Err(err) => err,
        };
        damaged.push(DamagedEntry {
            id,
            dir: e.path(),
            error,
        });
    }
    good.sort_by(|a, b| {
        b.record
            .created_at
            .cmp(&a.record.created_at)
            .then_with(|| b.id.cmp(&a.id))
    });
    damaged.sort_by(|a, b| a.id.cmp(&b.id));
    (good, damaged)
}

/// Whether `dir` was made in the last minute (a run whose `run.json` is still to come).
fn recently_made(dir: &std::path::Path) -> bool {
    std::fs::metadata(dir)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_none_or(|age| age < std::time::Duration::from_secs(60))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStringExt;

    #[test]
    fn env_file_round_trips_odd_values() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(".env");
        let env = vec![
            (OsString::from("A"), OsString::from("x=y\nz")),
            (OsString::from("EMPTY"), OsString::from("")),
            (OsString::from("B"), OsString::from_vec(vec![0xff, b'q'])),
        ];
        write_env_file(&p, &env).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let (read, spare) = take_env_file(&p).unwrap();
        assert_eq!(read, env);
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 0, "emptied once read");
        // The spare becomes the next record: the values never come back.
        let record = d.path().join("worker.json");
        spare.write_json_as(&record, &"facts").unwrap();
        assert!(!p.exists(), "the spare was renamed");
        assert_eq!(std::fs::read_to_string(&record).unwrap(), "\"facts\"\n");
    }

    #[test]
    fn a_further_attempt_is_added_once_and_listed_in_run_json() {
        use crate::spec::{AgentKind, AttemptRef, RUN_SCHEMA};
        let d = tempfile::tempdir().unwrap();
        let home = Home::at(d.path().to_path_buf());
        let id = RunId::parse("r").unwrap();
        let spec = super::super::plain_spec();
        let record = RunRecord {
            schema: RUN_SCHEMA.into(),
            run_id: id.clone(),
            agent: AgentKind::Command,
            labels: Default::default(),
            correlation_id: None,
            group: None,
            created_at: spec.created_at.clone(),
            attempts: vec![AttemptRef {
                attempt: 1,
                created_at: spec.created_at.clone(),
            }],
            lineage: None,
        };
        // No run yet: nothing to add to.
        let second = AttemptSpec {
            attempt: 2,
            ..spec.clone()
        };
        assert!(matches!(
            add_attempt(&home, &second, &[], None),
            Err(CreateError::NoRun(_))
        ));
        create_run(&home, &record, &spec, &[], None).unwrap();
        let p = add_attempt(&home, &second, &[], Some("again")).unwrap();
        assert!(p.spec().exists() && p.prompt().exists());
        let rec = read_run(&home, &id).unwrap().unwrap();
        assert_eq!(
            rec.attempts.iter().map(|a| a.attempt).collect::<Vec<_>>(),
            [1, 2]
        );
        // The same attempt twice (two retries racing): the second is refused, and the first
        // attempt's files and the record are untouched.
        assert!(add_attempt(&home, &second, &[], None).is_err());
        assert!(p.prompt().exists());
        assert_eq!(read_run(&home, &id).unwrap().unwrap().attempts.len(), 2);
    }
}
