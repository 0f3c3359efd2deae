//! The worker's life: set up, spawn, the poll loop, and the end.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};

use super::lines::{LineSplitter, MAX_LINE, Piece};
use super::pane::{Pane, Style};
use crate::adapter::{LineAction, StreamParser, adapter_for};
use crate::envelope::{
    self, CancelRequest, Facts, KillReason, TmuxInfo, WORKER_SCHEMA, WorkerFacts, WorkerState,
};
use crate::procs;
use crate::spec::{AttemptSpec, now_rfc3339};
use crate::store::{self, AttemptPaths};
use crate::term::sanitize;

/// After the agent exits, how long descendants may keep its output open before they are
/// killed.
const LEAK_WAIT: Duration = Duration::from_millis(100);
/// After that kill, how long to wait for the pipes to close before giving up on them.
const DRAIN_WAIT: Duration = Duration::from_secs(2);
/// The stderr tail the adapter sees at the end.
const STDERR_TAIL: usize = 64 * 1024;

/// Entry point of `subpane __worker DIR`. Returns the process exit code.
pub fn main(dir: &Path) -> i32 {
    // Block first: a cancel that arrives early must queue, not kill us.
    let mut mask = SigSet::empty();
    for s in [
        Signal::SIGCHLD,
        Signal::SIGTERM,
        Signal::SIGINT,
        Signal::SIGHUP,
        Signal::SIGUSR1,
        Signal::SIGQUIT,
    ] {
        mask.add(s);
    }
    if mask.thread_block().is_err() {
        eprintln!("subpane worker: cannot block signals");
        return 1;
    }
    let sfd = match SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("subpane worker: cannot create a signalfd: {e}");
            return 1;
        }
    };
    let paths = AttemptPaths::new(dir.to_path_buf());
    let spec: AttemptSpec = match store::read_json(&paths.spec()) {
        Ok(Some(s)) => s,
        Ok(None) => {
            eprintln!("subpane worker: {} is missing", paths.spec().display());
            return 1;
        }
        Err(e) => {
            eprintln!("subpane worker: {e}");
            return 1;
        }
    };
    let mut w = Worker::new(spec, paths, sfd);
    w.run();
    0
}

/// What a deadline is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Due {
    Timeout,
    Idle,
    Linger,
    /// The grace after SIGTERM is over.
    Kill,
    /// The agent exited; its output should have closed by now.
    Leak,
    /// Leftovers were killed; stop waiting for the pipes.
    Drain,
}

/// A stop in progress: SIGTERM was sent, SIGKILL follows at `kill_at`.
struct Stop {
    kill_at: Instant,
    killed: bool,
}

struct Worker {
    spec: AttemptSpec,
    paths: AttemptPaths,
    sfd: SignalFd,
    facts: WorkerFacts,
    pane: Pane,
    parser: Box<dyn StreamParser>,
    splitter: LineSplitter,
    stderr_splitter: LineSplitter,
    events: Option<BufWriter<File>>,
    stdout_log: Option<BufWriter<File>>,
    stderr_log: Option<File>,
    stderr_tail: Vec<u8>,
    agent_pid: Option<i32>,
    agent_status: Option<WaitStatus>,
    started: Instant,
    last_output: Instant,
    /// The adapter saw the agent's terminal event (the linger clock started once).
    terminal_seen: bool,
    linger_at: Option<Instant>,
    stop: Option<Stop>,
    leak_at: Option<Instant>,
    drain_until: Option<Instant>,
}

fn tmux_info(spec: &AttemptSpec) -> TmuxInfo {
    let socket = std::env::var("TMUX")
        .ok()
        .and_then(|t| t.split(',').next().map(str::to_owned))
        .filter(|s| !s.is_empty())
        .or_else(|| Some(spec.tmux.socket.display().to_string()));
    TmuxInfo {
        socket,
        session: Some(spec.tmux.session.clone()),
        pane_id: std::env::var("TMUX_PANE").ok(),
    }
}

impl Worker {
    fn new(spec: AttemptSpec, paths: AttemptPaths, sfd: SignalFd) -> Self {
        let adapter = adapter_for(spec.agent);
        let me = procs::proc_ref(std::process::id() as i32);
        let facts = WorkerFacts {
            schema: WORKER_SCHEMA.to_owned(),
            state: Some(WorkerState::Starting),
            worker: me,
            tmux: tmux_info(&spec),
            ..WorkerFacts::default()
        };
        let color = std::env::var_os("NO_COLOR").is_none();
        let now = Instant::now();
        Self {
            parser: adapter.parser(),
            spec,
            paths,
            sfd,
            facts,
            pane: Pane::stdout(color),
            splitter: LineSplitter::new(MAX_LINE),
            stderr_splitter: LineSplitter::new(64 * 1024),
            events: None,
            stdout_log: None,
            stderr_log: None,
            stderr_tail: Vec::new(),
            agent_pid: None,
            agent_status: None,
            started: now,
            last_output: now,
            terminal_seen: false,
            linger_at: None,
            stop: None,
            leak_at: None,
            drain_until: None,
        }
    }

    fn save_facts(&mut self) {
        // The directory is synced by result.json's write at the end.
        if let Err(e) = store::write_json_dir_synced_later(&self.paths.worker(), &self.facts) {
            self.pane.line(Style::Red, &format!("subpane: {e}"));
        }
    }

    fn run(&mut self) {
        // worker.json is first written once the agent runs: until then observers know the
        // worker from launch.json, and a canceller that finds no worker.json relies on the
        // worker seeing cancel.json (checked here, and again after that first write).
        // SAFETY: prctl with integer arguments only.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
        self.header();
        let cancelled_early = self.paths.cancel().exists();
        let mut child = None;
        if cancelled_early {
            self.facts.kill_reason = Some(KillReason::Cancel);
            self.facts.started_at = Some(now_rfc3339());
        } else {
            match self.spawn() {
                Ok(c) => child = Some(c),
                Err(e) => {
                    self.facts.started_at = Some(now_rfc3339());
                    self.pane.line(Style::Red, &sanitize(e.as_bytes(), 2000));
                    self.facts.spawn_error = Some(e);
                }
            }
        }
        if let Some(mut c) = child {
            let out = c.stdout.take();
            let err = c.stderr.take();
            self.facts.state = Some(WorkerState::Running);
            self.save_facts();
            // A cancel written before worker.json said "running" may not have signalled us.
            if self.paths.cancel().exists() {
                self.cancel_requested(true);
            }
            self.event_loop(out, err);
        }
        self.finish();
    }

    fn header(&mut self) {
        let s = &self.spec;
        let argv: Vec<String> = s
            .argv
            .iter()
            .map(|a| shell_escape::escape(std::borrow::Cow::Borrowed(a.as_str())).into_owned())
            .collect();
        let title = format!(
            "subpane ▸ run {} · attempt {} · {}",
            s.run_id,
            s.attempt,
            s.agent.as_str()
        );
        self.pane
            .line(Style::Bold, &sanitize(title.as_bytes(), 400));
        self.pane.line(
            Style::Dim,
            &sanitize(format!("$ {}", argv.join(" ")).as_bytes(), 400),
        );
        self.pane.line(
            Style::Dim,
            &sanitize(format!("cwd: {}", s.cwd.display()).as_bytes(), 400),
        );
        self.pane.line(Style::Dim, &"─".repeat(60));
    }

    fn open_logs(&mut self) -> std::io::Result<()> {
        let open = |p: &Path| {
            File::options()
                .create(true)
                .write(true)
                .truncate(true)
                .open(p)
        };
        self.events = Some(BufWriter::with_capacity(
            256 * 1024,
            open(&self.paths.events())?,
        ));
        self.stdout_log = Some(BufWriter::with_capacity(
            64 * 1024,
            open(&self.paths.stdout_log())?,
        ));
        self.stderr_log = Some(open(&self.paths.stderr_log())?);
        Ok(())
    }

    fn spawn(&mut self) -> Result<Child, String> {
        self.open_logs()
            .map_err(|e| format!("cannot create the attempt's log files: {e}"))?;
        let env = store::read_env_file(&self.paths.env_file()).map_err(|e| {
            format!(
                "cannot read the attempt's environment ({}): {e}",
                self.paths.env_file().display()
            )
        })?;
        let argv = &self.spec.argv;
        let program = argv.first().ok_or("the spec has an empty argv")?;
        let mut cmd = Command::new(program);
        cmd.args(&argv[1..])
            .current_dir(&self.spec.cwd)
            .env_clear()
            .envs(env)
            .env("SUBPANE_RUN_ID", self.spec.run_id.as_str())
            .env("SUBPANE_ATTEMPT", self.spec.attempt.to_string())
            .env("SUBPANE_ATTEMPT_DIR", self.paths.dir())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // A new session, not only a new process group: the program then has no controlling
        // terminal, so it can never be stopped by SIGTTIN/SIGTTOU for touching the pane's tty
        // (its stdin is /dev/null anyway), and keys typed in the pane reach only the worker.
        // Its pid is still its process group id, which is what stopping signals.
        // SAFETY: the closure only makes async-signal-safe calls.
        unsafe {
            cmd.pre_exec(|| {
                procs::reset_signals_in_child()?;
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            })
        };
        match self.spec.stdin {
            crate::spec::Stdin::Null => cmd.stdin(Stdio::null()),
            crate::spec::Stdin::PromptFile => {
                let f = File::open(self.paths.prompt())
                    .map_err(|e| format!("cannot open the prompt file: {e}"))?;
                cmd.stdin(Stdio::from(f))
            }
        };
        self.started = Instant::now();
        self.last_output = self.started;
        self.facts.started_at = Some(now_rfc3339());
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {program}: {e}"))?;
        let pid = child.id() as i32;
        self.agent_pid = Some(pid);
        self.facts.agent = procs::proc_ref(pid).or(Some(crate::envelope::ProcRef {
            pid,
            start_ticks: 0,
        }));
        Ok(child)
    }

    /// Every pending deadline. The poll timeout is the earliest; `check_deadlines` acts on
    /// the ones that passed.
    fn deadlines(&self) -> Vec<(Due, Instant)> {
        let mut d = Vec::new();
        if self.agent_status.is_none() && self.stop.is_none() {
            if let Some(t) = self.spec.limits.timeout_ms {
                d.push((Due::Timeout, self.started + Duration::from_millis(t)));
            }
            if let Some(t) = self.spec.limits.idle_timeout_ms {
                d.push((Due::Idle, self.last_output + Duration::from_millis(t)));
            }
            if let Some(t) = self.linger_at {
                d.push((Due::Linger, t));
            }
        }
        if let Some(s) = self.stop.as_ref().filter(|s| !s.killed) {
            d.push((Due::Kill, s.kill_at));
        }
        d.extend(self.leak_at.map(|t| (Due::Leak, t)));
        d.extend(self.drain_until.map(|t| (Due::Drain, t)));
        d
    }

    fn next_deadline(&self) -> Option<Instant> {
        self.deadlines().into_iter().map(|(_, t)| t).min()
    }

    fn event_loop(
        &mut self,
        out: Option<std::process::ChildStdout>,
        err: Option<std::process::ChildStderr>,
    ) {
        let mut out = out;
        let mut err = err;
        for fd in [
            out.as_ref().map(|o| o.as_raw_fd()),
            err.as_ref().map(|e| e.as_raw_fd()),
        ]
        .into_iter()
        .flatten()
        {
            set_nonblocking(fd);
        }
        if let Some(o) = out.as_ref() {
            // A bigger pipe lets a fast agent write ahead while we parse: fewer wake-ups and
            // context switches per megabyte (best effort; the default is 64 KiB).
            // SAFETY: fcntl on a pipe fd we own, integer argument.
            unsafe { libc::fcntl(o.as_raw_fd(), libc::F_SETPIPE_SZ, 1 << 20) };
        }
        let mut buf = vec![0u8; 256 * 1024];
        loop {
            if self.agent_status.is_some() && out.is_none() && err.is_none() {
                break;
            }
            let timeout = match self.next_deadline() {
                None => PollTimeout::NONE,
                Some(t) => {
                    let ms = t.saturating_duration_since(Instant::now()).as_millis();
                    // Round up so we do not wake a hair early and spin.
                    PollTimeout::try_from((ms + 1).min(i32::MAX as u128) as i32)
                        .unwrap_or(PollTimeout::MAX)
                }
            };
            let pane_fd = self.pane.fd();
            let want_pane = self.pane.wants_write();
            let (out_ev, err_ev, sig_ev, _pane_writable) = {
                // SAFETY: fds stay open for the duration of the poll call.
                let pane_b = unsafe { BorrowedFd::borrow_raw(pane_fd) };
                let mut fds: Vec<PollFd<'_>> = Vec::with_capacity(4);
                fds.push(PollFd::new(self.sfd.as_fd(), PollFlags::POLLIN));
                let oi = out.as_ref().map(|o| {
                    fds.push(PollFd::new(o.as_fd(), PollFlags::POLLIN));
                    fds.len() - 1
                });
                let ei = err.as_ref().map(|e| {
                    fds.push(PollFd::new(e.as_fd(), PollFlags::POLLIN));
                    fds.len() - 1
                });
                let pi = want_pane.then(|| {
                    fds.push(PollFd::new(pane_b, PollFlags::POLLOUT));
                    fds.len() - 1
                });
                match poll(&mut fds, timeout) {
                    Ok(_) => {}
                    Err(nix::errno::Errno::EINTR) => continue,
                    Err(_) => break,
                }
                let ready = |i: Option<usize>| {
                    i.is_some_and(|i| fds[i].revents().is_some_and(|r| !r.is_empty()))
                };
                (ready(oi), ready(ei), ready(Some(0)), ready(pi))
            };
            if out_ev && !self.read_stdout(&mut out, &mut buf) {
                out = None;
            }
            if err_ev && !self.read_stderr(&mut err, &mut buf) {
                err = None;
            }
            if let Some(e) = self.events.as_mut() {
                let _ = e.flush();
            }
            if let Some(s) = self.stdout_log.as_mut() {
                let _ = s.flush();
            }
            if sig_ev {
                self.handle_signals();
            }
            // One write per wake-up, not one per line: under a flood each write to the pane
            // also costs the tmux server a wake-up and a parse.
            self.pane.flush();
            self.check_deadlines(&mut out, &mut err);
        }
    }

    /// Reads what stdout has now; `false` at EOF.
    fn read_stdout(&mut self, out: &mut Option<std::process::ChildStdout>, buf: &mut [u8]) -> bool {
        let Some(pipe) = out.as_mut() else {
            return false;
        };
        let mut budget = 8 * 1024 * 1024usize;
        loop {
            match pipe.read(buf) {
                Ok(0) => {
                    self.stdout_eof();
                    return false;
                }
                Ok(n) => {
                    self.last_output = Instant::now();
                    let chunk = &buf[..n];
                    let mut splitter = std::mem::replace(&mut self.splitter, LineSplitter::new(0));
                    splitter.feed(chunk, &mut |p| self.on_piece(p));
                    self.splitter = splitter;
                    budget = budget.saturating_sub(n);
                    if budget == 0 {
                        return true;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.stdout_eof();
                    return false;
                }
            }
        }
    }

    fn stdout_eof(&mut self) {
        let mut splitter = std::mem::replace(&mut self.splitter, LineSplitter::new(0));
        splitter.finish(&mut |p| self.on_piece(p));
        self.splitter = splitter;
    }

    fn on_piece(&mut self, p: Piece<'_>) {
        let f = &mut self.facts.filter;
        match p {
            Piece::Oversized { bytes } => {
                f.oversized_lines += 1;
                f.dropped_lines += 1;
                f.dropped_bytes += bytes;
                self.pane.line(
                    Style::Dim,
                    &format!("… a line of {bytes} bytes was dropped (over the 64 MiB bound)"),
                );
            }
            Piece::Line(line) => {
                self.parser.set_pane_room(self.pane.has_room());
                let r = self.parser.on_line(line);
                match &r.action {
                    LineAction::Keep => {
                        f.kept_lines += 1;
                        write_line(&mut self.events, line);
                    }
                    LineAction::Replace(b) => {
                        f.kept_lines += 1;
                        write_line(&mut self.events, b);
                    }
                    LineAction::Drop => {
                        f.dropped_lines += 1;
                        f.dropped_bytes += line.len() as u64 + 1;
                    }
                    LineAction::Plain => {
                        f.plain_lines += 1;
                        write_line(&mut self.stdout_log, line);
                    }
                }
                if r.terminal && !self.terminal_seen {
                    self.terminal_seen = true;
                    self.linger_at =
                        Some(Instant::now() + Duration::from_millis(self.spec.limits.linger_ms));
                }
                for item in &r.pane {
                    self.pane.item(item);
                }
            }
        }
    }

    /// Reads what stderr has now; `false` at EOF.
    fn read_stderr(&mut self, err: &mut Option<std::process::ChildStderr>, buf: &mut [u8]) -> bool {
        let Some(pipe) = err.as_mut() else {
            return false;
        };
        loop {
            match pipe.read(buf) {
                Ok(0) => {
                    let mut sp = std::mem::replace(&mut self.stderr_splitter, LineSplitter::new(0));
                    sp.finish(&mut |p| {
                        if let Piece::Line(l) = p {
                            self.pane.stderr_line(l)
                        }
                    });
                    self.stderr_splitter = sp;
                    return false;
                }
                Ok(n) => {
                    self.last_output = Instant::now();
                    let chunk = &buf[..n];
                    if let Some(f) = self.stderr_log.as_mut() {
                        let _ = f.write_all(chunk);
                    }
                    self.stderr_tail.extend_from_slice(chunk);
                    if self.stderr_tail.len() > 2 * STDERR_TAIL {
                        let cut = self.stderr_tail.len() - STDERR_TAIL;
                        self.stderr_tail.drain(..cut);
                    }
                    let mut sp = std::mem::replace(&mut self.stderr_splitter, LineSplitter::new(0));
                    sp.feed(chunk, &mut |p| match p {
                        Piece::Line(l) => self.pane.stderr_line(l),
                        Piece::Oversized { .. } => {}
                    });
                    self.stderr_splitter = sp;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return false,
            }
        }
    }

    fn handle_signals(&mut self) {
        while let Ok(Some(info)) = self.sfd.read_signal() {
            match Signal::try_from(info.ssi_signo as i32) {
                Ok(Signal::SIGCHLD) => self.reap(),
                Ok(Signal::SIGUSR1) => self.cancel_requested(true),
                Ok(Signal::SIGTERM | Signal::SIGINT | Signal::SIGQUIT) => {
                    self.cancel_requested(false)
                }
                Ok(Signal::SIGHUP) => {
                    self.pane.set_dead();
                    self.begin_stop(KillReason::PaneClosed, self.spec.limits.grace_ms);
                }
                _ => {}
            }
        }
    }

    /// Reaps every exited child without waiting; records the agent's status. This is the only
    /// place that reaps while the agent may be alive: a status reaped anywhere else would be
    /// lost, and the loop would wait for it forever.
    fn reap(&mut self) {
        self.reap_now();
    }

    /// Reaps the children that have exited, without waiting. Returns `false` when the worker
    /// has no child left at all (`ECHILD`).
    fn reap_now(&mut self) -> bool {
        loop {
            match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) => return true,
                Ok(st) => self.note_reaped(st),
                Err(_) => return false,
            }
        }
    }

    /// Every reap goes through here: whichever path reaps the agent (SIGCHLD, or the reaping
    /// after a kill), its status must be recorded, or the loop would wait for it forever.
    fn note_reaped(&mut self, st: WaitStatus) {
        if st.pid().map(|p| p.as_raw()) == self.agent_pid && self.agent_status.is_none() {
            self.agent_status = Some(st);
            self.linger_at = None;
            self.leak_at = Some(Instant::now() + LEAK_WAIT);
        }
    }

    /// Reaps children until none are left or `bound` passes.
    fn reap_all(&mut self, bound: Duration) {
        let end = Instant::now() + bound;
        while self.reap_now() {
            if Instant::now() >= end {
                return;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// SIGKILL to every descendant of the worker; returns how many there were.
    fn kill_descendants(&mut self) -> u64 {
        let mut total = 0;
        // Killing a parent can re-parent its children to us between scans: repeat until quiet.
        for _ in 0..5 {
            // The worker is a subreaper, so every descendant is a child or below one: with no
            // child left there is none, and the scan of /proc (milliseconds) is skipped.
            if !self.reap_now() {
                break;
            }
            let d = procs::descendants(std::process::id() as i32);
            if d.is_empty() {
                break;
            }
            for pid in &d {
                procs::signal_pid(*pid, Signal::SIGKILL);
            }
            total += d.len() as u64;
            self.reap_all(Duration::from_millis(200));
        }
        total
    }

    /// A cancel: from `cancel.json` (`from_file`) or a signal to the worker.
    fn cancel_requested(&mut self, from_file: bool) {
        let grace = if from_file {
            store::read_json::<CancelRequest>(&self.paths.cancel())
                .ok()
                .flatten()
                .map(|c| c.grace_ms)
                .unwrap_or(self.spec.limits.grace_ms)
        } else {
            self.spec.limits.grace_ms
        };
        if self.stop.is_some() {
            // A second request kills at once.
            self.kill_now();
        } else {
            self.pane.line(Style::Yellow, "subpane: cancel requested");
            self.begin_stop(KillReason::Cancel, grace);
        }
    }

    /// SIGTERM to the group and to descendants outside it; SIGKILL after `grace_ms`.
    fn begin_stop(&mut self, reason: KillReason, grace_ms: u64) {
        if self.agent_status.is_some() || self.stop.is_some() {
            return;
        }
        let Some(pgid) = self.agent_pid else { return };
        self.facts.kill_reason = Some(reason);
        if reason == KillReason::Linger {
            self.facts.lingered = true;
        }
        if grace_ms == 0 {
            self.stop = Some(Stop {
                kill_at: Instant::now(),
                killed: false,
            });
            self.kill_now();
            return;
        }
        procs::signal_group(pgid, Signal::SIGTERM);
        for pid in procs::descendants(std::process::id() as i32) {
            procs::signal_pid(pid, Signal::SIGTERM);
        }
        self.facts.signals_sent.push("SIGTERM".into());
        self.stop = Some(Stop {
            kill_at: Instant::now() + Duration::from_millis(grace_ms),
            killed: false,
        });
    }

    /// SIGKILL to the group and every descendant.
    fn kill_now(&mut self) {
        if let Some(pgid) = self.agent_pid {
            procs::signal_group(pgid, Signal::SIGKILL);
        }
        self.kill_descendants();
        // Called only while a stop is in progress (begin_stop makes one first).
        if let Some(s) = self.stop.as_mut().filter(|s| !s.killed) {
            s.killed = true;
            self.facts.signals_sent.push("SIGKILL".into());
        }
    }

    fn check_deadlines(
        &mut self,
        out: &mut Option<std::process::ChildStdout>,
        err: &mut Option<std::process::ChildStderr>,
    ) {
        let now = Instant::now();
        let grace = self.spec.limits.grace_ms;
        for (due, at) in self.deadlines() {
            if at > now {
                continue;
            }
            // One stop at a time: a deadline that passed in the same wake-up as another does
            // not start a second.
            let stopping = self.stop.is_some() || self.agent_status.is_some();
            match due {
                Due::Timeout if !stopping => {
                    self.pane
                        .line(Style::Yellow, "subpane: timeout reached; stopping");
                    self.begin_stop(KillReason::Timeout, grace);
                }
                Due::Idle if !stopping => {
                    self.pane.line(
                        Style::Yellow,
                        "subpane: no output for the idle timeout; stopping",
                    );
                    self.begin_stop(KillReason::IdleTimeout, grace);
                }
                Due::Linger if !stopping => {
                    self.linger_at = None;
                    self.pane.line(
                        Style::Yellow,
                        "subpane: the agent did not exit after its final event; stopping",
                    );
                    self.begin_stop(KillReason::Linger, grace);
                }
                Due::Kill => self.kill_now(),
                Due::Leak => {
                    self.leak_at = None;
                    if out.is_some() || err.is_some() {
                        // The agent is gone but something still holds its output open.
                        self.facts.cleanup.output_held_open = true;
                        let n = self.kill_descendants();
                        self.facts.cleanup.killed_descendants += n;
                        self.drain_until = Some(now + DRAIN_WAIT);
                        self.pane.line(
                            Style::Yellow,
                            &format!(
                                "subpane: {n} leftover process(es) held the output open; killed"
                            ),
                        );
                    }
                }
                Due::Drain => {
                    // Give up on pipes that will not close.
                    *out = None;
                    *err = None;
                    self.drain_until = None;
                }
                Due::Timeout | Due::Idle | Due::Linger => {}
            }
        }
    }

    fn finish(&mut self) {
        // Nothing of the attempt may outlive it.
        let n = self.kill_descendants();
        self.facts.cleanup.killed_descendants += n;
        self.reap_all(Duration::from_secs(2));
        if let Some(e) = self.events.as_mut() {
            let _ = e.flush();
        }
        if let Some(s) = self.stdout_log.as_mut() {
            let _ = s.flush();
        }
        if let Some(st) = self.agent_status {
            match st {
                WaitStatus::Exited(_, code) => self.facts.exit_code = Some(code),
                WaitStatus::Signaled(_, sig, _) => {
                    self.facts.signal = Some(sig.as_str().to_owned())
                }
                _ => {}
            }
        }
        let adapter = adapter_for(self.spec.agent);
        let report = self.parser.finish(&self.stderr_tail);
        self.facts.terminal_event = report.terminal_event.clone();
        self.facts.finished_at = Some(now_rfc3339());
        self.facts.state = Some(WorkerState::Finished);
        self.facts.pane_lines_skipped = self.pane.total_skipped;
        // Both are renamed before result.json, whose write fsyncs the directory once for all
        // three: two directory fsyncs fewer between the agent's exit and the envelope.
        if let Some(text) = &report.output.final_text {
            let _ = store::write_atomic_dir_synced_later(&self.paths.output(), text.as_bytes());
        }
        if let Err(e) = store::write_json_dir_synced_later(&self.paths.worker(), &self.facts) {
            self.pane.line(Style::Red, &format!("subpane: {e}"));
        }
        let facts = Facts {
            sandbox_failed: false,
            spawn_failed: self.facts.spawn_error.is_some(),
            lost: false,
            kill_reason: self.facts.kill_reason,
            exit_code: self.facts.exit_code,
            signal: match self.agent_status {
                Some(WaitStatus::Signaled(_, s, _)) => Some(s as i32),
                _ => None,
            },
            expects_terminal_event: adapter.expects_terminal_event(),
            terminal_event_seen: report.terminal_event.is_some(),
            model_error: report.model_error,
        };
        let outcome = envelope::decide(&facts);
        let mut output = report.output;
        if let Some(e) = &self.facts.spawn_error {
            output.push_error(e.clone());
        }
        if self.facts.kill_reason == Some(KillReason::PaneClosed) {
            output.push_error("the pane closed under the worker (its tmux session or server was killed); the program was stopped");
        }
        if outcome.failure_kind == Some(envelope::FailureKind::Exit) && output.errors.is_empty() {
            // A failure should say why: the program's last words on stderr usually do.
            if let Some(last) = last_line(&self.stderr_tail) {
                output.push_error(format!("stderr: {last}"));
            }
        }
        let artifacts = store::collect_artifacts(&self.paths);
        let env = envelope::build(&self.spec, &self.facts, output, outcome, artifacts);
        let write = store::write_result(&self.paths, &env);
        let dur = env
            .duration_ms
            .map(|d| format!("{:.1}s", d as f64 / 1000.0))
            .unwrap_or_default();
        let how = match (env.exit_code, &env.signal) {
            (Some(c), _) => format!("exit {c}"),
            (None, Some(s)) => s.clone(),
            _ => "not started".into(),
        };
        // The end must show even when the pane is behind: what it has not taken yet gives way.
        self.pane.make_room_for_final();
        self.pane.line(Style::Dim, &"─".repeat(60));
        match write {
            Ok(_) => {
                let kind = env
                    .failure_kind
                    .map(|k| format!(" ({})", k.as_str()))
                    .unwrap_or_default();
                let mark = if env.status == envelope::Status::Completed {
                    "✔"
                } else {
                    "✘"
                };
                let style = if env.status == envelope::Status::Completed {
                    Style::Green
                } else {
                    Style::Red
                };
                self.pane.line(
                    style,
                    &format!("{mark} {}{kind} · {how} · {dur}", env.status.as_str()),
                );
            }
            Err(e) => self.pane.line(
                Style::Red,
                &format!("subpane: cannot write the result: {e}"),
            ),
        }
        if self.spec.keep_session {
            self.pane.line(
                Style::Dim,
                "session kept: detach with Ctrl-b d; `subpane gc` removes it",
            );
        }
        // result.json is written: nobody waits on this, so a kept pane may take its time.
        let bound = if self.spec.keep_session {
            Duration::from_secs(10)
        } else {
            Duration::from_secs(2)
        };
        self.pane.flush_final(bound);
    }
}

/// The last non-empty line of `bytes`, as text.
fn last_line(bytes: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(bytes);
    text.lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .map(|l| l.chars().take(500).collect())
}

fn write_line(w: &mut Option<BufWriter<File>>, line: &[u8]) {
    if let Some(w) = w.as_mut() {
        let _ = w.write_all(line);
        let _ = w.write_all(b"\n");
    }
}

fn set_nonblocking(fd: i32) {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    // SAFETY: fd is a pipe we own for the duration of the loop.
    let b = unsafe { BorrowedFd::borrow_raw(fd) };
    if let Ok(flags) = fcntl(b, FcntlArg::F_GETFL) {
        let _ = fcntl(
            b,
            FcntlArg::F_SETFL(OFlag::from_bits_truncate(flags) | OFlag::O_NONBLOCK),
        );
    }
}
