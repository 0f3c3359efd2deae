//! Integration tests: the real binary, real tmux, a private socket and home per test.

mod harness;

mod agents;
mod bad_input;
mod commands;
mod envelope;
mod escapes;
mod examples;
mod fanout;
mod faults;
mod filter;
mod interrupt;
mod lifecycle;
mod mcp;
mod mcp_parents;
mod mcp_python;
mod mock;
mod nest;
mod pane;
mod proxy;
mod relay;
mod retry;
mod run;
mod sandbox_exec;
mod sandbox_run;
mod tmux_hangs;
mod trust;
mod waiter;
mod worktree;
