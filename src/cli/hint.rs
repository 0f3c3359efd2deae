//! Hints added to clap's own errors where a person's likely mistake is known.
//!
//! `subpane run echo hello` (the program without `--`) is refused by clap as an unexpected
//! argument: the error then says where the program goes.

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
    let Some(verb) = words.iter().skip(1).position(|w| !w.starts_with('-')) else {
        return err;
    };
    if words[verb + 1] != "run" || word.starts_with('-') {
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
}
