//! How answers are shown to people (summaries of finished and running attempts), and the
//! "worst" exit code of several runs. Text that came from the program is made safe for the
//! terminal first; the end of a command's stdout is [`app::ends`], the policy the MCP
//! answers follow too, with a terminal's size ([`EndSize::TERMINAL`]).

use std::path::Path;

use super::human;
use crate::app::{self, EndSize};
use crate::envelope::{Envelope, Progress, StatusDoc};
use crate::exit_code;
use crate::store::AttemptPaths;

/// A few lines for a human about a finished attempt.
pub fn human_envelope(env: &Envelope, paths: &AttemptPaths) -> String {
    human_summary(env, paths.dir(), app::ends(env, paths, EndSize::TERMINAL))
}

/// [`human_envelope`] of an attempt in `dir`, with the ends of its output already read (by
/// whoever can read them: for a run from a sandbox, its worker).
pub fn human_summary(env: &Envelope, dir: &Path, ends: app::Ends) -> String {
    let app::Ends {
        stdout: stdout_end,
        stderr: stderr_end,
    } = ends;
    let paths = &AttemptPaths::new(dir.to_path_buf());
    let mut s = String::new();
    s.push_str(&format!(
        "run       {} (attempt {})\n",
        env.run_id, env.attempt
    ));
    s.push_str(&format!("status    {}\n", env.outcome_words()));
    if let Some(h) = &env.host {
        let job = h
            .job_id
            .as_deref()
            .map(|j| format!(", job {j}"))
            .unwrap_or_default();
        s.push_str(&format!("host      {} ({}{job})\n", h.name, h.kind));
    }
    if let Some(d) = env.duration_ms {
        s.push_str(&format!("duration  {:.3}s\n", d as f64 / 1000.0));
    }
    if env.lingered {
        s.push_str("lingered  killed after its final event\n");
    }
    s.push_str(&agent_lines(env));
    if env.cleanup.output_held_open || env.cleanup.killed_descendants > 0 {
        s.push_str(&format!(
            "cleanup   {} leftover process(es) killed{}\n",
            env.cleanup.killed_descendants,
            if env.cleanup.output_held_open {
                "; they held the output open"
            } else {
                ""
            }
        ));
    }
    if let Some(wt) = &env.worktree {
        s.push_str(&worktree_lines(env, wt, paths));
    }
    if let Some(g) = &env.git {
        s.push_str(&git_lines(g, paths));
    }
    for e in env.output.errors.iter().take(5) {
        s.push_str(&format!(
            "error     {}\n",
            crate::term::sanitize(e.as_bytes(), 300)
        ));
    }
    s.push_str(&format!("files     {}\n", dir.display()));
    if let Some(t) = &env.output.final_text {
        s.push('\n');
        s.push_str(&crate::term::sanitize_lines(t.as_bytes()));
        s.push('\n');
    } else if let Some(end) = stdout_end {
        // A command's own words: the end of its stdout.
        s.push('\n');
        if end.cut {
            s.push_str(&cut_note(
                &end,
                "stdout",
                &format!("subpane logs {}", env.run_id),
            ));
        }
        push_lines(&mut s, &end);
    } else if env.agent == crate::spec::AgentKind::Command {
        // Nothing shown: say so when there was something, rather than look like silence.
        let size = std::fs::symlink_metadata(paths.stdout_log()).map_or(0, |m| m.len());
        if size > 0 {
            s.push_str(&format!(
                "stdout    {size} bytes with nothing to show at their end; `subpane logs {}` has them\n",
                env.run_id
            ));
        }
    }
    // A failure's own words: the end of stderr (unless the error line above is all of it).
    if let Some(end) = stderr_end.filter(|e| !said_by_the_errors(e, env)) {
        s.push('\n');
        let logs = format!("subpane logs {} --stderr", env.run_id);
        if end.cut {
            s.push_str(&cut_note(&end, "stderr", &logs));
        } else {
            s.push_str("(stderr)\n");
        }
        push_lines(&mut s, &end);
    }
    s
}

/// `(last 20 lines of stdout; `subpane logs RUN` has all)`: what a cut end shows.
fn cut_note(end: &app::OutputEnd, file: &str, logs: &str) -> String {
    format!(
        "({} of {file}; `{logs}` has all)\n",
        match end.text.lines().count() {
            1 => "the end of the last line".to_owned(),
            n => format!("last {n} lines"),
        }
    )
}

/// The lines of an output's end, made safe already; one longer than a terminal is wide
/// shows its end.
fn push_lines(s: &mut String, end: &app::OutputEnd) {
    for l in end.text.lines() {
        s.push_str(&end_of_line(l, LINE_CHARS));
        s.push('\n');
    }
}

/// Whether stderr's end is one whole line that an `error     stderr: …` line already shows.
fn said_by_the_errors(end: &app::OutputEnd, env: &Envelope) -> bool {
    let mut lines = end.text.lines().filter(|l| !l.trim().is_empty());
    match (lines.next(), lines.next()) {
        (Some(only), None) if !end.cut => env
            .output
            .errors
            .iter()
            .any(|e| e.strip_prefix("stderr: ") == Some(only.trim())),
        _ => false,
    }
}

/// What an agent reported of its work: model, usage (tokens, cost, turns, tool calls) and
/// the session a `retry --resume` continues. Nothing for a command, or what was not reported.
fn agent_lines(env: &Envelope) -> String {
    let o = &env.output;
    let safe = |t: &str| crate::term::sanitize(t.as_bytes(), 200);
    let mut s = String::new();
    if let Some(m) = &o.model {
        s.push_str(&format!("model     {}\n", safe(m)));
    }
    let so_far = crate::envelope::SoFar {
        usage: o.usage.clone(),
        cost_usd: o.cost_usd,
        turns: o.turns,
        tool_calls: o.tool_calls,
    };
    let mut usage = Vec::new();
    if let Some(t) = so_far.total_tokens() {
        let mut words = format!("{} tokens", human::tokens(t));
        if let Some(u) = &o.usage {
            let part =
                |n: Option<u64>, what: &str| n.map(|n| format!("{} {what}", human::tokens(n)));
            let parts: Vec<String> = [
                part(u.input_tokens, "in"),
                part(u.output_tokens, "out"),
                part(u.cache_read_tokens.filter(|n| *n > 0), "cache read"),
                part(u.cache_write_tokens.filter(|n| *n > 0), "cache write"),
            ]
            .into_iter()
            .flatten()
            .collect();
            if !parts.is_empty() {
                words.push_str(&format!(" ({})", parts.join(", ")));
            }
        }
        usage.push(words);
    }
    if let Some(c) = o.cost_usd {
        usage.push(human::cost(c));
    }
    if let Some(n) = o.turns {
        usage.push(human::counted(n, "turn"));
    }
    if let Some(n) = o.tool_calls {
        usage.push(human::counted(n, "tool call"));
    }
    if !usage.is_empty() {
        s.push_str(&format!("usage     {}\n", usage.join(" · ")));
    }
    if let Some(id) = &o.session_id {
        s.push_str(&format!(
            "session   {} (`subpane retry {} --resume` continues it)\n",
            safe(id),
            env.run_id
        ));
    }
    s
}

/// What became of a `--worktree` attempt's worktree and branch, and where its changes are.
fn worktree_lines(
    env: &Envelope,
    wt: &crate::envelope::WorktreeInfo,
    paths: &AttemptPaths,
) -> String {
    let mut s = if wt.kept {
        format!(
            "worktree  kept at {} on branch {} (`subpane gc` removes it with its run, once the \
             run ended more than {} ago)\n",
            wt.path,
            wt.branch,
            app::GC_OLDER_THAN
        )
    } else if wt.branch_kept {
        format!(
            "worktree  removed; branch {} kept: it has commits to merge\n",
            wt.branch
        )
    } else {
        format!(
            "worktree  removed, with its branch {} (no commits)\n",
            wt.branch
        )
    };
    if env.artifacts.iter().any(|a| a.kind == "worktree_diff") {
        s.push_str(&format!(
            "changes   {} (`git apply --binary` applies it)\n",
            paths.worktree_diff().display()
        ));
    }
    s
}

/// What came back of a sandboxed program's branch, when something did or was refused, and
/// where refused commits are kept.
fn git_lines(g: &crate::envelope::GitCarry, paths: &AttemptPaths) -> String {
    use crate::envelope::CarryResult;
    let branch = crate::term::sanitize(g.branch.as_deref().unwrap_or("HEAD").as_bytes(), 200);
    let short =
        |id: Option<&str>| id.map_or("nothing".to_owned(), |i| i.chars().take(12).collect());
    let mut s = match g.result {
        CarryResult::Carried => format!(
            "git       {branch}: {} → {}, {} carried back\n",
            short(g.from.as_deref()),
            short(g.to.as_deref()),
            human::counted(g.commits.unwrap_or(0), "commit")
        ),
        CarryResult::Refused => format!(
            "git       {branch} not carried back: {}\n",
            crate::term::sanitize(g.why.as_deref().unwrap_or("refused").as_bytes(), 600)
        ),
        CarryResult::Failed => format!("git       {branch} not carried back: git failed (below)\n"),
        CarryResult::Unchanged => String::new(),
    };
    if let Some(k) = &g.kept {
        let bundle = paths.dir().join(k);
        s.push_str(&format!(
            "kept      git fetch --no-recurse-submodules {} {branch}:NAME\n",
            bundle.display()
        ));
    }
    s
}

/// The most characters of one line of a command's stdout in a summary.
const LINE_CHARS: usize = 1000;

/// The last `max` characters of `line`, after a note of how much came before them.
fn end_of_line(line: &str, max: usize) -> String {
    let n = line.chars().count();
    if n <= max {
        return line.to_owned();
    }
    let start = line.char_indices().nth(n - max).map_or(0, |(i, _)| i);
    format!("({start} bytes before) …{}", &line[start..])
}

/// A few lines for a human about a running attempt: since when, for how long, and what it
/// has done so far (from its `progress.json`).
pub fn human_running(doc: &StatusDoc, progress: Option<&Progress>) -> String {
    let mut s = format!(
        "run       {} (attempt {})\nstatus    {}\n",
        doc.run_id,
        doc.attempt,
        doc.status.as_str()
    );
    if let Some(t) = doc.started_at.as_deref() {
        s.push_str(&format!("started   {}\n", human::utc(t)));
        if let Some(d) = human::since(t, std::time::SystemTime::now()) {
            s.push_str(&format!("elapsed   {}\n", human::duration(d)));
        }
    }
    if let Some(p) = progress {
        if let Some(t) = p.stopped_since.as_deref() {
            s.push_str(&format!(
                "stopped   since {} (`subpane resume {}` continues it)\n",
                human::utc(t),
                doc.run_id
            ));
        }
        let so_far = human::so_far(&p.so_far);
        if !so_far.is_empty() {
            s.push_str(&format!("so far    {so_far}\n"));
        }
        if let Some(e) = &p.last_event {
            s.push_str(&format!("last      {}\n", human::last_event(e)));
        }
    }
    s.push_str(&format!(
        "attach    subpane attach {}\nfiles     {}\n",
        doc.run_id,
        doc.attempt_dir.display()
    ));
    s
}

/// The worst of several exit codes: failed (1) > timed out (124) > cancelled (130) >
/// still running (3) > completed (0).
pub fn worst_code(codes: impl IntoIterator<Item = i32>) -> i32 {
    exit_code::worst(codes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An envelope of `agent` whose output is what its adapter read from `transcript`.
    fn envelope_of(agent: crate::spec::AgentKind, transcript: &str) -> Envelope {
        let mut p = crate::adapter::adapter_for(agent).parser();
        for l in transcript.lines() {
            p.on_line(l.as_bytes());
        }
        let output = p.finish(b"").output;
        let mut v = serde_json::json!({
            "schema": "subpane.result/v1", "run_id": "ask-1", "attempt": 1,
            "agent": agent.as_str(), "argv": ["claude"], "cwd": "/w", "labels": {},
            "correlation_id": null, "status": "completed", "failure_kind": null,
            "exit_code": 0, "signal": null, "signals_sent": [], "started_at": null,
            "finished_at": null, "duration_ms": 1500, "terminal_event": "result",
            "lingered": false, "output": null,
            "filter": {"kept_lines": 0, "dropped_lines": 0, "dropped_bytes": 0,
                       "oversized_lines": 0, "plain_lines": 0},
            "cleanup": {"output_held_open": false, "killed_descendants": 0},
            "tmux": {"socket": null, "session": null, "pane_id": null},
            "sandbox": {"enabled": false}, "artifacts": []
        });
        v["output"] = serde_json::to_value(output).unwrap();
        serde_json::from_value(v).unwrap()
    }

    /// An agent's summary gives what its adapter read: tokens, cost, turns, tool calls, and
    /// the session id a `retry --resume` continues.
    #[test]
    fn an_agent_summary_gives_usage_and_its_session() {
        let t = include_str!("../../tests/fixtures/transcripts/claude/tool_write.jsonl");
        let env = envelope_of(crate::spec::AgentKind::Claude, t);
        let s = human_summary(
            &env,
            Path::new("/h/runs/ask-1/attempts/1"),
            app::Ends::default(),
        );
        assert!(s.contains("\nmodel     mock-model\n"), "{s}");
        assert!(
            s.contains(
                "\nusage     296 tokens (240 in, 16 out, 40 cache read) · $0.0013 · 2 turns · \
                 1 tool call\n"
            ),
            "{s}"
        );
        assert!(
            s.contains(
                "\nsession   b8219fec-aa51-42b3-9405-e2bd7108c64b (`subpane retry ask-1 \
                 --resume` continues it)\n"
            ),
            "{s}"
        );
        // A command reports none of it: no such lines.
        let mut cmd = env.clone();
        cmd.agent = crate::spec::AgentKind::Command;
        cmd.output = crate::envelope::Output::default();
        let s = human_summary(
            &cmd,
            Path::new("/h/runs/ask-1/attempts/1"),
            app::Ends::default(),
        );
        assert!(!s.contains("usage") && !s.contains("session"), "{s}");
    }

    /// A failed attempt's summary shows the end of its stderr, with a note when cut, and not a
    /// second time the one line its error already quotes.
    #[test]
    fn a_failed_summary_shows_the_end_of_stderr() {
        use crate::envelope::{FailureKind, Output, Status};
        let mut env = envelope_of(crate::spec::AgentKind::Claude, "");
        env.agent = crate::spec::AgentKind::Command;
        env.status = Status::Failed;
        env.failure_kind = Some(FailureKind::Exit);
        env.exit_code = Some(3);
        env.output = Output::default();
        env.output.push_error("stderr: last words");
        let dir = Path::new("/h/runs/ask-1/attempts/1");
        let with = |text: &str, cut| {
            human_summary(
                &env,
                dir,
                app::Ends {
                    stdout: None,
                    stderr: Some(app::OutputEnd {
                        text: text.into(),
                        cut,
                    }),
                },
            )
        };
        let s = with("first\nlast words\n", false);
        assert!(s.ends_with("\n\n(stderr)\nfirst\nlast words\n"), "{s}");
        let s = with("b\nlast words\n", true);
        assert!(
            s.ends_with(
                "\n(last 2 lines of stderr; `subpane logs ask-1 --stderr` has all)\nb\nlast words\n"
            ),
            "{s}"
        );
        let s = with("last words\n", false);
        assert_eq!(s.matches("last words").count(), 1, "{s}");
        assert!(s.contains("error     stderr: last words\n"), "{s}");
    }

    #[test]
    fn a_long_line_shows_its_end() {
        assert_eq!(end_of_line("short", 10), "short");
        assert_eq!(end_of_line("abcdefé", 3), "(4 bytes before) …efé");
    }

    #[test]
    fn worst_code_orders_outcomes() {
        assert_eq!(worst_code([0, 130, 124]), 124);
        assert_eq!(worst_code([0, 1, 124]), 1);
        assert_eq!(worst_code([0, 0]), 0);
        assert_eq!(worst_code([0, 3]), 3);
        assert_eq!(worst_code([]), 0);
    }
}
