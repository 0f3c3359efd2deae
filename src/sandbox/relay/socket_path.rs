//! Unix socket paths of any length.
//!
//! A pathname socket address holds at most 107 bytes, and an attempt directory can be longer
//! (a home under a deep directory, a 128-byte run id). Such a path is reached through its
//! directory instead: the directory is opened, and the socket is named
//! `/proc/self/fd/<dir>/<name>`, which the kernel resolves like any path.
//!
//! Common pitfalls:
//! * The short name is only valid while the directory stays open: keep the [`SocketPath`]
//!   for as long as the name is used (the relay keeps it for its whole life).
//! * Unlinking uses the real path, never the `/proc` name (another process's `/proc/self`
//!   means something else).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// The longest path `sockaddr_un` takes (108 bytes with its terminating NUL).
const SUN_PATH_MAX: usize = 107;

/// A Unix socket path short enough to bind or connect to.
#[derive(Debug)]
pub(crate) struct SocketPath {
    usable: PathBuf,
    /// The directory `usable` goes through, when the path was too long.
    _dir: Option<File>,
}

impl SocketPath {
    pub(crate) fn new(path: &Path) -> io::Result<SocketPath> {
        if path.as_os_str().len() <= SUN_PATH_MAX {
            return Ok(SocketPath {
                usable: path.to_path_buf(),
                _dir: None,
            });
        }
        let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not a socket path", path.display()),
            ));
        };
        let dir = File::open(if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        })?;
        let usable = Path::new("/proc/self/fd")
            .join(dir.as_raw_fd().to_string())
            .join(name);
        if usable.as_os_str().len() > SUN_PATH_MAX {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("the socket name {} is too long", name.to_string_lossy()),
            ));
        }
        Ok(SocketPath {
            usable,
            _dir: Some(dir),
        })
    }

    /// The name to pass to `bind` or `connect`.
    pub(crate) fn usable(&self) -> &Path {
        &self.usable
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::{UnixListener, UnixStream};

    #[test]
    fn a_path_past_the_address_limit_still_binds_and_connects() {
        let tmp = tempfile::tempdir().unwrap();
        let deep = tmp.path().join("d".repeat(100)).join("e".repeat(40));
        std::fs::create_dir_all(&deep).unwrap();
        let sock = deep.join("proxy.sock");
        assert!(sock.as_os_str().len() > SUN_PATH_MAX);
        assert!(UnixListener::bind(&sock).is_err(), "the limit is real");

        let at = SocketPath::new(&sock).unwrap();
        let _l = UnixListener::bind(at.usable()).unwrap();
        assert!(sock.exists(), "the socket is where the long path says");
        UnixStream::connect(SocketPath::new(&sock).unwrap().usable()).unwrap();
    }

    #[test]
    fn a_short_path_is_used_as_it_is() {
        let p = Path::new("/tmp/x.sock");
        assert_eq!(SocketPath::new(p).unwrap().usable(), p);
    }
}
