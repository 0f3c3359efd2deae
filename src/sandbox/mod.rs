//! The kernel sandbox of an attempt's program (`run --sandbox`).
//!
//! ```text
//!  worker (outside, unsandboxed)                       program's side
//!  ─────────────────────────────                       ──────────────
//!  [allow:] egress proxy thread ◄─ <attempt>/proxy.sock ◄─ relay 127.0.0.1:3128 (in the netns)
//!     │ network.jsonl                                       ▲ HTTP(S)_PROXY, ALL_PROXY
//!  spawn `subpane __sandbox --policy spec.json --report-fd 3 -- PROGRAM ARGS…`
//!    helper: unshare user+mount[+net]+pid namespaces; waits, then ends as the program did
//!      └─ init (pid 1): mounts (private /tmp, hidden paths, read-only host with writable
//!         │             binds, its own /proc), Landlock (files, scopes), no_new_privs
//!         ├─ [allow:] relay (seccomp: Relay)
//!         └─ program (pid 2): seccomp, report {"enforced": …} on fd 3, then exec
//!                     PROGRAM  (fd 3 closes on exec: the worker knows it ran)
//! ```
//!
//! The sandbox applies to the program only: the worker, the pane and tmux stay outside. It
//! fails closed: if any part cannot be set up, the helper reports a [`SandboxFailure`] on the
//! report fd and exits [`EXIT_SANDBOX_FAILED`] without running the program, and the attempt
//! ends with `failure_kind: "sandbox"`.
//!
//! Who owns what in the helper:
//! * [`exec`]: the order of the steps, the report, the helper's wait and its exit;
//! * `init`: pid 1 of the PID namespace: the view, the relay, the program, the reaping;
//! * `namespaces`: user, mount, network and PID namespaces, and the loopback;
//! * `mounts`: what the program can see and change (private `/tmp`, hidden paths, read-only
//!   holes, the read-only host, its own `/proc`);
//! * `landlock`: what it may write and whom it may signal;
//! * [`seccomp`]: the system calls it never needs, per process (pure rules, then install);
//! * [`limits`]: processes, memory, `/tmp` and file size, and how a limit reached is told;
//! * [`resize`]: the process and `/tmp` limits of a sandbox that runs, changed from outside
//!   (shared with the runs its program starts).
//!
//! Common pitfalls:
//! * Landlock rules only add rights: a read-only hole in a writable tree (a worktree's `.git`
//!   file) needs a read-only bind mount, and a hidden path needs a mount over it. A git
//!   directory needs more than holes (git writes it by lock and rename): it is an overlay.
//! * Landlock covers a file's bytes, not its metadata: the host's tree is read-only in the
//!   mount namespace so that chmod, chown, utime and xattrs fail outside the writable trees.
//! * Landlock (up to ABI 7) cannot refuse connecting to a pathname Unix socket: the tmux
//!   server's socket, `/run` and the caller's sockets are hidden by the mount namespace.
//! * Claude Code opens a Unix socket under `/tmp`: hide, do not refuse `AF_UNIX`.
//! * Under `none` the tmux socket would still be reachable: a network namespace does not
//!   cover pathname Unix sockets (abstract ones, though, are per network namespace), nor
//!   `AF_VSOCK` (refused by seccomp).
//! * The program is the helper's grandchild: the worker signals the process group, which
//!   holds all three; only the program acts on SIGTERM (see [`exec`]).

pub mod exec;
mod init;
mod landlock;
pub mod limits;
mod mounts;
mod namespaces;
pub mod proxy;
pub mod relay;
pub mod resize;
pub mod seccomp;

use serde::{Deserialize, Serialize};

pub use crate::envelope::Enforced;

/// The kernel's Landlock ABI version, or why there is none (for `hosts check`).
pub fn landlock_abi() -> Result<i32, String> {
    landlock::kernel_abi().map_err(|e| e.to_string())
}

/// The exit code of the sandbox helper when the sandbox could not be set up.
pub const EXIT_SANDBOX_FAILED: i32 = 125;

/// The loopback port inside the attempt's network namespace where the relay to the egress
/// proxy listens (the namespace is private, so any port is free).
pub const PROXY_PORT: u16 = 3128;

/// Why the sandbox could not be set up. Sent as JSON to the worker, which records it in the
/// envelope (`failure_kind: "sandbox"`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum SandboxFailure {
    /// A namespace could not be created (e.g. unprivileged user namespaces are off).
    #[error(
        "the sandbox needs {namespace} namespaces, which this kernel refused ({errno}); enable unprivileged user namespaces (e.g. sysctl kernel.unprivileged_userns_clone=1, or the AppArmor restriction on Ubuntu)"
    )]
    Namespace { namespace: String, errno: String },
    /// Landlock is missing or too old for a rule that was asked for.
    #[error("the sandbox needs Landlock: {why}")]
    Landlock { why: String },
    #[error("the sandbox could not install its seccomp filter: {why}")]
    Seccomp { why: String },
    #[error("the sandbox could not set up its file system view ({path}): {why}")]
    Mount { path: String, why: String },
    #[error("the sandbox could not set up the network ({why})")]
    Network { why: String },
    #[error("the sandbox policy could not be read: {why}")]
    Policy { why: String },
    #[error("the sandbox could not set its limits: {why}")]
    Limits { why: String },
    /// Everything was in place, but the program could not be executed.
    #[error("cannot start {program}: {why}")]
    Exec { program: String, why: String },
}

/// One line the helper writes on its report fd (`enforced` or `failed`), or on its end fd
/// (`ended`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Report {
    /// Written just before exec.
    Enforced(Enforced),
    /// Written instead of exec (or after an exec that failed).
    Failed(SandboxFailure),
    /// Written when the program has ended: what the sandbox saw of its limits.
    Ended(Ended),
}

/// The sandbox's last word on a program that ran: `{"ended":{"limit_hit":"processes"}}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ended {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_hit: Option<crate::envelope::LimitKind>,
}
