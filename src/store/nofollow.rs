//! Opening the files of an attempt directory: never through a symbolic link, never unbounded.
//!
//! ```text
//!  read_bounded(path, limit) ─► open(O_NOFOLLOW | O_NONBLOCK) ─► fstat: a regular file?
//!                              ─► at most `limit` bytes, else StoreError::TooLarge
//!  create_new(path)          ─► open(O_CREAT | O_EXCL | O_NOFOLLOW): a fresh file or an error
//!  (atomic writes: a temp file made with O_EXCL, renamed over the name: a link there is
//!   replaced, never written through; see atomic.rs)
//! ```
//!
//! Whatever a program could have put under a name subpane uses (a link to a file of the
//! user's, a FIFO that would block a reader, a file of a terabyte) must not make subpane read
//! or write something else, hang, or run out of memory. Every open of a file in an attempt
//! directory goes through here; what is below a directory a program writes (`out/`, the git
//! overlay) is the program's tree, reached only through [`super::ProgramTree`] (`tree.rs`).
//!
//! Common pitfalls:
//! * `O_NOFOLLOW` guards the last component only. The directories above it (the home,
//!   `runs/<id>/attempts/<n>`) are made by subpane and never writable from a sandbox (see the
//!   sandbox's trust boundary), so a link cannot be planted there.
//! * A FIFO opened for reading blocks until a writer comes: `O_NONBLOCK` on the open, then the
//!   kind is checked before anything is read.
//! * `std::fs::read` sizes its buffer from the file's metadata: a sparse terabyte aborts the
//!   process. Read through `take(limit + 1)` instead.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use super::StoreError;
use super::tree::{Kind, REGULAR, refused};

/// The most any record subpane writes may hold (`spec.json` carries the task and the
/// system prompt, each bounded far below this).
pub const RECORD_LIMIT: u64 = 64 << 20;

/// Opens `path` for reading if it is a regular file, without following a link at it.
pub fn open_read(path: &Path) -> std::io::Result<File> {
    open_regular(path, false)
}

/// Opens `path` for reading and writing if it is a regular file, without following a link
/// at it (a file subpane made and rewrites itself, as the environment file).
pub(super) fn open_write_existing(path: &Path) -> std::io::Result<File> {
    open_regular(path, true)
}

fn open_regular(path: &Path, write: bool) -> std::io::Result<File> {
    let f = File::options()
        .read(true)
        .write(write)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(link_error)?;
    let kind = Kind::of(&nix::sys::stat::fstat(&f)?);
    if kind != Kind::File {
        return Err(refused(kind, REGULAR));
    }
    Ok(f)
}

/// Creates `path`, which must not exist (not even as a link), for writing.
pub fn create_new(path: &Path) -> std::io::Result<File> {
    File::options()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(link_error)
}

/// Reads all of `path` if it is a regular file of at most `limit` bytes. `Ok(None)` when
/// nothing is there.
pub fn read_bounded(path: &Path, limit: u64) -> Result<Option<Vec<u8>>, StoreError> {
    match open_read(path) {
        Ok(f) => read_bounded_from(&f, path, limit).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(StoreError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Reads the rest of `f` (opened from `path`), at most `limit` bytes.
pub(super) fn read_bounded_from(f: &File, path: &Path, limit: u64) -> Result<Vec<u8>, StoreError> {
    let read_err = |source| StoreError::Read {
        path: path.to_path_buf(),
        source,
    };
    // Sized for the file as it is now (a record is a few KiB), so that it is read in one go,
    // not in doubling steps from 32 bytes; a bigger file grows the buffer as it is read.
    let now = f.metadata().map_or(0, |m| m.len()).min(limit).min(1 << 16);
    let mut bytes = Vec::with_capacity(now as usize + 1);
    f.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    if bytes.len() as u64 > limit {
        return Err(StoreError::TooLarge {
            path: path.to_path_buf(),
            limit,
        });
    }
    Ok(bytes)
}

/// What the kernel says when `O_NOFOLLOW` met a link (`ELOOP`), in words.
pub(super) fn link_error(e: std::io::Error) -> std::io::Error {
    if e.raw_os_error() == Some(libc::ELOOP) {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "it is a symbolic link, which subpane never follows there (something other than subpane put it in place)",
        )
    } else {
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_fifos_and_oversized_files_are_refused_with_words() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("target");
        std::fs::write(&target, "secret").unwrap();
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = read_bounded(&link, 100).unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
        assert!(create_new(&link).is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "secret");

        let fifo = d.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        // Would block forever without O_NONBLOCK.
        let e = read_bounded(&fifo, 100).unwrap_err().to_string();
        assert!(e.contains("a FIFO"), "{e}");

        let big = d.path().join("big");
        File::create(&big).unwrap().set_len(1 << 40).unwrap();
        let e = read_bounded(&big, 1 << 20).unwrap_err().to_string();
        assert!(e.contains("larger than"), "{e}");

        assert_eq!(read_bounded(&target, 6).unwrap().unwrap(), b"secret");
        assert!(read_bounded(&d.path().join("none"), 6).unwrap().is_none());
    }
}
