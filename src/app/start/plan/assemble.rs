//! The one planner's last step: from a [`Resolved`] attempt (every choice made) to a [`Plan`].
//!
//! ```text
//!  plan(request)   ─► Resolved { run, attempt 1, program, task, env, limits, sandbox ask, … } ─┐
//!  plan_retry(run) ─► plan_attempt(request, Kept) ─► Resolved { the run's, attempt n+1, … } ───┤
//!  fan-out line    ─► plan(request) ───────────────────────────────────────────────────────────┤
//!                                                                                              ▼
//!  assemble: tmux on PATH ─► the agent's argv for this attempt's paths ─► the kernel's argv limit
//!            ─► the agent's state directories ─► sandbox policy ─► git of the worktree
//!            ─► AttemptSpec + RunRecord (new, or the run's with this attempt added)
//! ```
//!
//! Everything an attempt derives from its own places (its directory, its worktree, its tmux
//! socket, the machine's sockets) is derived here, once, for a first attempt and a retry
//! alike: a rule added here reaches both.

use super::agent_state::{agent_state, named_dir, point};
use super::policy::{PolicyContext, SandboxRequest, sandbox_policy};
use super::*;
use crate::spec::WorktreeSpec;

/// An attempt with every choice made: what [`assemble`] turns into a [`Plan`].
pub(in crate::app) struct Resolved {
    pub(in crate::app) run_id: RunId,
    pub(in crate::app) attempt: u32,
    pub(in crate::app) agent: AgentKind,
    /// The program and its arguments; for an agent, its CLI alone (the adapter adds the rest).
    pub(in crate::app) argv: Vec<String>,
    pub(in crate::app) task: Option<TaskSpec>,
    /// The program's stdin is its input (see `Program::input`).
    pub(in crate::app) input: bool,
    /// The directory the program runs in (with a worktree: the repository's, which the
    /// worktree mirrors).
    pub(in crate::app) cwd: PathBuf,
    pub(in crate::app) worktree: Option<WorktreeSpec>,
    pub(in crate::app) limits: Limits,
    pub(in crate::app) labels: std::collections::BTreeMap<String, String>,
    pub(in crate::app) correlation_id: Option<String>,
    pub(in crate::app) keep_session: bool,
    pub(in crate::app) group: Option<String>,
    pub(in crate::app) lineage: Option<Lineage>,
    pub(in crate::app) max_depth: u32,
    pub(in crate::app) resumed_from: Option<u32>,
    pub(in crate::app) env: Vec<(OsString, OsString)>,
    pub(in crate::app) env_spec: EnvSpec,
    pub(in crate::app) sandbox: Option<SandboxRequest>,
    /// The run's record, for a further attempt; `None` makes a new run.
    pub(in crate::app) record: Option<RunRecord>,
}

/// The plan of a resolved attempt. Creates nothing.
pub(in crate::app) fn assemble(r: Resolved, home: &Home, sys: &dyn System) -> Result<Plan, Error> {
    let caller_vars = sys.vars();
    let caller_var = |name: &str| var_in(&caller_vars, name);
    if sys
        .which("tmux", caller_var("PATH").as_deref(), &r.cwd)
        .is_none()
    {
        return Err(Error::invalid(
            "tmux was not found on PATH; install tmux 3.2 or newer",
        ));
    }
    let paths = home.attempt(&r.run_id, r.attempt);
    // A new run resuming a pi session works where that session was saved.
    let sessions_dir = match &r.task {
        Some(t) if r.agent == AgentKind::Pi && r.record.is_none() => t
            .resume_session
            .as_deref()
            .and_then(|id| sys.pi_session_dir(home, id))
            .unwrap_or_else(|| home.sessions_dir(&r.run_id)),
        _ => home.sessions_dir(&r.run_id),
    };
    // Agents: the adapter builds the argv now that the attempt's paths are known.
    let (argv, stdin) = match &r.task {
        Some(t) => {
            let ctx = ArgvContext {
                run_dir: &home.run_dir(&r.run_id),
                sessions_dir: &sessions_dir,
                attempt_dir: paths.dir(),
                prompt_file: &paths.prompt(),
            };
            let launch = adapter_for(r.agent).launch(&r.argv[0], t, &ctx);
            (launch.argv, launch.stdin)
        }
        None if r.input => (r.argv, Stdin::Input),
        None => (r.argv, Stdin::Null),
    };
    check_exec_size(&argv, &r.env, sys.arg_max())?;
    let socket = sys.tmux_socket();
    let mut env = r.env;
    let mut env_spec = r.env_spec;
    let sandbox = match &r.sandbox {
        Some(request) => {
            let user_home = caller_var("HOME").map(PathBuf::from);
            let mut agent_dirs = Vec::new();
            let mut state = None;
            if r.task.is_some() {
                if r.agent == AgentKind::Pi {
                    agent_dirs.push(sessions_dir.clone());
                }
                if let Some(needs) = adapter_for(r.agent).sandbox_needs().state_dir {
                    let fresh = resolved(sys, &paths.agent_state());
                    state = agent_state(request, &needs, fresh, &env, user_home.as_deref());
                }
            }
            if let Some(s) = &state {
                // The agent's own directory, never the user's.
                agent_dirs.push(s.dir.clone());
                point(&mut env, &mut env_spec, &s.var, &s.dir);
            }
            // With --worktree, the worktree is the workspace.
            let workspace = r.worktree.as_ref().map_or(&r.cwd, |wt| &wt.path);
            let protected_dirs = crate::adapter::state_dirs()
                .filter_map(|d| caller_var(d.var))
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .collect();
            let mut policy = sandbox_policy(
                request,
                sys,
                &PolicyContext {
                    cwd: workspace,
                    home: home.root(),
                    out_dir: &paths.out_dir(),
                    proxy_socket: &paths.proxy_socket(),
                    git_upper: &paths.git_upper(),
                    git_work: &paths.git_work(),
                    nest_socket: &paths.nest_socket(),
                    tmux_socket: &socket,
                    agent_dirs,
                    // The caller's uid names its tmux socket directory.
                    escape_sockets: &escape_sockets(&caller_var, nix::unistd::geteuid().as_raw()),
                    program: argv.first().map(Path::new),
                    user_home: user_home.as_deref(),
                    protected_dirs,
                },
            )?;
            if let Some(wt) = &r.worktree {
                let upper = resolved(sys, &paths.git_upper());
                let work = resolved(sys, &paths.git_work());
                worktree::sandbox_git(sys, wt, &mut policy, upper, work);
            }
            policy.agent_state = state;
            policy
        }
        None => SandboxSpec::default(),
    };
    // Unsandboxed, a CLI that takes settings per attempt gets a state directory of links to
    // the user's and the merged settings (a sandboxed one has them in its own).
    let overlay_needs = adapter_for(r.agent)
        .settings_defaults()
        .and(adapter_for(r.agent).sandbox_needs().state_dir)
        .filter(|_| r.sandbox.is_none() && r.task.is_some());
    let agent_overlay = overlay_needs.and_then(|needs| {
        let home = || caller_var("HOME").map(|h| PathBuf::from(h).join(needs.default));
        let from = named_dir(&needs, &env).or_else(home)?;
        Some(crate::spec::AgentOverlay {
            var: needs.var.to_owned(),
            dir: resolved(sys, &paths.agent_state()),
            from,
        })
    });
    if let Some(o) = &agent_overlay {
        point(&mut env, &mut env_spec, &o.var, &o.dir);
    }
    let created_at = humantime::format_rfc3339_millis(sys.now()).to_string();
    let spec = AttemptSpec {
        schema: SPEC_SCHEMA.to_owned(),
        run_id: r.run_id.clone(),
        attempt: r.attempt,
        agent: r.agent,
        argv,
        cwd: r.worktree.as_ref().map_or(r.cwd, worktree::program_dir),
        stdin,
        labels: r.labels.clone(),
        correlation_id: r.correlation_id.clone(),
        limits: r.limits,
        env: env_spec,
        task: r.task.clone(),
        keep_session: r.keep_session,
        tmux: TmuxTarget {
            socket,
            session: tmux::session_name(r.run_id.as_str(), r.attempt),
        },
        sandbox,
        created_at: created_at.clone(),
        group: r.group.clone(),
        lineage: r.lineage.clone(),
        resumed_from: r.resumed_from,
        worktree: r.worktree,
        max_depth: r.max_depth,
        // Only the server of a parent's nested runs binds a run to the parent's attempt.
        within: None,
        start_at: None,
        agent_overlay,
    };
    let this = AttemptRef {
        attempt: r.attempt,
        created_at: created_at.clone(),
    };
    // `start` adds a further attempt to the run.json on disk; this copy says the same.
    let record = match r.record {
        Some(mut record) => {
            record.attempts.push(this);
            record
        }
        None => RunRecord {
            schema: RUN_SCHEMA.to_owned(),
            run_id: r.run_id,
            agent: r.agent,
            labels: r.labels,
            correlation_id: r.correlation_id,
            group: r.group,
            created_at,
            attempts: vec![this],
            lineage: r.lineage,
        },
    };
    Ok(Plan {
        record,
        spec,
        env,
        prompt: r.task.map(|t| t.prompt),
        warnings: Vec::new(),
    })
}
