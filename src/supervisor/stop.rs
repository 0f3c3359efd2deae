//! Asking a worker to hold its agent stopped, or to let it go on: `stop.json`, then SIGUSR2
//! (the way of every request to a worker: `deliver.rs`).
//!
//! ```text
//!  attempt directory there ─► stop.json {"id", "requested_at", "stopped"} ─► deliver (SIGUSR2)
//!                                 ─► Signalled | Pending (read once its program runs)
//!                                  | NotDelivered(why): stop.json removed
//!  no attempt directory ─► NotDelivered (no record is left to ask through)
//! ```
//!
//! The worker applies the state the file asks for (`worker::stop::hold`): asking for the
//! state the agent is in is no change, so a request may be repeated.
//!
//! Common pitfalls:
//! * The request is the file, the signal only says "look": two requests in a row leave the
//!   latest in the file, whichever signal the worker reads it on.
//! * A refused request is removed, so that no later signal (another request's) applies it.

use nix::sys::signal::Signal;

use super::SuperviseError;
use super::deliver::{Delivery, ask};
use crate::envelope::StopRequest;
use crate::fresh::{now_rfc3339, request_id};
use crate::store::AttemptPaths;

/// Writes `stop.json` asking for the agent to be held stopped (`stopped`: SIGSTOP to its
/// process group) or to go on (SIGCONT), then signals the worker (SIGUSR2) if it has
/// started; one that has not reads the file once its program runs. The worker is signalled
/// only when it is proven to be this attempt's (see [`super::request_cancel`]).
pub fn request_stop(
    paths: &AttemptPaths,
    stopped: bool,
    pane_pid: impl FnOnce() -> Option<i32>,
) -> Result<Delivery, SuperviseError> {
    if std::fs::symlink_metadata(paths.dir())
        .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
    {
        return Ok(Delivery::NotDelivered(format!(
            "the attempt directory {} was removed",
            paths.dir().display()
        )));
    }
    let request = StopRequest {
        id: request_id(),
        requested_at: now_rfc3339(),
        stopped,
    };
    ask(paths, &paths.stop(), &request, Signal::SIGUSR2, pane_pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_for_a_worker_not_named_yet_waits_in_its_file() {
        let d = tempfile::tempdir().unwrap();
        let paths = AttemptPaths::new(d.path().to_path_buf());
        let got = request_stop(&paths, true, || panic!("no worker to check yet")).unwrap();
        assert_eq!(got, Delivery::Pending);
        let r: StopRequest = crate::store::read_json(&paths.stop()).unwrap().unwrap();
        assert!(r.stopped);
        // The latest request is the one in the file.
        request_stop(&paths, false, || None).unwrap();
        let r: StopRequest = crate::store::read_json(&paths.stop()).unwrap().unwrap();
        assert!(!r.stopped);
    }

    #[test]
    fn a_refused_request_leaves_no_file() {
        let d = tempfile::tempdir().unwrap();
        let paths = AttemptPaths::new(d.path().to_path_buf());
        // worker.json names a process, but tmux shows no pane to check it against.
        crate::store::write_json_atomic(
            &paths.worker(),
            &crate::envelope::WorkerFacts {
                worker: crate::procs::proc_ref(std::process::id() as i32),
                ..Default::default()
            },
        )
        .unwrap();
        let got = request_stop(&paths, true, || None).unwrap();
        assert!(
            matches!(&got, Delivery::NotDelivered(why) if why.contains("no pane")),
            "{got:?}"
        );
        assert!(!paths.stop().exists());
        // Nor is anything signalled when the pane's process is another (this test's own
        // process is no worker).
        let me = std::process::id() as i32;
        let got = request_stop(&paths, true, || Some(me)).unwrap();
        assert!(
            matches!(&got, Delivery::NotDelivered(why) if why.contains("not this attempt's worker")),
            "{got:?}"
        );
        assert!(!paths.stop().exists());
    }

    #[test]
    fn an_attempt_directory_removed_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let paths = AttemptPaths::new(d.path().join("gone"));
        let got = request_stop(&paths, true, || None).unwrap();
        assert!(
            matches!(&got, Delivery::NotDelivered(why) if why.contains("was removed")),
            "{got:?}"
        );
    }
}
