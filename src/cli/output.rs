//! How answers are shown to people (summaries of finished and running attempts), and the
//! "worst" exit code of several runs. Text that came from the program is made safe for the
//! terminal first; the end of a command's stdout is [`app::ends`], the policy the MCP
//! answers follow too, with a terminal's size ([`EndSize::TERMINAL`]).

use std::path::Path;

use crate::app::{self, EndSize};
use crate::envelope::{Envelope, StatusDoc};
use crate::exit_code;
use crate::store::AttemptPaths;

/// A few lines for a human about a finished attempt.
pub fn human_envelope(env: &Envelope, paths: &AttemptPaths) -> String {
    let stdout_end = app::ends(env, paths, EndSize::TERMINAL).stdout;
    human_summary(env, paths.dir(), stdout_end)
}

/// [`human_envelope`] of an attempt in `dir`, with the end of its stdout already read (by
/// whoever can read it: for a run from a sandbox, its worker).
pub fn human_summary(env: &Envelope, dir: &Path, stdout_end: Option<app::OutputEnd>) -> String {
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
    } else if let Some(end) = stdout_end {
        // A command's own words: the end of its stdout.
        s.push('\n');
        if end.cut {
            s.push_str(&format!(
                "(last {} lines of stdout; `subpane logs {}` has all)\n",
                end.text.lines().count(),
                env.run_id
            ));
        }
        for l in end.text.lines() {
            // Made safe already; a line longer than a terminal is wide is cut here.
            s.push_str(&crate::term::sanitize(l.as_bytes(), LINE_CHARS));
            s.push('\n');
        }
    }
    s
}

/// The most characters of one line of a command's stdout in a summary.
const LINE_CHARS: usize = 1000;

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
