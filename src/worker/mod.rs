//! The worker: the process inside the tmux pane (`subpane __worker ATTEMPT_DIR`).
//!
//! ```text
//!  spec.json ─► worker ─► spawn agent (own process group, stdin /dev/null or its      spawn.rs
//!                  │      input pipe, stdout/stderr pipes)
//!                  │  input: input.sock, the pane's keys, the agent's stdin          input/
//!                  │  (sandboxed: the proxy, the server of nested runs,              nest.rs
//!                  │   then the sandbox helper)                                 sandboxed.rs
//!                  │  a thread: fsync the launch records (spec.json, run.json, …)    run.rs
//!                  │    5 s in, or right after result.json when that comes first
//!                  │  poll(2): stdout pipe, stderr pipe, signalfd, pane fd;      poll.rs
//!                  │           (the filter of stdout and stderr:                 stream.rs)
//!                  │           timeout = the stop machine's next deadline
//!                  │    stdout ─► LineSplitter ─► adapter ─► events.jsonl / stdout.log, pane
//!                  │    stderr ─► stderr.log, pane        (logs: logfile.rs, losses counted)
//!                  │    usage, last event ─► progress.json, at most twice a second    progress.rs
//!                  │    usage past a budget limit ─► stop (failure budget)           budget.rs
//!                  │    SIGCHLD ─► reap;  SIGUSR1/TERM/INT ─► cancel;  SIGHUP ─► pane closed
//!                  │    SIGUSR2 ─► stop.json: SIGSTOP / SIGCONT the group (stop/hold.rs)
//!                  │    a run from a sandbox: the parent's worker exited ─► cancel    within.rs
//!                  │    deadlines ─► SIGTERM group ─ grace ─► SIGKILL group + descendants  stop/
//!                  ▼
//!  (--worktree: status, diff, remove or keep the worktree)                          worktree.rs
//!  worker.json (facts) ─► output.txt ─► result.json (atomic, written last)            finish.rs
//! ```
//!
//! `run.rs` holds the entry point and the sequence; each phase owns its file. Every decision
//! about stopping (deadlines, cancel, the grace ladder, the leak wait) is the pure state
//! machine in `stop/`, fed events with the time; the rest of the worker performs its actions.
//!
//! The worker owns every deadline, so limits hold with no supervisor around. It is a child
//! subreaper: descendants that `setsid` or double-fork re-parent to it and are found and
//! killed at the end.
//!
//! Common pitfalls:
//! * Signals must be blocked before anything else, or an early cancel kills the worker.
//! * Write `worker.json` before looking for `cancel.json` or `stop.json` (the requester does
//!   the reverse).
//! * The launcher renames its records into place unsynced: the worker makes them durable
//!   (see `Worker::sync_records_meanwhile`), and never exits before they are.
//! * The agent's exit is not the end: its output pipes may still be held by descendants.
//! * Every reap of the agent, wherever it happens, goes to the machine as `AgentExited`.
//! * The worker runs outside the sandbox, with the user's rights: every file it opens in the
//!   attempt directory is opened without following links (`store::create_new`,
//!   `store::open_read`, atomic renames), since the program may have planted one there.

mod bench;
mod digest;
mod finish;
mod input;
mod lines;
mod logfile;
mod nest;
mod not_started;
mod pane;
mod poll;
mod progress;
mod render;
mod run;
mod sandboxed;
mod spawn;
mod stop;
mod stream;
mod transcripts;
mod wait_start;
mod within;
mod worktree;

pub use bench::{FilterParts, filter_parts};
pub use lines::{LineSplitter, MAX_LINE, Piece};
pub use render::{Render, Style, said_line};
pub use run::main;
