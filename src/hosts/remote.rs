//! Runs on a host: reserved here, started, supervised and recorded there by the host's own
//! subpane, watched from here over the host's control connection.
//!
//! ```text
//!  run --host H ─► runs/ID/host.json here (mkdir: the id is new here) ─► ssh H BIN __run-request
//!                     │  stdin: {"version", "request"} (env values never on a command line)
//!                     ├─ the host plans and starts it detached (its cwd, sandbox, worktree)
//!                     │    ─► the `run --detach --json` answer
//!                     └─ refused / unreachable ─► runs/ID removed here: nothing half-made
//!  status|wait ─► ssh H BIN status|wait ID --json ─► envelope? ─► from_remote (schema, id)
//!                     ─► + host {name, kind: ssh} ─► runs/ID/attempts/N/result.json here
//!  logs|cancel|attach|retry ─► ssh [-t] H BIN VERB ID … (the host's answer, as it is)
//! ```
//!
//! The host owns the attempt: a dropped connection stops only the watcher (`wait`
//! reconnects), never the run. Durations and outcomes come from the host's records alone, so
//! the clocks of the two machines never meet.
//!
//! Common pitfalls:
//! * ssh exits 255 for its own failures: any other code is the remote subpane's.
//! * The remote envelope is data from another machine: it is trusted only when it validates
//!   ([`crate::envelope::from_remote`]); otherwise the local record says it was not, and
//!   keeps the bytes beside it.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::ssh::{self, CONNECT_TIMEOUT};
use super::{Host, HostsError};
use crate::app::RunRequest;
use crate::envelope::{self, Envelope, FailureKind, HostRef, Status};
use crate::spec::RunId;
use crate::store::{self, Home, StoreError};

/// The schema tag of `runs/ID/host.json`.
pub const REMOTE_SCHEMA: &str = "subpane.remote-run/v1";

/// The file that makes a run directory here a run on a host.
pub const MARKER: &str = store::REMOTE_MARKER;

/// `runs/ID/host.json`: where a run lives, as it was when it started (a host removed or
/// changed later does not lose its runs).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct RemoteRun {
    pub schema: String,
    pub run_id: String,
    pub host: Host,
    /// The remote subpane that started it, and answers for it.
    pub bin: String,
    pub created_at: String,
    /// What was asked for: the agent (`command` for a program) and the program's argv (the
    /// agent's own is made there), for what is shown while the host cannot be asked.
    pub agent: crate::spec::AgentKind,
    pub argv: Vec<String>,
}

/// What the remote `__run-request` reads on its stdin.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteRequest {
    /// The caller's subpane version: the host refuses a request from another version.
    pub version: String,
    pub request: RunRequest,
    /// Wait for the run's end and answer with its envelope too (after the start's line).
    #[serde(default)]
    pub wait: bool,
}

/// The run `id` here is on a host: its record, or `None` for a run of this machine.
pub fn find(home: &Home, id: &RunId) -> Result<Option<RemoteRun>, HostsError> {
    let path = home.run_dir(id).join(MARKER);
    let Some(run) = store::read_json::<RemoteRun>(&path)? else {
        return Ok(None);
    };
    if run.schema != REMOTE_SCHEMA {
        return Err(HostsError::Schema {
            path,
            found: run.schema,
        });
    }
    Ok(Some(run))
}

/// The run a person or a model named (an id, a unique start of one, `@`), when it lives on
/// a host; `None` for a run of this machine, and for a name that fits no run or several (the
/// verb's own lookup says so in its words).
pub fn find_named(home: &Home, name: &str) -> Result<Option<RemoteRun>, HostsError> {
    let Some(id) = crate::app::names::resolve_run(home, name)
        .ok()
        .and_then(|id| RunId::parse(&id).ok())
    else {
        return Ok(None);
    };
    find(home, &id)
}

/// Every run here that lives on a host (unreadable markers are skipped).
pub fn list(home: &Home) -> Vec<RemoteRun> {
    let Ok(rd) = std::fs::read_dir(home.runs_dir()) else {
        return Vec::new();
    };
    let mut runs: Vec<RemoteRun> = rd
        .filter_map(Result::ok)
        .filter_map(|e| RunId::parse(e.file_name().to_str()?).ok())
        .filter_map(|id| find(home, &id).ok().flatten())
        .collect();
    runs.sort_by(|a, b| b.created_at.cmp(&a.created_at));
    runs
}

/// Whether `dir` (a run directory here) is a run on a host.
pub fn is_remote_dir(dir: &std::path::Path) -> bool {
    dir.join(MARKER).exists()
}

/// The ssh command that runs `words` (the remote subpane's arguments after its home) for
/// `run`; `tty`: with `-t`, for a terminal (`attach`).
pub fn command(home: &Home, run: &RemoteRun, words: &[&str], tty: bool) -> Command {
    command_on(home, &run.host, &run.bin, words, tty)
}

fn command_on(home: &Home, host: &Host, bin: &str, words: &[&str], tty: bool) -> Command {
    // Where the control socket goes; if it cannot be made, ssh says so.
    let _ = ssh::make_private_dir(&ssh::control_dir(home));
    // A terminal's locale goes with it (sshd passes LANG only where it is configured to), so
    // the host's tmux draws the pane's header and borders as this terminal can show them.
    let locale = tty
        .then(|| {
            ["LC_ALL", "LC_CTYPE", "LANG"].iter().find_map(|k| {
                let v = std::env::var(k).ok().filter(|v| !v.is_empty())?;
                Some(format!("{k}={v}"))
            })
        })
        .flatten();
    let mut all = match &locale {
        Some(l) => vec!["env", l.as_str()],
        None => Vec::new(),
    };
    all.extend(ssh::remote_subpane(host, bin));
    all.extend_from_slice(words);
    let mut cmd = Command::new("ssh");
    // SAFETY: the hook makes only async-signal-safe calls.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, crate::procs::reset_signals_in_child)
    };
    if tty {
        cmd.arg("-t");
    }
    cmd.args(ssh::ssh_args(home, host, CONNECT_TIMEOUT))
        .arg("--")
        .arg(ssh::remote_command(&all));
    cmd
}

/// How a start on a host went.
#[derive(Debug)]
pub enum StartAnswer {
    /// It runs there (detached): the host's `run --detach --json` answer.
    Started(envelope::Started),
    /// It ended (its pane could not start there, or, waited for, it finished): the
    /// envelope, recorded here.
    Finished(Box<Envelope>),
    /// It started, and then the connection was lost before its answer came (what ssh said):
    /// it goes on there, and [`wait`] finds its end.
    Dropped(envelope::Started, String),
}

/// A run directory reserved here for a run about to start on a host: removed on drop
/// unless kept.
struct Reservation {
    dir: std::path::PathBuf,
    keep: bool,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn reserve(home: &Home, id: &RunId) -> Result<Reservation, HostsError> {
    let runs = home.runs_dir();
    std::fs::create_dir_all(&runs).map_err(|source| StoreError::Write {
        path: runs.clone(),
        source,
    })?;
    let dir = home.run_dir(id);
    match std::fs::create_dir(&dir) {
        Ok(()) => Ok(Reservation { dir, keep: false }),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            Err(HostsError::RunIdInUse(id.to_string()))
        }
        Err(source) => Err(StoreError::Write { path: dir, source }.into()),
    }
}

/// What a start that waits tells its caller once the run runs there.
pub type OnStarted<'a> = &'a mut dyn FnMut(&RemoteRun, &envelope::Started);

/// Starts `req` on the host named `req.host`: reserves its id here, records where it runs,
/// and sends the request. Nothing is left here (or, as far as the host said, there) when it
/// is refused or the host cannot be reached. With `on_started`, the same call waits for the
/// run's end there (one round trip in all), telling `on_started` once it runs; ssh then has
/// a process group of its own, so a Ctrl-C at the terminal is the caller's to handle.
pub fn start(
    home: &Home,
    mut req: RunRequest,
    on_started: Option<OnStarted<'_>>,
) -> Result<(RemoteRun, StartAnswer), HostsError> {
    let name = req.host.take().unwrap_or_default();
    let host = super::get(home, &name)?;
    host.require_ssh("a run")?;
    // The caller's files are read here: the host has its own file system.
    for (text, file, flag) in [
        (&mut req.task, &mut req.task_file, "--task"),
        (
            &mut req.system_prompt,
            &mut req.system_prompt_file,
            "--system-prompt",
        ),
    ] {
        if let Some(path) = file.take() {
            let body = std::fs::read_to_string(&path).map_err(|e| {
                HostsError::Input(format!(
                    "{flag} @{}: cannot read it here to send it to host `{name}`: {e}",
                    path.display()
                ))
            })?;
            *text = Some(body);
        }
    }
    let id = match &req.run_id {
        Some(r) => RunId::parse(r).map_err(|e| HostsError::Input(e.to_string()))?,
        None => crate::fresh::run_id(),
    };
    req.run_id = Some(id.to_string());
    let agent = req.agent.unwrap_or(crate::spec::AgentKind::Command);
    let argv = match agent {
        crate::spec::AgentKind::Command => req.argv.clone(),
        a => vec![a.as_str().to_owned()],
    };
    let mut reservation = reserve(home, &id)?;
    let wait = on_started.is_some();
    let body = serde_json::to_vec(&RemoteRequest {
        version: env!("CARGO_PKG_VERSION").to_owned(),
        request: req,
        wait,
    })
    .expect("a request serializes");
    let mut run = RemoteRun {
        schema: REMOTE_SCHEMA.to_owned(),
        run_id: id.to_string(),
        host: host.clone(),
        bin: remembered_bin(&host),
        created_at: crate::fresh::now_rfc3339(),
        agent,
        argv,
    };
    // Recorded before the request leaves: a caller killed meanwhile leaves a run that asks
    // its host, not a directory nothing knows.
    store::write_json_atomic(&reservation.dir.join(MARKER), &run)?;
    let mut sent = Sent::spawn(home, &run, &body, wait)?;
    let mut first = sent.first(wait);
    if first.is_none() && sent.finish().0 == Some(127) && host.bin.is_none() {
        run.bin = ssh::ensure_copied(home, &host, CONNECT_TIMEOUT)?.path;
        store::write_json_atomic(&reservation.dir.join(MARKER), &run)?;
        sent = Sent::spawn(home, &run, &body, wait)?;
        first = sent.first(wait);
    }
    let fail = |why: String| HostsError::Check {
        name: name.clone(),
        why,
    };
    let Some(first) = first else {
        let (code, said) = sent.finish();
        // A connection lost after the request went out may have started the run there:
        // asked once, a run the host knows is kept (and waited for), never forgotten here.
        if code == Some(255)
            && !never_connected(&said)
            && let Ok(answer) = ask(
                home,
                &run,
                &["status", run.run_id.as_str(), "--json"],
                false,
            )
        {
            reservation.keep = true;
            let answer = lost_after_start(home, &run, answer, &said)?;
            return Ok((run, answer));
        }
        return Err(match code {
            Some(255) => fail(format!("cannot reach {}: {said}", host.url)),
            Some(127) => fail(format!(
                "`{}` cannot be run there: {said}; `subpane hosts check {name}` says more",
                run.bin
            )),
            Some(code) => refused(&name, code, &said),
            None => fail(format!("ssh was killed before the host answered: {said}")),
        });
    };
    reservation.keep = true;
    if is_envelope(&first) {
        let env = record(home, &run, &first)?;
        sent.finish();
        return Ok((run, StartAnswer::Finished(Box::new(env))));
    }
    let started = serde_json::from_slice::<envelope::Started>(&first).map_err(|e| {
        fail(format!(
            "its answer to the start cannot be read ({e}): {}",
            crate::term::sanitize(&first, 200)
        ))
    })?;
    let Some(on_started) = on_started else {
        sent.finish();
        return Ok((run, StartAnswer::Started(started)));
    };
    on_started(&run, &started);
    let rest = sent.rest();
    let (code, said) = sent.finish();
    if code == Some(255) || code.is_none() || !is_envelope(&rest) {
        return Ok((run, StartAnswer::Dropped(started, said)));
    }
    let env = record(home, &run, &rest)?;
    Ok((run, StartAnswer::Finished(Box::new(env))))
}

/// Whether ssh's words say it never reached the host (so nothing was sent there).
fn never_connected(said: &str) -> bool {
    [
        "ssh: connect to host",
        "Could not resolve hostname",
        "Connection refused",
        "Connection timed out",
        "No route to host",
        "Permission denied",
        "Host key verification failed",
    ]
    .iter()
    .any(|w| said.contains(w))
}

/// What a start whose connection was lost answers once the host says it has the run: it
/// started (and may have ended since: [`wait`] answers that).
fn lost_after_start(
    home: &Home,
    run: &RemoteRun,
    answer: Answer,
    said: &str,
) -> Result<StartAnswer, HostsError> {
    let started = match answer {
        Answer::Finished(env) => envelope::Started {
            run_id: env.run_id.clone(),
            attempt: env.attempt,
            status: envelope::LiveStatus::Starting,
            attempt_dir: RunId::parse(&run.run_id)
                .map(|id| home.attempt(&id, env.attempt).dir().to_path_buf())
                .unwrap_or_default(),
            tmux: crate::spec::TmuxTarget {
                socket: env.tmux.socket.clone().unwrap_or_default().into(),
                session: env.tmux.session.clone().unwrap_or_default(),
            },
        },
        Answer::Live(v, _) => {
            let doc: crate::envelope::StatusDoc =
                serde_json::from_value(v).map_err(|e| HostsError::Input(e.to_string()))?;
            envelope::Started {
                run_id: doc.run_id,
                attempt: doc.attempt,
                status: doc.status,
                attempt_dir: doc.attempt_dir,
                tmux: crate::spec::TmuxTarget {
                    socket: doc.tmux.socket.unwrap_or_default().into(),
                    session: doc.tmux.session.unwrap_or_default(),
                },
            }
        }
    };
    Ok(StartAnswer::Dropped(started, said.to_owned()))
}

/// The remote subpane to run: `--bin`, else `subpane` on the remote PATH.
fn remembered_bin(host: &Host) -> String {
    host.bin.clone().unwrap_or_else(|| "subpane".into())
}

/// `BIN __run-request` on the host, its request on stdin, its answers read line by line.
struct Sent {
    child: std::process::Child,
    out: std::io::BufReader<std::process::ChildStdout>,
    feeder: Option<std::thread::JoinHandle<()>>,
    err: Option<std::thread::JoinHandle<Vec<u8>>>,
    finished: Option<(Option<i32>, String)>,
}

impl Sent {
    fn spawn(
        home: &Home,
        run: &RemoteRun,
        body: &[u8],
        own_group: bool,
    ) -> Result<Sent, HostsError> {
        let mut cmd = command(home, run, &["__run-request"], false);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if own_group {
            std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| ssh::run_error(&run.host, crate::command::Error::Io(e)))?;
        // The request may outgrow a pipe's buffer: written beside the reading.
        let mut stdin = child.stdin.take().expect("piped");
        let body = body.to_vec();
        let feeder = std::thread::spawn(move || {
            let _ = stdin.write_all(&body);
        });
        let mut stderr = child.stderr.take().expect("piped");
        let err = std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = (&mut stderr).take(64 * 1024).read_to_end(&mut v);
            v
        });
        let out = std::io::BufReader::new(child.stdout.take().expect("piped"));
        Ok(Sent {
            child,
            out,
            feeder: Some(feeder),
            err: Some(err),
            finished: None,
        })
    }

    /// The host's first answer: a line when more is to come (`wait`), else all it wrote;
    /// `None` when it wrote nothing.
    fn first(&mut self, wait: bool) -> Option<Vec<u8>> {
        if wait {
            return self.line();
        }
        Some(self.rest()).filter(|v| !v.is_empty())
    }

    /// The next line the host wrote, or `None` at the end.
    fn line(&mut self) -> Option<Vec<u8>> {
        use std::io::BufRead;
        let mut line = Vec::new();
        match (&mut self.out)
            .take(store::RECORD_LIMIT)
            .read_until(b'\n', &mut line)
        {
            Ok(n) if n > 0 => Some(line),
            _ => None,
        }
    }

    /// Everything else the host wrote.
    fn rest(&mut self) -> Vec<u8> {
        let mut v = Vec::new();
        let _ = (&mut self.out)
            .take(store::RECORD_LIMIT)
            .read_to_end(&mut v);
        v
    }

    /// Waits for ssh: its exit code and what it (or the host) said on stderr.
    fn finish(&mut self) -> (Option<i32>, String) {
        if let Some(f) = &self.finished {
            return f.clone();
        }
        let status = self.child.wait().ok().and_then(|s| s.code());
        if let Some(f) = self.feeder.take() {
            let _ = f.join();
        }
        let err = self
            .err
            .take()
            .and_then(|e| e.join().ok())
            .unwrap_or_default();
        let said = crate::term::sanitize(String::from_utf8_lossy(&err).trim().as_bytes(), 600);
        self.finished = Some((status, said.clone()));
        (status, said)
    }
}

fn is_envelope(bytes: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(bytes)
        .is_ok_and(|v| v["schema"] == envelope::RESULT_SCHEMA)
}

/// Records an envelope the host gave for `run` (its bytes as they came): checked
/// ([`envelope::from_remote`]), marked with the host, and written atomically to the attempt
/// directory here. One that is not trusted is kept as `result.untrusted.json` beside a
/// local envelope that says so (`failed`, `lost`: the true outcome is not known here).
pub fn record(home: &Home, run: &RemoteRun, bytes: &[u8]) -> Result<Envelope, HostsError> {
    let id = RunId::parse(&run.run_id).map_err(|e| HostsError::Input(e.to_string()))?;
    let attempt = serde_json::from_slice::<serde_json::Value>(bytes)
        .ok()
        .and_then(|v| v["attempt"].as_u64())
        .and_then(|n| u32::try_from(n).ok())
        .filter(|n| (1..=10_000).contains(n))
        .unwrap_or(1);
    let paths = home.attempt(&id, attempt);
    std::fs::create_dir_all(paths.dir()).map_err(|source| StoreError::Write {
        path: paths.dir().to_path_buf(),
        source,
    })?;
    let host = HostRef {
        name: run.host.name.clone(),
        kind: "ssh".into(),
        job_id: None,
    };
    let env = match envelope::from_remote(bytes, &run.run_id, attempt) {
        Ok(mut env) => {
            env.host = Some(host);
            env
        }
        Err(why) => {
            let kept = paths.dir().join("result.untrusted.json");
            store::write_atomic(&kept, bytes)?;
            untrusted(
                run,
                attempt,
                host,
                &format!(
                    "the envelope host `{}` sent is not trusted: {why}; its bytes are in {}",
                    run.host.name,
                    kept.display()
                ),
            )
        }
    };
    store::write_json_atomic(&paths.result(), &env)?;
    Ok(env)
}

/// The local envelope of an attempt whose remote envelope was not trusted.
fn untrusted(run: &RemoteRun, attempt: u32, host: HostRef, why: &str) -> Envelope {
    let mut output = envelope::Output::default();
    output.push_error(why);
    Envelope {
        schema: envelope::RESULT_SCHEMA.to_owned(),
        run_id: run.run_id.clone(),
        attempt,
        agent: run.agent,
        argv: if run.argv.is_empty() {
            vec![run.agent.as_str().to_owned()]
        } else {
            run.argv.clone()
        },
        cwd: String::new(),
        labels: Default::default(),
        correlation_id: None,
        status: Status::Failed,
        failure_kind: Some(FailureKind::Lost),
        exit_code: None,
        signal: None,
        signals_sent: Vec::new(),
        started_at: None,
        finished_at: None,
        duration_ms: None,
        terminal_event: None,
        lingered: false,
        output,
        filter: Default::default(),
        cleanup: Default::default(),
        tmux: Default::default(),
        sandbox: Default::default(),
        artifacts: Vec::new(),
        group: None,
        host: Some(host),
        parent_run: None,
        depth: None,
        resumed_from: None,
        cancelled_by: None,
        worktree: None,
        git: None,
        budget: None,
    }
}

/// What a remote `status` or `wait` answered.
#[derive(Debug)]
pub enum Answer {
    /// The run ended: its envelope, recorded here.
    Finished(Box<Envelope>),
    /// Not ended (a status document, or wait's `--timeout`): the host's JSON as it is.
    Live(serde_json::Value, i32),
}

/// Why [`ask`] has no answer.
#[derive(Debug)]
pub enum AskError {
    /// ssh could not reach the host, or lost it (exit 255): worth asking again. What ssh said.
    Unreachable(String),
    /// The host answered with a refusal or a failure.
    Failed(HostsError),
}

/// Runs `words` (a `status`, `wait` or `cancel` of `run`, with `--json`) on the host and
/// reads its answer; an envelope is recorded here ([`record`]). `own_group`: ssh gets a process
/// group of its own, so a Ctrl-C at the terminal is this process's alone to handle.
pub fn ask(
    home: &Home,
    run: &RemoteRun,
    words: &[&str],
    own_group: bool,
) -> Result<Answer, AskError> {
    let mut cmd = command(home, run, words, false);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if own_group {
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    }
    let out = cmd
        .output()
        .map_err(|e| AskError::Failed(ssh::run_error(&run.host, crate::command::Error::Io(e))))?;
    let code = out.status.code();
    if code == Some(255) || code.is_none() {
        return Err(AskError::Unreachable(ssh::said(&out)));
    }
    if is_envelope(&out.stdout) {
        return record(home, run, &out.stdout)
            .map(|e| Answer::Finished(Box::new(e)))
            .map_err(AskError::Failed);
    }
    match serde_json::from_slice::<serde_json::Value>(&out.stdout) {
        Ok(v) if code != Some(2) => Ok(Answer::Live(v, code.unwrap_or(1))),
        _ => Err(AskError::Failed(refusal(
            &run.host.name,
            code.unwrap_or(1),
            &out,
        ))),
    }
}

/// The remote subpane's refusal (exit `code`), in its own words.
fn refusal(name: &str, code: i32, out: &std::process::Output) -> HostsError {
    refused(name, code, &ssh::said(out))
}

/// [`refusal`] of what was said on stderr.
fn refused(name: &str, code: i32, said: &str) -> HostsError {
    HostsError::Refused {
        name: name.to_owned(),
        code,
        why: said
            .strip_prefix("subpane: error: ")
            .unwrap_or(said)
            .to_owned(),
    }
}

/// The rows of `subpane ls` for the runs here that live on hosts: one `ls --json` per host
/// (the hosts asked at once), each row marked with its host. A host that cannot be asked
/// gives rows from what is recorded here: the envelope if the run's end was copied back,
/// else `damaged` with why.
pub fn rows(home: &Home) -> Vec<envelope::RunRow> {
    let runs = list(home);
    let mut by_host: std::collections::BTreeMap<String, Vec<&RemoteRun>> = Default::default();
    for r in &runs {
        by_host.entry(r.host.name.clone()).or_default().push(r);
    }
    /// A host's runs here, and its `ls` (or why it could not be asked).
    type Asked<'a> = (Vec<&'a RemoteRun>, Result<Vec<envelope::RunRow>, String>);
    let answers: Vec<Asked> = std::thread::scope(|s| {
        let asks: Vec<_> = by_host
            .into_values()
            .map(|runs| {
                let first = runs[0];
                (runs, s.spawn(move || host_rows(home, first)))
            })
            .collect();
        asks.into_iter()
            .map(|(runs, h)| {
                let got = h.join().unwrap_or_else(|_| Err("the ask failed".into()));
                (runs, got)
            })
            .collect()
    });
    let mut out = Vec::new();
    for (runs, got) in answers {
        for run in runs {
            let row = match &got {
                Ok(rows) => rows
                    .iter()
                    .find(|r| r.run_id == run.run_id)
                    .cloned()
                    .map_or_else(
                        || unknown_row(home, run, "the host has no record of it".into()),
                        |mut r| {
                            r.host = Some(run.host.name.clone());
                            // Ordered among the runs here by when it was started from here: the
                            // host's clock is never compared with this one.
                            r.created_at = run.created_at.clone();
                            r
                        },
                    ),
                Err(why) => unknown_row(home, run, why.clone()),
            };
            out.push(row);
        }
    }
    out
}

/// `ls --json` on the host of `run`.
fn host_rows(home: &Home, run: &RemoteRun) -> Result<Vec<envelope::RunRow>, String> {
    let mut cmd = command(home, run, &["ls", "--json"], false);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = crate::command::output(&mut cmd, "ssh", CONNECT_TIMEOUT + Duration::from_secs(20))
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "host `{}` cannot be asked: {}",
            run.host.name,
            ssh::said(&out)
        ));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| {
        format!(
            "host `{}` answered `ls` with what cannot be read ({e})",
            run.host.name
        )
    })
}

/// The row of a run whose host did not say: its recorded envelope, else `damaged`.
fn unknown_row(home: &Home, run: &RemoteRun, why: String) -> envelope::RunRow {
    let what = crate::term::sanitize(run.argv.join(" ").as_bytes(), 200);
    let recorded = recorded(home, run, None);
    let mut row = envelope::RunRow {
        run_id: run.run_id.clone(),
        attempt: 1,
        agent: run.agent,
        status: envelope::RunState::Damaged,
        failure_kind: None,
        exit_code: None,
        created_at: run.created_at.clone(),
        started_at: None,
        finished_at: None,
        duration_ms: None,
        labels: Default::default(),
        correlation_id: None,
        group: None,
        parent_run: None,
        depth: 0,
        what,
        problem: Some(why),
        host: Some(run.host.name.clone()),
    };
    if let Some(env) = recorded {
        row.attempt = env.attempt;
        row.status = env.status.into();
        row.failure_kind = env.failure_kind;
        row.exit_code = env.exit_code;
        row.started_at = env.started_at;
        row.finished_at = env.finished_at;
        row.duration_ms = env.duration_ms;
        row.labels = env.labels;
        row.correlation_id = env.correlation_id;
        row.problem = None;
    }
    row
}

/// Asks ([`ask`]) until the host answers: a lost connection is made again, with a pause
/// growing to 5 s; `on_lost` is told the first time. `deadline`: the wait's own limit (its
/// `--timeout`), passed on as what is left of it, and answered as still running (exit 3)
/// when it passes before the host can be reached.
pub fn watch(
    home: &Home,
    run: &RemoteRun,
    words: &[&str],
    deadline: Option<Instant>,
    own_group: bool,
    on_lost: &mut dyn FnMut(&RemoteRun, &str),
) -> Result<Answer, HostsError> {
    let mut pause = Duration::from_millis(200);
    let mut said = false;
    loop {
        let mut words: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        if let Some(d) = deadline {
            let left = d
                .saturating_duration_since(Instant::now())
                .as_millis()
                .max(1);
            words.extend(["--timeout".into(), format!("{left}ms")]);
        }
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        match ask(home, run, &words, own_group) {
            Ok(a) => return Ok(a),
            Err(AskError::Failed(e)) => return Err(e),
            Err(AskError::Unreachable(why)) => {
                if !said {
                    on_lost(run, &why);
                    said = true;
                }
                if deadline.is_some_and(|d| Instant::now() + pause >= d) {
                    return Ok(Answer::Live(
                        serde_json::json!({"run_id": run.run_id, "status": "unknown",
                                           "host": run.host.name, "unreachable": why}),
                        crate::exit_code::STILL_RUNNING,
                    ));
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_secs(5));
            }
        }
    }
}

/// `words` with `--attempt N` when one is given.
fn with_attempt<'a>(mut words: Vec<&'a str>, n: &'a Option<String>) -> Vec<&'a str> {
    if let Some(n) = n {
        words.extend(["--attempt", n.as_str()]);
    }
    words
}

/// A remote run's state, and whether it came from the record here instead.
pub struct StatusAnswer {
    pub answer: Answer,
    /// The host could not be reached (why): the answer is the envelope recorded here.
    pub stale: Option<String>,
}

/// `status` of a run on a host: asked there; when the host cannot be reached, the envelope
/// recorded here if that attempt's end was copied back, else the error.
pub fn status(
    home: &Home,
    run: &RemoteRun,
    attempt: Option<u32>,
) -> Result<StatusAnswer, HostsError> {
    let n = attempt.map(|n| n.to_string());
    let words = with_attempt(vec!["status", run.run_id.as_str(), "--json"], &n);
    match ask(home, run, &words, false) {
        Ok(answer) => Ok(StatusAnswer {
            answer,
            stale: None,
        }),
        Err(AskError::Failed(e)) => Err(e),
        Err(AskError::Unreachable(why)) => match recorded(home, run, attempt) {
            Some(env) => Ok(StatusAnswer {
                answer: Answer::Finished(Box::new(env)),
                stale: Some(why),
            }),
            None => Err(HostsError::Check {
                name: run.host.name.clone(),
                why: format!("cannot reach {}: {why}", run.host.url),
            }),
        },
    }
}

/// `wait` for attempt `attempt` (else the latest) of a run on a host, through lost
/// connections ([`watch`]).
pub fn wait(
    home: &Home,
    run: &RemoteRun,
    attempt: Option<u32>,
    deadline: Option<Instant>,
    own_group: bool,
    on_lost: &mut dyn FnMut(&RemoteRun, &str),
) -> Result<Answer, HostsError> {
    let n = attempt.map(|n| n.to_string());
    let words = with_attempt(vec!["wait", run.run_id.as_str(), "--json"], &n);
    watch(home, run, &words, deadline, own_group, on_lost)
}

/// `cancel` of a run on a host (`grace` as its flag takes it): the envelope once it ended,
/// or (`no_wait`) the host's `cancel_requested` answer.
pub fn cancel(
    home: &Home,
    run: &RemoteRun,
    grace: Option<&str>,
    no_wait: bool,
) -> Result<Answer, HostsError> {
    let mut words = vec!["cancel", run.run_id.as_str(), "--json"];
    if let Some(g) = grace {
        words.extend(["--grace", g]);
    }
    if no_wait {
        words.push("--no-wait");
    }
    ask(home, run, &words, false).map_err(|e| match e {
        AskError::Failed(e) => e,
        AskError::Unreachable(why) => HostsError::Check {
            name: run.host.name.clone(),
            why: format!("cannot reach {} to cancel: {why}", run.host.url),
        },
    })
}

/// The stdout of `words` run there (a `logs`), or why not.
pub fn read_out(home: &Home, run: &RemoteRun, words: &[&str]) -> Result<Vec<u8>, HostsError> {
    let mut cmd = command(home, run, words, false);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = crate::command::output(&mut cmd, "ssh", CONNECT_TIMEOUT + Duration::from_secs(60))
        .map_err(|e| ssh::run_error(&run.host, e))?;
    match out.status.code() {
        Some(0) => Ok(out.stdout),
        Some(255) => Err(HostsError::Check {
            name: run.host.name.clone(),
            why: format!("cannot reach {}: {}", run.host.url, ssh::said(&out)),
        }),
        code => Err(refusal(&run.host.name, code.unwrap_or(1), &out)),
    }
}

/// The envelope recorded here for `attempt` (else the latest recorded) of `run`.
pub fn recorded(home: &Home, run: &RemoteRun, attempt: Option<u32>) -> Option<Envelope> {
    let id = RunId::parse(&run.run_id).ok()?;
    let n = match attempt {
        Some(n) => n,
        None => std::fs::read_dir(home.run_dir(&id).join("attempts"))
            .ok()?
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .max()?,
    };
    store::read_json(&home.attempt(&id, n).result())
        .ok()
        .flatten()
}
