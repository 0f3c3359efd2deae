//! The scripts in `examples/` run as tests, so they never rot.

use crate::harness::{BIN, TestEnv};

#[test]
fn parallel_checks_example_reports_every_run() {
    let env = TestEnv::new();
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/parallel-checks.sh");
    let out: crate::harness::Ran = env
        .cmd_raw(&script)
        .env("SUBPANE", BIN)
        .output()
        .expect("run the example")
        .into();
    // One of the three runs times out on purpose: the script exits with the worst code.
    assert_eq!(
        out.code, 124,
        "stdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(
        lines.iter().filter(|l| l.contains(" completed ")).count(),
        2,
        "{}",
        out.stdout
    );
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.contains(" failed ") && l.contains("timeout"))
            .count(),
        1,
        "{}",
        out.stdout
    );
    assert_eq!(
        lines.iter().filter(|l| l.ends_with(": 1 event(s)")).count(),
        2,
        "{}",
        out.stdout
    );
    // The runs it started are all recorded and finished.
    let ls = env.sp(["ls", "--json"]).json();
    let runs = ls.as_array().unwrap();
    assert_eq!(runs.len(), 3);
    assert!(runs.iter().all(|r| r["status"] != "running"), "{ls}");
    assert!(runs.iter().all(|r| {
        r["labels"]["batch"]
            .as_str()
            .is_some_and(|b| b.starts_with("checks-"))
    }));
    env.assert_no_leftovers();
}
