//! The application layer's messages in the words of JSON fields: a fan-out line or an MCP
//! call names `timeout` and `run_id`, not `--timeout` and `--run-id` (and a model calling
//! tools knows the `list` tool, not `subpane ls`).
//!
//! The application layer names what was wrong the way the command line spells it (the front
//! end most messages are read on); this is the one place that says it the other way: for a
//! fan-out file's lines ([`as_fields`]) and every MCP tool error ([`for_tools`]). A flag that
//! is not a field is left as it is.

/// Command-line flags and the tool argument each one is.
const FLAGS: &[(&str, &str)] = &[
    ("--agent", "agent"),
    ("--task", "task"),
    ("--run-id", "run_id"),
    ("--cwd", "cwd"),
    ("--model", "model"),
    ("--system-prompt", "system_prompt"),
    ("--tools", "tools"),
    ("--thinking", "thinking"),
    ("--resume", "resume"),
    ("--label", "labels"),
    ("--correlation-id", "correlation_id"),
    ("--timeout", "timeout"),
    ("--idle-timeout", "idle_timeout"),
    ("--linger", "linger"),
    ("--grace", "grace"),
    ("--env", "env"),
    ("--keep-session", "keep_session"),
    ("--sandbox", "sandbox"),
    ("--network", "network"),
    ("--writable", "writable"),
    ("--hide", "hide"),
    ("--env-pass", "env_pass"),
    ("--worktree", "worktree"),
    ("--max-depth", "max_depth"),
    ("--group", "group"),
    ("--concurrency", "concurrency"),
    ("--fail-fast", "fail_fast"),
    ("--cancel-siblings", "cancel_siblings"),
    ("--attempt", "attempt"),
    ("--detach", "wait: false"),
];

/// Command lines a message may suggest, and the tool that does it.
const VERBS: &[(&str, &str)] = &[
    ("subpane ls", "the `list` tool"),
    ("subpane wait", "the `wait` tool"),
    ("subpane cancel", "the `cancel` tool"),
    ("subpane logs", "the `logs` tool"),
    ("subpane status", "the `status` tool"),
    ("subpane retry", "the `retry` tool"),
    ("subpane run", "the `run` tool"),
];

/// `msg` with every command-line flag that is a field of a request named as the field.
pub fn as_fields(msg: &str) -> String {
    rewrite(msg, false)
}

/// [`as_fields`], and every suggested command line named as its tool.
pub fn for_tools(msg: &str) -> String {
    rewrite(msg, true)
}

fn rewrite(msg: &str, tools: bool) -> String {
    let msg = msg.replace("a program after `--`", "`argv`");
    let mut out = String::with_capacity(msg.len());
    let mut rest = msg.as_str();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('`') {
            // A quoted command line: `subpane ls --json` is the `list` tool.
            if let Some(end) = after.find('`') {
                let quoted = &after[..end];
                if let Some((_, tool)) = VERBS
                    .iter()
                    .filter(|_| tools)
                    .find(|(v, _)| quoted == *v || quoted.starts_with(&format!("{v} ")))
                {
                    out.push_str(tool);
                    rest = &after[end + 1..];
                    continue;
                }
                if let Some(arg) = flag_arg(quoted) {
                    out.push('`');
                    out.push_str(arg);
                    out.push('`');
                    rest = &after[end + 1..];
                    continue;
                }
            }
        }
        let starts_word = out
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '-' || c == '_'));
        if starts_word && rest.starts_with("--") {
            let len = rest
                .char_indices()
                .skip(2)
                .find(|(_, c)| !(c.is_ascii_lowercase() || *c == '-'))
                .map_or(rest.len(), |(i, _)| i);
            if let Some(arg) = flag_arg(&rest[..len]) {
                out.push('`');
                out.push_str(arg);
                out.push('`');
                rest = &rest[len..];
                continue;
            }
        }
        let c = rest.chars().next().unwrap_or_default();
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// "`timeout`: " for an error at `path` in a JSON document (serde_path_to_error's form), or
/// nothing when `msg` names it already or there is no field to name.
pub fn field_of(path: &str, msg: &str) -> String {
    if path == "." || path == "?" || msg.contains(&format!("`{path}`")) {
        String::new()
    } else {
        format!("`{path}`: ")
    }
}

fn flag_arg(flag: &str) -> Option<&'static str> {
    FLAGS.iter().find(|(f, _)| *f == flag).map(|(_, a)| *a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_become_arguments_and_commands_become_tools() {
        assert_eq!(
            for_tools("invalid duration `5` for --timeout: no unit"),
            "invalid duration `5` for `timeout`: no unit"
        );
        assert_eq!(
            for_tools("no run `x` in /h/runs; `subpane ls` lists the runs there"),
            "no run `x` in /h/runs; the `list` tool lists the runs there"
        );
        assert_eq!(
            for_tools("choose another --run-id, or `--idle-timeout`; wait (`subpane wait r1`)"),
            "choose another `run_id`, or `idle_timeout`; wait (the `wait` tool)"
        );
        assert_eq!(
            for_tools("give a program after `--` or --agent with --task"),
            "give `argv` or `agent` with `task`"
        );
        // Not a flag of a tool, or not a flag at all: left alone.
        assert_eq!(
            for_tools("set --home or SUBPANE_HOME; a-- b --timeoutx"),
            "set --home or SUBPANE_HOME; a-- b --timeoutx"
        );
        assert_eq!(for_tools("é --cwd é"), "é `cwd` é");
        assert_eq!(
            as_fields("--timeout is bad; `subpane ls` lists runs"),
            "`timeout` is bad; `subpane ls` lists runs"
        );
    }
}
