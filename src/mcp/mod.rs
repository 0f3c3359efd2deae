//! `subpane mcp`: the Model Context Protocol over stdio, so parent agents start and watch
//! subagents through tools instead of shell lines.
//!
//! ```text
//!  client ──stdin──► LineTransport (-32700 / -32602 for lines rmcp would drop or misread)
//!                      ► rmcp (tokio, this module only) ──► Server::call_tool
//!                                                          │ arguments → app types (tools/)
//!                                                          │ app layer on a blocking thread
//!                                                          │   (app::run, wait_with, …)
//!  client ◄─stdout── result: text + structured content, bounded ◄┘
//!         ◄───────── notifications/progress (Reporter)
//!  notifications/cancelled ──► Cancels ──► Interrupter::interrupt (the call's wait loop)
//!  stdin closed ──► the starts in progress end ──► exit (the waits are abandoned)
//! ```
//!
//! The async runtime lives here and nowhere else: the worker and every other command stay
//! synchronous. stdout carries protocol messages only; diagnostics go to stderr.
//!
//! Common pitfalls:
//! * A blocking call (a wait) must never run on the runtime's threads: every call of the
//!   application layer goes through [`call::blocking`], so one long `wait` never holds up
//!   another call on the same connection.
//! * No call waits longer than its `max_wait` (below a client's 60 s by default): a client
//!   that gives up on a call cancels it, and a cancelled `run` cancels its run.
//! * When the client goes away, waits in progress are abandoned, never cancelled: the runs
//!   they watch go on, and another client (or `subpane wait`) may pick them up. A start in
//!   progress is finished first ([`Starts`]), so no run is left half made.

mod answer;
mod call;
mod error;
mod reply;
mod server;
mod tools;
mod transport;

use std::time::Duration;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rmcp::ServiceExt;

use crate::store::Home;

pub use error::{ServeError, ToolError};
pub use server::Server;
pub use tools::MAX_WAIT_DEFAULT;

/// How long a closed connection waits for starts in progress before the server exits.
const STARTS_GRACE: Duration = Duration::from_millis(1500);

/// Serves one client on stdin/stdout until it closes stdin. Returns the exit code.
pub fn serve(home: Home, max_wait: Duration) -> Result<i32, ServeError> {
    // One thread runs the protocol (it only moves messages); the work runs on the blocking
    // pool. The multi-thread scheduler would also link libm into the binary every worker
    // starts from.
    let rt = tokio::runtime::Builder::new_current_thread()
        .thread_name("subpane-mcp")
        .enable_all()
        .build()
        .map_err(ServeError::Runtime)?;
    let starts = Starts::default();
    let out = rt.block_on(async {
        let (closed_tx, mut closed) = tokio::sync::watch::channel(false);
        let (read, write) = rmcp::transport::stdio_pipes();
        let transport = transport::LineTransport::new(read, write, closed_tx);
        let service = Server::new(home, max_wait, starts.clone())
            .serve(transport)
            .await
            .map_err(|e| ServeError::Initialize(Box::new(e)))?;
        tokio::select! {
            r = service.waiting() => r.map(|_| ()).map_err(ServeError::Stopped),
            // stdin closed: rmcp would wait up to 5 s for the calls in flight. Their runs go
            // on without us; only a start in progress is waited for.
            _ = closed.wait_for(|c| *c) => {
                starts.settled(STARTS_GRACE).await;
                Ok(())
            }
        }
    });
    // Waits still in progress are abandoned; the runs they watched go on.
    rt.shutdown_timeout(Duration::from_millis(200));
    out.map(|_| 0)
}

/// The starts in progress (a run's records and pane being made), which a closing server
/// lets finish.
#[derive(Clone, Default)]
pub struct Starts(Arc<(AtomicUsize, tokio::sync::Notify)>);

/// One start in progress, until dropped.
pub struct Starting(Starts);

impl Starts {
    pub fn begin(&self) -> Starting {
        self.0.0.fetch_add(1, Ordering::SeqCst);
        Starting(self.clone())
    }

    /// Returns when no start is in progress, or after `limit`.
    async fn settled(&self, limit: Duration) {
        let _ = tokio::time::timeout(limit, async {
            loop {
                let notified = self.0.1.notified();
                if self.0.0.load(Ordering::SeqCst) == 0 {
                    return;
                }
                notified.await;
            }
        })
        .await;
    }
}

impl Drop for Starting {
    fn drop(&mut self) {
        (self.0).0.0.fetch_sub(1, Ordering::SeqCst);
        (self.0).0.1.notify_waiters();
    }
}
