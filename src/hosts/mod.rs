//! Hosts: places other than this machine where attempts will run, kept in `hosts.json` in
//! the home, and the check that one answers.
//!
//! ```text
//!  hosts add NAME URL ─► name checked (as a run id), URL parsed (url.rs) ─► hosts.json
//!  hosts check NAME   ─► ssh (by name, through PATH; ssh.rs) ─► remote `subpane __host-facts`
//!                                                            ─► HostFacts (JSON) ─► report
//! ```
//!
//! `hosts.json` is rewritten whole (`crate::store::write_json_atomic`): a reader never sees a
//! half-written list; `add` and `rm` hold `hosts.lock` from the read to the write, so two at
//! once both land. Runs on a host (`run --host`) are not here yet: this is the record and
//! the check they will use.
//!
//! Common pitfalls:
//! * OpenSSH reads `~/.ssh/config` from the passwd entry's home, not `$HOME`: `ssh` is found
//!   through `PATH`, so a test (or a user) can put a wrapper that adds `-F` first.
//! * A Unix socket path is limited to about 108 bytes: the control socket lives under the
//!   home as `ssh/%C`, never under a long per-host name.
//! * What goes to the remote shell is quoted once, in [`ssh::remote_command`]: a home or
//!   binary path with spaces or `$()` stays data.

pub mod remote;
pub mod slurm;
pub mod ssh;
pub mod url;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use url::{HostUrl, SlurmUrl, SshUrl, UrlError};

use crate::spec::RunId;
use crate::store::{Home, StoreError};

/// The schema tag of `hosts.json`.
pub const HOSTS_SCHEMA: &str = "subpane.hosts/v1";

/// One host as recorded.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Host {
    pub name: String,
    pub url: HostUrl,
    /// The subpane home on the host; its own default when absent.
    pub home: Option<String>,
    /// The `subpane` binary on the host; `subpane` on its PATH when absent (on a Slurm
    /// host: this binary's own path, which the nodes must see too).
    pub bin: Option<String>,
    /// How a Slurm host's jobs are submitted (absent for an ssh host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm: Option<SlurmOptions>,
    /// Where this binary was last copied to on the host (no `--bin`, no `subpane` on its
    /// PATH): the next run there starts it without looking again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copied: Option<String>,
}

/// What every job of a Slurm host is submitted with.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct SlurmOptions {
    /// `--account`.
    pub account: Option<String>,
    /// `--qos`.
    pub qos: Option<String>,
    /// `--time` of a job whose run has no `--timeout`, as Slurm writes it (`30`, `2:00:00`,
    /// `1-00:00:00`).
    pub time_limit: Option<String>,
    /// More `sbatch` arguments, each one word (`--gres=gpu:1`, `--mem=8G`).
    pub sbatch_args: Vec<String>,
}

impl Host {
    /// Its ssh URL. Only ssh hosts are reached through [`ssh`]: every caller there checks
    /// the kind first ([`Host::require_ssh`]).
    pub fn ssh_url(&self) -> &SshUrl {
        match &self.url {
            HostUrl::Ssh(u) => u,
            HostUrl::Slurm(_) => unreachable!("an ssh host: callers check the kind first"),
        }
    }

    /// Refuses what only an ssh host does yet (`what`), on a Slurm host.
    pub fn require_ssh(&self, what: &str) -> Result<(), HostsError> {
        match &self.url {
            HostUrl::Ssh(_) => Ok(()),
            HostUrl::Slurm(_) => Err(HostsError::NotYet(format!(
                "host `{}` is a Slurm partition ({}): {what} on a Slurm host is not supported yet; `subpane hosts check {}` shows what it has",
                self.name, self.url, self.name
            ))),
        }
    }
}

/// `hosts.json`.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct HostsFile {
    pub schema: String,
    pub hosts: Vec<Host>,
}

/// What `subpane __host-facts` prints on the host: one JSON object.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct HostFacts {
    /// subpane's version there.
    pub version: String,
    /// The home subpane uses there.
    pub home: String,
    /// The kernel, as `uname -sr` prints it.
    pub kernel: String,
    /// `tmux -V`, or null when tmux cannot be run there.
    pub tmux: Option<String>,
    /// The kernel's Landlock ABI, or null.
    pub landlock_abi: Option<i32>,
    /// Why there is no Landlock (null when there is).
    pub landlock_problem: Option<String>,
}

/// Why a hosts verb did not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum HostsError {
    #[error("host name {0}")]
    BadName(String),
    #[error(transparent)]
    Url(#[from] UrlError),
    #[error("{what} `{value}` is not an absolute path")]
    NotAbsolute { what: &'static str, value: String },
    #[error("a host named `{0}` exists already; `subpane hosts rm {0}` removes it")]
    Exists(String),
    #[error("no host named `{0}`; `subpane hosts ls` lists them")]
    Unknown(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{path} has schema `{found}`, not {HOSTS_SCHEMA}", path = .path.display())]
    Schema { path: PathBuf, found: String },
    /// What was asked is not supported on this kind of host yet.
    #[error("{0}")]
    NotYet(String),
    /// A value given to `hosts add` that the host's kind does not take, or lacks.
    #[error("{0}")]
    Option(String),
    /// A run id given for a run on a host is in use here already.
    #[error("run id `{0}` is in use here already; give another --run-id, or leave it out")]
    RunIdInUse(String),
    /// What was asked cannot be sent to the host as it is.
    #[error("{0}")]
    Input(String),
    /// The remote subpane refused or failed (exit `code`, 2: bad input), in its words.
    #[error("host `{name}`: {why}")]
    Refused {
        name: String,
        code: i32,
        why: String,
    },
    /// The host could not be reached or did not answer as subpane does.
    #[error("host `{name}`: {why}")]
    Check { name: String, why: String },
}

impl HostsError {
    /// Whether the input was refused (exit 2) rather than something failing (exit 1).
    pub fn is_invalid(&self) -> bool {
        matches!(
            self,
            HostsError::BadName(_)
                | HostsError::Url(_)
                | HostsError::NotAbsolute { .. }
                | HostsError::Exists(_)
                | HostsError::Unknown(_)
                | HostsError::RunIdInUse(_)
                | HostsError::NotYet(_)
                | HostsError::Option(_)
                | HostsError::Input(_)
                | HostsError::Refused { code: 2, .. }
        )
    }
}

/// A host name is checked like a run id (it will name directories and sessions).
pub fn check_name(name: &str) -> Result<(), HostsError> {
    RunId::parse(name).map(|_| ()).map_err(|e| {
        let msg = e.to_string();
        HostsError::BadName(msg.strip_prefix("run id ").unwrap_or(&msg).to_owned())
    })
}

fn hosts_path(home: &Home) -> PathBuf {
    home.root().join("hosts.json")
}

/// The recorded hosts, in the order they were added; none when there is no `hosts.json`.
pub fn list(home: &Home) -> Result<Vec<Host>, HostsError> {
    let path = hosts_path(home);
    let Some(file) = crate::store::read_json::<HostsFile>(&path)? else {
        return Ok(Vec::new());
    };
    if file.schema != HOSTS_SCHEMA {
        return Err(HostsError::Schema {
            path,
            found: file.schema,
        });
    }
    Ok(file.hosts)
}

/// Holds `hosts.lock` while the list is read, changed and written back.
fn lock(home: &Home) -> Result<crate::store::Exclusive, HostsError> {
    std::fs::create_dir_all(home.root()).map_err(|source| StoreError::Write {
        path: home.root().to_path_buf(),
        source,
    })?;
    Ok(crate::store::Exclusive::acquire(
        &home.root().join("hosts.lock"),
    )?)
}

fn save(home: &Home, hosts: Vec<Host>) -> Result<(), HostsError> {
    let path = hosts_path(home);
    let file = HostsFile {
        schema: HOSTS_SCHEMA.to_owned(),
        hosts,
    };
    crate::store::write_json_atomic(&path, &file)?;
    Ok(())
}

fn absolute(what: &'static str, p: Option<&Path>) -> Result<Option<String>, HostsError> {
    match p {
        None => Ok(None),
        Some(p) if p.is_absolute() => {
            p.to_str()
                .map(|s| Some(s.to_owned()))
                .ok_or_else(|| HostsError::NotAbsolute {
                    what,
                    value: p.display().to_string(),
                })
        }
        Some(p) => Err(HostsError::NotAbsolute {
            what,
            value: p.display().to_string(),
        }),
    }
}

/// Records a new host; a name in use is refused. `slurm`: the options of a Slurm host's
/// jobs (refused for an ssh host); a Slurm host needs `remote_home`, the storage its nodes
/// share with this machine.
pub fn add(
    home: &Home,
    name: &str,
    url: &str,
    remote_home: Option<&Path>,
    bin: Option<&Path>,
    slurm: Option<SlurmOptions>,
) -> Result<Host, HostsError> {
    check_name(name)?;
    let url = HostUrl::parse(url)?;
    let remote_home = absolute("--remote-home", remote_home)?;
    let slurm = match (&url, slurm) {
        (HostUrl::Ssh(_), Some(_)) => {
            return Err(HostsError::Option(format!(
                "--account, --qos, --time-limit and --sbatch-arg are for a Slurm host (slurm://PARTITION), not {url}"
            )));
        }
        (HostUrl::Ssh(_), None) => None,
        (HostUrl::Slurm(_), _) if remote_home.is_none() => {
            return Err(HostsError::Option(format!(
                "a Slurm host needs --remote-home DIR: a directory this machine and the nodes of {url} share (where the attempts' records are written)"
            )));
        }
        (HostUrl::Slurm(_), s) => {
            let s = s.unwrap_or_default();
            for a in &s.sbatch_args {
                if !a.starts_with('-') || a.len() < 2 {
                    return Err(HostsError::Option(format!(
                        "--sbatch-arg `{a}` is not an option of sbatch: give one word each, like --sbatch-arg=--gres=gpu:1"
                    )));
                }
            }
            Some(s)
        }
    };
    let host = Host {
        name: name.to_owned(),
        url,
        home: remote_home,
        bin: absolute("--bin", bin)?,
        slurm,
        copied: None,
    };
    let _lock = lock(home)?;
    let mut hosts = list(home)?;
    if hosts.iter().any(|h| h.name == name) {
        return Err(HostsError::Exists(name.to_owned()));
    }
    hosts.push(host.clone());
    save(home, hosts)?;
    Ok(host)
}

/// Remembers where this binary was copied to on host `name` (see [`Host::copied`]); a host
/// removed meanwhile is left alone.
pub fn remember_copy(home: &Home, name: &str, path: &str) -> Result<(), HostsError> {
    let _lock = lock(home)?;
    let mut hosts = list(home)?;
    let Some(h) = hosts.iter_mut().find(|h| h.name == name) else {
        return Ok(());
    };
    if h.copied.as_deref() == Some(path) {
        return Ok(());
    }
    h.copied = Some(path.to_owned());
    save(home, hosts)
}

/// Forgets a host.
pub fn remove(home: &Home, name: &str) -> Result<Host, HostsError> {
    let _lock = lock(home)?;
    let mut hosts = list(home)?;
    let i = hosts
        .iter()
        .position(|h| h.name == name)
        .ok_or_else(|| HostsError::Unknown(name.to_owned()))?;
    let host = hosts.remove(i);
    save(home, hosts)?;
    Ok(host)
}

/// The host named `name`.
pub fn get(home: &Home, name: &str) -> Result<Host, HostsError> {
    list(home)?
        .into_iter()
        .find(|h| h.name == name)
        .ok_or_else(|| HostsError::Unknown(name.to_owned()))
}

/// This machine's facts, as `subpane __host-facts` prints them for the host asking.
pub fn local_facts(home: &Home) -> HostFacts {
    let tmux = std::process::Command::new("tmux")
        .arg("-V")
        .stdin(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    let (landlock_abi, landlock_problem) = match crate::sandbox::landlock_abi() {
        Ok(abi) => (Some(abi), None),
        Err(why) => (None, Some(why)),
    };
    HostFacts {
        version: env!("CARGO_PKG_VERSION").to_owned(),
        home: home.root().display().to_string(),
        kernel: kernel(),
        tmux,
        landlock_abi,
        landlock_problem,
    }
}

/// `uname -sr`.
fn kernel() -> String {
    // SAFETY: uname fills the struct it is given; the fields are NUL-terminated C strings.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut u) } != 0 {
        return format!("unknown ({})", std::io::Error::last_os_error());
    }
    let field = |f: &[libc::c_char]| {
        let bytes: Vec<u8> = f
            .iter()
            .take_while(|c| **c != 0)
            .map(|c| *c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    format!("{} {}", field(&u.sysname), field(&u.release))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_list_remove_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path().join("home"));
        assert!(list(&home).unwrap().is_empty());
        add(
            &home,
            "a",
            "ssh://me@h:22",
            Some(Path::new("/srv/sp")),
            None,
            None,
        )
        .unwrap();
        add(
            &home,
            "b",
            "ssh://h2",
            None,
            Some(Path::new("/opt/subpane")),
            None,
        )
        .unwrap();
        let names: Vec<_> = list(&home).unwrap().into_iter().map(|h| h.name).collect();
        assert_eq!(names, ["a", "b"]);
        assert!(matches!(
            add(&home, "a", "ssh://x", None, None, None),
            Err(HostsError::Exists(_))
        ));
        remove(&home, "a").unwrap();
        assert!(matches!(remove(&home, "a"), Err(HostsError::Unknown(_))));
        assert_eq!(
            get(&home, "b").unwrap().bin.as_deref(),
            Some("/opt/subpane")
        );
    }

    #[test]
    fn adds_at_once_all_land() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path().join("home"));
        std::thread::scope(|s| {
            for i in 0..8 {
                let home = &home;
                s.spawn(move || add(home, &format!("h{i}"), "ssh://h", None, None, None).unwrap());
            }
        });
        assert_eq!(list(&home).unwrap().len(), 8);
    }

    #[test]
    fn bad_input_is_invalid() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path().to_path_buf());
        for e in [
            add(&home, "-x", "ssh://h", None, None, None).unwrap_err(),
            add(&home, "a", "h", None, None, None).unwrap_err(),
            add(&home, "a", "ssh://h", Some(Path::new("rel")), None, None).unwrap_err(),
        ] {
            assert!(e.is_invalid(), "{e}");
        }
        let slurm = SlurmOptions {
            sbatch_args: vec!["gpu:1".into()],
            ..SlurmOptions::default()
        };
        for e in [
            add(&home, "s", "slurm://p", None, None, None).unwrap_err(),
            add(
                &home,
                "s",
                "ssh://h",
                None,
                None,
                Some(SlurmOptions::default()),
            )
            .unwrap_err(),
            add(
                &home,
                "s",
                "slurm://p",
                Some(Path::new("/srv")),
                None,
                Some(slurm),
            )
            .unwrap_err(),
        ] {
            assert!(e.is_invalid(), "{e}");
        }
        assert!(list(&home).unwrap().is_empty(), "nothing was recorded");
        let h = add(&home, "s", "slurm://p", Some(Path::new("/srv")), None, None).unwrap();
        assert_eq!(h.url.kind(), "slurm");
        assert!(h.require_ssh("run --host").is_err());
    }
}
