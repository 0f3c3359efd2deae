//! Integration tests: the real binary, real tmux, a private socket and home per test.

mod harness;

mod agents;
mod attach;
mod bad_input;
mod commands;
mod docs;
mod envelope;
mod examples;
mod fanout;
mod faults;
mod filter;
mod interrupt;
mod lifecycle;
mod live_line;
mod logs_pretty;
mod mcp;
mod mcp_parents;
mod mcp_python;
mod messages;
mod mock;
mod nest;
mod pane;
mod proxy;
mod relay;
mod retry;
mod run;
mod sandbox_exec;
mod sandbox_run;
mod terminal;
mod tmux_hangs;
mod tmux_idle;
mod trust;
mod waiter;
mod waiter_watch;
mod worktree;
