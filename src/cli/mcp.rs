//! `subpane mcp`: serve the Model Context Protocol on stdin/stdout (see [`crate::mcp`]).

use clap::Args;

use super::CliError;
use crate::store::Home;

#[derive(Debug, Args)]
#[command(after_help = "\
Tools: run (the fields of `run`'s options, plus wait), status, wait, logs, cancel, list,
fanout. Long calls send progress notifications; a client's cancel of `run` cancels the run.
stdout carries only protocol messages; diagnostics go to stderr. The server runs until the
client closes stdin; runs it started go on after it exits.

Register it with a parent agent:
  claude mcp add subpane -- subpane mcp
  codex mcp add subpane -- subpane mcp
or in a client's JSON config: {\"command\": \"subpane\", \"args\": [\"mcp\"]}.
Relative paths in a call (cwd, @FILE) are relative to the directory the server runs in.")]
pub struct McpArgs {}

pub fn mcp(home: &Home, _a: McpArgs) -> Result<i32, CliError> {
    use std::io::IsTerminal;
    if std::io::stdin().is_terminal() {
        eprintln!(
            "subpane mcp: serving MCP on stdin/stdout; it is meant to be started by an MCP \
             client (Ctrl-D ends it)"
        );
    }
    Ok(crate::mcp::serve(home.clone())?)
}
