//! The sandbox policy of an attempt, as recorded in `spec.json`, and the network patterns.
//!
//! Pure: the plan resolves every path before the policy is written, so the process that
//! enters the sandbox applies it without deciding anything.

use std::net::IpAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// What the program may reach over the network.
///
/// ```json
/// "none"
/// ```
/// ```json
/// {"allow": ["api.anthropic.com", "*.openai.com", "127.0.0.1"]}
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Network {
    /// A private network namespace with only its own loopback.
    #[default]
    None,
    /// The host's network, unchanged.
    Full,
    /// Only these hosts, through subpane's egress proxy.
    Allow(Vec<HostPattern>),
}

impl Network {
    /// The policy of a request that names none.
    pub const NONE: &'static str = "none";

    /// Parses `none`, `full` or `allow:PATTERN,…` (the value of `--network`).
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "none" => Ok(Network::None),
            "full" => Ok(Network::Full),
            _ => {
                let Some(list) = s.strip_prefix("allow:") else {
                    return Err(format!(
                        "`{s}` is not a policy: use none, full or allow:HOST,…"
                    ));
                };
                let pats = list
                    .split(',')
                    .map(HostPattern::parse)
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Network::Allow(pats))
            }
        }
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            Network::None => "none",
            Network::Full => "full",
            Network::Allow(_) => "allow",
        }
    }
}

/// One allowed host: a name, `*.name` (any name below it, not the name itself), or an IP
/// literal.
///
/// ```json
/// "*.example.com"
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum HostPattern {
    Name(String),
    /// `*.suffix`: names ending in `.suffix`.
    Below(String),
    Ip(IpAddr),
}

impl From<HostPattern> for String {
    fn from(p: HostPattern) -> Self {
        match p {
            HostPattern::Name(n) => n,
            HostPattern::Below(s) => format!("*.{s}"),
            HostPattern::Ip(ip) => ip.to_string(),
        }
    }
}

impl TryFrom<String> for HostPattern {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        HostPattern::parse(&s)
    }
}

/// A host name as DNS spells it: labels of letters, digits and `-` (not at either end),
/// 1-63 bytes each, 253 in all. Case is folded by the caller.
pub fn valid_host_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
}

impl HostPattern {
    /// Parses one pattern. URLs, ports, `*`, wildcards over a public suffix (`*.com`,
    /// `*.co.uk`), empty patterns and anything with spaces or odd bytes are refused with the
    /// reason.
    pub fn parse(raw: &str) -> Result<Self, String> {
        let why = |w: &str| Err(format!("pattern `{raw}` {w}"));
        if raw.is_empty() {
            return why("is empty: name a host, like api.example.com");
        }
        if raw.contains("://") || raw.contains('/') {
            return why("is a URL: give the host name alone, like api.example.com");
        }
        if raw
            .bytes()
            .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
        {
            return why("holds a space or a control character");
        }
        let bare = raw.strip_prefix('[').and_then(|r| r.strip_suffix(']'));
        if let Ok(ip) = bare.unwrap_or(raw).parse::<IpAddr>() {
            if unspecified(ip) {
                return why(
                    "is an unspecified address (0.0.0.0/8 or ::), which the kernel reads as \"this host\": list the address you mean, like 127.0.0.1 or ::1",
                );
            }
            return Ok(HostPattern::Ip(ip));
        }
        if raw.contains(':') {
            return why(
                "has a port: every port of an allowed host is allowed, so give the host alone",
            );
        }
        let lower = raw.to_ascii_lowercase();
        if lower == "*" {
            return why("allows every host: use {network} full for that");
        }
        if let Some(suffix) = lower.strip_prefix("*.") {
            if !valid_host_name(suffix) {
                return why("is not a host name: use letters, digits, `-` and `.`");
            }
            if looks_numeric(suffix) {
                return why(
                    "is a wildcard over an IP address: addresses have no names below them; list the address itself",
                );
            }
            if !suffix.contains('.') || is_public_suffix(suffix) {
                return why(&format!(
                    "allows every name under the public suffix `{suffix}`: name a domain, like *.example.com"
                ));
            }
            return Ok(HostPattern::Below(suffix.to_owned()));
        }
        if lower.contains('*') {
            return why("has a `*` that is not a leading `*.`: only *.example.com is allowed");
        }
        let name = lower.strip_suffix('.').unwrap_or(&lower);
        if !valid_host_name(name) {
            return why("is not a host name: use letters, digits, `-` and `.`");
        }
        if looks_numeric(name) {
            return why(
                "is an address in a short form (like 127.1 or 0x7f000001), which resolvers read as an IP: write the address in full",
            );
        }
        Ok(HostPattern::Name(name.to_owned()))
    }

    /// Whether `host` (a name already checked with [`valid_host_name`] and lower case, or an
    /// IP literal) is allowed by this pattern.
    pub fn matches(&self, host: &str) -> bool {
        match self {
            HostPattern::Name(n) => host == n,
            HostPattern::Below(s) => host
                .strip_suffix(s.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            HostPattern::Ip(ip) => {
                let bare = host
                    .strip_prefix('[')
                    .and_then(|h| h.strip_suffix(']'))
                    .unwrap_or(host);
                bare.parse::<IpAddr>().is_ok_and(|h| h == *ip)
            }
        }
    }

    /// Whether the user named this address or `localhost` outright: only then may a name
    /// resolve to a loopback or private address.
    pub fn names_local(&self) -> bool {
        match self {
            HostPattern::Ip(_) => true,
            HostPattern::Name(n) => n == "localhost",
            HostPattern::Below(_) => false,
        }
    }
}

/// Whether an address means "any address of this host" to the kernel: `::`, `0.0.0.0/8`,
/// and their IPv4-mapped forms.
fn unspecified(ip: IpAddr) -> bool {
    let v4 = match ip {
        IpAddr::V4(v4) => v4,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4,
            None => return v6.is_unspecified(),
        },
    };
    v4.octets()[0] == 0
}

/// Whether a name's last label starts with a digit: no top-level domain does, and resolvers
/// read such names (`127.1`, `0x7f000001`, `2130706433`) as IP addresses.
fn looks_numeric(name: &str) -> bool {
    name.rsplit('.')
        .next()
        .and_then(|l| l.bytes().next())
        .is_some_and(|b| b.is_ascii_digit())
}

/// Whether `name` is itself a public suffix (`com`, `co.uk`, `github.io`).
fn is_public_suffix(name: &str) -> bool {
    psl::suffix(name.as_bytes()).is_some_and(|s| s.as_bytes() == name.as_bytes())
}

/// The sandbox policy of an attempt (`{"enabled": false}` without `--sandbox`). Paths are
/// absolute and resolved by the plan.
///
/// ```json
/// {"enabled": true, "network": "none", "writable": ["/src/app", "/h/runs/r/attempts/1/out"],
///  "read_only": [], "hidden": ["/tmp/tmux-0/subpane", "/h", "/run"],
///  "env_pass": ["GITHUB_TOKEN"], "asked": {"writable": [], "hidden": []},
///  "git": {"common_dir": "/src/app/.git", …}}
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SandboxSpec {
    pub enabled: bool,
    pub network: Network,
    /// Trees the program may write (the workspace, its artifact directory `out/`, the
    /// agent's state, `--writable`).
    pub writable: Vec<PathBuf>,
    /// Paths inside writable or hidden trees that the program sees read-only (a worktree's
    /// `.git` file, the egress proxy's socket, a name service file under `/run`).
    pub read_only: Vec<PathBuf>,
    /// Paths the program cannot see at all (`--hide`, the tmux server's socket, the subpane
    /// home): a hidden directory shows only what `writable` and `read_only` name below it.
    pub hidden: Vec<PathBuf>,
    /// Names of variables passed on from the caller's environment (`--env-pass`).
    pub env_pass: Vec<String>,
    /// What the user named (`--writable`, `--hide`), resolved: a retry keeps these and makes
    /// the rest of the policy anew for its attempt. Absent in specs written before it
    /// existed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub asked: Option<SandboxAsk>,
    /// The workspace's repository, whose git directory the program changes privately.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub git: Option<GitRepo>,
    /// An agent's own state directory (in `writable`), instead of the user's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_state: Option<AgentState>,
    /// What the program may take of the machine.
    pub limits: SandboxLimits,
}

/// What a sandboxed program may take of the machine (`--max-procs`, `--max-memory`,
/// `--max-tmp`, `--max-file-size`); the defaults when not given. The envelope's
/// `sandbox.enforced.limits` says how each was enforced.
///
/// ```json
/// {"processes": 4096, "memory_bytes": 8589934592, "tmp_bytes": 2147483648,
///  "file_size_bytes": 8589934592}
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SandboxLimits {
    /// Processes and threads at once, in the sandbox's PID namespace (its init included).
    pub processes: u32,
    /// What one process may allocate (its data: heap and private writable mappings).
    pub memory_bytes: u64,
    /// The private `/tmp` (a tmpfs: its files take memory).
    pub tmp_bytes: u64,
    /// The largest file a process may write.
    pub file_size_bytes: u64,
}

impl SandboxLimits {
    /// The kernel's smallest `pid_max` (`RESERVED_PIDS + 1`) is 301: the process limit
    /// cannot be lower than 300.
    pub const MIN_PROCESSES: u32 = 300;
    /// The largest `pid_max` (`PID_MAX_LIMIT` on 64-bit).
    pub const MAX_PROCESSES: u32 = 4 * 1024 * 1024 - 1;
    /// The limits of a request that names none (a const, so every front end shows them).
    pub const DEFAULT: Self = Self {
        processes: 4096,
        memory_bytes: 8 << 30,
        tmp_bytes: 2 << 30,
        file_size_bytes: 8 << 30,
    };
}

impl Default for SandboxLimits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// A sandboxed agent's state directory: its own for the attempt (`attempts/<n>/agent`), or
/// the one of the attempt whose session it resumes, seeded from the user's when new. The
/// user's own (`seeded_from`) is never written: a hook there would run in the user's next
/// unsandboxed session. Nothing the policy hides is seeded (`withheld` lists what was not).
///
/// ```json
/// {"var": "CLAUDE_CONFIG_DIR", "dir": "/h/runs/r/attempts/1/agent",
///  "seeded_from": "/home/u/.claude", "home_file": "/home/u/.claude.json",
///  "withheld": ["/home/u/.claude/.credentials.json"]}
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentState {
    /// The variable that points the CLI at `dir`.
    pub var: String,
    pub dir: PathBuf,
    /// The user's state directory.
    pub seeded_from: PathBuf,
    /// The user's file that moves into `dir` (`~/.claude.json`), when one does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home_file: Option<PathBuf>,
    /// Seeded only from what this sandbox itself sees: a run from a sandbox, whose view is at
    /// most its parent's (the user's files beyond that are never read for it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub within_sight: bool,
    /// The user's files and directories that were not seeded because the policy hides them
    /// (or, `within_sight`, the sandbox does not see them): the agent may lack its login or
    /// settings. Decided when the attempt is created.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub withheld: Vec<PathBuf>,
}

/// The git directory of a sandboxed workspace's repository. The program sees it as an
/// overlay: its writes land in `upper` (in the attempt directory, out of its reach), never
/// in `common_dir`, so config, hooks, other refs, rebase state and the worktree's records
/// stay as they were. When the attempt ends, subpane carries back the branch `branch` (and
/// the objects its new commits need), nothing else.
///
/// ```json
/// {"common_dir": "/src/app/.git", "git_dir": "/src/app/.git", "work_tree": "/src/app",
///  "branch": "main", "upper": "/h/runs/r/attempts/1/git/upper",
///  "work": "/h/runs/r/attempts/1/git/work"}
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GitRepo {
    /// The repository's git directory (`.git`, or the common directory of its worktrees).
    pub common_dir: PathBuf,
    /// The work tree's own git directory: `common_dir`, or `worktrees/<name>` in it.
    pub git_dir: PathBuf,
    pub work_tree: PathBuf,
    /// The branch the program may move (`refs/heads/…`): the one checked out, or the
    /// worktree's; `None` on a detached HEAD.
    pub branch: Option<String>,
    pub upper: PathBuf,
    /// The overlay's work directory (empty, beside `upper`).
    pub work: PathBuf,
}

/// The paths a user named for the sandbox, absolute and resolved against the directory the
/// run was started from.
///
/// ```json
/// {"writable": ["/home/u/.cache/go"], "hidden": ["/home/u/.aws"]}
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SandboxAsk {
    pub writable: Vec<PathBuf>,
    pub hidden: Vec<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_that_name_hosts_are_taken() {
        assert_eq!(
            HostPattern::parse("API.Example.com").unwrap(),
            HostPattern::Name("api.example.com".into())
        );
        assert_eq!(
            HostPattern::parse("*.example.com").unwrap(),
            HostPattern::Below("example.com".into())
        );
        assert_eq!(
            HostPattern::parse("127.0.0.1").unwrap(),
            HostPattern::Ip("127.0.0.1".parse().unwrap())
        );
        assert_eq!(
            HostPattern::parse("[::1]").unwrap(),
            HostPattern::Ip("::1".parse().unwrap())
        );
        assert!(HostPattern::parse("localhost").unwrap().names_local());
        // Digits are fine where a name's last label starts with a letter.
        for ok in [
            "db1",
            "1password.com",
            "v2.api.example.com",
            "*.s3.example.com",
        ] {
            assert!(HostPattern::parse(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn over_broad_or_odd_patterns_are_refused_with_the_reason() {
        for (raw, says) in [
            ("", "is empty"),
            ("https://api.example.com", "is a URL"),
            ("api.example.com/v1", "is a URL"),
            ("api.example.com:443", "has a port"),
            ("*", "every host"),
            ("*.com", "public suffix `com`"),
            ("*.co.uk", "public suffix `co.uk`"),
            ("*.github.io", "public suffix"),
            ("a b.com", "space"),
            ("a\0b.com", "control character"),
            ("exa*mple.com", "leading `*.`"),
            ("-bad.com", "not a host name"),
            ("bad_name.com", "not a host name"),
            ("0.0.0.0", "unspecified"),
            ("0.1.2.3", "unspecified"),
            ("::", "unspecified"),
            ("[::]", "unspecified"),
            ("::ffff:0.0.0.0", "unspecified"),
            ("*.0.0.1", "wildcard over an IP address"),
            ("*.168.1.1", "wildcard over an IP address"),
            ("127.1", "short form"),
            ("0x7f000001", "short form"),
            ("2130706433", "short form"),
        ] {
            let e = HostPattern::parse(raw).unwrap_err();
            assert!(e.contains(says), "{raw:?}: {e}");
        }
    }

    #[test]
    fn matching_is_exact_or_strictly_below() {
        let p = HostPattern::parse("*.example.com").unwrap();
        assert!(p.matches("a.example.com") && p.matches("a.b.example.com"));
        assert!(!p.matches("example.com") && !p.matches("badexample.com"));
        assert!(!p.matches(".example.com"));
        let n = HostPattern::parse("example.com").unwrap();
        assert!(n.matches("example.com") && !n.matches("a.example.com"));
        let ip = HostPattern::parse("::1").unwrap();
        assert!(ip.matches("[::1]") && ip.matches("::1") && !ip.matches("::2"));
    }

    #[test]
    fn network_policies_parse_and_round_trip() {
        assert_eq!(Network::parse("none").unwrap(), Network::None);
        assert_eq!(Network::parse("full").unwrap(), Network::Full);
        let a = Network::parse("allow:api.example.com,127.0.0.1").unwrap();
        let json = serde_json::to_string(&a).unwrap();
        assert_eq!(json, r#"{"allow":["api.example.com","127.0.0.1"]}"#);
        assert_eq!(serde_json::from_str::<Network>(&json).unwrap(), a);
        assert!(Network::parse("allow:").unwrap_err().contains("is empty"));
        assert!(Network::parse("some").unwrap_err().contains("not a policy"));
        // A record with a bad pattern is refused when read, not trusted.
        assert!(serde_json::from_str::<Network>(r#"{"allow":["*"]}"#).is_err());
        // Old records (enabled only) still read.
        let s: SandboxSpec = serde_json::from_str(r#"{"enabled": false}"#).unwrap();
        assert_eq!(s, SandboxSpec::default());
    }
}
