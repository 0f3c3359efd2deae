//! `subpane mcp`: serve the Model Context Protocol on stdin/stdout (see [`crate::mcp`]).

use clap::Args;

use super::CliError;
use crate::store::Home;

#[derive(Debug, Args)]
#[command(after_help = "\
Tools: run (the fields of `run`'s options, plus wait and max_wait), status, wait, logs,
cancel, send, list, fanout, retry, pause and resume (a fanout group's queued tasks held and
let go). Long calls send progress notifications and answer within
--max-wait with the run still going; a client's cancel of `run` cancels the run.
stdout carries only protocol messages; diagnostics go to stderr. The server runs until the
client closes stdin; runs it started go on after it exits.

Register it with a parent agent:
  claude mcp add subpane -- subpane mcp
  codex mcp add subpane -- subpane mcp
or in a client's JSON config: {\"command\": \"subpane\", \"args\": [\"mcp\"]}.
Relative paths in a call (cwd, @FILE) are relative to the directory the server runs in.")]
pub struct McpArgs {
    /// How long a call that waits (run, retry, wait, fanout) answers at the latest unless it
    /// gives its own max_wait; the run goes on. Keep it below the client's own tool timeout
    /// (60 s for many clients)
    #[arg(long, value_name = "DUR", default_value_t = humantime::format_duration(crate::mcp::MAX_WAIT_DEFAULT).to_string())]
    pub max_wait: String,
}

pub fn mcp(home: &Home, a: McpArgs) -> Result<i32, CliError> {
    let max_wait = crate::spec::parse_positive_duration("--max-wait", &a.max_wait)?;
    use std::io::IsTerminal;
    if std::io::stdin().is_terminal() {
        eprintln!(
            "subpane mcp: serving MCP on stdin/stdout; it is meant to be started by an MCP \
             client (Ctrl-D ends it)"
        );
    }
    Ok(crate::mcp::serve(home.clone(), max_wait)?)
}
