//! Invalid input: exit 2, a message on stderr naming the problem, and nothing created.

use std::path::Path;

use crate::harness::{Ran, TestEnv};

/// Runs `subpane ARGS` in a fresh environment and checks the refusal: exit 2, a message on
/// stderr that contains every one of `mentions`, nothing on stdout, and no home created.
fn refused(args: &[&str], mentions: &[&str]) -> Ran {
    refused_with(&[], args, mentions)
}

/// [`refused`], with `vars` added to the environment of `subpane`.
fn refused_with(vars: &[(&str, &str)], args: &[&str], mentions: &[&str]) -> Ran {
    let env = TestEnv::new();
    let r: Ran = env
        .cmd()
        .envs(vars.iter().copied())
        .args(args)
        .output()
        .expect("run subpane")
        .into();
    assert_eq!(r.code, 2, "subpane {args:?} should be refused: {r:?}");
    assert!(
        r.stdout.is_empty(),
        "subpane {args:?} printed on stdout: {r:?}"
    );
    for m in mentions {
        assert!(
            r.stderr.contains(m),
            "subpane {args:?}: stderr does not mention {m:?}:\n{}",
            r.stderr
        );
    }
    assert!(
        !env.home.exists(),
        "subpane {args:?} created the home {}",
        env.home.display()
    );
    assert!(
        !env.socket.exists(),
        "subpane {args:?} started a tmux server"
    );
    assert!(env.leftovers().is_empty());
    r
}

#[test]
fn bad_run_ids_are_refused() {
    refused(&["run", "--run-id", "", "--", "true"], &["run id is empty"]);
    let long = "a".repeat(129);
    refused(&["run", "--run-id", &long, "--", "true"], &["129", "128"]);
    refused(&["run", "--run-id", ".", "--", "true"], &["`.`"]);
    refused(&["run", "--run-id", "..", "--", "true"], &["`..`"]);
    refused(&["run", "--run-id", "a/b", "--", "true"], &["a/b"]);
    refused(
        &["run", "--run-id", "../escape", "--", "true"],
        &["../escape"],
    );
    refused(&["run", "--run-id=-x", "--", "true"], &["-x"]);
    refused(&["run", "--run-id", "-x", "--", "true"], &["-x"]);
    refused(&["run", "--run-id", "a b", "--", "true"], &["a b"]);
    refused(&["run", "--run-id", "_a", "--", "true"], &["_a"]);
}

#[test]
fn a_128_char_id_is_accepted() {
    let env = TestEnv::new();
    let id = "b".repeat(128);
    let r = env.sp(["run", "--json", "--run-id", &id, "--", "true"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["run_id"], id.as_str());
}

#[test]
fn an_existing_run_id_is_refused_and_the_run_is_untouched() {
    let env = TestEnv::new();
    let first = env.sp(["run", "--json", "--run-id", "dup", "--", "echo", "first"]);
    assert_eq!(first.code, 0, "{first:?}");
    let snapshot = |p: &Path| -> Vec<(String, Vec<u8>)> {
        let mut v: Vec<(String, Vec<u8>)> = walk(p)
            .into_iter()
            .map(|f| (f.display().to_string(), std::fs::read(&f).unwrap()))
            .collect();
        v.sort();
        v
    };
    let before = snapshot(&env.run_dir("dup"));
    let r = env.sp(["run", "--json", "--run-id", "dup", "--", "echo", "second"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("dup") && r.stderr.contains("already exists"),
        "{}",
        r.stderr
    );
    assert!(r.stdout.is_empty(), "{r:?}");
    assert_eq!(
        snapshot(&env.run_dir("dup")),
        before,
        "the existing run was changed"
    );
    assert_eq!(
        std::fs::read_to_string(env.attempt_dir("dup", 1).join("stdout.log")).unwrap(),
        "first\n"
    );
    assert_eq!(std::fs::read_dir(env.home.join("runs")).unwrap().count(), 1);
    env.assert_no_leftovers();
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        // Regular files only: the attempt's done.fifo would block a read.
        if p.is_dir() {
            out.extend(walk(&p))
        } else if p.is_file() {
            out.push(p)
        }
    }
    out
}

/// A value that is not a duration gets one message, the same from every verb: what was wrong
/// with it and what is accepted, never the parser's own words ("expected number at 0").
#[test]
fn a_bad_duration_says_once_what_was_wrong_and_what_is_accepted() {
    let env = TestEnv::new();
    assert_eq!(env.sp(["run", "--run-id", "r", "--", "true"]).code, 0);
    for (value, says) in [
        (
            "5",
            "--timeout `5` needs a unit; give 5s, 5m or 5h (or 500ms)",
        ),
        (
            "soon",
            "--timeout `soon` is not a duration; give a number with a unit, like 30s, 5m or 1h30m",
        ),
    ] {
        for args in [
            &["run", "--timeout", value, "--", "true"][..],
            &["wait", "--timeout", value, "r"],
        ] {
            let r = env.sp(args);
            assert_eq!(r.code, 2, "{args:?}: {r:?}");
            assert_eq!(r.stderr, format!("subpane: error: {says}\n"), "{args:?}");
        }
    }
}

/// `--timeout -1` reads `-1` as a flag. The advice to write `-- -1` would make it the program
/// (or a run id): the error says what the flag takes instead, and a value of another flag
/// that starts with `-` is shown the form that passes it.
#[test]
fn a_value_that_starts_with_a_dash_is_not_sent_after_the_double_dash() {
    for args in [
        &["run", "--timeout", "-1", "--", "true"][..],
        &["wait", "--timeout", "-5s", "r"],
        &["gc", "--older-than", "-1d"],
    ] {
        let r = refused(args, &["takes a duration, like 30s or 5m", "starts with -"]);
        assert!(!r.stderr.contains("'-- -"), "{args:?}: {}", r.stderr);
    }
    let r = refused(
        &["run", "--label", "-x", "--", "true"],
        &["--label `-x` starts with -", "write --label=-x"],
    );
    assert!(!r.stderr.contains("'-- -"), "{}", r.stderr);
    // Nor an unknown option of run, after which `--` starts the program.
    let r = refused(
        &["run", "-x", "--", "true"],
        &["`-x` is not an option of run"],
    );
    assert!(!r.stderr.contains("'-- -"), "{}", r.stderr);
    let env = TestEnv::new();
    let r = env.sp(["run", "--label=-x=1", "--json", "--", "true"]);
    assert_eq!(r.code, 0, "the form the error gives works: {r:?}");
}

#[test]
fn malformed_durations_are_refused() {
    refused(
        &["run", "--timeout", "5", "--", "true"],
        &["--timeout", "`5`"],
    );
    refused(
        &["run", "--timeout", "abc", "--", "true"],
        &["--timeout", "abc"],
    );
    refused(
        &["run", "--timeout", "0s", "--", "true"],
        &["--timeout", "greater than zero"],
    );
    refused(&["run", "--timeout", "", "--", "true"], &["--timeout"]);
    refused(
        &["run", "--idle-timeout=-1s", "--", "true"],
        &["--idle-timeout", "-1s"],
    );
    refused(
        &["run", "--idle-timeout", "1x", "--", "true"],
        &["--idle-timeout", "1x"],
    );
    refused(&["run", "--grace", "x", "--", "true"], &["--grace", "`x`"]);
    refused(&["run", "--linger", "10", "--", "true"], &["--linger"]);
}

#[test]
fn a_malformed_tmux_timeout_is_refused_by_every_verb() {
    let var = "SUBPANE_TMUX_TIMEOUT";
    refused_with(&[(var, "5")], &["run", "--", "true"], &[var, "`5`"]);
    refused_with(&[(var, "0s")], &["gc"], &[var, "greater than zero"]);
    refused_with(&[(var, "soon")], &["ls"], &[var, "soon"]);
}

#[test]
fn programs_that_cannot_run_are_refused() {
    refused(
        &["run", "--", "/nonexistent/program"],
        &["/nonexistent/program", "does not exist"],
    );
    refused(
        &["run", "--", "no-such-program-4f9a1c"],
        &["no-such-program-4f9a1c", "PATH"],
    );
    let env = TestEnv::new();
    let not_exec = env.work.join("not_exec.sh");
    std::fs::write(&not_exec, "#!/usr/bin/env bash\necho hi\n").unwrap();
    let r = env.sp(["run", "--", not_exec.to_str().unwrap()]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("not_exec.sh") && r.stderr.contains("not an executable"),
        "{}",
        r.stderr
    );
    assert!(!env.home.exists());
    // A directory is not a program either.
    let r = env.sp(["run", "--", env.work.to_str().unwrap()]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(!env.home.exists());
}

#[test]
fn bad_cwd_is_refused() {
    refused(
        &["run", "--cwd", "/nonexistent/dir", "--", "true"],
        &["--cwd", "/nonexistent/dir"],
    );
    let env = TestEnv::new();
    let file = env.work.join("a_file");
    std::fs::write(&file, "").unwrap();
    let r = env.sp(["run", "--cwd", file.to_str().unwrap(), "--", "true"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("--cwd") && r.stderr.contains("not a directory"),
        "{}",
        r.stderr
    );
    assert!(!env.home.exists());
}

#[test]
fn bad_flags_and_missing_program_are_refused() {
    refused(
        &["run", "--no-such-flag", "--", "true"],
        &["--no-such-flag"],
    );
    refused(&["run"], &["nothing to run"]);
    refused(&["run", "--"], &["nothing to run"]);
    refused(&["run", "--json"], &["nothing to run"]);
    refused(
        &["run", "--label", "novalue", "--", "true"],
        &["--label", "novalue"],
    );
    refused(&["run", "--label", "=v", "--", "true"], &["--label"]);
    refused(&["run", "--env", "1BAD=x", "--", "true"], &["1BAD"]);
    refused(
        &["run", "--env", "NOEQUALS", "--", "true"],
        &["--env", "NOEQUALS"],
    );
    refused(&["run", "--env", "A-B=x", "--", "true"], &["A-B"]);
    refused(&["run", "--task", "do it", "--", "true"], &["--task"]);
    refused(&["bogus-verb"], &["bogus-verb"]);
    refused(&["wait"], &["RUN"]);
}

#[test]
fn unknown_run_ids_are_refused_by_every_verb() {
    for verb in [
        &["status"][..],
        &["wait"],
        &["logs"],
        &["logs", "-f"],
        &["cancel"],
        &["attach"],
        &["status", "--json"],
    ] {
        let args: Vec<&str> = verb.iter().copied().chain(["nope"]).collect();
        refused(&args, &["nope", "subpane ls"]);
    }
    // An invalid id is refused as such, not looked up.
    refused(&["status", "../x"], &["../x"]);
    // With runs present, an unknown one among known ones still refuses the whole wait.
    let env = TestEnv::new();
    assert_eq!(env.sp(["run", "--run-id", "known", "--", "true"]).code, 0);
    let r = env.sp(["wait", "known", "nope"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("nope"), "{}", r.stderr);
    assert!(r.stdout.is_empty(), "{r:?}");
}

#[test]
fn bad_wait_and_gc_durations_are_refused() {
    let env = TestEnv::new();
    assert_eq!(env.sp(["run", "--run-id", "r", "--", "true"]).code, 0);
    for args in [
        &["wait", "--timeout", "5", "r"][..],
        &["wait", "--timeout", "0s", "r"],
        &["gc", "--older-than", "soon"],
        &["cancel", "--grace", "x", "r"],
    ] {
        let r = env.sp(args);
        assert_eq!(r.code, 2, "{args:?}: {r:?}");
        assert!(
            r.stderr.contains("needs a unit")
                || r.stderr.contains("is not a duration")
                || r.stderr.contains("greater than zero"),
            "{args:?}: {}",
            r.stderr
        );
    }
    assert!(env.run_dir("r").exists(), "nothing was removed");
}

/// `subpane mcp --max-wait` takes a duration above zero, checked before anything is served.
#[test]
fn a_bad_max_wait_is_refused() {
    refused(
        &["mcp", "--max-wait", "0s"],
        &["--max-wait", "greater than zero"],
    );
    refused(&["mcp", "--max-wait", "45"], &["--max-wait", "unit"]);
}

/// A budget holds only where the CLI reports the figure as it goes: on a command (which
/// reports no usage), or a cost for an agent whose CLI never reports it while running, it is
/// refused before anything starts; so is a limit of zero.
#[test]
fn budgets_that_cannot_hold_are_refused() {
    refused(
        &["run", "--max-cost", "0.50", "--", "true"],
        &["--max-cost cannot be enforced for a command: it reports no usage"],
    );
    refused(
        &["run", "--max-turns", "3", "--", "true"],
        &["--max-turns cannot be enforced for a command"],
    );
    refused(
        &["run", "--agent", "codex", "--task", "t", "--max-cost", "1"],
        &["--max-cost", "Codex reports no cost"],
    );
    refused(
        &["run", "--agent", "claude", "--task", "t", "--max-cost", "1"],
        &[
            "--max-cost",
            "Claude Code reports its cost only in its final result",
        ],
    );
    refused(
        &["run", "--agent", "pi", "--task", "t", "--max-tokens", "0"],
        &["--max-tokens", "greater than zero"],
    );
    refused(
        &["run", "--agent", "pi", "--task", "t", "--max-cost", "cheap"],
        &["--max-cost", "`cheap` is not an amount in US dollars"],
    );
}
