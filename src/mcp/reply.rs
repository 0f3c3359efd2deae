//! Building a call's answer: the text a model reads first and the structured content, from
//! the contract documents and, for a finished attempt, the ends of its output files; and
//! the one bound every answer goes through ([`bounded`]).
//!
//! ```text
//!  one run   ─► summary line, text, bounded envelope (+ tails)        finished / live
//!  many runs ─► counts, one summary line and one small doc per run    wait_answer
//!               (in the order they ended), as many as fit
//!  any answer ─► bounded: at most MAX_ANSWER bytes as one JSON-RPC message
//! ```
//!
//! Common pitfalls:
//! * MCP clients show their model the structured content rather than the text when there is
//!   one (Claude Code and Codex both do): what a parent must read goes in both, and the
//!   one-line summary leads both.
//! * The ends of a program's output follow the one policy of [`app::ends`] (the CLI's
//!   summaries too), with the size of an answer ([`EndSize::ANSWER`]): never read them here.
//! * JSON escapes can make text longer than its bytes (`"` is two, a control character six):
//!   bound the serialised answer, not the text.

use std::time::Duration;

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Value, json};

use super::answer::{self, MAX_ANSWER, MAX_BRIEF, MAX_DOC};
use crate::app::{self, AttemptStatus, EndSize, WaitAnswers};
use crate::envelope::{Envelope, FanoutReport, StatusDoc};
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

#[cfg(test)]
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

/// The one-line summary, the envelope and the ends of the output of a finished attempt
/// (what `run`, `status` and a one-run `wait` answer with): without `detail`, its brief
/// form in at most [`MAX_BRIEF`] bytes.
fn finished_parts(env: &Envelope, paths: &AttemptPaths, detail: bool) -> (String, Value, String) {
    let ends = app::ends(env, paths, EndSize::ANSWER);
    let (stdout, stderr) = (ends.stdout.map(|e| e.text), ends.stderr.map(|e| e.text));
    let summary = answer::summary(env, stderr.as_deref());
    let mut doc = if detail {
        answer::envelope_doc(env, paths.dir())
    } else {
        answer::brief_doc(env, paths.dir())
    };
    if let Some(o) = doc.as_object_mut()
        && (stdout.is_some() || stderr.is_some())
    {
        o.insert(
            "tails".into(),
            json!({"stdout": stdout.clone(), "stderr": stderr.clone()}),
        );
    }
    let mut doc = answer::lead(&summary, None, doc);
    if !detail
        && answer::squeeze(&mut doc, MAX_BRIEF)
        && let Some(o) = doc.as_object_mut()
    {
        o.insert("truncated".into(), true.into());
    }
    let text = finished_text(&summary, env, paths, stdout, stderr);
    (summary, doc, text)
}

/// The answer for a finished attempt: its one-line summary first, its envelope (brief
/// unless `detail`, with the ends of a program's output as `tails`, [`app::ends`] for an
/// answer's room) and its text.
pub(super) fn finished(env: &Envelope, paths: &AttemptPaths, detail: bool) -> CallToolResult {
    let (_, doc, text) = finished_parts(env, paths, detail);
    result(text, doc)
}

/// The answer for an attempt that has not finished: what to call next is `wait`. Without
/// `detail`, its tmux facts are left out.
pub(super) fn live(doc: &StatusDoc, detail: bool) -> CallToolResult {
    let summary = answer::live_text(doc);
    let mut v = to_value(doc);
    if let (false, Some(o)) = (detail, v.as_object_mut()) {
        o.remove("tmux");
    }
    let next = answer::next_wait(&[doc.run_id.as_str()], None);
    result(summary.clone(), answer::lead(&summary, Some(next), v))
}

/// A finished attempt's text, with the tails.
fn finished_text(
    summary: &str,
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
    answer::envelope_text(summary, env, paths.dir(), Some(&tail))
}

/// A run of many in a `wait` answer: its summary line and a small document.
fn run_entry(status: &AttemptStatus, paths: &AttemptPaths) -> (String, Value) {
    match status {
        AttemptStatus::Finished(env) => {
            let ends = app::ends(env, paths, EndSize::ANSWER);
            let summary = answer::summary(env, ends.stderr.as_ref().map(|e| e.text.as_str()));
            let mut doc = json!({
                "summary": summary, "schema": env.schema, "run_id": env.run_id,
                "attempt": env.attempt, "status": env.status, "failure_kind": env.failure_kind,
                "exit_code": env.exit_code, "duration_ms": env.duration_ms,
                "finished_at": env.finished_at, "result_path": paths.result(),
            });
            if let (Some(by), Some(o)) = (env.cancelled_by, doc.as_object_mut()) {
                o.insert("cancelled_by".into(), to_value(&by));
            }
            (summary, doc)
        }
        AttemptStatus::Live(doc) => {
            let summary = answer::live_text(doc);
            let v = json!({
                "summary": summary, "schema": doc.schema, "run_id": doc.run_id,
                "attempt": doc.attempt, "status": doc.status, "started_at": doc.started_at,
                "attempt_dir": doc.attempt_dir,
            });
            (summary, v)
        }
    }
}

/// The answer of `wait`: the counts first, then one line per run in the order they ended
/// (those still going last), as many as one answer holds; `next` when runs go on. One run
/// is answered whole, as `status` would (brief unless `detail`).
pub(super) fn wait_answer(
    a: &WaitAnswers,
    group: Option<&FanoutReport>,
    max_wait_passed: bool,
    max_wait: Duration,
    detail: bool,
) -> CallToolResult {
    // The ended states first, in one order whatever the runs'.
    let mut counts = serde_json::Map::new();
    for state in [
        "completed",
        "failed",
        "cancelled",
        "queued",
        "starting",
        "running",
    ] {
        let n = a
            .runs
            .iter()
            .filter(|r| {
                state
                    == match &r.status {
                        AttemptStatus::Finished(e) => e.status.as_str(),
                        AttemptStatus::Live(d) => d.status.as_str(),
                    }
            })
            .count();
        if n > 0 {
            counts.insert(state.into(), n.into());
        }
    }
    let counts_line = format!(
        "{} run{}: {}",
        a.runs.len(),
        if a.runs.len() == 1 { "" } else { "s" },
        counts
            .iter()
            .map(|(k, v)| format!("{v} {k}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut text = counts_line.clone();
    text.push('\n');
    let mut summary = counts_line;
    let mut docs = Vec::new();
    let one = a.runs.len() == 1;
    let mut used = 0;
    let mut left_out = 0;
    for &i in &a.order {
        let r = &a.runs[i];
        let (line, doc) = match (&r.status, one) {
            (AttemptStatus::Finished(env), true) => {
                let (_, doc, full) = finished_parts(env, &r.paths, detail);
                (full, doc)
            }
            _ => run_entry(&r.status, &r.paths),
        };
        let n = serde_json::to_string(&doc).map_or(0, |s| s.len()) + line.len() * 2;
        if left_out > 0 || used + n > MAX_DOC {
            left_out += 1;
            continue;
        }
        used += n;
        text.push_str(&line);
        text.push('\n');
        if let Some(s) = doc["summary"].as_str() {
            summary.push('\n');
            summary.push_str(s);
        }
        docs.push(doc);
    }
    if left_out > 0 {
        text.push_str(&format!(
            "… {left_out} more runs not shown: `wait` or `list` with fewer runs shows them\n"
        ));
    }
    if max_wait_passed {
        text.push_str(&format!(
            "max_wait ({}) passed; the runs that have not finished go on: call `wait` again",
            humantime::format_duration(max_wait)
        ));
    } else if a.timed_out {
        text.push_str("the timeout passed first; the runs that have not finished go on");
    }
    // A group whose driver runs on its own: its counts, and the tasks it has not started
    // (queued, or never to start because the driver ended).
    let group_doc = group.map(|g| {
        let unstarted: Vec<Value> = g
            .tasks
            .iter()
            .filter(|t| t.run_id.is_none())
            .take(50)
            .map(|t| json!({"line": t.line, "status": t.status, "what": t.what, "error": t.error}))
            .collect();
        let s = &g.summary;
        if s.queued > 0 || s.skipped > 0 {
            text.push_str(&format!(
                "\ngroup {}: {} queued, {} never started{}",
                g.group,
                s.queued,
                s.skipped,
                unstarted
                    .iter()
                    .find_map(|t| t["error"].as_str())
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default()
            ));
        }
        json!({"group": g.group, "status": group_state(g), "counts": group_counts(g),
               "unstarted": unstarted})
    });
    let first = a.first_finished.map(|i| a.runs[i].run_id.as_str());
    let going: Vec<&str> = a
        .runs
        .iter()
        .filter(|r| matches!(r.status, AttemptStatus::Live(_)))
        .map(|r| r.run_id.as_str())
        .collect();
    let group_going = group.is_some_and(|g| g.summary.running + g.summary.queued > 0);
    let next = (!going.is_empty() || group_going)
        .then(|| answer::next_wait(&going, group.map(|g| g.group.as_str())));
    let doc = json!({"counts": counts, "timed_out": a.timed_out,
                     "max_wait_passed": max_wait_passed, "first_finished": first,
                     "runs": docs, "left_out": left_out, "group": group_doc});
    result(
        text.trim_end().to_owned(),
        answer::lead(&summary, next, doc),
    )
}

/// A fan-out group's state: `running` while a task runs or waits to start, else `ended`.
fn group_state(r: &FanoutReport) -> &'static str {
    if r.summary.running + r.summary.queued > 0 {
        "running"
    } else {
        "ended"
    }
}

/// A group's counts: while it runs, without the exit code and duration that only its end
/// has (the end's are those of `fanout --json`).
fn group_counts(r: &FanoutReport) -> Value {
    let mut v = to_value(&r.summary);
    if let (Some(o), "running") = (v.as_object_mut(), group_state(r)) {
        o.remove("exit_code");
        o.remove("duration_ms");
    }
    v
}

/// The answer of `fanout`: the text (the counts, and the tasks that did not complete), and
/// the report with as many tasks as fit, in the order given.
pub(super) fn fanout_answer(report: &FanoutReport, max_wait: Duration) -> CallToolResult {
    let mut text = answer::fanout_text(report);
    let summary = text.lines().next().unwrap_or_default().to_owned();
    let (docs, left_out) = answer::fit(report.tasks.iter().map(to_value), MAX_DOC);
    let state = group_state(report);
    let next = (state == "running").then(|| answer::next_wait(&[], Some(&report.group)));
    if next.is_some() {
        text.push_str(&format!(
            "\nmax_wait ({}) passed; the group goes on ({} running, {} queued): call `wait` \
             with group \"{}\" for the rest (`pause` holds its queued tasks, `resume` lets \
             them go on)",
            humantime::format_duration(max_wait),
            report.summary.running,
            report.summary.queued,
            report.group
        ));
    }
    let doc = json!({"group": report.group, "status": state, "counts": group_counts(report),
                     "max_wait_passed": next.is_some(), "tasks": docs, "left_out": left_out});
    result(text, answer::lead(&summary, next, doc))
}

/// `r` as at most [`MAX_ANSWER`] bytes of JSON: the text cut first, then the longest
/// strings and arrays of the structured content, saying so (`truncated`).
pub(super) fn bounded(mut r: CallToolResult) -> CallToolResult {
    let size = |r: &CallToolResult| serde_json::to_string(r).map_or(0, |s| s.len());
    let mut over = size(&r).saturating_sub(MAX_ANSWER);
    if over == 0 {
        return r;
    }
    // The text, cut from its middle: the summary leads it and the end says the most.
    if let Some(t) = r
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
    {
        let mut keep = t.len().saturating_sub(over + 256);
        loop {
            let head = answer::cut(&t, keep / 2).0;
            let mut from = t.len() - keep / 2;
            while !t.is_char_boundary(from) {
                from += 1;
            }
            let cut_text = format!(
                "{head}\n… [{} bytes cut to keep the answer under 64 KiB] …\n{}",
                t.len() - head.len() - (t.len() - from),
                &t[from..]
            );
            r.content[0] = ContentBlock::text(cut_text);
            over = size(&r).saturating_sub(MAX_ANSWER);
            if over == 0 || keep == 0 {
                break;
            }
            keep = keep.saturating_sub(over.max(keep / 4));
        }
    }
    if over > 0
        && let Some(doc) = r.structured_content.as_mut()
    {
        shrink(doc, MAX_DOC / 2);
        if let Some(o) = doc.as_object_mut() {
            o.insert("truncated".into(), true.into());
        }
    }
    r
}

/// Cuts the strings of `v` to 512 bytes and its arrays to what fits in `budget`.
fn shrink(v: &mut Value, budget: usize) {
    match v {
        Value::String(s) if s.len() > 512 => {
            *s = format!("{}… [cut]", answer::cut(s, 512).0);
        }
        Value::Array(a) => {
            a.iter_mut().for_each(|x| shrink(x, budget));
            let mut used = 0;
            let mut keep = 0;
            for x in a.iter() {
                used += serde_json::to_string(x).map_or(0, |s| s.len()) + 1;
                if used > budget {
                    break;
                }
                keep += 1;
            }
            a.truncate(keep);
        }
        Value::Object(o) => o.values_mut().for_each(|x| shrink(x, budget)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_answer_fits_in_one_message() {
        let text = "\"\\".repeat(100_000);
        let doc = json!({"run_id": "r", "status": "running",
                         "labels": {"big": "é".repeat(200_000)},
                         "runs": (0..2000).map(|i| json!({"run_id": format!("r{i}"),
                                                         "what": "x".repeat(300)}))
                                          .collect::<Vec<_>>()});
        let r = bounded(result(text, doc));
        let n = serde_json::to_string(&r).unwrap().len();
        assert!(n <= MAX_ANSWER, "{n}");
        let t = text_of(&r);
        assert!(
            t.contains("bytes cut to keep the answer under 64 KiB"),
            "{}",
            &t[..200]
        );
        let d = r.structured_content.unwrap();
        assert_eq!(d["truncated"], true);
        assert_eq!(d["run_id"], "r");
    }
}
