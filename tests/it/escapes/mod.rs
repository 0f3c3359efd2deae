//! The sandbox closes what Landlock alone leaves open: one adversarial test per route a
//! red-team run took around the kernel layer, each checked to fail before the fix and each
//! with a control where the route is the only thing in the way.
//!
//! ```text
//!  route                                           closed by                      test file
//!  ──────────────────────────────────────────────  ─────────────────────────────  ─────────
//!  rename .git, plant config/hooks/rebase state,   the git directory is a private  git
//!  point .git/commondir elsewhere, move `main`      overlay; only the own branch
//!                                                   and its objects come back
//!  commit a gitlink to a repository it made, or    gitlinks the branch lacks are  submodules
//!  make one at a submodule's path (its fsmonitor,  refused; subpane's git never
//!  a clean filter)                                 enters a nested .git
//!  move its branch back or sideways                only a fast-forward comes back carry
//!  chmod/chown/utime/setxattr outside the writes   the host tree mounted read-only files
//!  a hook in the agent's settings                  a state directory per attempt   agent_state
//!  the caller's tmux socket, other sockets, argv   hidden sockets, a PID namespace processes
//!  of other processes, AF_VSOCK, io_uring          seccomp
//!  `--hide /`, `--writable /`, links, `allow:::`,  the plan refuses (exit 2)       policy
//!  `--writable` of /proc, /sys, /dev, /run, /boot,
//!  above the home or the tmux socket, `--hide /proc`
//!  the host's devices (/dev/vcs*, kvm, loop, disks) a private /dev                devices
//!  credentials seeded from a hidden directory      seeding honours --hide         agent_state
//!  fork bombs, memory, /tmp, huge files            limits, `resource_limit`        limits
//!  sparse artifacts, a link at the overlay's        one type for a program's tree   tree
//!  `objects`, a FIFO `.git`                         (bounded, no link, no FIFO)
//! ```
//!
//! Common pitfalls:
//! * A home or victim under `/tmp` is hidden by the sandbox's private `/tmp` anyway: these
//!   tests use [`TestEnv::with_home_outside_tmp`] and put what the program attacks under
//!   [`outside_the_sandbox`].
//! * A refusal proves nothing unless the same attempt works without the rule: each test has
//!   a control (unsandboxed, or the allowed twin of the attack).

mod agent_state;
mod carry;
mod devices;
mod files;
mod git;
mod limits;
mod policy;
mod processes;
mod submodules;
mod tree;

use std::path::{Path, PathBuf};

pub(crate) use serde_json::json;

pub(crate) use crate::harness::{Ran, TestEnv, outside_the_sandbox, q, shell_quote};
pub(crate) use crate::trust::{HANG, LIMIT, run_bash, stdout_log};

/// `subpane ARGS…` with this test's home, bounded in time.
fn sp(env: &TestEnv, args: &[&str]) -> Ran {
    env.sp_within(LIMIT, HANG, args)
}

/// Whether no run was created in the home.
fn no_runs(env: &TestEnv) -> bool {
    std::fs::read_dir(env.home.join("runs")).map_or(true, |mut d| d.next().is_none())
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A directory outside `/tmp`, canonical.
fn outside(prefix: &str) -> (tempfile::TempDir, PathBuf) {
    let d = outside_the_sandbox(prefix);
    let p = d.path().canonicalize().unwrap();
    (d, p)
}
