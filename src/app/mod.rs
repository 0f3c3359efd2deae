//! The application layer: everything a front end does with attempts, with no front end in it.
//!
//! ```text
//!  CLI flags ─┐
//!  fan-out line ─┼─► RunRequest ──plan(req, home, &dyn System)──► Plan ──start(home, plan)──► Started
//!  MCP call ──┘     (serde)        (pure: files and PATH          (resolved,      (attempt n: files,
//!                                   through a trait)               immutable)      pane, launch.json)
//!
//!  run(home, plan, loop, opts): start ─► (unless detached) wait ─► RunOutcome   `run`, `retry`,
//!                                ▲ interrupts ─► cancel_on_interrupt            the MCP `run`
//!
//!  find_run ─► Found ─► status / cancel / logs paths
//!  list ─► RunRow…      gc ─► GcReport
//!
//!  fanout::detach ─► groups/<G>/ + a driver run G (`fanout --driver`, in its own pane)
//!  fanout::group_report(G) ─► each task: its run, queued, or skipped once the driver ended
//!
//!  WaitLoop (one loop over the supervisor's Waiter, one heartbeat, interrupts) driven by:
//!    wait_with ─► WaitResult ─► wait_answers     Fanout ─► refills     follow ─► logs -f
//!
//!  ends(envelope, paths, EndSize::TERMINAL | ANSWER): what an answer shows of the output
//!
//!  nest: `run` inside a sandbox ─► its worker's server ─► plan (the parent's home, a
//!        policy within the parent's) ─► run ─► the answer back
//! ```
//!
//! The command line, a fan-out file and an MCP server all turn their input into a
//! [`RunRequest`], hand it to [`plan`] (every rule of valid input lives there, tested without
//! a tmux server), and start the result with [`start`] (or [`run`], which also waits and
//! cancels on interrupts). Answers come back as the typed contract documents of
//! [`crate::envelope`] and [`RunAnswer`]s; nothing here prints or knows about clap.
//!
//! One place per rule that both front ends show: every wait is a driver of the one
//! [`WaitLoop`] (the front ends never touch the supervisor), a wait's answers come from
//! [`wait_answers`] and its message from [`waiting_for`], the ends of a program's output from
//! [`ends`], and each default from one constant ([`fanout::DEFAULT_CONCURRENCY`],
//! [`crate::spec::DEFAULT_LINGER`], …) that clap and the MCP schemas refer to.
//!
//! Common pitfalls:
//! * A spawn failure is an outcome, not an error: [`start`] returns the `spawn` envelope in
//!   [`Started::spawn_failed`] once the attempt exists on disk.
//! * Environment values reach only the one-shot environment file: never a record, never a
//!   `Debug` string (see [`RunRequest`]'s and [`Plan`]'s `Debug`).

mod error;
pub mod fanout;
pub mod nest;
mod runs;
mod start;
mod watch;

// The rooms' modules, under the names the rest of the layer and the front ends use.
pub use runs::{group, names};
pub use start::{field, invalid, worktree};
use start::{launch, plan, request, retry, run, seed, start_many};
pub use watch::board;
use watch::{output_end, pretty, progress, wait, wait_loop};

pub use group::{group_far, group_runs, list_group};
pub use launch::{Started, start};
pub use names::{
    NEWEST, completions as run_names, groups as group_names, random_part, resolve_group,
    resolve_run,
};
pub use output_end::{EndSize, Ends, OutputEnd, ends, log_end, output_end, output_end_keep_sgr};
pub use plan::{Plan, RealSystem, System, plan};
pub use pretty::PrettyLog;
pub use progress::{Live, progress};
pub use request::{RunRequest, at_file, parse_kv};
pub use retry::{DEFAULT_FOLLOW_UP, RetryOptions, RetryPlan, plan_retry, prepare_retry};
pub use run::{OnInterrupt, RunOptions, RunOutcome, cancel_on_interrupt, run};
pub use runs::{
    AttemptStatus, CancelOutcome, Found, GC_OLDER_THAN, LogFile, Sent, StopOutcome, attempt_status,
    cancel, cancel_asking, cancel_by, find_run, gc, list, list_one, send, send_within,
    stop_attempt, tmux_for, what,
};
pub use start_many::start_many;
pub use wait::{
    Followed, RunAnswer, WaitAnswers, WaitMode, WaitOptions, WaitProgress, WaitResult, follow,
    regroup, wait, wait_answers, wait_one, wait_targets, wait_with, waiting_for,
};
pub use wait_loop::{Driver, Ended, Inbox, Interrupter, Poster, Seen, WaitLoop};

pub use error::Error;
pub use invalid::{Invalid, Spell};
