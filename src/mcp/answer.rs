//! What a tool call returns: bounded structured content and the short text a model reads
//! first. Pure functions over the contract documents, so every bound has a unit test.
//!
//! Common pitfalls:
//! * Bounds are in bytes of UTF-8 and cut on a character boundary; a cut says so, with the
//!   size and the file that has all of it.
//! * Agent and program output can hold anything (escape sequences, other control
//!   characters): it reaches the text through [`crate::term::sanitize_lines`].

use std::path::Path;

use serde_json::{Value, json};

use crate::envelope::{Envelope, FailureKind, FanoutReport, RunRow, StatusDoc};

/// The most bytes of an agent's final text (or a program's output) in one answer.
pub const MAX_TEXT: usize = 8 * 1024;
/// The most bytes of one argument of `argv` kept in an answer (an agent's task travels there).
const MAX_ARG: usize = 512;
/// The most bytes of a structured document; a larger envelope becomes a summary.
pub const MAX_DOC: usize = 36 * 1024;
/// The most bytes of the structured content of one run answered without `detail`.
pub const MAX_BRIEF: usize = 4 * 1024;
/// The envelope's parts an answer leaves out unless asked for (`detail`): bulky, and
/// nothing a model acts on. Of `sandbox`, only `enabled` and `limit_hit` stay.
const BULKY: &[&str] = &["artifacts", "filter", "tmux"];
/// The shortest a string gets when a document is squeezed.
const MIN_CUT: usize = 64;
/// The most bytes of one answer as a JSON-RPC message: the limit parents can rely on is
/// 64 KiB, and the message's own framing takes a little.
pub const MAX_ANSWER: usize = 62 * 1024;
/// The most bytes of the end of a final text (or of stderr) in a run's one-line summary.
const SUMMARY_END: usize = 200;
/// The most runs one `list` or `fanout` answer names in its text.
const MAX_TEXT_ROWS: usize = 30;

/// `s` cut to at most `max` bytes on a character boundary; whether it was cut.
pub fn cut(s: &str, max: usize) -> (&str, bool) {
    if s.len() <= max {
        return (s, false);
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    (&s[..end], true)
}

/// `s` bounded to `max` bytes, with a note naming `whole` (the file with all of it) when cut.
pub fn bounded(s: &str, max: usize, whole: &Path) -> String {
    match cut(s, max) {
        (all, false) => all.to_owned(),
        (head, true) => format!(
            "{head}… [cut at {max} of {} bytes; all of it is in {}]",
            s.len(),
            whole.display()
        ),
    }
}

/// The envelope as structured content: the final text and every `argv` entry bounded, and
/// the whole replaced by a summary (with the path of `result.json`) if it is still too large.
pub fn envelope_doc(env: &Envelope, attempt_dir: &Path) -> Value {
    let mut e = env.clone();
    if let Some(t) = &e.output.final_text {
        e.output.final_text = Some(bounded(t, MAX_TEXT, &attempt_dir.join("output.txt")));
    }
    for a in &mut e.argv {
        if a.len() > MAX_ARG {
            *a = bounded(a, MAX_ARG, &attempt_dir.join("spec.json"));
        }
    }
    let v = serde_json::to_value(&e).unwrap_or(Value::Null);
    if serde_json::to_string(&v).map_or(0, |s| s.len()) <= MAX_DOC {
        return v;
    }
    json!({
        "schema": e.schema,
        "run_id": e.run_id,
        "attempt": e.attempt,
        "agent": e.agent,
        "status": e.status,
        "failure_kind": e.failure_kind,
        "exit_code": e.exit_code,
        "duration_ms": e.duration_ms,
        "final_text": e.output.final_text,
        "errors": e.output.errors.iter().take(3).collect::<Vec<_>>(),
        "truncated": true,
        "result_path": attempt_dir.join("result.json"),
    })
}

/// The envelope as a model reads it first: [`envelope_doc`] without its bulky parts
/// ([`BULKY`], the sandbox's policy and what it enforced), with the path of `result.json`,
/// which has all of it.
pub fn brief_doc(env: &Envelope, attempt_dir: &Path) -> Value {
    let mut v = envelope_doc(env, attempt_dir);
    if let Some(o) = v.as_object_mut() {
        for k in BULKY {
            o.remove(*k);
        }
        if let Some(Value::Object(sb)) = o.get_mut("sandbox") {
            sb.retain(|k, _| k == "enabled" || k == "limit_hit");
        }
        o.insert("result_path".into(), json!(attempt_dir.join("result.json")));
    }
    v
}

/// `doc` with `summary` first and `next` (when given) second, then the rest in its order.
pub fn lead(summary: &str, next: Option<Value>, doc: Value) -> Value {
    let mut out = serde_json::Map::new();
    out.insert("summary".into(), summary.into());
    if let Some(n) = next {
        out.insert("next".into(), n);
    }
    if let Value::Object(o) = doc {
        for (k, v) in o {
            if k != "summary" && k != "next" {
                out.insert(k, v);
            }
        }
    }
    Value::Object(out)
}

/// What to call next for runs that go on: `wait` with their ids (or their group).
pub fn next_wait(run_ids: &[&str], group: Option<&str>) -> Value {
    let arguments = match group {
        Some(g) => json!({"group": g}),
        None => json!({"run_ids": run_ids}),
    };
    json!({"tool": "wait", "arguments": arguments})
}

/// Cuts the longest strings of `doc` (never its top-level `summary` or `next`) until it is
/// at most `budget` bytes of JSON, or no string is longer than [`MIN_CUT`]; an end of output
/// (under `tails`) keeps its end, any other string its start. Whether anything was cut.
pub fn squeeze(doc: &mut Value, budget: usize) -> bool {
    let mut cut_any = false;
    loop {
        let size = serde_json::to_string(doc).map_or(0, |s| s.len());
        if size <= budget {
            return cut_any;
        }
        let mut longest = (String::new(), 0);
        find_longest(doc, String::new(), &mut longest);
        let (path, len) = longest;
        if len <= MIN_CUT {
            return cut_any;
        }
        let keep = len
            .saturating_sub(size - budget + 8)
            .min(len / 2)
            .max(MIN_CUT);
        if let Some(Value::String(s)) = doc.pointer_mut(&path) {
            *s = if path.starts_with("/tails/") {
                let mut from = s.len() - keep;
                while !s.is_char_boundary(from) {
                    from += 1;
                }
                format!("…{}", &s[from..])
            } else {
                format!("{}…", cut(s, keep).0)
            };
            cut_any = true;
        } else {
            return cut_any;
        }
    }
}

/// The JSON pointer and length of the longest string of `v` below `at`.
fn find_longest(v: &Value, at: String, best: &mut (String, usize)) {
    match v {
        Value::String(s) if s.len() > best.1 => *best = (at, s.len()),
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                find_longest(x, format!("{at}/{i}"), best);
            }
        }
        Value::Object(o) => {
            for (k, x) in o {
                if at.is_empty() && (k == "summary" || k == "next") {
                    continue;
                }
                let k = k.replace('~', "~0").replace('/', "~1");
                find_longest(x, format!("{at}/{k}"), best);
            }
        }
        _ => {}
    }
}

/// One line of how an attempt ended: `run R (attempt 1) completed: exit 0 after 1.2s`.
pub fn ended_line(env: &Envelope) -> String {
    let how = env.how_it_ended();
    let kind = match (env.failure_kind, env.cancelled_by) {
        (Some(FailureKind::Cancelled), Some(by)) => format!(" by {}", by.as_str()),
        (Some(k), _) => format!(" ({})", k.as_str()),
        (None, _) => String::new(),
    };
    let after = env
        .duration_ms
        .map(|d| format!(" after {:.3}s", d as f64 / 1000.0))
        .unwrap_or_default();
    format!(
        "run {} (attempt {}) {}{kind}: {how}{after}",
        env.run_id,
        env.attempt,
        env.status.as_str()
    )
}

/// One line a model can act on: how the attempt ended (status, exit, duration), then the end
/// of its final text, or, when it did not complete, of its stderr (`stderr_end`) or its
/// first error.
pub fn summary(env: &Envelope, stderr_end: Option<&str>) -> String {
    let mut s = ended_line(env);
    let last_line = |t: &str| -> Option<String> {
        let line = t.lines().rev().find(|l| !l.trim().is_empty())?;
        Some(crate::term::sanitize(line.trim().as_bytes(), SUMMARY_END))
    };
    let end = if env.status == crate::envelope::Status::Completed {
        env.output.final_text.as_deref().and_then(|t| {
            let flat = t.split_whitespace().collect::<Vec<_>>().join(" ");
            let start = flat.len().saturating_sub(SUMMARY_END);
            let mut i = start;
            while !flat.is_char_boundary(i) {
                i += 1;
            }
            let cut = if i > 0 { "…" } else { "" };
            (!flat.is_empty()).then(|| {
                format!(
                    "final text: {cut}{}",
                    crate::term::sanitize(&flat.as_bytes()[i..], SUMMARY_END + 8)
                )
            })
        })
    } else {
        stderr_end
            .and_then(last_line)
            .map(|l| format!("stderr: {l}"))
            .or_else(|| {
                env.output
                    .errors
                    .first()
                    .map(|e| crate::term::sanitize(e.as_bytes(), SUMMARY_END))
            })
    };
    if let Some(e) = end {
        s.push_str("; ");
        s.push_str(&e);
    }
    s
}

/// The text of a finished attempt: how it ended, its errors, the agent's final text (or the
/// tail of a program's output, given as `output_tail`), and where its files are.
pub fn envelope_text(
    summary: &str,
    env: &Envelope,
    attempt_dir: &Path,
    output_tail: Option<&str>,
) -> String {
    let mut s = summary.to_owned();
    s.push('\n');
    for e in env.output.errors.iter().take(3) {
        s.push_str(&format!(
            "error: {}\n",
            crate::term::sanitize(e.as_bytes(), 300)
        ));
    }
    if let Some(t) = &env.output.final_text {
        let t = crate::term::sanitize_lines(t.as_bytes());
        s.push_str("final text:\n");
        s.push_str(&bounded(&t, MAX_TEXT, &attempt_dir.join("output.txt")));
        s.push('\n');
    } else if let Some(tail) = output_tail.filter(|t| !t.is_empty()) {
        s.push_str("output (end of stdout):\n");
        s.push_str(tail);
        if !tail.ends_with('\n') {
            s.push('\n');
        }
    }
    if let Some(wt) = env.worktree.as_ref().filter(|w| w.kept) {
        s.push_str(&format!("worktree kept: {}\n", wt.path));
    }
    s.push_str(&format!(
        "result: {}",
        attempt_dir.join("result.json").display()
    ));
    s
}

/// The text of an attempt that has not finished (one line).
pub fn live_text(doc: &StatusDoc) -> String {
    let since = doc
        .started_at
        .as_deref()
        .map(|t| format!(" since {t}"))
        .unwrap_or_default();
    format!(
        "run {} (attempt {}) is {}{since}; attempt directory {}",
        doc.run_id,
        doc.attempt,
        doc.status.as_str(),
        doc.attempt_dir.display()
    )
}

/// The text of a `list` answer: how many match and which of them this page holds (from
/// `offset`), then one line per run (at most [`MAX_TEXT_ROWS`]) of the `rows` the
/// structured content holds.
pub fn rows_text(rows: &[RunRow], total: usize, offset: usize) -> String {
    if rows.is_empty() && total == 0 {
        return "no runs match".into();
    }
    let end = offset + rows.len();
    let page = match (offset, end < total) {
        (0, false) => String::new(),
        _ if rows.is_empty() => format!(" (none from offset {offset})"),
        _ => format!(" (runs {} to {end})", offset + 1),
    };
    let mut s = format!(
        "{total} run{} match{page}{}\n",
        if total == 1 { "" } else { "s" },
        if end < total {
            format!("; more with offset {end}")
        } else {
            String::new()
        }
    );
    let shown = rows.len().min(MAX_TEXT_ROWS);
    for r in &rows[..shown] {
        if let Some(w) = &r.queue {
            // A fan-out task that has not started: no attempt yet, and why it waits.
            s.push_str(&format!(
                "{} (not started) queued ({}) {}\n",
                r.run_id,
                w.words(),
                crate::term::sanitize(r.what.as_bytes(), 120)
            ));
            continue;
        }
        s.push_str(&format!(
            "{} (attempt {}) {}{} {}\n",
            r.run_id,
            r.attempt,
            r.status.as_str(),
            r.failure_kind
                .map(|k| format!("/{}", k.as_str()))
                .unwrap_or_default(),
            crate::term::sanitize(r.what.as_bytes(), 120)
        ));
    }
    let in_doc = rows.len() - shown;
    if in_doc > 0 {
        s.push_str(&format!("… {in_doc} more in the structured content\n"));
    }
    if end < total {
        s.push_str(&format!(
            "… {} more: call `list` again with offset {end}\n",
            total - end
        ));
    }
    s.trim_end().to_owned()
}

/// A list row with its long texts (labels, what it runs, its problem) cut to a size that
/// many rows fit in one answer.
pub fn row_doc(r: &RunRow) -> Value {
    let mut r = r.clone();
    let short = |s: &mut String| {
        if s.len() > MAX_FIELD {
            *s = format!("{}…", cut(s, MAX_FIELD).0);
        }
    };
    short(&mut r.what);
    if let Some(p) = r.problem.as_mut() {
        short(p);
    }
    if let Some(c) = r.correlation_id.as_mut() {
        short(c);
    }
    r.labels = r
        .labels
        .into_iter()
        .take(MAX_LABELS)
        .map(|(mut k, mut v)| {
            short(&mut k);
            short(&mut v);
            (k, v)
        })
        .collect();
    serde_json::to_value(&r).unwrap_or(Value::Null)
}

/// The most bytes of one text field of a row of many.
const MAX_FIELD: usize = 256;
/// The most labels of a row of many.
const MAX_LABELS: usize = 16;

/// `items` in order while they fit in `budget` bytes of JSON; how many were left out.
pub fn fit(items: impl IntoIterator<Item = Value>, budget: usize) -> (Vec<Value>, usize) {
    let mut kept = Vec::new();
    let mut used = 0;
    let mut left = 0;
    for v in items {
        let n = serde_json::to_string(&v).map_or(0, |s| s.len()) + 1;
        if left > 0 || used + n > budget {
            left += 1;
            continue;
        }
        used += n;
        kept.push(v);
    }
    (kept, left)
}

/// The text of a fan-out report: the summary, then one line per task that did not complete.
/// A group that goes on says `running` and how many run and wait, never a duration or an
/// exit code it does not have yet.
pub fn fanout_text(r: &FanoutReport) -> String {
    let m = &r.summary;
    let going = m.running + m.queued > 0;
    let mut s = format!(
        "group {}{}: {} task{}, {} completed, {} failed, {} cancelled, {} skipped",
        r.group,
        if going { " running" } else { "" },
        m.total,
        if m.total == 1 { "" } else { "s" },
        m.completed,
        m.failed,
        m.cancelled,
        m.skipped,
    );
    if going {
        s.push_str(&format!(", {} running, {} queued\n", m.running, m.queued));
    } else {
        s.push_str(&format!(" in {:.1}s\n", m.duration_ms as f64 / 1000.0));
    }
    let mut shown = 0;
    for t in r.tasks.iter() {
        if t.status == crate::envelope::TaskStatus::Completed {
            continue;
        }
        if shown == MAX_TEXT_ROWS {
            s.push_str("… more in the structured content\n");
            break;
        }
        shown += 1;
        s.push_str(&format!(
            "task {}: {} {}{}{}\n",
            t.line,
            t.run_id.as_deref().unwrap_or("(no run)"),
            t.status.as_str(),
            how_it_failed(t),
            t.error
                .as_deref()
                .map(|e| format!(": {}", crate::term::sanitize(e.as_bytes(), 200)))
                .unwrap_or_default()
        ));
    }
    s.trim_end().to_owned()
}

/// ` (exit 2)`, ` (timeout, exit 143)`, ` (spawn)`: how a task that did not complete ended.
fn how_it_failed(t: &crate::envelope::FanoutTask) -> String {
    use crate::envelope::FailureKind;
    match (t.failure_kind, t.exit_code) {
        (Some(FailureKind::Exit), Some(c)) => format!(" (exit {c})"),
        (Some(k), Some(c)) => format!(" ({}, exit {c})", k.as_str()),
        (Some(k), None) => format!(" ({})", k.as_str()),
        (None, Some(c)) if c != 0 => format!(" (exit {c})"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::Status;

    fn envelope() -> Envelope {
        serde_json::from_value(json!({
            "schema": "subpane.result/v1", "run_id": "r1", "attempt": 2, "agent": "pi",
            "argv": ["pi", "-p", "x".repeat(5000)], "cwd": "/w", "labels": {},
            "correlation_id": null, "status": "failed", "failure_kind": "timeout",
            "exit_code": null, "signal": "SIGTERM", "signals_sent": ["SIGTERM"],
            "started_at": null, "finished_at": null, "duration_ms": 1500,
            "terminal_event": null, "lingered": false,
            "output": {"final_text": "é".repeat(10_000), "session_id": null, "model": null,
                       "usage": null, "cost_usd": null, "turns": null, "tool_calls": null,
                       "errors": ["took too long \u{1b}[31m"], "context_length_exceeded": false},
            "filter": {"kept_lines": 0, "dropped_lines": 0, "dropped_bytes": 0,
                       "oversized_lines": 0, "plain_lines": 0},
            "cleanup": {"output_held_open": false, "killed_descendants": 0},
            "tmux": {"socket": null, "session": null, "pane_id": null},
            "sandbox": {"enabled": false}, "artifacts": []
        }))
        .unwrap()
    }

    #[test]
    fn cuts_fall_on_character_boundaries() {
        assert_eq!(cut("abc", 5), ("abc", false));
        assert_eq!(cut("éé", 3), ("é", true));
        let b = bounded(&"é".repeat(10), 5, Path::new("/a/output.txt"));
        assert!(b.starts_with("éé… [cut at 5 of 20 bytes"), "{b}");
        assert!(b.ends_with("/a/output.txt]"), "{b}");
    }

    #[test]
    fn the_envelope_is_bounded_and_names_its_files() {
        let env = envelope();
        let v = envelope_doc(&env, Path::new("/h/runs/r1/attempts/2"));
        let ft = v["output"]["final_text"].as_str().unwrap();
        assert!(ft.len() < MAX_TEXT + 200, "{}", ft.len());
        assert!(ft.contains("/h/runs/r1/attempts/2/output.txt"));
        assert!(v["argv"][2].as_str().unwrap().len() < MAX_ARG + 200);
        assert_eq!(v["status"], "failed");
        assert_eq!(v["attempt"], 2);
    }

    #[test]
    fn an_envelope_too_large_still_becomes_a_summary() {
        let mut env = envelope();
        env.output.errors = vec!["e".repeat(2000); 20];
        env.argv = vec!["a".repeat(400); 200];
        let v = envelope_doc(&env, Path::new("/d"));
        assert_eq!(v["truncated"], true);
        assert_eq!(v["result_path"], "/d/result.json");
        assert_eq!(v["status"], "failed");
        assert!(serde_json::to_string(&v).unwrap().len() <= MAX_DOC);
    }

    #[test]
    fn the_text_says_how_it_ended_first() {
        let mut env = envelope();
        let t = envelope_text(&summary(&env, None), &env, Path::new("/d"), None);
        assert!(
            t.starts_with(
                "run r1 (attempt 2) failed (timeout): killed by SIGTERM after 1.500s; took too long ^[[31m\n"
            ),
            "{t}"
        );
        assert!(t.contains("error: took too long ^[[31m"), "{t}");
        assert!(t.contains("final text:\néé"), "{t}");
        assert!(t.ends_with("result: /d/result.json"), "{t}");
        env.output.final_text = None;
        env.status = Status::Completed;
        env.failure_kind = None;
        env.exit_code = Some(0);
        env.output.errors.clear();
        let t = envelope_text(&summary(&env, None), &env, Path::new("/d"), Some("sub-42"));
        assert!(
            t.starts_with("run r1 (attempt 2) completed: exit 0 after 1.500s\n"),
            "{t}"
        );
        assert!(t.contains("output (end of stdout):\nsub-42\n"), "{t}");
        let _ = FailureKind::Exit;
    }

    #[test]
    fn a_brief_envelope_leads_with_its_summary_and_fits_in_4_kib() {
        let mut env = envelope();
        env.labels = (0..40)
            .map(|i| (format!("k{i}"), "v".repeat(300)))
            .collect();
        let mut v = lead("the line", None, brief_doc(&env, Path::new("/d")));
        for k in BULKY {
            assert!(v.get(*k).is_none(), "{k}");
        }
        assert_eq!(v["sandbox"], json!({"enabled": false}));
        assert_eq!(v["result_path"], "/d/result.json");
        v["tails"] = json!({"stdout": null, "stderr": format!("{}THE END", "s".repeat(5000))});
        assert!(squeeze(&mut v, MAX_BRIEF));
        let n = serde_json::to_string(&v).unwrap().len();
        assert!(n <= MAX_BRIEF, "{n}");
        assert_eq!(v.as_object().unwrap().keys().next().unwrap(), "summary");
        assert_eq!(v["summary"], "the line");
        // The end of an output keeps its end; other texts their start.
        let tail = v["tails"]["stderr"].as_str().unwrap();
        assert!(tail.starts_with('…') && tail.ends_with("THE END"), "{tail}");
        assert!(
            v["output"]["final_text"]
                .as_str()
                .unwrap()
                .starts_with("éé")
        );
        assert_eq!(v["status"], "failed");
    }

    #[test]
    fn next_is_a_wait_call_as_it_is() {
        assert_eq!(
            next_wait(&["a", "b"], None),
            json!({"tool": "wait", "arguments": {"run_ids": ["a", "b"]}})
        );
        assert_eq!(
            next_wait(&[], Some("g")),
            json!({"tool": "wait", "arguments": {"group": "g"}})
        );
        let v = lead(
            "s",
            Some(next_wait(&["a"], None)),
            json!({"z": 1, "summary": "old"}),
        );
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["summary", "next", "z"]);
        assert_eq!(v["summary"], "s");
    }
}
