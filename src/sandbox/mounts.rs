//! The program's view of the file system, built in the helper's private mount namespace.
//!
//! ```text
//!  1. /            MS_REC|MS_PRIVATE        nothing below propagates back to the host
//!     git dir      an overlay on itself      the program's writes land in the attempt's
//!                  (upper: <attempt>/git/upper)  git/upper; subpane carries back its branch
//!  2. masks, outermost first: /tmp, then each hidden directory (the subpane home, --hide)
//!     a. trees below it that the policy names   open_tree(CLONE|RECURSIVE), held by fd
//!     b. the mask   fresh tmpfs                 /tmp: 1777, sized (--max-tmp): the program's
//!                                               hidden: empty, read-only after step c
//!     c. the trees  move_mount(fd) back         same path, same files as on the host
//!  3. read_only    read-only bind over itself   a worktree's .git file, the proxy socket
//!  4. hidden files /dev/null, read-only         (hidden directories were masks)
//!  5. /dev         a fresh tmpfs: the host's null zero full random urandom tty bound onto
//!                  files in it, pts a new devpts instance, shm an empty directory, ptmx
//!                  → pts/ptmx, fd stdin stdout stderr → /proc/self/fd/…
//!  6. /proc        a proc of the PID namespace  only the sandbox's processes
//!     (init sets the PID namespace's limit through this /proc: see limits.rs)
//!  7. read-only    clone each writable tree and the private /tmp; every mount read-only
//!                  (recursively from /); the clones back on top, writable as they were
//!  8. chdir(cwd)   the working directory again, resolved in the new view
//! ```
//!
//! So a hidden directory is empty except what the policy itself puts below it: the subpane
//! home shows the program only its own attempt's artifact directory (`out/`) and, with
//! `--network allow:…`, its egress proxy's socket, never another run's records, environment
//! files or sockets.
//!
//! Landlock decides what may be written; this module decides what can be seen, and carves
//! the read-only holes Landlock cannot (its rules only add rights).
//!
//! Common pitfalls:
//! * The helper's working directory still points into the host's view after the mounts:
//!   `cd ..` from a workspace in `/tmp` would list the host's `/tmp` (and reach a hidden
//!   socket there). Step 8 resolves it again, and fails closed if it is no longer visible.
//! * Landlock covers bytes, not metadata: without step 7 a program could chmod, chown, touch
//!   or set xattrs on any file of its user outside the writable trees.
//! * Step 7 clones before it makes anything read-only: a clone keeps each mount's own
//!   attributes, so a read-only `.git` bind inside the workspace stays read-only and the
//!   workspace around it writable. Device files stay usable on a read-only mount (writing
//!   `/dev/null` or a terminal changes no inode).
//! * The git overlay comes first: its lower layer is the directory as the host has it, and
//!   the trees carried under a mask later are clones that take the overlay along. An
//!   overlay's lower layer does not show what is mounted below it, so nothing else is
//!   mounted inside the git directory.
//! * An overlay mounted in a user namespace needs `userxattr` (its whiteouts and opaque
//!   directories are then `user.overlay.*` xattrs of the upper layer).
//! * A new proc can only be mounted by a process inside the PID namespace it shows, and only
//!   while the host's `/proc` is fully visible (no hidden path below `/proc`).
//! * A hidden directory's tmpfs is made read-only after the carried trees are in: Landlock
//!   would refuse writes there anyway, but not `chmod` or `utime` of the mount points.
//! * A mount namespace owned by a new user namespace locks the mounts it copied: they can be
//!   covered but not unmounted or cloned one by one. `open_tree` needs `AT_RECURSIVE`.
//! * `mount(MS_REMOUNT|MS_BIND|MS_RDONLY)` in a user namespace must repeat the locked flags
//!   (nosuid, nodev, …) of the mount, or it fails with EPERM; `mount_setattr` on a detached
//!   clone sets read-only alone.
//! * A hidden file becomes `/dev/null`: reads are empty, writes vanish, a socket there
//!   refuses connections. A hidden path that does not exist is skipped (there is nothing
//!   to see); a read-only path that does not exist fails closed, since the program could
//!   create it (a new hook would run later, outside the sandbox).
//! * Reading another terminal (`/dev/pts/N` of the same user) would read the keys typed in
//!   it: the program gets its own devpts, so the host's terminals are not there at all.
//! * The host's `/dev` holds what no program needs and some that act on the machine (virtual
//!   consoles' memory `/dev/vcs*`, `kvm`, loop and block devices, `kmsg`): the program's `/dev`
//!   is a tmpfs of its own. A device node cannot be made there (`mknod` needs CAP_MKNOD in
//!   the initial user namespace, and a tmpfs mounted in a user namespace is `nodev`), so the
//!   few devices are the host's nodes, bound onto empty files; the bind mounts keep the
//!   host's devtmpfs, where devices open.
//! * `/dev/shm` is an empty directory that the program cannot write, as the host's was to
//!   it before (Landlock has no rule for it): POSIX shared memory is not offered.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use super::SandboxFailure;
use crate::spec::SandboxSpec;

const TMP: &str = "/tmp";

/// Builds the view described in the module docs, up to its own `/proc` (steps 1 to 6; see
/// [`seal`] for the rest).
pub fn build(spec: &SandboxSpec) -> Result<(), SandboxFailure> {
    let root = Path::new("/");
    mount(None, root, None, libc::MS_REC | libc::MS_PRIVATE, None)
        .map_err(|e| failure(root, "cannot make the mounts private", e))?;

    // The workspace's git directory, before anything covers the paths it is made of.
    if let Some(repo) = &spec.git {
        overlay(&repo.common_dir, &repo.upper, &repo.work).map_err(|e| {
            failure(
                &repo.common_dir,
                "cannot give the program its own view of the git directory",
                e,
            )
        })?;
    }

    // Directories covered by a fresh tmpfs, outermost first: the private /tmp, then every
    // hidden directory (the subpane home among them). What the policy names below one is
    // carried across: taken before the cover, put back at the same path after it.
    for mask in masks(&spec.hidden) {
        match std::fs::metadata(&mask.path) {
            Ok(m) if m.is_dir() => {}
            // A hidden file is covered below; a path not there has nothing to hide.
            Ok(_) => continue,
            Err(e) if absent(&e) => continue,
            Err(e) => return Err(failure(&mask.path, "cannot look at the path to hide", e)),
        }
        let keep = carried(&mask.path, &spec.writable, &spec.read_only);
        cover(&mask, &keep, &super::limits::tmpfs_options(&spec.limits))?;
    }

    for path in &spec.read_only {
        if let Err(e) = std::fs::metadata(path) {
            let why = "a read-only path must exist, or the program could create it";
            return Err(failure(path, why, e));
        }
        bind_read_only(path, path).map_err(|e| failure(path, "cannot make it read-only", e))?;
    }

    for path in &spec.hidden {
        let meta = match std::fs::metadata(path) {
            Ok(m) => m,
            Err(e) if absent(&e) => continue,
            Err(e) => return Err(failure(path, "cannot look at the path to hide", e)),
        };
        if !meta.is_dir() {
            bind_read_only(Path::new("/dev/null"), path)
                .map_err(|e| failure(path, "cannot hide it", e))?;
        }
    }

    private_dev()?;

    // The caller is pid 1 of a new PID namespace: a proc of its own shows only the sandbox's
    // processes (other processes' command lines hold tokens).
    let proc = Path::new("/proc");
    mount(
        Some("proc"),
        proc,
        Some("proc"),
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        None,
    )
    .map_err(|e| failure(proc, "cannot mount a proc of the PID namespace", e))?;

    Ok(())
}

/// The host's devices a program gets in its private `/dev` (those the host has).
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

/// The links of the private `/dev`, as the host's are (`ptmx` into the program's own devpts).
const DEV_LINKS: &[(&str, &str)] = &[
    ("ptmx", "pts/ptmx"),
    ("fd", "/proc/self/fd"),
    ("stdin", "/proc/self/fd/0"),
    ("stdout", "/proc/self/fd/1"),
    ("stderr", "/proc/self/fd/2"),
];

/// Step 5 of the module docs: `/dev` as a tmpfs with only [`DEVICES`] (the host's nodes,
/// bound), a devpts of its own, an empty `shm` and [`DEV_LINKS`].
fn private_dev() -> Result<(), SandboxFailure> {
    use std::os::unix::fs::FileTypeExt;
    let dev = Path::new("/dev");
    let mut held = Vec::new();
    for name in DEVICES {
        let node = dev.join(name);
        match std::fs::metadata(&node) {
            Ok(m) if m.file_type().is_char_device() => {}
            // Not a device here (a container's /dev may lack one): nothing to give.
            Ok(_) => continue,
            Err(e) if absent(&e) => continue,
            Err(e) => return Err(failure(&node, "cannot look at the device", e)),
        }
        let fd =
            open_tree(&node).map_err(|e| failure(&node, "cannot take the device across", e))?;
        held.push((node, fd));
    }
    mount(
        Some("tmpfs"),
        dev,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        Some("mode=0755,size=64k"),
    )
    .map_err(|e| failure(dev, "cannot mount a private /dev", e))?;
    for (node, fd) in held {
        make_mount_point(&node, false)
            .and_then(|()| move_mount(&fd, &node))
            .map_err(|e| failure(&node, "cannot put the device in the private /dev", e))?;
    }
    let pts = dev.join("pts");
    std::fs::create_dir(&pts).map_err(|e| failure(&pts, "cannot make it", e))?;
    mount(
        Some("devpts"),
        &pts,
        Some("devpts"),
        libc::MS_NOSUID | libc::MS_NOEXEC,
        Some("newinstance,ptmxmode=0666,mode=0620"),
    )
    .map_err(|e| failure(&pts, "cannot mount a private devpts", e))?;
    let shm = dev.join("shm");
    std::fs::create_dir(&shm).map_err(|e| failure(&shm, "cannot make it", e))?;
    for (name, target) in DEV_LINKS {
        let link = dev.join(name);
        std::os::unix::fs::symlink(target, &link)
            .map_err(|e| failure(&link, "cannot make the link", e))?;
    }
    // Nothing but the devices may change there (the whole tree is read-only after step 7 too).
    set_read_only(dev).map_err(|e| failure(dev, "cannot make it read-only", e))
}

/// The last steps of the view, once init has used its `/proc` (the namespace's limits):
/// the host's tree read-only, then the working directory resolved again in the view.
pub fn seal(spec: &SandboxSpec, cwd: &Path) -> Result<(), SandboxFailure> {
    read_only_host(&spec.writable)?;
    std::env::set_current_dir(cwd).map_err(|e| {
        failure(
            cwd,
            "the working directory is not visible in the sandbox",
            e,
        )
    })
}

/// Mounts an overlay at `dir` whose lower layer is `dir` itself: the program reads the
/// directory as it is, and what it writes lands in `upper` (`work` is the overlay's scratch
/// directory, beside it).
fn overlay(dir: &Path, upper: &Path, work: &Path) -> io::Result<()> {
    // The new mount API takes each path whole: no escaping of `,` or `:` in it.
    let fs = fs_open("overlay")?;
    // `lowerdir+` (Linux 6.8) appends one layer; older kernels take `lowerdir` as a list.
    if fs_set(&fs, "lowerdir+", Some(dir)).is_err() {
        fs_set(&fs, "lowerdir", Some(&escape_layer(dir)))?;
    }
    fs_set(&fs, "upperdir", Some(upper))?;
    fs_set(&fs, "workdir", Some(work))?;
    // In a user namespace an overlay keeps its bookkeeping in `user.` xattrs.
    fs_set(&fs, "userxattr", None)?;
    fs_create(&fs)?;
    let mnt = fs_mount(&fs)?;
    move_mount(&mnt, dir)
}

/// A path as one layer of a `lowerdir` list: `\`, `:` and `,` escaped.
fn escape_layer(p: &Path) -> PathBuf {
    let mut out = Vec::new();
    for &b in p.as_os_str().as_bytes() {
        if matches!(b, b'\\' | b':' | b',') {
            out.push(b'\\');
        }
        out.push(b);
    }
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

/// `fsopen(2)`.
fn fs_open(fstype: &str) -> io::Result<OwnedFd> {
    let t = CString::new(fstype).map_err(io::Error::other)?;
    // SAFETY: fsopen with a NUL-terminated name; the result is a new descriptor we own.
    let fd = cvt(unsafe { libc::syscall(libc::SYS_fsopen, t.as_ptr(), libc::FSOPEN_CLOEXEC) })?;
    // SAFETY: a fresh descriptor returned by the kernel.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// `fsconfig(2)` setting a string (`Some`) or a flag (`None`).
fn fs_set(fs: &OwnedFd, key: &str, value: Option<&Path>) -> io::Result<()> {
    let k = CString::new(key).map_err(io::Error::other)?;
    let v = value.map(cstr).transpose()?;
    let (cmd, ptr) = match &v {
        Some(v) => (libc::FSCONFIG_SET_STRING, v.as_ptr()),
        None => (libc::FSCONFIG_SET_FLAG, std::ptr::null()),
    };
    // SAFETY: fsconfig on an fsopen descriptor with NUL-terminated strings (or null).
    cvt(unsafe { libc::syscall(libc::SYS_fsconfig, fs.as_raw_fd(), cmd, k.as_ptr(), ptr, 0) })
        .map(drop)
}

/// `fsconfig(FSCONFIG_CMD_CREATE)`: the superblock, from the parameters set.
fn fs_create(fs: &OwnedFd) -> io::Result<()> {
    fs_command(fs, libc::FSCONFIG_CMD_CREATE)
}

/// `fsconfig(2)` running `cmd` (create, reconfigure) on the parameters set.
fn fs_command(fs: &OwnedFd, cmd: libc::c_uint) -> io::Result<()> {
    // SAFETY: fsconfig on an fs context descriptor with null key and value, as the commands
    // ask.
    cvt(unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            fs.as_raw_fd(),
            cmd,
            std::ptr::null::<libc::c_char>(),
            std::ptr::null::<libc::c_char>(),
            0,
        )
    })
    .map(drop)
}

/// Sets `options` of the file system whose mount root `root` names (an `O_PATH`
/// descriptor): `fspick` and a reconfigure, which change the superblock only. A remount
/// through `mount(2)` would also reset the mount's own flags (nosuid, nodev).
pub(super) fn reconfigure(root: &OwnedFd, options: &[(&str, String)]) -> io::Result<()> {
    let flags = libc::FSPICK_CLOEXEC | libc::FSPICK_EMPTY_PATH;
    // SAFETY: fspick(2) on a descriptor we own with an empty path; the result is a new
    // descriptor we own.
    let fd =
        cvt(unsafe { libc::syscall(libc::SYS_fspick, root.as_raw_fd(), c"".as_ptr(), flags) })?;
    // SAFETY: a fresh descriptor returned by the kernel.
    let fs = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    for (key, value) in options {
        fs_set(&fs, key, Some(Path::new(value)))?;
    }
    fs_command(&fs, libc::FSCONFIG_CMD_RECONFIGURE)
}

/// `fsmount(2)`: a detached mount of the superblock.
fn fs_mount(fs: &OwnedFd) -> io::Result<OwnedFd> {
    // SAFETY: fsmount on a created fs context; the result is a new descriptor we own.
    let fd =
        cvt(unsafe { libc::syscall(libc::SYS_fsmount, fs.as_raw_fd(), libc::FSMOUNT_CLOEXEC, 0) })?;
    // SAFETY: a fresh descriptor returned by the kernel.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Makes every mount read-only but the writable trees and the private `/tmp`, as they are:
/// each is cloned (with what is mounted below it), everything is made read-only, and the
/// clones go back on top. Landlock refuses writes outside them already; a read-only mount
/// also refuses what Landlock does not cover (chmod, chown, utime, xattrs).
fn read_only_host(writable: &[PathBuf]) -> Result<(), SandboxFailure> {
    let mut roots: Vec<PathBuf> = writable.to_vec();
    roots.push(PathBuf::from(TMP));
    let mut held = Vec::new();
    for root in outermost(&roots) {
        match std::fs::symlink_metadata(&root) {
            Ok(_) => {}
            // Made later or never: nothing to keep writable there.
            Err(e) if absent(&e) => continue,
            Err(e) => return Err(failure(&root, "cannot look at a writable path", e)),
        }
        let fd = open_tree(&root).map_err(|e| failure(&root, "cannot keep it writable", e))?;
        held.push((root, fd));
    }
    let root = Path::new("/");
    set_attr(
        root,
        libc::AT_RECURSIVE as libc::c_uint,
        libc::MOUNT_ATTR_RDONLY,
    )
    .map_err(|e| failure(root, "cannot make the host's tree read-only", e))?;
    for (path, fd) in held {
        move_mount(&fd, &path).map_err(|e| failure(&path, "cannot make it writable again", e))?;
    }
    Ok(())
}

/// The paths of `paths` that no other one holds, outermost first. Pure.
pub fn outermost(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut sorted: Vec<&PathBuf> = paths.iter().collect();
    sorted.sort_by_key(|p| p.components().count());
    let mut out: Vec<PathBuf> = Vec::new();
    for p in sorted {
        if !out.iter().any(|kept| p.starts_with(kept)) {
            out.push(p.clone());
        }
    }
    out
}

/// A directory the program sees as a fresh, empty tmpfs (plus what is carried across).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mask {
    pub path: PathBuf,
    /// The private `/tmp` (writable by all, sticky); else a hidden directory (read-only once
    /// the carried paths are in place).
    pub private_tmp: bool,
}

/// The private `/tmp` and the hidden paths, outermost first. Pure. Hidden paths that are
/// files are in the list too; [`build`] skips what is not a directory.
pub fn masks(hidden: &[PathBuf]) -> Vec<Mask> {
    let mut out = vec![Mask {
        path: PathBuf::from(TMP),
        private_tmp: true,
    }];
    for h in hidden {
        if h.as_path() != Path::new(TMP) && !out.iter().any(|m| &m.path == h) {
            out.push(Mask {
                path: h.clone(),
                private_tmp: false,
            });
        }
    }
    out.sort_by_key(|m| m.path.components().count());
    out
}

/// Covers `mask` with a fresh tmpfs, keeping the trees `keep` visible at their paths.
fn cover(mask: &Mask, keep: &[PathBuf], tmp_options: &str) -> Result<(), SandboxFailure> {
    let mut held = Vec::new();
    for path in keep {
        let is_dir = std::fs::metadata(path)
            .map_err(|e| failure(path, "cannot keep it visible under a covered directory", e))?
            .is_dir();
        let fd = open_tree(path).map_err(|e| failure(path, "cannot take it across", e))?;
        held.push((path, fd, is_dir));
    }
    let (flags, data, what) = if mask.private_tmp {
        (
            libc::MS_NOSUID | libc::MS_NODEV,
            tmp_options,
            "cannot mount the private /tmp",
        )
    } else {
        (
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            "mode=0755",
            "cannot hide it",
        )
    };
    mount(Some("tmpfs"), &mask.path, Some("tmpfs"), flags, Some(data))
        .map_err(|e| failure(&mask.path, what, e))?;
    for (path, fd, is_dir) in held {
        make_mount_point(path, is_dir)
            .map_err(|e| failure(path, "cannot make its place under the covered directory", e))?;
        move_mount(&fd, path).map_err(|e| failure(path, "cannot put it back", e))?;
    }
    if !mask.private_tmp {
        // Nothing but the carried trees may be changed below a hidden directory: not even
        // the mount points' metadata (Landlock does not cover chmod or utime).
        set_read_only(&mask.path).map_err(|e| failure(&mask.path, "cannot hide it", e))?;
    }
    Ok(())
}

/// The trees that must stay visible at their path under a covered directory `under`:
/// writable and read-only paths strictly below it, outermost first, nested ones dropped
/// (they come along with their parent). Pure.
pub fn carried(under: &Path, writable: &[PathBuf], read_only: &[PathBuf]) -> Vec<PathBuf> {
    let below: Vec<PathBuf> = writable
        .iter()
        .chain(read_only)
        .filter(|p| p.starts_with(under) && p.as_path() != under)
        .cloned()
        .collect();
    outermost(&below)
}

fn absent(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR))
}

fn failure(path: &Path, what: &str, e: io::Error) -> SandboxFailure {
    SandboxFailure::Mount {
        path: path.display().to_string(),
        why: format!("{what}: {e}"),
    }
}

fn cstr(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

fn cvt(rc: libc::c_long) -> io::Result<libc::c_long> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn mount(
    source: Option<&str>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> io::Result<()> {
    let opt = |s: Option<&str>| s.map(CString::new).transpose().map_err(io::Error::other);
    let (source, fstype, data) = (opt(source)?, opt(fstype)?, opt(data)?);
    let target = cstr(target)?;
    let ptr = |c: &Option<CString>| c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
    // SAFETY: every pointer is a NUL-terminated string alive for the call, or null.
    let rc = unsafe {
        libc::mount(
            ptr(&source),
            target.as_ptr(),
            ptr(&fstype),
            flags,
            ptr(&data).cast(),
        )
    };
    cvt(rc.into()).map(drop)
}

/// A detached copy of the mount tree at `path` (with everything mounted below it).
fn open_tree(path: &Path) -> io::Result<OwnedFd> {
    let p = cstr(path)?;
    let flags = libc::OPEN_TREE_CLONE | libc::OPEN_TREE_CLOEXEC | libc::AT_RECURSIVE as u32;
    // SAFETY: open_tree(2) with a valid path; the result is a new descriptor we own.
    let fd = cvt(unsafe { libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, p.as_ptr(), flags) })?;
    // SAFETY: a fresh descriptor returned by the kernel.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Attaches the detached tree `fd` at `target` (following a symlink at `target`).
fn move_mount(fd: &OwnedFd, target: &Path) -> io::Result<()> {
    let t = cstr(target)?;
    let flags = libc::MOVE_MOUNT_F_EMPTY_PATH | libc::MOVE_MOUNT_T_SYMLINKS;
    // SAFETY: move_mount(2) with a mount fd, an empty source path and a valid target path.
    cvt(unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            fd.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            flags,
        )
    })
    .map(drop)
}

/// Mounts a read-only copy of `source` over `target`.
fn bind_read_only(source: &Path, target: &Path) -> io::Result<()> {
    let fd = open_tree(source)?;
    let attr = libc::mount_attr {
        attr_set: libc::MOUNT_ATTR_RDONLY,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    let flags = libc::AT_EMPTY_PATH | libc::AT_RECURSIVE;
    // SAFETY: mount_setattr(2) on a mount fd with an empty path and a mount_attr of the size
    // passed.
    cvt(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            fd.as_raw_fd(),
            c"".as_ptr(),
            flags as libc::c_uint,
            &attr as *const libc::mount_attr,
            std::mem::size_of::<libc::mount_attr>(),
        )
    })?;
    move_mount(&fd, target)
}

/// Makes the mount at `path` read-only (not the mounts below it).
fn set_read_only(path: &Path) -> io::Result<()> {
    set_attr(path, 0, libc::MOUNT_ATTR_RDONLY)
}

/// `mount_setattr(2)` setting `attr` on the mount at `path` (and those below it with
/// `AT_RECURSIVE` in `flags`).
///
/// Making a mount read-only fails with EBUSY while anything holds its writer count, and a
/// path lookup through a symlink on it does, briefly (`touch_atime` in `pick_link`): the
/// change is tried again a few times, as runc and Bazel's sandbox do (seen once here, on the
/// private `/dev` under load).
fn set_attr(path: &Path, flags: libc::c_uint, attr: u64) -> io::Result<()> {
    let p = cstr(path)?;
    let attr = libc::mount_attr {
        attr_set: attr,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    let mut pause = std::time::Duration::from_millis(10);
    for tries_left in (0..5).rev() {
        // SAFETY: mount_setattr(2) on a valid path with a mount_attr of the size passed.
        let r = cvt(unsafe {
            libc::syscall(
                libc::SYS_mount_setattr,
                libc::AT_FDCWD,
                p.as_ptr(),
                flags,
                &attr as *const libc::mount_attr,
                std::mem::size_of::<libc::mount_attr>(),
            )
        });
        match r {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && tries_left > 0 => {
                std::thread::sleep(pause);
                pause *= 2;
            }
            r => return r.map(drop),
        }
    }
    unreachable!("the last try returns")
}

fn make_mount_point(path: &Path, is_dir: bool) -> io::Result<()> {
    if is_dir {
        return std::fs::create_dir_all(path);
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::File::create(path).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(v: &[&str]) -> Vec<PathBuf> {
        v.iter().map(PathBuf::from).collect()
    }

    #[test]
    fn only_outermost_trees_strictly_under_a_mask_are_carried() {
        let tmp = Path::new("/tmp");
        let writable = paths(&[
            "/tmp/ws",
            "/home/u/h/runs/r/attempts/1/out",
            "/tmp",
            "/tmpfoo",
        ]);
        let read_only = paths(&["/tmp/ws/.git/hooks", "/tmp/other/.git/config"]);
        assert_eq!(
            carried(tmp, &writable, &read_only),
            paths(&["/tmp/ws", "/tmp/other/.git/config"])
        );
        // A nested tree listed first still comes along with its parent.
        let writable = paths(&["/tmp/a/b/c", "/tmp/a"]);
        assert_eq!(carried(tmp, &writable, &[]), paths(&["/tmp/a"]));
        assert!(carried(tmp, &paths(&["/src/app"]), &[]).is_empty());
        // The home: only the attempt's own artifact directory and proxy socket come along.
        let home = Path::new("/home/u/h");
        let read_only = paths(&["/home/u/h/runs/r/attempts/1/proxy.sock"]);
        assert_eq!(
            carried(home, &writable_with_out(), &read_only),
            paths(&[
                "/home/u/h/runs/r/attempts/1/out",
                "/home/u/h/runs/r/attempts/1/proxy.sock"
            ])
        );
    }

    fn writable_with_out() -> Vec<PathBuf> {
        paths(&["/src/app", "/home/u/h/runs/r/attempts/1/out"])
    }

    #[test]
    fn masks_start_with_the_private_tmp_and_go_outermost_first() {
        let m = masks(&paths(&["/home/u/h", "/home", "/tmp", "/home/u/h"]));
        let got: Vec<(&str, bool)> = m
            .iter()
            .map(|m| (m.path.to_str().unwrap(), m.private_tmp))
            .collect();
        assert_eq!(
            got,
            [("/tmp", true), ("/home", false), ("/home/u/h", false)]
        );
    }
}
