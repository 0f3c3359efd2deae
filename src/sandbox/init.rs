//! Pid 1 of the sandbox's PID namespace: it builds the program's view, starts the relay and
//! the program, reaps everything, and tells the helper outside how the program ended.
//!
//! ```text
//!  init (pid 1)                                   the program (pid 2, or 3 after the relay)
//!  ────────────                                   ───────────────────
//!  PR_SET_PDEATHSIG(SIGKILL): the helper's death is the namespace's; not dumpable
//!  mounts::build (with /proc of this namespace) ─► pid_max ─► mounts::seal ─► lo up
//!  no_new_privs ─► Landlock (init, relay and program in one domain)
//!  [allow:] relay::start ──► relay (pid 2): seccomp (Relay), serves
//!  wait for the helper's "go" (its own filter is in)
//!  fork ────────────────────────────────────────► rlimits, seccomp (Program)
//!  close the report fd; std fds → /dev/null;        wait for init's "go"
//!  seccomp (Supervisor); "go" to the program ─────► fds ≥ 3 CLOEXEC, report {"enforced"},
//!                                                   SIGPIPE default, execvp
//!  waitpid(-1) until the program is reaped          (exec failed: report, _exit 127)
//!  a limit reached? (limits.rs); send status and limit to the helper; exit ─► the kernel
//!  kills the rest of the namespace
//! ```
//!
//! Common pitfalls:
//! * Everything here runs in a forked child of a single-threaded process: ordinary Rust is
//!   fine, but no path may return into the helper's `main` (each ends in `_exit`).
//! * Pid 1 gets no signal it has no handler for, from inside the namespace or out (but
//!   SIGKILL from outside): the worker's SIGTERM reaches the program, not init, and the
//!   program cannot kill init.
//! * Init is not dumpable: the program shares its Landlock domain, and a dumpable init would
//!   let it open `/proc/1/mem`.
//! * Every process of the sandbox has its filter before anything of the program runs: the
//!   helper's before init forks the program, init's before the program may exec (two "go"
//!   bytes; the helper's work overlaps init's mounts, so neither usually waits).
//! * Orphans of the program are reparented to init: reap every child, not only the program,
//!   or zombies fill the namespace's process limit.

use std::io::{Read, Write};
use std::os::fd::OwnedFd;

use super::exec::{Prepared, ReportFd, fail, to_dev_null};
use super::{EXIT_SANDBOX_FAILED, Enforced, PROXY_PORT, Report, SandboxFailure};
use super::{landlock, limits, mounts, namespaces, relay, seccomp};
use crate::spec::Network;

/// Init's two pipes to the helper outside.
pub(super) struct Pipes {
    /// Init writes the program's wait status (4 bytes, native order) and the limit it found
    /// reached (1 byte) when the program has ended.
    pub(super) status: OwnedFd,
    /// The helper writes one byte once its own filter is in place.
    pub(super) go: OwnedFd,
}

/// Runs init; never returns.
pub(super) fn run(plan: Prepared, namespaces: Vec<String>, report: ReportFd, pipes: Pipes) -> ! {
    // SAFETY: prctl with constant arguments. Not dumpable from the start: the program shares
    // init's Landlock domain (its exec makes it dumpable again).
    unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        );
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
    let mut status = std::fs::File::from(pipes.status);
    let (program, go) = match set_up(&plan, namespaces, &report, pipes.go) {
        Ok(started) => started,
        Err(f) => exit(fail(&report, f)),
    };
    report.close();
    to_dev_null();
    // Its own filter before the program may exec (the program waits for this "go").
    if seccomp::install(&plan.filters.supervisor).is_err() {
        // SAFETY: kill(2) on our own child; the namespace ends with init anyway.
        unsafe { libc::kill(program, libc::SIGKILL) };
        exit(EXIT_SANDBOX_FAILED);
    }
    let _ = std::fs::File::from(go).write_all(b"g");
    let (ended, orphan_fsize) = reap_until(program);
    let hit = limits::reached(ended, orphan_fsize);
    let mut msg = ended.to_ne_bytes().to_vec();
    msg.push(limits::to_byte(hit));
    let _ = status.write_all(&msg);
    exit(0)
}

/// The view, the limits, Landlock, the relay, then the program. Returns the program's pid
/// and the pipe on which it waits for init's "go".
fn set_up(
    plan: &Prepared,
    namespaces: Vec<String>,
    report: &ReportFd,
    go: OwnedFd,
) -> Result<(libc::pid_t, OwnedFd), SandboxFailure> {
    let spec = &plan.spec;
    mounts::build(spec)?;
    let mut partial = Vec::new();
    let pid_max = limits::set_pid_max(spec.limits.processes);
    if let Err(why) = &pid_max {
        partial.push(why.clone());
    }
    mounts::seal(spec, &plan.cwd)?;
    if spec.network != Network::Full {
        namespaces::loopback_up()?;
    }
    set_no_new_privs()?;
    let landlock = landlock::restrict(&spec.writable)?;
    if let Some(socket) = &plan.proxy {
        relay::start(PROXY_PORT, socket, &plan.filters.relay).map_err(|e| {
            SandboxFailure::Network {
                why: format!("cannot start the relay to the egress proxy: {e}"),
            }
        })?;
    }
    partial.extend(landlock.partial);
    let enforced = Enforced {
        landlock_abi: Some(landlock.abi),
        namespaces,
        seccomp: true,
        no_new_privs: no_new_privs(),
        partial,
        limits: limits::enforced(&spec.limits, pid_max.is_ok()),
    };
    // The helper outside installs its filter while init builds the view (its "go" is
    // usually there already); the program starts only once it has.
    let mut b = [0u8; 1];
    if std::fs::File::from(go).read_exact(&mut b).is_err() {
        // The helper could not filter itself, said so, and is ending the namespace.
        exit(EXIT_SANDBOX_FAILED);
    }
    let (wait_r, wait_w) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| SandboxFailure::Exec {
            program: plan.program.clone(),
            why: format!("cannot make a pipe: {e}"),
        })?;
    // SAFETY: single-threaded (see the pitfalls); the child ends in exec or _exit.
    match unsafe { libc::fork() } {
        -1 => Err(SandboxFailure::Exec {
            program: plan.program.clone(),
            why: format!("cannot fork: {}", std::io::Error::last_os_error()),
        }),
        0 => {
            drop(wait_w);
            become_program(plan, enforced, report, wait_r)
        }
        pid => Ok((pid, wait_w)),
    }
}

/// The program's own last steps before exec.
fn become_program(plan: &Prepared, enforced: Enforced, report: &ReportFd, go: OwnedFd) -> ! {
    if let Err(f) = limits::for_program(&plan.spec.limits) {
        exit(fail(report, f));
    }
    if let Err(f) = seccomp::install(&plan.filters.program) {
        exit(fail(report, f));
    }
    // Init's own filter is in before anything of the program's runs.
    let mut b = [0u8; 1];
    if std::fs::File::from(go).read_exact(&mut b).is_err() {
        exit(EXIT_SANDBOX_FAILED);
    }
    if let Err(f) = close_inherited_on_exec() {
        exit(fail(report, f));
    }
    if let Err(e) = report.send(&Report::Enforced(enforced)) {
        // The caller could not learn what was enforced: do not run.
        eprintln!("subpane sandbox: cannot write the report: {e}");
        exit(EXIT_SANDBOX_FAILED);
    }
    // SAFETY: resetting a disposition to the default is always sound.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let errno = match nix::unistd::execvp(&plan.argv[0], &plan.argv) {
        Err(e) => e,
        Ok(never) => match never {},
    };
    // SAFETY: see above; the helper's own disposition back while it reports.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let why = std::io::Error::from_raw_os_error(errno as i32).to_string();
    exit(fail(
        report,
        SandboxFailure::Exec {
            program: plan.program.clone(),
            why,
        },
    ))
}

/// Reaps every child until `program` is reaped: its raw wait status, and whether an orphan
/// reaped on the way was killed for writing past the file size limit.
fn reap_until(program: libc::pid_t) -> (i32, bool) {
    let mut orphan_fsize = false;
    loop {
        let mut st = 0;
        // SAFETY: waitpid(2) into a local.
        let pid = unsafe { libc::waitpid(-1, &mut st, 0) };
        if pid == program {
            return (st, orphan_fsize);
        }
        if pid > 0 && libc::WIFSIGNALED(st) && libc::WTERMSIG(st) == libc::SIGXFSZ {
            orphan_fsize = true;
        }
        if pid < 0 {
            match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) => {}
                // No child at all: the program is gone without a status (cannot happen).
                _ => return (EXIT_SANDBOX_FAILED << 8, orphan_fsize),
            }
        }
    }
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

/// Marks every fd above 2 close-on-exec (see `exec`'s pitfalls).
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

/// Ends this process without running the helper's destructors.
fn exit(code: i32) -> ! {
    // SAFETY: _exit ends the process at once.
    unsafe { libc::_exit(code) }
}
