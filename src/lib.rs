//! subpane: run AI subagents (pi, Claude Code, Codex, or any command) as supervised,
//! recorded, attachable attempts.
//!
//! ```text
//! subpane run ──► validate ──► attempt dir + spec.json ──► tmux new-session -d …
//!                                                             │
//!                                                       worker (in pane)
//!                                                             │ agent in its own process group,
//!                                                             │ stdin = /dev/null, stdout/stderr = pipes
//!                                                             ▼
//!             events.jsonl ◄── stdout filter ◄── agent ──► stderr.log
//!             pane view    ◄── human renderer
//!                                                             │ exit / deadline / cancel
//!                                                             ▼
//!                                              worker.json ──► result.json (envelope)
//! ```
//!
//! Layers (a module imports only from the layers below it):
//!
//! * L0 pure types: [`spec`] (what to run), [`envelope`] (how it went, and every other JSON
//!   answer; builds on `spec`, never the reverse), [`exit_code`], [`term`] (text made safe
//!   for a terminal), [`secrets`] (which variables hold one, and the matcher that masks
//!   their values)
//! * L1 one resource each: [`store`] (files), [`tmux`] (the tmux binary), [`git`] (the git
//!   binary), [`command`] (the deadline every tmux and git command runs under), [`procs`]
//!   (the kernel's process table), [`sandbox`] (the kernel's namespaces, Landlock and seccomp,
//!   and the egress proxy)
//! * L2 machinery: [`adapter`] (pure parsing), [`worker`] (runs in the pane), [`supervisor`]
//!   (waits, observes, cancels)
//! * L2 [`hosts`] (the recorded hosts, and reaching one over ssh)
//! * L2½ the application layer: [`app`] (requests, plans, starting attempts, queries) that
//!   every front end shares
//! * L3 edge: [`cli`] (the only place for clap), [`mcp`] (the MCP server: the only place for
//!   tokio and rmcp) and `main.rs`

pub mod adapter;
pub mod app;
pub mod cli;
pub mod command;
pub mod envelope;
pub mod exit_code;
pub mod fresh;
pub mod git;
pub mod hosts;
pub mod mcp;
pub mod procs;
pub mod sandbox;
pub mod secrets;
pub mod spec;
pub mod store;
pub mod supervisor;
pub mod term;
pub mod tmux;
pub mod worker;
