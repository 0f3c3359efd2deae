//! The report on the fd, and the failures the helper reports without entering a sandbox.

use super::*;

#[test]
fn sandbox_reports_what_was_enforced_and_closes_the_report_fd() {
    let s = Sbx::new();
    // An inherited fd to a directory outside would be a way around the mounts: it must not
    // reach the program either.
    let dir = std::fs::File::open(s.out()).unwrap();
    // SAFETY: F_DUPFD makes an inheritable copy (FD_CLOEXEC is not copied) at 50 or above,
    // far from the report's fd 3; it is closed below.
    let dir_fd = unsafe { libc::fcntl(dir.as_raw_fd(), libc::F_DUPFD, 50) };
    assert!(dir_fd >= 50);
    let probe =
        |fd: i32| format!("[ -e /proc/self/fd/{fd} ] && echo '{fd} open' || echo '{fd} closed'");
    let r = s.bash(&s.base(), &format!("{}; {}", probe(3), probe(dir_fd)));
    // Control: a program started without the helper inherits it.
    let c = unsandboxed(&probe(dir_fd));
    // SAFETY: closes the copy made above, which nothing else uses.
    unsafe { libc::close(dir_fd) };
    let closed = format!("{dir_fd} closed");
    assert_eq!(lines(&r.stdout), ["3 closed", closed.as_str()], "{r:#?}");
    assert_eq!(c.stdout, format!("{dir_fd} open\n"));
    let e = r.enforced();
    assert!(e["landlock_abi"].as_u64().unwrap() >= 6, "{e}");
    assert_eq!(e["namespaces"], json!(["user", "mount", "net", "pid"]));
    assert_eq!(e["seccomp"], json!(true));
    assert_eq!(e["no_new_privs"], json!(true));
    // The line is the contract type, exactly.
    let typed: subpane::sandbox::Report = serde_json::from_value(r.reports[0].clone()).unwrap();
    assert!(matches!(typed, subpane::sandbox::Report::Enforced(_)));
}

#[test]
fn sandbox_reports_a_policy_it_cannot_read() {
    let s = Sbx::new();
    let bad = s.env.root.path().join("bad.json");
    std::fs::write(&bad, r#"{"argv": ["x"]}"#).unwrap();
    let mut argv = s.helper_argv(&s.base(), &marker_argv());
    argv[3] = bad.into();
    let r = s.run(argv, None);
    let f = assert_failed_closed(&s, &r, "policy");
    assert!(f["why"].as_str().unwrap().contains("sandbox"), "{f}");

    let mut policy = s.base();
    policy["hidden"] = json!(["relative/path"]);
    let r = s.run(s.helper_argv(&policy, &marker_argv()), None);
    assert_failed_closed(&s, &r, "policy");
}

#[test]
fn sandbox_reports_a_program_it_cannot_exec() {
    let s = Sbx::new();
    let r = s.run(
        s.helper_argv(&s.base(), &["no-such-program-sbx".as_ref()]),
        None,
    );
    assert_eq!(r.code, 127, "{r:#?}");
    assert_eq!(r.reports.len(), 2, "{r:#?}");
    assert!(r.reports[0]["enforced"].is_object());
    assert_eq!(r.reports[1]["failed"]["kind"], json!("exec"));
    assert_eq!(
        r.reports[1]["failed"]["program"],
        json!("no-such-program-sbx")
    );
    assert!(
        r.stderr
            .contains("subpane sandbox: cannot start no-such-program-sbx"),
        "{r:#?}"
    );
}
