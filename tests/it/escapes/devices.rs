//! Devices: a sandboxed program gets a private `/dev` with what programs open (null, zero,
//! full, random, urandom, tty, ptmx, its own pts, shm, the fd links), never the host's
//! consoles, virtual terminals' memory (`/dev/vcs*`), KVM, loop or block devices.

use super::*;

/// Host devices a sandboxed program has no use for, those of them this machine has.
fn host_only_devices() -> Vec<&'static str> {
    [
        "vcs",
        "vcs1",
        "vcsa",
        "vcsa1",
        "vcsu",
        "kvm",
        "loop0",
        "loop-control",
        "vda",
        "sda",
        "nvme0n1",
        "zram0",
        "kmsg",
        "mem",
        "port",
        "console",
        "tty0",
        "tty1",
        "ttyS0",
        "vsock",
        "fuse",
        "hwrng",
        "userfaultfd",
        "btrfs-control",
        "autofs",
    ]
    .into_iter()
    .filter(|d| Path::new("/dev").join(d).exists())
    .collect()
}

#[test]
fn a_sandboxed_program_sees_only_the_devices_programs_need() {
    let env = TestEnv::new();
    let host_only = host_only_devices();
    assert!(
        !host_only.is_empty(),
        "this machine has none of the host devices the test looks for"
    );
    let script = "echo \"dev=[$(ls -A /dev | tr '\\n' ' ')]\"; \
        echo x > /dev/null && echo null-ok; \
        echo \"zero=$(head -c 4 /dev/zero | wc -c)\"; \
        echo \"urandom=$(head -c 8 /dev/urandom | wc -c) random=$(head -c 8 /dev/random | wc -c)\"; \
        (echo x > /dev/full) 2>/dev/null || echo full-refuses; \
        exec 3<>/dev/ptmx && echo ptmx-ok; \
        echo \"links=[$(readlink /dev/fd /dev/stdin /dev/stdout /dev/stderr | tr '\\n' ' ')]\"";
    let run = |name: &str, extra: &[&str]| {
        let r = run_bash(&env, name, extra, script);
        assert_eq!(r.code, 0, "{name}: {r:?}");
        stdout_log(&env, name, 1)
    };
    let listing = |out: &str| -> Vec<String> {
        out.lines()
            .find_map(|l| l.strip_prefix("dev=["))
            .unwrap_or_else(|| panic!("no listing: {out}"))
            .trim_end_matches(']')
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    };
    // Control: unsandboxed, the host's devices are there.
    let host = listing(&run("host", &[]));
    for d in &host_only {
        assert!(host.iter().any(|n| n == d), "host: {d} missing: {host:?}");
    }
    let out = run("sandboxed", &["--sandbox"]);
    let names = listing(&out);
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let seen: Vec<&&str> = host_only.iter().filter(|d| names.contains(d)).collect();
    assert!(
        seen.is_empty(),
        "host devices in the sandbox: {seen:?} of {names:?}"
    );
    for need in [
        "null", "zero", "full", "random", "urandom", "tty", "ptmx", "pts", "shm", "fd", "stdin",
        "stdout", "stderr",
    ] {
        assert!(names.contains(&need), "{need} missing from {names:?}");
    }
    for works in [
        "null-ok",
        "zero=4",
        "urandom=8 random=8",
        "full-refuses",
        "ptmx-ok",
        "links=[/proc/self/fd /proc/self/fd/0 /proc/self/fd/1 /proc/self/fd/2 ]",
    ] {
        assert!(out.contains(works), "{works:?} missing: {out}");
    }
    env.assert_no_leftovers();
}
