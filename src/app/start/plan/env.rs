//! The program's environment: what passes, what subpane sets, names only in records.

use super::*;

pub(in crate::app) fn valid_env_name(k: &str) -> bool {
    let mut b = k.bytes();
    b.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// The variables that point a sandboxed program at the egress proxy.
const PROXY_VARS: [&str; 6] = [
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
];

/// Whether subpane itself sets `name` for a sandboxed program (recomputed for every attempt,
/// never taken from a caller).
pub(in crate::app) fn set_by_sandbox(name: &str) -> bool {
    let state_var = crate::adapter::state_dirs().any(|d| d.var == name);
    name == "TMPDIR" || name == "NODE_USE_ENV_PROXY" || PROXY_VARS.contains(&name) || state_var
}

/// Whether the caller's variable `name` reaches a sandboxed program: what every program and
/// its agent need, and `--env-pass`.
pub(in crate::app) fn passes_into_sandbox(req: &RunRequest, agent: AgentKind, name: &str) -> bool {
    env_allowed(BASE_ENV, name)
        || env_allowed(adapter_for(agent).sandbox_needs().env, name)
        || req.env_pass.iter().any(|p| p == name)
}

/// The proxy as the sandboxed program reaches it (the relay in its network namespace).
pub(in crate::app) fn proxy_url() -> String {
    format!("http://127.0.0.1:{}", crate::sandbox::PROXY_PORT)
}

/// The program's environment: the caller's minus tmux's variables (in a sandbox: only what
/// the adapter needs and `env_pass`), plus `env`, plus what the sandbox sets.
pub(in crate::app) fn environment(
    req: &RunRequest,
    sys: &dyn System,
    agent: AgentKind,
    network: &Network,
) -> Result<(Vec<(OsString, OsString)>, EnvSpec), Error> {
    for name in &req.env_pass {
        if !valid_env_name(name) {
            return Err(Error::about(
                "{env_pass}",
                format!("name `{name}` is not a valid variable name"),
            ));
        }
    }
    let keep = |k: &OsStr| -> bool {
        let Some(k) = k.to_str() else { return false };
        // A `--worktree` program's git must find the worktree, not a caller's GIT_DIR.
        if REMOVED_VARS.contains(&k) || (req.worktree && REPO_VARS.contains(&k)) {
            return false;
        }
        !req.sandbox || passes_into_sandbox(req, agent, k)
    };
    let mut env: Vec<(OsString, OsString)> =
        sys.vars().into_iter().filter(|(k, _)| keep(k)).collect();
    let mut passed: Vec<String> = Vec::new();
    if req.sandbox {
        passed = env
            .iter()
            .filter_map(|(k, _)| k.to_str().map(str::to_owned))
            .collect();
        passed.sort();
    }
    let mut set = Vec::new();
    let mut put = |env: &mut Vec<(OsString, OsString)>, k: &str, v: &str| {
        env.retain(|(ek, _)| ek.as_bytes() != k.as_bytes());
        env.push((k.into(), v.into()));
        if !set.iter().any(|s| s == k) {
            set.push(k.to_owned());
        }
    };
    if req.sandbox {
        // The private /tmp of the sandbox.
        put(&mut env, "TMPDIR", "/tmp");
        if matches!(network, Network::Allow(_)) {
            let url = proxy_url();
            for k in PROXY_VARS {
                put(&mut env, k, &url);
            }
            // Node honours the variables only when asked to.
            put(&mut env, "NODE_USE_ENV_PROXY", "1");
        }
    }
    for (field, vars) in [("{env}", &req.env), ("{env_plain}", &req.env_plain)] {
        for (k, v) in vars {
            if !valid_env_name(k) {
                return Err(Error::about(
                    field,
                    format!("name `{k}` is not a valid variable name"),
                ));
            }
            if field == "{env_plain}" && req.env.contains_key(k) {
                return Err(Error::about(
                    field,
                    format!(
                        "`{k}` is given with {{env}} too: give it once, with {{env}} if its value is secret"
                    ),
                ));
            }
            put(&mut env, k, v);
        }
    }
    // The environment file separates variables with NUL: one inside a value would begin
    // another variable (a request over JSON can carry it; a real environment cannot).
    if let Some((k, _)) = env
        .iter()
        .find(|(k, v)| k.as_bytes().contains(&0) || v.as_bytes().contains(&0))
    {
        return Err(Error::invalid(format!(
            "variable `{}` holds a NUL byte, which no environment can carry",
            k.to_string_lossy().replace('\0', "\\0")
        )));
    }
    let secret = secret_names(req, agent, &env);
    let spec = EnvSpec {
        secret,
        plain: req.env_plain.keys().cloned().collect(),
        inherit: !req.sandbox,
        set,
        removed: REMOVED_VARS
            .iter()
            .chain(if req.worktree { REPO_VARS } else { &[] })
            .map(|s| (*s).to_owned())
            .collect(),
        passed,
    };
    Ok((env, spec))
}

/// The names whose values the worker masks: every `--env` name, and each variable of the
/// caller's that is named like a secret or is one of the agent's keys, but never an
/// `--env-plain` name or one subpane sets itself.
pub(in crate::app) fn secret_names(
    req: &RunRequest,
    agent: AgentKind,
    env: &[(OsString, OsString)],
) -> Vec<String> {
    let keys = agent_key_vars(agent, env);
    let mut names: Vec<String> = env
        .iter()
        .filter_map(|(k, _)| k.to_str())
        .filter(|k| {
            req.env.contains_key(*k)
                || (!(req.env_plain.contains_key(*k) || req.sandbox && set_by_sandbox(k))
                    && (crate::secrets::looks_secret(k) || keys.iter().any(|n| n == k)))
        })
        .map(str::to_owned)
        .collect();
    names.sort();
    names
}

/// The variables the agent's own configuration names as its key (pi's `models.json`
/// `apiKey`, Codex's `config.toml` `env_key`), read from its state directory.
fn agent_key_vars(agent: AgentKind, env: &[(OsString, OsString)]) -> Vec<String> {
    let Some(needs) = adapter_for(agent).sandbox_needs().state_dir else {
        return Vec::new();
    };
    let dir = super::agent_state::named_dir(&needs, env).or_else(|| {
        let home = env.iter().find(|(k, _)| k == "HOME")?;
        Some(Path::new(&home.1).join(needs.default))
    });
    dir.map(|d| adapter_for(agent).key_vars(&d))
        .unwrap_or_default()
}

/// A warning for each secret too short to mask (its name only).
pub(in crate::app) fn short_secret_warnings(
    env: &[(OsString, OsString)],
    spec: &EnvSpec,
) -> Vec<String> {
    spec.secret
        .iter()
        .filter(|name| {
            env.iter()
                .find(|(k, _)| k.as_bytes() == name.as_bytes())
                .is_some_and(|(_, v)| crate::secrets::too_short(v.as_bytes()))
        })
        .map(|name| {
            format!(
                "the value of {name} is under {} bytes and is not masked in the logs (a short value would mask every word that holds it); give it with --env-plain if it is not secret",
                crate::secrets::MIN_LEN
            )
        })
        .collect()
}
