//! The filters run through a small BPF interpreter: what the kernel will decide.

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
                if off.is_multiple_of(8) {
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
        let sock = |role, fam: u64| decide_for(arch, role, SOCKET.nr(arch), [fam, 1, 0, 0, 0, 0]);
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
