//! Building a call's answer: the text a model reads first and the structured content, from
//! the contract documents and, for a finished attempt, the ends of its output files.
//!
//! Common pitfalls:
//! * MCP clients show their model the structured content rather than the text when there is
//!   one (Claude Code and Codex both do): what a parent must read goes in both.
//! * A file's end is cut in the middle of a character at times: the partial character is
//!   dropped, and the rest made safe to show ([`crate::term::sanitize_lines`]).

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Value, json};

use super::answer;
use crate::app::Error;
use crate::envelope::Envelope;
use crate::spec::{AgentKind, AttemptSpec};
use crate::store::AttemptPaths;

/// The end of a program's stdout (and stderr, when it failed) shown in a `run` answer.
const TAIL: u64 = 2 * 1024;

pub(super) fn to_value<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// A successful call: the text first, then the document.
pub(super) fn result(text: String, doc: Value) -> CallToolResult {
    let mut r = CallToolResult::success(vec![ContentBlock::text(text)]);
    r.structured_content = Some(doc);
    r
}

pub(super) fn text_of(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect()
}

pub(super) fn prepend(r: &mut CallToolResult, s: &str) {
    if let Some(t) = r.content.first().and_then(|c| c.as_text()) {
        r.content[0] = ContentBlock::text(format!("{s}{}", t.text));
    }
}

/// The answer for a finished attempt: its bounded envelope (with the ends of a program's
/// output as `tails`) and its text.
///
/// MCP clients show their model the structured content rather than the text when there is
/// one (Claude Code and Codex both do), so what a parent needs to read is in both.
pub(super) fn finished(env: &Envelope, paths: &AttemptPaths, spec: &AttemptSpec) -> CallToolResult {
    let (stdout, stderr) = tails(env, paths, spec);
    let mut doc = answer::envelope_doc(env, paths.dir());
    if stdout.is_some() || stderr.is_some() {
        if let Some(o) = doc.as_object_mut() {
            o.insert("tails".into(), json!({"stdout": stdout, "stderr": stderr}));
        }
    }
    result(finished_text(env, paths, stdout, stderr), doc)
}

/// The end of a command's stdout, and of any program's stderr when it did not complete
/// (`None`: not asked for, missing or empty).
fn tails(
    env: &Envelope,
    paths: &AttemptPaths,
    spec: &AttemptSpec,
) -> (Option<String>, Option<String>) {
    let tail = |p: &Path| {
        read_tail(p, TAIL)
            .ok()
            .flatten()
            .map(|(t, _)| t)
            .filter(|t| !t.trim().is_empty())
    };
    let stdout = (spec.agent == AgentKind::Command)
        .then(|| tail(&paths.stdout_log()))
        .flatten();
    let stderr = (env.status != crate::envelope::Status::Completed)
        .then(|| tail(&paths.stderr_log()))
        .flatten();
    (stdout, stderr)
}

/// A finished attempt's text, with the tails.
fn finished_text(
    env: &Envelope,
    paths: &AttemptPaths,
    stdout: Option<String>,
    stderr: Option<String>,
) -> String {
    let mut tail = stdout.unwrap_or_default();
    if let Some(e) = stderr {
        if !tail.is_empty() && !tail.ends_with('\n') {
            tail.push('\n');
        }
        tail.push_str("stderr (end):\n");
        tail.push_str(&e);
    }
    answer::envelope_text(env, paths.dir(), Some(&tail))
}

/// The last `max` bytes of `path` as text safe to show (a cut character is dropped), and the
/// file's size; `None` when it does not exist.
pub(super) fn read_tail(path: &Path, max: u64) -> Result<Option<(String, u64)>, Error> {
    let mut f = match crate::store::open_read(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(Error::failed(format!(
                "cannot read {}: {e}",
                path.display()
            )));
        }
    };
    let read = |f: &mut std::fs::File| -> std::io::Result<(Vec<u8>, u64)> {
        let size = f.metadata()?.len();
        f.seek(SeekFrom::Start(size.saturating_sub(max)))?;
        let mut buf = Vec::with_capacity(max.min(size) as usize);
        f.take(max).read_to_end(&mut buf)?;
        Ok((buf, size))
    };
    let (mut buf, size) =
        read(&mut f).map_err(|e| Error::failed(format!("cannot read {}: {e}", path.display())))?;
    if size > max {
        // Start at a character: skip continuation bytes of one cut in half.
        let skip = buf
            .iter()
            .take(3)
            .take_while(|b| (**b & 0xC0) == 0x80)
            .count();
        buf.drain(..skip);
    }
    Ok(Some((crate::term::sanitize_lines(&buf), size)))
}
