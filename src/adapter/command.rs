//! The `command` adapter: any argv. Every stdout line goes to `stdout.log`, in order; lines that
//! are a JSON object or array are also events (`events.jsonl`). Invalid UTF-8 and bare JSON
//! scalars such as `42` are not events.

use super::{
    Adapter, AgentLaunch, AgentReport, ArgvContext, LineAction, LineResult, PaneItem, Stdin,
    StreamParser,
};
use crate::spec::{AgentKind, TaskSpec};

pub struct CommandAdapter;

impl Adapter for CommandAdapter {
    fn kind(&self) -> AgentKind {
        AgentKind::Command
    }
    fn binary(&self) -> Option<&'static str> {
        None
    }
    fn install_hint(&self) -> &'static str {
        ""
    }
    fn launch(&self, program: &str, _task: &TaskSpec, _ctx: &ArgvContext<'_>) -> AgentLaunch {
        // The command adapter's argv comes from the user whole; see `cli::run`.
        AgentLaunch {
            argv: vec![program.to_owned()],
            stdin: Stdin::Null,
        }
    }
    fn parser(&self) -> Box<dyn StreamParser> {
        Box::new(CommandParser::default())
    }
    fn expects_terminal_event(&self) -> bool {
        false
    }
    /// With `--stdin pipe` (see `CommandParser::say`).
    fn no_input(&self) -> Option<&'static str> {
        None
    }
}

#[derive(Default)]
pub struct CommandParser {
    /// The pane takes no more now: no copy of the line is made for it.
    pane_full: bool,
}

/// A line is an event when it is a JSON object or array. Only the first byte decides whether
/// we try to parse, so plain text costs one comparison.
pub fn is_json_event(line: &[u8]) -> bool {
    let start = line.iter().position(|b| !b.is_ascii_whitespace());
    match start.map(|i| line[i]) {
        Some(b'{') | Some(b'[') => super::is_json_line(line),
        _ => false,
    }
}

impl StreamParser for CommandParser {
    fn on_line(&mut self, line: &[u8]) -> LineResult {
        let mut r = LineResult::plain_unshown();
        if is_json_event(line) && !super::is_own_event(line) {
            r.action = LineAction::KeepAndPlain;
        }
        if self.pane_full {
            r.unshown = 1;
        } else {
            r.pane.push(PaneItem::Raw(line.to_vec()));
        }
        r
    }
    fn set_pane_room(&mut self, room: bool) {
        self.pane_full = !room;
    }
    /// With `--stdin pipe`: a message is its text and a newline; there is no prompt, and no
    /// turn to interrupt.
    fn say(&mut self, what: super::Say<'_>) -> Option<Vec<u8>> {
        match what {
            super::Say::Message(t) => Some(format!("{t}\n").into_bytes()),
            super::Say::Prompt(_) | super::Say::Interrupt => None,
        }
    }
    fn finish(&mut self, _stderr_tail: &[u8]) -> AgentReport {
        AgentReport::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_objects_and_arrays_are_events() {
        let mut p = CommandParser::default();
        assert_eq!(
            p.on_line(br#"{"type":"x"}"#).action,
            LineAction::KeepAndPlain
        );
        assert_eq!(p.on_line(br#"  [1,2]"#).action, LineAction::KeepAndPlain);
        assert_eq!(p.on_line(b"hello").action, LineAction::Plain);
        assert_eq!(p.on_line(b"42").action, LineAction::Plain);
        assert_eq!(p.on_line(b"{not json").action, LineAction::Plain);
        assert_eq!(p.on_line(b"\xff\xfe{").action, LineAction::Plain);
        assert_eq!(p.on_line(b"").action, LineAction::Plain);
        assert_eq!(
            p.on_line(b"{\"s\":\"\xff\"}").action,
            LineAction::Plain,
            "invalid UTF-8 is not JSON"
        );
    }
}
