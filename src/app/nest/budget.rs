//! What a sandboxed attempt's nested runs may take of its limits: at most [`MAX_LIVE`] live
//! at once, and its `--max-procs` and `--max-tmp` shared between it and them.
//!
//! ```text
//!  the parent's limits, as its sandbox started:  whole = {processes, tmp}
//!  its live nested runs hold:                   held  = Σ grants
//!  its own sandbox has (the kernel's limits):   whole − held      (sandbox::resize)
//!
//!  take(ask): live < 16? ─► grant = ask, or an eighth of whole (at least 300 processes,
//!             one page of /tmp) ─► within what the parent can spare (it keeps 300
//!             processes and a page)? ─► resize the parent to whole − held − grant (the
//!             kernel refuses what it uses now) ─► the child's sandbox gets the grant
//!  give_back(id) when the child has ended ─► resize the parent to whole − held
//! ```
//!
//! So the parent's sandbox and its live nested runs' sandboxes together never have more
//! than the parent's own limits, each held by the kernel: `pid_max` of each PID namespace,
//! the size of each private `/tmp`. What is only accounted here: which grants are live (a
//! child's end is seen by the server, which gives its grant back).
//!
//! Common pitfalls:
//! * A grant is taken before the child starts and given back only once its attempt has
//!   ended (its envelope exists): a grant given back early lets the tree outgrow the parent.
//!   When that end cannot be watched, the grant stays taken until the parent ends.
//! * The kernel's limits are set from `whole − held`, never adjusted by a difference: a
//!   change that failed is made good by the next one.
//! * Sizes of `/tmp` are whole pages (a tmpfs counts them so): a grant is rounded up.

use std::collections::BTreeMap;

use crate::envelope::ProcRef;
use crate::sandbox::resize::{self, PAGE, ResizeFailure, Usage};
use crate::spec::{SandboxLimits, format_size};

/// Live nested runs of one attempt at once (its depth is bounded by `--max-depth`).
pub(super) const MAX_LIVE: usize = 16;

/// A share of the limits: processes (and threads), bytes of `/tmp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Share {
    pub processes: u32,
    pub tmp: u64,
}

/// What a nested run asked for (`--max-procs`, `--max-tmp`); `None` takes the default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Ask {
    pub processes: Option<u32>,
    pub tmp: Option<u64>,
}

/// Changes the parent's sandbox (the real one is [`resize::request`]).
pub(super) type Resize<'a> = &'a dyn Fn(&resize::Request) -> Result<Usage, ResizeFailure>;

/// The parent's limits and the grants of its live nested runs.
#[derive(Debug)]
pub(super) struct Budget {
    whole: Share,
    /// The parent's sandbox helper, whose namespaces hold its limits.
    helper: ProcRef,
    /// The parent's own limits as last set in the kernel.
    now: Share,
    live: BTreeMap<u64, Share>,
    next: u64,
}

impl Budget {
    /// The budget of a parent with `limits`, whose sandbox helper is `helper`.
    pub(super) fn new(limits: &SandboxLimits, helper: ProcRef) -> Self {
        let whole = Share {
            processes: limits.processes,
            tmp: resize::round_up(limits.tmp_bytes),
        };
        Self {
            whole,
            helper,
            now: whole,
            live: BTreeMap::new(),
            next: 0,
        }
    }

    fn held(&self) -> Share {
        self.live.values().fold(
            Share {
                processes: 0,
                tmp: 0,
            },
            |a, s| Share {
                processes: a.processes + s.processes,
                tmp: a.tmp + s.tmp,
            },
        )
    }

    /// What the parent has left to itself: whole − held.
    fn left(&self) -> Share {
        let held = self.held();
        Share {
            processes: self.whole.processes - held.processes,
            tmp: self.whole.tmp - held.tmp,
        }
    }

    /// The grant of a nested run that asks `ask`, or why it gets none. Pure.
    pub(super) fn grant(&self, ask: Ask) -> Result<Share, String> {
        if self.live.len() >= MAX_LIVE {
            return Err(format!(
                "a sandboxed attempt may have at most {MAX_LIVE} live runs from inside it, and {} are live: wait for one of them to end",
                self.live.len()
            ));
        }
        let least = SandboxLimits::MIN_PROCESSES;
        let want = Share {
            processes: ask
                .processes
                .unwrap_or((self.whole.processes / 8).max(least)),
            tmp: resize::round_up(ask.tmp.unwrap_or(self.whole.tmp / 8).max(PAGE)),
        };
        let (left, live) = (self.left(), self.live.len());
        let spare = Share {
            processes: left.processes.saturating_sub(least),
            tmp: left.tmp.saturating_sub(PAGE),
        };
        let refuse = |asked: String, can: String, whole: String, held: String, keeps: &str| {
            format!(
                "{asked} is more than the parent sandbox can spare: {can} of its {whole} ({}; it keeps {keeps} for itself); ask for less, or wait for a run from it to end",
                if live == 0 {
                    "no run from it is live".to_owned()
                } else {
                    format!("{live} live run(s) from it hold {held}")
                }
            )
        };
        if want.processes > spare.processes {
            let asked = match ask.processes {
                Some(n) => format!("{{max_procs}} {n}"),
                None => format!(
                    "the default of a run from a sandbox (an eighth of its parent's {{max_procs}}, at least {least}: {})",
                    want.processes
                ),
            };
            return Err(refuse(
                asked,
                spare.processes.to_string(),
                format!("{} processes", self.whole.processes),
                self.held().processes.to_string(),
                &format!("at least {least}"),
            ));
        }
        if want.tmp > spare.tmp {
            let asked = match ask.tmp {
                Some(n) => format!("{{max_tmp}} {}", format_size(n)),
                None => format!(
                    "the default of a run from a sandbox (an eighth of its parent's {{max_tmp}}: {})",
                    format_size(want.tmp)
                ),
            };
            return Err(refuse(
                asked,
                format_size(spare.tmp),
                format!("{} of /tmp", format_size(self.whole.tmp)),
                format_size(self.held().tmp),
                "what its /tmp holds, and a page",
            ));
        }
        Ok(want)
    }

    /// Takes a grant for a nested run: the parent's sandbox gives it up first. Returns the
    /// grant's id (for [`Budget::give_back`]) and the grant.
    pub(super) fn take(&mut self, ask: Ask, resize: Resize<'_>) -> Result<(u64, Share), String> {
        let g = self.grant(ask)?;
        self.next += 1;
        let id = self.next;
        self.live.insert(id, g);
        match self.set(resize) {
            Ok(()) => Ok((id, g)),
            Err(f) => {
                self.live.remove(&id);
                Err(format!(
                    "the parent sandbox cannot give a run from it {} processes and {} of /tmp: {f}",
                    g.processes,
                    format_size(g.tmp)
                ))
            }
        }
    }

    /// A nested run has ended: its grant goes back to the parent's sandbox (when that still
    /// runs; if the change fails, the next one makes it good).
    pub(super) fn give_back(&mut self, id: u64, resize: Resize<'_>) {
        if self.live.remove(&id).is_some() {
            let _ = self.set(resize);
        }
    }

    /// Sets the parent's sandbox to what it has left.
    fn set(&mut self, resize: Resize<'_>) -> Result<(), ResizeFailure> {
        let to = self.left();
        resize(&resize::Request {
            helper: self.helper,
            processes: to.processes,
            tmp: to.tmp,
            tmp_now: self.now.tmp,
        })?;
        self.now = to;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;

    const MIB: u64 = 1 << 20;

    fn budget(processes: u32, tmp: u64) -> Budget {
        let limits = SandboxLimits {
            processes,
            tmp_bytes: tmp,
            ..SandboxLimits::default()
        };
        Budget::new(
            &limits,
            ProcRef {
                pid: 42,
                start_ticks: 7,
            },
        )
    }

    /// A kernel that takes every change and records it.
    fn kernel(
        log: &RefCell<Vec<resize::Request>>,
    ) -> impl Fn(&resize::Request) -> Result<Usage, ResizeFailure> + '_ {
        |r| {
            log.borrow_mut().push(*r);
            Ok(Usage::default())
        }
    }

    fn ask(processes: Option<u32>, tmp: Option<u64>) -> Ask {
        Ask { processes, tmp }
    }

    #[test]
    fn a_grant_comes_out_of_the_parents_limits_and_goes_back() {
        let log = RefCell::new(Vec::new());
        let k = kernel(&log);
        let mut b = budget(1200, 64 * MIB);
        let (a, g) = b.take(ask(Some(600), Some(32 * MIB)), &k).unwrap();
        assert_eq!(
            g,
            Share {
                processes: 600,
                tmp: 32 * MIB
            }
        );
        let last = *log.borrow().last().unwrap();
        assert_eq!(
            (last.processes, last.tmp, last.tmp_now),
            (600, 32 * MIB, 64 * MIB)
        );
        // The default: an eighth, at least 300 processes.
        let (d, g) = b.take(Ask::default(), &k).unwrap();
        assert_eq!(
            g,
            Share {
                processes: 300,
                tmp: 8 * MIB
            }
        );
        assert_eq!(log.borrow().last().unwrap().processes, 300);
        // Parent and children together: never more than the parent's own.
        assert_eq!(b.left().processes + b.held().processes, 1200);
        assert_eq!(b.left().tmp + b.held().tmp, 64 * MIB);
        b.give_back(d, &k);
        let last = *log.borrow().last().unwrap();
        assert_eq!(
            (last.processes, last.tmp, last.tmp_now),
            (600, 32 * MIB, 24 * MIB)
        );
        b.give_back(a, &k);
        assert_eq!(
            b.now,
            Share {
                processes: 1200,
                tmp: 64 * MIB
            }
        );
        // Given back twice: nothing more.
        b.give_back(a, &k);
        assert_eq!(b.now, b.whole);
    }

    #[test]
    fn a_grant_beyond_what_the_parent_can_spare_is_refused_saying_what_it_can() {
        let log = RefCell::new(Vec::new());
        let k = kernel(&log);
        let mut b = budget(1200, 64 * MIB);
        b.take(ask(Some(600), Some(32 * MIB)), &k).unwrap();
        let e = b.take(ask(Some(600), None), &k).unwrap_err();
        assert!(
            e.starts_with("{max_procs} 600 is more than the parent sandbox can spare: 300 of its 1200 processes")
                && e.contains("1 live run(s) from it hold 600"),
            "{e}"
        );
        let e = b.take(ask(None, Some(40 * MIB)), &k).unwrap_err();
        assert!(
            e.starts_with("{max_tmp} 40M is more than") && e.contains("of its 64M of /tmp"),
            "{e}"
        );
        // A parent too small for the default of a child.
        let e = budget(400, 64 * MIB).grant(Ask::default()).unwrap_err();
        assert!(e.contains("an eighth of its parent's {max_procs}"), "{e}");
        // Refusals changed nothing.
        assert_eq!(log.borrow().len(), 1);
        assert_eq!(b.live.len(), 1);
    }

    #[test]
    fn at_most_sixteen_live_and_a_kernel_refusal_takes_nothing() {
        let log = RefCell::new(Vec::new());
        let k = kernel(&log);
        let mut b = budget(300 * 20, 64 * MIB);
        for _ in 0..MAX_LIVE {
            b.take(ask(Some(300), Some(PAGE)), &k).unwrap();
        }
        let e = b.take(ask(Some(300), Some(PAGE)), &k).unwrap_err();
        assert!(e.contains("at most 16") && e.contains("16 are live"), "{e}");

        let mut b = budget(1200, 64 * MIB);
        let busy = |_: &resize::Request| {
            Err(ResizeFailure::Processes {
                tasks: 1000,
                limit: 600,
            })
        };
        let e = b.take(ask(Some(600), None), &busy).unwrap_err();
        assert!(e.contains("it runs 1000 processes"), "{e}");
        assert!(b.live.is_empty() && b.now == b.whole);
        // A /tmp grant never rounds to nothing (a tmpfs of size 0 has no limit).
        assert_eq!(b.grant(ask(None, Some(1))).unwrap().tmp, PAGE);
    }
}
