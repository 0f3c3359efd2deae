//! The agent's stdout and stderr through the filter (the poll loop that reads them is
//! `poll.rs`).
//!
//! ```text
//!    stdout ─► LineSplitter ─► adapter ─► events.jsonl / stdout.log, pane   ┐ Seen: output,
//!    stderr ─► stderr.log, tail for the adapter, LineSplitter ─► pane       ┘ a turn's end,
//!    then: flush the logs, progress.json when due (progress.rs)               taken, replies
//! ```
//!
//! Common pitfalls:
//! * This is the hot path: nothing here may allocate per line or per read, and the clock is
//!   read once per wake-up, not per chunk.
//! * A read budget per wake-up keeps a flooding stdout from starving signals and deadlines.
//! * The logs are flushed every wake-up, so `logs -f` stays live within a poll.

use std::io::Read;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::process::{ChildStderr, ChildStdout};
use std::time::Instant;

use super::lines::{LineSplitter, MAX_LINE, Piece};
use super::logfile::{LogFile, Lost};
use super::pane::{Pane, Style};
use super::progress::Tracker;
use crate::adapter::{AgentReport, LineAction, StreamParser};
use crate::envelope::Budget;
use crate::envelope::FilterCounts;
use crate::secrets::{Masker, StreamMask};

/// The stderr tail the adapter sees at the end.
const STDERR_TAIL: usize = 64 * 1024;
/// Most stdout bytes read in one wake-up.
const READ_BUDGET: usize = 8 * 1024 * 1024;

/// The agent's output: its pipes, the filter, and where the lines go.
pub(crate) struct Stream {
    out: Option<ChildStdout>,
    err: Option<ChildStderr>,
    splitter: LineSplitter,
    stderr_splitter: LineSplitter,
    filter: Filter,
    stderr_log: Option<LogFile>,
    /// The last of stderr (between one and two `STDERR_TAIL`s), for the adapter's report.
    stderr_tail: Vec<u8>,
    /// The attempt's secrets; stderr is masked as it is read (before its log, its tail and
    /// the pane), stdout's logs as they are written, progress.json when it is.
    masker: std::sync::Arc<Masker>,
    stderr_mask: StreamMask,
}

/// Where stdout lines go: the adapter decides, the logs keep.
struct Filter {
    parser: Box<dyn StreamParser>,
    events: Option<LogFile>,
    stdout_log: Option<LogFile>,
    /// What `progress.json` says.
    live: Tracker,
    /// The usage budget, checked after each event the adapter read.
    budget: Budget,
    /// The first limit the usage crossed.
    budget_hit: Option<crate::envelope::BudgetHit>,
}

/// What one wake-up's reads saw.
#[derive(Default)]
pub(super) struct Seen {
    pub(super) output: bool,
    pub(super) terminal: bool,
    /// The usage crossed a limit of the budget (the first time).
    pub(super) budget: bool,
    /// What the lines said the agent took, in order.
    pub(super) taken: Vec<crate::adapter::Took>,
    /// What the lines answer on the agent's stdin (its input mode's protocol), in order.
    pub(super) replies: Vec<Vec<u8>>,
}

impl Stream {
    /// `stderr_events`: the program's stderr lines count as its last event (a command's).
    pub(crate) fn new(parser: Box<dyn StreamParser>, stderr_events: bool, budget: Budget) -> Self {
        Self {
            out: None,
            err: None,
            splitter: LineSplitter::new(MAX_LINE),
            stderr_splitter: LineSplitter::new(64 * 1024),
            filter: Filter {
                parser,
                events: None,
                stdout_log: None,
                live: Tracker::new(stderr_events),
                budget,
                budget_hit: None,
            },
            stderr_log: None,
            stderr_tail: Vec::new(),
            masker: Default::default(),
            stderr_mask: StreamMask::default(),
        }
    }

    /// Masks the attempt's secrets in everything written from now on (before the spawn).
    pub(crate) fn set_masker(&mut self, m: std::sync::Arc<Masker>) {
        for log in [&mut self.filter.events, &mut self.filter.stdout_log]
            .into_iter()
            .flatten()
        {
            log.set_masker(m.clone());
        }
        self.masker = m;
    }

    /// The log files, opened before the spawn.
    pub(crate) fn set_logs(&mut self, events: LogFile, stdout_log: LogFile, stderr_log: LogFile) {
        self.filter.events = Some(events);
        self.filter.stdout_log = Some(stdout_log);
        self.stderr_log = Some(stderr_log);
    }

    /// Takes the program's pipes, made non-blocking.
    pub(crate) fn attach(&mut self, out: Option<ChildStdout>, err: Option<ChildStderr>) {
        for fd in [
            out.as_ref().map(|o| o.as_raw_fd()),
            err.as_ref().map(|e| e.as_raw_fd()),
        ]
        .into_iter()
        .flatten()
        {
            set_nonblocking(fd);
        }
        if let Some(o) = out.as_ref() {
            // A bigger pipe lets a fast agent write ahead while we parse: fewer wake-ups and
            // context switches per megabyte (best effort; the default is 64 KiB).
            // SAFETY: fcntl on a pipe fd we own, integer argument.
            unsafe { libc::fcntl(o.as_raw_fd(), libc::F_SETPIPE_SZ, 1 << 20) };
        }
        self.out = out;
        self.err = err;
    }

    /// The program's stdout and stderr, while open, for the poll set.
    pub(super) fn pipe_fds(&self) -> (Option<BorrowedFd<'_>>, Option<BorrowedFd<'_>>) {
        use std::os::fd::AsFd;
        (
            self.out.as_ref().map(|o| o.as_fd()),
            self.err.as_ref().map(|e| e.as_fd()),
        )
    }

    /// Both pipes are closed (EOF, an error, or given up on).
    pub(crate) fn closed(&self) -> bool {
        self.out.is_none() && self.err.is_none()
    }

    /// Gives up on the pipes; what holds them open keeps its end, we drop ours.
    pub(crate) fn close(&mut self) {
        self.out = None;
        self.err = None;
    }

    /// The limit of the budget the agent's usage crossed, if it did.
    pub(crate) fn budget_hit(&self) -> Option<&crate::envelope::BudgetHit> {
        self.filter.budget_hit.as_ref()
    }

    /// The adapter's parser, which speaks the CLI's input mode too.
    pub(crate) fn parser_mut(&mut self) -> &mut dyn StreamParser {
        self.filter.parser.as_mut()
    }

    /// The adapter's report, once the agent is gone.
    pub(crate) fn report(&mut self) -> AgentReport {
        self.filter.parser.finish(&self.stderr_tail)
    }

    /// The end of the program's stderr (the last 64 KiB at least, when there was as much).
    pub(crate) fn stderr_tail(&self) -> &[u8] {
        &self.stderr_tail
    }

    /// The program's last line on stderr, to say why it failed.
    pub(crate) fn last_stderr_line(&self) -> Option<String> {
        let text = String::from_utf8_lossy(&self.stderr_tail);
        text.lines()
            .map(str::trim)
            .rfind(|l| !l.is_empty())
            .map(|l| l.chars().take(500).collect())
    }

    pub(crate) fn flush(&mut self) {
        for w in [&mut self.filter.events, &mut self.filter.stdout_log]
            .into_iter()
            .flatten()
        {
            w.flush();
        }
    }

    /// An event of subpane's own (`subpane.input`), into `events.jsonl` (masked there as the
    /// agent's are).
    pub(crate) fn own_event(&mut self, line: &[u8]) {
        write_line(&mut self.filter.events, line);
        self.filter.live.touch();
    }

    /// When a change of `progress.json` waits for its write.
    pub(crate) fn progress_due(&self) -> Option<Instant> {
        self.filter.live.due()
    }

    /// The agent was held stopped at `since`, or goes on (`None`): `progress.json` says so.
    pub(crate) fn held(&mut self, since: Option<String>) {
        self.filter.live.held(since);
    }

    /// Writes `progress.json` if a change is due at `now`.
    pub(crate) fn write_progress(&mut self, now: Instant, paths: &crate::store::AttemptPaths) {
        let f = &mut self.filter;
        f.live
            .write_if_due(now, paths, &self.masker, || f.parser.so_far());
    }

    /// The logs' sizes and digests as written (see [`crate::store::Written`]).
    pub(crate) fn written(&self) -> Vec<crate::store::Written> {
        let logs = [
            ("events.jsonl", self.filter.events.as_ref()),
            ("stdout.log", self.filter.stdout_log.as_ref()),
            ("stderr.log", self.stderr_log.as_ref()),
        ];
        logs.into_iter()
            .filter_map(|(name, log)| {
                let (bytes, sha256) = log?.written()?;
                Some(crate::store::Written {
                    name,
                    bytes,
                    sha256,
                })
            })
            .collect()
    }

    /// What failed writes lost, per log: `events.jsonl`, `stdout.log`, `stderr.log`.
    pub(crate) fn lost(&self) -> [(&'static str, Option<&Lost>); 3] {
        [
            (
                "events.jsonl",
                self.filter.events.as_ref().map(LogFile::lost),
            ),
            (
                "stdout.log",
                self.filter.stdout_log.as_ref().map(LogFile::lost),
            ),
            ("stderr.log", self.stderr_log.as_ref().map(LogFile::lost)),
        ]
    }

    /// Reads what stdout has now, up to the budget; drops the pipe at EOF.
    pub(super) fn read_stdout(
        &mut self,
        buf: &mut [u8],
        pane: &mut Pane,
        counts: &mut FilterCounts,
        seen: &mut Seen,
    ) {
        let Some(pipe) = self.out.as_mut() else {
            return;
        };
        let mut budget = READ_BUDGET;
        let eof = loop {
            match pipe.read(buf) {
                Ok(0) => break true,
                Ok(n) => {
                    seen.output = true;
                    self.splitter.feed(&buf[..n], &mut |p| {
                        self.filter.on_piece(p, pane, counts, seen);
                        seen.budget |= self.filter.check_budget();
                    });
                    budget = budget.saturating_sub(n);
                    if budget == 0 {
                        break false;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break false,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break true,
            }
        };
        if eof {
            // The last line may lack its newline.
            self.splitter.finish(&mut |p| {
                self.filter.on_piece(p, pane, counts, seen);
                seen.budget |= self.filter.check_budget();
            });
            self.out = None;
        }
    }

    /// Reads what stderr has now; drops the pipe at EOF.
    pub(super) fn read_stderr(&mut self, buf: &mut [u8], pane: &mut Pane, seen: &mut Seen) {
        let Some(pipe) = self.err.as_mut() else {
            return;
        };
        let (log, tail, lines) = (
            &mut self.stderr_log,
            &mut self.stderr_tail,
            &mut self.stderr_splitter,
        );
        let live = &mut self.filter.live;
        let mut take = |b: &[u8]| stderr_bytes(b, log, tail, lines, live, pane);
        loop {
            match pipe.read(buf) {
                Ok(0) => break,
                Ok(n) => {
                    seen.output = true;
                    self.stderr_mask.feed(&self.masker, &buf[..n], &mut take);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        // The end: what was held back as the possible start of a value was none, and the
        // last line may lack its newline.
        self.stderr_mask.finish(&mut take);
        lines.finish(&mut |p| {
            if let Piece::Line(l) = p {
                pane.stderr_line(l);
                live.stderr_line(l);
            }
        });
        self.err = None;
    }
}

/// Masked stderr bytes: to its log, its tail and the pane.
fn stderr_bytes(
    chunk: &[u8],
    log: &mut Option<LogFile>,
    tail: &mut Vec<u8>,
    lines: &mut LineSplitter,
    live: &mut Tracker,
    pane: &mut Pane,
) {
    if let Some(f) = log.as_mut() {
        f.bytes(chunk);
    }
    tail.extend_from_slice(chunk);
    if tail.len() > 2 * STDERR_TAIL {
        let cut = tail.len() - STDERR_TAIL;
        tail.drain(..cut);
    }
    lines.feed(chunk, &mut |p| {
        if let Piece::Line(l) = p {
            pane.stderr_line(l);
            live.stderr_line(l);
        }
    });
}

impl Filter {
    /// After an event: `true` when the usage crossed a limit of the budget for the first
    /// time (then [`Filter::budget_hit`] says which). No budget: one comparison.
    fn check_budget(&mut self) -> bool {
        if !self.budget.any() || self.budget_hit.is_some() {
            return false;
        }
        self.budget_hit = self.budget.crossed(&self.parser.so_far());
        self.budget_hit.is_some()
    }

    /// One stdout line through the adapter; `seen` says whether it was the agent's terminal
    /// event, and whether it said the agent took a message.
    fn on_piece(&mut self, p: Piece<'_>, pane: &mut Pane, f: &mut FilterCounts, seen: &mut Seen) {
        match p {
            Piece::Oversized { bytes } => {
                f.oversized_lines += 1;
                f.dropped_lines += 1;
                f.dropped_bytes += bytes;
                pane.line(
                    Style::Dim,
                    &format!("… a line of {bytes} bytes was dropped (over the 64 MiB bound)"),
                );
            }
            Piece::Line(line) => {
                self.parser.set_pane_room(pane.has_room());
                let r = self.parser.on_line(line);
                match &r.action {
                    LineAction::Keep => {
                        f.kept_lines += 1;
                        write_line(&mut self.events, line);
                        self.live.touch();
                    }
                    LineAction::Replace(b) => {
                        f.kept_lines += 1;
                        write_line(&mut self.events, b);
                        self.live.touch();
                    }
                    LineAction::Drop => {
                        f.dropped_lines += 1;
                        f.dropped_bytes += line.len() as u64 + 1;
                    }
                    LineAction::Plain => {
                        f.plain_lines += 1;
                        write_line(&mut self.stdout_log, line);
                    }
                    LineAction::KeepAndPlain => {
                        f.kept_lines += 1;
                        f.plain_lines += 1;
                        write_line(&mut self.events, line);
                        write_line(&mut self.stdout_log, line);
                        self.live.touch();
                    }
                }
                for item in &r.pane {
                    pane.item(item);
                    self.live.item(item);
                }
                pane.skipped_unbuilt(r.unshown);
                seen.terminal |= r.terminal || r.turn_end;
                seen.taken.extend(r.taken);
                seen.replies.extend(r.reply);
            }
        }
    }
}

fn write_line(w: &mut Option<LogFile>, line: &[u8]) {
    if let Some(w) = w.as_mut() {
        w.line(line);
    }
}

pub(super) fn set_nonblocking(fd: i32) {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    // SAFETY: fd is a pipe we own for the duration of the loop.
    let b = unsafe { BorrowedFd::borrow_raw(fd) };
    if let Ok(flags) = fcntl(b, FcntlArg::F_GETFL) {
        let _ = fcntl(
            b,
            FcntlArg::F_SETFL(OFlag::from_bits_truncate(flags) | OFlag::O_NONBLOCK),
        );
    }
}
