//! `subpane fanout FILE|-`: one run per JSON line, at most N at a time.
//!
//! The work is [`crate::app::fanout`]; this verb reads the file, takes Ctrl-C, and reports:
//! a progress line on a terminal (redrawn on each event and once a second for the clock),
//! then a table, or one JSON document with `--json`.

use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::sync::LazyLock;
use std::time::Duration;

use clap::Args;

use super::CliError;
use super::common::{print, print_json};

use super::interrupt;
use crate::app::RealSystem;
use crate::app::fanout::revive::close;
use crate::app::fanout::{
    DEFAULT_CONCURRENCY, Event, Fanout, GroupBudget, OnUsageLimit, Options, Progress, StopReason,
    detach, driver_tasks, group_record, new_group_id, plan_tasks,
};
use crate::envelope::{FailureKind, FanoutReport};
use crate::store::Home;

/// The fields a line may have: every field of a run request ([`app::field::FIELDS`]).
static AFTER_HELP: LazyLock<String> = LazyLock::new(|| {
    use crate::app::field::{FIELDS, Flag, Kind};
    let fields: Vec<String> = FIELDS
        .iter()
        .map(|f| {
            let at_file = FIELDS.iter().any(|o| o.flag == Flag::AtFileOf(f.name));
            match f.kind {
                _ if at_file => format!("{} (text or @FILE)", f.name),
                Kind::Map => format!("{} (an object)", f.name),
                Kind::Texts | Kind::Paths => format!("{} (a list)", f.name),
                _ => f.name.to_owned(),
            }
        })
        .collect();
    let text = format!(
        "Each line is a JSON object with the fields of `run`'s options: argv (a program and its \
         arguments) or agent with task (or task_file); of all: {}. Blank lines and lines \
         starting with # are skipped. Queue fields (fan-out lines only): {}{REST}",
        fields.join(", "),
        crate::app::fanout::QUEUE_FIELDS
            .iter()
            .map(|(name, _, help)| format!("{name}: {help}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    textwrap_lines(&text)
});

/// What follows the list of fields.
const REST: &str = " Relative paths (cwd, @FILE, task_file) are relative
to the current directory. A line with \"host\" (or any line, with --hosts) runs on that host:
its @FILE and task_file are read here and sent, its cwd is the host's (relative: to its login
directory), and the host plans it before anything starts.

  {\"argv\": [\"make\", \"test\"], \"cwd\": \"svc/api\", \"timeout\": \"10m\"}
  {\"agent\": \"claude\", \"task\": \"@tasks/review.md\", \"run_id\": \"review-1\"}

Every line is checked before anything starts: a bad one is reported as `line N: …` and
nothing starts (exit 2). The runs share a group id (printed on stderr, recorded in run.json,
spec.json and each envelope): `subpane ls --group G`, `subpane wait --group G`. If fanout
itself is killed, the started runs go on and `wait --group G` finds them; with --detach the
group is driven by a run of its own (id G, in its own pane), so closing the terminal loses no
task: `subpane attach G`, `subpane wait --group G`, `subpane cancel G`.

Ctrl-C (or SIGTERM) cancels the running tasks and skips the rest; a second one kills at once.

Exit code: the worst of the tasks (1 failed > 124 timed out > 130 cancelled > 0); a skipped
task counts as cancelled (130). 2: invalid input, nothing started.";

/// `text`'s first paragraph wrapped at 90 columns, like the rest of the help.
fn textwrap_lines(text: &str) -> String {
    let (first, rest) = text.split_once("\n\n").unwrap_or((text, ""));
    let mut out = String::new();
    let mut line = String::new();
    for word in first.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > 90 {
            out.push_str(&line);
            out.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push_str(&line);
    if !rest.is_empty() {
        out.push_str("\n\n");
        out.push_str(rest);
    }
    out
}

#[derive(Debug, Args)]
#[command(after_help = AFTER_HELP.as_str())]
pub struct FanoutArgs {
    /// A file of tasks, one JSON object per line, or - to read them from stdin
    #[arg(value_name = "FILE|-", required_unless_present_any = ["driver", "resume_group"])]
    pub file: Option<PathBuf>,
    /// Run at most N tasks at once in each place: here, and on each host
    #[arg(long, value_name = "N", default_value_t = DEFAULT_CONCURRENCY,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub concurrency: u32,
    /// Run the tasks of lines without a "host" on these hosts (names from `subpane hosts
    /// ls`), each task on the one with the most room when its turn comes; --concurrency
    /// holds on each. Every host plans the lines before anything starts
    #[arg(long, value_name = "NAME,...", value_delimiter = ',', num_args = 1..)]
    pub hosts: Vec<String>,
    /// Start no new task after the first one that does not complete (failed, timed out,
    /// cancelled); the running ones finish, the rest are skipped
    #[arg(long)]
    pub fail_fast: bool,
    /// With the first task that does not complete, also cancel the running ones (implies
    /// --fail-fast)
    #[arg(long)]
    pub cancel_siblings: bool,
    /// The group's budget: once the total tokens of all its tasks (input, output and cache,
    /// as their CLIs count them; a running task's so far) pass N, start no new task and stop
    /// the running ones, each ending as `budget`
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_tokens: Option<u64>,
    /// The group's budget in US dollars, as --max-tokens, over the cost its tasks' CLIs report
    /// (Claude Code's only when a task ends); refused when a task runs a CLI that reports no
    /// cost (codex)
    #[arg(long, value_name = "USD")]
    pub max_cost: Option<crate::spec::Usd>,
    /// A task whose run hits its account's usage limit (exit 75): `fail` ends it so; `wait`
    /// starts the run's next attempt, which waits in its pane for the limit to reset (as
    /// `retry --at-reset`) and resumes the session, keeping the task's slot
    #[arg(long, value_name = "WHAT", default_value = "fail",
          value_parser = clap::builder::PossibleValuesParser::new(["fail", "wait"]))]
    pub on_usage_limit: String,
    /// Print one JSON document: {"group", "tasks": [{"line", "run_id", "status", …}],
    /// "summary"}; status is completed, failed, cancelled or skipped
    #[arg(long)]
    pub json: bool,
    /// Check every task, then hand the group to a driver of its own (a run whose id is the
    /// group id, in its own pane) and return: closing this terminal loses no task. Watch it
    /// with `subpane attach GROUP`, wait with `subpane wait --group GROUP`, stop it with
    /// `subpane cancel GROUP`
    #[arg(long)]
    pub detach: bool,
    /// Drive detached group G again if its driver died with tasks left (killed, its pane
    /// gone): a new driver carries on from the records; the runs started go on as they are,
    /// and none starts twice. Any later subpane command does this too, as it sees the death
    #[arg(long, value_name = "G", conflicts_with_all = ["file", "detach", "driver"],
          add = super::docs::group_candidates())]
    pub resume_group: Option<String>,
    /// Drive the group recorded in this directory (internal: the driver of --detach)
    #[arg(long, hide = true, value_name = "DIR", conflicts_with_all = ["file", "detach"])]
    pub driver: Option<PathBuf>,
}

pub fn fanout(home: &Home, a: FanoutArgs) -> Result<i32, CliError> {
    if let Some(g) = &a.resume_group {
        return resume_group(home, g, a.json);
    }
    let tty = std::io::stderr().is_terminal();
    // When a detached group was given (its record's): what `start_after` counts from.
    let mut anchor = None;
    let (group, tasks, name, mut opts) = match &a.driver {
        Some(dir) => {
            // Whatever stops it here is an end of its own: the group is closed, never
            // started again (revive.rs).
            let (record, tasks) = driver_tasks(home, dir).inspect_err(|_| close(dir))?;
            let opts = record.options();
            anchor = Some(record.anchor());
            (
                record.group,
                tasks,
                format!("group {}", dir.display()),
                opts,
            )
        }
        None => {
            let file = a.file.as_deref().unwrap_or(std::path::Path::new("-"));
            let (text, name) = read_tasks(file)?;
            let group = new_group_id();
            let tasks = plan_tasks(&text, home, &RealSystem, &group, &a.hosts)?;
            let opts = Options {
                concurrency: a.concurrency as usize,
                fail_fast: a.fail_fast,
                cancel_siblings: a.cancel_siblings,
                tick: None,
                hosts: a.hosts.clone(),
                budget: GroupBudget {
                    max_tokens: a.max_tokens,
                    max_cost: a.max_cost,
                },
                on_usage_limit: match a.on_usage_limit.as_str() {
                    "wait" => OnUsageLimit::Wait,
                    _ => OnUsageLimit::Fail,
                },
            };
            (group, tasks, name, opts)
        }
    };
    opts.tick = tty.then_some(Duration::from_secs(1));
    let total = tasks.len();
    if total == 0 {
        eprintln!("subpane: {name} has no tasks; nothing to do");
    }
    if a.detach && total > 0 {
        let started = detach(home, &group, &tasks, &opts)?;
        if let Some(env) = &started.spawn_failed {
            eprintln!("subpane: error: {}", env.output.errors.join("; "));
            return Ok(env.exit_code());
        }
        eprintln!(
            "subpane: group {group}: {total} task{}, at most {} at once, driven by run {group} \
             (watch: subpane attach {group}; wait: subpane wait --group {group}; stop: \
             subpane cancel {group})",
            if total == 1 { "" } else { "s" },
            opts.concurrency
        );
        if a.json {
            print_json(&serde_json::json!({"group": group, "tasks": total,
                                           "driver": started.answer()}));
        } else {
            print(&format!("{group}\n"));
        }
        return Ok(crate::exit_code::COMPLETED);
    }
    // Before the first start: a Ctrl-C during the starts must queue, not kill us half-way.
    interrupt::block();
    let concurrency = opts.concurrency;
    let fan = match &a.driver {
        Some(dir) => Fanout::new(home, group.clone(), tasks, opts)
            .and_then(|f| f.recorded(dir, anchor.unwrap_or_else(std::time::SystemTime::now)))
            .inspect_err(|_| close(dir))?,
        None => Fanout::new(home, group.clone(), tasks, opts)?,
    };
    let stop = fan.interrupter();
    interrupt::on_interrupt(move |n| {
        if n == 1 {
            // Below the progress line, which stays as it was.
            let nl = if tty { "\n" } else { "" };
            eprintln!("{nl}subpane: cancelling the running tasks — Ctrl-C again to kill");
        }
        stop.interrupt();
    });
    if total > 0 {
        eprintln!(
            "subpane: group {group}: {total} task{}, at most {} at once",
            if total == 1 { "" } else { "s" },
            concurrency
        );
    }
    let mut line = ProgressLine { tty, drawn: false };
    let report = fan.run(&mut |ev, p| line.event(ev, p, total));
    if let Some(dir) = &a.driver {
        // It ended by itself (even with an error): nothing to start again.
        close(dir);
    }
    let report = report?;
    line.clear();
    if a.json {
        print_json(&report);
    } else if total > 0 {
        print(&table(&report));
    }
    Ok(report.summary.exit_code)
}

/// `--resume-group G`: its driver again, if it died with work left.
fn resume_group(home: &Home, g: &str, json: bool) -> Result<i32, CliError> {
    use crate::app::fanout::revive;
    let g = crate::app::resolve_group(home, g)?;
    let id = crate::spec::RunId::parse(&g).map_err(crate::app::Error::from)?;
    if group_record(home, &g).is_none() {
        return Err(crate::app::Error::invalid(format!(
            "group {g} was driven by the fan-out that started it, which is no run of its own: \
             there is no driver to start again; `subpane ls --group {g}` shows its runs"
        ))
        .into());
    }
    if !revive::is_open(home, &id) {
        return Err(crate::app::Error::invalid(format!(
            "group {g} has ended (its driver ended by itself): nothing is left to drive; \
             `subpane wait --group {g}` answers its tasks"
        ))
        .into());
    }
    let attempt = match revive::revive_one(home, &id) {
        Some(r) => r.outcome?,
        // Its driver runs (the check at the start of this command may have started it).
        None => crate::app::find_run(home, &g, None)?.spec.attempt,
    };
    eprintln!(
        "subpane: group {g} is driven by run {g}, attempt {attempt} (watch: subpane attach {g}; \
         wait: subpane wait --group {g})"
    );
    if json {
        print_json(&serde_json::json!({"group": g, "driver_attempt": attempt}));
    }
    Ok(crate::exit_code::COMPLETED)
}

/// The tasks' text, and how to name where it came from.
fn read_tasks(file: &std::path::Path) -> Result<(String, String), CliError> {
    if file.as_os_str() == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|source| CliError::ReadTasks {
                what: "the tasks from stdin".into(),
                source,
            })?;
        return Ok((s, "stdin".into()));
    }
    let s = std::fs::read_to_string(file).map_err(|source| CliError::ReadTasks {
        what: file.display().to_string(),
        source,
    })?;
    Ok((s, file.display().to_string()))
}

/// The one progress line on a terminal's stderr; messages are printed above it.
struct ProgressLine {
    tty: bool,
    drawn: bool,
}

impl ProgressLine {
    fn event(&mut self, ev: &Event<'_>, p: &Progress, total: usize) {
        let message = match ev {
            Event::Warning(w) => Some(format!(
                "subpane: warning: {}",
                crate::app::Spell::Flag.text(w)
            )),
            Event::Stopping(StopReason::Failed {
                task: _,
                cancel_siblings,
            }) => Some(format!(
                "subpane: a task did not complete: starting no more{}",
                if *cancel_siblings {
                    ", cancelling the running ones"
                } else {
                    ""
                }
            )),
            Event::Stopping(StopReason::KillNow) => {
                Some("subpane: killing the running tasks".to_owned())
            }
            Event::Waiting(w) => Some(format!("subpane: {w}")),
            Event::OverBudget(hit) => Some(format!(
                "subpane: {}: starting no more, stopping the running tasks",
                hit.words()
            )),
            // Why a task could not start; a run that failed is in the table.
            Event::Finished { outcome, .. } => outcome
                .error
                .as_ref()
                .filter(|_| {
                    outcome.run_id.is_none()
                        || matches!(
                            outcome.failure_kind,
                            Some(FailureKind::Spawn | FailureKind::Sandbox)
                        )
                })
                .map(|e| format!("subpane: line {}: {e}", outcome.line)),
            _ => None,
        };
        if let Some(m) = message {
            self.clear();
            eprintln!("{m}");
        }
        if self.tty {
            self.draw(p, total);
        }
    }

    fn draw(&mut self, p: &Progress, total: usize) {
        let secs = p.elapsed.as_secs();
        let mut s = format!("\r\x1b[2K{} running, {}/{total} done", p.running, p.done());
        if p.failed > 0 {
            s.push_str(&format!(", {} failed", p.failed));
        }
        if p.cancelled > 0 {
            s.push_str(&format!(", {} cancelled", p.cancelled));
        }
        if p.skipped > 0 {
            s.push_str(&format!(", {} skipped", p.skipped));
        }
        s.push_str(&format!(
            ", {} queued  {}:{:02}",
            p.queued,
            secs / 60,
            secs % 60
        ));
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(s.as_bytes());
        let _ = err.flush();
        self.drawn = true;
    }

    fn clear(&mut self) {
        if self.drawn {
            let mut err = std::io::stderr().lock();
            let _ = err.write_all(b"\r\x1b[2K");
            let _ = err.flush();
            self.drawn = false;
        }
    }
}

/// The table of every task, and a line of counts.
fn table(r: &FanoutReport) -> String {
    let s = &r.summary;
    format!(
        "{}\ngroup {}: {} task{}: {} in {:.1}s\n",
        super::table::rows(&r.tasks, true),
        r.group,
        s.total,
        if s.total == 1 { "" } else { "s" },
        super::table::totals(s),
        s.duration_ms as f64 / 1000.0
    )
}
