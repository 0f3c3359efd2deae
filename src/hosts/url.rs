//! A host's URL, parsed strictly: `ssh://[user@]host[:port]` or `slurm://PARTITION`. What is
//! not one of these parts is refused, never passed on to ssh or Slurm's commands, where a
//! leading `-` would be read as an option.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Where a host is reached: a user (else ssh's choice), a host name, address or
/// `~/.ssh/config` alias, and a port (else ssh's choice).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SshUrl {
    pub user: Option<String>,
    pub host: String,
    pub port: Option<u16>,
}

/// Why a URL was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum UrlError {
    #[error(
        "host URL `{0}` does not start with ssh:// or slurm://; give one like ssh://user@host:2222 or slurm://PARTITION"
    )]
    Scheme(String),
    #[error(
        "host URL `{url}` has a bad partition `{value}`: give slurm://PARTITION, the partition's name (letters, digits, `.`, `_` and `-`)"
    )]
    BadPartition { url: String, value: String },
    #[error("host URL `{0}` has no host; give one like ssh://user@host:2222")]
    NoHost(String),
    #[error(
        "host URL `{url}` has a bad {part} `{value}`: use letters, digits, `.`, `_` and `-`, starting with a letter, digit or `_`"
    )]
    BadPart {
        url: String,
        part: &'static str,
        value: String,
    },
    #[error("host URL `{url}` has a bad port `{port}`: give a number from 1 to 65535")]
    BadPort { url: String, port: String },
    #[error(
        "host URL `{0}` has a path, query or fragment; only ssh://[user@]host[:port] is understood"
    )]
    Extra(String),
}

/// A user or host name: never empty, never an option to ssh (no leading `-`), nothing a
/// shell or ssh's `%` tokens would read.
fn name_ok(s: &str) -> bool {
    let mut b = s.bytes();
    b.next()
        .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
}

impl SshUrl {
    pub fn parse(url: &str) -> Result<Self, UrlError> {
        let rest = url
            .strip_prefix("ssh://")
            .ok_or_else(|| UrlError::Scheme(url.to_owned()))?;
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains(['/', '?', '#']) {
            return Err(UrlError::Extra(url.to_owned()));
        }
        let (user, hostport) = match rest.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, rest),
        };
        let (host, port) = match hostport.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        };
        if host.is_empty() {
            return Err(UrlError::NoHost(url.to_owned()));
        }
        let bad = |part, value: &str| UrlError::BadPart {
            url: url.to_owned(),
            part,
            value: value.to_owned(),
        };
        if let Some(u) = user
            && !name_ok(u)
        {
            return Err(bad("user", u));
        }
        if !name_ok(host) {
            return Err(bad("host", host));
        }
        let port = match port {
            None => None,
            Some(p) => {
                let ok = !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit());
                match p.parse::<u16>() {
                    Ok(n) if ok && n > 0 => Some(n),
                    _ => {
                        return Err(UrlError::BadPort {
                            url: url.to_owned(),
                            port: p.to_owned(),
                        });
                    }
                }
            }
        };
        Ok(Self {
            user: user.map(str::to_owned),
            host: host.to_owned(),
            port,
        })
    }

    /// ssh's destination argument: `[user@]host`.
    pub fn destination(&self) -> String {
        match &self.user {
            Some(u) => format!("{u}@{}", self.host),
            None => self.host.clone(),
        }
    }
}

impl fmt::Display for SshUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ssh://{}", self.destination())?;
        if let Some(p) = self.port {
            write!(f, ":{p}")?;
        }
        Ok(())
    }
}

impl Serialize for SshUrl {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for SshUrl {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// A Slurm partition: attempts on it are batch jobs submitted there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlurmUrl {
    pub partition: String,
}

impl SlurmUrl {
    pub fn parse(url: &str) -> Result<Self, UrlError> {
        let rest = url
            .strip_prefix("slurm://")
            .ok_or_else(|| UrlError::Scheme(url.to_owned()))?;
        let partition = rest.strip_suffix('/').unwrap_or(rest);
        if !name_ok(partition) {
            return Err(UrlError::BadPartition {
                url: url.to_owned(),
                value: partition.to_owned(),
            });
        }
        Ok(Self {
            partition: partition.to_owned(),
        })
    }
}

/// Where a host's attempts run: over ssh, or as jobs of a Slurm partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostUrl {
    Ssh(SshUrl),
    Slurm(SlurmUrl),
}

impl HostUrl {
    pub fn parse(url: &str) -> Result<Self, UrlError> {
        if url.starts_with("slurm://") {
            return SlurmUrl::parse(url).map(HostUrl::Slurm);
        }
        SshUrl::parse(url).map(HostUrl::Ssh)
    }

    /// `ssh` or `slurm` (the envelope's `host.kind`).
    pub fn kind(&self) -> &'static str {
        match self {
            HostUrl::Ssh(_) => "ssh",
            HostUrl::Slurm(_) => "slurm",
        }
    }
}

impl fmt::Display for HostUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostUrl::Ssh(u) => u.fmt(f),
            HostUrl::Slurm(u) => write!(f, "slurm://{}", u.partition),
        }
    }
}

impl Serialize for HostUrl {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for HostUrl {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slurm_url_names_a_partition() {
        let u = HostUrl::parse("slurm://gpu-a100").unwrap();
        assert_eq!(
            u,
            HostUrl::Slurm(SlurmUrl {
                partition: "gpu-a100".into()
            })
        );
        assert_eq!(u.to_string(), "slurm://gpu-a100");
        assert_eq!(u.kind(), "slurm");
        for bad in [
            "slurm://",
            "slurm://-p",
            "slurm://a/b",
            "slurm://a b",
            "slurm://a:1",
        ] {
            let e = HostUrl::parse(bad).unwrap_err();
            assert!(matches!(e, UrlError::BadPartition { .. }), "{bad}: {e}");
        }
        assert_eq!(HostUrl::parse("ssh://h").unwrap().kind(), "ssh");
    }

    #[test]
    fn the_three_parts_are_read() {
        let u = SshUrl::parse("ssh://me@build-1.example.org:2222").unwrap();
        assert_eq!(u.user.as_deref(), Some("me"));
        assert_eq!(u.host, "build-1.example.org");
        assert_eq!(u.port, Some(2222));
        assert_eq!(u.to_string(), "ssh://me@build-1.example.org:2222");
        let alias = SshUrl::parse("ssh://gpu/").unwrap();
        assert_eq!((alias.user.as_deref(), alias.port), (None, None));
        assert_eq!(alias.destination(), "gpu");
    }

    #[test]
    fn anything_else_is_refused() {
        for bad in [
            "gpu",
            "http://gpu",
            "ssh://",
            "ssh://me@",
            "ssh://-oProxyCommand=x",
            "ssh://me@-x",
            "ssh://-me@h",
            "ssh://h:0",
            "ssh://h:65536",
            "ssh://h:+22",
            "ssh://h:",
            "ssh://h/path",
            "ssh://h?x",
            "ssh://a@b@c",
            "ssh://h%d",
            "ssh://h x",
            "ssh://[::1]:22",
        ] {
            assert!(SshUrl::parse(bad).is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn errors_name_the_part() {
        let e = SshUrl::parse("ssh://h:99999").unwrap_err().to_string();
        assert!(e.contains("port `99999`"), "{e}");
        let e = SshUrl::parse("ssh://-x").unwrap_err().to_string();
        assert!(e.contains("host `-x`"), "{e}");
    }
}
