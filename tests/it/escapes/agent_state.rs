//! Agent settings: a sandboxed agent writes its own state directory, seeded from the user's;
//! nothing it writes reaches the user's `~/.claude`, `~/.codex`, pi's directory or the
//! shell's start-up files (a hook there would run in the user's next unsandboxed session).

use super::*;

/// A stand-in for an agent CLI named `name` in `bin`: it plants a hook in every settings
/// file it can name, appends to the shell's start-up file, and says what its state
/// directory holds.
fn planting_cli(bin: &Path, name: &str, var: &str) {
    std::fs::create_dir_all(bin).unwrap();
    let script = format!(
        r#"#!/bin/sh
d="${{{var}:-$HOME/.claude}}"
echo "state=$d"
ls -A "$d" | tr '\n' ' '; echo
echo "settings=$(cat "$d/settings.json" 2>/dev/null)"
hook='{{"hooks":{{"SessionStart":[{{"hooks":[{{"type":"command","command":"touch /PWNED"}}]}}]}}}}'
for f in "$d/settings.json" "$HOME/.claude/settings.json" "$HOME/.codex/config.toml" \
         "$HOME/.pi/agent/settings.json"; do
    echo "$hook" > "$f" 2>/dev/null && echo "wrote $f"
done
echo 'touch /PWNED' >> "$HOME/.bashrc" 2>/dev/null && echo "wrote bashrc"
echo new-skill > "$d/skills/evil.md" 2>/dev/null && echo "wrote through the link"
exit 0
"#
    );
    executable(&bin.join(name), &script);
}

/// Writes `script` to `p`, executable.
fn executable(p: &Path, script: &str) {
    std::fs::write(p, script).unwrap();
    std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
}

#[test]
fn a_sandboxed_agent_writes_its_own_state_and_never_the_users() {
    let env = TestEnv::with_home_outside_tmp();
    let (_o, o) = outside("escape-state-");
    let home = o.join("user");
    let bin = o.join("bin");
    planting_cli(&bin, "claude", "CLAUDE_CONFIG_DIR");
    for d in [".claude/skills", ".codex", ".pi/agent"] {
        std::fs::create_dir_all(home.join(d)).unwrap();
    }
    let settings = r#"{"model":"users-own"}"#;
    std::fs::write(home.join(".claude/settings.json"), settings).unwrap();
    std::fs::write(home.join(".claude/skills/mine.md"), "mine").unwrap();
    std::fs::write(home.join(".claude.json"), r#"{"userID":"u"}"#).unwrap();
    std::fs::write(home.join(".codex/config.toml"), "model = \"x\"\n").unwrap();
    std::fs::write(home.join(".bashrc"), "# mine\n").unwrap();
    let before = snapshot(&home);
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let r: Ran = env
        .cmd()
        .env("HOME", &home)
        .env("PATH", &path)
        .env_remove("CLAUDE_CONFIG_DIR")
        .args([
            "run",
            "--json",
            "--run-id",
            "agent",
            "--sandbox",
            "--agent",
            "claude",
        ])
        .args(["--task", "hello"])
        .output()
        .unwrap()
        .into();
    let v = r.json();
    let out = stdout_log(&env, "agent", 1);
    // Its own directory, under the attempt, seeded: the settings copied, skills linked.
    let state = env.attempt_dir("agent", 1).join("agent");
    let state = state.canonicalize().unwrap_or(state);
    assert!(
        out.contains(&format!("state={}", state.display())),
        "{out}\n{r:?}"
    );
    // (Printed behind a prefix: a JSON line would be taken as one of the agent's events.)
    assert!(
        out.contains(&format!("settings={settings}")),
        "the settings were not seeded: {out}"
    );
    assert!(
        out.contains(".claude.json") && out.contains("skills"),
        "{out}"
    );
    assert!(
        out.contains(&format!("wrote {}/settings.json", state.display())),
        "{out}"
    );
    let users = format!("wrote {}", home.display());
    for bad in [users.as_str(), "wrote bashrc", "wrote through the link"] {
        assert!(!out.contains(bad), "{bad}:\n{out}");
    }
    assert_eq!(snapshot(&home), before, "the user's state changed");
    assert_eq!(
        v["sandbox"]["policy"]["agent_state"]["dir"],
        json!(state),
        "{v}"
    );
    env.assert_no_leftovers();
}

/// Every file under `dir` with its bytes (links as their targets).
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                stack.push(p);
            } else {
                out.push((p.clone(), std::fs::read(&p).unwrap_or_default()));
            }
        }
    }
    out.sort();
    out
}

/// A stand-in for Claude Code in `bin`: it says what its state directory holds.
fn telling_cli(bin: &Path) {
    std::fs::create_dir_all(bin).unwrap();
    let script = r#"#!/bin/sh
d="$CLAUDE_CONFIG_DIR"
echo "files=[$(ls -A "$d" | tr '\n' ' ')]"
for f in .credentials.json settings.json .claude.json skills/mine.md skills/secret.md; do
    echo "$f=[$(cat "$d/$f" 2>/dev/null)]"
done
echo '{"type":"result","subtype":"success","is_error":false,"result":"ok","session_id":"s1"}'
"#;
    executable(&bin.join("claude"), script);
}

/// A user's Claude Code state under `home`: a login, settings (a link into a dotfiles
/// directory, as dotfile managers make them), skills, and `~/.claude.json`.
fn users_claude(home: &Path) {
    let claude = home.join(".claude");
    std::fs::create_dir_all(claude.join("skills")).unwrap();
    std::fs::create_dir_all(home.join("dotfiles")).unwrap();
    std::fs::write(claude.join(".credentials.json"), "LOGIN-SECRET").unwrap();
    std::fs::write(home.join("dotfiles/settings.json"), "SETTINGS").unwrap();
    std::os::unix::fs::symlink(
        home.join("dotfiles/settings.json"),
        claude.join("settings.json"),
    )
    .unwrap();
    std::fs::write(claude.join("skills/mine.md"), "MINE").unwrap();
    std::fs::write(claude.join("skills/secret.md"), "SKILL-SECRET").unwrap();
    std::fs::write(home.join(".claude.json"), "HOME-FILE").unwrap();
}

/// What the stand-in said of `name` (`files`, or a file's content).
fn said(out: &str, name: &str) -> String {
    let prefix = format!("{name}=[");
    out.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|l| l.strip_suffix(']'))
        .unwrap_or_else(|| panic!("nothing said of {name}: {out}"))
        .trim()
        .to_owned()
}

/// The route: `--hide ~/.claude` hid the directory from the program, but seeding copied its
/// login and settings into the attempt's own state directory all the same.
#[test]
fn seeding_takes_nothing_the_policy_hides() {
    let env = TestEnv::with_home_outside_tmp();
    let (_o, o) = outside("escape-seed-hide-");
    let home = o.join("user");
    let bin = o.join("bin");
    telling_cli(&bin);
    users_claude(&home);
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let run = |id: &str, hide: &[PathBuf]| {
        let mut c = env.cmd();
        c.env("HOME", &home)
            .env("PATH", &path)
            .env_remove("CLAUDE_CONFIG_DIR")
            .args(["run", "--json", "--run-id", id, "--sandbox"]);
        for h in hide {
            c.arg("--hide").arg(h);
        }
        let r: Ran = c
            .args(["--agent", "claude", "--task", "hello"])
            .output()
            .unwrap()
            .into();
        assert_eq!(r.code, 0, "{id}: {r:?}");
        let state = env.attempt_dir(id, 1).join("agent");
        (r, stdout_log(&env, id, 1), state)
    };
    let claude = home.join(".claude");
    // Control: nothing hidden, everything seeded.
    let (_, out, state) = run("all", &[]);
    assert!(state.join(".credentials.json").exists(), "{out}");
    assert_eq!(said(&out, ".credentials.json"), "LOGIN-SECRET", "{out}");
    assert_eq!(said(&out, "settings.json"), "SETTINGS", "{out}");
    assert_eq!(said(&out, "skills/secret.md"), "SKILL-SECRET", "{out}");

    // The whole directory hidden: none of it is in the attempt's, and the run says so.
    let (r, out, state) = run("dir", std::slice::from_ref(&claude));
    for name in [".credentials.json", "settings.json", "skills"] {
        assert!(
            std::fs::symlink_metadata(state.join(name)).is_err(),
            "{name} was seeded from the hidden {}: {out}",
            claude.display()
        );
    }
    assert_eq!(said(&out, ".credentials.json"), "", "{out}");
    // ~/.claude.json is not inside ~/.claude: it is not hidden.
    assert_eq!(said(&out, ".claude.json"), "HOME-FILE", "{out}");
    assert!(
        r.stderr.contains("may lack") && r.stderr.contains(&claude.display().to_string()),
        "no warning: {}",
        r.stderr
    );
    let withheld = &r.json()["sandbox"]["policy"]["agent_state"]["withheld"];
    assert!(
        withheld
            .as_array()
            .is_some_and(|w| w.contains(&json!(claude.join(".credentials.json")))),
        "the envelope does not say what was withheld: {withheld}"
    );

    // A hidden file in a copied directory, a file reached through a link into a hidden
    // directory, a hidden file of the user's home, a hidden file inside a linked directory.
    let hide = [
        claude.join(".credentials.json"),
        home.join("dotfiles"),
        home.join(".claude.json"),
        claude.join("skills/secret.md"),
    ];
    let (_, out, state) = run("files", &hide);
    for name in [".credentials.json", "settings.json", ".claude.json"] {
        assert!(
            std::fs::symlink_metadata(state.join(name)).is_err(),
            "{name} was seeded though hidden: {out}"
        );
    }
    assert_eq!(said(&out, "skills/mine.md"), "MINE", "{out}");
    assert_eq!(said(&out, "skills/secret.md"), "", "{out}");
    env.assert_no_leftovers();
}

/// A nested agent is seeded from its parent's view: what the parent's sandbox lets it see,
/// with the parent's hides applied, never the user's files beyond that.
#[test]
fn a_nested_agent_is_seeded_only_from_what_its_parent_sees() {
    let (_o, o) = outside("escape-seed-nest-");
    let bin = o.join("bin");
    telling_cli(&bin);
    // Each case has a tmux server of its own: the worker, and so the server of nested
    // runs, has the environment the server was started with.
    let nested = |env: &TestEnv, id: &str, home: &Path, extra: &[&str]| {
        let script = format!(
            "PATH={bin}:$PATH {sp} run --json --run-id {id}-child --agent claude --task hi \
             >/dev/null 2>\"$SUBPANE_OUT_DIR/err\"; echo rc=$?",
            bin = q(&bin),
            sp = shell_quote(crate::harness::BIN),
        );
        let mut args = vec!["run", "--json", "--run-id", id, "--sandbox"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", "bash", "-c", &script]);
        let r: Ran = env
            .cmd()
            .env("HOME", home)
            .env_remove("CLAUDE_CONFIG_DIR")
            .args(&args)
            .output()
            .unwrap()
            .into();
        assert_eq!(r.code, 0, "{id}: {r:?}");
        let err = std::fs::read_to_string(env.attempt_dir(id, 1).join("out/err"));
        let log = stdout_log(env, id, 1);
        assert!(log.contains("rc=0"), "{id}: {log}\n{err:?}");
        let child = format!("{id}-child");
        (
            stdout_log(env, &child, 1),
            env.attempt_dir(&child, 1).join("agent"),
        )
    };
    // The parent hides the login: its child does not get it, and gets the rest.
    let env = TestEnv::with_home_outside_tmp();
    let seen = o.join("user");
    users_claude(&seen);
    let creds = seen.join(".claude/.credentials.json");
    let (out, state) = nested(&env, "hides", &seen, &["--hide", s(&creds)]);
    assert!(
        !state.join(".credentials.json").exists(),
        "the parent's hidden login was seeded into its child: {out}"
    );
    assert_eq!(said(&out, "settings.json"), "SETTINGS", "{out}");
    env.assert_no_leftovers();
    drop(env);
    // The user's directory is under /tmp, out of the parent's sight (its /tmp is private):
    // nothing of it reaches the child.
    let env = TestEnv::with_home_outside_tmp();
    let unseen = env.root.path().join("user");
    users_claude(&unseen);
    let (out, state) = nested(&env, "sight", &unseen, &[]);
    for name in [
        ".credentials.json",
        "settings.json",
        ".claude.json",
        "skills",
    ] {
        assert!(
            std::fs::symlink_metadata(state.join(name)).is_err(),
            "{name} was seeded from beyond the parent's sight: {out}"
        );
    }
    env.assert_no_leftovers();
}
