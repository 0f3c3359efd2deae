//! What runs: the program or agent CLI, its task, and what the kernel would refuse.

use super::*;
use crate::app::Invalid;

/// The text itself, or the content of the file (given one or the other, never both).
pub(in crate::app) fn text_or_file(
    sys: &dyn System,
    field: &str,
    text: Option<&str>,
    file: Option<&Path>,
) -> Result<Option<String>, Error> {
    let file_field = format!("{field}_file");
    match (text, file) {
        (Some(_), Some(_)) => Err(Invalid::new(field, "is given twice")
            .hint(format!(
                "give it as text or as a file ({{{file_field}}}), not both"
            ))
            .into()),
        (Some(t), None) => Ok(Some(t.to_owned())),
        (None, Some(path)) => sys.read_to_string(path).map(Some).map_err(|e| {
            Invalid::new(
                &file_field,
                format!("`{}` cannot be read: {e}", path.display()),
            )
            .into()
        }),
        (None, None) => Ok(None),
    }
}

/// Finds `program` the way a shell in `cwd` with `path` would.
pub(in crate::app) fn resolve_program(
    sys: &dyn System,
    program: &str,
    cwd: &Path,
    path: Option<&OsStr>,
) -> Result<PathBuf, Error> {
    if program.contains('/') {
        let p = cwd.join(program);
        return match sys.executable(&p) {
            Some(true) => Ok(p),
            Some(false) => Err(Error::invalid(format!(
                "`{program}` is not an executable file"
            ))),
            None => Err(Error::invalid(format!(
                "`{program}` does not exist (looked in {})",
                cwd.display()
            ))),
        };
    }
    sys.which(program, path, cwd)
        .ok_or_else(|| Error::invalid(format!("program `{program}` was not found on PATH")))
}

/// What runs: the adapter, the argv, the task.
pub(in crate::app) struct Program {
    pub(in crate::app) agent: AgentKind,
    pub(in crate::app) argv: Vec<String>,
    pub(in crate::app) task: Option<TaskSpec>,
    /// The program's stdin is its input (`Stdin::Input`): an agent CLI's input mode, or a
    /// command's `stdin: pipe`.
    pub(in crate::app) input: bool,
}

/// Whether the program takes input ({stdin}): an agent whose CLI can, unless `null`; a
/// command only with `pipe`. `pipe` for a CLI that cannot is refused, saying why.
fn takes_input(req: &RunRequest, agent: Option<AgentKind>) -> Result<bool, Error> {
    let asked = match req.stdin.as_deref() {
        None => None,
        Some("pipe") => Some(true),
        Some("null") => Some(false),
        Some(other) => {
            return Err(Error::about(
                "{stdin}",
                format!("`{other}` is not a stdin: give pipe or null"),
            ));
        }
    };
    let input = match agent {
        None => asked.unwrap_or(false),
        Some(kind) => match (asked, adapter_for(kind).no_input()) {
            (Some(true), Some(why)) => {
                return Err(Error::about(
                    "{stdin}",
                    format!(
                        "pipe cannot be given to {}: {why}; leave {{stdin}} out",
                        kind.as_str()
                    ),
                ));
            }
            (asked, why) => asked.unwrap_or(true) && why.is_none(),
        },
    };
    if !input && req.keep_open.is_some() {
        return Err(Error::about(
            "{keep_open}",
            "keeps an agent's input open, and this run has none: give {stdin} pipe (or leave it out, for an agent that takes input)",
        ));
    }
    Ok(input)
}

pub(in crate::app) fn program(
    req: &RunRequest,
    sys: &dyn System,
    cwd: &Path,
    path: Option<&OsStr>,
    kept: Option<&Kept>,
) -> Result<Program, Error> {
    let agent = req.agent.filter(|a| *a != AgentKind::Command);
    let input = takes_input(req, agent)?;
    let agent_only = [
        ("{model}", req.model.is_some()),
        (
            "{system_prompt}",
            req.system_prompt.is_some() || req.system_prompt_file.is_some(),
        ),
        ("{tools}", !req.tools.is_empty()),
        ("{thinking}", req.thinking.is_some()),
        ("{resume}", req.resume.is_some()),
    ];
    match (agent, req.argv.is_empty()) {
        (Some(_), false) => Err(Error::invalid(
            "give either {agent} with {task}, or {argv}, not both",
        )),
        (None, true) => Err(Error::invalid(
            "nothing to run: give {argv} or {agent} with {task}",
        )),
        (None, false) => {
            if req.task.is_some() || req.task_file.is_some() {
                return Err(Error::about(
                    "{task}",
                    "needs {agent}; {argv} takes its own arguments",
                ));
            }
            if let Some((flag, _)) = agent_only.iter().find(|(_, given)| *given) {
                return Err(Error::about(
                    flag,
                    "is for agents: it needs {agent} pi|claude|codex",
                ));
            }
            let mut argv = req.argv.clone();
            let program = resolve_program(sys, &argv[0], cwd, path)
                .map_err(|e| kept_refused(kept, e, "ran it"))?;
            argv[0] = program.display().to_string();
            Ok(Program {
                agent: AgentKind::Command,
                argv,
                task: None,
                input,
            })
        }
        (Some(kind), true) => {
            let adapter = adapter_for(kind);
            if let Some(t) = &req.thinking {
                let levels = adapter.thinking_levels();
                if !levels.contains(&t.as_str()) {
                    return Err(Error::about(
                        "{thinking}",
                        format!(
                            "{t} is not a thinking level of {}: use {}",
                            kind.as_str(),
                            levels.join(", ")
                        ),
                    ));
                }
            }
            let Some(prompt) =
                text_or_file(sys, "task", req.task.as_deref(), req.task_file.as_deref())?
            else {
                return Err(Error::about(
                    "{agent}",
                    format!(
                        "{} needs {{task}}: say what the agent should do",
                        kind.as_str()
                    ),
                ));
            };
            if prompt.trim().is_empty() {
                return Err(Error::about(
                    "{task}",
                    "is empty; say what the agent should do",
                ));
            }
            let system_prompt = text_or_file(
                sys,
                "system_prompt",
                req.system_prompt.as_deref(),
                req.system_prompt_file.as_deref(),
            )?;
            if let Some(s) = &system_prompt
                && s.len() > MAX_ARG_BYTES
            {
                return Err(Error::about(
                    "{system_prompt}",
                    format!(
                        "is {} KiB; it is passed as one argument, and Linux allows at most 128 KiB in one: shorten it, or move the long part into {{task}}",
                        s.len() / 1024
                    ),
                ));
            }
            let binary = adapter.binary().unwrap_or("?");
            let program = match kept.and_then(|k| k.agent_cli.as_deref()) {
                // The CLI the attempt before ran, where it is.
                Some(cli) => resolve_program(sys, cli, cwd, path).map_err(|e| {
                    kept_refused(kept, with_hint(e, adapter.install_hint()), "ran it")
                })?,
                None => sys.which(binary, path, cwd).ok_or_else(|| {
                    Error::invalid(format!(
                        "the {} CLI `{binary}` was not found on PATH; {}",
                        kind.as_str(),
                        adapter.install_hint()
                    ))
                })?,
            };
            Ok(Program {
                agent: kind,
                argv: vec![program.display().to_string()],
                task: Some(TaskSpec {
                    prompt,
                    model: req.model.clone(),
                    system_prompt,
                    tools: req
                        .tools
                        .iter()
                        .map(|t| t.trim().to_owned())
                        .filter(|t| !t.is_empty())
                        .collect(),
                    thinking: req.thinking.clone(),
                    resume_session: req.resume.clone(),
                    input,
                }),
                input,
            })
        }
    }
}

/// Refuses an argv that the kernel would refuse at exec (E2BIG): better now, with a message,
/// than as a spawn failure.
pub(in crate::app) fn check_exec_size(
    argv: &[String],
    env: &[(OsString, OsString)],
    arg_max: usize,
) -> Result<(), Error> {
    if let Some((i, a)) = argv
        .iter()
        .enumerate()
        .find(|(_, a)| a.len() > MAX_ARG_BYTES)
    {
        return Err(Error::invalid(format!(
            "argument {i} of the program is {} KiB; Linux allows at most 128 KiB in one argument",
            a.len() / 1024
        )));
    }
    let ptr = std::mem::size_of::<usize>();
    let total: usize = argv.iter().map(|a| a.len() + 1 + ptr).sum::<usize>()
        + env
            .iter()
            .map(|(k, v)| k.len() + v.len() + 2 + ptr)
            .sum::<usize>();
    if total > arg_max {
        return Err(Error::invalid(format!(
            "the program's arguments and environment take {} KiB; the system allows {} KiB: pass less on the command line (a long task goes to the agent by file)",
            total / 1024,
            arg_max / 1024
        )));
    }
    Ok(())
}
