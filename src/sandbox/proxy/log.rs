//! `network.jsonl`: one JSON line per decision of the egress proxy.
//!
//! Common pitfalls:
//! * Connection threads write at once: each line is one `write(2)` on a file opened with
//!   `O_APPEND`, so lines never interleave (no lock, no buffered writer that could split a
//!   line across two writes).
//! * The worker may hash `network.jsonl` for the envelope once the proxy is stopped: after
//!   [`DecisionLog::close`] nothing more is appended.
//! * A log that cannot be written does not change a decision: the policy is enforced by the
//!   proxy, the log only reports it. A failed write is counted and otherwise ignored.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::secrets::Masker;

pub use crate::envelope::{NetworkEntry, Verdict};

/// The open `network.jsonl`.
#[derive(Debug)]
pub struct DecisionLog {
    file: File,
    /// The attempt's secrets: a URL's userinfo or query can hold one.
    masker: Arc<Masker>,
    failed: AtomicU64,
    closed: AtomicBool,
}

impl DecisionLog {
    pub fn open(path: &Path, masker: Arc<Masker>) -> io::Result<Self> {
        let file = OpenOptions::new().append(true).create(true).open(path)?;
        Ok(DecisionLog {
            file,
            masker,
            failed: AtomicU64::new(0),
            closed: AtomicBool::new(false),
        })
    }

    /// Appends one entry as one line (nothing once [`close`](Self::close)d).
    pub fn append(&self, entry: &NetworkEntry) {
        if self.closed.load(Ordering::Acquire) {
            return;
        }
        // A secret in a refused URL (its userinfo, its query) is masked in the entry's
        // strings, as they are (a reason quotes the URL escaped as JSON escapes it).
        let masked = (!self.masker.is_empty())
            .then(|| serde_json::to_value(entry).ok())
            .flatten()
            .map(|mut v| {
                self.masker.mask_value(&mut v);
                v
            });
        let line = match &masked {
            Some(v) => serde_json::to_vec(v),
            None => serde_json::to_vec(entry),
        };
        let mut line = match line {
            Ok(l) => l,
            Err(_) => return self.note_failure(),
        };
        line.push(b'\n');
        // One write: on a local file system an O_APPEND write of a few hundred bytes is
        // whole; a short write (a full disk) counts as a failure rather than being finished
        // by a second write that another thread's line could precede.
        match (&self.file).write(&line) {
            Ok(n) if n == line.len() => {}
            _ => self.note_failure(),
        }
    }

    /// Ends the log: the file is final once the proxy has stopped, even if a connection
    /// thread was still deciding.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }

    fn note_failure(&self) {
        self.failed.fetch_add(1, Ordering::Relaxed);
    }

    /// How many entries could not be written.
    pub fn failures(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_whole_lines_of_json_even_from_many_threads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("network.jsonl");
        let log = DecisionLog::open(&path, Default::default()).unwrap();
        let entry = |i: u16| NetworkEntry {
            at: "2026-11-30T03:39:43.512Z".into(),
            method: Some("CONNECT".into()),
            host: Some(format!("h{i}.example.com\0")),
            port: Some(i),
            decision: Verdict::Deny,
            reason: Some("not listed".into()),
            address: None,
        };
        std::thread::scope(|s| {
            for t in 0..4u16 {
                let log = &log;
                s.spawn(move || (0..200).for_each(|i| log.append(&entry(t * 1000 + i))));
            }
        });
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<NetworkEntry> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 800);
        assert_eq!(log.failures(), 0);
        let first = text.lines().next().unwrap();
        assert!(first.contains(r#""decision":"deny""#) && first.contains(r#"\u0000"#));
    }
}
