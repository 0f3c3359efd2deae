//! One of the attempt's logs (`events.jsonl`, `stdout.log`, `stderr.log`): written in
//! batches, and every byte a failed write loses is counted, never passed off as kept.
//!
//! ```text
//!  line(bytes) ─► buffer (+1 pending line) ─► flush (each wake-up, or when the buffer is full)
//!                                               ├ ok:    pending = 0
//!                                               └ error: lost_lines += pending, lost_bytes += len,
//!                                                        first error kept for the envelope
//! ```
//!
//! Common pitfalls:
//! * A write that fails half-way leaves part of the batch in the file: all of the batch's
//!   lines count as lost (none of them can be trusted whole).
//! * A disk that fills up may empty again: later writes are still tried.
//! * A line bigger than the buffer goes straight to the file (after what is buffered), so a
//!   64 MiB line is never copied.
//! * The SHA-256 of what was written is kept as it is written, so the envelope's artifacts
//!   need not read the file again ([`LogFile::written`]); after a failed write the file's
//!   content is not known, and the digest is given up (the file is read at the end instead).

use std::fs::File;
use std::io::{IoSlice, Write};

use std::sync::Arc;

use super::digest::RunningHash;
use crate::secrets::Masker;

/// What a log lost to failed writes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Lost {
    pub(crate) lines: u64,
    pub(crate) bytes: u64,
    /// The first error, in the kernel's words.
    pub(crate) error: Option<String>,
}

pub(crate) struct LogFile {
    file: File,
    buf: Vec<u8>,
    cap: usize,
    /// Lines in `buf`, not yet written.
    pending: u64,
    lost: Lost,
    /// The digest of every byte written, while every write succeeded.
    hash: Option<RunningHash>,
    written: u64,
    /// The attempt's secrets, masked in each line before it is written (one scan of a
    /// batch; only a batch that holds one is masked line by line).
    masker: Option<Arc<Masker>>,
}

impl LogFile {
    pub(crate) fn new(file: File, cap: usize) -> Self {
        Self {
            file,
            buf: Vec::with_capacity(cap),
            cap,
            pending: 0,
            lost: Lost::default(),
            hash: Some(RunningHash::new()),
            written: 0,
            masker: None,
        }
    }

    /// Masks the attempt's secrets in every line from now on.
    pub(crate) fn set_masker(&mut self, m: Arc<Masker>) {
        self.masker = (!m.is_empty()).then_some(m);
    }

    /// Bytes written and their SHA-256 (hex), when every write succeeded: what the file holds
    /// if nothing else wrote to it (the caller compares the size on disk).
    pub(crate) fn written(&self) -> Option<(u64, String)> {
        Some((self.written, self.hash.as_ref()?.hex()))
    }

    /// Appends one line and its newline.
    pub(crate) fn line(&mut self, line: &[u8]) {
        if line.len() >= self.cap {
            self.flush();
            let masked = self.masker.as_ref().and_then(|m| m.line(line));
            let line = masked.as_deref().unwrap_or(line);
            let r = write_all_vectored(&mut self.file, &[line, b"\n"]);
            self.hashed(&r, &[line, b"\n"]);
            self.account(r, 1, line.len() as u64 + 1);
            return;
        }
        self.buf.extend_from_slice(line);
        self.buf.push(b'\n');
        self.pending += 1;
        if self.buf.len() >= self.cap {
            self.flush();
        }
    }

    /// Writes `bytes` as they are (stderr, which is kept as a byte stream).
    pub(crate) fn bytes(&mut self, bytes: &[u8]) {
        self.flush();
        let r = self.file.write_all(bytes);
        self.hashed(&r, &[bytes]);
        self.account(r, 0, bytes.len() as u64);
    }

    /// Writes what is buffered.
    pub(crate) fn flush(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        if let Some(m) = self.masker.as_ref().filter(|m| m.any(&self.buf)) {
            let mut masked = Vec::with_capacity(self.buf.len());
            for l in self
                .buf
                .strip_suffix(b"\n")
                .unwrap_or(&self.buf)
                .split(|b| *b == b'\n')
            {
                match m.line(l) {
                    Some(x) => masked.extend_from_slice(&x),
                    None => masked.extend_from_slice(l),
                }
                masked.push(b'\n');
            }
            self.buf = masked;
        }
        let r = self.file.write_all(&self.buf);
        let (lines, bytes) = (self.pending, self.buf.len() as u64);
        match (&r, self.hash.as_mut()) {
            (Ok(()), Some(h)) => {
                self.written += bytes;
                // Takes the buffer (a big log's goes to the hashing thread) and leaves an
                // empty one.
                h.written_buf(&mut self.buf, self.cap);
            }
            _ => self.hash = None,
        }
        self.account(r, lines, bytes);
        self.buf.clear();
        self.pending = 0;
    }

    /// What failed writes lost so far.
    pub(crate) fn lost(&self) -> &Lost {
        &self.lost
    }

    fn hashed(&mut self, r: &std::io::Result<()>, parts: &[&[u8]]) {
        match (r, self.hash.as_mut()) {
            (Ok(()), Some(h)) => {
                for p in parts {
                    h.written(p);
                    self.written += p.len() as u64;
                }
            }
            _ => self.hash = None,
        }
    }

    fn account(&mut self, r: std::io::Result<()>, lines: u64, bytes: u64) {
        if let Err(e) = r {
            self.lost.lines += lines;
            self.lost.bytes += bytes;
            self.lost.error.get_or_insert_with(|| e.to_string());
        }
    }
}

fn write_all_vectored(f: &mut File, parts: &[&[u8]]) -> std::io::Result<()> {
    let mut slices: Vec<IoSlice<'_>> = parts.iter().map(|p| IoSlice::new(p)).collect();
    let mut slices = slices.as_mut_slice();
    while !slices.is_empty() {
        match f.write_vectored(slices) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut slices, n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_lost_to_a_full_disk_are_counted_and_later_writes_still_tried() {
        // /dev/full fails every write with ENOSPC.
        let full = File::options().write(true).open("/dev/full").unwrap();
        let mut log = LogFile::new(full, 16);
        log.line(b"one");
        log.line(b"two");
        log.flush();
        log.line(&[b'x'; 40]);
        assert_eq!(log.lost().lines, 3);
        assert_eq!(log.lost().bytes, 4 + 4 + 41);
        assert!(log.lost().error.as_deref().unwrap().contains("space"));
        assert_eq!(
            log.written(),
            None,
            "a failed write leaves the content unknown"
        );

        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("ok.log");
        let mut log = LogFile::new(File::create(&p).unwrap(), 8);
        log.line(b"a");
        log.line(&[b'b'; 20]);
        log.bytes(b"raw");
        log.line(b"c");
        log.flush();
        assert_eq!(log.lost(), &Lost::default());
        let want = format!("a\n{}\nrawc\n", "b".repeat(20));
        assert_eq!(std::fs::read_to_string(&p).unwrap(), want);
        assert_eq!(
            log.written(),
            Some(crate::store::sha256_file(&p).unwrap()),
            "the digest kept while writing is the file's"
        );
    }
}
