//! The sandbox helper: `subpane __sandbox --policy FILE [--report-fd N] [--proxy-socket PATH]
//! -- PROGRAM [ARGS…]`. It enters the sandbox and runs the program as the grandchild it
//! waits for, ending as the program ended.
//!
//! ```text
//!  the helper (the worker's child, pid H)
//!    read policy, build the seccomp filters ─► user+mount[+net]+pid namespaces
//!    fork ─────────────────────────────────────────────┐
//!    │ close the report fd, std fds → /dev/null         ▼ init (pid 1 of the PID namespace)
//!    │ seccomp (Supervisor), ignore SIGTERM, SIGINT, …    mounts (/proc of its own, read-only
//!    │ read the program's wait status from init           host) ─► lo up ─► limits
//!    │ waitpid(init)                                      ─► no_new_privs ─► Landlock
//!    ▼                                                    ─► [fork the relay: seccomp (Relay)]
//!  end as the program did: exit(code), or die of          ─► fork the program ──────────┐
//!  its signal (SIG_DFL, no core)                          std fds → /dev/null             ▼
//!                                                         seccomp (Supervisor)    the program
//!                                                         reap until the program  seccomp
//!                                                         exits; send its status  fds ≥ 3 CLOEXEC
//!                                                         exit: the kernel kills  report
//!                                                         what is left inside     execvp
//!  any step before the program fails: report {"failed": {kind…}}, "subpane sandbox: …" on
//!  stderr, exit 125 (127 after an exec that failed)
//! ```
//!
//! The caller (the worker) sets the working directory (the workspace) and the environment;
//! the helper adds nothing to either. It decides nothing either: the paths in the policy are
//! absolute and resolved, and it applies them. `enabled` in the policy is not consulted:
//! running the helper is the request to sandbox.
//!
//! The report fd gets one JSON line ([`Report`], e.g. `{"enforced":{"landlock_abi":7,…}}`)
//! from the program's process just before exec; the helper and init close their copies, so
//! the caller reads end-of-file once the program runs. After an exec that failed, a second
//! line `{"failed":{"kind":"exec",…}}` follows.
//!
//! Common pitfalls:
//! * Never exec after a failed step: every step returns a typed error and the only exec is
//!   at the end of the one path on which all of them succeeded.
//! * Rust ignores SIGPIPE in its own processes, and an ignored signal stays ignored across
//!   exec: without resetting it, `yes | head` inside would loop on EPIPE instead of dying.
//! * Every inherited fd above 2 is marked close-on-exec (the report fd with them): an fd
//!   that names a directory outside is a way around the mounts (`openat(fd, "tmux-0/…")`
//!   reaches a hidden socket). Only stdin, stdout and stderr cross into the program, and the
//!   helper and init let go of them (the worker waits for the program's pipes to close).
//! * `unshare(CLONE_NEWUSER)` refuses a multithreaded process: nothing here starts a thread
//!   (the relay is a process, forked by init).
//! * The worker stops the program by signalling its process group: the helper and init are
//!   in it, so the helper ignores the signals that would end it before the program (which
//!   may take its grace period to exit), and init, as pid 1, gets none it has no handler
//!   for. SIGKILL reaches all three.
//! * Init is the reaper of everything in the namespace, and its exit is the end of it: what
//!   the program left running is killed with it, never left behind.

use std::ffi::{CString, OsString};
use std::fs::File;
use std::io::{Read, Write};
use std::mem::ManuallyDrop;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use seccompiler::BpfProgram;
use serde::Deserialize;

use super::{EXIT_SANDBOX_FAILED, Report, SandboxFailure, init, namespaces, seccomp};
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
    /// Where to write the [`Report::Ended`] line when the program has ended (inherited,
    /// open, at least 3).
    pub end_fd: Option<RawFd>,
    /// The program and its arguments.
    pub argv: Vec<OsString>,
}

/// Runs the helper. Returns only when the program could not be run, or to exit as it
/// exited: the exit code.
pub fn main(req: Request) -> i32 {
    let report = match ReportFd::check(req.report_fd) {
        Ok(r) => r,
        Err(f) => return fail(&ReportFd(None), f),
    };
    let end = match ReportFd::check(req.end_fd) {
        Ok(r) => r,
        Err(f) => return fail(&report, f),
    };
    let plan = match prepare(&req) {
        Ok(p) => p,
        Err(f) => return fail(&report, f),
    };
    let namespaces = match namespaces::enter(plan.spec.network != Network::Full) {
        Ok(n) => n,
        Err(f) => return fail(&report, f),
    };
    let pipes = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .and_then(|a| Ok((a, nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?)));
    let ((status_r, status_w), (go_r, go_w)) = match pipes {
        Ok(p) => p,
        Err(e) => {
            let why = format!("cannot make the helper's pipes: {e}");
            return fail(
                &report,
                SandboxFailure::Namespace {
                    namespace: "pid".into(),
                    errno: why,
                },
            );
        }
    };
    // SAFETY: the helper has one thread (see the pitfalls), so the child may run ordinary
    // Rust code; it never returns (init::run ends with _exit).
    match unsafe { libc::fork() } {
        -1 => {
            let e = std::io::Error::last_os_error();
            fail(
                &report,
                SandboxFailure::Namespace {
                    namespace: "pid".into(),
                    errno: format!("cannot start pid 1 of the namespace: {e}"),
                },
            )
        }
        0 => {
            drop((status_r, go_w));
            end.close();
            let pipes = init::Pipes {
                status: status_w,
                go: go_r,
            };
            init::run(plan, namespaces, report, pipes)
        }
        child => {
            drop((status_w, go_r));
            supervise(child, status_r, go_w, &plan.filters.supervisor, report, end)
        }
    }
}

/// What the helper and its children need, made before anything changes.
pub(super) struct Prepared {
    pub(super) spec: SandboxSpec,
    pub(super) program: String,
    pub(super) argv: Vec<CString>,
    pub(super) cwd: PathBuf,
    pub(super) proxy: Option<PathBuf>,
    pub(super) filters: Filters,
}

/// The seccomp filters of each process, built before anything changes, so a filter that
/// cannot be built costs nothing.
pub(super) struct Filters {
    pub(super) program: Vec<BpfProgram>,
    pub(super) supervisor: Vec<BpfProgram>,
    pub(super) relay: Vec<BpfProgram>,
}

fn prepare(req: &Request) -> Result<Prepared, SandboxFailure> {
    let spec = read_policy(&req.policy)?;
    let argv = c_argv(&req.argv)?;
    let arch = seccomp::Arch::host().ok_or_else(|| SandboxFailure::Seccomp {
        why: format!("no filter for {}", std::env::consts::ARCH),
    })?;
    let failed = |e: seccompiler::BackendError| SandboxFailure::Seccomp { why: e.to_string() };
    // The program's filters once; each helper adds its role's (the relay's only when there
    // is a relay).
    let program = seccomp::base_programs(arch).map_err(failed)?;
    let with_role = |role| -> Result<Vec<BpfProgram>, SandboxFailure> {
        let mut v = program.clone();
        v.extend(seccomp::role_program(arch, role).map_err(failed)?);
        Ok(v)
    };
    let relay = match spec.network {
        Network::Allow(_) => with_role(seccomp::Role::Relay)?,
        _ => Vec::new(),
    };
    let filters = Filters {
        supervisor: with_role(seccomp::Role::Supervisor)?,
        relay,
        program,
    };
    let proxy = match &spec.network {
        Network::Allow(_) => {
            Some(
                req.proxy_socket
                    .clone()
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
    Ok(Prepared {
        spec,
        program: req.argv[0].to_string_lossy().into_owned(),
        argv,
        cwd,
        proxy,
        filters,
    })
}

/// The helper's part once init runs: its own filter (before init may start the program),
/// then wait for the program's status, and end as it did.
fn supervise(
    init: libc::pid_t,
    status: OwnedFd,
    go: OwnedFd,
    filter: &[BpfProgram],
    report: ReportFd,
    end: ReportFd,
) -> i32 {
    // The worker's stop signals are for the program; the helper must outlive it to say how
    // it ended. SAFETY: setting dispositions to SIG_IGN is always sound.
    for sig in STOP_SIGNALS {
        unsafe { libc::signal(sig, libc::SIG_IGN) };
    }
    // Every process of the sandbox has its filter, or the program never starts: the helper
    // installs its own while init builds the view, and init starts the program only on its
    // "go". A failure here is then the one report, and the program never ran.
    if let Err(f) = seccomp::install(filter) {
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(init, libc::SIGKILL) };
        let code = fail(&report, f);
        reap(init);
        return code;
    }
    report.close();
    let _ = File::from(go).write_all(b"g");
    let mut status = File::from(status);
    to_dev_null();
    // The program's wait status, and the limit init found reached.
    let mut raw = [0u8; 5];
    let program = match read_full(&mut status, &mut raw) {
        Ok(true) => Some(i32::from_ne_bytes([raw[0], raw[1], raw[2], raw[3]])),
        _ => None,
    };
    drop(status);
    let init_status = reap(init);
    if program.is_some() {
        let ended = super::Ended {
            limit_hit: super::limits::from_byte(raw[4]),
        };
        let _ = end.send(&Report::Ended(ended));
    }
    end.close();
    end_as(program.unwrap_or(init_status))
}

/// Waits for `pid` (a child); its raw wait status.
fn reap(pid: libc::pid_t) -> i32 {
    loop {
        let mut st = 0;
        // SAFETY: waitpid(2) on our own child into a local.
        let rc = unsafe { libc::waitpid(pid, &mut st, 0) };
        if rc == pid {
            return st;
        }
        if rc < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return EXIT_SANDBOX_FAILED << 8;
        }
    }
}

/// Signals the worker sends to stop the program that the helper outlives.
const STOP_SIGNALS: [libc::c_int; 6] = [
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

/// Reads exactly `buf.len()` bytes: `Ok(false)` on end-of-file before that.
fn read_full(f: &mut File, buf: &mut [u8]) -> std::io::Result<bool> {
    let mut at = 0;
    while at < buf.len() {
        match f.read(&mut buf[at..]) {
            Ok(0) => return Ok(false),
            Ok(n) => at += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// Ends the calling process as a process with wait status `status` ended: the same exit
/// code, or death by the same signal (without a core dump).
pub(super) fn end_as(status: i32) -> i32 {
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        // SAFETY: plain calls on the calling process: no core file, the signal's default
        // action, unblocked, then raised.
        unsafe {
            let none = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &none);
            libc::signal(sig, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::kill(libc::getpid(), sig);
        }
        // A signal whose default is to go on (none ends a program that way): say so.
        return 128 + sig;
    }
    if libc::WIFEXITED(status) {
        return libc::WEXITSTATUS(status);
    }
    EXIT_SANDBOX_FAILED
}

/// Points stdin, stdout and stderr at `/dev/null`: the program's pipes must close when it
/// and what it started are gone, not when its helpers are.
pub(super) fn to_dev_null() {
    // SAFETY: open/dup2/close on descriptors this process owns.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        if null < 0 {
            for fd in 0..3 {
                libc::close(fd);
            }
            return;
        }
        for fd in 0..3 {
            libc::dup2(null, fd);
        }
        if null > 2 {
            libc::close(null);
        }
    }
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
pub(super) fn no_links(p: &Path) -> std::io::Result<()> {
    let path = CString::new(p.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: open_how is plain old data; all zeroes is a valid value.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (libc::O_PATH | libc::O_CLOEXEC | libc::O_NOFOLLOW) as u64;
    how.resolve = libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: openat2(2) with a NUL-terminated path and an open_how of the size passed; the
    // descriptor it returns is owned below.
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
    // SAFETY: a descriptor the kernel just gave us.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    // With O_PATH and O_NOFOLLOW a final link is opened itself, not refused: its type says.
    let kind = File::from(fd).metadata()?.file_type();
    if kind.is_symlink() {
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

/// The report fd, checked to be open before anything else happens.
pub(super) struct ReportFd(Option<RawFd>);

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

    pub(super) fn send(&self, report: &Report) -> std::io::Result<()> {
        let Some(fd) = self.0 else { return Ok(()) };
        let mut line = serde_json::to_vec(report)?;
        line.push(b'\n');
        // SAFETY: `fd` was checked to be open; ManuallyDrop leaves it open after the write.
        let mut file = ManuallyDrop::new(unsafe { File::from_raw_fd(fd) });
        file.write_all(&line)
    }

    /// Closes this process's copy: the caller reads end-of-file once the program's copy
    /// closes on exec.
    pub(super) fn close(self) {
        if let Some(fd) = self.0 {
            // SAFETY: the descriptor was checked to be open and is not used after this.
            unsafe { libc::close(fd) };
        }
    }
}

/// Reports `failure` on the fd and on stderr; returns the exit code.
pub(super) fn fail(report: &ReportFd, failure: SandboxFailure) -> i32 {
    eprintln!("subpane sandbox: {failure}");
    let code = match failure {
        SandboxFailure::Exec { .. } => EXIT_EXEC_FAILED,
        _ => EXIT_SANDBOX_FAILED,
    };
    let _ = report.send(&Report::Failed(failure));
    code
}
