//! A fan-out's lines for a host, checked there before anything starts anywhere: the host
//! plans them as it would start them (its paths, its run ids, its sandbox), one round trip
//! for all of them.

use super::*;

/// Plans `requests` (each with its line of the fan-out file) on host `name` for `group`,
/// starting nothing: the lines it refuses, each as `line N (host NAME): …`. An error: the
/// host could not be asked. Copies this binary there first where it has no subpane of this
/// version (as a start would).
pub fn check(
    home: &Home,
    name: &str,
    group: &str,
    requests: &[(usize, RunRequest)],
) -> Result<Vec<String>, HostsError> {
    let host = crate::hosts::get(home, name)?;
    let body = serde_json::to_vec(&RemoteCheck {
        version: env!("CARGO_PKG_VERSION").to_owned(),
        group: group.to_owned(),
        requests: requests.to_vec(),
    })
    .expect("a check serializes");
    let slurm = matches!(host.url, crate::hosts::HostUrl::Slurm(_));
    let bin = match slurm {
        // The shared home is planned in from here, as the nodes will see it.
        true => crate::hosts::slurm::run::bin(&host)?,
        false => start::remembered_bin(&host),
    };
    let mut out = ask_check(home, &host, &bin, &body)?;
    if !slurm && out.status.code() == Some(127) && host.bin.is_none() {
        let copied = ssh::ensure_copied(home, &host, CONNECT_TIMEOUT)?.path;
        crate::hosts::remember_copy(home, &host.name, &copied)?;
        out = ask_check(home, &host, &copied, &body)?;
    }
    let fail = |why: String| HostsError::Check {
        name: name.to_owned(),
        why,
    };
    match out.status.code() {
        Some(0) => {}
        Some(255) => {
            return Err(fail(format!(
                "cannot reach {}: {}",
                host.url,
                ssh::said(&out)
            )));
        }
        Some(code) => return Err(refusal(name, code, &out)),
        None => return Err(fail("ssh was killed before the host answered".into())),
    }
    let answer: CheckAnswer = serde_json::from_slice(&out.stdout).map_err(|e| {
        fail(format!(
            "its answer to the check cannot be read ({e}): {}",
            crate::term::sanitize(&out.stdout, 200)
        ))
    })?;
    let tag = format!(" (host {name}):");
    Ok(answer
        .errors
        .iter()
        .map(|e| {
            let e = crate::term::sanitize(e.as_bytes(), 600);
            match e.split_once(':') {
                Some((unit, rest)) if unit.starts_with("line ") => format!("{unit}{tag}{rest}"),
                _ => format!("host {name}: {e}"),
            }
        })
        .collect())
}

fn ask_check(
    home: &Home,
    host: &Host,
    bin: &str,
    body: &[u8],
) -> Result<std::process::Output, HostsError> {
    let mut cmd = match &host.url {
        crate::hosts::HostUrl::Slurm(_) => {
            let mut c = Command::new(bin);
            c.arg("--home")
                .arg(host.home.as_deref().unwrap_or_default())
                .arg("__check-requests");
            c
        }
        crate::hosts::HostUrl::Ssh(_) => command_on(home, host, bin, &["__check-requests"], false),
    };
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .map_err(|e| ssh::run_error(host, crate::command::Error::Io(e)))?;
    let mut stdin = child.stdin.take().expect("piped");
    let mut body = body.to_vec();
    body.push(b'\n');
    // Written beside the reading: the requests may outgrow a pipe's buffer.
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&body);
    });
    let out = child
        .wait_with_output()
        .map_err(|e| ssh::run_error(host, crate::command::Error::Io(e)))?;
    let _ = feeder.join();
    Ok(out)
}
