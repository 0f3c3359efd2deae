//! A fan-out's tasks on hosts: each in a thread of its own that starts it there and waits
//! for its end there in the same ssh session ([`crate::hosts::remote::start`]), through
//! lost connections ([`crate::hosts::remote::wait`]), and tells the loop by [`News`].
//!
//! Common pitfalls:
//! * A cancel can be asked before a task's run is known there (its start is on its way):
//!   it is kept, and sent once the run is ([`Far::cancel_if_asked`]).
//! * ssh has a process group of its own: a Ctrl-C at the terminal reaches the fan-out, which
//!   cancels each run there, never the ssh that waits for it.

use std::collections::HashMap;

use super::super::{Inbox, RunRequest, WaitLoop};
use crate::envelope::{CancelOrigin, Envelope};
use crate::hosts::remote::{self, Answer, RemoteRun, StartAnswer};
use crate::store::Home;

/// What a task's thread tells the loop.
pub(super) enum News {
    /// Slot `0` runs there, as this run.
    Started(usize, Box<RemoteRun>),
    /// Slot `0` ended.
    Ended(usize, End),
}

/// How a task on a host ended.
pub(super) enum End {
    /// Refused, or the host could not be reached: no run.
    NotStarted(String),
    /// Its envelope, recorded here.
    Finished(Box<Envelope>),
    /// It ran, and no end could be heard (why).
    Unknown(String),
}

/// The tasks sent to hosts and not ended.
pub(super) struct Far {
    home: Home,
    inbox: Inbox<News>,
    /// Slot → its host.
    hosts: HashMap<usize, String>,
    /// A cancel asked of every task there: its grace (`None`: the run's own), and who asks.
    cancel: Option<(Option<u64>, CancelOrigin)>,
}

impl Far {
    pub(super) fn new(home: &Home, wl: &WaitLoop) -> Self {
        Self {
            home: home.clone(),
            inbox: Inbox::new(wl),
            hosts: HashMap::new(),
            cancel: None,
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.hosts.is_empty()
    }

    /// How many tasks are on `host` (sent, running or ending).
    pub(super) fn running_on(&self, host: &str) -> usize {
        self.hosts.values().filter(|h| *h == host).count()
    }

    /// Slot `i` goes to `host`: it counts there from now.
    pub(super) fn reserve(&mut self, i: usize, host: &str) {
        self.hosts.insert(i, host.to_owned());
    }

    pub(super) fn ended(&mut self, i: usize) {
        self.hosts.remove(&i);
    }

    /// The next news, if any came.
    pub(super) fn next(&mut self) -> Option<News> {
        self.inbox.next()
    }

    /// Starts slot `i`'s request on `host`, in `group`, and waits there, in a thread.
    pub(super) fn send(&mut self, i: usize, host: String, mut req: RunRequest, group: String) {
        req.host = Some(host);
        let (post, home) = (self.inbox.poster(), self.home.clone());
        std::thread::spawn(move || {
            let tell = |news: News| post.post(news);
            let mut started = |run: &RemoteRun, _: &crate::envelope::Started| {
                tell(News::Started(i, Box::new(run.clone())));
            };
            let end = match remote::start(&home, req, Some(&group), Some(&mut started)) {
                Err(e) => End::NotStarted(e.to_string()),
                Ok((_, StartAnswer::Finished(env))) => End::Finished(env),
                Ok((run, StartAnswer::Started(_) | StartAnswer::Dropped(..))) => {
                    wait_there(&home, &run)
                }
            };
            tell(News::Ended(i, end));
        });
    }

    /// Waits, in a thread, for slot `i`'s run there, started by an earlier driver (its
    /// slot was reserved on its host).
    pub(super) fn watch(&mut self, i: usize, run: RemoteRun) {
        let (post, home) = (self.inbox.poster(), self.home.clone());
        std::thread::spawn(move || post.post(News::Ended(i, wait_there(&home, &run))));
    }

    /// Asks each run there to stop (`grace_ms`: `None` for the run's own grace); those
    /// whose run is not known yet get it once it is.
    pub(super) fn cancel(
        &mut self,
        runs: Vec<Option<&RemoteRun>>,
        grace_ms: Option<u64>,
        origin: CancelOrigin,
    ) {
        self.cancel = match self.cancel {
            // A kill asked once stays a kill.
            Some((Some(0), o)) => Some((Some(0), o)),
            _ => Some((grace_ms, origin)),
        };
        for run in runs.into_iter().flatten() {
            self.cancel_one(run);
        }
    }

    /// Asks `run` there to be held stopped (`stopped`) or continued, as `subpane pause RUN`
    /// / `resume RUN` there do, in a thread (a host that cannot be asked leaves it as it is;
    /// its end is heard as ever).
    pub(super) fn hold(&self, run: &RemoteRun, stopped: bool) {
        let (home, run) = (self.home.clone(), run.clone());
        std::thread::spawn(move || {
            let verb = if stopped { "pause" } else { "resume" };
            let _ = remote::command(&home, &run, &[verb, &run.run_id], false)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status();
        });
    }

    /// Sends the cancel asked earlier to `run`, which has just started there.
    pub(super) fn cancel_if_asked(&self, run: &RemoteRun) {
        if self.cancel.is_some() {
            self.cancel_one(run);
        }
    }

    fn cancel_one(&self, run: &RemoteRun) {
        let Some((grace, origin)) = self.cancel else {
            return;
        };
        let grace = grace.map(|ms| format!("{ms}ms"));
        let (home, run) = (self.home.clone(), run.clone());
        // The thread that waits for it sees its end (a cancel that cannot be sent leaves it
        // running there; the fan-out then waits for its own end).
        std::thread::spawn(move || {
            let _ = remote::cancel(&home, &run, grace.as_deref(), true, Some(origin));
        });
    }
}

/// Waits for `run`'s end there, through lost connections.
fn wait_there(home: &Home, run: &RemoteRun) -> End {
    match remote::wait(home, run, None, None, true, &mut |_, _| {}) {
        Ok(Answer::Finished(env)) => End::Finished(env),
        Ok(Answer::Live(..)) => End::Unknown("its host stopped answering before it ended".into()),
        Err(e) => End::Unknown(e.to_string()),
    }
}
