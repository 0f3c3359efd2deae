//! Fails closed: a feature taken away for real, and the program never runs.

use super::*;

/// `argv` in a fresh user namespace (`unshare -r`) where `sysctl` (a file under
/// /proc/sys/user, which is per user namespace) is set to 0 first.
fn with_limit_zero(sysctl: &str, argv: Vec<OsString>) -> Vec<OsString> {
    let mut outer: Vec<OsString> = ["unshare", "--user", "--map-root-user", "sh", "-c"]
        .map(OsString::from)
        .to_vec();
    outer.push(format!("echo 0 > /proc/sys/user/{sysctl} && exec \"$@\"").into());
    outer.push("sh".into());
    outer.extend(argv);
    outer
}

#[test]
fn sandbox_fails_closed_without_user_namespaces() {
    require_tool("unshare", &["--version"], "util-linux");
    let s = Sbx::new();
    let argv = with_limit_zero(
        "max_user_namespaces",
        s.helper_argv(&s.base(), &marker_argv()),
    );
    let r = s.run(argv, None);
    let f = assert_failed_closed(&s, &r, "namespace");
    assert_eq!(f["namespace"], json!("user"));
    assert!(f["errno"].as_str().unwrap().starts_with("ENOSPC"), "{f}");
}

#[test]
fn sandbox_fails_closed_without_network_namespaces() {
    require_tool("unshare", &["--version"], "util-linux");
    let s = Sbx::new();
    let argv = with_limit_zero(
        "max_net_namespaces",
        s.helper_argv(&s.base(), &marker_argv()),
    );
    let r = s.run(argv, None);
    let f = assert_failed_closed(&s, &r, "namespace");
    assert_eq!(f["namespace"], json!("net"));

    // With the network `full`, no network namespace is needed: the same limit lets it run.
    let mut policy = s.base();
    policy["network"] = json!("full");
    let argv = with_limit_zero("max_net_namespaces", s.helper_argv(&policy, &marker_argv()));
    let r = s.run(argv, None);
    assert_eq!(r.code, 0, "{r:#?}");
    assert!(s.ws.join("MARKER").exists());
}

/// A seccomp filter installed on the helper before it starts (as a container runtime's
/// profile would be), answering `nr` with `errno`.
fn outer_filter(nr: i64, errno: i32) -> Box<dyn FnMut() -> std::io::Result<()> + Send + Sync> {
    let filter = seccompiler::SeccompFilter::new(
        [(nr, vec![])].into_iter().collect(),
        seccompiler::SeccompAction::Allow,
        seccompiler::SeccompAction::Errno(errno as u32),
        std::env::consts::ARCH.try_into().unwrap(),
    )
    .unwrap();
    let prog: seccompiler::BpfProgram = filter.try_into().unwrap();
    Box::new(move || seccompiler::apply_filter(&prog).map_err(std::io::Error::other))
}

#[test]
fn sandbox_fails_closed_without_landlock() {
    let s = Sbx::new();
    let argv = s.helper_argv(&s.base(), &marker_argv());
    let r = s.run(
        argv,
        Some(outer_filter(
            libc::SYS_landlock_create_ruleset,
            libc::ENOSYS,
        )),
    );
    let f = assert_failed_closed(&s, &r, "landlock");
    assert!(f["why"].as_str().unwrap().contains("no Landlock"), "{f}");
}

#[test]
fn sandbox_fails_closed_when_seccomp_is_refused() {
    let s = Sbx::new();
    let argv = s.helper_argv(&s.base(), &marker_argv());
    let r = s.run(argv, Some(outer_filter(libc::SYS_seccomp, libc::EPERM)));
    assert_failed_closed(&s, &r, "seccomp");
}

#[test]
fn sandbox_fails_closed_on_a_view_it_cannot_build() {
    let s = Sbx::new();
    // A read-only path that does not exist: the program could create it (a new hook).
    let mut policy = s.base();
    policy["read_only"] = json!([s.ws.join(".git/hooks")]);
    let r = s.run(s.helper_argv(&policy, &marker_argv()), None);
    let f = assert_failed_closed(&s, &r, "mount");
    assert!(f["path"].as_str().unwrap().ends_with(".git/hooks"), "{f}");

    // A writable tree under /tmp that does not exist cannot be carried across.
    let mut policy = s.base();
    policy["writable"]
        .as_array_mut()
        .unwrap()
        .push(json!("/tmp/sp-sbx-no-such-tree"));
    let r = s.run(s.helper_argv(&policy, &marker_argv()), None);
    assert_failed_closed(&s, &r, "mount");
}

#[test]
fn sandbox_fails_closed_on_network_allow_without_a_proxy_socket() {
    let s = Sbx::new();
    let mut policy = s.base();
    policy["network"] = json!({"allow": ["api.example.com"]});
    // An allow list with nowhere to send its traffic never runs the program.
    let r = s.run(s.helper_argv(&policy, &marker_argv()), None);
    assert_failed_closed(&s, &r, "network");
}

#[test]
fn sandbox_fails_closed_on_a_policy_path_that_passes_through_a_link() {
    let s = Sbx::new();
    let victim = s.out().join("victim");
    std::fs::create_dir(&victim).unwrap();
    // A writable tree a program of an earlier attempt replaced with a link, and a link on the
    // way to a path to hide.
    std::os::unix::fs::symlink(&victim, s.ws.join("build")).unwrap();
    let argv = [
        "sh".as_ref(),
        "-c".as_ref(),
        "touch build/x MARKER".as_ref(),
    ];
    let mut policy = s.base();
    policy["writable"]
        .as_array_mut()
        .unwrap()
        .push(json!(s.ws.join("build")));
    let r = s.run(s.helper_argv(&policy, &argv), None);
    let f = assert_failed_closed(&s, &r, "policy");
    assert!(f["why"].as_str().unwrap().contains("symbolic link"), "{f}");
    assert!(!victim.join("x").exists());

    std::fs::write(victim.join("secret"), "S").unwrap();
    let mut policy = s.base();
    policy["hidden"] = json!([s.ws.join("build/secret")]);
    let r = s.run(s.helper_argv(&policy, &marker_argv()), None);
    let f = assert_failed_closed(&s, &r, "policy");
    assert!(f["why"].as_str().unwrap().contains("symbolic link"), "{f}");

    // Control: the real path is taken.
    let mut policy = s.base();
    policy["writable"]
        .as_array_mut()
        .unwrap()
        .push(json!(victim));
    let r = s.run(s.helper_argv(&policy, &marker_argv()), None);
    assert_eq!(r.code, 0, "{r:#?}");
}

#[test]
fn sandbox_fails_closed_when_a_path_the_user_hid_is_gone() {
    let s = Sbx::new();
    // A program of an earlier attempt renamed the directory above the hidden file.
    std::fs::create_dir(s.ws.join("moved")).unwrap();
    std::fs::write(s.ws.join("moved/key"), "K").unwrap();
    let gone = s.ws.join("secrets/key");
    let mut policy = s.base();
    policy["hidden"] = json!([gone]);
    policy["asked"] = json!({"writable": [], "hidden": [gone]});
    let r = s.run(s.helper_argv(&policy, &marker_argv()), None);
    let f = assert_failed_closed(&s, &r, "policy");
    assert!(f["why"].as_str().unwrap().contains("is gone"), "{f}");
    // Control: a hidden path subpane adds itself (a socket that may not exist) is skipped.
    let mut policy = s.base();
    policy["hidden"] = json!([gone]);
    let r = s.run(s.helper_argv(&policy, &marker_argv()), None);
    assert_eq!(r.code, 0, "{r:#?}");
}
