//! Policy edge cases: paths that would switch the sandbox off, links a program planted in a
//! writable tree, a hidden path moved away, unspecified and wildcard addresses.

use super::*;

#[test]
fn paths_and_patterns_that_would_switch_the_sandbox_off_exit_2() {
    let env = TestEnv::new();
    let root = env.root.path().canonicalize().unwrap();
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
    let cases: &[(&[&str], &str)] = &[
        (&["--hide", "/"], "--hide `/`"),
        (&["--hide", s(&root)], "holds the workspace"),
        (&["--writable", "/"], "--writable `/`"),
        (&["--writable", s(&user_home)], "your home"),
        (&["--writable", s(&root)], "your home"),
        (&["--writable", s(&claude)], ".claude"),
        (&["--writable", s(&env.home)], "subpane's home"),
        (&["--writable", s(&link)], "symbolic link"),
        (&["--writable", s(&through)], "symbolic link"),
        (&["--hide", s(&link)], "symbolic link"),
        (&["--network", "allow:0.0.0.0"], "unspecified"),
        (&["--network", "allow:::"], "unspecified"),
        (&["--network", "allow:[::]"], "unspecified"),
        (&["--network", "allow:0.1.2.3"], "unspecified"),
        (&["--network", "allow:*.0.0.1"], "IP address"),
        (&["--network", "allow:127.1"], "address"),
        (&["--cwd", s(&user_home)], "your home"),
        (&["--cwd", "/"], "workspace `/`"),
    ];
    std::fs::create_dir_all(&env.home).unwrap();
    for (extra, says) in cases {
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
        assert_eq!(r.code, 2, "{extra:?} was accepted: {r:?}");
        assert!(r.stderr.contains(says), "{extra:?}: {}", r.stderr);
        assert!(no_runs(&env), "{extra:?} started something");
    }
    // Control: the same kinds of path, where they switch nothing off, are taken.
    let inner = real.join("inner");
    let ok: &[&[&str]] = &[
        &["--writable", s(&real)],
        &["--hide", s(&inner)],
        &["--writable", s(&root)], // the user's home is elsewhere here
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
