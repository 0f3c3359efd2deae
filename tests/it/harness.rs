//! The test harness: a private home, tmux socket and work directory per test, and waiting
//! on conditions with a deadline. Dropping a `TestEnv` kills its tmux server and anything
//! left of its attempts, and removes its temp directory.

#![allow(dead_code)]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_subpane");

/// A deadline long enough for a loaded 2-core CI machine.
pub const DEADLINE: Duration = Duration::from_secs(30);

pub struct TestEnv {
    pub root: tempfile::TempDir,
    pub home: PathBuf,
    pub socket: PathBuf,
    pub work: PathBuf,
    /// The home's own directory when it lives outside `/tmp` (see
    /// [`TestEnv::with_home_outside_tmp`]); removed on drop.
    outside_home: Option<tempfile::TempDir>,
}

/// What a command printed and how it exited.
#[derive(Debug)]
pub struct Ran {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Ran {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not one JSON document ({e}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }
}

impl From<Output> for Ran {
    fn from(o: Output) -> Self {
        Ran {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

impl TestEnv {
    pub fn new() -> Self {
        let root = tempfile::Builder::new()
            .prefix("sp-it-")
            .tempdir_in("/tmp")
            .expect("temp dir");
        let home = root.path().join("home");
        let work = root.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        let socket = root.path().join("tmux.sock");
        TestEnv {
            root,
            home,
            socket,
            work,
            outside_home: None,
        }
    }

    /// Like [`TestEnv::new`], but the home lives outside `/tmp`, as the default home does
    /// (`~/.local/state/subpane`): a sandbox's private `/tmp` hides a home under `/tmp` anyway,
    /// so what a sandboxed program can reach of the home is only tested with this one.
    pub fn with_home_outside_tmp() -> Self {
        let mut env = Self::new();
        let outside = outside_the_sandbox("sp-it-home-");
        env.home = outside.path().join("home");
        env.outside_home = Some(outside);
        env
    }

    /// `subpane` with this test's home and socket, run in the work directory.
    pub fn cmd(&self) -> Command {
        let mut c = Command::new(BIN);
        c.env("SUBPANE_HOME", &self.home)
            .env("SUBPANE_TMUX_SOCKET", &self.socket)
            .env("NO_COLOR", "1")
            .env_remove("TMUX")
            .env_remove("TMUX_PANE")
            .current_dir(&self.work)
            .stdin(Stdio::null());
        c
    }

    pub fn sp<I, S>(&self, args: I) -> Ran
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.cmd().args(args).output().expect("run subpane").into()
    }

    pub fn run_dir(&self, run: &str) -> PathBuf {
        self.home.join("runs").join(run)
    }

    pub fn attempt_dir(&self, run: &str, n: u32) -> PathBuf {
        self.run_dir(run).join("attempts").join(n.to_string())
    }

    pub fn read_json(&self, path: &Path) -> Value {
        let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("parse {}: {e}", path.display()))
    }

    pub fn result(&self, run: &str) -> Value {
        self.read_json(&self.attempt_dir(run, 1).join("result.json"))
    }

    pub fn worker_pid(&self, run: &str) -> i32 {
        let p = self.attempt_dir(run, 1).join("worker.json");
        wait_until("worker.json with an agent pid", || {
            std::fs::read(&p)
                .ok()
                .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
                .filter(|v| v["agent"]["pid"].is_i64())
        })["worker"]["pid"]
            .as_i64()
            .unwrap() as i32
    }

    pub fn tmux(&self) -> Command {
        let mut c = Command::new("tmux");
        c.arg("-S")
            .arg(&self.socket)
            .env_remove("TMUX")
            .stdin(Stdio::null());
        c
    }

    /// The whole pane of `session` (history included, wrapped lines joined).
    /// The pane's text once it shows `needle` (within [`DEADLINE`]).
    pub fn capture_pane_until(&self, session: &str, needle: &str) -> String {
        let end = Instant::now() + DEADLINE;
        loop {
            let s = self.capture_pane(session);
            if s.contains(needle) {
                return s;
            }
            assert!(
                Instant::now() < end,
                "the pane never showed {needle:?}; it shows:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn capture_pane(&self, session: &str) -> String {
        let out = self
            .tmux()
            .args([
                "capture-pane",
                "-p",
                "-J",
                "-S",
                "-",
                "-t",
                &format!("={session}:"),
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The title of `session`'s pane (what a program set with an OSC sequence).
    pub fn pane_title(&self, session: &str) -> String {
        let out = self
            .tmux()
            .args([
                "display-message",
                "-p",
                "-t",
                &format!("={session}:"),
                "#{pane_title}",
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    pub fn has_session(&self, session: &str) -> bool {
        self.tmux()
            .args(["has-session", "-t", &format!("={session}")])
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    }

    /// Processes that carry an attempt marker from this test (`SUBPANE_ATTEMPT_DIR` under the
    /// temp dir), or a worker started for this test's home.
    pub fn leftovers(&self) -> Vec<i32> {
        let root = self.root.path().as_os_str().as_encoded_bytes().to_vec();
        let home = self.home.as_os_str().as_encoded_bytes().to_vec();
        let marker_of = |dir: &[u8]| [b"SUBPANE_ATTEMPT_DIR=".as_slice(), dir].concat();
        let markers = [marker_of(&root), marker_of(&home)];
        let me = std::process::id() as i32;
        let mut out = Vec::new();
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            if pid == me {
                continue;
            }
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            if stat
                .rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('Z'))
            {
                continue;
            }
            let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let marked = env
                .split(|b| *b == 0)
                .any(|kv| markers.iter().any(|m| kv.starts_with(m)));
            // The tmux server keeps the argv of the client that started it (which names the
            // worker): only our own binary counts as a worker.
            let is_ours =
                std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|e| e == Path::new(BIN));
            let worker = is_ours
                && [&root, &home]
                    .iter()
                    .any(|d| cmdline.windows(d.len()).any(|w| w == d.as_slice()))
                && cmdline.windows(8).any(|w| w == b"__worker");
            if marked || worker {
                out.push(pid);
            }
        }
        out
    }

    /// Asserts that nothing of this test's attempts is alive, waiting up to the deadline for
    /// processes that are already on their way out.
    pub fn assert_no_leftovers(&self) {
        let end = Instant::now() + DEADLINE;
        loop {
            let left = self.leftovers();
            if left.is_empty() {
                return;
            }
            assert!(
                Instant::now() < end,
                "processes outlived their attempts: {left:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn server_alive(&self) -> bool {
        self.tmux()
            .args(["list-sessions"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    }
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        let _ = self
            .tmux()
            .arg("kill-server")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        for _ in 0..3 {
            let left = self.leftovers();
            if left.is_empty() {
                break;
            }
            for pid in left {
                // SAFETY: plain kill(2).
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Waits until `f` returns `Some`, checking every few milliseconds, up to [`DEADLINE`].
pub fn wait_until<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + DEADLINE;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Fails the test unless `tool ARGS…` runs here and exits 0, naming the tool and the Debian
/// package that has it. Tools are found on PATH like everywhere in these tests; a missing one
/// (or a shim with nothing behind it) must fail the test, never skip what it checks.
pub fn require_tool(tool: &str, args: &[&str], package: &str) {
    let why = match Command::new(tool)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .output()
    {
        Ok(o) if o.status.success() => return,
        Ok(o) => format!(
            "`{tool} {}` failed ({}): {}",
            args.join(" "),
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => format!("cannot run `{tool}`: {e}"),
    };
    panic!("this test needs {tool} (Debian package {package}; .ci/run installs it): {why}");
}

/// Validates an envelope against the JSON Schema shipped in `schema/result.v1.json`.
pub fn assert_valid_envelope(v: &Value) {
    let schema_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/result.v1.json");
    let schema: Value = serde_json::from_slice(&std::fs::read(&schema_path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(v)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "envelope does not match the schema:\n{}\n{}",
        errors.join("\n"),
        serde_json::to_string_pretty(v).unwrap()
    );
}

impl TestEnv {
    /// Any program, with this test's home and socket in its environment and `subpane`'s
    /// directory on PATH.
    pub fn cmd_raw(&self, program: &Path) -> Command {
        let mut c = Command::new(program);
        let bin_dir = Path::new(BIN).parent().unwrap().to_path_buf();
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut paths = vec![bin_dir];
        paths.extend(std::env::split_paths(&path));
        c.env("SUBPANE_HOME", &self.home)
            .env("SUBPANE_TMUX_SOCKET", &self.socket)
            .env("PATH", std::env::join_paths(paths).unwrap())
            .env("NO_COLOR", "1")
            .env_remove("TMUX")
            .env_remove("TMUX_PANE")
            .current_dir(&self.work)
            .stdin(Stdio::null());
        c
    }
}

/// Whether `pid` names a live process (a zombie counts as dead).
pub fn pid_alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat.rsplit(')').next().is_some_and(|r| {
            let r = r.trim_start();
            r.starts_with('Z') || r.starts_with('X')
        }),
        Err(_) => false,
    }
}

/// Waits until the file at `path` exists and contains `needle`.
pub fn wait_for_text(path: &Path, needle: &str) {
    wait_until(&format!("{needle:?} in {}", path.display()), || {
        std::fs::read_to_string(path)
            .ok()
            .filter(|s| s.contains(needle))
            .map(|_| ())
    });
}

/// Waits until `pid` is gone (exited and reaped, or a zombie).
pub fn wait_pid_gone(pid: i32) {
    wait_until(&format!("pid {pid} to be gone"), || {
        (!pid_alive(pid)).then_some(())
    });
}

/// The agent's pid from the attempt's `worker.json`, waiting until it is recorded.
pub fn agent_pid(env: &TestEnv, run: &str) -> i32 {
    agent_pid_in(&env.attempt_dir(run, 1))
}

/// A process's state letter from `/proc/PID/stat` (`T`: stopped), if it exists.
pub fn process_state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.chars().next()
}

/// The agent's pid from `worker.json` in the attempt directory `dir` (of any home: a host's
/// too), waiting until it is recorded.
pub fn agent_pid_in(dir: &Path) -> i32 {
    let p = dir.join("worker.json");
    wait_until("worker.json with an agent pid", || {
        std::fs::read(&p)
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .and_then(|v| v["agent"]["pid"].as_i64())
    }) as i32
}

/// Kills (SIGKILL) the program of the driver of detached group `group` (its attempt `n`)
/// and waits for that attempt's envelope: a driver that died, its group left with work.
pub fn kill_driver(env: &TestEnv, group: &str, n: u32) {
    send_signal(agent_pid_in(&env.attempt_dir(group, n)), libc::SIGKILL);
    let end = env.attempt_dir(group, n).join("result.json");
    wait_until("the killed driver's envelope", || {
        end.exists().then_some(())
    });
}

/// `fanout --detach --json` of `lines` (JSON objects) with `args`: the group id.
pub fn detach_tasks(env: &TestEnv, lines: &[Value], args: &[&str]) -> String {
    let text: Vec<String> = lines.iter().map(Value::to_string).collect();
    let file = env.root.path().join("detached-tasks.jsonl");
    std::fs::write(&file, text.join("\n") + "\n").unwrap();
    let mut all = vec!["fanout", "--detach", "--json", file.to_str().unwrap()];
    all.extend_from_slice(args);
    let r = env.sp_within(Duration::from_secs(60), "fanout --detach waited", all);
    assert_eq!(r.code, 0, "{r:?}");
    r.json()["group"].as_str().unwrap().to_owned()
}

/// Sends `sig` to one process.
pub fn send_signal(pid: i32, sig: i32) {
    // SAFETY: plain kill(2) on one pid.
    let rc = unsafe { libc::kill(pid, sig) };
    assert_eq!(
        rc,
        0,
        "kill({pid}, {sig}) failed: {}",
        std::io::Error::last_os_error()
    );
}

impl TestEnv {
    /// Like [`TestEnv::sp`], but a `subpane` that has not exited within `limit` is killed
    /// (SIGKILL) and the test fails with `why_it_may_hang`, instead of hanging the suite.
    pub fn sp_within<I, S>(&self, limit: Duration, why_it_may_hang: &str, args: I) -> Ran
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut c = self.cmd();
        c.args(args);
        ran_within(c, limit, why_it_may_hang)
    }
}

/// Runs `c` with its stdout and stderr piped, as [`wait_child_within`] waits for it.
pub fn ran_within(mut c: std::process::Command, limit: Duration, why_it_may_hang: &str) -> Ran {
    let child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run subpane");
    wait_child_within(child, limit, why_it_may_hang)
}

/// Waits for `child` (with piped stdout/stderr) up to `limit`; kills it and fails the test
/// with `why_it_may_hang` if it is still running then.
/// Every regular file under `dir` with its bytes (no link followed): what a test searches
/// for a value that must be nowhere.
pub fn files_under(dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display()));
    for e in entries {
        let p = e.unwrap().path();
        let meta = std::fs::symlink_metadata(&p).unwrap();
        if meta.is_dir() {
            files_under(&p, out);
        } else if meta.is_file() {
            let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()));
            out.push((p.display().to_string(), bytes));
        }
    }
}

/// Whether `hay` holds `needle` (an empty needle never).
pub fn holds(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

pub fn wait_child_within(
    mut child: std::process::Child,
    limit: Duration,
    why_it_may_hang: &str,
) -> Ran {
    use std::io::Read;
    // Drain the pipes on threads so a chatty child cannot block on a full pipe.
    let mut out = child.stdout.take().expect("piped stdout");
    let mut err = child.stderr.take().expect("piped stderr");
    let t_out = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out.read_to_end(&mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        s
    });
    let end = Instant::now() + limit;
    let status = loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            break st;
        }
        if Instant::now() >= end {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "subpane (pid {}) did not exit within {limit:?}: {why_it_may_hang}",
                child.id()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Ran {
        code: status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&t_out.join().unwrap()).into_owned(),
        stderr: String::from_utf8_lossy(&t_err.join().unwrap()).into_owned(),
    }
}

/// Starts `waits_for_flag.sh FLAG CODE` detached as run `id` and waits until the program
/// runs; returns the flag path.
pub fn start_waiting(env: &TestEnv, id: &str, code: i32) -> PathBuf {
    let flag = env.root.path().join(format!("flag-{id}"));
    let r: Ran = env
        .cmd()
        .args(["run", "--detach", "--run-id", id, "--"])
        .arg(fixture("waits_for_flag.sh"))
        .arg(&flag)
        .arg(code.to_string())
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, 0, "{r:?}");
    // Started for real: the program has printed its first line.
    let out = env.attempt_dir(id, 1).join("stdout.log");
    wait_until("the program's first line", || {
        std::fs::read_to_string(&out)
            .ok()
            .filter(|s| s.contains("waiting for"))
    });
    flag
}

/// `s` as one word of a shell line, quoted.
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// A path quoted for a POSIX shell.
pub fn q(p: &Path) -> String {
    shell_quote(&p.display().to_string())
}

pub fn touch(p: &Path) {
    std::fs::write(p, "").unwrap();
}

/// A new directory that a sandboxed program can see but must not write: outside `/tmp` (which
/// the sandbox makes private) and outside the checkout (which may itself sit under `/tmp`).
/// Removed on drop.
pub fn outside_the_sandbox(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in("/var/tmp")
        .expect("these tests need a writable /var/tmp (a directory outside /tmp)")
}

/// Waits up to `limit` for `child` to exit; kills it (SIGKILL) if it has not. Whether it
/// exited by itself.
pub fn wait_child_within_or_kill(child: &mut std::process::Child, limit: Duration) -> bool {
    let end = Instant::now() + limit;
    loop {
        if child.try_wait().expect("try_wait").is_some() {
            return true;
        }
        if Instant::now() >= end {
            let _ = child.kill();
            let _ = child.wait();
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
