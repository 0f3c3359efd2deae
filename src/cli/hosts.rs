//! `subpane hosts`: record, list, forget and check the hosts attempts will run on.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde::Serialize;

use super::CliError;
use super::common::{print, print_json};
use crate::hosts::{self, Host, HostFacts};
use crate::spec::parse_duration;
use crate::store::Home;

#[derive(Debug, Args)]
pub struct HostsArgs {
    #[command(subcommand)]
    pub command: HostsCommand,
}

#[derive(Debug, Subcommand)]
pub enum HostsCommand {
    /// Record a host reached over SSH (OpenSSH's own client: your ~/.ssh/config, keys and
    /// agent apply; never a prompt)
    Add(AddArgs),
    /// List the recorded hosts
    Ls(LsArgs),
    /// Forget a host (nothing on the host is touched)
    Rm(RmArgs),
    /// Connect to a host and show its subpane version, home, kernel, tmux and Landlock
    Check(CheckArgs),
}

#[derive(Debug, Args)]
pub struct AddArgs {
    /// The host's name here: letters, digits, `.`, `_` and `-`, starting with a letter or digit
    pub name: String,
    /// ssh://[user@]host[:port] (host may be an alias of your ~/.ssh/config), or
    /// slurm://PARTITION (jobs through Slurm's own sbatch and srun; needs --remote-home)
    pub url: String,
    /// The subpane home on the host (an absolute path) [default: the host's own default].
    /// (`--home` is this machine's home, wherever it is written, so it is refused after `add`)
    #[arg(long, value_name = "DIR")]
    pub remote_home: Option<PathBuf>,
    /// The subpane binary on the host (an absolute path) [default: `subpane` on the remote
    /// PATH, else this binary, copied once by `hosts check` to
    /// REMOTE_HOME/bin/subpane-VERSION-HASH and checked by its SHA-256]
    #[arg(long, value_name = "PATH")]
    pub bin: Option<PathBuf>,
    /// A Slurm host's jobs are charged to this account (sbatch --account)
    #[arg(long, value_name = "A")]
    pub account: Option<String>,
    /// A Slurm host's jobs run with this quality of service (sbatch --qos)
    #[arg(long, value_name = "Q")]
    pub qos: Option<String>,
    /// A Slurm host's job time limit for runs without --timeout, as Slurm writes it (30,
    /// 2:00:00, 1-00:00:00)
    #[arg(long, value_name = "T")]
    pub time_limit: Option<String>,
    /// More sbatch arguments for a Slurm host's jobs, one word each (repeatable), e.g.
    /// --sbatch-arg=--gres=gpu:1
    #[arg(long = "sbatch-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub sbatch_args: Vec<String>,
}

#[derive(Debug, Args)]
pub struct LsArgs {
    /// Print a JSON array of hosts: name, url, home (null: the host's default), bin (null:
    /// `subpane` on its PATH)
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RmArgs {
    /// The host's name
    pub name: String,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The host's name
    pub name: String,
    /// How long ssh may take to connect (e.g. 5s)
    #[arg(long, value_name = "DUR", default_value = "10s")]
    pub connect_timeout: String,
    /// Print a JSON object: host (as recorded), local_version, facts (version, home,
    /// kernel, tmux, landlock_abi, landlock_problem) and bin (path, source, copied)
    #[arg(long)]
    pub json: bool,
}

impl From<hosts::HostsError> for CliError {
    fn from(e: hosts::HostsError) -> Self {
        CliError::Hosts(e)
    }
}

pub fn hosts(home: &Home, a: HostsArgs) -> Result<i32, CliError> {
    match a.command {
        HostsCommand::Add(a) => {
            refuse_home_after_add(std::env::args_os())?;
            let slurm = (a.account.is_some()
                || a.qos.is_some()
                || a.time_limit.is_some()
                || !a.sbatch_args.is_empty())
            .then(|| hosts::SlurmOptions {
                account: a.account.clone(),
                qos: a.qos.clone(),
                time_limit: a.time_limit.clone(),
                sbatch_args: a.sbatch_args.clone(),
            });
            let h = hosts::add(
                home,
                &a.name,
                &a.url,
                a.remote_home.as_deref(),
                a.bin.as_deref(),
                slurm,
            )?;
            print(&format!("added host {} ({})\n", h.name, h.url));
            Ok(0)
        }
        HostsCommand::Ls(a) => {
            let list = hosts::list(home)?;
            if a.json {
                print_json(&list);
            } else {
                print(&ls_text(&list));
            }
            Ok(0)
        }
        HostsCommand::Rm(a) => {
            let h = hosts::remove(home, &a.name)?;
            print(&format!("removed host {}\n", h.name));
            Ok(0)
        }
        HostsCommand::Check(a) => check(home, a),
    }
}

/// `--home` is global: written after `hosts add` it still names this machine's home, and
/// whoever wrote it there almost surely meant the host's. Refused rather than guessed.
fn refuse_home_after_add(
    args: impl IntoIterator<Item = std::ffi::OsString>,
) -> Result<(), CliError> {
    let mut after_add = false;
    for a in args {
        let a = a.to_string_lossy();
        if after_add && (a == "--home" || a.starts_with("--home=")) {
            return Err(CliError::Flag(
                "--home after `hosts add` would be this machine's home; the host's home is --remote-home DIR (this machine's goes before the verb: `subpane --home DIR hosts add …`)".into(),
            ));
        }
        if a == "--" {
            break;
        }
        after_add |= a == "add";
    }
    Ok(())
}

/// What `hosts check --json` prints.
#[derive(Serialize)]
struct CheckReport<'a> {
    host: &'a Host,
    local_version: &'static str,
    facts: &'a HostFacts,
    /// The remote subpane that answered: path, source (given, path, copied), copied.
    bin: &'a hosts::ssh::RemoteBin,
}

fn check(home: &Home, a: CheckArgs) -> Result<i32, CliError> {
    let timeout = parse_duration("--connect-timeout", &a.connect_timeout)?;
    let host = hosts::get(home, &a.name)?;
    if let hosts::HostUrl::Slurm(_) = host.url {
        return check_slurm(&host, a.json);
    }
    let (facts, bin) = hosts::ssh::facts(home, &host, timeout)?;
    let local_version = env!("CARGO_PKG_VERSION");
    if a.json {
        print_json(&CheckReport {
            host: &host,
            local_version,
            facts: &facts,
            bin: &bin,
        });
    } else {
        print(&check_text(&host, &facts, &bin));
    }
    if facts.version != local_version {
        return Err(hosts::HostsError::Check {
            name: host.name,
            why: format!(
                "its subpane is version {}, this one is {local_version}; runs there would be refused",
                facts.version
            ),
        }
        .into());
    }
    Ok(0)
}

/// What `hosts check --json` prints for a Slurm host.
#[derive(Serialize)]
struct SlurmReport<'a> {
    host: &'a Host,
    local_version: &'static str,
    slurm: &'a hosts::slurm::SlurmCheck,
}

/// `hosts check` of a Slurm host: its partition, and a node running the worker's binary.
fn check_slurm(host: &Host, json: bool) -> Result<i32, CliError> {
    let c = hosts::slurm::check(host)?;
    let local_version = env!("CARGO_PKG_VERSION");
    if json {
        print_json(&SlurmReport {
            host,
            local_version,
            slurm: &c,
        });
    } else {
        let p = &c.partition;
        let states: Vec<String> = p.states.iter().map(|(s, n)| format!("{n} {s}")).collect();
        print(&format!(
            "host {} ({}) answers
  partition {} ({}), time limit {}
  nodes     {} ({}): {}
  on a node {} at {}
",
            host.name,
            host.url,
            p.partition,
            p.avail,
            p.time_limit,
            p.nodes,
            states.join(", "),
            p.nodelist.join(","),
            c.node_version,
            c.bin
        ));
    }
    let want = format!("subpane {local_version}");
    if c.node_version != want {
        return Err(hosts::HostsError::Check {
            name: host.name.clone(),
            why: format!(
                "a node runs `{}` as `{}`, not {want}: give `hosts add` the --bin of this version on storage the nodes see",
                c.bin, c.node_version
            ),
        }
        .into());
    }
    Ok(0)
}

fn ls_text(list: &[Host]) -> String {
    if list.is_empty() {
        return "no hosts; `subpane hosts add NAME ssh://[user@]host[:port]` records one\n".into();
    }
    let mut s = String::new();
    for h in list {
        s.push_str(&format!("{}\t{}", h.name, h.url));
        if let Some(home) = &h.home {
            s.push_str(&format!("\thome={home}"));
        }
        if let Some(bin) = &h.bin {
            s.push_str(&format!("\tbin={bin}"));
        }
        s.push('\n');
    }
    s
}

fn check_text(host: &Host, f: &HostFacts, bin: &hosts::ssh::RemoteBin) -> String {
    let clean = |s: &str| crate::term::sanitize(s.as_bytes(), 200);
    let sandbox = match (f.landlock_abi, &f.landlock_problem) {
        (Some(abi), _) => format!("Landlock ABI {abi}"),
        (None, Some(why)) => format!("no Landlock: {}", clean(why)),
        (None, None) => "no Landlock".into(),
    };
    let from = match (bin.source, bin.copied) {
        ("copied", true) => " (this binary, copied there now)",
        ("copied", false) => " (this binary, copied there earlier)",
        ("given", _) => " (--bin)",
        _ => " (on its PATH)",
    };
    format!(
        "host {} ({}) answers\n  subpane {} at {}{from}\n  home    {}\n  kernel  {}\n  tmux    {}\n  sandbox {}\n",
        host.name,
        host.url,
        clean(&f.version),
        clean(&bin.path),
        clean(&f.home),
        clean(&f.kernel),
        f.tmux
            .as_deref()
            .map(clean)
            .unwrap_or_else(|| "not found".into()),
        sandbox
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn home_after_add_is_refused_before_it_is_not() {
        let args = |v: &[&str]| v.iter().map(std::ffi::OsString::from).collect::<Vec<_>>();
        assert!(
            refuse_home_after_add(args(&[
                "sp", "--home", "/l", "hosts", "add", "a", "ssh://h"
            ]))
            .is_ok()
        );
        for bad in [
            &["sp", "hosts", "add", "a", "ssh://h", "--home", "/r"][..],
            &["sp", "hosts", "add", "--home=/r", "a", "ssh://h"],
        ] {
            let e = refuse_home_after_add(args(bad)).unwrap_err();
            assert!(e.to_string().contains("--remote-home"), "{e}");
            assert_eq!(e.exit_code(), 2);
        }
    }
}
