//! What a request from a sandbox may be, and what binds the run it makes to its parent.
//!
//! ```text
//!  NestRequest ─► admit: sandboxed; no --worktree, no task file, no loader variables;
//!                 network: the parent's unless asked
//!             ─► plan_child: plan(.., the parent's home, NestSystem) ─► fit (fit.rs)
//!             ─► bind: within the parent's attempt (its worker), processes and /tmp a
//!                grant out of the parent's (budget.rs) ─► Held, given back at the end
//! ```
//!
//! Common pitfalls:
//! * The parent's worker is named by `worker.json` and checked to be the worker of this
//!   attempt (its command line): a child bound to another process would outlive its parent.
//! * A grant is given back only when the child has ended: a [`Held`] dropped early lets the
//!   tree outgrow the parent; when the end cannot be watched, [`Held::keep`] keeps it taken.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::budget::{Ask, Budget};
use super::fit::{fit, network_flag};
use super::system::NestSystem;
use super::{LOADER_VARS, NestRequest};
use crate::adapter::env_allowed;
use crate::app::plan::{passes_into_sandbox, plan};
use crate::app::{Error, Plan, RunRequest};
use crate::envelope::{ProcRef, WorkerFacts};
use crate::procs;
use crate::sandbox::resize;
use crate::spec::{AgentKind, AttemptSpec, Within};
use crate::store::{self, AttemptPaths, Home};

/// The attempt whose program the clients are: its home, its records, its policy, its worker
/// and the limits it shares with the runs it starts.
pub(super) struct Parent {
    pub(super) home: Home,
    pub(super) paths: AttemptPaths,
    pub(super) spec: AttemptSpec,
    /// Its worker: a run from it ends when this has exited (`worker::within`).
    worker: ProcRef,
    budget: Mutex<Budget>,
}

impl Parent {
    /// The attempt in `dir` (as its worker was started with it), with its worker alive.
    pub(super) fn load(given: &Path) -> Result<Self, String> {
        let dir = std::fs::canonicalize(given)
            .map_err(|e| format!("cannot find the attempt {}: {e}", given.display()))?;
        let paths = AttemptPaths::new(dir.clone());
        let spec: AttemptSpec = store::read_json(&paths.spec())
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("{} is missing", paths.spec().display()))?;
        // HOME/runs/ID/attempts/N: the home is the attempt's own, never one a client names.
        let names: Vec<_> = dir
            .ancestors()
            .skip(1)
            .take(3)
            .map(Path::file_name)
            .collect();
        let home = dir.ancestors().nth(4).map(Path::to_path_buf);
        let id = std::ffi::OsStr::new(spec.run_id.as_str());
        match (names.as_slice(), home) {
            ([Some(a), Some(r), Some(runs)], Some(home))
                if *a == "attempts" && *r == id && *runs == "runs" && spec.sandbox.enabled =>
            {
                let (worker, helper) = running(&paths, given)?;
                Ok(Self {
                    home: Home::at(home),
                    budget: Mutex::new(Budget::new(&spec.sandbox.limits, helper)),
                    paths,
                    spec,
                    worker,
                })
            }
            _ => Err(format!(
                "{} is not the directory of a sandboxed attempt",
                dir.display()
            )),
        }
    }

    fn budget(&self) -> std::sync::MutexGuard<'_, Budget> {
        self.budget.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The attempt's worker and its program (the sandbox helper), from `worker.json`: the
/// program runs (its client asks), so the worker has said who both are.
fn running(paths: &AttemptPaths, dir: &Path) -> Result<(ProcRef, ProcRef), String> {
    let facts: WorkerFacts = store::read_json(&paths.worker())
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("{} is missing", paths.worker().display()))?;
    match (facts.worker, facts.agent) {
        (Some(w), Some(helper)) if procs::is_worker_of(&w, dir) => Ok((w, helper)),
        _ => Err(format!(
            "the worker of {} is not running: its program starts no more runs",
            dir.display()
        )),
    }
}

/// Binds the planned child to its parent: it lives within the parent's attempt, and its
/// sandbox's processes and `/tmp` are a grant out of the parent's (see `budget.rs`), held
/// until the child has ended.
pub(super) fn bind(plan: &mut Plan, req: &RunRequest, parent: &Arc<Parent>) -> Result<Held, Error> {
    let limits = &mut plan.spec.sandbox.limits;
    let ask = Ask {
        processes: req.max_procs,
        tmp: req.max_tmp.is_some().then_some(limits.tmp_bytes),
    };
    let (id, share) = parent
        .budget()
        .take(ask, &resize::request)
        .map_err(Error::invalid)?;
    limits.processes = share.processes;
    limits.tmp_bytes = share.tmp;
    plan.spec.within = Some(Within {
        run_id: parent.spec.run_id.to_string(),
        attempt: parent.spec.attempt,
        worker: parent.worker,
    });
    Ok(Held {
        parent: parent.clone(),
        id: Some(id),
    })
}

/// A child's grant, given back to its parent when dropped: once the child has ended.
pub(super) struct Held {
    parent: Arc<Parent>,
    id: Option<u64>,
}

impl Held {
    /// The child's end cannot be watched: its grant stays taken until the parent ends
    /// (given back early, the tree could outgrow the parent).
    pub(super) fn keep(mut self) {
        self.id = None;
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            self.parent.budget().give_back(id, &resize::request);
        }
    }
}

/// The request as the planner takes it: what may never come from a sandbox is refused, and
/// what a sandbox always is, set.
pub(super) fn admit(n: &NestRequest, parent: &AttemptSpec) -> Result<RunRequest, Error> {
    let mut req = n.request.clone();
    if req.worktree {
        return Err(Error::invalid(
            "{worktree} is not offered to a run from a sandbox: its git worktree would be made by git outside the sandbox, from a repository the sandboxed program could have written",
        ));
    }
    // A task is text to the planner; a file would be read outside the sandbox, where the
    // caller may not see it (the client reads it inside and sends its text).
    for (flag, file) in [
        ("{task}", &req.task_file),
        ("{system_prompt}", &req.system_prompt_file),
    ] {
        if file.is_some() {
            return Err(Error::invalid(format!(
                "{flag} names a file: a run from a sandbox carries its text (`subpane run` inside reads @FILE itself)"
            )));
        }
    }
    let names = req
        .env
        .keys()
        .chain(req.env_plain.keys())
        .chain(&req.env_pass);
    refuse_loader_vars(names.map(String::as_str))?;
    if !n.cwd.is_absolute() {
        return Err(Error::invalid("the request's cwd is not an absolute path"));
    }
    req.sandbox = true;
    if req.network.is_none() {
        req.network = Some(network_flag(&parent.sandbox.network));
    }
    Ok(req)
}

fn refuse_loader_vars<'a>(mut names: impl Iterator<Item = &'a str>) -> Result<(), Error> {
    match names.find(|n| env_allowed(LOADER_VARS, n)) {
        Some(n) => Err(Error::invalid(format!(
            "a run from a sandbox cannot set or pass {n}: the sandbox helper starts outside the sandbox with the program's environment, and the dynamic loader or the C library would act on it there"
        ))),
        None => Ok(()),
    }
}

/// The one planner, on the parent's home and the caller's view, then the parent's limits.
pub(super) fn plan_child(
    req: &RunRequest,
    n: &NestRequest,
    parent: &Parent,
) -> Result<crate::app::Plan, Error> {
    let agent = req.agent.unwrap_or(AgentKind::Command);
    let mut vars: Vec<(OsString, OsString)> = n
        .vars
        .iter()
        .filter(|(k, _)| !k.starts_with("SUBPANE_") && passes_into_sandbox(req, agent, k))
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
    let lineage = parent
        .spec
        .program_vars(parent.paths.dir(), &parent.paths.out_dir());
    vars.extend(lineage.into_iter().map(|(k, v)| (k.into(), v)));
    let sys = NestSystem::new(
        &parent.spec.sandbox,
        n.cwd.clone(),
        vars,
        parent.spec.tmux.socket.clone(),
    );
    let mut p = plan(req, &parent.home, &sys)?;
    refuse_loader_vars(p.env.iter().filter_map(|(k, _)| k.to_str()))?;
    let id = &p.spec.run_id;
    let paths = parent.home.attempt(id, p.spec.attempt);
    let own: Vec<PathBuf> = vec![
        paths.out_dir(),
        paths.proxy_socket(),
        paths.nest_socket(),
        paths.agent_state(),
        parent.home.sessions_dir(id),
    ];
    let git = (paths.git_upper(), paths.git_work());
    let sb = &mut p.spec.sandbox;
    fit(
        &parent.spec.sandbox,
        sb,
        &own,
        (&git.0, &git.1),
        &p.spec.cwd,
    )
    .map_err(Error::invalid)?;
    // The child's agent state is seeded from what its parent's was (the user's), never from
    // a directory the parent's program names: seeding reads it outside the sandbox.
    if let Some(state) = &mut sb.agent_state {
        match parent.spec.sandbox.agent_state.as_ref() {
            Some(from) if from.var == state.var => {
                state.seeded_from = from.seeded_from.clone();
                state.home_file = from.home_file.clone();
            }
            _ => {
                let needs = crate::adapter::adapter_for(agent).sandbox_needs().state_dir;
                let home = std::env::var_os("HOME").map(PathBuf::from);
                match (needs, home) {
                    (Some(n), Some(h)) => {
                        state.seeded_from = h.join(n.default);
                        state.home_file = n.home_file.map(|f| h.join(f));
                    }
                    _ => sb.agent_state = None,
                }
            }
        }
    }
    // The launcher makes what is missing; outside the child's own places nothing may be made
    // (a path there could be a link by then).
    let sb = &p.spec.sandbox;
    for path in sb.writable.iter().chain(&sb.read_only) {
        if !own.contains(path) && std::fs::symlink_metadata(path).is_err() {
            return Err(Error::invalid(format!(
                "`{}` does not exist: a run from a sandbox may only name paths that do (create it first)",
                path.display()
            )));
        }
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nest(req: RunRequest) -> NestRequest {
        NestRequest {
            request: req,
            cwd: "/work".into(),
            vars: Default::default(),
            detach: false,
        }
    }

    /// A sandboxed attempt with `network`, as the planner makes one.
    fn parent(network: &str) -> AttemptSpec {
        use crate::app::plan::fake::{Fake, cmd, home};
        let req = RunRequest {
            sandbox: true,
            network: Some(network.into()),
            ..cmd(&["make"])
        };
        plan(&req, &home(), &Fake::new()).unwrap().spec
    }

    fn refused(r: RunRequest) -> String {
        match admit(&nest(r), &parent("none")) {
            Err(e) if e.nothing_started() => e.to_string(),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn a_request_is_always_sandboxed_with_at_most_the_parents_network() {
        let r = RunRequest {
            argv: vec!["true".into()],
            ..RunRequest::default()
        };
        let a = admit(&nest(r.clone()), &parent("allow:example.com")).unwrap();
        assert!(a.sandbox);
        assert_eq!(a.network.as_deref(), Some("allow:example.com"));
        // Asked for: kept here, checked against the parent's by `fit` after the plan.
        let asked = RunRequest {
            network: Some("none".into()),
            ..r
        };
        let a = admit(&nest(asked), &parent("full")).unwrap();
        assert_eq!(a.network.as_deref(), Some("none"));
    }

    #[test]
    fn what_would_act_outside_the_sandbox_is_refused() {
        let base = RunRequest {
            argv: vec!["true".into()],
            ..RunRequest::default()
        };
        let m = refused(RunRequest {
            worktree: true,
            ..base.clone()
        });
        assert!(m.contains("--worktree"), "{m}");
        // A file would be read outside, where the sandboxed caller may not see it.
        let m = refused(RunRequest {
            agent: Some(AgentKind::Pi),
            task_file: Some("/etc/shadow".into()),
            argv: vec![],
            ..base.clone()
        });
        assert!(m.contains("--task names a file"), "{m}");
        for (name, how) in [("LD_PRELOAD", "env"), ("GLIBC_TUNABLES", "pass")] {
            let mut r = base.clone();
            if how == "env" {
                r.env.insert(name.into(), "x".into());
            } else {
                r.env_pass.push(name.into());
            }
            assert!(refused(r).contains(name));
        }
        let mut relative = nest(base);
        relative.cwd = "work".into();
        assert!(admit(&relative, &parent("none")).is_err());
    }
}
