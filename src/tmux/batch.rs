//! Many sessions through one tmux client: `new-session … \; new-session …`.
//!
//! ```text
//!  [SessionReq; n] ─► chunks that fit one client message (≤ CHUNK_BYTES of arguments)
//!                  ─► tmux -S … -f … new-session -d -s A … -P -F '#{session_name} …' -- cmd \;
//!                                    new-session -d -s B … -P -F …                    -- cmd \; …
//!                  ─► one line per created session: "A %3 4242"
//! ```
//!
//! A `tmux new-session` costs about 5 ms, most of it the client: a process, a connection, an
//! identify exchange with the server. One client for fifty sessions pays that once; the
//! single-threaded server still forks each pane, about 1 ms apiece.
//!
//! Common pitfalls:
//! * tmux refuses a client command longer than one message (16 KiB of arguments, "command
//!   too long"): chunks are cut by size, not by count.
//! * A failing command ends the sequence: the sessions before it exist (and were printed),
//!   the rest were never tried. [`Tmux::new_sessions`] returns what was printed and the
//!   error; the caller decides what to do with the others (see `app::start_many`).
//! * An argument that ends in `;` is a command separator to tmux: such a request cannot be
//!   batched, and is reported as not started so the caller takes the one-by-one path.
//! * One client makes every pane of a chunk: its deadline is [`super::batch_limit`], never
//!   less than the limit of one command. A batch cut off by it returns no panes, though some
//!   may exist: on the one-by-one path such a session is a duplicate, is killed and gets its
//!   `spawn` envelope, so no pane runs unrecorded.

use std::ffi::OsString;

use super::{Pane, TIME_LIMIT, Tmux, TmuxError, batch_limit, failed, new_session_args};

/// The arguments of one client stay under this many bytes (tmux's limit is 16 KiB, less a
/// header).
pub const CHUNK_BYTES: usize = 15 * 1024;

/// One session to create.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionReq {
    pub session: String,
    pub command: Vec<OsString>,
    pub keep: bool,
}

/// What one batch did: the panes made (by session name) and, if the sequence stopped early,
/// why. Sessions in neither were not made by this batch.
#[derive(Debug, Default)]
pub struct BatchResult {
    pub panes: Vec<(String, Pane)>,
    pub error: Option<TmuxError>,
}

/// The format each `new-session -P` prints: the name makes the line self-describing.
const BATCH_FORMAT: &str = "#{session_name} #{pane_id} #{pane_pid}";

/// Splits `reqs` into runs of consecutive requests whose arguments fit one client
/// ([`CHUNK_BYTES`]); a request too large for any chunk is a chunk of its own (tmux will
/// refuse it, and the caller's one-by-one path reports that).
pub fn chunks(reqs: &[SessionReq]) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut bytes = 0;
    for (i, r) in reqs.iter().enumerate() {
        let size = request_bytes(r);
        if i > start && bytes + size > CHUNK_BYTES {
            out.push(start..i);
            start = i;
            bytes = 0;
        }
        bytes += size;
    }
    if start < reqs.len() {
        out.push(start..reqs.len());
    }
    out
}

/// Bytes tmux counts for one request: each argument and its NUL, plus the `;` separator.
fn request_bytes(r: &SessionReq) -> usize {
    batch_args(r).iter().map(|a| a.len() + 1).sum::<usize>() + 2
}

/// `new_session_args` with a format that names the session.
fn batch_args(r: &SessionReq) -> Vec<OsString> {
    let mut a = new_session_args(&r.session, &r.command, r.keep);
    if let Some(f) = a.iter().position(|x| x == "-F") {
        a[f + 1] = BATCH_FORMAT.into();
    }
    a
}

/// Whether tmux would read one of the request's arguments as a command separator.
pub fn batchable(r: &SessionReq) -> bool {
    !r.command
        .iter()
        .any(|a| a.as_encoded_bytes().ends_with(b";"))
}

/// Parses the lines of a batch: `NAME %ID PID`.
fn parse_lines(out: &str) -> Vec<(String, Pane)> {
    out.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let name = it.next()?.to_owned();
            let pane_id = it.next()?.to_owned();
            let pane_pid = it.next()?.parse().ok()?;
            Some((name, Pane { pane_id, pane_pid }))
        })
        .collect()
}

impl Tmux {
    /// Creates the sessions of `reqs` (which must fit one client: see [`chunks`]) through one
    /// tmux client. Sessions made before a failure are returned with the error.
    pub fn new_sessions(&self, reqs: &[SessionReq]) -> BatchResult {
        let mut args: Vec<OsString> = Vec::new();
        for (i, r) in reqs.iter().enumerate() {
            if i > 0 {
                args.push(";".into());
            }
            args.extend(batch_args(r));
        }
        if args.is_empty() {
            return BatchResult::default();
        }
        if let Err(e) = self.ensure_server() {
            return BatchResult {
                panes: Vec::new(),
                error: Some(e),
            };
        }
        let limit = batch_limit(TIME_LIMIT.get(), reqs.len());
        let out = match self.output_on_server("new-session", &args, limit) {
            Ok(o) => o,
            Err(e) => {
                return BatchResult {
                    panes: Vec::new(),
                    error: Some(e),
                };
            }
        };
        let panes = parse_lines(&String::from_utf8_lossy(&out.stdout));
        let error = (!out.status.success()).then(|| failed("new-session".into(), &out));
        BatchResult { panes, error }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(name: &str, dir_len: usize) -> SessionReq {
        SessionReq {
            session: name.into(),
            command: vec![
                "/bin/subpane".into(),
                "__worker".into(),
                "x".repeat(dir_len).into(),
            ],
            keep: false,
        }
    }

    #[test]
    fn chunks_stay_under_the_client_limit_and_cover_everything() {
        let reqs: Vec<SessionReq> = (0..200).map(|i| req(&format!("s{i}"), 120)).collect();
        let cs = chunks(&reqs);
        assert!(cs.len() > 1);
        let mut next = 0;
        for c in &cs {
            assert_eq!(c.start, next);
            next = c.end;
            let bytes: usize = reqs[c.clone()].iter().map(request_bytes).sum();
            assert!(bytes <= CHUNK_BYTES, "{bytes}");
        }
        assert_eq!(next, reqs.len());
        // A request larger than a chunk stands alone.
        let big = vec![req("a", 10), req("b", 20_000), req("c", 10)];
        assert_eq!(chunks(&big), vec![0..1, 1..2, 2..3]);
        assert!(chunks(&[]).is_empty());
    }

    #[test]
    fn batch_lines_name_their_sessions() {
        let got = parse_lines("a-1 %3 4242\nb-1 %4 4243\njunk\n");
        assert_eq!(got.len(), 2);
        assert_eq!(got[1].0, "b-1");
        assert_eq!(got[1].1.pane_pid, 4243);
        let a = batch_args(&req("a-1", 3));
        assert!(a.iter().any(|x| x == BATCH_FORMAT));
    }

    #[test]
    fn a_trailing_semicolon_is_not_batched() {
        assert!(batchable(&req("a", 3)));
        let mut r = req("a", 3);
        r.command.push("x;".into());
        assert!(!batchable(&r));
    }
}
