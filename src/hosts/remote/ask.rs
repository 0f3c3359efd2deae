//! Asking a host about a run: `status`, `wait` (through lost connections) and `cancel`
//! there with `--json`, and what a verb prints there.

use super::*;

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
    // stdin stays open, and unwritten, while this waits: when this side goes (or the
    // connection does), the host's side reads its end and stops (`wait --until-stdin-closes`).
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if own_group {
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    }
    let failed = |e| AskError::Failed(ssh::run_error(&run.host, crate::command::Error::Io(e)));
    let mut child = cmd.spawn().map_err(failed)?;
    let held = child.stdin.take();
    let out = child.wait_with_output().map_err(failed)?;
    drop(held);
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
    if run.is_slurm() {
        // An earlier attempt's end is the one recorded here; the latest is Slurm's to say.
        let answer = match attempt.and_then(|n| recorded(home, run, Some(n))) {
            Some(env) => Answer::Finished(Box::new(env)),
            None => crate::hosts::slurm::run::status(home, run)?,
        };
        return Ok(StatusAnswer {
            answer,
            stale: None,
        });
    }
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
    if run.is_slurm() {
        if let Some(env) = attempt.and_then(|n| recorded(home, run, Some(n))) {
            return Ok(Answer::Finished(Box::new(env)));
        }
        return crate::hosts::slurm::run::wait(home, run, deadline);
    }
    let n = attempt.map(|n| n.to_string());
    let words = with_attempt(
        vec![
            "wait",
            run.run_id.as_str(),
            "--json",
            "--until-stdin-closes",
        ],
        &n,
    );
    watch(home, run, &words, deadline, own_group, on_lost)
}

/// `cancel` of a run on a host (`grace` as its flag takes it; `by`: who asks, when not a
/// cancel of the run): the envelope once it ended, or (`no_wait`) the host's
/// `cancel_requested` answer.
pub fn cancel(
    home: &Home,
    run: &RemoteRun,
    grace: Option<&str>,
    no_wait: bool,
    by: Option<crate::envelope::CancelOrigin>,
) -> Result<Answer, HostsError> {
    if run.is_slurm() {
        return crate::hosts::slurm::run::cancel(home, run, grace, no_wait, by);
    }
    let mut words = vec!["cancel", run.run_id.as_str(), "--json"];
    if let Some(g) = grace {
        words.extend(["--grace", g]);
    }
    if let Some(by) = by {
        words.extend(["--by", by.as_str()]);
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

/// The words of a `retry` of `run_id` there. The task goes as `--task=TEXT`, one word (a
/// text that starts with `-` stays a value), and, when it starts with `@`, with `--literal`:
/// its file was read here, and its text is no file's name there.
fn retry_words(run_id: &str, resume: bool, task: Option<&str>) -> Vec<String> {
    let mut words: Vec<String> = ["retry", run_id, "--detach", "--json"]
        .map(String::from)
        .into();
    if resume {
        words.push("--resume".into());
    }
    if let Some(t) = task {
        if t.starts_with('@') {
            words.push("--literal".into());
        }
        words.push(format!("--task={t}"));
    }
    words
}

/// `retry` of a run on a host: the next attempt is started there (`retry --detach --json`),
/// and its start answered; the caller waits for it with [`wait`] (recording its envelope
/// here). `task` is the new task's text (read here from its file by the caller). The
/// variables of a retry (`--env`) are refused: they would be on the host's command line.
pub fn retry(
    home: &Home,
    run: &RemoteRun,
    resume: bool,
    task: Option<&str>,
) -> Result<envelope::Started, HostsError> {
    if run.is_slurm() {
        return crate::hosts::slurm::run::retry(home, run, resume, task);
    }
    let words = retry_words(&run.run_id, resume, task);
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    let bytes = read_out(home, run, &words)?;
    if is_envelope(&bytes) {
        // Its pane could not start there: recorded as any end is.
        let env = record(home, run, &bytes)?;
        return Err(HostsError::Check {
            name: run.host.name.clone(),
            why: format!(
                "the retry's attempt {} could not start there: {}",
                env.attempt,
                env.output.errors.join("; ")
            ),
        });
    }
    let started: envelope::Started =
        serde_json::from_slice(&bytes).map_err(|e| HostsError::Check {
            name: run.host.name.clone(),
            why: format!(
                "its answer to the retry cannot be read ({e}): {}",
                crate::term::sanitize(&bytes, 200)
            ),
        })?;
    // The new attempt's directory here, empty until its envelope comes back: what is
    // recorded here then says that the run's latest attempt has not ended (`gc`, `ls`).
    let id = RunId::parse(&run.run_id).map_err(|e| HostsError::Input(e.to_string()))?;
    let dir = home.attempt(&id, started.attempt).dir().to_path_buf();
    std::fs::create_dir_all(&dir).map_err(|source| StoreError::Write { path: dir, source })?;
    Ok(started)
}

#[cfg(test)]
mod tests {
    use super::retry_words;

    #[test]
    fn a_retry_s_task_goes_there_as_its_text() {
        assert_eq!(
            retry_words("r", true, Some("-n")),
            ["retry", "r", "--detach", "--json", "--resume", "--task=-n"]
        );
        // Read here from its file: a text that starts with `@` names no file there.
        assert_eq!(
            retry_words("r", false, Some("@alice: go on")),
            [
                "retry",
                "r",
                "--detach",
                "--json",
                "--literal",
                "--task=@alice: go on"
            ]
        );
        assert_eq!(
            retry_words("r", false, None),
            ["retry", "r", "--detach", "--json"]
        );
    }
}
