//! What a finished attempt ended on, for `top`'s LAST EVENT: its last output line (a
//! command), its final text (an agent), or its error. Read once from its files when the run
//! is loaded or ends: `progress.json` is written at most every so often, and not at all by
//! an attempt that ends quickly, so its last event is what the attempt did a while before
//! the end (an agent's session line, or nothing at all).
//!
//! ```text
//!  completed command ─► stdout's last line ─► stderr's last line
//!  completed agent   ─► the final text's last line
//!  failed command    ─► stderr's last line ─► the envelope's error ─► stdout's last line
//!  failed agent      ─► the envelope's error ─► stderr's last line ─► the final text
//!  cancelled         ─► as completed, then the envelope's error
//! ```

use crate::app::EndSize;
use crate::envelope::{Envelope, EventKind, LAST_EVENT_CHARS, LastEvent, Status as S};
use crate::spec::AgentKind;
use crate::store::AttemptPaths;

/// How much of a log's end is read for its last line.
const END: EndSize = EndSize {
    lines: 8,
    bytes: 4096,
};

/// The last event of the finished attempt `env` (see the module docs).
pub fn final_event(env: &Envelope, paths: &AttemptPaths) -> Option<LastEvent> {
    let event = |kind, text: Option<String>| text.map(|text| LastEvent { kind, text });
    let stdout = || event(EventKind::Output, last_line_of(&paths.stdout_log()));
    let stderr = || event(EventKind::Stderr, last_line_of(&paths.stderr_log()));
    let error = || {
        event(
            EventKind::Error,
            env.output.errors.last().and_then(|e| last_line(e)),
        )
    };
    let answer = || {
        event(
            EventKind::Text,
            env.output.final_text.as_deref().and_then(last_line),
        )
    };
    let command = env.agent == AgentKind::Command;
    match (env.status, command) {
        (S::Completed, true) => stdout().or_else(stderr),
        (S::Completed, false) => answer(),
        (S::Failed, true) => stderr().or_else(error).or_else(stdout),
        (S::Failed, false) => error().or_else(stderr).or_else(answer),
        (S::Cancelled, true) => stdout().or_else(stderr).or_else(error),
        (S::Cancelled, false) => answer().or_else(error),
    }
}

/// The last line with something on it at the end of a log, made safe.
fn last_line_of(path: &std::path::Path) -> Option<String> {
    // Colour kept by the reading, then dropped: the table shows none, never as `^[[31m`.
    let end = crate::app::output_end_keep_sgr(path, END)?;
    last_line(&crate::term::without_sgr(&end.text))
}

/// The last line of `text` with something on it, as one line of at most
/// [`LAST_EVENT_CHARS`] characters (`text` is already safe to show, or subpane's own).
fn last_line(text: &str) -> Option<String> {
    let line = text.lines().rev().find(|l| !l.trim().is_empty())?;
    let one = crate::term::sanitize(line.trim().replace('\t', " ").as_bytes(), LAST_EVENT_CHARS);
    Some(one)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(agent: AgentKind, status: S) -> Envelope {
        let mut e: Envelope = serde_json::from_value(serde_json::json!({
            "schema": "subpane.result/v1", "run_id": "r1", "attempt": 1, "agent": "pi",
            "argv": ["sh", "-c", "the argv"], "cwd": "/w", "labels": {},
            "correlation_id": null, "status": "completed", "failure_kind": null,
            "exit_code": 0, "signal": null, "signals_sent": [],
            "started_at": null, "finished_at": null, "duration_ms": 1500,
            "terminal_event": null, "lingered": false,
            "output": {"final_text": null, "session_id": "s-1", "model": null,
                       "usage": null, "cost_usd": null, "turns": null, "tool_calls": null,
                       "errors": [], "context_length_exceeded": false},
            "filter": {"kept_lines": 0, "dropped_lines": 0, "dropped_bytes": 0,
                       "oversized_lines": 0, "plain_lines": 0},
            "cleanup": {"output_held_open": false, "killed_descendants": 0},
            "tmux": {"socket": null, "session": null, "pane_id": null},
            "sandbox": {"enabled": false}, "artifacts": []
        }))
        .unwrap();
        e.agent = agent;
        e.status = status;
        e
    }

    fn attempt(stdout: &str, stderr: &str) -> (tempfile::TempDir, AttemptPaths) {
        let d = tempfile::tempdir().unwrap();
        let p = AttemptPaths::new(d.path().to_path_buf());
        std::fs::write(p.stdout_log(), stdout).unwrap();
        std::fs::write(p.stderr_log(), stderr).unwrap();
        (d, p)
    }

    fn text(e: Option<LastEvent>) -> Option<(EventKind, String)> {
        e.map(|e| (e.kind, e.text))
    }

    #[test]
    fn a_command_ends_on_its_last_output_line_or_its_error() {
        let (_d, p) = attempt("{\"a\": 1}\nlast line\n\n", "warning: x\n\tat the end\n");
        let done = env(AgentKind::Command, S::Completed);
        assert_eq!(
            text(final_event(&done, &p)),
            Some((EventKind::Output, "last line".into()))
        );
        let mut failed = env(AgentKind::Command, S::Failed);
        failed.output.errors.push("stderr: at the end".into());
        assert_eq!(
            text(final_event(&failed, &p)),
            Some((EventKind::Stderr, "at the end".into()))
        );
        // Nothing on stderr: the envelope's error.
        let (_d, quiet) = attempt("", "");
        assert_eq!(
            text(final_event(&failed, &quiet)),
            Some((EventKind::Error, "stderr: at the end".into()))
        );
        assert_eq!(text(final_event(&done, &quiet)), None);
        // A coloured line shows no colour, and not its codes as text; other escapes do.
        let (_d, coloured) = attempt("\x1b[32mok\x1b[0m 3 passed \x1b[2J\n", "");
        assert_eq!(
            text(final_event(&done, &coloured)),
            Some((EventKind::Output, "ok 3 passed ^[[2J".into()))
        );
    }

    #[test]
    fn an_agent_ends_on_its_final_text_or_its_error() {
        let (_d, p) = attempt("", "some noise\n");
        let mut done = env(AgentKind::Claude, S::Completed);
        done.output.final_text = Some("All done.\n\nThree files changed.\n".into());
        assert_eq!(
            text(final_event(&done, &p)),
            Some((EventKind::Text, "Three files changed.".into()))
        );
        let mut failed = env(AgentKind::Claude, S::Failed);
        failed
            .output
            .errors
            .push("rate limited\n(try later)".into());
        assert_eq!(
            text(final_event(&failed, &p)),
            Some((EventKind::Error, "(try later)".into()))
        );
    }

    #[test]
    fn what_is_shown_is_one_safe_line() {
        let (_d, p) = attempt("a\x1b]0;t\x07\tb\r\n", "");
        let done = env(AgentKind::Command, S::Completed);
        let e = final_event(&done, &p).unwrap();
        assert!(!e.text.chars().any(|c| c.is_control()), "{:?}", e.text);
        assert_eq!(e.text, "a^[]0;t^G b^M");
    }

    /// Through the board: a finished agent whose `progress.json` last said its session line
    /// shows its final text; one that ended without a word shows none (not its argv).
    #[test]
    fn the_board_shows_what_a_finished_run_ended_on_not_its_stale_progress() {
        use crate::envelope::{PROGRESS_SCHEMA, Progress, RunRow, SoFar};
        let d = tempfile::tempdir().unwrap();
        let home = crate::store::Home::at(d.path().to_path_buf());
        let id = crate::spec::RunId::parse("ask").unwrap();
        let p = home.attempt(&id, 1);
        std::fs::create_dir_all(p.dir()).unwrap();
        let mut e = env(AgentKind::Claude, S::Completed);
        e.output.final_text = Some("The answer is 42.".into());
        crate::store::write_json_atomic(&p.result(), &e).unwrap();
        let stale = Progress {
            schema: PROGRESS_SCHEMA.into(),
            updated_at: String::new(),
            so_far: SoFar::default(),
            last_event: Some(LastEvent {
                kind: EventKind::Info,
                text: "claude session s-1".into(),
            }),
            stopped_since: None,
        };
        crate::store::write_json_atomic(&p.progress(), &stale).unwrap();
        let row: RunRow = serde_json::from_value(serde_json::json!({
            "run_id": "ask", "attempt": 1, "agent": "claude", "status": "completed",
            "failure_kind": null, "exit_code": 0, "created_at": "2026-11-30T12:00:00Z",
            "started_at": null, "finished_at": null, "duration_ms": 10, "labels": {},
            "correlation_id": null, "group": null, "parent_run": null, "depth": 0,
            "what": "claude -p the argv", "problem": null
        }))
        .unwrap();
        let run = super::super::BoardRun::new(&home, row.clone());
        assert_eq!(
            run.last_event().map(|e| e.text.as_str()),
            Some("The answer is 42.")
        );
        // Said nothing: no last event at all (top shows `(no output)`), not the progress.
        e.output.final_text = None;
        crate::store::write_json_atomic(&p.result(), &e).unwrap();
        let run = super::super::BoardRun::new(&home, row);
        assert!(run.has_ended() && run.last_event().is_none(), "{run:?}");
    }
}
