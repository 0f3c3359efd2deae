//! `subpane attach RUN`: exec `tmux attach` on the private socket.

use std::os::unix::process::CommandExt;

use clap::Args;

use super::CliError;
use crate::app::{self, AttemptStatus};

#[derive(Debug, Args)]
pub struct AttachArgs {
    /// The run id
    pub run: String,
    /// Watch only: keys typed in the pane are ignored
    #[arg(long, short = 'r')]
    pub read_only: bool,
}

pub fn attach(home: &crate::store::Home, a: AttachArgs) -> Result<i32, CliError> {
    let f = app::find_run(home, &a.run, None)?;
    let t = app::tmux_for(home, &f.spec);
    let exists = t.has_session(&f.spec.tmux.session)?;
    if !exists {
        let msg = match app::attempt_status(&f.paths, &f.spec)? {
            AttemptStatus::Finished(env) => format!(
                "run {} has finished ({}) and its session is closed; read its output with `subpane logs {}`, or start runs with --keep-session to keep the pane",
                env.run_id,
                env.status.as_str(),
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
    let err = t.attach_command(&f.spec.tmux.session, a.read_only).exec();
    Err(CliError::Attach(err))
}
