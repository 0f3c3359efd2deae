//! `progress.json`: what a running attempt has done so far, for the live views (`top`, the
//! live line of `run` and `wait`, `status`).
//!
//! The worker rewrites it as events come ([`PROGRESS_FIRST`] after the first, then at most
//! every [`PROGRESS_EVERY`], never fsynced:
//! it is worth nothing once `result.json` exists, which has the final figures). Readers get
//! it whole or not at all (a temporary file renamed into place), and treat it as a hint: an
//! attempt without one has not said anything yet.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::Usage;

/// Schema tag of `progress.json`.
pub const PROGRESS_SCHEMA: &str = "subpane.progress/v1";

/// The shortest time between two writes of `progress.json` by one worker.
pub const PROGRESS_EVERY: Duration = Duration::from_millis(500);

/// How long after the program's first event `progress.json` is first written: an attempt
/// that ends sooner never writes one (its `result.json` has everything), one that runs on
/// shows its first event this much later.
pub const PROGRESS_FIRST: Duration = Duration::from_millis(100);

/// Usage and counts an agent reported so far (all `null` for a command, and for figures the
/// agent reports only at its end: Claude Code's cost).
///
/// ```json
/// {"usage": {"input_tokens": 1200, "output_tokens": 80, "cache_read_tokens": 0,
///            "cache_write_tokens": 0, "total_tokens": 1280},
///  "cost_usd": 0.0123, "turns": 2, "tool_calls": 3}
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SoFar {
    pub usage: Option<Usage>,
    pub cost_usd: Option<f64>,
    pub turns: Option<u64>,
    pub tool_calls: Option<u64>,
}

impl SoFar {
    /// The total tokens (the usage's own total, or the sum of its parts: input, output and
    /// cache); `None` before the agent reported any.
    pub fn total_tokens(&self) -> Option<u64> {
        let u = self.usage.as_ref()?;
        u.total_tokens.or_else(|| {
            let parts = [
                u.input_tokens,
                u.output_tokens,
                u.cache_read_tokens,
                u.cache_write_tokens,
            ];
            parts
                .iter()
                .any(Option::is_some)
                .then(|| parts.iter().flatten().sum())
        })
    }
}

/// What the last thing the program did was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A line of the agent's text.
    Text,
    ToolCall,
    ToolResult,
    /// An error the agent reported.
    Error,
    /// Anything else the agent said (a retry, a compaction).
    Info,
    /// A line of a command's stdout.
    Output,
    /// A line of a command's stderr.
    Stderr,
}

/// The last event, as one line of text made safe for a terminal (at most
/// [`LAST_EVENT_CHARS`] characters).
///
/// ```json
/// {"kind": "tool_call", "text": "bash cargo test"}
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastEvent {
    pub kind: EventKind,
    pub text: String,
}

/// The most characters of [`LastEvent::text`].
pub const LAST_EVENT_CHARS: usize = 200;

/// `progress.json`.
///
/// ```json
/// {"schema": "subpane.progress/v1", "updated_at": "2026-11-30T03:41:02.512Z",
///  "usage": {…}, "cost_usd": 0.0123, "turns": 2, "tool_calls": 3,
///  "last_event": {"kind": "text", "text": "All tests pass now."}}
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    pub schema: String,
    pub updated_at: String,
    #[serde(flatten)]
    pub so_far: SoFar,
    pub last_event: Option<LastEvent>,
    /// Since when the agent is held stopped (`subpane pause`), RFC 3339 UTC; absent while it
    /// runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_since: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_reads_back() {
        let p = Progress {
            schema: PROGRESS_SCHEMA.into(),
            updated_at: "2026-11-30T03:41:02.512Z".into(),
            so_far: SoFar {
                usage: None,
                cost_usd: Some(0.5),
                turns: Some(2),
                tool_calls: None,
            },
            last_event: Some(LastEvent {
                kind: EventKind::ToolCall,
                text: "bash ls".into(),
            }),
            stopped_since: None,
        };
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(v["cost_usd"], 0.5);
        assert_eq!(v["last_event"]["kind"], "tool_call");
        assert_eq!(serde_json::from_value::<Progress>(v).unwrap(), p);
    }
}
