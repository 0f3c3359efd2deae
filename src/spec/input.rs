//! What `subpane send` (and MCP `send`) asks of an attempt's worker on its input socket
//! (`input.sock`), and the worker's answer: one JSON line each way.
//!
//! ```text
//!  client ─ {"from":"cli","text":"also run the linter"} ─►  worker
//!         ◄─ {"seq":1,"queued":true,"taken":false} ──────── (given to the agent)
//!         ◄─ {"seq":1,"taken":true} ───────────────────────  (the agent took it)
//!  client ─ {"from":"mcp","interrupt":true} ─►             worker (no turn to interrupt)
//!         ◄─ {"error":"…","refused":true} ─────────────────
//! ```
//!
//! Common pitfalls:
//! * The answer comes when the agent has taken the message (its CLI said so), not when the
//!   worker wrote it: a client waits, and the worker answers every client it took, even when
//!   the agent ends first (an error then).
//! * `from` is who the client says it is (`cli` or `mcp`); only the worker says `pane`.

use serde::{Deserialize, Serialize};

/// The most bytes a request line may hold (its text, encoded as JSON).
pub const INPUT_REQUEST_LIMIT: usize = 1024 * 1024;

/// Who said something to a running agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputFrom {
    /// `subpane send`.
    Cli,
    /// The MCP `send` tool.
    Mcp,
    /// A person at the attempt's pane, on its input line.
    Pane,
}

impl InputFrom {
    pub fn as_str(self) -> &'static str {
        match self {
            InputFrom::Cli => "cli",
            InputFrom::Mcp => "mcp",
            InputFrom::Pane => "pane",
        }
    }
}

/// A request on the input socket.
///
/// ```json
/// {"from": "cli", "text": "also run the linter", "interrupt": false}
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputRequest {
    pub from: InputFrom,
    /// The user message (absent for an interrupt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Stop the agent's current turn instead (the run goes on).
    #[serde(default)]
    pub interrupt: bool,
}

/// The worker's answer.
///
/// ```json
/// {"seq": 1, "taken": true}
/// {"error": "the agent finished its last turn and its input is closed", "refused": true}
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputAnswer {
    /// The message's number in the attempt (its `subpane.input` event's `seq`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// The worker gave it to the agent (its first answer line; the second says `taken`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub queued: bool,
    /// The agent took it.
    #[serde(default)]
    pub taken: bool,
    /// Why not, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The request was refused as it is (bad input, closed input, no interrupt): exit 2.
    /// Otherwise an error is a fault (the agent ended before it took the message): exit 1.
    #[serde(default)]
    pub refused: bool,
}
