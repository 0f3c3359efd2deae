//! Processes: whom the program can reach (signals, ptrace, a tmux server, its terminal),
//! the calls seccomp refuses, and what a shell or Node needs to run normally.

use super::*;

/// A tmux server on a socket outside `/tmp` (where a user's `$XDG_RUNTIME_DIR` socket would
/// be), killed on drop.
struct Tmux(PathBuf);

impl Tmux {
    fn start(socket: PathBuf) -> Self {
        require_tool("tmux", &["-V"], "tmux");
        let ok = Command::new("tmux")
            .arg("-S")
            .arg(&socket)
            .args([
                "-f",
                "/dev/null",
                "new-session",
                "-d",
                "-s",
                "t",
                "sleep 600",
            ])
            .env_remove("TMUX")
            .stdin(Stdio::null())
            .status()
            .unwrap();
        assert!(ok.success());
        Tmux(socket)
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.0)
            .arg("kill-server")
            .env_remove("TMUX")
            .stderr(Stdio::null())
            .status();
    }
}

#[test]
fn sandbox_hides_a_tmux_socket_landlock_cannot_refuse() {
    let s = Sbx::new();
    let dir = s.out().join("tmux");
    std::fs::create_dir(&dir).unwrap();
    let sock = dir.join("sock");
    let _server = Tmux::start(sock.clone());
    let script = format!("tmux -S {} ls", sock.display());

    // Outside, and inside without the rule (Landlock ABI < 9 cannot refuse the connect):
    // the server answers. That is why it must be hidden.
    assert_eq!(unsandboxed(&script).code, 0);
    let open = s.bash(&s.base(), &script);
    assert_eq!(open.code, 0, "{open:#?}");
    assert!(open.stdout.starts_with("t: 1 windows"), "{open:#?}");
    let partial = open.enforced()["partial"].to_string();
    assert!(partial.contains("unix socket"), "{partial}");

    for hidden in [&sock, &dir] {
        let mut policy = s.base();
        policy["hidden"] = json!([hidden]);
        let r = s.bash(&policy, &script);
        assert_ne!(r.code, 0, "hiding {}: {r:#?}", hidden.display());
        assert!(!r.stdout.contains("windows"), "{r:#?}");
    }
}

#[test]
fn sandbox_program_cannot_signal_outside_its_domain() {
    let s = Sbx::new();
    let outside = Sleeper::start();
    let script = format!(
        "kill -0 {pid}; echo \"probe=$?\"
        kill -TERM {pid}; echo \"term=$?\"
        sleep 30 & kill $!; wait $!; echo \"own-child=$?\"",
        pid = outside.pid()
    );
    let r = s.bash(&s.base(), &script);
    assert_eq!(
        lines(&r.stdout),
        ["probe=1", "term=1", "own-child=143"],
        "{r:#?}"
    );
    // Outside the PID namespace the pid names nothing (or, were it visible, Landlock's
    // signal scope would refuse it).
    assert!(
        r.stderr.contains("No such process") || r.stderr.contains("Operation not permitted"),
        "{r:#?}"
    );
    // Control: the test itself may signal it (same user), so only the sandbox refused.
    // SAFETY: kill(pid, 0) only checks.
    assert_eq!(unsafe { libc::kill(outside.pid() as i32, 0) }, 0);
}

#[test]
fn sandbox_program_cannot_trace_outside_processes() {
    require_tool("perl", &["-e", "1"], "perl");
    let s = Sbx::new();
    let outside = Sleeper::start();
    let pid = outside.pid();
    // What only a tracer may read: its environment, and its memory (opening is the check).
    let read = format!(
        r#"cat /proc/{pid}/environ > /dev/null; echo "environ=$?"
        (exec 7</proc/{pid}/mem) 2>/dev/null; echo "mem=$?""#
    );
    // PTRACE_ATTACH = 16.
    let attach = format!(
        r#"perl -e '$r = syscall({ptrace}, 16, {pid}, 0, 0); print "attach=$r errno=", $!+0, "\n"'"#,
        ptrace = nr(101, 117)
    );
    let r = s.bash(&s.base(), &format!("{attach}\n{read}"));
    assert_eq!(
        lines(&r.stdout),
        ["attach=-1 errno=1", "environ=1", "mem=1"],
        "{r:#?}"
    );
    // Control: unsandboxed, the same user reads both.
    let c = unsandboxed(&read);
    assert_eq!(lines(&c.stdout), ["environ=0", "mem=0"], "{c:#?}");
}

#[test]
fn sandbox_seccomp_refuses_new_namespaces_and_mounts() {
    require_tool("unshare", &["--version"], "util-linux");
    require_tool("perl", &["-e", "1"], "perl");
    let s = Sbx::new();
    // clone(CLONE_NEWUSER | SIGCHLD): forks if allowed (the child says so, too).
    let script = format!(
        r#"unshare -r true; echo "unshare=$?"
        perl -e '$r = syscall({clone}, 0x10000000 | 17, 0, 0, 0, 0); print $r == -1 ? "clone-newuser errno=".($!+0)."\n" : "forked\n"; exit'
        perl -e '$r = syscall({clone}, 17, 0, 0, 0, 0); if ($r == 0) {{ exit }} waitpid($r, 0); print "fork=", ($r > 0 ? "ok" : "failed"), "\n"'
        perl -e '$r = syscall(435, 0, 0); print "clone3 errno=", $!+0, "\n"'
        mount -t tmpfs none /tmp; echo "mount=$?"
        cat /proc/self/status | grep -E '^(NoNewPrivs|Seccomp):'"#,
        clone = nr(56, 220)
    );
    let r = s.bash(&s.base(), &script);
    assert_eq!(
        lines(&r.stdout),
        [
            "unshare=1",
            "clone-newuser errno=1",
            "fork=ok",
            "clone3 errno=38",
            "mount=32",
            "NoNewPrivs:\t1",
            "Seccomp:\t2"
        ],
        "{r:#?}"
    );
    assert!(
        r.stderr.contains("unshare failed: Operation not permitted"),
        "{r:#?}"
    );
    // Control: outside, unprivileged user namespaces work on this machine.
    assert_eq!(unsandboxed("unshare -r true").code, 0);
}

#[test]
fn sandbox_runs_a_shell_and_node_normally() {
    require_tool("node", &["--version"], "nodejs");
    require_tool("script", &["--version"], "bsdutils");
    let s = Sbx::new();
    let script = r#"
        head -c 16 /dev/urandom | wc -c
        head -c 4 /dev/zero | wc -c
        echo quiet > /dev/null && echo devnull=ok
        yes | head -n 1; echo "yes=${PIPESTATUS[0]}"
        script -qc 'tty; ls /dev/pts | tr "\n" " "; echo' /dev/null | tr -d '\r'
        node -e '
            const fs = require("fs"), os = require("os"), cp = require("child_process");
            fs.writeFileSync("node.txt", require("crypto").randomBytes(4).toString("hex"));
            fs.writeFileSync(os.tmpdir() + "/n.tmp", "t");
            console.log("node", os.tmpdir(), cp.execSync("echo child").toString().trim());
        '
    "#;
    let r = s.bash(&s.base(), script);
    assert_eq!(r.code, 0, "{r:#?}");
    // `yes` dies of SIGPIPE (141), as outside: the helper does not pass on Rust's ignored
    // SIGPIPE. The terminal is the program's own: its devpts has nothing of the host's.
    assert_eq!(
        lines(&r.stdout),
        [
            "16",
            "4",
            "devnull=ok",
            "y",
            "yes=141",
            "/dev/pts/0",
            "0 ptmx ",
            "node /tmp child"
        ],
        "{r:#?}"
    );
    assert_eq!(
        std::fs::read_to_string(s.ws.join("node.txt"))
            .unwrap()
            .len(),
        8
    );
}

#[test]
fn sandbox_refuses_pushing_keys_into_its_terminal() {
    require_tool("perl", &["-e", "1"], "perl");
    require_tool("script", &["--version"], "bsdutils");
    let s = Sbx::new();
    // TIOCSTI = 0x5412 on its own terminal would type into it (and the pane's shell after).
    let script = r#"script -qc 'perl -e "open(T, q{+<}, q{/dev/tty}) or die; \$c = q{x}; \$r = ioctl(T, 0x5412, \$c); print \$r ? q{injected} : q{refused errno=}.(\$!+0), qq{\n}"' /dev/null | tr -d '\r'"#;
    let r = s.bash(&s.base(), script);
    // EPERM is the filter's answer (a kernel with legacy_tiocsti off answers EIO).
    assert_eq!(lines(&r.stdout), ["refused errno=1"], "{r:#?}");
    // Control, where the kernel still allows it: outside, the key goes in (and the terminal
    // echoes the `x` it was given).
    if std::fs::read_to_string("/proc/sys/dev/tty/legacy_tiocsti").is_ok_and(|v| v.trim() == "1") {
        let c = unsandboxed(script);
        assert_eq!(lines(&c.stdout), ["xinjected"], "{c:#?}");
    }
}

/// Python: `socket(FAMILY, TYPE, PROTO)` for each named case, printing `name=ok` or
/// `name=errno`.
const SOCKET_PROBE: &str = r#"
import socket, sys
for name, fam, typ, proto in (
    ("vsock", socket.AF_VSOCK, socket.SOCK_STREAM, 0),
    ("packet", socket.AF_PACKET, socket.SOCK_DGRAM, 0),
    ("netlink_netfilter", socket.AF_NETLINK, socket.SOCK_RAW, 12),
    ("netlink_audit", socket.AF_NETLINK, socket.SOCK_RAW, 9),
    ("netlink_route", socket.AF_NETLINK, socket.SOCK_RAW, 0),
    ("unix", socket.AF_UNIX, socket.SOCK_STREAM, 0),
    ("inet", socket.AF_INET, socket.SOCK_STREAM, 0),
    ("inet6", socket.AF_INET6, socket.SOCK_DGRAM, 0),
):
    try:
        socket.socket(fam, typ, proto).close()
        print(f"{name}=ok")
    except OSError as e:
        print(f"{name}={e.errno}")
try:
    a, b = socket.socketpair(socket.AF_UNIX)
    print("socketpair=ok")
except OSError as e:
    print(f"socketpair={e.errno}")
"#;

#[test]
fn sandbox_seccomp_refuses_socket_families_and_io_uring_it_does_not_need() {
    require_tool("python3", &["--version"], "python3");
    require_tool("perl", &["-e", "1"], "perl");
    let s = Sbx::new();
    // io_uring_setup(1, params): a ring opens and connects sockets without the calls the
    // filter sees.
    let uring = format!(
        r#"perl -e '$p = "\0" x 120; $r = syscall({nr}, 1, $p); print $r >= 0 ? "io_uring=ok\n" : "io_uring=".($!+0)."\n"'"#,
        nr = nr(425, 425)
    );
    let script = format!("python3 -c '{SOCKET_PROBE}'\n{uring}");
    let r = s.bash(&s.base(), &script);
    assert_eq!(
        lines(&r.stdout),
        [
            "vsock=1",
            "packet=1",
            "netlink_netfilter=1",
            "netlink_audit=1",
            "netlink_route=ok",
            "unix=ok",
            "inet=ok",
            "inet6=ok",
            "socketpair=ok",
            "io_uring=1"
        ],
        "{r:#?}"
    );
    // Control: outside, none of these is refused with EPERM (vsock may be missing from the
    // kernel, which answers EAFNOSUPPORT; io_uring may be turned off by a sysctl).
    let c = unsandboxed(&script);
    for want in ["netlink_netfilter=ok", "unix=ok"] {
        assert!(c.stdout.contains(want), "{want}: {c:#?}");
    }
    assert!(!c.stdout.contains("=1\n"), "{c:#?}");
}

#[test]
fn sandbox_every_process_of_the_sandbox_has_its_own_filter() {
    let s = Sbx::new();
    let (ready, go) = (s.ws.join("ready"), s.ws.join("go"));
    // The program says what pid 1 of its namespace (init) runs under, then waits, so the
    // test can look at the helper outside while it waits.
    let script = "echo \"init $(grep -E '^(Seccomp|NoNewPrivs):' /proc/1/status | tr '\\n\\t' '  ')\"; \
                  echo \"self $(grep -E '^Seccomp:' /proc/self/status | tr '\\n\\t' '  ')\"; \
                  touch ready; while [ ! -e go ]; do sleep 0.01; done";
    let mut argv = s.helper_argv(
        &s.base(),
        &["bash".as_ref(), "-c".as_ref(), script.as_ref()],
    );
    // No report fd: the helper runs as a plain child here.
    let at = argv.iter().position(|a| a == "--report-fd").unwrap();
    argv.drain(at..at + 2);
    let child = Command::new(&argv[0])
        .args(&argv[1..])
        .current_dir(&s.ws)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let helper = child.id();
    crate::harness::wait_until("the program to run", || ready.exists().then_some(()));
    let status = std::fs::read_to_string(format!("/proc/{helper}/status")).unwrap();
    crate::harness::touch(&go);
    let r = wait_child_within(child, DEADLINE, "the sandboxed program should end");
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        status.contains("Seccomp:\t2"),
        "the helper has no filter:\n{status}"
    );
    let out = lines(&r.stdout);
    assert!(
        out[0].contains("Seccomp: 2") && out[0].contains("NoNewPrivs: 1"),
        "{out:?}"
    );
    assert!(out[1].contains("Seccomp: 2"), "{out:?}");
}
