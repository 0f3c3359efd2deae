//! A sandboxed agent's own state directory, in place of the user's.
//!
//! ```text
//!  the user's: $VAR of the agent's environment, else $HOME/<default>  ── seeded_from
//!  the attempt's: attempts/<n>/agent (new, seeded by the launcher)     ── dir, writable
//!     a retry that resumes the session continues the resumed attempt's dir instead
//!  the program gets VAR=dir; the user's directory stays read-only to it
//! ```
//!
//! Common pitfalls:
//! * A session lives in the state directory (Claude's `projects/`, Codex's `sessions/`): a
//!   resumed session must find it, so resuming continues the directory it was saved in.
//! * A retry keeps the seed source of the run, not the retrying process's variables.

use super::*;
use crate::adapter::StateDir;
use crate::spec::AgentState;

/// The state directory of an attempt (see the module docs). `fresh` is the attempt's own
/// place for it; `env` the program's environment before the sandbox points `VAR` at it.
pub(in crate::app) fn agent_state(
    request: &SandboxRequest,
    needs: &StateDir,
    fresh: PathBuf,
    env: &[(OsString, OsString)],
    user_home: Option<&Path>,
) -> Option<AgentState> {
    let previous = request.agent_state.as_ref().filter(|a| a.var == needs.var);
    if let Some(p) = previous.filter(|_| request.continue_state) {
        return Some(p.clone());
    }
    if let Some(p) = previous {
        return Some(AgentState {
            dir: fresh,
            ..p.clone()
        });
    }
    let named = named_dir(needs, env);
    let home_file = match (&named, needs.home_file, user_home) {
        (None, Some(f), Some(h)) => Some(h.join(f)),
        _ => None,
    };
    let seeded_from = named.or_else(|| user_home.map(|h| h.join(needs.default)))?;
    Some(AgentState {
        var: needs.var.to_owned(),
        dir: fresh,
        seeded_from,
        home_file,
        within_sight: false,
        withheld: Vec::new(),
    })
}

/// The CLI's state directory as the program's environment names it (`VAR`, absolute).
pub(in crate::app) fn named_dir(needs: &StateDir, env: &[(OsString, OsString)]) -> Option<PathBuf> {
    env.iter()
        .find(|(k, _)| k.as_bytes() == needs.var.as_bytes())
        .map(|(_, v)| PathBuf::from(v))
        .filter(|p| p.is_absolute())
}

/// Points the program's `var` at `dir` (a value subpane sets: named in `spec.env.set`).
pub(in crate::app) fn point(
    env: &mut Vec<(OsString, OsString)>,
    env_spec: &mut crate::spec::EnvSpec,
    var: &str,
    dir: &Path,
) {
    env.retain(|(k, _)| k.as_bytes() != var.as_bytes());
    env.push((var.into(), dir.into()));
    if !env_spec.set.iter().any(|s| s == var) {
        env_spec.set.push(var.to_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLAUDE: StateDir = StateDir {
        var: "CLAUDE_CONFIG_DIR",
        default: ".claude",
        copy: &[],
        link: &[],
        home_file: Some(".claude.json"),
        session: None,
    };

    fn request(previous: Option<AgentState>, continue_state: bool) -> SandboxRequest {
        SandboxRequest {
            network: Network::None,
            asked: Default::default(),
            env_pass: Vec::new(),
            agent_state: previous,
            continue_state,
            limits: Default::default(),
        }
    }

    #[test]
    fn the_user_directory_is_the_seed_and_the_attempt_gets_its_own() {
        let home = Path::new("/home/u");
        let a = agent_state(
            &request(None, false),
            &CLAUDE,
            "/h/a/1/agent".into(),
            &[],
            Some(home),
        )
        .unwrap();
        assert_eq!(a.dir, PathBuf::from("/h/a/1/agent"));
        assert_eq!(a.seeded_from, PathBuf::from("/home/u/.claude"));
        assert_eq!(a.home_file, Some(PathBuf::from("/home/u/.claude.json")));
        // Named by the variable: its `.claude.json` is inside it.
        let env = [("CLAUDE_CONFIG_DIR".into(), "/cfg".into())];
        let a = agent_state(
            &request(None, false),
            &CLAUDE,
            "/x".into(),
            &env,
            Some(home),
        )
        .unwrap();
        assert_eq!((a.seeded_from, a.home_file), (PathBuf::from("/cfg"), None));
    }

    #[test]
    fn a_retry_keeps_the_seed_and_continues_only_a_resumed_session() {
        let prev = AgentState {
            var: "CLAUDE_CONFIG_DIR".into(),
            dir: "/h/a/1/agent".into(),
            seeded_from: "/cfg".into(),
            home_file: None,
            within_sight: false,
            withheld: Vec::new(),
        };
        let a = agent_state(
            &request(Some(prev.clone()), false),
            &CLAUDE,
            "/h/a/2/agent".into(),
            &[],
            None,
        )
        .unwrap();
        assert_eq!(
            (a.dir, a.seeded_from),
            ("/h/a/2/agent".into(), "/cfg".into())
        );
        let a = agent_state(
            &request(Some(prev.clone()), true),
            &CLAUDE,
            "/h/a/2/agent".into(),
            &[],
            None,
        )
        .unwrap();
        assert_eq!(a, prev);
    }
}
