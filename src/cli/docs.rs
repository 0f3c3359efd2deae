//! `subpane completions SHELL` and `subpane man [VERB]`: generated from the same clap
//! definitions as `--help` (clap_complete, clap_mangen), so they never disagree with it. A
//! test checks that every flag the README names exists here too.

use clap::{Args, CommandFactory, ValueEnum};

use super::{Cli, CliError};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

#[derive(Debug, Args)]
#[command(after_help = "\
Install them where the shell looks, for example:
  subpane completions bash > ~/.local/share/bash-completion/completions/subpane
  subpane completions zsh > ~/.zfunc/_subpane        # with fpath+=(~/.zfunc) in ~/.zshrc
  subpane completions fish > ~/.config/fish/completions/subpane.fish")]
pub struct CompletionsArgs {
    /// The shell to complete for
    #[arg(value_enum)]
    pub shell: Shell,
}

#[derive(Debug, Args)]
#[command(after_help = "\
Read it with `subpane man | man -l -`, or install it:
  subpane man > ~/.local/share/man/man1/subpane.1
  subpane man run > ~/.local/share/man/man1/subpane-run.1")]
pub struct ManArgs {
    /// A verb's own page (`subpane man run`); without it, the page of subpane
    #[arg(value_name = "VERB")]
    pub verb: Option<String>,
}

/// subpane's command tree without the hidden verbs (the worker and the sandbox helper):
/// clap_complete would offer them otherwise.
/// The whole command tree, every verb's arguments built: the verbs are deferred (built only
/// when parsed, see `Command`), which leaves them empty until then.
fn full_command() -> clap::Command {
    let mut cmd = Cli::command();
    cmd.build();
    cmd
}

fn public_command() -> clap::Command {
    let full = full_command();
    let mut cmd = clap::Command::new("subpane")
        .version(env!("CARGO_PKG_VERSION"))
        // Not the `--help`, `--version` and `help` clap added when it built the tree: it adds
        // them again to this one.
        .args(
            full.get_arguments()
                .filter(|a| !["help", "version"].contains(&a.get_id().as_str()))
                .cloned(),
        )
        .subcommands(
            full.get_subcommands()
                .filter(|s| !s.is_hide_set() && s.get_name() != "help")
                .cloned(),
        );
    if let Some(a) = full.get_about() {
        cmd = cmd.about(a.clone());
    }
    if let Some(a) = full.get_long_about() {
        cmd = cmd.long_about(a.clone());
    }
    cmd
}

/// The completion script for `a.shell` on stdout.
pub fn completions(a: CompletionsArgs) -> Result<i32, CliError> {
    let shell = match a.shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut public_command(), "subpane", &mut out);
    super::common::print(&String::from_utf8_lossy(&out));
    Ok(0)
}

/// The man page (roff) of subpane, or of one verb, on stdout.
pub fn man(a: ManArgs) -> Result<i32, CliError> {
    let mut cmd = public_command();
    cmd.build();
    let page = match &a.verb {
        None => cmd,
        Some(v) => {
            let sub = cmd
                .get_subcommands()
                .find(|s| s.get_name() == v && !s.is_hide_set())
                .cloned()
                .ok_or_else(|| {
                    CliError::Flag(format!(
                        "`{v}` is not a verb of subpane; `subpane --help` lists them"
                    ))
                })?;
            // clap names are 'static (without its `string` feature); this process prints
            // one page and exits.
            let name: &'static str = Box::leak(format!("subpane-{v}").into_boxed_str());
            sub.name(name).bin_name(format!("subpane {v}"))
        }
    };
    let mut out = Vec::new();
    clap_mangen::Man::new(page)
        .render(&mut out)
        .map_err(|source| CliError::Print {
            path: "the man page".into(),
            source,
        })?;
    super::common::print(&String::from_utf8_lossy(&out));
    Ok(0)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// Every long flag of every verb (and the global ones).
    fn flags() -> BTreeSet<String> {
        fn walk(cmd: &clap::Command, out: &mut BTreeSet<String>) {
            for a in cmd.get_arguments() {
                if let Some(l) = a.get_long() {
                    out.insert(format!("--{l}"));
                }
            }
            for s in cmd.get_subcommands() {
                walk(s, out);
            }
        }
        let mut out = BTreeSet::from(["--help".to_owned(), "--version".to_owned()]);
        walk(&full_command(), &mut out);
        out
    }

    /// The verbs, for finding `subpane VERB …` in the README.
    fn verbs() -> Vec<String> {
        full_command()
            .get_subcommands()
            .filter(|s| !s.is_hide_set())
            .map(|s| s.get_name().to_owned())
            .collect()
    }

    /// `--flag` words of `text` (a flag ends where a letter, digit or `-` does not follow).
    fn flag_words(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        let b = text.as_bytes();
        let mut i = 0;
        while let Some(at) = text[i..].find("--") {
            let start = i + at;
            let mut end = start + 2;
            while end < b.len() && (b[end].is_ascii_alphanumeric() || b[end] == b'-') {
                end += 1;
            }
            let before_ok =
                start == 0 || !b[start - 1].is_ascii_alphanumeric() && b[start - 1] != b'-';
            if before_ok && end > start + 2 && b[start + 2].is_ascii_lowercase() {
                out.push(text[start..end].to_owned());
            }
            i = end.max(start + 2);
        }
        out
    }

    /// The flags the README gives subpane: in the option tables (rows that start with a
    /// flag), and after `subpane VERB` up to the end of its code span or line.
    fn readme_flags() -> BTreeSet<String> {
        let readme = include_str!("../../README.md");
        let verbs = verbs();
        let mut out = BTreeSet::new();
        for line in readme.lines() {
            let t = line.trim_start();
            if t.starts_with("| `--") {
                let cell = t.split(" | ").next().unwrap_or(t);
                out.extend(flag_words(cell));
            }
            let mut rest = line;
            while let Some(at) = rest.find("subpane ") {
                let after = &rest[at + "subpane ".len()..];
                rest = after;
                if !verbs
                    .iter()
                    .any(|v| after.starts_with(&format!("{v} ")) || after == v)
                {
                    continue;
                }
                let span = after.split('`').next().unwrap_or(after);
                out.extend(flag_words(span));
            }
        }
        out
    }

    #[test]
    fn every_flag_the_readme_names_exists() {
        let known = flags();
        let named = readme_flags();
        assert!(
            named.len() > 40,
            "the README's flags were not found: {named:?}"
        );
        let missing: Vec<&String> = named.iter().filter(|f| !known.contains(*f)).collect();
        assert!(
            missing.is_empty(),
            "the README names flags the CLI lacks: {missing:?}"
        );
    }

    #[test]
    fn flags_are_found_in_words() {
        assert_eq!(
            flag_words("subpane logs --pretty -f x--y --a1 -- --X"),
            ["--pretty", "--a1"]
        );
    }

    #[test]
    fn completions_and_the_man_page_know_the_verbs_and_their_flags() {
        let mut out = Vec::new();
        clap_complete::generate(
            clap_complete::Shell::Bash,
            &mut public_command(),
            "subpane",
            &mut out,
        );
        let bash = String::from_utf8(out).unwrap();
        for w in ["top", "completions", "--pretty", "--worktree", "--network"] {
            assert!(bash.contains(w), "bash completion lacks {w}");
        }
        assert!(!bash.contains("__worker"), "hidden verbs are not completed");
        let mut out = Vec::new();
        clap_mangen::Man::new(public_command())
            .render(&mut out)
            .unwrap();
        let page = String::from_utf8(out).unwrap();
        assert!(
            page.contains(".TH subpane 1") && page.contains("fanout"),
            "{page}"
        );
    }
}
