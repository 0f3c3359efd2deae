//! How answers are shown to people (summaries of finished and running attempts), and the
//! "worst" exit code of several runs. Text that came from the program is made safe for the
//! terminal first.

use crate::envelope::{Envelope, StatusDoc};
use crate::exit_code;

/// A few lines for a human about a finished attempt.
pub fn human_envelope(env: &Envelope, dir: &std::path::Path) -> String {
    let mut s = String::new();
    let how = env.how_it_ended();
    let kind = env
        .failure_kind
        .map(|k| format!(", {}", k.as_str()))
        .unwrap_or_default();
    s.push_str(&format!(
        "run       {} (attempt {})\n",
        env.run_id, env.attempt
    ));
    s.push_str(&format!(
        "status    {}{kind} ({how})\n",
        env.status.as_str()
    ));
    if let Some(d) = env.duration_ms {
        s.push_str(&format!("duration  {:.3}s\n", d as f64 / 1000.0));
    }
    if env.lingered {
        s.push_str("lingered  killed after its final event\n");
    }
    if env.cleanup.output_held_open || env.cleanup.killed_descendants > 0 {
        s.push_str(&format!(
            "cleanup   {} leftover process(es) killed{}\n",
            env.cleanup.killed_descendants,
            if env.cleanup.output_held_open {
                "; they held the output open"
            } else {
                ""
            }
        ));
    }
    for e in env.output.errors.iter().take(5) {
        s.push_str(&format!(
            "error     {}\n",
            crate::term::sanitize(e.as_bytes(), 300)
        ));
    }
    s.push_str(&format!("files     {}\n", dir.display()));
    if let Some(t) = &env.output.final_text {
        s.push('\n');
        s.push_str(&crate::term::sanitize_lines(t.as_bytes()));
        s.push('\n');
    } else if env.agent == crate::spec::AgentKind::Command {
        // A command's own words: the end of its stdout, made safe for the terminal.
        let lines = tail_lines(&dir.join("stdout.log"), TAIL_LINES);
        if !lines.is_empty() {
            s.push('\n');
            if lines.len() == TAIL_LINES {
                s.push_str(&format!(
                    "(last {TAIL_LINES} lines of stdout; `subpane logs {}` has all)\n",
                    env.run_id
                ));
            }
            for l in lines {
                s.push_str(&crate::term::sanitize(&l, 1000));
                s.push('\n');
            }
        }
    }
    s
}

/// How many stdout lines of a command a human summary shows.
const TAIL_LINES: usize = 20;

/// The last `n` lines of a file, reading at most its last 64 KiB.
fn tail_lines(path: &std::path::Path, n: usize) -> Vec<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = crate::store::open_read(path) else {
        return Vec::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(64 * 1024);
    let mut buf = Vec::new();
    if f.seek(SeekFrom::Start(start)).is_err() || f.read_to_end(&mut buf).is_err() {
        return Vec::new();
    }
    let mut lines: Vec<Vec<u8>> = buf.split(|b| *b == b'\n').map(<[u8]>::to_vec).collect();
    if lines.last().is_some_and(Vec::is_empty) {
        lines.pop();
    }
    if start > 0 && !lines.is_empty() {
        lines.remove(0); // probably cut in the middle
    }
    let skip = lines.len().saturating_sub(n);
    lines.split_off(skip)
}

/// One line for a human about a running attempt.
pub fn human_running(doc: &StatusDoc) -> String {
    format!(
        "run       {} (attempt {})\nstatus    {}\nstarted   {}\nattach    subpane attach {}\nfiles     {}\n",
        doc.run_id,
        doc.attempt,
        doc.status.as_str(),
        doc.started_at.as_deref().unwrap_or("-"),
        doc.run_id,
        doc.attempt_dir.display()
    )
}

/// The worst of several exit codes: failed (1) > timed out (124) > cancelled (130) >
/// still running (3) > completed (0).
pub fn worst_code(codes: impl IntoIterator<Item = i32>) -> i32 {
    exit_code::worst(codes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worst_code_orders_outcomes() {
        assert_eq!(worst_code([0, 130, 124]), 124);
        assert_eq!(worst_code([0, 1, 124]), 1);
        assert_eq!(worst_code([0, 0]), 0);
        assert_eq!(worst_code([0, 3]), 3);
        assert_eq!(worst_code([]), 0);
    }
}
