//! Starting attempt *n* of a run: its files, its pane, `launch.json`.
//!
//! ```text
//!  Plan ─► tmux.conf ─► (--worktree: git worktree add, see worktree.rs)
//!       ─► runs/<id>/run.json + attempts/<n>/{spec.json, .env, prompt.txt}
//!                                  (all or nothing; not fsynced: the worker makes them
//!                                   durable once the program runs, `store::sync_launch_records`)
//!       ─► tmux new-session -d … subpane __worker attempts/<n>
//!       ─► done.fifo (for waiters: off the way to the program's start)
//!       ─► launch.json (the worker's pid, so observers know it before it writes anything)
//! ```
//!
//! A pane that cannot start is an outcome: the attempt gets a `spawn` envelope, which
//! [`start`] returns in [`Started::spawn_failed`].
//!
//! One launcher: [`start`] and [`crate::app::start_many`] make an attempt's files with [`create`],
//! run [`worker_command`] in its pane, and record it with [`record_launch`]; they differ only
//! in how panes are asked of tmux (one client per pane, or batches).

use std::ffi::OsString;
use std::path::Path;

use crate::app::{Error, Plan, tmux_for, worktree};
use crate::envelope::{self, Envelope, Facts, LaunchRecord, LiveStatus};
use crate::fresh::now_rfc3339;
use crate::procs;
use crate::spec::AttemptSpec;
use crate::store::{self, AttemptPaths, CreateError, Home};
use crate::supervisor;
use crate::tmux::{self, Pane};

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
    /// The `run --detach --json` answer. Its status is what is known when the pane has
    /// just started: `starting` (the worker may not run yet; `status` tells when it does).
    pub fn answer(&self) -> envelope::Started {
        envelope::Started {
            run_id: self.spec.run_id.to_string(),
            attempt: self.spec.attempt,
            status: LiveStatus::Starting,
            attempt_dir: self.paths.dir().to_path_buf(),
            tmux: self.spec.tmux.clone(),
        }
    }
}

/// Creates the attempt of `plan` on disk and starts its pane. Attempt 1 creates the run;
/// a later attempt is added to the existing run. Errors mean nothing was started.
pub fn start(home: &Home, plan: Plan) -> Result<Started, Error> {
    ensure_tmux_conf(home)?;
    let mut p = create(home, plan)?;
    let spawn_failed = start_pane(home, &p.paths, &p.spec, &mut p.warnings)?.map(Box::new);
    Ok(p.started(spawn_failed))
}

/// An attempt whose files exist and whose pane is still to start.
pub(in crate::app) struct Pending {
    pub(in crate::app) paths: AttemptPaths,
    pub(in crate::app) spec: AttemptSpec,
    pub(in crate::app) warnings: Vec<String>,
}

impl Pending {
    pub(in crate::app) fn started(self, spawn_failed: Option<Box<Envelope>>) -> Started {
        Started {
            paths: self.paths,
            spec: self.spec,
            spawn_failed,
            warnings: self.warnings,
        }
    }
}

/// Everything an attempt gets before its pane starts, for [`start`] and
/// [`crate::app::start_many`] alike: its worktree (`--worktree`, first: the pane starts in it and
/// spec.json records its base), its records (a new run, or a further attempt of one; all or
/// nothing), and the paths its sandbox policy names.
pub(in crate::app) fn create(home: &Home, plan: Plan) -> Result<Pending, Error> {
    let Plan {
        record,
        mut spec,
        env,
        prompt,
        warnings: planned,
    } = plan;
    worktree::create(&mut spec)?;
    if spec.sandbox.enabled {
        // What of the user's the agent is not seeded with goes into spec.json (and so into
        // the envelope) before it is written.
        crate::app::seed::withhold(&mut spec);
    }
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
    let mut warnings = planned;
    if spec.sandbox.enabled {
        prepare_sandbox(&spec, &mut warnings);
    }
    warnings.extend(super::overlay::make_overlay(&spec));
    Ok(Pending {
        paths,
        spec,
        warnings,
    })
}

/// The command a pane runs: the worker of the attempt in `paths`.
pub(in crate::app) fn worker_command(exe: &Path, paths: &AttemptPaths) -> Vec<OsString> {
    vec![
        exe.as_os_str().to_owned(),
        procs::WORKER_ARG.into(),
        paths.dir().as_os_str().to_owned(),
    ]
}

/// tmux creates the directory of a `-L` socket but not of a `-S` one; we always use `-S`.
pub(in crate::app) fn ensure_socket_dir(socket: &Path) {
    if let Some(dir) = socket.parent()
        && !dir.exists()
    {
        use std::os::unix::fs::DirBuilderExt;
        let _ = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir);
    }
}

/// Makes the attempt's `done.fifo` (see [`store::make_done_fifo`]), then writes
/// `launch.json`: where the attempt's pane is and its process (best effort and not
/// fsynced: the pane runs now and the worker names itself in worker.json, so an attempt
/// that started is never given up on for want of this file, and after a crash its pids
/// mean nothing).
pub(in crate::app) fn record_launch(
    paths: &AttemptPaths,
    spec: &AttemptSpec,
    pane: &Pane,
    warnings: &mut Vec<String>,
) {
    if let Err(e) = store::make_done_fifo(paths) {
        warnings.push(format!("cannot make {}: {e}", paths.done_fifo().display()));
    }
    let rec = LaunchRecord {
        socket: spec.tmux.socket.display().to_string(),
        session: spec.tmux.session.clone(),
        pane_id: pane.pane_id.clone(),
        worker: procs::proc_ref(pane.pane_pid),
        launched_at: now_rfc3339(),
    };
    if let Err(e) = store::write_json_unsynced(&paths.launch(), &rec) {
        warnings.push(e.to_string());
    }
}

/// Makes the paths the sandbox policy names exist, so they can be ruled on: the agent's own
/// state directory (seeded from the user's), and any other it would create on first use.
pub(in crate::app) fn prepare_sandbox(spec: &AttemptSpec, warnings: &mut Vec<String>) {
    warnings.extend(crate::app::seed::seed_agent_state(spec));
    for dir in &spec.sandbox.writable {
        if !dir.exists()
            && let Err(e) = std::fs::create_dir_all(dir)
        {
            warnings.push(format!("cannot create {}: {e}", dir.display()));
        }
    }
}

/// Writes the private server's config if it is missing or different.
pub(in crate::app) fn ensure_tmux_conf(home: &Home) -> Result<(), Error> {
    let p = home.tmux_conf();
    let config = tmux::current_config();
    if std::fs::read(&p).ok().as_deref() != Some(config.as_bytes()) {
        std::fs::create_dir_all(home.root()).map_err(|source| Error::HomeDir {
            path: home.root().to_path_buf(),
            source,
        })?;
        store::write_atomic(&p, config.as_bytes()).map_err(Error::HomeFile)?;
    }
    Ok(())
}

/// Starts the attempt's pane on its own and records where it is. A failure to start is an
/// outcome: the attempt gets a `spawn` envelope, which is returned.
pub(in crate::app) fn start_pane(
    home: &Home,
    paths: &AttemptPaths,
    spec: &AttemptSpec,
    warnings: &mut Vec<String>,
) -> Result<Option<Envelope>, Error> {
    let exe = std::env::current_exe().map_err(Error::CurrentExe)?;
    ensure_socket_dir(&spec.tmux.socket);
    let t = tmux_for(home, spec);
    let cmd = worker_command(&exe, paths);
    match t.new_session(&spec.tmux.session, &cmd, spec.keep_session) {
        Ok(pane) => {
            record_launch(paths, spec, &pane, warnings);
            Ok(None)
        }
        Err(e) => {
            // An earlier try may have made it (a batch whose client died): then it runs.
            if let Some(pane) = made_after_all(&t, paths, spec) {
                record_launch(paths, spec, &pane, warnings);
                return Ok(None);
            }
            // If a pane was made after all, it must not run on beside a `spawn` envelope (after
            // a timeout too: a slow server may have made it; this waits one more limit at most).
            // A session of the name that is not this attempt's (another home on the same
            // server) is not ours to close.
            if !e.to_string().contains("duplicate session") {
                let _ = t.kill_session(&spec.tmux.session);
            }
            let spawn_failed = Facts {
                start: envelope::Start::SpawnFailed,
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

/// The pane of `spec`'s session when it exists and runs this attempt's worker: made by an
/// earlier try that seemed to fail (a server that raced its exit, a client that died after
/// the server had made it). Session names are an attempt's own, but a server may be shared
/// by homes, so the pane's process must be the worker of `paths`.
pub(in crate::app) fn made_after_all(
    t: &tmux::Tmux,
    paths: &AttemptPaths,
    spec: &AttemptSpec,
) -> Option<Pane> {
    let pane = t.pane_of(&spec.tmux.session).ok()?;
    let worker = procs::proc_ref(pane.pane_pid)?;
    procs::is_worker_of(&worker, paths.dir()).then_some(pane)
}

/// Why an attempt's records could not be made, as the caller is told (nothing started).
pub(in crate::app) fn not_created(e: CreateError) -> Error {
    Error::NotCreated(e)
}
