//! A Slurm partition as a host: reached through Slurm's own commands (`sinfo`, `srun`), found
//! by name on `PATH` (so the user's `SLURM_CONF` and cluster set-up apply).
//!
//! ```text
//!  hosts check NAME ─► sinfo --noheader --partition P --format %P|%a|%l|%D|%t|%N
//!                        └─ no line: no such partition ─► error
//!                   ─► srun --partition P -N1 -n1 --time 1 --immediate 30 [--account A]
//!                         [--qos Q] BIN --version     (the worker's binary, run on a node)
//!                        └─ "subpane VERSION" ─► compared with this one
//! ```
//!
//! Common pitfalls:
//! * Every value goes to Slurm's commands as one argument of its own (`--account=A`), never
//!   through a shell; a partition name is checked like a host name (url.rs).
//! * `srun` waits for resources: `--immediate` bounds that, and the whole call has a time
//!   limit besides, so a busy cluster is a clear error, not a hang.

pub mod queue;
pub mod run;
mod submit;
mod view;

use std::process::{Command, Stdio};
use std::time::Duration;

use serde::Serialize;

use super::{Host, HostUrl, HostsError};

/// How long `srun` may wait for a node before `hosts check` gives up.
const IMMEDIATE_SECS: u32 = 30;

/// A partition as `sinfo` shows it: one entry per line of its (node state) groups.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PartitionFacts {
    pub partition: String,
    /// `up`, `down`, `drain` or `inact`.
    pub avail: String,
    /// Its time limit, as Slurm writes it (`infinite`, `1-00:00:00`).
    pub time_limit: String,
    /// Nodes in all.
    pub nodes: u32,
    /// How many nodes are in each state (`idle`, `mix`, `alloc`, `down`, …).
    pub states: Vec<(String, u32)>,
    /// The nodes, in Slurm's compressed form (`node[01-04]`).
    pub nodelist: Vec<String>,
}

/// What `hosts check` found on a Slurm host.
#[derive(Clone, Debug, Serialize)]
pub struct SlurmCheck {
    pub partition: PartitionFacts,
    /// The binary a job's node runs.
    pub bin: String,
    /// What `BIN --version` printed on a node.
    pub node_version: String,
}

/// `sinfo` and `srun` for `host` (a Slurm host).
pub fn check(host: &Host) -> Result<SlurmCheck, HostsError> {
    let fail = |why: String| HostsError::Check {
        name: host.name.clone(),
        why,
    };
    let HostUrl::Slurm(url) = &host.url else {
        return Err(fail("not a Slurm host".into()));
    };
    let partition = sinfo(host, &url.partition)?;
    let bin = run::bin(host)?;
    let mut srun = Command::new("srun");
    srun.arg(format!("--partition={}", url.partition))
        .args([
            "--nodes=1",
            "--ntasks=1",
            "--time=1",
            "--job-name=subpane-check",
        ])
        .arg(format!("--immediate={IMMEDIATE_SECS}"));
    if let Some(o) = &host.slurm {
        if let Some(a) = &o.account {
            srun.arg(format!("--account={a}"));
        }
        if let Some(q) = &o.qos {
            srun.arg(format!("--qos={q}"));
        }
    }
    srun.arg("--").arg(&bin).arg("--version");
    let out = run(
        host,
        &mut srun,
        Duration::from_secs(IMMEDIATE_SECS as u64 + 60),
    )?;
    let said = said(&out);
    if !out.status.success() {
        return Err(fail(format!(
            "a node of partition {} cannot run {bin} ({}): {said}",
            url.partition, out.status
        )));
    }
    let node_version = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    Ok(SlurmCheck {
        partition,
        bin,
        node_version: crate::term::sanitize(node_version.as_bytes(), 200),
    })
}

/// The partition's facts from `sinfo`; an unknown partition is an error.
fn sinfo(host: &Host, partition: &str) -> Result<PartitionFacts, HostsError> {
    let mut cmd = Command::new("sinfo");
    cmd.args(["--noheader", "--format=%P|%a|%l|%D|%t|%N"])
        .arg(format!("--partition={partition}"));
    let out = run(host, &mut cmd, Duration::from_secs(30))?;
    if !out.status.success() {
        return Err(HostsError::Check {
            name: host.name.clone(),
            why: format!("sinfo failed ({}): {}", out.status, said(&out)),
        });
    }
    parse_sinfo(&String::from_utf8_lossy(&out.stdout), partition).ok_or_else(|| HostsError::Check {
        name: host.name.clone(),
        why: format!("Slurm has no partition `{partition}` (`sinfo` lists the partitions there)"),
    })
}

/// `sinfo --format=%P|%a|%l|%D|%t|%N` lines of `partition` (the default one is starred).
fn parse_sinfo(text: &str, partition: &str) -> Option<PartitionFacts> {
    let mut facts: Option<PartitionFacts> = None;
    for line in text.lines() {
        let f: Vec<&str> = line.trim().split('|').collect();
        let [p, avail, limit, nodes, state, list] = f.as_slice() else {
            continue;
        };
        if p.trim_end_matches('*') != partition {
            continue;
        }
        let n: u32 = nodes.parse().unwrap_or(0);
        let e = facts.get_or_insert_with(|| PartitionFacts {
            partition: partition.to_owned(),
            avail: (*avail).to_owned(),
            time_limit: (*limit).to_owned(),
            ..PartitionFacts::default()
        });
        e.nodes += n;
        e.states.push(((*state).to_owned(), n));
        e.nodelist.push((*list).to_owned());
    }
    facts
}

/// Runs one of Slurm's commands for `host`, killed once `limit` has passed.
pub(crate) fn run(
    host: &Host,
    cmd: &mut Command,
    limit: Duration,
) -> Result<std::process::Output, HostsError> {
    let name = cmd.get_program().to_string_lossy().into_owned();
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    crate::command::output(cmd, &name, limit).map_err(|e| HostsError::Check {
        name: host.name.clone(),
        why: match e {
            crate::command::Error::Io(io) if io.kind() == std::io::ErrorKind::NotFound => format!(
                "cannot run {name}: it is not on PATH (install Slurm's client commands, Debian package slurm-client)"
            ),
            e => format!("{name}: {e}"),
        },
    })
}

pub(crate) fn said(out: &std::process::Output) -> String {
    crate::term::sanitize(String::from_utf8_lossy(&out.stderr).trim().as_bytes(), 600)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sinfo_lines_make_the_partition() {
        let text = "debug*|up|infinite|2|idle|n[1-2]\ndebug*|up|infinite|1|down*|n3\ngpu|up|1-00:00:00|4|mix|g[1-4]\n";
        let f = parse_sinfo(text, "debug").unwrap();
        assert_eq!(f.avail, "up");
        assert_eq!(f.time_limit, "infinite");
        assert_eq!(f.nodes, 3);
        assert_eq!(f.states, [("idle".into(), 2), ("down*".into(), 1)]);
        assert_eq!(f.nodelist, ["n[1-2]", "n3"]);
        assert_eq!(parse_sinfo(text, "gpu").unwrap().nodes, 4);
        assert!(parse_sinfo(text, "nope").is_none());
    }
}
