//! What a sandbox policy must never hold: paths that would switch the sandbox off, and paths
//! a program could have turned into something else since they were named.
//!
//! ```text
//!  --writable, --hide (named now) ──► named_path: absolute, exists, no symbolic link on the way
//!                                              │ (a link in a writable tree may be a program's)
//!  the attempt's policy (new run, fan-out line, MCP call, retry, nested run) ──► check_policy:
//!     asked paths   still there, still no link   (a program may have replaced or moved them)
//!     --hide        not `/`, not the workspace or a directory holding it, not where the
//!                   sandbox mounts its own (`/proc`, `/dev`, `/tmp`)
//!     both          a path is --hide or --writable, never both
//!     --writable    not `/`, not the private `/tmp`; not in the machine's trees (`/proc`,
//!     and the       `/sys`, `/dev`, `/run`, `/boot`); not your home or a directory holding it;
//!     workspace     not subpane's home, inside it or holding it; not the tmux socket's
//!                   directory or one holding it; not holding or inside what runs outside the
//!                   sandbox later (agent settings, shell start-up files)
//! ```
//!
//! One inside the other is allowed, both ways: a `--writable` tree inside a `--hide`
//! directory is carried through it (the one thing the program sees there), and a `--hide`
//! path inside a `--writable` tree stays hidden (a mount point, which the program cannot
//! rename or remove).
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
//! * A directory above subpane's home is as dangerous as the home itself: the home is a
//!   mount point in the sandbox, but the directory holding it is not, and renaming that moves
//!   the home away on the host (the program then plants runs where it was). The same holds
//!   for the tmux socket's directory.
//! * A path inside the tmux socket's directory is allowed: it cannot reach the socket (hidden
//!   by a mount) nor rename the directory (not writable). Test homes often hold the socket.

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

/// Trees of the machine a program must never write, and why: writing there acts outside the
/// sandbox, whatever its namespaces (many kernel settings are host-wide).
const MACHINE_TREES: &[(&str, &str)] = &[
    (
        "/proc",
        "the kernel's settings and processes, many of them host-wide even from the sandbox's namespaces",
    ),
    ("/sys", "the kernel's and the devices' settings, host-wide"),
    (
        "/dev",
        "the machine's devices (the sandbox has a private /dev with what programs need)",
    ),
    ("/run", "the machine's sockets and services"),
    ("/boot", "the kernel and the boot loader"),
];

/// Whether `p` is in one of the machine's trees ([`MACHINE_TREES`]): inside a sandbox `/proc`
/// and `/dev` are its own, outside they are the host's, so nothing there is taken for it.
pub(in crate::app) fn in_machine_tree(p: &Path) -> bool {
    MACHINE_TREES.iter().any(|(t, _)| p.starts_with(t))
}

/// Paths the sandbox mounts its own over, and what is there instead: a `--hide` at or below
/// one would hide nothing (or keep the sandbox's own mount from being made).
const MOUNTED_BY_THE_SANDBOX: &[(&str, &str)] = &[
    (
        "/proc",
        "the sandbox mounts a proc of its own there, which shows only the sandbox's processes",
    ),
    (
        "/dev",
        "the sandbox has a private /dev with only null, zero, full, random, urandom, tty, ptmx, pts, shm and the fd links",
    ),
];

/// The sandbox's `/tmp`: its own, writable, the host's never seen.
const TMP: &str = "/tmp";

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
        .map_err(|e| Error::about(flag, format!("`{}` cannot be used: {e}", p.display())))?;
    if real != abs {
        return Err(Error::about(
            flag,
            format!(
                "`{}` passes through a symbolic link (it leads to `{}`): name the real path if that is what you mean; a link in a writable tree may have been planted by a program",
                p.display(),
                real.display()
            ),
        ));
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
    /// The directory of subpane's tmux socket, resolved.
    pub(in crate::app) tmux_socket_dir: Option<PathBuf>,
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
    for (flag, paths) in [("{writable}", &asked.writable), ("{hide}", &asked.hidden)] {
        for p in paths {
            match sys.canonicalize(p) {
                Ok(real) if &real == p => {}
                Ok(real) => {
                    return Err(Error::about(
                        flag,
                        format!(
                            "`{}` now passes through a symbolic link (it leads to `{}`); a program of an earlier attempt may have planted it: remove the link, or start a new run",
                            p.display(),
                            real.display()
                        ),
                    ));
                }
                Err(_) if flag == "{hide}" => {
                    return Err(Error::about(
                        "{hide}",
                        format!(
                            "`{}` is gone, so it cannot be hidden (a program of an earlier attempt may have moved it or a directory above it, and would see it under its new name): put it back, or start a new run",
                            p.display()
                        ),
                    ));
                }
                Err(e) => {
                    return Err(Error::about(
                        "{writable}",
                        format!("`{}` cannot be used: {e}", p.display()),
                    ));
                }
            }
        }
    }
    for h in &asked.hidden {
        check_hidden(h, g)?;
    }
    if let Some(both) = asked.writable.iter().find(|w| asked.hidden.contains(w)) {
        return Err(Error::invalid(format!(
            "`{}` is both {{hide}} and {{writable}}: a hidden path cannot be seen, and a writable one is; give it once",
            both.display()
        )));
    }
    check_writable("the workspace", g.workspace, g)?;
    for w in &asked.writable {
        check_writable("{writable}", w, g)?;
    }
    Ok(())
}

/// `is NAME` when `w` is `place`, else `holds NAME `place``.
fn is_or_holds(w: &Path, place: &Path, name: &str) -> String {
    if w == place {
        format!("is {name}")
    } else {
        format!("holds {name} `{}`", place.display())
    }
}

/// One hidden path (see the module docs).
fn check_hidden(h: &Path, g: &Guarded<'_>) -> Result<(), Error> {
    let shown = h.display();
    if h == Path::new("/") {
        return Err(Error::about(
            "{hide}",
            "`/` would hide everything, the program included: name what it must not see",
        ));
    }
    if g.workspace.starts_with(h) {
        return Err(Error::about(
            "{hide}",
            format!(
                "`{shown}` holds the workspace `{}`, which the program needs: hide what is inside it instead",
                g.workspace.display()
            ),
        ));
    }
    if let Some((tree, instead)) = MOUNTED_BY_THE_SANDBOX
        .iter()
        .find(|(t, _)| h.starts_with(t))
    {
        return Err(Error::about(
            "{hide}",
            format!(
                "`{shown}` is in `{tree}`, where {instead}: the host's is not seen there anyway; drop it"
            ),
        ));
    }
    if h == Path::new(TMP) {
        return Err(Error::about(
            "{hide}",
            "`/tmp`: the sandbox's /tmp is its own, and the host's is never seen; drop it",
        ));
    }
    Ok(())
}

/// One writable path (see the module docs).
fn check_writable(what: &str, w: &Path, g: &Guarded<'_>) -> Result<(), Error> {
    let shown = w.display();
    if w == Path::new("/") {
        return Err(Error::about(
            what,
            "`/` would let the program write everywhere: name the directories it needs",
        ));
    }
    if w == Path::new(TMP) {
        return Err(Error::about(
            what,
            "`/tmp` is the sandbox's own /tmp, writable already (the host's is never seen): name a directory of its own",
        ));
    }
    if let Some((tree, holds)) = MACHINE_TREES.iter().find(|(t, _)| w.starts_with(t)) {
        return Err(Error::about(
            what,
            format!(
                "`{shown}` is in `{tree}`, {holds}: writing there acts outside the sandbox; name the directories the program needs"
            ),
        ));
    }
    if let Some(home) = g.user_home.as_deref().filter(|h| h.starts_with(w)) {
        return Err(Error::about(
            what,
            format!(
                "`{shown}` {}: the program could change your shell's start-up files and your agents' settings, which run outside the sandbox later; name the directories it needs",
                is_or_holds(w, home, "your home")
            ),
        ));
    }
    if g.subpane_home.starts_with(w) {
        return Err(Error::about(
            what,
            format!(
                "`{shown}` {}: the program could move the home away and put forged runs in its place, which subpane would list and retry outside the sandbox; name a directory beside the home",
                is_or_holds(w, g.subpane_home, "subpane's home")
            ),
        ));
    }
    // A `--worktree` attempt's workspace is subpane's own worktree, under the home.
    let own_worktree = what == "the workspace" && w.starts_with(g.subpane_home.join("worktrees"));
    if w.starts_with(g.subpane_home) && !own_worktree {
        return Err(Error::about(
            what,
            format!(
                "`{shown}` is inside subpane's home `{}`: the records of runs must stay out of a program's reach",
                g.subpane_home.display()
            ),
        ));
    }
    if let Some(dir) = g.tmux_socket_dir.as_deref().filter(|d| d.starts_with(w)) {
        return Err(Error::about(
            what,
            format!(
                "`{shown}` {}: the program could move the socket away and answer in the tmux server's place, which runs whatever is asked of it outside the sandbox; name another directory",
                is_or_holds(w, dir, "the directory of subpane's tmux socket")
            ),
        ));
    }
    for p in g.protected() {
        if p.starts_with(w) || w.starts_with(&p) {
            return Err(Error::about(
                what,
                format!(
                    "`{shown}` would make `{}` writable, which runs outside the sandbox later (agent settings, shell start-up files): name other directories",
                    p.display()
                ),
            ));
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
            tmux_socket_dir: Some("/tmp/tmux-0".into()),
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
            // Above the home: renaming it moves the home away on the host.
            ("/home/u/.local", "holds subpane's home"),
            ("/home/u/.local/state", "holds subpane's home"),
            ("/proc", "`/proc`"),
            ("/proc/sys/kernel", "`/proc`"),
            ("/sys", "`/sys`"),
            ("/dev", "`/dev`"),
            ("/dev/shm", "`/dev`"),
            ("/run/user/0", "`/run`"),
            ("/boot", "`/boot`"),
            ("/tmp", "own /tmp"),
            ("/tmp/tmux-0", "is the directory of subpane's tmux socket"),
        ] {
            let e = check_writable("{writable}", Path::new(w), &g).unwrap_err();
            assert!(e.to_string().contains(says), "{w}: {e}");
        }
        for w in [
            "/home/u/src",
            "/home/us",
            "/home/u/.cache/go",
            "/home/u/.claudette",
            "/home/u/.local/share",
            "/procs",
            "/tmp/tmux-0/inner",
            "/tmp/build",
        ] {
            assert!(
                check_writable("{writable}", Path::new(w), &g).is_ok(),
                "{w}"
            );
        }
        // The worktree of a `--worktree` attempt is the workspace, under subpane's home.
        let wt = Path::new("/home/u/.local/state/subpane/worktrees/r-1");
        assert!(check_writable("the workspace", wt, &g).is_ok());
        // With the socket elsewhere, a directory above it holds it.
        let g = Guarded {
            tmux_socket_dir: Some("/srv/sock/tmux".into()),
            ..guarded(ws, sh)
        };
        let e = check_writable("{writable}", Path::new("/srv/sock"), &g).unwrap_err();
        assert!(
            e.to_string()
                .contains("holds the directory of subpane's tmux socket `/srv/sock/tmux`"),
            "{e}"
        );
    }

    #[test]
    fn hidden_paths_the_sandbox_mounts_its_own_over_are_refused() {
        let (ws, sh) = (Path::new("/home/u/src/app"), Path::new("/h"));
        let g = guarded(ws, sh);
        for (h, says) in [
            ("/", "hide everything"),
            ("/home/u/src", "holds the workspace"),
            ("/proc", "proc of its own"),
            ("/proc/sys", "proc of its own"),
            ("/dev", "private /dev"),
            ("/dev/kvm", "private /dev"),
            ("/tmp", "its own"),
        ] {
            let e = check_hidden(Path::new(h), &g).unwrap_err();
            assert!(e.to_string().contains(says), "{h}: {e}");
        }
        for h in [
            "/home/u/src/app/secret",
            "/home/u/.aws",
            "/tmp/x",
            "/sys/kernel",
        ] {
            assert!(check_hidden(Path::new(h), &g).is_ok(), "{h}");
        }
    }

    #[test]
    fn a_path_both_hidden_and_writable_is_refused_and_one_inside_the_other_is_taken() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        let (a, b) = (root.join("a"), root.join("a/b"));
        let ws = root.join("ws");
        let sys = super::super::RealSystem;
        let check = |writable: &[&PathBuf], hidden: &[&PathBuf]| {
            let asked = crate::spec::SandboxAsk {
                writable: writable.iter().map(|p| (*p).clone()).collect(),
                hidden: hidden.iter().map(|p| (*p).clone()).collect(),
            };
            check_policy(&sys, &asked, &guarded(&ws, Path::new("/h")))
        };
        let e = check(&[&a], &[&a]).unwrap_err();
        assert!(e.to_string().contains("both --hide and --writable"), "{e}");
        assert!(check(&[&a], &[&b]).is_ok());
        assert!(check(&[&b], &[&a]).is_ok());
    }
}
