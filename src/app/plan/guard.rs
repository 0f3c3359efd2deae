//! What a sandbox policy must never hold: paths that would switch the sandbox off, and paths
//! a program could have turned into something else since they were named.
//!
//! ```text
//!  --writable, --hide (named now) ──► named_path: absolute, exists, no symbolic link on the way
//!                                              │ (a link in a writable tree may be a program's)
//!  the attempt's policy (new run or retry) ──► check_policy:
//!     asked paths   still there, still no link   (a program may have replaced or moved them)
//!     --hide        not `/`, not the workspace or a directory holding it
//!     --writable    not `/`, not your home or a directory holding it, not inside subpane's
//!     and the         home, not holding or inside what runs outside the sandbox later
//!     workspace       (agent settings, shell start-up files)
//! ```
//!
//! Common pitfalls:
//! * Resolving a named path once is not enough: the policy is applied again for every retry,
//!   and a program of attempt *n* may have replaced a writable directory with a link to your
//!   `~/.ssh` by then. The check runs on every attempt's policy, and the helper refuses links
//!   once more when it applies the paths (see `sandbox::exec`).
//! * A hidden path that is gone cannot be hidden: a program that renamed its parent would
//!   see the file under the new name. A missing `--hide` path is an error, never skipped.
//! * "Holds" is `starts_with` on components: `/home/u` holds `/home/u/.claude`, `/home/us`
//!   does not.

use super::*;

/// Files and directories under the user's home that run code outside the sandbox later:
/// the agent CLIs' settings (a hook there runs in the next unsandboxed session) and the
/// shell's and git's start-up files.
const PROTECTED_IN_HOME: &[&str] = &[
    ".claude",
    ".claude.json",
    ".codex",
    ".pi",
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".zlogout",
    ".config/fish",
    ".gitconfig",
    ".config/git",
];

/// A path the user names for the sandbox now (`--writable`, `--hide`), made absolute against
/// `caller_dir`: it must exist and pass through no symbolic link.
pub(in crate::app) fn named_path(
    sys: &dyn System,
    flag: &str,
    caller_dir: &Path,
    p: &Path,
) -> Result<PathBuf, Error> {
    let abs = lexical(&caller_dir.join(p));
    let real = sys
        .canonicalize(&abs)
        .map_err(|e| Error::invalid(format!("{flag} `{}` cannot be used: {e}", p.display())))?;
    if real != abs {
        return Err(Error::invalid(format!(
            "{flag} `{}` passes through a symbolic link (it leads to `{}`): name the real path if that is what you mean; a link in a writable tree may have been planted by a program",
            p.display(),
            real.display()
        )));
    }
    Ok(real)
}

/// `p` with `.` and `..` taken away without looking at the disk (`/a/b/../c` is `/a/c`).
fn lexical(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The places a policy is checked against.
pub(in crate::app) struct Guarded<'a> {
    /// The user's home (`$HOME`), resolved, when there is one.
    pub(in crate::app) user_home: Option<PathBuf>,
    /// Agent state directories named by the caller's variables (`CLAUDE_CONFIG_DIR`, …),
    /// resolved.
    pub(in crate::app) agent_dirs: Vec<PathBuf>,
    /// subpane's home, resolved.
    pub(in crate::app) subpane_home: &'a Path,
    /// The workspace.
    pub(in crate::app) workspace: &'a Path,
}

impl Guarded<'_> {
    /// Everything outside the sandbox that must not become writable.
    fn protected(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = self.agent_dirs.clone();
        if let Some(h) = &self.user_home {
            v.extend(PROTECTED_IN_HOME.iter().map(|p| h.join(p)));
        }
        v
    }
}

/// Checks the paths of an attempt's policy (see the module docs). `asked` are the paths the
/// user named, recorded resolved; `sys` says whether they still are what they were.
pub(in crate::app) fn check_policy(
    sys: &dyn System,
    asked: &crate::spec::SandboxAsk,
    g: &Guarded<'_>,
) -> Result<(), Error> {
    for (flag, paths) in [("--writable", &asked.writable), ("--hide", &asked.hidden)] {
        for p in paths {
            match sys.canonicalize(p) {
                Ok(real) if &real == p => {}
                Ok(real) => {
                    return Err(Error::invalid(format!(
                        "{flag} `{}` now passes through a symbolic link (it leads to `{}`); a program of an earlier attempt may have planted it: remove the link, or start a new run",
                        p.display(),
                        real.display()
                    )));
                }
                Err(_) if flag == "--hide" => {
                    return Err(Error::invalid(format!(
                        "--hide `{}` is gone, so it cannot be hidden (a program of an earlier attempt may have moved it or a directory above it, and would see it under its new name): put it back, or start a new run",
                        p.display()
                    )));
                }
                Err(e) => {
                    return Err(Error::invalid(format!(
                        "--writable `{}` cannot be used: {e}",
                        p.display()
                    )));
                }
            }
        }
    }
    for h in &asked.hidden {
        if h == Path::new("/") {
            return Err(Error::invalid(
                "--hide `/` would hide everything, the program included: name what it must not see",
            ));
        }
        if g.workspace.starts_with(h) {
            return Err(Error::invalid(format!(
                "--hide `{}` holds the workspace `{}`, which the program needs: hide what is inside it instead",
                h.display(),
                g.workspace.display()
            )));
        }
    }
    check_writable("the workspace", g.workspace, g)?;
    for w in &asked.writable {
        check_writable("--writable", w, g)?;
    }
    Ok(())
}

/// One writable path (see the module docs).
fn check_writable(what: &str, w: &Path, g: &Guarded<'_>) -> Result<(), Error> {
    let shown = w.display();
    if w == Path::new("/") {
        return Err(Error::invalid(format!(
            "{what} `/` would let the program write everywhere: name the directories it needs"
        )));
    }
    if let Some(home) = &g.user_home {
        if home.starts_with(w) {
            let how = if home == w {
                "is your home".to_owned()
            } else {
                format!("holds your home `{}`", home.display())
            };
            return Err(Error::invalid(format!(
                "{what} `{shown}` {how}: the program could change your shell's start-up files and your agents' settings, which run outside the sandbox later; name the directories it needs"
            )));
        }
    }
    // A `--worktree` attempt's workspace is subpane's own worktree, under the home.
    let own_worktree = what == "the workspace" && w.starts_with(g.subpane_home.join("worktrees"));
    if w.starts_with(g.subpane_home) && !own_worktree {
        return Err(Error::invalid(format!(
            "{what} `{shown}` is inside subpane's home `{}`: the records of runs must stay out of a program's reach",
            g.subpane_home.display()
        )));
    }
    for p in g.protected() {
        if p.starts_with(w) || w.starts_with(&p) {
            return Err(Error::invalid(format!(
                "{what} `{shown}` would make `{}` writable, which runs outside the sandbox later (agent settings, shell start-up files): name other directories",
                p.display()
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical_takes_dots_away() {
        assert_eq!(lexical(Path::new("/a/./b/../c/")), PathBuf::from("/a/c"));
        assert_eq!(lexical(Path::new("/..")), PathBuf::from("/"));
    }

    fn guarded<'a>(ws: &'a Path, home: &'a Path) -> Guarded<'a> {
        Guarded {
            user_home: Some("/home/u".into()),
            agent_dirs: vec!["/srv/claude-cfg".into()],
            subpane_home: home,
            workspace: ws,
        }
    }

    #[test]
    fn writable_paths_that_reach_what_runs_later_are_refused() {
        let (ws, sh) = (
            Path::new("/home/u/src/app"),
            Path::new("/home/u/.local/state/subpane"),
        );
        let g = guarded(ws, sh);
        for (w, says) in [
            ("/", "write everywhere"),
            ("/home", "holds your home"),
            ("/home/u", "is your home"),
            ("/home/u/.claude/hooks", ".claude"),
            ("/home/u/.config", ".config/fish"),
            ("/srv", "claude-cfg"),
            ("/home/u/.local/state/subpane/runs/x", "subpane's home"),
            (
                "/home/u/.local/state/subpane/worktrees/r-1",
                "subpane's home",
            ),
        ] {
            let e = check_writable("--writable", Path::new(w), &g).unwrap_err();
            assert!(e.to_string().contains(says), "{w}: {e}");
        }
        for w in [
            "/home/u/src",
            "/home/us",
            "/home/u/.cache/go",
            "/home/u/.claudette",
        ] {
            assert!(
                check_writable("--writable", Path::new(w), &g).is_ok(),
                "{w}"
            );
        }
        // The worktree of a `--worktree` attempt is the workspace, under subpane's home.
        let wt = Path::new("/home/u/.local/state/subpane/worktrees/r-1");
        assert!(check_writable("the workspace", wt, &g).is_ok());
    }
}
