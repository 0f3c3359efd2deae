//! `subpane attach RUN`: `tmux attach` on the private socket, then what became of the run.
//!
//! tmux shows only `[exited]` when the session of a run that ended closes under the
//! client: `attach` runs the client as a child (not by exec) and, when it returns, says how
//! the run ended, or that it goes on after a detach. `top` attaches the same way and comes
//! back to its screen.

use std::process::ExitStatus;

use clap::Args;

use super::CliError;
use crate::app::{self, AttemptStatus, Found};
use crate::store::Home;

#[derive(Debug, Args)]
pub struct AttachArgs {
    /// The run id, a unique start of it (or of its random part), or `@` for the newest run
    #[arg(add = super::docs::run_candidates())]
    pub run: String,
    /// Watch only: keys typed in the pane are ignored
    #[arg(long, short = 'r')]
    pub read_only: bool,
}

/// What a client started inside tmux is told (no `#`: tmux expands it).
const NESTED_NOTE: &str =
    "subpane: inside tmux, Ctrl-] detaches from this run (Ctrl-b d would detach your own session)";

pub fn attach(home: &Home, a: AttachArgs) -> Result<i32, CliError> {
    if let Some(r) = super::remote::of(home, &a.run)? {
        let mut words = vec!["attach", r.run_id.as_str()];
        if a.read_only {
            words.push("--read-only");
        }
        return super::remote::pass_through(home, &r, &words, true);
    }
    let f = app::find_run(home, &a.run, None)?;
    let status = attach_to(home, &f, a.read_only, false)?;
    println!("{}", after_attach(&f)?);
    Ok(status.code().unwrap_or(1))
}

/// Attaches this terminal to the run's pane until the client detaches or the session ends.
/// `quiet`: the client's own `[detached]` or `[exited]` line is not printed (it would stay
/// in the shell's scrollback under `top`, which says what became of the run itself). tmux
/// draws on the terminal of the client's stdin; its stdout only carries that line.
pub(super) fn attach_to(
    home: &Home,
    f: &Found,
    read_only: bool,
    quiet: bool,
) -> Result<ExitStatus, CliError> {
    let t = app::tmux_for(home, &f.spec);
    let exists = t.has_session(&f.spec.tmux.session)?;
    if !exists {
        let msg = match app::attempt_status(&f.paths, &f.spec)? {
            AttemptStatus::Finished(env) => format!(
                "run {} has finished ({}) and its session is closed; read its output with `subpane logs {}`, or start runs with --keep-session to keep the pane",
                env.run_id,
                env.outcome_words(),
                env.run_id
            ),
            _ => format!(
                "run {}'s tmux session {} was not found on {}",
                f.spec.run_id,
                f.spec.tmux.session,
                f.spec.tmux.socket.display()
            ),
        };
        return Err(CliError::NoPane(msg));
    }
    // Interactive, for as long as the person likes: no deadline.
    // In a person's own tmux, its prefix is caught by that tmux: Ctrl-b d would detach
    // their session, not this client. Said on the client's status line, once attached.
    let nested = std::env::var_os("TMUX").is_some_and(|v| !v.is_empty());
    let mut client = t.attach_command(
        &f.spec.tmux.session,
        read_only,
        nested.then_some(NESTED_NOTE),
    );
    if quiet {
        client.stdout(std::process::Stdio::null());
    }
    client.status().map_err(CliError::Attach)
}

/// What to say when the client returned: how the run ended, or that it goes on.
pub(super) fn after_attach(f: &Found) -> Result<String, CliError> {
    Ok(match app::attempt_status(&f.paths, &f.spec)? {
        AttemptStatus::Finished(env) => {
            let after = env
                .duration_ms
                .map(|d| {
                    format!(
                        " after {}",
                        super::human::duration(std::time::Duration::from_millis(d))
                    )
                })
                .unwrap_or_default();
            format!(
                "subpane: run {} {}{after}; `subpane status {}` has the summary",
                env.run_id,
                env.outcome_words(),
                env.run_id
            )
        }
        AttemptStatus::Live(doc) => format!(
            "subpane: detached; run {} goes on (`subpane attach {}` to come back)",
            doc.run_id, doc.run_id
        ),
    })
}
