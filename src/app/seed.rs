//! Seeding a sandboxed agent's own state directory from the user's, when the attempt makes
//! it (a resumed session's directory is continued as it is).
//!
//! ```text
//!  the user's (seeded_from)                   the attempt's (dir, 0700)
//!  settings.json, login, config …  ── copy ──► the same names (the CLI writes them)
//!  skills/, commands/, agents/ …   ── link ──► links to the user's (read-only through them)
//!  ~/.claude.json (home_file)      ── copy ──► .claude.json
//!  a session a new run resumes     ── copy ──► the same path (`projects/*/{id}.jsonl`)
//! ```
//!
//! Only what the CLI needs, named by its adapter: a whole `~/.claude` holds every past
//! session's transcript and would cost a copy of megabytes at every start.
//!
//! Common pitfalls:
//! * A link is only read-only because its target is outside the writable trees (Landlock)
//!   and the host's tree is read-only in the sandbox: both hold for the user's state
//!   directory, which the plan refuses to make writable.
//! * The user's files are read through links the user made (dotfile managers link them):
//!   they are the user's, read before anything runs.
//! * Seeding is best effort: a file that cannot be copied is a warning, and the CLI starts
//!   without it (as on a machine where it was never configured).

use std::path::{Path, PathBuf};

use crate::adapter::{StateDir, adapter_for};
use crate::spec::AttemptSpec;

/// Makes and seeds the attempt's state directory unless it exists; returns warnings.
pub(super) fn seed_agent_state(spec: &AttemptSpec) -> Vec<String> {
    let mut warnings = Vec::new();
    let Some(state) = &spec.sandbox.agent_state else {
        return warnings;
    };
    let Some(needs) = adapter_for(spec.agent).sandbox_needs().state_dir else {
        return warnings;
    };
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::DirBuilder::new().mode(0o700).create(&state.dir) {
        Ok(()) => {}
        // Continued from the attempt whose session it resumes.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return warnings,
        Err(e) => {
            warnings.push(format!("cannot create {}: {e}", state.dir.display()));
            return warnings;
        }
    }
    let mut note = |what: &Path, e: std::io::Error| {
        warnings.push(format!(
            "the agent's state: cannot take {} from your own: {e}",
            what.display()
        ))
    };
    let from = &state.seeded_from;
    for name in needs.copy {
        let src = from.join(name);
        if let Err(e) = copy_if_there(&src, &state.dir.join(name)) {
            note(&src, e);
        }
    }
    if let Some(f) = &state.home_file {
        let name = f.file_name().unwrap_or_default();
        if let Err(e) = copy_if_there(f, &state.dir.join(name)) {
            note(f, e);
        }
    }
    for name in needs.link {
        let src = from.join(name);
        if src.is_dir() {
            if let Err(e) = std::os::unix::fs::symlink(&src, state.dir.join(name)) {
                note(&src, e);
            }
        }
    }
    if let Some(id) = spec.task.as_ref().and_then(|t| t.resume_session.as_deref()) {
        for rel in session_files(from, &needs, id) {
            let to = state.dir.join(&rel);
            let made = to.parent().map_or(Ok(()), std::fs::create_dir_all);
            if let Err(e) = made.and_then(|()| copy_if_there(&from.join(&rel), &to)) {
                note(&from.join(&rel), e);
            }
        }
    }
    warnings
}

/// Copies `src` to `to` when `src` is a regular file (after the user's links).
fn copy_if_there(src: &Path, to: &Path) -> std::io::Result<()> {
    match std::fs::metadata(src) {
        Ok(m) if m.is_file() => std::fs::copy(src, to).map(drop),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// The files of the user's state directory `from` that hold session `id`, relative to it:
/// the adapter's pattern (`*` matches one name, `{id}` the id) walked one component at a
/// time.
fn session_files(from: &Path, needs: &StateDir, id: &str) -> Vec<PathBuf> {
    let Some(pattern) = needs.session else {
        return Vec::new();
    };
    // An id is a name, never a path.
    if id.is_empty() || id.contains('/') || id.contains('*') || id.starts_with('.') {
        return Vec::new();
    }
    let pattern = pattern.replace("{id}", id);
    let mut found = vec![PathBuf::new()];
    for part in pattern.split('/') {
        let mut next = Vec::new();
        for rel in &found {
            let Ok(entries) = std::fs::read_dir(from.join(rel)) else {
                continue;
            };
            for e in entries.flatten() {
                let name = e.file_name();
                if matches(part, &name.to_string_lossy()) {
                    next.push(rel.join(name));
                }
            }
        }
        found = next;
    }
    found
}

/// Whether `name` matches `part`, where each `*` stands for any run of characters.
fn matches(part: &str, name: &str) -> bool {
    let pieces: Vec<&str> = part.split('*').collect();
    let (first, last) = (pieces[0], pieces[pieces.len() - 1]);
    if pieces.len() == 1 {
        return name == part;
    }
    if !name.starts_with(first) || !name[first.len()..].ends_with(last) {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for p in &pieces[1..pieces.len() - 1] {
        match rest.find(p) {
            Some(i) => rest = &rest[i + p.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_names() {
        assert!(matches("*", "anything"));
        assert!(matches(
            "rollout-*-abc.jsonl",
            "rollout-2026-01-01T00-00-00-abc.jsonl"
        ));
        assert!(!matches("rollout-*-abc.jsonl", "rollout-abc.jsonl"));
        assert!(matches("abc.jsonl", "abc.jsonl") && !matches("abc.jsonl", "abcd.jsonl"));
        assert!(matches("a*b*c", "a-b-c") && !matches("a*b*c", "a-c-b"));
    }

    #[test]
    fn a_resumed_session_is_found_where_the_cli_saved_it() {
        let d = tempfile::tempdir().unwrap();
        let user = d.path();
        std::fs::create_dir_all(user.join("projects/-src-app")).unwrap();
        std::fs::write(user.join("projects/-src-app/sess-1.jsonl"), "{}").unwrap();
        std::fs::write(user.join("projects/-src-app/sess-2.jsonl"), "{}").unwrap();
        let claude = adapter_for(crate::spec::AgentKind::Claude)
            .sandbox_needs()
            .state_dir
            .unwrap();
        assert_eq!(
            session_files(user, &claude, "sess-1"),
            [PathBuf::from("projects/-src-app/sess-1.jsonl")]
        );
        assert!(session_files(user, &claude, "../x").is_empty());
        assert!(session_files(user, &claude, "*").is_empty());
    }
}
