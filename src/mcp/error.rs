//! Errors of the MCP server: [`ToolError`] (a call that did not do what was asked, answered
//! as a tool error in one place, [`ToolError::answer`]) and [`ServeError`] (the server
//! itself could not run, handed to the command line).
//!
//! Common pitfalls:
//! * An outcome is not an error: a run that failed is a successful call whose text says
//!   `failed`. `isError` means the call itself did not do what was asked.

use rmcp::model::{CallToolResult, ContentBlock};

use crate::app;
use crate::app::invalid::at_path;

/// Why a tool call did not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error(transparent)]
    App(#[from] app::Error),
    /// The arguments do not fit the tool's input schema.
    #[error("invalid arguments for `{tool}`: {}", args_text(.path, .source))]
    Args {
        tool: &'static str,
        /// Where in the arguments (`tasks[1].timeout`), `.` for the whole.
        path: String,
        source: serde_json::Error,
    },
    /// An argument is not valid (what the schema alone cannot say).
    #[error("{0}")]
    Invalid(String),
    /// The client cancelled a `run` call: its attempt was asked to stop.
    #[error("cancelled by the client: run {0} was asked to stop")]
    RunCancelled(String),
    /// The client cancelled a `wait` call: the runs go on.
    #[error("cancelled by the client; the runs go on")]
    WaitCancelled,
    /// A run on a host: the host could not be asked, or refused.
    #[error(transparent)]
    Host(#[from] crate::hosts::HostsError),
    /// The thread that did the call's work failed.
    #[error("the call's worker thread failed: {0}")]
    Thread(#[source] tokio::task::JoinError),
}

impl ToolError {
    /// The tool error a client gets: the message, fields spelt as the tools' arguments.
    pub fn answer(&self) -> CallToolResult {
        let text = match self {
            ToolError::App(e) => e.render(app::Spell::Field),
            other => app::Spell::Field.text(&other.to_string()),
        };
        CallToolResult::error(vec![ContentBlock::text(text)])
    }
}

/// Why the server could not serve its client.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot start the MCP server's runtime: {0}")]
    Runtime(#[source] std::io::Error),
    #[error("the MCP client did not initialize: {0}")]
    Initialize(#[source] Box<rmcp::service::ServerInitializeError>),
    #[error("the MCP server stopped: {0}")]
    Stopped(#[source] tokio::task::JoinError),
}
/// What is wrong with the arguments at `path`, then where to find them all.
fn args_text(path: &str, source: &serde_json::Error) -> String {
    let msg = source.to_string();
    let msg = app::invalid::unknown_field(&msg).unwrap_or(msg);
    let tail = "the tool's input schema lists the arguments";
    let sep = if msg.ends_with('?') { " (" } else { "; " };
    let end = if sep == " (" { ")" } else { "" };
    format!("{}{msg}{sep}{tail}{end}", at_path(path, &msg))
}
