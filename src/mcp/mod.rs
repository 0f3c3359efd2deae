//! `subpane mcp`: the Model Context Protocol over stdio, so parent agents start and watch
//! subagents through tools instead of shell lines.
//!
//! ```text
//!  client ──stdin──► rmcp (tokio, this module only) ──► Server::call_tool
//!                                                          │ parse args → RunRequest / *Args
//!                                                          │ app layer on a blocking thread
//!                                                          │   (app::run, wait_with, Fanout)
//!  client ◄─stdout── result: text + structured content ◄───┘
//!         ◄───────── notifications/progress (Reporter)
//!  notifications/cancelled ──► Cancels ──► Interrupter::interrupt (the call's wait loop)
//! ```
//!
//! The async runtime lives here and nowhere else: the worker and every other command stay
//! synchronous. stdout carries protocol messages only; diagnostics go to stderr.
//!
//! Common pitfalls:
//! * A blocking call (a wait) must never run on the runtime's threads: every call of the
//!   application layer goes through [`call::blocking`], so one long `wait` never holds up
//!   another call on the same connection.
//! * When the client goes away, waits in progress are abandoned, never cancelled: the runs
//!   they watch go on, and another client (or `subpane wait`) may pick them up.

mod answer;
mod call;
mod error;
mod reply;
mod server;
mod tools;
mod wording;

use std::time::Duration;

use rmcp::ServiceExt;

use crate::store::Home;

pub use error::{ServeError, ToolError};
pub use server::Server;

/// Serves one client on stdin/stdout until it closes the connection. Returns the exit code.
pub fn serve(home: Home) -> Result<i32, ServeError> {
    // One thread runs the protocol (it only moves messages); the work runs on the blocking
    // pool. The multi-thread scheduler would also link libm into the binary every worker
    // starts from.
    let rt = tokio::runtime::Builder::new_current_thread()
        .thread_name("subpane-mcp")
        .enable_all()
        .build()
        .map_err(ServeError::Runtime)?;
    let out = rt.block_on(async {
        let service = Server::new(home)
            .serve(rmcp::transport::stdio_pipes())
            .await
            .map_err(|e| ServeError::Initialize(Box::new(e)))?;
        service.waiting().await.map_err(ServeError::Stopped)
    });
    // Waits still in progress are abandoned; the runs they watched go on.
    rt.shutdown_timeout(Duration::from_millis(200));
    out.map(|_| 0)
}
