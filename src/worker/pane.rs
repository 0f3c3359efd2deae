//! The human view in the pane.
//!
//! Everything that came from the program is sanitised first: control characters (ESC, BEL,
//! C1 controls such as CSI, DEL) are shown as visible text, so a program cannot retitle, clear
//! or reprogram the viewer's terminal. The pane's fd is non-blocking and writes go through a
//! bounded buffer: when the pane falls behind, whole lines are skipped and a note says how
//! many. Events are never affected, since they are written before the pane sees anything.
//!
//! The pane also takes at most [`WINDOW_BUDGET`] bytes per [`WINDOW`]: far more than anyone
//! reads, and a bound on what rendering costs the filter when an agent prints hundreds of
//! megabytes a second (lines past it are skipped and counted the same way; a parser that
//! sees no room drops its deltas unread).

use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::sync::Arc;

use nix::fcntl::{FcntlArg, OFlag, fcntl};

use super::render::Render;
use crate::adapter::PaneItem;
use crate::secrets::{Masker, StreamMask};

/// Pending bytes kept for a slow pane.
const PENDING_CAP: usize = 256 * 1024;
/// Bytes the pane takes per window (1.3 MB/s: pages of text per second).
const WINDOW_BUDGET: usize = 128 * 1024;
const WINDOW: std::time::Duration = std::time::Duration::from_millis(100);

pub use super::render::Style;

/// The pane writer.
pub struct Pane {
    fd: RawFd,
    pending: Vec<u8>,
    skipped: u64,
    pub total_skipped: u64,
    dead: bool,
    /// Items into text (the renderer `logs --pretty` uses too).
    render: Render,
    /// The pane's input is in non-canonical mode (see `raw_input`).
    input_raw: bool,
    /// What the pane may still take in this window, and when the window ends.
    budget: usize,
    window_end: Option<std::time::Instant>,
    /// The attempt's secrets: every item is masked before it is rendered; streamed text
    /// (a value can come in two deltas) through `text_mask`.
    masker: Option<Arc<Masker>>,
    text_mask: StreamMask,
    /// The input line at the bottom (an attempt with input, in a terminal): the terminal's
    /// rows, the last of which it takes (output scrolls above it). `None`: no input line.
    input_rows: Option<u16>,
}

impl Pane {
    /// Writes to fd 1 (the pane's terminal), made non-blocking.
    pub fn stdout(color: bool) -> Self {
        let fd = std::io::stdout().as_raw_fd();
        // SAFETY: fd 1 stays open for the life of the process.
        let bfd = unsafe { BorrowedFd::borrow_raw(fd) };
        if let Ok(flags) = fcntl(bfd, FcntlArg::F_GETFL) {
            let _ = fcntl(
                bfd,
                FcntlArg::F_SETFL(OFlag::from_bits_truncate(flags) | OFlag::O_NONBLOCK),
            );
        }
        let input_raw = Self::raw_input();
        Self {
            fd,
            pending: Vec::new(),
            skipped: 0,
            total_skipped: 0,
            dead: false,
            render: Render::new(color, "\r\n").keeping_sgr(color),
            input_raw,
            budget: WINDOW_BUDGET,
            window_end: None,
            masker: None,
            text_mask: StreamMask::default(),
            input_rows: None,
        }
    }

    /// Gives the pane an input line at its bottom: output scrolls in the rows above it. Only
    /// in a terminal of at least 4 rows; call before the first line.
    pub fn enable_input(&mut self) {
        if !self.input_raw {
            return;
        }
        self.input_rows = Some(0);
        self.resized();
    }

    /// The terminal changed its size (SIGWINCH): the scroll region follows.
    pub fn resized(&mut self) {
        if self.input_rows.is_none() || self.dead {
            return;
        }
        let rows = rows_of(self.fd).filter(|r| *r >= 4);
        let Some(r) = rows else {
            // Too small for a line of its own: the whole terminal scrolls again.
            self.input_rows = Some(0);
            self.control("\x1b7\x1b[r\x1b8");
            return;
        };
        self.input_rows = Some(r);
        // DECSTBM moves the cursor home: keep it where the output is.
        self.control(&format!("\x1b7\x1b[1;{}r\x1b8", r - 1));
    }

    /// Whether the pane reads keys for its input line.
    pub fn takes_keys(&self) -> bool {
        self.input_rows.is_some() && !self.dead
    }

    /// Draws the input line: what is typed (`text`, already masked), or that the input is
    /// closed.
    pub fn draw_input(&mut self, text: &str, open: bool) {
        let Some(rows) = self.input_rows.filter(|r| *r > 0) else {
            return;
        };
        let cols = cols_of(self.fd).unwrap_or(80).max(20) as usize;
        let shown = if open {
            let typed = crate::term::sanitize(text.as_bytes(), usize::MAX);
            // The end of a long line: where the cursor is.
            let room = cols.saturating_sub(10);
            let chars: Vec<char> = typed.chars().collect();
            let tail: String = chars[chars.len().saturating_sub(room)..].iter().collect();
            format!("\x1b[1msend ▸\x1b[0m {tail}")
        } else {
            "\x1b[2m(input closed)\x1b[0m".to_owned()
        };
        self.control(&format!("\x1b7\x1b[{rows};1H\x1b[2K{shown}\x1b8"));
    }

    /// Bytes of our own for the terminal (cursor and region moves): never skipped.
    fn control(&mut self, s: &str) {
        if !self.dead {
            self.pending.extend_from_slice(s.as_bytes());
        }
    }

    /// Masks the attempt's secrets in what the pane shows from now on.
    pub fn set_masker(&mut self, m: Arc<Masker>) {
        self.masker = (!m.is_empty()).then_some(m);
    }

    /// Once per wake-up: a new window when the last one is over.
    pub fn tick(&mut self, now: std::time::Instant) {
        if self.window_end.is_none_or(|end| now >= end) {
            self.budget = WINDOW_BUDGET;
            self.window_end = Some(now + WINDOW);
        }
    }

    pub fn fd(&self) -> RawFd {
        self.fd
    }

    /// Whether there is something to write when the fd becomes writable.
    pub fn wants_write(&self) -> bool {
        !self.dead && !self.pending.is_empty()
    }

    /// Whether the pane is gone (hang-up).
    pub fn is_dead(&self) -> bool {
        self.dead
    }

    /// The pane is gone (hang-up): stop writing.
    pub fn set_dead(&mut self) {
        self.dead = true;
        self.pending.clear();
    }

    /// Whether there is room for another line; lines that do not fit are skipped.
    pub fn has_room(&self) -> bool {
        !self.dead && self.pending.len() < PENDING_CAP && self.budget > 0
    }

    fn push_raw(&mut self, s: &str) {
        if self.dead {
            return;
        }
        if self.pending.len() + s.len() > PENDING_CAP {
            self.skip();
            return;
        }
        if self.skipped > 0 && self.pending.len() < PENDING_CAP / 2 {
            let note = format!(
                "\x1b[2m… {} lines skipped (the pane fell behind; events.jsonl has everything)\x1b[0m\r\n",
                self.skipped
            );
            self.pending.extend_from_slice(note.as_bytes());
            self.skipped = 0;
        }
        self.pending.extend_from_slice(s.as_bytes());
        self.budget = self.budget.saturating_sub(s.len());
    }

    /// Whether a line fits now; a line that does not is counted as skipped.
    fn take_room(&mut self) -> bool {
        let room = self.has_room();
        if !room {
            self.skip();
        }
        room
    }

    /// Lines an adapter did not build because there was no room: skipped all the same.
    pub fn skipped_unbuilt(&mut self, n: u64) {
        self.skipped += n;
        self.total_skipped += n;
    }

    fn skip(&mut self) {
        self.skipped += 1;
        self.total_skipped += 1;
    }

    /// A whole line in a style. `text` must already be sanitised (or be our own).
    pub fn line(&mut self, style: Style, text: &str) {
        if !self.take_room() {
            return;
        }
        let mut s = String::with_capacity(text.len() + 16);
        self.render.line(style, text, &mut s);
        self.push_raw(&s);
    }

    /// One stdout line of the program or an adapter item, its secrets masked.
    pub fn item(&mut self, item: &PaneItem) {
        let Some(m) = self.masker.clone() else {
            return self.show(item);
        };
        // A full pane skips the item before any masking costs the filter (as `show` would).
        if !matches!(item, PaneItem::TextEnd) && !self.has_room() {
            // Text held back is never shown now: what follows it starts afresh.
            self.text_mask = StreamMask::default();
            self.skip();
            return;
        }
        let mut text = Vec::new();
        match item {
            PaneItem::Text(t) => {
                self.text_mask
                    .feed(&m, t.as_bytes(), &mut |b| text.extend_from_slice(b));
            }
            _ => self.text_mask.finish(&mut |b| text.extend_from_slice(b)),
        }
        if !text.is_empty() {
            self.show(&PaneItem::Text(String::from_utf8_lossy(&text).into_owned()));
        }
        let t = |s: &String| m.text(s).into_owned();
        match item {
            PaneItem::Text(_) => {}
            PaneItem::TextEnd => self.show(item),
            PaneItem::Raw(b) => match m.line(b) {
                Some(masked) => self.show(&PaneItem::Raw(masked)),
                None => self.show(item),
            },
            PaneItem::ToolCall { name, summary } => self.show(&PaneItem::ToolCall {
                name: t(name),
                summary: t(summary),
            }),
            PaneItem::ToolResult { summary, is_error } => self.show(&PaneItem::ToolResult {
                summary: t(summary),
                is_error: *is_error,
            }),
            PaneItem::Error(e) => self.show(&PaneItem::Error(t(e))),
            PaneItem::Info(i) => self.show(&PaneItem::Info(t(i))),
        }
    }

    /// An item as it is.
    fn show(&mut self, item: &PaneItem) {
        // Checked before rendering, so a full pane costs nothing; the end of a text block
        // takes no room of its own.
        if !matches!(item, PaneItem::TextEnd) && !self.take_room() {
            return;
        }
        let mut s = String::new();
        self.render.item(item, &mut s);
        self.push_raw(&s);
    }

    /// A line the program wrote to stderr.
    pub fn stderr_line(&mut self, b: &[u8]) {
        if self.take_room() {
            let mut s = String::new();
            self.render.stderr_line(b, &mut s);
            self.push_raw(&s);
        }
    }

    /// Writes what the terminal takes now; keeps the rest.
    pub fn flush(&mut self) {
        while !self.dead && !self.pending.is_empty() {
            // SAFETY: fd 1 is open; the slice is valid.
            let n =
                unsafe { libc::write(self.fd, self.pending.as_ptr().cast(), self.pending.len()) };
            if n > 0 {
                self.pending.drain(..n as usize);
                continue;
            }
            let err = std::io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EAGAIN) => return,
                Some(libc::EINTR) => continue,
                _ => {
                    self.set_dead();
                    return;
                }
            }
        }
    }

    /// Before the final lines: writes what the terminal takes now, and drops the rest (counted
    /// as skipped), so the status line is never stuck behind a backlog.
    pub fn make_room_for_final(&mut self) {
        // The input line goes: the whole terminal scrolls again for the end.
        if let Some(rows) = self.input_rows.take().filter(|r| *r > 0) {
            self.control(&format!("\x1b7\x1b[{rows};1H\x1b[2K\x1b[r\x1b8"));
        }
        // Streamed text held back as the possible start of a secret: it was not one.
        let mut held = Vec::new();
        self.text_mask.finish(&mut |b| held.extend_from_slice(b));
        if !held.is_empty() {
            self.show(&PaneItem::Text(String::from_utf8_lossy(&held).into_owned()));
        }
        // The end is always shown, whatever the window allows.
        self.budget = usize::MAX;
        self.window_end = None;
        self.flush();
        if self.dead || self.pending.is_empty() {
            return;
        }
        let dropped = self
            .pending
            .windows(2)
            .filter(|w| w == b"\r\n")
            .count()
            .max(1) as u64;
        self.pending.clear();
        // The terminal may be mid-line: start the note on a line of its own.
        self.pending.extend_from_slice(b"\r\n");
        self.skipped += dropped;
        self.total_skipped += dropped;
        self.render.forget_open_text();
    }

    /// Final lines: waits up to `bound` for the terminal to take them, then gives up.
    pub fn flush_final(&mut self, bound: std::time::Duration) {
        if self.skipped > 0 && !self.dead {
            let note = format!(
                "\x1b[2m… {} lines skipped (the pane fell behind; events.jsonl has everything)\x1b[0m\r\n",
                self.skipped
            );
            self.pending.extend_from_slice(note.as_bytes());
            self.skipped = 0;
        }
        let deadline = std::time::Instant::now() + bound;
        while self.wants_write() && std::time::Instant::now() < deadline {
            self.flush();
            if self.wants_write() {
                let left = deadline
                    .saturating_duration_since(std::time::Instant::now())
                    .as_millis()
                    .min(100) as i32;
                let mut fds = [libc::pollfd {
                    fd: self.fd,
                    events: libc::POLLOUT,
                    revents: 0,
                }];
                // SAFETY: one valid pollfd.
                unsafe { libc::poll(fds.as_mut_ptr(), 1, left.max(1)) };
            }
        }
        // Written is not shown: tmux drops what it has not read and parsed when the pane's
        // process exits. Ask the terminal where its cursor is (DSR 6): tmux answers after it
        // has parsed everything before the question, so the answer means all was shown.
        // Bounded: result.json is already on disk and nothing waits on this.
        if !self.dead && !self.wants_write() && self.input_raw {
            self.pending.extend_from_slice(b"\x1b[6n");
            while self.wants_write() && std::time::Instant::now() < deadline {
                self.flush();
                if self.wants_write() {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            }
            if !self.wants_write() {
                wait_for_cursor_report(deadline);
            }
        }
    }
}

/// The terminal's rows and columns (TIOCGWINSZ), when it says.
fn winsize(fd: RawFd) -> Option<libc::winsize> {
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ fills the struct we pass.
    let r = unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut ws) };
    (r == 0 && ws.ws_row > 0).then_some(ws)
}

fn rows_of(fd: RawFd) -> Option<u16> {
    winsize(fd).map(|w| w.ws_row)
}

fn cols_of(fd: RawFd) -> Option<u16> {
    winsize(fd).map(|w| w.ws_col)
}

/// Reads the pane's input until a cursor position report (`ESC [ row ; col R`) arrives or
/// the deadline passes. Keys a person typed in the meantime are read and dropped.
fn wait_for_cursor_report(deadline: std::time::Instant) {
    let mut seen: Vec<u8> = Vec::new();
    loop {
        let left = deadline
            .saturating_duration_since(std::time::Instant::now())
            .as_millis();
        if left == 0 {
            return;
        }
        let mut fds = [libc::pollfd {
            fd: 0,
            events: libc::POLLIN,
            revents: 0,
        }];
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 1, left.min(i32::MAX as u128) as i32) };
        if n <= 0 || fds[0].revents & libc::POLLIN == 0 {
            if n < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return;
        }
        let mut buf = [0u8; 256];
        // SAFETY: reading into a stack buffer from fd 0.
        let r = unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) };
        if r <= 0 {
            return;
        }
        seen.extend_from_slice(&buf[..r as usize]);
        if is_cursor_report(&seen) {
            return;
        }
        if seen.len() > 4096 {
            seen.drain(..seen.len() - 64);
        }
    }
}

/// Whether `bytes` hold `ESC [ digits ; digits R`.
fn is_cursor_report(bytes: &[u8]) -> bool {
    bytes
        .windows(2)
        .enumerate()
        .filter(|(_, w)| w == b"\x1b[")
        .any(|(i, _)| {
            let rest = &bytes[i + 2..];
            let end = rest
                .iter()
                .position(|b| !(b.is_ascii_digit() || *b == b';'));
            matches!(end, Some(e) if e > 0 && rest[e] == b'R' && rest[..e].contains(&b';'))
        })
}

impl Pane {
    /// Puts the pane's terminal input in non-canonical, no-echo mode (signals stay on, so
    /// Ctrl-C in the pane still reaches the worker), so the cursor report can be read and is
    /// never echoed. Returns whether it worked.
    fn raw_input() -> bool {
        use nix::sys::termios::{LocalFlags, SetArg, tcgetattr, tcsetattr};
        let stdin = std::io::stdin();
        let Ok(mut t) = tcgetattr(&stdin) else {
            return false;
        };
        t.local_flags.remove(LocalFlags::ICANON | LocalFlags::ECHO);
        t.control_chars[nix::sys::termios::SpecialCharacterIndices::VMIN as usize] = 1;
        t.control_chars[nix::sys::termios::SpecialCharacterIndices::VTIME as usize] = 0;
        tcsetattr(&stdin, SetArg::TCSANOW, &t).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_reports_are_recognised() {
        assert!(is_cursor_report(b"\x1b[12;1R"));
        assert!(is_cursor_report(b"typed keys\x1b[3;40R"));
        assert!(!is_cursor_report(b"\x1b[12R"));
        assert!(!is_cursor_report(b"\x1b[A"));
        assert!(!is_cursor_report(b"R"));
    }
}
