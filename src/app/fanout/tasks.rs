//! A fan-out file: one [`RunRequest`] per JSON line, every line planned before anything
//! starts.
//!
//! ```text
//!  text ─► lines (blank and `#` lines skipped) ─► serde RunRequest ─► plan ─► Task
//!                                                  run ids: unique in the file, new on disk
//!                                                  group: set on run.json and spec.json
//! ```
//!
//! Common pitfalls:
//! * Line numbers count every line of the file, skipped ones too: they are what an editor
//!   shows.
//! * Generated run ids have the second and 24 random bits: 200 tasks in one second collide
//!   about once in a thousand fan-outs, so a clash with an earlier task is planned again
//!   rather than reported.

use std::collections::HashMap;

use super::super::{Error, Plan, RunRequest, System, plan, runs::what};
use crate::store::Home;

/// One line of a fan-out file, planned.
#[derive(Debug)]
pub struct Task {
    /// The line of the file, 1-based.
    pub line: usize,
    pub plan: Plan,
    /// The request it was planned from, with its run id (a generated one too): what a
    /// driver of its own plans again.
    pub request: RunRequest,
}

impl Task {
    pub fn run_id(&self) -> &str {
        self.plan.spec.run_id.as_str()
    }
    /// The command line or the start of the task, as `ls` shows it.
    pub fn what(&self) -> String {
        what(&self.plan.spec)
    }
}

/// A fresh group id: `g-` and a generated run id (`g-20261130-033943-a1b2c3`).
pub fn new_group_id() -> String {
    format!("g-{}", crate::fresh::run_id())
}

/// At most this many bad lines are named in the error.
const MAX_REPORTED: usize = 20;

/// Parses and plans every task of a fan-out file, setting `group` on each. Any bad line makes
/// the whole file invalid (nothing may start): the error names each one as `line N: …`.
pub fn plan_tasks(
    text: &str,
    home: &Home,
    sys: &dyn System,
    group: &str,
) -> Result<Vec<Task>, Error> {
    let mut errors: Vec<String> = Vec::new();
    let mut requests: Vec<(usize, RunRequest)> = Vec::new();
    // A byte order mark some editors write is not part of the first task.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let trimmed = raw.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let mut de = serde_json::Deserializer::from_str(trimmed);
        match serde_path_to_error::deserialize::<_, RunRequest>(&mut de) {
            Ok(mut r) => {
                // A file's `task` may be `@FILE`, as on the command line.
                r.read_at_files();
                requests.push((line, r));
            }
            Err(e) => {
                let path = e.path().to_string();
                let msg = json_message(e.inner());
                errors.push(format!(
                    "line {line}: {}{msg}",
                    crate::app::invalid::at_path(&path, &msg)
                ));
            }
        }
    }
    plan_numbered(requests, errors, home, sys, group, "line")
}

/// Like [`plan_tasks`], for requests given one by one (an MCP `fanout` call's `tasks`):
/// errors name them `task N` (1-based), and [`Task::line`] is N.
pub fn plan_requests(
    requests: Vec<RunRequest>,
    home: &Home,
    sys: &dyn System,
    group: &str,
) -> Result<Vec<Task>, Error> {
    let numbered = requests
        .into_iter()
        .enumerate()
        .map(|(i, r)| (i + 1, r))
        .collect();
    plan_numbered(numbered, Vec::new(), home, sys, group, "task")
}

/// Like [`plan_tasks`], for requests already read with their line numbers (what a driver
/// of its own reads back).
pub fn plan_lines(
    requests: Vec<(usize, RunRequest)>,
    home: &Home,
    sys: &dyn System,
    group: &str,
) -> Result<Vec<Task>, Error> {
    plan_numbered(requests, Vec::new(), home, sys, group, "line")
}

/// Plans numbered requests (`unit` N names each in errors), all or none.
fn plan_numbered(
    requests: Vec<(usize, RunRequest)>,
    mut errors: Vec<String>,
    home: &Home,
    sys: &dyn System,
    group: &str,
    unit: &str,
) -> Result<Vec<Task>, Error> {
    // Explicit ids first, so a generated one never takes an id a later line asks for.
    let mut taken: HashMap<String, usize> = HashMap::new();
    for (line, r) in &requests {
        let Some(id) = &r.run_id else { continue };
        if let Some(first) = taken.get(id) {
            errors.push(format!(
                "{unit} {line}: run id `{id}` is also on {unit} {first}; each task needs its own"
            ));
        } else {
            taken.insert(id.clone(), *line);
        }
    }
    let mut tasks = Vec::with_capacity(requests.len());
    for (line, r) in &requests {
        match plan_one(r, home, sys, group, &taken) {
            Ok(p) => {
                if r.run_id.is_none() {
                    taken.insert(p.spec.run_id.to_string(), *line);
                }
                let mut request = r.clone();
                request.run_id = Some(p.spec.run_id.to_string());
                tasks.push(Task {
                    line: *line,
                    plan: p,
                    request,
                });
            }
            Err(e) => errors.push(e.render(if unit == "task" {
                crate::app::Spell::Task(*line)
            } else {
                crate::app::Spell::Line(*line)
            })),
        }
    }
    if errors.is_empty() {
        return Ok(tasks);
    }
    errors.sort_by_key(|e| number_of(e, unit));
    let more = errors.len().saturating_sub(MAX_REPORTED);
    errors.truncate(MAX_REPORTED);
    if more > 0 {
        errors.push(format!("… and {more} more"));
    }
    Err(Error::invalid(format!(
        "{}\nnothing was started",
        errors.join("\n")
    )))
}

/// Plans one request with the group set; a generated id that clashes is drawn again.
fn plan_one(
    r: &RunRequest,
    home: &Home,
    sys: &dyn System,
    group: &str,
    taken: &HashMap<String, usize>,
) -> Result<Plan, Error> {
    let mut tries = 0;
    let mut p = loop {
        let p = plan(r, home, sys)?;
        let id = p.spec.run_id.as_str();
        let clash = taken.contains_key(id) && r.run_id.is_none();
        tries += 1;
        if !clash || tries >= 8 {
            break p;
        }
    };
    if home.run_dir(&p.spec.run_id).exists() {
        return Err(Error::invalid(format!(
            "run id `{}` already exists; choose another run_id, or leave it out to get a fresh one",
            p.spec.run_id
        )));
    }
    p.record.group = Some(group.to_owned());
    p.spec.group = Some(group.to_owned());
    Ok(p)
}

/// serde_json's message without its "at line 1 column 7" (each task is one line: the column
/// is what helps, but not beside the name of an unknown field, which says where already).
fn json_message(e: &serde_json::Error) -> String {
    let s = e.to_string();
    let msg = s.rfind(" at line ").map_or(s.as_str(), |i| &s[..i]);
    if let Some(m) = crate::app::invalid::unknown_field(msg) {
        return m;
    }
    match e.classify() {
        serde_json::error::Category::Eof => format!("{msg} (the line ends early)"),
        _ => format!("{msg} (column {})", e.column()),
    }
}

/// The N of "line N: …" (or "task N: …"), for sorting.
fn number_of(e: &str, unit: &str) -> usize {
    e.strip_prefix(unit)
        .and_then(|r| r.strip_prefix(' '))
        .and_then(|r| r.split(':').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::RealSystem;

    fn home() -> (tempfile::TempDir, Home) {
        let d = tempfile::tempdir().unwrap();
        let h = Home::at(d.path().join("home"));
        (d, h)
    }

    #[test]
    fn every_line_is_planned_with_the_group() {
        let (_d, h) = home();
        let text = "\u{feff}# a comment\r\n\n{\"argv\": [\"true\"], \"run_id\": \"a\"}\n{\"argv\": [\"true\"]}\n";
        let tasks = plan_tasks(text, &h, &RealSystem, "g-x").unwrap();
        assert_eq!(tasks.len(), 2);
        assert_eq!((tasks[0].line, tasks[1].line), (3, 4));
        assert_eq!(tasks[0].run_id(), "a");
        for t in &tasks {
            assert_eq!(t.plan.record.group.as_deref(), Some("g-x"));
            assert_eq!(t.plan.spec.group.as_deref(), Some("g-x"));
        }
        assert_eq!(tasks[1].what(), "true");
    }

    #[test]
    fn json_values_are_numbered_as_tasks() {
        let (_d, h) = home();
        let req = |v: serde_json::Value| serde_json::from_value::<RunRequest>(v).unwrap();
        let ok = vec![
            req(serde_json::json!({"argv": ["true"], "run_id": "a"})),
            req(serde_json::json!({"argv": ["true"]})),
        ];
        let tasks = plan_requests(ok, &h, &RealSystem, "g").unwrap();
        assert_eq!((tasks[0].line, tasks[1].line), (1, 2));
        let bad = vec![
            req(serde_json::json!({"argv": ["true"], "run_id": "a"})),
            req(serde_json::json!({"argv": ["true"], "run_id": "a"})),
            req(serde_json::json!({"argv": ["true"], "timeout": "5"})),
        ];
        let m = plan_requests(bad, &h, &RealSystem, "g")
            .unwrap_err()
            .to_string();
        assert!(m.contains("task 2: run id `a` is also on task 1"), "{m}");
        assert!(
            m.contains("task 3: field timeout `5` needs a unit; give 5s"),
            "{m}"
        );
        assert!(m.ends_with("nothing was started"), "{m}");
    }

    #[test]
    fn bad_lines_are_named_and_nothing_is_planned() {
        let (_d, h) = home();
        let text = "{\"argv\": [\"true\"], \"run_id\": \"a\"}\n{\"argv\": [\"true\"], \"timeuot\": \"1s\"}\n{\"argv\": [\"true\"], \"run_id\": \"a\"}\nnot json\n{\"argv\": [\"true\"], \"timeout\": \"5\"}\n{\"argv\": \"true\"}\n";
        let e = plan_tasks(text, &h, &RealSystem, "g").unwrap_err();
        assert!(e.nothing_started());
        let m = e.to_string();
        assert!(m.contains("line 2: unknown field `timeuot`"), "{m}");
        // Line errors name the JSON field, never a command-line flag.
        assert!(
            m.contains("line 5: field timeout `5` needs a unit; give 5s"),
            "{m}"
        );
        assert!(!m.contains("--"), "{m}");
        assert!(m.contains("line 6: `argv`: invalid type"), "{m}");
        assert!(m.contains("line 3: run id `a` is also on line 1"), "{m}");
        assert!(m.contains("line 4: "), "{m}");
        assert!(m.contains("line 5: "), "{m}");
        assert!(!m.contains("at line 1 column"), "{m}");
        let lines: Vec<usize> = m.lines().map(|l| number_of(l, "line")).collect();
        assert!(lines.windows(2).all(|w| w[0] <= w[1]), "{m}");
    }

    #[test]
    fn an_existing_run_id_is_refused() {
        let (_d, h) = home();
        std::fs::create_dir_all(h.runs_dir().join("old")).unwrap();
        let e = plan_tasks(
            "{\"argv\": [\"true\"], \"run_id\": \"old\"}",
            &h,
            &RealSystem,
            "g",
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("line 1: run id `old` already exists"), "{e}");
    }

    #[test]
    fn an_empty_file_has_no_tasks() {
        let (_d, h) = home();
        assert!(
            plan_tasks("\n# nothing\n", &h, &RealSystem, "g")
                .unwrap()
                .is_empty()
        );
        assert!(new_group_id().starts_with("g-"));
        assert!(crate::spec::RunId::parse(&new_group_id()).is_ok());
    }
}
