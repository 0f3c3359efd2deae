//! [`RunRequest`] (declared in [`field`](crate::app::field)): what it does at the edges.

use std::path::PathBuf;

pub use crate::app::field::RunRequest;
use crate::app::invalid::Invalid;
#[cfg(test)]
use crate::spec::AgentKind;

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
            .field("env_plain", &self.env_plain.keys().collect::<Vec<_>>())
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

/// Splits `KEY=VALUE` (as given to `field`); the key must not be empty.
pub fn parse_kv(field: &str, raw: &str) -> Result<(String, String), Invalid> {
    match raw.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(Invalid::new(
            field,
            format!("`{raw}` must look like KEY=VALUE"),
        )),
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
            parse_kv("labels", "a=b=c").unwrap(),
            ("a".into(), "b=c".into())
        );
        assert!(parse_kv("labels", "=x").is_err());
        assert!(parse_kv("env", "novalue").is_err());
    }
}
