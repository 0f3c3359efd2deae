//! The `artifacts` list of the envelope: every known file with its size and SHA-256, then
//! the regular files the program left in its artifact directory (`out/`, kind `out`).
//!
//! ```text
//!  spec.json, events.jsonl, … (subpane's)  the digest kept while writing, else read
//!  out/ ─► ProgramTree: names, subtrees ─► its regular files (links, FIFOs and devices are
//!          neither listed nor opened)
//!  every file read here is hashed out of one Budget: HASH_FILE_LIMIT of a file,
//!  HASH_TOTAL_LIMIT and HASH_TIME_LIMIT in all; one not hashed whole says `hashed_bytes`
//! ```
//!
//! Common pitfalls:
//! * `out/` is the program's: it is walked through [`ProgramTree`] only, so a link (or a
//!   directory swapped for one) never leads the hash outside and a FIFO is never opened.
//! * The program chooses how much it leaves there: the walk stops at [`OUT_MAX_FILES`]
//!   files, [`OUT_MAX_DEPTH`] levels and [`OUT_MAX_NAMES`] names looked at, and says so in
//!   the envelope's errors.
//! * A file's size says nothing of what reading it costs: a sparse file of 8 GiB takes
//!   20 KiB of disk and a minute to hash. Its size is listed as `fstat` says; its hash covers
//!   what the budget allowed, and `hashed_bytes` says how much that was.

use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use super::layout::{ARTIFACT_FILES, AttemptPaths, GIT_ARTIFACT_FILES, WORKTREE_ARTIFACT_FILES};
use super::tree::{Kind, ProgramTree};
use crate::envelope::Artifact;
use crate::spec::AttemptSpec;

/// The most of one file hashed at the end of an attempt.
pub const HASH_FILE_LIMIT: u64 = 256 << 20;
/// The most hashed at the end of an attempt in all.
pub const HASH_TOTAL_LIMIT: u64 = 1 << 30;
/// How long the end of an attempt may spend hashing, in all.
pub const HASH_TIME_LIMIT: Duration = Duration::from_secs(5);

/// What is left to hash with, at the end of one attempt.
struct Budget {
    file: u64,
    bytes: u64,
    until: Instant,
    /// Files whose hash does not cover them whole.
    short: usize,
}

impl Budget {
    fn new() -> Self {
        Self::with(HASH_FILE_LIMIT, HASH_TOTAL_LIMIT, HASH_TIME_LIMIT)
    }

    fn with(file: u64, bytes: u64, time: Duration) -> Self {
        Budget {
            file,
            bytes,
            until: Instant::now() + time,
            short: 0,
        }
    }

    /// Hashes `f` as far as the budget goes: its size, the hex SHA-256 of what was read and,
    /// when that is not all of it, how many bytes that was.
    fn hash(&mut self, mut f: std::fs::File) -> std::io::Result<(u64, String, Option<u64>)> {
        let size = f.metadata()?.len();
        let allowed = self.file.min(self.bytes);
        // Sized for the file (most are records of a few KiB): a 256 KiB buffer is a fresh
        // mmap, page faults and a munmap per file at the end of every attempt.
        let mut buf = vec![0u8; size.clamp(4096, 256 * 1024) as usize];
        let mut h = Sha256::new();
        let mut read = 0u64;
        let mut at_end = false;
        while read < allowed && Instant::now() < self.until {
            let want = (allowed - read).min(buf.len() as u64) as usize;
            let n = f.read(&mut buf[..want])?;
            if n == 0 {
                at_end = true;
                break;
            }
            read += n as u64;
            h.update(&buf[..n]);
        }
        // A file that ends right at the bound was hashed whole.
        at_end = at_end || f.read(&mut [0u8])? == 0;
        self.bytes -= read;
        if at_end {
            return Ok((read, hex(h.finalize()), None));
        }
        self.short += 1;
        Ok((size.max(read), hex(h.finalize()), Some(read)))
    }

    /// What the envelope's errors say of the files not hashed whole.
    fn note(&self) -> Option<String> {
        (self.short > 0).then(|| {
            format!(
                "artifacts: {} file(s) not hashed whole (hashing stops at {}): `hashed_bytes` says how much of each its sha256 covers",
                self.short,
                hash_bounds()
            )
        })
    }
}

/// The bounds in words, as the README and the schema state them.
fn hash_bounds() -> String {
    let size = |b: u64| match b {
        b if b % (1 << 30) == 0 => format!("{} GiB", b >> 30),
        b => format!("{} MiB", b >> 20),
    };
    format!(
        "{} of a file, {} and {} s in all",
        size(HASH_FILE_LIMIT),
        size(HASH_TOTAL_LIMIT),
        HASH_TIME_LIMIT.as_secs()
    )
}

/// Hex SHA-256 and size of a regular file (never through a link), read whole.
pub fn sha256_file(path: &Path) -> std::io::Result<(u64, String)> {
    let mut f = super::open_read(path)?;
    let mut h = Sha256::new();
    let bytes = std::io::copy(&mut f, &mut h)?;
    Ok((bytes, hex(h.finalize())))
}

fn hex(digest: impl AsRef<[u8]>) -> String {
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
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
/// could not be listed, and which files were not hashed whole. A file in `written` whose
/// size on disk is the size written gets the digest kept while writing; any other is read,
/// within the module's bounds.
pub fn collect_artifacts(
    paths: &AttemptPaths,
    spec: &AttemptSpec,
    written: &[Written],
) -> (Vec<Artifact>, Option<String>) {
    let mut budget = Budget::new();
    let mut all = collect_named(paths, ARTIFACT_FILES, written, &mut budget);
    if spec.worktree.is_some() {
        all.extend(collect_named(
            paths,
            WORKTREE_ARTIFACT_FILES,
            written,
            &mut budget,
        ));
    }
    if spec.sandbox.git.is_some() {
        all.extend(collect_named(
            paths,
            GIT_ARTIFACT_FILES,
            written,
            &mut budget,
        ));
    }
    let (out, note) = collect_out(paths, &mut budget);
    all.extend(out);
    let notes: Vec<String> = note.into_iter().chain(budget.note()).collect();
    (all, (!notes.is_empty()).then(|| notes.join("; ")))
}

fn collect_named(
    paths: &AttemptPaths,
    files: &[(&str, &str)],
    written: &[Written],
    budget: &mut Budget,
) -> Vec<Artifact> {
    files
        .iter()
        .filter_map(|(kind, name)| {
            let f = super::open_read(&paths.dir().join(name)).ok()?;
            let known = written.iter().find(|w| w.name == *name).filter(|w| {
                f.metadata()
                    .is_ok_and(|m| m.is_file() && m.len() == w.bytes)
            });
            let (bytes, sha256, hashed_bytes) = match known {
                Some(w) => (w.bytes, w.sha256.clone(), None),
                None => budget.hash(f).ok()?,
            };
            Some(Artifact {
                kind: (*kind).to_owned(),
                path: (*name).to_owned(),
                bytes,
                sha256,
                hashed_bytes,
            })
        })
        .collect()
}

/// The most files of `out/` listed in an envelope.
pub const OUT_MAX_FILES: usize = 1000;
/// How deep the walk of `out/` goes.
pub const OUT_MAX_DEPTH: usize = 16;
/// The most names (files, directories, anything) of `out/` looked at.
pub const OUT_MAX_NAMES: usize = 100_000;

/// The walk of `out/`: what it found, what it has left to look at, what it has to say.
struct Walk<'b> {
    found: Vec<Artifact>,
    names_left: usize,
    note: Option<String>,
    budget: &'b mut Budget,
}

/// The regular files below the attempt's `out/`, sorted by path, and a note when the walk
/// stopped at a limit or could not read something.
fn collect_out(paths: &AttemptPaths, budget: &mut Budget) -> (Vec<Artifact>, Option<String>) {
    let root = match ProgramTree::open(&paths.out_dir()) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (Vec::new(), None),
        Err(e) => return (Vec::new(), Some(format!("out/: cannot be listed: {e}"))),
    };
    let mut walk = Walk {
        found: Vec::new(),
        names_left: OUT_MAX_NAMES,
        note: None,
        budget,
    };
    walk.dir(&root, "out", 0);
    walk.found.sort_by(|a, b| a.path.cmp(&b.path));
    (walk.found, walk.note)
}

impl Walk<'_> {
    fn say(&mut self, what: impl FnOnce() -> String) {
        self.note.get_or_insert_with(what);
    }

    fn dir(&mut self, dir: &ProgramTree, rel: &str, depth: usize) {
        let Ok((entries, more)) = dir.entries(self.names_left) else {
            return;
        };
        self.names_left -= entries.len();
        if more {
            self.say(|| format!("out/: only the first {OUT_MAX_NAMES} names are looked at"));
        }
        for e in entries {
            if self.found.len() >= OUT_MAX_FILES {
                self.say(|| format!("out/: only the first {OUT_MAX_FILES} files are listed"));
                return;
            }
            let Some(name) = e.name.to_str() else {
                continue;
            };
            let path = format!("{rel}/{name}");
            match e.kind {
                Kind::Dir if depth + 1 >= OUT_MAX_DEPTH => self.say(|| {
                    format!("out/: directories deeper than {OUT_MAX_DEPTH} levels are not listed")
                }),
                Kind::Dir => {
                    if let Ok(sub) = dir.subtree(Path::new(name)) {
                        self.dir(&sub, &path, depth + 1);
                    }
                }
                Kind::File => {
                    let hashed = dir
                        .open_file(Path::new(name))
                        .and_then(|f| self.budget.hash(f));
                    if let Ok((bytes, sha256, hashed_bytes)) = hashed {
                        self.found.push(Artifact {
                            kind: "out".to_owned(),
                            path,
                            bytes,
                            sha256,
                            hashed_bytes,
                        });
                    }
                }
                // Links, FIFOs, sockets and devices: neither listed nor opened.
                _ => {}
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
        let (arts, note) = collect_out(&paths, &mut Budget::new());
        assert_eq!(note, None);
        let listed: Vec<(&str, u64)> = arts.iter().map(|a| (a.path.as_str(), a.bytes)).collect();
        assert_eq!(listed, [("out/a.txt", 1), ("out/sub/deeper/b.txt", 2)]);
        assert!(
            arts.iter()
                .all(|a| a.kind == "out" && a.hashed_bytes.is_none())
        );
        // No out/ at all: nothing, and nothing to say.
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(
            collect_out(&AttemptPaths::new(empty.path().into()), &mut Budget::new()),
            (vec![], None)
        );
    }

    #[test]
    fn hashing_stops_at_the_bounds_and_says_how_far_it_went() {
        let d = tempfile::tempdir().unwrap();
        let paths = AttemptPaths::new(d.path().to_path_buf());
        let out = paths.out_dir();
        std::fs::create_dir_all(&out).unwrap();
        let sparse = |name: &str, len: u64| {
            std::fs::File::create(out.join(name))
                .unwrap()
                .set_len(len)
                .unwrap()
        };
        // In name order: a sparse terabyte, a file right at the bound, one the total stops.
        sparse("a-huge", 1 << 40);
        sparse("b-exact", 1 << 20);
        sparse("c-late", 10);
        let mut budget = Budget::with(1 << 20, 2 << 20, Duration::from_secs(60));
        let (arts, _) = collect_out(&paths, &mut budget);
        let zeros = |n: usize| hex(Sha256::digest(vec![0u8; n]));
        let got: Vec<(u64, Option<u64>)> = arts.iter().map(|a| (a.bytes, a.hashed_bytes)).collect();
        assert_eq!(
            got,
            [(1 << 40, Some(1 << 20)), (1 << 20, None), (10, Some(0))]
        );
        assert_eq!(arts[0].sha256, zeros(1 << 20));
        assert_eq!(arts[1].sha256, zeros(1 << 20));
        assert_eq!(arts[2].sha256, zeros(0));
        assert_eq!(budget.short, 2);
        assert!(
            budget
                .note()
                .unwrap()
                .contains("2 file(s) not hashed whole")
        );
        // Out of time: every file is still listed, with its size.
        let mut budget = Budget::with(1 << 20, 2 << 20, Duration::ZERO);
        let (arts, _) = collect_out(&paths, &mut budget);
        assert_eq!(arts.len(), 3);
        assert!(arts.iter().all(|a| a.hashed_bytes == Some(0)), "{arts:?}");
    }

    #[test]
    fn the_readme_and_the_schema_state_the_bounds() {
        let bounds = hash_bounds();
        assert_eq!(bounds, "256 MiB of a file, 1 GiB and 5 s in all");
        let readme = include_str!("../../README.md").replace("\n  ", " ");
        assert!(readme.contains(&format!("hashing stops at {bounds}")));
        let schema = include_str!("../../schema/result.v1.json");
        assert!(schema.contains(&format!(
            "hashing at the end of an attempt stops at {bounds}"
        )));
    }

    #[test]
    fn the_walk_stops_at_its_name_bound() {
        let d = tempfile::tempdir().unwrap();
        let paths = AttemptPaths::new(d.path().to_path_buf());
        let out = paths.out_dir();
        std::fs::create_dir_all(out.join("d")).unwrap();
        std::fs::write(out.join("d/x"), "x").unwrap();
        let mut budget = Budget::new();
        let mut walk = Walk {
            found: Vec::new(),
            names_left: 1,
            note: None,
            budget: &mut budget,
        };
        walk.dir(&ProgramTree::open(&out).unwrap(), "out", 0);
        assert!(walk.found.is_empty());
        assert!(walk.note.unwrap().contains("names are looked at"));
    }
}
