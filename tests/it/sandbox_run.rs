//! `run --sandbox` end to end: the worker starts the program through the sandbox helper; the
//! envelope says what was enforced; files, variables, the tmux server and the network are
//! out of reach as the policy says, and what is allowed still works.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;

use serde_json::{Value, json};

use crate::harness::{Ran, TestEnv, assert_valid_envelope, require_tool, shell_quote};

/// A directory the sandboxed program can see (it is not under /tmp, which the sandbox makes
/// private) but must not write.
fn visible_outside() -> tempfile::TempDir {
    crate::harness::outside_the_sandbox("sandbox-outside-")
}

fn sandboxed(env: &TestEnv, run: &str, extra: &[&str], script: &str) -> (Ran, Value) {
    let mut args = vec!["run", "--json", "--run-id", run, "--sandbox"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", "bash", "-c", script]);
    let r = env.sp(&args);
    let v = r.json();
    assert_valid_envelope(&v);
    (r, v)
}

fn stdout_of(env: &TestEnv, run: &str) -> String {
    std::fs::read_to_string(env.attempt_dir(run, 1).join("stdout.log")).unwrap_or_default()
}

#[test]
fn a_sandboxed_program_writes_its_workspace_and_nothing_else() {
    let env = TestEnv::new();
    let outside = visible_outside();
    let host_tmp: PathBuf = format!("/tmp/subpane-sandbox-probe-{}", std::process::id()).into();
    let script = format!(
        "echo in > inside.txt && echo tmp > {tmp} && cat {tmp} && \
         (echo out > {out}/x 2>/dev/null && echo WROTE_OUTSIDE || echo outside-refused) && \
         ls {out} >/dev/null && echo outside-readable && \
         (echo attempt > \"$SUBPANE_ATTEMPT_DIR/note.txt\" 2>/dev/null && echo ATTEMPT_DIR_WRITABLE || echo attempt-dir-refused) && \
         echo artifact > \"$SUBPANE_OUT_DIR/note.txt\" && echo out-dir-writable",
        tmp = shell_quote(&host_tmp.display().to_string()),
        out = shell_quote(&outside.path().display().to_string()),
    );
    let (r, v) = sandboxed(&env, "files", &[], &script);
    assert_eq!(r.code, 0, "{r:?}");
    let out = stdout_of(&env, "files");
    for want in [
        "tmp",
        "outside-refused",
        "outside-readable",
        "attempt-dir-refused",
        "out-dir-writable",
    ] {
        assert!(out.contains(want), "{want} missing:\n{out}");
    }
    assert!(!out.contains("WROTE_OUTSIDE"), "{out}");
    assert!(!out.contains("ATTEMPT_DIR_WRITABLE"), "{out}");
    assert!(env.work.join("inside.txt").exists());
    assert!(!outside.path().join("x").exists());
    assert!(
        !host_tmp.exists(),
        "a write to the sandbox's /tmp reached the host's /tmp"
    );
    // The envelope says what was asked and what the kernel enforced.
    let sb = &v["sandbox"];
    assert_eq!(sb["enabled"], true, "{sb}");
    assert_eq!(sb["policy"]["network"], "none");
    let e = &sb["enforced"];
    assert!(e["landlock_abi"].as_u64().unwrap() >= 6, "{e}");
    for ns in ["user", "mount", "net"] {
        assert!(
            e["namespaces"].as_array().unwrap().iter().any(|n| n == ns),
            "{ns}: {e}"
        );
    }
    assert_eq!(e["seccomp"], true);
    assert_eq!(e["no_new_privs"], true);
    env.assert_no_leftovers();
}

#[test]
fn a_sandboxed_program_gets_only_the_variables_it_needs_and_records_keep_names() {
    let env = TestEnv::new();
    let r = env
        .cmd()
        .env("SECRET_TOKEN", "s3cr3t-value")
        .env("KEEP_ME", "kept-value")
        .args([
            "run",
            "--json",
            "--run-id",
            "vars",
            "--sandbox",
            "--env-pass",
            "KEEP_ME",
            "--env-plain",
            "SET_ME=set-value",
            "--",
            "bash",
            "-c",
            "echo \"S=${SECRET_TOKEN:-none} K=${KEEP_ME:-none} E=${SET_ME:-none} T=$TMPDIR\"",
        ])
        .output()
        .unwrap();
    let r: Ran = r.into();
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        stdout_of(&env, "vars").trim(),
        "S=none K=kept-value E=set-value T=/tmp"
    );
    let spec = std::fs::read_to_string(env.attempt_dir("vars", 1).join("spec.json")).unwrap();
    for value in ["kept-value", "set-value", "s3cr3t-value"] {
        assert!(!spec.contains(value), "a value reached spec.json: {spec}");
    }
    let spec: Value = serde_json::from_str(&spec).unwrap();
    assert!(
        spec["env"]["passed"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == "KEEP_ME")
    );
    assert_eq!(spec["env"]["inherit"], false);
    env.assert_no_leftovers();
}

#[test]
fn the_tmux_server_is_out_of_reach_but_the_pane_works() {
    let env = TestEnv::new();
    let sock = env.socket.display().to_string();
    let (r, v) = sandboxed(
        &env,
        "tmux",
        &["--keep-session", "--env", &format!("SOCK={sock}")],
        "if tmux -S \"$SOCK\" list-sessions >/dev/null 2>&1; then echo REACHED; else echo unreachable; fi; \
         if [ -S \"$SOCK\" ]; then echo SOCKET_VISIBLE; else echo socket-hidden; fi",
    );
    assert_eq!(r.code, 0, "{r:?}");
    let out = stdout_of(&env, "tmux");
    assert!(
        out.contains("unreachable") && out.contains("socket-hidden"),
        "{out}"
    );
    // Outside the sandbox the server is there, and the pane showed the program's output.
    let session = v["tmux"]["session"].as_str().unwrap();
    let pane = env.capture_pane(session);
    assert!(pane.contains("unreachable"), "{pane}");
    let gc = env.sp(["gc", "--older-than", "0s"]);
    assert_eq!(gc.code, 0, "{gc:?}");
    env.assert_no_leftovers();
}

/// An HTTP origin on loopback answering every request with `hello-origin`; counts requests.
struct Origin {
    port: u16,
    hits: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Origin {
    fn start() -> Origin {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let h = hits.clone();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { continue };
                h.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf);
                let _ = s.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\nConnection: close\r\n\r\nhello-origin",
                );
            }
        });
        Origin { port, hits }
    }
}

#[test]
fn network_allow_lets_listed_hosts_through_the_proxy_and_nothing_else() {
    require_tool("python3", &["--version"], "python3");
    let env = TestEnv::new();
    let origin = Origin::start();
    let port = origin.port;
    let program = format!(
        r#"
import os, socket, urllib.request, urllib.error
print("proxy", os.environ.get("HTTP_PROXY"))
print("allowed", urllib.request.urlopen("http://127.0.0.1:{port}/a", timeout=20).read().decode())
try:
    urllib.request.urlopen("http://denied.example.com/", timeout=20)
    print("DENIED_HOST_REACHED")
except urllib.error.HTTPError as e:
    print("denied", e.code, e.read().decode())
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=5)
    print("DIRECT_REACHED")
except OSError as e:
    print("direct-refused")
"#
    );
    let r: Ran = env
        .cmd()
        .args([
            "run",
            "--json",
            "--run-id",
            "net",
            "--sandbox",
            "--network",
            "allow:127.0.0.1",
            "--",
            "python3",
            "-c",
            &program,
        ])
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, 0, "{r:?}");
    assert_valid_envelope(&r.json());
    let out = stdout_of(&env, "net");
    assert!(out.contains("allowed hello-origin"), "{out}");
    assert!(
        out.contains("denied 403") && out.contains("denied.example.com"),
        "{out}"
    );
    assert!(out.contains("direct-refused"), "{out}");
    assert!(!out.contains("REACHED"), "{out}");
    assert_eq!(origin.hits.load(std::sync::atomic::Ordering::SeqCst), 1);
    // Every decision is in network.jsonl.
    let log = std::fs::read_to_string(env.attempt_dir("net", 1).join("network.jsonl")).unwrap();
    let lines: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        lines
            .iter()
            .any(|l| l["host"] == "127.0.0.1" && l["decision"] == "allow"),
        "{log}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l["host"] == "denied.example.com" && l["decision"] == "deny"),
        "{log}"
    );
    let env_json = env.result("net");
    assert!(
        env_json["artifacts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["kind"] == "network"),
        "{env_json}"
    );
    env.assert_no_leftovers();
}

#[test]
fn network_none_reaches_nothing_on_the_host() {
    require_tool("python3", &["--version"], "python3");
    let env = TestEnv::new();
    let origin = Origin::start();
    let program = format!(
        r#"
import socket
for fam, addr in ((socket.AF_INET, ("127.0.0.1", {port})), (socket.AF_INET6, ("::1", {port}))):
    try:
        socket.create_connection(addr, timeout=5)
        print("REACHED", addr)
    except OSError:
        print("refused", fam)
try:
    socket.getaddrinfo("example.com", 80)
    print("DNS_RESOLVED")
except OSError:
    print("no-dns")
"#,
        port = origin.port
    );
    let (r, _) = sandboxed(
        &env,
        "none",
        &[],
        &format!("python3 -c {}", shell_quote(&program)),
    );
    assert_eq!(r.code, 0, "{r:?}");
    let out = stdout_of(&env, "none");
    assert!(out.contains("no-dns"), "{out}");
    assert_eq!(out.matches("refused").count(), 2, "{out}");
    assert!(
        !out.contains("REACHED") && !out.contains("DNS_RESOLVED"),
        "{out}"
    );
    assert_eq!(origin.hits.load(std::sync::atomic::Ordering::SeqCst), 0);
    env.assert_no_leftovers();
}

#[test]
fn sandbox_settings_are_checked_before_anything_starts() {
    let env = TestEnv::new();
    for (args, says) in [
        (
            vec!["run", "--network", "full", "--", "true"],
            "--network is a sandbox setting; add --sandbox",
        ),
        (
            vec!["run", "--max-procs", "300", "--", "true"],
            "--max-procs is a sandbox setting; add --sandbox",
        ),
        (
            vec!["run", "--sandbox", "--network", "allow:*.com", "--", "true"],
            "public suffix",
        ),
        (
            vec![
                "run",
                "--sandbox",
                "--network",
                "allow:https://x.example.com",
                "--",
                "true",
            ],
            "is a URL",
        ),
        (
            vec!["run", "--sandbox", "--hide", "/no/such/path", "--", "true"],
            "--hide `/no/such/path` cannot be used",
        ),
    ] {
        let r = env.sp(&args);
        assert_eq!(r.code, 2, "{args:?}: {r:?}");
        assert!(r.stderr.contains(says), "{args:?}: {}", r.stderr);
    }
    assert!(
        !env.home.join("runs").exists()
            || std::fs::read_dir(env.home.join("runs"))
                .unwrap()
                .next()
                .is_none()
    );
    // At its default, a sandbox setting without --sandbox is taken, with a warning naming it.
    let r = env.sp(["run", "--network", "none", "--max-tmp", "2G", "--", "true"]);
    assert_eq!(r.code, 0, "{r:?}");
    for flag in ["--network", "--max-tmp"] {
        let said = format!("warning: {flag} is a sandbox setting and is ignored without --sandbox");
        assert!(r.stderr.contains(&said), "{}", r.stderr);
    }
    env.assert_no_leftovers();
}

#[test]
fn git_hooks_and_config_of_the_workspace_never_change_outside() {
    let env = TestEnv::new();
    let git = env.work.join(".git");
    std::fs::create_dir_all(git.join("objects")).unwrap();
    std::fs::write(git.join("config"), "[core]\n").unwrap();
    let (r, v) = sandboxed(
        &env,
        "git",
        &[],
        "echo 'echo pwned' > .git/hooks/pre-commit; \
         echo '[core] hooksPath = x' >> .git/config; \
         echo obj > .git/objects/o && echo wrote-inside",
    );
    assert_eq!(r.code, 0, "{r:?}");
    // Inside, the program's own view of the git directory takes the writes; outside,
    // nothing of them arrives (only its branch would, and this repository has none).
    assert!(stdout_of(&env, "git").contains("wrote-inside"));
    assert!(!git.join("hooks/pre-commit").exists());
    assert!(!git.join("objects/o").exists());
    assert_eq!(
        std::fs::read_to_string(git.join("config")).unwrap(),
        "[core]\n"
    );
    let policy = &v["sandbox"]["policy"];
    assert_eq!(
        policy["git"]["common_dir"],
        json!(git.canonicalize().unwrap())
    );
    // The view is gone with the attempt.
    assert!(!env.attempt_dir("git", 1).join("git").exists());
    // Read-only: the request socket of nested runs, subpane's own directory when the binary
    // lives under /tmp (a checkout there), and name service files under a hidden /run.
    let ro: Vec<&str> = policy["read_only"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    let nest = env.attempt_dir("git", 1).join("nest.sock");
    assert!(ro.contains(&nest.to_str().unwrap()), "{ro:?}");
    let bin_dir = std::path::Path::new(crate::harness::BIN).parent().unwrap();
    for p in ro.iter().filter(|p| **p != nest.to_str().unwrap()) {
        assert!(
            (bin_dir.starts_with("/tmp") && *p == bin_dir.to_str().unwrap())
                || p.starts_with("/run/"),
            "{p} should not be read-only: {ro:?}"
        );
    }
    env.assert_no_leftovers();
}

#[test]
fn sandboxed_attempts_run_side_by_side() {
    let env = TestEnv::new();
    // A directory of its own: the test's directory holds the home and the tmux socket,
    // which a sandbox may not write.
    let flags = env.root.path().join("flags");
    std::fs::create_dir(&flags).unwrap();
    let flag = flags.join("go");
    let n = 8;
    for i in 0..n {
        // Each waits for the flag, which only the test creates once all of them run.
        let r = env.sp([
            "run",
            "--detach",
            "--run-id",
            &format!("par-{i}"),
            "--sandbox",
            "--writable",
            flags.to_str().unwrap(),
            "--",
            "bash",
            "-c",
            &format!(
                "echo started; while [ ! -e {} ]; do sleep 0.02; done",
                shell_quote(&flag.display().to_string())
            ),
        ]);
        assert_eq!(r.code, 0, "{r:?}");
    }
    // All of them are running sandboxed at the same time.
    crate::harness::wait_until("every sandboxed attempt to run", || {
        (0..n)
            .all(|i| stdout_of(&env, &format!("par-{i}")).contains("started"))
            .then_some(())
    });
    crate::harness::touch(&flag);
    let runs: Vec<String> = (0..n).map(|i| format!("par-{i}")).collect();
    let mut args = vec!["wait", "--json"];
    args.extend(runs.iter().map(String::as_str));
    let w = env.sp(&args);
    assert_eq!(w.code, 0, "{w:?}");
    for e in w.json().as_array().unwrap() {
        assert_eq!(e["status"], "completed", "{e}");
        assert!(e["sandbox"]["enforced"]["landlock_abi"].as_u64().is_some());
    }
    env.assert_no_leftovers();
}
