//! Starting many attempts at once: [`start_many`], what `fanout` uses for each wave.
//!
//! ```text
//!  plans ─► tmux.conf (once)
//!        ─► job queue ─► FILE_THREADS threads: attempt dir + records      (unsynced; the
//!                   ▲                          launch.json                 workers sync them)
//!                   │      │ created
//!                   │      ▼
//!                   │   main thread: per socket, once BATCH are ready (or all are made):
//!                   │     tmux new-session … \; new-session …  (one client per ≤ 15 KiB)
//!                   │       └ not printed after an error ─► the one-by-one path of `start`
//!                   └──────── made: write launch.json        (retries, `spawn` envelope);
//!                                                            the rest batched again
//! ```
//!
//! Each attempt ends up exactly as [`crate::app::start`] leaves it: the same files, the same pane,
//! the same `spawn` envelope when its pane cannot start. Only the order of the work differs:
//! the files of later attempts are written while tmux starts the panes of earlier ones (the
//! disk waits, the tmux server works), and a tmux client serves many panes.
//!
//! Common pitfalls:
//! * What an attempt gets is [`crate::app::launch`]'s (`create`, `worker_command`,
//!   `record_launch`): only the batching is here, never a second copy of those.
//! * After a failed batch, an unprinted session may exist anyway (the server raced its exit,
//!   or the client died after the server made it):
//!   it is looked up before it is started again, never started twice.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, mpsc};

use crate::app::launch::{
    Pending, create, ensure_socket_dir, ensure_tmux_conf, made_after_all, record_launch,
    start_pane, worker_command,
};
use crate::app::{Error, Plan, Started, tmux_for};
use crate::store::Home;
use crate::tmux::{self, Pane, SessionReq};

/// Threads that create attempt files: a new inode may wait on the disk (its inode table),
/// not the CPU, and `run.json` of a retry is fsynced.
const FILE_THREADS: usize = 8;

/// Attempts whose files are ready are sent to tmux once this many wait (or no more will
/// come): tmux work overlaps the file work, and a client still serves many panes.
const BATCH: usize = 16;

/// Starts every plan, batching the tmux work; one result per plan, in order. Errors mean that
/// plan's attempt was not started (as with [`crate::app::start`]); a pane that could not start is
/// a [`Started`] with its `spawn` envelope.
pub fn start_many(home: &Home, plans: Vec<Plan>) -> Vec<Result<Started, Error>> {
    if plans.is_empty() {
        return Vec::new();
    }
    let ready =
        ensure_tmux_conf(home).and_then(|()| std::env::current_exe().map_err(Error::CurrentExe));
    let exe = match ready {
        Ok(p) => p,
        Err(e) => {
            let e = std::sync::Arc::new(e);
            return plans
                .iter()
                .map(|_| Err(Error::Shared(e.clone())))
                .collect();
        }
    };
    let n = plans.len();
    let mut results: Vec<Option<Result<Started, Error>>> = (0..n).map(|_| None).collect();
    let (job_tx, job_rx) = mpsc::channel::<Job>();
    let (done_tx, done_rx) = mpsc::channel::<Done>();
    for (i, plan) in plans.into_iter().enumerate() {
        let _ = job_tx.send(Job::Create(i, Box::new(plan)));
    }
    let job_rx = Mutex::new(job_rx);
    std::thread::scope(|s| {
        for _ in 0..FILE_THREADS.min(n) {
            let done_tx = done_tx.clone();
            let job_rx = &job_rx;
            s.spawn(move || file_thread(home, job_rx, &done_tx));
        }
        drop(done_tx);
        let mut job_tx = Some(job_tx);
        let mut created = 0;
        let mut waiting: HashMap<PathBuf, Vec<(usize, Pending)>> = HashMap::new();
        let mut left = n;
        while left > 0 {
            let Ok(done) = done_rx.recv() else { break };
            match done {
                Done::Created(i, Ok(p)) => {
                    created += 1;
                    let socket = p.spec.tmux.socket.clone();
                    waiting.entry(socket).or_default().push((i, *p));
                }
                Done::Created(i, Err(e)) => {
                    created += 1;
                    left -= 1;
                    results[i] = Some(Err(e));
                }
                Done::Recorded(i, p) => {
                    left -= 1;
                    results[i] = Some(Ok((*p).started(None)));
                }
            }
            // A batch when it is worth a tmux client, or when no more files will come.
            let all_created = created == n;
            let ready: Vec<PathBuf> = waiting
                .iter()
                .filter(|(_, v)| !v.is_empty() && (all_created || v.len() >= BATCH))
                .map(|(k, _)| k.clone())
                .collect();
            for socket in ready {
                let batch = waiting.remove(&socket).unwrap_or_default();
                ensure_socket_dir(&socket);
                for (i, p, outcome) in start_panes(home, &exe, batch) {
                    match outcome {
                        PaneOutcome::Made(pane) => {
                            if let Some(tx) = &job_tx {
                                let _ = tx.send(Job::Record(i, Box::new(p), pane));
                            }
                        }
                        PaneOutcome::Single(Ok(spawn_failed)) => {
                            left -= 1;
                            results[i] = Some(Ok(p.started(spawn_failed)));
                        }
                        PaneOutcome::Single(Err(e)) => {
                            left -= 1;
                            results[i] = Some(Err(e));
                        }
                    }
                }
            }
            if all_created && waiting.values().all(Vec::is_empty) {
                // Nothing more to queue: the threads end once the queue is empty.
                job_tx = None;
            }
        }
        drop(job_tx);
    });
    results
        .into_iter()
        .map(|r| r.unwrap_or(Err(Error::NotStarted)))
        .collect()
}

/// Work for the file threads.
enum Job {
    Create(usize, Box<Plan>),
    Record(usize, Box<Pending>, Pane),
}

/// What the file threads did.
enum Done {
    Created(usize, Result<Box<Pending>, Error>),
    Recorded(usize, Box<Pending>),
}

/// Takes jobs until the queue is closed and empty.
fn file_thread(home: &Home, jobs: &Mutex<mpsc::Receiver<Job>>, done: &mpsc::Sender<Done>) {
    loop {
        let job = match jobs.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return,
        };
        let Ok(job) = job else { return };
        let d = match job {
            Job::Create(i, plan) => Done::Created(i, create(home, *plan).map(Box::new)),
            Job::Record(i, mut p, pane) => {
                record_launch(&p.paths, &p.spec, &pane, &mut p.warnings);
                Done::Recorded(i, p)
            }
        };
        if done.send(d).is_err() {
            return;
        }
    }
}

enum PaneOutcome {
    /// Made by a batch: launch.json is still to write.
    Made(Pane),
    /// Went the one-by-one way: `start_pane`'s answer (a `spawn` envelope on failure).
    Single(Result<Option<Box<crate::envelope::Envelope>>, Error>),
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
        command: worker_command(exe, &p.paths),
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
            // The first one not made: it may exist after all (a server that raced its exit, a
            // client that died after the server made it); otherwise the one-by-one path
            // retries and, if need be, records `spawn`.
            if let Some((i, mut p)) = queue.pop_front() {
                let outcome = match made_after_all(&t, &p.paths, &p.spec) {
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
