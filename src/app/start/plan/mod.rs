//! From a [`RunRequest`] to a [`Plan`]: every rule of valid input, in one function.
//!
//! The plan looks at the world only through [`System`] (the current directory, files named
//! with `@FILE` or `--cwd`, `PATH` lookups, the clock), so each rule has a unit test with a
//! fake system and no tmux server. Nothing is created here.
//!
//! ```text
//!  RunRequest ─► run id, limits, cwd ─► lineage.rs (depth, chain) ─► env.rs (what passes)
//!   (+ Kept)  ─► program.rs (program or agent CLI on PATH, @FILE, E2BIG) ─► worktree
//!             ─► policy.rs (what the sandbox was asked) ─► Resolved
//!  Resolved ─► assemble.rs: adapter argv (paths of attempt n), agent state, policy.rs
//!             (the attempt's sandbox policy) ─► Plan
//! ```
//!
//! A retry (retry.rs) comes the same way: a request of what attempt *n+1* runs, and what it
//! [`Kept`] from attempt *n* as it is (limits, lineage, group, the sandbox as asked, the
//! agent CLI, the run's record). Every check of the rest is made here, once, for both.
//!
//! Common pitfalls:
//! * The program is looked up on the PATH it will run with (after `--env PATH=…`); tmux on
//!   the caller's own.
//! * Paths in the sandbox policy must exist when the helper applies them: refuse missing
//!   `--writable`/`--hide` here, and leave creating an agent's state directory to the
//!   launcher.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::adapter::{ArgvContext, BASE_ENV, adapter_for, env_allowed};
use crate::app::{Error, Invalid, RunRequest, worktree};
use crate::envelope::BudgetLimit;
use crate::git::{REPO_VARS, RepoDirs};
use crate::spec::{
    AgentKind, AttemptRef, AttemptSpec, DEFAULT_MAX_DEPTH, EnvSpec, Limits, Lineage, Network,
    RUN_SCHEMA, RunId, RunRecord, SPEC_SCHEMA, SandboxSpec, Stdin, TaskSpec, TmuxTarget, millis,
    parse_duration, parse_positive_duration,
};
use crate::store::Home;
use crate::tmux;

/// Variables removed from the program's environment: it must not talk to the user's tmux.
const REMOVED_VARS: [&str; 2] = ["TMUX", "TMUX_PANE"];

/// Linux refuses one argument of 128 KiB or more (`MAX_ARG_STRLEN`, with its NUL).
pub const MAX_ARG_BYTES: usize = 128 * 1024 - 1;

mod agent_state;
mod assemble;
mod env;
#[cfg(test)]
pub(in crate::app) mod fake;
mod git_view;
mod guard;
mod lineage;
mod policy;
mod program;
mod session;
mod system;
#[cfg(test)]
mod tests;

pub(in crate::app) use assemble::{Resolved, assemble};
pub(in crate::app) use env::{environment, passes_into_sandbox, set_by_sandbox};
pub(in crate::app) use guard::in_machine_tree;
pub(in crate::app) use policy::{SandboxRequest, escape_sockets, resolved};
pub(in crate::app) use program::{check_exec_size, text_or_file};
pub use system::{RealSystem, System};

use lineage::lineage;
use policy::sandbox_request;
use program::{Program, program};

/// A request made valid and complete: the launcher needs nothing else.
#[derive(Clone, PartialEq, Eq)]
pub struct Plan {
    /// `run.json` of a new run.
    pub record: RunRecord,
    /// `spec.json` of the attempt.
    pub spec: AttemptSpec,
    /// The program's environment. Values: only ever written to the one-shot environment file.
    pub env: Vec<(OsString, OsString)>,
    /// The task, written to `prompt.txt`.
    pub prompt: Option<String>,
    /// What was taken but is worth saying (`{field}` names a field: the edge spells it).
    pub warnings: Vec<String>,
}

impl std::fmt::Debug for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plan")
            .field("record", &self.record)
            .field("spec", &self.spec)
            .field("env", &self.env.iter().map(|(k, _)| k).collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// The value of variable `name` in an environment.
pub(in crate::app) fn var_in(vars: &[(OsString, OsString)], name: &str) -> Option<OsString> {
    vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
}

pub(in crate::app) fn limits(req: &RunRequest) -> Result<Limits, Error> {
    let positive = |flag: &str, v: &Option<String>| -> Result<Option<u64>, Error> {
        v.as_deref()
            .map(|t| {
                parse_positive_duration(flag, t)
                    .map(millis)
                    .map_err(Error::from)
            })
            .transpose()
    };
    let any = |flag: &str, v: &Option<String>, default: u64| -> Result<u64, Error> {
        v.as_deref()
            .map(|t| parse_duration(flag, t).map(millis).map_err(Error::from))
            .transpose()
            .map(|v| v.unwrap_or(default))
    };
    let d = Limits::default();
    let mut limits = Limits {
        timeout_ms: positive("timeout", &req.timeout)?,
        idle_timeout_ms: positive("idle_timeout", &req.idle_timeout)?,
        linger_ms: any("linger", &req.linger, d.linger_ms)?,
        grace_ms: any("grace", &req.grace, d.grace_ms)?,
        keep_open_ms: positive("keep_open", &req.keep_open)?,
        ..d
    };
    budget(req, &mut limits)?;
    Ok(limits)
}

/// The usage budget of a request: each limit above zero, and only for a figure the agent's
/// CLI reports as it goes (none for a command, which reports no usage).
fn budget(req: &RunRequest, limits: &mut Limits) -> Result<(), Error> {
    let agent = req.agent.unwrap_or(AgentKind::Command);
    let live = |limit: BudgetLimit| -> Result<(), Error> {
        match adapter_for(agent).not_live(limit) {
            None => Ok(()),
            Some(why) => {
                let other = match agent {
                    AgentKind::Claude => {
                        "; Claude Code's tokens are: use {max_tokens}, or give {price} to cost them"
                    }
                    AgentKind::Codex | AgentKind::Command | AgentKind::Pi => "",
                };
                Err(Invalid::new(
                    limit.as_str(),
                    format!(
                        "cannot be enforced for {}: {why}{other}",
                        match agent {
                            AgentKind::Command => "a command",
                            a => a.as_str(),
                        }
                    ),
                )
                .into())
            }
        }
    };
    let count = |limit: BudgetLimit, v: Option<u32>| -> Result<Option<u64>, Error> {
        match v {
            Some(0) => Err(Invalid::new(limit.as_str(), "must be greater than zero").into()),
            Some(n) => live(limit).map(|()| Some(u64::from(n))),
            None => Ok(None),
        }
    };
    limits.price = match &req.price {
        Some(p) => Some(
            p.parse::<crate::spec::Price>()
                .map_err(|e| Invalid::new("price", e))?,
        ),
        None => None,
    };
    // A price costs the tokens: a cost limit holds where the tokens come as they go.
    let priced = limits.price.is_some();
    let live = |limit: BudgetLimit| match limit {
        BudgetLimit::MaxCost
            if priced
                && adapter_for(agent)
                    .not_live(BudgetLimit::MaxTokens)
                    .is_none() =>
        {
            Ok(())
        }
        l => live(l),
    };
    limits.max_turns = count(BudgetLimit::MaxTurns, req.max_turns)?;
    limits.max_tokens = count(BudgetLimit::MaxTokens, req.max_tokens)?;
    limits.max_cost_usd = match req.max_cost {
        Some(c) => {
            positive_cost(c)?;
            live(BudgetLimit::MaxCost).map(|()| Some(c))?
        }
        None => None,
    };
    Ok(())
}

/// A `max_cost` (a run's, or a fan-out group's) is an amount above zero.
pub(in crate::app) fn positive_cost(c: crate::spec::Usd) -> Result<(), Invalid> {
    if c.0.is_finite() && c.0 > 0.0 {
        return Ok(());
    }
    Err(Invalid::new(
        "max_cost",
        format!(
            "must be an amount in US dollars greater than zero, not {}",
            c.0
        ),
    ))
}

/// A budget of an attempt that resumes a session counts the whole session: what its earlier
/// attempts here used. Refused when that alone is past a limit (nothing is left).
fn session_budget(req: &RunRequest, home: &Home, limits: &mut Limits) -> Result<(), Error> {
    limits.session_before = None;
    let (Some(session), Some(agent)) = (&req.resume, req.agent) else {
        return Ok(());
    };
    if !crate::envelope::Budget::new(limits).any() {
        return Ok(());
    }
    limits.session_before = session::used_before(home, agent, session);
    match crate::envelope::Budget::new(limits).spent_before() {
        None => Ok(()),
        Some(hit) => Err(Invalid::new(
            hit.limit.as_str(),
            format!(
                "the session `{session}` it resumes has spent it already in its earlier \
                 attempts ({})",
                hit.words()
            ),
        )
        .hint(format!(
            "to go on, resume it in a new run with a larger budget (`--resume {session}`)"
        ))
        .into()),
    }
}

/// What a further attempt of a run keeps from the attempt before it, as `retry` decided it
/// (retry.rs): taken as it is. Everything else comes from the request and passes the same
/// checks as attempt 1's: the cwd, the program, the task, the worktree, the environment.
pub(in crate::app) struct Kept {
    pub(in crate::app) attempt: u32,
    pub(in crate::app) record: RunRecord,
    pub(in crate::app) limits: Limits,
    pub(in crate::app) lineage: Option<Lineage>,
    pub(in crate::app) max_depth: u32,
    pub(in crate::app) group: Option<String>,
    pub(in crate::app) resumed_from: Option<u32>,
    /// What the run asked of the sandbox, its paths as recorded (never resolved again from
    /// the retrying directory); `None` unsandboxed.
    pub(in crate::app) sandbox: Option<SandboxRequest>,
    pub(in crate::app) git_time_limit_ms: Option<u64>,
    /// The agent CLI the attempt before ran (checked where it is, not looked up on PATH).
    pub(in crate::app) agent_cli: Option<String>,
}

impl Kept {
    /// `e`, refusing something the attempt keeps (it `did` it: "ran there"), with the run
    /// and attempt it comes from: the request named in `e` is that attempt's, not the
    /// caller's.
    pub(in crate::app) fn refused(&self, e: Error, did: &str) -> Error {
        let why = format!(
            "attempt {} of run `{}` {did}, and a retry keeps it: to change it, start a new run ({{@run}})",
            self.attempt - 1,
            self.record.run_id
        );
        with_hint(e, why)
    }
}

/// `e` with `hint` after the hint it has (what to do); other errors as they are.
pub(in crate::app) fn with_hint(e: Error, hint: impl Into<String>) -> Error {
    let Error::Invalid(mut i) = e else { return e };
    let hint = hint.into();
    i.hint = Some(match i.hint.take() {
        Some(h) => format!("{h}; {hint}"),
        None => hint,
    });
    Error::Invalid(i)
}

/// `e` as `kept` words it (see [`Kept::refused`]); as it is for a first attempt.
pub(in crate::app) fn kept_refused(kept: Option<&Kept>, e: Error, did: &str) -> Error {
    match kept {
        Some(k) => k.refused(e, did),
        None => e,
    }
}

/// Checks and completes a request for attempt 1 of a new run. Creates nothing.
pub fn plan(req: &RunRequest, home: &Home, sys: &dyn System) -> Result<Plan, Error> {
    plan_attempt(req, None, home, sys)
}

/// Checks and completes a request: for attempt 1 of a new run, or (`kept`) for the next
/// attempt of a run, which `retry` made from what its latest attempt had. Creates nothing.
pub(in crate::app) fn plan_attempt(
    req: &RunRequest,
    kept: Option<Kept>,
    home: &Home,
    sys: &dyn System,
) -> Result<Plan, Error> {
    if let Some(h) = &req.host {
        // A request for a host is sent there (crate::hosts::remote); one that reaches this
        // planner came through a front end that cannot send it, and must not run here.
        return Err(Invalid::new(
            "host",
            format!("`{h}`: this way of starting runs cannot run them on a host yet; use `subpane run --host {h}`"),
        )
        .into());
    }
    let run_id = match &req.run_id {
        Some(r) => RunId::parse(r)?,
        None => sys.new_run_id(),
    };
    let attempt = kept.as_ref().map_or(1, |k| k.attempt);
    let mut limits = match &kept {
        Some(k) => k.limits.clone(),
        None => limits(req)?,
    };
    session_budget(req, home, &mut limits)
        .map_err(|e| kept_refused(kept.as_ref(), e, "had this budget"))?;
    let cwd = checked_cwd(req, sys).map_err(|e| kept_refused(kept.as_ref(), e, "ran there"))?;
    for k in req.labels.keys() {
        if k.is_empty() {
            return Err(Invalid::new("labels", "needs a name: KEY=VALUE").into());
        }
    }
    let caller_vars = sys.vars();
    let caller_var = |name: &str| var_in(&caller_vars, name);
    let caller_path = caller_var("PATH");
    let mut worktree = req
        .worktree
        .then(|| worktree::plan(sys, home, &run_id, attempt, &cwd, caller_path.as_deref()))
        .transpose()
        .map_err(|e| kept_refused(kept.as_ref(), e, "ran in a worktree of its repository"))?;
    match (&kept, worktree.as_mut(), caller_var("SUBPANE_GIT_TIMEOUT")) {
        (Some(k), Some(wt), _) => wt.git_time_limit_ms = k.git_time_limit_ms,
        (None, Some(wt), Some(raw)) => {
            let raw = raw.to_string_lossy();
            let d = crate::spec::parse_positive_duration("SUBPANE_GIT_TIMEOUT", &raw)?;
            wt.git_time_limit_ms = Some(crate::spec::millis(d));
        }
        _ => {}
    }
    let network = match (&kept, &req.network) {
        (Some(k), _) => k
            .sandbox
            .as_ref()
            .map_or(Network::None, |s| s.network.clone()),
        (None, Some(n)) if req.sandbox => {
            Network::parse(n).map_err(|e| Invalid::new("network", e))?
        }
        (None, _) => Network::None,
    };
    let (lineage, max_depth) = match &kept {
        Some(k) => (k.lineage.clone(), k.max_depth),
        None => {
            // The lineage comes from the caller's environment, or, when that lost it, from
            // the nearest ancestor inside an attempt: clearing variables does not escape the
            // limit.
            let ancestor_vars = if caller_var("SUBPANE_RUN_ID").is_some() {
                Vec::new()
            } else {
                sys.attempt_ancestor_vars()
            };
            let lineage_var = |name: &str| {
                if ancestor_vars.is_empty() {
                    caller_var(name)
                } else {
                    var_in(&ancestor_vars, name)
                }
            };
            lineage(req, &lineage_var, &run_id)?
        }
    };
    let agent_kind = req.agent.unwrap_or(AgentKind::Command);
    let (env, env_spec) = environment(req, sys, agent_kind, &network)?;
    let path_var = var_in(&env, "PATH");
    let Program {
        agent,
        mut argv,
        task,
        input,
    } = program(req, sys, &cwd, path_var.as_deref(), kept.as_ref())?;
    if let (Some(wt), Some(given)) = (&worktree, req.argv.first()) {
        argv[0] = worktree::rebase_program(given, &argv[0], wt);
    }
    let mut warnings = env::short_secret_warnings(&env, &env_spec);
    let (sandbox, group, resumed_from, record) = match kept {
        Some(k) => (k.sandbox, k.group, k.resumed_from, Some(k.record)),
        None => {
            let caller_dir = sys.current_dir().unwrap_or_else(|_| cwd.clone());
            let sandbox = sandbox_request(req, sys, &caller_dir, network, &mut warnings)?;
            (sandbox, None, None, None)
        }
    };
    let mut plan = assemble(
        Resolved {
            run_id,
            attempt,
            agent,
            argv,
            task,
            input,
            cwd,
            worktree,
            limits,
            labels: req.labels.clone(),
            correlation_id: req.correlation_id.clone(),
            keep_session: req.keep_session,
            group,
            lineage,
            max_depth,
            resumed_from,
            env,
            env_spec,
            sandbox,
            record,
        },
        home,
        sys,
    )?;
    plan.warnings = warnings;
    Ok(plan)
}

/// The directory a request runs in, resolved: `cwd`, or the caller's own.
fn checked_cwd(req: &RunRequest, sys: &dyn System) -> Result<PathBuf, Error> {
    let cwd_raw = match &req.cwd {
        Some(c) => c.clone(),
        None => sys.current_dir().map_err(|e| {
            Error::invalid(format!(
                "cannot read the current directory: {e}; give {{cwd}}"
            ))
        })?,
    };
    let cwd = sys.canonicalize(&cwd_raw).map_err(|e| {
        Invalid::new(
            "cwd",
            format!("`{}` cannot be used: {e}", cwd_raw.display()),
        )
    })?;
    if !sys.is_dir(&cwd) {
        return Err(Invalid::new("cwd", format!("`{}` is not a directory", cwd.display())).into());
    }
    Ok(cwd)
}
