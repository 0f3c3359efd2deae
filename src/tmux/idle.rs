//! The private server's own end: it exits after `SUBPANE_TMUX_IDLE` (default 10 minutes)
//! with no session, and it is started on its own, so its command line names no run.
//!
//! ```text
//!  new-session ─► no server on the socket (connect fails)
//!                   └► tmux start-server ; run-shell -b -C -d IDLE "if idle: kill-server"
//!  every session-closed (hook in the config):
//!     @subpane-gen += 1 ; run-shell -C -d IDLE "if no session and @subpane-gen unchanged:
//!                                               kill-server"
//! ```
//!
//! tmux keeps the timers (no process sleeps for them). A timer acts only if no session
//! exists and no session closed since it was set (the generation), so the server goes
//! `IDLE` after the last session closed, never sooner. `gc` still stops it at once.
//! The hook's timer runs in the background (`-b`): a command that waits holds the closed
//! session's pane, and with it the pane's terminal, so a killed session's program would not
//! get its hang-up.
//!
//! Common pitfalls:
//! * tmux's `-d` takes whole seconds (a fraction reads as 0) and no format: the delay is
//!   written into the config (`config`), rounded up.
//! * `run-shell -d` in a config file does not wait: the first timer is set by the client
//!   that starts the server.
//! * A server forked by `new-session` keeps that client's command line in `ps` (a run's
//!   worker command): the server is started by its own `start-server` client first.

use std::ffi::OsString;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use super::{TIME_LIMIT, Tmux, TmuxError};
use crate::command::Limit;

/// How long the server stays with no session, unless `SUBPANE_TMUX_IDLE` says otherwise.
pub const DEFAULT_IDLE: Duration = Duration::from_secs(600);

static IDLE: Limit = Limit::new(DEFAULT_IDLE);

/// Sets how long a server this process starts (or configures) stays with no session.
pub fn set_idle(idle: Duration) {
    IDLE.set(idle);
}

/// `SUBPANE_TMUX_IDLE` (a duration: `30s`, `10m`), or [`DEFAULT_IDLE`] when unset or empty.
pub fn idle_from_env() -> Result<Duration, crate::spec::DurationError> {
    match std::env::var_os("SUBPANE_TMUX_IDLE").filter(|v| !v.is_empty()) {
        Some(v) => crate::spec::parse_positive_duration("SUBPANE_TMUX_IDLE", &v.to_string_lossy()),
        None => Ok(DEFAULT_IDLE),
    }
}

/// Whole seconds of `idle`, rounded up (tmux's `-d` takes whole seconds).
fn secs(idle: Duration) -> u64 {
    idle.as_millis().div_ceil(1000).max(1) as u64
}

/// The tmux command that stops the server if it is still idle: no session, and no session
/// closed since it was set (`##` is a `#` once tmux expands the command when it sets the
/// timer; the generation is read then, the rest when the timer fires).
const KILL_IF_IDLE: &str =
    "if-shell -F '##{&&:##{==:##{S:x},},##{==:##{@subpane-gen},#{@subpane-gen}}}' kill-server";

/// The key that detaches a client from subpane's server, with no prefix (tmux's name).
pub const DETACH_KEY: &str = "C-]";

/// How the pane's header and `attach` name the way out.
pub const DETACH_HINT: &str = "Ctrl-] detaches (or Ctrl-b d outside tmux)";

/// The status line's reminder (no `#`: tmux expands the status line).
const STATUS_HINT: &str = "Ctrl-] detach · Ctrl-C twice: cancel";

/// The config the private server starts with (never the user's `~/.tmux.conf`), for a server
/// that exits after `idle` with no session.
pub fn config(idle: Duration) -> String {
    let d = secs(idle);
    let kill = KILL_IF_IDLE.replace('\'', "\\\"");
    let hint = STATUS_HINT;
    format!(
        "\
# subpane's private tmux server. Written by subpane; changes are overwritten.
# Stays up between attempts (starting a server costs more than the rest of an attempt's
# start), and exits after {d}s with no session (SUBPANE_TMUX_IDLE); `subpane gc` stops it
# at once when no session is left.
set -g exit-empty off
set -g @subpane-gen 0
set-hook -g session-closed 'set -gF @subpane-gen \"#{{e|+:#{{@subpane-gen}},1}}\" ; run-shell -b -C -d {d} \"{kill}\"'
set -g history-limit 20000
set -g status-style 'bg=colour236,fg=colour250'
set -g status-left '[subpane] '
set -g status-left-length 20
set -g status-right '{hint} · #{{session_name}} '
set -g status-right-length 90
# Detach without the prefix: inside a person's own tmux, C-b reaches that tmux, not this one.
bind-key -n {DETACH_KEY} detach-client
set -g mouse off
set -g escape-time 10
set -g set-titles off
set -g allow-rename off
set -g automatic-rename off
"
    )
}

/// The config for the idle time in force (see [`set_idle`]).
pub fn current_config() -> String {
    config(IDLE.get())
}

/// `start-server`, with the first idle timer.
fn start_args() -> Vec<OsString> {
    let d = secs(IDLE.get()).to_string();
    [
        "start-server",
        ";",
        "run-shell",
        "-b",
        "-C",
        "-d",
        &d,
        KILL_IF_IDLE,
    ]
    .into_iter()
    .map(OsString::from)
    .collect()
}

impl Tmux {
    /// Starts the server on its own if none answers on the socket, so that no run's
    /// command line becomes the server's (see the module docs). A server that answers is
    /// left alone; connecting costs microseconds.
    pub fn ensure_server(&self) -> Result<(), TmuxError> {
        if UnixStream::connect(self.socket.path()).is_ok() {
            return Ok(());
        }
        let out = self.output("start-server", &start_args(), TIME_LIMIT.get())?;
        if out.status.success() {
            Ok(())
        } else {
            Err(super::failed("start-server".into(), &out))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_sets_the_idle_exit_in_whole_seconds() {
        let c = config(Duration::from_millis(1500));
        assert!(c.contains("set -g exit-empty off\n"), "{c}");
        assert!(
            c.contains("run-shell -b -C -d 2 \"if-shell -F \\\"##{&&:##{==:##{S:x},},"),
            "{c}"
        );
        assert!(config(DEFAULT_IDLE).contains("-d 600 "));
        assert!(c.contains("#{e|+:#{@subpane-gen},1}"), "{c}");
        assert!(c.contains("##{==:##{@subpane-gen},#{@subpane-gen}}"), "{c}");
        assert_eq!(secs(Duration::from_millis(1)), 1);
        assert_eq!(secs(Duration::from_secs(60)), 60);
    }
}
