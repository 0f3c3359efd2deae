//! `subpane cancel RUN`: SIGTERM to the attempt's process group, SIGKILL after the grace.

use clap::Args;

use super::common::{CliError, find_run, print, print_json};
use super::output::human_envelope;
use crate::spec::{millis, parse_duration};
use crate::supervisor::{self, AttemptState, WaitMode, WaitOptions, observe};

#[derive(Debug, Args)]
pub struct CancelArgs {
    /// The run id
    pub run: String,
    /// Time between SIGTERM and SIGKILL [default: the run's --grace]
    #[arg(long, value_name = "DUR")]
    pub grace: Option<String>,
    /// Print the envelope as JSON
    #[arg(long)]
    pub json: bool,
    /// Return once the request is delivered, without waiting for the attempt to end
    #[arg(long)]
    pub no_wait: bool,
}

pub fn cancel(home: &crate::store::Home, a: CancelArgs) -> Result<i32, CliError> {
    let grace = a
        .grace
        .as_deref()
        .map(|g| parse_duration("--grace", g))
        .transpose()
        .map_err(|e| CliError::invalid(e.to_string()))?;
    let f = find_run(home, &a.run, None)?;
    if let AttemptState::Finished(env) = observe(&f.paths, &f.spec)? {
        eprintln!(
            "subpane: run {} had already finished ({})",
            env.run_id,
            env.status.as_str()
        );
        if a.json {
            print_json(&env);
        }
        return Ok(0);
    }
    let grace_ms = grace.map(millis).unwrap_or(f.spec.limits.grace_ms);
    supervisor::request_cancel(&f.paths, grace_ms)?;
    if a.no_wait {
        if a.json {
            print_json(
                &serde_json::json!({"run_id": f.spec.run_id, "attempt": f.spec.attempt, "cancel_requested": true}),
            );
        }
        return Ok(0);
    }
    let targets = vec![(f.paths.clone(), f.spec.clone())];
    let out = supervisor::wait(
        &targets,
        &WaitOptions {
            mode: WaitMode::All,
            timeout: None,
            cancel_on_interrupt: false,
        },
    )?;
    let env = out
        .results
        .into_iter()
        .next()
        .flatten()
        .ok_or_else(|| CliError::failed("the attempt ended without an envelope"))?;
    if a.json {
        print_json(&env);
    } else {
        print(&human_envelope(&env, f.paths.dir()));
    }
    Ok(0)
}
