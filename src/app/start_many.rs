//! Starting many attempts at once: [`start_many`], what `fanout` uses for each wave.
//!
//! ```text
//!  plans ─► tmux.conf (once)
//!        ─► attempt dirs + records          FILE_THREADS threads (fsyncs overlap in the journal)
//!        ─► tmux batches per socket         one client per ≤ 15 KiB of arguments (≈ 50 panes)
//!             └ not printed after an error ─► the one-by-one path of `start` (retries, `spawn`
//!                                             envelope), then the rest batched again
//!        ─► launch.json                     FILE_THREADS threads
//! ```
//!
//! Each attempt ends up exactly as [`super::start`] leaves it: the same files, the same pane,
//! the same `spawn` envelope when its pane cannot start. Only the order of the work differs:
//! phase by phase for all plans instead of plan by plan.
//!
//! Common pitfalls:
//! * A plan that is not a plain attempt 1 (a further attempt, a worktree) goes through
//!   `start` itself: what `start` does for it is not repeated here.
//! * After a failed batch, an unprinted session may exist anyway (the server raced its exit):
//!   it is looked up before it is started again, never started twice.

use std::collections::HashMap;
use std::ffi::OsString;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::launch::{ensure_tmux_conf, prepare_sandbox, start_pane};
use super::{Error, Plan, Started, start, tmux_for};
use crate::envelope::LaunchRecord;
use crate::spec::{AttemptSpec, now_rfc3339};
use crate::store::{self, AttemptPaths, CreateError, Home};
use crate::tmux::{self, Pane, SessionReq};

/// Threads that create attempt files: fsync waits on the disk, not the CPU, and the journal
/// commits concurrent fsyncs together.
const FILE_THREADS: usize = 8;

/// Starts every plan, batching the tmux work; one result per plan, in order. Errors mean that
/// plan's attempt was not started (as with [`super::start`]); a pane that could not start is
/// a [`Started`] with its `spawn` envelope.
pub fn start_many(home: &Home, plans: Vec<Plan>) -> Vec<Result<Started, Error>> {
    if plans.is_empty() {
        return Vec::new();
    }
    if let Err(e) = ensure_tmux_conf(home) {
        return plans.iter().map(|_| Err(e.clone())).collect();
    }
    let exe = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            let e = Error::failed(format!("cannot find the subpane binary: {e}"));
            return plans.iter().map(|_| Err(e.clone())).collect();
        }
    };
    // Attempt files, in parallel. `start` itself for what is not a plain first attempt.
    let created: Vec<Result<Created, Error>> = par_map(plans, |plan| {
        if plan.spec.attempt != 1 || plan.spec.worktree.is_some() {
            return start(home, plan).map(Created::Done);
        }
        create(home, plan).map(Created::Files)
    });
    let mut results: Vec<Option<Result<Started, Error>>> = Vec::with_capacity(created.len());
    let mut todo: Vec<(usize, Pending)> = Vec::new();
    for (i, c) in created.into_iter().enumerate() {
        match c {
            Ok(Created::Files(p)) => {
                results.push(None);
                todo.push((i, p));
            }
            Ok(Created::Done(s)) => results.push(Some(Ok(s))),
            Err(e) => results.push(Some(Err(e))),
        }
    }
    ensure_socket_dirs(todo.iter().map(|(_, p)| &p.spec));
    // Panes, batched per socket.
    let mut by_socket: HashMap<std::path::PathBuf, Vec<(usize, Pending)>> = HashMap::new();
    for (i, p) in todo {
        by_socket
            .entry(p.spec.tmux.socket.clone())
            .or_default()
            .push((i, p));
    }
    let mut launched: Vec<(usize, Pending, Pane)> = Vec::new();
    for (_, group) in by_socket {
        for (i, mut p, outcome) in start_panes(home, &exe, group) {
            match outcome {
                PaneOutcome::Made(pane) => launched.push((i, p, pane)),
                PaneOutcome::Single(Ok(spawn_failed)) => {
                    results[i] = Some(Ok(Started {
                        paths: p.paths,
                        spec: p.spec,
                        spawn_failed,
                        warnings: std::mem::take(&mut p.warnings),
                    }));
                }
                PaneOutcome::Single(Err(e)) => results[i] = Some(Err(e)),
            }
        }
    }
    // launch.json, in parallel.
    let recorded = par_map(launched, |(i, mut p, pane)| {
        record_launch(&p.paths, &p.spec, &pane, &mut p.warnings);
        (i, p)
    });
    for (i, p) in recorded {
        results[i] = Some(Ok(Started {
            paths: p.paths,
            spec: p.spec,
            spawn_failed: None,
            warnings: p.warnings,
        }));
    }
    results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(Error::failed("the attempt was not started"))))
        .collect()
}

/// An attempt whose files exist and whose pane is still to start.
struct Pending {
    paths: AttemptPaths,
    spec: AttemptSpec,
    warnings: Vec<String>,
}

enum Created {
    Files(Pending),
    /// Started by `start` (not a plain first attempt).
    Done(Started),
}

enum PaneOutcome {
    /// Made by a batch: launch.json is still to write.
    Made(Pane),
    /// Went the one-by-one way: `start_pane`'s answer (a `spawn` envelope on failure).
    Single(Result<Option<Box<crate::envelope::Envelope>>, Error>),
}

/// The files of a new run, as `start` makes them.
fn create(home: &Home, plan: Plan) -> Result<Pending, Error> {
    let Plan {
        record,
        spec,
        env,
        prompt,
    } = plan;
    let paths =
        store::create_run(home, &record, &spec, &env, prompt.as_deref()).map_err(|e| match e {
            CreateError::Exists(_) | CreateError::NoRun(_) => Error::invalid(e.to_string()),
            CreateError::Store(s) => Error::invalid(format!("nothing was started: {s}")),
        })?;
    let mut warnings = Vec::new();
    if spec.sandbox.enabled {
        prepare_sandbox(&spec, &mut warnings);
    }
    Ok(Pending {
        paths,
        spec,
        warnings,
    })
}

/// tmux creates the directory of a `-L` socket but not of a `-S` one; we always use `-S`.
fn ensure_socket_dirs<'a>(specs: impl Iterator<Item = &'a AttemptSpec>) {
    let mut seen = std::collections::HashSet::new();
    for spec in specs {
        if let Some(dir) = spec.tmux.socket.parent() {
            if seen.insert(dir.to_path_buf()) && !dir.exists() {
                use std::os::unix::fs::DirBuilderExt;
                let _ = std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir);
            }
        }
    }
}

/// Starts the panes of attempts that share one tmux socket: batches first; after a failed
/// batch, its first unprinted session goes the one-by-one way and the rest are batched again.
fn start_panes(
    home: &Home,
    exe: &std::path::Path,
    group: Vec<(usize, Pending)>,
) -> Vec<(usize, Pending, PaneOutcome)> {
    let Some(first) = group.first() else {
        return Vec::new();
    };
    let t = tmux_for(home, &first.1.spec);
    let req = |p: &Pending| SessionReq {
        session: p.spec.tmux.session.clone(),
        cwd: p.spec.cwd.clone(),
        command: vec![
            exe.as_os_str().to_owned(),
            OsString::from("__worker"),
            p.paths.dir().as_os_str().to_owned(),
        ],
        keep: p.spec.keep_session,
    };
    let mut out = Vec::with_capacity(group.len());
    let mut queue: std::collections::VecDeque<(usize, Pending)> = group.into();
    while !queue.is_empty() {
        let reqs: Vec<SessionReq> = queue.iter().map(|(_, p)| req(p)).collect();
        // One chunk at a time: after a failure the rest is chunked again.
        let Some(range) = tmux::chunks(&reqs).into_iter().next() else {
            break;
        };
        let batch: Vec<SessionReq> = reqs[range.clone()]
            .iter()
            .take_while(|r| tmux::batchable(r))
            .cloned()
            .collect();
        let res = t.new_sessions(&batch);
        let raced = res.raced();
        let failed = res.error.is_some() || batch.is_empty();
        let mut made: HashMap<String, Pane> = res.panes.into_iter().collect();
        let tried = batch.len();
        for _ in 0..tried {
            let Some((i, p)) = queue.front() else { break };
            let Some(pane) = made.remove(&p.spec.tmux.session) else {
                break;
            };
            let i = *i;
            if let Some((_, p)) = queue.pop_front() {
                out.push((i, p, PaneOutcome::Made(pane)));
            }
        }
        if failed {
            // The first one not made: it may exist after all (a server that raced its exit);
            // otherwise the one-by-one path retries and, if need be, records `spawn`.
            if let Some((i, mut p)) = queue.pop_front() {
                let found = if raced {
                    t.pane_of(&p.spec.tmux.session).ok()
                } else {
                    None
                };
                let outcome = match found {
                    Some(pane) => PaneOutcome::Made(pane),
                    None => PaneOutcome::Single(
                        start_pane(home, &p.paths, &p.spec, &mut p.warnings)
                            .map(|e| e.map(Box::new)),
                    ),
                };
                out.push((i, p, outcome));
            }
        }
    }
    out
}

/// Writes `launch.json` as `start` does (best effort: the worker names itself later).
fn record_launch(
    paths: &AttemptPaths,
    spec: &AttemptSpec,
    pane: &Pane,
    warnings: &mut Vec<String>,
) {
    let rec = LaunchRecord {
        socket: spec.tmux.socket.display().to_string(),
        session: spec.tmux.session.clone(),
        pane_id: pane.pane_id.clone(),
        worker: crate::procs::proc_ref(pane.pane_pid),
        launched_at: now_rfc3339(),
    };
    if let Err(e) = store::write_json_dir_synced_later(&paths.launch(), &rec) {
        warnings.push(e.to_string());
    }
}

/// `f` over `items` on up to [`FILE_THREADS`] threads; results in the order of `items`.
fn par_map<T: Send, R: Send>(items: Vec<T>, f: impl Fn(T) -> R + Sync) -> Vec<R> {
    let n = items.len();
    let threads = FILE_THREADS.min(n);
    if threads <= 1 {
        return items.into_iter().map(f).collect();
    }
    let inputs: Vec<Mutex<Option<T>>> = items.into_iter().map(|t| Mutex::new(Some(t))).collect();
    let outputs: Vec<Mutex<Option<R>>> = (0..n).map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    let item = inputs[i].lock().ok().and_then(|mut g| g.take());
                    if let Some(item) = item {
                        let r = f(item);
                        if let Ok(mut g) = outputs[i].lock() {
                            *g = Some(r);
                        }
                    }
                }
            });
        }
    });
    outputs
        .into_iter()
        .filter_map(|m| m.into_inner().ok().flatten())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn par_map_keeps_the_order() {
        let v: Vec<usize> = (0..100).collect();
        let out = par_map(v, |x| x * 2);
        assert_eq!(out, (0..100).map(|x| x * 2).collect::<Vec<_>>());
        assert!(par_map(Vec::<u8>::new(), |x| x).is_empty());
    }
}
