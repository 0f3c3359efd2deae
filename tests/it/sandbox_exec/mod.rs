//! The sandbox helper, `subpane __sandbox --policy FILE --report-fd 3 -- PROGRAM …`, run
//! directly: every rule of the policy has a test that tries to break it, next to a control
//! that shows the same attempt works without the sandbox (or without that rule), so no test
//! passes merely because the attempt was broken.
//!
//! The workspace and attempt dir live under `/tmp` (the harness's temp dir), so the private
//! `/tmp` must carry them across; a second tree, `outside`, lives on the target's disk, out
//! of `/tmp`, for rules about paths the private `/tmp` would hide anyway.
//!
//! `files` (writes, the private /tmp, hidden paths, git hooks), `processes` (signals, ptrace,
//! tmux, seccomp, the terminal, a shell and Node), `network`, `report`, `fails_closed`.

mod fails_closed;
mod files;
mod network;
mod processes;
mod report;

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
        let outside = crate::harness::outside_the_sandbox("sbx-out-");
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
