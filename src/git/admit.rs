//! What of a sandboxed program's branch may come back: a fast-forward, bringing no submodule
//! the repository does not have. Asked of the repository itself once `index-pack` has put the
//! program's objects there (hashed and checked), never of the program's own files. What
//! became of the branch, and why, is a [`Carry`].
//!
//! ```text
//!  O: the branch in the repository now        N: the program's tip
//!  rev-list --left-right --count O...N            ─► behind, ahead
//!  merge-base --is-ancestor O N                   no ─► refused: not a fast-forward
//!  rev-list N ^O ─► diff-tree --stdin -m --root   paths that become gitlinks (mode 160000)
//!                   ls-tree -r O                  minus the gitlinks O has
//!                                                 any left ─► refused: submodule
//!  refused, N has commits O lacks ─► a scratch bare repository borrowing the repository's
//!     objects, its refs/heads/B = N ─► bundle create - refs/heads/B ^O ─► the attempt's file
//! ```
//!
//! Common pitfalls:
//! * A gitlink is a door into whatever repository the work tree holds at its path: once it
//!   is in the index, the user's next `git status` runs a `git status` there, with that
//!   repository's own fsmonitor and filters, and a program can make one anywhere in its
//!   workspace. Only the paths that were gitlinks at O (the user's own submodules) may be
//!   gitlinks in what comes back.
//! * A merge can bring a gitlink from either side: `-m` diffs a commit against each of its
//!   parents and `--root` a root commit against nothing, so every path that becomes a
//!   gitlink somewhere in the carried commits is seen.
//! * `merge-base --is-ancestor` exits 1 for "no" and 128 when it cannot tell: both refuse.
//! * `git bundle create` takes refs only (object ids make an "empty bundle"), and the
//!   repository's refs are not subpane's to add to: the ref lives in a scratch repository.

use std::path::{Path, PathBuf};

use super::{Cmd, GitError};

/// Why the program's tip does not come back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// The tip is not a descendant of the branch: it would lose commits of the branch.
    NotFastForward,
    /// Its commits hold gitlinks at paths the branch has none.
    Submodule,
}

/// What became of the branch.
#[derive(Debug)]
pub struct Carry {
    pub branch: String,
    /// Where it was in the repository when the attempt ended (`None`: it did not exist).
    pub from: Option<String>,
    /// Where the program left it (`None`: it left no tip of its own, or deleted it).
    pub to: Option<String>,
    /// Commits of `to` that `from` lacks (carried back, or kept), and of `from` that `to`
    /// lacks.
    pub ahead: u64,
    pub behind: u64,
    pub outcome: Outcome,
}

/// Whether the branch moved.
#[derive(Debug)]
pub enum Outcome {
    /// The program left the branch where it is.
    Unchanged,
    /// Fast-forwarded to the program's tip.
    Carried,
    Refused(Refusal),
}

/// Why the program's tip did not come back, and where its commits are.
#[derive(Debug)]
pub struct Refusal {
    pub reason: Reason,
    /// Gitlinks of the carried commits at paths the branch has none (sorted).
    pub submodules: Vec<String>,
    /// The bundle of the commits `from` lacks, when there are some and it was written.
    pub kept: Option<PathBuf>,
    /// Why the bundle could not be written.
    pub keep_error: Option<GitError>,
}

impl Refusal {
    /// A refusal for `reason`; `kept` is how writing the bundle at `at` went, when there was
    /// something to keep.
    pub(super) fn new(
        reason: Reason,
        submodules: Vec<String>,
        kept: Option<Result<(), GitError>>,
        at: &Path,
    ) -> Self {
        let (kept, keep_error) = match kept {
            Some(Ok(())) => (Some(at.to_path_buf()), None),
            Some(Err(e)) => (None, Some(e)),
            None => (None, None),
        };
        Self {
            reason,
            submodules,
            kept,
            keep_error,
        }
    }
}

impl Carry {
    /// Why the program's tip did not come back, in a sentence (`None` unless refused).
    pub fn why(&self) -> Option<String> {
        let Outcome::Refused(r) = &self.outcome else {
            return None;
        };
        let b = &self.branch;
        let stays = match &self.from {
            Some(f) => format!("{b} stays at {}", short(f)),
            None => format!("{b} stays as it was (none)"),
        };
        let to = self.to.as_deref().map_or("", short);
        let commits = |n| crate::term::counted(n, "commit");
        Some(match r.reason {
            Reason::NotFastForward if self.ahead == 0 => format!(
                "the program moved {b} back {}, to {to}, which {b} has already; {stays}",
                commits(self.behind)
            ),
            Reason::NotFastForward => format!(
                "the program's tip {to} is not a descendant of {b} (it lacks {} of {b}'s); \
                 only a fast-forward comes back: {stays}",
                commits(self.behind)
            ),
            Reason::Submodule => format!(
                "the program's commits bring {} the repository does not have ({}): git \
                 would enter the repository the program made there, and run its config, at \
                 your next command; {stays}",
                if r.submodules.len() == 1 {
                    "a submodule"
                } else {
                    "submodules"
                },
                some_paths(&r.submodules)
            ),
        })
    }
}

/// The first few of `paths` (a program chooses how many, and how long), and how many more.
fn some_paths(paths: &[String]) -> String {
    const SHOWN: usize = 3;
    let mut shown: Vec<String> = paths.iter().take(SHOWN).cloned().collect();
    for p in &mut shown {
        crate::term::cut(p, 200);
    }
    let mut s = shown.join(", ");
    if paths.len() > SHOWN {
        s.push_str(&format!(" and {} more", paths.len() - SHOWN));
    }
    s
}

/// The first 12 digits of an object id.
fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}

/// How the program's tip stands to the branch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Judged {
    /// Commits of the tip the branch lacks.
    pub ahead: u64,
    /// Commits of the branch the tip lacks.
    pub behind: u64,
    /// Paths that are gitlinks in some carried commit and not at the branch, sorted.
    pub submodules: Vec<String>,
    pub refused: Option<Reason>,
}

/// Judges the program's tip `new` against the branch's `old` (`None`: no such branch), both
/// in the repository at `common_dir`. `scratch` is a private directory for git's input.
pub(super) fn judge(
    common_dir: &Path,
    scratch: &Path,
    old: Option<&str>,
    new: &str,
) -> Result<Judged, GitError> {
    let (behind, ahead) = match old {
        Some(o) => {
            let counts = Cmd::on_git_dir(common_dir)
                .args(["rev-list", "--left-right", "--count"])
                .arg(format!("{o}...{new}"))
                .read()?;
            let mut n = counts.split_whitespace().map(|c| c.parse::<u64>().ok());
            match (n.next().flatten(), n.next().flatten()) {
                (Some(b), Some(a)) => (b, a),
                _ => return Err(unexpected("rev-list --left-right --count", &counts)),
            }
        }
        None => {
            let n = Cmd::on_git_dir(common_dir)
                .args(["rev-list", "--count", new])
                .read()?;
            (
                0,
                n.parse().map_err(|_| unexpected("rev-list --count", &n))?,
            )
        }
    };
    let descends = match old {
        Some(o) => Cmd::on_git_dir(common_dir)
            .args(["merge-base", "--is-ancestor", o, new])
            .read_if_ok()?
            .is_some(),
        None => true,
    };
    let submodules = if ahead == 0 {
        Vec::new()
    } else {
        new_gitlinks(common_dir, scratch, old, new)?
    };
    let refused = if !descends || behind > 0 {
        Some(Reason::NotFastForward)
    } else if !submodules.is_empty() {
        Some(Reason::Submodule)
    } else {
        None
    };
    Ok(Judged {
        ahead,
        behind,
        submodules,
        refused,
    })
}

/// Paths that are gitlinks in a commit of `new ^old` and not at `old`.
fn new_gitlinks(
    common_dir: &Path,
    scratch: &Path,
    old: Option<&str>,
    new: &str,
) -> Result<Vec<String>, GitError> {
    let mut revs = Cmd::on_git_dir(common_dir).args(["rev-list", new]);
    if let Some(o) = old {
        revs = revs.arg(format!("^{o}"));
    }
    let list = scratch.join("carried-commits");
    std::fs::write(&list, revs.read_bytes()?).map_err(|source| GitError::Write {
        path: list.clone(),
        source,
    })?;
    let input = std::fs::File::open(&list).map_err(|source| GitError::Write {
        path: list.clone(),
        source,
    })?;
    let diffs = Cmd::on_git_dir(common_dir)
        .stdin_from(input)
        .args([
            "diff-tree",
            "--stdin",
            "-r",
            "-m",
            "--root",
            "--no-renames",
            "--no-commit-id",
            "-z",
        ])
        .read_bytes()?;
    let mut found = gitlinks_of_diff(&diffs);
    if !found.is_empty()
        && let Some(o) = old
    {
        let tree = Cmd::on_git_dir(common_dir)
            .args(["ls-tree", "-r", "-z", o])
            .read_bytes()?;
        let had: Vec<String> = super::gitlinks_of_listing(&tree)
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect();
        found.retain(|p| !had.contains(p));
    }
    Ok(found)
}

/// The paths a raw `-z` diff gives mode 160000 (`:<mode> <mode> <id> <id> <status>\0<path>\0`
/// per change; one path each, renames being off), sorted and unique.
fn gitlinks_of_diff(raw: &[u8]) -> Vec<String> {
    let mut fields = raw.split(|b| *b == 0);
    let mut found = Vec::new();
    while let Some(meta) = fields.next() {
        let Some(meta) = meta.strip_prefix(b":") else {
            continue;
        };
        let Some(path) = fields.next() else {
            break;
        };
        if meta.split(|b| *b == b' ').nth(1) == Some(b"160000") {
            found.push(String::from_utf8_lossy(path).into_owned());
        }
    }
    found.sort();
    found.dedup();
    found
}

/// Writes the commits of `new` that `old` lacks, as a bundle whose one ref is
/// `refs/heads/BRANCH`, into the new file `out`. `scratch` is a private directory.
pub(super) fn keep(
    common_dir: &Path,
    scratch: &Path,
    branch: &str,
    old: Option<&str>,
    new: &str,
    out: &Path,
) -> Result<(), GitError> {
    let keep = scratch.join("keep.git");
    let mut init = Cmd::in_dir(scratch).args(["init", "-q", "--bare", "--template="]);
    if new.len() == 64 {
        init = init.arg("--object-format=sha256");
    }
    init.arg(&keep).read()?;
    let alternates = keep.join("objects/info/alternates");
    let mut line = common_dir
        .join("objects")
        .into_os_string()
        .into_encoded_bytes();
    line.push(b'\n');
    std::fs::write(&alternates, line).map_err(|source| GitError::Write {
        path: alternates.clone(),
        source,
    })?;
    let name = format!("refs/heads/{branch}");
    Cmd::on_git_dir(&keep)
        .args(["update-ref", &name, new])
        .read()?;
    let mut bundle = Cmd::on_git_dir(&keep).args(["bundle", "create", "-q", "-", &name]);
    if let Some(o) = old {
        bundle = bundle.arg(format!("^{o}"));
    }
    bundle.write_to(out)
}

fn unexpected(what: &str, said: &str) -> GitError {
    GitError::Failed {
        args: what.to_owned(),
        message: format!("unexpected answer `{said}`"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gitlinks_are_read_from_raw_diffs() {
        let z = "0".repeat(40);
        let a = "a".repeat(40);
        let raw = format!(
            ":000000 100644 {z} {a} A\0s.txt\0:000000 160000 {z} {a} A\0sub/x\0\
             :160000 160000 {a} {a} M\0lib\0:160000 000000 {a} {z} D\0gone\0\
             :100644 160000 {a} {a} T\0sub/x\0"
        );
        assert_eq!(gitlinks_of_diff(raw.as_bytes()), ["lib", "sub/x"]);
        assert!(gitlinks_of_diff(b"").is_empty());
    }

    #[test]
    fn a_refusal_says_why_in_a_bounded_sentence() {
        let (a, b) = ("a".repeat(40), "b".repeat(40));
        let refused = |reason, submodules: Vec<String>, ahead, behind| Carry {
            branch: "main".into(),
            from: Some(a.clone()),
            to: Some(b.clone()),
            ahead,
            behind,
            outcome: Outcome::Refused(Refusal::new(reason, submodules, None, Path::new("x"))),
        };
        let back = refused(Reason::NotFastForward, vec![], 0, 3).why().unwrap();
        assert!(back.contains("back 3 commits") && back.contains("main stays at aaaaaaaaaaaa"));
        let side = refused(Reason::NotFastForward, vec![], 1, 1).why().unwrap();
        assert!(side.contains("not a descendant") && side.contains("1 commit of"));
        let many: Vec<String> = (0..5).map(|i| format!("{i}{}", "x".repeat(500))).collect();
        let sub = refused(Reason::Submodule, many, 1, 0).why().unwrap();
        assert!(sub.contains("and 2 more") && sub.len() < 1000, "{sub}");
        let none = Carry {
            outcome: Outcome::Carried,
            ..refused(Reason::Submodule, vec![], 1, 0)
        };
        assert_eq!(none.why(), None);
    }
}
