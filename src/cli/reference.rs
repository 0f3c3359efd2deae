//! What `subpane --help` and the man pages say about exit codes, variables and files, from
//! one table each, so the two never disagree.
//!
//! ```text
//!  EXIT_STATUS, ENVIRONMENT, FILES ──► after_long_help of `subpane --help` (text)
//!                                  └─► EXIT STATUS, ENVIRONMENT, FILES of subpane(1) (roff)
//! ```
//!
//! Common pitfalls:
//! * The exit codes are the constants of [`crate::exit_code`]; a code documented here and
//!   not returned anywhere (or the other way round) is a lie to every script.
//! * Only what a user sets or reads belongs here; variables subpane passes between its own
//!   processes (the worker's, the sandbox helper's) are not a contract.

use std::sync::LazyLock;

use crate::exit_code;

/// The exit codes of `run`, `retry`, `wait`, `fanout` and `status`, and what each means.
pub const EXIT_STATUS: &[(i32, &str)] = &[
    (exit_code::COMPLETED, "completed"),
    (
        exit_code::FAILED,
        "failed: the agent or command failed, its budget stopped it, or the attempt was lost",
    ),
    (
        exit_code::INVALID,
        "invalid input: nothing was started (also every other verb's answer to bad input)",
    ),
    (
        exit_code::STILL_RUNNING,
        "still running: `wait --timeout` passed, or `status` of a run that has not ended",
    ),
    (
        exit_code::TIMED_OUT,
        "timed out: --timeout or --idle-timeout stopped the attempt",
    ),
    (exit_code::CANCELLED, "cancelled"),
];

/// Variables subpane reads, and those it gives the programs it runs.
pub const ENVIRONMENT: &[(&str, &str)] = &[
    ("SUBPANE_HOME", "where runs are recorded, as --home"),
    (
        "XDG_STATE_HOME",
        "without SUBPANE_HOME, the home is $XDG_STATE_HOME/subpane (else ~/.local/state/subpane)",
    ),
    (
        "SUBPANE_TMUX_SOCKET",
        "the private tmux server's socket: a name in tmux's socket directory (default \
         `subpane`), or a path if it contains `/`",
    ),
    (
        "SUBPANE_TMUX_IDLE",
        "how long the private tmux server stays up with no session (default 10m)",
    ),
    (
        "SUBPANE_TMUX_TIMEOUT",
        "how long one tmux command may take before it is killed (default 30s)",
    ),
    (
        "SUBPANE_GIT_TIMEOUT",
        "how long one git command may take before it is killed (default 2m)",
    ),
    ("NO_COLOR", "set: no colour on a terminal"),
    (
        "SUBPANE_RUN_ID, SUBPANE_ATTEMPT, SUBPANE_ATTEMPT_DIR",
        "given to every program subpane runs: its run, attempt and attempt directory",
    ),
    (
        "SUBPANE_OUT_DIR",
        "given to every program: the directory for its artifacts, listed in the envelope",
    ),
    (
        "SUBPANE_DEPTH, SUBPANE_MAX_DEPTH, SUBPANE_CHAIN",
        "given to every program: where it stands among nested runs (see --max-depth)",
    ),
    (
        "SUBPANE_NEST_SOCKET",
        "given to a sandboxed program: where its own `subpane run` asks for a nested run",
    ),
];

/// The files of the home that a user or a script reads.
pub const FILES: &[(&str, &str)] = &[
    (
        "$SUBPANE_HOME/runs/RUN/run.json",
        "the run: its request, labels and attempts",
    ),
    (
        "$SUBPANE_HOME/runs/RUN/attempts/N/",
        "one attempt: spec.json, events.jsonl, stdout.log, stderr.log, output.txt, worker.json",
    ),
    (
        "$SUBPANE_HOME/runs/RUN/attempts/N/result.json",
        "the envelope of how the attempt ended (schema subpane.result/v1), written last and \
         atomically",
    ),
    (
        "$SUBPANE_HOME/runs/RUN/attempts/N/out/",
        "the program's own artifacts ($SUBPANE_OUT_DIR)",
    ),
    (
        "$SUBPANE_HOME/worktrees/",
        concat!(
            "the git worktrees of --worktree attempts: a failed or cancelled one is kept until \
             `subpane gc` removes its run, once the run ended more than ",
            crate::gc_older_than!(),
            " ago (or --older-than)"
        ),
    ),
    (
        "$SUBPANE_HOME/tmux.conf",
        "the private tmux server's configuration (never ~/.tmux.conf)",
    ),
];

/// The three tables as `subpane --help` ends: plain text, one entry a line or two.
pub static AFTER_HELP: LazyLock<String> = LazyLock::new(|| {
    let mut s = String::from("Exit status (of run, retry, wait, fanout and status):\n");
    for (code, meaning) in EXIT_STATUS {
        s.push_str(&format!("  {code:<4} {meaning}\n"));
    }
    for (title, rows) in [("Environment", ENVIRONMENT), ("Files", FILES)] {
        s.push_str(&format!("\n{title}:\n"));
        for (name, meaning) in rows {
            s.push_str(&format!("  {name}\n      {meaning}\n"));
        }
    }
    s.push_str("\n`subpane man` prints the manual; `subpane man --install` installs its pages.");
    s
});

/// The exit codes in one line, as `subpane -h` ends.
pub static SHORT_AFTER_HELP: LazyLock<String> = LazyLock::new(|| {
    let codes: Vec<String> = EXIT_STATUS
        .iter()
        .map(|(c, m)| format!("{c} {}", m.split(':').next().unwrap_or(m)))
        .collect();
    format!(
        "Exit status of run, retry, wait, fanout and status: {}. `subpane --help` says more.",
        codes.join(", ")
    )
});

/// One table as the section `title` of a man page.
pub fn roff_section(roff: &mut clap_mangen::roff::Roff, title: &str, rows: &[(String, &str)]) {
    use clap_mangen::roff::{bold, roman};
    roff.control("SH", [title]);
    for (name, meaning) in rows {
        roff.control("TP", []);
        roff.text([bold(name.as_str())]);
        roff.text([roman(*meaning)]);
    }
}

/// The exit codes as rows of [`roff_section`].
pub fn exit_rows() -> Vec<(String, &'static str)> {
    EXIT_STATUS
        .iter()
        .map(|(c, m)| (c.to_string(), *m))
        .collect()
}

/// Variables or files as rows of [`roff_section`].
pub fn rows(table: &[(&str, &'static str)]) -> Vec<(String, &'static str)> {
    table.iter().map(|(n, m)| ((*n).to_owned(), *m)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every documented code is one of the constants, once; every constant is documented.
    #[test]
    fn the_exit_codes_are_the_constants() {
        let codes: Vec<i32> = EXIT_STATUS.iter().map(|(c, _)| *c).collect();
        let mut sorted = codes.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), codes.len(), "a code listed twice: {codes:?}");
        for c in [
            exit_code::COMPLETED,
            exit_code::FAILED,
            exit_code::INVALID,
            exit_code::STILL_RUNNING,
            exit_code::TIMED_OUT,
            exit_code::CANCELLED,
        ] {
            assert!(codes.contains(&c), "{c} is not documented");
        }
    }

    /// Every variable named is one the code reads or sets (named as a string literal in a
    /// source file other than this one).
    #[test]
    fn every_variable_is_one_of_the_code() {
        fn walk(dir: &std::path::Path, out: &mut String) {
            for e in std::fs::read_dir(dir).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(&p, out);
                } else if p.extension().is_some_and(|x| x == "rs")
                    && !p.ends_with("cli/reference.rs")
                {
                    out.push_str(&std::fs::read_to_string(&p).unwrap());
                }
            }
        }
        let mut sources = String::new();
        walk(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
            &mut sources,
        );
        for (names, _) in ENVIRONMENT {
            for name in names.split(", ") {
                assert!(
                    sources.contains(&format!("\"{name}\"")),
                    "{name} is documented but no source names it"
                );
            }
        }
    }
}
