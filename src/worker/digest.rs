//! The SHA-256 of a log, computed as it is written. A big log is hashed on a helper thread,
//! so the digest costs the filter only a hand-over of each written buffer.
//!
//! ```text
//!  LogFile::flush ─ write(buf) ─► RunningHash::written_buf(buf) ─┬ small log: hash here
//!                                                                └ past 4 MiB: buf ─► helper thread ─► Sha256
//!                                      a fresh (recycled) buffer ◄──────────────────────┘
//!  a line bigger than the buffer, stderr's chunks: sync with the helper, then hash here
//! ```
//!
//! Common pitfalls:
//! * Order is the digest: every byte goes through the one state, and the filter hashes on its
//!   own only after the helper has taken everything it was sent ([`RunningHash::sync`]).
//! * Memory stays bounded: one buffer waits for the helper (a full queue makes the filter
//!   wait) and one spare comes back; every buffer kept is touched memory of the worker, so
//!   the queues are as short as keeps both threads busy. A huge line is never copied to be
//!   handed over.
//! * No thread for a small attempt: the helper starts only once a log passed 4 MiB.

use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex, PoisonError};

use sha2::{Digest, Sha256};

/// A log this big gets the helper thread.
const THREAD_AFTER: u64 = 4 * 1024 * 1024;

pub(crate) struct RunningHash {
    state: Arc<Mutex<Sha256>>,
    helper: Option<Helper>,
    /// Bytes hashed or handed over.
    bytes: u64,
    /// The helper could not be started: hash here.
    no_helper: bool,
}

struct Helper {
    /// Written buffers; an empty one asks for an acknowledgement.
    to: SyncSender<Vec<u8>>,
    /// Buffers the helper is done with, to refill.
    spare: Receiver<Vec<u8>>,
    acks: Receiver<()>,
}

impl RunningHash {
    pub(crate) fn new() -> Self {
        Self {
            state: Arc::new(Mutex::new(Sha256::new())),
            helper: None,
            bytes: 0,
            no_helper: false,
        }
    }

    /// Hashes what `buf` holds (already written) and leaves `buf` empty to be refilled, with
    /// at least `cap` of capacity.
    pub(crate) fn written_buf(&mut self, buf: &mut Vec<u8>, cap: usize) {
        self.bytes += buf.len() as u64;
        if self.helper.is_none() && !self.no_helper && self.bytes > THREAD_AFTER {
            self.helper = self.start();
            self.no_helper = self.helper.is_none();
        }
        let Some(h) = &self.helper else {
            self.lock().update(&buf[..]);
            buf.clear();
            return;
        };
        let fresh = h
            .spare
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(cap));
        let full = std::mem::replace(buf, fresh);
        if let Err(e) = h.to.send(full) {
            // The helper is gone (it cannot be, short of a panic): hash here from now on.
            self.helper = None;
            self.no_helper = true;
            self.lock().update(&e.0);
        }
    }

    /// Hashes `bytes` (already written) here, after what the helper was given.
    pub(crate) fn written(&mut self, bytes: &[u8]) {
        self.bytes += bytes.len() as u64;
        self.sync();
        self.lock().update(bytes);
    }

    /// The hex digest of everything so far.
    pub(crate) fn hex(&self) -> String {
        self.sync();
        let d = self.lock().clone().finalize();
        d.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Waits until the helper has hashed everything it was sent.
    fn sync(&self) {
        if let Some(h) = &self.helper
            && h.to.send(Vec::new()).is_ok()
        {
            let _ = h.acks.recv();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Sha256> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn start(&self) -> Option<Helper> {
        let (to, from) = sync_channel::<Vec<u8>>(1);
        let (spare_tx, spare) = sync_channel::<Vec<u8>>(1);
        let (ack_tx, acks) = sync_channel::<()>(1);
        let state = Arc::clone(&self.state);
        std::thread::Builder::new()
            .name("log-sha256".into())
            .stack_size(64 * 1024)
            .spawn(move || {
                for mut buf in from {
                    if buf.is_empty() {
                        let _ = ack_tx.send(());
                        continue;
                    }
                    state
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .update(&buf);
                    buf.clear();
                    let _ = spare_tx.try_send(buf);
                }
            })
            .ok()?;
        Some(Helper { to, spare, acks })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same bytes give the same digest whether hashed here or by the helper, in any mix of
    /// buffers handed over and bytes hashed here.
    #[test]
    fn the_helper_thread_hashes_in_order() {
        let chunk: Vec<u8> = (0..=255u8).cycle().take(300 * 1024).collect();
        let mut want = Sha256::new();
        let mut h = RunningHash::new();
        for i in 0..40 {
            let mut buf = chunk.clone();
            buf[0] = i as u8;
            want.update(&buf);
            if i % 7 == 3 {
                h.written(&buf);
            } else {
                h.written_buf(&mut buf, chunk.len());
                assert!(buf.is_empty());
            }
        }
        assert!(h.helper.is_some(), "12 MB should start the helper");
        let want: String = want.finalize().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(h.hex(), want);
        assert_eq!(h.bytes, 40 * chunk.len() as u64);
    }
}
