//! The sandbox helper: `subpane __sandbox --policy FILE [--report-fd N] [--proxy-socket PATH]
//! -- PROGRAM [ARGS…]`. It enters the sandbox, then becomes the program (exec, same pid).
//!
//! ```text
//!  read policy ─► user+mount[+net] ns ─► mounts ─► lo up ─► no_new_privs ─► Landlock
//!      │               namespaces.rs      mounts.rs  namespaces.rs           landlock.rs │
//!      │                                                                                ▼
//!      │     execvp(PROGRAM) ◄─ report {"enforced"} ◄─ fds ≥ 3 CLOEXEC ◄─ seccomp ◄─ [relay]
//!      │         │ fails: report {"failed": exec}, exit 127           seccomp.rs
//!      ▼              ▼
//!  any step fails: report {"failed": {kind…}}, "subpane sandbox: …" on stderr, exit 125
//! ```
//!
//! The caller (the worker) sets the working directory (the workspace) and the environment;
//! the helper adds nothing to either. It decides nothing either: the paths in the policy are
//! absolute and resolved, and it applies them. `enabled` in the policy is not consulted:
//! running the helper is the request to sandbox.
//!
//! The report fd gets one JSON line ([`Report`], e.g. `{"enforced":{"landlock_abi":7,…}}`)
//! just before exec, and closes on exec, so the caller reads end-of-file once the program
//! runs. After an exec that failed, a second line `{"failed":{"kind":"exec",…}}` follows.
//!
//! Common pitfalls:
//! * Never exec after a failed step: every step returns a typed error and the only exec is
//!   at the end of the one path on which all of them succeeded.
//! * Rust ignores SIGPIPE in its own processes, and an ignored signal stays ignored across
//!   exec: without resetting it, `yes | head` inside would loop on EPIPE instead of dying.
//! * Every inherited fd above 2 is marked close-on-exec (the report fd with them): an fd
//!   that names a directory outside is a way around the mounts (`openat(fd, "tmux-0/…")`
//!   reaches a hidden socket). Only stdin, stdout and stderr cross into the program.
//! * `unshare(CLONE_NEWUSER)` refuses a multithreaded process: nothing here starts a thread
//!   before the namespaces exist (the relay is a child process, started after them).

use std::ffi::{CString, OsString};
use std::fs::File;
use std::io::Write;
use std::mem::ManuallyDrop;
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{
    EXIT_SANDBOX_FAILED, Enforced, PROXY_PORT, Report, SandboxFailure, landlock, mounts,
    namespaces, relay, seccomp,
};
use crate::spec::{Network, SandboxSpec};

/// The exit code after an exec that failed (as a shell answers a command it cannot run).
pub const EXIT_EXEC_FAILED: i32 = 127;

/// The helper's arguments, as the CLI parsed them.
#[derive(Clone, Debug)]
pub struct Request {
    /// A JSON file with the policy under the key `sandbox` (the attempt's `spec.json`).
    pub policy: PathBuf,
    /// Where to write the [`Report`] line (inherited, open, at least 3).
    pub report_fd: Option<RawFd>,
    /// The egress proxy's Unix socket, for `network: {"allow": …}`.
    pub proxy_socket: Option<PathBuf>,
    /// The program and its arguments.
    pub argv: Vec<OsString>,
}

/// Runs the helper. Returns only when the program could not be run: the exit code.
pub fn main(req: Request) -> i32 {
    let report = match ReportFd::check(req.report_fd) {
        Ok(r) => r,
        Err(f) => return fail(&ReportFd(None), f),
    };
    let ready = match enter(&req) {
        Ok(r) => r,
        Err(f) => return fail(&report, f),
    };
    if let Err(e) = report.send(&Report::Enforced(ready.enforced)) {
        // The caller could not learn what was enforced: do not run.
        eprintln!("subpane sandbox: cannot write the report: {e}");
        return EXIT_SANDBOX_FAILED;
    }
    // SAFETY: resetting a disposition to the default is always sound.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let errno = match nix::unistd::execvp(&ready.argv[0], &ready.argv) {
        Err(e) => e,
        Ok(never) => match never {},
    };
    // SAFETY: see above; put the helper's own disposition back while it reports.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let why = std::io::Error::from_raw_os_error(errno as i32).to_string();
    fail(
        &report,
        SandboxFailure::Exec {
            program: ready.program,
            why,
        },
    )
}

/// Everything in place: what to exec and what was enforced.
struct Ready {
    program: String,
    argv: Vec<CString>,
    enforced: Enforced,
}

/// The steps of the module diagram, in order. Any error leaves the program unrun.
fn enter(req: &Request) -> Result<Ready, SandboxFailure> {
    let spec = read_policy(&req.policy)?;
    let argv = c_argv(&req.argv)?;
    // Built before anything changes, so a filter that cannot be built costs nothing.
    let arch = seccomp::Arch::host().ok_or_else(|| SandboxFailure::Seccomp {
        why: format!("no filter for {}", std::env::consts::ARCH),
    })?;
    let filters = seccomp::programs(arch, seccomp::Role::Program)
        .map_err(|e| SandboxFailure::Seccomp { why: e.to_string() })?;
    let proxy = match &spec.network {
        Network::Allow(_) => {
            Some(
                req.proxy_socket
                    .as_deref()
                    .ok_or_else(|| SandboxFailure::Network {
                        why: "network allow needs --proxy-socket".into(),
                    })?,
            )
        }
        _ => None,
    };
    let cwd = std::env::current_dir().map_err(|e| SandboxFailure::Mount {
        path: ".".into(),
        why: format!("cannot read the working directory: {e}"),
    })?;

    let private_net = spec.network != Network::Full;
    let namespaces = namespaces::enter(private_net)?;
    mounts::build(&spec, &cwd)?;
    if private_net {
        namespaces::loopback_up()?;
    }
    set_no_new_privs()?;
    let landlock = landlock::restrict(&spec.writable)?;
    // The relay is forked inside the program's Landlock domain: its parent-death signal is
    // sent by the program as it exits, and the signal scope lets that signal reach only
    // processes of the same domain. Forked before it, the relay would outlive the program.
    if let Some(socket) = proxy {
        relay::start(PROXY_PORT, socket).map_err(|e| SandboxFailure::Network {
            why: format!("cannot start the relay to the egress proxy: {e}"),
        })?;
    }
    seccomp::install(&filters)?;
    close_inherited_on_exec()?;
    Ok(Ready {
        program: req.argv[0].to_string_lossy().into_owned(),
        argv,
        enforced: Enforced {
            landlock_abi: Some(landlock.abi),
            namespaces,
            seccomp: true,
            no_new_privs: no_new_privs(),
            partial: landlock.partial,
        },
    })
}

/// `{"sandbox": SandboxSpec, …}`: other keys (the rest of `spec.json`) are ignored.
#[derive(Deserialize)]
struct PolicyFile {
    sandbox: SandboxSpec,
}

fn read_policy(path: &Path) -> Result<SandboxSpec, SandboxFailure> {
    let why = |w: String| SandboxFailure::Policy { why: w };
    let bytes =
        std::fs::read(path).map_err(|e| why(format!("cannot read {}: {e}", path.display())))?;
    let file: PolicyFile = serde_json::from_slice(&bytes)
        .map_err(|e| why(format!("{} is not a policy: {e}", path.display())))?;
    let spec = file.sandbox;
    let all = spec
        .writable
        .iter()
        .chain(&spec.read_only)
        .chain(&spec.hidden);
    if let Some(p) = all.clone().find(|p| !p.is_absolute()) {
        return Err(why(format!(
            "the path {} is relative: the policy holds absolute, resolved paths",
            p.display()
        )));
    }
    // The plan resolved every path, so a link on the way now was put there since, perhaps
    // by a program of an earlier attempt in a writable tree: never follow it.
    for p in all {
        match no_links(p) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err(why(format!(
                    "{} passes through a symbolic link, which the policy was not made with (a program may have planted it): remove the link or start a new run",
                    p.display()
                )));
            }
            // What must exist is checked where it is used; what the user hid, here.
            Err(_) => {
                let asked = spec.asked.as_ref().is_some_and(|a| a.hidden.contains(p));
                if asked && spec.hidden.contains(p) {
                    return Err(why(format!(
                        "{} is gone, so it cannot be hidden (a program may have moved it or a directory above it, and would see it under its new name)",
                        p.display()
                    )));
                }
            }
        }
    }
    Ok(spec)
}

/// Whether `p` can be reached without following any symbolic link (`ELOOP` when not).
fn no_links(p: &Path) -> std::io::Result<()> {
    let path = std::ffi::CString::new(p.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: open_how is plain old data; all zeroes is a valid value.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (libc::O_PATH | libc::O_CLOEXEC | libc::O_NOFOLLOW) as u64;
    how.resolve = libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: openat2(2) with a NUL-terminated path and an open_how of the size passed; the
    // descriptor it returns is closed at once.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            path.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // With O_PATH and O_NOFOLLOW a final link is opened itself, not refused: its type says.
    // SAFETY: a descriptor the kernel just gave us.
    let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) };
    // SAFETY: stat is plain old data; all zeroes is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat on an open descriptor into a stat of the right type.
    if unsafe { libc::fstat(std::os::fd::AsRawFd::as_raw_fd(&fd), &mut st) } == 0
        && st.st_mode & libc::S_IFMT == libc::S_IFLNK
    {
        return Err(std::io::Error::from_raw_os_error(libc::ELOOP));
    }
    Ok(())
}

fn c_argv(argv: &[OsString]) -> Result<Vec<CString>, SandboxFailure> {
    let program = argv.first().ok_or_else(|| SandboxFailure::Exec {
        program: String::new(),
        why: "no program was given".into(),
    })?;
    argv.iter()
        .map(|a| CString::new(a.as_bytes()))
        .collect::<Result<_, _>>()
        .map_err(|_| SandboxFailure::Exec {
            program: program.to_string_lossy().into_owned(),
            why: "an argument holds a NUL byte".into(),
        })
}

fn set_no_new_privs() -> Result<(), SandboxFailure> {
    // SAFETY: prctl(PR_SET_NO_NEW_PRIVS, 1) with constant arguments.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(SandboxFailure::Seccomp {
            why: format!(
                "cannot set no_new_privs: {}",
                std::io::Error::last_os_error()
            ),
        });
    }
    Ok(())
}

fn no_new_privs() -> bool {
    // SAFETY: prctl(PR_GET_NO_NEW_PRIVS) only returns a number.
    unsafe { libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1 }
}

/// Marks every fd above 2 close-on-exec (see the pitfalls).
fn close_inherited_on_exec() -> Result<(), SandboxFailure> {
    // SAFETY: close_range(2) with CLOEXEC only changes flags.
    let rc = unsafe { libc::close_range(3, u32::MAX, libc::CLOSE_RANGE_CLOEXEC as libc::c_int) };
    if rc != 0 {
        return Err(SandboxFailure::Mount {
            path: "/proc/self/fd".into(),
            why: format!(
                "cannot keep inherited descriptors out of the program: {}",
                std::io::Error::last_os_error()
            ),
        });
    }
    Ok(())
}

/// The report fd, checked to be open before anything else happens.
struct ReportFd(Option<RawFd>);

impl ReportFd {
    fn check(fd: Option<RawFd>) -> Result<Self, SandboxFailure> {
        let Some(fd) = fd else {
            return Ok(ReportFd(None));
        };
        let bad = |what: &str| SandboxFailure::Policy {
            why: format!("--report-fd {fd} {what}"),
        };
        if fd < 3 {
            return Err(bad(
                "is stdin, stdout or stderr: pass a descriptor of its own",
            ));
        }
        // SAFETY: F_GETFD only reads the descriptor's flags.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
            return Err(bad("is not an open file descriptor"));
        }
        Ok(ReportFd(Some(fd)))
    }

    fn send(&self, report: &Report) -> std::io::Result<()> {
        let Some(fd) = self.0 else { return Ok(()) };
        let mut line = serde_json::to_vec(report)?;
        line.push(b'\n');
        // SAFETY: `fd` was checked to be open; ManuallyDrop leaves it open after the write.
        let mut file = ManuallyDrop::new(unsafe { File::from_raw_fd(fd) });
        file.write_all(&line)
    }
}

/// Reports `failure` on the fd and on stderr; returns the exit code.
fn fail(report: &ReportFd, failure: SandboxFailure) -> i32 {
    eprintln!("subpane sandbox: {failure}");
    let code = match failure {
        SandboxFailure::Exec { .. } => EXIT_EXEC_FAILED,
        _ => EXIT_SANDBOX_FAILED,
    };
    let _ = report.send(&Report::Failed(failure));
    code
}
