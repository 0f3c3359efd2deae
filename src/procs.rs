//! The kernel's process table: identities that survive pid reuse, pidfds, process trees.
//!
//! Common pitfalls:
//! * A pid alone is not an identity: always compare the start time (`ProcRef`).
//! * A zombie still has a `/proc` entry; it counts as dead.
//! * `kill(-pgid)` misses descendants that called `setsid`; the worker is a child subreaper so
//!   they stay in its tree, and [`descendants`] finds them.

use std::ffi::OsStr;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

use crate::envelope::ProcRef;

/// Reads a file of `/proc` (`/proc/<pid>/stat`, `environ`, `cmdline`). Their size is 0 to
/// `stat`, so `std::fs::read` starts with 32-byte reads and doubles: a 3 KiB environment took
/// eight reads. One page is enough for most in one read; more grows as usual.
pub fn read_proc(path: impl AsRef<std::path::Path>) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut buf = Vec::with_capacity(4096);
    std::fs::File::open(path)?.read_to_end(&mut buf)?;
    Ok(buf)
}

/// Parsed fields of `/proc/<pid>/stat` that we need.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    pub state: u8,
    pub ppid: i32,
    pub pgid: i32,
    pub start_ticks: u64,
}

/// Reads `/proc/<pid>/stat`. The command name may hold spaces and parentheses, so fields are
/// counted from the last `)`.
pub fn stat(pid: i32) -> Option<Stat> {
    let raw = read_proc(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&raw)
}

fn parse_stat(raw: &[u8]) -> Option<Stat> {
    let close = raw.iter().rposition(|b| *b == b')')?;
    let rest = std::str::from_utf8(&raw[close + 1..]).ok()?;
    let f: Vec<&str> = rest.split_ascii_whitespace().collect();
    // After the name: state(3) ppid(4) pgrp(5) … starttime(22); f[0] is field 3.
    Some(Stat {
        state: *f.first()?.as_bytes().first()?,
        ppid: f.get(1)?.parse().ok()?,
        pgid: f.get(2)?.parse().ok()?,
        start_ticks: f.get(19)?.parse().ok()?,
    })
}

/// The environment a process started with (`/proc/<pid>/environ`); `None` when it cannot be
/// read (gone, or another user's).
pub fn environ(pid: i32) -> Option<Vec<(std::ffi::OsString, std::ffi::OsString)>> {
    let raw = read_proc(format!("/proc/{pid}/environ")).ok()?;
    Some(crate::spec::parse_env_block(&raw))
}

/// The identity of a live process.
pub fn proc_ref(pid: i32) -> Option<ProcRef> {
    let s = stat(pid)?;
    Some(ProcRef {
        pid,
        start_ticks: s.start_ticks,
    })
}

/// Whether the process named by `r` is alive (not exited, not a zombie, not a reused pid).
pub fn is_alive(r: &ProcRef) -> bool {
    matches!(stat(r.pid), Some(s) if s.start_ticks == r.start_ticks && s.state != b'Z' && s.state != b'X')
}

/// A pidfd for the process named by `r`, or `None` if it is gone. The start time is checked
/// after opening, so the fd cannot refer to a process that reused the pid.
pub fn pidfd_for(r: &ProcRef) -> Option<OwnedFd> {
    let fd = pidfd_open(r.pid).ok()?;
    if is_alive(r) { Some(fd) } else { None }
}

/// `pidfd_open(2)`.
pub fn pidfd_open(pid: i32) -> std::io::Result<OwnedFd> {
    // SAFETY: plain syscall with integer arguments; the returned fd is owned by us.
    let rc = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: rc is a fresh fd returned by the kernel.
    Ok(unsafe { OwnedFd::from_raw_fd(rc as RawFd) })
}

/// Waits until the process behind the pidfd `fd` has exited, or `until` has passed; whether
/// it exited. No polling loop: one `poll(2)` on the pidfd (again after a signal).
pub fn wait_pidfd_until(fd: &OwnedFd, until: std::time::Instant) -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    loop {
        let now = std::time::Instant::now();
        // Rounded up, so the wake-up is not a hair early.
        let ms = (until.saturating_duration_since(now).as_millis() + 1).min(i32::MAX as u128);
        let timeout = PollTimeout::try_from(ms as i32).unwrap_or(PollTimeout::MAX);
        let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, timeout) {
            Ok(0) if std::time::Instant::now() >= until => return false,
            Ok(0) | Err(nix::errno::Errno::EINTR) => {}
            Ok(_) => return true,
            Err(_) => return false,
        }
    }
}

/// `pidfd_send_signal(2)`: signals exactly the process the pidfd refers to.
pub fn pidfd_send_signal(fd: &OwnedFd, sig: Signal) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: plain syscall; a null siginfo is allowed.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            sig as libc::c_int,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Signals a whole process group. Errors (the group is already gone) are ignored.
pub fn signal_group(pgid: i32, sig: Signal) {
    if pgid > 1 {
        let _ = killpg(Pid::from_raw(pgid), sig);
    }
}

/// Signals one process. Errors are ignored.
pub fn signal_pid(pid: i32, sig: Signal) {
    if pid > 1 {
        let _ = kill(Pid::from_raw(pid), sig);
    }
}

fn all_pids() -> Vec<i32> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()))
        .collect()
}

/// All live descendants of `root` (not `root` itself), found by walking parent links.
pub fn descendants(root: i32) -> Vec<i32> {
    let table: Vec<(i32, Stat)> = all_pids()
        .into_iter()
        .filter_map(|p| stat(p).map(|s| (p, s)))
        .collect();
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        for (pid, s) in &table {
            if s.ppid == parent && s.state != b'Z' && !found.contains(pid) {
                found.push(*pid);
            }
        }
        i += 1;
    }
    found.remove(0);
    found
}

/// Processes whose environment holds exactly `name=value`. Used to find what is left of an
/// attempt after its worker died (its agent and descendants carry `SUBPANE_ATTEMPT_DIR`).
pub fn with_env(name: &str, value: &OsStr) -> Vec<i32> {
    let mut needle = Vec::with_capacity(name.len() + 1 + value.len());
    needle.extend_from_slice(name.as_bytes());
    needle.push(b'=');
    needle.extend_from_slice(value.as_bytes());
    let me = std::process::id() as i32;
    all_pids()
        .into_iter()
        .filter(|p| *p != me)
        .filter(|p| {
            read_proc(format!("/proc/{p}/environ"))
                .map(|env| env.split(|b| *b == 0).any(|kv| kv == needle.as_slice()))
                .unwrap_or(false)
        })
        .collect()
}

/// The argument that makes the binary a worker (`subpane __worker ATTEMPT_DIR`).
pub const WORKER_ARG: &str = "__worker";

/// The hidden verb of the sandbox helper (`subpane __sandbox --policy ATTEMPT/spec.json …`);
/// inside the sandbox's PID namespace it is pid 1.
pub const SANDBOX_ARG: &str = "__sandbox";

/// The hidden verb of the server of a sandboxed attempt's nested runs (`app::nest`).
pub const NEST_ARG: &str = "__nest";

/// The hidden verb that changes a running sandbox's limits (`sandbox::resize`).
pub const RESIZE_ARG: &str = "__resize";

/// Whether `r` is alive and is the worker of the attempt in `dir`: its command line is
/// `… __worker DIR`. A record names a process, and only this makes it one to signal: a pid
/// and start time copied into a record from any other process never pass.
pub fn is_worker_of(r: &ProcRef, dir: &std::path::Path) -> bool {
    if !is_alive(r) {
        return false;
    }
    let Ok(cmdline) = read_proc(format!("/proc/{}/cmdline", r.pid)) else {
        return false;
    };
    let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    // The start time again: the pid could have been reused while the command line was read.
    args.get(1) == Some(&WORKER_ARG.as_bytes())
        && args.get(2) == Some(&dir.as_os_str().as_bytes())
        && is_alive(r)
}

/// Whether process `pid` runs as this process's user (its `/proc` entry is ours).
pub fn is_ours(pid: i32) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(format!("/proc/{pid}"))
        .is_ok_and(|m| m.uid() == nix::unistd::geteuid().as_raw())
}

/// Whether process `pid` belongs to the attempt in `dir`: the worker gives every program it
/// starts `SUBPANE_ATTEMPT_DIR=DIR`, and descendants inherit it.
pub fn belongs_to_attempt(pid: i32, dir: &std::path::Path) -> bool {
    let mut needle = b"SUBPANE_ATTEMPT_DIR=".to_vec();
    needle.extend_from_slice(dir.as_os_str().as_bytes());
    read_proc(format!("/proc/{pid}/environ"))
        .is_ok_and(|env| env.split(|b| *b == 0).any(|kv| kv == needle.as_slice()))
}

/// The conventional name of a signal number, e.g. `SIGKILL`.
pub fn signal_name(sig: i32) -> String {
    Signal::try_from(sig)
        .map(|s| s.as_str().to_owned())
        .unwrap_or_else(|_| format!("SIG{sig}"))
}

/// For `pre_exec`: gives the new program a clean signal state (nothing blocked, default
/// dispositions). Signal masks and ignored signals survive `exec`, and both the worker
/// (signalfd) and a waiting `run` (Ctrl-C) block signals that programs must receive.
/// Only async-signal-safe calls.
pub fn reset_signals_in_child() -> std::io::Result<()> {
    // SAFETY: sigemptyset/sigprocmask/signal are async-signal-safe; pointers are valid.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        if libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        for sig in 1..32 {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                libc::signal(sig, libc::SIG_DFL);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_handles_odd_names() {
        let raw = b"42 (a) b (c)) S 1 42 42 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 777 0 0";
        let s = parse_stat(raw).unwrap();
        assert_eq!((s.state, s.ppid, s.pgid, s.start_ticks), (b'S', 1, 42, 777));
    }

    #[test]
    fn self_is_alive_and_reused_pid_is_not() {
        let me = proc_ref(std::process::id() as i32).unwrap();
        assert!(is_alive(&me));
        assert!(!is_alive(&ProcRef {
            pid: me.pid,
            start_ticks: me.start_ticks + 1
        }));
        assert!(pidfd_for(&me).is_some());
    }

    #[test]
    fn only_a_worker_of_the_attempt_is_its_worker() {
        let me = proc_ref(std::process::id() as i32).unwrap();
        // This test process is alive, but it is no worker of anything.
        assert!(!is_worker_of(
            &me,
            std::path::Path::new("/h/runs/r/attempts/1")
        ));
        let mut child = std::process::Command::new("sleep")
            .args(["60"])
            .spawn()
            .unwrap();
        let r = proc_ref(child.id() as i32).unwrap();
        assert!(!is_worker_of(&r, std::path::Path::new("/h")));
        assert!(!belongs_to_attempt(r.pid, std::path::Path::new("/h")));
        let _ = child.kill();
        let _ = child.wait();
    }

    #[test]
    fn names_signals() {
        assert_eq!(signal_name(9), "SIGKILL");
        assert_eq!(signal_name(15), "SIGTERM");
    }
}
