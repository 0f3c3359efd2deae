//! Short names for runs: a unique start of an id (or of a generated id's random part), `@`
//! for the newest run, ambiguous names refused with their candidates, and shell completion
//! of run ids from the home.

use std::process::Command;

use crate::harness::{BIN, TestEnv};

fn quick(env: &TestEnv, id: &str) {
    let r = env.sp(["run", "--run-id", id, "--", "echo", id]);
    assert_eq!(r.code, 0, "{r:?}");
}

#[test]
fn a_unique_start_of_an_id_or_its_random_part_names_the_run_everywhere() {
    let env = TestEnv::new();
    quick(&env, "20261201-215754-642cee");
    quick(&env, "20261201-215754-a91f03");
    quick(&env, "fix-login");
    // The random part of a generated id, and a start of the whole id.
    let s = env.sp(["status", "--json", "642c"]);
    assert_eq!(s.code, 0, "{s:?}");
    assert_eq!(s.json()["run_id"], "20261201-215754-642cee");
    let l = env.sp(["logs", "fix"]);
    assert_eq!(l.code, 0, "{l:?}");
    assert_eq!(l.stdout.trim(), "fix-login");
    let w = env.sp(["wait", "--json", "20261201-215754-a"]);
    assert_eq!(w.code, 0, "{w:?}");
    assert_eq!(w.json()["run_id"], "20261201-215754-a91f03");
    // `@` is the newest run.
    let n = env.sp(["status", "--json", "@"]);
    assert_eq!(n.code, 0, "{n:?}");
    assert_eq!(n.json()["run_id"], "fix-login");
    // An ambiguous start is refused with exit 2, naming every candidate; nothing is picked.
    let a = env.sp(["logs", "2026"]);
    assert_eq!(a.code, 2, "{a:?}");
    assert!(a.stdout.is_empty(), "{a:?}");
    assert!(
        a.stderr.contains("fits 2 runs")
            && a.stderr.contains("20261201-215754-642cee")
            && a.stderr.contains("20261201-215754-a91f03"),
        "{a:?}"
    );
    // An unknown one says where it looked.
    let u = env.sp(["cancel", "zzz"]);
    assert_eq!(u.code, 2, "{u:?}");
    assert!(u.stderr.contains("no run `zzz`"), "{u:?}");
    // A whole id that another id starts with is that run, not an ambiguity.
    quick(&env, "fix-login-2");
    let e = env.sp(["status", "--json", "fix-login"]);
    assert_eq!(e.json()["run_id"], "fix-login", "{e:?}");
    // `--attempt` past the last one says how many there are.
    let at = env.sp(["status", "fix-login", "--attempt", "9"]);
    assert_eq!(at.code, 2, "{at:?}");
    assert!(at.stderr.contains("attempts 1 to 1"), "{at:?}");
}

#[test]
fn an_unknown_group_is_refused_by_ls_as_by_wait() {
    let env = TestEnv::new();
    quick(&env, "solo");
    for verb in [
        &["ls", "--group", "nosuch"][..],
        &["wait", "--group", "nosuch"],
    ] {
        let r = env.sp(verb);
        assert_eq!(r.code, 2, "{verb:?}: {r:?}");
        assert!(r.stderr.contains("no group `nosuch`"), "{verb:?}: {r:?}");
    }
}

#[test]
fn completion_offers_the_run_ids_of_the_home_and_needs_no_tmux() {
    let env = TestEnv::new();
    quick(&env, "20261201-215754-642cee");
    quick(&env, "build-7");
    // The tmux server of those runs is gone: completion must not need one.
    let _ = env.tmux().arg("kill-server").output();
    let script = env.root.path().join("subpane.bash");
    std::fs::write(&script, env.sp(["completions", "bash"]).stdout).unwrap();
    let bin_dir = std::path::Path::new(BIN).parent().unwrap();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap());
    let complete = |words: &str| {
        let out = Command::new("bash")
            .arg("-c")
            .arg(format!(
                "source {}; COMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}}-1)); \
                 _clap_complete_subpane subpane \"${{COMP_WORDS[-1]}}\" subpane; \
                 printf '%s\\n' \"${{COMPREPLY[@]}}\"",
                script.display()
            ))
            .env("PATH", &path)
            .env("SUBPANE_HOME", &env.home)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.trim().to_owned())
            .collect::<Vec<_>>()
    };
    let all = complete("subpane attach ''");
    for id in ["20261201-215754-642cee", "build-7", "@"] {
        assert!(all.iter().any(|w| w == id), "{id} not offered: {all:?}");
    }
    assert_eq!(complete("subpane logs bu"), ["build-7"]);
    assert_eq!(complete("subpane wait x 2026"), ["20261201-215754-642cee"]);
}
