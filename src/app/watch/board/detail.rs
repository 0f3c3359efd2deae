//! What the detail pane of a run shows: its envelope once it ended, and the ends of its
//! events (as its pane showed them) and of its stderr. Read when the pane opens and when
//! the run's records change, never on a timer.

use std::io::{Read, Seek, SeekFrom};

use super::BoardRun;
use crate::app::{EndSize, PrettyLog, output_end_keep_sgr};
use crate::envelope::Envelope;
use crate::spec::AgentKind;
use crate::store;

/// How much of a log the detail reads (its end).
const WINDOW: u64 = 64 * 1024;

/// The detail of one attempt.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Detail {
    pub run_id: String,
    pub attempt: u32,
    /// The envelope, once the attempt ended.
    pub envelope: Option<Box<Envelope>>,
    /// The last lines of its events (an agent's, rendered as its pane did) or its stdout
    /// (plain SGR colour kept: the detail draws it; nothing else).
    pub events: Vec<String>,
    /// The last lines of its stderr (plain SGR colour kept, nothing else).
    pub stderr: Vec<String>,
}

/// Reads the detail of `run`'s attempt, with at most `lines` lines of each log.
pub fn detail(run: &BoardRun, lines: usize) -> Detail {
    let p = &run.paths;
    let size = EndSize {
        lines: lines.max(1),
        bytes: WINDOW,
    };
    let tail = |t: Option<crate::app::OutputEnd>| -> Vec<String> {
        t.map(|e| e.text.lines().map(str::to_owned).collect())
            .unwrap_or_default()
    };
    let events = if run.row.agent == AgentKind::Command {
        tail(output_end_keep_sgr(&p.stdout_log(), size))
    } else {
        // Its task says which protocol its events are (Codex's app-server, with input).
        let spec = store::read_json::<crate::spec::AttemptSpec>(&p.spec())
            .ok()
            .flatten();
        let task = spec.as_ref().and_then(|s| s.task.as_ref());
        pretty_tail(run.row.agent, task, &p.events(), lines)
    };
    Detail {
        run_id: run.row.run_id.clone(),
        attempt: run.row.attempt,
        envelope: store::read_json::<Envelope>(&p.result())
            .ok()
            .flatten()
            .map(Box::new),
        events,
        stderr: tail(output_end_keep_sgr(&p.stderr_log(), size)),
    }
}

/// The last `lines` lines of an agent's events as its pane showed them: the end of the file
/// from its first whole line, through the adapter and the pane's renderer.
fn pretty_tail(
    agent: AgentKind,
    task: Option<&crate::spec::TaskSpec>,
    path: &std::path::Path,
    lines: usize,
) -> Vec<String> {
    // Never through a link: the program may have put one under the log's name.
    let Ok(mut f) = store::open_read(path) else {
        return Vec::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(WINDOW);
    let mut bytes = Vec::new();
    if f.seek(SeekFrom::Start(start)).is_err() || f.take(WINDOW).read_to_end(&mut bytes).is_err() {
        return Vec::new();
    }
    let from = if start > 0 {
        memchr::memchr(b'\n', &bytes).map_or(bytes.len(), |i| i + 1)
    } else {
        0
    };
    let mut log = PrettyLog::for_task(agent, task, false);
    let mut text = log.push(&bytes[from..]);
    text.push_str(&log.finish());
    let all: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    all[all.len().saturating_sub(lines)..]
        .iter()
        .map(|s| (*s).to_owned())
        .collect()
}
