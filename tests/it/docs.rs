//! `completions` and `man` come from the same definitions as `--help`, touch nothing, and
//! the shells accept the scripts.

use std::process::Command;

use crate::harness::TestEnv;

#[test]
fn completion_scripts_and_man_pages_are_printed_and_touch_nothing() {
    let env = TestEnv::new();
    for shell in ["bash", "zsh", "fish"] {
        let r = env.sp(["completions", shell]);
        assert_eq!(r.code, 0, "{shell}: {r:?}");
        assert!(
            r.stdout.contains("subpane") && r.stdout.contains("--worktree"),
            "{shell}"
        );
    }
    // bash reads its script without complaint, and completes the verbs.
    let script = env.root.path().join("subpane.bash");
    std::fs::write(&script, env.sp(["completions", "bash"]).stdout).unwrap();
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source {}; COMP_WORDS=(subpane lo); COMP_CWORD=1; _subpane subpane lo subpane; echo \"${{COMPREPLY[@]}}\"",
            script.display()
        ))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "logs");
    let man = env.sp(["man"]);
    assert!(
        man.stdout.starts_with(".ie") && man.stdout.contains(".SH SUBCOMMANDS"),
        "{man:?}"
    );
    let run = env.sp(["man", "run"]);
    assert!(
        run.stdout.contains("subpane\\-run") && run.stdout.contains("worktree"),
        "{run:?}"
    );
    assert_eq!(env.sp(["man", "__worker"]).code, 2);
    assert!(!env.home.exists() && !env.socket.exists());
}
