//! Reaching a host: OpenSSH's own client, called by name through `PATH`, over one
//! multiplexed control connection per host whose socket lives under the home.
//!
//! ```text
//!  ssh -o BatchMode=yes -o ConnectTimeout=N -o ControlMaster=auto -o ControlPersist=60
//!      -o ControlPath=HOME/ssh/%C [-p PORT] [user@]host -- 'BIN' ['--home' 'DIR'] '__host-facts'
//!   ├─ exit 0, one JSON object ─► HostFacts
//!   ├─ exit 127, no --bin ─► ensure_copied: this binary to HOME/bin/subpane-VERSION-HASH
//!   │                        (sha256sum there before and after; renamed into place), asked again
//!   ├─ exit 255 ─► ssh's own error (unreachable, refused, no key)
//!   └─ the limit passed ─► killed with its process group
//! ```
//!
//! Common pitfalls:
//! * `BatchMode=yes`: a password or host-key prompt would hang a verb that has no terminal;
//!   ssh fails instead, and says why on stderr.
//! * The remote command is one string a shell reads: each word is single-quoted here, the
//!   one place it is built.
//! * `ControlPersist` leaves a master ssh running after the check (so the next command on
//!   the host is one round trip); `ssh -O exit -S SOCKET` ends it.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use super::{Host, HostFacts, HostsError};
use crate::store::Home;

/// How long ssh may take to connect before `hosts check` gives up.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the control connection stays up after its last use.
const PERSIST_SECS: u32 = 60;

/// Where the control sockets of the home's hosts live (`%C` is ssh's hash of the
/// destination: short, whatever the host's name).
pub fn control_dir(home: &Home) -> PathBuf {
    home.root().join("ssh")
}

/// One word for a POSIX shell: single-quoted, `'` written as `'\''`.
pub fn shell_word(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The command line the remote shell runs, every word quoted.
pub fn remote_command(words: &[&str]) -> String {
    words
        .iter()
        .map(|w| shell_word(w))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The remote `subpane` (`bin`: see [`RemoteBin`]) and its home, as the first words of
/// every remote command.
pub fn remote_subpane<'a>(host: &'a Host, bin: &'a str) -> Vec<&'a str> {
    let mut words = vec![bin];
    if let Some(h) = &host.home {
        words.extend(["--home", h.as_str()]);
    }
    words
}

/// `ssh` with the options every connection to `host` uses, up to its destination.
pub fn ssh_args(home: &Home, host: &Host, connect_timeout: Duration) -> Vec<OsString> {
    let secs = connect_timeout.as_secs().max(1);
    let mut path = OsString::from("ControlPath=");
    path.push(control_dir(home).join("%C"));
    let mut args: Vec<OsString> = vec![
        "-o".into(),
        "BatchMode=yes".into(),
        "-o".into(),
        format!("ConnectTimeout={secs}").into(),
        "-o".into(),
        "ControlMaster=auto".into(),
        "-o".into(),
        format!("ControlPersist={PERSIST_SECS}").into(),
        // A network that dies without a word ends the connection within 45 s (exit 255),
        // and a wait makes it again, rather than hanging on a dead socket.
        "-o".into(),
        "ServerAliveInterval=15".into(),
        "-o".into(),
        "ServerAliveCountMax=3".into(),
        "-o".into(),
        path,
    ];
    let url = host.ssh_url();
    if let Some(p) = url.port {
        args.extend(["-p".into(), p.to_string().into()]);
    }
    args.push(url.destination().into());
    args
}

/// Which remote `subpane` answered, and whether this call put it there.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct RemoteBin {
    /// The path (or, for `subpane` on the remote PATH, the name) that was run.
    pub path: String,
    /// Where it came from: `"given"` (`--bin`), `"path"` (the remote PATH) or `"copied"`
    /// (this binary, copied to a versioned path under the remote home).
    pub source: &'static str,
    /// This call copied it (false: an earlier copy with the same hash was there).
    pub copied: bool,
}

/// Asks `host` for its facts through ssh; ends within the connect timeout plus a margin
/// for the remote side to answer. Without `--bin` and with no `subpane` on the remote PATH,
/// this binary is copied there first ([`ensure_copied`]).
pub fn facts(
    home: &Home,
    host: &Host,
    connect_timeout: Duration,
) -> Result<(HostFacts, RemoteBin), HostsError> {
    host.require_ssh("an ssh check")?;
    let fail = |why: String| HostsError::Check {
        name: host.name.clone(),
        why,
    };
    let dir = control_dir(home);
    make_private_dir(&dir).map_err(|e| fail(format!("cannot make {}: {e}", dir.display())))?;
    let mut bin = match &host.bin {
        Some(b) => RemoteBin {
            path: b.clone(),
            source: "given",
            copied: false,
        },
        None => RemoteBin {
            path: "subpane".into(),
            source: "path",
            copied: false,
        },
    };
    let mut out = ask_facts(home, host, &bin.path, connect_timeout)?;
    if out.status.code() == Some(127) && host.bin.is_none() {
        bin = ensure_copied(home, host, connect_timeout)?;
        super::remember_copy(home, &host.name, &bin.path)?;
        out = ask_facts(home, host, &bin.path, connect_timeout)?;
    }
    let stderr = said(&out);
    match out.status.code() {
        Some(0) => {}
        Some(127) => {
            return Err(fail(format!(
                "`{}` ({}) cannot be run there: {stderr}",
                bin.path,
                if host.bin.is_some() {
                    "--bin"
                } else {
                    "copied"
                }
            )));
        }
        Some(255) => return Err(fail(format!("cannot reach {}: {stderr}", host.url))),
        _ => {
            return Err(fail(format!(
                "the remote subpane failed ({}): {stderr}",
                out.status
            )));
        }
    }
    let facts = serde_json::from_slice::<HostFacts>(&out.stdout).map_err(|e| {
        let said = crate::term::sanitize(&out.stdout, 200);
        fail(format!(
            "`{}` did not answer as subpane does ({e}): {said}",
            bin.path
        ))
    })?;
    Ok((facts, bin))
}

/// What ssh or the remote command said on stderr, made safe to print (at most 600 bytes).
pub(crate) fn said(out: &std::process::Output) -> String {
    crate::term::sanitize(String::from_utf8_lossy(&out.stderr).trim().as_bytes(), 600)
}

/// `BIN [--home DIR] __host-facts` on the host.
fn ask_facts(
    home: &Home,
    host: &Host,
    bin: &str,
    connect_timeout: Duration,
) -> Result<std::process::Output, HostsError> {
    let mut words = remote_subpane(host, bin);
    words.push("__host-facts");
    remote(
        home,
        host,
        &remote_command(&words),
        Stdio::null(),
        connect_timeout,
        connect_timeout + Duration::from_secs(20),
    )
}

/// Runs `command` (one string for the remote shell, already quoted) on `host` with `stdin`,
/// killed with its process group once `limit` has passed.
fn remote(
    home: &Home,
    host: &Host,
    command: &str,
    stdin: Stdio,
    connect_timeout: Duration,
    limit: Duration,
) -> Result<std::process::Output, HostsError> {
    let mut cmd = Command::new("ssh");
    cmd.args(ssh_args(home, host, connect_timeout))
        .arg("--")
        .arg(command)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    crate::command::output(&mut cmd, "ssh", limit).map_err(|e| run_error(host, e))
}

/// Why ssh could not be run for `host`, or did not end in time.
pub(crate) fn run_error(host: &Host, e: crate::command::Error) -> HostsError {
    HostsError::Check {
        name: host.name.clone(),
        why: match e {
            crate::command::Error::Io(io) if io.kind() == std::io::ErrorKind::NotFound => {
                "cannot run ssh: it is not on PATH (install OpenSSH's client, Debian package openssh-client)".into()
            }
            e => format!("ssh {}: {e}", host.url),
        },
    }
}

/// The directory on the host where copies of this binary go: `bin/` under the host's
/// `--remote-home`, else under `.local/state/subpane` of the remote login directory (a
/// relative path: ssh runs the command there).
fn copy_dir(host: &Host) -> String {
    match &host.home {
        Some(h) => format!("{}/bin", h.trim_end_matches('/')),
        None => ".local/state/subpane/bin".into(),
    }
}

/// The SHA-256 of `path`, in hex.
fn sha256_file(path: &std::path::Path) -> std::io::Result<String> {
    use sha2::Digest;
    let mut f = std::fs::File::open(path)?;
    let mut h = sha2::Sha256::new();
    std::io::copy(&mut f, &mut h)?;
    Ok(format!("{:x}", h.finalize()))
}

/// Puts this binary on the host at `DIR/subpane-VERSION-HASH` (see [`copy_dir`]) unless a
/// file with that hash is there already, and checks what arrived by its hash: a partial or
/// altered copy is never run. The copy is written beside its final name and renamed, so a
/// dropped connection leaves no half-written binary under the name that is run.
pub fn ensure_copied(
    home: &Home,
    host: &Host,
    connect_timeout: Duration,
) -> Result<RemoteBin, HostsError> {
    let fail = |why: String| HostsError::Check {
        name: host.name.clone(),
        why,
    };
    let exe = std::env::current_exe()
        .map_err(|e| fail(format!("cannot find this binary to copy: {e}")))?;
    let hash = sha256_file(&exe)
        .map_err(|e| fail(format!("cannot read {} to copy: {e}", exe.display())))?;
    let dir = copy_dir(host);
    let path = format!(
        "{dir}/subpane-{}-{}",
        env!("CARGO_PKG_VERSION"),
        &hash[..16]
    );
    let remote_hash = |what: &str| -> Result<Option<String>, HostsError> {
        let out = remote(
            home,
            host,
            &format!("sha256sum -- {}", shell_word(&path)),
            Stdio::null(),
            connect_timeout,
            connect_timeout + Duration::from_secs(60),
        )?;
        match out.status.code() {
            Some(0) => Ok(String::from_utf8_lossy(&out.stdout)
                .split_whitespace()
                .next()
                .map(str::to_owned)),
            Some(255) => Err(fail(format!(
                "cannot reach {} ({what}): {}",
                host.url,
                said(&out)
            ))),
            _ => Ok(None),
        }
    };
    if remote_hash("to look for an earlier copy")?.as_deref() == Some(hash.as_str()) {
        return Ok(RemoteBin {
            path,
            source: "copied",
            copied: false,
        });
    }
    let tmp = format!("{path}.part-{}", std::process::id());
    let script = format!(
        "umask 077 && mkdir -p -- {d} && cat > {t} && chmod 700 -- {t} && mv -f -- {t} {p}",
        d = shell_word(&dir),
        t = shell_word(&tmp),
        p = shell_word(&path),
    );
    let file = std::fs::File::open(&exe)
        .map_err(|e| fail(format!("cannot read {} to copy: {e}", exe.display())))?;
    let out = remote(
        home,
        host,
        &script,
        Stdio::from(file),
        connect_timeout,
        connect_timeout + Duration::from_secs(600),
    )?;
    if !out.status.success() {
        return Err(fail(format!(
            "cannot copy this binary to {path} there ({}): {}; pass --bin with the path of a subpane {} there to `hosts add`",
            out.status,
            said(&out),
            env!("CARGO_PKG_VERSION")
        )));
    }
    match remote_hash("to check the copy")? {
        Some(h) if h == hash => Ok(RemoteBin {
            path,
            source: "copied",
            copied: true,
        }),
        got => Err(fail(format!(
            "the copy at {path} there does not have this binary's hash (sha256 {hash}, found {}): it is not run",
            got.unwrap_or_else(|| "none: sha256sum failed there".into())
        ))),
    }
}

/// Makes `dir` (and its parents) with mode 0700: the control socket gives a shell on the
/// host to whoever can connect to it.
pub(crate) fn make_private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hosts::SshUrl;

    fn host(url: &str, home: Option<&str>, bin: Option<&str>) -> Host {
        Host {
            name: "h".into(),
            url: crate::hosts::HostUrl::Ssh(SshUrl::parse(url).unwrap()),
            slurm: None,
            copied: None,
            home: home.map(str::to_owned),
            bin: bin.map(str::to_owned),
        }
    }

    #[test]
    fn the_remote_command_is_quoted_once() {
        let h = host("ssh://h", Some("/srv/it's $(x)"), Some("/opt/sp bin"));
        let mut words = remote_subpane(&h, h.bin.as_deref().unwrap());
        words.push("__host-facts");
        assert_eq!(
            remote_command(&words),
            r"'/opt/sp bin' '--home' '/srv/it'\''s $(x)' '__host-facts'"
        );
        assert_eq!(
            remote_subpane(&host("ssh://h", None, None), "subpane"),
            ["subpane"]
        );
    }

    #[test]
    fn ssh_gets_batch_mode_the_control_socket_and_the_port() {
        let home = Home::at("/h".into());
        let args = ssh_args(
            &home,
            &host("ssh://me@box:2222", None, None),
            CONNECT_TIMEOUT,
        );
        let args: Vec<_> = args.iter().map(|a| a.to_str().unwrap()).collect();
        for want in [
            "BatchMode=yes",
            "ConnectTimeout=10",
            "ControlMaster=auto",
            "ControlPath=/h/ssh/%C",
            "ServerAliveInterval=15",
        ] {
            assert!(args.contains(&want), "{want} in {args:?}");
        }
        assert_eq!(&args[args.len() - 3..], ["-p", "2222", "me@box"]);
    }
}
