//! Changes the process and `/tmp` limits of a sandbox that runs: how a sandboxed attempt's
//! limits are shared with its nested runs (`app::nest`). The change is the kernel's own, in
//! the sandbox's namespaces, made from outside by a process of its own
//! (`subpane __resize --helper PID:START --processes N --tmp BYTES --tmp-now BYTES`).
//!
//! ```text
//!  the server of nested runs ─ request() ─► subpane __resize (single-threaded, outside)
//!    the sandbox helper H (its pid and start time, checked again after the opens)
//!    open /proc/H/ns/{user,mnt,pid_for_children}, /proc/H/root/tmp, /proc/H/root/proc
//!    measure: processes and threads in its PID namespace (its /proc), what its /tmp holds
//!    refuse a limit below what it runs now (processes) ─► setns user, mnt, pid
//!    /tmp: fspick + fsconfig size, nr_inodes, reconfigure (the kernel refuses a size
//!          below what /tmp holds)
//!    processes: fork (a process of its PID namespace) ─► a mount namespace and a /proc of
//!               its own ─► write its pid_max
//!  ◄── one JSON line on stdout: {"resized":{"tasks":…,"tmp_used":…}} | {"failed":{…}}
//! ```
//!
//! Why from outside, and why a process: the limits are set in the sandbox's own namespaces
//! (`pid_max` is per PID namespace and written from inside it; a tmpfs is reconfigured by a
//! holder of `CAP_SYS_ADMIN` in the user namespace that owns it), and joining a user
//! namespace needs a single-threaded process. Init and the program run under seccomp
//! filters that refuse both; the sandbox's user namespace belongs to the user, whose process
//! may join it and holds every capability there, none outside.
//!
//! Common pitfalls:
//! * `pid_max` is the limit of the PID namespace that the writing process lives in, whichever
//!   `/proc` the file is reached through: the write happens in a child forked after `setns`.
//!   The fork takes one of the sandbox's process numbers for a moment (refused when none is
//!   left: the sandbox then has no room to share). The sandbox's own `/proc` is read-only
//!   (and the host's may be): the child mounts a fresh one in a mount namespace of its own.
//! * `pid_max` bounds process numbers, not how many there are: processes numbered above a
//!   lowered limit keep running (their number), new ones are numbered below it.
//! * A tmpfs of size 0 has no limit at all: a size below one page is never asked for.
//! * `/proc/H/root/tmp` is checked to be a tmpfs of the size the caller expects before it is
//!   changed: the caller knows what it last set (or what the sandbox started with).
//! * The sandbox helper's `/proc/H/…` can be opened only while it lives and by its user; its
//!   pid is checked against its start time after the opens (see `procs`), so every
//!   descriptor is the helper's and not a process's that took its pid.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::fcntl::{OFlag, open};
use nix::sched::{CloneFlags, setns};
use nix::sys::stat::Mode;
use serde::{Deserialize, Serialize};

use super::{limits, mounts};
use crate::envelope::ProcRef;
use crate::procs;

/// How long the helper may take (it reads the sandbox's `/proc` once).
const RESIZE_WAIT: Duration = Duration::from_secs(10);

/// The smallest `/tmp` a sandbox is given (a tmpfs of size 0 would have no limit).
pub const PAGE: u64 = 4096;

/// What the helper is asked: the sandbox of helper `helper`, from `tmp_now` bytes of `/tmp`
/// (what it has, as the caller last set it) to `processes` and `tmp` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    pub helper: ProcRef,
    pub processes: u32,
    pub tmp: u64,
    pub tmp_now: u64,
}

/// What the sandbox held when it was changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Processes and threads in its PID namespace (its init included).
    pub tasks: u64,
    /// What its `/tmp` holds, in bytes.
    pub tmp_used: u64,
}

/// Why the limits were left as they were.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ResizeFailure {
    #[error("the sandbox has ended")]
    Gone,
    #[error(
        "it runs {tasks} processes and threads, more than the {limit} it would keep: ask for fewer"
    )]
    Processes { tasks: u64, limit: u32 },
    #[error("its /tmp holds {used} bytes, more than the {size} it would keep: ask for less")]
    Tmp { used: u64, size: u64 },
    #[error("its {what} could not be changed: {why}")]
    Kernel { what: String, why: String },
}

/// One line on the helper's stdout.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Reply {
    Resized(Usage),
    Failed(ResizeFailure),
}

/// Asks a helper process to change the limits (the caller's side). Bounded in time.
pub fn request(req: &Request) -> Result<Usage, ResizeFailure> {
    let failed = |why: String| ResizeFailure::Kernel {
        what: "limits".into(),
        why,
    };
    let exe = std::env::current_exe().map_err(|e| failed(format!("no subpane binary: {e}")))?;
    let mut child = Command::new(exe)
        .arg(procs::RESIZE_ARG)
        .args(args(req))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| failed(format!("cannot start the helper: {e}")))?;
    let pidfd = procs::pidfd_open(child.id() as i32).ok();
    let ended = pidfd
        .as_ref()
        .is_some_and(|fd| procs::wait_pidfd_until(fd, Instant::now() + RESIZE_WAIT));
    if !ended {
        let _ = child.kill();
    }
    let mut out = String::new();
    if let Some(mut s) = child.stdout.take() {
        let _ = s.read_to_string(&mut out);
    }
    let _ = child.wait();
    match serde_json::from_str::<Reply>(out.trim()) {
        Ok(Reply::Resized(u)) => Ok(u),
        Ok(Reply::Failed(f)) => Err(f),
        Err(_) if !ended => Err(failed(format!(
            "the helper did not answer within {}s",
            RESIZE_WAIT.as_secs()
        ))),
        Err(e) => Err(failed(format!("the helper's answer is unreadable: {e}"))),
    }
}

fn args(req: &Request) -> Vec<OsString> {
    [
        "--helper".into(),
        format!("{}:{}", req.helper.pid, req.helper.start_ticks),
        "--processes".into(),
        req.processes.to_string(),
        "--tmp".into(),
        req.tmp.to_string(),
        "--tmp-now".into(),
        req.tmp_now.to_string(),
    ]
    .into_iter()
    .map(OsString::from)
    .collect()
}

/// `PID:START` (a pid and its start time in clock ticks) as the helper takes it.
pub fn parse_helper(s: &str) -> Result<ProcRef, String> {
    let (pid, start) = s
        .split_once(':')
        .ok_or_else(|| format!("--helper {s}: give PID:START_TICKS"))?;
    Ok(ProcRef {
        pid: pid.parse().map_err(|_| format!("--helper {s}: bad pid"))?,
        start_ticks: start
            .parse()
            .map_err(|_| format!("--helper {s}: bad start time"))?,
    })
}

/// The helper's entry point: changes the limits, answers on stdout. Returns the exit code.
pub fn main(req: Request) -> i32 {
    let reply = match resize(&req) {
        Ok(u) => Reply::Resized(u),
        Err(f) => Reply::Failed(f),
    };
    let line = serde_json::to_string(&reply).unwrap_or_default();
    let _ = writeln!(std::io::stdout(), "{line}");
    i32::from(!matches!(reply, Reply::Resized(_)))
}

fn resize(req: &Request) -> Result<Usage, ResizeFailure> {
    if req.tmp < PAGE || req.processes < crate::spec::SandboxLimits::MIN_PROCESSES {
        return Err(kernel("limits", "below the least a sandbox has".into()));
    }
    let h = req.helper;
    if !procs::is_alive(&h) {
        return Err(ResizeFailure::Gone);
    }
    let at = |rel: &str| format!("/proc/{}/{rel}", h.pid);
    let ns = |rel: &str| open_fd(&at(rel), OFlag::O_RDONLY);
    let (user, mnt, pid_ns) = (ns("ns/user")?, ns("ns/mnt")?, ns("ns/pid_for_children")?);
    let tmp = open_fd(&at("root/tmp"), OFlag::O_PATH | OFlag::O_DIRECTORY)?;
    let tasks = count_tasks(&at("root/proc"));
    // Every descriptor and count above is the helper's: it still lives, with its start time.
    if !procs::is_alive(&h) {
        return Err(ResizeFailure::Gone);
    }
    let fs = fstatfs(&tmp)?;
    let size = fs.f_blocks * fs.f_bsize as u64;
    if fs.f_type != libc::TMPFS_MAGIC || size != round_up(req.tmp_now) {
        return Err(kernel(
            "/tmp",
            format!(
                "it is not the private /tmp of {} bytes it should be",
                req.tmp_now
            ),
        ));
    }
    let usage = Usage {
        tasks,
        tmp_used: (fs.f_blocks - fs.f_bfree) * fs.f_bsize as u64,
    };
    // The writer of pid_max is one more process of the namespace for a moment.
    if u64::from(req.processes) < tasks + 1 {
        return Err(ResizeFailure::Processes {
            tasks,
            limit: req.processes,
        });
    }
    for (fd, flag, what) in [
        (&user, CloneFlags::CLONE_NEWUSER, "user namespace"),
        (&mnt, CloneFlags::CLONE_NEWNS, "mount namespace"),
        (&pid_ns, CloneFlags::CLONE_NEWPID, "PID namespace"),
    ] {
        setns(fd, flag).map_err(|e| kernel(what, format!("cannot join it: {e}")))?;
    }
    set_tmp(&tmp, req.tmp).map_err(|e| match e.raw_os_error() {
        Some(libc::EINVAL) => ResizeFailure::Tmp {
            used: usage.tmp_used,
            size: req.tmp,
        },
        _ => kernel("/tmp", e.to_string()),
    })?;
    if let Err(f) = set_pid_max(req.processes) {
        // Both or neither: /tmp goes back to what it was.
        let _ = set_tmp(&tmp, req.tmp_now);
        return Err(f);
    }
    Ok(usage)
}

fn kernel(what: &str, why: String) -> ResizeFailure {
    ResizeFailure::Kernel {
        what: what.into(),
        why,
    }
}

fn open_fd(path: &str, flags: OFlag) -> Result<OwnedFd, ResizeFailure> {
    open(Path::new(path), flags | OFlag::O_CLOEXEC, Mode::empty()).map_err(|e| match e {
        nix::errno::Errno::ENOENT | nix::errno::Errno::ESRCH => ResizeFailure::Gone,
        e => kernel("namespaces", format!("cannot open {path}: {e}")),
    })
}

fn fstatfs(fd: &OwnedFd) -> Result<libc::statfs, ResizeFailure> {
    // SAFETY: statfs is plain old data; all zeroes is a valid value.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: fstatfs(2) on a descriptor we own, into a local.
    if unsafe { libc::fstatfs(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(kernel("/tmp", std::io::Error::last_os_error().to_string()));
    }
    Ok(st)
}

/// Processes and threads in the PID namespace that `proc` (its own `/proc`) shows.
fn count_tasks(proc: &str) -> u64 {
    let Ok(rd) = std::fs::read_dir(proc) else {
        return 0;
    };
    rd.filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .map(|e| std::fs::read_dir(e.path().join("task")).map_or(1, |t| t.count().max(1) as u64))
        .sum()
}

/// `bytes` in whole pages, as a tmpfs counts its size.
pub fn round_up(bytes: u64) -> u64 {
    bytes.div_ceil(PAGE) * PAGE
}

/// Gives the tmpfs at `tmp` (a mount root) `bytes`, and inodes in proportion.
fn set_tmp(tmp: &OwnedFd, bytes: u64) -> std::io::Result<()> {
    mounts::reconfigure(
        tmp,
        &[
            ("size", bytes.to_string()),
            ("nr_inodes", limits::tmpfs_inodes(bytes).to_string()),
        ],
    )
}

/// Writes the PID namespace's `pid_max` from a child forked into it (see the pitfalls),
/// through a `/proc` of its own: the sandbox's `/proc` is read-only, the host's may be too.
fn set_pid_max(processes: u32) -> Result<(), ResizeFailure> {
    let value = limits::pid_max_for(processes).to_string();
    // SAFETY: this process is single-threaded (it joined a user namespace); the child only
    // makes its mount namespace, mounts, writes and exits.
    match unsafe { libc::fork() } {
        -1 => Err(kernel(
            "process limit",
            format!(
                "no process could be started in its PID namespace: {}",
                std::io::Error::last_os_error()
            ),
        )),
        0 => {
            let errno = write_pid_max(&value).err().and_then(|e| e.raw_os_error());
            // SAFETY: _exit in the forked child, without running the parent's destructors.
            unsafe { libc::_exit(errno.map_or(0, |e| e.clamp(1, 255))) }
        }
        child => {
            let mut status = 0;
            // SAFETY: waitpid on our own child, into a local.
            unsafe { libc::waitpid(child, &mut status, 0) };
            match libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)) {
                Some(0) => Ok(()),
                code => Err(kernel(
                    "process limit",
                    format!(
                        "pid_max of its PID namespace could not be written ({})",
                        code.map_or("killed".into(), |e| {
                            std::io::Error::from_raw_os_error(e).to_string()
                        })
                    ),
                )),
            }
        }
    }
}

/// In the forked child: a mount namespace of its own with a `/proc` of the PID namespace it
/// lives in, and the write.
fn write_pid_max(value: &str) -> std::io::Result<()> {
    nix::sched::unshare(CloneFlags::CLONE_NEWNS)?;
    let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    // SAFETY: mount(2) with constant NUL-terminated strings and no data.
    let rc = unsafe {
        libc::mount(
            c"proc".as_ptr(),
            c"/proc".as_ptr(),
            c"proc".as_ptr(),
            flags,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    std::fs::OpenOptions::new()
        .write(true)
        .open("/proc/sys/kernel/pid_max")?
        .write_all(value.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_crosses_to_the_helper_and_back() {
        let req = Request {
            helper: ProcRef {
                pid: 42,
                start_ticks: 777,
            },
            processes: 600,
            tmp: 32 << 20,
            tmp_now: 64 << 20,
        };
        let a = args(&req);
        assert_eq!(a[1], "42:777");
        assert_eq!(parse_helper("42:777").unwrap(), req.helper);
        assert!(parse_helper("42").is_err());
        let line = serde_json::to_string(&Reply::Failed(ResizeFailure::Tmp { used: 10, size: 5 }))
            .unwrap();
        assert_eq!(line, r#"{"failed":{"kind":"tmp","used":10,"size":5}}"#);
        assert_eq!(round_up(1), PAGE);
        assert_eq!(round_up(8 << 20), 8 << 20);
    }

    #[test]
    fn a_sandbox_that_is_gone_is_said_so_and_nothing_is_asked_below_the_floor() {
        let gone = Request {
            helper: ProcRef {
                pid: i32::MAX,
                start_ticks: 1,
            },
            processes: 600,
            tmp: PAGE,
            tmp_now: PAGE,
        };
        assert_eq!(resize(&gone), Err(ResizeFailure::Gone));
        let zero = Request { tmp: 0, ..gone };
        assert!(matches!(resize(&zero), Err(ResizeFailure::Kernel { .. })));
    }
}
