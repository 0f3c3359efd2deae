//! [`CliError`]: every way a verb fails, and the one place that turns it into an exit code
//! and a message.
//!
//! ```text
//!  app::Error ──┐
//!  mcp::ServeError ──┼─► CliError ─► exit_code() ─► main: "subpane: error: {message}", exit
//!  the verb's own (a file, a terminal, tmux attach) ──┘
//! ```
//!
//! The documented codes of an error: 2 when the input was refused and nothing was started,
//! 1 for anything that went wrong on the way. (0, 124 and 130 are outcomes of runs, never
//! errors.)

use crate::exit_code;

/// Why a verb did not do what was asked. Messages are lowercase and say what to do next.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// In the command line's words: fields spelt as flags.
    #[error("{}", .0.render(crate::app::Spell::Flag))]
    App(#[from] crate::app::Error),
    /// The MCP server could not start or stopped.
    #[error(transparent)]
    Mcp(#[from] crate::mcp::ServeError),
    /// No subpane home could be found or made absolute.
    #[error("{0}")]
    Home(String),
    /// A variable of the environment (`SUBPANE_TMUX_TIMEOUT`) is not a duration.
    #[error(transparent)]
    Env(crate::spec::DurationError),
    /// A flag's value is not valid.
    #[error("{0}")]
    Flag(String),
    /// The fan-out's tasks could not be read (`what`: a file, or stdin).
    #[error("cannot read {what}: {source}")]
    ReadTasks {
        what: String,
        source: std::io::Error,
    },
    /// A log file could not be copied to stdout.
    #[error("cannot print {path}: {source}")]
    Print {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    /// tmux could not be asked about the run's session, or attached to it.
    #[error(transparent)]
    Tmux(#[from] crate::tmux::TmuxError),
    #[error("cannot run tmux attach: {0}")]
    Attach(#[source] std::io::Error),
    /// The run has no pane to attach to (`why` says what to do instead).
    #[error("{0}")]
    NoPane(String),
    /// The wait for the run stopped before it ended.
    #[error("stopped waiting for run {0}")]
    StoppedWaiting(String),
    /// `top` was started without a terminal to draw on.
    #[error("top needs a terminal; `subpane ls` (or `ls --json`) lists the runs")]
    NoTerminal,
    /// The terminal could not be set up for `top` (`what`: what was being done).
    #[error("cannot {what}: {source}")]
    Terminal {
        what: &'static str,
        source: std::io::Error,
    },
    /// A `hosts` verb failed (`is_invalid`: the input was refused).
    #[error(transparent)]
    Hosts(crate::hosts::HostsError),
    /// The worker of this sandbox refused a nested run, with the exit code it gave.
    #[error("{message}")]
    Refused { exit_code: i32, message: String },
}

impl From<crate::app::Invalid> for CliError {
    fn from(e: crate::app::Invalid) -> Self {
        CliError::App(e.into())
    }
}

impl CliError {
    /// The documented exit code of this error.
    pub fn exit_code(&self) -> i32 {
        if let CliError::Refused { exit_code, .. } = self {
            return if *exit_code == exit_code::INVALID {
                exit_code::INVALID
            } else {
                exit_code::FAILED
            };
        }
        let invalid = match self {
            CliError::App(e) => e.nothing_started(),
            CliError::Home(_) | CliError::Env(_) | CliError::Flag(_) | CliError::NoTerminal => true,
            CliError::ReadTasks { .. } => true,
            CliError::Hosts(e) => e.is_invalid(),
            CliError::Mcp(_)
            | CliError::Print { .. }
            | CliError::Tmux(_)
            | CliError::Attach(_)
            | CliError::NoPane(_)
            | CliError::StoppedWaiting(_)
            | CliError::Terminal { .. }
            | CliError::Refused { .. } => false,
        };
        if invalid {
            exit_code::INVALID
        } else {
            exit_code::FAILED
        }
    }
}

impl From<crate::spec::DurationError> for CliError {
    fn from(e: crate::spec::DurationError) -> Self {
        CliError::App(e.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_input_is_2_and_the_rest_is_1() {
        let e: CliError = crate::app::Error::invalid("bad").into();
        assert_eq!(e.exit_code(), 2);
        let e: CliError = crate::app::Error::NoEnvelope.into();
        assert_eq!(e.exit_code(), 1);
        let e: CliError = crate::spec::parse_duration("--timeout", "5")
            .unwrap_err()
            .into();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("--timeout"), "{e}");
        assert_eq!(CliError::StoppedWaiting("r".into()).exit_code(), 1);
    }
}
