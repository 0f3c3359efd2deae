//! `subpane logs RUN`: print an attempt's output; `-f` follows until the attempt ends.
//!
//! Following is [`app::follow`], a driver of the same wait loop as `wait`: it says when the
//! attempt's files grew (one inotify watch on the attempt directory) and when the attempt
//! ended (its FIFO, its worker's pidfd), and this verb copies what is new each time. On a
//! terminal the bytes are made safe first (an agent's escape sequences are shown, not
//! obeyed); piped, they are copied as they are.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use clap::Args;

use super::CliError;
use std::ops::ControlFlow;

use crate::app::{self, AttemptStatus, Followed, LogFile};
use crate::term::{OutputMode, TerminalFilter};

#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("which").args(["events", "stderr", "output", "stdout"]))]
#[command(after_help = "\
On a terminal, control characters in the output (escape sequences, a title change, a
clipboard write) are shown as visible text such as ^[ instead of acting on the terminal; piped
or redirected output is byte for byte. --raw keeps the bytes on a terminal too.")]
pub struct LogsArgs {
    /// The run id
    pub run: String,
    /// events.jsonl: the filtered agent events (default for agents)
    #[arg(long)]
    pub events: bool,
    /// stderr.log: the program's stderr
    #[arg(long)]
    pub stderr: bool,
    /// output.txt: the agent's final text
    #[arg(long)]
    pub output: bool,
    /// stdout.log: stdout lines that were not JSON events (default for commands)
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

/// Copies what `path` has past `offset` to `out`, through `filter` when the output is a
/// terminal.
fn copy_from(
    path: &Path,
    offset: &mut u64,
    out: &mut impl Write,
    filter: &mut Option<TerminalFilter>,
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
        match filter {
            Some(t) => out.write_all(t.push(&buf[..n]).as_bytes())?,
            None => out.write_all(&buf[..n])?,
        }
        *offset += n as u64;
    }
    out.flush()
}

pub fn logs(home: &crate::store::Home, a: LogsArgs) -> Result<i32, CliError> {
    let f = app::find_run(home, &a.run, a.attempt)?;
    let file = [
        (a.events, LogFile::Events),
        (a.stderr, LogFile::Stderr),
        (a.output, LogFile::Output),
        (a.stdout, LogFile::Stdout),
    ]
    .into_iter()
    .find_map(|(asked, file)| asked.then_some(file));
    let path = f.log_path(file);
    let mut filter =
        (OutputMode::for_stdout(a.raw) == OutputMode::Safe).then(TerminalFilter::default);
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
    let finish = |out: &mut std::io::StdoutLock<'_>, filter: &mut Option<TerminalFilter>| {
        if let Some(t) = filter {
            let _ = out.write_all(t.finish().as_bytes());
            let _ = out.flush();
        }
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
        done(copy_from(&path, &mut offset, &mut out, &mut filter))?;
        finish(&mut out, &mut filter);
        return Ok(0);
    }
    // Each time: what is new; at the end, the last of it (everything the worker wrote is in
    // place before result.json).
    // A failure to print stops following; it is this verb's error, not the wait's.
    let mut failed = None;
    app::follow(&f, &mut |what| {
        match done(copy_from(&path, &mut offset, &mut out, &mut filter)) {
            Ok(true) => return Ok(ControlFlow::Break(())),
            Ok(false) => {}
            Err(e) => {
                failed = Some(e);
                return Ok(ControlFlow::Break(()));
            }
        }
        if what == Followed::Ended {
            finish(&mut out, &mut filter);
        }
        Ok(ControlFlow::Continue(()))
    })?;
    failed.map_or(Ok(0), Err)
}
