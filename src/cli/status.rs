//! `subpane status RUN`: the current state; the envelope once finished.

use clap::Args;

use super::common::{CliError, find_run, print, print_json};
use super::output::{human_envelope, human_running, status_doc};
use crate::exit_code;
use crate::supervisor::{AttemptState, observe};

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The run id
    pub run: String,
    /// Print one JSON document: the envelope, or a status object while running
    #[arg(long)]
    pub json: bool,
    /// Look at this attempt instead of the latest
    #[arg(long, value_name = "N")]
    pub attempt: Option<u32>,
}

pub fn status(home: &crate::store::Home, a: StatusArgs) -> Result<i32, CliError> {
    let f = find_run(home, &a.run, a.attempt)?;
    let state = observe(&f.paths, &f.spec)?;
    match &state {
        AttemptState::Finished(env) => {
            if a.json {
                print_json(env);
            } else {
                print(&human_envelope(env, f.paths.dir()));
            }
            Ok(env.exit_code())
        }
        _ => {
            let doc = status_doc(&f.spec, f.paths.dir(), &state)
                .ok_or_else(|| CliError::failed("inconsistent state"))?;
            if a.json {
                print_json(&doc);
            } else {
                print(&human_running(&doc));
            }
            Ok(exit_code::STILL_RUNNING)
        }
    }
}
