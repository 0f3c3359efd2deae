//! One tool call's links to its client: progress notifications out, cancellation in, and
//! the blocking work of the application layer run off the async threads.
//!
//! ```text
//!  blocking thread (app::wait_with, app::run, Fanout::run)   async side
//!    Reporter::say(msg) ──unbounded channel──► forwarder ──notifications/progress──► client
//!    WaitLoop … settled ◄── Interrupter::interrupt ◄── on_cancel action ◄── notifications/cancelled
//! ```
//!
//! Common pitfalls:
//! * Progress must increase with every notification: it is the seconds since the call began,
//!   nudged up when two messages come within the clock's resolution.
//! * A cancelled call is told by `notifications/cancelled` (see [`Cancels`]), not by the
//!   request's cancellation token: that token also fires when the client goes away, and a
//!   client that goes away must not cancel runs that another client may still wait for.
//! * The forwarder is drained before the answer goes out, so no progress follows a result.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rmcp::RoleServer;
use rmcp::model::{ProgressNotificationParam, RequestId};
use rmcp::service::{Peer, RequestContext};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::ToolError;

type Action = Box<dyn FnOnce() + Send>;

/// What to do when the client cancels a call, by request id. A call cancelled before it set
/// its action (while it was still starting a run) has it run as soon as it is set.
#[derive(Clone, Default)]
pub struct Cancels(Arc<Mutex<CancelState>>);

#[derive(Default)]
pub struct CancelState {
    /// Calls in progress.
    open: HashSet<RequestId>,
    actions: HashMap<RequestId, Action>,
    /// Calls in progress cancelled before they set an action.
    early: HashSet<RequestId>,
}

impl Cancels {
    fn state(&self) -> std::sync::MutexGuard<'_, CancelState> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set(&self, id: RequestId, action: Action) {
        let mut st = self.state();
        if st.early.remove(&id) {
            drop(st);
            action();
        } else {
            st.actions.insert(id, action);
        }
    }

    fn open(&self, id: &RequestId) {
        self.state().open.insert(id.clone());
    }

    fn clear(&self, id: &RequestId) {
        let mut st = self.state();
        st.open.remove(id);
        st.actions.remove(id);
        st.early.remove(id);
    }

    /// The client cancelled request `id`: run its action, or keep the cancel for it.
    pub fn cancel(&self, id: &RequestId) {
        let mut st = self.state();
        match st.actions.remove(id) {
            Some(a) => {
                drop(st);
                a();
            }
            // A cancel of a call already answered (or never made) is ignored.
            None if st.open.contains(id) => {
                st.early.insert(id.clone());
            }
            None => {}
        }
    }
}

/// Sends progress messages from any thread; does nothing when the client asked for none.
#[derive(Clone)]
pub struct Reporter(Option<mpsc::UnboundedSender<String>>);

impl Reporter {
    pub fn say(&self, message: impl Into<String>) {
        if let Some(tx) = &self.0 {
            let _ = tx.send(message.into());
        }
    }
}

/// A tool call in progress.
pub struct Call {
    id: RequestId,
    cancels: Cancels,
    cancelled: Arc<AtomicBool>,
    reporter: Reporter,
    forwarder: Option<JoinHandle<()>>,
}

impl Call {
    pub fn new(ctx: &RequestContext<RoleServer>, cancels: Cancels) -> Self {
        let (reporter, forwarder) = match ctx.meta.get_progress_token() {
            Some(token) => {
                let (tx, rx) = mpsc::unbounded_channel();
                let h = tokio::spawn(forward(ctx.peer.clone(), token, rx));
                (Reporter(Some(tx)), Some(h))
            }
            None => (Reporter(None), None),
        };
        cancels.open(&ctx.id);
        Self {
            id: ctx.id.clone(),
            cancels,
            cancelled: Arc::new(AtomicBool::new(false)),
            reporter,
            forwarder,
        }
    }

    pub fn reporter(&self) -> Reporter {
        self.reporter.clone()
    }

    pub fn was_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }

    /// When the client cancels this call: set the flag, then run `action` (once).
    pub fn on_cancel(&self, action: impl FnOnce() + Send + 'static) {
        let flag = self.cancelled.clone();
        self.cancels.set(
            self.id.clone(),
            Box::new(move || {
                flag.store(true, Ordering::SeqCst);
                action();
            }),
        );
    }

    /// The call is answered: no more cancelling, and every progress message is sent.
    pub async fn finish(mut self) {
        self.cancels.clear(&self.id);
        self.reporter = Reporter(None);
        if let Some(h) = self.forwarder.take() {
            let _ = h.await;
        }
    }
}

/// Sends each message as a progress notification, in order, until every sender is gone.
async fn forward(
    peer: Peer<RoleServer>,
    token: rmcp::model::ProgressToken,
    mut rx: mpsc::UnboundedReceiver<String>,
) {
    let t0 = Instant::now();
    let mut last = 0.0f64;
    while let Some(msg) = rx.recv().await {
        let mut p = (t0.elapsed().as_secs_f64() * 1000.0).round() / 1000.0;
        if p <= last {
            p = last + 0.001;
        }
        last = p;
        let n = ProgressNotificationParam::new(token.clone(), p).with_message(msg);
        if peer.notify_progress(n).await.is_err() {
            // The client is gone; the rest would go nowhere.
            break;
        }
    }
}

/// Runs blocking work of the application layer on tokio's blocking threads.
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, crate::app::Error> + Send + 'static,
) -> Result<T, ToolError> {
    blocking_tool(move || Ok(f()?)).await
}

/// [`blocking`] of work whose errors are the tools' own (a run on a host).
pub async fn blocking_tool<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(ToolError::Thread)?
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    fn counter() -> (Arc<AtomicU32>, impl Fn() -> Action) {
        let n = Arc::new(AtomicU32::new(0));
        let m = n.clone();
        (n, move || {
            let m = m.clone();
            Box::new(move || {
                m.fetch_add(1, Ordering::SeqCst);
            }) as Action
        })
    }

    #[test]
    fn a_cancel_runs_the_action_once() {
        let c = Cancels::default();
        let id = RequestId::Number(1);
        let (n, action) = counter();
        c.open(&id);
        c.set(id.clone(), action());
        c.cancel(&id);
        c.cancel(&id);
        assert_eq!(n.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_cancel_before_the_action_is_kept_for_it() {
        let c = Cancels::default();
        let id = RequestId::Number(2);
        let (n, action) = counter();
        c.open(&id);
        c.cancel(&id);
        assert_eq!(n.load(Ordering::SeqCst), 0);
        c.set(id.clone(), action());
        assert_eq!(n.load(Ordering::SeqCst), 1, "run as soon as it is set");
    }

    #[test]
    fn a_cancel_of_an_answered_call_does_not_reach_a_later_one_with_its_id() {
        let c = Cancels::default();
        let id = RequestId::Number(3);
        let (n, action) = counter();
        c.open(&id);
        c.clear(&id);
        c.cancel(&id); // late: the call was answered
        c.open(&id); // the client reuses the id
        c.set(id.clone(), action());
        assert_eq!(n.load(Ordering::SeqCst), 0);
        c.cancel(&id);
        assert_eq!(n.load(Ordering::SeqCst), 1);
    }
}
