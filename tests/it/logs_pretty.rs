//! `logs` of an agent: on a terminal (or with `--pretty`) its events read as its pane did,
//! piped (or with `--events`) they are the JSON lines; `-f --pretty` renders as they come.
//!
//! The agent is a stand-in `pi` on PATH that prints a transcript recorded from the real CLI
//! (`tests/fixtures/transcripts/pi/tool_write.jsonl`): no model, no Node, quick.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::mpsc;

use crate::harness::{DEADLINE, TestEnv, fixture, touch, wait_until};
use crate::terminal::Terminal;

/// A directory with a `pi` that prints the transcript; with `flag`, it stops after the first
/// tool call until the flag exists.
pub(crate) fn fake_pi(env: &TestEnv, flag: Option<&Path>) -> PathBuf {
    let bin = env.root.path().join("fake-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let transcript = fixture("transcripts/pi/tool_write.jsonl");
    let wait = match flag {
        Some(f) => format!(
            "[ \"$n\" = 13 ] && while [ ! -e '{}' ]; do sleep 0.02; done",
            f.display()
        ),
        None => ":".into(),
    };
    let script = format!(
        "#!/bin/sh\nn=0\nwhile IFS= read -r line; do printf '%s\\n' \"$line\"; n=$((n+1)); {wait}; done < '{}'\n",
        transcript.display()
    );
    let pi = bin.join("pi");
    std::fs::write(&pi, script).unwrap();
    let mut p = std::fs::metadata(&pi).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut p, 0o755);
    std::fs::set_permissions(&pi, p).unwrap();
    bin
}

pub(crate) fn with_path(bin: &Path) -> String {
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

#[test]
fn an_agents_log_reads_like_its_pane_on_a_terminal_and_is_json_when_piped() {
    let env = TestEnv::new();
    let bin = fake_pi(&env, None);
    let r: crate::harness::Ran = env
        .cmd()
        .env("PATH", with_path(&bin))
        .args([
            "run",
            "--run-id",
            "lp",
            "--agent",
            "pi",
            "--task",
            "write a file",
        ])
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, 0, "{r:?}");
    let events = std::fs::read(env.attempt_dir("lp", 1).join("events.jsonl")).unwrap();
    // Piped: the JSON lines, byte for byte.
    let piped = env.cmd().args(["logs", "lp"]).output().unwrap();
    assert_eq!(piped.stdout, events);
    // --pretty piped: the pane's view, without colour.
    let pretty = env.sp(["logs", "--pretty", "lp"]);
    assert_eq!(pretty.code, 0, "{pretty:?}");
    let want = [
        "pi session ",
        "▸ bash echo hi > made_by_agent.txt",
        "  ↳ (no output)",
        "I wrote made_by_agent.txt.",
        "done · tokens in ",
    ];
    let mut at = 0;
    for w in want {
        let i = pretty.stdout[at..]
            .find(w)
            .unwrap_or_else(|| panic!("{w:?} missing or out of order:\n{}", pretty.stdout));
        at += i + w.len();
    }
    assert!(!pretty.stdout.contains("\x1b["), "{}", pretty.stdout);
    assert!(!pretty.stdout.contains("\"type\""), "{}", pretty.stdout);
    // On a terminal it is the default; --events keeps the JSON lines there.
    let t = Terminal::subpane(&env, "lp-term", (150, 40), &[], &["logs", "lp"]);
    t.wait_exit();
    let s = t.history();
    assert!(s.contains("▸ bash echo hi > made_by_agent.txt"), "{s}");
    assert!(s.contains("I wrote made_by_agent.txt."), "{s}");
    assert!(!s.contains("\"type\":"), "{s}");
    let t = Terminal::subpane(&env, "lp-ev", (150, 40), &[], &["logs", "--events", "lp"]);
    t.wait_exit();
    assert!(
        t.history().contains("{\"type\":\"session\""),
        "{}",
        t.history()
    );
    env.assert_no_leftovers();
}

#[test]
fn logs_follow_pretty_renders_events_as_they_come() {
    let env = TestEnv::new();
    let flag = env.root.path().join("go-on");
    let bin = fake_pi(&env, Some(&flag));
    let r: crate::harness::Ran = env
        .cmd()
        .env("PATH", with_path(&bin))
        .args([
            "run", "--detach", "--run-id", "lf", "--agent", "pi", "--task", "x",
        ])
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, 0, "{r:?}");
    let mut child = env
        .cmd()
        .args(["logs", "-f", "--pretty", "lf"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines() {
            if tx.send(l.unwrap_or_default()).is_err() {
                break;
            }
        }
    });
    // The tool call shows while the agent is still stopped before its answer.
    let mut seen = Vec::new();
    wait_until("the tool call from logs -f", || {
        while let Ok(l) = rx.try_recv() {
            seen.push(l);
        }
        seen.iter()
            .any(|l| l.contains("▸ bash echo hi"))
            .then_some(())
    });
    assert!(!seen.iter().any(|l| l.contains("I wrote")), "{seen:?}");
    assert!(!env.attempt_dir("lf", 1).join("result.json").exists());
    touch(&flag);
    let status = wait_until("logs -f to end with the attempt", || {
        child.try_wait().unwrap()
    });
    assert!(status.success(), "{status:?}");
    let mut tail = Vec::new();
    while let Ok(l) = rx.recv_timeout(DEADLINE) {
        tail.push(l);
    }
    let all = [seen, tail].concat().join("\n");
    assert!(
        all.contains("I wrote made_by_agent.txt.") && all.contains("done · tokens"),
        "{all}"
    );
    env.assert_no_leftovers();
}
