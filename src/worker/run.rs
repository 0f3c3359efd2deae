//! The worker's life in order: set up, spawn, stream until the end, finish.

use std::path::Path;

use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};

use super::pane::{Pane, Style};
use super::spawn::SpawnError;
use super::stop::Life;
use super::stream::Stream;
use crate::adapter::adapter_for;
use crate::envelope::{TmuxInfo, WORKER_SCHEMA, WorkerFacts, WorkerState};
use crate::fresh::now_rfc3339;
use crate::procs;
use crate::spec::AttemptSpec;
use crate::store::{self, AttemptPaths};
use crate::term::sanitize;

/// Entry point of `subpane __worker DIR`. Returns the process exit code.
pub fn main(dir: &Path) -> i32 {
    // Block first: a cancel that arrives early must queue, not kill us.
    let mut mask = SigSet::empty();
    for s in [
        Signal::SIGCHLD,
        Signal::SIGTERM,
        Signal::SIGINT,
        Signal::SIGHUP,
        Signal::SIGUSR1,
        Signal::SIGUSR2,
        Signal::SIGQUIT,
        Signal::SIGWINCH,
    ] {
        mask.add(s);
    }
    if mask.thread_block().is_err() {
        eprintln!("subpane worker: cannot block signals");
        return 1;
    }
    let sfd = match SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("subpane worker: cannot create a signalfd: {e}");
            return 1;
        }
    };
    let paths = AttemptPaths::new(dir.to_path_buf());
    let spec: AttemptSpec = match store::read_json(&paths.spec()) {
        Ok(Some(s)) => s,
        Ok(None) => {
            eprintln!("subpane worker: {} is missing", paths.spec().display());
            return 1;
        }
        Err(e) => {
            eprintln!("subpane worker: {e}");
            return 1;
        }
    };
    // An attempt that already has its envelope has ended (its pane was given up on: a tmux
    // server too slow to answer made it after all). One attempt has one outcome: never
    // run the program beside it.
    if std::fs::symlink_metadata(paths.result()).is_ok() {
        eprintln!(
            "subpane worker: {} exists: this attempt has ended and does not run again",
            paths.result().display()
        );
        return 1;
    }
    let mut w = Worker::new(spec, paths, sfd);
    w.run();
    w.records_durable();
    0
}

/// Everything the worker holds. The phases live in their own files: `spawn.rs`, `stream.rs`
/// (the poll loop), `stop/` (deadlines, cancel and kills), `finish.rs` (the envelope).
pub(crate) struct Worker {
    pub(crate) spec: AttemptSpec,
    pub(crate) paths: AttemptPaths,
    pub(crate) sfd: SignalFd,
    /// What `worker.json` says; the stop's part is copied in from `life` at the end.
    pub(crate) facts: WorkerFacts,
    pub(crate) pane: Pane,
    /// The agent's pid, which is also its process group id, once it runs.
    pub(crate) agent: Option<i32>,
    /// When and how the agent stops (the pure state machine).
    pub(crate) life: Life,
    /// The agent's stdout and stderr, and the filter they go through.
    pub(crate) stream: Stream,
    /// The ids of the cancel requests already acted on.
    pub(crate) cancels_seen: Vec<String>,
    /// Who asked for the first cancel, and in words: the envelope's `cancelled_by` and its
    /// error `cancelled by …`.
    pub(crate) cancelled_by: Option<(crate::envelope::CancelOrigin, String)>,
    /// The budget of its fan-out group, crossed, as the group's cancel said it (origin
    /// `budget`): the envelope's `budget`.
    pub(crate) group_budget: Option<crate::envelope::BudgetHit>,
    /// When Ctrl-C was last pressed in the pane, until a second one confirms the cancel
    /// ([`Worker::interrupt_from_pane`]).
    pub(crate) interrupted_at: Option<std::time::Instant>,
    /// The egress proxy of a sandbox with an allow list; stopped at the end.
    pub(crate) proxy: Option<crate::sandbox::proxy::ProxyHandle>,
    /// The write end of the sandbox helper's report pipe, until the helper has it.
    pub(crate) report_writer: Option<std::os::fd::OwnedFd>,
    /// The read end of the sandbox helper's end pipe (its last word, once it has exited).
    pub(crate) end_reader: Option<std::os::fd::OwnedFd>,
    /// Its write end, held until the spawn is done.
    pub(crate) end_writer: Option<std::os::fd::OwnedFd>,
    /// The server of a sandboxed program's nested runs (`nest.rs`), until it is reaped.
    pub(crate) nest: Option<i32>,
    /// The request socket of nested runs, until the first client makes the worker start its
    /// server (`nest.rs`).
    pub(crate) nest_listener: Option<std::os::unix::net::UnixListener>,
    /// A pidfd on the parent's worker, for an attempt that lives within another
    /// (`within.rs`), until that has exited.
    pub(crate) parent: Option<std::os::fd::OwnedFd>,
    /// The thread that makes the launch records durable ([`Worker::sync_records_meanwhile`]),
    /// and what wakes it early: dropped, it does.
    records_sync: Option<std::thread::JoinHandle<()>>,
    records_wake: Option<std::sync::mpsc::Sender<()>>,
    /// The environment file once read (emptied): the first `worker.json` takes its inode.
    pub(crate) spare: Option<store::Spare>,
    /// The program's secrets (set at the spawn): masked in all it writes, the proxy's log
    /// and the envelope.
    pub(crate) masker: std::sync::Arc<crate::secrets::Masker>,
    /// The agent's input (`stdin: "input"`), from the spawn on.
    pub(crate) input: Option<super::input::Input>,
}

use crate::envelope::Budget;

impl Worker {
    fn new(spec: AttemptSpec, paths: AttemptPaths, sfd: SignalFd) -> Self {
        let facts = WorkerFacts {
            schema: WORKER_SCHEMA.to_owned(),
            state: Some(WorkerState::Starting),
            // Looked up when first written (`name_self`), not on the way to the spawn.
            worker: None,
            tmux: tmux_info(&spec),
            ..WorkerFacts::default()
        };
        let color = std::env::var_os("NO_COLOR").is_none();
        Self {
            stream: Stream::new(
                adapter_for(spec.agent).parser_for(spec.task.as_ref()),
                spec.agent == crate::spec::AgentKind::Command,
                Budget::new(&spec.limits),
            ),
            cancels_seen: Vec::new(),
            cancelled_by: None,
            group_budget: None,
            masker: Default::default(),
            input: None,
            interrupted_at: None,
            proxy: None,
            report_writer: None,
            end_reader: None,
            end_writer: None,
            nest: None,
            nest_listener: None,
            parent: None,
            records_sync: None,
            records_wake: None,
            spare: None,
            life: Life::new(&spec.limits),
            spec,
            paths,
            sfd,
            facts,
            pane: Pane::stdout(color),
            agent: None,
        }
    }

    /// The worker's own identity in its facts, looked up once.
    pub(crate) fn name_self(&mut self) {
        if self.facts.worker.is_none() {
            self.facts.worker = procs::proc_ref(std::process::id() as i32);
        }
    }

    /// Writes `worker.json`: renamed into place whole but not fsynced, as launch.json (it
    /// names live processes, which a crash of the machine ends too; the end's is fsynced
    /// after result.json). An fsync here was on the way from the program's start to its
    /// envelope. No inode is freed: the first write takes the environment file's, and a
    /// later one keeps the one it replaces as `.worker-running.json` (see [`store::Spare`]).
    pub(crate) fn save_facts(&mut self) {
        self.name_self();
        let path = self.paths.worker();
        let written = match self.spare.take() {
            Some(spare) => spare.write_json_as(&path, &self.facts),
            None => store::replace_json_keeping(&path, &self.paths.worker_running(), &self.facts),
        };
        if let Err(e) = written {
            self.pane.line(Style::Red, &format!("subpane: {e}"));
        }
    }

    /// Whether a cancel request waits: `cancel.json` as subpane writes it, a regular file
    /// (renamed into place whole). A link or anything else under that name is not one.
    pub(crate) fn cancel_pending(&self) -> bool {
        std::fs::symlink_metadata(self.paths.cancel()).is_ok_and(|m| m.is_file())
    }

    fn run(&mut self) {
        // worker.json is first written once the agent runs: until then observers know the
        // worker from launch.json, and a canceller that finds no worker.json relies on the
        // worker seeing cancel.json (checked here, and again after that first write).
        // SAFETY: prctl with integer arguments only.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
        if self.spec.stdin == crate::spec::Stdin::Input {
            self.pane.enable_input();
        }
        self.header();
        let parent_lives = self.watch_parent();
        if !parent_lives || self.cancel_pending() {
            // Cancelled before the start: the program never runs and nothing is signalled;
            // the request still says who asked (or that the parent's attempt had ended).
            if parent_lives {
                let _ = self.take_cancel_request();
                self.cancel_requested(false);
            } else {
                self.parent_ended();
            }
            self.facts.started_at = Some(now_rfc3339());
        } else if !self.wait_for_start() {
            // Cancelled while it waited to start (`spec.start_at`): the program never runs.
            self.facts.started_at = Some(now_rfc3339());
        } else {
            match self.spawn() {
                Ok(()) => {
                    self.facts.state = Some(WorkerState::Running);
                    self.save_facts();
                    // A cancel written before worker.json said "running" may not have
                    // signalled us.
                    if self.cancel_pending() {
                        self.cancel_requested(true);
                    }
                    // A stop asked for before the program ran (the latest state asked for is
                    // in the file): honoured now, a moment into its run.
                    self.stop_asked();
                    // While the program starts, which takes longer: off the way to its end.
                    self.sync_records_meanwhile();
                    warm_cpu_features();
                    self.stream();
                }
                Err(e) => {
                    self.facts.started_at = Some(now_rfc3339());
                    let msg = match e {
                        SpawnError::Spawn(m) => self.facts.spawn_error.insert(m),
                        SpawnError::Sandbox(m) => self.facts.sandbox_error.insert(m),
                    };
                    self.pane.line(Style::Red, &sanitize(msg.as_bytes(), 2000));
                }
            }
        }
        self.finish();
    }
}

/// How long after the program's start the launch records are made durable at the latest
/// (sooner when the attempt ends first). Not at once: each fsync is a disk flush, and a
/// short program's envelope would queue behind them. Not after a blink either: under a
/// `fanout` of a thousand, five thousand flushes 100 ms into each attempt fell among the
/// starts still to come (the last of 1000 started 0.2–0.3 s later than with the syncs 10 s
/// in). The kernel's own writeback takes them within about 30 s anyway; this bounds it.
const RECORDS_SYNC_AFTER: std::time::Duration = std::time::Duration::from_secs(5);

impl Worker {
    /// Makes the records the launcher wrote unsynced (`spec.json`, `run.json`, …) durable on
    /// a thread of their own, started with the program: [`RECORDS_SYNC_AFTER`] into the
    /// attempt, or right after its envelope when it ends sooner ([`Worker::records_now`]);
    /// the worker waits for that before it exits ([`Worker::records_durable`], which syncs
    /// them itself when no program started). Their fsyncs were on the way from the
    /// launch to the program's start. A killed worker leaves them to the kernel's writeback
    /// (a crash of the machine before then can lose them); an envelope written for it
    /// (`lost`) syncs them first.
    fn sync_records_meanwhile(&mut self) {
        let paths = self.paths.clone();
        let (now, wait) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("records".into())
            .stack_size(64 * 1024)
            .spawn(move || {
                // Woken early when the sender is dropped.
                let _ = wait.recv_timeout(RECORDS_SYNC_AFTER);
                store::sync_launch_records(&paths)
            });
        if let Ok(t) = thread {
            self.records_sync = Some(t);
            self.records_wake = Some(now);
        }
    }

    /// The envelope is written: the launch records are synced now, if not yet.
    pub(crate) fn records_now(&mut self) {
        self.records_wake = None;
    }

    /// Waits until the launch records are durable (or makes them so, when no thread could
    /// be started), and makes the end's `worker.json` and `output.txt` durable: the worker
    /// never exits before.
    fn records_durable(&mut self) {
        self.records_wake = None;
        match self.records_sync.take() {
            Some(t) => {
                let _ = t.join();
            }
            None => store::sync_launch_records(&self.paths),
        }
        store::sync_end_records(&self.paths);
    }
}

/// Has the libraries the worker needs on its way from the program's first line to the
/// envelope detect the CPU's features now, while the program starts: memchr (the line
/// splitter) and sha2 (the digests) each ask on first use, and each `cpuid` is a VM exit
/// (~10 µs here, a dozen of them) that would fall between the program's output and its end.
fn warm_cpu_features() {
    std::hint::black_box(memchr::memchr(b'\n', std::hint::black_box(b"warm")));
    std::hint::black_box(<sha2::Sha256 as sha2::Digest>::digest(b""));
}

fn tmux_info(spec: &AttemptSpec) -> TmuxInfo {
    let socket = std::env::var("TMUX")
        .ok()
        .and_then(|t| t.split(',').next().map(str::to_owned))
        .filter(|s| !s.is_empty())
        .or_else(|| Some(spec.tmux.socket.display().to_string()));
    TmuxInfo {
        socket,
        session: Some(spec.tmux.session.clone()),
        pane_id: std::env::var("TMUX_PANE").ok(),
    }
}
