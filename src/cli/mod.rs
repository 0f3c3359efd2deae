//! The command line: the only place that knows clap.
//!
//! A thin edge over [`crate::app`]: clap turns argv into the raw `*Args` structs, each verb
//! turns those into the application layer's request or query, calls it, and prints the
//! answer (JSON, or text for people). Nothing below this module knows clap.

mod attach;
mod cancel;
mod common;
mod docs;
mod error;
mod fanout;
mod gc;
mod group;
mod hint;
mod hosts;
pub(crate) mod human;
mod interrupt;
mod live_line;
mod logs;
mod ls;
mod mcp;
mod nested;
mod output;
mod pause;
mod reference;
mod remote;
mod retry;
mod run;
mod send;
mod slurm_job;
mod status;
mod table;
mod top;
mod wait;

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

pub use docs::complete_if_asked;
pub use error::CliError;

/// Run AI subagents (pi, Claude Code, Codex, or any command) as supervised, recorded,
/// attachable attempts.
///
/// Every attempt gets its own directory under the subpane home and its own detached tmux
/// session on a private server. `result.json` in the attempt directory is the versioned
/// envelope of how it ended.
#[derive(Debug, Parser)]
#[command(
    name = "subpane",
    version,
    max_term_width = 100,
    after_help = reference::SHORT_AFTER_HELP.as_str(),
    after_long_help = reference::AFTER_HELP.as_str()
)]
pub struct Cli {
    /// Where runs are recorded [default: $SUBPANE_HOME, else ${XDG_STATE_HOME:-~/.local/state}/subpane]
    #[arg(long, global = true, value_name = "DIR")]
    pub home: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

/// Each verb's arguments are built only when that verb is parsed (`defer`): the tree of
/// every verb cost about half a millisecond at each `subpane run`.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum Command {
    /// Start an attempt: an agent with a task, or any program after `--`
    Run(Box<run::RunArgs>),
    /// Start the next attempt of a finished run; --resume continues the agent's session
    Retry(retry::RetryArgs),
    /// Show the state of a run; the envelope once it has finished
    Status(status::StatusArgs),
    /// Wait for runs to finish (without polling)
    Wait(wait::WaitArgs),
    /// Start one run per line of a JSON Lines file, at most N at a time, and wait for them
    Fanout(fanout::FanoutArgs),
    /// Print a run's output files; -f follows until the attempt ends
    Logs(logs::LogsArgs),
    /// Cancel a run: SIGTERM to its process group, SIGKILL after the grace period
    Cancel(cancel::CancelArgs),
    /// Give a running agent a user message (or --interrupt its turn), as its CLI's input
    Send(send::SendArgs),
    /// Stop runs' agents where they are (SIGSTOP), or a detached group's new starts
    /// (--group G)
    Pause(pause::PauseArgs),
    /// Continue paused runs' agents (SIGCONT), or a paused group (--group G)
    Resume(pause::ResumeArgs),
    /// Show a detached fan-out group's tasks and why each queued one waits; change its
    /// --concurrency
    Group(group::GroupArgs),
    /// Attach this terminal to a run's tmux pane (detach with Ctrl-b d)
    Attach(attach::AttachArgs),
    /// List runs, newest first
    Ls(ls::LsArgs),
    /// Watch every run live in this terminal: filters, details, groups; attach, cancel, retry
    Top(top::TopArgs),
    /// Remove finished sessions and old run directories
    Gc(gc::GcArgs),
    /// Serve the Model Context Protocol on stdio, for parent agents (tools: run, status, wait,
    /// logs, cancel, send, list, fanout, retry, pause, resume)
    Mcp(mcp::McpArgs),
    /// Record, list, forget and check the hosts attempts will run on (ssh://)
    Hosts(hosts::HostsArgs),
    /// Print a shell completion script (bash, zsh, fish)
    Completions(docs::CompletionsArgs),
    /// Print the man page (roff), of subpane or of one verb
    Man(docs::ManArgs),
    /// The worker that runs inside the pane (internal)
    #[command(name = "__worker", hide = true)]
    Worker {
        /// The attempt directory
        dir: PathBuf,
    },
    /// Enter the sandbox, then exec the program (internal; the worker runs it)
    #[command(name = "__sandbox", hide = true)]
    Sandbox {
        /// A JSON file with the policy under the key "sandbox" (the attempt's spec.json)
        #[arg(long, value_name = "FILE")]
        policy: PathBuf,
        /// An inherited descriptor for the one-line JSON report
        #[arg(long, value_name = "N")]
        report_fd: Option<i32>,
        /// The egress proxy's Unix socket (network allow)
        #[arg(long, value_name = "PATH")]
        proxy_socket: Option<PathBuf>,
        /// An inherited descriptor for the JSON line written when the program has ended
        #[arg(long, value_name = "N")]
        end_fd: Option<i32>,
        /// The program and its arguments
        #[arg(last = true, required = true, value_name = "PROGRAM")]
        argv: Vec<OsString>,
    },
    /// Time `top`'s redraws over the runs of the home (internal; scripts/bench runs it)
    #[command(name = "__bench-top", hide = true)]
    BenchTop {
        /// How many redraws to time
        #[arg(long, default_value_t = 50)]
        redraws: u32,
    },
    /// Time the parts of an adapter's filter on a stream in memory (internal; scripts/bench
    /// runs it)
    #[command(name = "__bench-filter", hide = true)]
    BenchFilter {
        /// The adapter whose filter is timed
        #[arg(long, value_enum)]
        agent: run::AgentArg,
        /// The stream: a file of the agent's stdout lines
        file: PathBuf,
    },
    /// Time the check of an envelope from a host: compiling schema/result.v1.json, then
    /// checking FILE against it (internal; scripts/bench runs it)
    #[command(name = "__bench-check", hide = true)]
    BenchCheck {
        /// An envelope (result.json)
        file: PathBuf,
    },
    /// Change the process and /tmp limits of a running sandbox (internal; the server of
    /// nested runs runs it)
    #[command(name = "__resize", hide = true)]
    Resize {
        /// The sandbox helper, as PID:START_TICKS
        #[arg(long, value_name = "PID:START", value_parser = crate::sandbox::resize::parse_helper)]
        helper: crate::envelope::ProcRef,
        /// The process limit to set
        #[arg(long, value_name = "N")]
        processes: u32,
        /// The size of /tmp to set, in bytes
        #[arg(long, value_name = "BYTES")]
        tmp: u64,
        /// The size /tmp has now, in bytes (checked before it changes)
        #[arg(long, value_name = "BYTES")]
        tmp_now: u64,
    },
    /// Print this machine's facts as JSON for a host asking over ssh (internal; `hosts
    /// check` runs it on the host)
    #[command(name = "__host-facts", hide = true)]
    HostFacts,
    /// Plan and start, detached, the run request read as JSON on stdin (internal; `run
    /// --host` runs it on the host)
    #[command(name = "__run-request", hide = true)]
    RunRequest,
    /// Plan, starting nothing, a fan-out's lines read as JSON on stdin (internal; `fanout`
    /// runs it on each host its lines go to)
    #[command(name = "__check-requests", hide = true)]
    CheckRequests,
    /// Run the attempt of a run on a Slurm host in this batch job (internal; the job's
    /// script runs it on its node)
    #[command(name = "__slurm-job", hide = true)]
    SlurmJob {
        /// The run id
        id: String,
        /// Run this attempt of it, a retry of the one before (its options in the job's
        /// directory)
        #[arg(long, value_name = "N")]
        retry: Option<u32>,
    },
    /// Serve a sandboxed attempt's nested runs (internal; the worker runs it)
    #[command(name = "__nest", hide = true)]
    Nest {
        /// The inherited listening socket (the attempt's nest.sock)
        #[arg(long, value_name = "N")]
        listen_fd: i32,
        /// The attempt directory
        dir: PathBuf,
    },
}

/// Parses the command line (exiting as clap does on an error or `--help`), with a hint for
/// a likely mistake (see `hint.rs`).
pub fn parse(args: Vec<OsString>) -> Cli {
    match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => hint::with_hint(e, &args).exit(),
    }
}

/// Runs the parsed command; returns the process exit code.
pub fn dispatch(cli: Cli) -> Result<i32, CliError> {
    // The hidden helpers run before the home is resolved: they never touch it.
    match cli.command {
        Command::Worker { dir } => return Ok(crate::worker::main(&dir)),
        Command::Sandbox {
            policy,
            report_fd,
            proxy_socket,
            end_fd,
            argv,
        } => {
            return Ok(crate::sandbox::exec::main(crate::sandbox::exec::Request {
                policy,
                report_fd,
                proxy_socket,
                end_fd,
                argv,
            }));
        }
        Command::Resize {
            helper,
            processes,
            tmp,
            tmp_now,
        } => {
            return Ok(crate::sandbox::resize::main(
                crate::sandbox::resize::Request {
                    helper,
                    processes,
                    tmp,
                    tmp_now,
                },
            ));
        }
        // Text from the definitions only: no home, no environment.
        Command::Completions(a) => return docs::completions(a),
        Command::Man(a) => return docs::man(a),
        _ => {}
    }
    // Read for every verb (the MCP server serves many), so a malformed value is refused
    // alike everywhere, before anything runs.
    let tmux_limit = crate::tmux::time_limit_from_env().map_err(CliError::Env)?;
    crate::tmux::set_time_limit(tmux_limit);
    let tmux_idle = crate::tmux::idle_from_env().map_err(CliError::Env)?;
    crate::tmux::set_idle(tmux_idle);
    if let Command::Nest { listen_fd, dir } = &cli.command {
        return Ok(crate::app::nest::serve(dir, *listen_fd));
    }
    // Inside a sandbox the home is hidden: `run` asks the attempt's worker, the rest is
    // watched from outside.
    let is_run = matches!(cli.command, Command::Run(_));
    if let Some(socket) = crate::app::nest::socket_of_caller(is_run) {
        return match cli.command {
            Command::Run(a) => nested::run(*a, &socket, cli.home.is_some()),
            _ => Err(nested::not_served()),
        };
    }
    let home = crate::store::Home::resolve(cli.home.as_deref()).map_err(CliError::Home)?;
    revive_groups(&home, &cli.command);
    match cli.command {
        Command::Run(a) => run::run(&home, *a),
        Command::Retry(a) => retry::retry(&home, a),
        Command::Status(a) => status::status(&home, a),
        Command::Wait(a) => wait::wait(&home, a),
        Command::Fanout(a) => fanout::fanout(&home, a),
        Command::Logs(a) => logs::logs(&home, a),
        Command::Cancel(a) => cancel::cancel(&home, a),
        Command::Send(a) => send::send(&home, a),
        Command::Pause(a) => pause::pause(&home, a),
        Command::Resume(a) => pause::resume(&home, a),
        Command::Group(a) => group::group(&home, a),
        Command::Attach(a) => attach::attach(&home, a),
        Command::Ls(a) => ls::ls(&home, a),
        Command::Top(a) => top::top(&home, a),
        Command::Gc(a) => gc::gc(&home, a),
        Command::Hosts(a) => hosts::hosts(&home, a),
        Command::RunRequest => run::run_request(&home),
        Command::CheckRequests => run::check_requests(&home),
        Command::SlurmJob { id, retry } => slurm_job::slurm_job(&home, &id, retry),
        Command::HostFacts => {
            common::print_json(&crate::hosts::local_facts(&home));
            Ok(0)
        }
        Command::Mcp(a) => mcp::mcp(&home, a),
        Command::BenchTop { redraws } => top::bench(&home, redraws),
        Command::BenchCheck { file } => {
            let bytes = std::fs::read(&file).map_err(|source| CliError::ReadTasks {
                what: file.display().to_string(),
                source,
            })?;
            let t = std::time::Instant::now();
            crate::envelope::compile_schema();
            let compile = t.elapsed();
            let t = std::time::Instant::now();
            let id = serde_json::from_slice::<serde_json::Value>(&bytes).unwrap_or_default();
            let (run, n) = (id["run_id"].as_str().unwrap_or(""), id["attempt"].as_u64());
            let valid = crate::envelope::from_remote(&bytes, run, n.unwrap_or(1) as u32).is_ok();
            let check = t.elapsed();
            let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
            let doc = serde_json::json!({"compile_ms": ms(compile), "check_ms": ms(check), "valid": valid});
            println!("{doc}");
            Ok(0)
        }
        Command::BenchFilter { agent, file } => {
            let stream = std::fs::read(&file).map_err(|source| CliError::ReadTasks {
                what: file.display().to_string(),
                source,
            })?;
            let parts = crate::worker::filter_parts(agent.kind(), &stream);
            println!("{}", serde_json::to_string(&parts).unwrap_or_default());
            Ok(0)
        }
        Command::Worker { .. }
        | Command::Sandbox { .. }
        | Command::Resize { .. }
        | Command::Nest { .. }
        | Command::Completions(_)
        | Command::Man(_) => unreachable!("handled above"),
    }
}

/// A detached group whose driver died with work left is driven again by the next command
/// that sees it (app::fanout::revive): every verb a person or a parent agent runs, but the
/// internal ones (a driver, a host's side of a call) and `cancel` of a group's driver (it
/// stops the group instead). What was started is said on stderr.
fn revive_groups(home: &crate::store::Home, command: &Command) {
    let cancelled = match command {
        Command::Run(_)
        | Command::Retry(_)
        | Command::Status(_)
        | Command::Wait(_)
        | Command::Logs(_)
        | Command::Send(_)
        | Command::Group(_)
        | Command::Pause(_)
        | Command::Resume(_)
        | Command::Attach(_)
        | Command::Ls(_)
        | Command::Top(_)
        | Command::Gc(_)
        | Command::Hosts(_)
        | Command::Mcp(_) => None,
        Command::Fanout(a) if a.driver.is_none() => None,
        Command::Cancel(a) => Some(a.run.as_str()),
        _ => return,
    };
    for r in crate::app::fanout::revive::revive_seen(home, cancelled) {
        eprintln!("subpane: {}", r.words());
    }
}
