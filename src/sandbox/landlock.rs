//! The Landlock ruleset of a sandboxed program: what it may read, write and execute, and
//! whom it may signal.
//!
//! ```text
//!  handled: every file system right of the kernel's ABI (capped at what the crate knows)
//!           + scopes Signal and AbstractUnixSocket (ABI 6+)
//!
//!  /                       read file, read dir, execute
//!  each writable tree      everything
//!  /tmp (private tmpfs)    everything
//!  /dev/null zero full tty ptmx, /dev/pts (private)   read, write, ioctl
//! ```
//!
//! Fails closed: no Landlock, an ABI without signal scoping (< 6), or a ruleset that ended
//! up anything but fully enforced is a [`SandboxFailure::Landlock`], never a program that
//! runs with less than the policy. Landlock also keeps the program from tracing processes
//! outside its domain (`ptrace`, `/proc/PID/mem`, `/proc/PID/environ`).
//!
//! Common pitfalls:
//! * The `landlock` crate works best effort by default and silently drops what the kernel
//!   lacks: the ruleset here is `HardRequirement`, and the status is checked as well.
//! * A rule on a file (not a directory) may carry file rights only, or it is refused.
//! * Rules attach to inodes, not paths: a rule on `/dev/pts` is taken after the private
//!   devpts is mounted there, so it names the program's own terminals only.
//! * Files opened before `restrict_self` keep their rights: the fds the caller passed (a
//!   terminal, a pipe) keep working; reopening `/dev/stderr` when it is the host's terminal
//!   does not (that terminal is not under any rule).
//! * Up to ABI 8, Landlock cannot refuse `connect(2)` to a pathname Unix socket (ABI 9 can):
//!   recorded in `Enforced.partial`; the tmux socket is hidden by a mount instead.

use std::path::{Path, PathBuf};

use ::landlock::{
    ABI, Access, AccessFs, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope,
};

use super::SandboxFailure;

/// Signal scoping arrived with ABI 6 (Linux 6.12).
pub const MIN_ABI: i32 = 6;
/// Connecting to a pathname Unix socket is a handled right from ABI 9.
const UNIX_CONNECT_ABI: i32 = 9;

/// Device files the program may write (and send ioctls to): what a shell or Node opens.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
];

/// What was enforced.
#[derive(Debug)]
pub struct Enforced {
    pub abi: u32,
    pub partial: Vec<String>,
}

/// The kernel's Landlock ABI version, or why there is none.
pub fn kernel_abi() -> Result<i32, SandboxFailure> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: landlock_create_ruleset(NULL, 0, VERSION) only returns a number.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if v >= 1 {
        return Ok(v as i32);
    }
    let e = std::io::Error::last_os_error();
    let why = match e.raw_os_error() {
        Some(libc::ENOSYS) => format!("this kernel has no Landlock ({e})"),
        Some(libc::EOPNOTSUPP) => {
            format!("Landlock is built in but not enabled; add it to the lsm= boot parameter ({e})")
        }
        _ => format!("cannot ask the kernel for its Landlock ABI ({e})"),
    };
    Err(SandboxFailure::Landlock { why })
}

/// Restricts the calling thread (and the program it exec's) to the rules in the module
/// docs. Call after the mounts, since rules attach to what is mounted at each path.
pub fn restrict(writable: &[PathBuf]) -> Result<Enforced, SandboxFailure> {
    let kernel = kernel_abi()?;
    if kernel < MIN_ABI {
        return Err(SandboxFailure::Landlock {
            why: format!(
                "the kernel's Landlock ABI is {kernel}, and signal scoping needs ABI {MIN_ABI} (Linux 6.12): without it the program could signal processes outside the sandbox"
            ),
        });
    }
    // The crate caps the ABI at the newest it knows; rights it does not know cannot be
    // handled, so a newer kernel is used at that level.
    let abi = ABI::from(kernel);
    let used = (abi as i32).min(kernel);
    let fail = |e: &dyn std::fmt::Display| SandboxFailure::Landlock { why: e.to_string() };

    let mut rules = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(abi))
        .map_err(|e| fail(&e))?
        .scope(Scope::from_all(abi))
        .map_err(|e| fail(&e))?
        .create()
        .map_err(|e| fail(&e))?;
    rules = allow(rules, Path::new("/"), AccessFs::from_read(abi))?;
    for dir in writable
        .iter()
        .map(PathBuf::as_path)
        .chain([Path::new("/tmp")])
    {
        rules = allow(rules, dir, AccessFs::from_all(abi))?;
    }
    let device = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::IoctlDev;
    for dev in DEVICES.iter().map(Path::new).filter(|p| p.exists()) {
        rules = allow(rules, dev, device)?;
    }
    let status = rules.restrict_self().map_err(|e| fail(&e))?;
    if status.ruleset != RulesetStatus::FullyEnforced {
        return Err(SandboxFailure::Landlock {
            why: format!("the ruleset was not fully enforced ({:?})", status.ruleset),
        });
    }

    let mut partial = Vec::new();
    if used < UNIX_CONNECT_ABI {
        partial.push(format!(
            "unix sockets: Landlock ABI {used} cannot refuse connecting to a pathname Unix socket, so only hidden sockets are out of reach"
        ));
    }
    Ok(Enforced {
        abi: used as u32,
        partial,
    })
}

fn allow(
    rules: RulesetCreated,
    path: &Path,
    access: BitFlags<AccessFs>,
) -> Result<RulesetCreated, SandboxFailure> {
    let fd = PathFd::new(path).map_err(|e| SandboxFailure::Landlock {
        why: format!("cannot open {} for a rule: {e}", path.display()),
    })?;
    // A writable file (not a tree) takes the rights that apply to files.
    let access = if path.is_dir() {
        access
    } else {
        access & AccessFs::from_file(ABI::V10)
    };
    rules
        .add_rule(PathBeneath::new(fd, access))
        .map_err(|e| SandboxFailure::Landlock {
            why: format!("cannot add the rule for {}: {e}", path.display()),
        })
}
