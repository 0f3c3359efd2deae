//! `retry`: attempt *n+1* of a run, planned from its latest attempt's `spec.json`.
//!
//! ```text
//!  run.json ─► latest attempt n ─► spec.json ─┐          result.json of n (must exist)
//!                                              │                 │ output.session_id
//!  RetryOptions (resume, task, env) ───────────┼─────────────────┤
//!  the retrying process (System: vars, PATH) ──┘                 ▼
//!                          plan_retry ──► RunRequest (what n+1 runs) + Kept (what n had)
//!                                             ─► plan_attempt (the planner of `run`: every check)
//!                                             ─► Plan { spec: attempt n+1, env values, prompt }
//!                                             └─► start(home, plan) ─► attempts/<n+1>/
//! ```
//!
//! Only what is a retry's own is decided here: from the latest attempt only, once it has
//! finished; `--resume` needs a recorded session; no task or resume for a command; the
//! warning for a variable attempt *n* had set and this process lacks; a program inside
//! attempt *n*'s worktree is named from the repository, to move with the new worktree.
//! That the cwd is still a directory, the program still executable, a task not empty, a
//! worktree possible: the planner's rules, for `run` and `retry` alike.
//!
//! What is kept from attempt *n*: the program (its resolved argv for a command, the agent CLI
//! and its task settings for an agent), the cwd, the limits, labels, correlation id, the
//! sandbox policy, `keep_session`, the fan-out group, the lineage and the nesting limit.
//! What is made anew: the attempt number, its tmux session, its time, the environment's
//! values (records hold names only), the agent's argv (its prompt file and attempt directory
//! changed), and the parts of the sandbox policy that belong to the attempt or the machine.
//! A `--worktree` run's attempt *n+1* gets its own worktree from the repository's HEAD of the
//! moment; the cwd, a program inside the worktree and the sandbox's paths follow it.
//!
//! The follow-up task: `--task` when given; else, with `--resume`, [`DEFAULT_FOLLOW_UP`];
//! else the task of attempt *n* again.
//!
//! Common pitfalls:
//! * Attempt *n*'s directory is never written: the plan reads its `spec.json` and
//!   `result.json`, and [`crate::app::start`] creates `attempts/<n+1>/` exclusively (a concurrent
//!   retry that picked the same number fails there, with nothing started).
//! * "Not finished" means "no `result.json`": settle a dead worker into its `lost` envelope
//!   first ([`prepare_retry`] does), or a crashed attempt could never be retried.
//! * `spec.env.set` mixes the user's `--env` names with the variables subpane sets for the
//!   sandbox (`TMPDIR`, the proxy variables): in a sandboxed run the latter are recomputed by
//!   [`crate::app::plan::environment`], never looked up, or the host's `TMPDIR` would leak in.
//! * A plain retry of an attempt that itself resumed a session resumes that same session
//!   again (and keeps its `resumed_from`): it repeats attempt *n*, it does not start over.
//! * Relative `--writable`/`--hide` paths were resolved against attempt 1's caller: the
//!   recorded absolute paths are kept, never resolved again from the retrying directory.

use std::collections::BTreeMap;
use std::path::Path;

use crate::app::plan::{Kept, SandboxRequest, plan_attempt, set_by_sandbox};
use crate::app::{Error, Found, Plan, RunRequest, System, attempt_status, find_run};
use crate::envelope::Envelope;
use crate::spec::{AgentKind, AttemptSpec};
use crate::store::Home;

/// The task of `retry --resume` without `--task`.
pub const DEFAULT_FOLLOW_UP: &str = "Continue where you stopped.";

/// What `retry` was asked besides the run: the flags of `subpane retry`, or an MCP call's
/// arguments.
///
/// ```json
/// {"resume": true, "task": "now add the tests", "env": {"API_BASE": "http://127.0.0.1:8080"}}
/// ```
///
/// `env` values are secrets as far as subpane knows: `Debug` shows their names only.
#[derive(Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetryOptions {
    /// Continue the agent session of the latest attempt instead of starting a new one.
    pub resume: bool,
    /// The task: the follow-up message with `resume`, else a new task.
    pub task: Option<String>,
    /// A file whose content is the task (instead of `task`).
    pub task_file: Option<std::path::PathBuf>,
    /// Values for variables: those attempt *n* had set (`spec.env.set`) and any new ones.
    pub env: BTreeMap<String, String>,
    /// Attempt *n* ended at its account's usage limit: attempt *n+1* waits in its pane until
    /// the limit resets (its `retry_at`), then continues the session (or, with none
    /// recorded, runs the task again).
    pub at_reset: bool,
    /// Attempt *n+1* waits this long first (`10m`): instead of the reset time with
    /// `at_reset` (a CLI that said none), or alone.
    pub after: Option<String>,
}

impl std::fmt::Debug for RetryOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryOptions")
            .field("resume", &self.resume)
            .field("task", &self.task.as_ref().map(|t| t.len()))
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("at_reset", &self.at_reset)
            .field("after", &self.after)
            .finish()
    }
}

/// A retry made valid and complete: the plan of attempt *n+1*, and what the caller should be
/// told (variables that could not be given a value).
#[derive(Clone, Debug)]
pub struct RetryPlan {
    pub plan: Plan,
    pub warnings: Vec<String>,
}

/// Finds run `run`, settles its latest attempt (a dead worker gets its `lost` envelope), and
/// plans the next attempt with the real machine's view in `sys`.
pub fn prepare_retry(
    home: &Home,
    run: &str,
    opts: &RetryOptions,
    sys: &dyn System,
) -> Result<RetryPlan, Error> {
    let found = find_run(home, run, None)?;
    attempt_status(&found.paths, &found.spec)?;
    plan_retry(&found, opts, home, sys)
}

/// Plans attempt *n+1* of `found`'s run from its latest attempt *n*. Reads attempt *n*'s
/// `result.json` through `sys`; creates nothing. Decides only what attempt *n+1* keeps and
/// what it takes anew, as a request and what it `Kept`; the one planner (`plan_attempt`,
/// the path of [`super::plan`]) checks and makes the rest, as for attempt 1: that the cwd
/// is still a directory, the program still an executable file, the task not empty, the
/// worktree possible, the sandbox policy sound.
pub fn plan_retry(
    found: &Found,
    opts: &RetryOptions,
    home: &Home,
    sys: &dyn System,
) -> Result<RetryPlan, Error> {
    let prev = &found.spec;
    let run_id = &prev.run_id;
    let n = prev.attempt;
    let latest = found
        .record
        .attempts
        .iter()
        .map(|a| a.attempt)
        .max()
        .unwrap_or(n);
    if latest != n {
        return Err(Error::invalid(format!(
            "retry starts from the latest attempt of run `{run_id}` ({latest}), not attempt {n}"
        )));
    }
    let outcome = previous_envelope(found, sys)?;
    let start_at = start_at(prev, &outcome, opts)?;
    // Waiting for the reset continues the session the limit stopped, when there is one.
    let resumes = opts.at_reset
        && outcome
            .output
            .session_id
            .as_deref()
            .is_some_and(|s| !s.is_empty());
    let resumed_opts;
    let opts = if resumes && !opts.resume {
        resumed_opts = RetryOptions {
            resume: true,
            ..opts.clone()
        };
        &resumed_opts
    } else {
        opts
    };
    let mut warnings = Vec::new();

    // The environment: values from this process (or --env), by the recorded names and rules.
    let (mut req, missing) = env_request(prev, opts, sys);
    if !missing.is_empty() {
        let them = if missing.len() == 1 { "it" } else { "them" };
        warnings.push(format!(
            "attempt {n} had {} set, but this environment has no value for {them}: attempt {} runs without {them} (export {them}, or give retry {{env}} NAME=VALUE)",
            missing.join(", "),
            n + 1,
        ));
    }
    let resumed_from = next_task(prev, &outcome, opts, &mut req)?;

    // The program: for an agent its CLI (the adapter builds the rest again); for a command
    // its argv.
    let program = prev.argv.first().ok_or_else(|| Error::Damaged {
        path: found.paths.spec(),
        problem: "has an empty argv".into(),
    })?;
    let agent_cli = match req.agent {
        Some(_) => Some(program.clone()),
        None => {
            req.argv = prev.argv.clone();
            None
        }
    };
    // A --worktree run gets a worktree of its own for the new attempt, made from the
    // repository's HEAD of this moment; attempt n's (kept or removed) is left as it is. The
    // program was asked to run in the repository; one inside attempt n's worktree is named
    // from there, as `run --worktree -- ./PROGRAM` names it, and moves with the worktree.
    req.cwd = Some(match &prev.worktree {
        Some(wt) => {
            if let Some(first) = req.argv.first_mut()
                && let Some(moved) = in_repository(first, wt)
            {
                *first = moved;
            }
            super::worktree::program_dir(&crate::spec::WorktreeSpec {
                path: wt.repo.clone(),
                ..wt.clone()
            })
        }
        None => prev.cwd.clone(),
    });
    req.run_id = Some(run_id.to_string());
    req.labels = prev.labels.clone();
    req.correlation_id = prev.correlation_id.clone();
    req.keep_session = prev.keep_session;
    // Input as the attempt before had it (its keep-open is among the limits kept).
    req.stdin = Some(
        if prev.stdin == crate::spec::Stdin::Input {
            "pipe"
        } else {
            "null"
        }
        .into(),
    );
    let kept = Kept {
        attempt: n + 1,
        record: found.record.clone(),
        limits: prev.limits.clone(),
        lineage: prev.lineage.clone(),
        max_depth: prev.max_depth,
        group: prev.group.clone(),
        resumed_from,
        sandbox: SandboxRequest::of(&prev.sandbox, home).map(|mut s| {
            // A resumed session lives in the state directory it was saved in.
            s.continue_state = resumed_from.is_some();
            s
        }),
        git_time_limit_ms: prev.worktree.as_ref().and_then(|w| w.git_time_limit_ms),
        agent_cli,
    };
    let mut plan = plan_attempt(&req, Some(kept), home, sys)?;
    plan.spec.start_at = start_at;
    Ok(RetryPlan { plan, warnings })
}

/// When attempt *n+1* starts: at the reset of the usage limit attempt *n* ended at
/// (`at_reset`), or after the delay asked (`after`); `None`: at once.
fn start_at(
    prev: &AttemptSpec,
    outcome: &Envelope,
    opts: &RetryOptions,
) -> Result<Option<crate::spec::StartAt>, Error> {
    let (id, n) = (&prev.run_id, prev.attempt);
    let after = match &opts.after {
        Some(raw) => Some(
            crate::spec::parse_positive_duration("--after (`after`)", raw)
                .map_err(|e| Error::invalid(e.to_string()))?,
        ),
        None => None,
    };
    let at = |t: std::time::SystemTime, why: &str| crate::spec::StartAt {
        at: humantime::format_rfc3339_seconds(t).to_string(),
        why: why.to_owned(),
    };
    if !opts.at_reset {
        return Ok(after.map(|d| at(std::time::SystemTime::now() + d, "asked")));
    }
    if outcome.failure_kind != Some(crate::envelope::FailureKind::UsageLimit) {
        return Err(Error::invalid(format!(
            "--at-reset (`at_reset`) waits for a usage limit to reset, and attempt {n} of run `{id}` did not end at one (it ended {}): retry without it",
            outcome.how_it_ended()
        )));
    }
    if let Some(d) = after {
        return Ok(Some(at(std::time::SystemTime::now() + d, "usage limit")));
    }
    let reset = outcome
        .output
        .usage_limit
        .as_ref()
        .and_then(|u| u.retry_at.as_deref())
        .and_then(|t| humantime::parse_rfc3339_weak(t).ok());
    match reset {
        Some(t) => Ok(Some(at(t, "usage limit"))),
        None => Err(Error::invalid(format!(
            "attempt {n} of run `{id}` hit its usage limit, but its CLI said no time it resets (output.usage_limit.retry_at is null): say how long to wait with --after (`after`), e.g. 1h"
        ))),
    }
}

/// A program inside worktree `wt` of attempt *n*, named from the same place in the
/// repository as `run --worktree` names a program there (`./PROGRAM`, relative to the
/// cwd); `None` for a program elsewhere.
fn in_repository(program: &str, wt: &crate::spec::WorktreeSpec) -> Option<String> {
    let rest = Path::new(program).strip_prefix(&wt.path).ok()?;
    let from_cwd = match rest.strip_prefix(&wt.subdir) {
        Ok(below) => Path::new(".").join(below),
        Err(_) => wt
            .subdir
            .components()
            .map(|_| Path::new(".."))
            .collect::<std::path::PathBuf>()
            .join(rest),
    };
    Some(from_cwd.display().to_string())
}

/// The envelope of the latest attempt; an attempt without one has not finished.
fn previous_envelope(found: &Found, sys: &dyn System) -> Result<Envelope, Error> {
    let (id, n) = (&found.spec.run_id, found.spec.attempt);
    let path = found.paths.result();
    match sys.read_record(&path) {
        Ok(text) => serde_json::from_slice(&text).map_err(|e| Error::Damaged {
            path: path.clone(),
            problem: format!("cannot be read ({e})"),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Error::invalid(format!(
            "attempt {n} of run `{id}` has not finished: wait for it ({{@wait:{id}}}) or cancel it ({{@cancel:{id}}}), then retry"
        ))),
        Err(source) => Err(crate::store::StoreError::Read { path, source }.into()),
    }
}

/// The task of the next attempt, into `req` (the agent and its task settings, kept; the
/// task and the session, decided here; the planner checks them), and the attempt whose
/// session it continues.
fn next_task(
    prev: &AttemptSpec,
    outcome: &Envelope,
    opts: &RetryOptions,
    req: &mut RunRequest,
) -> Result<Option<u32>, Error> {
    let (id, n) = (&prev.run_id, prev.attempt);
    let Some(old) = prev
        .task
        .as_ref()
        .filter(|_| prev.agent != AgentKind::Command)
    else {
        if opts.resume {
            return Err(Error::invalid(format!(
                "{{resume}} continues an agent's session, and run `{id}` is a command: retry it without {{resume}}"
            )));
        }
        if opts.task.is_some() || opts.task_file.is_some() {
            return Err(Error::invalid(format!(
                "{{task}} is for agents, and run `{id}` is a command: retry it without {{task}}"
            )));
        }
        return Ok(None);
    };
    let given = opts.task.is_some() || opts.task_file.is_some();
    req.task = match (given, opts.resume) {
        (true, _) => opts.task.clone(),
        (false, true) => Some(DEFAULT_FOLLOW_UP.to_owned()),
        (false, false) => Some(old.prompt.clone()),
    };
    req.task_file = opts.task_file.clone();
    let (resume_session, resumed_from) = if opts.resume {
        let session = outcome
            .output
            .session_id
            .clone()
            .filter(|s| !s.is_empty())
            .ok_or_else(|| {
                Error::invalid(format!(
                    "attempt {n} of run `{id}` recorded no agent session (output.session_id is null), so there is nothing to resume: retry without {{resume}} to start over"
                ))
            })?;
        (Some(session), Some(n))
    } else {
        (old.resume_session.clone(), prev.resumed_from)
    };
    req.agent = Some(prev.agent);
    req.resume = resume_session;
    req.model = old.model.clone();
    req.system_prompt = old.system_prompt.clone();
    req.tools = old.tools.clone();
    req.thinking = old.thinking.clone();
    Ok(resumed_from)
}

/// The environment part of attempt *n+1*'s request (the planner's `environment` builds its
/// environment from it), and the recorded `set` names that got no value.
fn env_request(
    prev: &AttemptSpec,
    opts: &RetryOptions,
    sys: &dyn System,
) -> (RunRequest, Vec<String>) {
    let sandboxed = prev.sandbox.enabled;
    let vars = sys.vars();
    let mut env = BTreeMap::new();
    // Attempt n's `--env-plain` names stay plain; every other value stays secret.
    let mut env_plain = BTreeMap::new();
    let mut missing = Vec::new();
    for name in &prev.env.set {
        // Recomputed for every attempt, never looked up: the sandbox's, and an unsandboxed
        // agent's state directory of links (`agent_overlay`).
        let overlaid = prev.agent_overlay.as_ref().is_some_and(|o| &o.var == name);
        if (sandboxed && set_by_sandbox(name)) || overlaid {
            continue;
        }
        let into = if prev.env.plain.contains(name) {
            &mut env_plain
        } else {
            &mut env
        };
        if let Some(v) = opts.env.get(name) {
            into.insert(name.clone(), v.clone());
            continue;
        }
        match vars.iter().find(|(k, _)| k == name.as_str()) {
            Some((_, v)) => match v.to_str() {
                Some(v) => {
                    into.insert(name.clone(), v.to_owned());
                }
                // Inherited as it is; in a sandbox it cannot be passed by name and value.
                None if !sandboxed => {}
                None => missing.push(format!("{name} (not UTF-8)")),
            },
            None => missing.push(name.clone()),
        }
    }
    for (k, v) in &opts.env {
        if !env_plain.contains_key(k) {
            env.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    // In a sandbox: what attempt n was given from its caller, and what it was told to pass.
    let mut env_pass: Vec<String> = Vec::new();
    if sandboxed {
        for name in prev.env.passed.iter().chain(&prev.sandbox.env_pass) {
            if !env_pass.contains(name) {
                env_pass.push(name.clone());
            }
        }
    }
    let req = RunRequest {
        sandbox: sandboxed,
        env_pass,
        env,
        env_plain,
        // A worktree attempt's git must find its worktree, not a GIT_DIR of the caller's.
        worktree: prev.worktree.is_some(),
        ..RunRequest::default()
    };
    (req, missing)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::plan;
    use crate::app::plan::fake::{Fake, home};
    use crate::envelope::{FailureKind, Outcome, Output, Status, WorkerFacts, build};
    use crate::spec::{Network, RunRecord};
    use std::ffi::OsString;
    use std::path::PathBuf;

    /// Attempt 1 of `req` as if it had ended with `session` (and `status`), its result.json
    /// readable through `sys`.
    fn ended(req: &RunRequest, sys: &mut Fake, session: Option<&str>) -> Found {
        let p = plan(req, &home(), sys).unwrap();
        let found = found_of(p.record, p.spec);
        finish(&found, sys, session);
        found
    }

    fn found_of(record: RunRecord, spec: AttemptSpec) -> Found {
        Found {
            paths: home().attempt(&spec.run_id, spec.attempt),
            record,
            spec,
        }
    }

    fn finish(found: &Found, sys: &mut Fake, session: Option<&str>) {
        let output = Output {
            session_id: session.map(str::to_owned),
            ..Output::default()
        };
        let outcome = Outcome {
            status: Status::Failed,
            failure_kind: Some(FailureKind::Exit),
        };
        let env = build(
            &found.spec,
            &WorkerFacts::default(),
            output,
            outcome,
            vec![],
        );
        sys.files
            .insert(found.paths.result(), serde_json::to_string(&env).unwrap());
    }

    fn cmd(argv: &[&str]) -> RunRequest {
        RunRequest {
            argv: argv.iter().map(|s| (*s).to_owned()).collect(),
            ..RunRequest::default()
        }
    }

    fn agent(kind: AgentKind, task: &str) -> RunRequest {
        RunRequest {
            agent: Some(kind),
            task: Some(task.into()),
            ..RunRequest::default()
        }
    }

    fn fake_with_clis() -> Fake {
        let mut sys = Fake::new();
        for cli in ["pi", "claude", "codex"] {
            let p = PathBuf::from(format!("/usr/bin/{cli}"));
            sys.on_path.insert(cli.into(), p.clone());
            sys.programs.insert(p, true);
        }
        sys.programs.insert("/usr/bin/make".into(), true);
        sys
    }

    fn refused(found: &Found, opts: &RetryOptions, sys: &Fake) -> String {
        match plan_retry(found, opts, &home(), sys) {
            Err(Error::Invalid(m)) => m.to_string(),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    fn value<'a>(env: &'a [(OsString, OsString)], k: &str) -> Option<&'a str> {
        env.iter()
            .find(|(ek, _)| ek == k)
            .and_then(|(_, v)| v.to_str())
    }

    /// A plain retry repeats attempt 1 field for field: whatever `run` records (a flag added
    /// to the request, a rule of the sandbox policy, a variable removed), attempt 2 has the
    /// same, but for what names the attempt itself.
    #[test]
    fn a_retry_plans_what_run_planned_for_every_kind_of_request() {
        let mut sys = fake_with_clis();
        sys.dirs.push("/data".into());
        sys.dirs.push("/work/.git".into());
        sys.files.insert("/work/.git/config".into(), String::new());
        sys.files.insert("/work/secret".into(), String::new());
        sys.vars.push(("ANTHROPIC_API_KEY".into(), "k".into()));
        sys.vars.push(("GIT_DIR".into(), "/elsewhere".into()));
        // The value `--env MODE=ci` gave attempt 1, as the retrying shell has it.
        sys.vars.push(("MODE".into(), "ci".into()));
        let mut sandboxed_agent = agent(AgentKind::Claude, "hi");
        sandboxed_agent.sandbox = true;
        sandboxed_agent.network = Some("allow:api.example.com".into());
        sandboxed_agent.writable = vec!["/data".into()];
        sandboxed_agent.hide = vec!["secret".into()];
        sandboxed_agent.model = Some("m".into());
        sandboxed_agent.tools = vec!["Bash".into()];
        let mut full_command = cmd(&["make", "-j4"]);
        full_command.labels.insert("team".into(), "core".into());
        full_command.correlation_id = Some("c-1".into());
        full_command.timeout = Some("5m".into());
        full_command.idle_timeout = Some("30s".into());
        full_command.linger = Some("1s".into());
        full_command.grace = Some("2s".into());
        full_command.keep_session = true;
        full_command.max_depth = Some(2);
        full_command.env.insert("MODE".into(), "ci".into());
        let mut sandboxed_command = full_command.clone();
        sandboxed_command.sandbox = true;
        sandboxed_command.env_pass = vec!["ANTHROPIC_API_KEY".into()];
        for (i, req) in [sandboxed_agent, full_command, sandboxed_command]
            .into_iter()
            .enumerate()
        {
            assert_retry_repeats(&req, &mut sys, &format!("request {i}"));
        }
        // A sandboxed worktree run: its own worktree and branch, the same rules.
        let mut sys = fake_with_clis();
        sys.on_path.insert("git".into(), "/usr/bin/git".into());
        for d in ["/src/app", "/src/.git"] {
            sys.dirs.push(d.into());
        }
        sys.files.insert("/src/.git/config".into(), String::new());
        sys.repos.push(crate::git::RepoDirs {
            toplevel: "/src".into(),
            common_dir: "/src/.git".into(),
        });
        sys.cwd = "/src/app".into();
        sys.vars.push(("GIT_DIR".into(), "/elsewhere".into()));
        let mut wt = cmd(&["make"]);
        wt.worktree = true;
        wt.sandbox = true;
        assert_retry_repeats(&wt, &mut sys, "worktree");
    }

    fn assert_retry_repeats(req: &RunRequest, sys: &mut Fake, label: &str) {
        let found = ended(req, sys, None);
        let r = plan_retry(&found, &RetryOptions::default(), &home(), sys)
            .unwrap_or_else(|e| panic!("{label}: {e}"));
        let normal = |spec: &AttemptSpec| {
            let mut v = serde_json::to_value(spec).unwrap();
            for k in ["attempt", "created_at", "tmux"] {
                v[k] = serde_json::Value::Null;
            }
            serde_json::to_string(&v)
                .unwrap()
                .replace("/attempts/1/", "/attempts/N/")
                .replace("/attempts/2/", "/attempts/N/")
                .replace("worktrees/generated-1-1", "worktrees/generated-1-N")
                .replace("worktrees/generated-1-2", "worktrees/generated-1-N")
                .replace("\"subpane/generated-1-2\"", "\"subpane/generated-1\"")
        };
        assert_eq!(
            normal(&found.spec),
            normal(&r.plan.spec),
            "{label}: attempt 2 differs from attempt 1"
        );
        assert_eq!(r.plan.spec.attempt, 2);
        assert_eq!(r.plan.spec.tmux.session, "generated-1-2");
        let names = |env: &[(OsString, OsString)]| -> Vec<OsString> {
            let mut v: Vec<OsString> = env.iter().map(|(k, _)| k.clone()).collect();
            v.sort();
            v
        };
        let first = plan(req, &home(), sys).unwrap();
        assert_eq!(names(&first.env), names(&r.plan.env), "{label}");
    }

    #[test]
    fn a_command_is_retried_as_the_next_attempt_with_everything_kept() {
        let mut sys = fake_with_clis();
        let mut req = cmd(&["make", "test"]);
        req.labels.insert("team".into(), "core".into());
        req.correlation_id = Some("c-1".into());
        req.timeout = Some("10m".into());
        req.keep_session = true;
        let found = ended(&req, &mut sys, None);
        let r = plan_retry(&found, &RetryOptions::default(), &home(), &sys).unwrap();
        let (old, new) = (&found.spec, &r.plan.spec);
        assert_eq!(new.attempt, 2);
        assert_eq!(new.tmux.session, "generated-1-2");
        assert_eq!(new.argv, ["/usr/bin/make", "test"]);
        assert_eq!(new.cwd, old.cwd);
        assert_eq!(new.limits, old.limits);
        assert_eq!(new.labels, old.labels);
        assert_eq!(new.correlation_id.as_deref(), Some("c-1"));
        assert!(new.keep_session);
        assert_eq!((new.group.clone(), new.lineage.clone()), (None, None));
        assert_eq!(new.resumed_from, None);
        assert_eq!(new.task, None);
        assert_eq!(r.plan.prompt, None);
        let listed: Vec<u32> = r.plan.record.attempts.iter().map(|a| a.attempt).collect();
        assert_eq!(listed, [1, 2]);
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
        // Attempt 3 follows attempt 2, once 2 has finished.
        let mut sys2 = sys;
        let second = found_of(r.plan.record.clone(), r.plan.spec.clone());
        finish(&second, &mut sys2, None);
        let r3 = plan_retry(&second, &RetryOptions::default(), &home(), &sys2).unwrap();
        assert_eq!(r3.plan.spec.attempt, 3);
        assert_eq!(r3.plan.spec.tmux.session, "generated-1-3");
        // Only from the latest: attempt 1 of a run that has attempt 2 is refused.
        let stale = Found {
            record: r.plan.record.clone(),
            ..found
        };
        let m = refused(&stale, &RetryOptions::default(), &sys2);
        assert!(m.contains("latest attempt") && m.contains("(2)"), "{m}");
    }

    #[test]
    fn environment_values_come_from_the_retrying_process() {
        let mut sys = fake_with_clis();
        let mut req = cmd(&["make"]);
        req.env.insert("API_BASE".into(), "http://old".into());
        req.env.insert("TOKEN".into(), "old-secret".into());
        sys.vars.push(("GONE_LATER".into(), "1".into()));
        let found = ended(&req, &mut sys, None);
        assert_eq!(found.spec.env.set, ["API_BASE", "TOKEN"]);
        // The retrying process has API_BASE but not TOKEN, and its own other variables.
        sys.vars.retain(|(k, _)| k != "GONE_LATER");
        sys.vars.push(("API_BASE".into(), "http://new".into()));
        sys.vars.push(("EDITOR".into(), "vi".into()));
        let r = plan_retry(&found, &RetryOptions::default(), &home(), &sys).unwrap();
        let env = &r.plan.env;
        assert_eq!(value(env, "API_BASE"), Some("http://new"));
        assert_eq!(value(env, "TOKEN"), None, "never the recorded value");
        assert_eq!(value(env, "EDITOR"), Some("vi"), "inherited");
        assert_eq!(value(env, "GONE_LATER"), None);
        assert_eq!(value(env, "TMUX"), None, "removed as the record says");
        assert_eq!(r.plan.spec.env.set, ["API_BASE"]);
        assert!(r.plan.spec.env.inherit);
        assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
        assert!(
            r.warnings[0].contains("TOKEN") && !r.warnings[0].contains("API_BASE"),
            "{:?}",
            r.warnings
        );
        assert!(
            r.warnings[0].contains("{env} NAME=VALUE"),
            "{:?}",
            r.warnings
        );
        // --env gives a value (and may add a name); no record or Debug string holds one.
        let opts = RetryOptions {
            env: [
                ("TOKEN".into(), "new-secret".into()),
                ("MORE".into(), "m".into()),
            ]
            .into(),
            ..RetryOptions::default()
        };
        let r = plan_retry(&found, &opts, &home(), &sys).unwrap();
        assert_eq!(value(&r.plan.env, "TOKEN"), Some("new-secret"));
        assert_eq!(value(&r.plan.env, "MORE"), Some("m"));
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
        assert_eq!(r.plan.spec.env.set, ["API_BASE", "MORE", "TOKEN"]);
        let shown = format!(
            "{:?} {opts:?} {}",
            r.plan,
            serde_json::to_string(&r.plan.spec).unwrap()
        );
        assert!(
            !shown.contains("new-secret") && !shown.contains("http://new"),
            "{shown}"
        );
    }

    #[test]
    fn unfinished_attempts_and_impossible_resumes_are_refused() {
        let mut sys = fake_with_clis();
        // No result.json: still running (or starting).
        let p = plan(&cmd(&["make"]), &home(), &sys).unwrap();
        let running = found_of(p.record, p.spec);
        let m = refused(&running, &RetryOptions::default(), &sys);
        assert!(
            m.contains("attempt 1 of run `generated-1` has not finished"),
            "{m}"
        );
        assert!(m.contains("subpane wait generated-1"), "{m}");
        // A command has no session, and takes no task.
        finish(&running, &mut sys, None);
        let resume = RetryOptions {
            resume: true,
            ..RetryOptions::default()
        };
        let m = refused(&running, &resume, &sys);
        assert!(
            m.contains("is a command") && m.contains("without --resume"),
            "{m}"
        );
        let task = RetryOptions {
            task: Some("again".into()),
            ..RetryOptions::default()
        };
        assert!(refused(&running, &task, &sys).contains("--task is for agents"));
        // An agent whose attempt recorded no session has nothing to resume.
        let no_session = ended(&agent(AgentKind::Claude, "hi"), &mut sys, None);
        let m = refused(&no_session, &resume, &sys);
        assert!(m.contains("recorded no agent session"), "{m}");
        // A directory, a program or a task that run would refuse: see
        // a_retry_is_refused_by_the_planners_own_rules.
    }

    fn invalid<T: std::fmt::Debug>(r: Result<T, Error>) -> crate::app::Invalid {
        match r {
            Err(Error::Invalid(i)) => i,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    /// A retry is checked by the planner's rules, not copies of them: what `run` refuses
    /// (a cwd gone, a program gone, an empty task, a worktree without git) the retry refuses
    /// with the same field and problem; what the attempt kept says which run and attempt it
    /// comes from, since the caller of `retry` did not name it.
    #[test]
    fn a_retry_is_refused_by_the_planners_own_rules() {
        let mut sys = fake_with_clis();
        let again = RetryOptions::default();
        let kept = "; attempt 1 of run `generated-1` ran there, and a retry keeps it: to change it, start a new run (`subpane run`)";
        // The cwd is gone, or is a file now.
        let found = ended(&cmd(&["make"]), &mut sys, None);
        let at_work = RunRequest {
            cwd: Some("/work".into()),
            ..cmd(&["make"])
        };
        sys.dirs.retain(|d| d != Path::new("/work"));
        let run = invalid(plan(&at_work, &home(), &sys));
        let retry = invalid(plan_retry(&found, &again, &home(), &sys));
        assert_eq!(
            (retry.field, &retry.problem, run.hint),
            (Some("cwd"), &run.problem, None)
        );
        assert_eq!(
            retry.to_string(),
            format!("--cwd `/work` cannot be used: entity not found{kept}")
        );
        assert_eq!(
            retry.render(crate::app::Spell::Field),
            format!("`cwd` `/work` cannot be used: entity not found{kept}")
                .replace("`subpane run`", "the `run` tool")
        );
        sys.files.insert("/work".into(), String::new());
        let run = invalid(plan(&at_work, &home(), &sys));
        let retry = invalid(plan_retry(&found, &again, &home(), &sys));
        assert_eq!((retry.field, &retry.problem), (Some("cwd"), &run.problem));
        assert_eq!(
            retry.to_string(),
            format!("--cwd `/work` is not a directory{kept}")
        );
        sys.files.remove(Path::new("/work"));
        sys.dirs.push("/work".into());
        // The program is no longer executable, or gone.
        let by_path = cmd(&["/usr/bin/make"]);
        for now in [Some(false), None] {
            match now {
                Some(x) => sys.programs.insert("/usr/bin/make".into(), x),
                None => sys.programs.remove(Path::new("/usr/bin/make")),
            };
            let run = invalid(plan(&by_path, &home(), &sys));
            let retry = invalid(plan_retry(&found, &again, &home(), &sys));
            assert_eq!((retry.field, &retry.problem), (None, &run.problem));
            assert!(
                retry.to_string().starts_with("`/usr/bin/make` ")
                    && retry
                        .to_string()
                        .ends_with(&kept.replace("ran there", "ran it")),
                "{retry}"
            );
        }
        sys.programs.insert("/usr/bin/make".into(), true);
        // An agent's CLI gone: where to get it, too.
        let claude = ended(&agent(AgentKind::Claude, "hi"), &mut sys, None);
        sys.programs.remove(Path::new("/usr/bin/claude"));
        let m = invalid(plan_retry(&claude, &again, &home(), &sys)).to_string();
        assert!(
            m.starts_with("`/usr/bin/claude` does not exist")
                && m.contains("npm install -g @anthropic-ai/claude-code")
                && m.contains("attempt 1 of run `generated-1` ran it"),
            "{m}"
        );
        sys.programs.insert("/usr/bin/claude".into(), true);
        // An empty task (the caller's own: nothing kept to explain).
        let pi = ended(&agent(AgentKind::Pi, "hi"), &mut sys, Some("s-1"));
        let run = invalid(plan(&agent(AgentKind::Pi, " "), &home(), &sys));
        for resume in [true, false] {
            let empty = RetryOptions {
                resume,
                task: Some(" ".into()),
                ..RetryOptions::default()
            };
            let retry = invalid(plan_retry(&pi, &empty, &home(), &sys));
            assert_eq!(retry, run);
            assert_eq!(retry.field, Some("task"));
            assert_eq!(
                retry.to_string(),
                "--task is empty; say what the agent should do"
            );
        }
        // A task file that cannot be read, by the same rule.
        let missing = RetryOptions {
            task_file: Some("gone.md".into()),
            ..RetryOptions::default()
        };
        let retry = invalid(plan_retry(&pi, &missing, &home(), &sys));
        assert_eq!(retry.field, Some("task_file"), "{retry}");
        // A worktree run, and git is gone from PATH.
        let mut sys = fake_with_clis();
        sys.on_path.insert("git".into(), "/usr/bin/git".into());
        sys.dirs.push("/src/.git".into());
        sys.repos.push(crate::git::RepoDirs {
            toplevel: "/src".into(),
            common_dir: "/src/.git".into(),
        });
        let wt = RunRequest {
            worktree: true,
            cwd: Some("/src".into()),
            ..cmd(&["make"])
        };
        let found = ended(&wt, &mut sys, None);
        sys.on_path.remove("git");
        let run = invalid(plan(&wt, &home(), &sys));
        let retry = invalid(plan_retry(&found, &again, &home(), &sys));
        assert_eq!((retry.field, &retry.problem), (run.field, &run.problem));
        assert!(
            retry
                .to_string()
                .contains("attempt 1 of run `generated-1` ran in a worktree of its repository"),
            "{retry}"
        );
    }

    /// A program inside attempt *n*'s worktree is checked in the repository, where the new
    /// worktree is made from, and runs from the same place in the new worktree.
    #[test]
    fn a_program_in_the_worktree_moves_with_it() {
        let mut sys = fake_with_clis();
        sys.on_path.insert("git".into(), "/usr/bin/git".into());
        for d in ["/src/app", "/src/.git"] {
            sys.dirs.push(d.into());
        }
        sys.repos.push(crate::git::RepoDirs {
            toplevel: "/src".into(),
            common_dir: "/src/.git".into(),
        });
        for (given, in_repo) in [
            ("./build.sh", "/src/app/build.sh"),
            // (The fake machine compares paths as written.)
            ("../tools/x.sh", "/src/app/../tools/x.sh"),
        ] {
            sys.programs.insert(in_repo.into(), true);
            let req = RunRequest {
                worktree: true,
                cwd: Some("/src/app".into()),
                ..cmd(&[given, "-v"])
            };
            let found = ended(&req, &mut sys, None);
            let first = Path::new(&found.spec.argv[0]);
            assert!(first.starts_with("/h/worktrees/generated-1-1"), "{first:?}");
            let r = plan_retry(&found, &RetryOptions::default(), &home(), &sys).unwrap();
            let second = &r.plan.spec.argv;
            assert_eq!(
                Path::new(&second[0]),
                Path::new("/h/worktrees/generated-1-2")
                    .join(first.strip_prefix("/h/worktrees/generated-1-1").unwrap()),
                "{given}"
            );
            assert_eq!(second[1], "-v");
            // Gone from the repository: refused as `run` refuses it.
            sys.programs.remove(Path::new(in_repo));
            let m = invalid(plan_retry(&found, &RetryOptions::default(), &home(), &sys));
            assert!(m.problem.contains("does not exist"), "{m}");
        }
    }

    #[test]
    fn a_sandboxed_resume_continues_the_state_directory_the_session_was_saved_in() {
        let mut sys = fake_with_clis();
        let mut req = agent(AgentKind::Claude, "hi");
        req.sandbox = true;
        let found = ended(&req, &mut sys, Some("sess-7"));
        let first = found.spec.sandbox.agent_state.clone().unwrap();
        assert_eq!(
            first.dir,
            PathBuf::from("/h/runs/generated-1/attempts/1/agent")
        );
        let resume = RetryOptions {
            resume: true,
            ..RetryOptions::default()
        };
        let r = plan_retry(&found, &resume, &home(), &sys).unwrap();
        let sb = &r.plan.spec.sandbox;
        assert_eq!(sb.agent_state.as_ref(), Some(&first));
        assert!(sb.writable.contains(&first.dir));
        // A retry that starts over gets a directory of its own, from the same seed.
        let r = plan_retry(&found, &RetryOptions::default(), &home(), &sys).unwrap();
        let state = r.plan.spec.sandbox.agent_state.unwrap();
        assert_eq!(
            state.dir,
            PathBuf::from("/h/runs/generated-1/attempts/2/agent")
        );
        assert_eq!(state.seeded_from, first.seeded_from);
    }

    #[test]
    fn resume_continues_the_previous_attempts_session() {
        for kind in [AgentKind::Pi, AgentKind::Claude, AgentKind::Codex] {
            let mut sys = fake_with_clis();
            let mut req = agent(kind, "Remember BANANA-42.");
            req.model = Some("m-1".into());
            let found = ended(&req, &mut sys, Some("sess-7"));
            let opts = RetryOptions {
                resume: true,
                task: Some("Which word?".into()),
                ..RetryOptions::default()
            };
            let r = plan_retry(&found, &opts, &home(), &sys).unwrap();
            let s = &r.plan.spec;
            let t = s.task.as_ref().unwrap();
            assert_eq!(t.resume_session.as_deref(), Some("sess-7"), "{kind:?}");
            assert_eq!(t.prompt, "Which word?");
            assert_eq!(t.model.as_deref(), Some("m-1"), "task settings are kept");
            assert_eq!(s.resumed_from, Some(1));
            assert_eq!(r.plan.prompt.as_deref(), Some("Which word?"));
            // The envelope says so.
            let outcome = Outcome {
                status: Status::Completed,
                failure_kind: None,
            };
            let e = build(
                s,
                &WorkerFacts::default(),
                Output::default(),
                outcome,
                vec![],
            );
            assert_eq!((e.attempt, e.resumed_from), (2, Some(1)));
            // The adapter's argv carries the session (Codex's app-server is told on stdin,
            // by `thread/resume`), and the task the follow-up.
            let argv = s.argv.join(" ");
            let resumed = match kind {
                AgentKind::Pi => "--session sess-7",
                AgentKind::Claude => "--resume=sess-7",
                _ => "app-server",
            };
            assert!(argv.contains(resumed), "{kind:?}: {argv}");
            let session = s.task.as_ref().and_then(|t| t.resume_session.as_deref());
            assert_eq!(session, Some("sess-7"), "{kind:?}");
            // The follow-up: on the command line, or (an input mode) the first message.
            let t = s.task.as_ref().unwrap();
            assert!(
                argv.contains("Which word?") || (t.input && t.prompt == "Which word?"),
                "{argv}"
            );
            assert!(!argv.contains("BANANA"), "{argv}");
            // Without --task: the default follow-up.
            let bare = RetryOptions {
                resume: true,
                ..RetryOptions::default()
            };
            let r = plan_retry(&found, &bare, &home(), &sys).unwrap();
            assert_eq!(r.plan.prompt.as_deref(), Some(DEFAULT_FOLLOW_UP));
        }
    }

    #[test]
    fn a_plain_retry_repeats_the_task_in_a_new_session() {
        let mut sys = fake_with_clis();
        sys.files
            .insert("/work/next.md".into(), "do it better".into());
        let found = ended(&agent(AgentKind::Claude, "do it"), &mut sys, Some("sess-1"));
        let r = plan_retry(&found, &RetryOptions::default(), &home(), &sys).unwrap();
        let t = r.plan.spec.task.as_ref().unwrap();
        assert_eq!(
            (t.prompt.as_str(), t.resume_session.as_deref()),
            ("do it", None)
        );
        assert_eq!(r.plan.spec.resumed_from, None);
        // A task file (the command line's --task @FILE) replaces the task; a task is text.
        let opts = RetryOptions {
            task_file: Some("next.md".into()),
            ..RetryOptions::default()
        };
        let r = plan_retry(&found, &opts, &home(), &sys).unwrap();
        assert_eq!(r.plan.prompt.as_deref(), Some("do it better"));
        let opts = RetryOptions {
            task: Some("@next.md".into()),
            ..RetryOptions::default()
        };
        let r = plan_retry(&found, &opts, &home(), &sys).unwrap();
        assert_eq!(r.plan.prompt.as_deref(), Some("@next.md"));
        // A retry of attempt 2, which resumed attempt 1, resumes the same session again.
        let opts = RetryOptions {
            resume: true,
            ..RetryOptions::default()
        };
        let second = plan_retry(&found, &opts, &home(), &sys).unwrap().plan;
        let second = found_of(second.record, second.spec);
        finish(&second, &mut sys, Some("sess-1"));
        let third = plan_retry(&second, &RetryOptions::default(), &home(), &sys).unwrap();
        let s = &third.plan.spec;
        assert_eq!(s.attempt, 3);
        assert_eq!(s.resumed_from, Some(1));
        assert_eq!(
            s.task.as_ref().unwrap().resume_session.as_deref(),
            Some("sess-1")
        );
        assert_eq!(third.plan.prompt.as_deref(), Some(DEFAULT_FOLLOW_UP));
    }

    #[test]
    fn the_sandbox_is_recomputed_for_the_new_attempt() {
        let mut sys = fake_with_clis();
        sys.dirs.push("/data".into());
        sys.vars.push(("ANTHROPIC_API_KEY".into(), "k1".into()));
        sys.vars.push(("GITHUB_TOKEN".into(), "gh1".into()));
        sys.vars.push(("SECRET".into(), "s".into()));
        sys.vars.push(("TMPDIR".into(), "/host/tmp".into()));
        let mut req = agent(AgentKind::Claude, "hi");
        req.sandbox = true;
        req.network = Some("allow:api.example.com".into());
        req.writable = vec!["/data".into()];
        req.env_pass = vec!["GITHUB_TOKEN".into()];
        req.env.insert("MODE".into(), "ci".into());
        let found = ended(&req, &mut sys, Some("s"));
        assert!(found.spec.env.set.contains(&"TMPDIR".to_owned()));
        // The retrying process: new key values, another TMPDIR, a new escape socket, and
        // claude's state directory moved (the run keeps the one it was seeded from).
        sys.vars
            .retain(|(k, _)| k != "ANTHROPIC_API_KEY" && k != "GITHUB_TOKEN");
        sys.vars.push(("ANTHROPIC_API_KEY".into(), "k2".into()));
        sys.vars.push(("GITHUB_TOKEN".into(), "gh2".into()));
        sys.vars.push(("MODE".into(), "ci2".into()));
        sys.vars
            .push(("CLAUDE_CONFIG_DIR".into(), "/cfg/claude".into()));
        sys.vars
            .push(("SSH_AUTH_SOCK".into(), "/run/ssh/agent".into()));
        sys.files.insert("/run/ssh/agent".into(), String::new());
        let r = plan_retry(&found, &RetryOptions::default(), &home(), &sys).unwrap();
        let env = &r.plan.env;
        assert_eq!(value(env, "ANTHROPIC_API_KEY"), Some("k2"));
        assert_eq!(value(env, "GITHUB_TOKEN"), Some("gh2"));
        assert_eq!(value(env, "MODE"), Some("ci2"));
        assert_eq!(
            value(env, "TMPDIR"),
            Some("/tmp"),
            "recomputed, not the host's"
        );
        let url = format!("http://127.0.0.1:{}", crate::sandbox::PROXY_PORT);
        assert_eq!(value(env, "HTTPS_PROXY"), Some(url.as_str()));
        assert_eq!(value(env, "SECRET"), None, "not passed into the sandbox");
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
        let (old, new) = (&found.spec.sandbox, &r.plan.spec.sandbox);
        assert!(new.enabled && !r.plan.spec.env.inherit);
        assert_eq!(
            new.network,
            Network::parse("allow:api.example.com").unwrap()
        );
        assert_eq!(new.env_pass, ["GITHUB_TOKEN"]);
        assert!(
            new.writable
                .contains(&"/h/runs/generated-1/attempts/2/out".into())
        );
        assert!(
            !new.writable
                .iter()
                .any(|p| p.starts_with("/h/runs/generated-1/attempts/1"))
        );
        for kept in ["/work", "/data"] {
            assert!(
                new.writable.contains(&kept.into()),
                "{kept}: {:?}",
                new.writable
            );
        }
        assert!(
            new.writable
                .contains(&"/h/runs/generated-1/attempts/2/agent".into()),
            "{:?}",
            new.writable
        );
        let state = new.agent_state.as_ref().unwrap();
        assert_eq!(state.seeded_from, PathBuf::from("/root/.claude"));
        assert_eq!(
            value(env, "CLAUDE_CONFIG_DIR"),
            Some("/h/runs/generated-1/attempts/2/agent")
        );
        // The proxy socket is the new attempt's; the rest is made by the same rules.
        let swap = |p: &PathBuf| -> PathBuf {
            p.to_string_lossy()
                .replace("/attempts/1/", "/attempts/2/")
                .into()
        };
        assert_eq!(
            new.read_only,
            old.read_only.iter().map(swap).collect::<Vec<_>>()
        );
        assert!(
            new.read_only
                .contains(&"/h/runs/generated-1/attempts/2/proxy.sock".into())
        );
        assert_eq!(new.asked, old.asked);
        assert!(new.hidden.contains(&"/tmp/tmux-0/subpane".into()));
        assert!(
            new.hidden.contains(&"/run/ssh/agent".into()),
            "{:?}",
            new.hidden
        );
        assert!(
            r.plan.spec.env.passed.contains(&"GITHUB_TOKEN".to_owned())
                && r.plan
                    .spec
                    .env
                    .passed
                    .contains(&"ANTHROPIC_API_KEY".to_owned())
        );
    }
}
