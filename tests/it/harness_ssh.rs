//! A private OpenSSH server on loopback for a test, and an `ssh` on PATH that reaches it.
//!
//! ```text
//!  SshServer::start_as(dir, ALIAS)
//!    ├─ once: dir/ssh/client_ed25519, known_hosts, ssh_config (Include conf.d/*.conf),
//!    │        dir/ssh/bin/ssh: `exec /usr/bin/ssh -F dir/ssh/ssh_config "$@"` (first on PATH)
//!    ├─ dir/ssh/hosts/ALIAS/: host_ed25519 (ssh-keygen), authorized_keys, sshd_config
//!    │   (127.0.0.1, a free port, UsePAM no, StrictModes no, PidFile here), sshd.log
//!    ├─ dir/ssh/conf.d/ALIAS.conf: Host ALIAS → 127.0.0.1, the port, root
//!    └─ sshd -D -e -f sshd_config   (this test's child; killed on drop)
//! ```
//!
//! OpenSSH finds `~/.ssh/config` through the passwd entry, not `$HOME`: the wrapper is how a
//! test gives ssh its own config. The config names the host `sshtest` (an alias, as a user's
//! `~/.ssh/config` would) and sets `Host *` defaults so `ssh://root@127.0.0.1:PORT` works too.
//!
//! Common pitfalls:
//! * sshd forks a process per connection that outlives the listener; a `ControlPersist`
//!   master ssh outlives the command that made it. Drop ends both: the masters by
//!   `ssh -O exit` on each socket under the control dirs it was told of, then the listener's
//!   children, then the listener.
//! * sshd refuses to start without `/run/sshd` (its privilege-separation directory).

#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::harness::{self, DEADLINE};

/// The alias of the test's sshd in its ssh_config.
pub const ALIAS: &str = "sshtest";

pub struct SshServer {
    pub port: u16,
    /// Its name in the ssh config.
    pub alias: String,
    pub dir: PathBuf,
    /// A directory holding the `ssh` wrapper: put it first on PATH.
    pub bin_dir: PathBuf,
    pub config: PathBuf,
    child: Child,
    /// Control socket directories whose masters are ended on drop.
    control_dirs: std::cell::RefCell<Vec<PathBuf>>,
}

/// The full path of `tool` on PATH (and in /usr/sbin, where Debian puts sshd).
fn which(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|d| d.join(tool))
        .find(|p| p.is_file())
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().unwrap().port()
}

fn keygen(path: &Path) {
    let ok = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .stdin(Stdio::null())
        .status()
        .expect("run ssh-keygen")
        .success();
    assert!(ok, "ssh-keygen -f {} failed", path.display());
}

/// The client side every server of a test shares, made once under `shared`: a key, a
/// known_hosts file, the config (each server's `Host` block comes from `conf.d/`) and the
/// `ssh` wrapper that hands it to the real ssh. Returns (config, wrapper dir, key).
fn client_side(shared: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let config = shared.join("ssh_config");
    let bin_dir = shared.join("bin");
    let client_key = shared.join("client_ed25519");
    if config.exists() {
        return (config, bin_dir, client_key);
    }
    std::fs::create_dir_all(shared.join("conf.d")).unwrap();
    std::fs::create_dir_all(&bin_dir).unwrap();
    keygen(&client_key);
    std::fs::write(
        &config,
        format!(
            "Include {}/*.conf\n\
             Host *\n  IdentityFile {}\n  IdentitiesOnly yes\n  UserKnownHostsFile {}\n\
               GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking accept-new\n\
               BatchMode yes\n  LogLevel ERROR\n",
            shared.join("conf.d").display(),
            client_key.display(),
            shared.join("known_hosts").display()
        ),
    )
    .unwrap();
    let real_ssh = which("ssh").expect("ssh on PATH");
    let wrapper = bin_dir.join("ssh");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nexec {} -F {} \"$@\"\n",
            harness::q(&real_ssh),
            harness::q(&config)
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    (config, bin_dir, client_key)
}

impl SshServer {
    /// Starts sshd under `root` (a test's temp dir) as the host [`ALIAS`], and waits until
    /// its port answers.
    pub fn start(root: &Path) -> Self {
        Self::start_as(root, ALIAS)
    }

    /// Starts another sshd under `root`, reached as `alias` through the same `ssh` wrapper
    /// (several "hosts" in one test: each its own port, host key and files).
    pub fn start_as(root: &Path, alias: &str) -> Self {
        harness::require_tool("ssh", &["-V"], "openssh-client");
        let sshd = which("sshd").unwrap_or_else(|| PathBuf::from("sshd"));
        harness::require_tool(sshd.to_str().unwrap(), &["-V"], "openssh-server");
        std::fs::create_dir_all("/run/sshd").expect("make /run/sshd for sshd");
        let shared = root.join("ssh");
        let (config, bin_dir, client_key) = client_side(&shared);
        let dir = shared.join("hosts").join(alias);
        std::fs::create_dir_all(&dir).unwrap();
        let host_key = dir.join("host_ed25519");
        keygen(&host_key);
        let authorized = dir.join("authorized_keys");
        std::fs::copy(client_key.with_extension("pub"), &authorized).unwrap();
        let port = free_port();
        let sshd_config = dir.join("sshd_config");
        std::fs::write(
            &sshd_config,
            format!(
                "ListenAddress 127.0.0.1\nPort {port}\nHostKey {}\nAuthorizedKeysFile {}\n\
                 UsePAM no\nStrictModes no\nPermitRootLogin prohibit-password\n\
                 PasswordAuthentication no\nKbdInteractiveAuthentication no\n\
                 PidFile {}\nLogLevel ERROR\nSetEnv SUBPANE_TMUX_SOCKET={}\n",
                host_key.display(),
                authorized.display(),
                dir.join("sshd.pid").display(),
                dir.join("tmux.sock").display()
            ),
        )
        .unwrap();
        std::fs::write(
            shared.join("conf.d").join(format!("{alias}.conf")),
            format!("Host {alias}\n  HostName 127.0.0.1\n  Port {port}\n  User root\n"),
        )
        .unwrap();
        let child = Command::new(&sshd)
            .args(["-D", "-e", "-f"])
            .arg(&sshd_config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("sshd.log")).unwrap())
            .spawn()
            .expect("start sshd");
        let mut server = SshServer {
            port,
            alias: alias.to_owned(),
            dir,
            bin_dir,
            config,
            child,
            control_dirs: Default::default(),
        };
        server.wait_listening();
        server
    }

    fn wait_listening(&mut self) {
        let end = Instant::now() + DEADLINE;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "sshd exited ({status}): {}",
                    std::fs::read_to_string(self.dir.join("sshd.log")).unwrap_or_default()
                );
            }
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            assert!(Instant::now() < end, "sshd did not listen on {}", self.port);
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// PATH with the wrapper first.
    pub fn path_env(&self) -> std::ffi::OsString {
        let rest = std::env::var_os("PATH").unwrap_or_default();
        let mut dirs = vec![self.bin_dir.clone()];
        dirs.extend(std::env::split_paths(&rest));
        std::env::join_paths(dirs).unwrap()
    }

    /// The tmux socket of the subpane reached through this sshd (`SetEnv` in its config):
    /// each test's "host" has a private tmux server, as a real host's home would.
    pub fn tmux_socket(&self) -> PathBuf {
        self.dir.join("tmux.sock")
    }

    /// The pid of the control master for this host whose socket is in `dir`, if one runs.
    pub fn master_pid(&self, dir: &Path) -> Option<i32> {
        for e in std::fs::read_dir(dir).ok()?.flatten() {
            let out = Command::new(self.bin_dir.join("ssh"))
                .arg("-S")
                .arg(e.path())
                .args(["-O", "check", &self.alias])
                .stdin(Stdio::null())
                .output()
                .ok()?;
            // "Master running (pid=1234)" on stderr.
            let said = String::from_utf8_lossy(&out.stderr).into_owned();
            if let Some(pid) = said
                .split("pid=")
                .nth(1)
                .and_then(|r| r.split(')').next())
                .and_then(|p| p.parse().ok())
            {
                return Some(pid);
            }
        }
        None
    }

    /// `ssh://root@127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("ssh://root@127.0.0.1:{}", self.port)
    }

    /// Ends, on drop, the control masters whose sockets are in `dir`.
    pub fn forget_masters_in(&self, dir: PathBuf) {
        self.control_dirs.borrow_mut().push(dir);
    }

    fn end_masters(&self) {
        for dir in self.control_dirs.borrow().iter() {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            for e in entries.flatten() {
                let _ = Command::new(self.bin_dir.join("ssh"))
                    .arg("-S")
                    .arg(e.path())
                    .args(["-O", "exit", &self.alias])
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
            }
        }
    }

    /// The processes whose parent is sshd (one per connection).
    fn sessions(&self) -> Vec<i32> {
        let me = self.child.id() as i32;
        let mut kids = Vec::new();
        for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            // The parent is the second field after the command's closing parenthesis.
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse::<i32>().ok());
            if ppid == Some(me) {
                kids.push(pid);
            }
        }
        kids
    }
}

impl Drop for SshServer {
    fn drop(&mut self) {
        self.end_masters();
        // The host's private tmux server (its attempts' panes), if a run started one.
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(self.tmux_socket())
            .arg("kill-server")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        for pid in self.sessions() {
            // SAFETY: plain kill(2) on one pid, a child of our sshd (gone already is fine).
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
