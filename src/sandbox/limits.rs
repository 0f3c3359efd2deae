//! The limits of a sandbox: where each is set, by which mechanism, and how a limit reached
//! is told when the program ends.
//!
//! ```text
//!  limit          mechanism                       set by            told at the end by
//!  ─────────────  ──────────────────────────────  ────────────────  ──────────────────────────
//!  processes      pid_max of the PID namespace    init (/proc/sys)  no room for two more
//!                 (processes and threads, whole                      processes (init forks)
//!                 sandbox)
//!  memory         RLIMIT_DATA (per process)       the program       not told (an allocation
//!                                                                    fails; the program says)
//!  tmp            size= of the private /tmp tmpfs mounts.rs         /tmp full (statfs)
//!  file size      RLIMIT_FSIZE (per file)         the program       a process killed by
//!                                                                    SIGXFSZ
//! ```
//!
//! Why these: each holds for an unprivileged user without help from outside the sandbox.
//! A total memory limit (and a count of refused forks and allocations) needs a cgroup of its
//! own, which an unprivileged process gets only from a delegating service manager; per
//! process limits and the namespace's own `pid_max` need nothing.
//!
//! Common pitfalls:
//! * `RLIMIT_NPROC` counts per user (per user namespace since Linux 5.14), but the kernel
//!   does not enforce it on root: the namespace's `pid_max` (Linux 6.14) holds for everyone.
//!   Its smallest value is 301, so the limit is at least 300, and once the namespace has
//!   used every number up to it, the kernel hands out numbers from 300 up again: a sandbox
//!   that has started more than N processes in all may be refused up to 299 sooner.
//! * `RLIMIT_AS` counts address space that is only reserved: V8 and Bun reserve gigabytes
//!   they never touch. `RLIMIT_DATA` counts what is writable and private, what a process
//!   allocates.
//! * The limits are set on the program's process, not on init or the relay: a relay that
//!   cannot write would cut the program's connections, and init must be able to fork its
//!   probe at the end.

use super::SandboxFailure;
use crate::envelope::{EnforcedLimit, EnforcedLimits, LimitKind};
use crate::spec::SandboxLimits;

/// Sets the PID namespace's `pid_max` (call in init, with its own `/proc` mounted and still
/// writable). `Err` with why when the kernel has no `pid_max` per namespace.
pub fn set_pid_max(processes: u32) -> Result<(), String> {
    let value = pid_max_for(processes);
    std::fs::write("/proc/sys/kernel/pid_max", value.to_string()).map_err(|e| {
        format!(
            "processes: this kernel has no pid_max per PID namespace (Linux 6.14), so the process limit is not enforced ({e})"
        )
    })
}

/// The `pid_max` that allows `processes` at once: pid 1 (init) is one of them, numbers
/// 1..=processes.
pub fn pid_max_for(processes: u32) -> u64 {
    u64::from(processes) + 1
}

/// Sets the limits that belong to the program's process (call just before exec).
pub fn for_program(limits: &SandboxLimits) -> Result<(), SandboxFailure> {
    for (what, resource, value) in [
        ("memory", libc::RLIMIT_DATA, limits.memory_bytes),
        ("file size", libc::RLIMIT_FSIZE, limits.file_size_bytes),
    ] {
        let r = libc::rlimit {
            rlim_cur: value,
            rlim_max: value,
        };
        // SAFETY: setrlimit(2) with a valid rlimit.
        if unsafe { libc::setrlimit(resource, &r) } != 0 {
            return Err(SandboxFailure::Limits {
                why: format!(
                    "cannot set the {what} limit: {}",
                    std::io::Error::last_os_error()
                ),
            });
        }
    }
    Ok(())
}

/// The limits as enforced: `processes` only when `pid_max` was set.
pub fn enforced(limits: &SandboxLimits, processes: bool) -> EnforcedLimits {
    let by = |max: u64, by: &str| {
        Some(EnforcedLimit {
            max,
            by: by.to_owned(),
        })
    };
    EnforcedLimits {
        processes: if processes {
            by(limits.processes.into(), "pid_namespace")
        } else {
            None
        },
        memory_bytes: by(limits.memory_bytes, "rlimit_data"),
        tmp_bytes: by(limits.tmp_bytes, "tmpfs"),
        file_size_bytes: by(limits.file_size_bytes, "rlimit_fsize"),
    }
}

/// The tmpfs options of the private `/tmp`: its size, and one inode per 16 KiB (at least
/// 1024), so that empty files cannot take the kernel's memory either.
pub fn tmpfs_options(limits: &SandboxLimits) -> String {
    let inodes = tmpfs_inodes(limits.tmp_bytes);
    format!("mode=1777,size={},nr_inodes={inodes}", limits.tmp_bytes)
}

/// The inodes of a private `/tmp` of `bytes`: one per 16 KiB, at least 1024.
pub fn tmpfs_inodes(bytes: u64) -> u64 {
    (bytes / (16 << 10)).max(1024)
}

/// What init tells when the program has ended: a limit reached, from the facts it can see
/// (the program's wait status, an orphan killed by `SIGXFSZ`, the state of `/tmp` and of
/// the PID namespace). Call in init only: it forks.
pub fn reached(program_status: i32, orphan_fsize: bool) -> Option<LimitKind> {
    let killed_by =
        |sig| libc::WIFSIGNALED(program_status) && libc::WTERMSIG(program_status) == sig;
    if killed_by(libc::SIGXFSZ) || orphan_fsize {
        return Some(LimitKind::FileSize);
    }
    if namespace_full() {
        return Some(LimitKind::Processes);
    }
    if tmp_full() {
        return Some(LimitKind::Tmp);
    }
    None
}

/// Whether the PID namespace has no room for two more processes (the program's own number
/// was just given back; a fork bomb takes it at once).
fn namespace_full() -> bool {
    let mut held = Vec::new();
    let mut full = false;
    for _ in 0..2 {
        // SAFETY: fork in init (single-threaded); the child only waits to be killed.
        match unsafe { libc::fork() } {
            0 => loop {
                // SAFETY: pause(2) until init kills it.
                unsafe { libc::pause() };
            },
            -1 => {
                full = std::io::Error::last_os_error().raw_os_error() == Some(libc::EAGAIN);
                break;
            }
            pid => held.push(pid),
        }
    }
    for pid in held {
        // SAFETY: kill and reap init's own probe child.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
    }
    full
}

/// Whether the private `/tmp` has no block or no inode left.
fn tmp_full() -> bool {
    // SAFETY: statvfs is plain old data; all zeroes is a valid value.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: statvfs(3) on a constant path into a local.
    if unsafe { libc::statvfs(c"/tmp".as_ptr(), &mut st) } != 0 {
        return false;
    }
    st.f_bavail == 0 || st.f_favail == 0
}

/// One byte on init's status pipe: the limit reached, if any.
pub fn to_byte(hit: Option<LimitKind>) -> u8 {
    match hit {
        None => 0,
        Some(LimitKind::Processes) => 1,
        Some(LimitKind::Memory) => 2,
        Some(LimitKind::Tmp) => 3,
        Some(LimitKind::FileSize) => 4,
    }
}

/// The inverse of [`to_byte`] (anything else: none).
pub fn from_byte(b: u8) -> Option<LimitKind> {
    match b {
        1 => Some(LimitKind::Processes),
        2 => Some(LimitKind::Memory),
        3 => Some(LimitKind::Tmp),
        4 => Some(LimitKind::FileSize),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_cross_the_pipe_as_one_byte() {
        use LimitKind::*;
        for k in [
            None,
            Some(Processes),
            Some(Memory),
            Some(Tmp),
            Some(FileSize),
        ] {
            assert_eq!(from_byte(to_byte(k)), k);
        }
        assert_eq!(from_byte(200), None);
    }

    #[test]
    fn tmpfs_gets_its_size_and_inodes_in_proportion() {
        let mut l = SandboxLimits {
            tmp_bytes: 1 << 30,
            ..SandboxLimits::default()
        };
        assert_eq!(
            tmpfs_options(&l),
            "mode=1777,size=1073741824,nr_inodes=65536"
        );
        l.tmp_bytes = 1 << 20;
        assert!(tmpfs_options(&l).ends_with("nr_inodes=1024"));
    }

    #[test]
    fn every_limit_names_its_mechanism() {
        let e = enforced(&SandboxLimits::default(), true);
        assert_eq!(e.processes.unwrap().by, "pid_namespace");
        assert_eq!(e.memory_bytes.unwrap().by, "rlimit_data");
        assert!(
            enforced(&SandboxLimits::default(), false)
                .processes
                .is_none()
        );
    }
}
