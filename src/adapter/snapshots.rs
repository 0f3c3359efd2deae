//! Every adapter's verdicts on recorded transcripts and on odd shapes (wrong types, escapes,
//! truncated lines, invalid UTF-8), compared with snapshots in `tests/fixtures/parsed/`.
//!
//! The snapshots were recorded with the parsers that read every kept event into a
//! `serde_json::Value` map; the typed, borrowed parsers that replaced them must give the same
//! verdict, pane items and report for every line. `SUBPANE_BLESS=1 cargo test snapshots`
//! rewrites them (review the diff: a change there is a change of behaviour).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::{LineAction, StreamParser, adapter_for};
use crate::spec::AgentKind;

fn dump(mut parser: Box<dyn StreamParser>, stream: &[u8], room: bool) -> String {
    let mut out = String::new();
    for (i, line) in stream.split(|b| *b == b'\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        parser.set_pane_room(room);
        let r = parser.on_line(line);
        let action = match &r.action {
            LineAction::Keep => "keep".to_owned(),
            LineAction::Drop => "drop".to_owned(),
            LineAction::Plain => "plain".to_owned(),
            LineAction::KeepAndPlain => "keep and plain".to_owned(),
            LineAction::Replace(b) => format!("replace {}", String::from_utf8_lossy(b)),
        };
        let term = if r.terminal { " terminal" } else { "" };
        let _ = writeln!(out, "{i}: {action}{term} {:?}", r.pane);
    }
    let _ = writeln!(out, "so far: {:?}", parser.so_far());
    let mut report = parser.finish(b"Error: the stderr tail\n");
    // A reset said as a clock time is the next such moment from now: not a snapshot's.
    if let Some(l) = report.output.usage_limit.as_mut()
        && l.retry_at.is_some()
    {
        l.retry_at = Some("(the next such moment)".into());
    }
    let _ = writeln!(out, "report: {report:#?}");
    out
}

fn inputs(kind: AgentKind) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut all: Vec<PathBuf> = std::fs::read_dir(root.join("transcripts").join(kind.as_str()))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    all.push(root.join(format!("odd_shapes/{}.jsonl", kind.as_str())));
    all.sort();
    all
}

#[test]
fn parsers_match_their_snapshots() {
    let bless = std::env::var_os("SUBPANE_BLESS").is_some();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/parsed");
    let mut checked = 0;
    for kind in [AgentKind::Pi, AgentKind::Claude, AgentKind::Codex] {
        for input in inputs(kind) {
            let stream = std::fs::read(&input).unwrap();
            let name = match input.parent().and_then(Path::file_name) {
                Some(d) if d == "odd_shapes" => "odd_shapes".to_owned(),
                _ => input.file_stem().unwrap().to_string_lossy().into_owned(),
            };
            for room in [true, false] {
                let got = dump(adapter_for(kind).parser(), &stream, room);
                let room_s = if room { "room" } else { "full" };
                let snap = root.join(format!("{}/{name}.{room_s}.txt", kind.as_str()));
                if bless {
                    std::fs::create_dir_all(snap.parent().unwrap()).unwrap();
                    std::fs::write(&snap, &got).unwrap();
                }
                let want = std::fs::read_to_string(&snap)
                    .unwrap_or_else(|e| panic!("{}: {e}", snap.display()));
                if got != want {
                    let first = got
                        .lines()
                        .zip(want.lines())
                        .find(|(g, w)| g != w)
                        .map(|(g, w)| format!("got:  {g}\nwant: {w}"))
                        .unwrap_or_else(|| "(lengths differ)".to_owned());
                    panic!(
                        "{} differs from {}\n{first}",
                        input.display(),
                        snap.display()
                    );
                }
                checked += 1;
            }
        }
    }
    assert!(checked >= 2 * 21, "only {checked} snapshots checked");
}
