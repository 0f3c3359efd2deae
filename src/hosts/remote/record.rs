//! An envelope from a host, recorded here: checked, marked with the host, written
//! atomically; one that is not trusted is kept beside a local record that says so.

use super::*;

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
    let env = match envelope::from_remote(bytes, &run.run_id, attempt) {
        Ok(mut env) => {
            env.host = Some(run.host_ref());
            env
        }
        Err(why) => {
            let kept = paths.dir().join("result.untrusted.json");
            store::write_atomic(&kept, bytes)?;
            local_end(
                run,
                attempt,
                Status::Failed,
                FailureKind::Lost,
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

/// An envelope made here for an attempt of `run` whose own is not known (not trusted, or
/// never written), saying why.
pub fn local_end(
    run: &RemoteRun,
    attempt: u32,
    status: Status,
    failure_kind: FailureKind,
    why: &str,
) -> Envelope {
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
        status,
        failure_kind: Some(failure_kind),
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
        group: run.group.clone(),
        host: Some(run.host_ref()),
        parent_run: None,
        depth: None,
        resumed_from: None,
        cancelled_by: None,
        worktree: None,
        git: None,
        budget: None,
        secrets: None,
        input: None,
        stopped_ms: None,
        stops: None,
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
