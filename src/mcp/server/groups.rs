//! The tools that change a detached fan-out group: `pause` and `resume` (each may change
//! its concurrency too). Each records its change and waits, a few seconds at most, for the
//! group's driver to take it ([`control::change`]); the answer is the group's controls then.
//! A call with a concurrency makes both changes as one: the driver takes them together.

use super::*;
use crate::app::fanout::control::{self, Change, ControlAnswer};

/// Which control a call is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verb {
    Pause,
    Resume,
}

impl Server {
    pub(super) async fn pause(&self, args: Value) -> Answer {
        let a: PauseArgs = parse(tools::PAUSE, args)?;
        let mut changes = vec![Change::Pause {
            stop_running: a.stop_running,
        }];
        changes.extend(concurrency(a.concurrency)?);
        self.control(a.group, changes, Verb::Pause).await
    }

    pub(super) async fn resume(&self, args: Value) -> Answer {
        let a: ResumeArgs = parse(tools::RESUME, args)?;
        let mut changes = concurrency(a.concurrency)?;
        changes.push(Change::Resume);
        self.control(a.group, changes, Verb::Resume).await
    }

    /// Makes `changes` to the group `name` stands for, as one, and answers with its
    /// controls then.
    async fn control(&self, name: String, changes: Vec<Change>, verb: Verb) -> Answer {
        let home = self.home.clone();
        blocking_tool(move || {
            let group = app::resolve_group(&home, &name)?;
            let a = control::change(&home, &group, &changes)?;
            // How many run and wait now, for the line a model reads; none when the report
            // cannot be read (the change is made all the same).
            let counts = app::fanout::group_report(&home, &group)
                .ok()
                .flatten()
                .map(|r| (r.summary.running, r.summary.queued));
            Ok(control_answer(verb, &a, counts))
        })
        .await
    }
}

/// The change of concurrency a call asks for, if any.
fn concurrency(n: Option<usize>) -> Result<Vec<Change>, ToolError> {
    match n {
        Some(0) => Err(ToolError::Invalid(
            "`concurrency` must be at least 1".into(),
        )),
        Some(n) => Ok(vec![Change::Concurrency(n)]),
        None => Ok(Vec::new()),
    }
}

/// The answer: one line a model can act on, then the controls.
fn control_answer(verb: Verb, a: &ControlAnswer, counts: Option<(usize, usize)>) -> CallToolResult {
    let text = control_text(verb, a, counts);
    let next = (verb == Verb::Resume).then(|| answer::next_wait(&[], Some(&a.group)));
    let doc = to_value(a);
    result(text.clone(), answer::lead(&text, next, doc))
}

/// `group G paused: no new task starts; 2 running go on, 1 queued; call `resume` to carry
/// on`, and the like.
fn control_text(verb: Verb, a: &ControlAnswer, counts: Option<(usize, usize)>) -> String {
    let g = &a.group;
    let (running, queued) = match counts {
        Some((r, q)) => (format!("{r} running"), format!("{q} queued")),
        None => ("the running tasks".into(), "the queued ones".into()),
    };
    let state = match (a.paused, a.stop_running) {
        (true, false) => format!(
            "group {g} paused: no new task starts; {running} go on, {queued} wait; call \
             `resume` to carry on"
        ),
        (true, true) => format!(
            "group {g} paused: no new task starts; {running} are stopped until `resume`, \
             {queued} wait; call `resume` to carry on"
        ),
        (false, _) => format!(
            "group {g} resumed: {queued} start as slots free up ({running} now); call \
             `wait` with the group for its end"
        ),
    };
    let mut text = match verb {
        // A resume that finds the group paused still (another call paused it since) says so.
        Verb::Resume if a.paused => format!("{state} (paused again since)"),
        Verb::Pause if !a.paused => format!("{state} (resumed again since)"),
        _ => state,
    };
    text.push_str(&format!("; at most {} at once", a.concurrency));
    if !a.taken {
        text.push_str(
            "; its driver has not taken this yet (it does as it runs again, so until then \
             tasks may still start)",
        );
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(paused: bool, stop_running: bool, taken: bool) -> ControlAnswer {
        ControlAnswer {
            group: "g-1".into(),
            paused,
            stop_running,
            concurrency: 3,
            taken,
        }
    }

    #[test]
    fn the_line_says_what_the_group_does_now_and_what_to_call() {
        let t = control_text(Verb::Pause, &answer(true, false, true), Some((2, 1)));
        assert_eq!(
            t,
            "group g-1 paused: no new task starts; 2 running go on, 1 queued wait; call \
             `resume` to carry on; at most 3 at once"
        );
        let t = control_text(Verb::Pause, &answer(true, true, true), Some((2, 0)));
        assert!(t.contains("2 running are stopped until `resume`"), "{t}");
        let t = control_text(Verb::Resume, &answer(false, false, true), None);
        assert!(
            t.starts_with("group g-1 resumed: the queued ones start") && t.contains("`wait`"),
            "{t}"
        );
        let t = control_text(Verb::Pause, &answer(true, false, false), Some((0, 0)));
        assert!(t.contains("its driver has not taken this yet"), "{t}");
    }

    #[test]
    fn the_answer_leads_with_the_line_and_a_resume_names_the_wait() {
        let r = control_answer(Verb::Resume, &answer(false, false, true), Some((1, 2)));
        let doc = r.structured_content.unwrap();
        let keys: Vec<&String> = doc.as_object().unwrap().keys().collect();
        assert_eq!(keys[..2], ["summary", "next"]);
        assert_eq!(doc["next"]["arguments"]["group"], "g-1");
        assert_eq!(
            (&doc["paused"], &doc["taken"]),
            (&json!(false), &json!(true))
        );
        let r = control_answer(Verb::Pause, &answer(true, false, true), None);
        assert!(r.structured_content.unwrap().get("next").is_none());
    }
}
