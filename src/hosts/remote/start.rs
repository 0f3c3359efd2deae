//! Starting a run on a host: the record here first, the request on ssh's stdin, the
//! host's answers read line by line (see the parent module's diagram).

use super::*;
use crate::hosts::slurm::run as slurm;

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

/// Reads the caller's files of `req` (`task_file`, `system_prompt_file`) into its text here,
/// for host `name`: the host has its own file system.
pub fn inline_files(req: &mut RunRequest, name: &str) -> Result<(), HostsError> {
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
    Ok(())
}

/// What a start that waits tells its caller once the run runs there.
pub type OnStarted<'a> = &'a mut dyn FnMut(&RemoteRun, &envelope::Started);

/// Starts `req` on the host named `req.host`: reserves its id here, records where it runs,
/// and sends the request. Nothing is left here (or, as far as the host said, there) when it
/// is refused or the host cannot be reached. With `on_started`, the same call waits for the
/// run's end there (one round trip in all), telling `on_started` once it runs; ssh then has
/// a process group of its own, so a Ctrl-C at the terminal is the caller's to handle.
/// `group`: the fan-out group it is in (recorded here and there).
pub fn start(
    home: &Home,
    mut req: RunRequest,
    group: Option<&str>,
    on_started: Option<OnStarted<'_>>,
) -> Result<(RemoteRun, StartAnswer), HostsError> {
    let name = req.host.take().unwrap_or_default();
    let host = crate::hosts::get(home, &name)?;
    inline_files(&mut req, &name)?;
    let slurm_time = match &host.url {
        crate::hosts::HostUrl::Slurm(_) => Some(slurm::time_limit(&req, &host)?),
        crate::hosts::HostUrl::Ssh(_) => None,
    };
    let id = match &req.run_id {
        Some(r) => RunId::parse(r).map_err(|e| HostsError::Input(e.to_string()))?,
        None => crate::fresh::run_id(),
    };
    req.run_id = Some(id.to_string());
    if slurm_time.is_some() {
        // Planned here in the shared home first, as its node will: a request it refuses is
        // refused now, not by a job later.
        slurm::plan_there(&host, &req, &id)?;
    }
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
        group: group.map(str::to_owned),
    })
    .expect("a request serializes");
    let mut run = RemoteRun {
        schema: REMOTE_SCHEMA.to_owned(),
        run_id: id.to_string(),
        host: host.clone(),
        bin: match slurm_time {
            Some(_) => slurm::bin(&host)?,
            None => remembered_bin(&host),
        },
        created_at: crate::fresh::now_rfc3339(),
        agent,
        argv,
        group: group.map(str::to_owned),
        job_id: None,
        attempt: 1,
    };
    // Recorded before the request leaves: a caller killed meanwhile leaves a run that asks
    // its host, not a directory nothing knows. Made durable while the request is on its
    // way (the flush and the round trip overlap), before anything is answered.
    let marker = reservation.dir.join(MARKER);
    store::write_json_unsynced(&marker, &run)?;
    if wait {
        // The check of the envelope that will come back, compiled meanwhile too.
        std::thread::spawn(envelope::compile_schema);
    }
    if let Some(time) = slurm_time {
        store::sync_written(&marker);
        // One batch job: its id recorded before anything waits on it.
        run.job_id = Some(slurm::submit(&host, &run, &body, time.as_deref())?);
        store::write_json_atomic(&reservation.dir.join(MARKER), &run)?;
        reservation.keep = true;
        mark_started(&reservation.dir);
        let started = slurm::started(&run);
        let Some(on_started) = on_started else {
            return Ok((run, StartAnswer::Started(started)));
        };
        on_started(&run, &started);
        return match super::wait(home, &run, None, None, true, &mut |_, _| {})? {
            Answer::Finished(env) => Ok((run, StartAnswer::Finished(env))),
            Answer::Live(..) => Ok((run, StartAnswer::Started(started))),
        };
    }
    let mut sent = Sent::spawn(home, &run, &body, wait)?;
    store::sync_written(&marker);
    let mut first = sent.first(wait);
    if first.is_none() && sent.finish().0 == Some(127) && host.bin.is_none() {
        run.bin = ssh::ensure_copied(home, &host, CONNECT_TIMEOUT)?.path;
        crate::hosts::remember_copy(home, &host.name, &run.bin)?;
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
            mark_started(&reservation.dir);
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
    mark_started(&reservation.dir);
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

/// Notes in the run's directory here that its host has it: until then a host with no
/// record of it is one it has not reached yet (`ls`, `top`), not one that lost it. A hint,
/// never synced: the marker is the record.
fn mark_started(dir: &std::path::Path) {
    let _ = std::fs::File::create(dir.join(STARTED));
}

/// Whether the host of `run` has answered its start (see [`mark_started`]).
pub fn has_started(home: &Home, run: &RemoteRun) -> bool {
    RunId::parse(&run.run_id).is_ok_and(|id| home.run_dir(&id).join(STARTED).exists())
}

/// The file of [`mark_started`].
const STARTED: &str = "host.started";

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

/// The remote subpane to run: `--bin`, else the copy of this version made there earlier,
/// else `subpane` on the remote PATH.
pub(super) fn remembered_bin(host: &Host) -> String {
    let this_version = format!("/subpane-{}-", env!("CARGO_PKG_VERSION"));
    host.bin
        .clone()
        .or_else(|| host.copied.clone().filter(|c| c.contains(&this_version)))
        .unwrap_or_else(|| "subpane".into())
}

/// `BIN __run-request` on the host, its request on stdin, its answers read line by line.
struct Sent {
    child: std::process::Child,
    out: std::io::BufReader<std::process::ChildStdout>,
    /// Writes the request, then holds stdin open (returned when joined) until ssh ends.
    feeder: Option<std::thread::JoinHandle<Option<std::process::ChildStdin>>>,
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
        // The request, one line (it may outgrow a pipe's buffer: written beside the
        // reading). stdin then stays open, never written again, until ssh ends: the host's
        // side stops waiting when it closes (this side, or the connection, gone).
        let mut stdin = child.stdin.take().expect("piped");
        let mut body = body.to_vec();
        body.push(b'\n');
        let feeder = std::thread::spawn(move || stdin.write_all(&body).ok().map(|()| stdin));
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
