//! A fan-out line's queue fields (fan-out lines and MCP `fanout` tasks only, never `run`):
//! `id`, `after`, `after_any`, `priority`, `start_after`, `start_at`. Declared once here
//! ([`QUEUE_FIELDS`]): the line type, the checks, and the MCP schema are made from it.
//!
//! ```text
//!  JSON object ─► take the queue fields out ─► Queue  (its own deny_unknown_fields)
//!              └► the rest ─► RunRequest (unknown fields still refused)
//!  every line's Queue ─► check: ids unique, known, no cycle, times that parse ─► Order
//!  Order: for each task its dependencies (index, any), priority, and the time it may start
//! ```
//!
//! Common pitfalls:
//! * `after` waits for a COMPLETED task: one that failed, was cancelled or skipped skips
//!   it (and so its own dependants); `after_any` waits for an END, however it came.
//! * `start_after` counts from the fan-out's start (the driver's, when detached), so a
//!   driver started later never starts a task earlier than asked.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::super::RunRequest;
use crate::envelope::QueueWait;

/// The queue fields: name, JSON Schema type, and what it means (for a person and a model).
pub const QUEUE_FIELDS: [(&str, &str, &str); 6] = [
    (
        "id",
        "string",
        "A name for this task, unique among the tasks, that `after` and `after_any` of other tasks name.",
    ),
    (
        "after",
        "ids",
        "Start only once every task named here (by its `id`) has completed; if one of them fails, is cancelled or skipped, this task is skipped.",
    ),
    (
        "after_any",
        "ids",
        "Start only once every task named here (by its `id`) has ended, whether it completed or not.",
    ),
    (
        "priority",
        "integer",
        "Among the tasks ready to start, higher first (default 0); equal ones keep their order.",
    ),
    (
        "start_after",
        "string",
        "Do not start before this long after the fan-out started, e.g. \"30s\" or \"10m\"; other tasks run meanwhile.",
    ),
    (
        "start_at",
        "string",
        "Do not start before this time, in RFC 3339 UTC, e.g. \"2026-05-01T09:00:00Z\"; other tasks run meanwhile.",
    ),
];

/// The JSON Schema properties of the queue fields, for a fan-out task's schema.
pub fn properties() -> Map<String, Value> {
    QUEUE_FIELDS
        .iter()
        .map(|(name, kind, help)| {
            let mut s = match *kind {
                "ids" => json!({"type": "array", "items": {"type": "string"}}),
                "integer" => json!({"type": "integer", "default": 0}),
                k => json!({"type": k}),
            };
            s["description"] = json!(help);
            ((*name).to_owned(), s)
        })
        .collect()
}

/// A line's queue fields, as given. Not `deny_unknown_fields`: a [`Line`] hands it only its
/// own fields (the rest go to the request, which refuses what it does not know), and a group
/// record flattens it into each task.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Queue {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after_any: Vec<String>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub priority: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_after: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at: Option<String>,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// One fan-out line (or MCP `fanout` task): its queue fields and the run it asks for.
#[derive(Clone, Debug, Default)]
pub struct Line {
    pub queue: Queue,
    pub request: RunRequest,
}

impl From<RunRequest> for Line {
    fn from(request: RunRequest) -> Self {
        Line {
            queue: Queue::default(),
            request,
        }
    }
}

impl Line {
    /// Reads a line from a JSON value: the queue fields taken out, the rest a [`RunRequest`];
    /// an error's path names the field (`after[0]`).
    pub fn from_value(v: Value) -> Result<Self, serde_path_to_error::Error<serde_json::Error>> {
        let Value::Object(mut rest) = v else {
            // Not an object: the error says one was expected.
            return serde_path_to_error::deserialize::<_, Map<String, Value>>(v)
                .map(|_| Line::default());
        };
        let mut queue = Map::new();
        for (name, ..) in QUEUE_FIELDS {
            if let Some(x) = rest.remove(name) {
                queue.insert(name.to_owned(), x);
            }
        }
        let queue = serde_path_to_error::deserialize(Value::Object(queue))?;
        let request = serde_path_to_error::deserialize(Value::Object(rest))?;
        Ok(Line { queue, request })
    }
}

impl<'de> Deserialize<'de> for Line {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        Line::from_value(v).map_err(serde::de::Error::custom)
    }
}

/// What the fan-out needs of the queue fields, resolved: per task, by index.
#[derive(Clone, Debug, Default)]
pub struct Order {
    /// The tasks it waits for: (index, `after_any`).
    pub deps: Vec<Vec<(usize, bool)>>,
    pub priority: Vec<i64>,
    /// When it may start at the earliest: a delay from the fan-out's start, or a time.
    pub not_before: Vec<Option<NotBefore>>,
    /// Its `id`, if it has one.
    pub ids: Vec<Option<String>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotBefore {
    Delay(Duration),
    At(SystemTime),
}

impl NotBefore {
    /// The time, for a fan-out that started at `anchor`.
    pub fn at(self, anchor: SystemTime) -> SystemTime {
        match self {
            NotBefore::Delay(d) => anchor + d,
            NotBefore::At(at) => at,
        }
    }
}

impl Order {
    /// What task `i`, not started, still waits for by its own fields: the tasks its `after`
    /// and `after_any` name that have not `ended`, then its start time (for a fan-out that
    /// started at `anchor`). `None`: it may start at `now`. The one rule: the driver starts
    /// by it, and `ls --group` says by it why a task waits.
    pub fn waits(
        &self,
        i: usize,
        ended: impl Fn(usize) -> bool,
        anchor: SystemTime,
        now: SystemTime,
    ) -> Option<QueueWait> {
        let on: Vec<String> = self.deps[i]
            .iter()
            .filter(|&&(j, _)| !ended(j))
            .map(|&(j, _)| self.ids[j].clone().unwrap_or_default())
            .collect();
        if !on.is_empty() {
            return Some(QueueWait::Dependency { on });
        }
        self.start_time(i, anchor)
            .filter(|t| *t > now)
            .map(|t| QueueWait::Delayed {
                until: humantime::format_rfc3339_millis(t).to_string(),
            })
    }

    /// Why task `i` can never start, in words: one its `after` names ended without
    /// completing (`status`: how each task ended, `None` while it has not). The one rule:
    /// the driver skips by it, and a group's report says by it why a task was skipped.
    pub fn blocked(
        &self,
        i: usize,
        status: impl Fn(usize) -> Option<crate::envelope::TaskStatus>,
    ) -> Option<String> {
        use crate::envelope::TaskStatus;
        self.deps[i].iter().find_map(|&(j, any)| {
            let how = match status(j)? {
                _ if any => return None,
                TaskStatus::Completed | TaskStatus::Running | TaskStatus::Queued => return None,
                TaskStatus::Skipped => "was skipped",
                TaskStatus::Cancelled => "was cancelled",
                TaskStatus::Failed => "failed",
            };
            let name = self.ids[j].as_deref().unwrap_or_default();
            Some(format!("its dependency \"{name}\" {how}"))
        })
    }

    /// When task `i` may start at the earliest, for a fan-out that started at `anchor`.
    pub fn start_time(&self, i: usize, anchor: SystemTime) -> Option<SystemTime> {
        self.not_before
            .get(i)
            .copied()
            .flatten()
            .map(|n| n.at(anchor))
    }
}

/// Why task `i`, not started, waits, as the group's records tell it: its own fields first
/// ([`Order::waits`]), then its group's pause, then a free slot of the group's concurrency.
pub fn waiting(
    order: &Order,
    i: usize,
    ended: impl Fn(usize) -> bool,
    anchor: SystemTime,
    control: &super::control::Control,
    concurrency: usize,
) -> QueueWait {
    if let Some(w) = order.waits(i, ended, anchor, SystemTime::now()) {
        return w;
    }
    if control.paused {
        return QueueWait::Paused;
    }
    QueueWait::Concurrency {
        limit: control.concurrency.unwrap_or(concurrency),
    }
}

/// Checks every task's queue fields (`numbered`: each task's number and fields) and
/// resolves them: or each bad task's number with what is wrong (all of them).
pub fn order(numbered: &[(usize, &Queue)], unit: &str) -> Result<Order, Vec<(usize, String)>> {
    let mut errors = Vec::new();
    let mut by_id: HashMap<&str, usize> = HashMap::new();
    for (i, (n, q)) in numbered.iter().enumerate() {
        let Some(id) = &q.id else { continue };
        if id.is_empty() {
            errors.push((*n, "id: an empty id names nothing; give a name".to_owned()));
        } else if let Some(&first) = by_id.get(id.as_str()) {
            let first = numbered[first].0;
            errors.push((
                *n,
                format!("id \"{id}\" is also on {unit} {first}; each task needs its own"),
            ));
        } else {
            by_id.insert(id, i);
        }
    }
    let mut o = Order::default();
    for (n, q) in numbered {
        let mut deps = Vec::new();
        for (field, any) in [("after", &q.after), ("after_any", &q.after_any)] {
            for id in any {
                match by_id.get(id.as_str()) {
                    Some(&j) => deps.push((j, field == "after_any")),
                    None => errors.push((*n, format!("{field}: no task has the id \"{id}\""))),
                }
            }
        }
        let not_before = match (&q.start_after, &q.start_at) {
            (Some(_), Some(_)) => {
                errors.push((*n, "give start_after or start_at, not both".to_owned()));
                None
            }
            (Some(d), None) => match crate::spec::parse_duration("field start_after", d) {
                Ok(d) => Some(NotBefore::Delay(d)),
                Err(e) => {
                    errors.push((*n, e.to_string()));
                    None
                }
            },
            (None, Some(t)) => match humantime::parse_rfc3339_weak(t.trim()) {
                Ok(at) => Some(NotBefore::At(at)),
                Err(_) => {
                    errors.push((
                        *n,
                        format!("start_at: `{t}` is not an RFC 3339 UTC time; give e.g. 2026-05-01T09:00:00Z"),
                    ));
                    None
                }
            },
            (None, None) => None,
        };
        o.deps.push(deps);
        o.priority.push(q.priority);
        o.not_before.push(not_before);
        o.ids.push(q.id.clone());
    }
    errors.extend(cycles(&o, numbered));
    if errors.is_empty() {
        Ok(o)
    } else {
        Err(errors)
    }
}

/// Each cycle of dependencies, named on the line of its first task: `a cycle: a → b → a`.
fn cycles(o: &Order, numbered: &[(usize, &Queue)]) -> Vec<(usize, String)> {
    // 0: not seen, 1: on the path, 2: done.
    let mut mark = vec![0u8; o.deps.len()];
    let mut found = Vec::new();
    let name = |i: usize| o.ids[i].clone().unwrap_or_default();
    for start in 0..o.deps.len() {
        if mark[start] != 0 {
            continue;
        }
        // Depth first, without recursion: (task, next dependency to look at).
        let mut path: Vec<(usize, usize)> = vec![(start, 0)];
        mark[start] = 1;
        while let Some(&mut (i, ref mut k)) = path.last_mut() {
            let Some(&(j, _)) = o.deps[i].get(*k) else {
                mark[i] = 2;
                path.pop();
                continue;
            };
            *k += 1;
            match mark[j] {
                0 => {
                    mark[j] = 1;
                    path.push((j, 0));
                }
                1 => {
                    let from = path.iter().position(|(t, _)| *t == j).unwrap_or(0);
                    let first = path[from..].iter().map(|(t, _)| *t).min().unwrap_or(j);
                    // Named from the cycle's first task in the file, in waiting order.
                    let cyc: Vec<usize> = path[from..].iter().map(|(t, _)| *t).collect();
                    let at = cyc.iter().position(|t| *t == first).unwrap_or(0);
                    let mut names: Vec<String> = cyc[at..]
                        .iter()
                        .chain(&cyc[..at])
                        .map(|t| name(*t))
                        .collect();
                    names.push(name(first));
                    found.push((numbered[first].0, format!("a cycle: {}", names.join(" → "))));
                }
                _ => {}
            }
        }
    }
    found
}

impl super::State<'_> {
    /// Whether queued task `i` may start at `now`: its dependencies ended as it needs, and
    /// its time passed.
    pub(super) fn is_ready(&self, i: usize, now: SystemTime) -> bool {
        let ended = |j: usize| matches!(self.slots[j].state, super::Phase::Done(_));
        self.order.waits(i, ended, self.anchor, now).is_none()
    }

    /// The earliest time a queued task waits for that is still to come (none while the
    /// group is paused: a resume wakes it).
    pub(super) fn next_start(&self) -> Option<Instant> {
        if self.stopping || self.control.paused {
            return None;
        }
        let now = SystemTime::now();
        let soonest = self
            .queue
            .iter()
            .filter_map(|&i| self.order.start_time(i, self.anchor))
            .filter(|t| *t > now)
            .min()?;
        Some(Instant::now() + soonest.duration_since(now).unwrap_or_default())
    }

    /// Skips each queued task one of whose `after` did not complete (and so, in turn, those
    /// waiting on it), each with why.
    pub(super) fn skip_blocked(
        &mut self,
        on_event: &mut dyn FnMut(&super::Event<'_>, &super::Progress),
    ) {
        loop {
            let ended = |j: usize| match &self.slots[j].state {
                super::Phase::Done(t) => Some(t.status),
                _ => None,
            };
            let blocked = self
                .queue
                .iter()
                .enumerate()
                .find_map(|(at, &i)| self.order.blocked(i, ended).map(|why| (at, i, why)));
            let Some((at, i, why)) = blocked else { return };
            self.queue.remove(at);
            self.progress.queued -= 1;
            self.progress.skipped += 1;
            let (line, run_id, what) = self.ids(i);
            let mut t = super::skipped(line, run_id, what);
            t.error = Some(why);
            self.emit(
                &super::Event::Skipped {
                    task: i,
                    outcome: &t,
                },
                on_event,
            );
            self.slots[i].state = super::Phase::Done(t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(v: Value) -> Queue {
        Line::from_value(v).unwrap().queue
    }

    #[test]
    fn a_line_takes_the_queue_fields_out_and_refuses_unknown_ones() {
        let l =
            Line::from_value(json!({"argv": ["true"], "id": "a", "after": ["b"], "priority": 2}))
                .unwrap();
        assert_eq!(l.queue.id.as_deref(), Some("a"));
        assert_eq!(l.request.argv, ["true"]);
        let e = Line::from_value(json!({"argv": ["true"], "aftr": ["b"]})).unwrap_err();
        assert!(e.to_string().contains("aftr"), "{e}");
        let e = Line::from_value(json!({"argv": ["true"], "after": "b"})).unwrap_err();
        assert_eq!(e.path().to_string(), "after", "{e}");
        // `run` takes none of them.
        assert!(
            serde_json::from_value::<RunRequest>(json!({"argv": ["true"], "id": "a"})).is_err()
        );
    }

    #[test]
    fn bad_queues_are_named_and_good_ones_resolved() {
        let a = q(json!({"id": "a", "after": ["b"]}));
        let b = q(json!({"id": "b", "after_any": ["a"], "start_after": "2s"}));
        let c = q(json!({"id": "a", "after": ["x"], "start_at": "soon"}));
        let e = order(&[(1, &a), (2, &b), (3, &c)], "line").unwrap_err();
        let m: Vec<String> = e.iter().map(|(n, s)| format!("{n}: {s}")).collect();
        assert!(
            m.contains(&"3: id \"a\" is also on line 1; each task needs its own".into()),
            "{m:?}"
        );
        assert!(
            m.contains(&"3: after: no task has the id \"x\"".into()),
            "{m:?}"
        );
        assert!(m.contains(&"1: a cycle: a → b → a".into()), "{m:?}");
        assert!(
            m.iter().any(|s| s.starts_with("3: start_at: `soon`")),
            "{m:?}"
        );
        let c = q(json!({"id": "c", "after": ["a"], "priority": -1}));
        let a = q(json!({"id": "a"}));
        let o = order(&[(1, &a), (2, &b), (4, &c)], "line").unwrap();
        assert_eq!(o.deps[2], [(0, false)]);
        assert_eq!(o.deps[1], [(0, true)]);
        assert_eq!(o.priority, [0, 0, -1]);
        assert_eq!(
            o.not_before[1],
            Some(NotBefore::Delay(Duration::from_secs(2)))
        );
        let me = q(json!({"id": "me", "after": ["me"]}));
        assert_eq!(
            order(&[(1, &me)], "line").unwrap_err()[0].1,
            "a cycle: me → me"
        );
    }

    #[test]
    fn a_task_waits_for_its_dependencies_then_its_time_then_the_pause_then_a_slot() {
        use crate::app::fanout::control::Control;
        let a = q(json!({"id": "a"}));
        let b = q(json!({"id": "b", "after": ["a"], "start_after": "10s"}));
        let o = order(&[(1, &a), (2, &b)], "line").unwrap();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let paused = Control {
            paused: true,
            ..Control::default()
        };
        let free = Control {
            concurrency: Some(3),
            ..Control::default()
        };
        let not_a = |j: usize| j != 0;
        assert_eq!(
            o.waits(1, not_a, t0, t0),
            Some(QueueWait::Dependency {
                on: vec!["a".into()]
            })
        );
        let until = humantime::format_rfc3339_millis(t0 + Duration::from_secs(10)).to_string();
        assert_eq!(
            o.waits(1, |_| true, t0, t0 + Duration::from_secs(9)),
            Some(QueueWait::Delayed { until })
        );
        assert_eq!(o.waits(1, |_| true, t0, t0 + Duration::from_secs(10)), None);
        // Past its time (an anchor long ago): the pause, then the concurrency in force.
        assert_eq!(waiting(&o, 0, |_| true, t0, &paused, 4), QueueWait::Paused);
        assert_eq!(
            waiting(&o, 1, |_| true, t0, &free, 4),
            QueueWait::Concurrency { limit: 3 }
        );
        assert_eq!(
            waiting(&o, 1, not_a, t0, &paused, 4),
            QueueWait::Dependency {
                on: vec!["a".into()]
            }
        );
    }

    #[test]
    fn the_schema_has_every_queue_field() {
        let p = properties();
        let names: Vec<&str> = QUEUE_FIELDS.iter().map(|f| f.0).collect();
        assert_eq!(p.keys().map(String::as_str).collect::<Vec<_>>(), names);
        let all: Queue = serde_json::from_value(json!({
            "id": "a", "after": ["b"], "after_any": ["c"], "priority": 1,
            "start_after": "1s", "start_at": "2026-05-01T09:00:00Z"}))
        .unwrap();
        assert_eq!(
            serde_json::to_value(&all)
                .unwrap()
                .as_object()
                .unwrap()
                .len(),
            names.len()
        );
    }
}
