//! Assembling the envelope from the spec and the worker's facts. Pure.

use super::WorkerFacts;
use super::{Envelope, Outcome, Output, RESULT_SCHEMA, SandboxInfo, TmuxInfo};
use crate::envelope::Artifact;
use crate::spec::AttemptSpec;

/// Milliseconds between two RFC 3339 timestamps, when both parse and are ordered.
pub fn duration_between(start: Option<&str>, end: Option<&str>) -> Option<u64> {
    let s = humantime::parse_rfc3339(start?).ok()?;
    let e = humantime::parse_rfc3339(end?).ok()?;
    e.duration_since(s)
        .ok()
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The envelope of a finished attempt.
pub fn build(
    spec: &AttemptSpec,
    facts: &WorkerFacts,
    output: Output,
    outcome: Outcome,
    artifacts: Vec<Artifact>,
) -> Envelope {
    let tmux = TmuxInfo {
        socket: facts
            .tmux
            .socket
            .clone()
            .or_else(|| Some(spec.tmux.socket.display().to_string())),
        session: facts
            .tmux
            .session
            .clone()
            .or_else(|| Some(spec.tmux.session.clone())),
        pane_id: facts.tmux.pane_id.clone(),
    };
    Envelope {
        schema: RESULT_SCHEMA.to_owned(),
        run_id: spec.run_id.to_string(),
        attempt: spec.attempt,
        agent: spec.agent,
        argv: spec.argv.clone(),
        cwd: spec.cwd.display().to_string(),
        labels: spec.labels.clone(),
        correlation_id: spec.correlation_id.clone(),
        status: outcome.status,
        failure_kind: outcome.failure_kind,
        exit_code: facts.exit_code,
        signal: facts.signal.clone(),
        signals_sent: facts.signals_sent.clone(),
        started_at: facts.started_at.clone(),
        finished_at: facts.finished_at.clone(),
        duration_ms: duration_between(facts.started_at.as_deref(), facts.finished_at.as_deref()),
        terminal_event: facts.terminal_event.clone(),
        lingered: facts.lingered,
        output,
        filter: facts.filter.clone(),
        cleanup: facts.cleanup.clone(),
        tmux,
        sandbox: SandboxInfo {
            enabled: spec.sandbox.enabled,
            policy: spec.sandbox.enabled.then(|| spec.sandbox.clone()),
            enforced: facts.sandbox.clone(),
            limit_hit: facts.sandbox_limit_hit,
        },
        artifacts,
        group: spec.group.clone(),
        host: None,
        parent_run: spec.lineage.as_ref().map(|l| l.parent_run.clone()),
        depth: spec.lineage.as_ref().map(|l| l.depth),
        resumed_from: spec.resumed_from,
        cancelled_by: facts.cancelled_by,
        worktree: facts.worktree.clone(),
        git: facts.git.clone(),
        budget: facts.budget.clone(),
        secrets: facts.secrets.clone(),
        input: facts.input.clone(),
        stopped_ms: facts.stopped_ms,
        stops: facts.stops,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_from_timestamps() {
        assert_eq!(
            duration_between(
                Some("2026-11-30T03:39:43.100Z"),
                Some("2026-11-30T03:39:44.350Z")
            ),
            Some(1250)
        );
        assert_eq!(
            duration_between(None, Some("2026-11-30T03:39:44.350Z")),
            None
        );
        assert_eq!(
            duration_between(Some("junk"), Some("2026-11-30T03:39:44.350Z")),
            None
        );
    }
}
