//! Shared pieces of the verbs: errors, finding runs and attempts, the tmux client.

use std::io::Write;

use crate::exit_code;
use crate::spec::{AttemptSpec, RunId, RunRecord};
use crate::store::{self, AttemptPaths, Home};
use crate::tmux::{Socket, Tmux};

/// An error that ends the command with a documented exit code.
#[derive(Debug)]
pub struct CliError {
    pub code: i32,
    pub message: String,
}

impl CliError {
    /// Invalid input: exit 2, nothing was started.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self {
            code: exit_code::INVALID,
            message: message.into(),
        }
    }
    /// Anything else that went wrong: exit 1.
    pub fn failed(message: impl Into<String>) -> Self {
        Self {
            code: exit_code::FAILED,
            message: message.into(),
        }
    }
    pub fn report(&self) {
        let _ = writeln!(std::io::stderr(), "subpane: error: {}", self.message);
    }
}

impl From<crate::supervisor::SuperviseError> for CliError {
    fn from(e: crate::supervisor::SuperviseError) -> Self {
        CliError::failed(e.to_string())
    }
}

impl From<store::StoreError> for CliError {
    fn from(e: store::StoreError) -> Self {
        CliError::failed(e.to_string())
    }
}

/// A run with its latest (or chosen) attempt.
pub struct Found {
    /// `run.json` (the attempt list; `retry` appends to it).
    #[allow(dead_code)]
    pub record: RunRecord,
    pub paths: AttemptPaths,
    pub spec: AttemptSpec,
}

/// Finds a run by id; `attempt` picks one, else the latest.
pub fn find_run(home: &Home, raw_id: &str, attempt: Option<u32>) -> Result<Found, CliError> {
    let id = RunId::parse(raw_id).map_err(|e| CliError::invalid(e.to_string()))?;
    let record = store::read_run(home, &id)?.ok_or_else(|| {
        CliError::invalid(format!(
            "no run `{id}` in {}; `subpane ls` lists the runs there",
            home.runs_dir().display()
        ))
    })?;
    let n = match attempt {
        Some(n) => {
            if !record.attempts.iter().any(|a| a.attempt == n) {
                return Err(CliError::invalid(format!("run `{id}` has no attempt {n}")));
            }
            n
        }
        None => record.attempts.iter().map(|a| a.attempt).max().unwrap_or(1),
    };
    let paths = home.attempt(&id, n);
    let spec: AttemptSpec = store::read_json(&paths.spec())?.ok_or_else(|| {
        CliError::failed(format!(
            "{} is missing; the run's record is damaged",
            paths.spec().display()
        ))
    })?;
    Ok(Found {
        record,
        paths,
        spec,
    })
}

/// The tmux client for an attempt's recorded socket.
pub fn tmux_for(home: &Home, spec: &AttemptSpec) -> Tmux {
    Tmux::new(Socket::from_path(&spec.tmux.socket), home.tmux_conf())
}

/// Writes stdout text; a closed pipe (e.g. `| head`) is not an error.
pub fn print(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

/// One JSON document on stdout.
pub fn print_json<T: serde::Serialize>(value: &T) {
    let mut s = serde_json::to_string_pretty(value).unwrap_or_else(|_| "null".into());
    s.push('\n');
    print(&s);
}

/// Whether colour may be used on stdout.
pub fn color_stdout() -> bool {
    use std::io::IsTerminal;
    std::env::var_os("NO_COLOR").is_none() && std::io::stdout().is_terminal()
}
