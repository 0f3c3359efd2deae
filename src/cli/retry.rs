//! `subpane retry RUN`: flags → [`RetryOptions`] → plan attempt n+1 → start → (unless
//! `--detach`) wait and print, exactly as `run` does.

use std::sync::LazyLock;

use clap::Args;

use super::CliError;
use super::run::start_and_report;
use crate::app::{self, DEFAULT_FOLLOW_UP, RealSystem, RetryOptions, parse_kv};
use crate::store::Home;

/// The help that names the default follow-up ([`DEFAULT_FOLLOW_UP`], defined once).
static AFTER_HELP: LazyLock<String> = LazyLock::new(|| {
    format!(
        "\
Attempt n+1 runs what attempt n ran: the same program or agent and its settings, cwd, limits,
labels, sandbox policy and --keep-session. Records keep variable names only, so the values
come from this shell: variables set with `run --env` take their value from here (or from
retry --env); a name with no value is reported and left out. Attempt n's directory is never
changed.

--resume continues the agent's conversation of attempt n (its output.session_id): pi
--session, claude --resume, codex exec resume. The follow-up message is --task, by default
\"{DEFAULT_FOLLOW_UP}\". Without --resume the agent starts a new session with the same
task (or --task).

Examples:
  subpane retry build-42
  subpane retry review-1 --resume --task 'Now add tests for it.'
  subpane retry review-1 --detach --json
  subpane retry review-1 --at-reset --detach

--at-reset waits for the usage limit attempt n hit (exit 75) to reset: attempt n+1 starts at
once, and its worker sleeps in its pane until the reset time its CLI gave, then resumes the
session. Nothing polls meanwhile; the attempt is cancellable and survives this terminal.

Exit codes as run; 2 (nothing started) when attempt n has not finished, --resume has no
session to continue, or --at-reset finds no usage limit (or no time it resets: give --after)."
    )
});
static TASK_HELP: LazyLock<String> = LazyLock::new(|| {
    format!(
        "The task: with --resume the follow-up message [default: \"{DEFAULT_FOLLOW_UP}\"], else \
         a new task for a fresh session [default: the latest attempt's task]. Text, or @FILE"
    )
});

#[derive(Debug, Args)]
#[command(after_help = AFTER_HELP.as_str())]
pub struct RetryArgs {
    /// The run id, a unique start of it (or of its random part), or `@` for the newest run
    #[arg(add = super::docs::run_candidates())]
    pub run: String,
    /// Continue the agent session of the latest attempt (agents only; needs its session id)
    #[arg(long)]
    pub resume: bool,
    // The task: with --resume the follow-up message, else a new task for a fresh session.
    #[arg(long, value_name = "TEXT|@FILE", help = TASK_HELP.as_str())]
    pub task: Option<String>,
    /// Give variable K the value V (repeatable): for names the run set with --env that this
    /// shell lacks, or new ones; records keep the name only, and the value is masked as ***
    /// in the logs unless attempt n had the name with --env-plain
    #[arg(long = "env", value_name = "K=V")]
    pub envs: Vec<String>,
    /// --task is its text even when it starts with @ (internal: a retry passed to a host,
    /// whose @FILE was read here)
    #[arg(long, hide = true, requires = "task")]
    pub literal: bool,
    /// The latest attempt hit its account's usage limit: attempt n+1 waits in its pane until
    /// the limit resets (its output.usage_limit.retry_at), then continues the session (with
    /// none recorded, runs the task again). The wait is the attempt's: `ls` and `top` show
    /// `waiting until 14:05 (usage limit)`, `cancel` ends it, closing this terminal does not
    #[arg(long)]
    pub at_reset: bool,
    /// Wait this long (e.g. 30m) before attempt n+1 starts: with --at-reset, instead of the
    /// reset time (a CLI that said none), or alone
    #[arg(long, value_name = "DUR")]
    pub after: Option<String>,
    /// Return at once with the run id (and, on stderr, the attempt that started); the attempt
    /// runs on and its limits still hold
    #[arg(long)]
    pub detach: bool,
    /// Print exactly one JSON document: the envelope (or, with --detach, the run id and attempt)
    #[arg(long)]
    pub json: bool,
}

pub fn retry(home: &Home, a: RetryArgs) -> Result<i32, CliError> {
    if let Some(r) = super::remote::of(home, &a.run)? {
        if a.at_reset || a.after.is_some() {
            return Err(CliError::Flag(format!(
                "--at-reset and --after cannot be given to a retry of run {} on host {} yet: retry it there when the limit has reset",
                r.run_id, r.host.name
            )));
        }
        if !a.envs.is_empty() {
            return Err(CliError::Flag(format!(
                "--env cannot be given to a retry of run {} on host {} yet: its values would be on the host's command line; give them to a new `run --host` instead",
                r.run_id, r.host.name
            )));
        }
        let mut task = a.task.clone();
        if let Some(path) = app::at_file(&mut task) {
            task = Some(
                std::fs::read_to_string(&path).map_err(|source| CliError::ReadTasks {
                    what: path.display().to_string(),
                    source,
                })?,
            );
        }
        return super::remote::retry(home, &r, a.resume, task.as_deref(), a.detach, a.json);
    }
    let mut env = std::collections::BTreeMap::new();
    for e in &a.envs {
        let (k, v) = parse_kv("env", e)?;
        env.insert(k, v);
    }
    // `--task @FILE` reads the file, as `run --task` does (but a text passed on as such).
    let mut task = a.task.clone();
    let task_file = if a.literal {
        None
    } else {
        app::at_file(&mut task)
    };
    let opts = RetryOptions {
        resume: a.resume,
        task,
        task_file,
        env,
        at_reset: a.at_reset,
        after: a.after.clone(),
    };
    let planned = app::prepare_retry(home, &a.run, &opts, &RealSystem)?;
    for w in &planned.warnings {
        eprintln!("subpane: warning: {}", app::Spell::Flag.text(w));
    }
    start_and_report(home, planned.plan, a.detach, a.json)
}
