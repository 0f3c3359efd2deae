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
            r.stdout.contains("subpane") && r.stdout.contains("_SUBPANE_COMPLETE"),
            "{shell}: {}",
            r.stdout
        );
    }
    // bash reads its script without complaint, and completes the verbs.
    let script = env.root.path().join("subpane.bash");
    std::fs::write(&script, env.sp(["completions", "bash"]).stdout).unwrap();
    // The script asks `subpane` on PATH for the words.
    let bin_dir = std::path::Path::new(crate::harness::BIN).parent().unwrap();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap());
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source {}; COMP_WORDS=(subpane lo); COMP_CWORD=1; _clap_complete_subpane subpane lo subpane; echo \"${{COMPREPLY[@]}}\"",
            script.display()
        ))
        .env("PATH", &path)
        .env("SUBPANE_HOME", &env.home)
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

/// The README's lines for completions and man pages, run as they are on an account that has
/// none of their folders, with only the binary's own directory and the system's on `PATH`.
#[test]
fn the_readmes_install_lines_work_on_a_fresh_account() {
    let env = TestEnv::new();
    for tool in ["man", "bash"] {
        assert!(
            Command::new("sh")
                .args(["-c", &format!("command -v {tool}")])
                .output()
                .unwrap()
                .status
                .success(),
            "this test needs `{tool}` (Debian: man-db, bash); .ci/run installs it"
        );
    }
    let readme = include_str!("../../README.md");
    let after = readme
        .split("Shell completions and the man pages come with")
        .nth(1)
        .expect("the README's install paragraph");
    let block = after
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("the README's install lines");
    // A prefix like ~/.cargo: the binary in bin/, nothing else.
    let home = env.root.path().join("account");
    let bin = env.root.path().join("prefix/bin");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::copy(crate::harness::BIN, bin.join("subpane")).unwrap();
    let path = format!("{}:/usr/bin:/bin", bin.display());
    let out = Command::new("bash")
        .args(["-e", "-c", block])
        .env_clear()
        .env("HOME", &home)
        .env("PATH", &path)
        .env("SUBPANE_HOME", &env.home)
        .env("MANPAGER", "cat")
        .env("MANWIDTH", "80")
        .current_dir(&home)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{block}\n{out:?}");
    // The bash lines: the package's folder, and the line for ~/.bashrc, which loads.
    assert!(
        home.join(".local/share/bash-completion/completions/subpane")
            .is_file()
    );
    let bashrc = Command::new("bash")
        .args([
            "-c",
            "source ~/.bashrc; complete -p subpane && COMP_WORDS=(subpane ca); COMP_CWORD=1; \
             _clap_complete_subpane subpane ca subpane; echo \"${COMPREPLY[@]}\"",
        ])
        .env_clear()
        .env("HOME", &home)
        .env("PATH", &path)
        .output()
        .unwrap();
    assert!(bashrc.status.success(), "{bashrc:?}");
    assert!(String::from_utf8_lossy(&bashrc.stdout).contains("cancel"));
    assert!(home.join(".zfunc/_subpane").is_file());
    assert!(home.join(".zshrc").is_file());
    assert!(home.join(".config/fish/completions/subpane.fish").is_file());
    // `man subpane` found the page beside the binary and showed its sections.
    for section in ["EXIT STATUS", "ENVIRONMENT", "FILES", "SUBPANE_HOME"] {
        assert!(
            stdout.contains(section),
            "`man subpane` lacks {section}:\n{stdout}"
        );
    }
    // Every page subpane(1) lists is installed, each with its exit status, and man renders
    // each without a warning.
    let man1 = env.root.path().join("prefix/share/man/man1");
    let main = std::fs::read_to_string(man1.join("subpane.1")).unwrap();
    let listed: Vec<&str> = main
        .split("subpane\\-")
        .skip(1)
        .filter_map(|s| s.split_once("(1)").map(|(v, _)| v))
        .filter(|v| v.chars().all(|c| c.is_ascii_lowercase()))
        .collect();
    assert!(listed.len() >= 12, "{listed:?}");
    for verb in listed {
        let page = man1.join(format!("subpane-{verb}.1"));
        let text = std::fs::read_to_string(&page)
            .unwrap_or_else(|e| panic!("subpane(1) lists subpane-{verb}(1): {e}"));
        assert!(text.contains(".SH \"EXIT STATUS\""), "{verb}");
        let shown = Command::new("man")
            .args(["--warnings", "-l"])
            .arg(&page)
            .env("MANPAGER", "cat")
            .env("MANWIDTH", "80")
            .output()
            .unwrap();
        assert!(shown.status.success(), "{verb}: {shown:?}");
        assert!(
            shown.stderr.is_empty(),
            "{verb}: {}",
            String::from_utf8_lossy(&shown.stderr)
        );
    }
    let with_path = Command::new("man")
        .args(["-w", "subpane-run"])
        .env_clear()
        .env("HOME", &home)
        .env("PATH", &path)
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&with_path.stdout).contains("prefix/share/man/man1/subpane-run.1"),
        "{with_path:?}"
    );
}

/// `Cargo.toml`'s `rust-version` is at least every dependency's (a newcomer's older
/// toolchain is refused by cargo with that version's name, not by a dependency's build).
#[test]
fn the_manifests_rust_version_covers_every_dependency() {
    // The packages of this machine's platform: those are downloaded by the build (all
    // platforms' would need the network, which `--offline` refuses).
    let rustc = Command::new("rustc").arg("-vV").output().unwrap();
    let host = String::from_utf8_lossy(&rustc.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_owned))
        .expect("rustc -vV names the host");
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--offline", "--locked"])
        .args(["--filter-platform", &host])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let version = |v: &str| -> Vec<u32> { v.split('.').map(|p| p.parse().unwrap_or(0)).collect() };
    let ours = version(env!("CARGO_PKG_RUST_VERSION"));
    for p in meta["packages"].as_array().unwrap() {
        if let Some(v) = p["rust_version"].as_str() {
            assert!(
                version(v) <= ours,
                "{} {} needs Rust {v}; Cargo.toml says {}",
                p["name"],
                p["version"],
                env!("CARGO_PKG_RUST_VERSION")
            );
        }
    }
}
