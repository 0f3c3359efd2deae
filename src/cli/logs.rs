//! `subpane logs RUN`: print an attempt's output; `-f` follows until the attempt ends.
//!
//! Following is [`app::follow`], a driver of the same wait loop as `wait`: it says when the
//! attempt's files grew (one inotify watch on the attempt directory) and when the attempt
//! ended (its FIFO, its worker's pidfd), and this verb copies what is new each time. On a
//! terminal the bytes are made safe first (an agent's escape sequences are shown, not
//! obeyed); piped, they are copied as they are.
//!
//! An agent's events on a terminal (or with `--pretty`) are shown as its pane shows them
//! ([`app::PrettyLog`]: the adapter and the pane's renderer); `--events` and a pipe keep
//! the JSON lines.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use clap::Args;

use super::CliError;
use std::ops::ControlFlow;

use super::common::color_stdout;
use crate::app::{self, AttemptStatus, Followed, LogFile};
use crate::spec::AgentKind;
use crate::term::{OutputMode, TerminalFilter};

#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("which").args(["events", "stderr", "output", "stdout", "pretty"]))]
#[command(after_help = "\
An agent's log on a terminal reads like its pane (streamed text, tool calls, results, usage);
piped, it is events.jsonl, one JSON event per line. --events prints the JSON lines on a
terminal too, --pretty renders them when piped.

On a terminal, control characters in the output (escape sequences, a title change, a
clipboard write) are shown as visible text such as ^[ instead of acting on the terminal; piped
or redirected output is byte for byte. --raw keeps the bytes on a terminal too.")]
pub struct LogsArgs {
    /// The run id, a unique start of it (or of its random part), or `@` for the newest run
    #[arg(add = super::docs::run_candidates())]
    pub run: String,
    /// events.jsonl as JSON lines (for agents, the default when piped)
    #[arg(long)]
    pub events: bool,
    /// An agent's events as its pane shows them (the default on a terminal)
    #[arg(long, conflicts_with = "raw")]
    pub pretty: bool,
    /// stderr.log: the program's stderr
    #[arg(long)]
    pub stderr: bool,
    /// output.txt: the agent's final text (a command has none: exit 2, see --stdout)
    #[arg(long)]
    pub output: bool,
    /// stdout.log: a command's whole stdout, or an agent's non-event lines (default for commands)
    #[arg(long)]
    pub stdout: bool,
    /// Follow: keep printing as the file grows, until the attempt ends
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// Read this attempt instead of the latest
    #[arg(long, value_name = "N")]
    pub attempt: Option<u32>,
    /// Write the bytes as they are even to a terminal (escape sequences included)
    #[arg(long)]
    pub raw: bool,
}

/// How the bytes of the file reach stdout.
enum Shown {
    /// As they are (a pipe, or `--raw`).
    Bytes,
    /// Control characters made visible (a terminal).
    Safe(TerminalFilter),
    /// An agent's events as its pane shows them.
    Pretty(app::PrettyLog),
}

impl Shown {
    fn push(&mut self, b: &[u8], out: &mut impl Write) -> std::io::Result<()> {
        match self {
            Shown::Bytes => out.write_all(b),
            Shown::Safe(t) => out.write_all(t.push(b).as_bytes()),
            Shown::Pretty(p) => out.write_all(p.push(b).as_bytes()),
        }
    }

    fn finish(&mut self) -> String {
        match self {
            Shown::Bytes => String::new(),
            Shown::Safe(t) => t.finish(),
            Shown::Pretty(p) => p.finish(),
        }
    }
}

/// Copies what `path` has past `offset` to `out`, shown as `shown` says.
fn copy_from(
    path: &Path,
    offset: &mut u64,
    out: &mut impl Write,
    shown: &mut Shown,
) -> std::io::Result<()> {
    // Never through a link: the program may have put one under the log's name.
    let mut f = match crate::store::open_read(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    f.seek(SeekFrom::Start(*offset))?;
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        shown.push(&buf[..n], out)?;
        *offset += n as u64;
    }
    out.flush()
}

pub fn logs(home: &crate::store::Home, a: LogsArgs) -> Result<i32, CliError> {
    if let Some(r) = super::remote::of(home, &a.run)? {
        let n = a.attempt.map(|n| n.to_string());
        let mut words = vec!["logs", r.run_id.as_str()];
        for (on, flag) in [
            (a.events, "--events"),
            (a.pretty, "--pretty"),
            (a.stderr, "--stderr"),
            (a.output, "--output"),
            (a.stdout, "--stdout"),
            (a.follow, "--follow"),
            (a.raw, "--raw"),
        ] {
            if on {
                words.push(flag);
            }
        }
        if let Some(n) = &n {
            words.extend(["--attempt", n.as_str()]);
        }
        return super::remote::pass_through(home, &r, &words, false);
    }
    let f = app::find_run(home, &a.run, a.attempt)?;
    let file = [
        (a.events, LogFile::Events),
        (a.stderr, LogFile::Stderr),
        (a.output, LogFile::Output),
        (a.stdout, LogFile::Stdout),
    ]
    .into_iter()
    .find_map(|(asked, file)| asked.then_some(file));
    let path = f.log_path(file).ok_or_else(|| {
        CliError::Flag(format!(
            "--output: run `{}` is a command, which has no final text (output.txt is an \
             agent's); `subpane logs {} --stdout` prints its output",
            f.spec.run_id, f.spec.run_id
        ))
    })?;
    let terminal = OutputMode::for_stdout(a.raw) == OutputMode::Safe;
    let agent = f.spec.agent != AgentKind::Command;
    // An agent's log reads like its pane on a terminal, unless a file was named.
    let pretty = agent && (a.pretty || (terminal && file.is_none()));
    let mut shown = if pretty {
        Shown::Pretty(app::PrettyLog::for_task(
            f.spec.agent,
            f.spec.task.as_ref(),
            color_stdout(),
        ))
    } else if terminal {
        Shown::Safe(TerminalFilter::default())
    } else {
        Shown::Bytes
    };
    let mut out = std::io::stdout().lock();
    let mut offset = 0u64;
    // A closed pipe (`| head`) ends the command quietly.
    let done = |r: std::io::Result<()>| -> Result<bool, CliError> {
        match r {
            Ok(()) => Ok(false),
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(true),
            Err(source) => Err(CliError::Print {
                path: path.clone(),
                source,
            }),
        }
    };
    let finish = |out: &mut std::io::StdoutLock<'_>, shown: &mut Shown| {
        let _ = out.write_all(shown.finish().as_bytes());
        let _ = out.flush();
    };
    if !a.follow {
        if !path.exists()
            && matches!(
                app::attempt_status(&f.paths, &f.spec)?,
                AttemptStatus::Finished(_)
            )
        {
            eprintln!(
                "subpane: {} does not exist for this attempt",
                path.file_name()
                    .and_then(|n| n.to_str())
                    .unwrap_or("the file")
            );
        }
        done(copy_from(&path, &mut offset, &mut out, &mut shown))?;
        finish(&mut out, &mut shown);
        return Ok(0);
    }
    // Each time: what is new; at the end, the last of it (everything the worker wrote is in
    // place before result.json).
    // A failure to print stops following; it is this verb's error, not the wait's.
    let mut failed = None;
    let mut ended = false;
    app::follow(&f, &mut |what| {
        match done(copy_from(&path, &mut offset, &mut out, &mut shown)) {
            Ok(true) => return Ok(ControlFlow::Break(())),
            Ok(false) => {}
            Err(e) => {
                failed = Some(e);
                return Ok(ControlFlow::Break(()));
            }
        }
        if what == Followed::Ended {
            finish(&mut out, &mut shown);
            ended = true;
        }
        Ok(ControlFlow::Continue(()))
    })?;
    // The end, in one line beside the log (stdout stays the file's own bytes).
    if ended && let AttemptStatus::Finished(env) = app::attempt_status(&f.paths, &f.spec)? {
        eprintln!(
            "subpane: {} (attempt {}) ended: {}",
            env.run_id,
            env.attempt,
            env.outcome_words()
        );
    }
    failed.map_or(Ok(0), Err)
}
