//! A tree a program wrote, as a type: the only way subpane opens, walks, reads or links
//! anything below a directory a program could write — its artifact directory (`out/`), the
//! git overlay's upper layer (`git/upper`), the workspace's git files the planner reads, pi's
//! saved sessions.
//!
//! ```text
//!  ProgramTree::open(dir)     dir: a path of subpane's or the user's, its last component
//!     │                       not followed; one descriptor from then on
//!     │  every name below is resolved from that descriptor by openat2(2) with
//!     │  RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS:
//!     │  no link on the way, no `..` out of it, no absolute name
//!     ├─ kind(rel)            an O_PATH look: a link, a FIFO, a device is named, never opened
//!     ├─ open_file(rel)       a regular file only: looked at, then opened O_NONBLOCK and
//!     │                       checked to be the inode looked at
//!     ├─ read(rel, limit)     open_file, then at most `limit` bytes (else TooLarge)
//!     ├─ look(rel, limit)     a directory, or a regular file's bytes (the planner's question)
//!     ├─ subtree(rel)         a directory below, as a ProgramTree of its own (walks)
//!     ├─ entries(limit)       names and kinds (fstatat, no link followed), sorted, bounded
//!     └─ link_file(name, to)  a hard link of a regular file to a path of subpane's
//! ```
//!
//! Whatever the program put there (a link to a file of the user's, a FIFO that would block a
//! reader, a device whose open acts, a sparse file of a terabyte, a million names) must not
//! make subpane read or link something else, hang, or run out of memory or time.
//!
//! Common pitfalls:
//! * `O_NOFOLLOW` guards the last component only: a link at `objects` in `objects/ab/cd` is
//!   followed by it. `RESOLVE_NO_SYMLINKS` guards every component.
//! * Opening a FIFO for reading blocks until a writer comes, and opening a device can act (a
//!   tape rewinds): the kind is looked at through an `O_PATH` descriptor, which opens
//!   nothing, and only a regular file is then opened. The name may be swapped between the
//!   two, so that open is `O_NONBLOCK` and must find the inode looked at.
//! * An overlay's upper layer records a deletion as a character device 0:0 (a whiteout):
//!   [`ProgramTree::read`] takes it for nothing there, as the merged view does.
//! * `linkat(2)` without `AT_SYMLINK_FOLLOW` links a link as a link: the new name is checked
//!   after linking (it is in subpane's own directory, so what is checked is what was linked)
//!   and removed unless it is a regular file.
//! * The handle is as good as the path it was opened from: the directories above a tree are
//!   subpane's (its home) or the user's (the workspace), never the program's.
//! * A regular file's size is the program's choice too: bound every read (and every hash, see
//!   `artifacts.rs`) by bytes, never by what `fstat` says.

use std::ffi::OsString;
use std::fs::File;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat2};
use nix::sys::stat::{FileStat, Mode, SFlag};

use super::StoreError;
use super::nofollow::read_bounded_from;

/// A directory a program could write, opened once (see the module docs).
#[derive(Debug)]
pub struct ProgramTree {
    dir: OwnedFd,
    /// For messages only: nothing is ever opened through it again.
    path: PathBuf,
}

/// What is at a name of a program's tree, seen without following or opening it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Link,
    Fifo,
    Socket,
    Device,
    /// An overlay's record of a deletion (a character device 0:0).
    Whiteout,
}

impl Kind {
    pub(super) fn of(st: &FileStat) -> Self {
        match SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) {
            SFlag::S_IFREG => Kind::File,
            SFlag::S_IFDIR => Kind::Dir,
            SFlag::S_IFLNK => Kind::Link,
            SFlag::S_IFIFO => Kind::Fifo,
            SFlag::S_IFSOCK => Kind::Socket,
            SFlag::S_IFCHR if st.st_rdev == 0 => Kind::Whiteout,
            _ => Kind::Device,
        }
    }

    /// The kind in words, for "it is …, not a regular file".
    pub fn describe(self) -> &'static str {
        match self {
            Kind::File => "a regular file",
            Kind::Dir => "a directory",
            Kind::Link => "a symbolic link",
            Kind::Fifo => "a FIFO",
            Kind::Socket => "a socket",
            Kind::Device => "a device",
            Kind::Whiteout => "a deleted file's whiteout",
        }
    }
}

/// One name of a directory of a program's tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub name: OsString,
    pub kind: Kind,
}

/// What [`ProgramTree::look`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    Dir,
    File(Vec<u8>),
}

const BENEATH: ResolveFlag = ResolveFlag::RESOLVE_BENEATH
    .union(ResolveFlag::RESOLVE_NO_SYMLINKS)
    .union(ResolveFlag::RESOLVE_NO_MAGICLINKS);

impl ProgramTree {
    /// Opens the tree at `dir` (an error of kind `NotFound` when nothing is there, and one
    /// in words when `dir` is a link or not a directory).
    pub fn open(dir: &Path) -> std::io::Result<Self> {
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let dir_fd = nix::fcntl::open(dir, flags, Mode::empty()).map_err(|e| match e {
            Errno::ENOTDIR => {
                nix::sys::stat::lstat(dir).map_or(e.into(), |st| refused(Kind::of(&st), DIRECTORY))
            }
            e => in_words(e),
        })?;
        Ok(Self {
            dir: dir_fd,
            path: dir.to_path_buf(),
        })
    }

    /// The path the tree was opened from (for messages).
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn at(&self, rel: &Path, flags: OFlag) -> std::io::Result<OwnedFd> {
        let how = OpenHow::new()
            .flags(flags | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC)
            .resolve(BENEATH);
        openat2(&self.dir, rel, how).map_err(in_words)
    }

    /// What is at `rel`, without following or opening it.
    pub fn kind(&self, rel: &Path) -> std::io::Result<Kind> {
        Ok(self.look_at(rel)?.1)
    }

    fn look_at(&self, rel: &Path) -> std::io::Result<(FileStat, Kind)> {
        let fd = self.at(rel, OFlag::O_PATH)?;
        let st = nix::sys::stat::fstat(&fd)?;
        Ok((st, Kind::of(&st)))
    }

    /// Opens the regular file `rel` for reading; anything else is refused without being
    /// opened.
    pub fn open_file(&self, rel: &Path) -> std::io::Result<File> {
        let (seen, kind) = self.look_at(rel)?;
        if kind != Kind::File {
            return Err(refused(kind, REGULAR));
        }
        self.reopen(rel, &seen)
    }

    /// Opens `rel`, looked at as the regular file `seen`, for reading.
    fn reopen(&self, rel: &Path, seen: &FileStat) -> std::io::Result<File> {
        let f = File::from(self.at(rel, OFlag::O_RDONLY | OFlag::O_NONBLOCK)?);
        let now = nix::sys::stat::fstat(&f)?;
        if (now.st_dev, now.st_ino) != (seen.st_dev, seen.st_ino) || Kind::of(&now) != Kind::File {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "it was replaced while subpane opened it",
            ));
        }
        Ok(f)
    }

    /// All of the regular file `rel`, at most `limit` bytes. `Ok(None)` when no file is
    /// there: nothing, a directory, or an overlay's whiteout (a file the program deleted). A
    /// link, a FIFO, a socket or a device there is an error (and never opened).
    pub fn read(&self, rel: &Path, limit: u64) -> Result<Option<Vec<u8>>, StoreError> {
        let path = self.path.join(rel);
        let read_err = |source| StoreError::Read {
            path: path.clone(),
            source,
        };
        let seen = match self.look_at(rel) {
            Ok((_, Kind::Whiteout | Kind::Dir)) => return Ok(None),
            Ok((st, Kind::File)) => st,
            Ok((_, kind)) => return Err(read_err(refused(kind, REGULAR))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(read_err(e)),
        };
        let f = self.reopen(rel, &seen).map_err(read_err)?;
        read_bounded_from(&f, &path, limit).map(Some)
    }

    /// A directory at `rel`, or the bytes of a regular file there (at most `limit`); an
    /// error for anything else (nothing, a link, a FIFO, a device: none of them opened).
    pub fn look(&self, rel: &Path, limit: u64) -> std::io::Result<Found> {
        match self.kind(rel)? {
            Kind::Dir => Ok(Found::Dir),
            Kind::File => match self.read(rel, limit) {
                Ok(Some(bytes)) => Ok(Found::File(bytes)),
                Ok(None) => Err(std::io::ErrorKind::NotFound.into()),
                Err(e) => Err(std::io::Error::other(e.to_string())),
            },
            kind => Err(refused(kind, REGULAR)),
        }
    }

    /// The directory at `rel`, as a tree of its own.
    pub fn subtree(&self, rel: &Path) -> std::io::Result<ProgramTree> {
        let fd = self
            .at(rel, OFlag::O_RDONLY | OFlag::O_DIRECTORY)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ENOTDIR) => self.kind(rel).map_or(e, |k| refused(k, DIRECTORY)),
                _ => e,
            })?;
        Ok(ProgramTree {
            dir: fd,
            path: self.path.join(rel),
        })
    }

    /// The names in the tree's top directory with their kinds, sorted by name: at most
    /// `limit` of them (the first the directory gives), and whether more were there (left
    /// unread: a program may leave millions).
    pub fn entries(&self, limit: usize) -> std::io::Result<(Vec<Entry>, bool)> {
        // A description of its own: reading through a duplicate of `dir` would move the
        // offset every later listing starts from.
        let mut d = nix::dir::Dir::openat(
            &self.dir,
            ".",
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        let mut found = Vec::new();
        let mut more = false;
        for e in d.iter() {
            let e = e?;
            let name = e.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            if found.len() == limit {
                more = true;
                break;
            }
            let st = nix::sys::stat::fstatat(
                &self.dir,
                e.file_name(),
                nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
            );
            // Gone since it was listed: nothing to say about it.
            let Ok(st) = st else { continue };
            found.push(Entry {
                name: std::ffi::OsStr::from_bytes(name).to_owned(),
                kind: Kind::of(&st),
            });
        }
        found.sort_by(|a, b| a.name.cmp(&b.name));
        Ok((found, more))
    }

    /// Puts `bytes` in place of the regular file `name` (one name of the top directory): a
    /// new file made beside it (`O_EXCL`, never through a link) and renamed over the name, so
    /// whatever is at the name then (a link swapped in) is replaced, never written through.
    /// The new file keeps the old one's permission bits; anything but a regular file at the
    /// name is refused.
    pub fn replace_file(&self, name: &std::ffi::OsStr, bytes: &[u8]) -> std::io::Result<()> {
        use std::io::Write;
        if name.as_bytes().contains(&b'/') {
            return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
        }
        let st =
            nix::sys::stat::fstatat(&self.dir, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)?;
        let kind = Kind::of(&st);
        if kind != Kind::File {
            return Err(refused(kind, REGULAR));
        }
        let mode = st.st_mode;
        let mut temp = OsString::from(".");
        temp.push(name);
        temp.push(".subpane-masked");
        let fd = nix::fcntl::openat(
            &self.dir,
            temp.as_os_str(),
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(mode & 0o777),
        )?;
        let written = File::from(fd).write_all(bytes);
        let renamed = written.and_then(|()| {
            nix::fcntl::renameat(&self.dir, temp.as_os_str(), &self.dir, name).map_err(Into::into)
        });
        if renamed.is_err() {
            let _ = nix::unistd::unlinkat(
                &self.dir,
                temp.as_os_str(),
                nix::unistd::UnlinkatFlags::NoRemoveDir,
            );
        }
        renamed
    }

    /// Hard-links the regular file `name` (one name of the top directory) to `to`, a path
    /// of subpane's. `Ok(false)`, and nothing left at `to`, when it is not a regular file.
    pub fn link_file(&self, name: &std::ffi::OsStr, to: &Path) -> std::io::Result<bool> {
        if name.as_bytes().contains(&b'/') {
            return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
        }
        nix::unistd::linkat(
            &self.dir,
            name,
            nix::fcntl::AT_FDCWD,
            to,
            nix::fcntl::AtFlags::empty(),
        )?;
        // What was linked is what is at `to` now: a link or a FIFO swapped in after a look
        // would have been linked as what it is.
        if std::fs::symlink_metadata(to)?.is_file() {
            return Ok(true);
        }
        std::fs::remove_file(to)?;
        Ok(false)
    }
}

/// What a file is wanted as, for [`refused`].
pub(super) const REGULAR: &str = "a regular file";
const DIRECTORY: &str = "a directory";

/// "It is a FIFO, not a regular file" (a link: that it is never followed), as an error.
pub(super) fn refused(kind: Kind, wanted: &str) -> std::io::Error {
    if kind == Kind::Link {
        return super::nofollow::link_error(Errno::ELOOP.into());
    }
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!("it is {}, not {wanted}", kind.describe()),
    )
}

/// The kernel's refusals of a name that leaves the tree, in words.
fn in_words(e: Errno) -> std::io::Error {
    match e {
        Errno::ELOOP => super::nofollow::link_error(e.into()),
        Errno::EXDEV => std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "it leads out of the directory (`..` or an absolute name), which subpane never follows there",
        ),
        e => e.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tree with a file, a subdirectory and a secret beside it (outside the tree).
    fn tree() -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let t = d.path().join("tree");
        std::fs::create_dir_all(t.join("refs/heads")).unwrap();
        std::fs::write(t.join("refs/heads/main"), "abc\n").unwrap();
        std::fs::write(d.path().join("secret"), "secret").unwrap();
        (d, t)
    }

    fn fifo(p: &Path) {
        nix::unistd::mkfifo(p, Mode::from_bits_truncate(0o600)).unwrap();
    }

    #[test]
    fn a_link_at_the_root_is_refused_with_words() {
        let (d, t) = tree();
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&t, &link).unwrap();
        let e = ProgramTree::open(&link).unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
        let e = ProgramTree::open(&t.join("refs/heads/main"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("a regular file, not a directory"), "{e}");
        let e = ProgramTree::open(&d.path().join("none")).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    }

    #[test]
    fn no_link_is_followed_on_the_way_nor_at_the_end_nor_dot_dot() {
        let (d, t) = tree();
        std::os::unix::fs::symlink(d.path(), t.join("up")).unwrap();
        std::os::unix::fs::symlink(d.path().join("secret"), t.join("s")).unwrap();
        let tr = ProgramTree::open(&t).unwrap();
        let read = |rel: &str| tr.read(Path::new(rel), 100);
        assert_eq!(read("refs/heads/main").unwrap().unwrap(), b"abc\n");
        assert!(read("refs/heads/none").unwrap().is_none());
        for bad in ["up/secret", "s", "../secret", "refs/../../secret"] {
            let e = read(bad).unwrap_err().to_string();
            assert!(
                e.contains("symbolic link") || e.contains("leads out"),
                "{bad}: {e}"
            );
        }
        let abs = d.path().join("secret");
        assert!(
            tr.read(&abs, 100)
                .unwrap_err()
                .to_string()
                .contains("leads out")
        );
        assert_eq!(tr.kind(Path::new("s")).unwrap(), Kind::Link);
        assert!(tr.subtree(Path::new("up")).is_err());
        // A directory under the name is no file to read (a ref namespace, for git).
        assert!(tr.read(Path::new("refs"), 100).unwrap().is_none());
        let e = tr.open_file(Path::new("refs")).unwrap_err().to_string();
        assert!(e.contains("a directory, not a regular file"), "{e}");
    }

    #[test]
    fn fifos_and_devices_are_refused_unopened_and_whiteouts_are_nothing() {
        let (_d, t) = tree();
        fifo(&t.join("fifo"));
        let tr = ProgramTree::open(&t).unwrap();
        // Would block forever if it were opened for reading.
        let e = tr.read(Path::new("fifo"), 100).unwrap_err().to_string();
        assert!(e.contains("a FIFO"), "{e}");
        assert!(tr.open_file(Path::new("fifo")).is_err());
        assert!(tr.look(Path::new("fifo"), 100).is_err());
        // /dev holds devices; seen through a tree of its own, none is opened.
        let dev = ProgramTree::open(Path::new("/dev")).unwrap();
        let e = dev.read(Path::new("zero"), 100).unwrap_err().to_string();
        assert!(e.contains("a device"), "{e}");
        assert!(dev.read(Path::new("full"), 100).is_err());
        // A whiteout is a character device 0:0; mknod of one needs privileges, so its kind
        // is checked on a stat made up for it.
        let mut st = nix::sys::stat::stat("/dev/null").unwrap();
        st.st_rdev = 0;
        assert_eq!(Kind::of(&st), Kind::Whiteout);
    }

    #[test]
    fn reads_are_bounded_and_a_sparse_file_is_not_read_whole() {
        let (_d, t) = tree();
        File::create(t.join("big"))
            .unwrap()
            .set_len(1 << 40)
            .unwrap();
        let tr = ProgramTree::open(&t).unwrap();
        let e = tr.read(Path::new("big"), 1 << 20).unwrap_err().to_string();
        assert!(e.contains("larger than"), "{e}");
        assert_eq!(
            tr.look(Path::new("refs/heads/main"), 4).unwrap(),
            Found::File(b"abc\n".to_vec())
        );
        assert_eq!(tr.look(Path::new("refs"), 4).unwrap(), Found::Dir);
        assert!(tr.look(Path::new("refs/heads/main"), 3).is_err());
    }

    #[test]
    fn entries_are_named_with_their_kinds_and_bounded() {
        let (d, t) = tree();
        std::os::unix::fs::symlink(d.path(), t.join("up")).unwrap();
        fifo(&t.join("fifo"));
        let tr = ProgramTree::open(&t).unwrap();
        let (all, more) = tr.entries(10).unwrap();
        let got: Vec<(&str, Kind)> = all
            .iter()
            .map(|e| (e.name.to_str().unwrap(), e.kind))
            .collect();
        assert_eq!(
            got,
            [
                ("fifo", Kind::Fifo),
                ("refs", Kind::Dir),
                ("up", Kind::Link)
            ]
        );
        assert!(!more);
        // Listing twice lists the same.
        assert_eq!(tr.entries(10).unwrap().0, all);
        let (two, more) = tr.entries(2).unwrap();
        assert_eq!((two.len(), more), (2, true));
        let sub = tr.subtree(Path::new("refs/heads")).unwrap();
        assert_eq!(sub.entries(10).unwrap().0[0].name, "main");
        assert_eq!(sub.path(), t.join("refs/heads"));
    }

    #[test]
    fn only_regular_files_are_linked() {
        let (d, t) = tree();
        std::os::unix::fs::symlink(d.path().join("secret"), t.join("s")).unwrap();
        fifo(&t.join("fifo"));
        let to = d.path().join("to");
        std::fs::create_dir(&to).unwrap();
        let heads = ProgramTree::open(&t.join("refs/heads")).unwrap();
        assert!(heads.link_file("main".as_ref(), &to.join("main")).unwrap());
        assert_eq!(std::fs::read(to.join("main")).unwrap(), b"abc\n");
        let tr = ProgramTree::open(&t).unwrap();
        for name in ["s", "fifo"] {
            assert!(!tr.link_file(name.as_ref(), &to.join(name)).unwrap());
            assert!(std::fs::symlink_metadata(to.join(name)).is_err(), "{name}");
        }
        assert!(
            tr.link_file("refs/heads/main".as_ref(), &to.join("x"))
                .is_err()
        );
    }
}
