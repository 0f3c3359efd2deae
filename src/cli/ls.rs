//! `subpane ls`: all runs, newest first.

use clap::{Args, ValueEnum};
use serde::Serialize;

use super::common::{CliError, color_stdout, print, print_json};
use crate::spec::AttemptSpec;
use crate::store::{self, Home};
use crate::supervisor::{AttemptState, observe};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum StatusFilter {
    Starting,
    Running,
    Completed,
    Failed,
    Cancelled,
}

#[derive(Debug, Args)]
pub struct LsArgs {
    /// Print a JSON array
    #[arg(long)]
    pub json: bool,
    /// Only runs in this state
    #[arg(long, value_enum, value_name = "S")]
    pub status: Option<StatusFilter>,
}

/// One row of `ls --json`.
///
/// ```json
/// {"run_id": "build-42", "attempt": 1, "agent": "command", "status": "failed",
///  "failure_kind": "exit", "exit_code": 2, "created_at": "…", "started_at": "…",
///  "finished_at": "…", "duration_ms": 2333, "labels": {}, "correlation_id": null,
///  "group": null, "what": "make test"}
/// ```
#[derive(Debug, Serialize)]
pub struct Row {
    pub run_id: String,
    pub attempt: u32,
    pub agent: crate::spec::AgentKind,
    pub status: String,
    pub failure_kind: Option<crate::envelope::FailureKind>,
    pub exit_code: Option<i32>,
    pub created_at: String,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    pub duration_ms: Option<u64>,
    pub labels: std::collections::BTreeMap<String, String>,
    pub correlation_id: Option<String>,
    pub group: Option<String>,
    /// The command line or the start of the task, for people.
    pub what: String,
}

fn what(spec: &AttemptSpec) -> String {
    let s = match &spec.task {
        Some(t) => t.prompt.clone(),
        None => spec
            .argv
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let a = if i == 0 {
                    a.rsplit('/').next().unwrap_or(a)
                } else {
                    a
                };
                shell_escape::escape(a.into()).into_owned()
            })
            .collect::<Vec<_>>()
            .join(" "),
    };
    let one_line: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    crate::term::sanitize(one_line.as_bytes(), 60)
}

pub fn ls(home: &Home, a: LsArgs) -> Result<i32, CliError> {
    let mut rows = Vec::new();
    for run in store::list_runs(home) {
        let Some(n) = run.record.attempts.iter().map(|x| x.attempt).max() else {
            continue;
        };
        let paths = home.attempt(&run.id, n);
        let Ok(Some(spec)) = store::read_json::<AttemptSpec>(&paths.spec()) else {
            continue;
        };
        let state = observe(&paths, &spec)?;
        let mut row = Row {
            run_id: run.id.to_string(),
            attempt: n,
            agent: spec.agent,
            status: String::new(),
            failure_kind: None,
            exit_code: None,
            created_at: run.record.created_at.clone(),
            started_at: None,
            finished_at: None,
            duration_ms: None,
            labels: run.record.labels.clone(),
            correlation_id: run.record.correlation_id.clone(),
            group: run.record.group.clone(),
            what: what(&spec),
        };
        match state {
            AttemptState::Finished(env) => {
                row.status = env.status.as_str().to_owned();
                row.failure_kind = env.failure_kind;
                row.exit_code = env.exit_code;
                row.started_at = env.started_at.clone();
                row.finished_at = env.finished_at.clone();
                row.duration_ms = env.duration_ms;
            }
            AttemptState::Running(r) => {
                row.status = "running".into();
                row.started_at = r.started_at;
            }
            AttemptState::Starting { .. } => row.status = "starting".into(),
        }
        if let Some(f) = a.status {
            let want = format!("{f:?}").to_lowercase();
            if row.status != want {
                continue;
            }
        }
        rows.push(row);
    }
    if a.json {
        print_json(&rows);
        return Ok(0);
    }
    if rows.is_empty() {
        eprintln!("subpane: no runs in {}", home.runs_dir().display());
        return Ok(0);
    }
    let color = color_stdout();
    let id_w = rows
        .iter()
        .map(|r| r.run_id.len())
        .max()
        .unwrap_or(6)
        .max(6);
    let mut out = format!(
        "{:id_w$}  {:9}  {:7}  {:20}  {:>9}  {}\n",
        "RUN", "STATUS", "AGENT", "STARTED", "DURATION", "WHAT"
    );
    for r in &rows {
        let status = match (&r.failure_kind, r.status.as_str()) {
            (Some(k), "failed") if *k != crate::envelope::FailureKind::Exit => {
                k.as_str().to_owned()
            }
            _ => r.status.clone(),
        };
        let painted = if color {
            let c = match r.status.as_str() {
                "completed" => "32",
                "failed" => "31",
                "cancelled" => "33",
                _ => "36",
            };
            format!("\x1b[{c}m{status:9}\x1b[0m")
        } else {
            format!("{status:9}")
        };
        let started = r
            .started_at
            .as_deref()
            .unwrap_or(&r.created_at)
            .get(..19)
            .unwrap_or("")
            .replace('T', " ");
        let dur = r
            .duration_ms
            .map(|d| format!("{:.1}s", d as f64 / 1000.0))
            .unwrap_or_else(|| "-".into());
        out.push_str(&format!(
            "{:id_w$}  {painted}  {:7}  {:20}  {:>9}  {}\n",
            r.run_id,
            r.agent.as_str(),
            started,
            dur,
            r.what
        ));
    }
    print(&out);
    Ok(0)
}
