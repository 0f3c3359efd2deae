//! The tool calls: arguments in, the application layer, bounded answers out.
//!
//! Each call parses its arguments into the same types the command line builds (a bad one is
//! a tool error with the CLI's message, never a protocol error or a crash), runs the
//! application layer on a blocking thread, and answers with structured content plus a short
//! text. An outcome is not an error: a run that failed is a successful call whose text says
//! `failed`; `isError` means the call itself did not do what was asked.
//!
//! Here: the server, its dispatch and the protocol's handler. The tools live by what they
//! do: `starts.rs` (`run`, `retry`, `wait`, `fanout`: they start or wait, bounded by
//! `max_wait`), `runs.rs` (`status`, `logs`, `list`, `cancel`, `send`: they never wait for a
//! run's end) and `groups.rs` (`pause`, `resume`: a detached fan-out group's controls).

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelledNotificationParam,
    Implementation, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::ToolError;
use super::answer::{self, MAX_DOC};
use super::call::{Call, Cancels, Reporter, blocking, blocking_tool};
use super::reply::{self, bounded, finished, live, prepend, result, to_value};
use super::tools::{
    self, CancelArgs, Detail, FanoutArgs, ListArgs, LogsArgs, Mode, Paging, PauseArgs, ResumeArgs,
    RetryArgs, SendArgs, StatusArgs, WaitArgs, Waiting,
};
use crate::app::fanout::{DEFAULT_CONCURRENCY, Options, detach, new_group_id, plan_requests};
use crate::app::{
    self, AttemptStatus, CancelOutcome, OnInterrupt, Plan, RealSystem, RunOptions, RunOutcome,
    RunRequest, Started, WaitLoop, WaitMode, WaitOptions, WaitProgress,
};
use crate::envelope::CancelOrigin;
use crate::spec::{AttemptSpec, InputFrom, parse_duration, parse_positive_duration};
use crate::store::{AttemptPaths, Home};

mod groups;
mod remote;
mod runs;
mod starts;

/// The MCP server of one subpane home.
#[derive(Clone)]
pub struct Server {
    home: Arc<Home>,
    cancels: Cancels,
    /// How long a call waits at most when it does not say.
    max_wait: Duration,
    /// The starts in progress, which a closing server lets finish.
    starts: super::Starts,
}

type Answer = Result<CallToolResult, ToolError>;

impl Server {
    pub fn new(home: Home, max_wait: Duration, starts: super::Starts) -> Self {
        Self {
            home: Arc::new(home),
            cancels: Cancels::default(),
            max_wait,
            starts,
        }
    }

    async fn dispatch(&self, name: &str, args: Value, call: &Call) -> Result<Answer, McpError> {
        self.revive_groups(name, &args).await;
        Ok(match name {
            tools::RUN => self.run(args, call).await,
            tools::STATUS => self.status(args).await,
            tools::WAIT => self.wait(args, call).await,
            tools::LOGS => self.logs(args).await,
            tools::CANCEL => self.cancel(args).await,
            tools::SEND => self.send(args).await,
            tools::LIST => self.list(args).await,
            tools::FANOUT => self.fanout(args, call).await,
            tools::RETRY => self.retry(args, call).await,
            tools::PAUSE => self.pause(args).await,
            tools::RESUME => self.resume(args).await,
            other => {
                return Err(McpError::invalid_params(
                    format!(
                        "no tool `{other}`; the tools are {}",
                        tools::NAMES.join(", ")
                    ),
                    None,
                ));
            }
        })
    }

    /// A detached group whose driver died is driven again by the next call that could see
    /// it (as by the next subpane command), but `cancel` of that driver, which stops it.
    async fn revive_groups(&self, name: &str, args: &Value) {
        let home = self.home.clone();
        let cancelled = (name == tools::CANCEL)
            .then(|| args["run_id"].as_str().map(str::to_owned))
            .flatten();
        let _ = tokio::task::spawn_blocking(move || {
            for r in app::fanout::revive::revive_seen(&home, cancelled.as_deref()) {
                eprintln!("subpane mcp: {}", r.words());
            }
        })
        .await;
    }

    /// The call's `max_wait`, or the server's.
    fn max_wait(&self, given: Option<&str>) -> Result<Duration, ToolError> {
        Ok(match given {
            Some(t) => parse_positive_duration("`max_wait`", t).map_err(app::Error::from)?,
            None => self.max_wait,
        })
    }
}

/// Takes the arguments of `T` (those its schema names) out of `args` and parses them: the
/// arguments a tool takes besides its own type's (`wait`, `max_wait`, `detail`, `offset`).
fn split<T: DeserializeOwned + schemars::JsonSchema>(
    tool: &'static str,
    args: &mut Value,
) -> Result<T, ToolError> {
    let mut taken = serde_json::Map::new();
    if let Some(o) = args.as_object_mut() {
        for k in tools::names_of::<T>() {
            if let Some(v) = o.remove(&k) {
                taken.insert(k, v);
            }
        }
    }
    parse(tool, Value::Object(taken))
}

/// The arguments of `tool` as `T`, or the error a model can act on (naming the argument).
fn parse<T: DeserializeOwned>(tool: &'static str, args: Value) -> Result<T, ToolError> {
    serde_path_to_error::deserialize(args).map_err(|e| ToolError::Args {
        tool,
        path: e.path().to_string(),
        source: e.into_inner(),
    })
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("subpane", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "subpane runs subagents (pi, claude, codex) or any program as supervised, \
                 recorded runs. Every answer's structured content starts with `summary`, the \
                 line to read first. `run` answers with the outcome, or after max_wait (below \
                 60 s) with the run still going: then make the call its `next` names (`wait` \
                 with its run_id), as often as needed. For parallel work use `fanout` (its group goes on without you) or \
                 runs with wait: false, then `wait`; `pause` and `resume` hold and release a \
                 fan-out group's queued tasks. Every run is recorded under the subpane \
                 home; `status`, `logs` and `list` read it; `retry` starts the next attempt.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(tools::all()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let call = Call::new(&context, self.cancels.clone());
        let args = Value::Object(request.arguments.unwrap_or_default());
        let out = self.dispatch(&request.name, args, &call).await;
        let cancelled = call.was_cancelled();
        call.finish().await;
        let out = out?;
        if cancelled {
            eprintln!(
                "subpane mcp: `{}` call cancelled by the client",
                request.name
            );
        }
        Ok(match out {
            Ok(r) => bounded(r),
            Err(e) => e.answer(),
        }
        .into())
    }

    async fn on_cancelled(
        &self,
        notification: CancelledNotificationParam,
        _context: NotificationContext<RoleServer>,
    ) {
        if let Some(id) = &notification.request_id {
            self.cancels.cancel(id);
        }
    }
}
