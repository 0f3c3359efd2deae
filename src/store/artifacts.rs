//! The `artifacts` list of the envelope: every known file with its size and SHA-256, then
//! the regular files the program left in its artifact directory (`out/`, kind `out`).
//!
//! Common pitfalls:
//! * `out/` is the program's: its entries are opened relative to their directory with
//!   `O_NOFOLLOW`, so a link (or a directory swapped for one) never leads the hash outside;
//!   links, FIFOs and devices are not listed at all.
//! * The program chooses how much it leaves there: the walk stops at [`OUT_MAX_FILES`] files
//!   and [`OUT_MAX_DEPTH`] levels, and says so in the envelope's errors.

use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use nix::fcntl::{OFlag, openat};
use nix::sys::stat::Mode;

use sha2::{Digest, Sha256};

use super::layout::{ARTIFACT_FILES, AttemptPaths, GIT_ARTIFACT_FILES, WORKTREE_ARTIFACT_FILES};
use crate::envelope::Artifact;
use crate::spec::AttemptSpec;

/// Hex SHA-256 and size of a regular file (never through a link).
pub fn sha256_file(path: &Path) -> std::io::Result<(u64, String)> {
    sha256_of(super::open_read(path)?)
}

fn sha256_of(mut f: std::fs::File) -> std::io::Result<(u64, String)> {
    let mut h = Sha256::new();
    // Sized for the file (most are records of a few KiB): a 256 KiB buffer is a fresh mmap,
    // page faults and a munmap per file at the end of every attempt.
    let len = f.metadata().map_or(0, |m| m.len());
    let mut buf = vec![0u8; (len.clamp(4096, 256 * 1024) + 1) as usize];
    let mut n_total = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        n_total += n as u64;
        h.update(&buf[..n]);
    }
    let digest = h.finalize();
    let hex = digest.iter().map(|b| format!("{b:02x}")).collect();
    Ok((n_total, hex))
}

/// A file's size and SHA-256 as its writer kept them while writing (the worker's logs), so
/// that the end of an attempt need not read hundreds of megabytes again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    /// The file's name in the attempt dir (`events.jsonl`).
    pub name: &'static str,
    pub bytes: u64,
    pub sha256: String,
}

/// The envelope's `artifacts`: every file of subpane's that exists, in a fixed order (the
/// worktree's status and diff for a `--worktree` attempt, the refused commits of a
/// sandboxed repository), then the program's files in `out/`. The note says what of `out/`
/// could not be listed. A file in `written` whose size on disk is the size written gets the
/// digest kept while writing; any other is read.
pub fn collect_artifacts(
    paths: &AttemptPaths,
    spec: &AttemptSpec,
    written: &[Written],
) -> (Vec<Artifact>, Option<String>) {
    let mut all = collect_named(paths, ARTIFACT_FILES, written);
    if spec.worktree.is_some() {
        all.extend(collect_named(paths, WORKTREE_ARTIFACT_FILES, written));
    }
    if spec.sandbox.git.is_some() {
        all.extend(collect_named(paths, GIT_ARTIFACT_FILES, written));
    }
    let (out, note) = collect_out(paths);
    all.extend(out);
    (all, note)
}

fn collect_named(
    paths: &AttemptPaths,
    files: &[(&str, &str)],
    written: &[Written],
) -> Vec<Artifact> {
    files
        .iter()
        .filter_map(|(kind, name)| {
            let f = super::open_read(&paths.dir().join(name)).ok()?;
            let known = written.iter().find(|w| w.name == *name).filter(|w| {
                f.metadata()
                    .is_ok_and(|m| m.is_file() && m.len() == w.bytes)
            });
            let (bytes, sha256) = match known {
                Some(w) => (w.bytes, w.sha256.clone()),
                None => sha256_of(f).ok()?,
            };
            Some(Artifact {
                kind: (*kind).to_owned(),
                path: (*name).to_owned(),
                bytes,
                sha256,
            })
        })
        .collect()
}

/// The most files of `out/` listed in an envelope.
pub const OUT_MAX_FILES: usize = 1000;
/// How deep the walk of `out/` goes.
pub const OUT_MAX_DEPTH: usize = 16;

/// The regular files below the attempt's `out/`, sorted by path, and a note when the walk
/// stopped at a limit or could not read something.
fn collect_out(paths: &AttemptPaths) -> (Vec<Artifact>, Option<String>) {
    let mut found = Vec::new();
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let root = match nix::fcntl::open(&paths.out_dir(), flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(nix::errno::Errno::ENOENT) => return (found, None),
        Err(e) => return (found, Some(format!("out/: cannot be listed: {e}"))),
    };
    let mut note = None;
    walk(root, "out", 0, &mut found, &mut note);
    found.sort_by(|a, b| a.path.cmp(&b.path));
    (found, note)
}

fn walk(dir: OwnedFd, rel: &str, depth: usize, out: &mut Vec<Artifact>, note: &mut Option<String>) {
    let Ok(mut d) = nix::dir::Dir::from_fd(dir) else {
        return;
    };
    let mut entries: Vec<String> = d
        .iter()
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_str().ok()?.to_owned();
            (name != "." && name != "..").then_some(name)
        })
        .collect();
    entries.sort();
    for name in entries {
        if out.len() >= OUT_MAX_FILES {
            note.get_or_insert_with(|| {
                format!("out/: only the first {OUT_MAX_FILES} files are listed")
            });
            return;
        }
        let path = format!("{rel}/{name}");
        // Opened, never followed: the kind is what the open found, not what a look before
        // it saw.
        let file = openat(
            d.as_fd(),
            name.as_str(),
            OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
            Mode::empty(),
        );
        let Ok(fd) = file else { continue };
        let f = std::fs::File::from(fd);
        let Ok(meta) = f.metadata() else { continue };
        if meta.is_dir() {
            if depth + 1 >= OUT_MAX_DEPTH {
                note.get_or_insert_with(|| {
                    format!("out/: directories deeper than {OUT_MAX_DEPTH} levels are not listed")
                });
                continue;
            }
            walk(OwnedFd::from(f), &path, depth + 1, out, note);
        } else if meta.is_file() {
            if let Ok((bytes, sha256)) = sha256_of(f) {
                out.push(Artifact {
                    kind: "out".to_owned(),
                    path,
                    bytes,
                    sha256,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_digest_kept_while_writing_is_used_only_for_a_file_of_the_size_written() {
        let d = tempfile::tempdir().unwrap();
        let paths = AttemptPaths::new(d.path().to_path_buf());
        std::fs::write(paths.events(), "abc\n").unwrap();
        std::fs::write(paths.stdout_log(), "grown\n").unwrap();
        let kept = |name, bytes| Written {
            name,
            bytes,
            sha256: "kept".to_owned(),
        };
        let written = [kept("events.jsonl", 4), kept("stdout.log", 3)];
        let (all, _) = collect_artifacts(&paths, &super::super::plain_spec(), &written);
        let of = |p: &str| all.iter().find(|a| a.path == p).unwrap().clone();
        assert_eq!(of("events.jsonl").sha256, "kept");
        assert_eq!(
            (of("stdout.log").bytes, of("stdout.log").sha256),
            sha256_file(&paths.stdout_log()).unwrap(),
            "a file that is not the size written is read"
        );
    }

    #[test]
    fn out_lists_regular_files_and_never_follows_links() {
        let d = tempfile::tempdir().unwrap();
        let paths = AttemptPaths::new(d.path().to_path_buf());
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "secret").unwrap();
        let out = paths.out_dir();
        std::fs::create_dir_all(out.join("sub/deeper")).unwrap();
        std::fs::write(out.join("a.txt"), "a").unwrap();
        std::fs::write(out.join("sub/deeper/b.txt"), "bb").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), out.join("link")).unwrap();
        std::os::unix::fs::symlink(outside.path(), out.join("dirlink")).unwrap();
        nix::unistd::mkfifo(
            &out.join("fifo"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        let (arts, note) = collect_out(&paths);
        assert_eq!(note, None);
        let listed: Vec<(&str, u64)> = arts.iter().map(|a| (a.path.as_str(), a.bytes)).collect();
        assert_eq!(listed, [("out/a.txt", 1), ("out/sub/deeper/b.txt", 2)]);
        assert!(arts.iter().all(|a| a.kind == "out"));
        // No out/ at all: nothing, and nothing to say.
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(
            collect_out(&AttemptPaths::new(empty.path().into())),
            (vec![], None)
        );
    }
}
