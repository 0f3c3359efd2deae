//! Reaching a host: OpenSSH's own client, called by name through `PATH`, over one
//! multiplexed control connection per host whose socket lives under the home.
//!
//! ```text
//!  ssh -o BatchMode=yes -o ConnectTimeout=N -o ControlMaster=auto -o ControlPersist=60
//!      -o ControlPath=HOME/ssh/%C [-p PORT] [user@]host -- 'BIN' ['--home' 'DIR'] '__host-facts'
//!   ├─ exit 0, one JSON object ─► HostFacts
//!   ├─ exit 127 ─► BIN is not there (not on the remote PATH)
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

/// The remote `subpane` and its home, as the first words of every remote command.
pub fn remote_subpane(host: &Host) -> Vec<&str> {
    let mut words = vec![host.bin.as_deref().unwrap_or("subpane")];
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
        "-o".into(),
        path,
    ];
    if let Some(p) = host.url.port {
        args.extend(["-p".into(), p.to_string().into()]);
    }
    args.push(host.url.destination().into());
    args
}

/// Asks `host` for its facts through ssh; ends within the connect timeout plus a margin
/// for the remote side to answer.
pub fn facts(home: &Home, host: &Host, connect_timeout: Duration) -> Result<HostFacts, HostsError> {
    let fail = |why: String| HostsError::Check {
        name: host.name.clone(),
        why,
    };
    let dir = control_dir(home);
    make_private_dir(&dir).map_err(|e| fail(format!("cannot make {}: {e}", dir.display())))?;
    let mut words = remote_subpane(host);
    words.push("__host-facts");
    let mut cmd = Command::new("ssh");
    cmd.args(ssh_args(home, host, connect_timeout))
        .arg("--")
        .arg(remote_command(&words))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let limit = connect_timeout + Duration::from_secs(20);
    let out = crate::command::output(&mut cmd, "ssh", limit).map_err(|e| match e {
        crate::command::Error::Io(io) if io.kind() == std::io::ErrorKind::NotFound => fail(
            "cannot run ssh: it is not on PATH (install OpenSSH's client, Debian package openssh-client)"
                .into(),
        ),
        e => fail(format!("ssh {}: {e}", host.url)),
    })?;
    let stderr = crate::term::sanitize(String::from_utf8_lossy(&out.stderr).trim().as_bytes(), 600);
    match out.status.code() {
        Some(0) => {}
        Some(127) => {
            let bin = words[0];
            let what = if host.bin.is_some() {
                format!("`{bin}` (--bin) cannot be run there")
            } else {
                "subpane is not on the remote PATH; pass --bin with its path to `hosts add` (copying this binary to the host is not done yet)".to_owned()
            };
            return Err(fail(format!("{what}: {stderr}")));
        }
        Some(255) => return Err(fail(format!("cannot reach {}: {stderr}", host.url))),
        _ => {
            return Err(fail(format!(
                "the remote subpane failed ({}): {stderr}",
                out.status
            )));
        }
    }
    serde_json::from_slice::<HostFacts>(&out.stdout).map_err(|e| {
        let said = crate::term::sanitize(&out.stdout, 200);
        fail(format!(
            "`{}` did not answer as subpane does ({e}): {said}",
            words[0]
        ))
    })
}

/// Makes `dir` (and its parents) with mode 0700: the control socket gives a shell on the
/// host to whoever can connect to it.
fn make_private_dir(dir: &std::path::Path) -> std::io::Result<()> {
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
            url: SshUrl::parse(url).unwrap(),
            home: home.map(str::to_owned),
            bin: bin.map(str::to_owned),
        }
    }

    #[test]
    fn the_remote_command_is_quoted_once() {
        let h = host("ssh://h", Some("/srv/it's $(x)"), Some("/opt/sp bin"));
        let mut words = remote_subpane(&h);
        words.push("__host-facts");
        assert_eq!(
            remote_command(&words),
            r"'/opt/sp bin' '--home' '/srv/it'\''s $(x)' '__host-facts'"
        );
        assert_eq!(remote_subpane(&host("ssh://h", None, None)), ["subpane"]);
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
        ] {
            assert!(args.contains(&want), "{want} in {args:?}");
        }
        assert_eq!(&args[args.len() - 3..], ["-p", "2222", "me@box"]);
    }
}
