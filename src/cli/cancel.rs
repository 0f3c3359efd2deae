//! `subpane cancel RUN`: SIGTERM to the attempt's process group, SIGKILL after the grace.

use clap::Args;

use super::CliError;
use super::common::{print, print_json};
use super::output::human_envelope;
use crate::app::{self, CancelOutcome};
use crate::spec::{millis, parse_duration};

#[derive(Debug, Args)]
#[command(after_help = "\
Exit code: 0 when the attempt was cancelled or had already finished (the message says which);
1 when the request could not be delivered. Cancelling twice kills at once.")]
pub struct CancelArgs {
    /// The run id, a unique start of it (or of its random part), or `@` for the newest run
    #[arg(add = super::docs::run_candidates())]
    pub run: String,
    /// Time between SIGTERM and SIGKILL [default: the run's --grace]
    #[arg(long, value_name = "DUR")]
    pub grace: Option<String>,
    /// Print the envelope as JSON (with --no-wait: {"run_id", "attempt", "cancel_requested"})
    #[arg(long)]
    pub json: bool,
    /// Return once the request is delivered, without waiting for the attempt to end
    #[arg(long)]
    pub no_wait: bool,
    /// Who asks, as the envelope's `cancelled_by` says it (internal: a fan-out here
    /// cancelling its task on a host gives `sibling` or `fanout`)
    #[arg(long, hide = true, value_name = "ORIGIN", value_parser = origin)]
    pub by: Option<crate::envelope::CancelOrigin>,
}

fn origin(s: &str) -> Result<crate::envelope::CancelOrigin, String> {
    serde_json::from_value(serde_json::Value::String(s.to_owned()))
        .map_err(|_| format!("`{s}` is not a cancel origin"))
}

pub fn cancel(home: &crate::store::Home, a: CancelArgs) -> Result<i32, CliError> {
    if let Some(r) = super::remote::of(home, &a.run)? {
        if let Some(g) = &a.grace {
            parse_duration("--grace", g)?;
        }
        return super::remote::cancel(home, &r, a.grace.as_deref(), a.no_wait, a.by, a.json);
    }
    let grace = a
        .grace
        .as_deref()
        .map(|g| parse_duration("--grace", g))
        .transpose()?;
    let f = app::find_run(home, &a.run, None)?;
    let by = a.by.unwrap_or(crate::envelope::CancelOrigin::Cancel);
    let requested = match app::cancel_by(&f, grace.map(millis), by)? {
        CancelOutcome::AlreadyFinished(env) => {
            eprintln!(
                "subpane: run {} had already finished ({})",
                env.run_id,
                env.status.as_str()
            );
            // The driver of a group that died with work left: stop the group, as it would.
            if let Some(n) = app::fanout::revive::stop_if_dead(home, &f)? {
                eprintln!(
                    "subpane: {}",
                    app::fanout::revive::stopped_words(f.spec.run_id.as_str(), n)
                );
            }
            if a.json {
                print_json(&env);
            }
            return Ok(0);
        }
        CancelOutcome::Requested(r) => r,
    };
    if a.no_wait {
        if a.json {
            print_json(&requested);
        }
        return Ok(0);
    }
    let env = app::wait_one(&f.paths, &f.spec)?;
    if a.json {
        print_json(&env);
    } else {
        print(&human_envelope(&env, &f.paths));
    }
    Ok(0)
}
