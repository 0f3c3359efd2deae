//! A fan-out file: one [`Line`] (queue fields and a [`RunRequest`]) per JSON line, every line
//! planned before anything starts.
//!
//! ```text
//!  text ─► lines (blank and `#` lines skipped) ─► Line ─► plan ─► Task (here)
//!                                                  queue fields: checked together (queue.rs)
//!                                                  run ids: unique in the file, new on disk
//!                                                  group: set on run.json and spec.json
//!          a line with `host`, or any line with --hosts ─► Task (there): an id drawn here,
//!          its files read here, and each host's lines planned there (one round trip a host)
//! ```
//!
//! Common pitfalls:
//! * Line numbers count every line of the file, skipped ones too: they are what an editor
//!   shows.
//! * Generated run ids have the second and 24 random bits: 200 tasks in one second collide
//!   about once in a thousand fan-outs, so a clash with an earlier task is planned again
//!   rather than reported.

use std::collections::HashMap;

use super::super::runs::{what, what_of};
use super::super::{Error, Plan, RunRequest, System, plan};
use super::queue::{Line, Queue};
use crate::store::Home;

/// One line of a fan-out file, planned.
#[derive(Debug)]
pub struct Task {
    /// The line of the file, 1-based.
    pub line: usize,
    pub place: Place,
    /// The request it was planned from, with its run id (a generated one too): what a
    /// driver of its own plans again.
    pub request: RunRequest,
    /// Its queue fields (`id`, `after`, `priority`, …), checked with the others'.
    pub queue: Queue,
}

/// Where a task runs.
#[derive(Debug)]
pub enum Place {
    /// Here, as planned.
    Here(Box<Plan>),
    /// On this host (the line's `host`), which planned it too.
    Host(String),
    /// On whichever of the fan-out's hosts (`--hosts`) has room first; each planned it.
    AnyHost,
    /// Its run exists already: a driver started again adopts it (adopt.rs).
    Started(super::adopt::Existing),
}

impl Task {
    pub fn run_id(&self) -> &str {
        self.request.run_id.as_deref().unwrap_or_default()
    }
    /// The command line or the start of the task, as `ls` shows it.
    pub fn what(&self) -> String {
        match &self.place {
            Place::Here(p) => what(&p.spec),
            _ => what_of(self.request.task.as_deref(), &self.request.argv),
        }
    }
}

/// A fresh group id: `g-` and a generated run id (`g-20261130-033943-a1b2c3`).
pub fn new_group_id() -> String {
    format!("g-{}", crate::fresh::run_id())
}

/// At most this many bad lines are named in the error.
const MAX_REPORTED: usize = 20;

/// Parses and plans every task of a fan-out file, setting `group` on each; `hosts` (may be
/// empty): the hosts its lines without a `host` are spread over. Any bad line makes the
/// whole file invalid (nothing may start): the error names each one as `line N: …`.
pub fn plan_tasks(
    text: &str,
    home: &Home,
    sys: &dyn System,
    group: &str,
    hosts: &[String],
) -> Result<Vec<Task>, Error> {
    let mut errors: Vec<String> = Vec::new();
    let mut requests: Vec<(usize, Line)> = Vec::new();
    // A byte order mark some editors write is not part of the first task.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let trimmed = raw.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let value = match serde_json::from_str::<serde_json::Value>(trimmed) {
            Ok(v) => v,
            Err(e) => {
                errors.push(format!("line {line}: {}", json_message(&e)));
                continue;
            }
        };
        match Line::from_value(value) {
            Ok(mut l) => {
                // A file's `task` may be `@FILE`, as on the command line.
                l.request.read_at_files();
                requests.push((line, l));
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
    plan_numbered(requests, errors, home, sys, group, hosts, "line")
}

/// Like [`plan_tasks`], for lines given one by one (an MCP `fanout` call's `tasks`):
/// errors name them `task N` (1-based), and [`Task::line`] is N.
pub fn plan_requests(
    requests: Vec<Line>,
    home: &Home,
    sys: &dyn System,
    group: &str,
    hosts: &[String],
) -> Result<Vec<Task>, Error> {
    let numbered = requests
        .into_iter()
        .enumerate()
        .map(|(i, r)| (i + 1, r))
        .collect();
    plan_numbered(numbered, Vec::new(), home, sys, group, hosts, "task")
}

/// Like [`plan_tasks`], for lines already read with their numbers (what a driver of its own
/// reads back; a host's check, whose lines have no queue fields: the queue is this side's).
pub fn plan_lines(
    requests: Vec<(usize, Line)>,
    home: &Home,
    sys: &dyn System,
    group: &str,
    hosts: &[String],
) -> Result<Vec<Task>, Error> {
    plan_numbered(requests, Vec::new(), home, sys, group, hosts, "line")
}

/// Plans numbered lines (`unit` N names each in errors), all or none.
fn plan_numbered(
    lines: Vec<(usize, Line)>,
    mut errors: Vec<String>,
    home: &Home,
    sys: &dyn System,
    group: &str,
    hosts: &[String],
    unit: &str,
) -> Result<Vec<Task>, Error> {
    // The hosts of --hosts that exist: only those are asked to plan (an unknown one is an
    // error of its own).
    let mut spread = Vec::new();
    for h in hosts {
        match crate::hosts::get(home, h) {
            Ok(_) => spread.push(h.clone()),
            Err(e) => errors.push(format!("hosts: {e}")),
        }
    }
    let queues: Vec<(usize, &Queue)> = lines.iter().map(|(n, l)| (*n, &l.queue)).collect();
    if let Err(bad) = super::queue::order(&queues, unit) {
        errors.extend(bad.into_iter().map(|(n, e)| format!("{unit} {n}: {e}")));
    }
    let (requests, queues): (Vec<(usize, RunRequest)>, Vec<Queue>) = lines
        .into_iter()
        .map(|(n, l)| ((n, l.request), l.queue))
        .unzip();
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
    let spell = |line: usize| {
        if unit == "task" {
            crate::app::Spell::Task(line)
        } else {
            crate::app::Spell::Line(line)
        }
    };
    let mut tasks = Vec::with_capacity(requests.len());
    for ((line, r), queue) in requests.iter().zip(queues) {
        let far = r.host.is_some() || !hosts.is_empty();
        let planned = if far {
            place_there(r, home, &taken, hosts).map_err(|e| format!("{unit} {line}: {e}"))
        } else {
            plan_one(r, home, sys, group, &taken)
                .map(|p| {
                    let mut request = r.clone();
                    request.run_id = Some(p.spec.run_id.to_string());
                    (Place::Here(Box::new(p)), request)
                })
                .map_err(|e| e.render(spell(*line)))
        };
        match planned {
            Ok((place, request)) => {
                let id = request.run_id.clone().unwrap_or_default();
                taken.entry(id).or_insert(*line);
                tasks.push(Task {
                    line: *line,
                    place,
                    request,
                    queue,
                });
            }
            Err(e) => errors.push(e),
        }
    }
    // Every line the hosts can plan is planned there, whatever was refused here.
    errors.extend(check_there(&tasks, home, group, &spread));
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

/// A task for a host: its id drawn here (new here, and not another line's), its files read
/// here. The host plans the rest ([`check_there`]).
fn place_there(
    r: &RunRequest,
    home: &Home,
    taken: &HashMap<String, usize>,
    hosts: &[String],
) -> Result<(Place, RunRequest), String> {
    let mut request = r.clone();
    let place = match &request.host {
        Some(h) => {
            crate::hosts::get(home, h).map_err(|e| e.to_string())?;
            Place::Host(h.clone())
        }
        None => Place::AnyHost,
    };
    let name = match &place {
        Place::Host(h) => h.as_str(),
        _ => hosts.first().map_or("", String::as_str),
    };
    crate::hosts::remote::inline_files(&mut request, name).map_err(|e| e.to_string())?;
    let id = match &r.run_id {
        Some(id) => crate::spec::RunId::parse(id).map_err(|e| e.to_string())?,
        None => {
            let mut tries = 0;
            loop {
                let id = crate::fresh::run_id();
                tries += 1;
                if !taken.contains_key(id.as_str()) || tries >= 8 {
                    break id;
                }
            }
        }
    };
    if home.run_dir(&id).exists() {
        return Err(format!(
            "run id `{id}` already exists; choose another run_id, or leave it out to get a fresh one"
        ));
    }
    request.run_id = Some(id.to_string());
    Ok((place, request))
}

/// Each host's lines planned there, the hosts at once: the lines they refuse.
fn check_there(tasks: &[Task], home: &Home, group: &str, hosts: &[String]) -> Vec<String> {
    let mut by_host: Vec<(String, Vec<(usize, RunRequest)>)> = Vec::new();
    let mut add = |h: &str, t: &Task| {
        // The host plans it as its own: `host` is this side's business.
        let r = RunRequest {
            host: None,
            ..t.request.clone()
        };
        match by_host.iter_mut().find(|(n, _)| n == h) {
            Some((_, v)) => v.push((t.line, r)),
            None => by_host.push((h.to_owned(), vec![(t.line, r)])),
        }
    };
    for t in tasks {
        match &t.place {
            Place::Here(_) | Place::Started(_) => {}
            Place::Host(h) => add(h, t),
            Place::AnyHost => hosts.iter().for_each(|h| add(h, t)),
        }
    }
    std::thread::scope(|s| {
        let asks: Vec<_> = by_host
            .iter()
            .map(|(h, reqs)| {
                s.spawn(move || {
                    crate::hosts::remote::check(home, h, group, reqs)
                        .unwrap_or_else(|e| vec![format!("host {h}: {e}")])
                })
            })
            .collect();
        asks.into_iter()
            .flat_map(|a| a.join().unwrap_or_default())
            .collect()
    })
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
        // Read from a parsed value: no column to name (the path says where).
        _ if e.line() == 0 => msg.to_owned(),
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
        let tasks = plan_tasks(text, &h, &RealSystem, "g-x", &[]).unwrap();
        assert_eq!(tasks.len(), 2);
        assert_eq!((tasks[0].line, tasks[1].line), (3, 4));
        assert_eq!(tasks[0].run_id(), "a");
        for t in &tasks {
            let Place::Here(p) = &t.place else {
                panic!("{t:?} runs here")
            };
            assert_eq!(p.record.group.as_deref(), Some("g-x"));
            assert_eq!(p.spec.group.as_deref(), Some("g-x"));
        }
        assert_eq!(tasks[1].what(), "true");
    }

    #[test]
    fn json_values_are_numbered_as_tasks() {
        let (_d, h) = home();
        let req = |v: serde_json::Value| Line::from_value(v).unwrap();
        let ok = vec![
            req(serde_json::json!({"argv": ["true"], "run_id": "a"})),
            req(serde_json::json!({"argv": ["true"]})),
        ];
        let tasks = plan_requests(ok, &h, &RealSystem, "g", &[]).unwrap();
        assert_eq!((tasks[0].line, tasks[1].line), (1, 2));
        let bad = vec![
            req(serde_json::json!({"argv": ["true"], "run_id": "a"})),
            req(serde_json::json!({"argv": ["true"], "run_id": "a"})),
            req(serde_json::json!({"argv": ["true"], "timeout": "5"})),
        ];
        let m = plan_requests(bad, &h, &RealSystem, "g", &[])
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
        let e = plan_tasks(text, &h, &RealSystem, "g", &[]).unwrap_err();
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
            &[],
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("line 1: run id `old` already exists"), "{e}");
    }

    #[test]
    fn an_empty_file_has_no_tasks() {
        let (_d, h) = home();
        assert!(
            plan_tasks("\n# nothing\n", &h, &RealSystem, "g", &[])
                .unwrap()
                .is_empty()
        );
        assert!(new_group_id().starts_with("g-"));
        assert!(crate::spec::RunId::parse(&new_group_id()).is_ok());
    }
}
