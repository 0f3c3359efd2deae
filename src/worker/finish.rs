//! The end: collect the facts, decide the outcome, write the envelope, show it in the pane.
//!
//! ```text
//!  kill what is left, reap, flush ─► collect: machine (stop, exit, leak) + adapter report
//!    ─► envelope::decide ─► (sandboxed repository: carry back the program's branch, a
//!       fast-forward only; what came back ─► facts.git)
//!    ─► (--worktree: status, diff, remove or keep; worktree.rs)
//!    ─► worker.json, output.txt ─► envelope::build ─► result.json (last; fsynced)
//!    ─► the end line in the pane ─► (sandboxed repository: its private view removed)
//!    ─► (run.rs, before the worker exits) fsync the other records
//! ```
//!
//! Common pitfalls:
//! * `result.json` is written last: its write syncs the directory for `worker.json` and
//!   `output.txt` too, and its appearance is what wakes every waiter. Their contents are
//!   fsynced after it, before the worker exits (a crash of the machine in between can leave
//!   them behind the envelope).
//! * The end must show even when the pane is behind; what it has not taken yet gives way.

use std::time::Duration;

use super::pane::Style;
use super::run::Worker;
use super::stop::Exit;
use crate::adapter::{AgentReport, adapter_for};
use crate::envelope::{self, CancelOrigin, Envelope, Facts, KillReason, Start, WorkerState};
use crate::fresh::now_rfc3339;
use crate::store::{self, StoreError};

impl Worker {
    pub(crate) fn finish(&mut self) {
        let report = self.collect();
        let (env, written) = self.decide_and_write(report);
        // The envelope is what waiters wait for: the other records are made durable after it
        // (the launch records now, on their thread), not before, where their flushes would
        // come first on the disk.
        self.records_now();
        self.show_end(&env, written);
        // After the envelope, which waiters wait for: only scratch is left.
        self.drop_git_view();
    }

    /// Ends what is left of the attempt and gathers every fact into `self.facts`.
    fn collect(&mut self) -> AgentReport {
        // The proxy serves only this attempt's program, which has ended.
        self.proxy = None;
        // Before the rest is killed: the server cancels the runs its clients waited for.
        self.stop_nest();
        // No server was started: the socket closes, and a late client is refused.
        self.nest_listener = None;
        // Nothing of the attempt may outlive it.
        let n = self.kill_descendants();
        self.facts.cleanup.killed_descendants += n;
        self.reap_all(Duration::from_secs(2));
        self.read_sandbox_end();
        self.stream.flush();
        self.count_losses();
        let f = &mut self.facts;
        if let Some(stop) = self.life.stop() {
            // A cancel asked as something else ends as that: as a timeout (a scheduler's
            // time limit passed: Slurm's job ends as `subpane::hosts::slurm` says), as the
            // budget of its fan-out group.
            let reason = match (stop.reason, &self.cancelled_by, &self.group_budget) {
                (KillReason::Cancel, Some((CancelOrigin::Timeout, _)), _) => KillReason::Timeout,
                (KillReason::Cancel, Some((CancelOrigin::Budget, _)), Some(_)) => {
                    KillReason::Budget
                }
                (r, ..) => r,
            };
            f.kill_reason = Some(reason);
            f.lingered = stop.reason == KillReason::Linger;
            f.signals_sent = stop.signals_sent();
            if reason == KillReason::Budget {
                f.budget = self
                    .stream
                    .budget_hit()
                    .or(self.group_budget.as_ref())
                    .cloned();
            }
        }
        f.cleanup.output_held_open = self.life.output_held_open();
        // A hold still on (an agent that ended held) counts up to now.
        let hold = self.life.hold();
        if hold.times > 0 {
            let held = hold.total_at(std::time::Instant::now());
            f.stopped_ms = Some(crate::spec::millis(held));
            f.stops = Some(hold.times);
        }
        // A sandbox helper that did not get as far as the program: its own exit says nothing
        // about the program, which never ran.
        let program_ran = f.sandbox_error.is_none() && f.spawn_error.is_none();
        match self.life.exit().filter(|_| program_ran) {
            Some(Exit::Code(code)) => f.exit_code = Some(code),
            Some(Exit::Signal(sig)) => f.signal = Some(sig.as_str().to_owned()),
            None => {}
        }
        let report = self.stream.report();
        self.name_self();
        let f = &mut self.facts;
        f.terminal_event = report.terminal_event.clone();
        f.finished_at = Some(now_rfc3339());
        f.state = Some(WorkerState::Finished);
        f.pane_lines_skipped = self.pane.total_skipped;
        report
    }

    /// Lines the logs could not take are not kept lines: they move to `lost_lines`.
    fn count_losses(&mut self) {
        let [(_, events), (_, stdout), (_, stderr)] = self.stream.lost();
        let f = &mut self.facts.filter;
        let lines = |l: Option<&super::logfile::Lost>| l.map_or(0, |l| l.lines);
        f.kept_lines = f.kept_lines.saturating_sub(lines(events));
        f.plain_lines = f.plain_lines.saturating_sub(lines(stdout));
        f.lost_lines = lines(events) + lines(stdout);
        f.lost_stderr_bytes = stderr.map_or(0, |l| l.bytes);
    }

    /// Decides, ends the worktree (if any), writes `output.txt` and `worker.json`, and
    /// writes `result.json`.
    fn decide_and_write(&mut self, report: AgentReport) -> (Envelope, Result<bool, StoreError>) {
        let start = if self.facts.sandbox_error.is_some() {
            Start::SandboxFailed
        } else if self.facts.spawn_error.is_some() {
            Start::SpawnFailed
        } else {
            Start::Ran
        };
        let facts = Facts {
            start,
            kill_reason: self.facts.kill_reason,
            exit_code: self.facts.exit_code,
            signal: match self.life.exit() {
                Some(Exit::Signal(s)) => Some(s as i32),
                _ => None,
            },
            expects_terminal_event: adapter_for(self.spec.agent).expects_terminal_event(),
            terminal_event_seen: report.terminal_event.is_some(),
            model_error: report.model_error,
            usage_limit: report.output.usage_limit.is_some(),
            limit_hit: self.facts.sandbox_limit_hit.is_some(),
        };
        let outcome = envelope::decide(&facts);
        let mut output = report.output;
        if let Some(e) = &self.facts.sandbox_error {
            output.push_error(e.clone());
        }
        if let Some(e) = &self.facts.spawn_error {
            output.push_error(e.clone());
        }
        for (name, lost) in self.stream.lost() {
            if let Some(l) = lost.filter(|l| l.bytes > 0) {
                let what = if l.lines > 0 {
                    format!("{} lines ({} bytes)", l.lines, l.bytes)
                } else {
                    format!("{} bytes", l.bytes)
                };
                let why = l.error.as_deref().unwrap_or("unknown error");
                output.push_error(format!(
                    "{name}: {what} could not be written ({why}); they are missing from the log"
                ));
            }
        }
        // What stopped it: a cancel (who asked), or its timeout.
        self.facts.cancelled_by = match (outcome.status, outcome.failure_kind) {
            (envelope::Status::Cancelled, _) => {
                let (origin, words) = self
                    .cancelled_by
                    .clone()
                    .unwrap_or((CancelOrigin::Cancel, CancelOrigin::Cancel.words().into()));
                output.push_error(format!("cancelled by {words}"));
                Some(origin)
            }
            (_, Some(envelope::FailureKind::Timeout | envelope::FailureKind::IdleTimeout)) => {
                Some(CancelOrigin::Timeout)
            }
            _ => None,
        };
        if let Some(b) = self
            .facts
            .budget
            .as_ref()
            .filter(|_| outcome.failure_kind == Some(envelope::FailureKind::Budget))
        {
            output.push_error(format!("stopped: {}", b.words()));
        }
        if self.facts.kill_reason == Some(KillReason::PaneClosed) {
            output.push_error("the pane closed under the worker (its tmux session or server was killed); the program was stopped");
        }
        if outcome.failure_kind == Some(envelope::FailureKind::Exit) && output.errors.is_empty() {
            // A failure should say why: the program's last words on stderr usually do.
            if let Some(last) = self.stream.last_stderr_line() {
                output.push_error(format!("stderr: {last}"));
            }
        }
        if outcome.status != envelope::Status::Completed && self.spec.sandbox.enabled {
            let tail = String::from_utf8_lossy(self.stream.stderr_tail()).into_owned();
            let texts = output
                .errors
                .iter()
                .map(String::as_str)
                .chain([tail.as_str()]);
            if let Some(hint) = envelope::network_hint(&self.spec.sandbox.network, texts) {
                output.push_error(hint);
            }
        }
        // The program's commits come back first: the worktree's record and branch show them.
        self.carry_git(&mut output);
        // Before worker.json: what became of the worktree is one of the worker's facts.
        self.end_worktree(outcome.status, &mut output);
        // The agent's transcripts kept in subpane's home hold what it saw (the agent is gone).
        if !self.masker.is_empty() {
            let sandbox = &self.spec.sandbox;
            let state = sandbox
                .agent_state
                .as_ref()
                .filter(|_| sandbox.enabled)
                .map(|s| s.dir.as_path());
            let adapter = adapter_for(self.spec.agent);
            for dir in adapter.transcript_dirs(&self.spec.argv, state) {
                for why in super::transcripts::mask_below(&dir, &self.masker) {
                    output.push_error(format!("the agent's transcript was not masked: {why}"));
                }
            }
        }
        // What the agent said, its errors and its usage limit's message: the program's words,
        // which may hold a secret (the parser read it unmasked).
        if !self.masker.is_empty() {
            let m = &self.masker;
            let mask = |s: &mut String| {
                if let std::borrow::Cow::Owned(masked) = m.text(s) {
                    *s = masked;
                }
            };
            output.final_text.iter_mut().for_each(mask);
            output.errors.iter_mut().for_each(mask);
            output.model.iter_mut().for_each(mask);
            if let Some(limit) = output.usage_limit.as_mut() {
                mask(&mut limit.message);
                limit.kind.iter_mut().for_each(mask);
            }
        }
        // Both are renamed before result.json, whose write fsyncs the directory once for all
        // three; their contents are fsynced after it (`Worker::records_durable`): each fsync
        // is a disk flush between the program's exit and the envelope.
        if let Some(text) = &output.final_text {
            let _ = store::write_atomic_unsynced(&self.paths.output(), text.as_bytes());
        }
        if self.spare.is_none() && self.agent.is_none() {
            // Not read when the start failed before it: its values must not stay on disk.
            // (A program that started was given them: the file became worker.json.)
            self.spare = store::take_env_file(&self.paths.env_file())
                .ok()
                .map(|(_, spare)| spare);
        }
        self.save_facts();
        self.stream.flush();
        let written = self.stream.written();
        let (artifacts, note) = store::collect_artifacts(&self.paths, &self.spec, &written);
        if let Some(n) = note {
            output.push_error(n);
        }
        let env = envelope::build(&self.spec, &self.facts, output, outcome, artifacts);
        let write = store::write_result(&self.paths, &env);
        (env, write)
    }

    /// The end line in the pane, then the last flush.
    fn show_end(&mut self, env: &Envelope, write: Result<bool, StoreError>) {
        let dur = env
            .duration_ms
            .map(|d| format!(" · {:.1}s", d as f64 / 1000.0))
            .unwrap_or_default();
        // The end must show even when the pane is behind: what it has not taken yet gives way.
        self.pane.make_room_for_final();
        self.pane.line(Style::Dim, &"─".repeat(60));
        match write {
            Ok(_) => {
                let (mark, style) = if env.status == envelope::Status::Completed {
                    ("✔", Style::Green)
                } else {
                    ("✘", Style::Red)
                };
                self.pane
                    .line(style, &format!("{mark} {}{dur}", env.outcome_words()));
            }
            Err(e) => self.pane.line(
                Style::Red,
                &format!("subpane: cannot write the result: {e}"),
            ),
        }
        if self.spec.keep_session {
            self.pane.line(
                Style::Dim,
                "session kept: detach with Ctrl-b d; `subpane gc` removes it",
            );
        }
        // result.json is written: nobody waits on this, so a kept pane may take its time.
        let bound = if self.spec.keep_session {
            Duration::from_secs(10)
        } else {
            Duration::from_secs(2)
        };
        self.pane.flush_final(bound);
    }
}
