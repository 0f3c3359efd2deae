//! Seeding a sandboxed agent's own state directory from the user's, when the attempt makes
//! it (a resumed session's directory is continued as it is).
//!
//! ```text
//!  the user's (seeded_from)                   the attempt's (dir, 0700)
//!  settings.json, login, config …  ── copy ──► the same names (the CLI writes them)
//!  skills/, commands/, agents/ …   ── link ──► links to the user's (read-only through them)
//!  ~/.claude.json (home_file)      ── copy ──► .claude.json
//!  a session a new run resumes     ── copy ──► the same path (`projects/*/{id}.jsonl`)
//!
//!  each only where the sandbox's view allows both where it is and where it leads (`View`):
//!    withhold: the launcher, before spec.json ─► AgentState.withheld (in the envelope)
//!    seed: opens each file, asks the kernel where the open file is, checks that again
//! ```
//!
//! Only what the CLI needs, named by its adapter: a whole `~/.claude` holds every past
//! session's transcript and would cost a copy of megabytes at every start.
//!
//! The view: nothing the policy hides (`--hide`, the subpane home, the machine's sockets),
//! itself or below a hidden directory, is ever copied or linked in; nothing from the
//! machine's trees (`/proc`, `/dev`, … are the sandbox's own inside it, the host's here);
//! and for a run from a sandbox (`within_sight`) nothing its sandbox does not see, which is
//! at most what its parent sees. What is withheld is recorded and warned of: the agent may
//! lack its login or settings.
//!
//! Common pitfalls:
//! * A link is only read-only because its target is outside the writable trees (Landlock)
//!   and the host's tree is read-only in the sandbox: both hold for the user's state
//!   directory, which the plan refuses to make writable.
//! * The user's files are read through links the user made (dotfile managers link them):
//!   where a link leads is what the view judges, never the name in the directory. A link
//!   may lead into a tree a sandboxed program writes, which could swap its target between
//!   the check and the copy: the file is opened first (`O_PATH`, no side effects), and the
//!   path the kernel gives for the open file is the one judged and read.
//! * A linked directory that holds a hidden path is linked: the link leads to the place the
//!   sandbox hides that path at, so the program finds it hidden through the link too.
//! * Seeding is best effort: a file that cannot be copied is a warning, and the CLI starts
//!   without it (as on a machine where it was never configured).

use std::fs::File;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::adapter::{StateDir, adapter_for};
use crate::spec::{AgentState, AttemptSpec, SandboxSpec};

/// The largest file seeded: settings and logins are small, a session's transcript a few
/// megabytes; anything larger is not what the CLI keeps there.
const MAX_SEED_BYTES: u64 = 256 << 20;

/// What the seeder may take of the user's (see the module docs).
struct View<'a> {
    sandbox: &'a SandboxSpec,
    within_sight: bool,
}

impl<'a> View<'a> {
    fn of(sandbox: &'a SandboxSpec, state: &AgentState) -> Self {
        Self {
            sandbox,
            within_sight: state.within_sight,
        }
    }

    /// Whether `src`, a path of the user's that leads to `real` (a path with no link left in
    /// it), may be seeded: where it is and where it leads must both be allowed (a link in a
    /// hidden directory is hidden, wherever it points).
    fn allows(&self, src: &Path, real: &Path) -> bool {
        let at = place(src);
        [at.as_path(), real].into_iter().all(|p| {
            !crate::app::plan::in_machine_tree(p)
                && !self.sandbox.hidden.iter().any(|h| p.starts_with(h))
                && (!self.within_sight || crate::app::nest::sees(self.sandbox, p))
        })
    }
}

/// Where `src` itself is: its directory resolved, its own name kept (a link stays a link).
fn place(src: &Path) -> PathBuf {
    match (src.parent().map(std::fs::canonicalize), src.file_name()) {
        (Some(Ok(dir)), Some(name)) => dir.join(name),
        _ => src.to_path_buf(),
    }
}

/// Records in `spec` what of the user's its agent is not seeded with (see the module
/// docs), so that the envelope says so. The launcher calls it before writing spec.json.
pub(in crate::app) fn withhold(spec: &mut AttemptSpec) {
    let Some(needs) = adapter_for(spec.agent).sandbox_needs().state_dir else {
        return;
    };
    let resume = resumed_session(spec).map(str::to_owned);
    let Some(state) = &spec.sandbox.agent_state else {
        return;
    };
    // A continued directory was seeded by the attempt that made it, and says so.
    if state.dir.exists() {
        return;
    }
    let view = View::of(&spec.sandbox, state);
    let withheld: Vec<PathBuf> = sources(state, &needs, resume.as_deref())
        .into_iter()
        .filter(|src| std::fs::canonicalize(src).is_ok_and(|real| !view.allows(src, &real)))
        .collect();
    if let Some(state) = &mut spec.sandbox.agent_state {
        state.withheld = withheld;
    }
}

/// Every path of the user's that seeding takes: the adapter's files and directories, the
/// home file, a resumed session's files.
fn sources(state: &AgentState, needs: &StateDir, resume: Option<&str>) -> Vec<PathBuf> {
    let from = &state.seeded_from;
    let mut v: Vec<PathBuf> = needs.copy.iter().map(|n| from.join(n)).collect();
    v.extend(state.home_file.iter().cloned());
    v.extend(needs.link.iter().map(|n| from.join(n)));
    if let Some(id) = resume {
        v.extend(session_files(from, needs, id).iter().map(|r| from.join(r)));
    }
    v
}

fn resumed_session(spec: &AttemptSpec) -> Option<&str> {
    spec.task.as_ref().and_then(|t| t.resume_session.as_deref())
}

/// Makes and seeds the attempt's state directory unless it exists; returns warnings.
pub(in crate::app) fn seed_agent_state(spec: &AttemptSpec) -> Vec<String> {
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
    let view = View::of(&spec.sandbox, state);
    let mut withheld = state.withheld.clone();
    let mut note = |what: &Path, e: std::io::Error| {
        warnings.push(format!(
            "the agent's state: cannot take {} from your own: {e}",
            what.display()
        ))
    };
    let from = &state.seeded_from;
    let mut copies: Vec<(PathBuf, PathBuf)> = needs
        .copy
        .iter()
        .map(|name| (from.join(name), state.dir.join(name)))
        .collect();
    if let Some(f) = &state.home_file {
        let name = f.file_name().unwrap_or_default();
        copies.push((f.clone(), state.dir.join(name)));
    }
    if let Some(id) = resumed_session(spec) {
        for rel in session_files(from, &needs, id) {
            let to = state.dir.join(&rel);
            if let Some(Err(e)) = to.parent().map(std::fs::create_dir_all) {
                note(&to, e);
                continue;
            }
            copies.push((from.join(&rel), to));
        }
    }
    for (src, to) in copies {
        if state.withheld.contains(&src) {
            continue;
        }
        match copy_seen(&view, &src, &to) {
            Ok(Taken::Copied | Taken::Absent) => {}
            Ok(Taken::Withheld) => withheld.push(src),
            Err(e) => note(&src, e),
        }
    }
    for name in needs.link {
        let src = from.join(name);
        if state.withheld.contains(&src) {
            continue;
        }
        let Ok(real) = std::fs::canonicalize(&src) else {
            continue;
        };
        if !view.allows(&src, &real) {
            withheld.push(src);
        } else if real.is_dir()
            && let Err(e) = std::os::unix::fs::symlink(&src, state.dir.join(name))
        {
            note(&src, e);
        }
    }
    // The CLI's settings for every attempt, under the user's (see overlay.rs).
    if let Some((file, defaults)) = adapter_for(spec.agent).settings_defaults() {
        let copy = state.dir.join(file);
        if let Err(why) = super::overlay::write_merged(&copy, &copy, defaults) {
            warnings.push(format!(
                "the agent's state: {}: {why}; the attempt's {} defaults do not hold",
                copy.display(),
                spec.agent.as_str()
            ));
        }
    }
    if !withheld.is_empty() {
        let names: Vec<String> = withheld.iter().map(|p| p.display().to_string()).collect();
        warnings.push(format!(
            "the agent's state: not seeded, as the sandbox hides them: {}; the agent may lack its login or settings (hide less, or give it what it needs another way)",
            names.join(", ")
        ));
    }
    warnings
}

/// What became of one file to seed.
enum Taken {
    Copied,
    /// Not there, or not a regular file (after the user's links): nothing to seed.
    Absent,
    /// Where it leads, the view does not allow.
    Withheld,
}

/// Copies `src` to `to` when it leads to a regular file the view allows, judging and reading
/// the very file opened (see the module docs).
fn copy_seen(view: &View<'_>, src: &Path, to: &Path) -> std::io::Result<Taken> {
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH)
        .open(src);
    let handle = match opened {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Taken::Absent),
        Err(e) => return Err(e),
    };
    let meta = handle.metadata()?;
    if !meta.is_file() {
        return Ok(Taken::Absent);
    }
    let fd_path = PathBuf::from(format!("/proc/self/fd/{}", handle.as_raw_fd()));
    let real = std::fs::read_link(&fd_path)?;
    if !view.allows(src, &real) {
        return Ok(Taken::Withheld);
    }
    // Reopening the handle through /proc opens the same file, whatever the path is now.
    let file = File::open(&fd_path)?;
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(meta.permissions().mode() & 0o777)
        .open(to)?;
    let copied = std::io::copy(&mut file.take(MAX_SEED_BYTES + 1), &mut out)?;
    if copied > MAX_SEED_BYTES {
        drop(out);
        let _ = std::fs::remove_file(to);
        return Err(std::io::Error::other(format!(
            "larger than {} MiB",
            MAX_SEED_BYTES >> 20
        )));
    }
    Ok(Taken::Copied)
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
