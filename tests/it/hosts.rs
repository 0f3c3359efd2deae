//! `subpane hosts`: the record (add, ls, rm, bad input) and `check` against the test's own
//! sshd, where the remote subpane is this build's binary.

use std::time::{Duration, Instant};

use crate::harness::{BIN, Ran, TestEnv};
use crate::harness_ssh::{ALIAS, SshServer};

#[test]
fn add_ls_rm_round_trip() {
    let env = TestEnv::new();
    let r = env.sp(["hosts", "ls"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("no hosts"), "{r:?}");
    let r = env.sp([
        "hosts",
        "add",
        "gpu-1",
        "ssh://me@gpu.example.org:2222",
        "--remote-home",
        "/srv/subpane",
        "--bin",
        "/opt/subpane",
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(env.sp(["hosts", "add", "box", "ssh://box"]).code, 0);
    let ls = env.sp(["hosts", "ls", "--json"]).json();
    assert_eq!(
        ls,
        serde_json::json!([
            {"name": "gpu-1", "url": "ssh://me@gpu.example.org:2222", "home": "/srv/subpane", "bin": "/opt/subpane"},
            {"name": "box", "url": "ssh://box", "home": null, "bin": null},
        ])
    );
    let text = env.sp(["hosts", "ls"]);
    assert!(
        text.stdout
            .contains("gpu-1\tssh://me@gpu.example.org:2222\thome=/srv/subpane"),
        "{text:?}"
    );
    let r = env.sp(["hosts", "rm", "gpu-1"]);
    assert_eq!(r.code, 0, "{r:?}");
    let names: Vec<_> = env
        .sp(["hosts", "ls", "--json"])
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["box"]);
}

fn refused(r: &Ran, says: &str) {
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains(says), "stderr should say {says:?}: {r:?}");
}

#[test]
fn bad_urls_names_duplicates_and_unknown_hosts_are_refused() {
    let env = TestEnv::new();
    for (url, says) in [
        ("gpu", "does not start with ssh://"),
        ("ssh://", "has no host"),
        (
            "ssh://-oProxyCommand=touch",
            "bad host `-oProxyCommand=touch`",
        ),
        ("ssh://h:70000", "bad port `70000`"),
        ("ssh://h/dir", "path, query or fragment"),
        ("ssh://a b", "bad host"),
    ] {
        refused(&env.sp(["hosts", "add", "x", url]), says);
    }
    refused(
        &env.sp(["hosts", "add", "../x", "ssh://h"]),
        "host name `../x` is not allowed",
    );
    refused(
        &env.sp(["hosts", "add", "x", "ssh://h", "--remote-home", "rel"]),
        "--remote-home `rel` is not an absolute path",
    );
    refused(
        &env.sp(["hosts", "add", "x", "ssh://h", "--home", "/r"]),
        "--remote-home",
    );
    assert!(
        !env.home.join("hosts.json").exists(),
        "nothing refused was recorded"
    );
    assert_eq!(env.sp(["hosts", "add", "x", "ssh://h"]).code, 0);
    refused(
        &env.sp(["hosts", "add", "x", "ssh://other"]),
        "exists already",
    );
    refused(&env.sp(["hosts", "rm", "nope"]), "no host named `nope`");
    refused(&env.sp(["hosts", "check", "nope"]), "no host named `nope`");
    let ls = env.sp(["hosts", "ls", "--json"]).json();
    assert_eq!(
        ls[0]["url"], "ssh://h",
        "the duplicate changed nothing: {ls}"
    );
}

/// `hosts check` through a `~/.ssh/config`-style alias, as people use it.
#[test]
fn check_reaches_the_host_and_shows_its_facts() {
    let h = crate::hosts_run::Host::new();
    let (env, sshd, remote_home) = (&h.env, &h.sshd, &h.remote_home);
    let r: Ran = env
        .cmd()
        .env("PATH", sshd.path_env())
        .args(["hosts", "check", "loop", "--json"])
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, 0, "{r:?}");
    let v = r.json();
    let facts = &v["facts"];
    assert_eq!(facts["version"], v["local_version"], "{v}");
    assert_eq!(facts["home"], remote_home.to_str().unwrap(), "{v}");
    assert!(
        facts["kernel"].as_str().unwrap().starts_with("Linux "),
        "{v}"
    );
    assert!(facts["tmux"].as_str().unwrap().starts_with("tmux "), "{v}");
    assert!(
        facts["landlock_abi"].is_i64() != facts["landlock_problem"].is_string(),
        "Landlock is either there or says why not: {v}"
    );
    // The text report, over the control connection the first check left.
    let r: Ran = env
        .cmd()
        .env("PATH", sshd.path_env())
        .args(["hosts", "check", "loop"])
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, 0, "{r:?}");
    for want in [
        "host loop (ssh://sshtest) answers",
        "subpane ",
        "kernel  Linux",
        "tmux    tmux ",
    ] {
        assert!(r.stdout.contains(want), "{want:?} in {r:?}");
    }
    let sockets = std::fs::read_dir(env.home.join("ssh")).unwrap().count();
    assert_eq!(sockets, 1, "one control socket for the host");
    assert!(
        !started_under(env.root.path()).is_empty(),
        "the control master and sshd run under the test's dir"
    );
    let root = env.root.path().to_path_buf();
    drop(h.sshd);
    let left = started_under(&root);
    assert!(left.is_empty(), "left running: {left:?}");
}

/// The processes whose command line names `dir` (sshd's config, ssh's control path).
fn started_under(dir: &std::path::Path) -> Vec<(i32, String)> {
    let needle = dir.to_str().unwrap();
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(needle) {
            found.push((pid, cmdline));
        }
    }
    found
}

/// A URL with user and port (no alias), and a host without `--bin` whose PATH has no
/// subpane: this binary is copied under the remote home once, by hash; a copy someone
/// altered there is replaced, never run.
#[test]
fn check_without_a_remote_subpane_copies_this_binary_once() {
    use sha2::Digest;
    let env = TestEnv::new();
    let sshd = SshServer::start(env.root.path());
    sshd.forget_masters_in(env.home.join("ssh"));
    let remote_home = env.root.path().join("remote-home");
    let add = env.sp([
        "hosts",
        "add",
        "bare",
        &sshd.url(),
        "--remote-home",
        remote_home.to_str().unwrap(),
    ]);
    assert_eq!(add.code, 0, "{add:?}");
    let check = || -> Ran {
        env.cmd()
            .env("PATH", sshd.path_env())
            .args(["hosts", "check", "bare", "--json"])
            .output()
            .unwrap()
            .into()
    };
    let r = check();
    assert_eq!(r.code, 0, "{r:?}");
    let v = r.json();
    let hash = format!("{:x}", sha2::Sha256::digest(std::fs::read(BIN).unwrap()));
    let want = remote_home.join(format!(
        "bin/subpane-{}-{}",
        v["local_version"].as_str().unwrap(),
        &hash[..16]
    ));
    assert_eq!(v["bin"]["path"], want.to_str().unwrap(), "{v}");
    assert_eq!(v["bin"]["source"], "copied", "{v}");
    assert_eq!(v["bin"]["copied"], true, "{v}");
    assert_eq!(v["facts"]["version"], v["local_version"], "{v}");
    assert_eq!(v["facts"]["home"], remote_home.to_str().unwrap(), "{v}");
    let bins: Vec<_> = std::fs::read_dir(remote_home.join("bin"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(bins.len(), 1, "only the copy, no part left: {bins:?}");
    // The second check finds the copy by its hash.
    let r = check();
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["bin"]["copied"], false, "{r:?}");
    // A copy altered there is not run: it is replaced by this binary again.
    std::fs::write(&want, "#!/bin/sh\necho '{\"version\":\"evil\"}'\n").unwrap();
    let r = check();
    assert_eq!(r.code, 0, "{r:?}");
    let v = r.json();
    assert_eq!(v["bin"]["copied"], true, "{v}");
    assert_eq!(v["facts"]["version"], v["local_version"], "{v}");
    assert_eq!(
        format!("{:x}", sha2::Sha256::digest(std::fs::read(&want).unwrap())),
        hash
    );
}

#[test]
fn an_unreachable_host_fails_fast_with_exit_1() {
    let env = TestEnv::new();
    let sshd = SshServer::start(env.root.path());
    // A port nothing listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("ssh://root@127.0.0.1:{port}");
    assert_eq!(env.sp(["hosts", "add", "gone", &url, "--bin", BIN]).code, 0);
    let started = Instant::now();
    let r: Ran = env
        .cmd()
        .env("PATH", sshd.path_env())
        .args(["hosts", "check", "gone", "--connect-timeout", "5s"])
        .output()
        .unwrap()
        .into();
    let took = started.elapsed();
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr.contains("host `gone`: cannot reach") && r.stderr.contains(&url),
        "{r:?}"
    );
    assert!(took < Duration::from_secs(5), "took {took:?}: {r:?}");
}

/// A port that accepts the connection and never speaks: ssh's connect timeout covers the
/// greeting too, and `check` ends within it (with a margin for a loaded machine).
#[test]
fn a_host_that_never_answers_fails_within_the_connect_timeout() {
    let env = TestEnv::new();
    let sshd = SshServer::start(env.root.path());
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let url = format!("ssh://root@127.0.0.1:{port}");
    assert_eq!(env.sp(["hosts", "add", "mute", &url, "--bin", BIN]).code, 0);
    let started = Instant::now();
    let r: Ran = env
        .cmd()
        .env("PATH", sshd.path_env())
        .args(["hosts", "check", "mute", "--connect-timeout", "1s"])
        .output()
        .unwrap()
        .into();
    let took = started.elapsed();
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("host `mute`"), "{r:?}");
    assert!(took < Duration::from_secs(8), "took {took:?}: {r:?}");
    drop(silent);
}

/// A remote "subpane" of another version, or something else answering: exit 1, saying
/// which.
#[test]
fn a_remote_of_another_version_or_not_subpane_is_refused() {
    let env = TestEnv::new();
    let sshd = SshServer::start(env.root.path());
    sshd.forget_masters_in(env.home.join("ssh"));
    let old = env.root.path().join("old-subpane");
    std::fs::write(
        &old,
        "#!/bin/sh\necho '{\"version\":\"0.0.1\",\"home\":\"/h\",\"kernel\":\"Linux 1\",\"tmux\":null,\"landlock_abi\":null,\"landlock_problem\":\"none\"}'\n",
    )
    .unwrap();
    let other = env.root.path().join("not-subpane");
    std::fs::write(&other, "#!/bin/sh\necho hello\n").unwrap();
    for p in [&old, &other] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let url = format!("ssh://{ALIAS}");
    for (name, bin) in [("old", &old), ("other", &other)] {
        let r = env.sp(["hosts", "add", name, &url, "--bin", bin.to_str().unwrap()]);
        assert_eq!(r.code, 0, "{r:?}");
    }
    let check = |name: &str| -> Ran {
        env.cmd()
            .env("PATH", sshd.path_env())
            .args(["hosts", "check", name])
            .output()
            .unwrap()
            .into()
    };
    let r = check("old");
    assert_eq!(r.code, 1, "{r:?}");
    let local = env!("CARGO_PKG_VERSION");
    assert!(
        r.stderr.contains("version 0.0.1") && r.stderr.contains(&format!("this one is {local}")),
        "{r:?}"
    );
    let r = check("other");
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr.contains("did not answer as subpane does") && r.stderr.contains("hello"),
        "{r:?}"
    );
}

/// Two "hosts" (two sshd, two ports, two remote homes) through one ssh config: each check
/// answers with its own home, over its own control connection.
#[test]
fn two_hosts_each_answer_with_their_own_home() {
    let env = TestEnv::new();
    let a = SshServer::start_as(env.root.path(), "host-a");
    let b = SshServer::start_as(env.root.path(), "host-b");
    a.forget_masters_in(env.home.join("ssh"));
    b.forget_masters_in(env.home.join("ssh"));
    assert_ne!(a.port, b.port);
    for name in ["host-a", "host-b"] {
        let remote_home = env.root.path().join(format!("home-of-{name}"));
        let r = env.sp([
            "hosts",
            "add",
            name,
            &format!("ssh://{name}"),
            "--remote-home",
            remote_home.to_str().unwrap(),
            "--bin",
            BIN,
        ]);
        assert_eq!(r.code, 0, "{r:?}");
    }
    for name in ["host-a", "host-b"] {
        let r: Ran = env
            .cmd()
            .env("PATH", a.path_env())
            .args(["hosts", "check", name, "--json"])
            .output()
            .unwrap()
            .into();
        assert_eq!(r.code, 0, "{r:?}");
        let home = r.json()["facts"]["home"].as_str().unwrap().to_owned();
        assert!(home.ends_with(&format!("home-of-{name}")), "{name}: {home}");
    }
    let sockets = std::fs::read_dir(env.home.join("ssh")).unwrap().count();
    assert_eq!(sockets, 2, "one control connection per host");
    drop((a, b));
    let left = started_under(env.root.path());
    assert!(left.is_empty(), "left running: {left:?}");
}
