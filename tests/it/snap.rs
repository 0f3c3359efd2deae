//! Snapshots of what the command line answers: `subpane ARGS` run in a [`TestEnv`] (stdin
//! null, stdout and stderr piped, so no terminal), rendered as its exit code, stdout and
//! stderr, with everything that differs between runs and machines replaced by a placeholder:
//! the test's paths (`[HOME]`, `[TMP]`), the binary (`[BIN]`), generated ids (`[RUN]`,
//! `[GROUP]`), durations (`[TIME]`), timestamps (`[DATE]`), pids (`[PID]`, `[TICKS]`), tmux
//! panes (`[PANE]`), hashes (`[HASH]`) and the sizes of records that hold any of these (`[BYTES]`).
//!
//! `sp_snapshot!("name", env, [args…])` compares with `tests/it/snapshots/it__MODULE__name.snap`
//! and fails the test when they differ (writing the new text beside it as `.snap.new`).
//! `INSTA_UPDATE=always cargo nextest run -E 'test(snap)'` rewrites the snapshots instead;
//! review the change with `git diff` (or `cargo insta review`, with cargo-insta installed).

use std::ffi::OsStr;
use std::path::Path;

use regex::{Captures, Regex};

use crate::harness::{BIN, Ran, TestEnv, shell_quote};

/// `subpane ARGS` in `env` (or with a [`Snap`]'s own filters: `snap => ARGS`), rendered and
/// filtered, compared with the snapshot `name`, whose header names the command.
macro_rules! sp_snapshot {
    ($name:expr, $env:expr, $args:expr) => {
        $crate::snap::sp_snapshot!($name, $crate::snap::Snap::new(&$env) => $args)
    };
    ($name:expr, $snap:expr => $args:expr) => {{
        let (command, rendered) = $snap.answer($args);
        insta::with_settings!({ description => command, omit_expression => true }, {
            insta::assert_snapshot!($name, rendered);
        });
    }};
}
pub(crate) use sp_snapshot;

/// The filters of one test's snapshots; [`Snap::filter`] adds a test's own.
pub struct Snap<'a> {
    env: &'a TestEnv,
    filters: Vec<(Regex, String)>,
}

impl<'a> Snap<'a> {
    pub fn new(env: &'a TestEnv) -> Self {
        let mut snap = Snap {
            env,
            filters: Vec::new(),
        };
        // Longest first: the home and the socket live under the temp dir.
        let paths = [
            (BIN.to_owned(), "[BIN]"),
            (env.home.display().to_string(), "[HOME]"),
            (env.root.path().display().to_string(), "[TMP]"),
        ];
        for (path, placeholder) in paths {
            snap = snap.literal(&path, placeholder);
            if let Ok(real) = Path::new(&path).canonicalize() {
                snap = snap.literal(&real.display().to_string(), placeholder);
            }
        }
        snap
    }

    /// Replaces what `pattern` (a regex) matches with `replacement` (`$1` names a group),
    /// before the shared filters.
    pub fn filter(mut self, pattern: &str, replacement: &str) -> Self {
        self.filters
            .push((Regex::new(pattern).unwrap(), replacement.to_owned()));
        self
    }

    /// Replaces the text `text` with `replacement`.
    pub fn literal(self, text: &str, replacement: &str) -> Self {
        self.filter(&regex::escape(text), replacement)
    }

    /// Replaces the path the test's PATH gives `program` (which differs between machines:
    /// `/usr/bin/echo`, `/bin/echo`) with `[program]`, e.g. `[echo]`.
    pub fn program(self, program: &str) -> Self {
        let found = which::which(program).unwrap_or_else(|e| panic!("{program}: {e}"));
        self.literal(&found.display().to_string(), &format!("[{program}]"))
    }

    /// `subpane ARGS` as a shell line, and what it answered, rendered and filtered.
    pub fn answer<I, S>(&self, args: I) -> (String, String)
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let args: Vec<_> = args.into_iter().map(|a| a.as_ref().to_owned()).collect();
        let mut cmd = self.env.cmd();
        // A test run from inside an attempt (or a shell with its own home) must not answer
        // differently: only this test's own settings reach subpane.
        for (key, _) in std::env::vars_os() {
            let k = key.to_string_lossy();
            if k.starts_with("SUBPANE_") && k != "SUBPANE_HOME" && k != "SUBPANE_TMUX_SOCKET" {
                cmd.env_remove(&key);
            }
        }
        // Help is wrapped to $COLUMNS when it is set (at most 100); no colour, whatever the
        // caller's environment forces.
        cmd.env("COLUMNS", "100")
            .env_remove("LINES")
            .env_remove("CLICOLOR_FORCE")
            .env_remove("FORCE_COLOR");
        let ran: Ran = cmd.args(&args).output().expect("run subpane").into();
        let mut line = String::from("subpane");
        for a in &args {
            let a = a.to_string_lossy();
            let plain = !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=@%+:,".contains(c));
            line.push(' ');
            line.push_str(&if plain {
                a.into_owned()
            } else {
                shell_quote(&a)
            });
        }
        (normalize(&self.filters, &line), self.render(&ran))
    }

    /// `ran` as the snapshot shows it.
    pub fn render(&self, ran: &Ran) -> String {
        let text = format!(
            "exit code: {}\n----- stdout -----\n{}\n----- stderr -----\n{}\n",
            ran.code, ran.stdout, ran.stderr
        );
        normalize(&self.filters, &text)
    }
}

/// A measured duration as the CLI prints it (`0.006s`, `12.3s`, `2m 05s`, `1h 02m`, `850ms`),
/// the spaces before it, and two spaces after it when a column follows.
const DURATION: &str = r"( *)\b(\d+h \d{2}m|\d+m \d{2}s|\d+\.\d+s|\d+ms)\b(  )?";

fn normalize(own: &[(Regex, String)], text: &str) -> String {
    let mut out = text.to_owned();
    for (re, with) in own {
        out = re.replace_all(&out, with.as_str()).into_owned();
    }
    let plain: &[(&str, &str)] = &[
        // Hashes before anything that could take a piece of one.
        (r"\b[0-9a-f]{64}\b", "[HASH]"),
        // Generated ids: a group id is `g-` and a run id.
        (r"\bg-\d{8}-\d{6}-[0-9a-f]{6}\b", "[GROUP]"),
        (r"\b\d{8}-\d{6}-[0-9a-f]{6}\b", "[RUN]"),
        // RFC 3339 timestamps of the records and envelopes.
        (
            r"\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})",
            "[DATE]",
        ),
        // Processes, their start times and their panes.
        (r#""pid": \d+"#, r#""pid": [PID]"#),
        (r#""start_ticks": \d+"#, r#""start_ticks": [TICKS]"#),
        (r"\bpid \d+\b", "pid [PID]"),
        (r#""pane_id": "%\d+""#, r#""pane_id": "[PANE]""#),
        // Measured milliseconds in JSON.
        (r#""(duration_ms|elapsed_ms)": \d+"#, r#""$1": [TIME]"#),
        // The size of a JSON record, which holds paths, pids or times.
        (r#"("path": "[^"]*\.json",\s*"bytes": )\d+"#, "$1[BYTES]"),
    ];
    for (pattern, with) in plain {
        out = Regex::new(pattern)
            .unwrap()
            .replace_all(&out, *with)
            .into_owned();
    }
    // A table's start time (`2026-12-02 06:58:55`), kept as wide so the columns stay aligned.
    let started = Regex::new(r"\b\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\b").unwrap();
    out = started
        .replace_all(&out, |c: &Captures| {
            format!("{:<w$}", "[DATE]", w = c[0].len())
        })
        .into_owned();
    // A duration: in a column (two spaces follow), right-aligned as wide as it was with the
    // spaces before it, so the column stays aligned whatever the time was; elsewhere the
    // spaces are kept and the value replaced. `500ms` in a hint (followed by `,`) is a
    // user's, not a measure: a bare `ms` counts only in a column or at the end of a line.
    let duration = Regex::new(DURATION).unwrap();
    let before = out;
    out = duration
        .replace_all(&before, |c: &Captures| {
            let (spaces, value) = (&c[1], &c[2]);
            let column = c.get(3).is_some();
            let line_ends = before[c.get(0).unwrap().end()..]
                .chars()
                .next()
                .is_none_or(|ch| ch == '\n');
            if value.ends_with("ms") && !column && !line_ends {
                return c[0].to_owned();
            }
            if column {
                let width = (spaces.len() + value.len()).max(1 + "[TIME]".len());
                format!("{:>width$}  ", "[TIME]")
            } else {
                format!("{spaces}[TIME]")
            }
        })
        .into_owned();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(text: &str) -> String {
        normalize(&[], text)
    }

    #[test]
    fn snap_filters_keep_tables_aligned() {
        let table = "RUN  STATUS     DURATION  WHAT\n\
                     a1   completed      0.0s  echo one\n\
                     b2   completed     12.5s  echo two\n";
        assert_eq!(
            n(table),
            "RUN  STATUS     DURATION  WHAT\n\
             a1   completed    [TIME]  echo one\n\
             b2   completed    [TIME]  echo two\n"
        );
        assert_eq!(n("duration  0.006s\n"), "duration  [TIME]\n");
        assert_eq!(n("1 completed in 0.0s\n"), "1 completed in [TIME]\n");
        assert_eq!(n("elapsed   850ms\n"), "elapsed   [TIME]\n");
        assert_eq!(n("took 2m 05s, then"), "took [TIME], then");
        assert_eq!(
            n("a1  2026-12-02 06:58:55  x"),
            format!("a1  {:<19}  x", "[DATE]")
        );
    }

    #[test]
    fn snap_filters_leave_what_a_user_wrote() {
        let hint = "use a number with a unit, like 500ms, 30s, 5m or 2h; e.g. 12h, 7d\n";
        assert_eq!(n(hint), hint);
        assert_eq!(n("2 runs: 1 completed\n"), "2 runs: 1 completed\n");
        assert_eq!(n("run fix-1 attempt 2\n"), "run fix-1 attempt 2\n");
    }

    #[test]
    fn snap_filters_replace_ids_dates_pids_and_hashes() {
        let text = r#"run 20261202-065848-63d785 of g-20261202-065932-33f3e4
"started_at": "2026-12-02T06:58:48.385Z",
"pid": 4230, "start_ticks": 481223, "pane_id": "%4", "duration_ms": 5,
{"kind": "spec", "path": "spec.json", "bytes": 1071, "sha256": "0a7b9c58c93908c1477924d99cbac8cc6ae4a0abbb6d49316d2d94463184f58b"}
{"kind": "stdout", "path": "stdout.log", "bytes": 6}
worker pid 77 gone"#;
        assert_eq!(
            n(text),
            r#"run [RUN] of [GROUP]
"started_at": "[DATE]",
"pid": [PID], "start_ticks": [TICKS], "pane_id": "[PANE]", "duration_ms": [TIME],
{"kind": "spec", "path": "spec.json", "bytes": [BYTES], "sha256": "[HASH]"}
{"kind": "stdout", "path": "stdout.log", "bytes": 6}
worker pid [PID] gone"#
        );
    }
}
