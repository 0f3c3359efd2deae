//! Carrying back what a sandboxed program did in its private view of a repository's git
//! directory: its branch, and the objects the branch's new commits need. Nothing else of it
//! (config, hooks, other refs, rebase state) ever reaches the repository.
//!
//! ```text
//!  upper: whiteouts at HEAD and refs/objects (rm -rf .git) ─► "the program removed .git"
//!  upper/refs/heads/B  (a regular file, no link on the way)  │ else upper/packed-refs
//!     └─► N, a hex object id          none, or a whiteout (the program deleted it) ─► done
//!  O = refs/heads/B of the repository                          N == O ─► done
//!  upper/objects ─► hard links of its regular files only ─► scratch/objects
//!  pack-objects --revs (N ^O), scratch/objects as an alternate ─► scratch/carry.pack
//!  index-pack --stdin --strict < carry.pack     (every object hashed and checked)
//!  admit: N a descendant of O, no gitlink O lacks (git::admit)
//!     else refused: B stays, N's commits go to the attempt's bundle ─► done
//!  update-ref refs/heads/B N O                  (B moved meanwhile: refused, said)
//!  HEAD of the work tree is B ─► reset: the index follows, the work tree is untouched
//! ```
//!
//! Common pitfalls:
//! * Everything under `upper` was written by the program, `objects` itself included: it is
//!   read and linked only through a [`ProgramTree`] (no link followed, bounded, a FIFO never
//!   opened), and object files are taken only when they are regular files. A link at
//!   `objects` would hard-link files from anywhere; a FIFO named like a pack index would make
//!   git wait forever; an `info/alternates` or a commit graph of the program's would be read
//!   as the repository's.
//! * The program is gone when this runs (its PID namespace died with it), so nothing under
//!   `upper` changes between the checks and their use.
//! * Objects are checked by `index-pack --strict` (hashes, and the fsck rules git applies to
//!   a fetch), never copied into `objects/` as they are: a loose object whose content does
//!   not match its name would change the user's history.
//! * What may come back is asked of the repository after `index-pack`, never of the
//!   program's object files: a commit graph or a replacement of its own would answer for it.
//!   A refused tip's objects stay in the repository unreferenced (git's gc prunes them).

use std::path::{Path, PathBuf};

use super::admit;
use super::{Cmd, GitError, branch_tip};
use crate::spec::GitRepo;
use crate::store::{Entry, Kind, ProgramTree};

pub use super::admit::{Carry, Outcome, Reason, Refusal};

/// The most a `packed-refs` of the program's may hold.
const PACKED_REFS_LIMIT: u64 = 64 << 20;

/// Carries the program's branch back (see the module docs). `scratch_in` is a directory of
/// subpane's own where a private scratch directory is made (and removed); a refused tip's
/// commits go to the new file `keep_at`. `Ok(None)`: there is no branch (a detached HEAD).
pub fn carry_branch(
    repo: &GitRepo,
    scratch_in: &Path,
    keep_at: &Path,
) -> Result<Option<Carry>, GitError> {
    let Some(branch) = &repo.branch else {
        return Ok(None);
    };
    if let Some(what) = removed_by_program(&repo.upper) {
        return Err(GitError::ProgramRemoved(what));
    }
    let new = new_tip(&repo.upper, branch)?;
    let old = branch_tip(&repo.common_dir, branch)?;
    let unchanged = || Carry {
        branch: branch.clone(),
        from: old.clone(),
        to: new.clone(),
        ahead: 0,
        behind: 0,
        outcome: Outcome::Unchanged,
    };
    let Some(new) = new.clone() else {
        return Ok(Some(unchanged()));
    };
    if old.as_deref() == Some(new.as_str()) {
        return Ok(Some(unchanged()));
    }
    let scratch = tempfile::Builder::new()
        .prefix(".git-carry-")
        .tempdir_in(scratch_in)
        .map_err(|source| GitError::Write {
            path: scratch_in.to_path_buf(),
            source,
        })?;
    let objects = scratch.path().join("objects");
    link_objects(&repo.upper.join("objects"), &objects)?;
    let revs = scratch.path().join("revs");
    let mut list = format!("{new}\n");
    if let Some(o) = &old {
        list.push_str(&format!("^{o}\n"));
    }
    let write_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| GitError::Write { path, source }
    };
    std::fs::write(&revs, list).map_err(write_err(&revs))?;
    let pack = scratch.path().join("carry.pack");
    Cmd::on_git_dir(&repo.common_dir)
        .env("GIT_ALTERNATE_OBJECT_DIRECTORIES", &objects)
        .stdin_from(std::fs::File::open(&revs).map_err(write_err(&revs))?)
        .args(["pack-objects", "--revs", "--stdout", "-q"])
        .write_to(&pack)?;
    Cmd::on_git_dir(&repo.common_dir)
        .stdin_from(std::fs::File::open(&pack).map_err(write_err(&pack))?)
        .args(["index-pack", "--stdin", "--strict"])
        .read()?;
    let judged = admit::judge(&repo.common_dir, scratch.path(), old.as_deref(), &new)?;
    let carry = |outcome| Carry {
        branch: branch.clone(),
        from: old.clone(),
        to: Some(new.clone()),
        ahead: judged.ahead,
        behind: judged.behind,
        outcome,
    };
    if let Some(reason) = judged.refused {
        let kept = (judged.ahead > 0).then(|| {
            let at = scratch.path();
            admit::keep(&repo.common_dir, at, branch, old.as_deref(), &new, keep_at)
        });
        let refusal = Refusal::new(reason, judged.submodules.clone(), kept, keep_at);
        return Ok(Some(carry(Outcome::Refused(refusal))));
    }
    let zero = "0".repeat(new.len());
    Cmd::on_git_dir(&repo.common_dir)
        .args([
            "update-ref",
            "-m",
            "subpane: the sandboxed program's commits",
        ])
        .arg(format!("refs/heads/{branch}"))
        .arg(&new)
        .arg(old.as_deref().unwrap_or(&zero))
        .read()?;
    // The work tree's index still says what the branch was: it follows, as after a fetch
    // and a reset of one's own (the work tree is left as the program left it).
    let head = Cmd::in_worktree(&repo.work_tree, &repo.git_dir, &repo.common_dir)
        .args(["symbolic-ref", "-q", "HEAD"])
        .read_if_ok()?;
    if head.as_deref() == Some(&format!("refs/heads/{branch}")) {
        Cmd::in_worktree(&repo.work_tree, &repo.git_dir, &repo.common_dir)
            .no_attributes(&new)
            .args(["reset", "-q"])
            .read()?;
    }
    Ok(Some(carry(Outcome::Carried)))
}

/// What of the git directory the program deleted in its view, when a carry cannot read
/// past it: the overlay's upper layer holds a whiteout at `HEAD` with `refs` or `objects`
/// (`rm -rf .git`: the mount point itself stays), or at `refs`, `refs/heads` or `objects`.
fn removed_by_program(upper: &Path) -> Option<String> {
    let tree = ProgramTree::open(upper).ok()?;
    let gone = |rel: &str| tree.kind(Path::new(rel)).is_ok_and(|k| k == Kind::Whiteout);
    if gone("HEAD") && (gone("refs") || gone("objects")) {
        return Some(".git".into());
    }
    ["refs", "refs/heads", "objects"]
        .into_iter()
        .find(|rel| gone(rel))
        .map(|rel| format!(".git/{rel}"))
}

/// The program's tip of `branch`: its loose ref, else its line in `packed-refs`; `None` when
/// it has neither (it never moved the branch, or deleted it).
fn new_tip(upper: &Path, branch: &str) -> Result<Option<String>, GitError> {
    let tree = match ProgramTree::open(upper) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(program_files("reading the program's refs", upper, e)),
    };
    let read = |rel: &Path, limit| {
        tree.read(rel, limit).map_err(|e| GitError::Failed {
            args: "(reading the program's refs)".into(),
            message: e.to_string(),
        })
    };
    let name = format!("refs/heads/{branch}");
    if let Some(bytes) = read(Path::new(&name), 256)? {
        return Ok(object_id(String::from_utf8_lossy(&bytes).trim()));
    }
    let Some(packed) = read(Path::new("packed-refs"), PACKED_REFS_LIMIT)? else {
        return Ok(None);
    };
    Ok(String::from_utf8_lossy(&packed).lines().find_map(|l| {
        let (id, r) = l.split_once(' ')?;
        (r == name).then(|| object_id(id)).flatten()
    }))
}

/// What went wrong with the program's files at `path`, as the carry's error.
fn program_files(what: &str, path: &Path, e: std::io::Error) -> GitError {
    GitError::Failed {
        args: format!("({what})"),
        message: format!("{}: {e}", path.display()),
    }
}

/// `s` if it is a full object id (40 or 64 lower-case hex digits).
fn object_id(s: &str) -> Option<String> {
    let hex = s
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    ((s.len() == 40 || s.len() == 64) && hex).then(|| s.to_owned())
}

/// The most names one directory of the program's objects may hold (git packs loose objects
/// long before a fan-out directory holds this many).
const OBJECT_NAMES_LIMIT: usize = 1 << 20;

const OBJECTS: &str = "reading the program's objects";

/// Hard-links the regular files of the program's object directory `from` (`xx/…` and
/// `pack/…`, one level deep; nothing of `info/`) into `to`, a directory of subpane's. `from`
/// itself may be anything the program made of it: a link there is refused, never followed.
fn link_objects(from: &Path, to: &Path) -> Result<(), GitError> {
    let tree = match ProgramTree::open(from) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(program_files(OBJECTS, from, e)),
    };
    let write = |path: &Path| {
        let path = path.to_path_buf();
        move |source| GitError::Write { path, source }
    };
    std::fs::create_dir_all(to).map_err(write(to))?;
    for d in object_names(&tree)? {
        let name = &d.name;
        let fanout = name.len() == 2 && name.as_encoded_bytes().iter().all(u8::is_ascii_hexdigit);
        if !(fanout || name == "pack") || d.kind != Kind::Dir {
            continue;
        }
        let sub = tree
            .subtree(Path::new(name))
            .map_err(|e| program_files(OBJECTS, &from.join(name), e))?;
        let into: PathBuf = to.join(name);
        std::fs::create_dir_all(&into).map_err(write(&into))?;
        for f in object_names(&sub)?.iter().filter(|f| f.kind == Kind::File) {
            let at = into.join(&f.name);
            sub.link_file(&f.name, &at).map_err(write(&at))?;
        }
    }
    Ok(())
}

/// Every name of a directory of the program's objects: a listing cut short would lose
/// objects, so one over the bound is an error.
fn object_names(dir: &ProgramTree) -> Result<Vec<Entry>, GitError> {
    let (all, more) = dir
        .entries(OBJECT_NAMES_LIMIT)
        .map_err(|e| program_files(OBJECTS, dir.path(), e))?;
    if more {
        let e = std::io::Error::other(format!("it holds more than {OBJECT_NAMES_LIMIT} names"));
        return Err(program_files(OBJECTS, dir.path(), e));
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_full_hex_ids_are_taken() {
        let id = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";
        assert_eq!(object_id(id).as_deref(), Some(id));
        assert!(object_id(&"a".repeat(64)).is_some());
        for bad in [
            "",
            "HEAD",
            "4B825DC642CB6EB9A060E54BF8D69288FBEE4904",
            &id[..39],
            "ref: refs/heads/x",
        ] {
            assert!(object_id(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn the_tip_comes_from_the_loose_ref_then_packed_refs() {
        let d = tempfile::tempdir().unwrap();
        let up = d.path();
        let (a, b) = ("a".repeat(40), "b".repeat(40));
        assert_eq!(new_tip(up, "main").unwrap(), None);
        std::fs::write(
            up.join("packed-refs"),
            format!("# pack-refs with: peeled\n{b} refs/heads/other\n{a} refs/heads/main\n"),
        )
        .unwrap();
        assert_eq!(new_tip(up, "main").unwrap(), Some(a.clone()));
        std::fs::create_dir_all(up.join("refs/heads/sub")).unwrap();
        std::fs::write(up.join("refs/heads/sub/x"), format!("{b}\n")).unwrap();
        assert_eq!(new_tip(up, "sub/x").unwrap(), Some(b.clone()));
        // A link on the way is never followed.
        std::os::unix::fs::symlink(up.join("refs/heads/sub"), up.join("refs/heads/l")).unwrap();
        assert!(new_tip(up, "l/x").is_err());
    }

    #[test]
    fn a_link_at_objects_itself_is_never_followed() {
        let d = tempfile::tempdir().unwrap();
        let outside = d.path().join("outside");
        std::fs::create_dir_all(outside.join("ab")).unwrap();
        std::fs::create_dir_all(outside.join("pack")).unwrap();
        std::fs::write(outside.join("ab/cdef"), "not the program's").unwrap();
        std::fs::write(outside.join("pack/pack-1.pack"), "not the program's").unwrap();
        let upper = d.path().join("upper");
        std::fs::create_dir_all(&upper).unwrap();
        std::os::unix::fs::symlink(&outside, upper.join("objects")).unwrap();
        let to = d.path().join("to");
        let e = link_objects(&upper.join("objects"), &to).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert!(!to.join("ab/cdef").exists() && !to.join("pack/pack-1.pack").exists());
    }

    #[test]
    fn only_regular_object_files_are_taken() {
        let d = tempfile::tempdir().unwrap();
        let from = d.path().join("upper/objects");
        std::fs::create_dir_all(from.join("ab")).unwrap();
        std::fs::create_dir_all(from.join("pack")).unwrap();
        std::fs::create_dir_all(from.join("info")).unwrap();
        std::fs::write(from.join("ab/cdef"), "obj").unwrap();
        std::fs::write(from.join("info/alternates"), "/elsewhere").unwrap();
        nix::unistd::mkfifo(
            &from.join("pack/pack-x.idx"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        std::os::unix::fs::symlink("/etc/passwd", from.join("ab/link")).unwrap();
        let to = d.path().join("to");
        link_objects(&from, &to).unwrap();
        assert!(to.join("ab/cdef").is_file());
        assert!(!to.join("ab/link").exists() && !to.join("info").exists());
        assert!(!to.join("pack/pack-x.idx").exists());
    }
}
