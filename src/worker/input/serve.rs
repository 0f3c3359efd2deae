//! The worker's side of its input: serving clients and keys in the poll loop, the records of
//! what was said, a turn's end and the wait for a next message.

use std::time::Instant;

use super::{Edit, InputReady, Said};
use crate::spec::{InputFrom, InputRequest};

impl crate::worker::run::Worker {
    /// Serves the input's clients and the pane's keys; records what was said.
    pub(crate) fn serve_input(&mut self, ready: &InputReady, now: Instant) {
        let Some(i) = self.input.as_mut() else {
            return;
        };
        let parser = self.stream.parser_mut();
        let mut said = i.serve(ready, now, parser);
        let mut redraw = false;
        if ready.keys {
            let mut buf = [0u8; 4096];
            // SAFETY: reading into a stack buffer from fd 0, the pane's terminal (non-blocking:
            // it shares its open file with fd 1).
            let n = unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) };
            if n > 0 {
                for edit in i.editor.keys(&buf[..n as usize]) {
                    redraw = true;
                    if let Edit::Send(text) = edit {
                        let req = InputRequest {
                            from: InputFrom::Pane,
                            text: Some(text),
                            interrupt: false,
                        };
                        said.extend(i.say(req, None, now, parser));
                    }
                }
            }
        }
        for s in said {
            self.record_said(&s);
        }
        if redraw {
            self.draw_input_line();
        }
    }

    /// A message or interrupt given to the agent: its event, and a line in the pane.
    fn record_said(&mut self, s: &Said) {
        let event = serde_json::json!({
            "type": crate::adapter::OWN_EVENT,
            "seq": s.seq,
            "from": s.from.as_str(),
            "at": crate::fresh::now_rfc3339(),
            "kind": if s.interrupt { "interrupt" } else { "message" },
            "text": (!s.interrupt).then_some(s.text.as_str()),
        });
        self.stream
            .own_event(&serde_json::to_vec(&event).unwrap_or_default());
        let shown = crate::worker::render::said_line(s.from.as_str(), s.interrupt, &s.text);
        let masked = self.masker.text(&shown).into_owned();
        self.pane.line(
            crate::worker::pane::Style::Cyan,
            &crate::term::sanitize(masked.as_bytes(), 2000),
        );
        self.draw_input_line();
    }

    /// The pane's input line as it is now.
    pub(crate) fn draw_input_line(&mut self) {
        if let Some(i) = &self.input {
            let text = self.masker.text(i.editor.text()).into_owned();
            self.pane.draw_input(&text, i.open());
        }
    }

    /// A turn of the agent ended: the linger clock starts, unless the input stays open for
    /// a message on its way or `--keep-open`.
    pub(crate) fn turn_ended(&mut self, now: Instant) {
        let closed_now = match self.input.as_mut() {
            Some(i) if i.open() => i.turn_ended(now),
            _ => true,
        };
        if closed_now {
            self.draw_input_line();
            self.feed(crate::worker::stop::Event::TerminalSeen, now);
        }
    }

    /// Once per wake-up: the `--keep-open` wait, and the end of the input once the agent is
    /// stopped or gone.
    pub(crate) fn input_tick(&mut self, now: Instant) {
        let Some(i) = self.input.as_mut() else {
            return;
        };
        if i.tick(now) {
            self.draw_input_line();
            self.feed(crate::worker::stop::Event::TerminalSeen, now);
        }
        if self.life.exit().is_some() {
            self.end_input("the agent exited");
        } else if self.life.stop().is_some() {
            self.end_input("the run is being stopped");
        }
    }

    /// Nothing more is said to the agent; the envelope counts what was.
    pub(crate) fn end_input(&mut self, why: &'static str) {
        if let Some(i) = self.input.as_mut() {
            let was_open = i.open();
            i.end(why);
            self.facts.input = Some(i.counts());
            if was_open {
                self.draw_input_line();
            }
        }
    }
}
