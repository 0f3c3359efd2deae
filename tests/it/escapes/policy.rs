//! Policy edge cases: paths that would switch the sandbox off, links a program planted in a
//! writable tree, a hidden path moved away, unspecified and wildcard addresses.

use super::*;

#[test]
fn paths_and_patterns_that_would_switch_the_sandbox_off_exit_2() {
    let mut env = TestEnv::new();
    let root = env.root.path().canonicalize().unwrap();
    // The tmux socket in a directory of its own, so that it can be named alone.
    let sockets = root.join("sockets");
    std::fs::create_dir_all(&sockets).unwrap();
    env.socket = sockets.join("tmux.sock");
    // A home of the user's below the test's directory, so that its parent is nameable.
    let user_home = root.join("user");
    std::fs::create_dir_all(user_home.join(".claude")).unwrap();
    let real = root.join("real");
    std::fs::create_dir(&real).unwrap();
    std::os::unix::fs::symlink(&real, root.join("link")).unwrap();
    let through = root.join("link/inner");
    std::fs::create_dir(real.join("inner")).unwrap();
    let work = env.work.canonicalize().unwrap();
    let claude = user_home.join(".claude");
    let link = root.join("link");
    let in_sockets = sockets.join("inner");
    std::fs::create_dir(&in_sockets).unwrap();
    let mut cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--hide", "/"], "--hide `/`"),
        (vec!["--hide", s(&root)], "holds the workspace"),
        (vec!["--writable", "/"], "--writable `/`"),
        (vec!["--writable", s(&user_home)], "your home"),
        (vec!["--writable", s(&root)], "your home"),
        (vec!["--writable", s(&claude)], ".claude"),
        (vec!["--writable", s(&env.home)], "subpane's home"),
        (vec!["--writable", s(&link)], "symbolic link"),
        (vec!["--writable", s(&through)], "symbolic link"),
        (vec!["--hide", s(&link)], "symbolic link"),
        (vec!["--network", "allow:0.0.0.0"], "unspecified"),
        (vec!["--network", "allow:::"], "unspecified"),
        (vec!["--network", "allow:[::]"], "unspecified"),
        (vec!["--network", "allow:0.1.2.3"], "unspecified"),
        (vec!["--network", "allow:*.0.0.1"], "IP address"),
        (vec!["--network", "allow:127.1"], "address"),
        (vec!["--cwd", s(&user_home)], "your home"),
        (vec!["--cwd", "/"], "workspace `/`"),
        // The machine's own trees: the kernel's settings, its devices, its sockets.
        (vec!["--writable", "/proc"], "--writable `/proc`"),
        (vec!["--writable", "/proc/sys"], "`/proc`"),
        (vec!["--writable", "/sys"], "--writable `/sys`"),
        (vec!["--writable", "/sys/kernel"], "`/sys`"),
        (vec!["--writable", "/dev"], "--writable `/dev`"),
        (vec!["--writable", "/dev/shm"], "`/dev`"),
        (vec!["--writable", "/run"], "--writable `/run`"),
        (vec!["--cwd", "/proc"], "`/proc`"),
        // subpane's tmux server runs anything asked of it, outside the sandbox.
        (vec!["--writable", s(&sockets)], "tmux"),
        // Paths the sandbox mounts itself: a hide there would do nothing.
        (vec!["--hide", "/proc"], "--hide `/proc`"),
        (vec!["--hide", "/proc/sys"], "`/proc`"),
        (vec!["--hide", "/dev"], "--hide `/dev`"),
        (vec!["--hide", "/dev/null"], "`/dev`"),
        (vec!["--hide", "/tmp"], "--hide `/tmp`"),
        // Both hidden and writable: one of them would mean nothing.
        (vec!["--hide", s(&real), "--writable", s(&real)], "both"),
    ];
    if Path::new("/boot").is_dir() {
        cases.push((vec!["--writable", "/boot"], "--writable `/boot`"));
    }
    std::fs::create_dir_all(&env.home).unwrap();
    let mut wrong = Vec::new();
    for (extra, says) in &cases {
        let mut args = vec!["run", "--sandbox"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", "true"]);
        let r: Ran = env
            .cmd()
            .env("HOME", &user_home)
            .args(&args)
            .output()
            .unwrap()
            .into();
        if r.code != 2 || !r.stderr.contains(says) {
            wrong.push(format!("{extra:?}: exit {}: {}", r.code, r.stderr.trim()));
        }
    }
    assert!(
        wrong.is_empty(),
        "not refused as they should be:\n{}",
        wrong.join("\n")
    );
    assert!(no_runs(&env), "a refused policy started something");
    // Control: the same kinds of path, where they switch nothing off, are taken.
    let inner = real.join("inner");
    let ok: &[&[&str]] = &[
        &["--writable", s(&real)],
        &["--hide", s(&inner)],
        // One inside the other: a hidden path in a writable tree stays hidden, a writable
        // tree in a hidden directory is the one thing seen there.
        &["--writable", s(&real), "--hide", s(&inner)],
        &["--hide", s(&real), "--writable", s(&inner)],
        // Inside the socket's directory, beside the socket: it cannot reach the socket.
        &["--writable", s(&in_sockets)],
        &["--network", "allow:127.0.0.1,::1,*.example.com,db1"],
        &["--cwd", s(&work)],
    ];
    for extra in ok {
        let mut args = vec!["run", "--sandbox"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", "true"]);
        let r = env.sp(&args);
        assert_eq!(r.code, 0, "{extra:?}: {r:?}");
    }
    env.assert_no_leftovers();
}

/// The route: `--writable` of a directory above subpane's home (`~/.local` above
/// `~/.local/state/subpane`) let the program move the home away and plant a forged run in
/// its place, which `ls` listed and `retry` ran unsandboxed.
#[test]
fn a_writable_directory_above_the_home_is_refused() {
    let mut env = TestEnv::new();
    let (_o, o) = outside("escape-above-home-");
    // Where the default home is: ~/.local/state/subpane, outside /tmp.
    env.home = o.join("local/state/subpane");
    std::fs::create_dir_all(&env.home).unwrap();
    let local = o.join("local");
    let script = format!(
        "cd {l} && mv state moved && mkdir -p state/subpane/runs/forged/attempts/1 \
         && echo planted",
        l = q(&local)
    );
    let r = run_bash(
        &env,
        "mover",
        &["--sandbox", "--writable", s(&local)],
        &script,
    );
    assert!(
        !local.join("moved").exists() && !env.home.join("runs/forged").exists(),
        "the program moved the home away and planted a run: {r:?}"
    );
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("holds subpane's home") && r.stderr.contains(s(&local)),
        "{}",
        r.stderr
    );
    assert!(no_runs(&env), "something was started");
    // Control: a directory beside the home is taken.
    let beside = o.join("local/share");
    std::fs::create_dir_all(&beside).unwrap();
    let r = run_bash(
        &env,
        "beside",
        &["--sandbox", "--writable", s(&beside)],
        "true",
    );
    assert_eq!(r.code, 0, "{r:?}");
    env.assert_no_leftovers();
}

/// The policy of a run recorded before a rule existed is checked again at `retry`: a
/// writable `/proc` (the kernel's settings, host-wide) is refused there too.
#[test]
fn a_recorded_policy_that_would_switch_the_sandbox_off_is_refused_at_retry() {
    let env = TestEnv::with_home_outside_tmp();
    let (_o, o) = outside("escape-old-policy-");
    let r = run_bash(&env, "old", &["--sandbox", "--writable", s(&o)], "true");
    assert_eq!(r.code, 0, "{r:?}");
    // As a version without the rule recorded it.
    let spec_path = env.attempt_dir("old", 1).join("spec.json");
    let mut spec = env.read_json(&spec_path);
    spec["sandbox"]["asked"]["writable"] = json!(["/proc"]);
    spec["sandbox"]["writable"]
        .as_array_mut()
        .unwrap()
        .push(json!("/proc"));
    std::fs::write(&spec_path, serde_json::to_vec(&spec).unwrap()).unwrap();
    let r = sp(&env, &["retry", "--json", "old"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("`/proc`"), "{}", r.stderr);
    assert!(!env.attempt_dir("old", 2).exists(), "attempt 2 was made");
    env.assert_no_leftovers();
}

/// The same rules hold for a fan-out line and an MCP call: one planner.
#[test]
fn a_fanout_line_and_an_mcp_call_that_would_switch_the_sandbox_off_exit_2() {
    let env = TestEnv::new();
    let file = env.root.path().join("tasks.jsonl");
    let line = json!({"argv": ["true"], "sandbox": true, "writable": ["/sys"]});
    std::fs::write(&file, format!("{line}\n")).unwrap();
    let r = sp(&env, &["fanout", s(&file)]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("line 1") && r.stderr.contains("`/sys`"),
        "{}",
        r.stderr
    );
    assert!(no_runs(&env), "the fan-out started something");

    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "run", "arguments": {"argv": ["true"], "sandbox": true, "hide": ["/proc"]}}});
    let answer = mcp_call(&env, &call);
    let text = answer.to_string();
    assert!(
        answer["result"]["isError"] == true && text.contains("`/proc`"),
        "{answer}"
    );
    assert!(no_runs(&env), "the MCP call started something");
    env.assert_no_leftovers();
}

/// One call of `subpane mcp`, spoken line by line: its answer to `call` (id 2).
fn mcp_call(env: &TestEnv, call: &serde_json::Value) -> serde_json::Value {
    use std::io::{BufRead, BufReader, Write};
    let mut child = env
        .cmd()
        .arg("mcp")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<serde_json::Value>();
    let reader = std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str(&l) {
                let _ = tx.send(v);
            }
        }
    });
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "escapes", "version": "1"}}});
    writeln!(stdin, "{init}").unwrap();
    let first = rx
        .recv_timeout(crate::harness::DEADLINE)
        .expect("initialize");
    assert_eq!(first["id"], 1, "{first}");
    let ready = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    writeln!(stdin, "{ready}\n{call}").unwrap();
    let answer = loop {
        let v = rx
            .recv_timeout(crate::harness::DEADLINE)
            .expect("an answer");
        if v["id"] == 2 {
            break v;
        }
    };
    drop(stdin);
    child.wait().unwrap();
    reader.join().unwrap();
    answer
}

/// A nested run from a sandbox is planned by the same rules: its `--hide /proc` and
/// `--writable /dev` are refused, not carried into its policy.
#[test]
fn a_nested_run_that_would_switch_the_sandbox_off_exits_2() {
    let env = TestEnv::with_home_outside_tmp();
    let script = format!(
        "SP={sp}; for a in '--hide /proc' '--writable /dev' '--writable /sys'; do \
           $SP run --run-id \"c$RANDOM\" $a -- true 2>>\"$SUBPANE_OUT_DIR/err\"; \
           echo \"rc=$?\" >>\"$SUBPANE_OUT_DIR/codes\"; done",
        sp = shell_quote(crate::harness::BIN)
    );
    let r = run_bash(&env, "parent", &["--sandbox"], &script);
    assert_eq!(r.code, 0, "{r:?}");
    let out = env.attempt_dir("parent", 1).join("out");
    let codes = std::fs::read_to_string(out.join("codes")).unwrap_or_default();
    let err = std::fs::read_to_string(out.join("err")).unwrap_or_default();
    assert_eq!(codes, "rc=2\nrc=2\nrc=2\n", "{err}");
    for says in ["--hide `/proc`", "--writable `/dev`", "--writable `/sys`"] {
        assert!(err.contains(says), "{says:?} missing from: {err}");
    }
    let runs = std::fs::read_dir(env.home.join("runs")).unwrap().count();
    assert_eq!(runs, 1, "a nested run was started");
    env.assert_no_leftovers();
}

#[test]
fn a_writable_path_a_program_replaced_with_a_link_is_refused_at_retry() {
    let env = TestEnv::with_home_outside_tmp();
    let (_o, o) = outside("escape-link-");
    let ws = o.join("ws");
    let victim = o.join("victim");
    std::fs::create_dir_all(ws.join("build")).unwrap();
    std::fs::create_dir_all(&victim).unwrap();
    let script = format!(
        "if [ -L build ]; then echo pwned > build/x; echo second; \
         else rm -rf build && ln -s {v} build && echo replaced; fi",
        v = q(&victim)
    );
    let build = ws.join("build");
    let args = ["--sandbox", "--cwd", s(&ws), "--writable", s(&build)];
    let r = run_bash(&env, "link", &args, &script);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(stdout_log(&env, "link", 1).contains("replaced"));
    let r = sp(&env, &["retry", "--json", "link"]);
    assert!(
        !victim.join("x").exists(),
        "the retry's --writable followed the link the program planted"
    );
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("symbolic link") && r.stderr.contains(s(&build)),
        "{}",
        r.stderr
    );
    env.assert_no_leftovers();
}

#[test]
fn a_hidden_path_a_program_moved_away_is_refused_at_retry() {
    let env = TestEnv::with_home_outside_tmp();
    let (_o, o) = outside("escape-hide-");
    let ws = o.join("ws");
    std::fs::create_dir_all(ws.join("secrets")).unwrap();
    std::fs::write(ws.join("secrets/key"), "TOPSECRET").unwrap();
    let key = ws.join("secrets/key");
    let script = "if [ -d moved ]; then cat moved/key; echo; else \
                  echo \"first=[$(cat secrets/key)]\"; mv secrets moved && echo moved; fi";
    let args = ["--sandbox", "--cwd", s(&ws), "--hide", s(&key)];
    let r = run_bash(&env, "hide", &args, script);
    assert_eq!(r.code, 0, "{r:?}");
    let first = stdout_log(&env, "hide", 1);
    assert!(
        first.contains("first=[]") && first.contains("moved"),
        "{first}"
    );
    let r = sp(&env, &["retry", "--json", "hide"]);
    assert!(
        !stdout_log(&env, "hide", 2).contains("TOPSECRET"),
        "the retry showed the hidden file under its new name"
    );
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("--hide") && r.stderr.contains(s(&key)),
        "{}",
        r.stderr
    );
    env.assert_no_leftovers();
}
