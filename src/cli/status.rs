//! `subpane status RUN`: the current state; the envelope once finished.

use clap::Args;

use super::CliError;
use super::common::{print, print_json};
use super::output::{human_envelope, human_running};
use crate::app::{self, AttemptStatus};
use crate::exit_code;

#[derive(Debug, Args)]
#[command(after_help = "\
Exit code: as the attempt's outcome once it finished (0 completed, 1 failed or lost, 124 timed
out, 130 cancelled); 3 while it is starting or running.")]
pub struct StatusArgs {
    /// The run id, a unique start of it (or of its random part), or `@` for the newest run
    #[arg(add = super::docs::run_candidates())]
    pub run: String,
    /// Print one JSON document: the envelope, or a subpane.status/v1 object while running
    #[arg(long)]
    pub json: bool,
    /// Look at this attempt instead of the latest
    #[arg(long, value_name = "N")]
    pub attempt: Option<u32>,
}

pub fn status(home: &crate::store::Home, a: StatusArgs) -> Result<i32, CliError> {
    if let Some(r) = super::remote::of(home, &a.run)? {
        return super::remote::status(home, &r, a.attempt, a.json);
    }
    let f = app::find_run(home, &a.run, a.attempt)?;
    match app::attempt_status(&f.paths, &f.spec)? {
        AttemptStatus::Finished(env) => {
            if a.json {
                print_json(&env);
            } else {
                print(&human_envelope(&env, &f.paths));
            }
            Ok(env.exit_code())
        }
        AttemptStatus::Live(doc) => {
            if a.json {
                print_json(&doc);
            } else {
                print(&human_running(&doc, app::progress(&f.paths).as_ref()));
            }
            Ok(exit_code::STILL_RUNNING)
        }
    }
}
