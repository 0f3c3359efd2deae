//! The seccomp filters of a sandbox's processes: the system calls an agent never needs, and
//! for the helpers what they never do.
//!
//! ```text
//!  rules(arch) ── pure ──► programs(arch, role) ── pure ──► [BPF…] ──► install() ── kernel
//!   name → nr per arch       1. refused calls, socket families, clone + CLONE_NEW*,
//!   socket families             terminal ioctls → EPERM     each filter: other arch → kill
//!   ioctl TIOCSTI/TIOCLINUX  2. clone3 → ENOSYS
//!                            3. (x86_64) x32 numbers → EPERM
//!                            4. (helpers) execve, sockets, fork as the role says → EPERM
//!  roles: Program (the program and all it starts) · Supervisor (the helper outside the PID
//!         namespace and pid 1 inside: no exec, no socket) · Relay (no exec, no fork, Unix
//!         sockets only)
//! ```
//!
//! The filters are built by pure functions and tested on their own (like codex's
//! linux-sandbox): the unit tests run the generated BPF through a small interpreter, so they
//! check what the kernel will decide, not only which rules were written.
//!
//! What is refused, and why an agent never needs it: changing namespaces or mounts (the
//! sandbox's own mounts would come undone: `umount2` on a hidden path shows what it hid),
//! keyrings, bpf, perf, tracing other processes, loading kernel code or modules,
//! `open_by_handle_at` (opens a file by handle, around path checks), `userfaultfd` (a tool for
//! kernel exploits), `io_uring` (a ring opens and connects sockets without the system calls
//! a filter sees), socket families other than Unix, IPv4, IPv6 and routing netlink
//! (`AF_VSOCK` reaches the hypervisor and is not isolated by a network namespace; netfilter
//! and audit netlink, `AF_PACKET` and the rest are kernel surface no agent uses), and pushing
//! input into a terminal (`TIOCSTI`, `TIOCLINUX`: the pane's terminal would run what the
//! program typed).
//!
//! Common pitfalls:
//! * One seccompiler filter has one action for all its rules: `clone3` (ENOSYS, so libc falls
//!   back to `clone`, whose flags a filter can read; `clone3` passes them in memory, which
//!   seccomp cannot see) is a second filter. The kernel runs every filter and keeps the
//!   strictest answer.
//! * x86_64 also accepts x32 system call numbers (bit 30 set) with the same audit arch: a
//!   filter matching `mount` by number alone misses x32 `mount`. The third filter refuses
//!   every x32 number, whether or not the kernel has x32 built in.
//! * `ioctl`'s request, `clone`'s flags and `socket`'s family are compared on their low 32
//!   bits (`Dword`): the kernel truncates them to `int`, so a filter comparing 64 bits would
//!   let `TIOCSTI | 1 << 32` through.
//! * `AF_UNIX` sockets are not refused: Claude Code talks to itself over one under `/tmp`.
//!   Netlink is allowed for routing only: glibc asks it which addresses exist (`getifaddrs`,
//!   `getaddrinfo` with `AI_ADDRCONFIG`), and falls back when it is refused, but Node's
//!   `os.networkInterfaces()` does not.
//! * A filter is inherited across `fork`: a helper installs its own after it has forked the
//!   processes that get a different one.

use std::collections::BTreeMap;

use seccompiler::{
    BackendError, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition,
    SeccompFilter, SeccompRule, TargetArch, sock_filter,
};

use super::SandboxFailure;

/// An architecture the filters are built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    X86_64,
    Aarch64,
}

impl Arch {
    /// The architecture this binary runs on, if the sandbox supports it.
    pub fn host() -> Option<Arch> {
        match std::env::consts::ARCH {
            "x86_64" => Some(Arch::X86_64),
            "aarch64" => Some(Arch::Aarch64),
            _ => None,
        }
    }

    fn target(self) -> TargetArch {
        match self {
            Arch::X86_64 => TargetArch::x86_64,
            Arch::Aarch64 => TargetArch::aarch64,
        }
    }
}

/// A system call by name, with its number on each architecture (aarch64 uses the generic
/// table of `asm-generic/unistd.h`).
#[derive(Clone, Copy, Debug)]
pub struct Syscall {
    pub name: &'static str,
    pub x86_64: i64,
    pub aarch64: i64,
}

impl Syscall {
    pub fn nr(&self, arch: Arch) -> i64 {
        match arch {
            Arch::X86_64 => self.x86_64,
            Arch::Aarch64 => self.aarch64,
        }
    }
}

const fn sc(name: &'static str, x86_64: i64, aarch64: i64) -> Syscall {
    Syscall {
        name,
        x86_64,
        aarch64,
    }
}

/// Refused outright with EPERM, whatever the arguments.
pub const REFUSED: &[Syscall] = &[
    sc("mount", 165, 40),
    sc("umount2", 166, 39),
    sc("pivot_root", 155, 41),
    sc("unshare", 272, 97),
    sc("setns", 308, 268),
    sc("open_tree", 428, 428),
    sc("move_mount", 429, 429),
    sc("fsopen", 430, 430),
    sc("fsconfig", 431, 431),
    sc("fsmount", 432, 432),
    sc("fspick", 433, 433),
    sc("mount_setattr", 442, 442),
    sc("open_tree_attr", 467, 467),
    sc("keyctl", 250, 219),
    sc("add_key", 248, 217),
    sc("request_key", 249, 218),
    sc("bpf", 321, 280),
    sc("perf_event_open", 298, 241),
    sc("ptrace", 101, 117),
    sc("process_vm_readv", 310, 270),
    sc("process_vm_writev", 311, 271),
    sc("kexec_load", 246, 104),
    sc("kexec_file_load", 320, 294),
    sc("init_module", 175, 105),
    sc("finit_module", 313, 273),
    sc("delete_module", 176, 106),
    sc("open_by_handle_at", 304, 265),
    sc("userfaultfd", 323, 282),
    sc("io_uring_setup", 425, 425),
    sc("io_uring_enter", 426, 426),
    sc("io_uring_register", 427, 427),
];

/// Refused with EPERM for the socket families in [`refused_socket_rules`].
pub const SOCKET: Syscall = sc("socket", 41, 198);
pub const SOCKETPAIR: Syscall = sc("socketpair", 53, 199);
/// Refused to the helper processes, which never run another program.
pub const EXECVE: Syscall = sc("execve", 59, 221);
pub const EXECVEAT: Syscall = sc("execveat", 322, 281);

/// Socket families a sandboxed program may open: Unix (Claude Code talks to itself over
/// one), IPv4 and IPv6 (its own loopback, or the host's network with `full`), and netlink
/// for the routing protocol only (glibc's `getifaddrs` and `getaddrinfo` with
/// `AI_ADDRCONFIG` ask it which addresses exist).
pub const ALLOWED_FAMILIES: &[(&str, u64)] = &[("AF_UNIX", 1), ("AF_INET", 2), ("AF_INET6", 10)];
pub const AF_NETLINK: u64 = 16;
/// The one netlink protocol allowed.
pub const NETLINK_ROUTE: u64 = 0;

/// Refused with EPERM when its first argument (the flags) asks for a new namespace.
pub const CLONE: Syscall = sc("clone", 56, 220);
/// Refused with EPERM for the terminal requests in [`REFUSED_IOCTLS`].
pub const IOCTL: Syscall = sc("ioctl", 16, 29);
/// Answered with ENOSYS, so libc falls back to `clone`.
pub const CLONE3: Syscall = sc("clone3", 435, 435);

/// `clone` flags that create a namespace. (`CLONE_NEWTIME` is left out: for `clone` its bit
/// is part of the exit signal, and `clone` cannot make a time namespace.)
pub const CLONE_NEW_FLAGS: &[(&str, u64)] = &[
    ("CLONE_NEWNS", 0x0002_0000),
    ("CLONE_NEWCGROUP", 0x0200_0000),
    ("CLONE_NEWUTS", 0x0400_0000),
    ("CLONE_NEWIPC", 0x0800_0000),
    ("CLONE_NEWUSER", 0x1000_0000),
    ("CLONE_NEWPID", 0x2000_0000),
    ("CLONE_NEWNET", 0x4000_0000),
];

/// `ioctl` requests that push input into a terminal.
pub const REFUSED_IOCTLS: &[(&str, u64)] = &[("TIOCSTI", 0x5412), ("TIOCLINUX", 0x541C)];

/// `clone` flag of a new thread: the relay starts threads, never processes.
const CLONE_THREAD: u64 = 0x0001_0000;

/// Who a filter is for. Every process of the sandbox has one; the helpers add to the
/// program's what they never do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The program and everything it starts.
    Program,
    /// The helpers that wait for the program (the helper outside the PID namespace, and
    /// pid 1 inside): no program, no socket.
    Supervisor,
    /// The relay to the egress proxy: threads and Unix sockets only, no program.
    Relay,
}

/// x86_64's x32 system calls carry this bit in their number.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// The rules of the EPERM filter: every refused call, `clone` with a namespace flag, and the
/// terminal `ioctl`s. Pure.
pub fn eperm_rules(arch: Arch) -> Result<BTreeMap<i64, Vec<SeccompRule>>, BackendError> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        REFUSED.iter().map(|s| (s.nr(arch), Vec::new())).collect();
    let bit_set = |arg: u8, bit: u64| -> Result<SeccompRule, BackendError> {
        let cond = SeccompCondition::new(
            arg,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::MaskedEq(bit),
            bit,
        )?;
        SeccompRule::new(vec![cond])
    };
    let clone = CLONE_NEW_FLAGS
        .iter()
        .map(|&(_, flag)| bit_set(0, flag))
        .collect::<Result<Vec<_>, _>>()?;
    rules.insert(CLONE.nr(arch), clone);
    let ioctl = REFUSED_IOCTLS
        .iter()
        .map(|&(_, req)| {
            let cond = SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, req)?;
            SeccompRule::new(vec![cond])
        })
        .collect::<Result<Vec<_>, BackendError>>()?;
    rules.insert(IOCTL.nr(arch), ioctl);
    let sockets = refused_socket_rules()?;
    rules.insert(SOCKET.nr(arch), sockets.clone());
    rules.insert(SOCKETPAIR.nr(arch), sockets);
    Ok(rules)
}

/// `socket`/`socketpair` rules that match a family outside [`ALLOWED_FAMILIES`] (netlink
/// with a protocol other than routing among them). The families are small numbers, so the
/// gaps between the allowed ones are ranges.
fn refused_socket_rules() -> Result<Vec<SeccompRule>, BackendError> {
    let arg =
        |i: u8, op: SeccompCmpOp, v: u64| SeccompCondition::new(i, SeccompCmpArgLen::Dword, op, v);
    let mut allowed: Vec<u64> = ALLOWED_FAMILIES.iter().map(|&(_, f)| f).collect();
    allowed.push(AF_NETLINK);
    allowed.sort_unstable();
    let mut rules = Vec::new();
    let mut low = 0u64;
    for &f in &allowed {
        if f > low {
            rules.push(SeccompRule::new(vec![
                arg(0, SeccompCmpOp::Ge, low)?,
                arg(0, SeccompCmpOp::Lt, f)?,
            ])?);
        }
        low = f + 1;
    }
    rules.push(SeccompRule::new(vec![arg(0, SeccompCmpOp::Ge, low)?])?);
    rules.push(SeccompRule::new(vec![
        arg(0, SeccompCmpOp::Eq, AF_NETLINK)?,
        arg(2, SeccompCmpOp::Ne, NETLINK_ROUTE)?,
    ])?);
    Ok(rules)
}

/// What a helper adds to the program's rules: no program, and sockets only as its role
/// needs. Pure.
fn helper_rules(arch: Arch, role: Role) -> Result<BTreeMap<i64, Vec<SeccompRule>>, BackendError> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = [EXECVE, EXECVEAT]
        .iter()
        .map(|s| (s.nr(arch), Vec::new()))
        .collect();
    let arg =
        |i: u8, op: SeccompCmpOp, v: u64| SeccompCondition::new(i, SeccompCmpArgLen::Dword, op, v);
    match role {
        Role::Program => return Ok(BTreeMap::new()),
        Role::Supervisor => {
            rules.insert(SOCKET.nr(arch), Vec::new());
            rules.insert(SOCKETPAIR.nr(arch), Vec::new());
        }
        Role::Relay => {
            rules.insert(
                SOCKET.nr(arch),
                vec![SeccompRule::new(vec![arg(0, SeccompCmpOp::Ne, 1)?])?],
            );
            rules.insert(SOCKETPAIR.nr(arch), Vec::new());
            // fork() is clone(SIGCHLD): a clone without CLONE_THREAD.
            rules.insert(
                CLONE.nr(arch),
                vec![SeccompRule::new(vec![arg(
                    0,
                    SeccompCmpOp::MaskedEq(CLONE_THREAD),
                    0,
                )?])?],
            );
        }
    }
    Ok(rules)
}

/// The BPF programs to install for `role`, in order. Pure.
pub fn programs(arch: Arch, role: Role) -> Result<Vec<BpfProgram>, BackendError> {
    let mut out = base_programs(arch)?;
    out.extend(role_program(arch, role)?);
    Ok(out)
}

/// The filters every process of the sandbox has (the program's). Pure.
pub fn base_programs(arch: Arch) -> Result<Vec<BpfProgram>, BackendError> {
    let eperm = SeccompFilter::new(
        eperm_rules(arch)?,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch.target(),
    )?;
    let enosys = SeccompFilter::new(
        BTreeMap::from([(CLONE3.nr(arch), Vec::new())]),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch.target(),
    )?;
    let mut out = vec![eperm.try_into()?, enosys.try_into()?];
    if arch == Arch::X86_64 {
        out.push(x32_guard());
    }
    Ok(out)
}

/// The filter a helper's `role` adds to [`base_programs`] (none for the program). Pure.
pub fn role_program(arch: Arch, role: Role) -> Result<Option<BpfProgram>, BackendError> {
    let extra = helper_rules(arch, role)?;
    if extra.is_empty() {
        return Ok(None);
    }
    let helper = SeccompFilter::new(
        extra,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch.target(),
    )?;
    Ok(Some(helper.try_into()?))
}

/// Refuses every x32 system call (see the pitfalls). The other filters already kill any
/// other audit arch, so this one looks at the number only.
fn x32_guard() -> BpfProgram {
    const LD_W_ABS: u16 = 0x20;
    const JGE_K: u16 = 0x35;
    const RET_K: u16 = 0x06;
    let ins = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    vec![
        ins(LD_W_ABS, 0, 0, 0), // seccomp_data.nr
        ins(JGE_K, 0, 1, X32_SYSCALL_BIT),
        ins(RET_K, 0, 0, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32),
        ins(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
    ]
}

/// Installs the filters on the calling thread (sets `no_new_privs` first, which seccomp
/// requires of a process without `CAP_SYS_ADMIN`).
pub fn install(programs: &[BpfProgram]) -> Result<(), SandboxFailure> {
    for p in programs {
        seccompiler::apply_filter(p).map_err(|e| SandboxFailure::Seccomp { why: e.to_string() })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
