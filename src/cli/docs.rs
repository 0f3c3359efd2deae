//! `subpane completions SHELL` and `subpane man [VERB]`: generated from the same clap
//! definitions as `--help` (clap_complete, clap_mangen), so they never disagree with it. A
//! test checks that every flag the README names exists here too.

use std::path::{Path, PathBuf};

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
The script asks subpane itself what to offer (verbs, flags, and the run ids and groups of
the home), so it completes run ids and stays right after an upgrade.
Install it where the shell looks, making the folder first:
  bash, with the bash-completion package (it reads this folder; Debian: bash-completion):
    mkdir -p ~/.local/share/bash-completion/completions
    subpane completions bash > ~/.local/share/bash-completion/completions/subpane
  bash without it: add `source <(subpane completions bash)` to ~/.bashrc
  zsh: mkdir -p ~/.zfunc && subpane completions zsh > ~/.zfunc/_subpane
    and `fpath+=(~/.zfunc); autoload -U compinit && compinit` in ~/.zshrc
  fish: mkdir -p ~/.config/fish/completions
    subpane completions fish > ~/.config/fish/completions/subpane.fish")]
pub struct CompletionsArgs {
    /// The shell to complete for
    #[arg(value_enum)]
    pub shell: Shell,
}

#[derive(Debug, Args)]
#[command(after_help = "\
Read a page with `subpane man | man -l -`, or install every page and read them with man:
  subpane man --install          # beside the binary: ~/.cargo/share/man/man1 for ~/.cargo/bin
  man subpane                    # man finds DIR/../share/man for every DIR/bin on PATH
  subpane man --install ~/.local/share/man/man1   # or any directory on your MANPATH")]
pub struct ManArgs {
    /// A verb's own page (`subpane man run`); without it, the page of subpane
    #[arg(value_name = "VERB", conflicts_with = "install")]
    pub verb: Option<String>,
    /// Write every page (subpane.1 and subpane-VERB.1 for each verb) into DIR, made if
    /// missing, instead of printing one [default: share/man/man1 beside the binary's bin/]
    #[arg(long, value_name = "DIR", num_args = 0..=1)]
    pub install: Option<Option<PathBuf>>,
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

/// The environment variable through which the completion script asks subpane for words.
const COMPLETE_VAR: &str = "_SUBPANE_COMPLETE";

/// The completion script for `a.shell` on stdout: it calls `subpane` back (with
/// [`COMPLETE_VAR`] set) for the words, see [`complete_if_asked`].
pub fn completions(a: CompletionsArgs) -> Result<i32, CliError> {
    use clap_complete::env::EnvCompleter;
    let shell: &dyn EnvCompleter = match a.shell {
        Shell::Bash => &clap_complete::env::Bash,
        Shell::Zsh => &clap_complete::env::Zsh,
        Shell::Fish => &clap_complete::env::Fish,
    };
    let mut out = Vec::new();
    shell
        .write_registration(COMPLETE_VAR, "subpane", "subpane", "subpane", &mut out)
        .map_err(|e| CliError::Flag(format!("cannot write the completion script: {e}")))?;
    super::common::print(&String::from_utf8_lossy(&out));
    Ok(0)
}

/// Answers a completion script's question (the words for a command line) and exits, when
/// [`COMPLETE_VAR`] is set; returns at once otherwise.
pub fn complete_if_asked() {
    clap_complete::CompleteEnv::with_factory(public_command)
        .var(COMPLETE_VAR)
        .bin("subpane")
        .completer("subpane")
        .complete();
}

/// The run ids of the home (`$SUBPANE_HOME` or the default: a `--home` on the line being
/// completed is not seen), newest first, and `@`: names of directories only, no tmux.
pub fn run_candidates() -> clap_complete::ArgValueCandidates {
    clap_complete::ArgValueCandidates::new(|| {
        let Ok(home) = crate::store::Home::resolve(None) else {
            return Vec::new();
        };
        let mut c: Vec<_> = crate::app::run_names(&home)
            .into_iter()
            .map(clap_complete::CompletionCandidate::new)
            .collect();
        c.push(
            clap_complete::CompletionCandidate::new(crate::app::NEWEST)
                .help(Some("the newest run".into())),
        );
        c
    })
}

/// The fan-out groups of the home, for `--group`.
pub fn group_candidates() -> clap_complete::ArgValueCandidates {
    clap_complete::ArgValueCandidates::new(|| {
        let Ok(home) = crate::store::Home::resolve(None) else {
            return Vec::new();
        };
        crate::app::group_names(&home)
            .into_iter()
            .map(clap_complete::CompletionCandidate::new)
            .collect()
    })
}

/// The man page (roff) of subpane, or of one verb, on stdout; with `--install`, every page
/// into a directory.
pub fn man(a: ManArgs) -> Result<i32, CliError> {
    let mut cmd = public_command();
    cmd.build();
    if let Some(dir) = a.install {
        let dir = match dir {
            Some(d) => d,
            None => beside_the_binary()?,
        };
        return install(&cmd, &dir);
    }
    let page = match &a.verb {
        None => cmd,
        Some(v) => verb_page(&cmd, v).ok_or_else(|| {
            CliError::Flag(format!(
                "`{v}` is not a verb of subpane; `subpane --help` lists them"
            ))
        })?,
    };
    super::common::print(&String::from_utf8_lossy(&render(page)));
    Ok(0)
}

/// The page of one verb, named `subpane-VERB` as the main page's list of verbs names it.
fn verb_page(cmd: &clap::Command, verb: &str) -> Option<clap::Command> {
    let sub = cmd
        .get_subcommands()
        .find(|s| s.get_name() == verb && !s.is_hide_set())
        .cloned()?;
    // clap names are 'static (without its `string` feature); a page is made a few times in
    // a process that then exits.
    let name: &'static str = Box::leak(format!("subpane-{verb}").into_boxed_str());
    Some(sub.name(name).bin_name(format!("subpane {verb}")))
}

/// `share/man/man1` beside the directory of the running binary: man(1) looks in
/// `DIR/../share/man` for every `DIR` on `PATH` (man-db's manpath), so nothing else needs
/// setting up.
fn beside_the_binary() -> Result<PathBuf, CliError> {
    let exe = std::env::current_exe().map_err(|source| CliError::Print {
        path: "the binary's own path".into(),
        source,
    })?;
    let bin = exe.parent().unwrap_or(Path::new("."));
    let prefix = bin.parent().unwrap_or(bin);
    Ok(prefix.join("share/man/man1"))
}

/// Writes every page into `dir` (made if missing), each atomically, and says where.
fn install(cmd: &clap::Command, dir: &Path) -> Result<i32, CliError> {
    let failed = |source| CliError::Print {
        path: dir.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(failed)?;
    let mut pages = vec![("subpane.1".to_owned(), cmd.clone())];
    for v in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = v.get_name();
        if let Some(page) = verb_page(cmd, name) {
            pages.push((format!("subpane-{name}.1"), page));
        }
    }
    for (file, page) in &pages {
        let path = dir.join(file);
        let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(failed)?;
        std::io::Write::write_all(&mut tmp, &render(page.clone())).map_err(failed)?;
        tmp.persist(&path).map_err(|e| failed(e.error))?;
    }
    super::common::print(&format!(
        "installed {} pages in {}: read them with `man subpane` (man looks in \
         DIR/../share/man for each DIR/bin on PATH; elsewhere add the directory above man1 \
         to MANPATH)\n",
        pages.len(),
        dir.display()
    ));
    Ok(0)
}

/// A page: clap_mangen's sections, then the examples, the exit status, and for subpane(1)
/// itself the environment and files, from the tables `--help` shows too.
fn render(page: clap::Command) -> Vec<u8> {
    use clap_mangen::roff::{Roff, roman};
    let main = page.get_name() == "subpane";
    let examples = page.get_after_help().map(|h| h.to_string());
    // The main page's after-help is the tables below, rendered as sections of their own.
    let man = clap_mangen::Man::new(page.clone());
    let mut out = Vec::new();
    // Writing to a Vec cannot fail.
    let _ = man.render_title(&mut out);
    let _ = man.render_name_section(&mut out);
    let _ = man.render_synopsis_section(&mut out);
    let _ = man.render_description_section(&mut out);
    if page.get_arguments().any(|a| !a.is_hide_set()) {
        let _ = man.render_options_section(&mut out);
    }
    if page.get_subcommands().any(|s| !s.is_hide_set()) {
        let _ = man.render_subcommands_section(&mut out);
    }
    let mut roff = Roff::default();
    if let Some(ex) = examples.filter(|_| !main) {
        roff.control("SH", ["EXAMPLES"]);
        roff.control("nf", []);
        for line in ex.lines().filter(|l| *l != "Examples:") {
            roff.text([roman(line)]);
        }
        roff.control("fi", []);
    }
    super::reference::roff_section(&mut roff, "EXIT STATUS", &super::reference::exit_rows());
    if main {
        use super::reference::{ENVIRONMENT, FILES, roff_section, rows};
        roff_section(&mut roff, "ENVIRONMENT", &rows(ENVIRONMENT));
        roff_section(&mut roff, "FILES", &rows(FILES));
    } else {
        roff.control("SH", ["SEE ALSO"]);
        roff.text([roman("subpane(1)")]);
    }
    let _ = roff.to_writer(&mut out);
    if page.get_version().is_some() {
        let _ = man.render_version_section(&mut out);
    }
    out
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
        let words = |line: &[&str]| {
            let mut cmd = public_command();
            cmd.build();
            let args = line.iter().map(std::ffi::OsString::from).collect();
            clap_complete::engine::complete(&mut cmd, args, line.len() - 1, None)
                .unwrap()
                .into_iter()
                .map(|c| c.get_value().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
        };
        let verbs = words(&["subpane", ""]);
        for w in ["top", "completions", "run", "fanout"] {
            assert!(
                verbs.iter().any(|v| v == w),
                "completion lacks {w}: {verbs:?}"
            );
        }
        assert!(
            !verbs.iter().any(|v| v.starts_with("__")),
            "hidden verbs are not completed: {verbs:?}"
        );
        let flags = words(&["subpane", "run", "--"]);
        for w in ["--sandbox", "--worktree", "--network"] {
            assert!(
                flags.iter().any(|v| v == w),
                "completion lacks {w}: {flags:?}"
            );
        }
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
