//! The namespaces the helper enters before it exec's the program, and the loopback of a
//! private network namespace.
//!
//! ```text
//!  caller (uid U, gid G)
//!    │ unshare(CLONE_NEWUSER)   ── "user"  : uid_map "U U 1", setgroups deny, gid_map "G G 1"
//!    │ unshare(CLONE_NEWNS)     ── "mount" : owned by the new user namespace
//!    │ unshare(CLONE_NEWNET)    ── "net"   : unless the network is `full`
//!    │ unshare(CLONE_NEWPID)    ── "pid"   : for the children; the first one is its pid 1
//!    ▼
//!  same process, full capabilities inside its own namespaces (not outside them)
//! ```
//!
//! One `unshare` per namespace, so a refusal names the namespace that was refused (user
//! namespaces off, `max_user_namespaces` or `max_net_namespaces` at 0, an AppArmor rule).
//!
//! Common pitfalls:
//! * `unshare(CLONE_NEWUSER)` needs a single-threaded process: call it before anything
//!   starts a thread.
//! * The id maps must be written before the mounts: a tmpfs cannot be created by an unmapped
//!   uid, and `getuid` reads the overflow id (65534) until the map exists, so the ids are
//!   taken before `unshare`.
//! * `setgroups` must be `deny` before an unprivileged process may write `gid_map`.
//! * A new network namespace has a loopback that is down: bring it up, or even 127.0.0.1
//!   inside is unreachable.
//! * `CLONE_NEWPID` does not move the caller: only its children are in the new namespace, and
//!   the first one is pid 1 there (its init: when it exits, the kernel kills the rest).

use std::io;

use nix::errno::Errno;
use nix::sched::{CloneFlags, unshare};

use super::SandboxFailure;

/// Enters the user and mount namespaces, a network namespace when `private_net`, and a PID
/// namespace for the children. Returns the names of the namespaces entered, in the order of
/// `Enforced.namespaces`.
pub fn enter(private_net: bool) -> Result<Vec<String>, SandboxFailure> {
    // SAFETY: plain getters.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let refused = |namespace: &str, errno: String| SandboxFailure::Namespace {
        namespace: namespace.into(),
        errno,
    };
    unshare(CloneFlags::CLONE_NEWUSER).map_err(|e| refused("user", e.to_string()))?;
    map_ids(uid, gid).map_err(|e| refused("user", e))?;
    let mut entered = vec!["user".to_string()];
    unshare(CloneFlags::CLONE_NEWNS).map_err(|e| refused("mount", e.to_string()))?;
    entered.push("mount".into());
    if private_net {
        unshare(CloneFlags::CLONE_NEWNET).map_err(|e| refused("net", e.to_string()))?;
        entered.push("net".into());
    }
    unshare(CloneFlags::CLONE_NEWPID).map_err(|e| refused("pid", e.to_string()))?;
    entered.push("pid".into());
    Ok(entered)
}

/// Maps the caller's uid and gid to themselves in the new user namespace.
fn map_ids(uid: libc::uid_t, gid: libc::gid_t) -> Result<(), String> {
    let write = |file: &str, text: String| {
        std::fs::write(format!("/proc/self/{file}"), text).map_err(|e| {
            let errno = e
                .raw_os_error()
                .map(Errno::from_raw)
                .unwrap_or(Errno::UnknownErrno);
            format!("{errno} writing /proc/self/{file}")
        })
    };
    write("uid_map", format!("{uid} {uid} 1\n"))?;
    write("setgroups", "deny\n".into())?;
    write("gid_map", format!("{gid} {gid} 1\n"))
}

/// Brings up `lo` in the current (new) network namespace.
pub fn loopback_up() -> Result<(), SandboxFailure> {
    let fail = |what: &str, e: io::Error| SandboxFailure::Network {
        why: format!("cannot bring up the loopback: {what}: {e}"),
    };
    // SAFETY: socket(2) with constant arguments; the fd is owned below.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(fail("socket", io::Error::last_os_error()));
    }
    // SAFETY: `raw` is a fresh descriptor nobody else owns.
    let sock = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) };
    use std::os::fd::AsRawFd;
    // SAFETY: ifreq is plain old data; all zeroes is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS/SIOCSIFFLAGS read and write `req`, which lives across the calls.
    unsafe {
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) < 0 {
            return Err(fail("SIOCGIFFLAGS", io::Error::last_os_error()));
        }
        req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) < 0 {
            return Err(fail("SIOCSIFFLAGS", io::Error::last_os_error()));
        }
    }
    Ok(())
}
