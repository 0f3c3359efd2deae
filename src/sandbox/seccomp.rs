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
    let extra = helper_rules(arch, role)?;
    if !extra.is_empty() {
        let helper = SeccompFilter::new(
            extra,
            SeccompAction::Allow,
            SeccompAction::Errno(libc::EPERM as u32),
            arch.target(),
        )?;
        out.push(helper.try_into()?);
    }
    Ok(out)
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
mod tests {
    use super::*;

    const AUDIT_ARCH_X86_64: u32 = 62 | 0x8000_0000 | 0x4000_0000;
    const AUDIT_ARCH_AARCH64: u32 = 183 | 0x8000_0000 | 0x4000_0000;
    const AUDIT_ARCH_I386: u32 = 3 | 0x4000_0000;

    fn audit(arch: Arch) -> u32 {
        match arch {
            Arch::X86_64 => AUDIT_ARCH_X86_64,
            Arch::Aarch64 => AUDIT_ARCH_AARCH64,
        }
    }

    /// Runs one classic BPF program on `struct seccomp_data` (the subset of instructions
    /// seccompiler and this module emit; anything else fails the test).
    fn run(prog: &[sock_filter], nr: u32, arch: u32, args: [u64; 6]) -> u32 {
        let word = |off: u32| -> u32 {
            match off {
                0 => nr,
                4 => arch,
                16..=63 => {
                    let a = args[((off - 16) / 8) as usize];
                    if off % 8 == 0 {
                        a as u32
                    } else {
                        (a >> 32) as u32
                    }
                }
                _ => panic!("load at offset {off}"),
            }
        };
        let (mut pc, mut acc) = (0usize, 0u32);
        loop {
            let i = &prog[pc];
            pc += 1;
            match i.code {
                0x20 => acc = word(i.k),                                     // ld w abs
                0x54 => acc &= i.k,                                          // alu and k
                0x05 => pc += i.k as usize,                                  // ja
                0x15 => pc += if acc == i.k { i.jt } else { i.jf } as usize, // jeq k
                0x25 => pc += if acc > i.k { i.jt } else { i.jf } as usize,  // jgt k
                0x35 => pc += if acc >= i.k { i.jt } else { i.jf } as usize, // jge k
                0x06 => return i.k,                                          // ret k
                c => panic!("instruction {c:#x} not understood"),
            }
        }
    }

    /// What the kernel answers with all filters installed: the strictest action wins.
    fn decide(arch: Arch, nr: i64, args: [u64; 6]) -> u32 {
        decide_as(arch, audit(arch), nr as u32, args)
    }

    fn decide_as(arch: Arch, audit_arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        decide_role(arch, Role::Program, audit_arch, nr, args)
    }

    fn decide_for(arch: Arch, role: Role, nr: i64, args: [u64; 6]) -> u32 {
        decide_role(arch, role, audit(arch), nr as u32, args)
    }

    fn decide_role(arch: Arch, role: Role, audit_arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        // Precedence of seccomp actions (kernel: seccomp_run_filters): lower action value
        // is stricter, with KILL_PROCESS the strictest of all.
        let rank = |r: u32| match r & libc::SECCOMP_RET_ACTION_FULL {
            libc::SECCOMP_RET_KILL_PROCESS => 0,
            a => 1 + (a as u64),
        };
        programs(arch, role)
            .unwrap()
            .iter()
            .map(|p| run(p, nr, audit_arch, args))
            .min_by_key(|&r| rank(r))
            .unwrap()
    }

    const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
    const EPERM: u32 = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
    const ENOSYS: u32 = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
    const NONE: [u64; 6] = [0; 6];

    fn both() -> [Arch; 2] {
        [Arch::X86_64, Arch::Aarch64]
    }

    #[test]
    fn every_refused_call_gets_eperm_on_both_arches() {
        for arch in both() {
            for s in REFUSED {
                assert_eq!(
                    decide(arch, s.nr(arch), NONE),
                    EPERM,
                    "{} on {arch:?}",
                    s.name
                );
            }
        }
    }

    #[test]
    fn ordinary_calls_pass() {
        // read, write, openat, socket, connect, execve, kill (x86_64; aarch64)
        for (x86, arm) in [
            (0, 63),
            (1, 64),
            (257, 56),
            (41, 198),
            (42, 203),
            (59, 221),
            (62, 129),
        ] {
            // socket(AF_INET, SOCK_STREAM, 0); the other calls ignore the arguments.
            let args = [2, 1, 0, 0, 0, 0];
            assert_eq!(decide(Arch::X86_64, x86, args), ALLOW, "x86_64 nr {x86}");
            assert_eq!(decide(Arch::Aarch64, arm, args), ALLOW, "aarch64 nr {arm}");
        }
    }

    #[test]
    fn clone_is_refused_only_with_a_namespace_flag() {
        const SIGCHLD: u64 = 17;
        const CLONE_VM_THREAD: u64 = 0x100 | 0x10000 | 0x800 | 0x400 | 0x200; // pthread_create
        for arch in both() {
            let nr = CLONE.nr(arch);
            assert_eq!(
                decide(arch, nr, [SIGCHLD, 0, 0, 0, 0, 0]),
                ALLOW,
                "fork {arch:?}"
            );
            assert_eq!(decide(arch, nr, [CLONE_VM_THREAD, 0, 0, 0, 0, 0]), ALLOW);
            for &(name, flag) in CLONE_NEW_FLAGS {
                let flags = flag | SIGCHLD | CLONE_VM_THREAD;
                assert_eq!(
                    decide(arch, nr, [flags, 0, 0, 0, 0, 0]),
                    EPERM,
                    "{name} {arch:?}"
                );
            }
            // Bits above 32 do not hide a flag.
            let high = (1u64 << 40) | 0x1000_0000;
            assert_eq!(decide(arch, nr, [high, 0, 0, 0, 0, 0]), EPERM);
        }
    }

    #[test]
    fn only_unix_inet_and_routing_netlink_sockets_are_opened() {
        const AF_VSOCK: u64 = 40;
        const AF_PACKET: u64 = 17;
        const NETLINK_NETFILTER: u64 = 12;
        for arch in both() {
            for nr in [SOCKET.nr(arch), SOCKETPAIR.nr(arch)] {
                let ask = |fam: u64, proto: u64| decide(arch, nr, [fam, 1, proto, 0, 0, 0]);
                for (fam, proto) in [(1, 0), (2, 0), (10, 0), (2, 6), (AF_NETLINK, 0)] {
                    assert_eq!(ask(fam, proto), ALLOW, "{fam}/{proto} on {arch:?}");
                }
                for (fam, proto) in [
                    (0, 0),
                    (3, 0),
                    (9, 0),
                    (11, 0),
                    (15, 0),
                    (AF_PACKET, 0),
                    (AF_VSOCK, 0),
                    (255, 0),
                    (AF_NETLINK, NETLINK_NETFILTER),
                    (AF_NETLINK, 9),
                ] {
                    assert_eq!(ask(fam, proto), EPERM, "{fam}/{proto} on {arch:?}");
                }
                // The family is an int: high bits do not hide one.
                assert_eq!(ask(AF_VSOCK | 1 << 32, 0), EPERM);
            }
        }
    }

    #[test]
    fn io_uring_is_refused() {
        for arch in both() {
            for nr in [425, 426, 427] {
                assert_eq!(decide(arch, nr, NONE), EPERM, "{nr} on {arch:?}");
            }
        }
    }

    #[test]
    fn helpers_run_no_program_and_open_only_what_their_role_needs() {
        const SIGCHLD: u64 = 17;
        const THREAD: u64 = 0x100 | 0x10000 | 0x800 | 0x400 | 0x200;
        for arch in both() {
            for role in [Role::Supervisor, Role::Relay] {
                assert_eq!(decide_for(arch, role, EXECVE.nr(arch), NONE), EPERM);
                assert_eq!(decide_for(arch, role, EXECVEAT.nr(arch), NONE), EPERM);
                // What the program's filter refuses, the helpers' does too.
                assert_eq!(decide_for(arch, role, REFUSED[0].nr(arch), NONE), EPERM);
                assert_eq!(decide_for(arch, role, 425, NONE), EPERM);
            }
            let sock =
                |role, fam: u64| decide_for(arch, role, SOCKET.nr(arch), [fam, 1, 0, 0, 0, 0]);
            assert_eq!(sock(Role::Supervisor, 1), EPERM);
            assert_eq!(sock(Role::Relay, 1), ALLOW);
            assert_eq!(sock(Role::Relay, 2), EPERM);
            let clone =
                |role, flags: u64| decide_for(arch, role, CLONE.nr(arch), [flags, 0, 0, 0, 0, 0]);
            assert_eq!(clone(Role::Relay, THREAD), ALLOW);
            assert_eq!(clone(Role::Relay, SIGCHLD), EPERM);
            assert_eq!(clone(Role::Supervisor, SIGCHLD), ALLOW);
            // The program keeps its own way of running others.
            assert_eq!(
                decide_for(arch, Role::Program, EXECVE.nr(arch), NONE),
                ALLOW
            );
            assert_eq!(clone(Role::Program, SIGCHLD), ALLOW);
        }
    }

    #[test]
    fn clone3_gets_enosys_so_libc_falls_back() {
        for arch in both() {
            assert_eq!(decide(arch, CLONE3.nr(arch), NONE), ENOSYS);
        }
    }

    #[test]
    fn terminal_injection_ioctls_are_refused_but_others_pass() {
        const TCGETS: u64 = 0x5401;
        const FIONREAD: u64 = 0x541B;
        for arch in both() {
            let nr = IOCTL.nr(arch);
            for &(name, req) in REFUSED_IOCTLS {
                assert_eq!(decide(arch, nr, [0, req, 0, 0, 0, 0]), EPERM, "{name}");
                // The kernel reads the request as 32 bits: high bits must not hide it.
                assert_eq!(
                    decide(arch, nr, [0, req | 1 << 32, 0, 0, 0, 0]),
                    EPERM,
                    "{name}"
                );
            }
            for req in [TCGETS, FIONREAD] {
                assert_eq!(decide(arch, nr, [0, req, 0, 0, 0, 0]), ALLOW);
            }
        }
    }

    #[test]
    fn x32_numbers_and_foreign_arches_do_not_get_around_the_filter() {
        let mount_x32 = X32_SYSCALL_BIT | 165;
        assert_eq!(
            decide_as(Arch::X86_64, AUDIT_ARCH_X86_64, mount_x32, NONE),
            EPERM
        );
        // i386 (int 0x80) on x86_64 is killed, whatever the call.
        assert_eq!(
            decide_as(Arch::X86_64, AUDIT_ARCH_I386, 0, NONE),
            libc::SECCOMP_RET_KILL_PROCESS
        );
        assert_eq!(
            decide_as(Arch::Aarch64, AUDIT_ARCH_X86_64, 63, NONE),
            libc::SECCOMP_RET_KILL_PROCESS
        );
    }

    #[test]
    fn host_numbers_match_libc() {
        // The table is written by hand for both arches; on the arch the tests run on, libc
        // checks it (new calls libc may lack are checked by name only).
        let Some(arch) = Arch::host() else { return };
        let known: &[(&str, i64)] = &[
            ("mount", libc::SYS_mount),
            ("umount2", libc::SYS_umount2),
            ("pivot_root", libc::SYS_pivot_root),
            ("unshare", libc::SYS_unshare),
            ("setns", libc::SYS_setns),
            ("open_tree", libc::SYS_open_tree),
            ("move_mount", libc::SYS_move_mount),
            ("fsopen", libc::SYS_fsopen),
            ("fsconfig", libc::SYS_fsconfig),
            ("fsmount", libc::SYS_fsmount),
            ("fspick", libc::SYS_fspick),
            ("mount_setattr", libc::SYS_mount_setattr),
            ("keyctl", libc::SYS_keyctl),
            ("add_key", libc::SYS_add_key),
            ("request_key", libc::SYS_request_key),
            ("bpf", libc::SYS_bpf),
            ("perf_event_open", libc::SYS_perf_event_open),
            ("ptrace", libc::SYS_ptrace),
            ("process_vm_readv", libc::SYS_process_vm_readv),
            ("process_vm_writev", libc::SYS_process_vm_writev),
            ("kexec_load", libc::SYS_kexec_load),
            ("kexec_file_load", libc::SYS_kexec_file_load),
            ("init_module", libc::SYS_init_module),
            ("finit_module", libc::SYS_finit_module),
            ("delete_module", libc::SYS_delete_module),
            ("open_by_handle_at", libc::SYS_open_by_handle_at),
            ("userfaultfd", libc::SYS_userfaultfd),
            ("io_uring_setup", libc::SYS_io_uring_setup),
            ("io_uring_enter", libc::SYS_io_uring_enter),
            ("io_uring_register", libc::SYS_io_uring_register),
            ("socket", libc::SYS_socket),
            ("socketpair", libc::SYS_socketpair),
            ("execve", libc::SYS_execve),
            ("execveat", libc::SYS_execveat),
            ("clone", libc::SYS_clone),
            ("clone3", libc::SYS_clone3),
            ("ioctl", libc::SYS_ioctl),
        ];
        let all = REFUSED.iter().chain([
            &CLONE,
            &CLONE3,
            &IOCTL,
            &SOCKET,
            &SOCKETPAIR,
            &EXECVE,
            &EXECVEAT,
        ]);
        for s in all {
            if let Some((_, nr)) = known.iter().find(|(n, _)| *n == s.name) {
                assert_eq!(s.nr(arch), *nr, "{} on {arch:?}", s.name);
            } else {
                assert_eq!(
                    s.name, "open_tree_attr",
                    "{} is not checked against libc",
                    s.name
                );
            }
        }
        // The request's type differs between libcs (c_ulong here, c_int on musl).
        #[allow(clippy::unnecessary_cast)]
        let (sti, linux) = (libc::TIOCSTI as u64, libc::TIOCLINUX as u64);
        assert_eq!(sti, REFUSED_IOCTLS[0].1);
        assert_eq!(linux, REFUSED_IOCTLS[1].1);
    }
}
