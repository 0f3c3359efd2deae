//! Which runs the board shows: by state, group, label and text. Pure.

use super::BoardRun;
use crate::envelope::RunState;

/// What a person asked to see; empty parts let everything through.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    pub status: Option<RunState>,
    pub group: Option<String>,
    /// `K=V` (that label with that value) or `K` (any run with that label).
    pub label: Option<String>,
    /// Words that must each appear in the run's id, task or command, group, labels or last
    /// event (case-insensitive).
    pub text: String,
}

impl Filter {
    pub fn is_empty(&self) -> bool {
        *self == Filter::default()
    }

    /// Whether `run` passes.
    pub fn matches(&self, run: &BoardRun) -> bool {
        let r = &run.row;
        if self.status.is_some_and(|s| s != r.status) {
            return false;
        }
        if let Some(g) = &self.group
            && r.group.as_deref() != Some(g.as_str())
        {
            return false;
        }
        if let Some(l) = &self.label {
            let ok = match l.split_once('=') {
                Some((k, v)) => r.labels.get(k).is_some_and(|x| x == v),
                None => r.labels.contains_key(l.as_str()),
            };
            if !ok {
                return false;
            }
        }
        if self.text.trim().is_empty() {
            return true;
        }
        let mut hay = format!(
            "{} {} {} {}",
            r.run_id,
            r.what,
            r.group.as_deref().unwrap_or(""),
            r.agent.as_str()
        );
        for (k, v) in &r.labels {
            hay.push_str(&format!(" {k}={v}"));
        }
        if let Some(e) = run.last_event() {
            hay.push(' ');
            hay.push_str(&e.text);
        }
        let hay = hay.to_lowercase();
        self.text
            .to_lowercase()
            .split_whitespace()
            .all(|w| hay.contains(w))
    }

    /// The filter in a few words, for the screen: `status running · group g-1 · "fix"`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(s) = self.status {
            parts.push(format!("status {}", s.as_str()));
        }
        if let Some(g) = &self.group {
            parts.push(format!("group {g}"));
        }
        if let Some(l) = &self.label {
            parts.push(format!("label {l}"));
        }
        if !self.text.trim().is_empty() {
            parts.push(format!("\"{}\"", self.text.trim()));
        }
        parts.join(" · ")
    }
}
