//! Starting attempt *n* of a run: its files, its pane, `launch.json`.
//!
//! ```text
//!  Plan ─► tmux.conf ─► (--worktree: git worktree add, see worktree.rs)
//!       ─► runs/<id>/run.json + attempts/<n>/{spec.json, .env, prompt.txt, done.fifo}
//!                                  (all or nothing)
//!       ─► tmux new-session -d … subpane __worker attempts/<n>
//!       ─► launch.json (the worker's pid, so observers know it before it writes anything)
//! ```
//!
//! A pane that cannot start is an outcome: the attempt gets a `spawn` envelope, which
//! [`start`] returns in [`Started::spawn_failed`].

use std::ffi::OsString;

use super::{Error, Plan, tmux_for, worktree};
use crate::envelope::{self, Envelope, Facts, LaunchRecord, LiveStatus};
use crate::spec::{AttemptSpec, now_rfc3339};
use crate::store::{self, AttemptPaths, CreateError, Home};
use crate::supervisor;
use crate::tmux;

/// An attempt that was created and, unless `spawn_failed`, runs in its pane.
#[derive(Clone, Debug)]
pub struct Started {
    pub paths: AttemptPaths,
    pub spec: AttemptSpec,
    /// The pane could not start: the attempt's `spawn` envelope.
    pub spawn_failed: Option<Box<Envelope>>,
    /// What went wrong without stopping the attempt, for the caller to show.
    pub warnings: Vec<String>,
}

impl Started {
    /// The `run --detach --json` answer.
    pub fn answer(&self) -> envelope::Started {
        envelope::Started {
            run_id: self.spec.run_id.to_string(),
            attempt: self.spec.attempt,
            status: LiveStatus::Running,
            attempt_dir: self.paths.dir().to_path_buf(),
            tmux: self.spec.tmux.clone(),
        }
    }
}

/// Creates the attempt of `plan` on disk and starts its pane. Attempt 1 creates the run;
/// a later attempt is added to the existing run. Errors mean nothing was started.
pub fn start(home: &Home, plan: Plan) -> Result<Started, Error> {
    ensure_tmux_conf(home)?;
    let Plan {
        record,
        mut spec,
        env,
        prompt,
    } = plan;
    // The worktree comes first: the pane starts in it, and spec.json records its base.
    worktree::create(&mut spec)?;
    let created = if spec.attempt == 1 {
        store::create_run(home, &record, &spec, &env, prompt.as_deref())
    } else {
        store::add_attempt(home, &spec, &env, prompt.as_deref())
    };
    let paths = created.map_err(|e| {
        if let Some(wt) = &spec.worktree {
            worktree::discard(wt);
        }
        not_created(e)
    })?;
    let mut warnings = Vec::new();
    if spec.sandbox.enabled {
        prepare_sandbox(&spec, &mut warnings);
    }
    let spawn_failed = start_pane(home, &paths, &spec, &mut warnings)?.map(Box::new);
    Ok(Started {
        paths,
        spec,
        spawn_failed,
        warnings,
    })
}

/// Makes the paths the sandbox policy names exist, so they can be ruled on: an agent's state
/// directory that it would create on first use, and an empty `.git/hooks` (a hooks directory
/// created later inside the writable workspace would not be read-only).
pub(super) fn prepare_sandbox(spec: &AttemptSpec, warnings: &mut Vec<String>) {
    let hooks = spec
        .sandbox
        .read_only
        .iter()
        .filter(|p| p.file_name().is_some_and(|n| n == "hooks"));
    for dir in spec.sandbox.writable.iter().chain(hooks) {
        if !dir.exists() {
            if let Err(e) = std::fs::create_dir_all(dir) {
                warnings.push(format!("cannot create {}: {e}", dir.display()));
            }
        }
    }
}

/// Writes the private server's config if it is missing or different.
pub(super) fn ensure_tmux_conf(home: &Home) -> Result<(), Error> {
    let p = home.tmux_conf();
    if std::fs::read(&p).ok().as_deref() != Some(tmux::CONFIG.as_bytes()) {
        std::fs::create_dir_all(home.root()).map_err(|e| {
            Error::invalid(format!(
                "cannot create the subpane home {}: {e}; set --home or SUBPANE_HOME to a writable directory",
                home.root().display()
            ))
        })?;
        store::write_atomic(&p, tmux::CONFIG.as_bytes())
            .map_err(|e| Error::invalid(e.to_string()))?;
    }
    Ok(())
}

/// Starts the attempt's pane and records where it is. A failure to start is an outcome: the
/// attempt gets a `spawn` envelope, which is returned.
pub(super) fn start_pane(
    home: &Home,
    paths: &AttemptPaths,
    spec: &AttemptSpec,
    warnings: &mut Vec<String>,
) -> Result<Option<Envelope>, Error> {
    let exe = std::env::current_exe()
        .map_err(|e| Error::failed(format!("cannot find the subpane binary: {e}")))?;
    // tmux creates the directory of a `-L` socket but not of a `-S` one; we always use `-S`.
    if let Some(dir) = spec.tmux.socket.parent() {
        if !dir.exists() {
            use std::os::unix::fs::DirBuilderExt;
            let _ = std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir);
        }
    }
    let t = tmux_for(home, spec);
    let cmd: Vec<OsString> = vec![exe.into(), "__worker".into(), paths.dir().into()];
    match t.new_session(&spec.tmux.session, &spec.cwd, &cmd, spec.keep_session) {
        Ok(pane) => {
            let rec = LaunchRecord {
                socket: spec.tmux.socket.display().to_string(),
                session: spec.tmux.session.clone(),
                pane_id: pane.pane_id,
                worker: crate::procs::proc_ref(pane.pane_pid),
                launched_at: now_rfc3339(),
            };
            // Best effort and not fsynced: the pane runs now and the worker names itself in
            // worker.json, so an attempt that started is never given up on for want of this
            // file, and after a crash its pids mean nothing.
            if let Err(e) = store::write_json_unsynced(&paths.launch(), &rec) {
                warnings.push(e.to_string());
            }
            Ok(None)
        }
        Err(e) => {
            // If a pane was made after all, it must not run on beside a `spawn` envelope (after
            // a timeout too: a slow server may have made it; this waits one more limit at most).
            let _ = t.kill_session(&spec.tmux.session);
            let spawn_failed = Facts {
                spawn_failed: true,
                ..Facts::default()
            };
            let why = format!("the tmux pane could not be started: {e}");
            Ok(Some(supervisor::write_unfinished(
                paths,
                spec,
                spawn_failed,
                &why,
            )?))
        }
    }
}

/// Why an attempt's records could not be made, as the caller is told (nothing started).
pub(super) fn not_created(e: CreateError) -> Error {
    match e {
        CreateError::Exists(_) | CreateError::NoRun(_) => Error::invalid(e.to_string()),
        CreateError::Store(s) => Error::invalid(format!("nothing was started: {s}")),
    }
}
