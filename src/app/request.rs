//! [`RunRequest`]: everything `subpane run` accepts, as one serde type.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::Error;
use crate::spec::AgentKind;

/// A request to run something: the flags of `subpane run`, a line of a fan-out file, or the
/// arguments of an MCP `run` call. Nothing in it is checked yet; [`super::plan`] does that.
///
/// Either `argv` (any program) or `agent` with `task` (or `task_file`). Durations are strings
/// with a unit (`"30s"`, `"10m"`). `task` and `system_prompt` are the text itself; the
/// command line's and the fan-out file's `@FILE` is turned into `task_file` and
/// `system_prompt_file` by [`RunRequest::read_at_files`] at those edges, so a task that
/// begins with `@` from anywhere else is text. Unknown fields are refused, so a misspelt
/// field is an error rather than silently ignored.
///
/// ```json
/// {"agent": "claude", "task": "review src/lib.rs", "run_id": "review-1", "cwd": "/src/app",
///  "model": "sonnet", "tools": ["Read"], "timeout": "10m", "labels": {"team": "core"},
///  "env": {"API_BASE": "http://127.0.0.1:8080"}}
/// ```
///
/// `env` values are secrets as far as subpane knows: `Debug` shows their names only, and
/// records keep names only.
///
/// The MCP `run` tool has arguments of its own that become this ([`crate::mcp`]'s
/// `RunArgs`), with their schema and descriptions for a model.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RunRequest {
    /// The agent CLI to run with `task`: "pi", "claude" or "codex". Leave it out (or
    /// "command") to run `argv` instead.
    pub agent: Option<AgentKind>,
    /// The agent's task, as text.
    pub task: Option<String>,
    /// A file whose content is the agent's task (instead of `task`).
    pub task_file: Option<PathBuf>,
    /// A program and its arguments, e.g. ["make", "test"] (not a shell line: use
    /// ["sh", "-c", "..."] for one). Give either this or `agent` with `task`.
    pub argv: Vec<String>,
    /// The run id (letters, digits, `.`, `_`, `-`); generated when absent. Must be new.
    pub run_id: Option<String>,
    /// The directory the program runs in; the server's current directory when absent.
    pub cwd: Option<PathBuf>,
    /// The agent's model, as the agent CLI names it.
    pub model: Option<String>,
    /// The agent's system prompt, as text.
    pub system_prompt: Option<String>,
    /// A file whose content is the agent's system prompt (instead of `system_prompt`).
    pub system_prompt_file: Option<PathBuf>,
    /// Tools the agent may use (claude: pre-approved with --allowedTools).
    pub tools: Vec<String>,
    /// The agent's thinking level.
    pub thinking: Option<String>,
    /// An agent session to continue (an earlier envelope's output.session_id).
    pub resume: Option<String>,
    /// Labels recorded in run.json and the envelope, e.g. {"team": "core"}.
    pub labels: BTreeMap<String, String>,
    /// An id of the caller's, recorded as is.
    pub correlation_id: Option<String>,
    /// Stop the attempt after this long, with a unit: "30s", "10m", "2h".
    pub timeout: Option<String>,
    /// Stop the attempt after this long without output, e.g. "5m".
    pub idle_timeout: Option<String>,
    /// How long an agent may stay alive after its final event.
    pub linger: Option<String>,
    /// Time between SIGTERM and SIGKILL when stopping.
    pub grace: Option<String>,
    /// Variables set for the program; records keep their names only, never the values.
    pub env: BTreeMap<String, String>,
    /// Keep the tmux session after the attempt ends, to read its pane.
    pub keep_session: bool,
    /// Run the program in the kernel sandbox: it writes only its workspace (`cwd`), its
    /// attempt directory, a private /tmp and `writable` paths; no network unless `network`
    /// says so.
    pub sandbox: bool,
    /// Network of a sandboxed program: "none" (the default), "full", or
    /// "allow:HOST,..." (host names, IP literals or *.example.com).
    pub network: Option<String>,
    /// More files or trees the sandboxed program may write.
    pub writable: Vec<PathBuf>,
    /// Paths the sandboxed program cannot see.
    pub hide: Vec<PathBuf>,
    /// Names of variables passed on from the caller's environment into the sandbox.
    pub env_pass: Vec<String>,
    /// Processes and threads the sandboxed program may have at once (default 4096, at
    /// least 300).
    pub max_procs: Option<u32>,
    /// What one sandboxed process may allocate, e.g. "4G" (default "8G").
    pub max_memory: Option<String>,
    /// The size of the sandbox's private /tmp, e.g. "512M" (default "2G").
    pub max_tmp: Option<String>,
    /// The largest file a sandboxed process may write, e.g. "1G" (default "8G").
    pub max_file_size: Option<String>,
    /// Run in a new git worktree of the `cwd` repository (its diff is stored at the end).
    pub worktree: bool,
    /// How deep runs started by this run's program (and theirs) may nest; it can only lower
    /// the limit inherited from an enclosing attempt.
    pub max_depth: Option<u32>,
}

impl std::fmt::Debug for RunRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunRequest")
            .field("agent", &self.agent)
            .field("task", &self.task.as_ref().map(|t| t.len()))
            .field("argv", &self.argv)
            .field("run_id", &self.run_id)
            .field("cwd", &self.cwd)
            .field("model", &self.model)
            .field("tools", &self.tools)
            .field("labels", &self.labels)
            .field("timeout", &self.timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("sandbox", &self.sandbox)
            .field("network", &self.network)
            .finish_non_exhaustive()
    }
}

impl RunRequest {
    /// The `@FILE` convention of the command line and of a fan-out file: a `task` or
    /// `system_prompt` that begins with `@` names a file, and becomes `task_file` or
    /// `system_prompt_file`. Called at those edges only: anywhere else a task is its text.
    pub fn read_at_files(&mut self) {
        if let Some(path) = at_file(&mut self.task) {
            self.task_file = Some(path);
        }
        if let Some(path) = at_file(&mut self.system_prompt) {
            self.system_prompt_file = Some(path);
        }
    }
}

/// The command line's `@FILE`: when `text` is `@PATH`, takes it and returns PATH.
pub fn at_file(text: &mut Option<String>) -> Option<PathBuf> {
    let path = PathBuf::from(text.as_deref()?.strip_prefix('@')?);
    *text = None;
    Some(path)
}

/// Splits `KEY=VALUE` (as given to `flag`); the key must not be empty.
pub fn parse_kv(flag: &str, raw: &str) -> Result<(String, String), Error> {
    match raw.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(Error::invalid(format!(
            "{flag} `{raw}` must look like KEY=VALUE"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_json_line_becomes_a_request() {
        let r: RunRequest = serde_json::from_str(
            r#"{"agent": "pi", "task": "hi", "timeout": "30s", "labels": {"k": "v"}}"#,
        )
        .unwrap();
        assert_eq!(r.agent, Some(AgentKind::Pi));
        assert_eq!(r.task.as_deref(), Some("hi"));
        assert_eq!(r.labels["k"], "v");
        assert!(r.argv.is_empty() && !r.keep_session);
    }

    #[test]
    fn misspelt_fields_are_refused() {
        let e = serde_json::from_str::<RunRequest>(r#"{"argv": ["true"], "timeuot": "1s"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("timeuot"), "{e}");
    }

    #[test]
    fn debug_hides_environment_values() {
        let mut r = RunRequest::default();
        r.env.insert("API_KEY".into(), "sk-secret".into());
        let d = format!("{r:?}");
        assert!(d.contains("API_KEY") && !d.contains("sk-secret"), "{d}");
    }

    #[test]
    fn at_files_are_a_convention_of_the_edges_that_ask_for_it() {
        let mut r = RunRequest {
            task: Some("@alice asked: fix it".into()),
            system_prompt: Some("be brief".into()),
            ..RunRequest::default()
        };
        let literal = r.clone();
        r.read_at_files();
        assert_eq!(r.task, None);
        assert_eq!(
            r.task_file.as_deref(),
            Some(std::path::Path::new("alice asked: fix it"))
        );
        assert_eq!(r.system_prompt.as_deref(), Some("be brief"));
        assert_eq!(literal.task.as_deref(), Some("@alice asked: fix it"));
    }

    #[test]
    fn key_values() {
        assert_eq!(
            parse_kv("--label", "a=b=c").unwrap(),
            ("a".into(), "b=c".into())
        );
        assert!(parse_kv("--label", "=x").is_err());
        assert!(parse_kv("--env", "novalue").is_err());
    }
}
