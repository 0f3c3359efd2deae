//! Building a call's answer: the text a model reads first and the structured content, from
//! the contract documents and, for a finished attempt, the ends of its output files.
//!
//! Common pitfalls:
//! * MCP clients show their model the structured content rather than the text when there is
//!   one (Claude Code and Codex both do): what a parent must read goes in both.
//! * The ends of a program's output follow the one policy of [`app::ends`] (the CLI's
//!   summaries too), with the size of an answer ([`EndSize::ANSWER`]): never read them here.

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Value, json};

use super::answer;
use crate::app::{self, EndSize};
use crate::envelope::Envelope;
use crate::store::AttemptPaths;

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
/// output as `tails`, [`app::ends`] for an answer's room) and its text.
///
/// MCP clients show their model the structured content rather than the text when there is
/// one (Claude Code and Codex both do), so what a parent needs to read is in both.
pub(super) fn finished(env: &Envelope, paths: &AttemptPaths) -> CallToolResult {
    let ends = app::ends(env, paths, EndSize::ANSWER);
    let (stdout, stderr) = (ends.stdout.map(|e| e.text), ends.stderr.map(|e| e.text));
    let mut doc = answer::envelope_doc(env, paths.dir());
    if stdout.is_some() || stderr.is_some() {
        if let Some(o) = doc.as_object_mut() {
            o.insert("tails".into(), json!({"stdout": stdout, "stderr": stderr}));
        }
    }
    result(finished_text(env, paths, stdout, stderr), doc)
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
