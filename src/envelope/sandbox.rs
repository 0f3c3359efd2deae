//! The envelope's `sandbox`: the policy asked for and what the kernel enforced.

use serde::{Deserialize, Serialize};

/// The sandbox in force: off, or the policy and what the kernel enforced. `policy` and
/// `enforced` are present only when the sandbox was asked for (`enforced` is absent when it
/// could not be set up, with `failure_kind: "sandbox"`).
///
/// ```json
/// {"enabled": false}
/// ```
/// ```json
/// {"enabled": true,
///  "policy": {"enabled": true, "network": "none", "writable": ["/src/app"], "read_only": [],
///             "hidden": [], "env_pass": []},
///  "enforced": {"landlock_abi": 7, "namespaces": ["user", "mount", "net"], "seccomp": true,
///               "no_new_privs": true, "partial": []}}
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxInfo {
    pub enabled: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<crate::spec::SandboxSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enforced: Option<Enforced>,
    /// The limit the sandbox found reached when the program ended (absent when none was).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_hit: Option<LimitKind>,
}

/// A limit of the sandbox (`SandboxLimits`).
///
/// ```json
/// "processes"
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitKind {
    /// The PID namespace had no room for more processes.
    Processes,
    /// A process was refused memory (not detected: see the README).
    Memory,
    /// The private `/tmp` was full.
    Tmp,
    /// A process was killed for writing past the file size limit (`SIGXFSZ`).
    FileSize,
}

/// The limits of a sandbox, each as the kernel enforced it (`null`: not enforced).
///
/// ```json
/// {"processes": {"max": 4096, "by": "pid_namespace"},
///  "memory_bytes": {"max": 8589934592, "by": "rlimit_data"},
///  "tmp_bytes": {"max": 2147483648, "by": "tmpfs"},
///  "file_size_bytes": {"max": 8589934592, "by": "rlimit_fsize"}}
/// ```
///
/// `by`: `pid_namespace` (the namespace's `pid_max`: processes and threads of the whole
/// sandbox), `rlimit_data` (`RLIMIT_DATA`: per process), `tmpfs` (the size of the private
/// `/tmp`), `rlimit_fsize` (`RLIMIT_FSIZE`: per file).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnforcedLimits {
    pub processes: Option<EnforcedLimit>,
    pub memory_bytes: Option<EnforcedLimit>,
    pub tmp_bytes: Option<EnforcedLimit>,
    pub file_size_bytes: Option<EnforcedLimit>,
}

/// One limit and the mechanism that enforced it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnforcedLimit {
    pub max: u64,
    pub by: String,
}

/// What the kernel enforced for a sandboxed program, reported by the process that entered
/// the sandbox just before it ran the program.
///
/// ```json
/// {"landlock_abi": 7, "namespaces": ["user", "mount", "net", "pid"], "seccomp": true,
///  "no_new_privs": true, "partial": [], "limits": {…}}
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Enforced {
    /// The Landlock ABI version the rules were enforced with.
    pub landlock_abi: Option<u32>,
    /// Namespaces the program runs in: `user`, `mount`, `net`, `pid`.
    pub namespaces: Vec<String>,
    /// A seccomp filter is installed.
    pub seccomp: bool,
    pub no_new_privs: bool,
    /// Rules that were only partly enforced, each with why (empty when all held).
    pub partial: Vec<String>,
    /// The limits and how each was enforced.
    #[serde(default)]
    pub limits: EnforcedLimits,
}
