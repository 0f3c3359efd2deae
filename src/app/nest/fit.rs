//! Whether a nested run's sandbox stays within its parent's, and the parent's per-process
//! limits it takes on. Pure: two policies in, a verdict (and the child's policy tightened)
//! out.
//!
//! ```text
//!  network   none ⊂ allow:… ⊂ full; an allow list only a part of the parent's
//!  writable  each path inside a tree the parent writes ─► that whole tree (one the parent
//!            cannot rename or replace); the child's own out/ and sessions stay its own
//!  read-only each path the parent sees and cannot change, or inside a writable tree
//!            + every read-only path of the parent's inside the child's writable trees
//!  hidden    + every hidden path of the parent's (refused if the parent could move it)
//!  git       the parent's repository view, with an overlay of its own, when a writable
//!            tree holds its work tree; else none (a `.git` there is the parent's files)
//!  limits    memory and file size (per process) at most the parent's; processes and /tmp
//!            are a grant out of the parent's own (budget.rs), set after the fit
//!  agent     seeded only from what the child's sandbox sees (`within_sight`): at most the
//!            parent's view, the parent's hides applied
//! ```
//!
//! What the parent sees and writes follows the mounts of the sandbox helper
//! (`sandbox::mounts`): the private `/tmp` and each hidden path are masks that show only the
//! trees the policy carries below them; read-only binds cover their trees. Where that could
//! be read two ways, the answer here is the stricter one.
//!
//! Common pitfalls:
//! * The child's sandbox is set up later, from paths. Inside the parent's writable trees the
//!   parent can rename a directory or swap it for a link in the meantime, so a path there is
//!   never named on its own: the child gets the whole tree (whose root the parent cannot
//!   touch), and a hidden path the parent could move refuses the run.
//! * A place the planner derives for the child's own run (its `out/`, its sessions, its
//!   sockets, its agent state) must be listed in `own`, or it is refused as the parent's home.
//! * A `.git` the planner found in the child's workspace may be one the parent's program
//!   made (pointing at any repository of the user's): only the parent's own repository view
//!   is given on, so the child's end never moves a branch the parent could not.

use std::path::{Path, PathBuf};

use crate::spec::{HostPattern, Network, SandboxSpec};

const TMP: &str = "/tmp";

/// The parent's masks: its hidden paths and its private `/tmp`.
fn masks(parent: &SandboxSpec) -> impl Iterator<Item = &Path> {
    parent
        .hidden
        .iter()
        .map(PathBuf::as_path)
        .chain([Path::new(TMP)])
}

/// Whether the parent sees `p` through `tree` (a tree its view has at its own path): every
/// mask over `p` lies strictly above `tree`, which was carried below it.
fn through(parent: &SandboxSpec, p: &Path, tree: &Path) -> bool {
    masks(parent).all(|m| !p.starts_with(m) || (tree.starts_with(m) && tree != m))
}

/// Whether the parent's program sees `p` as the host has it (any policy's program: the
/// seeder asks it of a nested run's own policy, see `app::seed`).
pub(in crate::app) fn reads(parent: &SandboxSpec, p: &Path) -> bool {
    parent
        .writable
        .iter()
        .chain(&parent.read_only)
        .map(PathBuf::as_path)
        .chain([Path::new("/")])
        .any(|v| p.starts_with(v) && through(parent, p, v))
}

/// Whether `p` is a mount point in the parent's view (which cannot be renamed or removed
/// there): a read-only bind, a mask, or a writable tree carried below a mask.
fn mount_point(parent: &SandboxSpec, p: &Path) -> bool {
    parent.read_only.iter().any(|r| r == p)
        || masks(parent).any(|m| m == p)
        || (parent.writable.iter().any(|w| w == p) && masks(parent).any(|m| p.starts_with(m)))
}

/// Whether the parent's program can make `p` name something else: rename or replace `p` or
/// a directory above it (possible where that directory lies in a tree it writes, and the
/// path is not a mount point of its view).
fn movable(parent: &SandboxSpec, p: &Path) -> bool {
    p.ancestors().any(|a| {
        a.parent().is_some_and(|dir| {
            parent.writable.iter().any(|w| dir.starts_with(w)) && !mount_point(parent, a)
        })
    })
}

/// The tree of the parent's that `p` is written in, when the parent may write `p`: the
/// outermost such tree the parent cannot move.
fn writable_tree<'a>(parent: &'a SandboxSpec, p: &Path) -> Option<&'a Path> {
    if parent.read_only.iter().any(|r| p.starts_with(r)) {
        return None;
    }
    parent
        .writable
        .iter()
        .map(PathBuf::as_path)
        .filter(|w| p.starts_with(w) && through(parent, p, w) && !movable(parent, w))
        .min_by_key(|w| w.components().count())
}

/// Whether the child's network is at most the parent's.
pub(super) fn within_network(child: &Network, parent: &Network) -> Result<(), String> {
    let shown = network_flag;
    match (child, parent) {
        (_, Network::Full) | (Network::None, _) => Ok(()),
        (Network::Allow(c), Network::Allow(p)) => {
            match c.iter().find(|c| !p.iter().any(|p| covers(p, c))) {
                None => Ok(()),
                Some(c) => Err(format!(
                    "{{network}} allows `{}`, which the parent sandbox does not ({}): a run from a sandbox reaches at most what its parent reaches",
                    String::from(c.clone()),
                    shown(parent)
                )),
            }
        }
        _ => Err(format!(
            "{{network}} {}: the parent sandbox's network is {}, and a run from a sandbox reaches at most what its parent reaches",
            shown(child),
            shown(parent)
        )),
    }
}

/// A network policy as `--network` spells it.
pub(super) fn network_flag(n: &Network) -> String {
    match n {
        Network::None => "none".into(),
        Network::Full => "full".into(),
        Network::Allow(p) => {
            let names: Vec<String> = p.iter().cloned().map(String::from).collect();
            format!("allow:{}", names.join(","))
        }
    }
}

/// Whether the parent's pattern `p` allows every host the child's `c` does.
fn covers(p: &HostPattern, c: &HostPattern) -> bool {
    let below = |name: &str, suffix: &str| {
        name.len() > suffix.len() + 1
            && name
                .to_ascii_lowercase()
                .ends_with(&format!(".{}", suffix.to_ascii_lowercase()))
    };
    match (p, c) {
        (HostPattern::Name(a), HostPattern::Name(b)) => a.eq_ignore_ascii_case(b),
        (HostPattern::Below(s), HostPattern::Name(b)) => below(b, s),
        (HostPattern::Below(s), HostPattern::Below(t)) => s.eq_ignore_ascii_case(t) || below(t, s),
        (HostPattern::Ip(a), HostPattern::Ip(b)) => a == b,
        _ => false,
    }
}

/// Checks the child's policy against the parent's and tightens it: see the module docs.
/// `own` are the child's own places (exact paths), `cwd` its working directory (to name it
/// in a refusal).
pub(super) fn fit(
    parent: &SandboxSpec,
    child: &mut SandboxSpec,
    own: &[PathBuf],
    git_overlay: (&Path, &Path),
    cwd: &Path,
) -> Result<(), String> {
    within_network(&child.network, &parent.network)?;
    if let Some(h) = parent.hidden.iter().find(|h| movable(parent, h)) {
        return Err(format!(
            "the parent sandbox hides `{}` below a directory its program may rename, so a run from it could not keep that hidden: hide a path directly inside a writable tree, or outside one",
            h.display()
        ));
    }
    let mut asked = child.asked.clone().unwrap_or_default();
    let named = asked.writable.clone();
    let refuse = |w: &Path| {
        let what = if w == cwd {
            "the working directory"
        } else if named.iter().any(|a| a == w) {
            "{writable}"
        } else {
            "the agent's state directory"
        };
        let trees: Vec<String> = parent
            .writable
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        format!(
            "{what} `{}` is not writable in the parent sandbox: a run from a sandbox writes only inside its parent's writable trees ({})",
            w.display(),
            trees.join(", ")
        )
    };
    let tree_of = |w: &Path| -> Result<PathBuf, String> {
        writable_tree(parent, w)
            .map(Path::to_path_buf)
            .ok_or_else(|| refuse(w))
    };
    let mut writable: Vec<PathBuf> = Vec::new();
    for w in &child.writable {
        let w = if own.contains(w) {
            w.clone()
        } else {
            tree_of(w)?
        };
        if !writable.contains(&w) {
            writable.push(w);
        }
    }
    let mut read_only: Vec<PathBuf> = Vec::new();
    for r in &child.read_only {
        let inside = own.contains(r) || writable.iter().any(|w| r.starts_with(w));
        if !inside && !reads(parent, r) {
            return Err(format!(
                "`{}` is hidden from the parent sandbox, so a run from it cannot see it",
                r.display()
            ));
        }
        if !inside && movable(parent, r) {
            return Err(format!(
                "`{}` lies in a directory the parent sandbox's program may change: run the program from inside a writable tree, or from outside one",
                r.display()
            ));
        }
        read_only.push(r.clone());
    }
    for r in &parent.read_only {
        if writable.iter().any(|w| r.starts_with(w)) && !read_only.contains(r) {
            read_only.push(r.clone());
        }
    }
    let mut asked_writable = Vec::new();
    for w in &asked.writable {
        let t = tree_of(w)?;
        if !asked_writable.contains(&t) {
            asked_writable.push(t);
        }
    }
    asked.writable = asked_writable;
    for h in &parent.hidden {
        for list in [&mut child.hidden, &mut asked.hidden] {
            if !list.contains(h) {
                list.push(h.clone());
            }
        }
    }
    child.git = parent
        .git
        .as_ref()
        .filter(|g| writable.iter().any(|w| g.work_tree.starts_with(w)))
        .map(|g| crate::spec::GitRepo {
            upper: git_overlay.0.to_path_buf(),
            work: git_overlay.1.to_path_buf(),
            ..g.clone()
        });
    // Per process: at most the parent's. Processes and /tmp are the parent's own to share
    // (budget.rs).
    let (c, p) = (&mut child.limits, &parent.limits);
    c.memory_bytes = c.memory_bytes.min(p.memory_bytes);
    c.file_size_bytes = c.file_size_bytes.min(p.file_size_bytes);
    child.writable = writable;
    child.read_only = read_only;
    child.asked = Some(asked);
    // Its agent is seeded from what its own sandbox sees, at most its parent's view (with
    // the parent's hides, added above): never more of the user's files.
    if let Some(state) = &mut child.agent_state {
        state.within_sight = true;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::SandboxAsk;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    fn paths(v: &[&str]) -> Vec<PathBuf> {
        v.iter().map(|s| p(s)).collect()
    }

    /// A parent working in /work (with --hide /work/secret and --writable /data), its out/
    /// under the hidden home, its git hooks read-only.
    fn parent() -> SandboxSpec {
        SandboxSpec {
            enabled: true,
            network: Network::None,
            writable: paths(&["/work", "/h/runs/a/attempts/1/out", "/data"]),
            read_only: paths(&["/work/.git/hooks", "/h/runs/a/attempts/1/nest.sock"]),
            hidden: paths(&["/work/secret", "/tmp/tmux-0/subpane", "/h", "/run/dbus"]),
            env_pass: vec![],
            asked: Some(SandboxAsk {
                writable: paths(&["/data"]),
                hidden: paths(&["/work/secret"]),
            }),
            ..Default::default()
        }
    }

    const OWN: &[&str] = &["/h/runs/c/attempts/1/out", "/h/runs/c/attempts/1/nest.sock"];
    const GIT_UPPER: &str = "/h/runs/c/attempts/1/git/upper";
    const GIT_WORK: &str = "/h/runs/c/attempts/1/git/work";
    fn git() -> (&'static Path, &'static Path) {
        (Path::new(GIT_UPPER), Path::new(GIT_WORK))
    }

    fn child(writable: &[&str], read_only: &[&str]) -> SandboxSpec {
        let mut w = paths(writable);
        w.push(p(OWN[0]));
        let mut r = paths(read_only);
        r.push(p(OWN[1]));
        SandboxSpec {
            enabled: true,
            network: Network::None,
            writable: w,
            read_only: r,
            hidden: paths(&["/tmp/tmux-0/subpane", "/h"]),
            env_pass: vec![],
            asked: Some(SandboxAsk::default()),
            ..Default::default()
        }
    }

    fn fits(mut c: SandboxSpec, cwd: &str) -> Result<SandboxSpec, String> {
        fit(&parent(), &mut c, &paths(OWN), git(), Path::new(cwd)).map(|()| c)
    }

    #[test]
    fn a_child_in_a_subdirectory_writes_the_parents_whole_tree_and_keeps_its_limits() {
        let c = fits(child(&["/work/sub"], &[]), "/work/sub").unwrap();
        // Not /work/sub, which the parent could swap for a link before the child starts.
        assert_eq!(c.writable, paths(&["/work", OWN[0]]));
        assert_eq!(c.read_only, paths(&[OWN[1], "/work/.git/hooks"]));
        for h in parent().hidden {
            assert!(c.hidden.contains(&h), "{h:?} not hidden: {:?}", c.hidden);
            assert!(c.asked.as_ref().unwrap().hidden.contains(&h));
        }
        // Its own out/ and sockets are its own, though under the parent's hidden home.
        assert!(fits(child(&["/work", "/data/x"], &[]), "/work").is_ok());
    }

    #[test]
    fn a_path_the_parent_cannot_write_is_refused_naming_the_rule() {
        for (w, cwd, words) in [
            (
                "/usr/src",
                "/usr/src",
                "the working directory `/usr/src` is not writable",
            ),
            ("/work/secret/x", "/work", "is not writable"),
            ("/work/.git/hooks", "/work", "is not writable"),
            // Another run's records, under the parent's hidden home.
            (
                "/h/runs/b/attempts/1",
                "/work",
                "the agent's state directory",
            ),
            // The parent's private /tmp is not the host's.
            ("/tmp/x", "/work", "is not writable"),
        ] {
            let e = fits(child(&[w], &[]), cwd).unwrap_err();
            assert!(e.contains(words) && e.contains("/work, "), "{w}: {e}");
        }
        let mut c = child(&["/work", "/etc"], &[]);
        c.asked = Some(SandboxAsk {
            writable: paths(&["/etc"]),
            hidden: vec![],
        });
        let e = fits(c, "/work").unwrap_err();
        assert!(e.starts_with("{writable} `/etc`"), "{e}");
    }

    #[test]
    fn trees_the_parent_writes_below_a_mask_stay_writable_and_nothing_else_there() {
        let mut parent = parent();
        // A workspace under /tmp, carried into the private /tmp.
        parent.writable[0] = p("/tmp/sp/work");
        parent.read_only[0] = p("/tmp/sp/work/.git/hooks");
        let mut c = child(&["/tmp/sp/work/sub"], &[]);
        fit(
            &parent,
            &mut c,
            &paths(OWN),
            git(),
            Path::new("/tmp/sp/work/sub"),
        )
        .unwrap();
        assert_eq!(c.writable[0], p("/tmp/sp/work"));
        // The parent's own out/ is its, but writable to it: a child may work there too.
        let mut c = child(&["/h/runs/a/attempts/1/out/x"], &[]);
        fit(&parent, &mut c, &paths(OWN), git(), Path::new("/h")).unwrap();
        assert_eq!(c.writable[0], p("/h/runs/a/attempts/1/out"));
        // Below the mask, nothing but the carried trees.
        let mut c = child(&["/tmp/sp/other"], &[]);
        assert!(fit(&parent, &mut c, &paths(OWN), git(), Path::new("/w")).is_err());
    }

    #[test]
    fn what_the_child_sees_read_only_must_be_in_the_parents_sight_and_fixed() {
        // A program under the host's /tmp: the parent's /tmp is private.
        let e = fits(child(&["/work"], &["/tmp/ck/bin"]), "/work").unwrap_err();
        assert!(e.contains("hidden from the parent"), "{e}");
        // Below the parent's hidden home.
        assert!(fits(child(&["/work"], &["/h/runs/b"]), "/work").is_err());
        // Visible, outside every writable tree: taken as it is.
        let c = fits(child(&["/data"], &["/opt/tool"]), "/data").unwrap();
        assert!(c.read_only.contains(&p("/opt/tool")));
        // In a writable tree of the parent's that the child does not write: the parent could
        // swap it for a link to anything.
        let e = fits(child(&["/data"], &["/work/tools"]), "/data").unwrap_err();
        assert!(e.contains("may change"), "{e}");
        // Inside the child's own writable tree: a link there gains nothing.
        assert!(fits(child(&["/work"], &["/work/sub/.git/hooks"]), "/work").is_ok());
    }

    #[test]
    fn a_hidden_path_the_parent_could_move_refuses_the_run() {
        let mut parent = parent();
        // Directly inside its writable tree: a mount point in its view, it cannot be moved.
        assert!(!movable(&parent, Path::new("/work/secret")));
        // Deeper: /work/a can be renamed with the hidden path inside it.
        parent.hidden[0] = p("/work/a/secret");
        let mut c = child(&["/work"], &[]);
        let e = fit(&parent, &mut c, &paths(OWN), git(), Path::new("/work")).unwrap_err();
        assert!(e.contains("/work/a/secret") && e.contains("rename"), "{e}");
    }

    #[test]
    fn writable_trees_nested_in_others_give_the_outermost() {
        let mut parent = parent();
        parent.writable.push(p("/work/cache"));
        let mut c = child(&["/work/cache/x"], &[]);
        fit(
            &parent,
            &mut c,
            &paths(OWN),
            git(),
            Path::new("/work/cache/x"),
        )
        .unwrap();
        assert_eq!(c.writable[0], p("/work"));
        assert!(movable(&parent, Path::new("/work/cache")));
        assert!(!movable(&parent, Path::new("/work")));
    }

    #[test]
    fn the_network_is_at_most_the_parents() {
        let allow = |s: &str| Network::parse(&format!("allow:{s}")).unwrap();
        let ok = |c: &Network, p: &Network| within_network(c, p).is_ok();
        assert!(ok(&Network::None, &Network::None));
        assert!(ok(&Network::Full, &Network::Full));
        assert!(ok(&allow("a.example.com"), &Network::Full));
        assert!(ok(&Network::None, &allow("example.com")));
        assert!(!ok(&Network::Full, &Network::None));
        assert!(!ok(&allow("example.com"), &Network::None));
        assert!(!ok(&Network::Full, &allow("example.com")));
        let parent = allow("example.com,*.example.org,10.0.0.1");
        assert!(ok(&allow("example.com"), &parent));
        assert!(ok(&allow("api.example.org,*.eu.example.org"), &parent));
        assert!(ok(&allow("*.example.org,10.0.0.1"), &parent));
        for wider in [
            "api.example.com",
            "example.org",
            "*.org.example.com",
            "10.0.0.2",
            "evilexample.org",
        ] {
            let e = within_network(&allow(wider), &parent).unwrap_err();
            assert!(e.contains(wider), "{wider}: {e}");
        }
        let e = within_network(&Network::Full, &Network::None).unwrap_err();
        assert!(e.contains("{network} full") && e.contains("is none"), "{e}");
        assert_eq!(
            network_flag(&parent),
            "allow:example.com,*.example.org,10.0.0.1"
        );
    }

    #[test]
    fn the_parents_repository_view_is_given_on_and_any_other_git_is_dropped() {
        let repo = crate::spec::GitRepo {
            common_dir: p("/work/.git"),
            git_dir: p("/work/.git"),
            work_tree: p("/work"),
            branch: Some("main".into()),
            upper: p("/h/runs/a/attempts/1/git/upper"),
            work: p("/h/runs/a/attempts/1/git/work"),
        };
        let mut parent = parent();
        parent.git = Some(repo.clone());
        // A child in a subdirectory gets /work whole: its .git is the parent's view, with an
        // overlay of the child's own.
        let mut c = child(&["/work/sub"], &[]);
        fit(&parent, &mut c, &paths(OWN), git(), Path::new("/work/sub")).unwrap();
        let g = c.git.unwrap();
        assert_eq!((g.upper.as_path(), g.work.as_path()), git());
        assert_eq!((&g.common_dir, &g.branch), (&repo.common_dir, &repo.branch));
        // A .git the planner found in a tree of the parent's that does not hold the
        // repository (the parent's program could have made it): no view, no branch back.
        let mut c = child(&["/data/x"], &[]);
        c.git = Some(crate::spec::GitRepo {
            common_dir: p("/home/u/other/.git"),
            git_dir: p("/home/u/other/.git"),
            work_tree: p("/data/x"),
            ..repo
        });
        fit(&parent, &mut c, &paths(OWN), git(), Path::new("/data/x")).unwrap();
        assert_eq!(c.git, None);
    }

    #[test]
    fn each_limit_of_a_process_is_at_most_the_parents() {
        let mut parent = parent();
        parent.limits.memory_bytes = 1 << 31;
        parent.limits.file_size_bytes = 1 << 20;
        let mut c = child(&["/work"], &[]);
        c.limits.memory_bytes = 1 << 30;
        fit(&parent, &mut c, &paths(OWN), git(), Path::new("/work")).unwrap();
        assert_eq!(c.limits.memory_bytes, 1 << 30);
        assert_eq!(c.limits.file_size_bytes, 1 << 20);
    }
}
