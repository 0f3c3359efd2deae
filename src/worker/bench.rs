//! `subpane __bench-filter`: the parts of the filter's work timed alone, in memory, so that
//! scripts/bench can say what stops the whole run (its row is a ratio to a pipe floor).
//!
//! ```text
//!  FILE ─► lines (LineSplitter) ─┬ check: every line read as JSON (from_line), nothing kept
//!                                ├ parser: the adapter, the pane full (as under a flood)
//!                                ├ digest: SHA-256 of the bytes the parser keeps
//!                                └ mask: 20 secrets' scan of the bytes kept (none in the stream)
//! ```
//!
//! Each figure is the best of three passes over the stream in memory.

use std::time::Instant;

use sha2::{Digest, Sha256};

use super::lines::{LineSplitter, MAX_LINE, Piece};
use crate::adapter::{LineAction, adapter_for};
use crate::spec::AgentKind;

/// The figures, in milliseconds; `kept_bytes` what the parser writes to events.jsonl.
#[derive(Debug, serde::Serialize)]
pub struct FilterParts {
    pub bytes: u64,
    pub kept_bytes: u64,
    pub check_ms: f64,
    pub parser_ms: f64,
    pub digest_ms: f64,
    /// The masker of 20 secrets over what the parser keeps, batch by batch as the logs write
    /// it (none of them in the stream).
    pub mask_ms: f64,
}

fn best_of_three(mut f: impl FnMut()) -> f64 {
    (0..3)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1000.0
        })
        .fold(f64::MAX, f64::min)
}

fn each_line(stream: &[u8], mut f: impl FnMut(&[u8])) {
    let mut s = LineSplitter::new(MAX_LINE);
    let mut on = |p: Piece<'_>| {
        if let Piece::Line(l) = p {
            f(l)
        }
    };
    // The worker reads the pipe in chunks of this size.
    for chunk in stream.chunks(256 * 1024) {
        s.feed(chunk, &mut on);
    }
    s.finish(&mut on);
}

/// Times the parts of `kind`'s filter on `stream`.
pub fn filter_parts(kind: AgentKind, stream: &[u8]) -> FilterParts {
    let check_ms = best_of_three(|| {
        each_line(stream, |l| {
            std::hint::black_box(crate::adapter::is_json_line(l));
        })
    });
    let parse = |keep: &mut dyn FnMut(&[u8])| {
        let mut p = adapter_for(kind).parser();
        p.set_pane_room(false);
        each_line(stream, |l| match p.on_line(l).action {
            LineAction::Keep | LineAction::KeepAndPlain => keep(l),
            LineAction::Replace(b) => keep(&b),
            LineAction::Drop | LineAction::Plain => {}
        });
    };
    let parser_ms = best_of_three(|| {
        parse(&mut |l| {
            std::hint::black_box(l);
        })
    });
    let mut kept = Vec::new();
    parse(&mut |l| {
        kept.extend_from_slice(l);
        kept.push(b'\n');
    });
    let digest_ms = best_of_three(|| {
        std::hint::black_box(Sha256::digest(&kept));
    });
    // As the worker masks: each batch of what the logs keep scanned once for any of 20
    // secrets (none is in the stream), each 32 characters of base64url as scripts/bench's
    // are: random bytes, as a real key's are (a shared prefix would scan faster).
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let values: Vec<String> = (0..20)
        .map(|_| {
            (0..32)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
                        [(x % 64) as usize] as char
                })
                .collect()
        })
        .collect();
    let masker = crate::secrets::Masker::new(values.iter().map(|v| v.as_bytes()));
    let mask_ms = best_of_three(|| {
        for batch in kept.chunks(128 * 1024) {
            std::hint::black_box(masker.any(batch));
        }
    });
    FilterParts {
        mask_ms,
        bytes: stream.len() as u64,
        kept_bytes: kept.len() as u64,
        check_ms,
        parser_ms,
        digest_ms,
    }
}
