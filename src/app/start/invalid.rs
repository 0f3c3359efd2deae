//! [`Invalid`]: a request refused, naming the field that was wrong, and [`Spell`]: how each
//! front end writes a field's name.
//!
//! ```text
//!  planner ─► Invalid { field: "max_procs", problem: "`12` is out of range", hint: ... }
//!               ├─ CLI (Spell::Flag)       --max-procs `12` is out of range: give 300 to ...
//!               ├─ MCP (Spell::Field)      `max_procs` `12` is out of range: give 300 to ...
//!               └─ fan-out (Spell::Line)   line 3: field max_procs `12` is out of range ...
//! ```
//!
//! The problem and the hint name other fields as `{name}` (a field of [`FIELDS`]) and a
//! command as `{@ls}` or, for one run, `{@wait:RUN}` (see [`VERBS`]): the edge spells them. A `{word}` that is neither is
//! left as it is, so a value quoted into the text changes nothing but, at most, how a field
//! name inside it is written.

use crate::app::field::{FIELDS, Flag, field};

/// How an edge writes the fields and commands a message names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spell {
    /// The command line: `--max-procs`, `subpane ls`.
    Flag,
    /// JSON fields (an MCP call): `` `max_procs` ``, the `list` tool.
    Field,
    /// Line N of a fan-out file: fields as JSON fields, the subject as `line N: field NAME`.
    Line(usize),
    /// Task N of an MCP `fanout` call.
    Task(usize),
}

/// Commands a message may suggest: the command line's, and the MCP tool that does it.
const VERBS: &[(&str, &str, &str)] = &[
    ("ls", "`subpane ls`", "the `list` tool"),
    ("wait", "`subpane wait`", "the `wait` tool"),
    ("cancel", "`subpane cancel`", "the `cancel` tool"),
    ("logs", "`subpane logs`", "the `logs` tool"),
    ("status", "`subpane status`", "the `status` tool"),
    ("retry", "`subpane retry`", "the `retry` tool"),
    ("run", "`subpane run`", "the `run` tool"),
    ("pause", "`subpane pause`", "the `pause` tool"),
    ("resume", "`subpane resume`", "the `resume` tool"),
    ("detach", "`subpane fanout --detach`", "the `fanout` tool"),
];

impl Spell {
    /// Field `name` as a reference inside a sentence.
    pub fn name(self, name: &str) -> String {
        match (self, field(name).map(|f| f.flag)) {
            (Spell::Flag, Some(Flag::Long(l))) => format!("--{l}"),
            (Spell::Flag, Some(Flag::Trailing)) => "a program after `--`".to_owned(),
            (Spell::Flag, Some(Flag::AtFileOf(of))) => format!("{} @FILE", self.name(of)),
            _ => format!("`{name}`"),
        }
    }

    /// Field `name` as the subject an error begins with.
    fn subject(self, name: &str) -> String {
        match self {
            Spell::Line(n) => format!("line {n}: field {name}"),
            Spell::Task(n) => format!("task {n}: field {name}"),
            Spell::Flag | Spell::Field => self.name(name),
        }
    }

    /// A command as this edge runs it; `verb:RUN` with a run id.
    fn verb(self, verb: &str) -> Option<String> {
        let (verb, run) = match verb.split_once(':') {
            Some((v, r)) => (v, Some(r)),
            None => (verb, None),
        };
        let (_, cli, tool) = VERBS.iter().find(|(v, _, _)| *v == verb)?;
        Some(match (self, run) {
            (Spell::Flag, None) => (*cli).to_owned(),
            (Spell::Flag, Some(r)) => format!("{} {r}`", cli.trim_end_matches('`')),
            (_, None) => (*tool).to_owned(),
            (_, Some(r)) => format!("{tool} with run_id `{r}`"),
        })
    }

    /// `text` with every `{field}` and `{@verb}` written this edge's way.
    pub fn text(self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(at) = rest.find('{') {
            out.push_str(&rest[..at]);
            let after = &rest[at + 1..];
            let word = after.find('}').map(|end| &after[..end]).filter(|w| {
                let (name, arg) = w.split_once(':').unwrap_or((w, ""));
                name.chars()
                    .all(|c| c.is_ascii_lowercase() || c == '_' || c == '@')
                    && arg
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
            });
            let spelt = word.and_then(|w| match w.strip_prefix('@') {
                Some(v) => self.verb(v),
                None => FIELDS.iter().any(|f| f.name == w).then(|| self.name(w)),
            });
            match (word, spelt) {
                (Some(w), Some(s)) => {
                    out.push_str(&s);
                    rest = &after[w.len() + 1..];
                }
                _ => {
                    out.push('{');
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        out
    }
}

/// A request refused before anything started: which field, what is wrong with it, and what
/// to do. Without a field, the request as a whole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invalid {
    pub field: Option<&'static str>,
    /// Follows the field's name: "`12` is out of range" (`{name}` names fields).
    pub problem: String,
    /// What to do, when there is more to say than the problem does.
    pub hint: Option<String>,
}

impl Invalid {
    /// `field` (a name of [`FIELDS`]) is wrong: `problem`.
    pub fn new(field: &str, problem: impl Into<String>) -> Self {
        Self {
            field: FIELDS.iter().find(|f| f.name == field).map(|f| f.name),
            problem: problem.into(),
            hint: None,
        }
    }

    /// `subject` (a field as `{name}`, or words such as "the workspace") is wrong: `problem`
    /// follows it.
    pub fn about(subject: &str, problem: impl Into<String>) -> Self {
        let named = subject
            .strip_prefix('{')
            .and_then(|s| s.strip_suffix('}'))
            .and_then(field);
        match named {
            Some(f) => Self {
                field: Some(f.name),
                problem: problem.into(),
                hint: None,
            },
            None => Self::whole(format!("{subject} {}", problem.into())),
        }
    }

    /// The request as a whole is wrong.
    pub fn whole(problem: impl Into<String>) -> Self {
        Self {
            field: None,
            problem: problem.into(),
            hint: None,
        }
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// The message, in `spell`'s words.
    pub fn render(&self, spell: Spell) -> String {
        let refs = match spell {
            Spell::Flag => Spell::Flag,
            _ => Spell::Field,
        };
        let mut s = match (self.field, spell) {
            (Some(f), _) => format!("{} {}", spell.subject(f), refs.text(&self.problem)),
            (None, Spell::Line(n)) => format!("line {n}: {}", refs.text(&self.problem)),
            (None, Spell::Task(n)) => format!("task {n}: {}", refs.text(&self.problem)),
            (None, _) => refs.text(&self.problem),
        };
        if let Some(h) = &self.hint {
            s.push_str("; ");
            s.push_str(&refs.text(h));
        }
        s
    }
}

/// The command line's words (what `Display` of an error shows).
impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render(Spell::Flag))
    }
}

impl std::error::Error for Invalid {}

/// "`path`: " for an error at `path` of a JSON document (serde_path_to_error's form), or
/// nothing when `msg` names it already or there is no field to name.
pub fn at_path(path: &str, msg: &str) -> String {
    if path == "." || path == "?" || msg.contains(&format!("`{path}`")) {
        String::new()
    } else {
        format!("`{path}`: ")
    }
}

/// serde's "unknown field `timout`, expected one of `agent`, … (31 names)" as subpane says it:
/// the nearest name ("did you mean `timeout`?"), or the names when none is near. `None` when
/// `msg` is not about an unknown field.
pub fn unknown_field(msg: &str) -> Option<String> {
    let rest = msg.strip_prefix("unknown field `")?;
    let (name, expected) = match rest.rfind("`, expected ") {
        Some(i) => (&rest[..i], &rest[i + "`, expected ".len()..]),
        None => (rest.strip_suffix("`, there are no fields")?, ""),
    };
    // The names are the quoted words of the list: `a`, `a` or `b`, one of `a`, `b`, `c`.
    let names: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
    let near = names
        .iter()
        .map(|n| (strsim::jaro(name, n), *n))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0));
    Some(match (near, names.is_empty()) {
        (Some((_, n)), _) => format!("unknown field `{name}`; did you mean `{n}`?"),
        (None, true) => format!("unknown field `{name}`; there are no fields here"),
        (None, false) => format!(
            "unknown field `{name}`; the fields are {}",
            names
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_edge_spells_the_fields_its_way() {
        let e = Invalid::new("max_procs", "`12` is out of range")
            .hint("give at least 300, or leave out {max_procs} with {sandbox}");
        assert_eq!(
            e.render(Spell::Flag),
            "--max-procs `12` is out of range; give at least 300, or leave out --max-procs with --sandbox"
        );
        assert_eq!(
            e.render(Spell::Field),
            "`max_procs` `12` is out of range; give at least 300, or leave out `max_procs` with `sandbox`"
        );
        assert_eq!(
            e.render(Spell::Line(3)),
            "line 3: field max_procs `12` is out of range; give at least 300, or leave out `max_procs` with `sandbox`"
        );
        assert_eq!(
            Spell::Flag.text("({@wait:r-1.2})"),
            "(`subpane wait r-1.2`)"
        );
        assert_eq!(
            Spell::Field.text("({@wait:r-1.2})"),
            "(the `wait` tool with run_id `r-1.2`)"
        );
        let w = Invalid::whole("give {argv} or {agent} with {task}; {@ls} lists runs");
        assert_eq!(
            w.render(Spell::Flag),
            "give a program after `--` or --agent with --task; `subpane ls` lists runs"
        );
        assert_eq!(
            w.render(Spell::Field),
            "give `argv` or `agent` with `task`; the `list` tool lists runs"
        );
        assert_eq!(
            Spell::Field.text("{task_file}"),
            "`task_file`",
            "a field the command line fills from @FILE"
        );
        assert_eq!(Spell::Flag.text("{task_file}"), "--task @FILE");
    }

    #[test]
    fn an_unknown_field_gets_the_nearest_name_and_the_list_only_without_one() {
        let serde = |name: &str| {
            format!(
                "unknown field `{name}`, expected one of `agent`, `timeout`, `idle_timeout`, `max_memory`, `sandbox`"
            )
        };
        for (typo, near) in [
            ("timout", "timeout"),
            ("timeuot", "timeout"),
            ("Timeout", "timeout"),
            ("idle-timeout", "idle_timeout"),
            ("max_mem", "max_memory"),
            ("sandbx", "sandbox"),
        ] {
            assert_eq!(
                unknown_field(&serde(typo)).unwrap(),
                format!("unknown field `{typo}`; did you mean `{near}`?")
            );
        }
        assert_eq!(
            unknown_field(&serde("zzz")).unwrap(),
            "unknown field `zzz`; the fields are `agent`, `timeout`, `idle_timeout`, `max_memory`, `sandbox`"
        );
        assert_eq!(
            unknown_field("unknown field `rn`, expected `run_id` or `offset`").unwrap(),
            "unknown field `rn`; the fields are `run_id`, `offset`"
        );
        assert_eq!(
            unknown_field("unknown field `x`, there are no fields").unwrap(),
            "unknown field `x`; there are no fields here"
        );
        assert_eq!(unknown_field("invalid type: string, expected a map"), None);
    }

    #[test]
    fn braces_that_name_nothing_are_left_alone() {
        for t in [
            "a {b} c",
            "{",
            "}{",
            "{@nope}",
            "path `/x/{y z}`",
            "é {é} {",
        ] {
            assert_eq!(Spell::Field.text(t), t);
        }
    }
}
