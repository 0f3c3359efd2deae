//! A detached group's controls: paused or not, its running tasks stopped or not, its
//! concurrency. Recorded by subpane's commands (`pause`, `resume`, `group`, the MCP tools)
//! in `groups/<G>/control.json`, read by the group's driver when it changes (an inotify
//! watch on the group's directory, no polling), and taken: the driver answers with the
//! serial it applied in `groups/<G>/applied.json`, which the command waits for.
//!
//! ```text
//!  pause --group G ─► lock groups/<G>/lock ─► control.json {serial: n+1, paused: true}
//!                  ─► wait (inotify, ≤ 10 s) for applied.json {serial ≥ n+1}
//!  driver: group dir changed ─► control.json ─► paused: start nothing; stop_running:
//!          SIGSTOP its running tasks; concurrency ─► applied.json {serial} ─► settled
//! ```
//!
//! Common pitfalls:
//! * Once `applied.json` has the command's serial nothing more starts: the driver applies a
//!   control between two fills, never inside one (it is one thread).
//! * The group's directory is under the home, which no sandboxed program can write; an
//!   unsandboxed one is the user's own. Still, a control that does not parse is no control:
//!   the driver keeps the last one it read.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::super::Error;
use crate::fresh::now_rfc3339;
use crate::spec::RunId;
use crate::store::{self, Home};

/// Schema tag of `control.json`.
pub const CONTROL_SCHEMA: &str = "subpane.group-control/v1";

/// How long a command waits for the driver to take its change.
const TAKEN_WITHIN: Duration = Duration::from_secs(10);

/// `groups/<G>/control.json`.
///
/// ```json
/// {"schema": "subpane.group-control/v1", "serial": 3, "paused": true,
///  "stop_running": false, "concurrency": 8, "changed_at": "2026-12-07T10:00:00.000Z"}
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Control {
    #[serde(default)]
    pub schema: String,
    /// One more for each change.
    #[serde(default)]
    pub serial: u64,
    /// Start no new task.
    #[serde(default)]
    pub paused: bool,
    /// While paused, the running tasks are stopped too (SIGSTOP).
    #[serde(default)]
    pub stop_running: bool,
    /// The group's concurrency from now on (`None`: as the fan-out was given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed_at: Option<String>,
}

/// `groups/<G>/applied.json`: the serial of the last control the driver took.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    pub serial: u64,
}

/// A change asked of a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// Start nothing new; with `stop_running`, also stop (SIGSTOP) what runs.
    Pause { stop_running: bool },
    /// Start again (and continue stopped tasks).
    Resume,
    /// Run at most this many at once from now on.
    Concurrency(usize),
}

/// What a group's controls are after a change (`pause --json`, the MCP tools).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControlAnswer {
    pub group: String,
    pub paused: bool,
    pub stop_running: bool,
    /// The concurrency in force.
    pub concurrency: usize,
    /// The group's driver took the change (`false`: it had not within 10 s; it will when it
    /// runs again).
    pub taken: bool,
}

/// The controls of `group` as recorded (none: the defaults).
pub fn read(home: &Home, group: &RunId) -> Control {
    store::read_json(&home.group_dir(group).join("control.json"))
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// The serial the driver of `group` took last.
pub(super) fn applied(home: &Home, group: &RunId) -> u64 {
    store::read_json::<Applied>(&home.group_dir(group).join("applied.json"))
        .ok()
        .flatten()
        .map_or(0, |a| a.serial)
}

/// The driver took `serial`.
pub(super) fn mark_applied(home: &Home, group: &RunId, serial: u64) -> Result<(), Error> {
    store::write_json_atomic(
        &home.group_dir(group).join("applied.json"),
        &Applied { serial },
    )?;
    Ok(())
}

/// Makes `changes` to `group` (its full id), in order, as one change (one serial: the
/// driver takes them together), and waits for its driver to take it.
pub fn change(home: &Home, group: &str, changes: &[Change]) -> Result<ControlAnswer, Error> {
    let id = RunId::parse(group)?;
    let Some(record) = super::group_record(home, group) else {
        return Err(Error::invalid(format!(
            "group {group} is driven by the fan-out that started it, so it cannot be paused, \
             resumed or changed from here; stop it there (Ctrl-C), or give fan-outs to \
             {{@detach}} to control them"
        )));
    };
    if !super::revive::is_open(home, &id) {
        return Err(Error::invalid(format!(
            "group {group} has ended: it starts nothing more, so there is nothing to change; \
             {{@ls}} shows its runs"
        )));
    }
    let dir = home.group_dir(&id);
    let serial = {
        let _lock = store::Exclusive::acquire(&dir.join("lock"))?;
        let mut c = read(home, &id);
        for change in changes {
            match *change {
                Change::Pause { stop_running } => {
                    c.paused = true;
                    // A pause that does not stop keeps what an earlier one stopped stopped.
                    c.stop_running |= stop_running;
                }
                Change::Resume => {
                    c.paused = false;
                    c.stop_running = false;
                }
                Change::Concurrency(n) => {
                    if n == 0 {
                        return Err(Error::invalid("the concurrency must be at least 1"));
                    }
                    c.concurrency = Some(n);
                }
            }
        }
        c.schema = CONTROL_SCHEMA.into();
        c.serial += 1;
        c.changed_at = Some(now_rfc3339());
        store::write_json_atomic(&dir.join("control.json"), &c)?;
        c.serial
    };
    let taken = wait_taken(home, &id, serial)?;
    let c = read(home, &id);
    Ok(ControlAnswer {
        group: group.to_owned(),
        paused: c.paused,
        stop_running: c.stop_running,
        concurrency: c.concurrency.unwrap_or(record.concurrency),
        taken,
    })
}

/// Waits (inotify on the group's directory) until its driver took `serial`, at most
/// [`TAKEN_WITHIN`]: whether it did.
fn wait_taken(home: &Home, id: &RunId, serial: u64) -> Result<bool, Error> {
    use super::super::wait_loop::{Driver, Seen, WaitLoop, done_when};
    use std::ops::ControlFlow;
    struct Taken<'a> {
        home: &'a Home,
        id: &'a RunId,
        serial: u64,
        taken: bool,
    }
    impl Driver for Taken<'_> {
        fn settled(&mut self, _: &mut WaitLoop) -> Result<ControlFlow<()>, Error> {
            self.taken = applied(self.home, self.id) >= self.serial;
            Ok(done_when(self.taken))
        }
        fn seen(&mut self, _: &mut WaitLoop, _: Seen) -> Result<ControlFlow<()>, Error> {
            Ok(ControlFlow::Continue(()))
        }
    }
    let mut wl = WaitLoop::new()?;
    wl.watch_dir(&home.group_dir(id))?;
    let mut t = Taken {
        home,
        id,
        serial,
        taken: false,
    };
    wl.run(Some(Instant::now() + TAKEN_WITHIN), None, &mut t)?;
    Ok(t.taken)
}
