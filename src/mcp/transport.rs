//! The stdio transport: one JSON-RPC message per line, and the errors JSON-RPC says a
//! server owes a client for a line it cannot take.
//!
//! ```text
//!  stdin line ─► not JSON ─────────────────────────────► -32700 parse error (id null)
//!             ─► tools/call whose `params` or `arguments`
//!                is not an object ──────────────────────► -32602 invalid params (its id)
//!             ─► a request of the wrong shape ──────────► -32602 (a known method) / -32600
//!             ─► JSON that is no message ({}, [1,2], 7) ─► -32600 invalid request (id null)
//!             ─► a message ──────────────────────────────► rmcp
//!  EOF ─► `closed` is told (serve ends at once; see mod.rs) and rmcp sees the end
//! ```
//!
//! rmcp's own stdio transport ignores a line that is not JSON (so a client that wrote one
//! waits for an answer that never comes) and answers `arguments: []` with "method not
//! found": both told a client nothing it could act on.
//!
//! Common pitfalls:
//! * Writes come from many tasks at once (answers, progress, errors of this transport): every
//!   message is one `write_all` of a whole line under one lock, so lines never interleave.

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::ErrorCode;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{Mutex, watch};

/// The longest line read whole; a longer one is answered -32600 and skipped.
const MAX_LINE: usize = 16 * 1024 * 1024;

/// Methods whose requests rmcp knows: a request of one of them that does not parse has
/// parameters of the wrong shape.
const KNOWN: &[&str] = &[
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
];

pub struct LineTransport<R, W> {
    read: BufReader<R>,
    write: Arc<Mutex<W>>,
    line: Vec<u8>,
    closed: watch::Sender<bool>,
}

impl<R: AsyncRead + Unpin + Send, W: AsyncWrite + Unpin + Send + 'static> LineTransport<R, W> {
    /// A transport over `read` and `write`; `closed` becomes true when `read` ends.
    pub fn new(read: R, write: W, closed: watch::Sender<bool>) -> Self {
        Self {
            read: BufReader::new(read),
            write: Arc::new(Mutex::new(write)),
            line: Vec::new(),
            closed,
        }
    }
}

async fn write_line<W: AsyncWrite + Unpin>(w: &Mutex<W>, mut line: String) -> std::io::Result<()> {
    line.push('\n');
    let mut w = w.lock().await;
    w.write_all(line.as_bytes()).await?;
    w.flush().await
}

fn error(id: Value, code: ErrorCode, message: String) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code.0, "message": message}})
}

/// What a line that rmcp would not take deserves, if anything: `None` for a line rmcp takes.
pub fn refusal(line: &[u8]) -> Option<Value> {
    let v: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => {
            return Some(error(
                Value::Null,
                ErrorCode::PARSE_ERROR,
                format!(
                    "parse error: the line is not JSON ({e}); send one JSON-RPC message per line"
                ),
            ));
        }
    };
    let method = v.get("method").and_then(Value::as_str);
    let id = v.get("id").cloned();
    if let (Some("tools/call"), Some(id)) = (method, id.clone()) {
        let params = v.get("params");
        let bad = match params {
            Some(Value::Object(p)) => p
                .get("arguments")
                .is_some_and(|a| !a.is_object() && !a.is_null()),
            _ => true,
        };
        if bad {
            return Some(error(
                id,
                ErrorCode::INVALID_PARAMS,
                "invalid params: `params` must be an object with `name` and, if any, \
                 `arguments` as an object of the tool's arguments"
                    .into(),
            ));
        }
    }
    match serde_json::from_value::<RxJsonRpcMessage<RoleServer>>(v.clone()) {
        Ok(_) => None,
        Err(e) => {
            // A notification of a wrong shape gets no answer (JSON-RPC answers requests
            // only); anything else that is not a message is an invalid request.
            let id = match id {
                Some(id) => id,
                None if method.is_some() => return None,
                None => Value::Null,
            };
            Some(match method {
                Some(m) if KNOWN.contains(&m) => error(
                    id,
                    ErrorCode::INVALID_PARAMS,
                    format!("invalid params for {m}: {e}"),
                ),
                _ => error(
                    id,
                    ErrorCode::INVALID_REQUEST,
                    format!("invalid request: {e}"),
                ),
            })
        }
    }
}

impl<R, W> Transport<RoleServer> for LineTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let w = self.write.clone();
        async move {
            let line = serde_json::to_string(&item).map_err(std::io::Error::other)?;
            write_line(&w, line).await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            // A read cut short by the service's select! leaves its bytes in `line` for the
            // next call (read_until appends).
            let n = (&mut self.read)
                .take(MAX_LINE as u64)
                .read_until(b'\n', &mut self.line)
                .await
                .unwrap_or_default();
            if n == 0 && !self.line.ends_with(b"\n") && self.line.len() < MAX_LINE {
                // End of input (a last line without its newline is not a message).
                let _ = self.closed.send(true);
                return None;
            }
            let raw = std::mem::take(&mut self.line);
            if !raw.ends_with(b"\n") && raw.len() >= MAX_LINE {
                // Too long: skip to its end, and say so.
                let mut rest = Vec::new();
                let _ = self.read.read_until(b'\n', &mut rest).await;
                let v = error(
                    Value::Null,
                    ErrorCode::INVALID_REQUEST,
                    format!("invalid request: a line longer than {MAX_LINE} bytes"),
                );
                if write_line(&self.write.clone(), v.to_string())
                    .await
                    .is_err()
                {
                    return None;
                }
                continue;
            }
            let line = raw.strip_suffix(b"\n").unwrap_or(&raw);
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let line = line.strip_prefix(b"\xef\xbb\xbf").unwrap_or(line);
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            if let Some(v) = refusal(line) {
                if write_line(&self.write.clone(), v.to_string())
                    .await
                    .is_err()
                {
                    return None;
                }
                continue;
            }
            match serde_json::from_slice(line) {
                Ok(m) => return Some(m),
                Err(_) => continue,
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        let mut w = self.write.lock().await;
        w.flush().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(line: &str) -> Option<i64> {
        refusal(line.as_bytes()).map(|v| v["error"]["code"].as_i64().unwrap())
    }

    #[test]
    fn each_bad_line_gets_its_json_rpc_error() {
        assert_eq!(code("this is not json"), Some(-32700));
        assert_eq!(
            code(
                r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"list","arguments":[1]}}"#
            ),
            Some(-32602)
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":[]}"#),
            Some(-32602)
        );
        let v = refusal(br#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":7}"#).unwrap();
        assert_eq!(v["id"], "a");
        assert_eq!(
            code(
                r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"list","arguments":{}}}"#
            ),
            None
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            None
        );
    }

    #[test]
    fn json_that_is_no_message_is_an_invalid_request() {
        for line in [
            "{}",
            "[1,2,3]",
            "7",
            "\"x\"",
            "null",
            r#"{"jsonrpc":"2.0"}"#,
        ] {
            let v = refusal(line.as_bytes()).unwrap_or_else(|| panic!("no answer to {line}"));
            assert_eq!(v["error"]["code"], -32600, "{line}");
            assert_eq!(v["id"], Value::Null, "{line}");
        }
        // A notification of a wrong shape is not answered.
        assert_eq!(code(r#"{"jsonrpc":"2.0","method":"x/y","params":7}"#), None);
    }
}
