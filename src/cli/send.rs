//! `subpane send RUN TEXT|@FILE`: a user message for a running agent (or `--interrupt`), as
//! its CLI's structured input; the answer comes once the agent has taken it.

use clap::Args;

use super::CliError;
use super::common::{print, print_json};
use crate::app;
use crate::spec::InputFrom;

#[derive(Debug, Args)]
#[command(after_help = "\
The message reaches the agent as its CLI takes input: Claude Code (stream-json input) takes it \
into the turn under way at its next tool call, else as its next turn; pi (RPC mode) and Codex \
(app-server) steer the turn under way, else start their next one; a command started with \
--stdin pipe gets the text and a newline on its stdin. The person at the attempt's pane can type the same on its input line.

Exit code: 0 when the agent took the message; 2 when the run has finished, takes no input \
(started with --stdin null, a command without --stdin pipe), its \
input is closed (the agent finished its last turn), or the message is empty; 1 when the agent \
ended before it took the message, or the worker could not be reached.")]
pub struct SendArgs {
    /// The run id, a unique start of it (or of its random part), or `@` for the newest run
    #[arg(add = super::docs::run_candidates())]
    pub run: String,
    /// The message, or @FILE for a file's content (relative to this directory)
    #[arg(value_name = "TEXT|@FILE", required_unless_present = "interrupt")]
    pub text: Option<String>,
    /// Stop the agent's current turn instead (the run goes on, and waits for a next message:
    /// --keep-open, or 5 minutes); for an agent (a command has no turn)
    #[arg(long, conflicts_with = "text")]
    pub interrupt: bool,
    /// Print {"run_id", "attempt", "seq", "taken"} as JSON
    #[arg(long)]
    pub json: bool,
    /// TEXT is the message as it is, even when it starts with @ (no file is read; a send
    /// to a run on a host passes a @FILE's text there so)
    #[arg(long, requires = "text")]
    pub literal: bool,
}

pub fn send(home: &crate::store::Home, a: SendArgs) -> Result<i32, CliError> {
    let mut text = a.text;
    if !a.literal
        && let Some(path) = app::at_file(&mut text)
    {
        let content = std::fs::read_to_string(&path).map_err(|e| {
            app::Error::invalid(format!("`{}` cannot be read: {e}", path.display()))
        })?;
        text = Some(content);
    }
    // A run on a host: its worker is there, and so is the socket (the text goes as a word,
    // --literal: a file's text that starts with `@` is no file's name there).
    if let Some(r) = super::remote::of(home, &a.run)? {
        let mut words = vec!["send", r.run_id.as_str()];
        if a.interrupt {
            words.push("--interrupt");
        }
        if a.json {
            words.push("--json");
        }
        if let Some(t) = &text {
            words.extend(["--literal", "--", t.as_str()]);
        }
        return super::remote::pass_through(home, &r, &words, false);
    }
    let f = app::find_run(home, &a.run, None)?;
    let sent = app::send(&f, InputFrom::Cli, text, a.interrupt)?;
    if a.json {
        print_json(&sent);
    } else if a.interrupt {
        print(&format!(
            "run {} (attempt {}) took the interrupt (#{})\n",
            sent.run_id, sent.attempt, sent.seq
        ));
    } else {
        print(&format!(
            "run {} (attempt {}) took message #{}\n",
            sent.run_id, sent.attempt, sent.seq
        ));
    }
    Ok(0)
}
