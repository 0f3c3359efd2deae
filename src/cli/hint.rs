//! Hints added to clap's own errors where a person's likely mistake is known.
//!
//! `subpane run echo hello` (the program without `--`) is refused by clap as an unexpected
//! argument: the error then says where the program goes. `--timeout -1` is refused the same
//! way, with clap's tip to write `-- -1`, which would make `-1` the program (or a run id): the
//! error then says what the flag takes instead.

use std::ffi::OsString;

use clap::error::{ContextKind, ContextValue, ErrorKind};

/// `err` with a tip when it is `run`'s unexpected word: the program goes after `--` (or, for
/// an agent, the task after `--task`).
pub fn with_hint(mut err: clap::Error, args: &[OsString]) -> clap::Error {
    if err.kind() != ErrorKind::UnknownArgument {
        return err;
    }
    let Some(ContextValue::String(word)) = err.get(ContextKind::InvalidArg).cloned() else {
        return err;
    };
    let words: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if let Some(e) = value_with_a_dash(&word, &words) {
        return e;
    }
    let Some(verb) = words.iter().skip(1).position(|w| !w.starts_with('-')) else {
        return err;
    };
    if words[verb + 1] != "run" {
        return err;
    }
    if word.starts_with('-') {
        // clap's tip (`-- -x`) would make it the program; its tip of a similar option, when
        // it gives one, is enough.
        let tips = match err.get(ContextKind::SuggestedArg) {
            Some(_) => vec![],
            None => vec![format!(
                "`{word}` is not an option of run (`subpane run --help` lists them); after `--` it would be the program"
            ).into()],
        };
        err.insert(ContextKind::Suggested, ContextValue::StyledStrs(tips));
        return err;
    }
    let Some(at) = words.iter().position(|w| *w == word) else {
        return err;
    };
    let quoted = |ws: &[String]| {
        ws.iter()
            .map(|w| shell_escape::escape(w.as_str().into()).into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let tip = if words
        .iter()
        .any(|w| w == "--agent" || w.starts_with("--agent="))
    {
        format!(
            "an agent's task goes after --task: --task {}",
            shell_escape::escape(words[at..].join(" ").into())
        )
    } else {
        let before = quoted(&words[1..at]);
        format!(
            "a program and its arguments go after `--`: subpane {before} -- {}",
            quoted(&words[at..])
        )
    };
    err.insert(
        ContextKind::Suggested,
        ContextValue::StyledStrs(vec![tip.into()]),
    );
    err
}

/// The error for `word`, clap's unexpected argument, when it is the value of the flag before
/// it (`--timeout -1`, `--label -x`): a value that starts with `-` is read as a flag.
fn value_with_a_dash(word: &str, words: &[String]) -> Option<clap::Error> {
    // clap names `-5` of `-5s` (a cluster of short flags): the word given began with it.
    let at = words
        .iter()
        .position(|w| w == word || (!word.starts_with("--") && w.starts_with(word)))?;
    let value = &words[at];
    let flag = words.get(at.checked_sub(1)?)?.strip_prefix("--")?;
    let mut cli = <super::Cli as clap::CommandFactory>::command();
    cli.build();
    let verb = words[1..at].iter().find_map(|w| cli.find_subcommand(w))?;
    let arg = verb.get_arguments().find(|a| a.get_long() == Some(flag))?;
    if !arg.get_action().takes_values() {
        return None;
    }
    let duration = arg
        .get_value_names()
        .is_some_and(|n| n.iter().any(|n| n.as_str() == "DUR"));
    let msg = if duration {
        format!(
            "--{flag} takes a duration, like 30s or 5m; `{value}` starts with -, and a duration never does"
        )
    } else {
        format!("--{flag} `{value}` starts with -, so it reads as a flag; write --{flag}={value}")
    };
    Some(clap::Error::raw(
        ErrorKind::InvalidValue,
        format!("{msg}\n"),
    ))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    fn error_of(args: &[&str]) -> String {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        let e = super::super::Cli::try_parse_from(&args).unwrap_err();
        with_hint(e, &args).render().to_string()
    }

    #[test]
    fn a_program_without_the_double_dash_gets_a_tip() {
        let e = error_of(&["subpane", "run", "--json", "echo", "hello world"]);
        assert!(
            e.contains("tip: a program and its arguments go after `--`: subpane run --json -- echo 'hello world'"),
            "{e}"
        );
        let e = error_of(&["subpane", "run", "--agent", "pi", "fix", "it"]);
        assert!(
            e.contains("tip: an agent's task goes after --task: --task 'fix it'"),
            "{e}"
        );
        // Other mistakes keep clap's own words only.
        let e = error_of(&["subpane", "run", "--nonsense"]);
        assert!(!e.contains("tip: a program"), "{e}");
        let e = error_of(&["subpane", "ls", "extra"]);
        assert!(!e.contains("tip: a program"), "{e}");
    }

    #[test]
    fn a_value_with_a_dash_is_never_sent_after_the_double_dash() {
        for (args, says) in [
            (
                &["subpane", "run", "--timeout", "-1", "--", "true"][..],
                "error: --timeout takes a duration, like 30s or 5m; `-1` starts with -, and a duration never does\n",
            ),
            (
                &["subpane", "wait", "--timeout", "-5s", "r"],
                "error: --timeout takes a duration, like 30s or 5m; `-5s` starts with -, and a duration never does\n",
            ),
            (
                &["subpane", "run", "--label", "-x", "--", "true"],
                "error: --label `-x` starts with -, so it reads as a flag; write --label=-x\n",
            ),
        ] {
            assert_eq!(error_of(args), says, "{args:?}");
        }
        // After a flag that takes no value, run's unknown option is not sent after `--`
        // either; other verbs keep clap's words.
        let e = error_of(&["subpane", "run", "--json", "-x", "--", "true"]);
        assert!(e.contains("unexpected argument '-x'"), "{e}");
        assert!(
            e.contains("tip: `-x` is not an option of run (`subpane run --help` lists them)"),
            "{e}"
        );
        assert!(!e.contains("'-- -x'"), "{e}");
        let e = error_of(&["subpane", "run", "--jsn", "--", "true"]);
        assert!(e.contains("a similar argument exists: '--json'"), "{e}");
        assert!(
            !e.contains("not an option of run") && !e.contains("'-- "),
            "{e}"
        );
        let e = error_of(&["subpane", "status", "-x"]);
        assert!(e.contains("unexpected argument '-x'"), "{e}");
    }
}
