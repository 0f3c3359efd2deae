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
//! directory goes through here.
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
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use super::StoreError;

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
    let kind = f.metadata()?.file_type();
    if !kind.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("it is {}, not a regular file", describe(kind)),
        ));
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

/// Opens `rel` below the directory `dir` without following any link on the way (nor `..`
/// out of it): what a program could have made of every component is never followed.
/// `flags` are `open(2)` flags (`O_CLOEXEC` and `O_NOFOLLOW` are added).
pub fn open_beneath(dir: &Path, rel: &Path, flags: libc::c_int) -> std::io::Result<File> {
    let d = File::options()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(dir)
        .map_err(link_error)?;
    let rel = std::ffi::CString::new(rel.as_os_str().as_encoded_bytes())
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: open_how is plain old data; all zeroes is a valid value.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (flags | libc::O_CLOEXEC | libc::O_NOFOLLOW) as u64;
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: openat2(2) on an open directory with a NUL-terminated path and an open_how of
    // the size passed; the descriptor it returns is owned below.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            std::os::fd::AsRawFd::as_raw_fd(&d),
            rel.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return Err(link_error(std::io::Error::last_os_error()));
    }
    // SAFETY: a descriptor the kernel just gave us.
    Ok(unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fd as i32) })
}

/// [`read_bounded`] of `rel` below `dir`, through [`open_beneath`]: for files of a tree a
/// program wrote. `Ok(None)` when nothing (or something other than a regular file, such as
/// an overlay's whiteout) is there.
pub fn read_beneath(dir: &Path, rel: &Path, limit: u64) -> Result<Option<Vec<u8>>, StoreError> {
    let path = dir.join(rel);
    let read_err = |source| StoreError::Read {
        path: path.clone(),
        source,
    };
    let f = match open_beneath(dir, rel, libc::O_RDONLY | libc::O_NONBLOCK) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(read_err(e)),
    };
    if !f.metadata().map_err(read_err)?.is_file() {
        return Ok(None);
    }
    read_bounded_from(&f, &path, limit).map(Some)
}

/// What the kernel says when `O_NOFOLLOW` met a link (`ELOOP`), in words.
fn link_error(e: std::io::Error) -> std::io::Error {
    if e.raw_os_error() == Some(libc::ELOOP) {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "it is a symbolic link, which subpane never follows there (something other than subpane put it in place)",
        )
    } else {
        e
    }
}

fn describe(kind: std::fs::FileType) -> &'static str {
    if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_block_device() || kind.is_char_device() {
        "a device"
    } else {
        "something else"
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

    #[test]
    fn reading_beneath_follows_no_link_on_the_way_nor_dot_dot() {
        let d = tempfile::tempdir().unwrap();
        let tree = d.path().join("tree");
        std::fs::create_dir_all(tree.join("refs/heads")).unwrap();
        std::fs::write(tree.join("refs/heads/main"), "abc\n").unwrap();
        std::fs::write(d.path().join("outside"), "secret").unwrap();
        std::os::unix::fs::symlink(d.path(), tree.join("up")).unwrap();
        let read = |rel: &str| read_beneath(&tree, Path::new(rel), 100);
        assert_eq!(read("refs/heads/main").unwrap().unwrap(), b"abc\n");
        assert!(read("refs/heads/none").unwrap().is_none());
        assert!(read("up/outside").is_err());
        assert!(read("../outside").is_err());
        // Something other than a file under the name is nothing to read.
        assert!(read("refs").unwrap().is_none());
    }
}
