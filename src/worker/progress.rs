//! `progress.json`: what the attempt has done so far (usage, the last event), written as it
//! happens for the live views (`top`, the live line of `run` and `wait`, `status`).
//!
//! ```text
//!  pane items, stderr lines ─► Tracker::item / stderr_line   (a copy into reused buffers)
//!  kept events              ─► Tracker::touch                 (usage may have changed)
//!  after a wake-up: due? ─► parser.so_far() + the last event ─► progress.json (rename, no fsync)
//!  the poll's timeout: the next write of a pending change: PROGRESS_FIRST after the first,
//!                      then at most every PROGRESS_EVERY
//! ```
//!
//! Common pitfalls:
//! * This sits on the hot path: per line it only copies into buffers it keeps; the text is
//!   made into a line and the file written at most every [`PROGRESS_EVERY`].
//! * Nothing is written before the program says something, nor in the [`PROGRESS_FIRST`]
//!   after: the start of an attempt costs nothing more, an attempt that ends by then never
//!   writes the file (its `result.json` says it all, and a write there would fall between the
//!   program's last line and its envelope), and one with no `progress.json` simply has
//!   nothing to show yet.

use std::time::Instant;

use crate::adapter::PaneItem;
use crate::envelope::{
    EventKind, LAST_EVENT_CHARS, LastEvent, PROGRESS_EVERY, PROGRESS_FIRST, PROGRESS_SCHEMA,
    Progress, SoFar,
};
use crate::fresh::now_rfc3339;
use crate::secrets::Masker;
use crate::store::{self, AttemptPaths};
use crate::term::sanitize;

/// Bytes of the latest text or line kept to make the last event from.
const KEEP: usize = 4 * LAST_EVENT_CHARS;

/// The state behind `progress.json`.
pub(crate) struct Tracker {
    /// Lines of the program's stderr count as events (a command's; an agent's stderr is
    /// mostly noise next to its events).
    stderr_events: bool,
    kind: Option<EventKind>,
    /// The end of the agent's streamed text, or the last output line, or an item's text.
    last: Vec<u8>,
    /// `last` holds streamed text that may go on.
    text_open: bool,
    dirty: bool,
    /// When the first change not yet written came (only until the first write).
    first_change: Option<Instant>,
    written_at: Option<Instant>,
    /// Since when the agent is held stopped (`subpane pause`), RFC 3339.
    stopped_since: Option<String>,
}

impl Tracker {
    pub(crate) fn new(stderr_events: bool) -> Self {
        Self {
            stderr_events,
            kind: None,
            last: Vec::new(),
            text_open: false,
            dirty: false,
            first_change: None,
            written_at: None,
            stopped_since: None,
        }
    }

    /// The agent was held stopped at `since` (RFC 3339), or goes on (`None`): for the live
    /// views, written like any change.
    pub(crate) fn held(&mut self, since: Option<String>) {
        self.stopped_since = since;
        self.mark();
    }

    fn set(&mut self, kind: EventKind, parts: &[&[u8]]) {
        self.kind = Some(kind);
        self.text_open = false;
        self.last.clear();
        for p in parts {
            let room = KEEP.saturating_sub(self.last.len());
            self.last.extend_from_slice(&p[..p.len().min(room)]);
        }
        self.mark();
    }

    /// Something changed. The clock is read once, for the first change only: this is on the
    /// way of every line.
    fn mark(&mut self) {
        if self.written_at.is_none() && self.first_change.is_none() {
            self.first_change = Some(Instant::now());
        }
        self.dirty = true;
    }

    /// Something went to the events: the agent's usage may have changed.
    pub(crate) fn touch(&mut self) {
        self.mark();
    }

    /// One item the pane shows.
    pub(crate) fn item(&mut self, item: &PaneItem) {
        match item {
            PaneItem::Raw(b) => self.set(EventKind::Output, &[b]),
            PaneItem::Text(t) => {
                if !(self.text_open && self.kind == Some(EventKind::Text)) {
                    self.set(EventKind::Text, &[]);
                    self.text_open = true;
                }
                self.last.extend_from_slice(t.as_bytes());
                if self.last.len() > 2 * KEEP {
                    keep_last_line_start(&mut self.last);
                }
                self.mark();
            }
            PaneItem::TextEnd => self.text_open = false,
            PaneItem::ToolCall { name, summary } => self.set(
                EventKind::ToolCall,
                &[name.as_bytes(), b" ", summary.as_bytes()],
            ),
            PaneItem::ToolResult { summary, is_error } => {
                let kind = if *is_error {
                    EventKind::Error
                } else {
                    EventKind::ToolResult
                };
                self.set(kind, &[summary.as_bytes()])
            }
            PaneItem::Error(e) => self.set(EventKind::Error, &[e.as_bytes()]),
            PaneItem::Info(i) => self.set(EventKind::Info, &[i.as_bytes()]),
        }
    }

    /// A line of the program's stderr.
    pub(crate) fn stderr_line(&mut self, line: &[u8]) {
        if self.stderr_events {
            self.set(EventKind::Stderr, &[line]);
        }
    }

    /// When a change waits for its write: [`PROGRESS_FIRST`] after the first change, then at
    /// most every [`PROGRESS_EVERY`].
    pub(crate) fn due(&self) -> Option<Instant> {
        if !self.dirty {
            return None;
        }
        match self.written_at {
            Some(t) => Some(t + PROGRESS_EVERY),
            None => self.first_change.map(|t| t + PROGRESS_FIRST),
        }
    }

    /// The last event as one line safe for a terminal, its secrets masked (also one its
    /// bound cuts).
    fn last_event(&self, masker: &Masker) -> Option<LastEvent> {
        let kind = self.kind?;
        let masked = masker.line(&self.last);
        let last = masked.as_deref().unwrap_or(&self.last);
        let text = if kind == EventKind::Text {
            // The last line that has something on it.
            last.split(|b| *b == b'\n')
                .rfind(|l| l.iter().any(|b| !b.is_ascii_whitespace()))
                .unwrap_or_default()
        } else {
            last
        };
        let line: Vec<u8> = text
            .iter()
            .map(|b| {
                if matches!(b, b'\n' | b'\r' | b'\t') {
                    b' '
                } else {
                    *b
                }
            })
            .collect();
        let s = String::from_utf8_lossy(&line);
        let whole = sanitize(
            crate::term::without_sgr(s.trim()).as_bytes(),
            LAST_EVENT_CHARS,
        );
        let text: String = whole.chars().take(LAST_EVENT_CHARS).collect();
        let text = if text.len() < whole.len() {
            masker.cut_end(&text).into_owned()
        } else {
            text
        };
        Some(LastEvent { kind, text })
    }

    /// Writes `progress.json` if a change is due at `now`.
    pub(crate) fn write_if_due(
        &mut self,
        now: Instant,
        paths: &AttemptPaths,
        masker: &Masker,
        so_far: impl FnOnce() -> SoFar,
    ) {
        if self.due().is_none_or(|due| due > now) {
            return;
        }
        let p = Progress {
            schema: PROGRESS_SCHEMA.to_owned(),
            updated_at: now_rfc3339(),
            so_far: so_far(),
            last_event: self.last_event(masker),
            stopped_since: self.stopped_since.clone(),
        };
        // Worth nothing once result.json exists: no fsync, and a failed write only costs
        // the live views a moment of staleness.
        let _ = store::write_json_unsynced(&paths.progress(), &p);
        self.dirty = false;
        self.written_at = Some(now);
    }
}

/// Bounds streamed text to the start of its last line that has something on it (what the
/// live views show: a long line keeps its start, and the views cut its end with `…`), at
/// most [`KEEP`] bytes of it, and what follows it (blank: a newline stands for it, so that
/// more text begins a line of its own).
fn keep_last_line_start(last: &mut Vec<u8>) {
    let end = last
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(0, |i| i + 1);
    let start = last[..end]
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(0, |i| i + 1);
    let tail: &[u8] = match &last[end..] {
        t if t.contains(&b'\n') => b"\n",
        [] => b"",
        _ => b" ",
    };
    let mut upto = end.min(start + KEEP);
    // From a character on: never inside one.
    while upto > start && upto < last.len() && (last[upto] & 0xC0) == 0x80 {
        upto -= 1;
    }
    let mut kept = last[start..upto].to_vec();
    kept.extend_from_slice(tail);
    *last = kept;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn last(t: &Tracker) -> (EventKind, String) {
        let e = t.last_event(&Masker::default()).unwrap();
        (e.kind, e.text)
    }

    #[test]
    fn the_last_event_is_the_last_line_of_text_or_the_last_item() {
        let mut t = Tracker::new(false);
        assert!(t.last_event(&Masker::default()).is_none() && t.due().is_none());
        t.item(&PaneItem::Text("Looking at the ".into()));
        // Colour is dropped (the table shows none), any other escape shown as text.
        t.item(&PaneItem::Text(
            "tests.\nThey \x1b[31mfail\x1b[0m \x1b]0;t\x07".into(),
        ));
        assert_eq!(last(&t), (EventKind::Text, "They fail ^[]0;t^G".into()));
        t.item(&PaneItem::Text("\n\n".into()));
        assert_eq!(last(&t), (EventKind::Text, "They fail ^[]0;t^G".into()));
        t.item(&PaneItem::TextEnd);
        t.item(&PaneItem::ToolCall {
            name: "bash".into(),
            summary: "cargo test".into(),
        });
        assert_eq!(last(&t), (EventKind::ToolCall, "bash cargo test".into()));
        t.item(&PaneItem::Text("Done".into()));
        assert_eq!(last(&t), (EventKind::Text, "Done".into()));
        t.stderr_line(b"warning: ignored for agents");
        assert_eq!(last(&t), (EventKind::Text, "Done".into()));
    }

    #[test]
    fn a_command_shows_its_last_line_bounded() {
        let mut t = Tracker::new(true);
        t.item(&PaneItem::Raw(vec![b'x'; 10_000]));
        let (kind, text) = last(&t);
        assert_eq!(kind, EventKind::Output);
        assert_eq!(text.chars().count(), LAST_EVENT_CHARS);
        t.stderr_line(b"oops\r");
        assert_eq!(last(&t), (EventKind::Stderr, "oops".into()));
        // Streamed text is bounded too, whatever comes.
        for _ in 0..1000 {
            t.item(&PaneItem::Text("é".repeat(100)));
        }
        assert!(t.last.len() <= 2 * KEEP);
        assert!(std::str::from_utf8(&t.last).is_ok());
    }

    /// A long streamed line keeps its start (the live line cuts its end), however it comes;
    /// the next line with something on it takes its place.
    #[test]
    fn a_long_streamed_line_keeps_its_start() {
        let mut t = Tracker::new(false);
        t.item(&PaneItem::Text("first line\nSTART ".into()));
        for _ in 0..500 {
            t.item(&PaneItem::Text("word é ".into()));
        }
        let (_, text) = last(&t);
        assert!(text.starts_with("START word é word"), "{text}");
        assert!(t.last.len() <= 2 * KEEP);
        t.item(&PaneItem::Text("\n  \n".into()));
        assert!(last(&t).1.starts_with("START word"), "{:?}", last(&t));
        for _ in 0..300 {
            t.item(&PaneItem::Text("  ".into()));
        }
        t.item(&PaneItem::Text("next".into()));
        assert_eq!(last(&t).1, "next");
        for _ in 0..300 {
            t.item(&PaneItem::Text(" more".into()));
        }
        assert!(last(&t).1.starts_with("next more more"), "{:?}", last(&t));
        assert!(std::str::from_utf8(&t.last).is_ok());
    }

    #[test]
    fn writes_are_at_most_every_period() {
        let dir = tempfile::tempdir().unwrap();
        let paths = AttemptPaths::new(dir.path().to_path_buf());
        let mut t = Tracker::new(true);
        let before = Instant::now();
        t.item(&PaneItem::Raw(b"one".to_vec()));
        let first = t.due().unwrap();
        assert!(first >= before + PROGRESS_FIRST && first <= Instant::now() + PROGRESS_FIRST);
        t.item(&PaneItem::Raw(b"one more".to_vec()));
        assert_eq!(
            t.due(),
            Some(first),
            "later changes wait for the first write"
        );
        t.write_if_due(
            first - PROGRESS_FIRST / 2,
            &paths,
            &Masker::default(),
            || unreachable!("too early"),
        );
        assert!(!paths.progress().exists());
        let t0 = first;
        t.write_if_due(t0, &paths, &Masker::default(), SoFar::default);
        assert!(
            paths.progress().exists(),
            "the first change is written then"
        );
        assert_eq!(t.due(), None);
        t.item(&PaneItem::Raw(b"two".to_vec()));
        let due = t.due().unwrap();
        assert_eq!(due, t0 + PROGRESS_EVERY);
        t.write_if_due(due - PROGRESS_EVERY / 2, &paths, &Masker::default(), || {
            unreachable!("too early")
        });
        t.write_if_due(due, &paths, &Masker::default(), SoFar::default);
        let p: Progress =
            serde_json::from_slice(&std::fs::read(paths.progress()).unwrap()).unwrap();
        assert_eq!(p.last_event.unwrap().text, "two");
    }
}
